"""The certified joint bound of per-statistic Laplace releases (pymc_dp.mechanisms.sensitivity).

Checked against brute force: the sup over a fine grid of record pairs lies between the returned
lower and upper bounds, the upper bound is within the tolerance of the lower one, and it never
exceeds the number of statistics (basic composition).
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from pymc_dp.mechanisms.sensitivity import joint_bound


def brute(terms, spans, points):
    t = np.stack([points[:, a[0]] if len(a) == 1 else points[:, a[0]] * points[:, a[1]] for a in terms], axis=1)
    w = 1 / np.asarray(spans, float)
    best = 0.0
    for chunk in np.array_split(np.arange(len(t)), max(1, len(t) // 500)):
        best = max(best, float((np.abs(t[chunk, None, :] - t[None, :, :]) @ w).max()))
    return best


@pytest.mark.parametrize("lo, hi", [(-5.0, 5.0), (-1.0, 3.0), (2.0, 4.0)])
def test_normal_statistics(lo, hi):
    """sum x and sum x^2: the worst change can pair an end with an interior point."""
    x = np.linspace(lo, hi, 4001)[:, None]
    spans = [hi - lo, np.ptp(x[:, 0] ** 2)]
    up, low = joint_bound([(0,), (0, 0)], spans, [lo], [hi])
    want = brute([(0,), (0, 0)], spans, x)
    assert low <= want + 1e-9 <= up + 1e-9
    assert up <= 1.01 * low + 1e-12 and up <= 2.0
    if (lo, hi) == (-5.0, 5.0):
        assert want == pytest.approx(1.5625, abs=1e-4)  # x = 5 against x' = -1.25


def test_regression_statistics_on_a_box():
    lo, hi = np.array([-1.0, -0.5, -2.0]), np.array([1.0, 1.0, 2.0])
    terms = [(0,), (1,), (0, 0), (0, 1), (1, 1), (0, 2), (1, 2), (2,), (2, 2)]
    g = [np.linspace(a, b, 13) for a, b in zip(lo, hi)]
    g[0] = np.union1d(g[0], [0.0])
    pts = np.array(list(itertools.product(*g)))
    spans = []
    for t in terms:
        v = pts[:, t[0]] if len(t) == 1 else pts[:, t[0]] * pts[:, t[1]]
        spans.append(np.ptp(v))
    up, low = joint_bound(terms, spans, lo, hi)
    want = brute(terms, spans, pts)
    # the grid's best is a lower estimate of K*; the lower bound (a feasible pair off the grid) may beat it
    assert want <= up + 1e-9 and low <= up
    assert up <= 1.02 * max(low, want) and up < len(terms)


def test_ball_stays_sound():
    """Two coordinates in a disc of radius 2 and y in [-1, 1]: the box bound is sound."""
    r, a = np.linspace(0, 2, 41), np.linspace(0, 2 * np.pi, 181)
    disc = np.array([(u * np.cos(v), u * np.sin(v)) for u in r for v in a])
    pts = np.array([(*p, y) for p in disc[::3] for y in (-1.0, 0.0, 1.0)])
    terms = [(0, 0), (0, 1), (1, 1), (0, 2), (1, 2), (2, 2)]
    spans = [4.0, 4.0, 4.0, 4.0, 4.0, 1.0]
    up, low = joint_bound(terms, spans, [-2, -2, -1], [2, 2, 1], radius={2.0: [0, 1]})
    want = brute(terms, spans, pts)
    assert want <= up + 1e-9 and low <= want + 1e-6  # lower bounds are feasible points
    assert up <= len(terms)


def test_one_statistic_and_zero_spans():
    assert joint_bound([(0,)], [3.0], [0.0], [3.0]) == (1.0, 1.0)
    assert joint_bound([(0,), (0, 0)], [2.0, 0.0], [-1.0], [1.0])[0] == pytest.approx(1.0)
    assert joint_bound([], [], [0.0], [1.0]) == (0.0, 0.0)


@pytest.mark.parametrize("weights", [(1.0, 3.0), (0.2, 1.0), (4.0, 0.5, 2.0)])
def test_weights_against_brute_force(weights):
    """sup sum_j w_j |change_j| / span_j: between the bounds, and the cap is the sum of the
    weights (a weight above 1 lets a term exceed 1: the unweighted cap d would be unsound)."""
    terms = [(0,), (0, 0), (1,)][: len(weights)]
    pts = np.stack([a.ravel() for a in np.meshgrid(np.linspace(-5, 5, 81), np.linspace(-1, 2, 31))], axis=1)
    spans = [10.0, 25.0, 3.0][: len(weights)]
    up, low = joint_bound(terms, spans, [-5.0, -1.0], [5.0, 2.0], weights=list(weights))
    want = brute(terms, np.asarray(spans) / np.asarray(weights), pts)
    assert want <= up + 1e-9 and low <= up  # the lower bound is a feasible pair, perhaps off the grid
    assert up <= 1.01 * max(low, want) + 1e-12 and up <= sum(weights) + 1e-12
    with pytest.raises(ValueError, match="weights"):
        joint_bound(terms, spans, [-5.0, -1.0], [5.0, 2.0], weights=[1.0] * (len(weights) - 1) + [0.0])


# --------------------------------------------------------------------------- the exact reduction
def _quadratic_terms(p):
    """Every monomial of degree 1 and 2 in p coordinates: a regression's statistics with an
    intercept (the features and the outcome, centred)."""
    return [(i,) for i in range(p)] + list(itertools.combinations_with_replacement(range(p), 2))


def _centred_spans(terms, h):
    return [2 * h[t[0]] if len(t) == 1 else (h[t[0]] ** 2 if t[0] == t[1] else 2 * h[t[0]] * h[t[1]]) for t in terms]


@pytest.mark.parametrize("p, points", [(2, 11), (3, 13)])
def test_reduction_is_exact_against_brute_force(p, points):
    """On a centred box the reduction's bound equals the sup over every pair of grid records
    (the grid holds the maximiser: v = h against v' = h (1 - 2 b*))."""
    h = np.array([1.0, 0.5, 2.0][:p])
    terms = _quadratic_terms(p)
    spans = _centred_spans(terms, h)
    pts = np.array(list(itertools.product(*[np.linspace(-a, a, points) for a in h])))
    want = brute(terms, spans, pts)
    up, low = joint_bound(terms, spans, -h, h)
    assert want <= up + 1e-9 and up <= want * (1 + 1e-8)
    assert low == pytest.approx(want, rel=1e-9)
    assert up == pytest.approx(p * (p + 4) ** 2 / (4 * (p + 3)), rel=1e-8)


def test_reduction_for_ten_covariates_and_an_outcome():
    """77 statistics (issue 33): the certified bound is the closed form 44.2 -- not the 69-72 the
    pair search certified, nor basic composition's 77 -- no random pair of records exceeds it,
    and a pair of records attains it (within 1e-8)."""
    p = 11
    rng = np.random.default_rng(0)
    h = rng.uniform(0.1, 3.0, p)
    terms = _quadratic_terms(p)
    spans = _centred_spans(terms, h)
    up, low = joint_bound(terms, spans, -h, h)
    exact = p * (p + 4) ** 2 / (4 * (p + 3))
    assert up == pytest.approx(exact, rel=1e-8) and up >= exact and low <= up <= low * (1 + 1e-8)
    w = 1 / np.asarray(spans)

    def objective(a, b):
        ta = np.stack([a[:, t[0]] if len(t) == 1 else a[:, t[0]] * a[:, t[1]] for t in terms], axis=1)
        tb = np.stack([b[:, t[0]] if len(t) == 1 else b[:, t[0]] * b[:, t[1]] for t in terms], axis=1)
        return np.abs(ta - tb) @ w

    # random pairs, corners against random points, and the maximiser's neighbourhood
    a = rng.uniform(-1, 1, (200_000, p)) * h
    b = rng.uniform(-1, 1, (200_000, p)) * h
    corners = rng.choice([-1.0, 1.0], (200_000, p)) * h
    bstar = np.full(p, p * (p + 4) / (2 * (p + 3)) / p)
    near = np.clip(h * (1 - 2 * bstar) + rng.normal(0, 0.05, (200_000, p)) * h, -h, h)
    attained = objective(h[None, :], (h * (1 - 2 * bstar))[None, :])[0]
    assert attained == pytest.approx(exact, rel=1e-12)
    for u, v in ((a, b), (corners, b), (np.broadcast_to(h, near.shape), near)):
        assert objective(u, v).max() <= up + 1e-9


def test_reduction_is_sound_off_centre_and_on_a_ball():
    """A box that is not centred: the hull's bound is sound, and the pair search still tightens
    it to within 1%; the returned lower bound is a pair of records inside the box."""
    lo, hi = np.array([0.0, -1.0]), np.array([2.0, 3.0])
    terms = [(0, 0), (0, 1), (1, 1)]
    g = [np.linspace(a, b_, 81) for a, b_ in zip(lo, hi)]
    pts = np.array(list(itertools.product(*g)))
    spans = [np.ptp(pts[:, t[0]] * pts[:, t[1]]) for t in terms]
    from pymc_dp.mechanisms.sensitivity import reduced_bound

    r_up, r_low = reduced_bound(terms, spans, lo, hi)
    up, low = joint_bound(terms, spans, lo, hi)
    want = brute(terms, spans, pts)
    assert want <= r_up + 1e-9 and want <= up + 1e-9 and r_low <= want + 1e-9
    assert up <= 1.01 * max(low, want)


def test_non_concave_weights_fall_back_soundly():
    """Weights that make q non-concave (cross terms outweigh the squares): no certificate from the
    reduction, so the pair search decides; the bound stays above brute force."""
    from pymc_dp.mechanisms.sensitivity import reduced_bound

    terms = [(0, 1), (0, 0), (1, 1)]
    spans = [2.0, 1.0, 1.0]
    weights = [5.0, 0.1, 0.1]
    r_up, _ = reduced_bound(terms, spans, [-1, -1], [1, 1], weights=weights)
    assert r_up == pytest.approx(sum(weights))
    pts = np.array(list(itertools.product(np.linspace(-1, 1, 41), repeat=2)))
    up, low = joint_bound(terms, spans, [-1, -1], [1, 1], weights=weights)
    want = brute(terms, np.asarray(spans) / np.asarray(weights), pts)
    assert want <= up + 1e-9 and up <= 1.01 * max(low, want)


def test_a_nan_span_is_refused():
    """Fail closed: a NaN span is not dropped as a zero span."""
    with pytest.raises(ValueError, match="spans"):
        joint_bound([(0,), (0, 0)], [2.0, float("nan")], [-1.0], [1.0])
