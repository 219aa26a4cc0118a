"""Region rules: a certified bound on a factor's constant over a whole truncation region.

A per-record rule (:func:`~pymc_dp.rules.base.log_density_range`) gives ``L(theta)`` at one
parameter value. A truncation is a *region* of parameter values, and what the certificate needs
is ``sup_{theta in region} L(theta)``. This module computes that sup from the per-record rule and
a small, proved description of how ``L`` moves with each parameter (:class:`RegionSpec`),
registered per RV Op next to the rule (derivations: ``docs/theory/glm.md``, ``docs/rules/README.md``).

Parameters of a factor over a region come in two kinds:

* :class:`Span` -- a parameter that reads no private data, ranging over ``[lo, hi]`` (elementwise)
  as ``theta`` ranges over the region;
* :class:`Window` -- a parameter that reads the record (a linear predictor): at each ``theta``
  it ranges, as the record ranges over its domain, over ``[o(theta) - h(theta), o(theta) +
  h(theta)]``, where over the region ``o(theta)`` lies in ``[o_lo, o_hi]`` and ``h(theta) <= half``.

What a :class:`RegionSpec` may state, and why each statement gives a sound sup:

* **window="ends"** (docs/theory/glm.md#lemma-c): for each fixed value of the other parameters, the
  constant of a window of fixed half-width ``h`` sliding over offsets ``o in [o_lo, o_hi]`` is
  largest at an end. With lemma B (a range over a larger window is larger, so ``h = half``) the
  windows ``[o_lo - half, o_lo + half]`` and ``[o_hi - half, o_hi + half]`` cover the sup.
  Holds for likelihoods concave in the predictor whose pair functions have no interior maximum
  (checked per family: logistic, Poisson, negative binomial with fixed ``alpha``, Gamma, Normal,
  Laplace, censored Normal).
* **window="hull"** (always sound): one window ``[o_lo - half, o_hi + half]``, the union of
  every window the region can produce (lemma B).
* a :class:`Span` parameter is ``"decreasing"`` / ``"increasing"`` (``L`` is monotone in it for
  every value of the others: evaluate at one end), ``"ends"`` (``L`` is quasi-convex in it for
  every value of the others: evaluate at both ends), ``"point"`` (the rule needs it fixed), or
  :class:`BranchAndBound` (lemma D: ``L`` is Lipschitz in it with a computable constant).
  A function quasi-convex in each coordinate separately attains its sup over a box at a vertex
  (fix all but one coordinate, move it to an end, repeat), so the sup over the region is the
  largest value over the product of the end candidates.
* **custom** -- the family computes the region sup itself (softmax, ordered logistic: the
  derivations in their docstrings).

The bound is per observed element; the caller sums the elements of one record and takes the
largest record, which bounds the sup of the per-record constant (a sup of a sum is at most the
sum of the sups).
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

import numpy as np

from pymc_dp.exceptions import UnsupportedFactorError
from pymc_dp.rules.base import Bounds, Nested, element_lipschitz, rule_info
from pymc_dp.rules.namespaces import NP

__all__ = [
    "Span",
    "Window",
    "NestedRegion",
    "BranchAndBound",
    "RegionSpec",
    "register_region",
    "region_spec",
    "region_lipschitz",
    "certified_sup_1d",
    "NoRegionRule",
]


class NoRegionRule(UnsupportedFactorError):
    """The family has no region rule for this combination of parameters."""


@dataclass(frozen=True)
class Span:
    """A parameter that reads no private data, over a region: elementwise ``[lo, hi]``."""

    lo: Any
    hi: Any

    @classmethod
    def point(cls, value: Any) -> "Span":
        v = np.asarray(value, dtype=float)
        return cls(v, v)

    @property
    def is_point(self) -> bool:
        return bool(np.all(np.asarray(self.lo) == np.asarray(self.hi)))


@dataclass(frozen=True)
class Window:
    """A parameter that reads the record, over a region.

    At each ``theta`` of the region it ranges over ``[o(theta) - h(theta), o(theta) + h(theta)]``
    (on the scale ``space``, see :class:`~pymc_dp.rules.base.Bounds`) as the record ranges over
    its domain, with ``o(theta) in [o_lo, o_hi]`` and ``0 <= h(theta) <= half``. ``extra``: the
    space's extra bounds over the region (ordered cutpoints), passed on unchanged.
    """

    o_lo: Any
    o_hi: Any
    half: Any
    space: str = "natural"
    extra: Any = None
    #: False when the window does not slide at a fixed width (a table's hull, a link of a
    #: window): only its hull may be used, whatever the family's spec says
    sliding: bool = True
    #: per element, an upper bound on the width of the parameter's range over the region at one
    #: *fixed* record (``sup_x [sup_theta eta(x, theta) - inf_theta eta(x, theta)]``), or None when
    #: unknown; it shrinks with the region, unlike the hull (the coupled oscillation,
    #: :mod:`pymc_dp.rules.coupled_oscillation`)
    slide: Any = None

    @property
    def hull(self) -> Bounds:
        return Bounds(np.asarray(self.o_lo) - self.half, np.asarray(self.o_hi) + self.half, self.space, self.extra)

    def ends(self) -> list[Bounds]:
        lo, hi, h = np.asarray(self.o_lo, float), np.asarray(self.o_hi, float), np.asarray(self.half, float)
        out = [Bounds(lo - h, lo + h, self.space, self.extra)]
        if not np.array_equal(lo, hi):
            out.append(Bounds(hi - h, hi + h, self.space, self.extra))
        return out


@dataclass(frozen=True)
class NestedRegion:
    """A component distribution over a region (see :class:`~pymc_dp.rules.base.Nested`)."""

    op: Any
    params: tuple


@dataclass(frozen=True)
class BranchAndBound:
    """A parameter in which ``L`` is Lipschitz (docs/theory/glm.md#lemma-d).

    ``lipschitz(op, domain, params, lo, hi)`` returns, elementwise, a constant ``K`` with
    ``|L(v) - L(v')| <= K |v - v'|`` for ``v, v'`` in ``[lo, hi]`` and the other parameters
    anywhere in their candidates (``params`` holds them as :class:`Bounds`; the B&B parameter's
    own entry is ``None``). ``log_scale``: run the search in ``ln v`` (``K`` is then with
    respect to ``ln v``).
    """

    lipschitz: Callable[..., Any]
    log_scale: bool = False


@dataclass(frozen=True)
class RegionSpec:
    """How a family's constant moves over a region; see the module docstring."""

    window: str = "hull"
    params: Mapping[str, Any] = field(default_factory=dict)
    custom: Callable[..., Any] | None = None

    def __post_init__(self):
        if self.window not in ("ends", "hull"):
            raise ValueError(f"window={self.window!r}")


_SPECS: dict[type, RegionSpec] = {}


def register_region(op_type: type, spec: RegionSpec) -> None:
    """Register the :class:`RegionSpec` of ``op_type``'s rule."""
    _SPECS[op_type] = spec


def region_spec(op) -> RegionSpec | None:
    for klass in type(op).__mro__:
        if klass in _SPECS:
            return _SPECS[klass]
    return None


def _point_bounds(value) -> Bounds:
    return Bounds.point(np.asarray(value, dtype=float))


def region_lipschitz(op, domain, params: tuple, names: tuple[str, ...] | None = None) -> np.ndarray:
    """A sound bound on ``sup L`` over the region, per observed element (NumPy).

    Parameters
    ----------
    op : RandomVariable
        The factor's Op.
    domain : Domain
        The observed data's domain.
    params : tuple of Span, Window or NestedRegion
        The parameters over the region, in the Op's order.
    names : tuple of str, optional
        The parameters' names (default: the rule's ``param_names``).

    Raises
    ------
    NoRegionRule
        When the family has no region rule, or a parameter varies in a way it does not cover.
    """
    spec = region_spec(op)
    family = type(op).__name__
    if spec is None:
        raise NoRegionRule(f"no region rule is registered for {family}")
    if spec.custom is not None:
        return np.asarray(spec.custom(op, domain, params), dtype=float)
    if names is None:
        info = rule_info(op)
        names = info.param_names if info is not None else tuple(f"p{i}" for i in range(len(params)))
    choices: list[list] = []
    bnb: tuple[int, Span, BranchAndBound] | None = None
    for i, (name, p) in enumerate(zip(names, params)):
        if isinstance(p, Window):
            choices.append(p.ends() if (spec.window == "ends" and p.sliding) else [p.hull])
        elif isinstance(p, Span):
            mode = spec.params.get(name, "point")
            if p.is_point:
                choices.append([_point_bounds(p.lo)])
            elif mode == "decreasing":
                choices.append([_point_bounds(p.lo)])
            elif mode == "increasing":
                choices.append([_point_bounds(p.hi)])
            elif mode == "ends":
                choices.append([_point_bounds(p.lo), _point_bounds(p.hi)])
            elif isinstance(mode, BranchAndBound):
                if bnb is not None:
                    raise NoRegionRule(f"{family}: at most one parameter may be bounded by branch and bound")
                bnb = (i, p, mode)
                choices.append([None])
            else:
                raise NoRegionRule(
                    f"the {family} parameter {name!r} must be fixed (it may not vary over the truncation region)"
                )
        else:
            raise NoRegionRule(f"{family}: parameter {name!r} of kind {type(p).__name__} needs a custom region rule")
    best = None
    for combo in itertools.product(*choices):
        if bnb is None:
            value = np.asarray(element_lipschitz(op, domain, tuple(combo), NP), dtype=float)
        else:
            i, span, mode = bnb

            def at(v, combo=combo, i=i):
                full = list(combo)
                full[i] = _point_bounds(v)
                return np.asarray(element_lipschitz(op, domain, tuple(full), NP), dtype=float)

            def lip(lo, hi, combo=combo, i=i, mode=mode):
                return np.asarray(mode.lipschitz(op, domain, combo, lo, hi), dtype=float)

            value = certified_sup_1d(at, span.lo, span.hi, lip, log_scale=mode.log_scale)
        best = value if best is None else np.maximum(best, value)
    # a rule evaluated at an infinite or zero end can give NaN: no certificate there
    return np.where(np.isnan(best), np.inf, best)


def certified_sup_1d(
    f: Callable[[Any], np.ndarray],
    lo: Any,
    hi: Any,
    lipschitz: Callable[[Any, Any], np.ndarray],
    *,
    log_scale: bool = False,
    rel_tol: float = 1e-3,
    max_pieces: int = 4096,
) -> np.ndarray:
    """A certified upper bound on ``sup_{v in [lo, hi]} f(v)``, elementwise (docs/theory/glm.md#lemma-d).

    ``f`` maps a parameter value (broadcast to every element) to an array of values; on a piece
    ``[v0, v1]`` every element is at most ``max(f(v0), f(v1)) + K (v1 - v0) / 2`` with
    ``K = lipschitz(v0, v1)`` (the sup of a function with Lipschitz constant K between two
    evaluated points). The worst piece is split at its (geometric, with ``log_scale``) midpoint
    until the largest element's bound is within ``rel_tol`` (relative, at least ``1e-9``
    absolute) of the largest value attained at an evaluated point: what a caller that takes the
    largest record needs. The returned bound is >= the true sup of every element whatever the
    stopping point: for each element, the largest of its piece bounds.

    ``lo`` and ``hi`` must be the same for every element (a scalar interval).
    """
    import heapq

    lo_a, hi_a = np.asarray(lo, float), np.asarray(hi, float)
    if np.any(lo_a != lo_a.reshape(-1)[0]) or np.any(hi_a != hi_a.reshape(-1)[0]):
        raise NoRegionRule("branch and bound needs one interval for every element of its parameter")
    a, b = float(lo_a.reshape(-1)[0]), float(hi_a.reshape(-1)[0])
    if not (math.isfinite(a) and math.isfinite(b)):
        raise NoRegionRule("branch and bound needs a bounded interval")
    if log_scale and a <= 0:
        raise NoRegionRule("branch and bound in log scale needs a positive interval")
    to_v = (lambda u: math.exp(u)) if log_scale else (lambda u: u)
    ua, ub = (math.log(a), math.log(b)) if log_scale else (a, b)
    values: dict[float, np.ndarray] = {}
    attained = None

    def F(u):
        nonlocal attained
        if u not in values:
            values[u] = np.asarray(f(to_v(u)), dtype=float)
            attained = values[u] if attained is None else np.maximum(attained, values[u])
        return values[u]

    def bound(u0, u1):
        K = np.asarray(lipschitz(to_v(u0), to_v(u1)), dtype=float)
        return np.maximum(F(u0), F(u1)) + K * (u1 - u0) / 2.0

    def gap(piece_bound):
        # how far the piece could lie above the largest value attained over all elements: what
        # a caller that takes the largest record needs. Every element's bound stays sound (a
        # sup over its piece) whatever the stopping rule; the ones that never lead stay looser.
        top = float(np.max(attained))
        return (float(np.max(piece_bound)) - top) / max(abs(top), 1.0)

    if not ub > ua:
        return F(ua)
    # a lazy max-heap of pieces by their gap to the best value attained so far: a stored gap is
    # an upper bound of the current one (the attained values only grow), refreshed when popped
    first = bound(ua, ub)
    heap = [(-gap(first), ua, ub)]
    bounds = {(ua, ub): first}
    while heap and len(bounds) < max_pieces:
        if not np.isfinite(np.max(attained)):
            break  # a value attained is infinite (or undefined): so is the sup, splitting cannot help
        neg, u0, u1 = heapq.heappop(heap)
        g = gap(bounds[(u0, u1)])
        if heap and g < -heap[0][0]:  # no longer the worst: put it back with its current gap
            heapq.heappush(heap, (-g, u0, u1))
            continue
        if g <= rel_tol or float(np.max(bounds[(u0, u1)])) - float(np.max(attained)) <= 1e-9:
            heapq.heappush(heap, (-g, u0, u1))
            break
        del bounds[(u0, u1)]
        mid = 0.5 * (u0 + u1)
        for piece in ((u0, mid), (mid, u1)):
            pb = bound(*piece)
            bounds[piece] = pb
            heapq.heappush(heap, (-gap(pb), *piece))
    # sound whatever the stopping point: every point lies in a piece, below its bound
    return np.max(np.stack(list(bounds.values())), axis=0)


def nested_candidates(params: tuple) -> tuple:
    """Helper for custom region rules of nested families: ``NestedRegion`` -> ``Nested`` of its
    parameters' hull / point :class:`Bounds` (sound, possibly loose; see each caller)."""
    out = []
    for p in params:
        if isinstance(p, NestedRegion):
            out.append(Nested(p.op, nested_candidates(p.params)))
        elif isinstance(p, Window):
            out.append(p.hull)
        elif isinstance(p, Span):
            out.append(Bounds(np.asarray(p.lo, float), np.asarray(p.hi, float)))
        else:
            out.append(p)
    return tuple(out)
