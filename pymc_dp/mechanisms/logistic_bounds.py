"""One record's largest change to the logistic path's released statistics: the sensitivity
bounds of :mod:`pymc_dp.mechanisms.logistic`, each an upper bound with its derivation, checked by
brute force in ``tests/mechanisms/test_logistic.py``.

* :func:`score_change_bound`: the score's, jointly over the two records of a change (sign
  vectors, slabs of the logit, vertices of box and slab);
* :func:`information_change_bound`: each information entry's range (interval arithmetic on cells
  of the covariates' box);
* :func:`sigmoid_slope` and ``SLOPE_FLOOR``: the slope both use, accurate in both tails.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
from scipy.special import expit

__all__ = ["SCORE_SLAB_DIMENSION", "SLOPE_FLOOR", "box_edges", "information_change_bound", "largest_slope",
           "score_change_bound", "sigmoid_slope"]


#: the least slope bound the information's map uses: a tiny ``alpha`` (an iterate far out, where
#: every record's ``sigma'`` underflows) would give noise scales near 0, and a float rounding of the
#: statistic then weighs more than the bound; the floor only adds noise
SLOPE_FLOOR = 1e-12


def sigmoid_slope(x):
    """``sigma'(x) = sigma(x) sigma(-x)``, accurate in both tails (``p (1 - p)`` is 0 for
    ``x > 37`` while ``sigma'(x)`` is 1e-17 there, and is not symmetric in float)."""
    return expit(x) * expit(-x)


def largest_slope(t_lo, t_hi):
    """``max sigma'`` over ``[t_lo, t_hi]`` (elementwise): ``sigma'`` increases up to 0 and
    decreases after, so it is ``sigma'(dist(0, [t_lo, t_hi]))``."""
    gap = np.where((t_lo <= 0) & (t_hi >= 0), 0.0, np.minimum(np.abs(t_lo), np.abs(t_hi)))
    return sigmoid_slope(gap)


#: slabs of ``z'c`` over which :func:`score_change_bound` bounds the residual (its bound exceeds
#: the attained change by about ``1 / SCORE_SLABS`` of the residual's range)
SCORE_SLABS = 128
#: above this dimension the score's bound is the coordinate-wise one (the slab bound enumerates
#: ``2^(D-1)`` sign vectors and every edge of the box)
SCORE_SLAB_DIMENSION = 8
#: relative margin on a bound computed in floating point (interpolated vertices, ``sigma``)
FLOAT_MARGIN = 1e-9


def box_edges(corners: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Index pairs ``(a, b)`` of the corners joined by an edge of the box (they differ in one coordinate)."""
    differ = (corners[:, None, :] != corners[None, :, :]).sum(axis=2)
    a, b = np.nonzero(np.triu(differ == 1))
    return a, b


def score_change_bound(corners: np.ndarray, c: np.ndarray, A: np.ndarray, slabs: int = SCORE_SLABS,
                       attained: bool = False) -> np.ndarray:
    """An upper bound on ``sup || q(z, y) - q(z', y') ||_1`` over two records, where one record adds
    ``q(z, y) = (y - sigma(zᵀc)) Aᵀz`` to the released score, ``z`` ranges over the box with
    corners ``corners`` ``(C, D)`` and ``y`` over {0, 1}; per run, for ``c`` ``(R, D)`` and
    ``A`` ``(R, D, D)`` (the basis divided by the noise weights, ``A_j = V_j / w_j``).

    Derivation. ``||v||_1 = max_s sᵀv`` over sign vectors ``s``, so the supremum is
    ``max_s [sup_(z,y) sᵀq - inf_(z,y) sᵀq]`` (``s`` and ``-s`` give the same value: ``s_0 = +1``
    suffices). Cut the range of ``t = zᵀc`` over the box into ``slabs`` slabs
    ``[t_k, t_k+1]``. On slab ``k`` the residual ``r = y - sigma(t)`` lies in
    ``[y - sigma(t_k+1), y - sigma(t_k)]`` (``sigma`` increases) and ``u = sᵀAᵀz`` is linear, so
    its range over ``box ∩ slab`` is attained at that polytope's vertices: the box's corners inside
    the slab and the points where the box's edges cross ``t = t_k`` and ``t = t_k+1``. The product
    ``r u`` over the rectangle of ``(r, u)`` is extreme at its four corners, which gives a bound
    per slab; the maximum over slabs, labels and sign vectors bounds the supremum, and exceeds it
    by at most the width of a slab's residual interval (``<= range / (4 slabs)``) times ``|u|``.
    Where every corner has the same ``t`` the one slab is exact. The result carries a relative
    margin ``FLOAT_MARGIN`` for the floating-point vertices and ``sigma``.

    With ``attained=True`` returns instead the largest change attained by two records at those
    vertices (a lower bound on the supremum: the vertices are records of the box).
    """
    R, D = c.shape
    signs = np.array([(1,) + s for s in itertools.product((1.0, -1.0), repeat=D - 1)], float)  # (S, D)
    ea, eb = box_edges(corners)
    out = np.empty(R)
    chunk = max(1, int(4e6 // max(1, (slabs + 1) * max(len(ea), 1) * len(signs))))
    frac = np.linspace(0.0, 1.0, slabs + 1)
    for start in range(0, R, chunk):
        cc, AA = c[start : start + chunk], A[start : start + chunk]
        r_ = len(cc)
        t = cc @ corners.T  # (r, C)
        u = np.einsum("cd,rdk,sk->rcs", corners, AA, signs)  # (r, C, S): sᵀAᵀz at the corners
        lo, hi = t.min(axis=1), t.max(axis=1)
        planes = lo[:, None] + (hi - lo)[:, None] * frac  # (r, K+1)
        planes[:, -1] = hi
        ta, tb = t[:, ea], t[:, eb]  # (r, E)
        span = tb - ta
        with np.errstate(divide="ignore", invalid="ignore"):
            lam = (planes[:, :, None] - ta[:, None, :]) / span[:, None, :]  # (r, K+1, E)
        crossing = (span[:, None, :] != 0) & (lam >= 0) & (lam <= 1)
        lam = np.where(crossing, lam, 0.0)
        ua, ub = u[:, ea], u[:, eb]  # (r, E, S)
        ue = ua[:, None] + lam[..., None] * (ub - ua)[:, None]  # (r, K+1, E, S)
        plane_max = np.where(crossing[..., None], ue, -np.inf).max(axis=2)  # (r, K+1, S)
        plane_min = np.where(crossing[..., None], ue, np.inf).min(axis=2)
        inside = (t[:, :, None] >= planes[:, None, :-1]) & (t[:, :, None] <= planes[:, None, 1:])  # (r, C, K)
        corner_max = np.where(inside[..., None], u[:, :, None, :], -np.inf).max(axis=1)  # (r, K, S)
        corner_min = np.where(inside[..., None], u[:, :, None, :], np.inf).min(axis=1)
        umax = np.maximum(np.maximum(plane_max[:, :-1], plane_max[:, 1:]), corner_max)  # (r, K, S)
        umin = np.minimum(np.minimum(plane_min[:, :-1], plane_min[:, 1:]), corner_min)
        if attained:
            # exact records: the corners and the crossing points, each with its own residual
            best = np.full((r_, len(signs)), -np.inf)
            worst = np.full((r_, len(signs)), np.inf)
            for y in (0.0, 1.0):
                rc = (y - expit(t))[..., None] * u  # (r, C, S)
                rp = (y - expit(planes))[:, :, None, None] * ue  # (r, K+1, E, S)
                best = np.maximum(best, np.maximum(rc.max(axis=1), np.where(crossing[..., None], rp, -np.inf).max(axis=(1, 2))))
                worst = np.minimum(worst, np.minimum(rc.min(axis=1), np.where(crossing[..., None], rp, np.inf).min(axis=(1, 2))))
            out[start : start + r_] = np.max(best - worst, axis=1)
            continue
        up = expit(planes)  # sigma at the planes
        down = expit(-planes)  # 1 - sigma, accurate in the upper tail
        best = np.full((r_, len(signs)), -np.inf)
        worst = np.full((r_, len(signs)), np.inf)
        for r_lo, r_hi in ((-up[:, 1:], -up[:, :-1]), (down[:, 1:], down[:, :-1])):  # y = 0, y = 1
            r_lo, r_hi = r_lo[..., None], r_hi[..., None]  # (r, K, 1)
            products = np.stack([r_lo * umax, r_lo * umin, r_hi * umax, r_hi * umin])
            best = np.maximum(best, products.max(axis=(0, 2)))
            worst = np.minimum(worst, products.min(axis=(0, 2)))
        out[start : start + r_] = np.max(best - worst, axis=1) * (1.0 + FLOAT_MARGIN)
    return out


#: at most this many cells of the covariates' box in :func:`information_change_bound` (``G`` per
#: axis with ``G^F`` at most this, and ``G`` at most ``INFORMATION_CELLS_PER_AXIS``; each entry's
#: bound exceeds its range by ``O(1 / G)``)
INFORMATION_CELLS = 4096
INFORMATION_CELLS_PER_AXIS = 64


def information_change_bound(lo: np.ndarray, hi: np.ndarray, intercept: bool, c: np.ndarray, V: np.ndarray,
                             cells: int = INFORMATION_CELLS) -> np.ndarray:
    """Per run and per entry ``(j, k)``, ``j <= k``, of the information in basis ``V``: an upper
    bound on ``sup_z sigma'(zᵀc) p_j p_k - inf_z sigma'(zᵀc) p_j p_k`` with ``p = Vᵀz``, over the
    box ``[lo, hi]`` of the scaled covariates (``z = (1, x)`` with an intercept); ``(R, D(D+1)/2)``
    for ``c`` ``(R, D)`` and ``V`` ``(R, D, D)``. One record's change moves entry ``(j, k)`` by
    at most this much.

    Derivation (interval arithmetic on cells). Cut the box into ``G^F`` equal cells. Over a cell
    ``p_j`` and ``t = zᵀc`` are linear, so their ranges are exact: centre value plus or minus the
    sum of ``|coefficient| x half-width``. ``sigma'`` increases up to 0 and decreases after, so on
    ``[t_lo, t_hi]`` it lies between ``min(sigma'(t_lo), sigma'(t_hi))`` and
    ``sigma'(dist(0, [t_lo, t_hi]))``. A product of two intervals lies between the least and the
    largest of its four corner products (a square between 0, or the lesser square where the
    interval excludes 0, and the larger square). The entry's supremum over the box is at most the
    largest cell upper bound and its infimum at least the least cell lower bound. The old bound
    (``alpha R_j R_k``, ``alpha`` the largest slope on the box and ``R`` the largest reach) is the
    one-cell case; cells see that where ``|p|`` is large the logit is far from 0 and the slope
    small (at the gallery's iterates, about 0.3 of the old bound). Carries the relative margin
    ``FLOAT_MARGIN``.
    """
    R, D = c.shape
    F = len(lo)
    G = max(1, min(INFORMATION_CELLS_PER_AXIS, int(math.floor(cells ** (1.0 / max(F, 1)) + 1e-9))))
    edges = [np.linspace(l, h, G + 1) for l, h in zip(lo, hi)]
    mids = np.array(list(itertools.product(*[(e[1:] + e[:-1]) / 2 for e in edges]))).reshape(-1, F)
    halves = np.array([(e[1] - e[0]) / 2 for e in edges])
    centre = np.concatenate([np.ones((len(mids), 1)), mids], axis=1) if intercept else mids  # (N, D)
    half = np.concatenate([[0.0], halves]) if intercept else halves  # (D,)
    iu = np.triu_indices(D)
    out = np.empty((R, len(iu[0])))
    chunk = max(1, int(2e6 // (len(centre) * len(iu[0]))))
    for start in range(0, R, chunk):
        cc, VV = c[start : start + chunk], V[start : start + chunk]
        tc = centre @ cc.T  # (N, r)
        tr = np.abs(cc) @ half  # (r,)
        t_lo, t_hi = tc - tr, tc + tr
        a_lo = np.minimum(sigmoid_slope(t_lo), sigmoid_slope(t_hi))
        a_hi = largest_slope(t_lo, t_hi)
        pc = np.einsum("nd,rdj->rnj", centre, VV)  # (r, N, D)
        pr = np.einsum("d,rdj->rj", half, np.abs(VV))[:, None, :]  # (r, 1, D)
        p_lo, p_hi = pc - pr, pc + pr
        j, k = iu
        corners = np.stack([p_lo[..., j] * p_lo[..., k], p_lo[..., j] * p_hi[..., k],
                            p_hi[..., j] * p_lo[..., k], p_hi[..., j] * p_hi[..., k]])  # (4, r, N, M)
        q_lo, q_hi = corners.min(axis=0), corners.max(axis=0)
        straddle = (p_lo[..., j] < 0) & (p_hi[..., j] > 0) & (j == k)  # a square over an interval holding 0
        q_lo = np.where(straddle, 0.0, q_lo)
        a_lo, a_hi = a_lo.T[..., None], a_hi.T[..., None]  # (r, N, 1)
        prods = np.stack([a_lo * q_lo, a_lo * q_hi, a_hi * q_lo, a_hi * q_hi])
        out[start : start + len(cc)] = prods.max(axis=(0, 2)) - prods.min(axis=(0, 2))
    return out * (1.0 + FLOAT_MARGIN)
