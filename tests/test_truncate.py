"""The RegionContext cache is a pure speed-up: cached and uncached solves agree bit for bit."""

from __future__ import annotations

import math
import time

from tests import models as M
import numpy as np
import pytest

from pymc_dp.truncate import (
    Infeasible,
    _exact_mass,
    exact_log_mass,
    prior_mass,
    solve_factor,
)


def _solve(factor, share, ctx):
    try:
        region = solve_factor(factor, share, ctx)
    except Infeasible as err:
        return ("infeasible", err.factor, err.min_lipschitz)
    return (region.solver, region.share, region.min_lipschitz, tuple(region.constraints))


CASES = {
    "naive_bayes": (M.naive_bayes, {"cls": (0.3, 2.5), "feat": (0.7, 6.0)}),
    "poisson": (M.poisson_bernoulli, {"count": (1.0, 3.5), "coin": (0.4,)}),
    "location_scale": (M.normal_location_scale, {"obs": (0.5, 3.0)}),
    "logistic": (M.logistic, {"obs": (0.8, 4.0)}),
    "linear": (M.linear, {"obs": (1.5,)}),
    "potential": (M.two_param_coin, {"obs": (0.5,)}),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_cached_solves_equal_uncached(case):
    build, shares = CASES[case]
    model, domains = build()
    factors, cached = M.setup(model, domains, cache=True)
    _, fresh = M.setup(model, domains, cache=False)
    fresh.free, fresh.draws = cached.free, cached.draws  # same model objects, same public draws
    for f in factors:
        for share in shares[f.name]:
            ref = _solve(f, share, fresh)
            for _ in range(2):  # the second call is served from the cache
                assert _solve(f, share, cached) == ref
            if ref[0] != "infeasible":
                cons = list(ref[3])
                got = prior_mass(list(solve_factor(f, share, cached).constraints), cached)
                assert got == prior_mass(cons, fresh)


def test_cache_makes_repeated_solves_cheap():
    model, domains = M.naive_bayes()
    factors, ctx = M.setup(model, domains)
    feat = next(f for f in factors if f.name == "feat")
    solve_factor(feat, 5.0, ctx)  # compiles
    t0 = time.perf_counter()
    for share in np.linspace(3.0, 7.0, 10):
        region = solve_factor(feat, float(share), ctx)
        prior_mass(region.constraints, ctx)
    assert (time.perf_counter() - t0) / 10 < 0.1


def test_exact_log_mass_is_the_log_of_exact_mass():
    model, domains = M.naive_bayes()
    factors, ctx = M.setup(model, domains)
    cons = [c for f in factors for c in solve_factor(f, 4.0, ctx).constraints]
    mass = _exact_mass(cons, ctx)
    assert 0 < mass < 1e-10
    assert exact_log_mass(cons, ctx) == pytest.approx(np.log(mass), rel=1e-12)


# --------------------------------------------------------------------------- the affine solver's prior mass
def _affine_ctx(d, box=True, scale=2.5):
    import pymc as pm

    import pymc_dp

    rng = np.random.default_rng(0)
    with pm.Model() as model:
        Xd = pm.Data("X", rng.uniform(-1, 1, (20, d)))
        yd = pm.Data("y", rng.integers(0, 2, 20))
        b = pm.Normal("b", 0.0, scale)
        w = pm.Normal("w", 0.0, scale, shape=d)
        pm.Bernoulli("obs", logit_p=b + Xd @ w, observed=yd)
    domains = {"X": pymc_dp.Box(-1.0, 1.0) if box else pymc_dp.Ball(1.0), "y": pymc_dp.Binary()}
    return M.setup(model, domains)


@pytest.mark.parametrize("d", [1, 2, 3])
def test_affine_mass_is_the_exact_mass_of_the_ball_and_the_interval(d):
    """The affine solver's log mass (importance-sampled ball, exact interval) against closed forms:
    an l2 ball of radius rho under iid N(0, s^2) in d dimensions has mass P(chi2_d <= rho^2 /
    s^2); a weighted l1 ball in one dimension is an interval; in more, 10^6 prior draws."""
    from scipy import stats

    from pymc_dp.truncate import IntervalConstraint, NormBallConstraint, _AffineMass

    _, ctx = _affine_ctx(d, box=False)
    ball = _AffineMass.build(ctx, "w", ["b"], 1.0, None)
    _, ctx_box = _affine_ctx(d, box=True)
    l1 = _AffineMass.build(ctx_box, "w", ["b"], 1.0, (1.0,) * d)
    rng = np.random.default_rng(1)
    w = rng.normal(0.0, 2.5, (1_000_000, d))
    for rho in (0.01, 0.5, 3.0):
        interval = IntervalConstraint("b", -0.2, 0.3)
        exact_b = math.log(stats.norm.cdf(0.3, 0, 2.5) - stats.norm.cdf(-0.2, 0, 2.5))
        got = ball([NormBallConstraint("w", rho, None), interval])
        assert got == pytest.approx(math.log(stats.chi2.cdf(rho**2 / 2.5**2, d)) + exact_b, abs=0.05)
        got = l1([NormBallConstraint("w", rho, (1.0,) * d), interval])
        if d == 1:
            truth = math.log(stats.norm.cdf(rho, 0, 2.5) - stats.norm.cdf(-rho, 0, 2.5))
        else:
            inside = np.mean(np.abs(w).sum(axis=1) <= rho)
            if inside * len(w) < 1000:
                continue  # too few prior draws inside to check against (that is the point)
            truth = math.log(inside)
        assert got - exact_b == pytest.approx(truth, abs=0.05)


def test_the_affine_split_of_the_logit_budget_follows_the_mass():
    """Logistic regression on Box(-1, 1) rows, d = 3: the region is |b| <= B, sum |w_i| <= r with
    B + r = L. For L small against the prior scale the densities are flat and the mass goes as
    B r^3, largest at B = L / 4. Counting prior draws gave 0 for every split, and the intercept
    kept the first candidate's 5%."""
    from pymc_dp.truncate import NormBallConstraint, solve_affine

    factors, ctx = _affine_ctx(3, box=True)
    (factor,) = factors
    region = solve_affine(factor, 0.5, ctx)
    ball = next(c for c in region.constraints if isinstance(c, NormBallConstraint))
    b = next(c for c in region.constraints if c.var == "b")
    B = 0.5 * (b.upper - b.lower)
    assert B / (B + ball.radius) == pytest.approx(0.25, abs=0.026)
