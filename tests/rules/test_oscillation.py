"""Brute force: the closed-form oscillation of each one-parameter exponential family.

Ground truth from PyMC's own ``logp``: over a grid of the free parameter in ``[lo, hi]`` (ends
included) and over every record ``x`` of the domain (integers enumerated; intervals on a grid
with their ends and T's interior extreme), ``sup over (x, x') of [max_theta g - min_theta g]``
with ``g = logp(x) - logp(x')``. The rule must never be below it (sound) and must equal it to
``1e-9`` relative: ``g`` is linear in ``eta``, so the extremes sit at the grid's ends and at the
ends of ``T``'s range, which the grids contain (tight).
"""

from __future__ import annotations

import numpy as np
import pymc as pm
import pytest

from pymc_dp.domains import Binary, Integers, Interval
from pymc_dp.rules.oscillation import (
    LaplaceLocation,
    has_region_oscillation,
    natural_parameter,
    normal_predictor_oscillation,
    oscillation,
)

#: label -> (dist factory of theta, domain, free index, fixed params, [lo, hi], records grid)
CASES = {
    "Bernoulli p": (lambda t: pm.Bernoulli.dist(p=t), Binary(), 0, (None,), (0.2, 0.7), None),
    "Binomial p": (lambda t: pm.Binomial.dist(n=5, p=t), Integers(0, 5), 1, (5, None), (0.3, 0.6), None),
    "Binomial p (inner domain)": (lambda t: pm.Binomial.dist(n=5, p=t), Integers(1, 4), 1, (5, None), (0.1, 0.9), None),
    "Poisson mu": (lambda t: pm.Poisson.dist(mu=t), Integers(0, 10), 0, (None,), (2.0, 5.0), None),
    "Geometric p": (lambda t: pm.Geometric.dist(p=t), Integers(1, 8), 0, (None,), (0.2, 0.5), None),
    "Exponential scale": (lambda t: pm.Exponential.dist(scale=t), Interval(0.5, 4.0), 0, (None,), (0.5, 2.0), None),
    "Normal mu": (lambda t: pm.Normal.dist(mu=t, sigma=0.7), Interval(-1.0, 2.0), 0, (None, 0.7), (-0.3, 0.9), None),
    "Normal sigma (mu inside)": (lambda t: pm.Normal.dist(mu=0.5, sigma=t), Interval(-1.0, 2.0), 1, (0.5, None), (0.5, 1.5), [0.5]),
    "Normal sigma (mu outside)": (lambda t: pm.Normal.dist(mu=3.0, sigma=t), Interval(-1.0, 2.0), 1, (3.0, None), (0.5, 1.5), None),
    "LogNormal mu": (lambda t: pm.LogNormal.dist(mu=t, sigma=0.8), Interval(0.5, 5.0), 0, (None, 0.8), (0.0, 1.0), None),
    "Gamma scale": (lambda t: pm.Gamma.dist(alpha=2.5, beta=1.0 / t), Interval(0.2, 6.0), 1, (2.5, None), (0.5, 2.0), None),
    "Gamma shape": (lambda t: pm.Gamma.dist(alpha=t, beta=1.0 / 1.5), Interval(0.2, 6.0), 0, (None, 1.5), (1.0, 3.0), None),
    "Beta alpha": (lambda t: pm.Beta.dist(alpha=t, beta=2.0), Interval(0.1, 0.9), 0, (None, 2.0), (1.0, 4.0), None),
    "Beta beta": (lambda t: pm.Beta.dist(alpha=2.0, beta=t), Interval(0.1, 0.9), 1, (2.0, None), (1.0, 4.0), None),
}


def _records(domain, extra):
    if isinstance(domain, Integers):
        return np.arange(domain.lo, domain.hi + 1)
    grid = np.linspace(domain.lo, domain.hi, 201)
    return np.sort(np.concatenate([grid, np.asarray(extra or [], float)]))


def _brute(dist_of, domain, interval, extra):
    theta = np.linspace(*interval, 401)
    x = _records(domain, extra)
    dist = dist_of(theta[:, None])
    logp = np.asarray(pm.logp(dist, x[None, :].astype(dist.dtype)).eval(), float)  # (theta, x)
    g = logp[:, :, None] - logp[:, None, :]  # (theta, x, x')
    return float(np.max(g.max(axis=0) - g.min(axis=0)))


@pytest.mark.parametrize("label", sorted(CASES))
def test_closed_form_oscillation_is_the_brute_force_supremum(label):
    dist_of, domain, free, fixed, interval, extra = CASES[label]
    op = dist_of(np.float64(interval[0])).owner.op
    natural = natural_parameter(op, domain, tuple(None if p is None else np.asarray(p, float) for p in fixed), free)
    assert natural is not None, label
    claimed = float(oscillation(natural, *interval))
    truth = _brute(dist_of, domain, interval, extra)
    assert claimed >= truth - 1e-9, (label, claimed, truth)
    assert claimed == pytest.approx(truth, rel=1e-9), (label, claimed, truth)


def test_oscillation_is_at_most_twice_the_lipschitz_constant_and_equal_for_a_symmetric_logit():
    """Bernoulli on ``logit p in [-L, L]``: oscillation ``2L``, the old certificate; the same width
    elsewhere costs the same."""
    op = pm.Bernoulli.dist(p=0.5).owner.op
    natural = natural_parameter(op, Binary(), (None,), 0)
    sig = lambda t: 1.0 / (1.0 + np.exp(-t))  # noqa: E731
    assert float(oscillation(natural, sig(-0.7), sig(0.7))) == pytest.approx(1.4)
    assert float(oscillation(natural, sig(1.3), sig(2.7))) == pytest.approx(1.4)


def test_an_unbounded_natural_parameter_has_infinite_oscillation():
    op = pm.Poisson.dist(mu=1.0).owner.op
    natural = natural_parameter(op, Integers(0, 5), (None,), 0)
    assert float(oscillation(natural, 0.0, 2.0)) == np.inf  # ln mu -> -inf at 0
    assert float(oscillation(natural, 1.0, 1.0)) == 0.0


def test_families_without_a_closed_form_return_none():
    op = pm.StudentT.dist(nu=3, mu=0.0, sigma=1.0).owner.op
    assert natural_parameter(op, Interval(-1, 1), (3.0, 0.0, None), 2) is None  # the scale free
    op = pm.Laplace.dist(mu=0.0, b=1.0).owner.op
    assert natural_parameter(op, Interval(-1, 1), (0.0, None), 1) is None  # the scale free


@pytest.mark.parametrize("interval", [(-0.3, 0.4), (-2.0, 0.5), (1.5, 3.0), (-3.0, 3.0), (0.7, 1.6)])
def test_laplace_location_oscillation_is_the_brute_force_supremum(interval):
    """The Laplace location's closed form, 2 |[lo, hi] ∩ [a, b]| / s, against brute force over a
    201-record grid and a 401-point grid of the location: equal (the grids hold the domain's ends
    and the interval's), including intervals beyond the domain (constant g: 0 outside)."""
    op = pm.Laplace.dist(mu=0.0, b=0.5).owner.op
    natural = natural_parameter(op, Interval(-1.0, 1.0), (None, np.asarray(0.5)), 0)
    assert isinstance(natural, LaplaceLocation)
    claimed = float(oscillation(natural, *interval))
    truth = _brute(lambda t: pm.Laplace.dist(mu=t, b=0.5), Interval(-1.0, 1.0), interval, None)
    assert claimed >= truth - 1e-9
    assert claimed == pytest.approx(truth, rel=1e-9, abs=1e-12)


# ---------------------------------------------------------------- the Normal linear predictor
NORMAL_PREDICTOR = [  # (y_lo, y_hi, eta_lo, eta_hi, sigma)
    (-1.0, 1.0, -0.3, 0.3, 0.5),  # a predictor narrower than the data: 4cH / sigma^2
    (-1.0, 1.0, -1.5, 1.5, 1.0),  # wider: (c + H)^2 / sigma^2, the 2L value
    (0.0, 2.0, -0.5, 0.8, 0.7),  # off-centre
    (-1.0, 1.0, 1.5, 2.5, 1.0),  # beyond the data
]


@pytest.mark.parametrize("case", NORMAL_PREDICTOR)
@pytest.mark.parametrize("scale_free", [False, True])
def test_the_normal_predictor_oscillation_is_the_relaxed_brute_force_supremum(case, scale_free):
    """Over a grid of the two records' outcomes and of the four predictor values (two records at
    two parameters, free in the interval: the bound's relaxation) and, for a free scale, of the
    two parameters' scales: the sup of ``g(theta1) - g(theta2)`` equals the closed form (each grid
    holds both intervals' ends that lie in it, where the extremes are)."""
    y_lo, y_hi, e_lo, e_hi, sigma = case
    y = np.unique(np.concatenate([np.linspace(y_lo, y_hi, 9), np.clip([e_lo, e_hi], y_lo, y_hi)]))
    eta = np.unique(np.concatenate([np.linspace(e_lo, e_hi, 9), np.clip([y_lo, y_hi], e_lo, e_hi)]))
    scales = sigma * np.array([1.0, 1.5, 4.0, 1e6]) if scale_free else np.array([sigma])
    Y, Yp, E1, E1p = np.meshgrid(y, y, eta, eta, indexing="ij")
    best = 0.0
    for s1 in scales:
        g1 = ((Yp - E1p) ** 2 - (Y - E1) ** 2) / (2 * s1**2)  # g at theta1, per (y, y', eta, eta')
        top = g1.reshape(y.size, y.size, -1).max(axis=2)  # sup over theta1's predictors
        for s2 in scales:
            g2 = ((Yp - E1p) ** 2 - (Y - E1) ** 2) / (2 * s2**2)
            bottom = g2.reshape(y.size, y.size, -1).min(axis=2)
            best = max(best, float((top - bottom).max()))
    claimed = normal_predictor_oscillation(y_lo, y_hi, e_lo, e_hi, sigma, scale_free)
    assert claimed >= best
    assert claimed == pytest.approx(best, rel=1e-9)


@pytest.mark.parametrize("scale_free", [False, True])
def test_the_normal_predictor_oscillation_bounds_a_regression_and_is_attained(scale_free):
    """A linear regression with an intercept, ``eta = w x + b``, ``x, y`` in ``[-1, 1]``,
    ``|w| <= 0.2``, ``|b| <= 0.15`` (so ``eta`` spans ``[-0.35, 0.35]``): the sup over record
    pairs of ``max - min`` over a parameter grid is at most the closed form and attains it (two
    records with the same ``x``, outcomes at the domain's two ends)."""
    R, B, sigma = 0.2, 0.15, 0.5
    x = np.linspace(-1.0, 1.0, 9)
    y = np.linspace(-1.0, 1.0, 9)
    w, b = np.meshgrid(np.linspace(-R, R, 9), np.linspace(-B, B, 9), indexing="ij")
    scales = sigma * np.array([1.0, 1.5, 4.0, 1e6]) if scale_free else np.array([sigma])
    theta_eta = (w.reshape(-1, 1) * x[None, :] + b.reshape(-1, 1))  # (theta, x)
    resid = y[None, None, :] - theta_eta[:, :, None]  # (theta, x, y)
    sq = resid.reshape(theta_eta.shape[0], -1) ** 2  # (theta, record)
    best = 0.0
    for s1 in scales:
        for s2 in scales:
            # g(theta) = (r'^2 - r^2) / (2 s^2) for records (r: first, r': second)
            g1 = (sq[:, None, :] - sq[:, :, None]) / (2 * s1**2)  # (theta, record, record')
            g2 = (sq[:, None, :] - sq[:, :, None]) / (2 * s2**2)
            best = max(best, float((g1.max(axis=0) - g2.min(axis=0)).max()))
    claimed = normal_predictor_oscillation(-1.0, 1.0, -(R + B), R + B, sigma, scale_free)
    assert best <= claimed
    assert best >= 0.999 * claimed


def test_which_families_register_a_region_oscillation():
    """The box solver asks this before it searches with the oscillation: the Normal (its own
    rule, windows included) and every family with a closed-form natural parameter (over Spans);
    a family without one does not."""
    assert has_region_oscillation(pm.Normal.dist(0, 1).owner.op)
    assert has_region_oscillation(pm.Poisson.dist(1).owner.op)
    assert has_region_oscillation(pm.StudentT.dist(nu=3, mu=0, sigma=1).owner.op)
    assert not has_region_oscillation(pm.NegativeBinomial.dist(mu=1.0, alpha=2.0).owner.op)


@pytest.mark.parametrize("label", [k for k in CASES if not k.startswith("Normal")])
def test_region_half_oscillation_of_a_span_is_half_the_brute_force(label):
    """Over a region where the one varying parameter is a Span (it reads no private data, e.g. a
    GLM mean over a *public* design) the factor's half oscillation stands in for its constant in
    the box search and ``bounds=``: twice it equals the brute-force oscillation (sound and tight),
    element by element."""
    from pymc_dp.rules.oscillation import region_half_oscillation
    from pymc_dp.rules.region import Span

    dist_of, domain, free, fixed, interval, extra = CASES[label]
    op = dist_of(np.float64(np.mean(interval))).owner.op
    params = tuple(Span(np.asarray(interval[0]), np.asarray(interval[1])) if j == free
                   else Span(np.asarray(float(v)), np.asarray(float(v))) for j, v in enumerate(fixed))
    half = region_half_oscillation(op, domain, params)
    assert half is not None
    brute = _brute(dist_of, domain, interval, extra)
    assert 2 * float(half) >= brute * (1 - 1e-9)
    assert 2 * float(half) == pytest.approx(brute, rel=1e-6)
    # elementwise: two elements with different spans, each its own oscillation
    lo, hi = interval
    mid = lo + 0.5 * (hi - lo)
    vector = tuple(Span(np.array([lo, mid]), np.array([mid, hi])) if j == free
                   else Span(np.full(2, float(v)), np.full(2, float(v))) for j, v in enumerate(fixed))
    per_element = region_half_oscillation(op, domain, vector)
    assert per_element.shape == (2,)
    assert 2 * per_element[0] == pytest.approx(_brute(dist_of, domain, (lo, mid), extra), rel=1e-6)
    assert 2 * per_element[1] == pytest.approx(_brute(dist_of, domain, (mid, hi), extra), rel=1e-6)


def test_region_half_oscillation_of_spans_refuses_what_it_cannot_bound():
    """Two varying parameters, or a parameter that reads the record (a Window): None (the
    constant stands). No varying parameter: the change is the same at every point, oscillation 0."""
    from pymc_dp.rules.oscillation import region_half_oscillation
    from pymc_dp.rules.region import Span, Window

    gamma = pm.Gamma.dist(alpha=2.0, beta=1.0).owner.op
    both = (Span(np.asarray(1.0), np.asarray(2.0)), Span(np.asarray(0.5), np.asarray(1.0)))
    assert region_half_oscillation(gamma, Interval(0.2, 6.0), both) is None
    poisson = pm.Poisson.dist(mu=1.0).owner.op
    window = (Window(np.asarray(0.0), np.asarray(1.0), np.asarray(0.5), "log"),)
    assert region_half_oscillation(poisson, Integers(0, 10), window) is None
    point = (Span(np.full(3, 2.0), np.full(3, 2.0)),)
    np.testing.assert_array_equal(region_half_oscillation(poisson, Integers(0, 10), point), np.zeros(3))


def test_the_oscillation_covers_the_models_float_error_near_a_probability_of_one():
    """Campaign seed 1000622 (tests/fuzz/FOUND.md #10): a Bernoulli ``p = sigmoid(intercept)`` on
    ``intercept in [-1.795, 29.704]``. The exact oscillation is the logit's width, 31.4994; PyMC
    computes ``ln(1 - p)`` from the rounded ``p`` and measures 31.50004, above a claim of 31.5 (the
    refutation check caught it). The rule now adds the float error at the region's ends: it bounds
    what PyMC computes."""
    import pytensor.tensor as pt

    eta = np.array([-1.7949832821440865, 29.70445176944858])
    p = 1.0 / (1.0 + np.exp(-eta))
    natural = natural_parameter(pm.Bernoulli.dist(p=0.5).owner.op, Binary(), (None,), 0)
    claimed = float(oscillation(natural, p[0], p[1]))
    grid = pm.math.sigmoid(pt.as_tensor(np.linspace(*eta, 2001)))
    g = (pm.logp(pm.Bernoulli.dist(p=grid), np.ones(2001)) - pm.logp(pm.Bernoulli.dist(p=grid), np.zeros(2001))).eval()
    computed = float(g.max() - g.min())
    assert computed > eta[1] - eta[0]  # the float error is real
    assert claimed >= computed
    # the margin: twice the error bound at the end near 1 (16 ulps of p, relative: generous, since
    # PyTensor's and NumPy's sigmoids round differently), still under 0.2% of the claim
    assert claimed - (eta[1] - eta[0]) >= 2 * 16 * np.finfo(float).eps * p[1] / (1 - p[1])
    assert claimed <= 1.002 * computed


def test_campaign_seed_1000622_is_certified_and_kept_by_the_thorough_check():
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
    from tests.fuzz.harness import run_one

    result = run_one(1000622)
    assert result.status == "certified" and not result.problems, result.problems


def test_a_probability_saturated_in_floats_is_not_a_constant_parameter():
    """FOUND.md #12: the interval evaluator's Span of p = sigmoid(eta) is [0, 0] for every eta below
    -745, while PyMC computes the Binomial's logp from the logit and it still varies: the
    oscillation is infinite there (it read 0, from logit(0) - logit(0) taken as a point)."""
    from pytensor.tensor.random.basic import BinomialRV

    natural = natural_parameter(BinomialRV(), Integers(0, 10), (np.asarray(10.0), None), 1)
    out = oscillation(natural, np.array([0.0, 1.0, 0.3]), np.array([0.0, 1.0, 0.3]))
    assert np.isinf(out[0]) and np.isinf(out[1]) and out[2] == 0.0


def test_wide_scale_seed_134_is_refused_not_refuted():
    """FOUND.md #12 end to end: a Binomial logit on a public design scaled by 1000 (weights near -2
    give eta ~ -3000) was certified with half the oscillation 0.00755 and refuted (3052)."""
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
    from tests.fuzz.harness import run_one

    result = run_one(134, profile="wide_scale")
    assert result.status in ("certified", "refused") and not result.problems, (result.status, result.problems)
