"""Brute-force tests of the ``pm.AR`` rule (``pymc_dp.rules.timeseries``).

Ground truth is PyMC's own log-likelihood of the *whole series* (``pm.logp`` of ``pm.AR.dist``,
compiled once per structure with symbolic parameters and evaluated on matrices of series). For a
time point ``t`` the brute force changes ``y_t`` and scans every value the change can interact
with: the ``2p`` neighbours ``y_{t-p} .. y_{t+p}`` on a grid (corners included), ``y_t`` and its
replacement on a fine grid zoomed twice around the extremes (the other values of the series are
fixed at random: they enter no term that reads ``y_t``, which one test checks). Every grid point
is a real pair of neighbouring series, so the brute force is an *attained* change: the rule must
never be below it (float slack) and, where it is claimed exact, must agree to ``1e-7``.
"""

from __future__ import annotations

import functools
import itertools
import time

import numpy as np
import pymc as pm
import pytensor
import pytensor.tensor as pt
import pytest

import pymc_dp
from pymc_dp.domains import Ball, Integers, Interval
from pymc_dp.exceptions import UnsupportedFactorError
from pymc_dp.rules import (
    NP,
    PT,
    Bounds,
    Nested,
    NestedRegion,
    Span,
    Window,
    element_lipschitz,
    log_density_range,
    region_lipschitz,
    rule_info,
)
from pymc_dp.rules.continuous import normal_range
from pymc_dp.rules.region import NoRegionRule
from pymc_dp.rules.timeseries import (
    ar_region_lipschitz,
    ar_region_search,
    detect_lagged_copies,
    refuse_lagged_copies,
)
from pymc_dp.units import Users

FLOAT_SLACK = 1e-9
GRID_TOL = 1e-7

# --------------------------------------------------------------------------- PyMC ground truth

INIT = {"normal": pm.Normal, "laplace": pm.Laplace}


@functools.lru_cache(maxsize=None)
def ar_ops(p: int, constant: bool, init: str = "normal"):
    """The AR Op (with ``ar_order = p``, ``constant_term``) and its init_dist's Op."""
    rv = pm.AR.dist(
        rho=np.zeros(p + int(constant)), sigma=1.0, constant=constant,
        init_dist=INIT[init].dist(0.0, 1.0), steps=3,
    )
    op = rv.owner.op
    return op, op.dist_params(rv.owner)[2].owner.op


@functools.lru_cache(maxsize=None)
def _logp_fn(p: int, constant: bool, init: str):
    Y = pt.dmatrix("Y")
    rho = pt.dvector("rho")
    sigma = pt.dscalar("sigma")
    i0, i1 = pt.dscalar("i0"), pt.dscalar("i1")
    steps = pt.lscalar("steps")
    rv = pm.AR.dist(
        rho=rho, sigma=sigma, constant=constant, ar_order=p,
        init_dist=INIT[init].dist(i0, i1), steps=steps,
    )
    return pytensor.function([Y, rho, sigma, i0, i1, steps], pm.logp(rv, Y), on_unused_input="ignore")


def series_logp(Y, p, constant, rho, sigma, init, init_args):
    """``pm.logp`` of each row of ``Y`` (one whole series per row)."""
    Y = np.atleast_2d(np.asarray(Y, dtype=float))
    fn = _logp_fn(p, constant, init)
    return fn(Y, np.asarray(rho, float), float(sigma), float(init_args[0]), float(init_args[1]), Y.shape[1] - p)


def rule_L(p, constant, T, rho, sigma, domain, init="normal", init_args=(0.0, 10.0), xp=NP):
    op, init_op = ar_ops(p, constant, init)
    params = (
        Bounds.point(np.asarray(rho, float)),
        Bounds.point(sigma),
        Nested(init_op, (Bounds.point(init_args[0]), Bounds.point(init_args[1]))),
        Bounds.point(T - p),
    )
    return element_lipschitz(op, domain, params, xp)


def brute_L(p, constant, T, rho, sigma, a, b, t, init="normal", init_args=(0.0, 10.0), *,
            n_grid=7, n_x=161, top=24, zooms=2, seed=0):
    """Attained ``max |Delta log p(series)|`` over neighbouring series that differ at ``t``."""
    rng = np.random.default_rng(seed)
    base = rng.uniform(a, b, T)
    others = [s for s in range(max(0, t - p), min(T, t + p + 1)) if s != t]
    cfgs = np.array(list(itertools.product(np.linspace(a, b, n_grid), repeat=len(others))))
    cfgs = cfgs.reshape(len(cfgs), len(others))

    def ll(cfg_rows, xs):  # (n_cfg, k), (n_x,) -> (n_cfg, n_x)
        n_c, n_x_ = len(cfg_rows), len(xs)
        Y = np.repeat(base[None, :], n_c * n_x_, axis=0)
        if others:
            Y[:, others] = np.repeat(cfg_rows, n_x_, axis=0)
        Y[:, t] = np.tile(xs, n_c)
        return series_logp(Y, p, constant, rho, sigma, init, init_args).reshape(n_c, n_x_)

    xs = np.linspace(a, b, n_x)
    vals = ll(cfgs, xs)
    coarse = vals.max(axis=1) - vals.min(axis=1)
    best = -np.inf
    for k in np.argsort(coarse)[::-1][:top]:
        cfg = cfgs[k : k + 1]
        ext = []
        for sign in (1.0, -1.0):
            g = xs
            v = sign * ll(cfg, g)[0]
            e = float(v.max())
            for _ in range(zooms):
                i = int(np.argmax(v))
                g = np.linspace(g[max(i - 1, 0)], g[min(i + 1, len(g) - 1)], n_x)
                v = sign * ll(cfg, g)[0]
                e = max(e, float(v.max()))
            ext.append(sign * e)
        best = max(best, ext[0] - ext[1])
    return best


# --------------------------------------------------------------------------- wiring


def test_rule_registered_with_pymc_parameter_order():
    op, _ = ar_ops(2, True)
    rv = pm.AR.dist(rho=[0.1, 0.2, 0.3], sigma=1.0, constant=True, init_dist=pm.Normal.dist(0, 10), steps=4)
    info = rule_info(op)
    assert info.family == "AR"
    assert info.param_names == ("rho", "sigma", "init_dist", "steps")
    assert len(op.dist_params(rv.owner)) == 4
    assert info.range_params == frozenset()


def test_pymc_convention_constant_first_then_lag_one():
    """The convention the rule relies on: with constant=True, rho[0] is the constant and rho[i]
    multiplies y_{t-i}; without, rho[i-1] multiplies y_{t-i} (PyMC's logp, checked on a
    series)."""
    y = np.array([0.3, -0.2, 0.5, 0.1, -0.4, 0.7])
    for constant, rho in ((True, [0.4, 0.6, -0.3]), (False, [0.6, -0.3])):
        got = series_logp(y, 2, constant, rho, 0.7, "normal", (0.1, 2.0))[0]
        c = rho[0] if constant else 0.0
        r1, r2 = rho[-2:]
        want = sum(-0.5 * ((y[s] - 0.1) / 2.0) ** 2 - np.log(2.0 * np.sqrt(2 * np.pi)) for s in range(2))
        for s in range(2, 6):
            m = c + r1 * y[s - 1] + r2 * y[s - 2]
            want += -0.5 * ((y[s] - m) / 0.7) ** 2 - np.log(0.7 * np.sqrt(2 * np.pi))
        assert got == pytest.approx(want, rel=1e-12)


def test_log_density_range_refused():
    op, init_op = ar_ops(1, False)
    params = (Bounds.point(np.array([0.5])), Bounds.point(1.0), Nested(init_op, (Bounds.point(0.0), Bounds.point(10.0))), Bounds.point(4))
    with pytest.raises(UnsupportedFactorError, match="element_lipschitz"):
        log_density_range(op, Interval(-1, 1), params, NP)


def test_output_shape_and_classes():
    """One value per time point; the interior points share one value, the first p and the last
    p points differ (fewer later terms)."""
    L = rule_L(2, False, 12, [0.5, -0.3], 1.0, Interval(-1, 1))
    assert L.shape == (12,)
    assert np.all(L[4:10] == L[4])
    assert L[10] < L[4] and L[11] < L[10]


# --------------------------------------------------------------------------- exactness vs PyMC

EXACT_CASES = [
    # p, constant, T, rho, sigma, (a, b), init_args (Normal)
    (1, False, 6, [0.5], 1.0, (-1.0, 1.0), (0.0, 10.0)),
    (1, False, 7, [-1.3], 0.7, (0.0, 1.0), (0.0, 10.0)),
    (1, True, 6, [2.0, -2.0], 1.0, (0.0, 1.0), (0.5, 2.0)),  # vertex inside, plateau
    (1, True, 8, [-0.4, 0.9], 0.5, (1.0, 3.0), (2.0, 1.0)),
    (2, False, 7, [0.6, -0.3], 1.0, (-1.0, 1.0), (0.0, 10.0)),
    (2, True, 8, [0.3, 1.2, -0.5], 0.8, (-2.0, 0.5), (0.0, 10.0)),
    (2, True, 6, [1.0, -0.7, 0.4], 2.0, (0.5, 1.0), (0.3, 0.5)),  # narrow domain, strong init
    (2, False, 5, [0.2, 0.9], 0.3, (-1.0, 2.0), (1.0, 3.0)),  # T < 2p + 1
]


def _case_id(c):
    p, const, T, rho, sigma, dom, init = c
    return f"p{p}{'c' if const else ''}-T{T}-rho{rho}-s{sigma}-[{dom[0]},{dom[1]}]-N{init}"


RATIOS: dict[str, float] = {}


@pytest.mark.parametrize("case", EXACT_CASES, ids=[_case_id(c) for c in EXACT_CASES])
def test_exact_against_pymc_whole_series(case):
    p, constant, T, rho, sigma, (a, b), init_args = case
    L = rule_L(p, constant, T, rho, sigma, Interval(a, b), "normal", init_args)
    for t in range(T):  # start, middle and end
        brute = brute_L(p, constant, T, rho, sigma, a, b, t, "normal", init_args, seed=t)
        assert L[t] >= brute - FLOAT_SLACK * (1 + brute), f"t={t}: rule {L[t]} below attained {brute}"
        assert L[t] == pytest.approx(brute, abs=GRID_TOL * (1 + brute), rel=0), f"t={t}"


LAPLACE_CASES = [
    (1, False, 6, [0.5], 1.0, (-1.0, 1.0), (0.0, 2.0)),
    (2, True, 7, [0.3, 0.8, -0.4], 0.7, (0.0, 2.0), (1.0, 0.5)),
]


@pytest.mark.parametrize("case", LAPLACE_CASES, ids=[_case_id(c) for c in LAPLACE_CASES])
def test_other_init_dist_is_a_sound_bound(case):
    """A non-Normal init_dist (Laplace) through its own rule, added to the exact innovation part:
    never below the brute force, equal to it past the init terms, and at most the init
    constant above it at the init points."""
    p, constant, T, rho, sigma, (a, b), init_args = case
    L = rule_L(p, constant, T, rho, sigma, Interval(a, b), "laplace", init_args)
    init_L = (b - a) / init_args[1]  # Laplace(mu, s) on [a, b]: at most (b - a) / s
    for t in range(T):
        brute = brute_L(p, constant, T, rho, sigma, a, b, t, "laplace", init_args, seed=t)
        assert L[t] >= brute - FLOAT_SLACK * (1 + brute)
        if t >= p:
            assert L[t] == pytest.approx(brute, abs=GRID_TOL * (1 + brute), rel=0)
        else:
            assert L[t] <= brute + init_L + 1e-9
            RATIOS[f"laplace-{_case_id(case)}-t{t}"] = L[t] / brute


def test_other_values_do_not_matter():
    """The brute force fixes the values beyond ``t +- p`` at random: they do not change the
    difference (checked with two fills)."""
    args = (2, True, 8, [0.3, 1.2, -0.5], 0.8, -2.0, 0.5, 4)
    assert brute_L(*args, seed=1) == pytest.approx(brute_L(*args, seed=2), rel=1e-12, abs=1e-12)


def test_integer_domain_is_a_sound_bound():
    """An integer domain is used through its real hull: never below the integer brute force."""
    p, T, rho, sigma = 1, 5, [0.7], 0.8
    L = rule_L(p, False, T, rho, sigma, Integers(0, 3))
    vals = np.arange(4.0)
    for t in range(T):
        Y = np.array(list(itertools.product(vals, repeat=T)))
        ll = series_logp(Y, p, False, rho, sigma, "normal", (0.0, 10.0))
        key = np.delete(Y, t, axis=1)
        _, inv = np.unique(key, axis=0, return_inverse=True)
        inv = inv.reshape(-1)
        hi = np.full(inv.max() + 1, -np.inf)
        lo = np.full(inv.max() + 1, np.inf)
        np.maximum.at(hi, inv, ll)
        np.minimum.at(lo, inv, ll)
        assert L[t] >= (hi - lo).max() - 1e-9


# --------------------------------------------------------------------------- the gain

def _normal_window_L(lo, hi, sigma, a, b):
    lo_, hi_ = normal_range(None, Interval(a, b), (Bounds(lo, hi), Bounds.point(sigma)), NP)
    return hi_ - lo_


def _interval(c, coefs, a, b):
    """``c + sum_i coefs_i [a, b]`` (interval arithmetic, exact for independent values)."""
    lo = hi = c
    for r in coefs:
        lo, hi = lo + min(r * a, r * b), hi + max(r * a, r * b)
    return lo, hi


def separate_terms_L(p, constant, T, rho, sigma, a, b, t, init_args, naive=False):
    """Baselines: the sum over the terms reading ``y_t`` of each term's own sup.

    * ``naive``: every term by the Normal range over its full mean window (``y_t`` and the other
      lags in ``[a, b]``) -- the own term's window and, for a lag term, the window including
      ``rho_j [a, b]``;
    * exact per term: the own term is a Normal whose mean is *fixed* by the other values
      (shared by both series): ``sup_{m in W}`` of the point-mean rule; a lag term ``j`` is
      ``[(d* + w_Z)^2 - max(0, d* - w_Z)^2] / (2 sigma^2)`` with ``Z = rho_j [a, b]`` (``c_Z``,
      ``w_Z`` its centre and half-width) and ``d*`` the largest distance from ``c_Z`` to the
      term's ``e = y - m_j`` in ``[a - M_hi, b - M_lo]``.
    """
    rho = np.asarray(rho, float)
    c = rho[0] if constant else 0.0
    r = rho[1:] if constant else rho
    mid, w = (a + b) / 2, (b - a) / 2
    total = 0.0
    if t < p:
        mu0, s0 = init_args
        total += _normal_window_L(mu0, mu0, s0, a, b)
    else:
        W = _interval(c, r, a, b)
        if naive:
            total += _normal_window_L(*W, sigma, a, b)
        else:  # the point-mean rule grows with |m - mid|: the far end of W
            m = W[0] if abs(W[0] - mid) >= abs(W[1] - mid) else W[1]
            total += _normal_window_L(m, m, sigma, a, b)
    for j in range(1, p + 1):
        if not (p <= t + j <= T - 1):
            continue
        if naive:
            total += _normal_window_L(*_interval(c, r, a, b), sigma, a, b)
            continue
        M = _interval(c, [r[i - 1] for i in range(1, p + 1) if i != j], a, b)
        e_lo, e_hi = a - M[1], b - M[0]
        cz, wz = r[j - 1] * mid, abs(r[j - 1]) * w
        d = max(abs(e_lo - cz), abs(e_hi - cz))
        total += ((d + wz) ** 2 - max(0.0, d - wz) ** 2) / (2 * sigma**2)
    return total


def test_lag_term_formula_exact():
    """The exact sup of one lag term (used by the per-term baseline and in the docs): brute force
    over ``(y_t, y_t', e)``."""
    rng = np.random.default_rng(3)
    for _ in range(30):
        a, b = np.sort(rng.uniform(-2, 2, 2))
        rj, sigma = rng.normal(0, 1.5), rng.uniform(0.3, 2)
        e_lo, e_hi = np.sort(rng.uniform(-3, 3, 2))
        mid, w = (a + b) / 2, (b - a) / 2
        cz, wz = rj * mid, abs(rj) * w
        d = max(abs(e_lo - cz), abs(e_hi - cz))
        formula = ((d + wz) ** 2 - max(0.0, d - wz) ** 2) / (2 * sigma**2)
        x = np.linspace(a, b, 2001)
        best = 0.0
        for e in np.linspace(e_lo, e_hi, 401):
            q = -np.square(e - rj * x) / (2 * sigma**2)
            best = max(best, q.max() - q.min())
        assert formula >= best - 1e-12
        assert formula == pytest.approx(best, rel=1e-5, abs=1e-9)


@pytest.mark.parametrize("case", EXACT_CASES[:6], ids=[_case_id(c) for c in EXACT_CASES[:6]])
def test_joint_beats_separate_terms(case):
    """joint (the rule) <= sum of exact per-term sups <= sum of Normal window ranges, at every t."""
    p, constant, T, rho, sigma, (a, b), init_args = case
    L = rule_L(p, constant, T, rho, sigma, Interval(a, b), "normal", init_args)
    for t in range(T):
        sep = separate_terms_L(p, constant, T, rho, sigma, a, b, t, init_args)
        naive = separate_terms_L(p, constant, T, rho, sigma, a, b, t, init_args, naive=True)
        assert L[t] <= sep + 1e-12 <= naive + 2e-12
        RATIOS[f"gain-{_case_id(case)}-t{t}"] = (sep / L[t], naive / L[t])


def test_gain_on_the_textbook_case():
    """AR(1), no constant, domain [-1, 1], sigma = 1, interior point: the rule is
    ``(1 + |rho|)^4 / (2 (1 + rho^2))``; separate exact terms ``(1 + 6|rho| + rho^2) / 2``; the
    Normal window range for both terms ``(1 + |rho|)^2``."""
    for r in (0.1, 0.5, 0.9, 1.5):
        L = rule_L(1, False, 6, [r], 1.0, Interval(-1, 1))[2]
        assert L == pytest.approx((1 + r) ** 4 / (2 * (1 + r * r)), rel=1e-12)
        assert separate_terms_L(1, False, 6, [r], 1.0, -1, 1, 2, (0, 10)) == pytest.approx((1 + 6 * r + r * r) / 2)
        assert separate_terms_L(1, False, 6, [r], 1.0, -1, 1, 2, (0, 10), naive=True) == pytest.approx((1 + r) ** 2)


# --------------------------------------------------------------------------- PyTensor namespace

PT_CASES = [
    (1, False, 6, np.array([0.5]), 1.0, Interval(-1, 1)),
    (2, True, 9, np.array([0.3, 1.2, -0.5]), 0.8, Interval(-2, 0.5)),
    (3, True, 5, np.array([0.1, 0.4, -0.2, 0.3]), 1.7, Interval(0, 4)),
    (2, False, 8, np.array([[0.5, -0.2], [1.1, 0.4]]), np.array([0.9, 0.3]), Interval(-1, 1)),  # batch
]


@pytest.mark.parametrize("p, constant, T, rho, sigma, domain", PT_CASES, ids=[f"p{c[0]}-T{c[2]}-{np.ndim(c[3])}d" for c in PT_CASES])
def test_pytensor_matches_numpy(p, constant, T, rho, sigma, domain):
    op, init_op = ar_ops(p, constant)
    np_L = rule_L(p, constant, T, rho, sigma, domain, "normal", (0.3, 4.0))

    def t64(v):
        return pt.as_tensor_variable(np.asarray(v, dtype="float64"))

    params = (
        Bounds.point(t64(rho)), Bounds.point(t64(sigma)),
        Nested(init_op, (Bounds.point(t64(0.3)), Bounds.point(t64(4.0)))),
        Bounds.point(pt.as_tensor_variable(np.int64(T - p))),
    )
    out = element_lipschitz(op, domain, params, PT)
    assert out.dtype == "float64"
    got = pytensor.function([], out)()
    assert got.shape == np_L.shape
    np.testing.assert_allclose(got, np_L, rtol=1e-12, atol=1e-13)


def test_batched_equals_per_series():
    rho = np.array([[0.5, -0.2], [1.1, 0.4], [-0.3, 0.0]])
    sigma = np.array([0.9, 0.3, 2.0])
    L = rule_L(2, False, 7, rho, sigma, Interval(-1, 2))
    assert L.shape == (3, 7)
    for k in range(3):
        np.testing.assert_allclose(L[k], rule_L(2, False, 7, rho[k], sigma[k], Interval(-1, 2)), rtol=1e-14)


def test_pymc_model_graph():
    """The parameters as PyMC's graph gives them (free rho and sigma, float32 constants,
    ``steps`` from the observed length): the PT expression equals the NumPy rule."""
    y = np.linspace(-0.5, 0.5, 9)
    with pm.Model() as model:
        rho = pm.Normal("rho", 0, 0.5, shape=3)
        sigma = pm.HalfNormal("sigma", 1.0)
        pm.AR("y", rho=rho, sigma=sigma, constant=True, init_dist=pm.Normal.dist(0.2, 3.0), observed=y)
    node = model["y"].owner
    op = node.op
    rho_v, sigma_v, init_v, steps_v = op.dist_params(node)
    init_params = tuple(Bounds.point(q) for q in init_v.owner.op.dist_params(init_v.owner))
    params = (Bounds.point(rho_v), Bounds.point(sigma_v), Nested(init_v.owner.op, init_params), Bounds.point(steps_v))
    out = element_lipschitz(op, Interval(-1, 1), params, PT)
    (out,) = model.replace_rvs_by_values([out])
    fn = pytensor.function([model.rvs_to_values[rho], model.rvs_to_values[sigma]], out)
    # values space: sigma is log-transformed
    got = fn(np.array([0.1, 0.6, -0.3]), np.log(0.8))
    want = rule_L(2, True, 9, [0.1, 0.6, -0.3], 0.8, Interval(-1, 1), "normal", (0.2, 3.0))
    np.testing.assert_allclose(got, want, rtol=1e-12)


# --------------------------------------------------------------------------- region rule


def _region(p, constant, T, lo, hi, s_lo, s_hi, domain, init="normal", init_args=(0.0, 10.0), **kw):
    op, init_op = ar_ops(p, constant, init)
    params = (
        Span(np.asarray(lo, float), np.asarray(hi, float)), Span(s_lo, s_hi),
        NestedRegion(init_op, (Span.point(init_args[0]), Span.point(init_args[1]))), Span.point(T - p),
    )
    if kw:
        return ar_region_lipschitz(op, domain, params, **kw)
    return region_lipschitz(op, domain, params)


def _sample_region(rng, lo, hi, s_lo, s_hi, n):
    P = len(lo)
    corners = np.array([np.where(c, hi, lo) for c in itertools.product((0, 1), repeat=P)])
    rhos = np.concatenate([corners, corners, lo + rng.random((n, P)) * (hi - lo)])
    sigmas = np.concatenate([np.full(len(corners), s_lo), np.full(len(corners), s_hi), rng.uniform(s_lo, s_hi, n)])
    return rhos, sigmas


def _per_theta(p, constant, T, rhos, sigmas, domain, init, init_args):
    return np.stack([rule_L(p, constant, T, r, s, domain, init, init_args) for r, s in zip(rhos, sigmas)])


REGION_CASES = []
_rng = np.random.default_rng(11)
for _k in range(14):
    _p = 1 + _k % 3
    _const = bool(_k % 2)
    _P = _p + int(_const)
    _c = _rng.normal(0, 1, _P) * _rng.choice([0.3, 1.0, 2.0])
    _w = _rng.uniform(0.05, 1.2, _P) * (_rng.random(_P) < 0.85)
    _slo = float(_rng.uniform(0.3, 1.5))
    _ab = tuple(np.sort(_rng.uniform(-2, 2, 2))) if _k % 4 else tuple(np.sort(_rng.uniform(0, 3, 2)))
    _init = "laplace" if _k % 5 == 4 else "normal"
    REGION_CASES.append(
        (_p, _const, int(_rng.integers(_p + 1, 3 * _p + 3)), _c - _w / 2, _c + _w / 2, _slo,
         _slo * float(_rng.choice([1.0, 1.5, 3.0])), Interval(*_ab), _init, (float(_rng.normal()), float(_rng.uniform(0.3, 3))))
    )


@pytest.mark.parametrize("case", REGION_CASES, ids=[f"r{k}-p{c[0]}{'c' if c[1] else ''}-{c[8]}" for k, c in enumerate(REGION_CASES)])
def test_region_sound_and_tight(case):
    """Soundness: no theta sampled in the region (its corners, both sigma ends, 400 random
    points) has a larger per-theta constant. Tightness: the branch and bound's witness theta lies
    in the region, the per-theta rule there gives the attained value, and the bound is within the
    requested tolerance of it (or 1e-3 when the box budget ran out)."""
    p, constant, T, lo, hi, s_lo, s_hi, domain, init, init_args = case
    rng = np.random.default_rng(0)
    op, init_op = ar_ops(p, constant, init)
    params = (
        Span(lo, hi), Span(s_lo, s_hi),
        NestedRegion(init_op, (Span.point(init_args[0]), Span.point(init_args[1]))), Span.point(T - p),
    )
    out = ar_region_search(op, domain, params)
    R = out["bound"]
    np.testing.assert_array_equal(R, region_lipschitz(op, domain, params))
    assert R.shape == (T,)
    rhos, sigmas = _sample_region(rng, lo, hi, s_lo, s_hi, 400)
    vals = _per_theta(p, constant, T, rhos, sigmas, domain, init, init_args)
    assert np.all(vals <= R * (1 + 1e-12) + 1e-12), "a sampled theta exceeds the region bound"
    for t in range(T):
        r, sg = out["rho"][t], out["sigma"][t]
        assert np.all((lo - 1e-15 <= r) & (r <= hi + 1e-15)) and s_lo <= sg <= s_hi
        at = rule_L(p, constant, T, r, sg, domain, init, init_args)[t]
        assert at == pytest.approx(out["attained"][t], rel=1e-13, abs=1e-13)
    assert np.all(out["attained"] >= vals.max(axis=0) - 1e-12)
    tol = 1e-6 if out["boxes"] < 50_000 else 1e-3
    assert np.all(R <= out["attained"] * (1 + tol) + 1e-12)
    RATIOS[f"region-{case[:3]}-boxes{out['boxes']}"] = float((R / out["attained"]).max())


def test_region_interior_maximum_in_rho():
    """AR(1) with constant 2 on [0, 1], sigma = 1: for the interior points L(rho) is 3.5 at
    rho = -2 and about 3.38 at rho = -2.5 and -1.5 -- an interior maximum, so evaluating the
    corners of a rho box would under-report; the branch and bound finds 3.5."""
    L = lambda r: rule_L(1, True, 6, [2.0, r], 1.0, Interval(0, 1), "normal", (0.0, 10.0))[2]
    assert L(-2.0) == pytest.approx(3.5, rel=1e-12)
    assert max(L(-2.5), L(-1.5)) < 3.39
    R = _region(1, True, 6, [2.0, -2.5], [2.0, -1.5], 1.0, 1.0, Interval(0, 1))
    assert R[2] >= 3.5 - 1e-12
    assert R[2] <= 3.5 * (1 + 2e-6)


def test_region_point_equals_rule():
    rho = np.array([0.3, 1.2, -0.5])
    R = _region(2, True, 8, rho, rho, 0.8, 0.8, Interval(-2, 0.5))
    np.testing.assert_allclose(R, rule_L(2, True, 8, rho, 0.8, Interval(-2, 0.5)), rtol=1e-13)


def test_region_sigma_convex_in_precision():
    """The claim behind evaluating sigma at its ends: L is convex in s = 1 / sigma^2 (a Normal
    init term makes it non-monotone in general, so both ends are needed)."""
    rng = np.random.default_rng(4)
    for _ in range(20):
        p = int(rng.integers(1, 3))
        constant = bool(rng.integers(2))
        rho = rng.normal(0, 1, p + int(constant))
        a, b = np.sort(rng.uniform(-1, 3, 2))
        init_args = (float(rng.normal(0, 2)), float(rng.uniform(0.2, 2)))
        s = np.linspace(0.05, 20, 200)
        L = np.stack([rule_L(p, constant, 2 * p + 3, rho, 1 / np.sqrt(v), Interval(a, b), "normal", init_args) for v in s])
        second = L[2:] - 2 * L[1:-1] + L[:-2]
        assert np.all(second >= -1e-9 * (1 + np.abs(L[1:-1])))


def test_region_sigma_not_monotone_with_normal_init():
    """Why sigma is evaluated at both ends rather than declared "decreasing": with a Normal
    init term the constant of an init point is not monotone in sigma (here 0.0327 at sigma = 1,
    9e-5 at 2, 0.0103 at 8). The region over [2, 8] reaches the value at 8."""
    L = lambda s: rule_L(1, False, 4, [-0.62], s, Interval(2.885, 2.9), "normal", (5.45, 1.87))[0]
    assert L(2.0) < L(4.0) < L(8.0) and L(1.0) > L(2.0)
    R = _region(1, False, 4, [-0.62], [-0.62], 2.0, 8.0, Interval(2.885, 2.9), "normal", (5.45, 1.87))
    assert R[0] == pytest.approx(L(8.0), rel=1e-12)


def test_region_with_batch():
    lo = np.array([[0.1, -0.5], [0.5, 0.0]])
    hi = np.array([[0.6, 0.2], [0.5, 0.9]])
    s_lo, s_hi = np.array([0.5, 1.0]), np.array([1.0, 1.0])
    R = _region(2, False, 6, lo, hi, s_lo, s_hi, Interval(-1, 1))
    assert R.shape == (2, 6)
    for k in range(2):
        np.testing.assert_allclose(R[k], _region(2, False, 6, lo[k], hi[k], s_lo[k], s_hi[k], Interval(-1, 1)), rtol=1e-6)


def test_region_many_lags_uses_interval_bounds():
    """Beyond 8 lags the box bounds use interval arithmetic: still sound."""
    p = 10
    lo, hi = np.full(p, -0.1), np.full(p, 0.1)
    R = _region(p, False, 14, lo, hi, 1.0, 2.0, Interval(-1, 1))
    rng = np.random.default_rng(2)
    rhos, sigmas = _sample_region(rng, lo, hi, 1.0, 2.0, 100)
    rhos, sigmas = rhos[::8], sigmas[::8]  # 2^10 corners: a subsample
    vals = _per_theta(p, False, 14, rhos, sigmas, Interval(-1, 1), "normal", (0.0, 10.0))
    assert np.all(vals <= R + 1e-12)


def test_region_is_fast():
    t0 = time.perf_counter()
    _region(3, True, 40, [-0.5, 0.2, -0.4, -0.3], [0.5, 0.9, 0.3, 0.3], 0.5, 2.0, Interval(-1, 1))
    assert time.perf_counter() - t0 < 5.0


def test_region_refusals():
    op, init_op = ar_ops(1, False)
    init = NestedRegion(init_op, (Span.point(0.0), Span.point(10.0)))
    with pytest.raises(NoRegionRule, match="rho"):
        region_lipschitz(op, Interval(-1, 1), (Window(0.0, 1.0, 0.1), Span(1.0, 2.0), init, Span.point(4)))
    with pytest.raises(NoRegionRule, match="steps"):
        region_lipschitz(op, Interval(-1, 1), (Span.point([0.5]), Span(1.0, 2.0), init, Span(4, 5)))


# --------------------------------------------------------------------------- refusals


def _params(op, init_op, rho=np.array([0.5]), sigma=1.0, init=(0.0, 10.0), steps=4):
    return [Bounds.point(rho), Bounds.point(sigma), Nested(init_op, tuple(Bounds.point(v) for v in init)), Bounds.point(steps)]


def test_private_parameters_refused():
    op, init_op = ar_ops(1, False)
    dom = Interval(-1, 1)
    for i, bad, name in ((0, Bounds(np.array([0.1]), np.array([0.3])), "rho"), (1, Bounds(0.5, 1.0), "sigma")):
        params = _params(op, init_op)
        params[i] = bad
        with pytest.raises(UnsupportedFactorError, match=name):
            element_lipschitz(op, dom, tuple(params), NP)
    params = _params(op, init_op)
    params[2] = Nested(init_op, (Bounds(-1.0, 1.0), Bounds.point(10.0)))
    with pytest.raises(UnsupportedFactorError, match="init_dist cannot read private data"):
        element_lipschitz(op, dom, tuple(params), NP)


def test_symbolic_steps_refused():
    op, init_op = ar_ops(1, False)
    params = _params(op, init_op)
    params[3] = Bounds.point(pt.lscalar("steps"))
    with pytest.raises(UnsupportedFactorError, match="constant number of steps"):
        element_lipschitz(op, Interval(-1, 1), tuple(params), PT)


def test_multivariate_refused():
    op, init_op = ar_ops(1, False)
    with pytest.raises(UnsupportedFactorError, match="multivariate AR"):
        element_lipschitz(op, Ball(1.0), tuple(_params(op, init_op)), NP)
    mv = pm.MvNormal.dist(mu=np.zeros(2), cov=np.eye(2))
    params = _params(op, init_op)
    params[2] = Nested(mv.owner.op, (Bounds.point(np.zeros(2)), Bounds.point(np.eye(2))))
    with pytest.raises(UnsupportedFactorError, match="multivariate init_dist"):
        element_lipschitz(op, Interval(-1, 1), tuple(params), NP)


def test_wrong_rho_length_refused():
    op, init_op = ar_ops(2, True)
    with pytest.raises(UnsupportedFactorError, match="expected ar_order"):
        element_lipschitz(op, Interval(-1, 1), tuple(_params(op, init_op, rho=np.array([0.1, 0.2]))), NP)


def test_random_walk_refused_with_a_pointer():
    grw = pm.GaussianRandomWalk.dist(mu=0.1, sigma=1.0, init_dist=pm.Normal.dist(0, 1), steps=5)
    rw = pm.RandomWalk.dist(innovation_dist=pm.StudentT.dist(nu=3, mu=0, sigma=1), init_dist=pm.Normal.dist(0, 1), steps=5)
    for rv in (grw, rw):
        with pytest.raises(UnsupportedFactorError, match="constant=True"):
            element_lipschitz(rv.owner.op, Interval(-1, 1), (), NP)


def test_gaussian_random_walk_as_ar_matches_pymc():
    """The pointer in the refusal is right: GaussianRandomWalk(mu, sigma) has the logp of
    AR(rho=[mu, 1], constant=True)."""
    y = np.array([[0.1, 0.4, 0.2, 0.9, 0.5, 0.6]])
    f64 = lambda v: np.asarray(v, dtype="float64")  # a Python 0.7 would be a float32 constant
    grw = pm.GaussianRandomWalk.dist(mu=f64(0.1), sigma=f64(0.7), init_dist=pm.Normal.dist(f64(0), f64(2)), steps=5)
    want = pm.logp(grw, y[0]).eval()
    got = series_logp(y, 1, True, [0.1, 1.0], 0.7, "normal", (0.0, 2.0))[0]
    assert got == pytest.approx(float(want), rel=1e-12)


# --------------------------------------------------------------------------- lagged copies


def test_detect_lagged_copies():
    y = np.arange(20.0) ** 1.5
    values = {
        "y": y[1:], "y_lag": y[:-1],  # k = 1
        "y3": y[3:], "z": np.r_[y[:-3], np.zeros(0)][: 17],
        "other": np.random.default_rng(0).normal(size=19),
        "X": np.ones((19, 2)),  # constant columns (intercepts): no series
    }
    found = detect_lagged_copies(values)
    assert ("y_lag", "y", 1) in found and ("z", "y3", 3) in found
    assert all(k >= 1 for _, _, k in found)
    assert not any("other" in (a, b) for a, b, _ in found)
    assert not any("X" in a + b for a, b, _ in found)
    s = np.random.default_rng(1).normal(size=30)
    found = detect_lagged_copies({"a": s[4:], "b": s[:-4]}, max_lag=10)
    assert found == [("b", "a", 4)]  # a[t] = b[t + 4]
    assert detect_lagged_copies({"a": s[4:], "b": s[:-4]}, max_lag=3) == []
    assert detect_lagged_copies({"a": s[:10], "b": s[:11]}) == []  # different lengths


def test_lagged_copies_in_columns_and_slices_of_any_shape():
    s = np.random.default_rng(2).normal(size=40)
    # an AR(1) as a regression on a lagged copy entered as a column: y[1:] and y[:-1, None]
    assert detect_lagged_copies({"y": s[1:], "ylag": s[:-1, None]}) == [("ylag[:, 0]", "y", 1)]
    # a design matrix holding y_{t-1} and y_{t-2} (and an intercept): within one container
    X = np.column_stack([np.ones(38), s[1:-1], s[:-2]])
    found = detect_lagged_copies({"X": X, "y": s[2:]})
    assert ("X[:, 2]", "X[:, 1]", 1) in found and ("X[:, 1]", "y", 1) in found and ("X[:, 2]", "y", 2) in found
    # a slice of a 3-D container, flattened per row; an integer copy of the same series
    cube = np.stack([np.c_[s[:-1], s[:-1] * 0.5], np.c_[s[:-1] * 2, s[:-1] + 1]], axis=1)  # (39, 2, 2)
    assert ("cube[:, 0]", "y", 1) in detect_lagged_copies({"cube": cube, "y": s[1:]})
    counts = np.random.default_rng(3).poisson(5, size=30)
    assert detect_lagged_copies({"c": counts[1:], "c_lag": counts[:-1, None].astype(float)}) == [("c_lag[:, 0]", "c", 1)]
    with pytest.raises(UnsupportedFactorError, match=r"'ylag\[:, 0\]' and 'y'.*pm.AR"):
        refuse_lagged_copies({"y": s[1:], "ylag": s[:-1, None]}, "record")
    refuse_lagged_copies({"y": s[1:], "X": np.c_[np.ones(39), s[1:] * 2.0]}, "record")  # no lagged copy


def test_regression_on_a_lagged_column_is_refused_under_record():
    y = np.random.default_rng(4).normal(size=60).cumsum() * 0.1
    with pm.Model() as model:
        ylag = pm.Data("ylag", y[:-1, None])
        rho = pm.Normal("rho", 0, 1, shape=1)
        sigma = pm.HalfNormal("sigma", 1)
        pm.Normal("obs", ylag @ rho, sigma, observed=pm.Data("y", y[1:]))
    box = pymc_dp.Box([-10.0], [10.0])
    with pytest.raises(UnsupportedFactorError, match=r"'ylag\[:, 0\]' and 'y'"):
        pymc_dp.certify(model, epsilon=10.0, draws=2, data={"y": pymc_dp.Interval(-10, 10), "ylag": box})


def test_refuse_lagged_copies():
    s = np.random.default_rng(1).normal(size=30)
    values = {"y": s[1:], "y_lag": s[:-1]}
    for unit in ("record", "attribute"):
        with pytest.raises(UnsupportedFactorError, match="pm.AR"):
            refuse_lagged_copies(values, unit)
    with pytest.raises(UnsupportedFactorError):
        refuse_lagged_copies(values, Users(max_rows=3))
    # one user owns the whole series: rows t and t + 1 always belong to the same user
    refuse_lagged_copies(values, Users(np.zeros(29, dtype=int)))
    with pytest.raises(UnsupportedFactorError):
        refuse_lagged_copies(values, Users(np.arange(29) % 2))
    refuse_lagged_copies({"y": s[1:], "x": s[1:] * 2.0}, "record")  # no lagged copy: passes


def test_report_ratios(capsys):
    """Not a check: prints the measured ratios (collected above when run in the same session)."""
    with capsys.disabled():
        for k, v in sorted(RATIOS.items()):
            print(k, v)
