"""Helpers shared by the rules of integer-valued families (:mod:`pymc_dp.rules.discrete`, :mod:`pymc_dp.rules.count`).

* parameters held fixed: :func:`point_value`, :func:`fixed_value`, :func:`fixed_params`;
* enumeration over an integer domain: :func:`value_axis`, :func:`domain_values`,
  :func:`profile_candidates`;
* numbers of trials: :func:`known_trials`, :func:`check_trials_domain`;
* floors of :func:`~pymc_dp.rules.discrete.min_lipschitz`: :func:`floor_with_margin`,
  :func:`constant_floor`.
"""

from __future__ import annotations

import numpy as np

from pymc_dp.exceptions import DomainError, UnsupportedFactorError
from pymc_dp.rules.base import Bounds, element_lipschitz
from pymc_dp.rules.namespaces import NP
from pymc_dp.rules.region import Span, Window


def point_value(bounds: Bounds, family: str, name: str):
    """The value of a parameter that may not read private data (not in ``range_params``)."""
    if not bounds.is_point:
        raise UnsupportedFactorError(
            f"the {family} parameter {name!r} cannot read private data"
        )
    return bounds.lo


def fixed_value(p) -> tuple[np.ndarray, str] | None:
    """``(value, space)`` of a parameter held fixed, None when it is free."""
    if p is None or isinstance(p, Window):
        return None
    if isinstance(p, Bounds):
        return (np.asarray(p.lo, dtype=float), p.space) if p.is_point else None
    if isinstance(p, Span):
        return (np.asarray(p.lo, dtype=float), "natural") if p.is_point else None
    return np.asarray(p, dtype=float), "natural"


def fixed_params(params) -> tuple[Bounds, ...] | None:
    """Every parameter as a point Bounds when all are fixed, else None."""
    fixed = [fixed_value(p) for p in params]
    if any(f is None for f in fixed):
        return None
    return tuple(Bounds.point(v, s) for v, s in fixed)


def value_axis(x, xp):
    """``x[..., None]``: a trailing axis along which the data values are enumerated."""
    return xp.asarray(x)[..., None]


def domain_values(lo: int, hi: int, xp):
    """The integers ``lo..hi`` as a float64 vector (the enumeration axis)."""
    return xp.asarray(np.arange(lo, hi + 1, dtype=float))


def profile_candidates(first, lo_x: int, hi_x: int, xp):
    """``first + {-2, -1, 0, 1}`` clipped to ``{lo..hi}``: the integer where a window's profile
    peaks (see the Poisson and NegativeBinomial rules), with a margin for rounding in ``first``."""
    return [xp.clip(first + k, float(lo_x), float(hi_x)) for k in (-2.0, -1.0, 0.0, 1.0)]


def _constant_value(var):
    from pytensor.graph.basic import Constant

    try:
        from pytensor.tensor.basic import get_underlying_scalar_constant_value
    except ImportError:  # pragma: no cover
        get_underlying_scalar_constant_value = None
    if isinstance(var, Constant):
        return np.asarray(var.data, dtype=float)
    if get_underlying_scalar_constant_value is not None:
        try:
            return np.asarray(get_underlying_scalar_constant_value(var), dtype=float)
        except Exception:
            return None
    return None


def known_trials(n, xp):
    """The numbers of trials as a NumPy array when they are known (NP, or a PT constant)."""
    return np.asarray(n, dtype=float) if xp.name == "numpy" else _constant_value(n)


def check_trials_domain(family: str, domain, lo_x: int, hi_x: int, n_known) -> None:
    """Refuse a domain above every row's number of trials, or starting above some row's.

    A record above its row's n has probability 0: the posterior of such a neighbour does not
    exist. Rows with ``n < hi`` are handled by clipping the domain at their own n (the records a
    row can hold); a domain reaching above the largest n, or starting above the smallest, is a
    declaration error.
    """
    if n_known is None:
        return
    if hi_x > np.max(n_known):
        raise DomainError(
            f"the declared domain {domain} reaches above the number of trials n = "
            f"{np.max(n_known):g}: {family} data lie in {{0..n}}; declare Integers(0, {int(np.max(n_known))})"
        )
    if lo_x > np.min(n_known):
        raise DomainError(
            f"the declared domain {domain} starts above the number of trials n = "
            f"{np.min(n_known):g} of some element: no record of that element lies in the domain; "
            f"declare Integers(lo, hi) with lo <= {int(np.min(n_known))}"
        )


def floor_with_margin(values, scale=0.0) -> float | None:
    """The smallest element less a rounding margin (``1e-9 (1 + m)``, plus ``1e-13`` times the
    size ``scale`` of the log-gamma terms the value was computed from): never state more than is
    proved. None unless positive."""
    v = np.asarray(values, dtype=float)
    if v.size == 0 or np.any(np.isnan(v)):
        return None
    m = float(np.min(v))
    m -= 1e-9 * (1.0 + abs(m)) + 1e-13 * float(np.max(scale))
    return m if m > 0 else None


def constant_floor(op, domain, params) -> float | None:
    """The floor when every parameter is fixed: the constant itself (its smallest element)."""
    return floor_with_margin(element_lipschitz(op, domain, params, NP))
