"""Small models shared by the tests: each builder returns ``(model, domains)``.

Sizes, seeds and optional Deterministics are keyword arguments, so that every test file builds
its models from one definition.
"""

from __future__ import annotations

import numpy as np
import pymc as pm
import pytensor.tensor as pt

import pymc_dp
from pymc_dp.factors import find_factors
from pymc_dp.truncate import RegionContext, prior_draws

#: as in pymc_dp.core (public seed, number of prior draws)
PRIOR_SEED = 20140901
PRIOR_DRAWS = 4000


def naive_bayes(n=200, m=16, seed=0):
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 2, n)
    X = (rng.random((n, m)) < rng.uniform(0.2, 0.8, (2, m))[y]).astype(int)
    with pm.Model() as model:
        Xd, yd = pm.Data("X", X), pm.Data("y", y)
        pi = pm.Beta("pi", 1, 1)
        pm.Bernoulli("cls", p=pi, observed=yd)
        theta = pm.Beta("theta", 1, 1, shape=(2, m))
        pm.Bernoulli("feat", p=theta[yd], observed=Xd)
    return model, {"X": pymc_dp.Binary(), "y": pymc_dp.Binary()}


def ball_rows(rng, n, d):
    """``n`` rows in the unit ball (rows outside it are scaled onto it)."""
    X = rng.normal(size=(n, d))
    return X / np.maximum(1.0, np.linalg.norm(X, axis=1, keepdims=True))


def coin(n=30, seed=0):
    rng = np.random.default_rng(seed)
    with pm.Model() as model:
        xd = pm.Data("x", rng.integers(0, 2, n))
        p = pm.Beta("p", 1, 1)
        pm.Bernoulli("obs", p=p, observed=xd)
    return model, {"x": pymc_dp.Binary()}


def dirichlet_categorical(n=40, seed=0):
    with pm.Model() as model:
        xd = pm.Data("x", np.random.default_rng(seed).integers(0, 3, n))
        p = pm.Dirichlet("p", a=np.ones(3))
        pm.Categorical("obs", p=p, observed=xd)
    return model, {"x": pymc_dp.Integers(0, 2)}


def chain_net(n=30, seed=0):
    rng = np.random.default_rng(seed)
    A, B, C = (rng.integers(0, 2, n) for _ in range(3))
    with pm.Model() as model:
        Ad, Bd, Cd = pm.Data("A", A), pm.Data("B", B), pm.Data("C", C)
        pA = pm.Beta("pA", 1, 1)
        pB = pm.Beta("pB", 1, 1, shape=2)
        pC = pm.Beta("pC", 1, 1, shape=2)
        pm.Bernoulli("a", p=pA, observed=Ad)
        pm.Bernoulli("b", p=pB[Ad], observed=Bd)
        pm.Bernoulli("c", p=pC[Bd], observed=Cd)
    return model, {k: pymc_dp.Binary() for k in "ABC"}


def poisson_bernoulli(n=50, seed=0, hi=10):
    """A Poisson count on Integers(0, hi) (minimum constant 2.86 for hi=10) and a coin."""
    rng = np.random.default_rng(seed)
    with pm.Model() as model:
        cd = pm.Data("c", rng.integers(0, hi + 1, n))
        xd = pm.Data("x", rng.integers(0, 2, n))
        lam = pm.Gamma("lam", 2.0, 0.5)
        p = pm.Beta("p", 1, 1)
        pm.Poisson("count", mu=lam, observed=cd)
        pm.Bernoulli("coin", p=p, observed=xd)
    return model, {"c": pymc_dp.Integers(0, hi), "x": pymc_dp.Binary()}


def lopsided(n=40, seed=0):
    """Two coins whose prior masses answer their shares very differently: one scalar Beta(1, 1)
    and a table of 24 Beta(30, 30) elements concentrated near 1/2."""
    rng = np.random.default_rng(seed)
    with pm.Model() as model:
        xd = pm.Data("x", rng.integers(0, 2, n))
        yd = pm.Data("y", rng.integers(0, 2, (n, 24)))
        p = pm.Beta("p", 1, 1)
        q = pm.Beta("q", 30, 30, shape=24)
        pm.Bernoulli("wide", p=p, observed=xd)
        pm.Bernoulli("narrow", p=q, observed=yd)
    return model, {"x": pymc_dp.Binary(), "y": pymc_dp.Binary()}


def normal_location_scale(n=40, seed=0):
    rng = np.random.default_rng(seed)
    with pm.Model() as model:
        yd = pm.Data("y", rng.uniform(-1, 1, n))
        mu = pm.Normal("mu", 0, 1)
        sigma = pm.HalfNormal("sigma", 1)
        pm.Normal("obs", mu=mu, sigma=sigma, observed=yd)
    return model, {"y": pymc_dp.Interval(-1, 1)}


def logistic(n=200, d=3, seed=0, w_norm=False):
    """Logistic regression with rows in Ball(1); ``w_norm`` adds a Deterministic of w only."""
    rng = np.random.default_rng(seed)
    X = ball_rows(rng, n, d)
    y = (rng.random(n) < 1 / (1 + np.exp(-X @ np.resize([2.0, -1.0, 1.0], d)))).astype(int)
    with pm.Model() as model:
        Xd, yd = pm.Data("X", X), pm.Data("y", y)
        w = pm.Normal("w", 0, 2, shape=d)
        b = pm.Normal("b", 0, 1)
        if w_norm:
            pm.Deterministic("w_norm", pm.math.sqrt(pm.math.sum(w**2)))
        pm.Bernoulli("obs", logit_p=Xd @ w + b, observed=yd)
    return model, {"X": pymc_dp.Ball(1.0), "y": pymc_dp.Binary()}


def linear(n=100, d=3, seed=0, w_norm=False, fitted=False):
    """Linear regression with rows in Ball(1), y in [-1, 1] and a free sigma. ``w_norm`` adds a
    Deterministic of w only (released); ``fitted`` one that reads the data (never released)."""
    rng = np.random.default_rng(seed)
    X = ball_rows(rng, n, d)
    y = np.clip(X @ np.resize([0.5, -0.3, 0.2], d) + 0.1 * rng.normal(size=n), -1, 1)
    with pm.Model() as model:
        Xd, yd = pm.Data("X", X), pm.Data("y", y)
        w = pm.Normal("w", 0, 1, shape=d)
        b = pm.Normal("b", 0, 1)
        sigma = pm.HalfNormal("sigma", 1)
        if w_norm:
            pm.Deterministic("w_norm", pm.math.sqrt(pm.math.sum(w**2)))
        if fitted:
            pm.Deterministic("fitted", Xd @ w + b)
        pm.Normal("obs", mu=Xd @ w + b, sigma=sigma, observed=yd)
    return model, {"X": pymc_dp.Ball(1.0), "y": pymc_dp.Interval(-1, 1)}


def two_param_coin(n=30, seed=0):
    """``p = sigmoid(sin(a) + b)``: two free RVs that no interval or box solver reads (``sin``
    has no range rule): the Potential fallback. (``sigmoid(a + b)`` is now a box.)"""
    rng = np.random.default_rng(seed)
    with pm.Model() as model:
        xd = pm.Data("x", rng.integers(0, 2, n))
        a = pm.Normal("a", 0, 1)
        b = pm.Normal("b", 0, 1)
        pm.Bernoulli("obs", p=pm.math.sigmoid(pt.sin(a) + b), observed=xd)
    return model, {"x": pymc_dp.Binary()}


def setup(model, domains, *, cache=True, draws=PRIOR_DRAWS):
    """The private factors and a RegionContext, as PrivateModel builds them."""
    private = {v: v.name for v in model.data_vars if v.name in domains}
    factors = [f for f in find_factors(model, private, domains) if f.is_private]
    return factors, RegionContext(model, domains, prior_draws(model, draws, PRIOR_SEED), cache=cache)
