"""From a per-factor budget ``L_j`` to constraints on the model's free RVs (Theta_L).

For each private factor a *solver* turns ``{theta : L_j(theta) <= share_j}`` into constraints on
the free RVs the factor reads. Solvers are tried from the most specific to the most general:

1. :func:`solve_affine` -- ``X @ w + b`` inside a Normal location or a Bernoulli logit: a norm ball
   on ``w`` (l2 for Ball rows, weighted l1 for Box rows), an interval on a free intercept, a
   lower bound on a free scale. Sampled through a polar transform, not a wall.
2. :func:`solve_location_scale` -- location and scale both free RVs (Normal, Laplace, StudentT,
   Cauchy): the location in the data interval and the scale above ``s*`` (docs/theory/families.md).
3. :func:`solve_scalar` -- the factor reads one free RV: the sublevel set of ``t -> L_j(v = t)``
   around its minimiser, an interval truncation of every element of ``v``.
4. :class:`PotentialConstraint` -- anything else: ``pm.Potential`` that is 0 inside
   ``{L_j(theta) <= share_j}`` and -inf outside, from the rule's own expression. Always valid,
   slower for NUTS.

Every interval and ball solution is verified before it is accepted: the per-record constant is
evaluated at both ends of the interval, elementwise (the sup over the box, for rules
quasi-convex in each parameter), over the hull for indexed parameters, and on a dense grid.
"""

from __future__ import annotations

import math
from typing import Any, Callable

import numpy as np
import pytensor
import pytensor.tensor as pt
from pytensor.compile.mode import Mode
from pytensor.graph.replace import clone_replace
from pytensor.graph.traversal import ancestors
from pytensor.tensor.basic import Alloc
from pytensor.tensor.elemwise import DimShuffle, Elemwise
from pytensor.tensor.shape import Reshape
from pytensor.tensor.subtensor import AdvancedSubtensor, AdvancedSubtensor1, Subtensor
from scipy import optimize, special, stats

from pymc_dp.domains import Ball
from pymc_dp.factors import AffineForm, Factor, IndexForm, LinkForm, PointForm
from pymc_dp.rules import NP, Bounds, log_density_range

__all__ = [
    "IntervalConstraint",
    "ElementIntervalConstraint",
    "NormBallConstraint",
    "PotentialConstraint",
    "FactorRegion",
    "RegionContext",
    "solve_factor",
]

from pymc_dp.constraints import (  # noqa: E402,F401  (the constraints' home; re-exported here)
    _TOL,
    ElementIntervalConstraint,
    FactorRegion,
    IntervalConstraint,
    NormBallConstraint,
    PotentialConstraint,
    constraints_box,
)


# --------------------------------------------------------------------------- prior draws
def prior_draws(model, draws: int, seed: int) -> dict[str, np.ndarray]:
    """``draws`` public draws of the model's free RVs from their prior, by name.

    When every free RV is a PyTensor ``RandomVariable`` whose parameters are constants (no free
    RV parent), each is drawn directly by its Op's NumPy sampler in one vectorised call per RV;
    otherwise PyMC's ``pm.draw`` samples the joint prior ancestrally (one compiled call per draw,
    seconds for thousands of draws of many RVs). Both depend on the seed, the prior and the
    shapes only."""
    import pymc as pm
    from pytensor.tensor.random.op import RandomVariable

    rvs = list(model.free_RVs)
    if not rvs:
        return {}
    direct = []
    for rv in rvs:
        op = rv.owner.op
        params = _constant_params(rv) if isinstance(op, RandomVariable) else None
        if params is None:
            direct = None
            break
        direct.append((rv, op, params))
    if direct is not None:
        rng = np.random.default_rng(seed)
        out = {}
        try:
            for rv, op, params in direct:
                shape = tuple(int(v) for v in _shape_of_rv(rv))
                batch = shape[: len(shape) - op.ndim_supp]  # a sampler's size excludes the support
                value = np.asarray(op.rng_fn(rng, *params, size=(draws,) + batch))
                if value.shape != (draws,) + shape:
                    raise ValueError("shape")
                out[rv.name] = value
            return out
        except Exception:  # an Op whose sampler wants other arguments: the general path
            pass
    values = pm.draw(rvs, draws=draws, random_seed=seed)
    return {rv.name: np.asarray(v) for rv, v in zip(rvs, values)}


def _shape_of_rv(rv) -> tuple:
    shape = tuple(rv.type.shape)
    if all(s is not None for s in shape):
        return shape
    return tuple(pytensor.function([], rv.shape, mode="FAST_COMPILE")())


# --------------------------------------------------------------------------- context
class RegionContext:
    """What the solvers need from the model: free RVs, their supports and prior draws.

    The context also caches what does not depend on a factor's share: the factor's Lipschitz
    graph, compiled functions, the values of ``t -> L_j(v = t)`` on the solvers' grids, the
    prior's compiled CDFs. A budget-split optimiser calls :func:`solve_factor` and
    :func:`prior_mass` many times on one context; the cache makes every call after the first
    one cheap. Results are bit-for-bit those of an uncached context (``cache=False``, which
    recomputes everything on every call, as the code did before the cache): compiled
    functions are reused, never changed, and what the uncached code evaluates with
    ``expr.eval()`` (constant folding, i.e. the Ops' Python implementations after the
    ``fast_run`` rewrites) is evaluated by a function compiled once in :data:`_EVAL_MODE`, the
    same rewrites and the same Python implementations on symbolic inputs.
    """

    def __init__(self, model, domains, prior_draws: dict[str, np.ndarray], *, cache: bool = True):
        self.model = model
        self.domains = domains
        self.free = {rv.name: rv for rv in model.free_RVs}
        self.draws = prior_draws
        self.shapes = {k: v.shape[1:] for k, v in prior_draws.items()}
        self.cache = cache
        #: the admissible prior the search aims at (``split="fit"``, :mod:`pymc_dp.reference`);
        #: None: the search keeps prior mass
        self.reference = None
        self._cache: dict = {}
        self._pinned: dict[int, Any] = {}  # keeps keyed objects alive: their ids stay unique

    # ------------------------------------------------------------------ cache
    def cached(self, key: tuple, build: Callable[[], Any]) -> Any:
        """``build()``, computed once per ``key`` (every call when ``cache`` is False).

        Objects in ``key`` are keyed by identity through :meth:`key`.
        """
        if not self.cache:
            return build()
        try:
            return self._cache[key]
        except KeyError:
            value = self._cache[key] = build()
            return value

    def key(self, obj, *tags) -> tuple:
        """A cache key for ``obj`` (by identity: factors and graphs are not hashable by value)."""
        if self.cache:
            self._pinned[id(obj)] = obj
        return (id(obj), *tags)

    def lipschitz(self, factor: Factor):
        """``factor.lipschitz(domains)``, one graph per factor."""
        return self.cached(self.key(factor, "L"), lambda: factor.lipschitz(self.domains))

    # ------------------------------------------------------------------ model queries
    def free_rvs_of(self, expr) -> list[str]:
        """The free RVs ``expr`` reads directly: the walk stops at free RVs, so a hierarchical
        prior's hyperparameters (``p ~ Beta(a, 1)``) are not counted as read by ``expr``."""

        def build():
            anc = set(ancestors([expr], blockers=list(self.free.values())))
            return [name for name, rv in self.free.items() if rv in anc]

        return list(self.cached(self.key(expr, "free_rvs"), build))

    def support(self, name: str) -> tuple[float, float]:
        """The support of a scalar free RV, read from its value transform."""
        return self.cached(("support", name), lambda: self._support(name))

    def _support(self, name: str) -> tuple[float, float]:
        rv = self.free[name]
        transform = self.model.rvs_to_transforms.get(rv)
        tname = type(transform).__name__ if transform is not None else None
        if tname == "LogOddsTransform":
            return 0.0, 1.0
        if tname == "LogTransform":
            return 0.0, math.inf
        if tname == "IntervalTransform" or tname == "Interval":
            a, b = transform.args_fn(*rv.owner.inputs)
            lo = -math.inf if a is None else float(np.max(pt.as_tensor_variable(a).eval()))
            hi = math.inf if b is None else float(np.min(pt.as_tensor_variable(b).eval()))
            return lo, hi
        if transform is None and rv.dtype.startswith("float"):
            return -math.inf, math.inf
        return math.nan, math.nan  # unsupported (simplex, ordered, discrete, ...)

    def compile_in(self, expr, names: list[str]) -> Callable:
        """Compile ``expr`` as a function of the values of free RVs ``names`` (cached)."""

        def build():
            holders = {n: self.free[n].type() for n in names}
            replaced = clone_replace(expr, replace={self.free[n]: holders[n] for n in names})
            return pytensor.function([holders[n] for n in names], replaced, on_unused_input="ignore")

        return self.cached(self.key(expr, "compile", tuple(names)), build)

    def numeric(self, expr) -> np.ndarray:
        """``_numeric(expr)`` of an expression of constants and shared data (cached)."""
        return self.cached(self.key(expr, "numeric"), lambda: _numeric(expr))


#: how cached functions replace ``expr.eval()`` bit for bit (see :class:`RegionContext`)
_EVAL_MODE = Mode(linker="py", optimizer="fast_run")


# --------------------------------------------------------------------------- helpers
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
                root = optimize.brentq(lambda t: f(t) - level, inner, outer, xtol=1e-14, rtol=1e-14)
                # step inside until f <= level holds exactly
                for _ in range(60):
                    if f(root) <= level:
                        break
                    root = root + (t_min - root) * 1e-9
                return float(root)
        return None

    return crossing(-1), crossing(+1), f_min


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
            root = optimize.brentq(lambda t: f(t) - level, grid[k_in], grid[k_out], xtol=1e-14, rtol=1e-14)
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


def _numeric(expr) -> np.ndarray:
    return np.asarray(expr.eval(), dtype=float)


# --------------------------------------------------------------------------- solvers
def solve_factor(factor: Factor, share: float, ctx: RegionContext) -> FactorRegion:
    """Constraints on the free RVs that keep ``L_factor <= share``; see the module docstring."""
    from pymc_dp.oscillation import solve_oscillation

    by_oscillation = solve_oscillation(factor, share, ctx)
    if by_oscillation is None:
        region = _by_the_constant(factor, share, ctx)
        return region if region is not None else solve_potential(factor, share, ctx)
    # The oscillation model was built only where the family's own rule accepts the domain
    # (OscillationModel._family_accepts_the_domain), and the constant's regions are never better:
    # the sublevel interval {L <= share} has oscillation <= 2 share, so it is one of the intervals
    # the oscillation search ranges over (tests/test_oscillation.py compares the two).
    return by_oscillation


def _by_the_constant(factor: Factor, share: float, ctx: RegionContext) -> FactorRegion | None:
    """The first region of the constant's solvers (affine, location-scale, scalar, box), or None
    when none applies; raises :class:`Infeasible` when the constant cannot reach ``share``."""
    from pymc_dp.boxes import solve_box

    for solver in (solve_affine, solve_location_scale, solve_scalar, solve_box):
        region = solver(factor, share, ctx)
        if region is not None:
            return region
    return None


class Infeasible(Exception):
    """The factor's constant cannot be brought down to its share; carries the minimum.

    ``certified`` is True when the minimum is the rule's own (no parameter value does better),
    False when it is the least value a numerical search found (the Potential fallback): then a
    smaller constant may exist, and messages must not claim otherwise.
    """

    def __init__(self, factor: str, min_lipschitz: float, certified: bool = True):
        super().__init__(factor, min_lipschitz)
        self.factor = factor
        self.min_lipschitz = min_lipschitz
        self.certified = certified


def _plain_free_rv(expr, ctx: RegionContext) -> str | None:
    """The name of the free RV ``expr`` is (up to casts and broadcasting), else None."""
    from pymc_dp.factors import strip_casts, strip_expand_dims

    e = expr
    for _ in range(4):
        e = strip_expand_dims(strip_casts(e))
    for name, rv in ctx.free.items():
        if e is rv:
            return name
    return None


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
        from pymc_dp.boxes import box_log_mass

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
        if sup_over_box(lower, upper) <= share * (1 + _TOL):
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


def _observed_shape(factor: Factor, ctx: RegionContext) -> tuple[int, ...]:
    """The observed value's shape: the container's (shapes are public), else computed."""
    from pymc_dp.predictor import strip_identity

    obs = strip_identity(factor.observed)
    if hasattr(obs, "get_value"):
        return tuple(int(v) for v in np.shape(obs.get_value()))
    return tuple(int(v) for v in ctx.numeric(factor.observed.shape))


def _numpy_rule(factor: Factor, name: str, ctx: RegionContext):
    """``t -> (L, per-element L)`` with every element of free RV ``name`` at ``t``, evaluated by
    the rule in NumPy, when each parameter is that RV itself (up to casts and broadcasting), a
    table of it indexed by a private label, an increasing link of these, or a public constant;
    None otherwise (the caller compiles the rule's PyTensor graph instead).

    The NumPy and PyTensor forms of a rule are one derivation written against two namespaces
    (``rules.namespaces``) and are tested equal; this path only skips compiling a graph per factor."""
    from pymc_dp.factors import LINK_SPACES
    from pymc_dp.rules import element_lipschitz
    from pymc_dp.rules.namespaces import NP as np_xp

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
        if isinstance(form, PointForm) and _plain_free_rv(form.expr, ctx) == name:
            makers.append((link, space, None))
        elif isinstance(form, IndexForm) and _plain_free_rv(form.table, ctx) == name:
            makers.append((link, space, None))
        elif isinstance(form, PointForm) and not ctx.free_rvs_of(form.expr):
            if link is not None or space != "natural":
                return None
            makers.append((None, "natural", ctx.numeric(form.expr)))
        else:
            return None
    domain = ctx.domains[factor.observed_container]
    obs_shape = _observed_shape(factor, ctx)
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
            per = np.asarray(element_lipschitz(factor.op, domain, tuple(params), np_xp), dtype=float)
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
        return float(_numeric(factor.lipschitz(ctx.domains, hull=hull)))

    def build():
        lo_v, hi_v = pt.dscalar("lo"), pt.dscalar("hi")
        expr = factor.lipschitz(ctx.domains, hull={table: (lo_v, hi_v)})
        return pytensor.function([lo_v, hi_v], expr, mode=_EVAL_MODE, on_unused_input="ignore")

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
            if form.table is not rv and not (_plain_free_rv(form.table, ctx) == rv.name):
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


def solve_location_scale(factor: Factor, share: float, ctx: RegionContext) -> FactorRegion | None:
    """Location and scale are both free RVs: location in ``[a, b]``, scale at least ``s*``.

    For a location family with ``mu`` in the data interval, ``d <= w`` and L increases with d,
    so the worst location is an end of ``[a, b]``; L decreases with the scale, and ``s*``
    solves ``max(L(mu=a, s), L(mu=b, s)) = share`` (Normal: ``s* = (b - a) / sqrt(2 L)``,
    docs/theory/families.md#normal).
    """
    info = factor.info
    if info is None or info.location is None or info.scale is None:
        return None
    forms = dict(zip(info.param_names, factor.forms))
    loc, scale = forms[info.location], forms[info.scale]
    if not (isinstance(loc, PointForm) and isinstance(scale, PointForm)):
        return None
    loc_name, scale_name = _plain_free_rv(loc.expr, ctx), _plain_free_rv(scale.expr, ctx)
    L = ctx.lipschitz(factor)
    names = ctx.free_rvs_of(L)
    if loc_name is None or scale_name is None or sorted(names) != sorted({loc_name, scale_name}) or loc_name == scale_name:
        return None
    domain = ctx.domains[factor.observed_container]
    a, b = float(getattr(domain, "lo")), float(getattr(domain, "hi"))
    fn = ctx.compile_in(L, [loc_name, scale_name])
    shp_l, shp_s = ctx.shapes[loc_name], ctx.shapes[scale_name]

    memo = ctx.cached(ctx.key(factor, "worst"), dict)  # s -> worst(s): independent of the share

    def worst(s):
        try:
            return memo[s]
        except KeyError:
            value = memo[s] = max(float(fn(np.full(shp_l, m), np.full(shp_s, s))) for m in (a, b))
            return value

    s_grid = np.exp(np.linspace(-30, 30, 601))
    vals = np.array([worst(s) for s in s_grid])
    ok = np.nonzero(vals <= share)[0]
    if len(ok) == 0:
        raise Infeasible(factor.name, float(np.min(vals)))
    j = ok[0]
    s_star = float(s_grid[j]) if j == 0 else float(
        optimize.brentq(lambda s: worst(s) - share, s_grid[j - 1], s_grid[j], xtol=1e-14, rtol=1e-14)
    )
    for _ in range(60):
        if worst(s_star) <= share:
            break
        s_star *= 1 + 1e-9
    # verify: locations across [a, b] and scales above s_star
    check = max(float(fn(np.full(shp_l, m), np.full(shp_s, s))) for m in np.linspace(a, b, 41) for s in (s_star, 1.5 * s_star, 4 * s_star))
    if check > share * (1 + _TOL):  # pragma: no cover - would be a rule bug
        return None
    return FactorRegion(
        factor,
        share,
        [IntervalConstraint(loc_name, a, b), IntervalConstraint(scale_name, s_star, None)],
        "location-scale",
        None,
    )


def solve_affine(factor: Factor, share: float, ctx: RegionContext) -> FactorRegion | None:
    """``X @ w + b`` in a Normal location (linear regression) or Bernoulli logit (logistic).

    With rows in a Ball(R), ``w . x`` spans ``[-R ||w||_2, R ||w||_2]``; in a Box, it lies in
    ``[-sum m_i |w_i|, sum m_i |w_i|]`` with ``m_i = max(|lo_i|, |hi_i|)`` (exact for a centred
    box). So with ``|b - c| <= B_b`` and ``R ||w|| <= r``, the linear predictor of one record lies
    in ``[c - H, c + H]``, ``H = B_b + r``, and the rule evaluated on that interval bounds L over
    the whole region (both rules are monotone in the interval's extent). ``H`` is solved from
    the rule; a free intercept and a free scale are chosen to maximise the prior mass kept
    (Monte Carlo over public prior draws).
    """
    info = factor.info
    if info is None or info.family not in ("Normal", "Bernoulli"):
        return None
    forms = dict(zip(info.param_names, factor.forms))
    key = "mu" if info.family == "Normal" else "p"
    form = forms[key]
    logit = False
    if info.family == "Bernoulli":
        if not (isinstance(form, LinkForm) and form.link == "sigmoid"):
            return None
        form, logit = form.inner, True
    if not isinstance(form, AffineForm):
        return None
    w_name = _plain_free_rv(form.weights, ctx)
    if w_name is None or len(ctx.shapes[w_name]) != 1:
        return None
    if ctx.support(w_name) != (-math.inf, math.inf):
        return None
    domain_x = ctx.domains[form.container]
    offset_name = None
    offset_value = 0.0
    if form.offset is not None:
        if not ctx.free_rvs_of(form.offset):
            offset_value = ctx.numeric(form.offset)
            if offset_value.size != 1:
                return None
            offset_value = float(offset_value.reshape(()))
        else:
            offset_name = _plain_free_rv(form.offset, ctx)
            if offset_name is None or ctx.shapes[offset_name] not in ((), (1,)) or ctx.support(offset_name) != (-math.inf, math.inf):
                return None
    scale_name, scale_value = None, None
    if info.family == "Normal":
        sform = forms["sigma"]
        if not ctx.free_rvs_of(sform.expr):
            scale_value = ctx.numeric(sform.expr)
            if scale_value.size != 1:
                return None
            scale_value = float(scale_value.reshape(-1)[0])
        else:
            scale_name = _plain_free_rv(sform.expr, ctx)
            if scale_name is None or ctx.shapes[scale_name] not in ((), (1,)) or ctx.support(scale_name)[0] < 0:
                return None
    involved = {w_name, offset_name, scale_name} - {None}
    if set(ctx.free_rvs_of(ctx.lipschitz(factor))) != involved:
        return None

    obs_domain = ctx.domains[factor.observed_container]
    n_elem = int(np.prod(ctx.numeric(factor.observed.shape)[1:])) if factor.observed.ndim > 1 else 1

    def rule_L(center, half, sigma):
        eta = Bounds(center - half, center + half, space="logit" if logit else "natural")
        params = (eta,) if logit else (eta, Bounds.point(sigma))
        lo, hi = log_density_range(factor.op, obs_domain, params, NP)
        return n_elem * float(hi - lo)

    # the centre of the intercept's interval: where the rule is smallest with w = 0
    if offset_name is None:
        center = offset_value
    elif logit:
        center = 0.0
    else:
        center = 0.5 * (obs_domain.lo + obs_domain.hi) if hasattr(obs_domain, "lo") else 0.0

    halves: dict = {}  # sigma -> max_half(sigma), for this share

    def max_half(sigma):
        try:
            return halves[sigma]
        except KeyError:
            value = halves[sigma] = _max_half(sigma)
            return value

    def _max_half(sigma):
        if rule_L(center, 0.0, sigma) > share:
            return None
        hi_h = 1.0
        while rule_L(center, hi_h, sigma) <= share and hi_h < 1e12:
            hi_h *= 2
        h = optimize.brentq(lambda h: rule_L(center, h, sigma) - share, 0.0, hi_h, xtol=1e-14, rtol=1e-14)
        for _ in range(60):
            if rule_L(center, h, sigma) <= share:
                break
            h *= 1 - 1e-12
        return h

    if isinstance(domain_x, Ball):
        scale_r, weights = domain_x.radius, None
    else:
        m = np.broadcast_to(domain_x.abs_max, ctx.shapes[w_name]).astype(float)
        scale_r, weights = 1.0, tuple(float(v) for v in m)

    def constraints_for(sigma, frac):
        h = max_half(sigma)
        if h is None:
            return None
        b_b = frac * h if offset_name else 0.0
        radius = (h - b_b) / scale_r
        cons = [NormBallConstraint(w_name, float(radius), weights)]
        if offset_name:
            cons.append(IntervalConstraint(offset_name, center - b_b, center + b_b))
        if scale_name:
            cons.append(IntervalConstraint(scale_name, float(sigma), None))
        return cons

    def mass(cons):
        ok = np.ones(len(next(iter(ctx.draws.values()))), bool)
        for c in cons:
            ok &= c.contains(ctx.draws)
        return ok.mean()

    sigmas = [scale_value] if scale_name is None else list(
        np.quantile(ctx.draws[scale_name].reshape(-1), np.linspace(0.02, 0.98, 25))
    )
    fracs = [0.0] if offset_name is None else list(np.linspace(0.05, 0.95, 19))
    best, best_mass, min_L = None, -1.0, math.inf
    for s in sigmas:
        min_L = min(min_L, rule_L(center, 0.0, s))
        for frac in fracs:
            cons = constraints_for(s, frac)
            if cons is None:
                continue
            mval = mass(cons)
            if mval > best_mass:
                best, best_mass = cons, mval
    if best is None:
        if scale_name is not None:
            # the budget is met only by scales above the prior's bulk: double until it is
            s = max(sigmas)
            while rule_L(center, 0.0, s) > share and s < 1e12:
                s *= 2
            best = constraints_for(2.0 * s, 0.5 if offset_name else 0.0)
        if best is None:
            raise Infeasible(factor.name, min_L)
    return FactorRegion(factor, share, best, "affine", min_L)


def solve_potential(factor: Factor, share: float, ctx: RegionContext) -> FactorRegion:
    """Fallback: a ``pm.Potential`` indicator of ``{L_j(theta) <= share}``.

    The region is known to be non-empty when a public prior draw lies in it; otherwise
    :func:`_search_minimum` minimises ``L_j`` over the prior's support from the best draws.
    Either way the point found (public: it depends on the prior and the rule only) is kept as a
    starting point for samplers. When nothing below the share is found, the factor is refused
    with the least value found, flagged as *not certified* (a search, not a proof).
    """
    L = ctx.lipschitz(factor)
    names = ctx.free_rvs_of(L)
    fn = ctx.compile_in(L, names)

    def compute(draws):
        n = len(next(iter(draws.values())))
        return np.array([float(fn(*(draws[k][i] for k in names))) for i in range(n)])

    def evaluate(draws):
        if draws is ctx.draws:  # the public prior draws: share-independent, computed once
            return ctx.cached(ctx.key(factor, "potential_on_draws"), lambda: compute(draws))
        return compute(draws)

    values = ctx.cached(
        ctx.key(factor, "potential_values"),
        lambda: compute({k: ctx.draws[k][:2000] for k in names}) if names else np.array([float(_numeric(L))]),
    )
    if not names:
        if float(values[0]) > share:
            raise Infeasible(factor.name, float(values[0]))
        return FactorRegion(factor, share, [PotentialConstraint(factor.name, share, (), evaluate)], "potential", None)
    inside = np.nonzero(values <= share)[0]
    if len(inside):
        start = {k: ctx.draws[k][int(inside[0])] for k in names}
    else:
        best, point = ctx.cached(ctx.key(factor, "potential_search"), lambda: _search_minimum(L, names, values, ctx))
        if best > share:
            raise Infeasible(factor.name, float(min(best, np.min(values))), certified=False)
        _, start = ctx.cached(ctx.key(factor, "potential_start", share),
                              lambda: _search_minimum(L, names, values, ctx, share=share))
    constraint = PotentialConstraint(factor.name, share, tuple(names), evaluate, start)
    return FactorRegion(factor, share, [constraint], "potential", None)


def _search_minimum(L, names, values, ctx: RegionContext, starts: int = 5, share: float | None = None) -> tuple[float, dict]:
    """Least ``L`` found by Nelder-Mead over the free RVs' unconstrained values (PyMC's value
    transforms), from the ``starts`` best prior draws. A heuristic: it finds a point inside the
    region, never proves there is none.

    With ``share``, the point returned is then moved, along the segment towards the prior draw of
    highest prior density, as far as the constant stays within ``share``: a start where the prior
    has mass, not at the edge of the region where the minimiser of the constant often lies."""
    model = ctx.model
    rvs = [ctx.free[k] for k in names]
    value_vars = [model.rvs_to_values[rv] for rv in rvs]
    (L_values,) = model.replace_rvs_by_values([L])
    fn = pytensor.function(value_vars, L_values, on_unused_input="ignore")
    forward, backward = [], []
    for rv, vv in zip(rvs, value_vars):
        transform = model.rvs_to_transforms.get(rv)
        if transform is None:
            forward.append(np.asarray)
            backward.append(np.asarray)
            continue
        x = rv.type()
        forward.append(pytensor.function([x], transform.forward(x, *rv.owner.inputs), on_unused_input="ignore"))
        backward.append(pytensor.function([vv], transform.backward(vv, *rv.owner.inputs), on_unused_input="ignore"))
    templates: list[np.ndarray] = []  # one unconstrained value per variable: the shapes to unpack

    def unpack(z):
        out, i = [], 0
        for template in templates:
            out.append(z[i : i + template.size].reshape(template.shape).astype(template.dtype))
            i += template.size
        return out

    def objective(z):
        value = float(fn(*unpack(z)))
        return value if np.isfinite(value) else np.inf

    def pack(i):
        return np.concatenate([np.asarray(fwd(ctx.draws[k][int(i)]), dtype=float).ravel() for fwd, k in zip(forward, names)])

    best_value, best_z = np.inf, None
    for i in np.argsort(values)[:starts]:
        templates = [np.asarray(fwd(ctx.draws[k][int(i)]), dtype=float) for fwd, k in zip(forward, names)]
        z0 = np.concatenate([t.ravel() for t in templates])
        res = optimize.minimize(
            objective, z0, method="Nelder-Mead", options={"xatol": 1e-10, "fatol": 1e-12, "maxiter": 400 * (len(z0) + 1)}
        )
        if res.fun < best_value:
            best_value, best_z = float(res.fun), np.asarray(res.x, dtype=float)
    if best_z is None:
        return best_value, None
    if share is not None and best_value <= share:
        best_z = _toward_prior(best_z, objective, pack, share, ctx, names, sizes=[t.size for t in templates])
    point = {k: np.asarray(bwd(z)) for k, bwd, z in zip(names, backward, unpack(best_z))}
    return best_value, point


def _toward_prior(z_in, objective, pack, share, ctx: RegionContext, names, sizes=None) -> np.ndarray:
    """A start inside the region where the prior has mass, a margin away from its wall.

    From ``z_in`` (inside the region), each variable in turn (``sizes``: their lengths in the
    unconstrained vector ``z``; two passes) moves towards the centre of the prior (the
    coordinatewise median of the public prior draws, unconstrained) as far as the constant stays
    at most a level strictly inside the share (80% of it, or halfway from ``z_in``'s constant to
    the share): bisection on each variable's segment. Variable by variable, because a joint
    segment can leave the region at once -- the minimiser of a Normal factor's constant has a
    huge scale *and* huge locations, and shrinking the scale first is infeasible, while moving
    the locations first then frees the scale (radon's LKJ model started at ``sigma = 1e80``,
    where NUTS cannot move). A start near the wall would make a sampler's first steps cross it.
    """
    n = len(next(iter(ctx.draws.values())))
    sample = np.stack([pack(i) for i in range(min(n, 400))])
    target = np.median(sample, axis=0)
    if target.shape != z_in.shape:  # pragma: no cover - same variables, same sizes
        return z_in
    if objective(target) <= share * 0.8:
        return target
    z = np.array(z_in, dtype=float)
    level = max(0.8 * share, objective(z) + 0.5 * (share - objective(z)))
    bounds = np.cumsum([0, *(sizes or [len(z)])])
    blocks = [slice(int(a), int(b)) for a, b in zip(bounds[:-1], bounds[1:])] + [slice(0, len(z))]
    for _ in range(2):
        for block in blocks:
            step = np.zeros_like(z)
            step[block] = target[block] - z[block]
            if not np.any(step):
                continue
            if objective(z + step) <= level:
                z = z + step
                continue
            lo, hi = 0.0, 1.0
            for _ in range(30):
                mid = 0.5 * (lo + hi)
                if objective(z + mid * step) <= level:
                    lo = mid
                else:
                    hi = mid
            z = z + lo * step
    return z


# --------------------------------------------------------------------------- prior mass
def prior_mass(constraints, ctx: RegionContext) -> tuple[float, str]:
    """Prior probability of the region (exact for independent root RVs, else Monte Carlo)."""
    exact = _exact_mass(constraints, ctx)
    if exact is not None:
        return exact, "exact"
    box = constraints_box(constraints, ctx)
    if box is not None:
        from pymc_dp.boxes import box_mass_estimate

        log_mass, rel_se, how = box_mass_estimate(box, ctx)
        if math.isfinite(log_mass) and log_mass < -700:  # below the smallest float: say how small
            how = f"{how}; log of the mass {log_mass:.5g}"
        if rel_se is None:
            return math.exp(log_mass), how
        return math.exp(log_mass), f"{how}; relative standard error {rel_se:.2g}"
    ok = np.ones(len(next(iter(ctx.draws.values()))), bool)
    for c in constraints:
        ok &= c.contains(ctx.draws)
    n = len(ok)
    p = float(ok.mean())
    if p == 0.0:  # no draw inside: say how small the mass is, rather than that it is 0
        return p, f"monte carlo (n={n}): no prior draw inside, mass below {3.0 / n:.2g} (95% upper bound)"
    se = math.sqrt(max(p * (1 - p), 1.0 / n) / n)
    return p, f"monte carlo (n={n}, se={se:.2g})"


def _is_root(rv, ctx) -> bool:
    def build():
        others = {r for r in ctx.free.values() if r is not rv}
        return not (set(ancestors(rv.owner.inputs)) & others)

    return ctx.cached(("is_root", rv.name), build)


def _exact_mass(constraints, ctx) -> float | None:
    pieces = _exact_mass_pieces(constraints, ctx)
    if pieces is None:
        return None
    total = 1.0
    for kind, value in pieces:
        total *= float(np.prod(value)) if kind == "elements" else value
    return total


def exact_log_mass(constraints, ctx) -> float | None:
    """``log`` of :func:`_exact_mass`, summed in log space (no underflow with many elements)."""
    pieces = _exact_mass_pieces(constraints, ctx)
    if pieces is None:
        return None
    with np.errstate(divide="ignore"):
        return float(sum(float(np.sum(np.log(value))) if kind == "elements" else math.log(value) if value > 0 else -math.inf for kind, value in pieces))


def _constant_params(rv) -> list[np.ndarray] | None:
    """The values of ``rv``'s distribution parameters when all are constants (None otherwise)."""
    from pytensor.graph.basic import Constant

    from pymc_dp.predictor import strip_identity

    out = []
    for p in rv.owner.op.dist_params(rv.owner):
        p = strip_identity(p)
        while p.owner is not None and isinstance(p.owner.op, DimShuffle) and p.owner.op.is_expand_dims:
            p = strip_identity(p.owner.inputs[0])
        if not isinstance(p, Constant):
            return None
        out.append(np.asarray(p.data, dtype=float))
    return out


#: RV Op name -> its SciPy distribution from the Op's dist_params (PyTensor's parametrisations)
_SCIPY = {
    "NormalRV": lambda mu, sigma: stats.norm(mu, sigma),
    "HalfNormalRV": lambda loc, scale: stats.halfnorm(loc, scale),
    "BetaRV": lambda a, b: stats.beta(a, b),
    "ExponentialRV": lambda scale: stats.expon(scale=scale),
    "GammaRV": lambda shape, scale: stats.gamma(shape, scale=scale),
    "HalfCauchyRV": lambda loc, scale: stats.halfcauchy(loc, scale),
    "CauchyRV": lambda loc, scale: stats.cauchy(loc, scale),
    "StudentTRV": lambda nu, mu, sigma: stats.t(nu, mu, sigma),
    "LogNormalRV": lambda mu, sigma: stats.lognorm(s=sigma, scale=np.exp(mu)),
    "LaplaceRV": lambda mu, b: stats.laplace(mu, b),
    "UniformRV": lambda lo, hi: stats.uniform(lo, hi - lo),
}


def _scipy_logcdf(rv):
    """``value -> log CDF`` from SciPy for a root RV of a common family with constant parameters
    (no PyTensor function to compile), else None."""
    make = _SCIPY.get(type(rv.owner.op).__name__)
    params = _constant_params(rv) if make is not None else None
    if params is None:
        return None
    try:
        dist = make(*params)
    except Exception:  # pragma: no cover - a parametrisation SciPy refuses: use PyMC's
        return None
    return lambda value: np.asarray(dist.logcdf(value), dtype=float)


def _logcdf(rv, name: str, value: float, shape, ctx) -> np.ndarray:
    """``pm.logcdf(rv, np.full(shape, value)).eval()``; with a cache, compiled once per RV.

    Root RVs of common families with constant parameters use SciPy's log CDF instead (both with
    and without a cache, so that the two agree bit for bit): nothing to compile."""
    import pymc as pm

    direct = ctx.cached(("scipy_logcdf", name), lambda: _scipy_logcdf(rv))
    if direct is not None:
        return np.broadcast_to(direct(np.full(shape, value)), shape)
    if not ctx.cache:
        return pm.logcdf(rv, np.full(shape, value)).eval()

    def build():
        v = rv.type()
        return pytensor.function([v], pm.logcdf(rv, v), mode=_EVAL_MODE)

    fn = ctx.cached(("logcdf", name), build)
    return fn(np.full(shape, value))


def _exact_mass_pieces(constraints, ctx) -> list | None:
    """Per free RV, its prior mass in the region: ``("elements", array)`` of independent
    elementwise interval masses, or ``("scalar", mass)``; None when not exact."""
    by_var: dict[str, list] = {}
    for c in constraints:
        if isinstance(c, PotentialConstraint):
            return None
        by_var.setdefault(c.var, []).append(c)
    pieces = []
    for var, cons in by_var.items():
        rv = ctx.free[var]
        if not _is_root(rv, ctx):
            return None
        if all(isinstance(c, IntervalConstraint) for c in cons):
            lo = max([c.lower for c in cons if c.lower is not None], default=None)
            hi = min([c.upper for c in cons if c.upper is not None], default=None)
            if rv.owner.op.ndim_supp != 0:
                return None
            try:
                shape = ctx.shapes[var]
                cdf_hi = np.ones(shape) if hi is None else np.exp(_logcdf(rv, var, hi, shape, ctx))
                cdf_lo = np.zeros(shape) if lo is None else np.exp(_logcdf(rv, var, lo, shape, ctx))
            except Exception:
                return None
            pieces.append(("elements", np.clip(cdf_hi - cdf_lo, 0.0, 1.0)))
        elif len(cons) == 1 and isinstance(cons[0], NormBallConstraint) and cons[0].weights is None:
            op_name = type(rv.owner.op).__name__
            if op_name != "NormalRV":
                return None
            mu, sigma = ctx.cached(
                ("dist_params", var), lambda rv=rv: tuple(np.asarray(p.eval(), float) for p in rv.owner.op.dist_params(rv.owner))
            )
            d = int(np.prod(ctx.shapes[var]))
            if np.any(mu != 0) or np.ptp(np.broadcast_to(sigma, ctx.shapes[var])) > 0:
                return None
            s = float(np.broadcast_to(sigma, ctx.shapes[var]).reshape(-1)[0])
            pieces.append(("scalar", float(stats.chi2.cdf((cons[0].radius / s) ** 2, d))))
        else:
            return None
    return pieces
