"""Special functions of the exact samplers, accurate in both tails: log CDFs, survival functions and interval masses of the Gamma, Beta and Normal laws (docs/theory/pitfalls.md#tail-precision)."""

from __future__ import annotations

import math

import numpy as np
from scipy import special as sc

#: below this CDF (or survival) value SciPy's value is not trusted: the log CDFs here switch to a
#: series or continued fraction, and the samplers from the inverse CDF to tangent rejection
TINY = 1e-280


_LOG_TINY = math.log(TINY)


_LOG_HALF = math.log(0.5)


# =========================================================================== log-space helpers
def log1mexp(x):
    """``log(1 - exp(x))`` for ``x <= 0``, accurate on the whole range.

    Parameters
    ----------
    x : array_like
        Values ``<= 0``.

    Returns
    -------
    ndarray
        ``log(1 - exp(x))``: ``log(-expm1(x))`` near 0, ``log1p(-exp(x))`` below ``-ln 2``.
    """
    x = np.asarray(x, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(x > -math.log(2.0), np.log(-np.expm1(x)), np.log1p(-np.exp(x)))


def _stirling_tail(a):
    """``ln Gamma(a + 1) - (a + 1/2) ln a + a - ln(2 pi)/2`` for ``a >= 10`` (Stirling series)."""
    inv = 1.0 / a
    inv2 = inv * inv
    return inv * (1 / 12 - inv2 * (1 / 360 - inv2 * (1 / 1260 - inv2 * (1 / 1680 - inv2 / 1188))))


def log_prefactor(a, x):
    """``a ln x - x - ln Gamma(a + 1)``, without the cancellation of the naive form for large a.

    For ``a >= 10`` it is written ``-a (l - 1 - ln l) - ln(2 pi a)/2 - stirling(a)`` with
    ``l = x / a`` and ``l - 1 - ln l = -(log1p(d) - d)``, ``d = (x - a)/a``: the absolute error is
    then about ``|x - a|`` ulps instead of ``a ln a`` ulps.

    Parameters
    ----------
    a, x : array_like
        Shape ``a > 0`` and point ``x >= 0`` (broadcast).

    Returns
    -------
    ndarray
        The log of the Gamma(a + 1, 1) density times ``x`` at ``x``: the prefactor of the
        series and continued fraction of the incomplete Gamma function.
    """
    a = np.asarray(a, dtype=float)
    x = np.asarray(x, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        naive = sc.xlogy(a, x) - x - sc.gammaln(a + 1.0)
        big = a >= 10.0
        if not np.any(big):
            return naive
        safe_a = np.where(big, a, 10.0)
        d = (x - safe_a) / safe_a
        stable = safe_a * (np.log1p(d) - d) - 0.5 * np.log(2 * np.pi * safe_a) - _stirling_tail(safe_a)
        return np.where(big, stable, naive)


def _log_p_series(a, x):
    """``ln P(a, x)`` from the power series ``P = x^a e^-x / Gamma(a+1) * sum_n x^n / (a+1)_n``.

    Used where P underflows, i.e. ``x`` well below ``a``; there the terms fall geometrically and
    about ``sqrt(a)`` of them are needed.
    """
    total = np.ones_like(x)
    term = np.ones_like(x)
    active = np.arange(x.size)
    n = 0
    while active.size and n < 1_000_000:
        n += 1
        term[active] *= x[active] / (a[active] + n)
        total[active] += term[active]
        active = active[term[active] > total[active] * 1e-17]
    return log_prefactor(a, x) + np.log(total)


def _log_q_cf(a, x):
    """``ln Q(a, x)`` from Legendre's continued fraction (modified Lentz), for ``x > a + 1``."""
    fpmin = 1e-300
    b = x + 1.0 - a
    c = np.full_like(x, 1.0 / fpmin)
    d = 1.0 / b
    h = d.copy()
    active = np.arange(x.size)
    i = 0
    while active.size and i < 1_000_000:
        i += 1
        an = -i * (i - a[active])
        b[active] += 2.0
        dd = an * d[active] + b[active]
        dd = np.where(np.abs(dd) < fpmin, fpmin, dd)
        cc = b[active] + an / c[active]
        cc = np.where(np.abs(cc) < fpmin, fpmin, cc)
        dd = 1.0 / dd
        delta = dd * cc
        d[active], c[active] = dd, cc
        h[active] *= delta
        active = active[np.abs(delta - 1.0) > 1e-16]
    return log_prefactor(a, x) + np.log(a) + np.log(h)


def log_gamma_cdf(a, x):
    """``ln P(a, x)``: log CDF of Gamma(a, 1), relatively accurate in the far lower tail."""
    a, x = np.broadcast_arrays(np.asarray(a, dtype=float), np.asarray(x, dtype=float))
    with np.errstate(divide="ignore"):
        out = np.log(sc.gammainc(a, x))
    small = (out < _LOG_TINY) & (x > 0)
    if np.any(small):
        out = np.array(out)
        out[small] = _log_p_series(a[small].copy(), x[small].copy())
    return out


def log_gamma_sf(a, x):
    """``ln Q(a, x)``: log survival function of Gamma(a, 1), accurate in the far upper tail."""
    a, x = np.broadcast_arrays(np.asarray(a, dtype=float), np.asarray(x, dtype=float))
    with np.errstate(divide="ignore"):
        out = np.log(sc.gammaincc(a, x))
    small = (out < _LOG_TINY) & np.isfinite(x)
    if np.any(small):
        out = np.array(out)
        out[small] = _log_q_cf(a[small].copy(), x[small].copy())
    return out


def log_gamma_mass(a, x, y):
    """``ln(P(a, y) - P(a, x))`` for ``0 <= x <= y <= inf``, Gamma(a, 1), elementwise.

    Below the median the difference is taken on CDFs, above it on survival functions, both in
    log space, so the result keeps its relative precision however far in a tail the interval is.
    """
    a, x, y = np.broadcast_arrays(*(np.asarray(v, dtype=float) for v in (a, x, y)))
    lpx, lpy = log_gamma_cdf(a, x), log_gamma_cdf(a, y)
    lqx, lqy = log_gamma_sf(a, x), log_gamma_sf(a, y)
    with np.errstate(invalid="ignore", divide="ignore"):
        lower = lpy + log1mexp(np.minimum(lpx - lpy, 0.0))
        upper = lqx + log1mexp(np.minimum(lqy - lqx, 0.0))
        middle = np.log1p(-(np.exp(lpx) + np.exp(lqy)))
    out = np.where(lpy <= _LOG_HALF, lower, np.where(lqx <= _LOG_HALF, upper, middle))
    return np.where(y > x, out, -np.inf)


def _log_beta_cf(a, b, x):
    """``ln I_x(a, b)`` from the continued fraction (modified Lentz), for ``x < (a+1)/(a+b+2)``.

    ``I_x(a, b) = x^a (1-x)^b / (a B(a, b)) * cf``; the prefactor is kept in log space, so the
    result does not underflow however far in the lower tail ``x`` is.
    """
    fpmin = 1e-300
    qab, qap, qam = a + b, a + 1.0, a - 1.0
    c = np.ones_like(x)
    d = 1.0 - qab * x / qap
    d = np.where(np.abs(d) < fpmin, fpmin, d)
    d = 1.0 / d
    h = d.copy()
    active = np.arange(x.size)
    m = 0
    while active.size and m < 1_000_000:
        m += 1
        aa_, bb_, xx = a[active], b[active], x[active]
        m2 = 2 * m
        num = m * (bb_ - m) * xx / ((qam[active] + m2) * (aa_ + m2))
        dd = 1.0 + num * d[active]
        dd = np.where(np.abs(dd) < fpmin, fpmin, dd)
        cc = 1.0 + num / c[active]
        cc = np.where(np.abs(cc) < fpmin, fpmin, cc)
        dd = 1.0 / dd
        hh = h[active] * dd * cc
        num = -(aa_ + m) * (qab[active] + m) * xx / ((aa_ + m2) * (qap[active] + m2))
        dd = 1.0 + num * dd
        dd = np.where(np.abs(dd) < fpmin, fpmin, dd)
        cc = 1.0 + num / cc
        cc = np.where(np.abs(cc) < fpmin, fpmin, cc)
        dd = 1.0 / dd
        delta = dd * cc
        h[active] = hh * delta
        d[active], c[active] = dd, cc
        active = active[np.abs(delta - 1.0) > 1e-16]
    with np.errstate(divide="ignore"):
        return sc.xlogy(a, x) + sc.xlog1py(b, -x) - np.log(a) - sc.betaln(a, b) + np.log(h)


def log_beta_cdf(a, b, x):
    """``ln I_x(a, b)``: log CDF of Beta(a, b), relatively accurate in the far lower tail."""
    a, b, x = np.broadcast_arrays(*(np.asarray(v, dtype=float) for v in (a, b, x)))
    with np.errstate(divide="ignore"):
        out = np.log(sc.betainc(a, b, x))
    small = (out < _LOG_TINY) & (x > 0) & (x < 1)
    if np.any(small):
        out = np.array(out)
        out[small] = _log_beta_cf(a[small].copy(), b[small].copy(), x[small].copy())
    return out


def log_beta_sf(a, b, x):
    """``ln(1 - I_x(a, b))``: log survival function of Beta(a, b), accurate in the far upper tail."""
    a, b, x = np.broadcast_arrays(*(np.asarray(v, dtype=float) for v in (a, b, x)))
    with np.errstate(divide="ignore"):
        out = np.log(sc.betaincc(a, b, x))
    small = (out < _LOG_TINY) & (x > 0) & (x < 1)
    if np.any(small):
        out = np.array(out)
        out[small] = _log_beta_cf(b[small].copy(), a[small].copy(), 1.0 - x[small])
    return out


def log_beta_mass(a, b, lo, hi):
    """``ln P(lo <= X <= hi)`` for ``X ~ Beta(a, b)``, elementwise, in log space.

    As :func:`log_gamma_mass`: below the median the difference is taken on CDFs, above it on
    survival functions, so an interval far in a tail keeps its relative precision.
    """
    a, b, lo, hi = np.broadcast_arrays(*(np.asarray(v, dtype=float) for v in (a, b, lo, hi)))
    lo, hi = np.clip(lo, 0.0, 1.0), np.clip(hi, 0.0, 1.0)
    lpx, lpy = log_beta_cdf(a, b, lo), log_beta_cdf(a, b, hi)
    lqx, lqy = log_beta_sf(a, b, lo), log_beta_sf(a, b, hi)
    with np.errstate(invalid="ignore", divide="ignore"):
        lower = lpy + log1mexp(np.minimum(lpx - lpy, 0.0))
        upper = lqx + log1mexp(np.minimum(lqy - lqx, 0.0))
        middle = np.log1p(-(np.exp(lpx) + np.exp(lqy)))
    out = np.where(lpy <= _LOG_HALF, lower, np.where(lqx <= _LOG_HALF, upper, middle))
    return np.where(hi > lo, out, -np.inf)


def log_normal_mass(mu, sigma, lo, hi):
    """``ln P(lo <= X <= hi)`` for ``X ~ Normal(mu, sigma)``, elementwise, in log space
    (``log_ndtr`` on the side of the mean each end lies on)."""
    mu, sigma, lo, hi = np.broadcast_arrays(*(np.asarray(v, dtype=float) for v in (mu, sigma, lo, hi)))
    zl, zh = (lo - mu) / sigma, (hi - mu) / sigma
    with np.errstate(invalid="ignore", divide="ignore"):
        # both ends below the mean: CDF side; both above: survival side; else 1 - two tails
        below = sc.log_ndtr(zh) + log1mexp(np.minimum(sc.log_ndtr(zl) - sc.log_ndtr(zh), 0.0))
        above = sc.log_ndtr(-zl) + log1mexp(np.minimum(sc.log_ndtr(-zh) - sc.log_ndtr(-zl), 0.0))
        middle = np.log1p(-(sc.ndtr(zl) + sc.ndtr(-zh)))
    out = np.where(zh <= 0.0, below, np.where(zl >= 0.0, above, middle))
    return np.where(hi > lo, out, -np.inf)
