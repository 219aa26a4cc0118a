"""From a per-factor budget ``L_j`` to constraints on the model's free RVs (Theta_L): the driver.

For each private factor a *solver* turns ``{theta : L_j(theta) <= share_j}`` into constraints on
the free RVs the factor reads. :func:`solve_factor` tries the solvers from the most specific to
the most general:

0. :func:`~pymc_dp.oscillation.solve_oscillation` -- one free parameter that enters as a
   one-parameter exponential family: the interval of most prior mass whose half-oscillation
   fits the share (certified by the oscillation, not the constant). Where it applies, the
   others are not tried: 3.'s interval is one of those it ranges over.
1. :func:`~pymc_dp.location.solve_affine` -- ``X @ w + b`` inside a Normal location or a
   Bernoulli logit: a norm ball on ``w`` (l2 for Ball rows, weighted l1 for Box rows), an
   interval on a free intercept, a lower bound on a free scale. Sampled through a polar
   transform, not a wall.
2. :func:`~pymc_dp.location.solve_location_scale` -- location and scale both free RVs (Normal,
   Laplace, StudentT, Cauchy): the location in the data interval and the scale above ``s*``
   (docs/theory/families.md).
3. :func:`~pymc_dp.scalar.solve_scalar` -- the factor reads one free RV: the sublevel set of
   ``t -> L_j(v = t)`` around its minimiser, an interval truncation of every element of ``v``.
4. :func:`~pymc_dp.boxes.solve_box` -- parameters that are linear predictors, links and
   components of several free RVs: a box, certified by the family's region rule.
5. :func:`~pymc_dp.potential.solve_potential` -- anything else: ``pm.Potential`` that is 0
   inside ``{L_j(theta) <= share_j}`` and -inf outside, from the rule's own expression. Always
   valid, slower for NUTS.

Every interval and ball solution is verified before it is accepted: the per-record constant is
evaluated at both ends of the interval, elementwise (the sup over the box, for rules
quasi-convex in each parameter), over the hull for indexed parameters, and on a dense grid.

The truncation's modules, bottom to top (each imports only from those before it):
:mod:`pymc_dp.constraints` (the constraints and :class:`FactorRegion`),
:mod:`pymc_dp.region_context` (:class:`RegionContext`, public prior draws, model queries),
:mod:`pymc_dp.masses` (prior masses of regions), :mod:`pymc_dp.potential`,
:mod:`pymc_dp.scalar`, :mod:`pymc_dp.location`, :mod:`pymc_dp.reference` (the admissible
prior of ``split="fit"``), :mod:`pymc_dp.oscillation` and :mod:`pymc_dp.boxes` (the solvers),
then this driver, which only dispatches; :mod:`pymc_dp.split` chooses the shares above it. The
names callers need from the layers below (the constraints, the context, the prior masses) are
re-exported here.
"""

from __future__ import annotations

from pymc_dp.boxes import solve_box
from pymc_dp.constraints import (
    ElementIntervalConstraint,
    FactorRegion,
    Infeasible,
    IntervalConstraint,
    NormBallConstraint,
    PotentialConstraint,
    constraints_box,
)
from pymc_dp.factors import Factor
from pymc_dp.location import solve_affine, solve_location_scale
from pymc_dp.masses import exact_log_mass, prior_mass
from pymc_dp.oscillation import solve_oscillation
from pymc_dp.potential import solve_potential
from pymc_dp.region_context import RegionContext, prior_draws
from pymc_dp.scalar import solve_scalar

__all__ = [
    "solve_factor",
    # re-exported from the layers below
    "IntervalConstraint",
    "ElementIntervalConstraint",
    "NormBallConstraint",
    "PotentialConstraint",
    "FactorRegion",
    "Infeasible",
    "constraints_box",
    "RegionContext",
    "prior_draws",
    "prior_mass",
    "exact_log_mass",
]


def solve_factor(factor: Factor, share: float, ctx: RegionContext) -> FactorRegion:
    """Constraints on the free RVs that keep ``L_factor <= share``; see the module docstring."""
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
    for solver in (solve_affine, solve_location_scale, solve_scalar, solve_box):
        region = solver(factor, share, ctx)
        if region is not None:
            return region
    return None
