"""The RegionContext cache is a pure speed-up: cached and uncached solves agree bit for bit."""

from __future__ import annotations

import time

import numpy as np
import pytest

from pymc_dp.masses import _exact_mass
from pymc_dp.truncate import (
    Infeasible,
    exact_log_mass,
    prior_mass,
    solve_factor,
)
from tests import models as M


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



def test_the_potential_solver_fails_closed_on_a_nan_constant(monkeypatch):
    """A constant that evaluates to NaN everywhere (a rule outside its domain) gives no region:
    ``NaN > share`` is False, and the old comparisons let such a factor through as feasible."""
    import pymc_dp.potential as P

    model, domains = M.two_param_coin()
    factors, ctx = M.setup(model, domains)
    monkeypatch.setattr(ctx, "compile_in", lambda expr, names: (lambda *values: float("nan")))
    monkeypatch.setattr(P, "search_minimum", lambda *a, **k: (float("nan"), None))
    with pytest.raises(Infeasible):
        P.solve_potential(factors[0], 0.5, ctx)


def test_a_constant_that_overflows_to_nan_beside_its_region_is_read_as_outside():
    """Campaign seed 1001770 (a negative binomial on ``mu = exp(alpha[g])``, ``alpha`` StudentT):
    the constant is NaN where ``exp`` overflows (``alpha`` about 752), and Brent's method, refining
    the region's end next to it, raised "The function value ... is NaN", which the solver misread
    as an infeasible minimum (``float`` of the message: a crash). The end is now found by bisection
    reading NaN as above the level (an infinite constant, outside: fail closed)."""
    import math

    from pymc_dp import scalar
    from tests.fuzz.harness import run_one

    def g(t):
        return t - 1.0 if t < 2.0 else math.nan

    root = scalar._crossing_root(g, 0.0, 5.0)
    assert g(root) <= 0.0 and root == pytest.approx(1.0, abs=1e-9)
    result = run_one(1001770, profile="campaign", timeout_s=600)
    assert result.status == "certified", result.message
