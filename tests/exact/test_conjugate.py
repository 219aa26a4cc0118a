"""pymc_dp.exact.conjugate: the conjugate update of every family (Beta x Bernoulli / Binomial, Gamma x
Poisson / Exponential, Normal mean with known sigma, Dirichlet x Categorical), checked by the draws
against the truncated posterior computed here from the raw counts and sums; data outside a
likelihood's support are a DomainError.

Kolmogorov-Smirnov tests at level 1e-3 with fixed seeds (tests/exact/helpers.py)."""

import numpy as np
import pymc as pm
import pytest
from scipy import special, stats

import pymc_dp
from pymc_dp.exceptions import NotConjugateError
from tests.exact.helpers import (
    ALPHA,
    DRAWS,
    beta_logpdf,
    certified_interval,
    check_truncation,
    gamma_logpdf,
    grid_cdf,
    ks,
    make,
    normal_logpdf,
    plan_of,
)


def test_beta_bernoulli(coin):
    x, pmod, plan, draws = coin
    lo, hi = certified_interval(pmod, "p")
    # certified by the oscillation: logit p spans 2 (= eps0 / span of x), placed where the
    # Beta(2, 3) prior has the most mass (the symmetric [-1, 1] of the 2L certificate has less)
    assert special.logit(hi) - special.logit(lo) == pytest.approx(2.0, rel=1e-6)
    mass = lambda a, b: stats.beta(2, 3).cdf(b) - stats.beta(2, 3).cdf(a)  # noqa: E731
    for shift in (-0.05, 0.05):
        assert mass(lo, hi) >= mass(special.expit(special.logit(lo) + shift), special.expit(special.logit(hi) + shift))
    assert mass(lo, hi) > mass(special.expit(-1.0), special.expit(1.0))
    assert plan.variables == ("p",)
    assert draws["p"].shape == (DRAWS,) and draws["p"].dtype == np.float64
    check_truncation(pmod, plan, draws)
    k = x.sum()
    assert ks(draws["p"], grid_cdf(beta_logpdf(2 + k, 3 + len(x) - k), lo, hi)) > ALPHA


def test_ks_detects_a_wrong_posterior(coin):
    # the same draws against the posterior of a neighbouring dataset (one more 1) and against the
    # untruncated posterior: the statistical test has the power to tell them apart
    x, pmod, plan, draws = coin
    lo, hi = certified_interval(pmod, "p")
    k = x.sum()
    assert ks(draws["p"], grid_cdf(beta_logpdf(2 + k + 10, 3 + len(x) - k - 10), lo, hi)) < ALPHA
    assert ks(draws["p"], stats.beta(2 + k, 3 + len(x) - k).cdf) < ALPHA


def test_beta_binomial():
    rng = np.random.default_rng(1)
    k = rng.binomial(5, 0.8, 60)

    def build():
        kd = pm.Data("k", k)
        p = pm.Beta("p", 2, 2)
        pm.Binomial("count", n=5, p=p, observed=kd)

    pmod = make(build, {"k": pymc_dp.Integers(0, 5)}, epsilon=10.0)
    plan = plan_of(pmod)
    draws = plan.sample(DRAWS, np.random.default_rng(13))
    check_truncation(pmod, plan, draws)
    lo, hi = certified_interval(pmod, "p")
    assert hi < 0.8  # the posterior (mean ~0.8) is truncated
    assert ks(draws["p"], grid_cdf(beta_logpdf(2 + k.sum(), 2 + (5 - k).sum()), lo, hi)) > ALPHA


def test_two_factors_share_one_beta_prior():
    rng = np.random.default_rng(2)
    x = rng.binomial(1, 0.85, 80)
    k = rng.binomial(2, 0.85, 80)

    def build():
        xd, kd = pm.Data("x", x), pm.Data("k", k)
        p = pm.Beta("p", 1, 1)
        pm.Bernoulli("b", p=p, observed=xd)
        pm.Binomial("bi", n=2, p=p, observed=kd)

    pmod = make(build, {"x": pymc_dp.Binary(), "k": pymc_dp.Integers(0, 2)}, epsilon=8.0)
    plan = plan_of(pmod)
    assert sorted(f["factor"] for f in plan.describe()["variables"]["p"]["likelihood"]) == ["b", "bi"]
    draws = plan.sample(DRAWS, np.random.default_rng(14))
    check_truncation(pmod, plan, draws)
    lo, hi = certified_interval(pmod, "p")  # the intersection of both factors' intervals
    succ, fail = x.sum() + k.sum(), (1 - x).sum() + (2 - k).sum()
    assert ks(draws["p"], grid_cdf(beta_logpdf(1 + succ, 1 + fail), lo, hi)) > ALPHA


def test_gamma_poisson():
    rng = np.random.default_rng(3)
    c = np.minimum(rng.poisson(3.5, 120), 4)

    def build():
        cd = pm.Data("c", c)
        lam = pm.Gamma("lam", alpha=2.0, beta=0.5)
        pm.Poisson("counts", mu=lam, observed=cd)

    # Integers(0, 4): the Poisson constant is at least ~1.7, so a per-draw budget of 6
    pmod = make(build, {"c": pymc_dp.Integers(0, 4)}, epsilon=6.0)
    plan = plan_of(pmod)
    draws = plan.sample(DRAWS, np.random.default_rng(15))
    check_truncation(pmod, plan, draws)
    lo, hi = certified_interval(pmod, "lam")
    assert 0 < lo and hi < np.inf
    ref = grid_cdf(gamma_logpdf(2.0 + c.sum(), 0.5 + len(c)), lo, hi)
    assert ks(draws["lam"], ref) > ALPHA


@pytest.mark.parametrize("prior", ["gamma", "exponential"])
def test_gamma_exponential(prior):
    rng = np.random.default_rng(4)
    x = np.minimum(rng.exponential(0.25, 100), 2.0)

    def build():
        xd = pm.Data("x", x)
        lam = pm.Gamma("lam", alpha=3.0, beta=1.5) if prior == "gamma" else pm.Exponential("lam", lam=1.5)
        pm.Exponential("wait", lam=lam, observed=xd)  # PyMC's parameter is scale = 1 / lam

    # the oscillation on [0, 2] is 2 (lam_hi - lam_lo): at eps 7 a width of 3.5 (the 2L
    # certificate's lam <= eps / 4 = 1.75), placed where the prior has the most mass, cuts the
    # posterior (mean ~4)
    pmod = make(build, {"x": pymc_dp.Interval(0.0, 2.0)}, epsilon=7.0)
    plan = plan_of(pmod)
    draws = plan.sample(DRAWS, np.random.default_rng(16))
    check_truncation(pmod, plan, draws)
    lo, hi = certified_interval(pmod, "lam")
    assert hi - max(lo, 0.0) == pytest.approx(3.5, rel=1e-6) and hi < 4.0
    shape = (3.0 if prior == "gamma" else 1.0) + len(x)
    ref = grid_cdf(gamma_logpdf(shape, 1.5 + x.sum()), max(lo, 1e-9), hi)
    assert ks(draws["lam"], ref) > ALPHA
    assert plan.describe()["variables"]["lam"]["prior"] == ("Gamma" if prior == "gamma" else "Exponential (as Gamma)")


def test_normal_mean_known_sigma():
    rng = np.random.default_rng(5)
    z = np.clip(rng.normal(0.9, 0.2, 20), 0, 1)
    sigma, m0, s0 = 0.5, 0.5, 0.2  # prior and data precisions are comparable

    def build():
        zd = pm.Data("z", z)
        mu = pm.Normal("mu", m0, s0)
        pm.Normal("obs", mu=mu, sigma=sigma, observed=zd)

    # the oscillation is (b - a) |mu interval| / sigma^2 = 4 |mu interval|: at eps 1.44 a width of
    # 0.36 around the prior mean (the 2L certificate gave [0.4, 0.6])
    pmod = make(build, {"z": pymc_dp.Interval(0.0, 1.0)}, epsilon=2 * 0.72)
    plan = plan_of(pmod)
    draws = plan.sample(DRAWS, np.random.default_rng(17))
    check_truncation(pmod, plan, draws)
    lo, hi = certified_interval(pmod, "mu")
    assert lo == pytest.approx(0.32, abs=1e-4) and hi == pytest.approx(0.68, abs=1e-4)
    prec = 1 / s0**2 + len(z) / sigma**2
    mean = (m0 / s0**2 + z.sum() / sigma**2) / prec
    assert mean > hi  # the truncation cuts the posterior
    assert ks(draws["mu"], grid_cdf(normal_logpdf(mean, prec**-0.5), lo, hi)) > ALPHA


def test_dirichlet_categorical_inside(dirichlet_inside):
    x, pmod, plan, draws = dirichlet_inside
    check_truncation(pmod, plan, draws)
    (c,) = pmod.certification.constraints
    assert plan.describe()["variables"]["p"]["truncation"]["groups"] == [
        {"rows": [0], "classes": [0, 1, 2], "bound": c.bound}
    ]
    # reference: naive rejection from the untruncated Dirichlet posterior (acceptance ~ 0.5 here)
    alpha = 1 + np.bincount(x, minlength=3)
    ref = np.random.default_rng(23).dirichlet(alpha, 60_000)
    ref = ref[np.log(ref.max(1) / ref.min(1)) <= c.bound]
    assert len(ref) > 10_000
    p = draws["p"]
    assert np.allclose(p.sum(1), 1.0)
    for k in range(3):
        assert stats.ks_2samp(p[:, k], ref[:, k]).pvalue > ALPHA
    ratio = lambda q: np.log(q.max(1) / q.min(1))  # noqa: E731
    assert stats.ks_2samp(ratio(p), ratio(ref)).pvalue > ALPHA


def test_exact_audit_holds_for_the_released_draws():
    """The closed-form truncated posteriors of tests/test_privacy_claim.py ARE what is released.

    For the worst-case neighbouring datasets (k and k+1 ones out of n), the exact draws follow the
    closed-form truncated Beta posterior whose log-ratio the audit bounds by the claimed epsilon.
    """
    from tests.test_privacy_claim import _interval, _log_trunc_beta

    n, eps = 300, 1.0
    lo, hi, claimed = _interval(n, eps)
    theta = np.linspace(lo, hi, 2001)
    ratios = [
        np.max(np.abs(_log_trunc_beta(theta, 1 + k, 1 + n - k, lo, hi) - _log_trunc_beta(theta, 2 + k, n - k, lo, hi)))
        for k in range(n)
    ]
    k = int(np.argmax(ratios))
    assert 0.9 * claimed <= ratios[k] <= claimed + 1e-9
    for ones in (k, k + 1):
        x = np.r_[np.ones(ones, int), np.zeros(n - ones, int)]

        def build():
            xd = pm.Data("x", x)
            p = pm.Beta("p", 1, 1)
            pm.Bernoulli("obs", p=p, observed=xd)

        pmod = make(build, {"x": pymc_dp.Binary()}, epsilon=eps)
        assert certified_interval(pmod, "p") == (lo, hi)
        draws = plan_of(pmod).sample(DRAWS, np.random.default_rng(28 + ones))["p"]
        closed_form = grid_cdf(lambda t: _log_trunc_beta(t, 1 + ones, 1 + n - ones, lo, hi), lo, hi)
        assert ks(draws, closed_form) > ALPHA


def test_data_outside_the_likelihood_support_is_a_domain_error():
    # the domain allows 0..5 but n = 3: the posterior is undefined. A DomainError, never the
    # NotConjugateError that method="auto" would answer with MCMC (a data-dependent choice)
    def build():
        kd = pm.Data("k", np.array([1, 2, 5]))
        p = pm.Beta("p", 1, 1)
        pm.Binomial("count", n=3, p=p, observed=kd)

    # make_private builds the plan, so the refusal comes before anything is sampled or charged
    with pytest.raises(pymc_dp.DomainError, match="'count'") as info:
        make(build, {"k": pymc_dp.Integers(0, 5)}, epsilon=20.0)
    assert not isinstance(info.value, NotConjugateError)
