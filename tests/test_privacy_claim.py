"""Exact audit of the Beta-Bernoulli claim against closed-form truncated posteriors.

For the truncation the certificate reports, the posterior given k ones out of n is a Beta(1+k,
1+n-k) restricted to ``[lo, hi]``. Replace-one neighbours have counts k and k+1. The sup over
theta of the log-ratio of the two truncated posterior densities must never exceed the claimed
per-draw epsilon, and at n >= 200 with epsilon per draw 1 it must come close (the claim is tight).
"""

import numpy as np
import pymc as pm
import pytest
from scipy.special import betainc, betaln

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


# --------------------------------------------------------------------------- naive Bayes
def _nb_truncation(n, m, unit, eps):
    rng = np.random.default_rng(1)
    with pm.Model() as model:
        Xd = pm.Data("X", rng.integers(0, 2, (n, m)))
        yd = pm.Data("y", rng.integers(0, 2, n))
        pi = pm.Beta("pi", 1, 1)
        pm.Bernoulli("cls", p=pi, observed=yd)
        theta = pm.Beta("theta", 1, 1, shape=(2, m))
        pm.Bernoulli("feat", p=theta[yd], observed=Xd)
    cert = pymc_dp.make_private(
        model, epsilon=eps, draws=1, data={"X": pymc_dp.Binary(), "y": pymc_dp.Binary()}, unit=unit
    ).certificate
    box = {c["var"]: (c["lower"], c["upper"]) for f in cert.factors for c in f.constraints}
    return box, cert.epsilon_per_draw


def _nb_log_posterior_terms(X, y, box, grid):
    """Per-parameter log densities of the factorised truncated posterior on grids."""
    lo, hi = box["pi"]
    t = np.linspace(lo, hi, grid)
    k = int(y.sum())
    terms = [_log_trunc_beta(t, 1 + k, 1 + len(y) - k, lo, hi)]
    lo, hi = box["theta"]
    t = np.linspace(lo, hi, grid)
    for c in (0, 1):
        rows = X[y == c]
        for j in range(X.shape[1]):
            ones = int(rows[:, j].sum())
            terms.append(_log_trunc_beta(t, 1 + ones, 1 + len(rows) - ones, lo, hi))
    return terms


@pytest.mark.parametrize("unit", ["record", "attribute"])
def test_naive_bayes_claim_never_below_truth(unit):
    n, m = 6, 3
    box, claimed = _nb_truncation(n, m, unit, eps=2.0)
    rng = np.random.default_rng(7)
    records = [(c, np.array(bits)) for c in (0, 1) for bits in np.ndindex(*(2,) * m)]
    worst = 0.0
    for _ in range(4):  # base datasets
        X = rng.integers(0, 2, (n, m))
        y = rng.integers(0, 2, n)
        base = _nb_log_posterior_terms(X, y, box, 401)
        for i in range(n):
            for c, bits in records:
                if unit == "attribute" and not (c == y[i] or np.array_equal(bits, X[i])):
                    continue  # attribute unit: only the label or only the feature row changes
                X2, y2 = X.copy(), y.copy()
                X2[i], y2[i] = bits, c
                other = _nb_log_posterior_terms(X2, y2, box, 401)
                # the posterior factorises, so the sup of the log-ratio is the sum of per-term sups
                worst = max(worst, sum(float(np.max(np.abs(a - b))) for a, b in zip(base, other)))
    assert worst <= claimed + 1e-9
    assert worst > 0.2 * claimed  # the audit sees a real change
