"""Exact rules for continuous likelihoods on a bounded domain ``[a, b]``.

Normal, Laplace, StudentT and Cauchy have a log-density that is a decreasing function of
``|x - mu|``; they share :func:`distance_range`, which also handles a location that reads private
data (``mu = X @ w + b`` in linear regression). Exponential, Gamma, LogNormal and Beta are
handled through the candidate points where their log-density can be extreme.
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
from pymc_dp.rules.base import Bounds, domain_interval, register_rule

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


@register_rule(NormalRV, "Normal", ("mu", "sigma"), range_params=("mu",), location="mu", scale="sigma")
def normal_range(op, domain, params, xp):
    """Normal(mu, sigma), x in [a, b].

    Derivation. ``ln phi = -ln sigma - ln(2 pi)/2 - |x - mu|^2 / (2 sigma^2)`` decreases in
    ``|x - mu|``, so its range is given by the smallest and largest distance
    (:func:`distance_range`). For a point mu: ``L = ((d + w)^2 - max(0, d - w)^2) / (2 sigma^2)``
    (DESIGN.md section 4). For linear regression, ``mu in [b0 - R||w||, b0 + R||w||]`` and
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
    ``(min(d, w) + w) / s <= (b - a) / s`` (DESIGN.md section 4).
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
    decreasing in the distance: ``L = h(d_max/sigma) - h(d_min/sigma)`` (DESIGN.md section 4).
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


@register_rule(ExponentialRV, "Exponential", ("scale",), scale="scale")
def exponential_range(op, domain, params, xp):
    """Exponential with scale s = 1/lam, x in [a, b], a >= 0.

    Derivation. ``ln p = ln lam - lam x`` is linear in x: ``L = lam (b - a)`` (``lam B`` on
    ``[0, B]``, DESIGN.md section 4).
    """
    a, b = domain_interval(domain, "Exponential")
    _nonnegative(a, "Exponential")
    (scale,) = params
    scale = _point(scale, "Exponential", "scale")
    return -xp.log(scale) - b / scale, -xp.log(scale) - a / scale


def _range_over_candidates(values, xp):
    lo = hi = values[0]
    for v in values[1:]:
        lo, hi = xp.minimum(lo, v), xp.maximum(hi, v)
    return lo, hi


@register_rule(GammaRV, "Gamma", ("shape", "scale"), scale="scale")
def gamma_range(op, domain, params, xp):
    """Gamma(k, scale theta) (PyMC's ``Gamma(alpha=k, beta=1/theta)``), x in [a, b], a > 0.

    Derivation. Up to constants ``g(x) = (k - 1) ln x - x / theta``. Its only stationary point
    is ``(k - 1) theta``; g is concave for ``k >= 1`` and monotone for ``k < 1``, so its range on
    ``[a, b]`` is the range over ``{a, b, clip((k - 1) theta, a, b)}`` (DESIGN.md section 4).
    """
    a, b = domain_interval(domain, "Gamma")
    _nonnegative(a, "Gamma")
    k, theta = params
    k = _point(k, "Gamma", "shape")
    theta = _point(theta, "Gamma", "scale")
    if a == 0.0:
        raise DomainError(
            "a Gamma factor needs a domain bounded away from 0 (its log-density is unbounded "
            "at 0 unless the shape is exactly 1): declare Interval(lo, hi) with lo > 0"
        )
    const = -xp.gammaln(k) - k * xp.log(theta)

    def g(x):
        return const + (k - 1.0) * xp.log(x) - x / theta

    stationary = xp.clip((k - 1.0) * theta, a, b)
    return _range_over_candidates([g(xp.asarray(a)), g(xp.asarray(b)), g(stationary)], xp)


@register_rule(LogNormalRV, "LogNormal", ("mu", "sigma"), location="mu", scale="sigma")
def lognormal_range(op, domain, params, xp):
    """LogNormal(mu, s), x in [lo, hi], lo > 0.

    Derivation. In ``u = ln x`` the log-density is ``-u - ln s - ln(2 pi)/2 - (u - mu)^2/(2 s^2)``:
    the Jacobian ``-ln x`` is part of it. Completing the square, it is a Normal log-density in u
    centred at ``mu - s^2``, so the range over ``[ln lo, ln hi]`` is at the ends and at
    ``clip(mu - s^2)``. Dropping the Jacobian is *invalid* (DESIGN.md section 4: on [1, 10],
    mu = ln sqrt(10), s = 0.5 the truth is 3.93, the naive Normal rule 2.65).
    """
    a, b = domain_interval(domain, "LogNormal")
    if a <= 0:
        raise DomainError(f"LogNormal data are positive: the declared domain must start above 0, got {a}")
    mu, s = params
    mu = _point(mu, "LogNormal", "mu")
    s = _point(s, "LogNormal", "sigma")
    ua, ub = float(np.log(a)), float(np.log(b))

    def f(u):
        return -u - xp.log(s) - 0.5 * _LOG_2PI - xp.square(u - mu) / (2 * xp.square(s))

    peak = xp.clip(mu - xp.square(s), ua, ub)
    return _range_over_candidates([f(xp.asarray(ua)), f(xp.asarray(ub)), f(peak)], xp)


@register_rule(BetaRV, "Beta", ("alpha", "beta"))
def beta_range(op, domain, params, xp):
    """Beta(alpha, beta), x in [lo, hi] inside (0, 1).

    Derivation. Up to constants ``g(x) = (alpha - 1) ln x + (beta - 1) ln(1 - x)``, with one
    stationary point ``(alpha - 1)/(alpha + beta - 2)``; g is concave, convex or monotone
    according to the signs of ``alpha - 1`` and ``beta - 1``, and in every case its range on
    ``[lo, hi]`` is the range over the ends and the clipped stationary point.
    """
    a, b = domain_interval(domain, "Beta")
    if not (0.0 < a and b < 1.0):
        raise DomainError(
            f"a Beta factor needs a domain strictly inside (0, 1) (its log-density is unbounded "
            f"at 0 and 1), got {domain}"
        )
    alpha, beta = params
    alpha = _point(alpha, "Beta", "alpha")
    beta = _point(beta, "Beta", "beta")
    const = xp.gammaln(alpha + beta) - xp.gammaln(alpha) - xp.gammaln(beta)

    def g(x):
        return const + (alpha - 1.0) * xp.log(x) + (beta - 1.0) * xp.log1p(-x)

    denom = alpha + beta - 2.0
    safe = xp.where(xp.abs(denom) > 1e-12, denom, 1.0)
    stationary = xp.clip(xp.where(xp.abs(denom) > 1e-12, (alpha - 1.0) / safe, a), a, b)
    return _range_over_candidates([g(xp.asarray(a)), g(xp.asarray(b)), g(stationary)], xp)
