"""The truncation's constraints: a closed family of frozen value objects on free RVs.

A factor's certified region becomes constraints (docs/theory/truncation.md#constraints):
:class:`IntervalConstraint` (every element of one RV in an interval),
:class:`ElementIntervalConstraint` (one interval per element), :class:`NormBallConstraint`
(a weight vector in a norm ball) and :class:`PotentialConstraint` (the indicator of the
factor's sublevel set, the general fallback). :class:`FactorRegion` holds one factor's
constraints with the share they certify; :class:`Infeasible` says that no region meets it.

What a consumer does with each kind is registered per kind, as the rules are per RV Op
(:func:`box_of`: the box a constraint describes, for prior masses, searches and audits). A
kind a consumer has no registration for is refused by that consumer, never guessed.

Layering: the bottom of the truncation's modules (see :mod:`pymc_dp.truncate`). It imports only
:mod:`pymc_dp.factors`; the region context, the prior masses, every solver and the model
rewrite (:mod:`pymc_dp.rewrite`) import it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from functools import singledispatch
from typing import Callable

import numpy as np

from pymc_dp.factors import Factor

__all__ = [
    "IntervalConstraint",
    "ElementIntervalConstraint",
    "NormBallConstraint",
    "PotentialConstraint",
    "FactorRegion",
    "box_of",
    "constraints_box",
    "Infeasible",
    "TOL",
]

#: relative slack allowed when a region's constant is checked against its share (the solvers'
#: verifications and a Potential's indicator): rounding in the last digits, never more
TOL = 1e-9


@dataclass(frozen=True)
class IntervalConstraint:
    """Every element of free RV ``var`` lies in ``[lower, upper]`` (None: unbounded)."""

    var: str
    lower: float | None
    upper: float | None

    def contains(self, draws: dict[str, np.ndarray]) -> np.ndarray:
        v = draws[self.var].reshape(len(draws[self.var]), -1)
        ok = np.ones(len(v), bool)
        if self.lower is not None:
            ok &= np.all(v >= self.lower, axis=1)
        if self.upper is not None:
            ok &= np.all(v <= self.upper, axis=1)
        return ok

    def describe(self) -> str:
        lo = "-inf" if self.lower is None else f"{self.lower:.6g}"
        hi = "inf" if self.upper is None else f"{self.upper:.6g}"
        return f"{self.var} in [{lo}, {hi}]"

    def to_dict(self) -> dict:
        return {"kind": "interval", "var": self.var, "lower": self.lower, "upper": self.upper}


@dataclass(frozen=True)
class ElementIntervalConstraint:
    """Element ``i`` of free RV ``var`` lies in ``[lower[i], upper[i]]`` (flattened order).

    Per-element bounds, for RVs whose elements are not exchangeable (ordered cutpoints with
    different prior means: disjoint boxes keep them ordered)."""

    var: str
    lower: tuple
    upper: tuple

    def contains(self, draws: dict[str, np.ndarray]) -> np.ndarray:
        v = draws[self.var].reshape(len(draws[self.var]), -1)
        return np.all((v >= np.asarray(self.lower)) & (v <= np.asarray(self.upper)), axis=1)

    def describe(self) -> str:
        pairs = ", ".join(f"[{lo:.4g}, {hi:.4g}]" for lo, hi in zip(self.lower, self.upper))
        return f"{self.var} in {pairs} (elementwise)"

    def to_dict(self) -> dict:
        return {"kind": "element_interval", "var": self.var, "lower": list(self.lower), "upper": list(self.upper)}


@dataclass(frozen=True)
class NormBallConstraint:
    """``||var||`` at most ``radius``: l2, or the weighted l1 norm ``sum_i weights_i |var_i|``."""

    var: str
    radius: float
    weights: tuple[float, ...] | None = None

    def norm(self, values: np.ndarray) -> np.ndarray:
        v = values.reshape(len(values), -1)
        if self.weights is None:
            return np.sqrt(np.sum(v**2, axis=1))
        return np.sum(np.abs(v) * np.asarray(self.weights), axis=1)

    def contains(self, draws):
        return self.norm(draws[self.var]) <= self.radius

    def describe(self) -> str:
        if self.weights is None:
            return f"||{self.var}||_2 <= {self.radius:.6g}"
        return f"sum_i m_i |{self.var}_i| <= {self.radius:.6g} (m = {[round(float(w), 6) for w in self.weights]})"

    def to_dict(self):
        return {
            "kind": "norm_ball",
            "var": self.var,
            "radius": self.radius,
            "norm": "l2" if self.weights is None else "weighted_l1",
            "weights": None if self.weights is None else list(self.weights),
        }


@dataclass(frozen=True)
class PotentialConstraint:
    """``L_factor(theta) <= bound``, enforced by a ``pm.Potential`` indicator."""

    factor: str
    bound: float
    vars: tuple[str, ...]
    evaluate: Callable[[dict[str, np.ndarray]], np.ndarray] = field(compare=False, repr=False)
    #: a public point inside the region (found from the prior alone), a start for samplers
    start: dict | None = field(default=None, compare=False, repr=False)

    def contains(self, draws):
        return self.evaluate(draws) <= self.bound * (1 + TOL)

    def describe(self) -> str:
        return f"L_{self.factor}({', '.join(self.vars)}) <= {self.bound:.6g} (potential)"

    def to_dict(self):
        return {"kind": "potential", "factor": self.factor, "bound": self.bound, "vars": list(self.vars)}


@dataclass
class FactorRegion:
    """A factor's share of the budget and the constraints that guarantee it."""

    factor: Factor
    share: float
    constraints: list
    solver: str
    min_lipschitz: float | None = None
    #: what certifies ``share``: ``"lipschitz"`` (sup of the factor's constant over the region)
    #: or ``"oscillation"`` (half its oscillation over the region, docs/theory/oscillation.md)
    bound: str = "lipschitz"


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


# --------------------------------------------------------------------------- consumers
@singledispatch
def box_of(constraint, shape: tuple, support: tuple[float, float]):
    """The box ``(lo, hi)`` (arrays of ``shape``) that ``constraint`` restricts its RV to, or
    None when it is not a box (a norm ball, a potential)."""
    return None


@box_of.register
def _(constraint: IntervalConstraint, shape, support):
    lo = -math.inf if constraint.lower is None else constraint.lower
    hi = math.inf if constraint.upper is None else constraint.upper
    return lo, hi


@box_of.register
def _(constraint: ElementIntervalConstraint, shape, support):
    return np.reshape(constraint.lower, shape), np.reshape(constraint.upper, shape)


def constraints_box(constraints, ctx) -> dict | None:
    """The box ``name -> (lo, hi)`` that the constraints describe, intersected with each RV's
    support (None if any constraint is not a box)."""
    box: dict = {}
    for c in constraints:
        lo_s, hi_s = ctx.support(c.var) if hasattr(c, "var") else (math.nan, math.nan)
        if math.isnan(lo_s):
            lo_s, hi_s = -math.inf, math.inf
        found = box_of(c, ctx.shapes.get(getattr(c, "var", None), ()), (lo_s, hi_s))
        if found is None:
            return None
        lo, hi = found
        prev = box.get(c.var, (lo_s, hi_s))
        box[c.var] = (np.maximum(prev[0], lo), np.minimum(prev[1], hi))
    return box
