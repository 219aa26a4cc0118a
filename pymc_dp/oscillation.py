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
  prior's quantiles and at the support's lower end (``-inf`` included: a half-line may fit), takes for each the largest ``t2`` that fits
  (the bound grows with the interval: bracket, then multisection, all lower ends in one array
  operation per step), keeps the interval of most prior mass (exact from the prior's CDF for a
  root RV, batched; Rao-Blackwellised for a hierarchical one) and refines its lower end on
  finer grids and a parabola's vertex;
* the family's own per-record rule is evaluated once when the model is built, so a domain the
  family refuses (a Bernoulli value of 2, a Binomial count above ``n``) is left to the
  constant's solvers, which raise its message.

The region's certificate rests on the final evaluation alone, never on the search.

Layering: a solver. It imports the constraints, the region context, the prior masses
(:mod:`pymc_dp.masses`, batched over intervals) and the factors, interval evaluator and
oscillation rules below them; the driver :mod:`pymc_dp.truncate` tries it first, and
:mod:`pymc_dp.split` asks :func:`reaches` whether a factor's least constant is 0.
"""

from __future__ import annotations

import math

import numpy as np
from pytensor.compile.sharedvalue import SharedVariable
from scipy import special

from pymc_dp.constraints import FactorRegion, IntervalConstraint
from pymc_dp.contamination import ContaminatedOscillationModel
from pymc_dp.factors import Factor, PointForm, strip_casts
from pymc_dp.intervals import BoxEvaluator, UnsupportedExpression
from pymc_dp.masses import box_log_masses
from pymc_dp.region_context import plain_free_rv
from pymc_dp.rules import NP, Bounds, element_lipschitz
from pymc_dp.rules.oscillation import NaturalParameter, natural_parameter, oscillation

__all__ = ["solve_oscillation", "OscillationModel", "reaches"]

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
        rv = ctx.free[name]
        self.plain = plain_free_rv(expr, ctx) == name and expr.dtype == "float64" and rv.dtype == "float64"

    @classmethod
    def build(cls, factor: Factor, ctx) -> "OscillationModel | ContaminatedOscillationModel | None":
        """A contaminated Normal location factor's model (:mod:`pymc_dp.contamination`); else None unless the factor reads private data only as its observed value, every parameter is
        public but one, and that one reads exactly one free RV of scalar support, and the family
        has a closed-form natural parameter for it."""
        if factor.info is None or factor.observed_container is None:
            return None
        contaminated = ContaminatedOscillationModel.build(factor, ctx)
        if contaminated is not None:  # (1 - p) Normal(v, sigma) + p g: docs/theory/contamination.md
            return contaminated
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
            om = cls(factor, names[0], i, natural, ctx)
        except UnsupportedExpression:
            return None
        return om if om._family_accepts_the_domain(params) else None

    def _family_accepts_the_domain(self, params) -> bool:
        """Whether the family's per-record rule accepts the domain with the fixed parameters (a
        Bernoulli domain beyond {0, 1}, a Binomial count above n are refused there): the rule is
        evaluated once, numerically, at the prior median of the free RV. Where it refuses, the
        factor is left to the constant's solvers, which raise the rule's message."""
        median = float(np.median(np.asarray(self.ctx.draws[self.name], float)))
        if self.plain:
            value = np.float64(median)
        else:
            try:
                ((value, _),) = self.evaluator({self.name: (median, median)})
            except (UnsupportedExpression, FloatingPointError):
                return False
        point = tuple(Bounds.point(np.asarray(value if p is None else p, float)) for p in params)
        domain = self.ctx.domains[self.factor.observed_container]
        try:
            with np.errstate(all="ignore"):
                element_lipschitz(self.factor.op, domain, point, NP)
        except Exception:  # the rule refuses (or cannot read these parameters): its solvers say why
            return False
        return True

    def oscillations(self, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
        """The certified per-record oscillation over ``v in [lo[k], hi[k]]`` (every element of
        ``v``) for many intervals at once: the search's inner loop is one array operation per step,
        and the certificate's final evaluation is this same computation for one interval."""
        lo, hi = np.asarray(lo, float).reshape(-1), np.asarray(hi, float).reshape(-1)
        k, nd = lo.size, len(self.obs_shape)
        ok = np.ones(k, bool)
        if self.plain:
            p_lo, p_hi = lo, hi
        else:  # the interval evaluator bounds the parameter, one interval at a time
            bounds = []
            for j, (a, b) in enumerate(zip(lo, hi)):
                try:
                    ((pa, pb),) = self.evaluator({self.name: (a, b)})
                except (UnsupportedExpression, FloatingPointError):
                    pa = pb = np.nan
                    ok[j] = False
                bounds.append(np.broadcast_arrays(np.asarray(pa, float), np.asarray(pb, float)))
            shape = np.broadcast_shapes(*(b[0].shape for b in bounds))
            p_lo = np.stack([np.broadcast_to(b[0], shape) for b in bounds])
            p_hi = np.stack([np.broadcast_to(b[1], shape) for b in bounds])
        pnd = p_lo.ndim - 1
        if pnd > nd:  # a parameter of more axes than the observed value: no record reading
            return np.full(k, math.inf)
        ends = (k,) + (1,) * (nd - pnd) + p_lo.shape[1:]
        per_element = oscillation(self.natural, p_lo.reshape(ends), p_hi.reshape(ends))
        if per_element.size == k and nd == 1 and self.obs_shape[0] > 0:
            # one element per record and the same value for each: no broadcast over the records
            value = per_element.reshape(k)
        else:
            try:
                per_element = np.broadcast_to(per_element, (k,) + self.obs_shape)
            except ValueError:
                return np.full(k, math.inf)
            if nd > 1:
                per_element = per_element.reshape(k, self.obs_shape[0], -1).sum(axis=2)
            if per_element[0].size == 0:
                return np.zeros(k)
            value = per_element.reshape(k, -1).max(axis=1)
        return np.where(ok & ~np.isnan(value), value, math.inf)

    def oscillation(self, lo: float, hi: float) -> float:
        """The certified per-record oscillation over ``v in [lo, hi]``: :meth:`oscillations` of one
        interval."""
        return float(self.oscillations(np.array([lo]), np.array([hi]))[0])

    @classmethod
    def of(cls, factor: Factor, ctx) -> "OscillationModel | None":
        """:meth:`build`, once per factor and certification."""
        return ctx.cached(ctx.key(factor, "oscillation_model"), lambda: cls.build(factor, ctx))


def _observed_shape(observed, ctx) -> tuple[int, ...]:
    """The observed value's shape: static when PyTensor knows it, the container's value's shape
    for ``pm.Data``, else evaluated (compiling a function: the slow path)."""
    if all(d is not None for d in observed.type.shape):
        return tuple(int(d) for d in observed.type.shape)
    base = strip_casts(observed)
    if isinstance(base, SharedVariable):
        return tuple(int(d) for d in np.shape(base.get_value()))
    return tuple(int(s) for s in ctx.numeric(observed.shape))


def _interior(lo_s: float, hi_s: float, t: np.ndarray, step: np.ndarray) -> np.ndarray:
    """Points ``step`` (in a scale-free coordinate) beyond ``t`` toward ``hi_s`` (broadcast)."""
    t, step = np.asarray(t, float), np.asarray(step, float)
    with np.errstate(all="ignore"):
        if math.isfinite(lo_s) and math.isfinite(hi_s):
            inside = (lo_s < t) & (t < hi_s)
            u = np.where(inside, special.logit((t - lo_s) / (hi_s - lo_s)), -40.0)
            return lo_s + (hi_s - lo_s) * special.expit(u + step)
        if math.isfinite(lo_s):
            return np.where(t > lo_s, lo_s + (t - lo_s) * np.exp(step), lo_s + np.exp(-40.0 + step))
        if math.isfinite(hi_s):
            return hi_s - (hi_s - t) * np.exp(-step)
        return t + step * np.maximum(1.0, np.abs(t))


#: the bracketing steps of :func:`_largest_uppers` (scale-free, growing by 4 from 1e-3 to 4e11:
#: beyond, a bounded end is reached to double precision and an unbounded one is 1e11 scales away)
_STEPS = 1e-3 * 4.0 ** np.arange(25)
#: the upper ends tried from a lower end of -inf (as many as _STEPS, increasing, any scale)
_LADDER = np.concatenate([-np.geomspace(1e12, 1e-3, 12), [0.0], np.geomspace(1e-3, 1e12, 12)])


def _largest_uppers(om: OscillationModel, t1: np.ndarray, limit: float, support: tuple[float, float]) -> np.ndarray:
    """For each lower end ``t1[k]``, the largest ``t2 > t1[k]`` with ``osc([t1[k], t2]) <= limit``
    (NaN where none): bracket by growing steps, then bisect, all lower ends at once. The
    oscillation grows with the interval, so the feasible upper ends form an interval."""
    lo_s, hi_s = support
    t1 = np.asarray(t1, float).reshape(-1)
    out = np.full(t1.size, np.nan)
    whole = om.oscillations(t1, np.full(t1.size, hi_s)) <= limit
    out[whole] = hi_s
    rest = np.flatnonzero(~whole)
    if rest.size == 0:
        return out
    a = t1[rest]
    trial = _interior(lo_s, hi_s, a[:, None], _STEPS[None, :])
    # from an unbounded lower end, a fixed increasing ladder of upper ends (t > -inf: any scale)
    trial[np.isneginf(a)] = _LADDER
    valid = (trial > a[:, None]) & (trial < hi_s)
    fits = om.oscillations(np.repeat(a, _STEPS.size), trial.reshape(-1)).reshape(trial.shape) <= limit
    fits &= valid
    misses = valid & ~fits
    # the first miss brackets; the largest fit before it is the lower bracket
    first_miss = np.where(misses.any(axis=1), misses.argmax(axis=1), _STEPS.size)
    before = fits & (np.arange(_STEPS.size)[None, :] < first_miss[:, None])
    good = np.where(before.any(axis=1), np.where(before, trial, -np.inf).max(axis=1), a)
    bad = np.where(first_miss < _STEPS.size, trial[np.arange(a.size), np.minimum(first_miss, _STEPS.size - 1)], np.nan)
    # multisection: 15 interior points of every open bracket per step (one array operation),
    # to a relative 1e-10 of the interval's width: a search, so precision only costs time
    fractions = np.linspace(0.0, 1.0, 17)[1:-1]
    for _ in range(30):  # a bracket may span 1e11 (a step from a support's end): 16^30 covers it
        # the width's scale: the interval's, or the ends' own from a lower end of -inf
        scale = np.where(np.isfinite(a), good - np.where(np.isfinite(a), a, 0.0), np.maximum(np.abs(good), np.abs(bad)))
        with np.errstate(invalid="ignore"):  # rows without a bracket (bad NaN, good -inf) are not live
            live = ~np.isnan(bad) & np.isfinite(good) & (bad - good > 1e-10 * np.maximum(scale, 1e-300))
        if not live.any():
            break
        g, b_, a_ = good[live], bad[live], a[live]
        points = g[:, None] + (b_ - g)[:, None] * fractions[None, :]
        fit = om.oscillations(np.repeat(a_, fractions.size), points.reshape(-1)).reshape(points.shape) <= limit
        # feasibility is monotone in the upper end: the last fit and the first miss bracket it
        n_fit = np.where(fit.all(axis=1), fractions.size, fit.argmin(axis=1))
        rows = np.arange(g.size)
        new_good = np.where(n_fit > 0, points[rows, np.maximum(n_fit - 1, 0)], g)
        new_bad = np.where(n_fit < fractions.size, points[rows, np.minimum(n_fit, fractions.size - 1)], b_)
        good[live], bad[live] = new_good, new_bad
    out[rest] = np.where(good > a, good, np.nan)
    return out


def reaches(factor: Factor, share: float, ctx) -> bool:
    """Whether some interval of the factor's free RV has half-oscillation at most ``share`` (one
    bracketing from the prior's median; False when the factor has no closed-form oscillation).
    Then :func:`solve_oscillation` finds a region at that share, and the factor's least constant
    is 0: the split's probe for a minimum needs no region."""
    om = OscillationModel.of(factor, ctx)
    if om is None or share <= 0:
        return False
    support = ctx.support(om.name)
    median = float(np.median(np.asarray(ctx.draws[om.name], float)))
    if not support[0] < median < support[1]:
        return False
    return not math.isnan(_largest_uppers(om, np.array([median]), 2.0 * share, support)[0])


def solve_oscillation(factor: Factor, share: float, ctx):
    """The interval of most prior mass whose half-oscillation is at most ``share``, or None.

    Returns a :class:`~pymc_dp.constraints.FactorRegion` (solver ``"interval"``, ``bound =
    "oscillation"``), or None when the factor has no closed-form oscillation (see
    :meth:`OscillationModel.build`)."""
    om = OscillationModel.of(factor, ctx)
    if om is None or share <= 0:
        return None
    name = om.name
    support = ctx.support(name)
    lo_s, hi_s = support
    limit = 2.0 * share
    draws = np.asarray(ctx.draws[name], float).reshape(-1)
    starts = sorted(set(float(t) for t in np.quantile(draws, _QUANTILES) if lo_s < t < hi_s))
    starts.insert(0, lo_s)  # the support's lower end, -inf included (a region may be a half-line)

    def log_masses(t1, t2):
        return box_log_masses(name, t1, t2, ctx)

    def masses_of(t1):
        """(log masses, upper ends) of the best intervals from each lower end (-inf: none fits)."""
        t2 = _largest_uppers(om, t1, limit, support)
        ok = ~np.isnan(t2)
        mass = np.full(t1.size, -np.inf)
        if ok.any():
            mass[ok] = log_masses(t1[ok], t2[ok])
        return mass, t2

    def best_of(t1):
        mass, t2 = masses_of(t1)
        k = int(np.argmax(mass))
        return None if not np.isfinite(mass[k]) else (float(mass[k]), float(t1[k]), float(t2[k]))

    starts = np.asarray(starts, float)
    best = best_of(starts)
    if best is None:
        return None
    # refine the lower end between its neighbours among the scanned starts: three rounds of a
    # 33-point grid, each 16 times finer around the best so far, then the vertex of the parabola
    # through the best point and its grid neighbours (the mass is smooth in the lower end: this
    # lands on a flat optimum, e.g. a symmetric prior's). A search: the certificate rests on the
    # final evaluation below.
    k = int(np.searchsorted(starts, best[1]))
    a, b = starts[max(k - 1, 0)], starts[min(k + 1, len(starts) - 1)]
    step = 0.0
    for _ in range(3):
        if not (math.isfinite(a) and b - a > 1e-8 * max(1.0, abs(best[1]))):
            break
        grid = np.linspace(a, b, 33)
        found = best_of(grid)
        if found is not None and found[0] > best[0]:
            best = found
        step = (b - a) / 32
        a, b = max(a, best[1] - step), min(b, best[1] + step)
    t = best[1]
    if step > 0 and lo_s < t - step and t + step < hi_s:
        m, _ = masses_of(np.array([t - step, t, t + step]))
        curvature = m[0] - 2.0 * m[1] + m[2]
        if np.all(np.isfinite(m)) and curvature < 0:
            vertex = t + 0.5 * step * (m[0] - m[2]) / curvature
            found = best_of(np.array([vertex])) if t - step < vertex < t + step else None
            if found is not None and found[0] > best[0]:
                best = found
    _, t1, t2 = best
    osc = om.oscillation(t1, t2)  # the certificate rests on this evaluation alone
    for _ in range(8):  # a search point a rounding above the limit: pull the upper end in
        if osc <= limit:
            break
        t2 = t1 + (t2 - t1) * (1.0 - 1e-9) if math.isfinite(t2) else t2
        osc = om.oscillation(t1, t2)
    if not osc <= limit:  # pragma: no cover - the bisection only keeps feasible intervals
        return None
    constraint = IntervalConstraint(name, None if t1 <= lo_s else float(t1), None if t2 >= hi_s else float(t2))
    constraints = [] if constraint.lower is None and constraint.upper is None else [constraint]
    region = FactorRegion(factor, share, constraints, "interval", 0.0)
    region.bound = "oscillation"
    region.certified_lipschitz = 0.5 * osc
    return region
