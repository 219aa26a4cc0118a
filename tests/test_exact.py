"""Exact samplers for truncated conjugate models (pymc_dp.exact).

Every model is built through ``pymc_dp.make_private`` and its plan through
``conjugate_plan(pmod.model, pmod.certification.constraints, pmod.domains)``. The draws are compared with the
truncated posterior computed *independently* here: from the raw data (counts, sums), and as a CDF
obtained by numerically integrating the closed-form log-density on a fine grid (or, for the
truncated Dirichlet, a one-dimensional integral of incomplete Beta functions, or naive rejection
from the untruncated posterior). None of these references uses the inverse CDFs, the survival-side
split, the tangent envelopes or the cell envelope of the samplers.

Statistical tests: Kolmogorov-Smirnov (one- or two-sample) at level alpha = 1e-3 each, with fixed
seeds, so this file is deterministic. There are 47 such tests; under a fresh seed a correct sampler
would fail at least one of them with probability at most 47 x 1e-3 = 4.7% (the declared failure
rate; the tests are not independent, so this union bound is conservative). Two further tests
check the power: the same draws must be *rejected* (p < 1e-3) against a wrong posterior.
"""

import json

import numpy as np
import pymc as pm
import pytest
from scipy import integrate, special, stats

import pymc_dp
from pymc_dp.exact import (
    ConjugatePlan,
    TruncatedDirichlet,
    conjugate_plan,
    truncated_beta,
    truncated_gamma,
    truncated_normal,
)
from pymc_dp.exact.samplers import BetaFamily, GammaFamily
from pymc_dp.exceptions import NotConjugateError, PrivacyError

ALPHA = 1e-3
DRAWS = 4000


# --------------------------------------------------------------------------- helpers
def grid_cdf(logpdf, lo, hi, n=200_001):
    """CDF of the density ``exp(logpdf)`` restricted to [lo, hi], by trapezoid integration."""
    x = np.linspace(lo, hi, n)
    lp = logpdf(x)
    w = np.exp(lp - np.max(lp))
    cdf = integrate.cumulative_trapezoid(w, x, initial=0.0)
    cdf /= cdf[-1]
    return lambda t: np.interp(t, x, cdf)


def beta_logpdf(a, b):
    return lambda x: (a - 1) * np.log(x) + (b - 1) * np.log1p(-x)


def gamma_logpdf(shape, rate):
    return lambda x: (shape - 1) * np.log(x) - rate * x


def normal_logpdf(mu, sigma):
    return lambda x: -0.5 * ((x - mu) / sigma) ** 2


def ks(draws, cdf):
    return stats.kstest(np.ravel(draws), cdf).pvalue


def plan_of(pmod) -> ConjugatePlan:
    return conjugate_plan(pmod.model, pmod.certification.constraints, pmod.domains)


def certified_interval(pmod, var):
    """The intersection of the certificate's interval constraints on ``var``."""
    lo, hi = -np.inf, np.inf
    for f in pmod.certificate.factors:
        for c in f.constraints:
            if c["kind"] == "interval" and c["var"] == var:
                lo = max(lo, -np.inf if c["lower"] is None else c["lower"])
                hi = min(hi, np.inf if c["upper"] is None else c["upper"])
    return lo, hi


def check_truncation(pmod, plan, draws):
    """The plan samples the certified truncation, and every draw lies inside it."""
    desc = plan.describe()["variables"]
    for f in pmod.certificate.factors:
        for c in f.constraints:
            trunc = desc[c["vars"][0] if c["kind"] == "potential" else c["var"]]["truncation"]
            if c["kind"] == "interval":
                lo, hi = certified_interval(pmod, c["var"])
                assert trunc["kind"] == "interval"
                assert (trunc["lower"] if trunc["lower"] is not None else -np.inf) == max(lo, -np.inf)
                assert (trunc["upper"] if trunc["upper"] is not None else np.inf) == hi
            else:
                assert trunc["kind"] == "ratio"
                assert min(g["bound"] for g in trunc["groups"]) <= c["bound"]
    for c in pmod.certification.constraints:
        assert np.all(c.contains(draws)), c.describe()


def make(build, data, epsilon, draws=1, **kw):
    with pm.Model() as model:
        build()
    return pymc_dp.make_private(model, epsilon=epsilon, draws=draws, data=data, **kw)


# --------------------------------------------------------------------------- Beta x Bernoulli
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


# --------------------------------------------------------------------------- naive Bayes
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


# --------------------------------------------------------------------------- Beta x Binomial
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


# --------------------------------------------------------------------------- Gamma x Poisson / Exponential
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


# --------------------------------------------------------------------------- Normal mean, known sigma
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


# --------------------------------------------------------------------------- far tails
@pytest.mark.parametrize("n", [1000, 10_000])
def test_beta_far_in_the_tail(n):
    """Posterior mean 0.95, interval [0.4, 0.6]: F(0.6) ~ 1e-143 (n=1000) or underflows (n=10^4)."""
    x = np.r_[np.ones(int(0.95 * n), int), np.zeros(n - int(0.95 * n), int)]

    def build():
        xd = pm.Data("x", x)
        p = pm.Beta("p", 1, 1)
        pm.Bernoulli("obs", p=p, observed=xd)

    pmod = make(build, {"x": pymc_dp.Binary()}, epsilon=2 * special.logit(0.6))
    plan = plan_of(pmod)
    draws = plan.sample(DRAWS, np.random.default_rng(18))["p"]
    lo, hi = certified_interval(pmod, "p")
    assert hi == pytest.approx(0.6)
    a, b = 1 + x.sum(), 1 + n - x.sum()
    # piled near the upper bound but not all equal to it
    assert np.all(draws <= hi) and np.median(hi - draws) < 10 / (a / hi - b / (1 - hi))
    assert np.mean(draws == hi) < 0.01 and len(np.unique(draws)) > 0.99 * DRAWS
    ref = grid_cdf(beta_logpdf(a, b), hi - 40 / (a / hi - b / (1 - hi)), hi)
    assert ks(draws, ref) > ALPHA


@pytest.mark.parametrize(
    "shape, rate, lo, hi, window",
    [
        (1e4, 2.0, 0.5, 2500.0, (2490.0, 2500.0)),  # far below the mode: the CDF underflows
        (5.0, 1.0, 2000.0, np.inf, (2000.0, 2030.0)),  # far above: the survival function underflows
        (50.0, 1.0, 1.0, 20.0, (1.0, 20.0)),  # lower tail, inverse CDF
        (50.0, 3.0, 10.0, 20.0, (10.0, 20.0)),  # straddles the median, with a rate
    ],
)
def test_truncated_gamma_tails(shape, rate, lo, hi, window):
    x = truncated_gamma(shape, rate, lo, hi, np.random.default_rng(19), draws=DRAWS)
    assert np.all((x >= lo) & (x <= hi)) and len(np.unique(x)) > 0.99 * DRAWS
    assert ks(x, grid_cdf(gamma_logpdf(shape, rate), *window)) > ALPHA


@pytest.mark.parametrize(
    "lo, hi, window", [(40.0, 41.0, (40.0, 40.5)), (-np.inf, -39.0, (-39.5, -39.0)), (-1.0, 4.0, (-1.0, 4.0))]
)
def test_truncated_normal_tails(lo, hi, window):
    mu, sigma = (1.0, 2.0) if lo == -1.0 else (0.0, 1.0)
    x = truncated_normal(mu, sigma, lo, hi, np.random.default_rng(20), draws=DRAWS)
    assert np.all((x >= lo) & (x <= hi)) and len(np.unique(x)) > 0.99 * DRAWS
    assert ks(x, grid_cdf(normal_logpdf(mu, sigma), *window)) > ALPHA


@pytest.mark.parametrize(
    "family, side, near, far, logpdf",
    [
        (GammaFamily(np.full(DRAWS, 50.0)), "below", 45.0, 1.0, gamma_logpdf(50.0, 1.0)),
        (BetaFamily(np.full(DRAWS, 20.0), np.full(DRAWS, 10.0)), "below", 0.55, 0.05, beta_logpdf(20.0, 10.0)),
        (BetaFamily(np.full(DRAWS, 20.0), np.full(DRAWS, 10.0)), "above", 0.75, 0.999, beta_logpdf(20.0, 10.0)),
    ],
    ids=["gamma-below", "beta-below", "beta-above"],
)
def test_tangent_rejection_is_exact_where_it_rejects_often(family, side, near, far, logpdf):
    """The tail sampler runs only where its acceptance exceeds 0.999; run it near the mode (about
    half rejected) to show the rejection step itself is exact."""
    tail = family.tail_below if side == "below" else family.tail_above
    x = tail(np.full(DRAWS, near), np.full(DRAWS, far), np.arange(DRAWS), np.random.default_rng(30))
    lo, hi = min(near, far), max(near, far)
    assert np.all((x >= lo) & (x <= hi))
    assert ks(x, grid_cdf(logpdf, lo, hi)) > ALPHA


def test_truncated_beta_above_the_mode_underflow():
    x = truncated_beta(500.0, 9500.0, 0.4, 0.7, np.random.default_rng(21), draws=DRAWS)
    assert np.all(x >= 0.4) and np.mean(x == 0.4) < 0.01
    assert ks(x, grid_cdf(beta_logpdf(500.0, 9500.0), 0.4, 0.4005)) > ALPHA


# --------------------------------------------------------------------------- Dirichlet x Categorical
def dirichlet_marginal_cdf(alpha, j, log_c, n=200_001):
    """CDF of p_j under Dirichlet(alpha), K = 3, restricted to max/min <= c.

    For fixed p_j = x the other two are ``(1 - x) t`` and ``(1 - x)(1 - t)``; the six pairwise
    ratio constraints make t an interval ``[t_lo, t_hi]``, so the marginal density is
    ``x^(a_j - 1) (1 - x)^(a_1 + a_2 - 1) [I(t_hi) - I(t_lo)]`` with I a regularised incomplete Beta
    function, integrated on a fine grid.
    """
    c = np.exp(log_c)
    a0 = alpha[j]
    a1, a2 = [alpha[k] for k in range(3) if k != j]
    x = np.linspace(1 / (1 + 2 * c), c / (c + 2), n)[1:-1]
    q = 1 - x
    t_lo = np.maximum.reduce([x / (c * q), 1 - c * x / q, np.full_like(x, 1 / (1 + c))])
    t_hi = np.maximum(np.minimum.reduce([1 - x / (c * q), c * x / q, np.full_like(x, c / (1 + c))]), t_lo)
    lower = special.betainc(a1, a2, t_lo) <= 0.5
    mass = np.where(
        lower,
        special.betainc(a1, a2, t_hi) - special.betainc(a1, a2, t_lo),
        special.betaincc(a1, a2, t_lo) - special.betaincc(a1, a2, t_hi),
    )
    with np.errstate(divide="ignore"):
        lp = (a0 - 1) * np.log(x) + (a1 + a2 - 1) * np.log(q) + np.log(np.maximum(mass, 0.0))
    w = np.exp(lp - lp.max())
    cdf = integrate.cumulative_trapezoid(w, x, initial=0.0)
    return lambda t: np.interp(t, x, cdf / cdf[-1])


def dirichlet_model(x, classes=3, hi=None):
    def build():
        xd = pm.Data("x", x)
        p = pm.Dirichlet("p", a=np.ones(classes))
        pm.Categorical("obs", p=p, observed=xd)

    return build


@pytest.fixture(scope="module")
def dirichlet_inside():
    rng = np.random.default_rng(6)
    x = rng.choice(3, 60, p=[0.25, 0.4, 0.35])
    pmod = make(dirichlet_model(x), {"x": pymc_dp.Integers(0, 2)}, epsilon=2.0)
    plan = plan_of(pmod)
    return x, pmod, plan, plan.sample(DRAWS, np.random.default_rng(22))


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


@pytest.mark.parametrize("counts, epsilon", [((540, 30, 30), 2 * np.log(1.3)), ((180, 90, 30), 1.4)])
def test_dirichlet_categorical_far_outside(counts, epsilon):
    x = np.repeat(np.arange(3), counts)
    pmod = make(dirichlet_model(x), {"x": pymc_dp.Integers(0, 2)}, epsilon=epsilon)
    plan = plan_of(pmod)
    draws = plan.sample(DRAWS, np.random.default_rng(24))
    check_truncation(pmod, plan, draws)
    (c,) = pmod.certification.constraints
    alpha = 1.0 + np.array(counts)
    # naive rejection would accept almost nothing: the region is far from the posterior's bulk
    probe = np.random.default_rng(0).dirichlet(alpha, 100_000)
    assert np.mean(np.log(probe.max(1) / probe.min(1)) <= c.bound) < 1e-4
    for j in range(3):
        assert ks(draws["p"][:, j], dirichlet_marginal_cdf(alpha, j, c.bound)) > ALPHA
    sampler = plan.parts[0].samplers[0]
    assert sampler.acceptance_bound > 0.9 and sampler.accepted / sampler.proposed > 0.9


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


def test_truncated_dirichlet_coarse_envelope_is_still_exact():
    """With a coarse envelope (tau = 0.8) about half the proposals are rejected: the law of the
    output does not depend on the cells, only the speed does."""
    alpha, log_c = np.array([541.0, 31.0, 31.0]), np.log(1.3)
    td = TruncatedDirichlet(alpha, range(3), log_c, tau=0.8)
    p = td.sample(DRAWS, np.random.default_rng(31))
    assert td.accepted / td.proposed < 0.7
    for j in range(3):
        assert ks(p[:, j], dirichlet_marginal_cdf(alpha, j, log_c)) > ALPHA


def test_truncated_dirichlet_refuses_parameters_beyond_float_range():
    # sum_S alpha = 0.03: the minimum Gamma variate would live around exp(-1000)
    with pytest.raises(ValueError, match="floating-point range"):
        TruncatedDirichlet(np.full(3, 0.01), range(3), np.log(1.5))


def test_truncated_dirichlet_far_outside_many_classes():
    """K = 5 far outside the region: the envelope's certified and measured acceptance stay high."""
    alpha = np.array([801.0, 51, 51, 51, 51])
    td = TruncatedDirichlet(alpha, range(5), 0.5)
    p = td.sample(2000, np.random.default_rng(27))
    assert np.all(np.log(p.max(1) / p.min(1)) <= 0.5 + 1e-12)
    assert td.acceptance_bound > 0.9 and td.accepted / td.proposed > 0.9


# --------------------------------------------------------------------------- the exact audit
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


# --------------------------------------------------------------------------- refusals
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


# --------------------------------------------------------------------------- plan properties
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


# --------------------------------------------------------------------------- for audits: log masses, other data
# (pymc_dp.audit reads the truncated posteriors through these; they are checked here against
# high-precision quadrature and against plans built from scratch)
from pymc_dp.exact import (  # noqa: E402
    log_beta_cdf,
    log_beta_mass,
    log_beta_sf,
    log_dirichlet_ratio_mass,
    log_gamma_mass,
    log_normal_mass,
)


def _mp_log_mass(logpdf, lo, hi):
    """``ln int_lo^hi exp(logpdf)`` with mpmath (any exponent range), split at many points."""
    mpmath = pytest.importorskip("mpmath")
    mpmath.mp.dps = 30
    pts = mpmath.linspace(mpmath.mpf(lo), mpmath.mpf(hi), 129)
    return float(mpmath.log(mpmath.quad(lambda t: mpmath.exp(logpdf(t)), pts)))


@pytest.mark.parametrize(
    "a, b, lo, hi",
    [(2.0, 3.0, 0.3, 0.4), (301.0, 1.0, 0.2, 0.6), (1.0, 5000.0, 0.4, 0.6), (3.5, 2000.0, 0.5, 0.9),
     (120.0, 80.0, 0.01, 0.99), (40.0, 900.0, 0.7, 0.71), (0.5, 0.7, 1e-9, 1e-3)],
)
def test_log_beta_mass_far_in_the_tails(a, b, lo, hi):
    import mpmath

    ref = _mp_log_mass(
        lambda t: (a - 1) * mpmath.log(t) + (b - 1) * mpmath.log(1 - t) - mpmath.log(mpmath.beta(a, b)), lo, hi
    )
    assert float(log_beta_mass(a, b, lo, hi)) == pytest.approx(ref, rel=1e-8, abs=1e-9)


def test_log_beta_cdf_and_sf_match_scipy_where_scipy_is_accurate():
    a, b = np.meshgrid([0.5, 2.0, 30.0], [0.7, 5.0, 80.0])
    for x in (0.05, 0.3, 0.5, 0.8, 0.97):
        assert np.allclose(log_beta_cdf(a, b, x), np.log(special.betainc(a, b, x)), rtol=1e-12)
        assert np.allclose(log_beta_sf(a, b, x), np.log(special.betaincc(a, b, x)), rtol=1e-12)
    # far below the scipy range: the continued fraction keeps going
    assert float(log_beta_cdf(5000.0, 1.0, 0.5)) == pytest.approx(5000 * np.log(0.5), rel=1e-12)
    assert float(log_beta_sf(1.0, 5000.0, 0.5)) == pytest.approx(5000 * np.log(0.5), rel=1e-12)


@pytest.mark.parametrize("mu, sigma, lo, hi", [(0, 1, -1, 2), (0, 1, 40, 41), (0, 1, -41, -40), (3, 0.1, -1, 1), (0, 2, -np.inf, 0.5)])
def test_log_normal_mass(mu, sigma, lo, hi):
    import mpmath

    mpmath.mp.dps = 40
    if lo >= mu:  # survival side: no cancellation in the upper tail
        ref = float(mpmath.log(mpmath.ncdf(-lo, -mu, sigma) - mpmath.ncdf(-hi, -mu, sigma)))
    else:
        ref = float(mpmath.log(mpmath.ncdf(hi, mu, sigma) - mpmath.ncdf(lo, mu, sigma)))
    assert float(log_normal_mass(mu, sigma, lo, hi)) == pytest.approx(ref, rel=1e-10)


def test_log_gamma_mass_far_in_the_tails():
    import mpmath

    for a, x, y in [(2.0, 0.5, 3.0), (500.0, 10.0, 20.0), (3.0, 400.0, 500.0)]:
        ref = _mp_log_mass(lambda t: (a - 1) * mpmath.log(t) - t - mpmath.loggamma(a), x, y)
        assert float(log_gamma_mass(a, x, y)) == pytest.approx(ref, rel=1e-8)


@pytest.mark.parametrize("a0, a1, log_c", [(1, 1, 1.0), (30, 2, 0.5), (300, 1, 2.0), (2000, 3000, 0.1), (0.5, 0.7, 3.0)])
def test_dirichlet_region_mass_two_classes_is_a_beta_interval(a0, a1, log_c):
    c = np.exp(log_c)
    ref = float(log_beta_mass(a0, a1, 1 / (1 + c), c / (1 + c)))
    assert log_dirichlet_ratio_mass([a0, a1], [0, 1], log_c) == pytest.approx(ref, rel=1e-10, abs=1e-12)


@pytest.mark.parametrize("alpha, classes", [([3.0, 1.0, 7.0], [0, 1, 2]), ([3.0, 1.0, 7.0], [0, 2]), ([2.0, 5.0, 1.5, 4.0], [0, 1, 3])])
def test_dirichlet_region_mass_matches_monte_carlo(alpha, classes):
    log_c = 1.2
    g = np.random.default_rng(40).standard_gamma(alpha, size=(2_000_000, len(alpha)))[:, classes]
    inside = np.log(g.max(axis=1) / g.min(axis=1)) <= log_c
    p = inside.mean()
    se = np.sqrt((1 - p) / (p * len(inside)))
    assert abs(log_dirichlet_ratio_mass(alpha, classes, log_c) - np.log(p)) < 4 * se


def test_truncated_dirichlet_built_lazily_draws_the_same():
    alpha = np.array([4.0, 9.0, 2.0])
    eager = TruncatedDirichlet(alpha, [0, 1, 2], 0.8).sample(500, np.random.default_rng(3))
    lazy = TruncatedDirichlet(alpha, [0, 1, 2], 0.8, build=False).sample(500, np.random.default_rng(3))
    assert np.array_equal(eager, lazy)


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
