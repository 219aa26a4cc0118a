"""Exact rules for discrete likelihoods: Bernoulli, Binomial, Categorical, Poisson, Geometric.

Besides the per-record rules (:func:`~pymc_dp.rules.base.log_density_range`), this module holds

* the region rules of Bernoulli, Binomial, Poisson and Geometric (:mod:`pymc_dp.rules.region`),
  built by :func:`link_region`: lemma C (docs/theory/glm.md#lemma-c, ``window="ends"``) is applied to windows on the
  family's *link* scale only (``logit``, ``log-mean``), where it is proved (the proof is in
  :func:`link_region` and ``docs/rules/counts.md``); a window on any other scale, or one
  that does not slide (``Window.sliding`` False), takes its hull, which is always sound;
* :func:`min_lipschitz`: the smallest constant a family can reach, when one is proved, so that
  pymc_dp can say that a budget cannot be met.

The count families (NegativeBinomial, BetaBinomial) live in :mod:`pymc_dp.rules.count` and use the
same helpers.
"""

from __future__ import annotations

# (kept apart from the imports above, which the Categorical rule shares)
import itertools
import math
from functools import singledispatch
from typing import Any, Callable

import numpy as np
from pytensor.tensor.random.basic import (
    BernoulliRV,
    BinomialRV,
    CategoricalRV,
    GeometricRV,
    PoissonRV,
)

from pymc_dp.exceptions import DomainError, UnsupportedFactorError
from pymc_dp.rules.base import Bounds, element_lipschitz, integer_domain, register_rule, rule_info
from pymc_dp.rules.integer_helpers import (
    check_trials_domain,
    constant_floor,
    domain_values,
    fixed_params,
    fixed_value,
    floor_with_margin,
    known_trials,
    point_value,
    profile_candidates,
    value_axis,
)
from pymc_dp.rules.namespaces import NP
from pymc_dp.rules.region import (
    BranchAndBound,
    NoRegionRule,
    RegionSpec,
    Span,
    Window,
    certified_sup_1d,
    register_region,
)


def _logit_bounds(p: Bounds, xp):
    """Bounds of ``logit(p)``; computed from ``p`` unless already on the logit scale."""
    if p.space not in ("natural", "logit"):
        raise UnsupportedFactorError(
            f"a probability given on the {p.space!r} scale: only 'natural' and 'logit' are supported"
        )
    if p.space == "logit":
        return p.lo, p.hi
    lo = xp.log(p.lo) - xp.log1p(-p.lo)
    if p.is_point:
        return lo, lo
    return lo, xp.log(p.hi) - xp.log1p(-p.hi)


#: PyMC's Bernoulli / Binomial logp on a logit computes ``p = sigmoid(eta)`` (a few roundings: its
#: relative error is at most this) and then ``log(p)``, ``log1p(-p)`` of the rounded ``p``
SIGMOID_P_ERROR = 4 * np.finfo(float).eps
#: below this logit ``sigmoid`` has underflowed to a subnormal or 0 (``exp(709.8)`` overflows)
SIGMOID_LOGIT_FLOOR = -700.0
#: a generous absolute allowance for ``log`` / ``log1p`` of a correctly rounded argument
LOG_ROUNDING = 1e-13


def computed_log_sigmoid_errors(eta_lo, eta_hi, xp):
    """Bounds on ``|computed - exact|`` of ``ln p`` and ``ln(1 - p)``, ``p = sigmoid(eta)``, over
    ``eta in [eta_lo, eta_hi]``, as PyMC computes them without its stabilising rewrites.

    Derivation (tests/fuzz/FOUND.md #13). The computed ``p^ = p (1 + d)``, ``|d| <= delta =``
    :data:`SIGMOID_P_ERROR`. Then ``ln p^ - ln p = ln(1 + d)``: at most ``-ln(1 - delta)`` above
    :data:`SIGMOID_LOGIT_FLOOR` (below it ``p^`` is subnormal or 0: infinite); the error is
    non-increasing in ``eta``, so its largest value is at ``eta_lo``. And ``1 - p^ = (1 - p) -
    p d``, so ``ln(1 - p^) - ln(1 - p) = ln(1 - d p / (1 - p))`` with ``p / (1 - p) = e^eta``: at
    most ``-ln(1 - delta e^eta)``, infinite once ``delta e^eta >= 1/2`` (from ``eta`` about 35.3;
    ``p^`` may round to 1 and ``ln(1 - p^) = -inf``); non-decreasing in ``eta``, largest at
    ``eta_hi``. :data:`LOG_ROUNDING` is added to both for the logarithms' own rounding.

    Returns ``(error of ln p, error of ln(1 - p))``. The claim is exact in real arithmetic; the
    sampled density is the computed one (the refutation check evaluates PyMC's logp without
    rewrites), so a rule widens its range by these and fails closed where they are infinite.
    """
    inf = xp.asarray(np.inf)
    err_p = xp.where(eta_lo >= SIGMOID_LOGIT_FLOOR, xp.asarray(-math.log1p(-SIGMOID_P_ERROR) + LOG_ROUNDING), inf)
    ratio = xp.exp(xp.minimum(eta_hi + math.log(SIGMOID_P_ERROR), math.log(0.5)))  # delta e^eta, capped
    err_q = xp.where(eta_hi + math.log(SIGMOID_P_ERROR) < math.log(0.5), -xp.log1p(-ratio) + LOG_ROUNDING, inf)
    return err_p, err_q


@register_rule(BernoulliRV, "Bernoulli", ("p",), range_params=("p",))
def bernoulli_range(op, domain, params, xp):
    """Bernoulli(p), x in {0, 1}.

    Derivation. With ``eta = logit p``: ``ln p(1) = ln sigmoid(eta)`` (increasing in eta) and
    ``ln p(0) = ln sigmoid(-eta)`` (decreasing). Over ``eta in [eta_lo, eta_hi]`` and both
    values of x, the largest log-mass is ``max(ln s(eta_hi), ln s(-eta_lo))`` and the smallest
    ``min(ln s(eta_lo), ln s(-eta_hi))``. For a point ``eta`` this gives ``L = |logit p|``
    (docs/theory/families.md#bernoulli); for a logistic regression ``eta in [b - R||w||, b + R||w||]`` it gives
    ``L = |b| + R||w||``. Computed with log-sigmoid, not ``log(1 - sigmoid)``, which loses
    precision near ``|eta| ~ 30``. On the logit scale the range is widened by the error of what
    PyMC computes (:func:`computed_log_sigmoid_errors`): infinite from ``|eta|`` about 35 on, where
    ``ln(1 - p)`` of the rounded ``p`` may be ``-inf`` (tests/fuzz/FOUND.md #13).
    """
    lo_x, hi_x = integer_domain(domain, "Bernoulli")
    if hi_x > 1:
        raise DomainError(f"Bernoulli data are 0/1 but the declared domain is {domain}")
    (p,) = params
    eta_lo, eta_hi = _logit_bounds(p, xp)
    his, los = [], []
    if lo_x <= 1 <= hi_x:
        his.append(xp.log_sigmoid(eta_hi))
        los.append(xp.log_sigmoid(eta_lo))
    if lo_x <= 0 <= hi_x:
        his.append(xp.log_sigmoid(-eta_lo))
        los.append(xp.log_sigmoid(-eta_hi))
    if p.space == "logit":  # PyMC computes ln p, ln(1 - p) from a rounded sigmoid (FOUND.md #13)
        err_p, err_q = computed_log_sigmoid_errors(eta_lo, eta_hi, xp)
        errors = ([err_p] if lo_x <= 1 <= hi_x else []) + ([err_q] if lo_x <= 0 <= hi_x else [])
        his = [h + e for h, e in zip(his, errors)]
        los = [l_ - e for l_, e in zip(los, errors)]
    hi, lo = his[0], los[0]
    for h, l_ in zip(his[1:], los[1:]):
        hi, lo = xp.maximum(hi, h), xp.minimum(lo, l_)
    return lo, hi


def _binomial_logpmf(x, n, p, xp):
    # a Python-float x would become a float32 constant under PT (gammaln(11.0) is float32)
    x = xp.asarray(x)
    return (
        xp.gammaln(n + 1.0)
        - xp.gammaln(x + 1.0)
        - xp.gammaln(n - x + 1.0)
        + xp.where(x > 0, x * xp.log(p), 0.0)  # 0 * ln 0 = 0 (p = 0 or 1 at a region's end)
        + xp.where(n - x > 0, (n - x) * xp.log1p(-p), 0.0)
    )


def _binomial_logpmf_logit(x, n, u, xp):
    """``ln Bin(x; n, sigmoid(u))`` with ``ln p``, ``ln(1 - p)`` by log-sigmoid (exact at
    ``|u| ~ 30``, where ``log(1 - sigmoid(u))`` loses digits); ``0 * ln 0`` is taken as 0."""
    x = xp.asarray(x)
    return (
        xp.gammaln(n + 1.0)
        - xp.gammaln(x + 1.0)
        - xp.gammaln(n - x + 1.0)
        + xp.where(x > 0, x * xp.log_sigmoid(u), 0.0)
        + xp.where(n - x > 0, (n - x) * xp.log_sigmoid(-u), 0.0)
    )


@register_rule(BinomialRV, "Binomial", ("n", "p"), range_params=("p",))
def binomial_range(op, domain, params, xp):
    """Binomial(n, p), x in {lo..hi} inside {0..n} (a domain above n is refused).

    ``p`` is a point or an interval, on the natural scale or as ``logit p`` (``space="logit"``:
    a logistic-binomial regression, ``logit p = X @ w + b`` over a covariate ball, or PyMC's
    ``logit_p=``).

    Derivation. The pmf is log-concave in x, so over an integer interval its largest value is at
    the mode ``floor((n+1)p)`` clipped to the interval and its smallest at an end. With
    ``{lo..hi} = {0..n}`` this is ``ln Bin(k; m, p) - m ln min(p, 1-p)`` (docs/theory/families.md); its minimum,
    ``ln C(m, floor(m/2))`` at ``p = 1/2``, is why a whole Binomial count cannot be one record
    of a small budget (:func:`min_lipschitz`). For ``p`` in an interval (``theta[y]``, or a
    window ``u = logit p in [u_lo, u_hi]``): ``ln pmf(x; u) = ln C(n, x) + x u - n softplus(u)``
    is concave in u with its peak at ``u = logit(x/n)``, so the smallest value over the box is at
    one of its four corners (x at an end, u at an end) and the largest is
    ``max_x ln pmf(x; clip(logit(x/n), u_lo, u_hi))``, enumerated over the domain (O(M)). A
    natural interval is the same set as its logit image (the map is increasing), so both scales
    share the logit computation.
    """
    lo_x, hi_x = integer_domain(domain, "Binomial")
    n, p = params
    if not n.is_point:
        raise UnsupportedFactorError("the Binomial number of trials n cannot read private data")
    n = n.lo
    check_trials_domain("Binomial", domain, lo_x, hi_x, known_trials(n, xp))
    hi_eff = xp.minimum(float(hi_x), n)
    ends = (xp.asarray(float(lo_x)), hi_eff)
    if p.is_point and p.space == "natural":
        mode = xp.clip(xp.floor((n + 1.0) * p.lo), float(lo_x), hi_eff)
        hi = _binomial_logpmf(mode, n, p.lo, xp)
        lo = xp.minimum(*(_binomial_logpmf(e, n, p.lo, xp) for e in ends))
        return lo, hi
    u_lo, u_hi = _logit_bounds(p, xp)
    lo, hi = _binomial_logit_range(n, u_lo, u_hi, lo_x, hi_x, hi_eff, ends, p.is_point, xp)
    if p.space == "logit":  # PyMC computes x ln p + (n - x) ln(1 - p) from a rounded sigmoid (FOUND.md #13)
        err_p, err_q = computed_log_sigmoid_errors(u_lo, u_hi, xp)
        err = n * xp.maximum(err_p, err_q)
        lo, hi = lo - err, hi + err
    return lo, hi


def _binomial_logit_range(n, u_lo, u_hi, lo_x, hi_x, hi_eff, ends, is_point, xp):
    """The exact range of the Binomial log-pmf over ``u = logit p in [u_lo, u_hi]`` and the domain."""
    if is_point:
        mode = xp.clip(xp.floor((n + 1.0) * xp.sigmoid(u_lo)), float(lo_x), hi_eff)
        hi = _binomial_logpmf_logit(mode, n, u_lo, xp)
        lo = xp.minimum(*(_binomial_logpmf_logit(e, n, u_lo, xp) for e in ends))
        return lo, hi
    lo = None
    for e in ends:
        for u in (u_lo, u_hi):
            v = _binomial_logpmf_logit(e, n, u, xp)
            lo = v if lo is None else xp.minimum(lo, v)
    x = domain_values(lo_x, hi_x, xp)
    n_e = value_axis(n, xp)
    # logit(x / n), finite at x = 0 and x = n (about -+690: the clip then picks the window's end,
    # up to a change of ln pmf below 1e-290)
    peak = xp.log(xp.maximum(x, 1e-300)) - xp.log(xp.maximum(n_e - x, 1e-300))
    u_x = xp.clip(peak, value_axis(u_lo, xp), value_axis(u_hi, xp))
    vals = xp.where(x <= n_e, _binomial_logpmf_logit(x, n_e, u_x, xp), -np.inf)
    return lo, xp.amax(vals, axis=-1)


@register_rule(CategoricalRV, "Categorical", ("p",), range_params=("p",))
def categorical_range(op, domain, params, xp):
    """Categorical(p) over K classes, x in {lo..hi} subset of {0..K-1} (larger domains are refused).

    Derivation. ``ln p(x) = ln p_x``: over the classes the domain allows, the range is
    ``[ln min_x p_x, ln max_x p_x]`` and ``L = ln(max p / min p)`` (docs/theory/families.md#categorical). When
    ``p`` reads private data (``pi[y]``, one simplex per class), ``p_x`` ranges over the
    per-component hull ``[p_lo_x, p_hi_x]``, and the extremes over the hull are the extremes over
    the rows themselves.
    """
    lo_x, hi_x = integer_domain(domain, "Categorical")
    (p,) = params
    classes = np.shape(p.hi)[-1] if xp.name == "numpy" else getattr(p.hi.type, "shape", (None,))[-1]
    if classes is not None and hi_x > classes - 1:
        # a record naming a class the model does not have has probability 0
        raise DomainError(
            f"the declared domain {domain} reaches above the last class {classes - 1} of a "
            f"{classes}-class Categorical; declare Integers(0, {classes - 1})"
        )
    sl = slice(lo_x, hi_x + 1)
    hi = xp.log(xp.amax(p.hi[..., sl], axis=-1))
    lo = xp.log(xp.amin(p.lo[..., sl], axis=-1))
    return lo, hi


def _poisson_logpmf(x, mu, xp):
    x = xp.asarray(x)  # see _binomial_logpmf: keep gammaln(x + 1) in float64 under PT
    return xp.where(x > 0, x * xp.log(mu), 0.0) - mu - xp.gammaln(x + 1.0)  # 0 * ln 0 = 0


def _poisson_logpmf_log(y, t, xp):
    """``ln Poisson(y; e^t) = y t - e^t - ln y!`` (``0 * t`` taken as 0, also at ``t = -inf``)."""
    y = xp.asarray(y)
    return xp.where(y > 0, y * t, 0.0) - xp.exp(t) - xp.gammaln(y + 1.0)


def _log_mean_bounds(mu: Bounds, family: str, xp):
    """``(t_lo, t_hi)``, ``t = ln mu``, from a mean given on the ``natural`` or ``log-mean``
    scale (the log is increasing: the same set of means)."""
    if mu.space == "log-mean":
        return xp.asarray(mu.lo), xp.asarray(mu.hi)
    if mu.space != "natural":
        raise UnsupportedFactorError(
            f"a {family} mean given on the {mu.space!r} scale: only 'natural' and 'log-mean' are supported"
        )
    # a natural window may reach below 0 (an identity link): the model's mean is >= 0 there and a
    # mean of 0 gives L = inf, never a NaN
    lo = xp.log(xp.maximum(xp.asarray(mu.lo), 0.0))
    return lo, (lo if mu.is_point else xp.log(xp.maximum(xp.asarray(mu.hi), 0.0)))


@register_rule(PoissonRV, "Poisson", ("mu",), range_params=("mu",))
def poisson_range(op, domain, params, xp):
    """Poisson(mu), x in {lo..hi}; ``mu`` a point, or a window of ``t = ln mu``
    (``space="log-mean"``: Poisson regression, ``mu = exp(X @ w + b)``), or a natural interval.

    Derivation (point). ``f(x) = x ln mu - mu - ln x!`` is concave in x (the pmf is log-concave):
    the largest value is at the mode ``floor(mu)`` clipped to the domain, the smallest at an end.
    With ``lo = 0`` this is ``max_x f(x) - min(0, f(M))`` (docs/theory/families.md#poisson). L is valley-shaped in mu
    and never 0 (``M = 10``: at least 2.86; :func:`min_lipschitz`).

    Derivation (window ``t in [t_lo, t_hi]``, docs/theory/families.md#poisson-regression; the
    record's count and its covariates vary independently). ``g(y, t) = y t - e^t - ln y!`` is
    concave in t with its peak at ``t = ln y``: the smallest value over the box is at a corner
    (t at an end by concavity, y at an end by log-concavity), and the largest is
    ``max_y G(y)``, ``G(y) = g(y, clip(ln y, t_lo, t_hi))`` (y = 0 at ``t_lo``). docs/theory/families.md
    enumerates y (O(M)); G is unimodal with its peak at ``y_c = ceil(e^{t_lo}) - 1``, so four
    candidates around ``floor(e^{t_lo})`` suffice (O(1)):

    * for ``y + 1 <= e^{t_lo}``, ``G(y) = g(y, t_lo)`` and
      ``G(y+1) - G(y) = t_lo - ln(y+1) >= 0``: G increases up to ``y_c``;
    * for ``y + 1 >= e^{t_lo}``, the best ``t*`` of ``y + 1`` is ``clip(ln(y+1)) <= ln(y+1)``, so
      ``G(y+1) = g(y+1, t*) = g(y, t*) + t* - ln(y+1) <= g(y, t*) <= G(y)``: G does not increase
      from ``y_c`` on.

    So ``argmax_{lo..hi} G = clip(y_c, lo, hi)``, and ``y_c`` is in ``floor(e^{t_lo}) + {-1, 0}``;
    the candidates ``floor(e^{t_lo}) + {-2..1}`` (each evaluated exactly) absorb rounding in
    ``e^{t_lo}``. Exact; checked against PyMC by enumeration over the data and a grid of the
    window. A natural interval ``[mu_lo, mu_hi]`` (a table ``rate[group]``) is the window
    ``[ln mu_lo, ln mu_hi]``.
    """
    lo_x, hi_x = integer_domain(domain, "Poisson")
    (mu,) = params
    if mu.is_point and mu.space == "natural":
        mu = mu.lo
        mode = xp.clip(xp.floor(mu), float(lo_x), float(hi_x))
        hi = _poisson_logpmf(mode, mu, xp)
        lo = xp.minimum(_poisson_logpmf(float(lo_x), mu, xp), _poisson_logpmf(float(hi_x), mu, xp))
        return lo, hi
    t_lo, t_hi = _log_mean_bounds(mu, "Poisson", xp)
    lo = None
    for y in (float(lo_x), float(hi_x)):
        for t in (t_lo, t_hi):
            v = _poisson_logpmf_log(y, t, xp)
            lo = v if lo is None else xp.minimum(lo, v)
    # the candidates only steer the search: e^{t_lo} is capped where it lies far above any domain
    first = xp.floor(xp.exp(xp.minimum(t_lo, 700.0)))
    hi = None
    for y in profile_candidates(first, lo_x, hi_x, xp):
        t_y = xp.where(y > 0, xp.clip(xp.log(xp.maximum(y, 1.0)), t_lo, t_hi), t_lo)
        v = _poisson_logpmf_log(y, t_y, xp)
        hi = v if hi is None else xp.maximum(hi, v)
    return lo, hi


@register_rule(GeometricRV, "Geometric", ("p",))
def geometric_range(op, domain, params, xp):
    """Geometric(p): number of trials up to the first success, x in {lo..hi}, lo >= 1.

    Derivation. ``ln p(x) = ln p + (x - 1) ln(1 - p)`` is linear and decreasing in x, so
    ``L = -(hi - lo) ln(1 - p)``. (docs/theory/families.md counts failures from 0 to M, which is the same rule
    with ``hi - lo = M``.)
    """
    lo_x, hi_x = integer_domain(domain, "Geometric", support_lo=1)
    (p,) = params
    p = point_value(p, "Geometric", "p")
    # (k - 1) ln(1 - p) with 0 * ln 0 = 0 (p = 1 at a region's end)
    hi = xp.log(p) + ((lo_x - 1.0) * xp.log1p(-p) if lo_x > 1 else 0.0)
    lo = xp.log(p) + ((hi_x - 1.0) * xp.log1p(-p) if hi_x > 1 else 0.0)
    return lo, hi


# =========================================================================== region rules
#
# NumPy only. A region rule returns, per observed element, a sound sup of L over a truncation
# region (pymc_dp.rules.region). The modes each family declares are proved in the docstrings
# below and in docs/rules/counts.md, and checked by brute force in tests/rules/test_count.py.


def _span_values(p: Span, family: str, name: str) -> tuple[np.ndarray, np.ndarray]:
    lo, hi = np.asarray(p.lo, dtype=float), np.asarray(p.hi, dtype=float)
    if np.any(np.isnan(lo)) or np.any(np.isnan(hi)) or np.any(lo > hi):
        raise NoRegionRule(f"the {family} parameter {name!r} has an empty or NaN span")
    return lo, hi


def _fixed_bounds(value) -> Bounds:
    return Bounds.point(np.asarray(value, dtype=float))


def link_region(
    family: str,
    link_spaces: tuple[str, ...],
    span_modes: dict[str, Any],
    positive: dict[str, str] | None = None,
) -> Callable[..., np.ndarray]:
    """A custom region rule: lemma C (docs/theory/glm.md#lemma-c) on the family's link scale, modes for the Spans.

    Returns ``region(op, domain, params)`` (the ``custom`` of a
    :class:`~pymc_dp.rules.region.RegionSpec`) that evaluates the per-record rule
    (:func:`~pymc_dp.rules.base.element_lipschitz`) on the product of candidates:

    * a :class:`Window` on a scale in ``link_spaces`` that slides at a fixed width: its two end
      windows ``[o_lo - half, o_lo + half]``, ``[o_hi - half, o_hi + half]`` (lemma C below, with
      lemma B for the width); any other window: its hull (lemma B, always sound);
    * a :class:`Span`: per ``span_modes[name]`` -- ``"ends"`` (L quasi-convex in it),
      ``"increasing"`` / ``"decreasing"`` (L monotone), a :class:`BranchAndBound` (lemma D, at most
      one), else it must be a point;
    * ``positive[name]``: the message of the refusal when that Span reaches 0 or below.

    A function quasi-convex in each coordinate separately takes its sup over a box at a vertex,
    so the largest value over the candidates is the sup over the region.

    **Lemma C for the count families (window ends on the link scale).** Let ``Y = {lo..hi}``,
    ``W_b = [b - s, b + s]`` (s > 0) and ``L(b) = max_{Y x W_b} g - min_{Y x W_b} g``, where
    ``g(y, t)`` is the log-pmf at link value t, (a) strictly concave in t for every y, (b) with
    ``d_t g(y, t)`` strictly increasing in y. Then ``sup_{b in [b1, b2]} L(b) = max(L(b1), L(b2))``
    for the Bernoulli and Binomial (``t = logit p``), the Poisson (``t = ln mu``) and the
    NegativeBinomial with fixed alpha (``t = ln mu``).

    Proof. y and t vary independently, so ``L(b) = sup F(t, t')`` over ``t, t' in W_b`` with
    ``F = M(t) - m(t')``, ``M = max_y g(y, .)``, ``m = min_y g(y, .)``. The union of the
    ``W_b^2`` is the band ``B = {t, t' in [b1 - s, b2 + s], |t - t'| <= 2s}`` (for such a pair
    ``b`` in ``[max(t, t') - s, min(t, t') + s]`` clipped to ``[b1, b2]`` contains both). Let
    ``(t, t')`` maximise F on B. ``-m`` is a max of strictly convex functions, so t' is an end of
    its section ``[max(b1 - s, t - 2s), min(b2 + s, t + 2s)]``. If it is ``b1 - s`` or ``b2 + s``,
    or if the pair touches the band's outer ends, it lies in ``W_{b1}^2`` or ``W_{b2}^2``. Else
    ``t' = tau - 2s`` (case 1) or ``t' = tau + 2s`` (case 2) with ``t = tau`` strictly inside,
    and ``K(tau) = F(tau, tau -+ 2s)`` has a local max along that edge. M and -m are maxima of
    finitely many smooth functions (right derivative >= left), so ``K'_- >= 0 >= K'_+`` forces
    both to be differentiable: by (b) one active record y for M at tau and one y' for m at t',
    and locally ``K = k = g(y, tau) - g(y', tau -+ 2s)`` with ``k' = 0``, ``k'' <= 0``. Moving t
    alone towards t', and t' alone towards t, stays in B: in case 1 ``d_t g(y, tau) >= 0`` and
    ``d_t g(y', t') >= 0``, in case 2 both ``<= 0``. Per family (mean ``m(t)``):

    * Poisson (``d_t g = y - e^t``). Case 1: ``k' = 0`` gives ``y - y' = e^tau - e^t' > 0``, so
      ``y' < hi``; and ``e^t' <= y'``, so the pmf at t' decreases strictly from y' on (ratio
      ``e^t' / (k + 1) < 1``): ``g(hi, t') < g(y', t')``, y' is not the minimiser. Case 2:
      ``k'' = e^{tau + 2s} - e^tau > 0``, not a max.
    * Binomial (``d_t g = y - n sigmoid(t)``; Bernoulli: n = 1). Case 1: ``y - y' = n(sigmoid(tau)
      - sigmoid(t')) > 0`` so ``y' < hi``, and ``n p' <= y'`` makes the pmf decrease strictly from
      y' on (ratio ``(n-k) p / ((k+1)(1-p)) < 1`` iff ``k + 1 > (n+1) p``, and
      ``(n+1) p' <= y' + p' < k + 1``). Case 2: mirror image, ``y' > y >= lo`` and ``n p' >= y'``
      make it increase strictly up to y': ``g(lo, t') < g(y', t')``.
    * NegativeBinomial, alpha fixed (``d_t g = alpha (y - mu) / (alpha + mu)``). With
      ``r = (y + alpha)/(alpha + mu) = (y' + alpha)/(alpha + mu')`` at ``k' = 0``:
      ``k'' = alpha r [mu'/(alpha + mu') - mu/(alpha + mu)]``. Case 2 (``mu' > mu``): ``k'' > 0``.
      Case 1: ``y + alpha = (y' + alpha)(alpha + mu)/(alpha + mu') > y' + alpha`` so ``y' < hi``,
      and ``mu' <= y'`` makes the pmf decrease strictly from y' on (ratio
      ``(k + alpha) mu' / ((k + 1)(alpha + mu')) < 1`` iff ``alpha (mu' - k - 1) < mu'``).

    Every case contradicts the choice of the maximiser, so it lies in an end window. (s = 0: L
    is quasi-convex on the link scale, see the Span modes.) This extends docs/theory/glm.md#negative-binomial-intercept,
    which argues the Poisson and NB cases for ``lo = 0`` only (``y' = 0`` contradicts
    ``d_t g(0, t') >= 0``), to any domain ``{lo..hi}``; PyMC's NegativeBinomial switches to the
    Poisson pmf above alpha = 1e10, which the Poisson case covers.
    """
    positive = positive or {}

    def region(op, domain, params) -> np.ndarray:
        info = rule_info(op)
        names = info.param_names if info is not None else tuple(f"p{i}" for i in range(len(params)))
        if len(params) != len(names):
            raise NoRegionRule(f"{family}: {len(params)} parameters given, {len(names)} expected")
        choices: list[list] = []
        bnb: tuple[int, np.ndarray, np.ndarray, BranchAndBound] | None = None
        for i, (name, p) in enumerate(zip(names, params)):
            if isinstance(p, Window):
                slides = p.space in link_spaces and getattr(p, "sliding", True)
                choices.append(p.ends() if slides else [p.hull])
            elif isinstance(p, Span):
                lo, hi = _span_values(p, family, name)
                if name in positive and np.any(lo <= 0):
                    raise NoRegionRule(positive[name])
                mode = span_modes.get(name, "point")
                if np.array_equal(lo, hi):
                    choices.append([_fixed_bounds(lo)])
                elif mode == "ends":
                    choices.append([_fixed_bounds(lo), _fixed_bounds(hi)])
                elif mode == "increasing":
                    choices.append([_fixed_bounds(hi)])
                elif mode == "decreasing":
                    choices.append([_fixed_bounds(lo)])
                elif isinstance(mode, BranchAndBound):
                    if bnb is not None:
                        raise NoRegionRule(f"{family}: at most one parameter may be bounded by branch and bound")
                    bnb = (i, lo, hi, mode)
                    choices.append([None])
                else:
                    raise NoRegionRule(
                        f"the {family} parameter {name!r} must be fixed (it may not vary over the "
                        "truncation region)"
                    )
            else:
                raise NoRegionRule(f"{family}: parameter {name!r} of kind {type(p).__name__} has no region rule")
        best = None
        for combo in itertools.product(*choices):
            if bnb is None:
                value = np.asarray(element_lipschitz(op, domain, tuple(combo), NP), dtype=float)
            else:
                i, lo, hi, mode = bnb

                def at(v, combo=combo, i=i):
                    full = list(combo)
                    full[i] = _fixed_bounds(v)
                    return np.asarray(element_lipschitz(op, domain, tuple(full), NP), dtype=float)

                def lip(a, b, combo=combo, mode=mode):
                    return np.asarray(mode.lipschitz(op, domain, combo, a, b), dtype=float)

                value = certified_sup_1d(at, lo, hi, lip, log_scale=mode.log_scale)
            best = value if best is None else np.maximum(best, value)
        return best

    return region


# Bernoulli. Window of ``logit p``: ends (lemma C of link_region, n = 1; docs/theory/glm.md#logistic-intercept).
# Span of p: ends -- ``L = |logit p|`` on {0, 1} (0 on a one-value domain) is quasi-convex in p.
register_region(
    BernoulliRV,
    RegionSpec(window="ends", params={"p": "ends"}, custom=link_region("Bernoulli", ("logit",), {"p": "ends"})),
)

# Binomial. Window of ``logit p``: ends (lemma C). Span of p: ends -- with ``u = logit p``,
# ``ln pmf(x; u) = c_x + x u - n softplus(u)``; the last term does not depend on x and cancels in
# every pair difference, so ``L(u) = max_x (c_x + x u) - min_x (c_x + x u)`` is convex in u (a max
# minus a min of affine functions), hence quasi-convex in p. n must be fixed.
register_region(
    BinomialRV,
    RegionSpec(window="ends", params={"p": "ends"}, custom=link_region("Binomial", ("logit",), {"p": "ends"})),
)

# Poisson. Window of ``ln mu``: ends (lemma C). Span of mu (a free rate): ends -- with
# ``u = ln mu``, ``ln pmf(x) = (x u - ln x!) - e^u``; ``e^u`` cancels in every pair difference, so
# ``L(u)`` is convex in u (valley-shaped, docs/theory/families.md#poisson) and quasi-convex in mu.
register_region(
    PoissonRV,
    RegionSpec(window="ends", params={"mu": "ends"}, custom=link_region("Poisson", ("log-mean",), {"mu": "ends"})),
)

# Geometric. Span of p: increasing -- ``L = -(hi - lo) ln(1 - p)``.
register_region(
    GeometricRV,
    RegionSpec(params={"p": "increasing"}, custom=link_region("Geometric", (), {"p": "increasing"})),
)


# =========================================================================== smallest constants


@singledispatch
def min_lipschitz(op, domain, params: tuple) -> float | None:
    """The smallest constant an element of the factor can have, when a positive one is proved.

    Parameters
    ----------
    op : RandomVariable
        The factor's Op.
    domain : Domain
        The observed data's domain.
    params : tuple
        One entry per parameter, in the Op's order: a fixed value (a point
        :class:`~pymc_dp.rules.base.Bounds`, a point :class:`~pymc_dp.rules.region.Span`, or a
        number / array), or ``None`` for a parameter that is free (any value; an interval or a
        window is treated as free, which only lowers the floor).

    Returns
    -------
    float or None
        A number ``m > 0`` with ``L(theta) >= m`` for every element and every value of the free
        parameters (elementwise fixed parameters, such as per-row n, are reduced by ``min``), so a
        share below ``m`` cannot be met; or None when no positive floor is stated (the constant
        can be made arbitrarily small, or the family states none). The value is the proved
        infimum less a rounding margin of ``1e-9 (1 + m)``.
    """
    return None


def _floor_if_fixed(op, domain, params) -> float | None:
    """Families whose constant goes to 0 with a free parameter: a floor only when all are fixed."""
    fixed = fixed_params(params)
    return None if fixed is None else constant_floor(op, domain, fixed)


# Bernoulli: L = |logit p| is 0 at p = 1/2; Geometric: L = -(hi - lo) ln(1 - p) -> 0 as p -> 0.
min_lipschitz.register(BernoulliRV)(_floor_if_fixed)
min_lipschitz.register(GeometricRV)(_floor_if_fixed)


def _log_linear_floor_point(c_lo, c_hi, lo: int, hi):
    """``u* = (c_lo - c_hi) / (hi - lo)``: where the two ends of the domain tie.

    For a family with ``ln pmf(x; u) = c_x + x u + A(u)`` (A not depending on x) and ``c``
    concave or convex in x, ``L(u) = P(u) - Q(u)`` with ``P = max_x (c_x + x u)`` and
    ``Q = min_x (c_x + x u)``. If c is concave, Q is the smaller of the two end lines, whose
    slopes are ``hi`` before u* and ``lo`` after; if c is convex, P is the larger of the two end
    lines (slopes ``lo`` then ``hi``). The other envelope has slopes in ``[lo, hi]``. Either way
    ``L' <= 0`` before u* and ``L' >= 0`` after: ``min_u L(u) = L(u*)``.
    """
    width = np.asarray(hi, dtype=float) - lo
    return np.where(width > 0, (c_lo - c_hi) / np.where(width > 0, width, 1.0), 0.0), width > 0


@min_lipschitz.register(PoissonRV)
def poisson_min_lipschitz(op, domain, params) -> float | None:
    """Poisson, ``x in {lo..hi}``: ``min_mu L(mu) = L(mu*)``, ``ln mu* = (ln hi! - ln lo!)/(hi - lo)``.

    Proof: ``ln pmf = (x u - ln x!) - e^u`` with ``u = ln mu``: the log-linear case of
    :func:`_log_linear_floor_point` with ``c_x = -ln x!`` concave. At ``mu*`` the two ends of the
    domain are equally likely. ``{0..10}``: 2.862 at ``mu* = 4.53`` (docs/theory/families.md: 2.86). A window of
    ``ln mu`` only widens the range (lemma B), so the floor holds for Poisson regression too.
    None on a one- or two-value domain (``L(mu*) = 0``).
    """
    fixed = fixed_params(params)
    if fixed is not None:
        return constant_floor(op, domain, fixed)
    lo, hi = integer_domain(domain, "Poisson")
    if hi == lo:
        return None
    from scipy.special import gammaln

    u_star = (gammaln(hi + 1.0) - gammaln(lo + 1.0)) / (hi - lo)
    L = element_lipschitz(op, domain, (Bounds.point(np.float64(u_star), "log-mean"),), NP)
    return floor_with_margin(L, scale=gammaln(hi + 1.0) + hi * abs(u_star) + math.exp(u_star))


@min_lipschitz.register(BinomialRV)
def binomial_min_lipschitz(op, domain, params) -> float | None:
    """Binomial(n, p) with n fixed, p free: ``min_p L = L(sigmoid(u*))``,
    ``u* = (ln C(n, lo) - ln C(n, h)) / (h - lo)``, ``h = min(hi, n)`` (per element).

    Proof: ``ln pmf = ln C(n, x) + x u - n softplus(u)``, ``u = logit p``: the log-linear case of
    :func:`_log_linear_floor_point` (``ln C(n, x)`` concave). On ``{0..n}``, ``u* = 0`` and the
    floor is ``ln C(n, floor(n/2))`` (docs/theory/families.md#binomial; n = 10: 5.53). A free n: None.
    """
    fixed = fixed_params(params)
    if fixed is not None:
        return constant_floor(op, domain, fixed)
    fixed_n = fixed_value(params[0])
    if fixed_n is None:
        return None
    n = fixed_n[0]
    lo, hi = integer_domain(domain, "Binomial")
    check_trials_domain("Binomial", domain, lo, hi, n)
    from scipy.special import gammaln

    h = np.minimum(float(hi), n)

    def ln_c(x):
        return gammaln(n + 1.0) - gammaln(x + 1.0) - gammaln(n - x + 1.0)

    u_star, wide = _log_linear_floor_point(ln_c(float(lo)), ln_c(h), lo, h)
    L = element_lipschitz(op, domain, (Bounds.point(n), Bounds.point(u_star, "logit")), NP)
    return floor_with_margin(np.where(wide, L, 0.0), scale=gammaln(n + 1.0) + n * np.abs(u_star))
