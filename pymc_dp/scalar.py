"""The interval solver: the sublevel set of a factor's constant in its one free RV.

When a factor reads exactly one scalar-support free RV ``v``, elementwise, its per-record
constant with every element of ``v`` at ``t`` is a function ``f(t)`` of one variable;
:func:`solve_scalar` truncates every element of ``v`` to the connected sublevel set
``{f <= share}`` around f's minimiser (the piece of most prior mass when the set has several),
then verifies the sup of the per-record constant over the resulting box: at both ends
elementwise, over the hull for an indexed table, and on a dense grid. ``f`` is the rule in NumPy
when the parameters allow (:func:`_numpy_rule`), else the rule's compiled PyTensor graph.
Layering: imports :mod:`pymc_dp.constraints`, :mod:`pymc_dp.region_context` and
:mod:`pymc_dp.masses` (the prior mass of each piece), and the factors and rules below them.
"""

from __future__ import annotations

import math
from typing import Callable

import numpy as np
import pytensor
import pytensor.tensor as pt
from pytensor.graph.traversal import ancestors
from pytensor.tensor.basic import Alloc
from pytensor.tensor.elemwise import DimShuffle, Elemwise
from pytensor.tensor.shape import Reshape
from pytensor.tensor.subtensor import AdvancedSubtensor, AdvancedSubtensor1, Subtensor
from scipy import optimize, special

from pymc_dp.constraints import TOL, FactorRegion, Infeasible, IntervalConstraint
from pymc_dp.factors import LINK_SPACES, Factor, IndexForm, LinkForm, PointForm
from pymc_dp.masses import box_log_mass
from pymc_dp.region_context import EVAL_MODE, RegionContext, numeric, observed_shape, plain_free_rv
from pymc_dp.rules import NP, Bounds, element_lipschitz

__all__ = ["solve_scalar"]


def solve_scalar(factor: Factor, share: float, ctx: RegionContext) -> FactorRegion | None:
    """The factor reads exactly one scalar-support free RV ``v``.

    ``f(t) = L_j(v = t everywhere)`` is the per-record constant when every element of ``v`` is
    t; the truncation is the connected sublevel set ``{f <= share}`` around f's minimiser,
    applied to every element of ``v``. For rules quasi-convex in the parameter (all exponential
    families in their natural parameter; location families in the distance) the sup of the
    per-record constant over the resulting box is at its ends, which is verified elementwise.
    """
    L = ctx.lipschitz(factor)
    names = ctx.free_rvs_of(L)
    if len(names) != 1:
        return None
    (name,) = names
    lo_s, hi_s = ctx.support(name)
    if math.isnan(lo_s):
        return None
    if not _reads_elementwise(factor, ctx.free[name], ctx):
        return None  # elements of v mix (z[0] - 2 z[1], softmax(z), ...): the all-equal scan would not bound the box
    shape = ctx.shapes[name]
    dtype = ctx.free[name].dtype
    direct = ctx.cached(ctx.key(factor, "numpy_rule", name), lambda: _numpy_rule(factor, name, ctx))
    if direct is not None:  # the rule in NumPy: no graph to compile for this factor
        def fn(v):
            return direct(float(np.asarray(v).reshape(-1)[0]))[0]

        def fn_elem(v):
            return direct(float(np.asarray(v).reshape(-1)[0]))[1]
    else:
        fn = ctx.compile_in(L, [name])
        per_elem = ctx.cached(
            ctx.key(factor, "per_element"),
            lambda: factor.lipschitz_per_element(ctx.domains) + pt.zeros_like(factor.observed, dtype="float64"),
        )
        fn_elem = ctx.compile_in(per_elem, [name])
    memo = ctx.cached(ctx.key(factor, "f", name), dict)  # t -> f(t): f does not depend on the share

    def f(t):
        try:
            return memo[t]
        except KeyError:
            value = memo[t] = float(fn(np.full(shape, t, dtype=dtype)))
            return value

    grid = _grid_for_support(lo_s, hi_s)

    def grid_values():
        if direct is not None:  # the whole grid in one vectorised call
            values = direct.many(grid)
            memo.update(zip((float(t) for t in grid), (float(v) for v in values)))
            return np.asarray(values, dtype=float)
        return np.array([f(t) for t in grid])

    values = ctx.cached(ctx.key(factor, "grid_values", name), grid_values)  # share-independent
    try:
        t_lo, t_hi, f_min = _sublevel_interval(f, grid, share, values)
    except ValueError as err:
        raise Infeasible(factor.name, float(err.args[0])) from None
    lower = lo_s if t_lo is None else t_lo
    upper = hi_s if t_hi is None else t_hi
    pieces = _sublevel_components(f, grid, share, values)
    if len(pieces) > 1:  # not quasi-convex: keep the piece with the most prior mass
        def piece_mass(piece):
            a = lo_s if piece[0] is None else piece[0]
            b = hi_s if piece[1] is None else piece[1]
            return box_log_mass({name: (np.float64(a), np.float64(b))}, ctx)

        best = max(pieces, key=piece_mass)
        if piece_mass(best) > piece_mass((t_lo, t_hi)):
            lower = lo_s if best[0] is None else best[0]
            upper = hi_s if best[1] is None else best[1]

    def sup_over_box(lo_t, hi_t):
        ends = [t for t in (lo_t, hi_t) if math.isfinite(t) and lo_s < t < hi_s]
        if not ends:
            return f_min
        elems = np.max([np.asarray(fn_elem(np.full(shape, t, dtype=dtype))) for t in ends], axis=0)
        per_record = elems.reshape(elems.shape[0], -1).sum(axis=1) if elems.ndim > 1 else elems
        value = float(np.max(per_record))
        if any(isinstance(form, IndexForm) and form.table is ctx.free[name] for form in _forms(factor)):
            value = max(value, _hull_lipschitz(factor, name, np.float64(max(lo_t, lo_s)), np.float64(min(hi_t, hi_s)), ctx))
        inner = np.linspace(max(lo_t, -1e6), min(hi_t, 1e6), 101)[1:-1] if all(map(math.isfinite, (lo_t, hi_t))) else []
        if len(inner) and direct is not None:
            return max(value, float(np.max(direct.many(inner))))
        for t in inner:
            value = max(value, f(t))
        return value

    # shrink towards the minimiser until the verified sup fits (a no-op for the usual rules)
    for _ in range(60):
        if sup_over_box(lower, upper) <= share * (1 + TOL):
            break
        mid = _argmin_between(f, lower, upper)
        lower = lower if not math.isfinite(lower) else mid + (lower - mid) * 0.999
        upper = upper if not math.isfinite(upper) else mid + (upper - mid) * 0.999
    else:  # pragma: no cover - would be a rule bug
        return None
    constraint = IntervalConstraint(
        name,
        None if not math.isfinite(lower) or lower <= lo_s else float(lower),
        None if not math.isfinite(upper) or upper >= hi_s else float(upper),
    )
    # the whole support fits (a Student-t location: its constant is bounded): no truncation
    constraints = [] if constraint.lower is None and constraint.upper is None else [constraint]
    return FactorRegion(factor, share, constraints, "interval", f_min)


# --------------------------------------------------------------------------- sublevel sets
def _grid_for_support(lo: float, hi: float, center: float | None = None, n: int = 801) -> np.ndarray:
    if lo == 0.0 and hi == 1.0:
        z = np.linspace(-36, 36, n)
        return special.expit(z)
    if lo == 0.0 and hi == math.inf:
        return np.exp(np.linspace(-30, 30, n))
    if lo == -math.inf and hi == math.inf:
        z = np.linspace(-25, 25, n)
        return np.sign(z) * np.expm1(np.abs(z))
    if math.isfinite(lo) and math.isfinite(hi):
        z = np.linspace(-36, 36, n)
        return lo + (hi - lo) * special.expit(z)
    if math.isfinite(lo):
        return lo + np.exp(np.linspace(-30, 30, n))
    return hi - np.exp(np.linspace(-30, 30, n))[::-1]


def _sublevel_interval(f: Callable[[float], float], grid: np.ndarray, level: float, values: np.ndarray | None = None):
    """``[t_lo, t_hi]`` around the minimiser of f with ``f <= level``; None ends are unbounded.

    Returns ``(t_lo, t_hi, f_min)``; ``t_lo is None`` means the set reaches the grid's lower end.
    Raises ValueError when ``min f > level``. ``values``: f on the grid, when already known.
    """
    if values is None:
        values = np.array([f(t) for t in grid])
    values = np.where(np.isfinite(values), values, np.inf)
    i = int(np.argmin(values))
    a, b = grid[max(i - 1, 0)], grid[min(i + 1, len(grid) - 1)]
    t_min, f_min = grid[i], values[i]
    if a < b:
        res = optimize.minimize_scalar(f, bounds=(a, b), method="bounded", options={"xatol": 1e-12})
        if res.fun < f_min:
            t_min, f_min = float(res.x), float(res.fun)
    if f_min > level:
        raise ValueError(f_min)

    def crossing(direction):
        j = i
        while 0 <= j + direction < len(grid):
            j += direction
            if values[j] > level:
                inner, outer = (grid[j - direction] if j - direction != i else t_min), grid[j]
                root = _crossing_root(lambda t: f(t) - level, inner, outer)
                # step inside until f <= level holds exactly
                for _ in range(60):
                    if f(root) <= level:
                        break
                    root = root + (t_min - root) * 1e-9
                return float(root)
        return None

    return crossing(-1), crossing(+1), f_min


def _crossing_root(g: Callable[[float], float], inner: float, outer: float) -> float:
    """A point between ``inner`` (``g <= 0``) and ``outer`` (``g > 0``) where ``g`` crosses 0,
    by Brent's method; where ``g`` is NaN somewhere between (an overflow in the constant, e.g.
    ``exp(752)``: campaign seed 1001770), by bisection reading NaN as above the level (an
    infinite constant: outside the region, fail closed). The point returned has ``g <= 0`` up
    to Brent's tolerance; the caller steps inside until it holds exactly."""
    try:
        return optimize.brentq(g, inner, outer, xtol=1e-14, rtol=1e-14)
    except ValueError:  # "The function value at x=... is NaN": scipy cannot continue
        lo, hi = inner, outer
        for _ in range(200):
            mid = 0.5 * (lo + hi)
            if mid in (lo, hi):
                break
            if g(mid) <= 0:  # NaN compares False: above the level
                lo = mid
            else:
                hi = mid
        return lo


def _sublevel_components(f: Callable[[float], float], grid: np.ndarray, level: float, values: np.ndarray):
    """Every connected piece ``[t_lo, t_hi]`` of ``{f <= level}`` the grid sees, ends refined by root
    finding (None: the piece reaches the grid's end). A constant that is not quasi-convex (a
    Student-t location with a fixed scale: small near the data and again far from them) has
    several; the caller keeps the one with the most prior mass."""
    values = np.where(np.isfinite(values), values, np.inf)
    inside = values <= level
    pieces = []
    i = 0
    n = len(grid)
    while i < n:
        if not inside[i]:
            i += 1
            continue
        j = i
        while j + 1 < n and inside[j + 1]:
            j += 1

        def end(k_in, k_out):
            root = _crossing_root(lambda t: f(t) - level, grid[k_in], grid[k_out])
            for _ in range(60):  # step inside until f <= level holds exactly
                if f(root) <= level:
                    break
                root = root + (grid[k_in] - root) * 1e-9
            return float(root)

        t_lo = None if i == 0 else end(i, i - 1)
        t_hi = None if j == n - 1 else end(j, j + 1)
        pieces.append((t_lo, t_hi))
        i = j + 1
    return pieces


def _numpy_rule(factor: Factor, name: str, ctx: RegionContext):
    """``t -> (L, per-element L)`` with every element of free RV ``name`` at ``t``, evaluated by
    the rule in NumPy, when each parameter is that RV itself (up to casts and broadcasting), a
    table of it indexed by a private label, an increasing link of these, or a public constant;
    None otherwise (the caller compiles the rule's PyTensor graph instead).

    The NumPy and PyTensor forms of a rule are one derivation written against two namespaces
    (``rules.NP`` and ``rules.PT``) and are tested equal; this path only skips compiling a graph per factor."""
    info = factor.info
    if info is None or factor.observed_container is None:
        return None
    makers = []
    for pname, form in zip(info.param_names, factor.forms):
        link, space = None, "natural"
        if isinstance(form, LinkForm):
            space = LINK_SPACES.get((info.family, pname, form.link)) or "natural"
            link = None if space != "natural" else form.link
            form = form.inner
            if isinstance(form, LinkForm):
                return None
        if isinstance(form, PointForm) and plain_free_rv(form.expr, ctx) == name:
            makers.append((link, space, None))
        elif isinstance(form, IndexForm) and plain_free_rv(form.table, ctx) == name:
            makers.append((link, space, None))
        elif isinstance(form, PointForm) and not ctx.free_rvs_of(form.expr):
            if link is not None or space != "natural":
                return None
            makers.append((None, "natural", ctx.numeric(form.expr)))
        else:
            return None
    domain = ctx.domains[factor.observed_container]
    obs_shape = observed_shape(factor, ctx)
    links = {"sigmoid": lambda x: 1.0 / (1.0 + np.exp(-x)), "exp": np.exp, "log": np.log,
             "softplus": lambda x: np.logaddexp(0.0, x), "tanh": np.tanh}

    ndim = len(obs_shape)

    def evaluate(ts: np.ndarray):
        """Per-element constants for every ``t`` in ``ts``: shape ``(len(ts),) + obs_shape``."""
        params = []
        lead = ts.reshape((-1,) + (1,) * ndim)
        for link, space, const in makers:
            if const is not None:
                params.append(Bounds.point(np.asarray(const, dtype=float)[None]))
                continue
            value = lead
            if link is not None:
                with np.errstate(all="ignore"):
                    value = links[link](value)
            params.append(Bounds(value, value, space=space))
        with np.errstate(all="ignore"):
            per = np.asarray(element_lipschitz(factor.op, domain, tuple(params), NP), dtype=float)
        return np.broadcast_to(per, (len(ts),) + obs_shape)

    def records(per: np.ndarray) -> np.ndarray:
        """Per-record constants' maximum, for each leading entry."""
        k = per.shape[0]
        if per.ndim > 2:
            per = per.reshape(k, per.shape[1], -1).sum(axis=2)
        out = per.reshape(k, -1).max(axis=1) if per.ndim > 1 and per.shape[1] else per.reshape(k, -1).max(axis=1)
        return np.where(np.isnan(out), np.inf, out)

    def rule(t: float):
        per = evaluate(np.asarray([t], dtype=float))
        return float(records(per)[0]), per[0]

    rule.many = lambda ts: records(evaluate(np.asarray(ts, dtype=float)))
    return rule


def _hull_lipschitz(factor: Factor, name: str, lo: np.float64, hi: np.float64, ctx: RegionContext) -> float:
    """L of ``factor`` when every row of the indexed table ``name`` may be anywhere in ``[lo, hi]``."""
    table = ctx.free[name]
    if not ctx.cache:
        hull = {table: (pt.constant(lo), pt.constant(hi))}
        return float(numeric(factor.lipschitz(ctx.domains, hull=hull)))

    def build():
        lo_v, hi_v = pt.dscalar("lo"), pt.dscalar("hi")
        expr = factor.lipschitz(ctx.domains, hull={table: (lo_v, hi_v)})
        return pytensor.function([lo_v, hi_v], expr, mode=EVAL_MODE, on_unused_input="ignore")

    fn = ctx.cached(ctx.key(factor, "hull", name), build)
    return float(np.asarray(fn(lo, hi), dtype=float))


def _argmin_between(f, a, b):
    if math.isfinite(a) and math.isfinite(b):
        return float(optimize.minimize_scalar(f, bounds=(a, b), method="bounded").x)
    return a if math.isfinite(a) else b


def _depends(var, rv) -> bool:
    return rv in set(ancestors([var], blockers=[rv]))


def _elementwise_of(var, rv) -> bool:
    """Each element of ``var`` is a function of at most one element of ``rv``."""
    if var is rv or not _depends(var, rv):
        return True
    node = var.owner
    if node is None:  # pragma: no cover - a root that depends on rv is rv itself
        return False
    op = node.op
    if isinstance(op, Elemwise):
        reading = [i for i in node.inputs if _depends(i, rv)]
        return len(reading) == 1 and _elementwise_of(reading[0], rv)
    if isinstance(op, DimShuffle):
        return _elementwise_of(node.inputs[0], rv)
    if isinstance(op, (Subtensor, AdvancedSubtensor, AdvancedSubtensor1, Reshape, Alloc)):
        return not any(_depends(i, rv) for i in node.inputs[1:]) and _elementwise_of(node.inputs[0], rv)
    return False


def _reads_elementwise(factor, rv, ctx: RegionContext) -> bool:
    """Whether each element of the factor's constant depends on one element of ``rv`` only.

    Exactly one parameter may read ``rv``; a parameter with core dimensions (Categorical's
    ``p``) mixes its elements in the rule itself; an index form must index ``rv`` itself.
    """
    ndims = getattr(factor.op, "ndims_params", None) or (0,) * len(factor.forms)
    reading = 0
    for form, core in zip(factor.forms, ndims):
        while isinstance(form, LinkForm):  # increasing elementwise links
            form = form.inner
        if isinstance(form, IndexForm):
            if form.table is not rv and not (plain_free_rv(form.table, ctx) == rv.name):
                return False
            reading += 1
            continue
        if isinstance(form, PointForm):
            if not _depends(form.expr, rv):
                continue
            if core or not _elementwise_of(form.expr, rv):
                return False
            reading += 1
            continue
        return False  # affine forms are solve_affine's
    return reading == 1


def _forms(factor):
    for form in factor.forms:
        while isinstance(form, LinkForm):
            form = form.inner
        yield form
