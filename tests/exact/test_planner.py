"""pymc_dp.exact.planner: conjugate_plan reads a model -- gathers through private labels and public
groups, the truncation of each free RV (intervals, Dirichlet ratio groups), free RVs no factor
reads -- and refuses what is not conjugate with NotConjugateError."""

import numpy as np
import pymc as pm
import pytest
from scipy import stats

import pymc_dp
from pymc_dp.exceptions import NotConjugateError, PrivacyError
from tests.exact.helpers import (
    ALPHA,
    DRAWS,
    beta_logpdf,
    certified_interval,
    check_truncation,
    dirichlet_model,
    gamma_logpdf,
    grid_cdf,
    ks,
    make,
    plan_of,
)


@pytest.mark.parametrize("element", ["pi", (0, 0), (0, 7), (1, 3), (1, 15)])
def test_naive_bayes(naive_bayes, element):
    X, y, pmod, plan, draws = naive_bayes
    assert plan.variables == tuple(rv.name for rv in pmod.model.free_RVs)
    assert draws["theta"].shape == (DRAWS, 2, 16)
    check_truncation(pmod, plan, draws)
    if element == "pi":
        k, n, sample = y.sum(), len(y), draws["pi"]
        lo, hi = certified_interval(pmod, "pi")
    else:
        c, j = element
        k, n, sample = X[y == c, j].sum(), (y == c).sum(), draws["theta"][:, c, j]
        lo, hi = certified_interval(pmod, "theta")
    assert ks(sample, grid_cdf(beta_logpdf(1 + k, 1 + n - k), lo, hi)) > ALPHA


def test_naive_bayes_truncation_bites(naive_bayes):
    # some features' posteriors put most of their mass outside the interval: the draws pile up
    # near a bound without sitting on it
    X, y, pmod, plan, draws = naive_bayes
    lo, hi = certified_interval(pmod, "theta")
    th = draws["theta"].reshape(DRAWS, -1)
    near = np.mean((th - lo < 0.1 * (hi - lo)) | (hi - th < 0.1 * (hi - lo)), axis=0)
    assert np.max(near) > 0.5
    assert np.all(np.mean((th == lo) | (th == hi), axis=0) < 0.01)


def test_gamma_exponential_public_groups():
    """A vector of rates read through ``1 / lam[g]`` with a public group index g."""
    rng = np.random.default_rng(9)
    g = np.repeat([0, 1, 2], 50)
    x = np.minimum(rng.exponential(1 / np.array([0.5, 1.0, 3.0])[g]), 2.0)

    def build():
        xd, gd = pm.Data("x", x), pm.Data("g", g)
        lam = pm.Gamma("lam", alpha=2.0, beta=1.0, shape=3)
        pm.Exponential("wait", lam=lam[gd], observed=xd)

    pmod = make(build, {"x": pymc_dp.Interval(0.0, 2.0)}, epsilon=10.0, public=["g"])
    plan = plan_of(pmod)
    draws = plan.sample(DRAWS, np.random.default_rng(32))
    assert draws["lam"].shape == (DRAWS, 3)
    check_truncation(pmod, plan, draws)
    lo, hi = certified_interval(pmod, "lam")
    for k in range(3):
        ref = grid_cdf(gamma_logpdf(2.0 + (g == k).sum(), 1.0 + x[g == k].sum()), max(lo, 1e-9), hi)
        assert ks(draws["lam"][:, k], ref) > ALPHA


def test_dirichlet_subset_of_classes_and_two_per_record():
    """Domain Integers(0, 1) with K = 4 (classes 2, 3 are free), two observations per record."""
    rng = np.random.default_rng(7)
    x = rng.choice(2, (50, 2), p=[0.65, 0.35])
    pmod = make(dirichlet_model(x, classes=4), {"x": pymc_dp.Integers(0, 1)}, epsilon=3.0)
    plan = plan_of(pmod)
    (c,) = pmod.certification.constraints
    (group,) = plan.describe()["variables"]["p"]["truncation"]["groups"]
    assert group["classes"] == [0, 1] and group["bound"] == pytest.approx(c.bound / 2)
    draws = plan.sample(DRAWS, np.random.default_rng(25))
    check_truncation(pmod, plan, draws)
    alpha = 1.0 + np.bincount(x.ravel(), minlength=4)
    ref = np.random.default_rng(26).dirichlet(alpha, 200_000)
    ref = ref[np.abs(np.log(ref[:, 0] / ref[:, 1])) <= c.bound / 2]
    assert len(ref) > 10_000
    for k in (0, 1, 2):
        assert stats.ks_2samp(draws["p"][:, k], ref[:, k]).pvalue > ALPHA


def test_free_rv_read_by_no_factor_is_drawn_from_its_prior():
    def build():
        xd = pm.Data("x", np.array([0, 1, 1, 1]))
        p = pm.Beta("p", 1, 1)
        pm.Bernoulli("obs", p=p, observed=xd)
        pm.Gamma("g", alpha=3.0, beta=2.0, shape=2)

    pmod = make(build, {"x": pymc_dp.Binary()}, epsilon=4.0)
    plan = plan_of(pmod)
    draws = plan.sample(DRAWS, np.random.default_rng(29))
    assert draws["g"].shape == (DRAWS, 2)
    assert plan.describe()["variables"]["g"]["truncation"] is None
    assert ks(draws["g"][:, 1], stats.gamma(3.0, scale=0.5).cdf) > ALPHA


def _logistic():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(40, 3))
    X /= np.maximum(1.0, np.linalg.norm(X, axis=1, keepdims=True))
    Xd, yd = pm.Data("X", X), pm.Data("y", rng.integers(0, 2, 40))
    w = pm.Normal("w", 0, 1, shape=3)
    pm.Bernoulli("obs", logit_p=Xd @ w, observed=yd)


def _free_sigma():
    zd = pm.Data("z", np.linspace(0.1, 0.9, 30))
    mu = pm.Normal("mu", 0, 1)
    s = pm.Gamma("sigma", 5, 5)
    pm.Normal("obs", mu=mu, sigma=s, observed=zd)


def _logit_p():
    xd = pm.Data("x", np.array([0, 1, 1, 1]))
    theta = pm.Normal("theta", 0, 1)
    pm.Bernoulli("obs", logit_p=theta, observed=xd)


def _logit_p_beta():
    xd = pm.Data("x", np.array([0, 1, 1, 1]))
    theta = pm.Beta("theta", 1, 1)
    pm.Bernoulli("obs", logit_p=theta, observed=xd)


def _potential():
    xd = pm.Data("x", np.array([0, 1, 1, 1]))
    p = pm.Beta("p", 1, 1)
    pm.Bernoulli("obs", p=p, observed=xd)
    pm.Potential("shrink", -10 * (p - 0.5) ** 2)


def _hierarchical():
    xd = pm.Data("x", np.array([0, 1, 1, 1]))
    p = pm.Beta("p", 1, 1)
    pm.Bernoulli("obs", p=p, observed=xd)
    pm.Normal("z", mu=p, sigma=1.0)


REFUSALS = [
    ("logistic regression", _logistic, {"X": pymc_dp.Ball(1.0), "y": pymc_dp.Binary()}, "'w'"),
    ("free sigma", _free_sigma, {"z": pymc_dp.Interval(0, 1)}, "'sigma'"),
    ("logit_p of a Normal", _logit_p, {"x": pymc_dp.Binary()}, "'theta'"),
    ("logit_p of a Beta", _logit_p_beta, {"x": pymc_dp.Binary()}, "'theta'"),
    ("user potential", _potential, {"x": pymc_dp.Binary()}, "'shrink'"),
    ("prior reads a free RV", _hierarchical, {"x": pymc_dp.Binary()}, "'z'"),
]


@pytest.mark.parametrize("build, data, name", [r[1:] for r in REFUSALS], ids=[r[0] for r in REFUSALS])
def test_not_conjugate(build, data, name):
    pmod = make(build, data, epsilon=20.0)
    with pytest.raises(NotConjugateError) as info:
        plan_of(pmod)
    assert isinstance(info.value, PrivacyError) and isinstance(info.value, ValueError)
    message = str(info.value)
    assert name in message and 'method="mcmc"' in message


def test_dirichlet_indexed_by_a_private_label_is_refused():
    # p = P[y] with y private: Theta_L bounds ratios across the rows of P jointly
    rng = np.random.default_rng(8)

    def build():
        yd, xd = pm.Data("y", rng.integers(0, 2, 40)), pm.Data("x", rng.integers(0, 3, 40))
        P = pm.Dirichlet("P", a=np.ones((2, 3)))
        pm.Categorical("obs", p=P[yd], observed=xd)

    pmod = make(build, {"y": pymc_dp.Binary(), "x": pymc_dp.Integers(0, 2)}, epsilon=8.0)
    with pytest.raises(NotConjugateError, match="'P'"):
        plan_of(pmod)
