"""Exact rules for continuous likelihoods on a bounded domain ``[a, b]``.

Normal, Laplace, StudentT and Cauchy have a log-density that is a decreasing function of
``|x - mu|``; they share :func:`distance_range`, which also handles a location that reads private
data (``mu = X @ w + b`` in linear regression). Exponential, Gamma, LogNormal and Beta are
handled through the candidate points where their log-density can be extreme; Gamma also takes a
log-link window of its mean (Gamma regression) and LogNormal a window of its ``mu``.

Each family also registers a region rule (:mod:`pymc_dp.rules.region`): a sound, and here exact,
``sup L`` over a truncation region. Every region rule is a *custom* function that evaluates the
modes declared in its :class:`~pymc_dp.rules.region.RegionSpec` in closed form, so that infinite
or zero ends of a region (a free intercept, ``sigma >= 0``) give the mathematical limit -- a
finite number where ``L`` stays bounded, ``+inf`` where it does not -- instead of the NaN that
evaluating a log-density at ``mu = inf`` or ``sigma = 0`` would give. The proofs are in each
function's docstring and in ``docs/rules/continuous.md``.

A common device in those proofs: ``L(theta) = sup`` over pairs of records of the *pair difference*
``ln p(x | theta) - ln p(x' | theta)``. If every pair difference is affine in some function ``z``
of one parameter, ``L`` is convex in ``z`` (a sup of affine functions), and if ``z`` is monotone in
the parameter, ``L`` is quasi-convex in the parameter: its sup over an interval sits at an end.
"""

from __future__ import annotations

import numpy as np
from pytensor.tensor.random.basic import (
    BetaRV,
    CauchyRV,
    ExponentialRV,
    GammaRV,
    LaplaceRV,
    LogNormalRV,
    NormalRV,
    StudentTRV,
)

from pymc_dp.exceptions import DomainError, UnsupportedFactorError
from pymc_dp.rules import beta_regression
from pymc_dp.rules.base import Bounds, domain_interval, register_rule
from pymc_dp.rules.region import NoRegionRule, RegionSpec, Span, Window, register_region

_LOG_2PI = float(np.log(2 * np.pi))


def distance_range(a: float, b: float, loc: Bounds, xp):
    """Smallest and largest ``|x - mu|`` over ``x in [a, b]`` and ``mu in [loc.lo, loc.hi]``.

    The smallest is the gap between the two intervals (0 if they meet); the largest is reached
    at opposite ends. For a point ``mu`` with ``d = |mu - c|``, ``w = (b - a)/2``: ``max(0, d - w)``
    and ``d + w``.
    """
    d_min = xp.maximum(xp.maximum(loc.lo - b, a - loc.hi), 0.0)
    d_max = xp.maximum(b - loc.lo, loc.hi - a)
    return d_min, d_max


def _point(bounds: Bounds, family: str, name: str):
    if not bounds.is_point:
        raise UnsupportedFactorError(
            f"the {family} parameter {name!r} cannot read private data (only the location can)"
        )
    return bounds.lo


def _natural(bounds: Bounds, family: str, name: str) -> None:
    if bounds.space != "natural":
        raise UnsupportedFactorError(
            f"the {family} parameter {name!r} is taken on its natural scale, not {bounds.space!r}"
        )


@register_rule(NormalRV, "Normal", ("mu", "sigma"), range_params=("mu",), location="mu", scale="sigma")
def normal_range(op, domain, params, xp):
    """Normal(mu, sigma), x in [a, b].

    Derivation. ``ln phi = -ln sigma - ln(2 pi)/2 - |x - mu|^2 / (2 sigma^2)`` decreases in
    ``|x - mu|``, so its range is given by the smallest and largest distance
    (:func:`distance_range`). For a point mu: ``L = ((d + w)^2 - max(0, d - w)^2) / (2 sigma^2)``
    (docs/theory/families.md#normal). For linear regression, ``mu in [b0 - R||w||, b0 + R||w||]`` and
    ``y in [-1, 1]``, ``b0 = 0``, ``R = 1``: ``L = (1 + ||w||)^2 / (2 sigma^2)``.
    """
    a, b = domain_interval(domain, "Normal")
    mu, sigma = params
    sigma = _point(sigma, "Normal", "sigma")
    d_min, d_max = distance_range(a, b, mu, xp)
    const = -xp.log(sigma) - 0.5 * _LOG_2PI
    return const - xp.square(d_max) / (2 * xp.square(sigma)), const - xp.square(d_min) / (
        2 * xp.square(sigma)
    )


@register_rule(LaplaceRV, "Laplace", ("mu", "b"), range_params=("mu",), location="mu", scale="b")
def laplace_range(op, domain, params, xp):
    """Laplace(mu, s), x in [a, b].

    Derivation. ``ln p = -ln(2 s) - |x - mu| / s``: ``L = (d_max - d_min) / s``, for a point mu
    ``(min(d, w) + w) / s <= (b - a) / s`` (docs/theory/families.md#laplace).
    """
    a, b = domain_interval(domain, "Laplace")
    mu, s = params
    s = _point(s, "Laplace", "b")
    d_min, d_max = distance_range(a, b, mu, xp)
    const = -xp.log(2.0 * s)
    return const - d_max / s, const - d_min / s


def _student_logpdf_of_distance(dist, nu, sigma, xp):
    const = (
        xp.gammaln((nu + 1.0) / 2.0)
        - xp.gammaln(nu / 2.0)
        - 0.5 * xp.log(nu * np.pi)
        - xp.log(sigma)
    )
    return const - (nu + 1.0) / 2.0 * xp.log1p(xp.square(dist / sigma) / nu)


@register_rule(
    StudentTRV, "StudentT", ("nu", "mu", "sigma"), range_params=("mu",), location="mu", scale="sigma"
)
def studentt_range(op, domain, params, xp):
    """StudentT(nu, mu, sigma), x in [a, b].

    Derivation. With ``h(u) = (nu + 1)/2 ln(1 + u^2/nu)`` the log-density is ``C - h(|x-mu|/sigma)``,
    decreasing in the distance: ``L = h(d_max/sigma) - h(d_min/sigma)`` (docs/theory/families.md#studentt).
    Unlike the Normal, L is bounded in mu: ``sup_mu L = (nu + 1) asinh(w / (sigma sqrt(nu)))``.
    """
    a, b = domain_interval(domain, "StudentT")
    nu, mu, sigma = params
    nu = _point(nu, "StudentT", "nu")
    sigma = _point(sigma, "StudentT", "sigma")
    d_min, d_max = distance_range(a, b, mu, xp)
    return (
        _student_logpdf_of_distance(d_max, nu, sigma, xp),
        _student_logpdf_of_distance(d_min, nu, sigma, xp),
    )


@register_rule(CauchyRV, "Cauchy", ("alpha", "beta"), range_params=("alpha",), location="alpha", scale="beta")
def cauchy_range(op, domain, params, xp):
    """Cauchy(alpha, beta), x in [a, b].

    Derivation. ``ln p = -ln(pi beta) - ln(1 + ((x - alpha)/beta)^2)``, decreasing in the
    distance: the StudentT rule with nu = 1; ``sup_alpha L = 2 asinh((b - a) / (2 beta))``.
    """
    a, b = domain_interval(domain, "Cauchy")
    alpha, beta = params
    beta = _point(beta, "Cauchy", "beta")
    d_min, d_max = distance_range(a, b, alpha, xp)
    const = -xp.log(np.pi * beta)
    return (
        const - xp.log1p(xp.square(d_max / beta)),
        const - xp.log1p(xp.square(d_min / beta)),
    )


def _nonnegative(a: float, family: str):
    if a < 0:
        raise DomainError(f"{family} data are non-negative but the declared domain starts at {a}")


def _exponential_log_mean_range(a, b, t_lo, t_hi, xp):
    """Range of ``g(x, t) = -t - x e^(-t)`` (``ln p`` of an Exponential of mean ``e^t``) over
    ``x in [a, b]`` (``a >= 0``) and ``t in [t_lo, t_hi]``.

    ``g`` decreases in ``x`` (``d_x g = -e^(-t) < 0``), so the top is at ``x = a`` and the bottom
    at ``x = b``. ``g(x, .)`` is concave in ``t`` (``d_t^2 g = -x e^(-t) <= 0``): its minimum over
    the window is at an end, and at ``x = a`` its maximum is at ``clip(ln a, t_lo, t_hi)``
    (``d_t g = -1 + a e^(-t)`` vanishes at ``t = ln a``; for ``a = 0``, ``g = -t`` and the
    maximum is at ``t_lo``). Exact on the box.
    """
    ln_a = float(np.log(a)) if a > 0 else -np.inf
    t_top = xp.clip(ln_a, t_lo, t_hi)
    top = -t_top - a * xp.exp(-t_top) if a > 0 else -t_lo
    bot = xp.minimum(-t_lo - b * xp.exp(-t_lo), -t_hi - b * xp.exp(-t_hi))
    return bot, top


@register_rule(ExponentialRV, "Exponential", ("scale",), range_params=("scale",), scale="scale")
def exponential_range(op, domain, params, xp):
    """Exponential with scale s = 1/lam, x in [a, b], a >= 0; the scale a point on its natural
    scale, or a window ``t = ln s in [t_lo, t_hi]`` (``space="log-mean"``: the mean is ``s``).

    Derivation, point. ``ln p = ln lam - lam x`` is linear in x: ``L = lam (b - a)`` (``lam B``
    on ``[0, B]``, docs/theory/families.md#exponential).

    Derivation, log-mean window (exponential AFT / regression with a log link,
    docs/rules/continuous.md#exponential-regression). ``scale = exp(eta)`` with
    ``eta = b0 + x . w`` (PyMC's ``lam = exp(-eta)`` is the same scale): one record ``(t, x)``
    changes the data ``t`` in ``[a, b]`` and ``eta`` in its window, independently, so the range
    of ``ln p = -eta - t e^(-eta)`` over the box is exact by
    :func:`_exponential_log_mean_range`: ``L = max_eta g(a, eta) - min(g(b, eta_lo),
    g(b, eta_hi))``.
    """
    a, b = domain_interval(domain, "Exponential")
    _nonnegative(a, "Exponential")
    (scale,) = params
    if scale.space == "log-mean":
        return _exponential_log_mean_range(a, b, scale.lo, scale.hi, xp)
    _natural(scale, "Exponential", "scale")
    scale = _point(scale, "Exponential", "scale")
    return -xp.log(scale) - b / scale, -xp.log(scale) - a / scale


def _range_over_candidates(values, xp):
    lo = hi = values[0]
    for v in values[1:]:
        lo, hi = xp.minimum(lo, v), xp.maximum(hi, v)
    return lo, hi


def _gamma_domain(domain, shape_one: bool = False) -> tuple[float, float]:
    """``(a, b)`` of a Gamma factor's domain; ``a = 0`` only for a shape that is the constant 1
    (``shape_one``: the Exponential, whose log-density ``ln lam - lam x`` is finite at 0)."""
    a, b = domain_interval(domain, "Gamma")
    _nonnegative(a, "Gamma")
    if a == 0.0 and not shape_one:
        raise DomainError(
            "a Gamma factor whose shape is not the constant 1 needs a domain bounded away from 0: "
            "its log-density has the term (shape - 1) ln x, unbounded as x -> 0 for any shape "
            "other than 1 (a shape that is a parameter may take such values). Declare "
            "Interval(lo, hi) with lo > 0, or fix the shape to the number 1 (alpha=1: the "
            "Exponential, finite at 0)"
        )
    return a, b


def is_constant_one(value) -> bool:
    """Whether a Gamma shape is the constant 1 in every element (a NumPy value, or a PyTensor
    constant such as PyMC's ``alpha=1`` -- an expanded or allocated 1 included)."""
    if isinstance(value, (int, float, np.ndarray, np.number)):
        arr = np.asarray(value, dtype=float)
        return arr.size > 0 and bool(np.all(arr == 1.0))
    from pytensor.tensor.basic import NotScalarConstantError, get_underlying_scalar_constant_value

    try:
        return float(get_underlying_scalar_constant_value(value)) == 1.0
    except (NotScalarConstantError, TypeError, ValueError):
        return False


def _gamma_log_mean_g_range(k, t_lo, t_hi, v_lo, v_hi, xp):
    """Range of ``g(v, t) = (k-1) v - k t - k e^(v-t)`` over ``[v_lo, v_hi] x [t_lo, t_hi]``.

    ``g`` is jointly concave (``-k e^(v-t)`` is minus the exponential of a linear function): its
    minimum over the box is at a corner. For each ``v`` the best ``t`` is ``clip(v, t_lo, t_hi)``
    (``dg/dt = k (e^(v-t) - 1)``), and the profile ``max_t g`` -- concave, as a partial max of a
    jointly concave function -- is ``-v - k`` on the window, has slope ``k - 1 - k e^(v - t_hi) < 0``
    above it and slope ``k - 1 - k e^(v - t_lo)`` below it, zero at ``t_lo + ln(1 - 1/k)`` for
    ``k > 1`` (for ``k <= 1`` the profile decreases everywhere). So the maximum is at
    ``v^ = clip(t_lo + ln(1 - 1/k), v_lo, v_hi)`` (``v_lo`` when ``k <= 1``), ``t = clip(v^)``.
    """
    v_lo, v_hi = xp.asarray(v_lo), xp.asarray(v_hi)

    def g(v, t):
        return (k - 1.0) * v - k * t - k * xp.exp(v - t)

    k_safe = xp.where(k > 1.0, k, 2.0)
    peak = xp.where(k > 1.0, t_lo + xp.log1p(-1.0 / k_safe), v_lo)
    v_hat = xp.clip(peak, v_lo, v_hi)
    top = g(v_hat, xp.clip(v_hat, t_lo, t_hi))
    bot, _ = _range_over_candidates([g(v_lo, t_lo), g(v_lo, t_hi), g(v_hi, t_lo), g(v_hi, t_hi)], xp)
    return bot, top


@register_rule(GammaRV, "Gamma", ("shape", "scale"), range_params=("scale",), scale="scale")
def gamma_range(op, domain, params, xp):
    """Gamma(k, scale theta) (PyMC's ``Gamma(alpha=k, beta=1/theta)``), x in [a, b], a > 0.

    ``scale`` is either a point on its natural scale, or ``Bounds(t_lo, t_hi, space="log-mean")``:
    Gamma regression with a log link, ``mu = e^t``, ``t`` in the window ``[t_lo, t_hi]`` as the
    record varies, and ``scale = mu / k`` (PyMC's ``Gamma(alpha=k, beta=k / mu)``). The shape is
    a point.

    Derivation, natural scale. Up to constants ``g(x) = (k - 1) ln x - x / theta``. Its only
    stationary point is ``(k - 1) theta``; g is concave for ``k >= 1`` and monotone for ``k < 1``,
    so its range on ``[a, b]`` is the range over ``{a, b, clip((k - 1) theta, a, b)}``
    (docs/theory/families.md#gamma).

    Derivation, log-mean window (docs/theory/glm.md#gamma-regression). With ``v = ln x``,
    ``ln p = [k ln k - lnGamma(k)] + (k - 1) v - k t - k e^(v - t)``; the bracket is the same for
    every record. The range of the rest over the box is exact by
    :func:`_gamma_log_mean_g_range` (the density at its mode with ``mu`` as small as possible;
    the minimum at a corner). Data and covariates vary independently, so every point of the box
    is a record: the range is attained (its top as a maximum, not only a sup).

    Shape the constant 1 (``alpha=1``, a constant or a constant tensor of ones) on a domain that
    starts at 0: the density is the Exponential's with the same scale (``ln p = -ln theta -
    x / theta``; in the log-mean window ``mu = theta``), finite at 0, and the rule is
    :func:`exponential_range`. Any other shape is refused at 0 (``(k - 1) ln x`` is unbounded).
    """
    k, theta = params
    k = _point(k, "Gamma", "shape")
    a, b = _gamma_domain(domain, shape_one=is_constant_one(k))
    if a == 0.0:  # shape the constant 1: the Exponential with the same scale (and mean)
        return exponential_range(op, domain, (theta,), xp)
    if theta.space == "log-mean":
        const = k * xp.log(k) - xp.gammaln(k)
        bot, top = _gamma_log_mean_g_range(k, theta.lo, theta.hi, float(np.log(a)), float(np.log(b)), xp)
        return const + bot, const + top
    if theta.space != "natural":
        raise UnsupportedFactorError(
            f"the Gamma scale is taken as a point or as a window of ln(mean) (space 'log-mean'), "
            f"not on the {theta.space!r} scale"
        )
    if not theta.is_point:
        raise UnsupportedFactorError(
            "the Gamma scale can read private data only through a log link: give it as "
            "Bounds(lo, hi, space='log-mean'), a window of ln(mu) with scale = mu / shape"
        )
    theta = theta.lo
    const = -xp.gammaln(k) - k * xp.log(theta)

    def g(x):
        return const + (k - 1.0) * xp.log(x) - x / theta

    stationary = xp.clip((k - 1.0) * theta, a, b)
    return _range_over_candidates([g(xp.asarray(a)), g(xp.asarray(b)), g(stationary)], xp)


def _lognormal_f_range(m_lo, m_hi, s, ua, ub, xp):
    """Range of ``f(u, m) = -u - (u - m)^2 / (2 s^2)`` over ``[ua, ub] x [m_lo, m_hi]``.

    ``f`` is jointly concave: the minimum is at a corner. For each ``u`` the best ``m`` is
    ``clip(u, m_lo, m_hi)``, and the profile ``-dist(u, [m_lo, m_hi])^2 / (2 s^2) - u`` is concave
    with slope ``(m_lo - u)/s^2 - 1`` left of the window and ``< 0`` from there on: its
    maximiser is ``m_lo - s^2``, clipped to ``[ua, ub]``.
    """
    ua, ub = xp.asarray(ua), xp.asarray(ub)

    def f(u, m):
        return -u - xp.square(u - m) / (2.0 * xp.square(s))

    u_hat = xp.clip(m_lo - xp.square(s), ua, ub)
    top = f(u_hat, xp.clip(u_hat, m_lo, m_hi))
    bot, _ = _range_over_candidates([f(ua, m_lo), f(ua, m_hi), f(ub, m_lo), f(ub, m_hi)], xp)
    return bot, top


def _lognormal_domain(domain) -> tuple[float, float]:
    a, b = domain_interval(domain, "LogNormal")
    if a <= 0:
        raise DomainError(f"LogNormal data are positive: the declared domain must start above 0, got {a}")
    return a, b


@register_rule(LogNormalRV, "LogNormal", ("mu", "sigma"), range_params=("mu",), location="mu", scale="sigma")
def lognormal_range(op, domain, params, xp):
    """LogNormal(mu, s), x in [lo, hi], lo > 0; ``mu`` a point or a window ``[m_lo, m_hi]``
    (LogNormal regression, ``mu = X @ w + b``).

    Derivation. In ``u = ln x`` the log-density is ``-u - ln s - ln(2 pi)/2 - (u - mu)^2/(2 s^2)``:
    the Jacobian ``-ln x`` is part of it. Completing the square, for a point mu it is a Normal
    log-density in u centred at ``mu - s^2``, so the range over ``[ln lo, ln hi]`` is at the ends
    and at ``clip(mu - s^2)``. Dropping the Jacobian is *invalid* (docs/theory/families.md#lognormal-jacobian: on
    [1, 10], mu = ln sqrt(10), s = 0.5 the truth is 3.93, the naive Normal rule 2.65). For a
    window of mu the range over ``(u, mu)`` is :func:`_lognormal_f_range` (top at
    ``u = clip(m_lo - s^2)``, ``mu = clip(u, m_lo, m_hi)``; bottom at a corner); every point of
    the box is a record (data and covariates vary independently), so it is exact.
    """
    a, b = _lognormal_domain(domain)
    mu, s = params
    _natural(mu, "LogNormal", "mu")
    s = _point(s, "LogNormal", "sigma")
    const = -xp.log(s) - 0.5 * _LOG_2PI
    bot, top = _lognormal_f_range(mu.lo, mu.hi, s, float(np.log(a)), float(np.log(b)), xp)
    return const + bot, const + top


def _beta_domain(domain) -> tuple[float, float]:
    a, b = domain_interval(domain, "Beta")
    if not (0.0 < a and b < 1.0):
        raise DomainError(
            f"a Beta factor needs a domain strictly inside (0, 1) (its log-density is unbounded "
            f"at 0 and 1), got {domain}"
        )
    return a, b


def _beta_g_range(alpha, beta, a, b, xp):
    """Range of ``g(x) = (alpha - 1) ln x + (beta - 1) ln(1 - x)`` over ``[a, b]``: over the
    ends and the clipped stationary point ``(alpha - 1)/(alpha + beta - 2)``."""

    def g(x):
        return (alpha - 1.0) * xp.log(x) + (beta - 1.0) * xp.log1p(-x)

    denom = alpha + beta - 2.0
    safe = xp.where(xp.abs(denom) > 1e-12, denom, 1.0)
    stationary = xp.clip(xp.where(xp.abs(denom) > 1e-12, (alpha - 1.0) / safe, a), a, b)
    return _range_over_candidates([g(xp.asarray(a)), g(xp.asarray(b)), g(stationary)], xp)


@register_rule(BetaRV, "Beta", ("alpha", "beta"))
def beta_range(op, domain, params, xp):
    """Beta(alpha, beta), x in [lo, hi] inside (0, 1).

    Derivation. Up to constants ``g(x) = (alpha - 1) ln x + (beta - 1) ln(1 - x)``, with one
    stationary point ``(alpha - 1)/(alpha + beta - 2)``; g is concave, convex or monotone
    according to the signs of ``alpha - 1`` and ``beta - 1``, and in every case its range on
    ``[lo, hi]`` is the range over the ends and the clipped stationary point.

    Beta regression (``alpha`` a window of ``eta`` with ``space="logit-mean"``, ``beta`` the
    precision ``phi``): :mod:`pymc_dp.rules.beta_regression` (derivation there).
    """
    a, b = _beta_domain(domain)
    alpha, beta = params
    if alpha.space == "logit-mean":  # beta regression: alpha = sigmoid(eta) phi, beta the precision
        beta_regression.check_parts(alpha, beta)
        return beta_regression.beta_logit_mean_range(a, b, alpha.lo, alpha.hi, beta.lo, xp)
    _natural(beta, "Beta", "beta")
    alpha = _point(alpha, "Beta", "alpha")
    beta = _point(beta, "Beta", "beta")
    const = xp.gammaln(alpha + beta) - xp.gammaln(alpha) - xp.gammaln(beta)
    lo, hi = _beta_g_range(alpha, beta, a, b, xp)
    return const + lo, const + hi


# =========================================================================== region rules
#
# NumPy only. Each function returns, per observed element, sup L over the region; the modes it
# evaluates are declared in the RegionSpec registered beside it, and proved in its docstring.


def region_span(p, family: str, name: str) -> tuple[np.ndarray, np.ndarray]:
    """``(lo, hi)`` of a parameter that reads no private data, over the region."""
    if not isinstance(p, Span):
        raise NoRegionRule(
            f"the {family} parameter {name!r} cannot read private data: over a region it is a "
            f"Span, not a {type(p).__name__}"
        )
    lo, hi = np.asarray(p.lo, dtype=float), np.asarray(p.hi, dtype=float)
    if np.any(np.isnan(lo)) or np.any(np.isnan(hi)) or np.any(lo > hi):
        raise NoRegionRule(f"the {family} parameter {name!r} has an empty or NaN span [{lo}, {hi}]")
    return lo, hi


def region_location(p, family: str, name: str, space: str = "natural"):
    """``(o_lo, o_hi, half)`` of a location over the region.

    A :class:`Window` gives its offsets and half-width; a :class:`Span` (a location that reads
    no private data) is a window of half-width 0 at offsets ``[lo, hi]``.
    """
    if isinstance(p, Span):
        lo, hi = region_span(p, family, name)
        return lo, hi, np.zeros(np.broadcast(lo, hi).shape)
    if isinstance(p, Window):
        if p.space != space:
            raise NoRegionRule(
                f"the {family} parameter {name!r} is a window on the {space!r} scale, not {p.space!r}"
            )
        o_lo, o_hi = np.asarray(p.o_lo, dtype=float), np.asarray(p.o_hi, dtype=float)
        half = np.asarray(p.half, dtype=float)
        if (
            np.any(np.isnan(o_lo)) or np.any(np.isnan(o_hi)) or np.any(np.isnan(half))
            or np.any(o_lo > o_hi) or np.any(half < 0)
        ):
            raise NoRegionRule(f"the {family} window of {name!r} is empty or NaN")
        if not getattr(p, "sliding", True):
            # not a window of fixed width sliding over the offsets: only its hull is known, one
            # fixed window [o_lo - half, o_hi + half] (infinite half-width if an end is infinite)
            finite = np.isfinite(o_lo) & np.isfinite(o_hi)
            centre = np.where(finite, 0.5 * (np.where(finite, o_lo, 0.0) + np.where(finite, o_hi, 0.0)), 0.0)
            half = np.where(finite, half + 0.5 * (np.where(finite, o_hi, 0.0) - np.where(finite, o_lo, 0.0)), np.inf)
            return centre, centre, half
        return o_lo, o_hi, half
    raise NoRegionRule(f"the {family} parameter {name!r} of kind {type(p).__name__} has no region rule")


def _centre_distances(a: float, b: float, o_lo, o_hi, family: str):
    """Half-width ``w`` of ``[a, b]`` and the range ``[d_lo, d_hi]`` of ``D = |o - c|`` over
    ``o in [o_lo, o_hi]`` (``d_hi`` may be infinite)."""
    if np.any(o_lo == np.inf) or np.any(o_hi == -np.inf):
        raise NoRegionRule(f"the {family} location region lies at infinity")
    c, w = 0.5 * (a + b), 0.5 * (b - a)
    d_lo = np.maximum(np.maximum(o_lo - c, c - o_hi), 0.0)
    d_hi = np.maximum(np.abs(o_lo - c), np.abs(o_hi - c))
    return w, d_lo, d_hi


def _spread(D, W):
    """``(D + W)^2 - max(D - W, 0)^2``, without ``inf - inf`` at ``D = inf``."""
    return np.where(D >= W, 4.0 * D * W, np.square(D + W))


def normal_region(op, domain, params) -> np.ndarray:
    """sup L of Normal(mu, sigma) over a region: ``mu`` a Span or Window, ``sigma`` a Span.

    Per theta (window ``[o - h, o + h]`` of mu, data ``[a, b]`` with centre ``c``, half-width
    ``w``), ``d_max = |o - c| + w + h`` and ``d_min = max(|o - c| - w - h, 0)``, so with
    ``D = |o - c|``, ``W = w + h``: ``L = [(D + W)^2 - (D - W)_+^2] / (2 sigma^2)`` (the
    ``-ln sigma`` cancels: both records see the same sigma, docs/theory/glm.md#normal-sigma).
    Declared modes, each proved:

    * ``sigma`` "decreasing": ``L`` is a positive number over ``sigma^2``.
    * ``mu`` "ends" (Span) and window "ends": ``L`` is nondecreasing in ``D``, so quasi-convex
      in ``o``; and nondecreasing in ``W`` (lemma B), so ``h = half``. (Also: every pair
      difference is linear in ``o`` -- the ``o^2`` terms cancel -- so ``L`` is convex in ``o``.)

    Hence ``L = [(d_hi + W)^2 - (d_hi - W)_+^2] / (2 sigma_lo^2)``, ``W = w + half``,
    ``d_hi = max |o_end - c|`` (docs/theory/glm.md#normal-sigma), attained at the farther end, ``h = half``,
    ``sigma = sigma_lo``. ``+inf`` when ``sigma_lo = 0`` or an offset end is infinite (L grows
    without bound in both limits); ``sigma_hi`` is irrelevant.
    """
    mu, sigma = params
    a, b = domain_interval(domain, "Normal")
    o_lo, o_hi, half = region_location(mu, "Normal", "mu")
    s_lo, _ = region_span(sigma, "Normal", "sigma")
    w, _, d_hi = _centre_distances(a, b, o_lo, o_hi, "Normal")
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        return _spread(d_hi, w + half) / (2.0 * np.square(s_lo))


def laplace_region(op, domain, params) -> np.ndarray:
    """sup L of Laplace(mu, b) over a region.

    Per theta (notation of :func:`normal_region`): ``L = (d_max - d_min)/b = (min(D, W) + W)/b``
    (``ln 2b`` cancels). Declared modes: ``b`` "decreasing" (a positive number over b); ``mu``
    "ends" / window "ends": ``L`` is nondecreasing in ``D`` and in ``W``. Hence
    ``L = (min(d_hi, W) + W) / b_lo``, ``W = w + half``. Bounded in the location: a free
    intercept (an infinite end) gives ``2 W / b_lo``; ``b_lo = 0`` gives ``+inf``.
    """
    mu, s = params
    a, b = domain_interval(domain, "Laplace")
    o_lo, o_hi, half = region_location(mu, "Laplace", "mu")
    s_lo, _ = region_span(s, "Laplace", "b")
    w, _, d_hi = _centre_distances(a, b, o_lo, o_hi, "Laplace")
    W = w + half
    with np.errstate(divide="ignore", invalid="ignore"):
        return (np.minimum(d_hi, W) + W) / s_lo


def studentt_sup(nu, sigma, W, d_lo, d_hi) -> np.ndarray:
    """``sup_{D in [d_lo, d_hi]} (nu+1)/2 ln[(nu sigma^2 + (D+W)^2) / (nu sigma^2 + (D-W)_+^2)]``.

    The function of D increases on ``[0, W]`` and, for ``D > W``, has derivative of the sign of
    ``nu sigma^2 + W^2 - D^2`` (with ``k = nu sigma^2``, ``u1 = D + W``, ``u2 = D - W``:
    ``u1/(k + u1^2) - u2/(k + u2^2)`` has the sign of ``(u1 - u2)(k - u1 u2)``): it is unimodal
    with its peak at ``D* = sqrt(nu sigma^2 + W^2)``, value ``(nu + 1) asinh(W / (sigma sqrt nu))``.
    So the sup is at ``clip(D*, d_lo, d_hi)`` (docs/theory/glm.md#studentt). ``nu = inf``: the Normal
    limit ``[(d_hi + W)^2 - (d_hi - W)_+^2]/(2 sigma^2)``; ``sigma = 0`` (or ``nu = 0``) with the
    peak reachable gives ``+inf``; ``W = inf`` gives ``+inf``.
    """
    nu, sigma, W, d_lo, d_hi = np.broadcast_arrays(
        *(np.asarray(v, dtype=float) for v in (nu, sigma, W, d_lo, d_hi))
    )
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        k = np.where(np.isinf(nu), 0.0, nu) * np.square(sigma)
        D = np.clip(np.sqrt(k + np.square(W)), d_lo, d_hi)
        den = k + np.square(np.maximum(D - W, 0.0))
        t_val = 0.5 * (nu + 1.0) * np.log1p(_spread(D, W) / den)
        normal = _spread(d_hi, W) / (2.0 * np.square(sigma))
        out = np.where(np.isinf(nu), normal, t_val)
        return np.where(np.isinf(W), np.inf, out)


def studentt_region(op, domain, params) -> np.ndarray:
    """sup L of StudentT(nu, mu, sigma) over a region -- exact (docs/theory/glm.md#studentt).

    Per theta, with ``D = |o - c|`` and ``W = w + h`` as in :func:`normal_region`,
    ``L = (nu+1)/2 ln[(nu sigma^2 + (D+W)^2) / (nu sigma^2 + (D-W)_+^2)]`` (the normalising terms
    cancel). Over the region:

    * ``W``: nondecreasing (the numerator grows, the denominator shrinks): ``h = half``;
    * ``sigma``: ``ln((k + A)/(k + B))`` with ``A > B`` decreases in ``k = nu sigma^2``:
      ``sigma = sigma_lo`` (``sigma_hi`` is irrelevant);
    * ``D``: unimodal, sup at ``clip(sqrt(nu sigma_lo^2 + W^2), d_lo, d_hi)`` (:func:`studentt_sup`),
      where ``[d_lo, d_hi]`` is the exact range of ``|o - c|`` over ``o in [o_lo, o_hi]``:
      ``d_lo = dist(c, [o_lo, o_hi])``, ``d_hi = max |o_end - c|`` -- this handles a window
      placed anywhere relative to the data, on one side or straddling ``c``;
    * ``nu``: for fixed ``D`` quasi-convex (docs/theory/glm.md#studentt-nu: ``f(nu) = (nu+1)/2
      ln((nu + A^2)/(nu + B^2))`` has ``f'`` changing sign at most once, - to +), so the sup is
      at ``nu_lo`` or ``nu_hi``; the two sups (over D and over nu) commute.

    A free location (``o_lo = -inf`` and/or ``o_hi = inf``) keeps L finite:
    ``(nu + 1) asinh(W / (sigma_lo sqrt nu))`` at most.
    """
    nu, mu, sigma = params
    a, b = domain_interval(domain, "StudentT")
    nu_lo, nu_hi = region_span(nu, "StudentT", "nu")
    o_lo, o_hi, half = region_location(mu, "StudentT", "mu")
    s_lo, _ = region_span(sigma, "StudentT", "sigma")
    w, d_lo, d_hi = _centre_distances(a, b, o_lo, o_hi, "StudentT")
    W = w + half
    return np.maximum(studentt_sup(nu_lo, s_lo, W, d_lo, d_hi), studentt_sup(nu_hi, s_lo, W, d_lo, d_hi))


def cauchy_region(op, domain, params) -> np.ndarray:
    """sup L of Cauchy(alpha, beta) over a region: :func:`studentt_region` with ``nu = 1``
    (the Cauchy log-density is the StudentT one with ``nu = 1``, up to a constant). A free
    location gives at most ``2 asinh(W / beta_lo)``."""
    alpha, beta = params
    a, b = domain_interval(domain, "Cauchy")
    o_lo, o_hi, half = region_location(alpha, "Cauchy", "alpha")
    s_lo, _ = region_span(beta, "Cauchy", "beta")
    w, d_lo, d_hi = _centre_distances(a, b, o_lo, o_hi, "Cauchy")
    return studentt_sup(1.0, s_lo, w + half, d_lo, d_hi)


def exponential_region(op, domain, params) -> np.ndarray:
    """sup L of Exponential(scale) over a region -- exact.

    Natural scale (a Span): ``L = (b - a) / scale`` is decreasing (``scale_lo = 0`` gives
    ``+inf``).

    Log-mean window (an exponential regression, ``t = ln scale = o + e`` with ``|e| <= h``,
    docs/rules/continuous.md#exponential-regression): every pair difference
    ``g(x, t) - g(x', t') = -(e - e') - e^(-o) (x e^(-e) - x' e^(-e'))`` is affine in ``e^(-o)``,
    so ``L`` is convex in ``e^(-o)``, a monotone function of ``o``: window "ends"; and
    ``h = half`` (lemma B). So the sup is the window rule at ``o_lo`` and ``o_hi``. Limits:
    ``o_lo = -inf`` or an infinite half-width give ``+inf`` (``-t - b e^(-t)``
    goes to ``-inf`` while the top stays); ``o_hi = +inf`` gives ``2 half`` (the exponential
    terms vanish uniformly, ``-t`` spans the window).
    """
    (scale,) = params
    a, b = domain_interval(domain, "Exponential")
    _nonnegative(a, "Exponential")
    if isinstance(scale, Window):
        o_lo, o_hi, half = region_location(scale, "Exponential", "scale", space="log-mean")
        best = None
        for o in (o_lo, o_hi):
            with np.errstate(invalid="ignore", over="ignore"):
                o_f = np.where(np.isfinite(o), o, 0.0)
                h_f = np.where(np.isfinite(half), half, 0.0)
                bot, top = _exponential_log_mean_range(a, b, o_f - h_f, o_f + h_f, np)
                val = np.where(o == np.inf, 2.0 * h_f, top - bot)
                val = np.where((o == -np.inf) | np.isinf(half), np.inf, val)
            best = val if best is None else np.maximum(best, val)
        return best
    s_lo, _ = region_span(scale, "Exponential", "scale")
    with np.errstate(divide="ignore"):
        return (b - a) / s_lo


def _gamma_natural_L(k, z, a, b):
    """``L`` of Gamma(k, scale 1/z) on ``[a, b]``, constant-free, ``z in [0, inf)``:
    the range of ``(k - 1) ln x - z x`` over ``{a, b, clip((k - 1)/z)}`` (``z = 0``: ``b``)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        z_safe = np.where(z > 0, z, 1.0)
        st = np.where(k > 1, np.where(z > 0, (k - 1.0) / z_safe, b), a)
        lo, hi = _range_over_candidates(
            [(k - 1.0) * np.log(x) - z * x for x in (np.asarray(a), np.asarray(b), np.clip(st, a, b))], np
        )
        return hi - lo


def gamma_region(op, domain, params) -> np.ndarray:
    """sup L of Gamma over a region -- exact.

    Natural scale (``shape`` and ``scale`` Spans): every pair difference
    ``(k - 1)(ln x - ln x') - (x - x')/theta`` is affine in ``k`` and in ``1/theta``, so ``L``
    is convex in each: ``shape`` "ends", ``scale`` "ends" (monotone reparametrisation), and the
    sup over the box is at one of its four corners.

    Log-mean window of the scale (Gamma regression, docs/theory/glm.md#gamma-regression): with ``t = o + e``,
    ``|e| <= h``, every pair difference ``(k-1)(v - v') - k(e - e') - k e^(-o)(e^(v-e) - e^(v'-e'))``
    is affine in ``k`` and affine in ``e^(-o)``: ``shape`` "ends", window "ends" (convex in
    ``e^(-o)``, a monotone function of ``o``) and ``h = half`` (lemma B). So the sup is the
    window rule at the four corners ``k in {k_lo, k_hi}``, ``o in {o_lo, o_hi}``.

    Shape the constant 1 on a domain starting at 0: :func:`exponential_region` (the density is
    the Exponential's with the same scale).

    Limits: ``k_hi = inf``, ``scale_lo = 0`` or ``o_lo = -inf`` give ``+inf``; ``scale_hi = inf``
    gives ``|k - 1| ln(b/a)``; ``o_hi = inf`` gives ``|k - 1| ln(b/a) + 2 k half`` (the
    exponential terms vanish uniformly).
    """
    shape, scale = params
    k_lo, k_hi = region_span(shape, "Gamma", "shape")
    a, b = _gamma_domain(domain, shape_one=is_constant_one(k_lo) and is_constant_one(k_hi))
    if a == 0.0:  # shape the constant 1: the Exponential's region rule (same scale, same mean)
        return exponential_region(op, domain, (scale,))
    v_lo, v_hi = float(np.log(a)), float(np.log(b))
    best = None
    if isinstance(scale, Window):
        o_lo, o_hi, half = region_location(scale, "Gamma", "scale", space="log-mean")
        for k in (k_lo, k_hi):
            for o in (o_lo, o_hi):
                with np.errstate(invalid="ignore", over="ignore"):
                    o_f = np.where(np.isfinite(o), o, 0.0)
                    bot, top = _gamma_log_mean_g_range(k, o_f - half, o_f + half, v_lo, v_hi, np)
                    val = top - bot
                    val = np.where(o == np.inf, np.abs(k - 1.0) * (v_hi - v_lo) + 2.0 * k * half, val)
                    val = np.where((o == -np.inf) | np.isinf(k) | np.isinf(half), np.inf, val)
                best = val if best is None else np.maximum(best, val)
        return best
    th_lo, th_hi = region_span(scale, "Gamma", "scale")
    for k in (k_lo, k_hi):
        for th in (th_lo, th_hi):
            with np.errstate(divide="ignore"):
                z = 1.0 / th
            inf = np.isinf(k) | np.isinf(z)
            finite_L = _gamma_natural_L(np.where(np.isinf(k), 2.0, k), np.where(np.isinf(z), 1.0, z), a, b)
            val = np.where(inf, np.inf, finite_L)
            best = val if best is None else np.maximum(best, val)
    return best


def beta_region(op, domain, params) -> np.ndarray:
    """sup L of Beta(alpha, beta) over a region -- exact: every pair difference
    ``(alpha - 1)(ln x - ln x') + (beta - 1)(ln(1-x) - ln(1-x'))`` is affine in alpha and in beta
    (``ln B(alpha, beta)`` cancels), so ``L`` is convex in each: "ends" for both, the sup at one
    of the four corners. An infinite end gives ``+inf``; ``alpha_lo = 0`` or ``beta_lo = 0`` are
    finite limits (evaluated without the cancelling ``ln B``)."""
    alpha, beta = params
    a, b = _beta_domain(domain)
    if isinstance(alpha, Window) and alpha.space == "logit-mean":
        return beta_regression.beta_logit_mean_region(a, b, alpha, beta)
    al_lo, al_hi = region_span(alpha, "Beta", "alpha")
    be_lo, be_hi = region_span(beta, "Beta", "beta")
    best = None
    for al in (al_lo, al_hi):
        for be in (be_lo, be_hi):
            inf = np.isinf(al) | np.isinf(be)
            lo, hi = _beta_g_range(np.where(inf, 2.0, al), np.where(inf, 2.0, be), a, b, np)
            val = np.where(inf, np.inf, hi - lo)
            best = val if best is None else np.maximum(best, val)
    return best


def lognormal_region(op, domain, params) -> np.ndarray:
    """sup L of LogNormal(mu, sigma) over a region -- exact.

    With ``u = ln x`` and ``mu = o + e`` (``|e| <= h``), a pair difference is
    ``[(u' - o - e')^2 - (u - o - e)^2] / (2 s^2) + u' - u``: the ``o^2`` terms cancel, so it is
    affine in ``o`` -- window "ends" (mu Span "ends") -- and it is affine in ``1/s^2`` -- sigma
    "ends" (the ``-ln s`` cancels; the ``mu - s^2`` shift of the peak does not matter, it is a
    property of one record, not of the pair). ``h = half`` by lemma B. The sup is the window rule
    at the four corners. Limits: ``sigma_lo = 0``, an infinite offset or half-width give ``+inf``;
    ``sigma_hi = inf`` gives ``ln(b/a)`` (only the Jacobian is left).
    """
    mu, sigma = params
    a, b = _lognormal_domain(domain)
    o_lo, o_hi, half = region_location(mu, "LogNormal", "mu")
    s_lo, s_hi = region_span(sigma, "LogNormal", "sigma")
    ua, ub = float(np.log(a)), float(np.log(b))
    unbounded = np.isinf(o_lo) | np.isinf(o_hi) | np.isinf(half) | (s_lo == 0)
    best = None
    for o in (o_lo, o_hi):
        for s in (s_lo, s_hi):
            o_f = np.where(np.isfinite(o), o, 0.0)
            h_f = np.where(np.isfinite(half), half, 0.0)
            s_f = np.where((s > 0) & np.isfinite(s), s, 1.0)
            bot, top = _lognormal_f_range(o_f - h_f, o_f + h_f, s_f, ua, ub, np)
            val = np.where(np.isinf(s), ub - ua, top - bot)
            best = val if best is None else np.maximum(best, val)
    return np.where(unbounded, np.inf, best)


register_region(
    NormalRV,
    RegionSpec(window="ends", params={"mu": "ends", "sigma": "decreasing"}, custom=normal_region),
)
register_region(
    LaplaceRV, RegionSpec(window="ends", params={"mu": "ends", "b": "decreasing"}, custom=laplace_region)
)
register_region(StudentTRV, RegionSpec(custom=studentt_region))
register_region(CauchyRV, RegionSpec(custom=cauchy_region))
register_region(
    ExponentialRV, RegionSpec(window="ends", params={"scale": "decreasing"}, custom=exponential_region)
)
register_region(
    GammaRV, RegionSpec(window="ends", params={"shape": "ends", "scale": "ends"}, custom=gamma_region)
)
register_region(BetaRV, RegionSpec(params={"alpha": "ends", "beta": "ends"}, custom=beta_region))
register_region(
    LogNormalRV, RegionSpec(window="ends", params={"mu": "ends", "sigma": "ends"}, custom=lognormal_region)
)
