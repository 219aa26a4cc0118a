"""The oscillation solver: an interval of one free RV, certified by the factor's oscillation.

For a factor whose one free parameter enters as a one-parameter exponential family
(:mod:`pymc_dp.rules.oscillation`), one draw costs ``span_D(T) x (width of eta over the
region)``, wherever the region lies. This solver therefore chooses the interval of the free RV
``v`` with the most prior mass among those whose oscillation is at most ``2 x share``:

* the parameter's range over an interval ``[t1, t2]`` of ``v`` is bounded soundly by
  :class:`~pymc_dp.intervals.BoxEvaluator` (the parameter may be ``v``, ``1 / v``, ``exp(v)``,
  ``sigmoid(v)``, ``v * c`` ...), and ``eta``'s monotonicity maps it to ``[eta_lo, eta_hi]``;
* per element ``span_D(T) (eta_hi - eta_lo)``, summed over one record's elements and maximised
  over records, is the certified oscillation; the factor's ``Delta`` is half of it;
* the search (public: the prior, the domain and the shapes only) scans lower ends ``t1`` at the
  prior's quantiles and at the support's lower end, takes for each the largest ``t2`` that fits
  (bisection: the bound grows with the interval), keeps the interval of most prior mass
  (exact from the prior's CDF for a root RV, Rao-Blackwellised for a hierarchical one) and
  refines it with a bounded scalar search.

The region's certificate rests on the final evaluation alone, never on the search.
"""

from __future__ import annotations

import math

import numpy as np
from scipy import optimize, special

from pymc_dp.factors import Factor, PointForm
from pymc_dp.intervals import BoxEvaluator, UnsupportedExpression
from pymc_dp.rules.oscillation import NaturalParameter, natural_parameter, oscillation

__all__ = ["solve_oscillation", "OscillationModel"]

_QUANTILES = np.concatenate([[1e-4, 1e-3, 5e-3], np.linspace(0.01, 0.99, 40), [0.995, 0.999, 0.9999]])


class OscillationModel:
    """A factor's certified oscillation over intervals of its one free RV (built once)."""

    def __init__(self, factor: Factor, name: str, free: int, natural: NaturalParameter, ctx):
        self.factor, self.name, self.ctx, self.natural = factor, name, ctx, natural
        expr = factor.forms[free].expr
        private = [v for v in ctx.model.data_vars if v.name in ctx.domains]
        self.evaluator = BoxEvaluator([expr], {name: ctx.free[name]}, forbidden=private)
        self.obs_shape = _observed_shape(factor.observed, ctx)
        # the parameter is the free RV itself (up to float64 casts and broadcasting): its range
        # over [lo, hi] is [lo, hi], without the interval evaluator (the solver's hot path)
        from pymc_dp.truncate import _plain_free_rv

        rv = ctx.free[name]
        self.plain = _plain_free_rv(expr, ctx) == name and expr.dtype == "float64" and rv.dtype == "float64"

    @classmethod
    def build(cls, factor: Factor, ctx) -> "OscillationModel | None":
        """None unless the factor reads private data only as its observed value, every parameter is
        public but one, and that one reads exactly one free RV of scalar support, and the family
        has a closed-form natural parameter for it."""
        if factor.info is None or factor.observed_container is None:
            return None
        if set(factor.reads) != {factor.observed_container}:
            return None
        if not all(isinstance(form, PointForm) for form in factor.forms):
            return None
        free = [i for i, form in enumerate(factor.forms) if ctx.free_rvs_of(form.expr)]
        if len(free) != 1:
            return None
        (i,) = free
        names = ctx.free_rvs_of(factor.forms[i].expr)
        if len(names) != 1 or math.isnan(ctx.support(names[0])[0]):
            return None
        params = tuple(None if j == i else np.asarray(ctx.numeric(f.expr), float) for j, f in enumerate(factor.forms))
        try:
            natural = natural_parameter(factor.op, ctx.domains[factor.observed_container], params, i)
        except Exception:  # a domain the family refuses: the Lipschitz rule will say why
            return None
        if natural is None:
            return None
        try:
            return cls(factor, names[0], i, natural, ctx)
        except UnsupportedExpression:
            return None

    def oscillation(self, lo: float, hi: float) -> float:
        """The certified per-record oscillation over ``v in [lo, hi]`` (every element of ``v``)."""
        if self.plain:
            p_lo, p_hi = np.float64(lo), np.float64(hi)
        else:
            try:
                ((p_lo, p_hi),) = self.evaluator({self.name: (lo, hi)})
            except (UnsupportedExpression, FloatingPointError):
                return math.inf
        per_element = oscillation(self.natural, p_lo, p_hi)
        try:
            per_element = np.broadcast_to(per_element, self.obs_shape)
        except ValueError:
            return math.inf
        if per_element.ndim > 1:
            per_element = per_element.reshape(per_element.shape[0], -1).sum(axis=1)
        value = float(np.max(per_element)) if per_element.size else 0.0
        return value if not math.isnan(value) else math.inf


def _observed_shape(observed, ctx) -> tuple[int, ...]:
    """The observed value's shape: static when PyTensor knows it, the container's value's shape
    for ``pm.Data``, else evaluated (compiling a function: the slow path)."""
    from pytensor.compile.sharedvalue import SharedVariable

    from pymc_dp.factors import _strip_casts

    if all(d is not None for d in observed.type.shape):
        return tuple(int(d) for d in observed.type.shape)
    base = _strip_casts(observed)
    if isinstance(base, SharedVariable):
        return tuple(int(d) for d in np.shape(base.get_value()))
    return tuple(int(s) for s in ctx.numeric(observed.shape))


def _interior(lo_s: float, hi_s: float, t: float, step: float) -> float:
    """A point ``step`` (in a scale-free coordinate) beyond ``t`` toward ``hi_s``."""
    if math.isfinite(lo_s) and math.isfinite(hi_s):
        u = special.logit((t - lo_s) / (hi_s - lo_s)) if lo_s < t < hi_s else -40.0
        return lo_s + (hi_s - lo_s) * special.expit(u + step)
    if math.isfinite(lo_s):
        return lo_s + (t - lo_s) * math.exp(step) if t > lo_s else lo_s + math.exp(-40.0 + step)
    if math.isfinite(hi_s):
        return hi_s - (hi_s - t) * math.exp(-step)
    return t + step * max(1.0, abs(t))


def _largest_upper(om: OscillationModel, t1: float, limit: float, support: tuple[float, float]) -> float | None:
    """The largest ``t2 > t1`` with ``osc([t1, t2]) <= limit`` (bisection), or None."""
    lo_s, hi_s = support
    if om.oscillation(t1, hi_s) <= limit:
        return hi_s
    # bracket: grow the step until the bound exceeds the limit
    good, bad = t1, None
    step = 1e-3
    for _ in range(80):
        t = _interior(lo_s, hi_s, t1, step)
        if not t > t1:
            step *= 4.0
            continue
        if om.oscillation(t1, t) <= limit:
            good = t
            step *= 4.0
        else:
            bad = t
            break
    if bad is None:
        return good if good > t1 else None
    for _ in range(60):
        mid = 0.5 * (good + bad)
        if not good < mid < bad:
            break
        if om.oscillation(t1, mid) <= limit:
            good = mid
        else:
            bad = mid
    return good if good > t1 else None


def solve_oscillation(factor: Factor, share: float, ctx):
    """The interval of most prior mass whose half-oscillation is at most ``share``, or None.

    Returns a :class:`~pymc_dp.truncate.FactorRegion` (solver ``"interval"``, ``bound =
    "oscillation"``), or None when the factor has no closed-form oscillation (see
    :meth:`OscillationModel.build`)."""
    from pymc_dp.boxes import box_log_mass
    from pymc_dp.truncate import FactorRegion, IntervalConstraint

    om = ctx.cached(ctx.key(factor, "oscillation_model"), lambda: OscillationModel.build(factor, ctx))
    if om is None or share <= 0:
        return None
    name = om.name
    support = ctx.support(name)
    lo_s, hi_s = support
    limit = 2.0 * share
    draws = np.asarray(ctx.draws[name], float).reshape(-1)
    starts = sorted(set(float(t) for t in np.quantile(draws, _QUANTILES) if lo_s < t < hi_s))
    if math.isfinite(lo_s):
        starts.insert(0, lo_s)

    def log_mass(t1, t2):
        return box_log_mass({name: (np.float64(t1), np.float64(t2))}, ctx)

    found = []
    for t1 in starts:
        t2 = _largest_upper(om, t1, limit, support)
        if t2 is not None:
            found.append((log_mass(t1, t2), t1, t2))
    if not found:
        return None
    best = max(found)
    # refine the lower end between its neighbours among the scanned starts
    k = starts.index(best[1])
    a, b = starts[max(k - 1, 0)], starts[min(k + 1, len(starts) - 1)]
    if a < b:
        def negative(t1):
            t2 = _largest_upper(om, t1, limit, support)
            return math.inf if t2 is None else -log_mass(t1, t2)

        res = optimize.minimize_scalar(negative, bounds=(a, b), method="bounded", options={"xatol": 1e-6 * max(1.0, abs(b - a))})
        if np.isfinite(res.fun) and -res.fun > best[0]:
            t2 = _largest_upper(om, float(res.x), limit, support)
            if t2 is not None:
                best = (-res.fun, float(res.x), t2)
    _, t1, t2 = best
    osc = om.oscillation(t1, t2)  # the certificate rests on this evaluation alone
    if not osc <= limit:  # pragma: no cover - the bisection only keeps feasible intervals
        return None
    constraint = IntervalConstraint(name, None if t1 <= lo_s else float(t1), None if t2 >= hi_s else float(t2))
    constraints = [] if constraint.lower is None and constraint.upper is None else [constraint]
    region = FactorRegion(factor, share, constraints, "interval", 0.0)
    region.bound = "oscillation"
    region.certified_lipschitz = 0.5 * osc
    return region
