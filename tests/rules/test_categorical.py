"""Brute-force tests of the Categorical rule in its four spaces, its region rule and the graph
recognisers (``pymc_dp/rules/categorical.py``, derivations in ``docs/rules/categorical.md``).

Ground truth is PyMC's own log-probability, compiled once with symbolic inputs:
``pm.logp(pm.Categorical.dist(p=pm.math.softmax(eta)), y)``,
``pm.logp(pm.OrderedLogistic.dist(eta, cutpoints), y)`` and
``pm.logp(pm.OrderedProbit.dist(eta, cutpoints, sigma), y)``, evaluated on grids of records
(predictor values in the window, zoomed around the extremes, times the classes of the domain).

PyMC's ``OrderedProbit`` computes ``ln Phi`` with a float32 ``sqrt(2.0)`` constant
(``pymc.distributions.dist_math``), so its log-probabilities are off by up to ~2e-7; probit
comparisons with PyMC use a 2e-6 tolerance, and :func:`test_probit_class_logp_matches_mpmath`
checks the rule's own values against 40-digit ``mpmath`` to 1e-12.
"""

from __future__ import annotations

import functools
import itertools
import math

import mpmath as mp
import numpy as np
import pymc as pm
import pytensor
import pytensor.tensor as pt
import pytest
from pytensor.compile.mode import Mode
from pytensor.tensor.random.basic import CategoricalRV

import pymc_dp
from pymc_dp.domains import Integers, Interval
from pymc_dp.exceptions import DomainError, UnsupportedFactorError
from pymc_dp.rules import (
    NP,
    PT,
    Bounds,
    Span,
    Window,
    element_lipschitz,
    log_density_range,
    region_lipschitz,
    region_spec,
    rule_info,
)
from pymc_dp.rules import categorical as cat
from pymc_dp.rules.region import NoRegionRule
from tests.rules.test_rules import assert_exact, brute_range, op_of, pymc_logp

OP = op_of("Categorical")
# PyTensor graphs of the rules are checked with Python implementations and no rewrites: the
# values are those of the graph as built, and nothing is compiled to C (seconds, not minutes)
PY_MODE = Mode(linker="py", optimizer=None)
LOGIT, PROBIT = "ordered-logistic", "ordered-probit"


# --------------------------------------------------------------------------- PyMC ground truth
@functools.lru_cache(maxsize=None)
def _softmax_fn():
    eta, y = pt.dmatrix("eta"), pt.lvector("y")
    return pytensor.function([eta, y], pm.logp(pm.Categorical.dist(p=pm.math.softmax(eta, axis=-1)), y))


def softmax_logp(eta, y):
    """``pm.logp(Categorical(softmax(eta)), y)``, ``eta`` (..., K) broadcast against ``y``."""
    eta, y = np.asarray(eta, float), np.asarray(y)
    shape = np.broadcast_shapes(eta.shape[:-1], y.shape)
    E = np.broadcast_to(eta, shape + eta.shape[-1:]).reshape(-1, eta.shape[-1])
    return _softmax_fn()(E, np.broadcast_to(y, shape).ravel().astype("int64")).reshape(shape)


@functools.lru_cache(maxsize=None)
def _ordered_fn(kind):
    eta, cut, sig, y = pt.dvector("eta"), pt.dmatrix("cut"), pt.dvector("sigma"), pt.lvector("y")
    if kind == LOGIT:
        return pytensor.function([eta, cut, sig, y], pm.logp(pm.OrderedLogistic.dist(eta=eta, cutpoints=cut), y), on_unused_input="ignore")
    return pytensor.function([eta, cut, sig, y], pm.logp(pm.OrderedProbit.dist(eta=eta, cutpoints=cut, sigma=sig), y))


def ordered_logp(kind, eta, y, cut, sigma=1.0):
    """PyMC's ordinal log-probability; ``cut`` (..., K-1) broadcast against ``eta`` and ``y``."""
    eta, y, cut, sigma = np.asarray(eta, float), np.asarray(y), np.asarray(cut, float), np.asarray(sigma, float)
    shape = np.broadcast_shapes(eta.shape, y.shape, cut.shape[:-1], sigma.shape)
    flat = lambda a: np.broadcast_to(a, shape).ravel()  # noqa: E731
    C = np.broadcast_to(cut, shape + cut.shape[-1:]).reshape(-1, cut.shape[-1])
    out = _ordered_fn(kind)(flat(eta), C, flat(sigma), flat(y).astype("int64"))
    return out.reshape(shape)


def assert_close_range(rule, brute, tol, label=""):
    """As :func:`assert_exact`, with an absolute tolerance for a ground truth known to ``tol``."""
    (r_lo, r_hi), (b_lo, b_hi) = (float(rule[0]), float(rule[1])), brute
    t = tol * (1 + abs(b_lo) + abs(b_hi))
    assert r_lo <= b_lo + t and r_hi >= b_hi - t, f"{label}: rule {rule} narrower than {brute}"
    assert r_lo == pytest.approx(b_lo, abs=t, rel=0) and r_hi == pytest.approx(b_hi, abs=t, rel=0), label


def ordinal_bounds(kind, lo, hi, cut_lo, cut_hi=None, sigma=None):
    cut_hi = cut_lo if cut_hi is None else cut_hi
    extra = (cut_lo, cut_hi) if kind == LOGIT else (cut_lo, cut_hi, sigma, sigma)
    return Bounds(lo, hi, kind, extra)


def pair_window(b, W, R):
    """Softmax-space Bounds of ``eta = z @ W + b`` over ``||z||_2 <= R``: the exact range of
    every difference, ``(b_k - b_j) +- R ||w_k - w_j||``."""
    W = np.atleast_2d(W)
    diff = b[:, None] - b[None, :]
    norm = np.linalg.norm(W[:, :, None] - W[:, None, :], axis=0)
    return Bounds(diff - R * norm, diff + R * norm, "softmax")


# --------------------------------------------------------------------------- wiring
def test_rule_registered_by_this_module():
    info = rule_info(OP)
    assert (info.family, info.param_names, info.range_params) == ("Categorical", ("p",), frozenset({"p"}))
    assert log_density_range.dispatch(CategoricalRV) is cat.categorical_range
    assert element_lipschitz.dispatch(CategoricalRV) is cat.categorical_lipschitz
    assert region_spec(OP).custom is cat.categorical_region


# --------------------------------------------------------------------------- natural space
_P5 = np.array([0.05, 0.15, 0.4, 0.3, 0.1])


@pytest.mark.parametrize("domain", [Integers(0, 4), Integers(1, 3), Integers(2, 2)], ids=str)
def test_natural_point_exact(domain):
    rule = log_density_range(OP, domain, (Bounds.point(_P5),), NP)
    brute = brute_range(lambda x: pymc_logp("Categorical", x, p=_P5), [("d", np.arange(domain.lo, domain.hi + 1))])
    assert_exact(rule, brute, label="natural")


def test_natural_rows_and_pt():
    table = np.array([[0.1, 0.2, 0.3, 0.4], [0.25, 0.25, 0.25, 0.25], [0.7, 0.05, 0.15, 0.1]])
    p = Bounds(table.min(0), table.max(0))
    rule = log_density_range(OP, Integers(0, 3), (p,), NP)
    vals = pymc_logp("Categorical", np.arange(4)[None, :], p=table[:, None, :])
    assert_exact(rule, (vals.min(), vals.max()), label="rows")
    t_lo, t_hi = log_density_range(OP, Integers(0, 3), (Bounds(pt.as_tensor(table.min(0)), pt.as_tensor(table.max(0))),), PT)
    t_lo, t_hi = pytensor.function([], [t_lo, t_hi], mode=PY_MODE)()
    assert float(t_lo) == pytest.approx(float(rule[0]), rel=1e-14)
    assert float(t_hi) == pytest.approx(float(rule[1]), rel=1e-14)


def test_natural_span_region_is_hull():
    rng = np.random.default_rng(3)
    ps = rng.dirichlet(np.full(4, 5.0), size=400)
    region = region_lipschitz(OP, Integers(0, 3), (Span(ps.min(0), ps.max(0)),))
    L = np.log(ps.max(1) / ps.min(1))
    assert np.all(L <= region + 1e-12)
    assert float(region) == pytest.approx(math.log(ps.max() / ps.min()), rel=1e-14)


# --------------------------------------------------------------------------- softmax: per draw
@pytest.mark.parametrize(
    "eta, domain",
    [
        (np.array([0.3, -1.2, 2.0]), Integers(0, 2)),
        (np.array([0.3, -1.2, 2.0]), Integers(0, 1)),
        (np.array([5.0, -4.0, 0.0, 1.5, 30.0]), Integers(0, 4)),
        (np.array([5.0, -4.0, 0.0, 1.5, 30.0]), Integers(1, 3)),
        (np.zeros(4), Integers(0, 3)),  # uniform: L = 0
    ],
    ids=["K3", "K3-classes0..1", "K5", "K5-classes1..3", "uniform"],
)
def test_softmax_point_exact(eta, domain):
    """``eta`` reads no private data: a point (``lo is hi``) of the difference matrix."""
    p = Bounds.point(eta[:, None] - eta[None, :], "softmax")
    rule = log_density_range(OP, domain, (p,), NP)
    brute = brute_range(lambda y: softmax_logp(eta, y), [("d", np.arange(domain.lo, domain.hi + 1))])
    assert_exact(rule, brute, label="softmax point")


@pytest.mark.parametrize(
    "interval, domain",
    [((-3.0, 1.5), Integers(0, 1)), ((2.0, 7.0), Integers(0, 1)), ((-0.4, -0.4), Integers(0, 1)),
     ((-30.0, 4.0), Integers(0, 1)), ((-2.0, 1.0), Integers(1, 1))],
    ids=["straddles", "positive", "degenerate", "wide", "class1-only"],
)
def test_softmax_two_classes_exact(interval, domain):
    """K = 2: one difference ``d = eta_1 - eta_0`` in ``[a, b]``; brute force over ``d`` and the
    classes. Also equals the Bernoulli-logit rule."""
    a, b = interval
    lo = np.array([[0.0, -b], [a, 0.0]])
    hi = np.array([[0.0, -a], [b, 0.0]])
    rule = log_density_range(OP, domain, (Bounds(lo, hi, "softmax"),), NP)
    brute = brute_range(
        lambda d, y: softmax_logp(np.stack([np.zeros_like(d), d], -1), y),
        [("c", a, b), ("d", np.arange(domain.lo, domain.hi + 1))],
    )
    assert_exact(rule, brute, label="softmax K=2")
    if domain == Integers(0, 1):
        bern = log_density_range(op_of("Bernoulli"), Integers(0, 1), (Bounds(a, b, "logit"),), NP)
        assert rule[1] - rule[0] == pytest.approx(bern[1] - bern[0], rel=1e-12, abs=1e-14)


SCALAR_COVARIATE_CASES = [
    # slopes w, intercepts b, R, exact?  (exact: the extreme classes are the extreme slopes)
    (np.array([-1.0, 0.0, 1.0]), np.zeros(3), 1.0, True),
    (np.array([0.0, 0.7, 1.4, 2.1]), np.zeros(4), 2.0, True),
    (np.array([-2.0, 0.5, 1.0, 3.0]), np.array([0.3, -0.2, 0.1, -0.4]), 1.0, True),
    (np.array([0.0, 0.1, 5.0, 9.9, 10.0]), np.zeros(5), 1.0, False),  # a middle class is the max
    (np.array([1.3, -0.4, 2.2]), np.array([1.5, -2.0, 0.0]), 0.7, False),
]


@pytest.mark.parametrize("w, b, R, exact", SCALAR_COVARIATE_CASES, ids=[f"case{i}" for i in range(len(SCALAR_COVARIATE_CASES))])
def test_softmax_scalar_covariate(w, b, R, exact):
    """``eta = z w + b`` with ``|z| <= R``: brute force over ``z`` and every class. Sound always,
    exact when one record attains a whole column (checked per case)."""
    K = len(w)
    rule = log_density_range(OP, Integers(0, K - 1), (pair_window(b, w[None, :], R),), NP)
    brute = brute_range(
        lambda z, y: softmax_logp(z[..., None] * w + b, y), [("c", -R, R), ("d", np.arange(K))]
    )
    assert_exact(rule, brute, tight=exact, label="softmax scalar covariate")
    if not exact:
        assert rule[1] - rule[0] > brute[1] - brute[0] + 1e-6


def _ball_brute(W, b, R, n_theta=4001, n_r=301):
    """(min, max) of ``ln p_y(z)`` over ``||z|| <= R`` in 2-D: the minimum of the concave
    ``ln p_y`` is on the circle (zoomed in angle), the maximum on a polar grid of the disk."""
    K = W.shape[1]
    th = np.linspace(0, 2 * np.pi, n_theta)
    circle = R * np.stack([np.cos(th), np.sin(th)], -1)
    lo = softmax_logp((circle @ W + b)[:, None, :], np.arange(K)[None, :]).min()
    rr = R * np.sqrt(np.linspace(0, 1, n_r))
    disk = (rr[:, None, None] * np.stack([np.cos(th[::20]), np.sin(th[::20])], -1)[None]).reshape(-1, 2)
    hi = softmax_logp((disk @ W + b)[:, None, :], np.arange(K)[None, :]).max()
    return lo, hi


@pytest.mark.parametrize("K, seed", [(3, 0), (4, 1), (5, 2), (6, 3)])
def test_softmax_ball_covariates_sound_and_looseness(K, seed):
    """Covariates in a 2-D ball, K >= 3: the rule is a bound per draw (the column extremes need
    different directions of z). Never below the brute force; measured within 1.3x of it
    (docs/rules/categorical.md: up to 1.26 for a regular polygon of slopes in 2-D)."""
    rng = np.random.default_rng(seed)
    for _ in range(3):
        W = rng.normal(size=(2, K)) * rng.choice([0.3, 1.0, 3.0])
        b = rng.normal(size=K) * rng.choice([0.0, 1.0])
        R = 1.0
        lo, hi = log_density_range(OP, Integers(0, K - 1), (pair_window(b, W, R),), NP)
        b_lo, b_hi = _ball_brute(W, b, R)
        assert lo <= b_lo + 1e-9 and hi >= b_hi - 1e-9
        assert (hi - lo) <= 1.3 * (b_hi - b_lo)


def test_softmax_polygon_looseness_table():
    """Slopes on a regular K-gon of radius r, R = 1, no intercepts (the docs' table): the per-draw
    rule over-states L by the factors below (brute force in the disk; within 1e-3)."""
    expected = {(3, 1.0): 1.144, (5, 0.25): 1.228, (8, 0.25): 1.255}
    for (K, r), ratio in expected.items():
        ang = 2 * np.pi * np.arange(K) / K
        W = r * np.stack([np.cos(ang), np.sin(ang)])
        lo, hi = log_density_range(OP, Integers(0, K - 1), (pair_window(np.zeros(K), W, 1.0),), NP)
        b_lo, b_hi = _ball_brute(W, np.zeros(K), 1.0, n_theta=8001)
        assert (hi - lo) / (b_hi - b_lo) == pytest.approx(ratio, abs=1e-3)


def test_softmax_vectorised_and_pt():
    rng = np.random.default_rng(5)
    K, N = 4, 6
    lo = -rng.uniform(0, 3, size=(N, K, K))
    hi = lo + rng.uniform(0, 3, size=(N, K, K))
    p = Bounds(lo, hi, "softmax")
    v_lo, v_hi = log_density_range(OP, Integers(1, 3), (p,), NP)
    assert v_lo.shape == v_hi.shape == (N,)
    for i in range(N):
        s_lo, s_hi = log_density_range(OP, Integers(1, 3), (Bounds(lo[i], hi[i], "softmax"),), NP)
        assert v_lo[i] == pytest.approx(float(s_lo), rel=1e-14) and v_hi[i] == pytest.approx(float(s_hi), rel=1e-14)
    # PT with static and with unknown K
    for tl, th in [(pt.as_tensor(lo), pt.as_tensor(hi)), (pt.tensor3("lo"), pt.tensor3("hi"))]:
        t_lo, t_hi = log_density_range(OP, Integers(1, 3), (Bounds(tl, th, "softmax"),), PT)
        assert t_lo.dtype == t_hi.dtype == "float64"
        ins = [x for x in (tl, th) if x.owner is None and not isinstance(x, pt.TensorConstant)]
        f = pytensor.function(ins, [t_lo, t_hi], mode=PY_MODE)
        out = f(lo, hi) if ins else f()
        np.testing.assert_allclose(out[0], v_lo, rtol=1e-12)
        np.testing.assert_allclose(out[1], v_hi, rtol=1e-12)


def test_softmax_pair_bounds_sound():
    rng = np.random.default_rng(9)
    eta_lo = rng.normal(size=4)
    eta_hi = eta_lo + rng.uniform(0, 2, size=4)
    p = cat.softmax_pair_bounds(eta_lo, eta_hi)
    lo, hi = log_density_range(OP, Integers(0, 3), (p,), NP)
    etas = rng.uniform(eta_lo, eta_hi, size=(20000, 4))
    vals = softmax_logp(etas[:, None, :], np.arange(4)[None, :])
    assert lo <= vals.min() and hi >= vals.max()


# --------------------------------------------------------------------------- softmax: region
def _glm_1a(s):
    """docs/theory/glm.md#softmax-balls: per-class balls, no intercept."""
    k = int(np.argmax(s))
    others = np.delete(s, k) + s[k]
    return math.log1p(np.exp(others).sum()) - math.log1p(np.exp(-others).sum())


@pytest.mark.parametrize("B", [[1.0, 1.0, 1.0], [0.2, 1.5, 0.7], [0.0, 1.0, 1.0, 1.0], [2.0, 0.5, 0.5, 0.1, 1.2]], ids=str)
def test_softmax_region_balls_exact(B):
    """Per-class balls ``||w_k|| <= B_k``, no intercepts, ``||z|| <= R``: the region value is
    docs/theory/glm.md#softmax-balls, attained by its witness (checked with PyMC), and above every sampled draw."""
    B, R = np.asarray(B, float), 1.3
    K = len(B)
    half = R * (B[:, None] + B[None, :])
    W = Window(np.zeros((K, K)), np.zeros((K, K)), half, "softmax")
    region = float(region_lipschitz(OP, Integers(0, K - 1), (W,)))
    assert region == pytest.approx(_glm_1a(R * B), rel=1e-13)
    # witness: w_k* = B_k* u, w_k = -B_k u; records (z = R u, y = k*) and (z = -R u, y = k*)
    k = int(np.argmax(B))
    w = -B.copy()
    w[k] = B[k]
    witness = softmax_logp(np.array([R * w, -R * w]), np.array([k, k]))
    assert witness[0] - witness[1] == pytest.approx(region, rel=1e-12)
    lo, hi = log_density_range(OP, Integers(0, K - 1), (pair_window(np.zeros(K), w[None, :], R),), NP)
    assert hi - lo == pytest.approx(region, rel=1e-12)
    # soundness: random draws inside the balls (d = 2), their per-draw rule
    rng = np.random.default_rng(K)
    for _ in range(200):
        u = rng.normal(size=(2, K))
        u *= B * rng.uniform(0, 1, size=K) ** 0.5 / np.maximum(np.linalg.norm(u, axis=0), 1e-300)
        lo, hi = log_density_range(OP, Integers(0, K - 1), (pair_window(np.zeros(K), u, R),), NP)
        assert hi - lo <= region + 1e-12


# docs/theory/glm.md#softmax-table (K, s, Delta, sup found by search, U')
_GLM_1C = [
    (3, 0.25, 0.5, 1.0414, 1.1817), (3, 0.25, 2.0, 2.5709, 2.7095), (3, 1.0, 0.5, 2.8644, 3.0366),
    (3, 1.0, 2.0, 4.2122, 4.5593), (3, 2.0, 0.5, 5.1400, 5.1697), (3, 2.0, 2.0, 6.4548, 6.6738),
    (5, 0.25, 0.5, 1.1548, 1.3150), (5, 0.25, 2.0, 2.7218, 2.8413), (5, 1.0, 0.5, 3.2687, 3.5091),
    (5, 1.0, 2.0, 4.7159, 5.0372), (5, 2.0, 0.5, 5.7750, 5.8251), (5, 2.0, 2.0, 6.9556, 7.3311),
]


def _glm_u_prime(K, s, d):
    """docs/theory/glm.md#softmax-intercepts: ``U' = max(G_same, U_cross)``, equal radii, intercepts in ``[0, d]``."""
    g_same = math.log1p((K - 1) * math.exp(d + 2 * s)) - math.log1p((K - 1) * math.exp(d - 2 * s))
    u_cross = max(
        math.log(1 + (m + 1) * math.exp(d + 2 * s) + (K - 2 - m) * math.exp(2 * s))
        - math.log(1 + (K - 1 - m) * math.exp(-d - 2 * s) + m * math.exp(-2 * s))
        for m in (0, K - 2)
    )
    return max(g_same, u_cross)


@pytest.mark.parametrize("K, s, delta, sup, u_prime", _GLM_1C, ids=[f"K{k}-s{s}-D{d}" for k, s, d, _, _ in _GLM_1C])
def test_softmax_region_intercepts_bound(K, s, delta, sup, u_prime):
    """Equal balls ``R B = s`` + intercepts ``b_k in [0, Delta]``.

    * pairwise Window only: the hull, ``ln(1 + (K-1) e^{Delta+2s}) - ln(1 + (K-1) e^{-Delta-2s})``
      -- above the searched sup of docs/theory/glm.md#softmax-table (sound), at most 1.36x above it;
    * with the per-class offset box in ``extra``: the ``U'`` of docs/theory/glm.md#softmax-intercepts exactly (at most 1.14x)."""
    B = np.full(K, s)  # R = 1
    o_lo = np.full((K, K), -delta)
    o_hi = np.full((K, K), delta)
    np.fill_diagonal(o_lo, 0.0)
    np.fill_diagonal(o_hi, 0.0)
    half = B[:, None] + B[None, :]
    hull = float(region_lipschitz(OP, Integers(0, K - 1), (Window(o_lo, o_hi, half, "softmax"),)))
    t = delta + 2 * s
    assert hull == pytest.approx(math.log1p((K - 1) * math.exp(t)) - math.log1p((K - 1) * math.exp(-t)), rel=1e-13)
    assert sup <= hull <= 1.36 * sup
    offsets = (np.zeros(K), np.full(K, delta))
    coupled = float(region_lipschitz(OP, Integers(0, K - 1), (Window(o_lo, o_hi, half, "softmax", offsets),)))
    assert coupled == pytest.approx(_glm_u_prime(K, s, delta), rel=1e-12)
    assert coupled == pytest.approx(u_prime, abs=1e-4)
    assert sup <= coupled <= 1.14 * sup


def _sample_softmax_draws(rng, dom, B, b_lo, b_hi, R, n, d=2):
    """Draws inside per-class balls (d-dim) and an intercept box, with their per-draw rule."""
    K = len(B)
    out = np.empty(n)
    for i in range(n):
        u = rng.normal(size=(d, K))
        radius = B * np.where(rng.uniform(size=K) < 0.5, 1.0, rng.uniform(size=K) ** 0.5)
        u *= radius / np.maximum(np.linalg.norm(u, axis=0), 1e-300)
        b = np.where(rng.uniform(size=K) < 0.3, np.where(rng.uniform(size=K) < 0.5, b_lo, b_hi), rng.uniform(b_lo, b_hi))
        lo, hi = log_density_range(OP, dom, (pair_window(b, u, R),), NP)
        out[i] = hi - lo
    return out


@pytest.mark.parametrize("seed", range(6))
def test_softmax_region_offsets_sound(seed):
    """Unequal radii and intercept boxes: the coupled value is at most the hull and above the
    per-draw rule of every sampled draw (balls in 2-D, intercepts in the box, corners favoured)."""
    rng = np.random.default_rng(100 + seed)
    K = 3 + seed % 3
    B = rng.uniform(0, 1.5, size=K) * (rng.uniform(size=K) > 0.15)
    b_lo = rng.normal(size=K)
    b_hi = b_lo + rng.uniform(0, 2, size=K) * (rng.uniform(size=K) > 0.2)
    R = rng.uniform(0.5, 2)
    o_lo, o_hi = b_lo[:, None] - b_hi[None, :], b_hi[:, None] - b_lo[None, :]
    np.fill_diagonal(o_lo, 0.0)
    np.fill_diagonal(o_hi, 0.0)
    half = R * (B[:, None] + B[None, :])
    dom = Integers(0, K - 1) if seed % 2 else Integers(1, K - 1)
    hull = float(region_lipschitz(OP, dom, (Window(o_lo, o_hi, half, "softmax"),)))
    coupled = float(region_lipschitz(OP, dom, (Window(o_lo, o_hi, half, "softmax", (b_lo, b_hi)),)))
    assert coupled <= hull + 1e-12
    L = _sample_softmax_draws(rng, dom, B, b_lo, b_hi, R, 400)
    assert np.all(L <= coupled + 1e-12)
    print(f"K={K}: hull/coupled {hull / coupled:.3f}, coupled/best sampled {coupled / L.max():.3f}")


def test_softmax_offset_region_is_sup_of_the_rule_over_offsets():
    """With no covariates (``half = 0``) the coupled value is the exact sup over the intercept box
    of the (then exact) point rule: brute force over a grid of intercepts."""
    rng = np.random.default_rng(7)
    for K in (3, 4):
        b_lo = rng.normal(size=K)
        b_hi = b_lo + rng.uniform(0.2, 2, size=K)
        coupled = float(cat._softmax_offset_region(Integers(0, K - 1), b_lo, b_hi, np.zeros((K, K))))
        grid = np.stack(np.meshgrid(*[np.linspace(l, h, 9) for l, h in zip(b_lo, b_hi)], indexing="ij"), -1).reshape(-1, K)
        lp = grid - np.logaddexp.reduce(grid, axis=-1, keepdims=True)
        # per draw L = ln(max p / min p); the sup over the box
        best = (lp.max(-1) - lp.min(-1)).max()
        assert best <= coupled + 1e-12
        assert best == pytest.approx(coupled, rel=1e-12)  # attained at a vertex of the box


def test_softmax_region_two_classes_with_intercept_exact():
    """K = 2, balls B and intercepts in [l, u]: docs/theory/glm.md#logistic-intercept, ``L = 2 R B + (u - l)``."""
    B, R, l, u = 0.8, 1.5, -0.3, 0.9
    d = u - l
    W = Window(np.array([[0.0, -d], [-d, 0.0]]), np.array([[0.0, d], [d, 0.0]]), np.full((2, 2), 2 * R * B), "softmax")
    assert float(region_lipschitz(OP, Integers(0, 1), (W,))) == pytest.approx(2 * R * B + d, rel=1e-13)


# --------------------------------------------------------------------------- ordinal: per draw
ORDINAL_CASES = [
    # cutpoints, window [a, b], domain, sigma
    (np.array([-1.0, 0.5, 2.0]), (-0.5, 1.7), Integers(0, 3), 1.0),
    (np.array([-1.0, 0.5, 2.0]), (-3.0, -2.0), Integers(0, 3), 1.3),  # window left of every mode
    (np.array([-1.0, 0.5, 2.0]), (3.0, 5.0), Integers(0, 3), 0.7),  # right of every mode
    (np.array([-1.0, 0.5, 2.0]), (0.7, 0.7), Integers(0, 3), 1.0),  # degenerate window
    (np.array([-1.0, 0.5, 2.0]), (-0.2, 0.4), Integers(1, 2), 2.0),  # middle classes only
    (np.array([0.3]), (-2.0, 1.0), Integers(0, 1), 1.0),  # K = 2
    (np.array([-2.0, -1.5, 0.0, 0.2, 3.0]), (-4.0, 4.0), Integers(0, 5), 0.5),
    (np.array([-2.0, -1.5, 0.0, 0.2, 3.0]), (0.05, 0.15), Integers(3, 3), 1.0),  # one class
    (np.array([-6.0, -5.9, 6.0]), (-3.0, 3.0), Integers(0, 3), 1.0),  # a narrow category
]


@pytest.mark.parametrize("kind", [LOGIT, PROBIT])
@pytest.mark.parametrize("cut, window, domain, sigma", ORDINAL_CASES, ids=[f"case{i}" for i in range(len(ORDINAL_CASES))])
def test_ordinal_window_exact(kind, cut, window, domain, sigma):
    """Per draw (cutpoints points): brute force over the predictor window x the classes."""
    a, b = window
    rule = log_density_range(OP, domain, (ordinal_bounds(kind, a, b, cut, sigma=sigma),), NP)
    axes = [("c", a, b) if b > a else ("d", [a]), ("d", np.arange(domain.lo, domain.hi + 1))]
    brute = brute_range(lambda e, y: ordered_logp(kind, e, y, cut, sigma), axes)
    if kind == LOGIT:
        assert_exact(rule, brute, label=kind)
    else:
        assert_close_range(rule, brute, 2e-6, label=kind)
    L = element_lipschitz(OP, domain, (ordinal_bounds(kind, a, b, cut, sigma=sigma),), NP)
    assert float(L) == pytest.approx(float(rule[1] - rule[0]), rel=1e-14, abs=1e-14)


def test_ordered_logistic_two_classes_is_logistic():
    """K = 2: ``L = max(|a - c|, |b - c|)``, the Bernoulli-logit rule of ``eta - c``."""
    for c, a, b in [(0.3, -2.0, 1.0), (-1.0, 0.5, 4.0), (2.0, 2.0, 2.0)]:
        L = element_lipschitz(OP, Integers(0, 1), (ordinal_bounds(LOGIT, a, b, np.array([c])),), NP)
        # the rule adds the float error of PyMC's computed ln p (FOUND.md #11): 1e-12 here
        assert float(L) == pytest.approx(max(abs(a - c), abs(b - c)), rel=1e-11, abs=1e-12)
        assert float(L) >= max(abs(a - c), abs(b - c))


def _mp_class_logp(eta, cut, sigma):
    """``ln(Phi(u) - Phi(l))`` in 40 digits, on the side of the tail (``Phi(-l) - Phi(-u)``)
    where the two terms are not both near 1."""
    cc = [-mp.inf] + [mp.mpf(float(x)) for x in cut] + [mp.inf]
    e, s = mp.mpf(float(eta)), mp.mpf(float(sigma))
    out = []
    for k in range(len(cut) + 1):
        l, u = (cc[k] - e) / s, (cc[k + 1] - e) / s
        diff = mp.ncdf(-l) - mp.ncdf(-u) if l + u > 0 else mp.ncdf(u) - mp.ncdf(l)
        out.append(float(mp.log(diff)))
    return out


def test_probit_class_logp_matches_mpmath():
    """The rule's ``ln P_k`` (NumPy and PyTensor) against 40-digit arithmetic, tails included."""
    mp.mp.dps = 40
    cut = np.array([-3.0, -0.2, 0.1, 4.0])
    etas = np.array([-40.0, -8.0, -1.0, 0.0, 0.05, 2.5, 9.0, 35.0])
    for sigma in (0.3, 1.0, 2.5):
        E = etas[:, None]
        mine = cat._class_logp(E, E, E, cut, cut, PROBIT, sigma, NP)
        ref = np.array([_mp_class_logp(e, cut, sigma) for e in etas])
        np.testing.assert_allclose(mine, ref, rtol=1e-12, atol=1e-30)
        t = cat._class_logp(pt.as_tensor(E), pt.as_tensor(E), pt.as_tensor(E), pt.as_tensor(cut), pt.as_tensor(cut), PROBIT, pt.as_tensor(sigma), PT)
        np.testing.assert_allclose(pytensor.function([], t, mode=PY_MODE)(), ref, rtol=1e-12, atol=1e-30)


def test_logistic_class_logp_matches_mpmath():
    mp.mp.dps = 40
    cut = np.array([-3.0, -0.2, 0.1, 4.0])
    for eta in (-40.0, -8.0, 0.0, 0.05, 9.0, 35.0):
        cc = [-mp.inf] + [mp.mpf(float(x)) for x in cut] + [mp.inf]
        sig = lambda x: 1 / (1 + mp.exp(-x))  # noqa: E731
        ref = [float(mp.log(sig(cc[k + 1] - eta) - sig(cc[k] - eta))) for k in range(5)]
        E = np.array([[eta]])
        np.testing.assert_allclose(cat._class_logp(E, E, E, cut, cut, LOGIT, None, NP)[0], ref, rtol=1e-12)


@pytest.mark.parametrize("kind", [LOGIT, PROBIT])
def test_ordinal_vectorised_pt_and_gradient(kind):
    """Windows per record, cutpoints shared or per record; NP == PT; PT gradients finite."""
    rng = np.random.default_rng(11)
    N, K = 5, 4
    a = rng.normal(size=N)
    b = a + rng.uniform(0, 2, size=N)
    cut = np.sort(rng.normal(size=(N, K - 1)) * 2, axis=-1)
    sig = rng.uniform(0.5, 2, size=N)
    for c in (cut[0], cut):
        p = ordinal_bounds(kind, a, b, c, sigma=sig)
        lo, hi = log_density_range(OP, Integers(0, K - 1), (p,), NP)
        assert lo.shape == (N,)
        for i in range(N):
            ci = c if c.ndim == 1 else c[i]
            s_lo, s_hi = log_density_range(OP, Integers(0, K - 1), (ordinal_bounds(kind, a[i], b[i], ci, sigma=sig[i]),), NP)
            assert lo[i] == pytest.approx(float(s_lo), rel=1e-13) and hi[i] == pytest.approx(float(s_hi), rel=1e-13)
    ta, tb, tc, ts = pt.dvector("a"), pt.dvector("b"), pt.dmatrix("c"), pt.dvector("s")
    extra = (tc, tc) if kind == LOGIT else (tc, tc, ts, ts)
    t_lo, t_hi = log_density_range(OP, Integers(0, K - 1), (Bounds(ta, tb, kind, extra),), PT)
    L = element_lipschitz(OP, Integers(0, K - 1), (Bounds(ta, tb, kind, extra),), PT)
    ins = [ta, tb, tc] + ([ts] if kind == PROBIT else [])
    grads = pytensor.grad(L.sum(), ins)
    f = pytensor.function(ins, [t_lo, t_hi, L, *grads], on_unused_input="ignore", mode=PY_MODE)
    vals = f(a, b, cut, *([sig] if kind == PROBIT else []))
    lo, hi = log_density_range(OP, Integers(0, K - 1), (ordinal_bounds(kind, a, b, cut, sigma=sig),), NP)
    np.testing.assert_allclose(vals[0], lo, rtol=1e-12)
    np.testing.assert_allclose(vals[1], hi, rtol=1e-12)
    np.testing.assert_allclose(vals[2], hi - lo, rtol=1e-12)
    assert all(np.all(np.isfinite(g)) for g in vals[3:])


# --------------------------------------------------------------------------- ordinal: region
def _random_region(rng, kind, K, moving_offset):
    centres = np.cumsum(rng.uniform(0.3, 2.5, size=K - 1)) - 2.0
    gaps = np.diff(np.concatenate([[-np.inf], centres, [np.inf]]))
    widths = rng.uniform(0, 0.45, size=K - 1) * np.minimum(gaps[:-1], gaps[1:]).clip(max=2.0)
    cut_lo, cut_hi = centres - widths, centres + widths
    o_lo = rng.normal() * 1.5
    o_hi = o_lo + (rng.uniform(0, 1.5) if moving_offset else 0.0)
    half = rng.uniform(0, 2.5)
    extra = (cut_lo, cut_hi)
    if kind == PROBIT:
        s = rng.uniform(0.5, 2.0)
        extra = extra + (np.asarray(s), np.asarray(s))
    return Window(np.asarray(o_lo), np.asarray(o_hi), np.asarray(half), kind, extra)


def _draws(rng, w: Window, n):
    """Parameter draws inside the region: every corner of the cutpoint boxes (with the window at
    its widest at each offset end) and ``n`` uniform draws."""
    cl, ch = w.extra[0], w.extra[1]
    corners = np.array(list(itertools.product(*zip(cl, ch))))
    offs = np.unique([float(w.o_lo), float(w.o_hi)])
    C = [np.repeat(corners, len(offs), axis=0)]
    O = [np.tile(offs, len(corners))]
    H = [np.full(len(corners) * len(offs), float(w.half))]
    C.append(rng.uniform(cl, ch, size=(n, len(cl))))
    O.append(rng.uniform(float(w.o_lo), float(w.o_hi), size=n))
    H.append(float(w.half) * rng.uniform(0, 1, size=n) ** 0.3)
    return np.concatenate(C), np.concatenate(O), np.concatenate(H), len(corners) * len(offs)


def _per_draw_L(w, domain, C, O, H):
    extra = (C, C) if w.space == LOGIT else (C, C, w.extra[2], w.extra[3])
    return element_lipschitz(OP, domain, (Bounds(O - H, O + H, w.space, extra),), NP)


@pytest.mark.parametrize("kind", [LOGIT, PROBIT])
@pytest.mark.parametrize("moving_offset", [False, True], ids=["fixed-offset", "moving-offset"])
def test_ordinal_region_sound_and_tight(kind, moving_offset):
    """30 random regions (K = 2..6, disjoint cutpoint boxes, any window): the region value is above
    the per-draw constant of every sampled draw; with a fixed offset it is attained at a corner
    of the cutpoint boxes (exact), with a moving offset it is a bound (looseness printed)."""
    rng = np.random.default_rng(21 if kind == LOGIT else 22)
    worst = 1.0
    for i in range(30):
        K = 2 + i % 5
        w = _random_region(rng, kind, K, moving_offset)
        domain = Integers(0, K - 1) if i % 3 else Integers(int(rng.integers(0, K)), K - 1)
        region = float(region_lipschitz(OP, domain, (w,)))
        C, O, H, n_corner = _draws(rng, w, 3000)
        L = _per_draw_L(w, domain, C, O, H)
        # 1e-10: both sides carry the float error of the computed ln p (FOUND.md #11, ~1e-12),
        # evaluated at their own smallest class probability
        assert np.all(L <= region * (1 + 1e-10) + 1e-12), (i, L.max(), region)
        if not moving_offset:
            assert L[:n_corner].max() == pytest.approx(region, rel=1e-10, abs=1e-12)
        worst = max(worst, region / L.max())
    print(f"{kind} {'moving' if moving_offset else 'fixed'} offset: region / best sampled <= {worst:.3f}")


@pytest.mark.parametrize("kind", [LOGIT, PROBIT])
def test_ordinal_region_against_pymc(kind):
    """The region value against PyMC directly: the largest over corner draws of (max - min of
    PyMC's log-probability over a predictor grid x the classes) equals it."""
    rng = np.random.default_rng(31)
    for K in (3, 4):
        w = _random_region(rng, kind, K, False)
        domain = Integers(0, K - 1)
        region = float(region_lipschitz(OP, domain, (w,)))
        sigma = 1.0 if kind == LOGIT else float(w.extra[2])
        best = -np.inf
        for corner in itertools.product(*zip(w.extra[0], w.extra[1])):
            a, b = float(w.o_lo - w.half), float(w.o_hi + w.half)
            lo, hi = brute_range(lambda e, y: ordered_logp(kind, e, y, np.array(corner), sigma), [("c", a, b), ("d", np.arange(K))])
            best = max(best, hi - lo)
        tol = 1e-7 if kind == LOGIT else 2e-6
        assert best <= region + tol * (1 + region)
        assert best == pytest.approx(region, abs=tol * (1 + region))


def test_ordinal_region_glm_symmetric_window():
    """The setting of docs/theory/glm.md#ordered-logistic, window ``[-s, s]``; K = 2 gives ``s + max(hi_1, -lo_1)``."""
    for s, lo1, hi1 in [(1.0, -0.5, 0.3), (0.4, 1.0, 2.0), (2.0, -3.0, -2.5)]:
        w = Window(np.asarray(0.0), np.asarray(0.0), np.asarray(s), LOGIT, (np.array([lo1]), np.array([hi1])))
        assert float(region_lipschitz(OP, Integers(0, 1), (w,))) == pytest.approx(s + max(hi1, -lo1), rel=1e-13)


@pytest.mark.parametrize("kind", [LOGIT, PROBIT])
def test_ordinal_overlapping_boxes(kind):
    """Boxes that meet allow an empty category: ``inf`` when it is in the domain."""
    cl, ch = np.array([-1.0, 0.0, 2.0]), np.array([0.2, 1.0, 3.0])  # boxes 1 and 2 overlap
    extra = (cl, ch) if kind == LOGIT else (cl, ch, np.asarray(1.0), np.asarray(1.0))
    w = Window(np.asarray(0.0), np.asarray(0.0), np.asarray(1.0), kind, extra)
    assert np.isinf(region_lipschitz(OP, Integers(0, 3), (w,)))
    assert np.isinf(region_lipschitz(OP, Integers(1, 1), (w,)))
    # class 1 (between cutpoints 1 and 2) outside the domain: finite and sound
    for dom in (Integers(2, 3), Integers(0, 0)):
        val = float(region_lipschitz(OP, dom, (w,)))
        assert np.isfinite(val)
        C = np.array([c for c in itertools.product(*zip(cl, ch)) if np.all(np.diff(c) > 0)])
        L = _per_draw_L(w, dom, C, np.zeros(len(C)), np.ones(len(C)))
        assert np.all(L <= val + 1e-12)
    lo, hi = log_density_range(OP, Integers(0, 3), (Bounds(-1.0, 1.0, kind, extra),), NP)
    assert lo == -np.inf and np.isfinite(hi)


def test_ordinal_boxes_in_the_per_record_rule():
    """Cutpoint boxes given to the per-record rule: its range is sound (contains every corner
    draw's range) and the constant is the region's (the two records share cutpoints)."""
    cl, ch = np.array([-1.0, 0.5, 2.0]), np.array([-0.6, 1.1, 2.3])
    p = Bounds(-0.5, 1.0, LOGIT, (cl, ch))
    lo, hi = log_density_range(OP, Integers(0, 3), (p,), NP)
    L = float(element_lipschitz(OP, Integers(0, 3), (p,), NP))
    C = np.array(list(itertools.product(*zip(cl, ch))))
    c_lo, c_hi = log_density_range(OP, Integers(0, 3), (Bounds(np.full(len(C), -0.5), np.full(len(C), 1.0), LOGIT, (C, C)),), NP)
    assert lo <= c_lo.min() and hi >= c_hi.max()
    assert L == pytest.approx((c_hi - c_lo).max(), rel=1e-13)
    # one class: the range over the boxes mixes two cutpoint vectors, the constant does not
    p1 = Bounds(-0.5, 1.0, LOGIT, (cl, ch))
    lo, hi = log_density_range(OP, Integers(1, 1), (p1,), NP)
    L1 = float(element_lipschitz(OP, Integers(1, 1), (p1,), NP))
    c_lo, c_hi = log_density_range(OP, Integers(1, 1), (Bounds(np.full(len(C), -0.5), np.full(len(C), 1.0), LOGIT, (C, C)),), NP)
    assert L1 == pytest.approx((c_hi - c_lo).max(), rel=1e-13)
    assert L1 < hi - lo - 0.1


def test_probit_sigma_interval_branch_and_bound():
    """sigma over an interval: the certified 1-D branch and bound is above the constant at every
    sigma of a dense grid and within its 1e-3 tolerance of the grid's best."""
    rng = np.random.default_rng(41)
    for i in range(8):
        K = 2 + i % 4
        w = _random_region(rng, PROBIT, K, bool(i % 2))
        s_lo, s_hi = np.sort(np.exp(rng.normal(size=2) * 0.7))
        w = Window(w.o_lo, w.o_hi, w.half, PROBIT, (w.extra[0], w.extra[1], np.asarray(s_lo), np.asarray(s_hi)))
        domain = Integers(0, K - 1)
        region = float(region_lipschitz(OP, domain, (w,)))
        grid = np.exp(np.linspace(np.log(s_lo), np.log(s_hi), 301))
        vals = [
            float(region_lipschitz(OP, domain, (Window(w.o_lo, w.o_hi, w.half, PROBIT, (w.extra[0], w.extra[1], np.asarray(s), np.asarray(s))),)))
            for s in grid
        ]
        assert max(vals) <= region * (1 + 1e-12)
        assert region <= max(vals) * (1 + 1.5e-3) + 1e-9


# --------------------------------------------------------------------------- refusals
@pytest.mark.parametrize(
    "p, domain",
    [
        (Bounds.point(np.zeros((3, 3)), "softmax"), Integers(0, 3)),
        (ordinal_bounds(LOGIT, 0.0, 1.0, np.array([0.0, 1.0])), Integers(0, 3)),
        (ordinal_bounds(PROBIT, 0.0, 1.0, np.array([0.0]), sigma=1.0), Integers(0, 2)),
        (Bounds.point(np.zeros((3, 3)), "softmax"), Interval(0, 2)),
        (ordinal_bounds(LOGIT, 0.0, 1.0, np.array([0.0, 1.0])), Integers(-1, 2)),
        (Bounds.point(np.full(3, 1 / 3)), Integers(0, 3)),
    ],
    ids=["softmax-above-K", "logistic-above-K", "probit-above-K", "not-integers", "negative", "natural-above-K"],
)
def test_domain_errors(p, domain):
    with pytest.raises(DomainError, match="Integers"):
        log_density_range(OP, domain, (p,), NP)


@pytest.mark.parametrize(
    "p, match",
    [
        (Bounds.point(np.full(3, 1 / 3), "logit"), "scales"),
        (Bounds(0.0, 1.0, PROBIT, (np.array([0.0]), np.array([0.0]), 1.0, 2.0)), "sigma"),
        (Bounds(0.0, 1.0, LOGIT, None), "extra"),
        (Bounds(0.0, 1.0, LOGIT, (np.zeros(1), np.zeros(1), 1.0, 1.0)), "no sigma"),
        (Bounds.point(np.zeros((2, 3)), "softmax"), "K, K"),
    ],
    ids=["unknown-space", "probit-sigma-interval", "missing-extra", "logistic-with-sigma", "not-square"],
)
def test_unsupported(p, match):
    with pytest.raises(UnsupportedFactorError, match=match):
        log_density_range(OP, Integers(0, 1), (p,), NP)


def test_region_refusals():
    with pytest.raises(NoRegionRule):
        region_lipschitz(OP, Integers(0, 1), (Window(0.0, 0.0, 1.0, "logit"),))
    w = Window(np.asarray(0.0), np.asarray(0.0), np.asarray(1.0), PROBIT, (np.zeros(1), np.zeros(1), np.asarray(0.0), np.asarray(1.0)))
    with pytest.raises(NoRegionRule, match="sigma"):
        region_lipschitz(OP, Integers(0, 1), (w,))


# --------------------------------------------------------------------------- graph recognisers
@pytest.fixture(scope="module")
def models():
    X = np.random.default_rng(0).normal(size=(20, 2))
    y = np.zeros(20, dtype=int)
    with pm.Model() as m:
        w = pm.Normal("w", 0, 1, shape=2)
        c = pm.Normal("c", np.linspace(-1, 1, 3), 1, shape=3, transform=pm.distributions.transforms.ordered)
        eta = pm.Deterministic("eta", pt.as_tensor(X) @ w)
        pm.OrderedLogistic("ol", eta=eta, cutpoints=c, observed=y)
        pm.OrderedLogistic("ol_nop", eta=eta, cutpoints=c, compute_p=False, observed=y)
        mu = pm.Normal("mu")
        pm.OrderedLogistic("ol_scalar", eta=mu, cutpoints=c, observed=y)
        pm.OrderedProbit("op", eta=eta, cutpoints=c, observed=y)
        sg = pm.HalfNormal("sg")
        pm.OrderedProbit("op_rv", eta=eta, cutpoints=c, sigma=sg, observed=y)
        pm.OrderedProbit("op_const", eta=eta, cutpoints=c, sigma=2.5, compute_p=False, observed=y)
        Wm = pm.Normal("W", 0, 1, shape=(2, 4))
        s = pt.as_tensor(X) @ Wm
        pm.Categorical("logit_p", logit_p=s, observed=y)
        pm.Categorical("softmax_det", p=pm.Deterministic("p", pm.math.softmax(s, axis=1)), observed=y)
        pm.Categorical("softmax_cast", p=pt.cast(pm.math.softmax(pt.cast(s, "float32"), axis=-1), "float64"), observed=y)
        pm.Categorical("softmax_axis0", p=pm.math.softmax(s, axis=0), observed=y)
        pm.Categorical("plain", p=pm.Dirichlet("pi", np.ones(4)), observed=y)
        sig = pt.sigmoid(c - eta[:, None])
        fake = pt.concatenate([pt.zeros((20, 1)), sig, pt.ones((20, 1))], axis=-1)
        fake = fake[:, 1:] - fake[:, :-1]
        pm.Categorical("lookalike", p=fake, observed=y)  # not compute_p's graph (zeros, not zeros_like)
        pm.Categorical("shifted", p=pm.OrderedLogistic.compute_p(eta + 1.0, c) * 1.0, observed=y)
    return m, dict(eta=eta, c=c, mu=mu, sg=sg, s=s)


def _p_of(model, name):
    return model[name].owner.inputs[-1]


@pytest.mark.parametrize(
    "name, kind, eta_key, sigma",
    [
        ("ol", LOGIT, "eta", None),
        ("ol_nop", LOGIT, "eta", None),
        ("ol_scalar", LOGIT, "mu", None),
        ("op", PROBIT, "eta", 1.0),
        ("op_rv", PROBIT, "eta", "sg"),
        ("op_const", PROBIT, "eta", 2.5),
    ],
)
def test_match_ordered(models, name, kind, eta_key, sigma):
    m, v = models
    found = cat.match_ordered(_p_of(m, name))
    assert found is not None
    k, eta, cut, sig = found
    assert k == kind and eta is v[eta_key] and cut is v["c"]
    if sigma is None:
        assert sig is None
    elif isinstance(sigma, str):
        assert sig is v[sigma]
    else:
        assert float(sig.eval()) == sigma
    assert cat.match_softmax(_p_of(m, name)) is None


@pytest.mark.parametrize("name", ["logit_p", "softmax_det", "softmax_cast"])
def test_match_softmax(models, name):
    m, v = models
    eta = cat.match_softmax(_p_of(m, name))
    assert eta is not None
    if name == "softmax_cast":
        assert eta.owner.op.scalar_op.o_type.dtype == "float32"  # the cast of s, as written
    else:
        assert eta is v["s"]
    assert cat.match_ordered(_p_of(m, name)) is None


@pytest.mark.parametrize("name", ["softmax_axis0", "plain", "lookalike", "shifted"])
def test_recognisers_negative(models, name):
    m, _ = models
    p = _p_of(m, name)
    assert cat.match_softmax(p) is None
    assert cat.match_ordered(p) is None
    assert cat.match_ordered(pt.dvector()) is None and cat.match_softmax(pt.dmatrix()) is None


def test_recognised_parameters_reproduce_pymc(models):
    """The recognised ``(eta, cutpoints, sigma)`` rebuild the model's own log-probability."""
    m, _ = models
    ip = m.initial_point()
    y = np.arange(20) % 4
    for name in ("ol", "ol_scalar", "op", "op_rv", "op_const"):
        kind, eta, cut, sig = cat.match_ordered(_p_of(m, name))
        if kind == LOGIT:
            dist = pm.OrderedLogistic.dist(eta=eta, cutpoints=cut)
        else:
            dist = pm.OrderedProbit.dist(eta=eta, cutpoints=cut, sigma=sig)
        graphs = m.replace_rvs_by_values([pm.logp(dist, y), pm.logp(m[name], y)])
        f = pytensor.function(m.value_vars, graphs, on_unused_input="ignore", mode=PY_MODE)
        ours, theirs = f(**{v.name: ip[v.name] for v in m.value_vars})
        np.testing.assert_allclose(ours, theirs, rtol=1e-14)


# --------------------------------------------------------------------------- floors, sliding
def test_min_lipschitz_only_for_fixed_p():
    """A floor only when ``p`` is fixed (the constant itself); None when it is free, in every
    space (a uniform p, equal etas, or balanced cutpoints give L = 0)."""
    from pymc_dp.rules.discrete import min_lipschitz

    dom = Integers(0, 2)
    assert min_lipschitz(OP, dom, (Bounds.point(np.array([0.2, 0.3, 0.5])),)) == pytest.approx(math.log(2.5), rel=1e-8)
    assert min_lipschitz(OP, dom, (np.array([0.2, 0.3, 0.5]),)) == pytest.approx(math.log(2.5), rel=1e-8)
    assert min_lipschitz(OP, dom, (Bounds.point(np.full(3, 1 / 3)),)) is None  # L = 0
    assert min_lipschitz(OP, dom, (None,)) is None
    assert min_lipschitz(OP, dom, (Span(np.zeros(3), np.ones(3)),)) is None
    assert min_lipschitz(OP, dom, (Window(np.zeros((3, 3)), np.zeros((3, 3)), np.ones((3, 3)), "softmax"),)) is None
    c = np.array([-1.0, 1.0])
    for kind in (LOGIT, PROBIT):
        fixed = ordinal_bounds(kind, 0.3, 0.3, c, c.copy(), sigma=1.0)
        L = float(element_lipschitz(OP, dom, (fixed,), NP))
        assert min_lipschitz(OP, dom, (fixed,)) == pytest.approx(L, rel=1e-8)
        assert min_lipschitz(OP, dom, (ordinal_bounds(kind, 0.3, 0.3, c, c + 0.5, sigma=1.0),)) is None
        assert min_lipschitz(OP, dom, (ordinal_bounds(kind, 0.0, 1.0, c, sigma=1.0),)) is None


@pytest.mark.skipif("sliding" not in Window.__dataclass_fields__, reason="Window has no 'sliding' flag")
@pytest.mark.parametrize("kind", [LOGIT, PROBIT])
def test_ordinal_non_sliding_window_uses_the_hull_only(kind):
    cl, ch = np.array([-1.0, 0.5, 2.0]), np.array([-0.8, 0.9, 2.2])
    extra = (cl, ch) if kind == LOGIT else (cl, ch, np.asarray(1.2), np.asarray(1.2))
    o_lo, o_hi, half = np.asarray(-0.5), np.asarray(1.5), np.asarray(0.7)
    sliding = float(region_lipschitz(OP, Integers(0, 3), (Window(o_lo, o_hi, half, kind, extra),)))
    fixed = float(region_lipschitz(OP, Integers(0, 3), (Window(o_lo, o_hi, half, kind, extra, sliding=False),)))
    hull = float(region_lipschitz(OP, Integers(0, 3), (Window(np.asarray(0.5), np.asarray(0.5), np.asarray(1.7), kind, extra),)))
    assert fixed == pytest.approx(hull, rel=1e-14)
    assert sliding <= fixed + 1e-12


# --------------------------------------------------------------------------- FOUND.md #11
def _choice_model():
    """Three alternatives with public costs near 1000 and a pivot of utility 0 (the gallery's
    discrete choice, scaled down): ``beta = 1.25`` puts a utility 1250 above the pivot's."""
    rng = np.random.default_rng(0)
    cost = rng.uniform(800.0, 1200.0, size=(30, 2))
    y = rng.integers(0, 3, size=30)
    with pm.Model() as model:
        cd, yd = pm.Data("cost", cost), pm.Data("y", y)
        beta = pm.Normal("beta", 0.0, 1.0)
        u = pt.concatenate([beta * cd, pt.zeros((30, 1))], axis=1)
        pm.Categorical("choice", p=pm.math.softmax(u, axis=1), observed=yd)
    return model


def test_the_softmax_range_is_the_computed_one_and_fails_closed_below_the_float_floor():
    """ln p below -700 can be computed as -inf (exp underflows): the range's lower end is -inf there;
    above it both ends move out by the float error."""
    from pymc_dp.rules.categorical import SOFTMAX_LN_P_ERROR, computed_softmax_log_range

    lo, hi = computed_softmax_log_range(np.array([-750.0, -3.0]), np.array([-0.1, -0.1]), NP)
    assert lo[0] == -np.inf and lo[1] == -3.0 - SOFTMAX_LN_P_ERROR and hi[1] == -0.1 + SOFTMAX_LN_P_ERROR
    # PyMC's own computation at such a point: -inf, the reason for the rule
    p = pm.math.softmax(pt.as_tensor([[1250.0, 0.0]]), axis=1)
    assert np.isneginf(pm.logp(pm.Categorical.dist(p=p), np.array([1])).eval()).all()


def test_found_11_a_softmax_whose_utilities_underflow_is_refused_not_refuted():
    """tests/fuzz/FOUND.md #11: a box reaching beta = 1.25 gives utilities 1000+ above the pivot,
    so PyMC computes ln p = -inf; the rule claimed a finite constant (the refutation check caught
    it: CertificateRefutedError). Now the constant is infinite and the box is refused."""
    model = _choice_model()
    domains = {"y": pymc_dp.Integers(0, 2)}
    with pytest.raises(pymc_dp.BudgetExceededError, match="choice"):
        pymc_dp.certify(model, epsilon=None, bounds={"beta": (-2.0, 2.0)}, draws=1, data=domains, public=["cost"])
    # a budget narrows beta far inside the float floor: certified, and kept by the refutation check
    cert = pymc_dp.certify(model, epsilon=5.0, draws=1, data=domains, public=["cost"])
    assert cert.certificate.epsilon <= 5.0 * (1 + 1e-9)


def test_the_ordered_logistic_constant_covers_the_cancellation_of_pymcs_computed_p():
    """PyMC computes an ordered-logistic class probability as a difference of two sigmoids: with
    eta 40 below the cutpoints both are 1.0 in floats and ln p = -inf, although ln p = -40.5 in
    real arithmetic (FOUND.md #11, left open there, closed here): the constant is infinite. Where
    the probabilities are moderate it moves by the error bound only."""
    computed = pm.logp(pm.OrderedLogistic.dist(eta=-40.5, cutpoints=np.array([0.0, 1.0])), 1).eval()
    assert np.isneginf(computed)
    far = element_lipschitz(OP, Integers(0, 2), (ordinal_bounds(LOGIT, -41.0, -40.0, np.array([0.0, 1.0])),), NP)
    assert np.isinf(float(far))
    near = element_lipschitz(OP, Integers(0, 2), (ordinal_bounds(LOGIT, -1.0, 1.0, np.array([0.0, 1.0])),), NP)
    assert np.isfinite(float(near))
    err = cat.ordered_ln_p_error(np.array([-1.0, -30.0, -37.0]), LOGIT, NP)
    assert err[0] < 1e-13 and 1e-3 < err[1] < 1e-1 and np.isinf(err[2])
