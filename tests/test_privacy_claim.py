"""Exact audit of the Beta-Bernoulli claim against closed-form truncated posteriors.

For the truncation the certificate reports, the posterior given k ones out of n is a Beta(1+k,
1+n-k) restricted to ``[lo, hi]``. Replace-one neighbours have counts k and k+1. The sup over
theta of the log-ratio of the two truncated posterior densities must never exceed the claimed
per-draw epsilon, and at n >= 200 with epsilon per draw 1 it must come close (the claim is tight).
"""

import numpy as np
import pymc as pm
import pytest
from scipy.special import betaln, betainc

import pymc_dp


def _interval(n, eps_per_draw):
    with pm.Model() as model:
        xd = pm.Data("x", np.zeros(n, dtype=int))
        p = pm.Beta("p", 1, 1)
        pm.Bernoulli("obs", p=p, observed=xd)
    pmod = pymc_dp.make_private(model, epsilon=eps_per_draw, draws=1, data={"x": pymc_dp.Binary()})
    (c,) = pmod.certificate.factors[0].constraints
    return c["lower"], c["upper"], pmod.certificate.epsilon_per_draw


def _log_trunc_beta(theta, a, b, lo, hi):
    # log of the Beta(a, b) density restricted to [lo, hi], normalised by a log-space CDF difference
    log_norm = np.log(betainc(a, b, hi) - betainc(a, b, lo)) if betainc(a, b, lo) < 0.5 else np.log(
        betainc(b, a, 1 - lo) - betainc(b, a, 1 - hi)
    )
    return (a - 1) * np.log(theta) + (b - 1) * np.log1p(-theta) - betaln(a, b) - log_norm


def worst_log_ratio(n, lo, hi, grid=2001):
    theta = np.linspace(lo, hi, grid)
    worst = 0.0
    for k in range(n):  # neighbours: k and k + 1 ones
        a = _log_trunc_beta(theta, 1 + k, 1 + n - k, lo, hi)
        b = _log_trunc_beta(theta, 2 + k, n - k, lo, hi)
        worst = max(worst, float(np.max(np.abs(a - b))))
    return worst


@pytest.mark.parametrize("n, eps", [(1, 1.0), (5, 0.2), (20, 1.0), (50, 3.0), (200, 0.5)])
def test_claim_never_below_truth(n, eps):
    lo, hi, claimed = _interval(n, eps)
    assert claimed == pytest.approx(eps)
    assert worst_log_ratio(n, lo, hi) <= claimed + 1e-9


def test_claim_is_tight_at_large_n():
    lo, hi, claimed = _interval(300, 1.0)
    truth = worst_log_ratio(300, lo, hi)
    assert 0.9 * claimed <= truth <= claimed + 1e-9


def test_audit_catches_a_too_wide_truncation():
    lo, hi, claimed = _interval(300, 1.0)
    mid, half = 0.5 * (lo + hi), 0.5 * (hi - lo)
    wide = worst_log_ratio(300, mid - 1.1 * half, mid + 1.1 * half)
    assert wide > claimed
