"""Laplace and Gaussian noise from OpenDP's vetted samplers (never ``numpy.random`` in a release).

Floating-point Laplace samplers built from ``log(uniform)`` leak the noiseless value through the
pattern of representable outputs (Mironov 2012). OpenDP's samplers are exact: integer counts get
the discrete Laplace distribution ``P(z) ∝ exp(-|z - c| / b)`` on the integers, float vectors get
OpenDP's floating-point-safe Laplace (a discrete Laplace on a fine grid ``2^k``, rounded
correctly). Both draw their randomness from the operating system's CSPRNG: **they cannot be
seeded**, and two calls never give the same noise.

Each function makes one OpenDP measurement for the whole vector and checks OpenDP's own privacy
map: ``map(d_in=sensitivity) <= epsilon``.

Seeded noise for audits
-----------------------
A statistical audit (:func:`pymc_dp.audit`) runs a mechanism tens of thousands of times on two
neighbouring datasets and bounds its privacy loss from below. With unseedable noise its verdict
varies from run to run (a test of a mechanism whose claim is attained reads "fail" now and then).
Inside :func:`audit_noise`, every public noise function of this module draws its noise from the
given seeded :class:`numpy.random.Generator` instead, so an audit with a seed is reproducible
bit for bit. The generator is held in a :class:`contextvars.ContextVar` (never a module global):
it is seen only by the code that runs inside the ``with`` block (in that thread or task), and it
is reset when the block ends, also on an exception. Outside the block nothing changes: a release
always draws OpenDP's noise.

*Why it is safe.* Only audits enter the context. What an audit computes from these runs is never
published as a release: the audit reads the data and its result is not differentially private in
any case (:mod:`pymc_dp.audits`), and it charges no budget. OpenDP's privacy map is checked
exactly as in a release (a mis-calibrated scale is refused in an audit too).

*Why it is the same distribution, with the same scale.*

``discrete_laplace``
    ``G1 - G2`` for independent geometric ``G1, G2`` on ``{0, 1, ...}`` with success
    probability ``p = 1 - exp(-1/b)``: ``P(G1 - G2 = z) = (1 - q)/(1 + q) q^|z|`` with
    ``q = exp(-1/b)``, which is ``∝ exp(-|z|/b)``: OpenDP's discrete Laplace, exactly.
``discrete_gaussian``
    The exact rejection sampler of Canonne, Kamath & Steinke (2020, Algorithm 3), which OpenDP
    implements too: with ``t = floor(sigma) + 1``, a discrete Laplace ``Y`` of scale ``t`` is
    accepted with probability ``exp(-(|Y| - sigma^2/t)^2 / (2 sigma^2))``; the accepted ``Y``
    has ``P(y) ∝ exp(-|y|/t - (|y| - sigma^2/t)^2/(2 sigma^2)) ∝ exp(-y^2/(2 sigma^2))``.
    (The Bernoulli trials use a float ``uniform < exp(...)``: exact up to double rounding of
    the acceptance probability, a relative 1e-16.)
``continuous_laplace``, ``continuous_gaussian``
    OpenDP's own construction on a coarser grid: the value is rounded to the grid ``2^k``, and
    an integer number of grid steps drawn from the discrete Laplace of scale ``b / 2^k`` (the
    discrete Gaussian of scale ``sigma / 2^k``) by the samplers above is added, exactly (every
    grid point used is a double). OpenDP does the same on its finest grid by default
    (``k = -1074``) and rounds the result to a double; here ``2^k`` is about ``2^-30`` of the scale (:data:`GRID_BITS`; coarser only
    where the values are above ``2^20`` scales), so the law is OpenDP's, a Laplace (Normal) of
    the same scale, up to a relative ``1e-9`` of the scale. Not numpy's Laplace sampler at ``loc``: a
    float centre plus float noise is rounded in a pattern that depends on the centre (the leak
    of Mironov 2012), and the audits' log-ratio statistic, computed in floats, sees it: the
    audit of the Fourier mechanism read a lower bound of 1.05 on a claim of 1 (estimate 1.55)
    with ``rng.laplace``. On a grid, the outputs under two centres are the same law shifted by
    a whole number of steps, so no event's probability ratio exceeds the noise's
    (``exp((|x - y| + 2^k) / b)``).

``tests/mechanisms/test_noise.py`` tests each against its closed-form pmf or cdf at several
scales.
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import math
from typing import Iterator

import numpy as np

from pymc_dp.exceptions import PrivacyError

__all__ = ["continuous_laplace", "discrete_laplace", "continuous_gaussian", "discrete_gaussian", "gaussian_scale",
           "opendp_version", "audit_noise", "audit_noise_generator", "GRID_BITS"]

#: the seeded generator of the innermost :func:`audit_noise` block of this context, or None
_AUDIT_RNG: contextvars.ContextVar[np.random.Generator | None] = contextvars.ContextVar("pymc_dp_audit_rng", default=None)


@contextlib.contextmanager
def audit_noise(rng: np.random.Generator) -> Iterator[np.random.Generator]:
    """Inside the block, every noise function of this module draws from ``rng`` (for audits only).

    The same distribution with the same scale as OpenDP's samplers (see the module docstring),
    from a seeded generator, so that an audit is reproducible. OpenDP's privacy map is still
    checked. The setting lives in a :class:`contextvars.ContextVar`: it is reset when the block
    ends (also on an exception) and is not seen by other threads. Never release inside it.

    Parameters
    ----------
    rng : numpy.random.Generator
        The seeded generator the noise is drawn from.

    Yields
    ------
    numpy.random.Generator
        ``rng``.
    """
    if not isinstance(rng, np.random.Generator):
        raise TypeError(f"audit_noise needs a numpy.random.Generator as rng, got {type(rng).__name__}: "
                        "pass numpy.random.default_rng(seed)")
    token = _AUDIT_RNG.set(rng)
    try:
        yield rng
    finally:
        _AUDIT_RNG.reset(token)


def audit_noise_generator() -> np.random.Generator | None:
    """The generator of the :func:`audit_noise` block this code runs in, or ``None`` (a release)."""
    return _AUDIT_RNG.get()


def _seeded_discrete_laplace(rng: np.random.Generator, scale: float, size: int) -> np.ndarray:
    """``size`` iid discrete Laplace(``scale``) draws ``P(z) ∝ exp(-|z|/scale)``: a difference of
    two geometrics with ``p = 1 - exp(-1/scale)`` (numpy's start at 1; the shifts cancel)."""
    p = -math.expm1(-1.0 / scale)
    return rng.geometric(p, size).astype(np.int64) - rng.geometric(p, size).astype(np.int64)


#: the seeded continuous samplers' grid is ``2^k`` with ``k = floor(log2(scale)) - GRID_BITS``
GRID_BITS = 30


def _on_grid(rng: np.random.Generator, arr: np.ndarray, scale: float, steps) -> np.ndarray:
    """``arr`` rounded to the grid ``2^k`` plus ``steps(rng, scale / 2^k, size)`` grid steps, exactly.

    ``k = floor(log2(scale)) - GRID_BITS``, raised where the values are so large that a grid
    index would pass ``2^50`` (every index, and every index plus noise below ``2^52`` steps, is
    then a double)."""
    k = math.floor(math.log2(scale)) - GRID_BITS
    top = float(np.max(np.abs(arr)))
    if top > 0.0:
        k = max(k, math.ceil(math.log2(top)) - 50)
    index = np.rint(np.ldexp(arr, -k)).astype(np.int64)
    noise = steps(rng, math.ldexp(scale, -k), arr.size).reshape(arr.shape)
    return np.ldexp((index + noise).astype(float), k)


def _seeded_discrete_gaussian(rng: np.random.Generator, sigma: float, size: int) -> np.ndarray:
    """``size`` iid discrete Gaussian draws ``P(z) ∝ exp(-z^2/(2 sigma^2))`` by Canonne, Kamath &
    Steinke's rejection from a discrete Laplace of scale ``floor(sigma) + 1`` (their Algorithm 3)."""
    t = math.floor(sigma) + 1.0
    out = np.empty(size, np.int64)
    todo = np.arange(size)
    while todo.size:
        y = _seeded_discrete_laplace(rng, t, todo.size)
        accept = rng.random(todo.size) < np.exp(-((np.abs(y) - sigma**2 / t) ** 2) / (2.0 * sigma**2))
        out[todo[accept]] = y[accept]
        todo = todo[~accept]
    return out


@functools.lru_cache(maxsize=1)
def _dp():
    try:
        import opendp.prelude as dp
    except ImportError as err:  # pragma: no cover - a core dependency
        raise ImportError('pymc_dp.mechanisms needs OpenDP: pip install "opendp>=0.12,<0.15"') from err
    dp.enable_features("contrib")
    return dp


def opendp_version() -> str:
    from importlib.metadata import version

    return version("opendp")


@functools.lru_cache(maxsize=64)
def _measurement(kind: str, scale: float):
    dp = _dp()
    if kind == "int":
        domain, metric = dp.vector_domain(dp.atom_domain(T=int)), dp.l1_distance(T=int)
    else:
        domain, metric = dp.vector_domain(dp.atom_domain(T=float, nan=False)), dp.l1_distance(T=float)
    return dp.m.make_laplace(domain, metric, scale=float(scale))


def _check(scale: float, sensitivity: float | None, epsilon: float | None, kind: str):
    if not (isinstance(scale, (int, float, np.floating)) and math.isfinite(scale) and scale > 0):
        raise PrivacyError(f"noise scale {scale!r} must be a finite number > 0")
    meas = _measurement(kind, float(scale))
    if sensitivity is not None and epsilon is not None:
        d_in = math.ceil(sensitivity) if kind == "int" else float(sensitivity)
        claimed = float(meas.map(d_in))
        if claimed > float(epsilon) * (1 + 1e-9):
            raise PrivacyError(
                f"OpenDP's privacy map gives epsilon {claimed:.6g} for sensitivity {sensitivity:g} at "
                f"scale {scale:g}, more than the budget {epsilon:g}"
            )
    return meas


def discrete_laplace(values, scale: float, *, sensitivity: float | None = None, epsilon: float | None = None) -> np.ndarray:
    """``values`` (integers, any shape) plus iid discrete Laplace(``scale``) noise, by OpenDP.

    Privacy map (OpenDP ``make_laplace`` on ``vector_domain(atom_domain(T=int))`` with the L1
    distance): an integer vector query of L1 sensitivity ``Δ`` released with scale ``b`` is
    ``Δ / b``-DP. When ``sensitivity`` and ``epsilon`` are given, OpenDP's map is evaluated and
    a :class:`PrivacyError` is raised if it exceeds ``epsilon``.

    Returns an int64 array of the shape of ``values``. Not seedable (OS CSPRNG), except inside
    :func:`audit_noise`.
    """
    arr = np.asarray(values)
    if arr.size and not np.issubdtype(arr.dtype, np.integer):
        raise TypeError("discrete_laplace needs integer values (counts)")
    meas = _check(scale, sensitivity, epsilon, "int")
    if arr.size == 0:
        return arr.astype(np.int64)
    rng = _AUDIT_RNG.get()
    if rng is not None:
        return arr.astype(np.int64) + _seeded_discrete_laplace(rng, float(scale), arr.size).reshape(arr.shape)
    return np.asarray(meas(arr.reshape(-1).astype(np.int64).tolist()), dtype=np.int64).reshape(arr.shape)


def continuous_laplace(values, scale: float, *, sensitivity: float | None = None, epsilon: float | None = None) -> np.ndarray:
    """``values`` (floats, any shape) plus iid Laplace(``scale``) noise from OpenDP's
    floating-point-safe sampler (``atom_domain(T=float, nan=False)``).

    Privacy map: a real vector query of L1 sensitivity ``Δ`` released with scale ``b`` is
    ``Δ / b``-DP (OpenDP rounds the map up to account for the output grid). Checked as in
    :func:`discrete_laplace`. Not seedable, except inside :func:`audit_noise`.
    """
    arr = np.asarray(values, dtype=float)
    if not np.all(np.isfinite(arr)):
        raise PrivacyError("continuous_laplace: the values must be finite")
    meas = _check(scale, sensitivity, epsilon, "float")
    if arr.size == 0:
        return arr
    rng = _AUDIT_RNG.get()
    if rng is not None:
        return _on_grid(rng, arr, float(scale), _seeded_discrete_laplace)
    return np.asarray(meas(arr.reshape(-1).tolist()), dtype=float).reshape(arr.shape)


def laplace_log_ratio(true_x, true_y, scale):
    """``z -> ln p_x(z) - ln p_y(z)`` for Laplace noise of ``scale`` (a number or one per entry)
    added to the vectors ``true_x`` and ``true_y``: the audits' Neyman-Pearson statistic."""
    tx, ty, b = np.asarray(true_x, float), np.asarray(true_y, float), np.asarray(scale, float)

    def log_ratio(z):
        z = np.asarray(z, float)
        return np.sum((np.abs(z - ty) - np.abs(z - tx)) / b, axis=-1)

    return log_ratio


# --------------------------------------------------------------------------- Gaussian (delta > 0)
@functools.lru_cache(maxsize=64)
def _gaussian(kind: str, scale: float):
    dp = _dp()
    atom = dp.atom_domain(T=int) if kind == "int" else dp.atom_domain(T=float, nan=False)
    return dp.m.make_gaussian(dp.vector_domain(atom), dp.l2_distance(T=float), scale=float(scale))


def gaussian_epsilon(scale: float, sensitivity: float, delta: float) -> float:
    """OpenDP's epsilon at ``delta`` for Gaussian noise of ``scale`` on a vector query of L2
    sensitivity ``sensitivity``: ``make_gaussian`` is ``rho``-zCDP with
    ``rho = sensitivity^2 / (2 scale^2)``, converted to (epsilon, delta) by
    ``make_zCDP_to_approxDP`` (its privacy profile at ``delta``)."""
    dp = _dp()
    profile = dp.c.make_zCDP_to_approxDP(_gaussian("float", float(scale))).map(float(sensitivity))
    return float(profile.epsilon(float(delta)))


def gaussian_scale(sensitivity: float, epsilon: float, delta: float) -> float:
    """The least Gaussian scale (to 1e-9 relative) whose OpenDP map gives at most ``epsilon`` at
    ``delta`` for L2 sensitivity ``sensitivity`` (bisection on OpenDP's own map, which is monotone
    in the scale)."""
    if not (sensitivity > 0 and epsilon > 0 and 0 < delta < 1):
        raise PrivacyError(f"gaussian_scale needs sensitivity, epsilon > 0 and 0 < delta < 1, got {sensitivity}, {epsilon}, {delta}")
    lo, hi = 1e-6 * sensitivity, sensitivity
    while gaussian_epsilon(hi, sensitivity, delta) > epsilon:
        lo, hi = hi, 2.0 * hi
    while hi - lo > 1e-9 * hi:
        mid = 0.5 * (lo + hi)
        lo, hi = (lo, mid) if gaussian_epsilon(mid, sensitivity, delta) <= epsilon else (mid, hi)
    return hi


def _check_gaussian(scale, sensitivity, epsilon, delta):
    if not (isinstance(scale, (int, float, np.floating)) and math.isfinite(scale) and scale > 0):
        raise PrivacyError(f"noise scale {scale!r} must be a finite number > 0")
    if sensitivity is not None and epsilon is not None and delta is not None:
        claimed = gaussian_epsilon(scale, sensitivity, delta)
        if claimed > float(epsilon) * (1 + 1e-9):
            raise PrivacyError(
                f"OpenDP's privacy map gives epsilon {claimed:.6g} at delta {delta:g} for L2 sensitivity "
                f"{sensitivity:g} at Gaussian scale {scale:g}, more than the budget {epsilon:g}"
            )


def continuous_gaussian(values, scale: float, *, sensitivity: float | None = None, epsilon: float | None = None,
                        delta: float | None = None) -> np.ndarray:
    """``values`` (floats) plus iid Gaussian(``scale``) noise from OpenDP's floating-point-safe
    sampler. Privacy map: ``rho``-zCDP with ``rho = Delta_2^2 / (2 scale^2)`` for L2 sensitivity
    ``Delta_2``; checked at ``(epsilon, delta)`` when given. Not seedable, except inside
    :func:`audit_noise`."""
    arr = np.asarray(values, dtype=float)
    if not np.all(np.isfinite(arr)):
        raise PrivacyError("continuous_gaussian: the values must be finite")
    _check_gaussian(scale, sensitivity, epsilon, delta)
    if arr.size == 0:
        return arr
    rng = _AUDIT_RNG.get()
    if rng is not None:
        return _on_grid(rng, arr, float(scale), _seeded_discrete_gaussian)
    return np.asarray(_gaussian("float", float(scale))(arr.reshape(-1).tolist()), dtype=float).reshape(arr.shape)


def discrete_gaussian(values, scale: float, *, sensitivity: float | None = None, epsilon: float | None = None,
                      delta: float | None = None) -> np.ndarray:
    """``values`` (integers) plus iid discrete Gaussian(``scale``) noise (Canonne, Kamath & Steinke
    2020), by OpenDP; the same zCDP map as the continuous one. Not seedable, except inside
    :func:`audit_noise`."""
    arr = np.asarray(values)
    if arr.size and not np.issubdtype(arr.dtype, np.integer):
        raise TypeError("discrete_gaussian needs integer values (counts)")
    _check_gaussian(scale, sensitivity, epsilon, delta)
    if arr.size == 0:
        return arr.astype(np.int64)
    rng = _AUDIT_RNG.get()
    if rng is not None:
        return arr.astype(np.int64) + _seeded_discrete_gaussian(rng, float(scale), arr.size).reshape(arr.shape)
    return np.asarray(_gaussian("int", float(scale))(arr.reshape(-1).astype(np.int64).tolist()), dtype=np.int64).reshape(arr.shape)


def gaussian_log_ratio(true_x, true_y, scale):
    """``z -> ln p_x(z) - ln p_y(z)`` for Gaussian noise of ``scale`` added to ``true_x`` and
    ``true_y`` (the audits' Neyman-Pearson statistic)."""
    tx, ty, b = np.asarray(true_x, float), np.asarray(true_y, float), np.asarray(scale, float)

    def log_ratio(z):
        z = np.asarray(z, float)
        return np.sum(((z - ty) ** 2 - (z - tx) ** 2) / (2.0 * b**2), axis=-1)

    return log_ratio


def gaussian_delta(mu: float, epsilon: float) -> float:
    """The exact privacy profile of the Gaussian mechanism (Balle & Wang 2018, Thm 8): with
    ``mu = ||change||_2 / scale``, ``delta(epsilon) = Phi(mu/2 - epsilon/mu) - e^epsilon Phi(-mu/2 - epsilon/mu)``.
    Used by the exact audits (the release's true delta at its epsilon)."""
    from scipy.stats import norm

    if mu <= 0:
        return 0.0
    return float(norm.cdf(mu / 2 - epsilon / mu) - math.exp(epsilon) * norm.cdf(-mu / 2 - epsilon / mu))
