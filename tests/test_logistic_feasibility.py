"""The bounds benchmarks/logistic_feasibility.py (and docs/gallery.md) rest on, checked by brute force."""

from __future__ import annotations

import itertools
import sys
from pathlib import Path

import numpy as np
import pytest
from scipy.special import expit, log_expit

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))

import logistic_feasibility as lf  # noqa: E402


@pytest.fixture(scope="module")
def small():
    return lf.problem(300)


def _corners(k):
    return np.array([(1.0, *c) for c in itertools.product([-1.0, 1.0], repeat=k - 1)])


def test_score_and_information_sensitivities_bound_every_pair_of_records(small):
    """Over the domain-scaled box (corners and random records), every pair of records and a public
    iterate, the L1 change of the score and of the information's upper triangle stays within 10
    and 6.25. The score's bound is not tight: a steep iterate reaches 8 (one coordinate drives
    ``p`` from 0 to 1, and its own entry then cancels), so the benchmark's noise is at most 25%
    more than needed, which only strengthens its "cannot reach" at n = 300."""
    rng = np.random.default_rng(0)
    k = small["Z"].shape[1]
    records = np.vstack([_corners(k), np.column_stack([np.ones(200), rng.uniform(-1, 1, (200, k - 1))])])
    iu = np.triu_indices(k)
    largest_score = largest_info = 0.0
    steep = np.zeros(k)
    steep[-1] = 100.0
    for c in (np.zeros(k), small["c_map"], rng.normal(0, 3, k), steep):
        p = expit(records @ c)
        for y in (0.0, 1.0):
            score = records * (y - p)[:, None]
            info = np.array([(pi * (1 - pi) * np.outer(z, z))[iu] for z, pi in zip(records, p)])
            for y2 in (0.0, 1.0):
                score2 = records * (y2 - p)[:, None]
                largest_score = max(largest_score, np.abs(score[:, None, :] - score2[None, :, :]).sum(-1).max())
            largest_info = max(largest_info, np.abs(info[:, None, :] - info[None, :, :]).sum(-1).max())
    assert largest_score <= lf.SCORE_SPAN and largest_info <= lf.INFO_SPAN
    assert largest_score > 0.79 * lf.SCORE_SPAN
    assert largest_info > 0.5 * lf.INFO_SPAN


def test_label_flip_oscillation_is_the_box_bound(small):
    """g(b) = log p(1 | x, b) - log p(0 | x, b) = eta(b): its oscillation over the box of +-t sds,
    at the domain's corner of largest |x|, equals the lower bound the benchmark states, and no
    corner record exceeds it; twice it bounds every pair of records (|d log sigma| <= 1)."""
    t = 0.5
    h = t * small["sd_b"]
    centre = small["b_map"]
    lo, hi = small["X_lo"], small["X_hi"]
    claimed = lf.box_epsilon(small, t)
    thetas = np.array([centre + h * np.array(s) for s in itertools.product([-1.0, 1.0], repeat=len(h))])
    records = np.array(list(itertools.product(*zip(lo, hi))))
    design = np.column_stack([np.ones(len(records)), records])
    eta = thetas @ design.T  # (box corners, records): eta is linear, so its extremes are at corners
    flip = log_expit(eta) - log_expit(-eta)
    osc = flip.max(axis=0) - flip.min(axis=0)
    assert osc.max() == pytest.approx(claimed["lower"], rel=1e-2)
    pair = (log_expit(eta)[:, :, None] - log_expit(-eta)[:, None, :])
    assert (pair.max(axis=0) - pair.min(axis=0)).max() <= claimed["upper"] * (1 + 1e-2)


def test_the_reference_is_the_map_and_its_curvature(small):
    """The MAP's gradient vanishes, and the collinear direction is what the docs say (its
    eigenvalue far below the others)."""
    Z, y, P, c = small["Z"], small["y"], small["P"], small["c_map"]
    gradient = Z.T @ (y - expit(Z @ c)) - P @ c
    assert np.abs(gradient).max() < 1e-3
    ev = small["info_eigenvalues"]
    assert ev[0] < 0.1 and ev[1] > 20 * ev[0]
