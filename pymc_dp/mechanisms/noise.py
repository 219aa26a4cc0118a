"""Laplace noise from OpenDP's vetted samplers (never ``numpy.random.laplace``).

Floating-point Laplace samplers built from ``log(uniform)`` leak the noiseless value through the
pattern of representable outputs (Mironov 2012). OpenDP's samplers are exact: integer counts get
the discrete Laplace distribution ``P(z) ∝ exp(-|z - c| / b)`` on the integers, float vectors get
OpenDP's floating-point-safe Laplace (a discrete Laplace on a fine grid ``2^k``, rounded
correctly). Both draw their randomness from the operating system's CSPRNG: **they cannot be
seeded**, and two calls never give the same noise.

Each function makes one OpenDP measurement for the whole vector and checks OpenDP's own privacy
map: ``map(d_in=sensitivity) <= epsilon``.
"""

from __future__ import annotations

import functools
import math

import numpy as np

from pymc_dp.exceptions import PrivacyError

__all__ = ["continuous_laplace", "discrete_laplace", "continuous_gaussian", "discrete_gaussian", "gaussian_scale",
           "opendp_version"]


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

    Returns an int64 array of the shape of ``values``. Not seedable (OS CSPRNG).
    """
    arr = np.asarray(values)
    if arr.size and not np.issubdtype(arr.dtype, np.integer):
        raise TypeError("discrete_laplace needs integer values (counts)")
    meas = _check(scale, sensitivity, epsilon, "int")
    if arr.size == 0:
        return arr.astype(np.int64)
    return np.asarray(meas(arr.reshape(-1).astype(np.int64).tolist()), dtype=np.int64).reshape(arr.shape)


def continuous_laplace(values, scale: float, *, sensitivity: float | None = None, epsilon: float | None = None) -> np.ndarray:
    """``values`` (floats, any shape) plus iid Laplace(``scale``) noise from OpenDP's
    floating-point-safe sampler (``atom_domain(T=float, nan=False)``).

    Privacy map: a real vector query of L1 sensitivity ``Δ`` released with scale ``b`` is
    ``Δ / b``-DP (OpenDP rounds the map up to account for the output grid). Checked as in
    :func:`discrete_laplace`. Not seedable.
    """
    arr = np.asarray(values, dtype=float)
    if not np.all(np.isfinite(arr)):
        raise PrivacyError("continuous_laplace: the values must be finite")
    meas = _check(scale, sensitivity, epsilon, "float")
    if arr.size == 0:
        return arr
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
    ``Delta_2``; checked at ``(epsilon, delta)`` when given. Not seedable."""
    arr = np.asarray(values, dtype=float)
    if not np.all(np.isfinite(arr)):
        raise PrivacyError("continuous_gaussian: the values must be finite")
    _check_gaussian(scale, sensitivity, epsilon, delta)
    if arr.size == 0:
        return arr
    return np.asarray(_gaussian("float", float(scale))(arr.reshape(-1).tolist()), dtype=float).reshape(arr.shape)


def discrete_gaussian(values, scale: float, *, sensitivity: float | None = None, epsilon: float | None = None,
                      delta: float | None = None) -> np.ndarray:
    """``values`` (integers) plus iid discrete Gaussian(``scale``) noise (Canonne, Kamath & Steinke
    2020), by OpenDP; the same zCDP map as the continuous one. Not seedable."""
    arr = np.asarray(values)
    if arr.size and not np.issubdtype(arr.dtype, np.integer):
        raise TypeError("discrete_gaussian needs integer values (counts)")
    _check_gaussian(scale, sensitivity, epsilon, delta)
    if arr.size == 0:
        return arr.astype(np.int64)
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
