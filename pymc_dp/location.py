"""The location solvers: regions read off the family's rule on the range of a location.

Two solvers for factors whose location parameter is free, each in closed form from the
family's own rule evaluated on an interval of locations:

* :func:`solve_location_scale` -- location and scale both free RVs (Normal, Laplace, StudentT,
  Cauchy): the location in the data interval and the scale above ``s*``
  (docs/theory/families.md);
* :func:`solve_affine` -- ``X @ w + b`` inside a Normal location or a Bernoulli logit: a norm
  ball on ``w`` (l2 for Ball rows, weighted l1 for Box rows), an interval on a free intercept, a
  lower bound on a free scale; sampled through a polar transform, not a wall.

Layering: imports :mod:`pymc_dp.constraints` and :mod:`pymc_dp.region_context`, and the factors,
rules and domains below them; the driver :mod:`pymc_dp.truncate` tries these first.
"""

from __future__ import annotations

import math

import numpy as np
from scipy import optimize

from pymc_dp.constraints import TOL, FactorRegion, Infeasible, IntervalConstraint, NormBallConstraint
from pymc_dp.domains import Ball
from pymc_dp.factors import AffineForm, Factor, LinkForm, PointForm
from pymc_dp.region_context import RegionContext, plain_free_rv
from pymc_dp.rules import NP, Bounds, log_density_range
from pymc_dp.rules.base import domain_interval
from pymc_dp.rules.oscillation import normal_predictor_oscillation

__all__ = ["solve_affine", "solve_location_scale"]


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
    loc_name, scale_name = plain_free_rv(loc.expr, ctx), plain_free_rv(scale.expr, ctx)
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
    if not check <= share * (1 + TOL):  # pragma: no cover - a rule bug, or NaN: fail closed
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

    The rule: for the logit, the Bernoulli's per-record constant (``2L`` certificate, where the
    oscillation is ``2L`` anyway at a symmetric logit); for the Normal, half its oscillation over
    the predictor's interval (:func:`~pymc_dp.rules.oscillation.normal_predictor_oscillation`:
    ``4 c H / sigma^2`` against ``2L = (c + H)^2 / sigma^2`` for ``y`` in ``[-c, c]`` and
    ``H <= c``, so the region is wider at the same epsilon).
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
    w_name = plain_free_rv(form.weights, ctx)
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
            offset_name = plain_free_rv(form.offset, ctx)
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
            scale_name = plain_free_rv(sform.expr, ctx)
            if scale_name is None or ctx.shapes[scale_name] not in ((), (1,)) or ctx.support(scale_name)[0] < 0:
                return None
    involved = {w_name, offset_name, scale_name} - {None}
    if set(ctx.free_rvs_of(ctx.lipschitz(factor))) != involved:
        return None

    obs_domain = ctx.domains[factor.observed_container]
    n_elem = int(np.prod(ctx.numeric(factor.observed.shape)[1:])) if factor.observed.ndim > 1 else 1

    if logit:
        bound = "lipschitz"

        def rule_L(center, half, sigma):
            eta = Bounds(center - half, center + half, space="logit")
            lo, hi = log_density_range(factor.op, obs_domain, (eta,), NP)
            return n_elem * float(hi - lo)
    else:
        # a Normal: half its oscillation over the region (never above L; docs/theory/oscillation.md)
        bound = "oscillation"
        y_lo, y_hi = domain_interval(obs_domain, "Normal")

        def rule_L(center, half, sigma):  # half the oscillation stands in for L in the lift
            osc = normal_predictor_oscillation(y_lo, y_hi, center - half, center + half, sigma, scale_name is not None)
            return n_elem * 0.5 * float(osc)

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
    return FactorRegion(factor, share, best, "affine", min_L, bound)
