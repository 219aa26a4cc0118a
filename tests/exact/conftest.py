"""Models and their draws shared by the tests of pymc_dp.exact (tests/exact/helpers.py: the references)."""

import numpy as np
import pymc as pm
import pytest

import pymc_dp
from tests.exact.helpers import DRAWS, dirichlet_model, make, plan_of


@pytest.fixture(scope="module")
def coin():
    x = np.r_[np.ones(150, int), np.zeros(50, int)]

    def build():
        xd = pm.Data("x", x)
        p = pm.Beta("p", 2.0, 3.0)
        pm.Bernoulli("obs", p=p, observed=xd)

    pmod = make(build, {"x": pymc_dp.Binary()}, epsilon=2.0)
    plan = plan_of(pmod)
    return x, pmod, plan, plan.sample(DRAWS, np.random.default_rng(11))


@pytest.fixture(scope="module")
def naive_bayes():
    rng = np.random.default_rng(0)
    n, m = 400, 16
    y = rng.integers(0, 2, n)
    X = (rng.random((n, m)) < rng.uniform(0.1, 0.9, (2, m))[y]).astype(int)

    def build():
        Xd, yd = pm.Data("X", X), pm.Data("y", y)
        pi = pm.Beta("pi", 1, 1)
        pm.Bernoulli("cls", p=pi, observed=yd)
        theta = pm.Beta("theta", 1, 1, shape=(2, m))
        pm.Bernoulli("feat", p=theta[yd], observed=Xd)

    pmod = make(build, {"X": pymc_dp.Binary(), "y": pymc_dp.Binary()}, epsilon=80.0, draws=10)
    plan = plan_of(pmod)
    return X, y, pmod, plan, plan.sample(DRAWS, np.random.default_rng(12))


@pytest.fixture(scope="module")
def dirichlet_inside():
    rng = np.random.default_rng(6)
    x = rng.choice(3, 60, p=[0.25, 0.4, 0.35])
    pmod = make(dirichlet_model(x), {"x": pymc_dp.Integers(0, 2)}, epsilon=2.0)
    plan = plan_of(pmod)
    return x, pmod, plan, plan.sample(DRAWS, np.random.default_rng(22))
