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
    assert low <= want + 1e-9 <= up + 1e-9
    assert up <= 1.02 * low and up < len(terms)


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
    assert low <= want + 1e-9 <= up + 1e-9
    assert up <= 1.01 * low + 1e-12 and up <= sum(weights) + 1e-12
    with pytest.raises(ValueError, match="weights"):
        joint_bound(terms, spans, [-5.0, -1.0], [5.0, 2.0], weights=[1.0] * (len(weights) - 1) + [0.0])
