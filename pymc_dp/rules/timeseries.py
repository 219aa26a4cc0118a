"""Catalogue of same-shaped rules (range, Lipschitz constant, region, floor) registered by singledispatch on the RV Op.

The rule for ``pm.AR``: autoregressive series whose record is one observation ``y_t``.

Privacy unit. A record is one time point ``y_t`` of an observed series: neighbouring series
differ in one value, every value lies in the public domain ``[a, b]``. Changing ``y_t`` moves
its own term (the ``init_dist`` term when ``t < p``, else the innovation term
``N(y_t; c + sum_i rho_i y_{t-i}, sigma)``) *and* the up to ``p`` innovation terms
``t + 1 .. t + p`` that read ``y_t`` as a lag. The constant of one record is therefore not the
width of one log-density range: :func:`ar_lipschitz` (registered as the
:func:`~pymc_dp.rules.base.element_lipschitz` of :class:`AutoRegressiveRV`) returns, per time
point, the exact sup over neighbouring series of the change of the *whole series'*
log-likelihood, with every term that reads ``y_t`` taken jointly.

PyMC's conventions (``pymc/distributions/timeseries.py``, 5.28): ``dist_params`` are
``(rho, sigma, init_dist, steps)``; the Op carries ``ar_order = p`` and ``constant_term``. With
``constant_term`` ``rho[..., 0]`` is the constant ``c`` and ``rho[..., i]`` (``i = 1..p``) the
lag-``i`` coefficient, otherwise ``c = 0`` and ``rho[..., i - 1]`` is the lag-``i``
coefficient. The series has ``T = p + steps`` values; the first ``p`` are scored by
``init_dist`` (elementwise, independent), the rest by Normal innovations.

The derivation (``docs/rules/timeseries.md`` has it in full)
------------------------------------------------------------
Fix ``t`` and every other value. As a function of ``x = y_t`` the log-likelihood is

.. math:: \\ell(x) = \\ell_{own}(x) - \\frac{1}{2\\sigma^2}\\sum_{j \\in J_t} (e_j - \\rho_j x)^2
          + \\mathrm{const},

``J_t = {j in 1..p : p <= t + j <= T - 1}`` the later innovation terms that read ``y_t``,
``e_j = y_{t+j} - c - sum_{i != j} rho_i y_{t+j-i}``. With a Normal own term (``t >= p``, or a
Normal ``init_dist``) ``ell(x) = -A x^2 + C x + const`` where ``A`` depends on theta only and
``C`` is *linear* in the other values. Writing the other values ``y_s = mid + w z_s``
(``mid, w`` the domain's centre and half-width, ``z_s in [-1, 1]``), and ``x = mid + w z``,

.. math:: \\sup |\\Delta \\ell| = \\sup_{z_s} \\operatorname{range}_{z \\in [-1, 1]}
          (-\\alpha z^2 + \\beta z) = g(\\beta^*, \\alpha),

``alpha = A w^2`` and ``beta* = w sup_{z_s} |C - 2 A mid| = w (|E| + w sum_r |kappa_r| /
(2 sigma^2))``, with

* ``2 sigma^2 A = [own] + sum_{j in J_t} rho_j^2`` (plus ``sigma^2 / s0^2`` for a Normal
  ``init_dist(mu0, s0)`` own term);
* ``kappa_r`` the coefficient of ``y_{t+r}`` in ``2 sigma^2 C``: ``2 rho_i`` at ``r = -i``
  (own term, ``t >= p``), ``2 rho_j`` at ``r = j`` and ``-2 rho_j rho_i`` at ``r = j - i``
  (``i != j``) for ``j in J_t``;
* ``E = 2 (c - mid (1 - sum_i rho_i)) ([own] - sum_{j in J_t} rho_j) / (2 sigma^2)`` (plus
  ``(mu0 - mid) / s0^2`` for a Normal init term): ``C - 2 A mid`` when every other value sits
  at ``mid``;
* ``g(beta, alpha) = 2 beta`` if ``beta >= 2 alpha``, else ``(beta + 2 alpha)^2 / (4 alpha)``:
  the range of the concave parabola ``-alpha z^2 + beta z`` on ``[-1, 1]`` (vertex inside or
  outside), increasing in ``beta >= 0`` and in ``alpha >= 0``.

This is exact: the other values are free in the domain, ``C`` is linear in them (the sup of
``|C - 2 A mid|`` is at a corner), and for every ``C`` the worst pair ``(y_t, y_t')`` is the
vertex of the parabola (clipped) and the far end of the domain -- not a corner pair in general.
A non-Normal ``init_dist`` term is added through its own rule (sound: a sup of a sum is at most
the sum of the sups). An integer domain is used through its real hull (sound, not exact).

Region rule (custom)
--------------------
* ``sigma``: for fixed data the change is affine in ``s = 1 / sigma^2`` (every innovation term
  is ``s`` times a function of the data and rho; the init term does not depend on sigma), so
  ``L`` is a sup of affine functions of ``s``: convex in ``s``, hence quasi-convex in ``sigma``,
  and the sup over ``[sigma_lo, sigma_hi]`` is at one of its two ends (with a non-Normal or no
  init term ``L`` is ``L_init + R(rho) / sigma^2``: decreasing). Both ends are evaluated.
* the constant ``c``: for fixed data the change is affine in ``c`` (a residual's dependence on
  ``y_t`` does not involve ``c``), so ``L`` is convex in ``c``: both ends.
* the lag coefficients: ``L`` is *not* quasi-convex in ``rho_j`` (``alpha`` grows with
  ``rho_j^2`` while ``beta*`` may shrink; interior maxima occur, see the tests), so the sup
  over their box is certified by branch and bound (:func:`_class_upper`): on a sub-box,
  ``alpha`` is at most its value with each ``rho_j^2`` at the larger end (exact), ``beta*`` at
  most a bound built from the box's vertices (``kappa_r`` multi-affine, ``E`` multi-affine up to
  a separable quadratic) and the exact range of ``E``; ``g`` is nondecreasing in both
  arguments, so ``g(beta_hi, alpha_hi)`` bounds the sub-box. Boxes are split until every one is
  within ``rel_tol`` of a value attained at an evaluated point (or a box budget is spent); the
  answer is the largest bound over the final boxes (sound whatever the stopping point).
* the init params must be fixed for the exact joint Normal-init term; otherwise the init term is
  bounded by its own region rule and added.

Note: the Normal *window* rule (mean and datum free independently) is a sound bound for the own
term but not its exact sup: the lags that set the mean are other records, the same in both
neighbouring series, so the own term is the point-mean rule at the mean farthest from ``mid``.
"""

from __future__ import annotations

import itertools
import math
from typing import Any, Sequence

import numpy as np
import pytensor.tensor as pt
from pymc.distributions.timeseries import AutoRegressiveRV, RandomWalkRV
from pytensor.tensor.random.basic import NormalRV

from pymc_dp.exceptions import UnsupportedFactorError
from pymc_dp.rules.base import (
    Bounds,
    Nested,
    domain_interval,
    element_lipschitz,
    log_density_range,
    register_lipschitz,
    register_rule,
)
from pymc_dp.rules.namespaces import NP
from pymc_dp.rules.region import (
    NestedRegion,
    NoRegionRule,
    RegionSpec,
    Span,
    region_lipschitz,
    register_region,
)

__all__ = [
    "ar_lipschitz",
    "ar_region_lipschitz",
    "ar_region_search",
    "detect_lagged_copies",
    "refuse_lagged_copies",
]

_FAMILY = "AR"
#: up to this many lags the region rule's box bounds use the box's vertices (exact parts);
#: beyond, interval arithmetic (sound, looser)
_MAX_VERTEX_LAGS = 8

# --------------------------------------------------------------------------- helpers


def _f64(x, xp):
    """``x`` as float64 (PyMC builds ``sigma=1.0`` as a float32 constant)."""
    if xp is NP:
        return np.asarray(x, dtype=float)
    return pt.cast(pt.as_tensor_variable(x), "float64")


def _is_pt(x) -> bool:
    return isinstance(x, pt.Variable)


def _steps_value(steps) -> int:
    """``steps`` as a Python int, or a refusal when it is not a constant."""
    if _is_pt(steps):
        from pymc.pytensorf import constant_fold

        try:
            (value,) = constant_fold([steps])
        except Exception:  # NotConstantValueError and friends
            raise UnsupportedFactorError(
                "an AR factor needs a constant number of steps (the series length is public); "
                "give pm.AR a fixed `steps` or an observed series of fixed length"
            ) from None
    else:
        value = steps
    arr = np.asarray(value)
    first = float(arr.reshape(-1)[0]) if arr.size == 1 else math.nan
    if not math.isfinite(first) or first != round(first):
        raise UnsupportedFactorError(f"an AR factor needs one constant integer `steps`, got {value!r}")
    out = int(round(first))
    if out < 0:
        raise UnsupportedFactorError(f"an AR factor needs steps >= 0, got {out}")
    return out


def _g(beta, alpha, xp):
    """Range of ``-alpha z^2 + beta z`` over ``z in [-1, 1]`` for ``alpha, beta >= 0``.

    The parabola is concave; its vertex ``beta / (2 alpha)`` lies in ``[0, 1]`` iff
    ``beta <= 2 alpha``: then the range is ``beta^2 / (4 alpha) + alpha + beta = (beta +
    2 alpha)^2 / (4 alpha)`` (vertex minus the value at -1), else ``2 beta`` (the ends). Both
    branches agree at ``beta = 2 alpha``; ``g`` is nondecreasing in ``beta`` (both branches) and
    in ``alpha`` (``d/d alpha = (beta + 2 alpha)(2 alpha - beta) / (4 alpha^2) >= 0`` on the
    vertex branch, 0 on the other).
    """
    safe = xp.where(alpha > 0, alpha, 1.0)
    inner = xp.square(beta + 2.0 * alpha) / (4.0 * safe)
    return xp.where(beta >= 2.0 * alpha, 2.0 * beta, inner)


def _classes(p: int, T: int) -> list[tuple[tuple, int]]:
    """Runs ``(key, count)`` of consecutive time points with the same set of terms.

    ``key = (t_init, own, J)``: ``t_init`` the init position (``None`` for ``t >= p``), ``own``
    whether the own term is an innovation, ``J`` the lags ``j`` whose term ``t + j`` is an
    innovation term of the series (``p <= t + j <= T - 1``). For ``t >= p``, ``J = 1..min(p,
    T - 1 - t)``: only the last ``p`` points differ from the interior.
    """
    keys = []
    for t in range(T):
        J = tuple(j for j in range(1, p + 1) if p <= t + j <= T - 1)
        keys.append((t if t < p else None, t >= p, J))
    runs: list[tuple[tuple, int]] = []
    for k in keys:
        if runs and runs[-1][0] == k:
            runs[-1] = (k, runs[-1][1] + 1)
        else:
            runs.append((k, 1))
    return runs


def _kappa_monomials(p: int, own: bool, J: Sequence[int]) -> dict[int, list[tuple[float, tuple[int, ...]]]]:
    """``kappa_r`` (the coefficient of ``y_{t+r}`` in ``2 sigma^2 C``) as monomials in the lag
    coefficients: ``(coef, (i, ...))`` means ``coef * prod rho_i``."""
    kap: dict[int, list] = {}
    if own:
        for i in range(1, p + 1):
            kap.setdefault(-i, []).append((2.0, (i,)))
    for j in J:
        kap.setdefault(j, []).append((2.0, (j,)))
        for i in range(1, p + 1):
            if i != j:
                kap.setdefault(j - i, []).append((-2.0, (j, i)))
    return kap


def _eval_poly(monomials, rhos, xp):
    out = None
    for coef, idx in monomials:
        term = coef * rhos[idx[0] - 1]
        for i in idx[1:]:
            term = term * rhos[i - 1]
        out = term if out is None else out + term
    return out


def _class_value(key, p, c, rhos, inv, mid, w, init_normal, init_L, xp):
    """``L`` of the time points of one class at one theta (see the module docstring).

    ``inv = 1 / (2 sigma^2)``; ``init_normal = (mu0_t, s0_t)`` when the own term is a Normal
    init term taken jointly, ``init_L`` the init term's own constant when it is added.
    """
    t_init, own, J = key
    own_f = 1.0 if own else 0.0
    a_tilde = own_f
    for j in J:
        a_tilde = a_tilde + xp.square(rhos[j - 1])
    sum_abs = 0.0
    for monomials in _kappa_monomials(p, own, J).values():
        sum_abs = sum_abs + xp.abs(_eval_poly(monomials, rhos, xp))
    s_all = 0.0
    for r in rhos:
        s_all = s_all + r
    s_j = 0.0
    for j in J:
        s_j = s_j + rhos[j - 1]
    e = 2.0 * (c - mid * (1.0 - s_all)) * (own_f - s_j) * inv
    alpha = (w * w) * a_tilde * inv
    if init_normal is not None:
        mu0, s0 = init_normal
        alpha = alpha + (w * w) / (2.0 * xp.square(s0))
        e = e + (mu0 - mid) / xp.square(s0)
    beta = w * (xp.abs(e) + w * sum_abs * inv)
    value = _g(beta, alpha, xp)
    if init_L is not None:
        value = value + init_L
    return value


def _concat_runs(values: list, counts: list[int], xp):
    """Lay the class values out along a new last axis of length ``sum(counts)``."""
    if xp is NP:
        vals = [np.asarray(v, dtype=float) for v in values]
        shape = np.broadcast_shapes(*(v.shape for v in vals))
        parts = [np.broadcast_to(v[..., None], shape + (n,)) for v, n in zip(vals, counts)]
        return np.concatenate(parts, axis=-1)
    vals = pt.broadcast_arrays(*(_f64(v, xp) for v in values))
    parts = [v[..., None] if n == 1 else pt.repeat(v[..., None], n, axis=-1) for v, n in zip(vals, counts)]
    return parts[0] if len(parts) == 1 else pt.concatenate(parts, axis=-1)


def _at_init_position(x, p: int, t: int, xp):
    """Element ``t`` of an init quantity broadcast to ``(..., p)``."""
    return (_f64(x, xp) + np.zeros(p))[..., t]


# --------------------------------------------------------------------------- checks


def _check_op(op, domain):
    if type(op) is not AutoRegressiveRV:
        raise UnsupportedFactorError(
            f"the AR rule covers pm.AR (Normal innovations) only, not {type(op).__name__}"
        )
    if getattr(domain, "event_ndim", 0) != 0:
        raise UnsupportedFactorError(
            f"multivariate AR is not covered: an AR factor's record is one scalar observation "
            f"y_t with an elementwise domain (Interval), got {domain}"
        )
    return domain_interval(domain, _FAMILY)


def _point(b, name):
    if not isinstance(b, Bounds):
        raise UnsupportedFactorError(f"the AR parameter {name!r} must be given as Bounds, got {type(b).__name__}")
    if not b.is_point:
        raise UnsupportedFactorError(
            f"the AR parameter {name!r} cannot read private data: the observed series is the "
            "only private input of an AR factor"
        )
    return b.lo


def _all_points(params) -> bool:
    for q in params:
        if isinstance(q, Nested):
            if not _all_points(q.params):
                return False
        elif not (isinstance(q, Bounds) and q.is_point):
            return False
    return True


def _check_init(init, kind=Nested):
    if not isinstance(init, kind):
        raise UnsupportedFactorError(
            f"the AR init_dist must be given as {kind.__name__}(op, params), got {type(init).__name__}"
        )
    ndim_supp = getattr(init.op, "ndim_supp", 0)
    if ndim_supp != 0:
        raise UnsupportedFactorError(
            "the AR rule needs a scalar init_dist (one independent term per initial value); a "
            f"multivariate init_dist ({type(init.op).__name__}) is not covered"
        )


def _lags(rho, p: int, constant: bool):
    """``(c, [rho_1, ..., rho_p])`` from PyMC's ``rho`` (constant first when ``constant``)."""
    shape = getattr(getattr(rho, "type", None), "shape", None) if _is_pt(rho) else np.shape(rho)
    expected = p + int(constant)
    if shape is not None and len(shape) >= 1 and shape[-1] is not None and shape[-1] != expected:
        raise UnsupportedFactorError(
            f"AR rho has {shape[-1]} entries on its last axis, expected ar_order + constant = {expected}"
        )
    if shape is not None and len(shape) == 0:
        raise UnsupportedFactorError("AR rho must have at least one axis (the coefficients)")
    c = rho[..., 0] if constant else 0.0
    off = 1 if constant else 0
    return c, [rho[..., off + i] for i in range(p)]


# --------------------------------------------------------------------------- the per-theta rule


@register_rule(AutoRegressiveRV, _FAMILY, ("rho", "sigma", "init_dist", "steps"))
def ar_log_density_range(op, domain, params, xp):
    """An AR record moves up to ``p + 1`` terms: there is no one log-density range; use
    :func:`~pymc_dp.rules.base.element_lipschitz` (:func:`ar_lipschitz`)."""
    raise UnsupportedFactorError(
        "pm.AR has no per-element log-density range: one observation enters its own term and "
        "the next p terms; its constant is element_lipschitz (pymc_dp.rules.timeseries.ar_lipschitz)"
    )


@register_lipschitz(AutoRegressiveRV)
def ar_lipschitz(op, domain, params: tuple, xp) -> Any:
    """Per time point ``t``: the exact sup, over neighbouring series that differ at ``t``, of the
    change of the whole series' log-likelihood (see the module docstring for the derivation).

    Parameters
    ----------
    op : AutoRegressiveRV
        The Op of ``pm.AR`` (``ar_order``, ``constant_term``).
    domain : Interval or Integers
        The public domain of every observed value.
    params : tuple
        ``(Bounds.point(rho), Bounds.point(sigma), Nested(init_op, init_params),
        Bounds.point(steps))``, PyMC's ``dist_params`` order. The init params are points.
    xp : namespace
        ``NP`` or ``PT``.

    Returns
    -------
    array or tensor of shape ``(*batch, T)``, ``T = ar_order + steps``.

    Notes
    -----
    Exact when the own term of ``t`` is Normal (``t >= p``, or a Normal ``init_dist``) and the
    domain an Interval; for another ``init_dist`` its own constant is added to the exact
    innovation part (a sound bound, tight when the init term and the lag terms peak together).
    """
    a, b = _check_op(op, domain)
    if len(params) != 4:
        raise UnsupportedFactorError(f"an AR factor has 4 parameters (rho, sigma, init_dist, steps), got {len(params)}")
    rho_b, sigma_b, init, steps_b = params
    rho = _f64(_point(rho_b, "rho"), xp)
    sigma = _f64(_point(sigma_b, "sigma"), xp)
    steps = _steps_value(_point(steps_b, "steps"))
    _check_init(init)
    if not _all_points(init.params):
        raise UnsupportedFactorError(
            "the AR init_dist cannot read private data: its parameters must be public (points)"
        )
    p, constant = int(op.ar_order), bool(op.constant_term)
    T = p + steps
    c, rhos = _lags(rho, p, constant)
    mid, w = 0.5 * (a + b), 0.5 * (b - a)
    inv = 1.0 / (2.0 * xp.square(sigma))
    normal_init = isinstance(init.op, NormalRV)
    if normal_init:
        mu0_all, s0_all = (_f64(q.lo, xp) for q in init.params)
        init_L_all = None
    else:
        init_L_all = element_lipschitz(init.op, domain, init.params, xp)
    values, counts = [], []
    for key, count in _classes(p, T):
        t_init = key[0]
        init_normal = init_L = None
        if t_init is not None:
            if normal_init:
                init_normal = (
                    _at_init_position(mu0_all, p, t_init, xp),
                    _at_init_position(s0_all, p, t_init, xp),
                )
            else:
                init_L = _at_init_position(init_L_all, p, t_init, xp)
        values.append(_class_value(key, p, c, rhos, inv, mid, w, init_normal, init_L, xp))
        counts.append(count)
    return _concat_runs(values, counts, xp)


# --------------------------------------------------------------------------- the region rule


def _span_arrays(s, name):
    if not isinstance(s, Span):
        raise NoRegionRule(f"the AR parameter {name!r} must be a Span over the region (it reads no private data)")
    return np.asarray(s.lo, dtype=float), np.asarray(s.hi, dtype=float)


def _interval_mul(alo, ahi, blo, bhi):
    cands = np.stack([alo * blo, alo * bhi, ahi * blo, ahi * bhi])
    return cands.min(axis=0), cands.max(axis=0)


def _vertices(r_lo, r_hi, p):
    """The ``2^p`` vertices of the lag box, on a new leading axis."""
    corners = np.array(list(itertools.product((0.0, 1.0), repeat=p)))
    shape = (len(corners),) + (1,) * np.ndim(r_lo[0])
    return [r_lo[i] + corners[:, i].reshape(shape) * (r_hi[i] - r_lo[i]) for i in range(p)]


def _sum_abs_interval(kappa, r_lo, r_hi):
    """``sum_r sup |kappa_r|`` over the box by interval arithmetic per monomial (sound)."""
    total = 0.0
    for monomials in kappa:
        lo = hi = 0.0
        for coef, idx in monomials:
            mlo, mhi = r_lo[idx[0] - 1], r_hi[idx[0] - 1]
            for i in idx[1:]:
                mlo, mhi = _interval_mul(mlo, mhi, r_lo[i - 1], r_hi[i - 1])
            mlo, mhi = (coef * mlo, coef * mhi) if coef >= 0 else (coef * mhi, coef * mlo)
            lo, hi = lo + mlo, hi + mhi
        total = total + np.maximum(np.abs(lo), np.abs(hi))
    return total


def _class_upper(key, p, c_ends, r_lo, r_hi, rv, inv_ends, mid, w, init_normal, init_L):
    """A bound on ``L`` of one class over a box of lag coefficients (``rv``: its vertices), the
    largest over the ends of ``c`` and ``sigma``.

    ``L = g(beta*, alpha)`` with ``g`` nondecreasing in both, so ``g(beta_hi, alpha_hi)`` bounds
    the box. ``alpha`` is separable in ``rho_j^2`` (``j in J``): ``alpha_hi`` exact.
    ``beta* / w = max_{s = +-1} (s E + w inv sum_r |kappa_r|)``: ``sum_r |kappa_r|`` is convex in
    each coordinate (``kappa_r`` multi-affine), and ``E = E_M + q`` with ``E_M`` multi-affine and
    ``q = -2 mid inv sum_J rho_j^2``. When ``s mid <= 0``, ``s E`` is convex in each coordinate
    and the sup of ``s E + w inv sum |kappa|`` over the box is its largest vertex value (exact);
    when ``s mid > 0`` the vertex maximum of ``s E_M + w inv sum |kappa|`` plus the sup of the
    concave separable ``s q`` bounds it.
    """
    _, own, J = key
    own_f = 1.0 if own else 0.0
    sq_max = sum((np.maximum(np.square(r_lo[j - 1]), np.square(r_hi[j - 1])) for j in J), 0.0)
    # min of rho_j^2 over [lo, hi]: 0 when the interval straddles 0
    sq_min = sum(
        (
            np.where(
                (r_lo[j - 1] <= 0) & (r_hi[j - 1] >= 0),
                0.0,
                np.minimum(np.square(r_lo[j - 1]), np.square(r_hi[j - 1])),
            )
            for j in J
        ),
        0.0,
    )
    kappa = list(_kappa_monomials(p, own, J).values())
    if rv is None:  # many lags: interval arithmetic per monomial (sound, looser)
        sum_abs_max = _sum_abs_interval(kappa, r_lo, r_hi)
    else:
        sum_abs = 0.0
        for monomials in kappa:
            sum_abs = sum_abs + np.abs(_eval_poly(monomials, rv, NP))
        s_all = sum(rv[1:], rv[0])
        s_j = sum((rv[j - 1] for j in J), 0.0)
        sq_j = sum((np.square(rv[j - 1]) for j in J), 0.0)
        sum_abs_max = np.max(sum_abs, axis=0)
    # the exact range of E over the box, from u = S_J and v = the other lags' sum, which range
    # over a rectangle: E is affine in v (ends) and quadratic in u (ends and vertex)
    u_lo = sum((r_lo[j - 1] for j in J), 0.0)
    u_hi = sum((r_hi[j - 1] for j in J), 0.0)
    v_lo = sum((r_lo[i - 1] for i in range(1, p + 1) if i not in J), 0.0)
    v_hi = sum((r_hi[i - 1] for i in range(1, p + 1) if i not in J), 0.0)
    best = None
    for c in c_ends:
        if rv is not None:
            e_core = 2.0 * (c - mid * (1.0 - s_all)) * (own_f - s_j)  # times inv: E without init
        pr_lo = pr_hi = None
        for v in (v_lo, v_hi):
            k = c - mid + mid * v
            # (k + mid u)(own - u) = -mid u^2 + (mid own - k) u + k own
            cands = [u_lo, u_hi]
            if mid != 0.0:
                cands.append(np.clip((mid * own_f - k) / (2.0 * mid), u_lo, u_hi))
            for u in cands:
                val = (k + mid * u) * (own_f - u)
                pr_lo = val if pr_lo is None else np.minimum(pr_lo, val)
                pr_hi = val if pr_hi is None else np.maximum(pr_hi, val)
        for inv in inv_ends:
            alpha = (w * w) * (own_f + sq_max) * inv
            e_lo, e_hi = 2.0 * inv * pr_lo, 2.0 * inv * pr_hi
            shift = 0.0
            if init_normal is not None:
                mu0, s0 = init_normal
                alpha = alpha + (w * w) / (2.0 * np.square(s0))
                shift = (mu0 - mid) / np.square(s0)
                e_lo, e_hi = e_lo + shift, e_hi + shift
            b_max = None
            for s in (1.0, -1.0):
                split = (e_hi if s > 0 else -e_lo) + w * inv * sum_abs_max
                if rv is None:
                    val = split
                elif s * mid <= 0.0:
                    e = e_core * inv + shift
                    spread = w * inv * sum_abs
                    val = np.max(s * e + spread, axis=0)
                else:
                    e_m = e_core * inv + shift + 2.0 * mid * inv * sq_j  # the multi-affine part
                    spread = w * inv * sum_abs
                    coupled = np.max(s * e_m + spread, axis=0) - 2.0 * abs(mid) * inv * sq_min
                    val = np.minimum(coupled, split)
                b_max = val if b_max is None else np.maximum(b_max, val)
            value = _g(w * np.maximum(b_max, 0.0), alpha, NP)
            best = value if best is None else np.maximum(best, value)
    if init_L is not None:
        best = best + init_L
    return best


def ar_region_lipschitz(
    op,
    domain,
    params: tuple,
    *,
    rel_tol: float = 1e-6,
    max_boxes: int = 50_000,
) -> np.ndarray:
    """A certified bound on ``sup L`` over a region, per time point (NumPy), shape ``(*batch, T)``.

    ``params = (Span rho (elementwise box on the last axis), Span sigma, NestedRegion(init_op,
    init params as Spans), Span.point(steps))``. ``sigma`` and the constant ``c`` are evaluated at
    their ends (convexity, module docstring); the lag coefficients by branch and bound. The result
    is within ``rel_tol`` (relative, ``1e-12`` absolute) of a value attained at an evaluated
    point unless ``max_boxes`` sub-boxes were used up first (smooth interior maxima, where the
    first-order box bounds converge slowly: measured gaps up to ~1e-3); it is an upper bound
    either way. :func:`ar_region_search` also returns the witness.
    """
    return ar_region_search(op, domain, params, rel_tol=rel_tol, max_boxes=max_boxes)["bound"]


def ar_region_search(
    op,
    domain,
    params: tuple,
    *,
    rel_tol: float = 1e-6,
    max_boxes: int = 50_000,
) -> dict[str, np.ndarray]:
    """:func:`ar_region_lipschitz` with its evidence, per time point: ``bound`` (the certified
    sup), ``attained`` (the largest per-theta value found, ``<= bound``), ``rho`` and ``sigma``
    (a witness theta in the region at which the per-theta rule gives ``attained``; ``rho`` has
    PyMC's layout on its last axis) and ``boxes`` (how many sub-boxes were bounded)."""
    a, b = _check_op(op, domain)
    if len(params) != 4:
        raise NoRegionRule(f"an AR factor has 4 parameters (rho, sigma, init_dist, steps), got {len(params)}")
    rho_s, sigma_s, init, steps_s = params
    rho_lo, rho_hi = _span_arrays(rho_s, "rho")
    sig_lo, sig_hi = _span_arrays(sigma_s, "sigma")
    if not isinstance(steps_s, Span) or not steps_s.is_point:
        raise NoRegionRule("the AR parameter 'steps' must be fixed (a constant series length)")
    steps = _steps_value(np.asarray(steps_s.lo))
    if np.any(rho_lo > rho_hi) or np.any(sig_lo > sig_hi) or np.any(sig_lo <= 0):
        raise NoRegionRule("AR region: need rho_lo <= rho_hi and 0 < sigma_lo <= sigma_hi")
    _check_init(init, NestedRegion)
    p, constant = int(op.ar_order), bool(op.constant_term)
    T = p + steps
    P = p + int(constant)
    if rho_lo.ndim == 0 or rho_lo.shape[-1] != P:
        raise NoRegionRule(f"AR rho span must have ar_order + constant = {P} entries on its last axis")
    mid, w = 0.5 * (a + b), 0.5 * (b - a)
    normal_init = isinstance(init.op, NormalRV) and all(
        isinstance(q, Span) and q.is_point for q in init.params
    )
    if normal_init:
        mu0_all, s0_all = (np.asarray(q.lo, dtype=float) for q in init.params)
        init_L_all = None
    else:  # the init term by its own region rule, added (sound)
        init_L_all = np.asarray(region_lipschitz(init.op, domain, init.params), dtype=float)
    runs = _classes(p, T)
    keys = [k for k, _ in runs]
    init_args = []
    for key in keys:
        t_init = key[0]
        if t_init is None:
            init_args.append((None, None))
        elif normal_init:
            mu0_t = _at_init_position(mu0_all, p, t_init, NP)
            init_args.append(((mu0_t, _at_init_position(s0_all, p, t_init, NP)), None))
        else:
            init_args.append((None, _at_init_position(init_L_all, p, t_init, NP)))

    off = 1 if constant else 0
    c_ends = [rho_lo[..., 0], rho_hi[..., 0]] if constant else [np.zeros(rho_lo.shape[:-1])]
    sig_ends = [sig_lo, sig_hi]
    inv_ends = [1.0 / (2.0 * np.square(sg)) for sg in sig_ends]
    combos = [(ci, si) for ci in range(len(c_ends)) for si in range(2)]
    lag_lo = [rho_lo[..., off + i] for i in range(p)]
    lag_width = [rho_hi[..., off + i] - rho_lo[..., off + i] for i in range(p)]
    shapes = [rho_lo.shape[:-1], sig_lo.shape, sig_hi.shape]
    for ia in init_args:
        shapes += [np.shape(x) for x in (ia[0] or ())]
        shapes += [np.shape(ia[1])] if ia[1] is not None else []
    batch = np.broadcast_shapes(*shapes)

    def lead(f):  # fractions (n,) in front of the batch axes
        return np.asarray(f, dtype=float).reshape((-1,) + (1,) * len(batch))

    def stack_classes(n, fn):
        zero = np.zeros((n,) + batch)
        return np.stack([zero + fn(k, ia) for k, ia in zip(keys, init_args)], axis=-1)

    def lower(f):  # values at the points f (n, p), every (c, sigma) end: (combos * n, *batch, n_cls)
        rv = [lag_lo[i] + lead(f[:, i]) * lag_width[i] for i in range(p)]
        out = []
        for ci, si in combos:
            c, inv = c_ends[ci], inv_ends[si]
            out.append(
                stack_classes(len(f), lambda k, ia: _class_value(k, p, c, rv, inv, mid, w, *ia, NP))
            )
        return np.concatenate(out, axis=0)

    def upper(flo, fhi):  # bounds over the boxes [flo, fhi] (n, p): (n, *batch, n_cls)
        rlo = [lag_lo[i] + lead(flo[:, i]) * lag_width[i] for i in range(p)]
        rhi = [lag_lo[i] + lead(fhi[:, i]) * lag_width[i] for i in range(p)]
        rv = _vertices(rlo, rhi, p) if p <= _MAX_VERTEX_LAGS else None
        return stack_classes(
            len(flo), lambda k, ia: _class_upper(k, p, c_ends, rlo, rhi, rv, inv_ends, mid, w, *ia)
        )

    out_shape = batch + (len(keys),)
    attained = np.full(out_shape, -np.inf)
    w_f = np.zeros(out_shape + (p,))  # witness: lag fractions, (c, sigma) end
    w_combo = np.zeros(out_shape, dtype=int)

    def record(f):
        nonlocal attained
        vals = lower(f)
        k = np.argmax(vals, axis=0)
        best = np.take_along_axis(vals, k[None], axis=0)[0]
        better = best > attained
        attained = np.where(better, best, attained)
        w_f[better] = f[(k % len(f))[better]]
        w_combo[better] = (k // len(f))[better]

    varying = [i for i in range(p) if np.any(lag_width[i] > 0)]
    # split the coordinate with the widest absolute extent (the largest over the batch)
    scale = np.array([float(np.max(lag_width[i])) for i in range(p)])
    # attained: every vertex of the lag box and its centre
    corners = np.array(list(itertools.product((0.0, 1.0), repeat=len(varying))) or [[]], dtype=float)
    pts = np.full((len(corners) + 1, p), 0.5)
    pts[:-1][:, varying] = corners
    record(pts)
    flo, fhi = np.zeros((1, p)), np.ones((1, p))
    leaf_max = np.full(out_shape, -np.inf)
    used = 1
    while len(flo):
        U = upper(flo, fhi)
        tol = np.maximum(rel_tol * np.abs(attained), 1e-12)
        open_ = np.any((U > attained + tol).reshape(len(flo), -1), axis=1)
        if not varying:
            open_[:] = False
        if np.any(~open_):
            leaf_max = np.maximum(leaf_max, U[~open_].max(axis=0))
        if not np.any(open_) or used >= max_boxes:
            if np.any(open_):
                leaf_max = np.maximum(leaf_max, U[open_].max(axis=0))
            break
        flo, fhi = flo[open_], fhi[open_]
        # split every open box at the midpoint of its widest varying coordinate
        rows = np.arange(len(flo))
        dim = np.asarray(varying)[np.argmax((fhi - flo)[:, varying] * scale[varying], axis=1)]
        midf = 0.5 * (flo[rows, dim] + fhi[rows, dim])
        left_hi, right_lo = fhi.copy(), flo.copy()
        left_hi[rows, dim] = midf
        right_lo[rows, dim] = midf
        flo, fhi = np.concatenate([flo, right_lo]), np.concatenate([left_hi, fhi])
        used += len(flo)
        record(0.5 * (flo + fhi))
    bound = np.maximum(leaf_max, attained)
    # the witness theta in PyMC's layout
    w_rho = np.zeros(out_shape + (P,))
    w_sig = np.zeros(out_shape)
    ci_w, si_w = np.asarray(combos)[w_combo][..., 0], np.asarray(combos)[w_combo][..., 1]
    if constant:
        w_rho[..., 0] = np.where(ci_w == 0, rho_lo[..., 0][..., None], rho_hi[..., 0][..., None])
    for i in range(p):
        w_rho[..., off + i] = lag_lo[i][..., None] + w_f[..., i] * lag_width[i][..., None]
    w_sig[...] = np.where(si_w == 0, np.asarray(sig_lo)[..., None], np.asarray(sig_hi)[..., None])
    counts = [n for _, n in runs]

    def lay(x):  # (*batch, n_cls, ...) -> (*batch, T, ...)
        idx = np.repeat(np.arange(len(keys)), counts)
        return np.take(x, idx, axis=len(batch))

    return {
        "bound": lay(bound),
        "attained": lay(attained),
        "rho": lay(w_rho),
        "sigma": lay(w_sig),
        "boxes": used,
    }


register_region(AutoRegressiveRV, RegionSpec(custom=ar_region_lipschitz))


# --------------------------------------------------------------------------- refusals


def _random_walk_refusal(op, domain, params, xp):
    raise UnsupportedFactorError(
        "pm.RandomWalk / pm.GaussianRandomWalk have no rule (their innovations may be non-Normal, "
        "and the walk is not covered as such); a Gaussian random walk with drift mu and scale "
        "sigma is pm.AR(rho=[mu, 1.0], sigma=sigma, constant=True, init_dist=...), which is covered"
    )


log_density_range.register(RandomWalkRV)(_random_walk_refusal)
element_lipschitz.register(RandomWalkRV)(_random_walk_refusal)


# --------------------------------------------------------------------------- lagged copies


def detect_lagged_copies(
    values: dict[str, np.ndarray], max_lag: int = 10, min_overlap: int = 2, min_distinct: int = 1
) -> list[tuple[str, str, int]]:
    """Pairs of columns of equal length where one is a lagged copy of the other.

    Every container is read as columns along its first (record) axis: a 1-D container is one
    column named by itself, a 2-D one is ``name[:, j]`` for each ``j``, a higher one is flattened
    per row (``name[:, j]`` then indexes the flattened row). Columns are compared across
    containers and within one (a design matrix holding ``y_{t-1}`` and ``y_{t-2}``).

    Returns every ``(a, b, k)`` with ``a != b``, ``1 <= k <= max_lag`` and ``a[k:] == b[:-k]``,
    i.e. ``b[t] = a[t + k]``: ``b`` runs ``k`` steps ahead of ``a`` (for ``y = s[1:]`` and
    ``y_lag = s[:-1]`` that is ``("y_lag", "y", 1)``), with at least two overlapping values (a
    single equal value is no evidence). A time series entered as two columns puts one
    observation in two rows, which a row-independent unit (``"record"``) would not see.
    ``min_overlap`` and ``min_distinct`` make a coincidence unlikely (short or binary columns can
    match by chance): at least that many overlapping values, and that many distinct values. A
    column of a matrix with one value (an intercept) equals every shift of itself and of any other
    such column: it is never a series.
    """
    columns: dict[str, np.ndarray] = {}
    for name, v in values.items():
        arr = np.asarray(v)
        if arr.ndim < 1 or arr.dtype.kind not in "biuf":
            continue
        arr = arr.astype(np.float64)  # an integer copy of a float series is the same series
        if arr.ndim == 1:
            if len(np.unique(arr)) >= min_distinct:
                columns[name] = arr
            continue
        flat = arr.reshape(arr.shape[0], -1)
        for j in range(flat.shape[1]):
            col = flat[:, j]
            if len(np.unique(col)) >= max(2, min_distinct):
                columns[f"{name}[:, {j}]"] = col
    out = []
    names = sorted(columns)
    head = 3  # candidates by the first values of the overlap, then checked in full
    for k in range(1, int(max_lag) + 1):
        starts: dict[tuple, list[str]] = {}
        for na in names:
            x = columns[na]
            if k <= len(x) - max(2, int(min_overlap)):
                starts.setdefault((len(x), x[k : k + head].tobytes()), []).append(na)
        for nb in names:
            y = columns[nb]
            for na in starts.get((len(y), y[:head].tobytes()), ()):
                if na != nb and np.array_equal(columns[na][k:], y[:-k]):
                    out.append((na, nb, k))
    return sorted(out, key=lambda t: (t[0], t[1], t[2]))


def refuse_lagged_copies(
    values: dict[str, np.ndarray], unit: Any = "record", max_lag: int = 10, min_overlap: int = 2, min_distinct: int = 1
) -> None:
    """Raise :class:`UnsupportedFactorError` when private containers hold lagged copies of one
    series and the unit treats rows as independent.

    Under ``"record"`` and ``"attribute"`` one observation ``y_t`` of such a pair sits in row
    ``t`` of one container and row ``t + k`` of the other: changing it changes two rows, which
    the lift (one row per unit) does not count. Under ``Users(ids)`` it is sound when rows ``t``
    and ``t + k`` always belong to the same user (checked); ``Users(max_rows=m)`` cannot be
    checked and is refused.
    """
    pairs = detect_lagged_copies(values, max_lag, min_overlap, min_distinct)
    if not pairs:
        return
    ids = getattr(unit, "ids", None)
    if unit not in ("record", "attribute") and ids is not None:
        ids = np.asarray(ids)
        if all(np.array_equal(ids[k:], ids[:-k]) for _, _, k in pairs):
            return
    a, b, k = pairs[0]
    raise UnsupportedFactorError(
        f"private data {a!r} and {b!r} hold one series twice ({b}[t] == {a}[t + {k}]): one "
        f"observation would sit in two rows, but unit={unit!r} treats rows as independent. Model "
        f"the series with pm.AR on one container (its record is one observation and the rule "
        f"counts every term it enters), or use a Users unit whose ids keep rows t and t + {k} "
        f"together."
    )
