"""The joint sensitivity of several sums released with per-statistic Laplace noise.

A release adds independent Laplace noise of scale ``b_j`` to each statistic
``T_j = sum_i t_j(r_i)``. Replacing one record ``r`` by ``r'`` changes the log density of the
output by at most ``sum_j |t_j(r) - t_j(r')| / b_j``. With ``b_j = span_j K / epsilon`` the
release is ``epsilon``-DP exactly when

    K >= K* = sup over records r, r' of  sum_j |t_j(r) - t_j(r')| / span_j.

``K* <= d`` (each term is at most 1), which is basic composition with ``epsilon / d`` per
statistic. But the spans are usually attained by *different* record changes (``x`` from ``-a``
to ``a`` moves ``sum x`` by its span and ``sum x^2`` by 0), so ``K*`` is often much smaller, and
every noise scale shrinks by ``d / K*``.

:func:`joint_bound` returns a certified upper bound on ``K*`` for statistics that are products
of at most two coordinates of the record (``x_j``, ``x_j^2``, ``x_j x_k``, ``x_j y``) over a box
of coordinates, by branch and bound on pairs of boxes with interval arithmetic: every box pair
gets a sound upper bound of the objective, the best objective value at feasible points is a
lower bound, and boxes that cannot beat it are dropped. The returned bound is within ``tol``
(relative) of the lower bound found, or is the best sound bound after ``max_rounds``, never
above ``d``.

Before that search, an exact reduction (:func:`reduced_bound`; ``docs/theory/joint_sensitivity.md``)
bounds ``K*`` on the symmetric hull ``[-h, h]`` of the box, ``h_i = max(|lo_i|, |hi_i|)``. With
``s = (v + v') / 2`` and ``t = (v - v') / 2`` a pair of records is any ``(s, t)`` with
``|s_i| + |t_i| <= h_i``, and the changes are ``2 t_i`` (``v_i``), ``4 s_i t_i`` (``v_i^2``) and
``2 (s_i t_k + t_i s_k)`` (``v_i v_k``). Their absolute values are at most those of
``a_i = |s_i|, b_i = |t_i|`` with ``+`` signs, which the pair ``s, t >= 0`` attains: so ``K*`` on
the hull is *exactly* the maximum of a quadratic ``q(b) = g.b - b'Hb`` over ``b in [0, 1]^p``
(``a_i = h_i - b_i`` after scaling, every term being nondecreasing). With the statistics of a
regression ``H`` is positive definite: ``q`` is concave, its maximum is found by projected
gradient ascent and certified by the Frank-Wolfe gap (``q(b*) <= q(b) + max_v grad q(b).(v - b)``).
On a centred box (the regression with an intercept) the hull is the box and the bound is exact:
for ``p`` coordinates with every monomial of degree <= 2 and unit weights,
``K* = p (p + 4)^2 / (4 (p + 3))`` (44.2 for 10 covariates and the outcome, where ``d = 77``
and the branch and bound alone certified 69). The branch and bound then runs only when the
reduction does not close the gap (a non-centred box, a Ball, weights that make ``q`` non-concave).
"""

from __future__ import annotations

import math
from typing import Sequence

import numpy as np

__all__ = ["joint_bound", "reduced_bound", "statistics_joint_bound"]


def _term_interval(lo: np.ndarray, hi: np.ndarray, term: tuple[int, ...]) -> tuple[np.ndarray, np.ndarray]:
    """Interval of one term over boxes ``lo, hi`` ``(boxes, p)``: ``v_i`` or ``v_i v_k``."""
    if len(term) == 1:
        return lo[:, term[0]], hi[:, term[0]]
    i, k = term
    if i == k:
        a, b = lo[:, i], hi[:, i]
        top = np.maximum(a * a, b * b)
        bottom = np.where((a <= 0) & (b >= 0), 0.0, np.minimum(a * a, b * b))
        return bottom, top
    corners = np.stack([lo[:, i] * lo[:, k], lo[:, i] * hi[:, k], hi[:, i] * lo[:, k], hi[:, i] * hi[:, k]])
    return corners.min(axis=0), corners.max(axis=0)


def _terms(v: np.ndarray, terms: Sequence[tuple[int, ...]]) -> np.ndarray:
    return np.stack([v[:, t[0]] if len(t) == 1 else v[:, t[0]] * v[:, t[1]] for t in terms], axis=1)


def joint_bound(
    terms: Sequence[tuple[int, ...]],
    spans: Sequence[float],
    lo: Sequence[float],
    hi: Sequence[float],
    *,
    weights: Sequence[float] | None = None,
    radius: dict | None = None,
    tol: float = 0.01,
    max_rounds: int = 60,
    max_boxes: int = 1_000_000,
) -> tuple[float, float]:
    """``(upper, lower)`` bounds on ``K* = sup_{r, r'} sum_j w_j |t_j(r) - t_j(r')| / span_j``.

    Parameters
    ----------
    terms : sequence of tuples
        Each statistic's term: ``(i,)`` for coordinate ``i`` of the record, ``(i, k)`` for the
        product of coordinates ``i`` and ``k`` (``(i, i)``: a square).
    spans : sequence of float
        Each statistic's span (its range over one record); zero-span statistics are ignored.
    lo, hi : sequence of float
        The record's coordinate box.
    weights : sequence of float, optional
        Each statistic's weight ``w_j > 0`` (its share of a budget); 1 for all by default.
    radius : dict, optional
        ``{radius: [coordinates]}``: those coordinates also lie in a Euclidean ball of that radius.
        The upper bound stays sound (it ranges over the box); lower-bound points are kept inside
        the ball.

    Returns
    -------
    (upper, lower) : float
        ``lower <= K* <= upper``, ``upper <= (1 + tol) lower`` unless the rounds ran out, and
        ``upper <= sum_j w_j`` over the nonzero spans (each term is at most its weight).

    The bound depends on public facts only (terms, spans, domain), so it is remembered: repeated
    releases with the same domains (a sweep, a calibration) reuse it.
    """
    weights = [1.0] * len(spans) if weights is None else [float(v) for v in weights]
    if len(weights) != len(spans) or not all(math.isfinite(v) and v > 0 for v in weights):
        raise ValueError(f"weights={weights!r} must be one finite number > 0 per statistic")
    if not all(float(v) >= 0 for v in spans):  # fail closed: a NaN span would be dropped as zero
        raise ValueError(f"spans={list(spans)!r} must be numbers >= 0 (a NaN or negative span has no bound)")
    key = (tuple(map(tuple, terms)), tuple(map(float, spans)), tuple(weights), tuple(map(float, lo)), tuple(map(float, hi)),
           tuple(sorted((float(r), tuple(c)) for r, c in (radius or {}).items())), tol, max_rounds, max_boxes)
    if key not in _JOINT_CACHE:
        if len(_JOINT_CACHE) > 256:
            _JOINT_CACHE.clear()
        _JOINT_CACHE[key] = _branch_and_bound(terms, spans, weights, lo, hi, radius, tol, max_rounds, max_boxes)
    return _JOINT_CACHE[key]


_JOINT_CACHE: dict = {}


def reduced_bound(
    terms: Sequence[tuple[int, ...]],
    spans: Sequence[float],
    lo: Sequence[float],
    hi: Sequence[float],
    *,
    weights: Sequence[float] | None = None,
    radius: dict | None = None,
    iterations: int = 5000,
) -> tuple[float, float]:
    """``(upper, lower)`` on ``K*`` by the exact reduction to ``b in [0, 1]^p`` (module docstring).

    ``upper`` bounds ``K*`` over the symmetric hull of the box (so over the box and any Ball in
    it): exactly when ``q`` is concave (Frank-Wolfe gap of the ascent's last point, plus a
    relative ``1e-9`` for rounding), else by ``sum_j w_j`` (the trivial cap). ``lower`` is the
    objective evaluated at a pair of records in the box (and the balls) built from the ascent's
    point: ``v = h`` against ``v' = h (1 - 2 b)``, clipped into the domain.
    """
    weights = [1.0] * len(spans) if weights is None else [float(v) for v in weights]
    keep = [j for j, s in enumerate(spans) if s > 0]
    if not keep:
        return 0.0, 0.0
    cap = float(sum(weights[j] for j in keep))
    lo, hi = np.asarray(lo, float), np.asarray(hi, float)
    h = np.maximum(np.abs(lo), np.abs(hi))
    p = h.size
    # q(b) = sum_i alpha_i b_i + beta_i (1 - b_i) b_i + sum_{i<k} gamma_ik (b_i (1 - b_k) + b_k (1 - b_i))
    alpha, beta, gamma = np.zeros(p), np.zeros(p), np.zeros((p, p))
    for j in keep:
        t, c = tuple(terms[j]), weights[j] / spans[j]
        if len(t) == 1:
            alpha[t[0]] += 2.0 * h[t[0]] * c
        elif t[0] == t[1]:
            beta[t[0]] += 4.0 * h[t[0]] ** 2 * c
        else:
            i, k = t
            gamma[i, k] += 2.0 * h[i] * h[k] * c
            gamma[k, i] += 2.0 * h[i] * h[k] * c
    g = alpha + beta + gamma.sum(axis=1)
    H = np.diag(beta) + gamma
    if not np.all(np.isfinite(H)) or not np.all(np.isfinite(g)):
        return cap, 0.0

    def q(b):
        return float(g @ b - b @ H @ b)

    # projected gradient ascent on [0, 1]^p (step 1 / Lipschitz constant of the gradient)
    step = 1.0 / max(2.0 * float(np.abs(H).sum(axis=1).max()), 1e-300)
    b = np.full(p, 0.5)
    for _ in range(iterations):
        nb = np.clip(b + step * (g - 2.0 * H @ b), 0.0, 1.0)
        if np.max(np.abs(nb - b)) < 1e-13:
            b = nb
            break
        b = nb
    # a feasible pair of records: v = h, v' = h (1 - 2 b) (clipped into the box and the balls)
    va, vb = np.clip(h, lo, hi), np.clip(h * (1.0 - 2.0 * b), lo, hi)
    pair = np.stack([va, vb])
    for r, cols in (radius or {}).items():
        norm = np.sqrt(np.sum(pair[:, cols] ** 2, axis=1, keepdims=True))
        pair[:, cols] = pair[:, cols] * np.minimum(1.0, float(r) / np.maximum(norm, 1e-300))
    w = np.asarray([weights[j] / spans[j] for j in keep], float)
    kept = [tuple(terms[j]) for j in keep]
    lower = float((np.abs(_terms(pair[:1], kept) - _terms(pair[1:], kept)) @ w)[0])
    if np.linalg.eigvalsh(H).min() < -1e-12 * max(1.0, float(np.abs(H).max())):
        return cap, min(lower, cap)  # not concave: no certificate from the gap
    grad = g - 2.0 * H @ b
    gap = float(np.sum(np.maximum(grad * (1.0 - b), -grad * b)))
    upper = (q(b) + max(gap, 0.0)) * (1.0 + 1e-9)
    if not math.isfinite(upper):
        return cap, min(lower, cap)
    return min(upper, cap), min(lower, cap)


def _branch_and_bound(terms, spans, weights, lo, hi, radius, tol, max_rounds, max_boxes) -> tuple[float, float]:
    """:func:`joint_bound`'s computation (not remembered): the reduction, then, if it leaves a
    gap above ``tol``, the branch and bound over pairs of boxes."""
    r_up, r_low = reduced_bound(terms, spans, lo, hi, weights=weights, radius=radius)
    if r_up <= r_low * (1 + tol):
        return max(r_up, r_low), r_low
    up, low = _pair_search(terms, spans, weights, lo, hi, radius, tol, max_rounds, max_boxes)
    low = max(low, r_low)
    return max(min(up, r_up), low), low


def _pair_search(terms, spans, weights, lo, hi, radius, tol, max_rounds, max_boxes) -> tuple[float, float]:
    """Interval branch and bound over pairs of records (``(upper, lower)``)."""
    keep = [j for j, s in enumerate(spans) if s > 0]
    terms = [tuple(terms[j]) for j in keep]
    w = np.asarray([weights[j] / spans[j] for j in keep], float)
    # each |t_j(r) - t_j(r')| is at most span_j, so the sum is at most the sum of the weights
    d = float(sum(weights[j] for j in keep))
    if not keep:
        return 0.0, 0.0
    lo, hi = np.asarray(lo, float), np.asarray(hi, float)
    p = lo.size
    balls = [(float(r), list(c)) for r, c in (radius or {}).items()]

    def feasible(v):
        for r, cols in balls:
            norm = np.sqrt(np.sum(v[:, cols] ** 2, axis=1, keepdims=True))
            v[:, cols] = v[:, cols] * np.minimum(1.0, r / np.maximum(norm, 1e-300))
        return v

    def value(a, b):
        return np.abs(_terms(a, terms) - _terms(b, terms)) @ w

    # a pair of records is one point of the 2p-box; start from the whole box
    blo = np.concatenate([lo, lo])[None, :]
    bhi = np.concatenate([hi, hi])[None, :]
    # lower bound: the corners and centres of a coarse grid (feasible points only)
    grid = np.stack(np.meshgrid(*[np.linspace(a, b, 3) for a, b in zip(lo, hi)], indexing="ij"), axis=-1).reshape(-1, p)
    grid = feasible(grid.copy())
    if len(grid) ** 2 <= 2_000_000:
        ia, ib = np.meshgrid(np.arange(len(grid)), np.arange(len(grid)), indexing="ij")
        best = float(value(grid[ia.ravel()], grid[ib.ravel()]).max())
    else:
        best = 0.0
    upper = d
    for _ in range(max_rounds):
        ub = np.zeros(len(blo))
        for t, wj in zip(terms, w):
            a0, a1 = _term_interval(blo[:, :p], bhi[:, :p], t)
            b0, b1 = _term_interval(blo[:, p:], bhi[:, p:], t)
            ub += wj * np.maximum(np.abs(a1 - b0), np.abs(a0 - b1))
        mid = (blo + bhi) / 2
        best = max(best, float(value(feasible(mid[:, :p].copy()), feasible(mid[:, p:].copy())).max()))
        upper = min(d, float(ub.max()))
        if upper <= best * (1 + tol):
            break
        alive = ub > best * (1 + tol)
        blo, bhi, mid = blo[alive], bhi[alive], mid[alive]
        if 2 * len(blo) > max_boxes:  # keep the most promising boxes' bound sound: stop splitting
            break
        axis = np.argmax(bhi - blo, axis=1)
        rows = np.arange(len(blo))
        left_hi, right_lo = bhi.copy(), blo.copy()
        left_hi[rows, axis] = mid[rows, axis]
        right_lo[rows, axis] = mid[rows, axis]
        blo, bhi = np.concatenate([blo, right_lo]), np.concatenate([left_hi, bhi])
    return max(upper, best), best


def statistics_joint_bound(stats, weights, lo, hi, kind: str, reads, radius=None,
                           require_finite: bool = False) -> tuple[float, float, int]:
    """:func:`joint_bound` of a regression's statistics ``stats`` (``(name, span, reads, t)`` each)
    over one record's change in the box ``[lo, hi]``, and the count of statistics one unit moves.

    ``"attribute"``: one container moves only the statistics that read it, so ``K`` and the
    attained change are at most their weights' sum (the smaller is returned). ``require_finite``:
    a ``K`` that is not finite and positive raises ``ValueError`` (before the attribute's cap)."""
    K, attained = joint_bound([t for *_, t in stats], [sp for _, sp, _, _ in stats], lo, hi,
                              weights=[weights[n] for n, *_ in stats], radius=radius)
    if require_finite and not (math.isfinite(K) and K > 0):
        raise ValueError(f"the joint sensitivity bound {K!r} is not finite: refusing to release.")
    d = len(stats)
    if kind == "attribute":
        d = max(sum(c in r for _, _, r, _ in stats) for c in reads)
        dw = max(sum(weights[n] for n, _, r, _ in stats if c in r) for c in reads)
        return min(K, dw), min(attained, dw), d
    return K, attained, d
