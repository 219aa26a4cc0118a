"""The budget split that keeps the most prior mass (pymc_dp.split.choose_split)."""

from __future__ import annotations

import math
import time

import numpy as np
import pytest

from pymc_dp.lift import lift, split_budget
from pymc_dp.oscillation import OscillationModel
from pymc_dp.split import BudgetSplit, InfeasibleBudget, choose_split
from pymc_dp.truncate import (
    Infeasible,
    IntervalConstraint,
    NormBallConstraint,
    PotentialConstraint,
    exact_log_mass,
    prior_mass,
    solve_factor,
)
from tests import models as M


def _reads(factors):
    return {f.name: tuple(f.reads) for f in factors}


_SPLITS: dict = {}


def split_of(build, delta, unit, **kw) -> tuple[list, object, BudgetSplit]:
    """``choose_split`` on a fresh model, memoised across tests (compilation dominates)."""
    # the oscillation solver's state is part of the key: the lipschitz_only fixture switches it off
    key = (build.__name__, delta, unit, tuple(sorted(kw.items())), OscillationModel.__dict__["build"])
    if key not in _SPLITS:
        model, domains = build()
        factors, ctx = M.setup(model, domains)
        _SPLITS[key] = (factors, ctx, choose_split(factors, delta, unit, ctx, **kw))
    return _SPLITS[key]


OPTIMISED = [
    (M.naive_bayes, 5.0, "record"),
    (M.naive_bayes, 5.0, "attribute"),
    (M.chain_net, 0.6, "record"),
    (M.chain_net, 0.6, "attribute"),
    (M.lopsided, 3.0, "record"),
]
IDS = [f"{b.__name__}-{u}" for b, _, u in OPTIMISED]


# --------------------------------------------------------------------------- better than equal
@pytest.mark.parametrize("build, delta, unit", OPTIMISED, ids=IDS)
def test_never_worse_than_equal(build, delta, unit):
    factors, ctx, split = split_of(build, delta, unit)
    equal = split_budget(delta, _reads(factors), unit)
    assert split.equal_shares == equal
    regions = {f.name: solve_factor(f, equal[f.name], ctx) for f in factors}
    equal_mass, _ = prior_mass([c for r in regions.values() for c in r.constraints], ctx)
    assert split.equal_prior_mass == equal_mass
    assert split.prior_mass >= equal_mass
    assert split.method in ("optimised", "equal")


@pytest.mark.parametrize(
    "build, delta, unit, gain",
    [(M.naive_bayes, 5.0, "record", 1e6), (M.naive_bayes, 5.0, "attribute", 1e6), (M.lopsided, 3.0, "record", 1e4)],
)
def test_strictly_better_where_the_factors_differ(build, delta, unit, gain):
    _, _, split = split_of(build, delta, unit)
    assert split.method == "optimised"
    assert split.prior_mass > gain * split.equal_prior_mass
    shares = list(split.shares.values())
    assert max(shares) > 10 * min(shares)  # visibly unequal


def test_nothing_to_gain_keeps_the_equal_split():
    # attribute unit, factors on separate containers: each gets the whole Delta already
    _, _, split = split_of(M.lopsided, 3.0, "attribute")
    assert split.method == "equal"
    assert split.shares == split.equal_shares == {"wide": 3.0, "narrow": 3.0}
    assert split.prior_mass == split.equal_prior_mass


# --------------------------------------------------------------------------- the budget is met exactly
@pytest.mark.parametrize("build, delta, unit", OPTIMISED, ids=IDS)
def test_lifts_exactly_to_delta(build, delta, unit):
    factors, _, split = split_of(build, delta, unit)
    lifted = lift(split.shares, _reads(factors), unit)
    assert lifted <= delta
    assert lifted == pytest.approx(delta, rel=1e-12, abs=0)
    # each factor's certified constant is its share: 2 * lift is the per-draw epsilon
    for name, region in split.regions.items():
        assert region.share == split.shares[name]
    assert 2 * lifted == pytest.approx(2 * delta, rel=1e-12, abs=0)


def test_attribute_unit_uses_the_containers_slack():
    # chain a(A), b(A, B), c(B, C): the equal split leaves C half used
    _, _, split = split_of(M.chain_net, 0.6, "attribute")
    L = split.shares
    assert max(L["a"] + L["b"], L["b"] + L["c"]) == pytest.approx(0.6, rel=1e-12)
    # at the optimum both A and B bind (a larger a or c would keep more mass)
    assert L["a"] + L["b"] == pytest.approx(0.6, rel=1e-6)
    assert L["b"] + L["c"] == pytest.approx(0.6, rel=1e-6)
    assert L["c"] > 0.3  # C's slack was used
    assert split.method == "optimised" and split.prior_mass > split.equal_prior_mass


# --------------------------------------------------------------------------- reported mass and regions
@pytest.mark.parametrize("build, delta, unit", OPTIMISED, ids=IDS)
def test_reported_mass_is_prior_mass_of_the_regions(build, delta, unit):
    factors, ctx, split = split_of(build, delta, unit)
    cons = [c for f in factors for c in split.regions[f.name].constraints]
    assert (split.prior_mass, split.prior_mass_method) == prior_mass(cons, ctx)
    for f in factors:
        assert split.regions[f.name].constraints == solve_factor(f, split.shares[f.name], ctx).constraints
    assert exact_log_mass(cons, ctx) == pytest.approx(math.log(split.prior_mass), rel=1e-10)


def _points_in_region(constraints, ctx, rng):
    """Prior draws projected into the region (intervals: clipped; balls: scaled), plus every
    interval's corners: the region's worst points for rules monotone in each parameter."""
    draws = {k: v.copy() for k, v in ctx.draws.items()}
    n = len(next(iter(draws.values())))
    for c in constraints:
        if isinstance(c, IntervalConstraint):
            v = draws[c.var]
            lo = -np.inf if c.lower is None else c.lower
            hi = np.inf if c.upper is None else c.upper
            v = np.clip(v, lo, hi)
            k = n // 4  # a quarter of the draws at the corners, elementwise at random
            ends = np.where(rng.random(v[:k].shape) < 0.5, lo, hi)
            v[:k] = np.where(np.isfinite(ends), ends, v[:k])
            draws[c.var] = v
        elif isinstance(c, NormBallConstraint):
            v = draws[c.var]
            norm = c.norm(v)
            scale = np.where(norm > c.radius, c.radius / np.maximum(norm, 1e-300), 1.0)
            scale[: n // 4] = c.radius / np.maximum(norm[: n // 4], 1e-300)  # on the sphere
            draws[c.var] = v * scale.reshape((-1,) + (1,) * (v.ndim - 1)) * (1 - 1e-12)
    ok = np.ones(n, bool)
    for c in constraints:
        ok &= c.contains(draws)
    return {k: v[ok] for k, v in draws.items()}


@pytest.mark.parametrize(
    "build, delta, unit",
    OPTIMISED + [(M.poisson_bernoulli, 4.0, "record"), (M.logistic, 5.0, "record")],
    ids=IDS + ["poisson_bernoulli-record", "logistic-record"],
)
def test_regions_bound_each_factor(build, delta, unit):
    factors, ctx, split = split_of(build, delta, unit)
    rng = np.random.default_rng(0)
    for f in factors:
        region = split.regions[f.name]
        if region.bound == "oscillation":  # certified by half its oscillation, not by sup L
            assert _oscillation_brute(f, region, ctx) <= 2 * region.share * (1 + 1e-9), f.name
            continue
        L = ctx.lipschitz(f)
        names = ctx.free_rvs_of(L)
        fn = ctx.compile_in(L, names)
        points = _points_in_region(region.constraints, ctx, rng)
        count = len(points[names[0]])
        assert count >= 500
        values = np.array([float(fn(*(points[k][i] for k in names))) for i in range(count)])
        assert np.max(values) <= region.share * (1 + 1e-9), f.name
        assert np.max(values) >= 0.9 * region.share  # the check reaches the region's edge


def _oscillation_brute(factor, region, ctx):
    """``sup`` over record pairs of ``max - min`` over the region of the change of one element's
    log-density, from PyMC's own logp: the free RV at 201 values of its interval (every element
    equal), every element of the observed value set to each candidate record."""
    import pymc as pm
    import pytensor

    (c,) = region.constraints
    rv = ctx.free[c.var]
    lo_s, hi_s = ctx.support(c.var)
    lo = lo_s if c.lower is None else c.lower
    hi = hi_s if c.upper is None else c.upper
    value = rv.type()
    obs = factor.observed.type()
    logp = pm.logp(factor.rv, obs)
    logp = pytensor.graph.replace.graph_replace(logp, {rv: value}, strict=False)
    fn = pytensor.function([value, obs], logp, on_unused_input="ignore")
    domain = ctx.domains[factor.observed_container]
    records = np.arange(domain.lo, domain.hi + 1) if hasattr(domain, "lo") and isinstance(domain.lo, (int, np.integer)) else np.linspace(domain.lo, domain.hi, 101)
    shape = ctx.shapes[c.var]
    obs_shape = tuple(int(s) for s in ctx.numeric(factor.observed.shape))
    thetas = np.linspace(lo, hi, 201)
    table = np.array([[float(np.asarray(fn(np.full(shape, t, dtype=rv.dtype), np.full(obs_shape, x, dtype=obs.dtype))).reshape(-1)[0])
                       for x in records] for t in thetas])  # (theta, x)
    g = table[:, :, None] - table[:, None, :]
    return float(np.max(g.max(axis=0) - g.min(axis=0)))


# --------------------------------------------------------------------------- public inputs only
@pytest.mark.parametrize("unit", ["record", "attribute"])
def test_split_depends_on_shapes_and_domains_not_on_data(unit):
    out = []
    for seed in (1, 2):
        model, domains = M.naive_bayes(n=120, m=6, seed=seed)
        factors, ctx = M.setup(model, domains)
        out.append(choose_split(factors, 3.0, unit, ctx))
        values = np.asarray(model["X"].get_value())
        out.append(values)
    (a, xa), (b, xb) = out[:2], out[2:]
    assert not np.array_equal(xa, xb)  # different data ...
    assert a.method == "optimised"
    assert a.shares == b.shares  # ... the same split, bit for bit
    assert a.prior_mass == b.prior_mass
    assert {k: r.constraints for k, r in a.regions.items()} == {k: r.constraints for k, r in b.regions.items()}


# --------------------------------------------------------------------------- minimum constants
def test_equal_split_infeasible_but_an_unequal_one_fits(lipschitz_only):
    # Poisson on Integers(0, 10) needs L >= 2.86; Delta = 4: the equal 2 + 2 does not fit (under
    # the per-record constant; its oscillation has no floor, tests/test_oscillation.py)
    factors, ctx, split = split_of(M.poisson_bernoulli, 4.0, "record")
    with pytest.raises(Infeasible):
        solve_factor(factors[0], 2.0, ctx)
    assert split.equal_prior_mass is None
    assert split.method == "optimised"
    assert split.min_shares["count"] == pytest.approx(2.8637, abs=1e-4)
    assert split.min_shares["coin"] == 0.0
    assert split.shares["count"] > split.min_shares["count"]
    assert lift(split.shares, _reads(factors), "record") == pytest.approx(4.0, rel=1e-12)
    assert 0 < split.prior_mass < 1


def test_infeasible_budget_carries_the_minimums(lipschitz_only):
    model, domains = M.poisson_bernoulli()
    factors, ctx = M.setup(model, domains)
    with pytest.raises(InfeasibleBudget) as err:
        choose_split(factors, 2.5, "record", ctx)
    assert err.value.mins["count"] == pytest.approx(2.8637, abs=1e-4)
    assert err.value.mins["coin"] == 0.0
    assert err.value.lifted >= 2.5
    assert "2.86" in str(err.value)
    # the equal split alone is refused too, with the same minimums
    with pytest.raises(InfeasibleBudget) as err2:
        choose_split(factors, 4.0, "record", ctx, optimise=False)
    assert err2.value.mins == err.value.mins
    # one factor: its own minimum
    with pytest.raises(InfeasibleBudget) as err3:
        choose_split(factors[:1], 2.0, "record", ctx)
    assert err3.value.mins == {"count": err.value.mins["count"]}


# --------------------------------------------------------------------------- equal, one factor
def test_optimise_false_is_todays_equal_split():
    model, domains = M.chain_net()
    factors, ctx = M.setup(model, domains)
    split = choose_split(factors, 0.6, "attribute", ctx, optimise=False)
    equal = split_budget(0.6, _reads(factors), "attribute")
    assert split.method == "equal" and split.shares == equal == split.equal_shares
    assert {k: r.constraints for k, r in split.regions.items()} == {
        f.name: solve_factor(f, equal[f.name], ctx).constraints for f in factors
    }
    assert split.prior_mass == split.equal_prior_mass


def test_one_factor_is_instant():
    model, domains = M.logistic()
    factors, ctx = M.setup(model, domains)
    t0 = time.perf_counter()
    split = choose_split(factors, 5.0, "record", ctx)
    assert time.perf_counter() - t0 < 2.0
    assert split.method == "equal" and split.shares == {"obs": 5.0} and split.evaluations == 1
    assert split.prior_mass_method == "exact"


def test_monte_carlo_objective():
    # a Potential factor (no exact mass): the objective is the Monte Carlo mass on the public draws
    # (gammaln of a parameter: an operation the box solver does not bound, so the Potential path)
    import pymc as pm
    import pytensor.tensor as pt

    import pymc_dp

    rng = np.random.default_rng(0)
    with pm.Model() as model:
        xd = pm.Data("x", rng.integers(0, 2, 30))
        zd = pm.Data("z", rng.integers(0, 2, 30))
        a = pm.Normal("a", 0, 1)
        b = pm.Normal("b", 0, 1)
        p = pm.Beta("p", 1, 1)
        pm.Bernoulli("obs", p=pm.math.sigmoid(pt.gammaln(1.0 + a**2) + b), observed=xd)
        pm.Bernoulli("coin", p=p, observed=zd)
    factors, ctx = M.setup(model, {"x": pymc_dp.Binary(), "z": pymc_dp.Binary()})
    split = choose_split(factors, 1.0, "record", ctx, max_evals=40)
    assert split.regions["obs"].solver == "potential"
    assert split.prior_mass_method.startswith("monte carlo")
    assert split.prior_mass >= split.equal_prior_mass
    assert split.evaluations <= 40
    assert lift(split.shares, _reads(factors), "record") == pytest.approx(1.0, rel=1e-12)
    assert isinstance(split.regions["obs"].constraints[0], PotentialConstraint)


# --------------------------------------------------------------------------- brute force
def test_matches_a_brute_force_grid():
    """Two factors on separate variables, exact masses: scan the split on a fine grid."""
    factors, ctx, split = split_of(M.lopsided, 3.0, "record")
    delta = 3.0
    wide, narrow = factors

    def log_mass(share_wide):
        regions = [solve_factor(wide, share_wide, ctx), solve_factor(narrow, delta - share_wide, ctx)]
        return exact_log_mass([c for r in regions for c in r.constraints], ctx)

    grid = np.linspace(0.002, 0.998, 499) * delta
    values = np.array([log_mass(s) for s in grid])
    i = int(np.argmax(values))
    fine = np.linspace(grid[max(i - 1, 0)], grid[min(i + 1, len(grid) - 1)], 101)
    best = max(values[i], max(log_mass(s) for s in fine))
    got = math.log(split.prior_mass)
    assert got >= best - 1e-3 * abs(best)
    assert got <= best + 1e-3 * abs(best)  # the grid is fine enough to see the optimum
    assert split.shares["wide"] == pytest.approx(fine[np.argmax([log_mass(s) for s in fine])], rel=2e-2)


def test_small_budget_finds_no_false_minimum():
    # at a share of 1e-12 the interval solver of a 16-element factor fails on rounding and
    # solve_factor falls back to a Potential whose "minimum" is over prior draws (16.8): the
    # probe must not take that for a minimum constant
    model, domains = M.naive_bayes(n=50, m=16)
    factors, ctx = M.setup(model, domains)
    split = choose_split(factors, 1e-3, "record", ctx)
    assert split.min_shares == {"cls": 0.0, "feat": 0.0}
    assert split.method == "optimised" and split.prior_mass > split.equal_prior_mass
    assert lift(split.shares, _reads(factors), "record") == pytest.approx(1e-3, rel=1e-12)
    assert all(r.solver == "interval" for r in split.regions.values())
