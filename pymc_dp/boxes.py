"""Truncation to a box, certified by region rules: the solver for the models users write.

For a factor whose parameters are linear predictors, links and component distributions of
several free RVs (``b0 + b1 * x1 + b2 * x2`` with a free ``sigma``; ``alpha[county] + beta *
floor``; a softmax of utilities; ordered cutpoints), the truncation region is a **box**: each
free RV the factor reads is restricted to an interval (elementwise intervals for RVs whose
elements are not exchangeable, such as ordered cutpoints with different prior means).

Certification. Over a box, :class:`~pymc_dp.intervals.BoxEvaluator` bounds every parameter
expression (offsets, coefficients, scales; affine arithmetic, sound), each parameter becomes a
:class:`~pymc_dp.rules.region.Span` or :class:`~pymc_dp.rules.region.Window`, and the family's
region rule (:func:`~pymc_dp.rules.region.region_lipschitz`, proved per family) bounds ``sup L``
over the box. The per-element bounds are summed over one record and maximised over records. A
box is accepted only when that bound is at most the factor's share, so the certificate never
rests on the search below.

Search (public: it reads the prior, the domains and the data's shapes, never the data). Each
free RV ``v`` gets an interval ``[m_v - t_v s_v^-, m_v + t_v s_v^+]`` around its prior median
``m_v`` in units of its prior spread (``s^-``, ``s^+``: the distances to the 15.9% and 84.1%
prior quantiles), clipped to its support. A side along which the constant does not grow (a
scale's upper side, for a constant decreasing in the scale) is left open. The widths ``t`` are
``T exp(z)``: ``T`` is found by bisection so that the bound meets the share (the bound grows with
the box), and ``z`` by Nelder-Mead to keep the most prior mass
(:func:`~pymc_dp.masses.box_log_mass`: exact from CDFs for independent root RVs, conditional
CDFs averaged over the public prior draws of the parents for hierarchical ones; with
``split="fit"``, :func:`~pymc_dp.reference.fit_utility` instead). When the prior median is not
inside the feasible set, the box is centred at the point of least constant found by a search
(:func:`~pymc_dp.potential.search_minimum` among others; reported as such).

Layering: a solver. It imports the constraints, the region context's prior masses
(:mod:`pymc_dp.masses`), :mod:`pymc_dp.potential` (the search for a point of least constant),
:mod:`pymc_dp.reference` (the fit objective) and the factors, interval evaluator and rules
below them; the driver :mod:`pymc_dp.truncate` and explicit bounds in
:mod:`pymc_dp.certification` call it.
"""

from __future__ import annotations

import copy
import dataclasses
import math
from dataclasses import dataclass
from typing import Callable

import numpy as np
import pytensor.tensor as pt
from scipy import optimize

from pymc_dp.constraints import ElementIntervalConstraint, FactorRegion, Infeasible, IntervalConstraint
from pymc_dp.factors import (
    LINK_SPACES,
    AffineForm,
    Factor,
    IndexForm,
    LinkForm,
    NestedForm,
    PointForm,
    PredictorForm,
    SpaceForm,
)
from pymc_dp.intervals import BoxEvaluator, UnsupportedExpression
from pymc_dp.masses import box_log_mass
from pymc_dp.potential import search_minimum
from pymc_dp.reference import fit_utility
from pymc_dp.region_context import is_exchangeable
from pymc_dp.rules import rule_info
from pymc_dp.rules.base import Bounds
from pymc_dp.rules.coupled_oscillation import has_coupled_oscillation, region_half_coupled_oscillation
from pymc_dp.rules.discrete import min_lipschitz
from pymc_dp.rules.oscillation import has_region_oscillation, region_half_oscillation
from pymc_dp.rules.region import NestedRegion, NoRegionRule, Span, Window, region_lipschitz, region_spec

__all__ = ["BoxModel", "BoxModelUnsupported", "solve_box", "certified_floor", "packed_cholesky_diagonal"]

_LINKS = {"sigmoid": lambda x: 0.5 * (1.0 + np.tanh(0.5 * x)), "exp": np.exp, "log": np.log,
          "softplus": lambda x: np.logaddexp(0.0, x), "tanh": np.tanh}


class BoxModelUnsupported(Exception):
    """A factor :class:`BoxModel` cannot bound over boxes: its family has no region rule, or a
    parameter's form or expression is one the box evaluator does not bound. The solver then
    leaves the factor to the Potential fallback; explicit bounds (``bounds=``) refuse it."""


# --------------------------------------------------------------------------- factor over a box
class BoxModel:
    """A factor's constant over boxes of the free RVs it reads (built once per factor)."""

    def __init__(self, factor: Factor, ctx):
        self.factor = factor
        self.ctx = ctx
        info = factor.info
        if info is None or region_spec(factor.op) is None:
            raise BoxModelUnsupported(f"no region rule for {factor.family}")
        self.exprs: list = []
        self.recipes = [self._recipe(f, info.family, n) for n, f in zip(info.param_names, factor.forms)]
        private = [v for v in ctx.model.data_vars if v.name in ctx.domains]
        try:
            self.evaluator = BoxEvaluator(self.exprs, ctx.free, forbidden=private)
        except UnsupportedExpression as err:
            raise BoxModelUnsupported(str(err)) from None
        self.vars = list(self.evaluator.inputs)
        self.domain = factor.observed_domain(ctx.domains)
        self.obs_shape = tuple(int(s) for s in ctx.numeric(factor.observed.shape))
        self.exact = all(_exact(f) for f in factor.forms)
        #: whether half the family's oscillation may stand in for its constant (where smaller)
        self.oscillation = has_region_oscillation(factor.op) or has_coupled_oscillation(factor.op)

    def lipschitz_only(self) -> "BoxModel":
        """This model with the family's constant alone. The box search is local, and the
        oscillation's landscape can lead it to a worse optimum: :func:`solve_box` searches with
        this model first, and with the oscillation too only where it is smaller at the box found."""
        other = copy.copy(self)
        other.oscillation = False
        return other

    def _add(self, expr) -> int:
        self.exprs.append(expr)
        return len(self.exprs) - 1

    def _recipe(self, form, family: str, pname: str, space: str = "natural") -> Callable:
        ctx = self.ctx
        if isinstance(form, PointForm):
            i = self._add(form.expr)
            if space != "natural":  # a parameter on a link scale that reads no private data
                return lambda R: Window(R[i][0], R[i][1], 0.0, space, None, True)
            return lambda R: Span(*R[i])
        if isinstance(form, PredictorForm):
            parts = form.predictor.region_parts(ctx.domains)
            io, ih = self._add(parts["o"]), self._add(parts["h"])
            if "lo" in parts:
                il, iu = self._add(parts["lo"]), self._add(parts["hi"])
                return lambda R: Window(R[il][0], R[iu][1], 0.0, space, None, False)
            slide = self._slide(form.predictor.slide_parts(ctx.domains), io)
            return lambda R: Window(R[io][0], R[io][1], np.maximum(R[ih][1], 0.0), space, None, True, slide(R))
        if isinstance(form, AffineForm):
            b = form.bounds(ctx.domains)
            io, ih = self._add(0.5 * (b.lo + b.hi)), self._add(0.5 * (b.hi - b.lo))
            return lambda R: Window(R[io][0], R[io][1], np.maximum(R[ih][1], 0.0), space, None, True)
        if isinstance(form, IndexForm):
            b = form.bounds(ctx.domains)
            il, iu = self._add(b.lo), self._add(b.hi)
            return lambda R: Window(R[il][0], R[iu][1], 0.0, space, None, False)
        if isinstance(form, LinkForm):
            mapped = LINK_SPACES.get((family, pname, form.link))
            if mapped is not None:
                return self._recipe(form.inner, family, pname, mapped)
            inner = self._recipe(form.inner, family, pname)
            fn = _LINKS[form.link]

            def link(R):
                w = inner(R)
                lo, hi = (w.lo, w.hi) if isinstance(w, Span) else (w.hull.lo, w.hull.hi)
                with np.errstate(all="ignore"):
                    return Window(fn(np.asarray(lo, float)), fn(np.asarray(hi, float)), 0.0, space, None, False)

            return link
        if isinstance(form, SpaceForm):
            inner = self._recipe(form.inner, family, pname, form.space)
            extras = [self._add(e) for e in form.extra]

            def spaced(R):
                w = inner(R)
                if not extras:
                    return w
                extra = []
                for i in extras:
                    extra += [R[i][0], R[i][1]]
                return Window(w.o_lo, w.o_hi, w.half, w.space, tuple(extra), w.sliding)

            return spaced
        if isinstance(form, NestedForm):
            info = rule_info(form.op)
            if info is None:
                raise BoxModelUnsupported(f"no rule for the component {type(form.op).__name__}")
            subs = [self._recipe(f, info.family, n) for n, f in zip(info.param_names, form.forms)]
            return lambda R: NestedRegion(form.op, tuple(r(R) for r in subs))
        raise BoxModelUnsupported(f"form {type(form).__name__}")

    def _slide(self, parts, io: int) -> Callable:
        """``R -> `` the per-element width of a predictor over the box at a fixed record
        (:meth:`~pymc_dp.predictor.Predictor.slide_parts`), or ``R -> None``."""
        if parts is None:
            return lambda R: None
        terms = [(self._add(coef), halfw, axes, ball) for coef, halfw, axes, ball in parts]

        def slide(R):
            with np.errstate(invalid="ignore", over="ignore"):
                total = np.asarray(R[io][1], float) - np.asarray(R[io][0], float)
                for i, halfw, axes, ball in terms:
                    width = np.asarray(R[i][1], float) - np.asarray(R[i][0], float)
                    if ball:
                        part = halfw * np.sqrt(np.sum(np.square(width), axis=axes))
                    else:
                        part = np.sum(width * halfw, axis=axes) if axes else width * halfw
                    total = total + part
            return np.where(np.isnan(total), np.inf, total)  # NaN fails closed

        return slide

    def params(self, box: dict) -> tuple:
        R = self.evaluator(box)
        return tuple(r(R) for r in self.recipes)

    def region_L(self, box: dict) -> float:
        """A certified bound on the factor's per-record constant over ``box`` (inf: none): the
        family's region rule, or half its oscillation over the box where the family has one and
        it is smaller (it stands in for the constant in the lift, docs/theory/oscillation.md)."""
        return self.region_bound(box)[0]

    def region_bound(self, box: dict) -> tuple[float, str]:
        """``(L, bound)``: :meth:`region_L` and what certifies it, ``"lipschitz"`` or
        ``"oscillation"``."""
        try:
            params = self.params(box)
            with np.errstate(all="ignore"):
                per_element = region_lipschitz(self.factor.op, self.domain, params)
                half_osc = region_half_oscillation(self.factor.op, self.domain, params) if self.oscillation else None
                coupled = region_half_coupled_oscillation(self.factor.op, self.domain, params) if self.oscillation else None
        except (NoRegionRule, UnsupportedExpression, FloatingPointError):
            return math.inf, "lipschitz"
        by_constant = self._per_record(per_element)
        if coupled is not None:  # each is a sound bound on half the oscillation: the smaller stands
            half_osc = coupled if half_osc is None else np.minimum(half_osc, coupled)
        if half_osc is None:
            return by_constant, "lipschitz"
        by_oscillation = self._per_record(half_osc)
        if by_oscillation < by_constant:
            return by_oscillation, "oscillation"
        return by_constant, "lipschitz"

    def _per_record(self, per_element) -> float:
        """The largest sum over one record's elements (inf where the shapes do not pair)."""
        per_element = np.asarray(per_element, dtype=float)
        if per_element.shape != self.obs_shape:
            while per_element.ndim > len(self.obs_shape) and per_element.shape[0] == 1:
                per_element = per_element[0]  # broadcast axes in front
            try:
                per_element = np.broadcast_to(per_element, self.obs_shape)
            except ValueError:  # shapes this code cannot pair with records: no certificate
                return math.inf
        if per_element.ndim > 1:
            per_element = per_element.reshape(per_element.shape[0], -1).sum(axis=1)
        value = float(np.max(per_element)) if per_element.size else 0.0
        return value if not math.isnan(value) else math.inf


def _exact(form) -> bool:
    return _inexact_reason(form) is None


def _inexact_reason(form) -> str | None:
    """Why a form's per-record range is a sound bound rather than exact (None when exact)."""
    if isinstance(form, PredictorForm):
        return form.predictor.inexact_reason
    if isinstance(form, (LinkForm, SpaceForm)):
        return _inexact_reason(form.inner)
    if isinstance(form, NestedForm):
        return next((r for r in map(_inexact_reason, form.forms) if r), None)
    return None


# --------------------------------------------------------------------------- parametrisation
@dataclass
class _Axis:
    """How one free RV's interval is parametrised (public: prior draws and support only)."""

    name: str
    shape: tuple
    centre: np.ndarray
    down: np.ndarray  # prior spread below the centre
    up: np.ndarray  # prior spread above the centre
    support: tuple[float, float]
    uniform: bool  # exchangeable elements: one interval for all
    open_lo: bool = False
    open_hi: bool = False
    shift: float = 0.0  # the box's centre, in prior spreads from the median
    #: never truncated (a simplex, a correlation matrix): always its whole support's hull
    fixed: bool = False
    #: for an RV split into its elements: this axis's element (flat index) and the RV's shape
    element: int | None = None
    rv_shape: tuple = ()

    def at(self, shift: float) -> np.ndarray:
        """The point ``shift`` prior spreads away from the median, inside the support."""
        step = np.where(shift >= 0, self.up, self.down)
        lo_s, hi_s = self.support
        point = self.centre + shift * step
        if math.isfinite(lo_s) and shift < 0:  # approach a finite end geometrically, never reach it
            point = np.where(point <= lo_s, lo_s + (self.centre - lo_s) * np.exp(shift * step / np.maximum(self.centre - lo_s, 1e-300)), point)
        if math.isfinite(hi_s) and shift > 0:
            point = np.where(point >= hi_s, hi_s - (hi_s - self.centre) * np.exp(-shift * step / np.maximum(hi_s - self.centre, 1e-300)), point)
        return point

    def interval(self, t: float) -> tuple[np.ndarray, np.ndarray]:
        lo_s, hi_s = self.support
        if math.isinf(t) or self.fixed:
            lo = np.full(self.shape, lo_s)
            hi = np.full(self.shape, hi_s)
        else:
            c = self.at(self.shift)
            lo = np.maximum(c - t * self.down, lo_s)
            hi = np.minimum(c + t * self.up, hi_s)
        if self.open_lo:
            lo = np.full(self.shape, lo_s)
        if self.open_hi:
            hi = np.full(self.shape, hi_s)
        return lo, hi


#: a vector RV with at most this many elements, not exchangeable or read by position (coefficients
#: b[0], b[1], ... of different columns), gets one axis per element: its own centre and width
_SPLIT_MAX = 8


def _axes(name: str, ctx, cutpoints: set) -> list[_Axis] | None:
    """The search axes of free RV ``name``: one for the whole RV, or one per element.

    An ordered vector is split only when it holds ordered cutpoints (their region rule asks for
    disjoint increasing boxes, which an elementwise interval keeps ordered); otherwise it keeps
    one interval for all its elements, which an increasing map keeps ordered."""
    ax = _axis(name, ctx)
    if ax is None or ax.fixed:
        return None if ax is None else [ax]
    size = int(np.prod(ax.shape)) if ax.shape else 1
    transform = ctx.model.rvs_to_transforms.get(ctx.free[name])
    ordered = type(transform).__name__ == "Ordered"
    diagonal = packed_cholesky_diagonal(transform, size)
    if diagonal is None and (not (2 <= size <= _SPLIT_MAX) or (ordered and name not in cutpoints)):
        return [ax]
    draws = np.asarray(_search_draws(ctx)[name], dtype=float).reshape(len(_search_draws(ctx)[name]), -1)
    q = np.quantile(draws, [0.158655, 0.5, 0.841345], axis=0)
    out = []
    for i in range(size):
        # a packed Cholesky factor: its diagonal is positive, the rest real
        support = ax.support if diagonal is None else ((0.0, math.inf) if diagonal[i] else (-math.inf, math.inf))
        out.append(_Axis(name, (), np.asarray(q[1, i]), np.asarray(max(q[1, i] - q[0, i], 1e-12)),
                         np.asarray(max(q[2, i] - q[1, i], 1e-12)), support, False, element=i, rv_shape=ax.shape))
    return out


def packed_cholesky_diagonal(transform, size: int) -> np.ndarray | None:
    """For the packed lower Cholesky factor of ``pm.LKJCholeskyCov`` (transform
    ``CholeskyCovPacked``), a mask of its diagonal elements; None for any other RV.

    Every element gets its own axis: the box ``diag in (0, inf)``, the rest in ``R``, lies in the
    factor's support, so an elementwise interval transform restricts its prior (LKJ correlation
    times the scales' prior, through PyMC's own density of the packed vector) to the box."""
    if type(transform).__name__ != "CholeskyCovPacked":
        return None
    mask = np.zeros(size, dtype=bool)
    mask[np.asarray(pt.as_tensor_variable(transform.diag_idxs).eval(), dtype=int)] = True
    return mask


def _assemble(pairs) -> dict:
    """``name -> (lo, hi)`` arrays from ``(axis, (lo, hi))`` pairs (element axes filled in)."""
    box: dict = {}
    for ax, (lo, hi) in pairs:
        if ax.element is None:
            box[ax.name] = (lo, hi)
            continue
        if ax.name not in box:
            box[ax.name] = (np.full(ax.rv_shape, np.nan), np.full(ax.rv_shape, np.nan))
        blo, bhi = box[ax.name]
        blo.reshape(-1)[ax.element] = float(np.asarray(lo).reshape(-1)[0])
        bhi.reshape(-1)[ax.element] = float(np.asarray(hi).reshape(-1)[0])
    return box


def _axis(name: str, ctx) -> _Axis | None:
    lo_s, hi_s = ctx.support(name)
    rv = ctx.free[name]
    transform = ctx.model.rvs_to_transforms.get(rv)
    draws = np.asarray(_search_draws(ctx)[name], dtype=float)
    shape = draws.shape[1:]
    if math.isnan(lo_s):
        tname = type(transform).__name__
        if tname in ("Ordered", "CholeskyCovPacked"):  # real elements (a Cholesky factor's diagonal: per element in _axes)
            lo_s, hi_s = -math.inf, math.inf
        else:
            # a simplex or another constrained vector: not truncated, only bounded by its hull
            # (the region rule then certifies the factor whatever its value)
            hull = (0.0, 1.0) if tname in ("SimplexTransform", "StickBreaking") else (-math.inf, math.inf)
            zeros = np.zeros(shape)
            return _Axis(name, shape, zeros, zeros + 1, zeros + 1, hull, True, fixed=True)
    uniform = is_exchangeable(rv)
    pooled = draws.reshape(len(draws), -1)
    if uniform:
        q = np.quantile(pooled, [0.158655, 0.5, 0.841345])
        centre = np.full(shape, q[1])
        down = np.full(shape, max(q[1] - q[0], 1e-12))
        up = np.full(shape, max(q[2] - q[1], 1e-12))
    else:
        q = np.quantile(pooled, [0.158655, 0.5, 0.841345], axis=0)
        centre = q[1].reshape(shape)
        down = np.maximum(q[1] - q[0], 1e-12).reshape(shape)
        up = np.maximum(q[2] - q[1], 1e-12).reshape(shape)
    return _Axis(name, shape, centre, down, up, (lo_s, hi_s), uniform)


def _search_draws(ctx) -> dict:
    """The public draws the box's axes are placed by: the admissible prior's with
    ``split="fit"`` (:mod:`pymc_dp.reference`), else the prior's."""
    return ctx.reference.draws if getattr(ctx, "reference", None) is not None else ctx.draws


# --------------------------------------------------------------------------- the solver
def solve_box(factor: Factor, share: float, ctx):
    """A box of the factor's free RVs on which its certified constant is at most ``share``.

    Returns a :class:`~pymc_dp.constraints.FactorRegion` (solver ``"box"``), or None when the
    factor's family has no region rule or its parameters use an operation the evaluator does
    not bound (the caller then falls back to the Potential solver). Raises
    :class:`~pymc_dp.constraints.Infeasible` when no box around the best point found fits.
    """
    def build():
        try:
            bm = BoxModel(factor, ctx)
        except (BoxModelUnsupported, NoRegionRule):
            return None
        cutpoints = set()
        for form in factor.forms:
            if isinstance(form, SpaceForm) and form.space.startswith("ordered"):
                for e in form.extra:
                    cutpoints.update(ctx.free_rvs_of(e))
        groups = [_axes(n, ctx, cutpoints) for n in bm.vars]
        if any(g is None for g in groups):
            return None
        return bm, [a for g in groups for a in g]

    built = ctx.cached(ctx.key(factor, "box"), build)
    if built is None:
        return None
    bm, axes = built
    # The constant's search first. Where the family has an oscillation that is smaller at the box
    # found (or no box fits), the oscillation's search too: it is local, and either landscape
    # can lead to the better box, so the one of more prior mass is kept.
    by_constant = bm.lipschitz_only() if bm.oscillation else bm
    searches = [ctx.cached(ctx.key(factor, "box_search_lipschitz"), lambda: _Search(by_constant, axes, ctx))]
    first = searches[0].solve(share)
    found = [] if first is None else [(searches[0], first)]
    if bm.oscillation and (first is None or bm.region_bound(first[0])[1] == "oscillation"):
        searches.append(ctx.cached(ctx.key(factor, "box_search"), lambda: _Search(bm, axes, ctx)))
        second = searches[1].solve(share)
        if second is not None:
            found.append((searches[1], second))
    min_L = min(s.min_L for s in searches)
    if not found and not math.isfinite(min_L):
        return None  # no box has a finite certified bound: let the Potential solver try
    if not found:
        floor = certified_floor(factor, ctx)
        if floor is not None and floor > share:
            raise Infeasible(factor.name, floor, certified=True)
        raise Infeasible(factor.name, min_L, certified=False)
    search, (box, L, _) = max(found, key=lambda item: item[1][2])
    constraints = []
    for ax in axes:
        if ax.fixed or (ax.element is not None and ax.element > 0):  # one constraint per RV
            continue
        lo, hi = box[ax.name]
        if ax.element is not None:
            ax = dataclasses.replace(ax, uniform=False)
        lo_s, hi_s = ax.support
        has_lo = bool(np.any(lo > lo_s))
        has_hi = bool(np.any(hi < hi_s))
        if not (has_lo or has_hi):
            continue
        if ax.uniform or (np.all(lo == lo.reshape(-1)[0]) and np.all(hi == hi.reshape(-1)[0])):
            constraints.append(IntervalConstraint(
                ax.name,
                float(np.max(lo)) if has_lo else None,
                float(np.min(hi)) if has_hi else None,
            ))
        else:
            constraints.append(ElementIntervalConstraint(
                ax.name, tuple(float(v) for v in np.ravel(lo)), tuple(float(v) for v in np.ravel(hi))))
    region = FactorRegion(factor, share, constraints, "box", min_L, search.bm.region_bound(box)[1])
    region.certified_lipschitz = L
    region.exact = bm.exact
    region.inexact_reason = next((r for r in map(_inexact_reason, factor.forms) if r), None)
    return region


def certified_floor(factor: Factor, ctx) -> float | None:
    """The family's proved smallest per-record constant (``rules.discrete.min_lipschitz``) for
    the factor's fixed parameters, or None when the family states none."""
    params = []
    for form in factor.forms:
        if isinstance(form, PointForm) and not ctx.free_rvs_of(form.expr):
            params.append(Bounds.point(ctx.numeric(form.expr)))
        else:
            params.append(None)
    try:
        floor = min_lipschitz(factor.op, ctx.domains[factor.observed_container], tuple(params))
    except Exception:  # a floor is a refinement of a message, never needed for soundness
        return None
    if floor is None:
        return None
    shape = tuple(int(s) for s in ctx.numeric(factor.observed.shape))
    per_record = int(np.prod(shape[1:])) if len(shape) > 1 else 1
    return float(floor) * per_record


class _Search:
    """The box search of :func:`solve_box` for one factor (share-independent parts cached)."""

    def __init__(self, bm: BoxModel, axes: list[_Axis], ctx):
        self.bm = bm
        self.axes = axes
        self.ctx = ctx
        if getattr(ctx, "reference", None) is not None:
            self.mass = lambda box: fit_utility(box, ctx.reference)
        else:
            self.mass = lambda box: box_log_mass(box, ctx)
        self.cache: dict = {}
        self.moving = [ax for ax in axes if not ax.fixed]
        self.median_L = bm.region_L(self.box(np.zeros(len(self.moving))))
        self.min_L = self.median_L
        self._best_shift = None
        self._open_sides()

    def _point_L(self, shifts) -> float:
        pairs = [(ax, (ax.at(float(c)), ax.at(float(c)))) for ax, c in zip(self.moving, shifts)]
        pairs += [(ax, ax.interval(math.inf)) for ax in self.axes if ax.fixed]
        return self.bm.region_L(_assemble(pairs))

    def best_shift(self) -> np.ndarray:
        """The centre (in prior spreads from the median) with the least constant a search finds.

        Candidates: a Nelder-Mead search of the per-parameter constant in the model's own
        unconstrained space (PyMC's value transforms keep orders and supports, which a search in
        the axes' space breaks: ordered cutpoints), from the best public prior draws; and a
        Nelder-Mead search over the axes' shifts from the median and a few coordinate starts.
        The best is polished by Powell's line searches (a constant that needs one coefficient at
        1e-4 of its prior spread, as a cost in dollars times a utility weight, is found)."""
        if self._best_shift is None:
            k = len(self.moving)
            f = lambda c: self._point_L(np.clip(c, -40.0, 40.0))
            best_c, best = np.zeros(k), self.median_L
            starts = [s * np.eye(k)[i] for i in range(k) for s in (-6.0, 6.0, 20.0)]
            model_c = self._model_space_minimum()
            if model_c is not None:
                starts.insert(0, model_c)
            for c0 in starts:
                v0 = f(c0)
                if v0 < best:
                    best_c, best = c0, v0
            simplex = np.vstack([best_c, best_c + np.eye(k)])  # unit steps: scipy's default is 5% of x0 (0 here)
            with np.errstate(invalid="ignore"):  # a search: an infinite constant makes scipy's inf - inf
                res = optimize.minimize(f, best_c, method="Nelder-Mead",
                                        options={"maxfev": 100 + 50 * k, "xatol": 1e-3, "fatol": 1e-9, "initial_simplex": simplex})
            if res.fun < best:
                best_c, best = np.clip(res.x, -40.0, 40.0), float(res.fun)
            with np.errstate(all="ignore"):
                res = optimize.minimize(f, best_c, method="Powell",
                                        options={"maxfev": 200 + 100 * k, "xtol": 1e-10, "ftol": 1e-12})
            if np.isfinite(res.fun) and res.fun < best:
                best_c, best = np.clip(res.x, -40.0, 40.0), float(res.fun)
            self._best_shift = best_c
            self.min_L = min(self.min_L, best)
        return self._best_shift

    def _closest_centre(self, far: np.ndarray, share: float, fraction: float = 0.5) -> np.ndarray:
        """On the segment from the median (shift 0) to ``far`` (a point of least constant), the
        point nearest the median whose constant leaves room for a box: at most half the way from
        the least constant to the share. A minimiser of the constant can lie in a degenerate
        corner of the prior (a negative binomial whose mean is e^200, flat over the counts);
        the box's mass is larger near the median."""
        target = self.min_L + fraction * (share - self.min_L)
        lo, hi = 0.0, 1.0
        if self._point_L(far) > target:
            return far
        for _ in range(50):
            mid = 0.5 * (lo + hi)
            if self._point_L(mid * far) <= target:
                hi = mid
            else:
                lo = mid
        return self._toward_median(hi * far, target)

    def _toward_median(self, centre: np.ndarray, target: float) -> np.ndarray:
        """Move each axis of ``centre`` on its own toward its prior median while the constant
        stays at most ``target``. The segment above moves every axis by one fraction; where the
        constant needs only some of them away from the median (a scale up, the group effects
        anywhere), the others go back to their median, where the prior puts its mass."""
        centre = np.array(centre, dtype=float)
        # the least-moved axes first: the one that needs moving most (a scale) goes last, so
        # that the others are not held off their median by the scale's own step back
        for i in np.argsort(np.abs(centre), kind="stable"):
            if centre[i] == 0.0:
                continue
            trial = centre.copy()
            trial[i] = 0.0
            if self._point_L(trial) <= target:
                centre = trial
                continue
            lo, hi = 0.0, 1.0  # fraction of the axis's shift kept: hi is feasible
            for _ in range(30):
                mid = 0.5 * (lo + hi)
                trial[i] = mid * centre[i]
                if self._point_L(trial) <= target:
                    hi = mid
                else:
                    lo = mid
            centre[i] = hi * centre[i]
        return centre

    def _neutral_point(self, names) -> dict | None:
        """A parameter value where linear predictors are constant and ordered categories equally
        likely: every free RV whose support holds 0 at 0 (coefficients, intercepts, utilities),
        ordered cutpoints at the quantiles ``k/K`` of their link (logit, or probit with its
        sigma), other RVs at their prior median. Public, like the prior. Local searches miss this
        point when the constant is a maximum of many terms (ordered logistic, softmax)."""
        ctx = self.ctx
        point = {}
        cut_quantiles = {}
        for form in self.bm.factor.forms:
            if isinstance(form, SpaceForm) and form.space.startswith("ordered") and form.extra:
                for var in ctx.free_rvs_of(form.extra[0]):
                    K = int(np.prod(ctx.shapes[var])) + 1
                    q = np.arange(1, K) / K
                    if form.space == "ordered-logistic":
                        cut_quantiles[var] = np.log(q / (1 - q))
                    else:
                        from scipy.special import ndtri

                        sigma = 1.0
                        if len(form.extra) > 1 and not ctx.free_rvs_of(form.extra[1]):
                            sigma = float(np.mean(ctx.numeric(form.extra[1])))
                        cut_quantiles[var] = sigma * ndtri(q)
        for k in names:
            shape = ctx.shapes[k]
            if k in cut_quantiles:
                point[k] = np.reshape(cut_quantiles[k], shape)
                continue
            lo_s, hi_s = ctx.support(k)
            if math.isnan(lo_s):
                return None
            if lo_s < 0 < hi_s:
                point[k] = np.zeros(shape)
            else:
                point[k] = np.median(np.asarray(ctx.draws[k], dtype=float), axis=0)
        return point

    def _model_space_minimum(self) -> np.ndarray | None:
        """The shifts of the point where the factor's per-parameter constant is least, searched in
        the model's unconstrained space (see :meth:`best_shift`); None when it cannot be run."""
        ctx = self.ctx
        try:
            L = ctx.lipschitz(self.bm.factor)
            names = ctx.free_rvs_of(L)
            if not names or set(names) - {ax.name for ax in self.axes}:
                return None
            fn = ctx.compile_in(L, names)
            n = min(len(next(iter(ctx.draws.values()))), 200)
            values = np.array([float(fn(*(ctx.draws[k][i] for k in names))) for i in range(n)])
            values = np.where(np.isfinite(values), values, np.inf)
            best, point = search_minimum(L, names, values, ctx, starts=3)
        except Exception:  # a search that cannot run leaves the other candidates
            return None
        neutral = self._neutral_point(names)
        if neutral is not None:
            try:
                value = float(fn(*(np.asarray(neutral[k], dtype=ctx.free[k].dtype) for k in names)))
            except Exception:
                value = math.inf
            if np.isfinite(value) and (point is None or not np.isfinite(best) or value < best):
                best, point = value, neutral
        if point is None or not np.isfinite(best):
            return None
        shifts = []
        for ax in self.moving:
            x = np.asarray(point.get(ax.name, ax.centre), dtype=float)
            x = x.reshape(-1)[ax.element] if ax.element is not None else x
            step = np.where(x >= ax.centre, ax.up, ax.down)
            shifts.append(float(np.mean((x - ax.centre) / step)))
        return np.clip(np.array(shifts), -40.0, 40.0)

    def box(self, t) -> dict:
        """The box with widths ``t`` (one per free axis; fixed axes are their whole hull)."""
        t = iter(np.atleast_1d(t))
        return _assemble((ax, ax.interval(math.inf if ax.fixed else float(next(t)))) for ax in self.axes)

    def L(self, t) -> float:
        key = tuple(float(x) for x in np.atleast_1d(t))
        if key not in self.cache:
            self.cache[key] = self.bm.region_L(self.box(np.asarray(key)))
        return self.cache[key]

    def _open_sides(self):
        """Open a side of an axis when the bound does not grow along it (a scale's upper side
        for a constant that decreases with the scale): more prior mass at no cost."""
        t_ref = np.full(len(self.moving), 0.5)
        base = self.bm.region_L(self.box(t_ref))
        if not math.isfinite(base):
            t_ref = np.full(len(self.moving), 0.05)
            base = self.bm.region_L(self.box(t_ref))
        if not math.isfinite(base):
            return
        for ax in self.moving:
            for side in ("open_hi", "open_lo"):
                setattr(ax, side, True)
                value = self.bm.region_L(self.box(t_ref))
                if not (value <= base * (1 + 1e-9) + 1e-12):
                    setattr(ax, side, False)
        self.cache.clear()

    def _boundary(self, w: np.ndarray, share: float) -> tuple[float, float] | None:
        """The largest ``T`` with ``L(T w) <= share`` (bisection; inf when the full support fits)."""
        if self.L(np.full(len(w), math.inf)) <= share:
            return math.inf, self.L(np.full(len(w), math.inf))
        if self.L(0.0 * w) > share:
            return None
        lo, hi = 0.0, 1.0
        while self.L(hi * w) <= share and hi < 1e8:
            lo, hi = hi, hi * 2.0
        if hi >= 1e8:
            return lo, self.L(lo * w)
        for _ in range(40):  # the box is certified where it stops: precision only costs mass
            mid = 0.5 * (lo + hi) if lo > 0 else 0.5 * hi
            if self.L(mid * w) <= share:
                lo = mid
            else:
                hi = mid
            if lo > 0 and hi - lo <= 2e-4 * hi:
                break
        return lo, self.L(lo * w)

    def solve(self, share: float):
        k = len(self.moving)
        if k == 0:
            return ({}, self.min_L) if self.min_L <= share else None
        if self.median_L <= share:
            return self._solve_at(np.zeros(k), share)
        # the prior median is outside: centre the box where L is least, then back toward the
        # median; how far back trades the centre's prior mass against room for the box's widths
        far = self.best_shift()
        if self.min_L > share:
            return None
        best = None
        for fraction in self._CENTRE_FRACTIONS:
            found = self._solve_at(self._closest_centre(far, share, fraction), share)
            if found is not None and (best is None or found[2] > best[2]):
                best = found
        return best

    #: targets for the centre's constant, as fractions of the way from the least constant found to
    #: the share (the rest is left for the box's widths)
    _CENTRE_FRACTIONS = (0.5, 0.15, 0.03)

    def _solve_at(self, shifts: np.ndarray, share: float):
        """The widest box (by prior mass) around the centre ``shifts`` whose bound fits the share:
        ``(box, L, log mass)`` or None."""
        k = len(self.moving)
        if any(ax.shift != c for ax, c in zip(self.moving, shifts)):
            for ax, c in zip(self.moving, shifts):
                ax.shift = float(c)
            self.cache.clear()

        def evaluate(z):
            w = np.exp(np.concatenate([[0.0], z]) - np.max(np.concatenate([[0.0], z])))
            found = self._boundary(w, share)
            if found is None:
                return -math.inf, None
            T, L = found
            t = T * w
            box = self.box(t)
            return self.mass(box), (box, L)

        best = {"value": -math.inf, "result": None}

        def objective(z):
            value, result = evaluate(np.clip(z, -12, 12))
            if result is not None and (value > best["value"] or best["result"] is None):
                best.update(value=value, result=result)
            return -value if math.isfinite(value) else 1e300

        objective(np.zeros(k - 1))
        if k > 1:
            optimize.minimize(objective, np.zeros(k - 1), method="Nelder-Mead",
                              options={"maxfev": 20 + 12 * k, "xatol": 2e-2, "fatol": 1e-3,
                                       "initial_simplex": np.vstack([np.zeros(k - 1), 1.5 * np.eye(k - 1)])})
        result = best["result"]
        if result is None:
            return None
        box, L = result
        # the certificate rests on this evaluation alone
        L = self.bm.region_L(box)
        if not L <= share:  # pragma: no cover - the bisection only keeps feasible boxes
            return None
        return box, L, best["value"]
