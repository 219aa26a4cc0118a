"""One record's largest change to the logistic path's released statistics: the sensitivity
bounds of :mod:`pymc_dp.mechanisms.logistic`, each an upper bound with its derivation, checked by
brute force in ``tests/mechanisms/test_logistic.py``.

* :func:`score_change_bound`: the score's, jointly over the two records of a change (sign
  vectors, slabs of the logit, vertices of box and slab);
* :func:`information_change_bound`: each information entry's range (interval arithmetic on cells
  of the covariates' box);
* :func:`sigmoid_slope` and ``SLOPE_FLOOR``: the slope both use, accurate in both tails;
* :class:`Geometry` and the closed forms that enumerate nothing (any number of covariates, Box
  and Ball domains; ``docs/theory/logistic_newton.md``): :func:`linear_range`,
  :func:`reach_bound`, :func:`norm_bound`, :func:`score_l1_bound`, :func:`information_l1_bound`.
"""

from __future__ import annotations

import dataclasses
import itertools
import math

import numpy as np
from scipy.special import expit

__all__ = ["SCORE_SLAB_DIMENSION", "SLOPE_FLOOR", "Geometry", "box_edges", "information_change_bound",
           "information_l1_bound", "largest_slope", "linear_range", "norm_bound", "reach_bound", "score_change_bound",
           "score_l1_bound", "sigmoid_slope"]


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


# --------------------------------------------------------------------------- closed forms
@dataclasses.dataclass(frozen=True)
class Geometry:
    """The set of scaled records ``z`` (``D`` coordinates): ``z = centre + h * v + sum_b
    E_b (s_b * u_b)`` with ``|v_d| <= 1`` (``h`` the box's half-widths, 0 on the intercept and on
    Ball coordinates) and, per Ball block ``b`` (``idx`` its coordinates, ``s_b`` their scales),
    ``||u_b||_2 <= 1``. A Box is ``balls=()``; a ``Ball(r)`` container whose columns ``j`` are
    divided by ``h_j`` is the block with ``s = r / h``. Public: built from the declared domains.
    See ``docs/theory/logistic_newton.md#geometry``."""

    centre: np.ndarray  # (D,)
    half: np.ndarray  # (D,)
    balls: tuple = ()  # of (idx: int array, s: float array)

    def support(self, a: np.ndarray) -> np.ndarray:
        """``sup_z aᵀz`` over the set, for ``a`` ``(..., D)``: ``aᵀcentre + |a|ᵀh + sum_b
        ||a_b * s_b||_2`` (each part is a support function: of the box, attained at a corner, and
        of an ellipsoid, attained at ``u = a_b s_b / ||a_b s_b||``). Exact."""
        a = np.asarray(a, float)
        out = a @ self.centre + np.abs(a) @ self.half
        for idx, sc in self.balls:
            out = out + np.sqrt(np.sum((a[..., idx] * sc) ** 2, axis=-1))
        return out


def linear_range(geom: Geometry, a: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(inf, sup)`` of ``aᵀz`` over ``geom`` (``a`` ``(..., D)``): ``(-support(-a), support(a))``.
    Exact; for a box it is the corners' range without enumerating them."""
    return -geom.support(-np.asarray(a, float)), geom.support(a)


def reach_bound(geom: Geometry, V: np.ndarray) -> np.ndarray:
    """``sup_z |V_kᵀz|`` per column ``k`` of ``V`` ``(R, D, K)``: ``(R, K)``, the larger of
    ``support(V_k)`` and ``support(-V_k)``. Exact (a linear function's largest modulus)."""
    cols = np.swapaxes(np.asarray(V, float), -1, -2)  # (R, K, D)
    return np.maximum(geom.support(cols), geom.support(-cols))


def norm_bound(geom: Geometry) -> float:
    """An upper bound on ``sup_z ||z||_2``: the set is a product of the box's coordinates and the
    Ball blocks, so ``||z||² = sum_d z_d² + sum_b ||z_b||²`` splits into independent parts; a box
    coordinate's largest square is ``(|centre_d| + h_d)²`` and a block's ``||z_b|| <= ||centre_b||
    + max s_b`` (triangle inequality; exact for a centred round Ball)."""
    box = np.ones(len(geom.centre), bool)
    total = 0.0
    for idx, sc in geom.balls:
        box[idx] = False
        total += (float(np.linalg.norm(geom.centre[idx])) + float(np.max(sc))) ** 2
    total += float(np.sum((np.abs(geom.centre[box]) + geom.half[box]) ** 2))
    return math.sqrt(total) * (1.0 + FLOAT_MARGIN)


def _operator_norm(V: np.ndarray) -> np.ndarray:
    """``||V||_2`` per run (the largest singular value; 1 for an orthonormal basis), with margin."""
    return np.linalg.svd(np.asarray(V, float), compute_uv=False).max(axis=-1) * (1.0 + FLOAT_MARGIN)


def score_l1_bound(geom: Geometry, V: np.ndarray, w: np.ndarray, rho: np.ndarray) -> np.ndarray:
    """An upper bound on ``S = sup || (q(z, y) - q(z', y')) / w ||_1`` over two records of
    ``geom``, where a record adds ``q = r Vᵀz`` with ``|r| = |y - sigma(zᵀc)| <= rho``; per run,
    ``V`` ``(R, D, K)``, ``w`` ``(R, K)`` (positive weights), ``rho`` ``(R,)``. Enumerates nothing.

    Derivation (``docs/theory/logistic_newton.md#score``). By the triangle inequality
    ``S <= 2 rho sup_z sum_k |V_kᵀz| / w_k``, and that supremum is at most each of

    * ``sum_k reach_k / w_k`` (the supremum of a sum is at most the sum of the suprema;
      :func:`reach_bound` is exact per coordinate); at ``V = I`` over a box it is exact, the
      largest ``||z||_1``;
    * ``||1/w||_2 ||V||_2 sup ||z||_2`` (Cauchy-Schwarz, then the operator norm; :func:`norm_bound`):
      within ``sqrt(K)`` of the truth however ``V`` rotates, where the first can exceed it by
      ``sqrt(2 K / pi)`` for a random rotation of a box; over a centred unit Ball with an
      intercept at ``V = I`` it is ``sqrt(2 D)`` against the first's ``D``.

    The lesser is returned, times ``2 rho`` and the margin ``FLOAT_MARGIN``."""
    w = np.asarray(w, float)
    per_coordinate = np.sum(reach_bound(geom, V) / w, axis=1)
    cauchy = np.sqrt(np.sum(w ** -2.0, axis=1)) * _operator_norm(V) * norm_bound(geom)
    return 2.0 * np.asarray(rho, float) * np.minimum(per_coordinate, cauchy) * (1.0 + FLOAT_MARGIN)


def information_l1_bound(geom: Geometry, V: np.ndarray, w: np.ndarray, alpha: np.ndarray) -> np.ndarray:
    """An upper bound on ``sup sum_(j<=k) |a p_j p_k - a' p'_j p'_k| / w_jk`` over two records,
    where a record adds ``a p pᵀ`` with ``p = Vᵀz`` and ``0 <= a = sigma'(zᵀc) <= alpha``; per
    run, ``V`` ``(R, D, D)``, ``w`` ``(R, D(D+1)/2)`` (upper triangle, positive), ``alpha``
    ``(R,)``. A joint bound over the entries; enumerates nothing.

    Derivation (``docs/theory/logistic_newton.md#information``). By the triangle inequality the
    change is at most ``2 sup_z a sum_(j<=k) |p_j||p_k| / w_jk``. With the symmetric ``B``,
    ``B_jj = 1 / w_jj`` and ``B_jk = B_kj = 1 / (2 w_jk)``, that sum is ``|p|ᵀ B |p| <=
    lambda_max(B) ||p||²`` (Rayleigh), and ``||p|| <= ||V||_2 sup ||z||_2``. So the bound is
    ``2 alpha lambda_max(B) ||V||_2² sup ||z||²``, with the margin ``FLOAT_MARGIN``. At ``w = 1``
    over a box the sum of per-entry ranges (``alpha (sum_j R_j)²``) is about as tight; over a
    centred unit Ball with an intercept this one is ``2 alpha (D + 1)`` against their
    ``alpha D²``: about ``D / 2`` times smaller."""
    V = np.asarray(V, float)
    R, D, _ = V.shape
    iu = np.triu_indices(D)
    inv = 1.0 / np.asarray(w, float)
    B = np.zeros((R, D, D))
    B[:, iu[0], iu[1]] = np.where(iu[0] == iu[1], inv, 0.5 * inv)
    B[:, iu[1], iu[0]] = B[:, iu[0], iu[1]]
    top = np.linalg.eigvalsh(B)[:, -1] * (1.0 + FLOAT_MARGIN)
    return 2.0 * np.asarray(alpha, float) * top * _operator_norm(V) ** 2 * norm_bound(geom) ** 2 * (1.0 + FLOAT_MARGIN)
