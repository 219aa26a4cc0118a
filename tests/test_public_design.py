"""Issue 32's false certificate: a private outcome on a PUBLIC design matrix.

``b + X @ w`` with ``X`` public and ``w`` unbounded: BLAS's matmul of the interval ends gave
``0 * inf = NaN`` (a zero of ``max(X, 0)`` times ``w``'s infinite end), and the interval
evaluator's product of ends mapped every NaN to 0, so the NaN range of ``X @ w`` counted as
``[0, 0]`` in ``b + X @ w``. The box search then opened ``w``'s sides "at no cost" and certified
epsilon0 = 1 with only ``b`` truncated; the true epsilon is infinite. With 5 columns each element
has its own axis and most rows stayed infinite, which is why 5 columns were truncated correctly.

Ground truth, exact for each form, from the certified box in closed form (``b + X_i . w`` is
linear in each coordinate, so its range over the box is attained at the ends). What is claimed
depends on the certificate's ``bound``: ``"lipschitz"`` claims the per-record change at every
parameter, ``"oscillation"`` claims half the oscillation over the region of the change ``g`` one
record makes (docs/theory/oscillation.md). A Bernoulli factor with logit ``eta``: ``g = +-eta``,
so the change is ``|eta|`` and the oscillation the width of ``eta``'s range. A Normal factor
(sigma fixed, ``y`` in ``[-c, c]``): ``g = (y'^2 - y^2) / (2 sigma^2) - mu (y' - y) / sigma^2``,
so the oscillation is ``2c`` times the width of ``mu``'s range over ``sigma^2``. The certificate
must be >= the truth (and the truth finite).
"""

from __future__ import annotations

import math

import numpy as np
import pymc as pm
import pytensor.tensor as pt
import pytest

import pymc_dp
from pymc_dp.constraints import ElementIntervalConstraint, IntervalConstraint


def _box(cert, name: str, size: int, support=(-math.inf, math.inf)):
    """The certified interval of every element of free RV ``name`` (its support where unconstrained)."""
    lo, hi = np.full(size, support[0]), np.full(size, support[1])
    for c in cert.constraints:
        if c.var != name:
            continue
        if isinstance(c, IntervalConstraint):
            lo = np.maximum(lo, -math.inf if c.lower is None else c.lower)
            hi = np.minimum(hi, math.inf if c.upper is None else c.upper)
        elif isinstance(c, ElementIntervalConstraint):
            lo, hi = np.maximum(lo, np.asarray(c.lower)), np.minimum(hi, np.asarray(c.upper))
        else:  # pragma: no cover - a test written for boxes
            raise AssertionError(f"unexpected constraint {c!r}")
    return lo, hi


def _linear_range(X, b, w):
    """Exact (lo, hi) over the box of ``b + X_i . w`` per row (0 * inf = 0: a zero entry reads nothing)."""
    (blo, bhi), (wlo, whi) = b, w
    with np.errstate(invalid="ignore"):
        ends = np.stack([X * wlo, X * whi])
    ends = np.where(X[None] == 0.0, 0.0, ends)
    return blo + ends.min(axis=0).sum(axis=1), bhi + ends.max(axis=0).sum(axis=1)


def _predictor(form: str, Xd, w, b, d: int):
    if form == "pt.dot":
        return b + pt.dot(Xd, w)
    if form == "@":
        return Xd @ w + b
    return b + sum(Xd[:, j] * w[j] for j in range(d))  # column-wise, as written by hand


def _data(d: int, n: int = 120):
    rng = np.random.default_rng(0)
    return rng.normal(size=(n, d)), (rng.random(n) < 0.5).astype(int)


FORMS = ["pt.dot", "@", "columns"]


def _cases():
    for d in (1, 5, 20, 200):
        for form in FORMS:
            if form == "columns" and d == 200:
                continue  # 200 hand-written terms: the same graph as 20, ten times longer to build
            yield pytest.param(d, form, id=f"{form}-{d}")


@pytest.mark.parametrize("d, form", list(_cases()))
def test_logistic_on_a_public_design_truncates_w(d, form):
    X, y = _data(d)
    with pm.Model() as m:
        Xd, yd = pm.Data("X", X), pm.Data("y", y)
        w = pm.Normal("w", 0, 1, shape=d)
        b = pm.Normal("b", 0, 1)
        pm.Bernoulli("obs", logit_p=_predictor(form, Xd, w, b, d), observed=yd)
    cert = pymc_dp.certify(m, epsilon=10.0, draws=10, data={"y": pymc_dp.Binary()}, public=["X"])
    assert any(c.var == "w" for c in cert.constraints), "w unbounded: the flip of one outcome is unbounded"
    lo, hi = _linear_range(X, _box(cert, "b", 1), _box(cert, "w", d))
    _check_bernoulli(cert, lo, hi)


def _check_bernoulli(cert, lo, hi):
    factor = cert.certificate.factors[0]
    if factor.bound == "oscillation":
        truth = 0.5 * float(np.max(hi - lo))
    else:
        truth = float(np.max(np.maximum(np.abs(lo), np.abs(hi))))  # |log p(1) - log p(0)| = |eta|
    assert math.isfinite(truth)
    assert truth <= factor.lipschitz * (1 + 1e-9)


def test_normal_regression_on_a_public_24_column_design():
    """The issue's third form: a Normal regression, sigma fixed, a private bounded outcome."""
    d, sigma = 24, 1.0
    X, _ = _data(d)
    y = np.clip(np.random.default_rng(1).normal(size=len(X)), -3, 3)
    with pm.Model() as m:
        Xd, yd = pm.Data("X", X), pm.Data("y", y)
        w = pm.Normal("w", 0, 1, shape=d)
        b = pm.Normal("b", 0, 1)
        pm.Normal("obs", b + pt.dot(Xd, w), sigma, observed=yd)
    cert = pymc_dp.certify(m, epsilon=10.0, draws=10, data={"y": pymc_dp.Interval(-3, 3)}, public=["X"])
    assert any(c.var == "w" for c in cert.constraints)
    lo, hi = _linear_range(X, _box(cert, "b", 1), _box(cert, "w", d))
    factor = cert.certificate.factors[0]
    if factor.bound == "oscillation":
        truth = 0.5 * 6.0 * float(np.max(hi - lo)) / sigma**2
    else:  # sup over y, y' in [-3, 3] of |(y - mu)^2 - (y' - mu)^2| / 2: y, y' at the ends or at mu
        mu = np.concatenate([lo, hi])
        far = np.maximum((3 - mu) ** 2, (-3 - mu) ** 2)
        near = np.where(np.abs(mu) <= 3, 0.0, np.minimum((3 - mu) ** 2, (-3 - mu) ** 2))
        truth = float(np.max(far - near)) / (2 * sigma**2)
    assert math.isfinite(truth) and truth <= factor.lipschitz * (1 + 1e-9)


@pytest.mark.parametrize("d", [5, 20])
def test_scale_mixture_prior_on_a_public_design(d):
    """``w = z * tau`` (a global scale), the horseshoe's shape without its local scales; and
    ``w = z * tau * lam`` with local scales: every scale that multiplies an unbounded ``z`` is
    truncated, and the certificate covers the exact sup over the box."""
    X, y = _data(d)
    with pm.Model() as m:
        Xd, yd = pm.Data("X", X), pm.Data("y", y)
        z = pm.Normal("z", 0, 1, shape=d)
        tau = pm.HalfNormal("tau", 1.0)
        lam = pm.HalfCauchy("lam", 1.0, shape=d)
        b = pm.Normal("b", 0, 1)
        w = pm.Deterministic("w", z * tau * lam)
        pm.Bernoulli("obs", logit_p=b + pt.dot(Xd, w), observed=yd)
    cert = pymc_dp.certify(m, epsilon=10.0, draws=10, data={"y": pymc_dp.Binary()}, public=["X"])
    zlo, zhi = _box(cert, "z", d)
    tlo, thi = _box(cert, "tau", 1, (0.0, math.inf))
    llo, lhi = _box(cert, "lam", d, (0.0, math.inf))
    # for a fixed tau, w_j = tau * (z_j lam_j) ranges over tau times the interval product; linear in tau
    with np.errstate(invalid="ignore"):
        ends = np.stack([zlo * llo, zlo * lhi, zhi * llo, zhi * lhi])
    ends = np.where(np.isnan(ends), 0.0, ends)  # 0 * inf: an element pinned at 0
    plo, phi = ends.min(axis=0), ends.max(axis=0)
    # the range of eta over the box: the hull of its ranges at the two ends of tau
    ranges = []
    for t in (tlo[0], thi[0]):
        with np.errstate(invalid="ignore"):
            wlo, whi = np.where(t == 0, 0.0, t * plo), np.where(t == 0, 0.0, t * phi)
        ranges.append(_linear_range(X, _box(cert, "b", 1), (wlo, whi)))
    lo = np.minimum(ranges[0][0], ranges[1][0])
    hi = np.maximum(ranges[0][1], ranges[1][1])
    _check_bernoulli(cert, lo, hi)


@pytest.mark.parametrize("family", ["poisson", "bernoulli"])
def test_bounds_on_a_public_design_are_charged_by_their_width_not_their_place(family):
    """A count or binary GLM on a public design, private outcome, under ``bounds=``: one record's
    change is ``g = eta_i(theta) (y - y')``, so the exact per-draw loss over the box is
    ``span(y) x max_i (width of eta_i over the box)`` (the oscillation; eta is linear in the box,
    its range exact). The certificate states that, up to rounding, and not the place-dependent
    ``2 L`` (which grows with the box's distance from 0)."""
    rng = np.random.default_rng(3)
    n, k = 40, 3
    X = rng.uniform(-1, 1, size=(n, k))
    with pm.Model() as model:
        Xd = pm.Data("X", X)
        if family == "poisson":
            yd = pm.Data("y", rng.integers(0, 10, n))
        else:
            yd = pm.Data("y", rng.integers(0, 2, n))
        b = pm.Normal("b", 0, 1)
        w = pm.Normal("w", 0, 1, shape=k)
        eta = b + pt.dot(Xd, w)
        if family == "poisson":
            pm.Poisson("obs", mu=pm.math.exp(eta), observed=yd)
        else:
            pm.Bernoulli("obs", logit_p=eta, observed=yd)
    span = 9.0 if family == "poisson" else 1.0
    domain = pymc_dp.Integers(0, 9) if family == "poisson" else pymc_dp.Binary()
    for centre in (0.0, 1.5):
        bounds = {"b": (centre - 0.1, centre + 0.1), "w": (centre - 0.05, centre + 0.05)}
        cert = pymc_dp.make_private(model, draws=1, bounds=bounds, data={"y": domain}, public=["X"],
                                    ledger=None).certificate
        exact = span * float(np.max(0.2 + np.abs(X).sum(axis=1) * 0.1))
        if centre:  # at 0 the Bernoulli's 2 L equals the oscillation (a symmetric logit window)
            assert cert.factors[0].bound == "oscillation"
        assert cert.epsilon_per_draw >= exact * (1 - 1e-9)
        assert cert.epsilon_per_draw == pytest.approx(exact, rel=1e-6)
