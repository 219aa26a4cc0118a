"""pymc_dp.exact.plan: ConjugatePlan draws reproducibly, describes itself publicly, and (for audits)
is rebuilt on other data and evaluates its truncated log-density."""

import json

import numpy as np
import pymc as pm
import pytest
from scipy import integrate, special

import pymc_dp
from pymc_dp.exact import log_beta_mass
from tests.exact.helpers import certified_interval, dirichlet_model, make, plan_of


def test_same_seed_same_draws_and_different_seeds_differ(naive_bayes, dirichlet_inside):
    for plan in (naive_bayes[3], dirichlet_inside[2]):
        a = plan.sample(300, np.random.default_rng(5))
        b = plan.sample(300, np.random.default_rng(5))
        c = plan.sample(300, np.random.default_rng(6))
        assert set(a) == set(plan.variables)
        for name in plan.variables:
            np.testing.assert_array_equal(a[name], b[name])
            assert not np.array_equal(a[name], c[name])
            # draws are independent across the draw axis: no two equal
            assert len(np.unique(a[name].reshape(300, -1), axis=0)) == 300


def test_describe_is_public(naive_bayes):
    """describe() is JSON and identical for two datasets of the same design and budget."""
    _, _, pmod, plan, _ = naive_bayes
    rng = np.random.default_rng(99)
    n, m = 400, 16

    def build():
        Xd, yd = pm.Data("X", rng.integers(0, 2, (n, m))), pm.Data("y", np.ones(n, int))
        pi = pm.Beta("pi", 1, 1)
        pm.Bernoulli("cls", p=pi, observed=yd)
        theta = pm.Beta("theta", 1, 1, shape=(2, m))
        pm.Bernoulli("feat", p=theta[yd], observed=Xd)

    other = plan_of(make(build, {"X": pymc_dp.Binary(), "y": pymc_dp.Binary()}, epsilon=80.0, draws=10))
    desc = plan.describe()
    assert json.loads(json.dumps(desc)) == desc
    assert other.describe() == desc
    theta = desc["variables"]["theta"]
    assert theta["prior"] == "Beta" and theta["shape"] == [2, 16]
    assert theta["likelihood"] == [{"factor": "feat", "family": "Bernoulli", "parameter": "p", "reads_private_data": True}]


def _same_posteriors(a, b):
    pa, pb = a.posteriors(), b.posteriors()
    assert pa.keys() == pb.keys()
    for name in pa:
        for key, val in pa[name].items():
            if isinstance(val, np.ndarray):
                assert np.array_equal(val, pb[name][key]), (name, key)
            else:
                assert val == pb[name][key], (name, key)


def test_with_data_is_the_plan_built_on_that_data():
    with pm.Model() as model:
        rng = np.random.default_rng(5)
        X, y = rng.integers(0, 2, (30, 4)), rng.integers(0, 2, 30)
        Xd, yd = pm.Data("X", X), pm.Data("y", y)
        pi = pm.Beta("pi", 1, 1)
        pm.Bernoulli("cls", p=pi, observed=yd)
        theta = pm.Beta("theta", 2, 1, shape=(2, 4))
        pm.Bernoulli("feat", p=theta[yd], observed=Xd)
    pmod = pymc_dp.make_private(model, epsilon=2.0, draws=1, data={"X": pymc_dp.Binary(), "y": pymc_dp.Binary()}, ledger=None)
    plan = pmod.conjugate_plan
    before = plan.posteriors()
    X2, y2 = 1 - X, np.roll(y, 3)
    _same_posteriors(plan.with_data({"X": X2, "y": y2}), plan_of(pmod.with_data({"X": X2, "y": y2})))
    _same_posteriors(plan.with_data({"y": y2}), plan_of(pmod.with_data({"y": y2})))
    after = plan.posteriors()
    assert all(np.array_equal(before[k]["alpha"], after[k]["alpha"]) for k in before)  # unchanged
    with pytest.raises(pymc_dp.DomainError, match="shape"):
        plan.with_data({"y": y2[:-1]})
    with pytest.raises(pymc_dp.DomainError):
        plan.with_data({"y": y2 + 1})


def test_with_data_public_groups_and_reciprocal_link():
    g = np.arange(24) % 3

    def build():
        zd = pm.Data("z", np.linspace(0.2, 4.0, 24))
        gd = pm.Data("g", g)
        lam = pm.Gamma("lam", 2.0, 1.0, shape=3)
        pm.Exponential("obs", lam=lam[gd], observed=zd)

    pmod = make(build, {"z": pymc_dp.Interval(0, 5)}, epsilon=2.0, public=["g"], ledger=None)
    z2 = np.linspace(4.5, 0.1, 24)
    _same_posteriors(pmod.conjugate_plan.with_data({"z": z2}), plan_of(pmod.with_data({"z": z2})))


def test_with_data_dirichlet(dirichlet_inside):
    x, pmod, plan, _ = dirichlet_inside
    x2 = np.sort(x)[::-1].copy()
    x2[:5] = 0
    _same_posteriors(plan.with_data({"x": x2}), plan_of(pmod.with_data({"x": x2})))


def _integral(plan, name, lo, hi, n=400_001):
    t = np.linspace(lo, hi, n)
    return integrate.trapezoid(np.exp(plan.log_density({name: t})), t)


def test_log_density_integrates_to_one(coin):
    x, pmod, plan, draws = coin
    lo, hi = certified_interval(pmod, "p")
    assert _integral(plan, "p", lo, hi) == pytest.approx(1.0, rel=1e-6)
    # far outside the truncation the data pile the posterior against an end: still normalised
    far = plan.with_data({"x": np.zeros_like(x)})
    assert _integral(far, "p", lo, hi) == pytest.approx(1.0, rel=1e-6)
    assert np.all(np.isneginf(plan.log_density({"p": np.array([lo - 1e-6, hi + 1e-6])})))


def test_log_density_gamma_and_normal():
    def gamma_build():
        cd = pm.Data("c", np.r_[np.zeros(20, int), np.full(20, 10)])
        lam = pm.Gamma("lam", 2.0, 0.5)
        pm.Poisson("obs", mu=lam, observed=cd)

    pmod = make(gamma_build, {"c": pymc_dp.Integers(0, 10)}, epsilon=8.0, ledger=None)
    lo, hi = certified_interval(pmod, "lam")
    assert _integral(pmod.conjugate_plan, "lam", lo, hi) == pytest.approx(1.0, rel=1e-6)

    def normal_build():
        yd = pm.Data("y", np.full(30, 1.0))
        mu = pm.Normal("mu", 0, 1)
        pm.Normal("obs", mu=mu, sigma=0.5, observed=yd)

    pmod = make(normal_build, {"y": pymc_dp.Interval(-1, 1)}, epsilon=6.0, ledger=None)
    lo, hi = certified_interval(pmod, "mu")
    assert _integral(pmod.conjugate_plan, "mu", lo, hi) == pytest.approx(1.0, rel=1e-6)


def test_log_density_dirichlet_two_classes_is_the_truncated_beta():
    x = np.r_[np.zeros(7, int), np.ones(30, int)]
    pmod = make(dirichlet_model(x, classes=2), {"x": pymc_dp.Integers(0, 1)}, epsilon=2.0, ledger=None)
    plan = pmod.conjugate_plan
    post = plan.posteriors()["p"]
    (a0, a1), log_c = post["alpha"][0], post["log_c"][0]
    c = np.exp(log_c)
    t = np.linspace(1 / (1 + c), c / (1 + c), 101)[1:-1]
    ours = plan.log_density({"p": np.stack([t, 1 - t], axis=1)})
    ref = (a0 - 1) * np.log(t) + (a1 - 1) * np.log1p(-t) - special.betaln(a0, a1) - log_beta_mass(a0, a1, 1 / (1 + c), c / (1 + c))
    assert np.allclose(ours, ref, rtol=1e-10)
