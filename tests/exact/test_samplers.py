"""pymc_dp.exact.samplers: the truncated Beta, Gamma and Normal samplers far in the tails (two-sided
inverse CDF, tangent rejection), and the ratio-truncated Dirichlet (its envelope, its region's mass).

Kolmogorov-Smirnov tests at level 1e-3 with fixed seeds (tests/exact/helpers.py)."""

import numpy as np
import pymc as pm
import pytest
from scipy import special

import pymc_dp
from pymc_dp.exact import (
    TruncatedDirichlet,
    log_beta_mass,
    log_dirichlet_ratio_mass,
    truncated_beta,
    truncated_gamma,
    truncated_normal,
)
from pymc_dp.exact.samplers import BetaFamily, GammaFamily
from tests.exact.helpers import (
    ALPHA,
    DRAWS,
    beta_logpdf,
    certified_interval,
    check_truncation,
    dirichlet_marginal_cdf,
    dirichlet_model,
    gamma_logpdf,
    grid_cdf,
    ks,
    make,
    normal_logpdf,
    plan_of,
)


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
