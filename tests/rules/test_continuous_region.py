"""Continuous families: the new per-theta windows (LogNormal ``mu``, Gamma log-mean ``scale``)
against PyMC, and every region rule against the per-theta rule.

* Per-theta exactness: brute force over the data grid jointly with the window, ground truth
  ``pm.logp`` (helpers of ``test_rules``).
* Region soundness: random regions (offsets on either side of the data, straddling it, far away,
  one-sided and free locations; spans of every parameter), many theta sampled inside each region
  -- its corners included -- evaluated with the per-theta rule: the region value is never below
  any of them.
* Tightness: the region value is attained (to 1e-9) at the witness the derivation names.
* Limits: infinite or zero ends give the mathematical limit (a finite number checked against the
  per-theta rule evaluated near the limit, or ``+inf``).
* The modes declared in each ``RegionSpec`` (evaluated by the generic machinery of ``region.py``
  on finite regions) agree with the custom closed forms.
"""

from __future__ import annotations

import math
import zlib

import numpy as np
import pytensor
import pytensor.tensor as pt
import pytest

from pymc_dp.domains import Interval
from pymc_dp.exceptions import UnsupportedFactorError
from pymc_dp.rules import NP, PT, Bounds, Span, Window, log_density_range, region_lipschitz, rule_info
from pymc_dp.rules.region import _SPECS, NoRegionRule, RegionSpec, register_region
from tests.rules.test_rules import assert_exact, brute_range, op_of, pymc_logp

# --------------------------------------------------------------------------- helpers


def L_theta(family, domain, params):
    """The per-theta rule's ``L`` (NumPy)."""
    lo, hi = log_density_range(op_of(family), domain, params, NP)
    return np.asarray(hi - lo, dtype=float)


def region(family, domain, params):
    return np.asarray(region_lipschitz(op_of(family), domain, params), dtype=float)


def _pt(b):
    conv = lambda v: pt.as_tensor_variable(np.asarray(v, dtype="float64"))  # noqa: E731
    if b.is_point:
        return Bounds.point(conv(b.lo), b.space)
    return Bounds(conv(b.lo), conv(b.hi), b.space)


def assert_pt_matches_np(family, domain, params):
    np_lo, np_hi = log_density_range(op_of(family), domain, params, NP)
    t_lo, t_hi = log_density_range(op_of(family), domain, tuple(_pt(b) for b in params), PT)
    assert t_lo.dtype == t_hi.dtype == "float64"
    lo, hi = pytensor.function([], [t_lo, t_hi])()
    np.testing.assert_allclose(lo, np_lo, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(hi, np_hi, rtol=1e-12, atol=1e-12)


def _pts(lo, hi, n, rng):
    """``n`` values in ``[lo, hi]``: both ends and random interior points."""
    return np.concatenate([[lo, hi], rng.uniform(lo, hi, n)])


SOUND_SLACK = 1e-9


def assert_sound(reg, sampled, label=""):
    reg, sampled = float(reg), float(np.max(sampled))
    assert reg >= sampled - SOUND_SLACK * (1 + abs(sampled)), f"{label}: region {reg} < sampled {sampled}"


# --------------------------------------------------------------------------- per-theta: LogNormal mu window

LOGNORMAL_WINDOWS = [
    # (m_lo, m_hi), s, domain
    ((-0.5, 0.8), 0.6, Interval(0.5, 6.0)),  # window inside ln-domain [-0.69, 1.79]
    ((2.5, 3.5), 0.4, Interval(0.5, 6.0)),  # window right of the data
    ((-4.0, -2.0), 1.5, Interval(0.2, 3.0)),  # window left; peak m_lo - s^2 far left
    ((0.0, 2.0), 0.3, Interval(1.0, 10.0)),  # peak m_lo - s^2 = -0.09 left of ln 1 = 0
    ((1.0, 1.0), 0.5, Interval(1.0, 10.0)),  # degenerate window lo == hi
]


@pytest.mark.parametrize("mu, s, domain", LOGNORMAL_WINDOWS, ids=lambda v: str(v))
def test_lognormal_mu_window_exact(mu, s, domain):
    m_lo, m_hi = (np.float64(v) for v in mu)
    params = (Bounds(m_lo, m_hi), Bounds.point(s))
    rule = log_density_range(op_of("LogNormal"), domain, params, NP)
    axes = [("c", domain.lo, domain.hi), ("c", m_lo, m_hi) if m_hi > m_lo else ("d", [m_lo])]
    brute = brute_range(lambda x, m: pymc_logp("LogNormal", x, mu=m, sigma=s), axes)
    assert_exact(rule, brute, label="LogNormal mu window")
    assert_pt_matches_np("LogNormal", domain, params)


def test_lognormal_mu_window_point_agrees_with_point_rule():
    """A window of width 0 is the point rule."""
    dom = Interval(0.3, 7.0)
    for mu in (-2.0, 0.4, 1.2, 3.0):
        a = log_density_range(op_of("LogNormal"), dom, (Bounds.point(mu), Bounds.point(0.8)), NP)
        b = log_density_range(op_of("LogNormal"), dom, (Bounds(np.float64(mu), np.float64(mu)), Bounds.point(0.8)), NP)
        np.testing.assert_allclose(a, b, rtol=1e-14)


# --------------------------------------------------------------------------- per-theta: Gamma log-mean window

GAMMA_WINDOWS = [
    # k, (t_lo, t_hi), domain
    (2.5, (-0.5, 0.7), Interval(0.2, 5.0)),  # window inside ln-domain
    (0.6, (0.0, 1.0), Interval(0.2, 5.0)),  # k < 1: decreasing profile
    (1.0, (-1.0, 2.0), Interval(0.1, 4.0)),  # k = 1 (exponential)
    (8.0, (2.0, 3.0), Interval(0.5, 3.0)),  # window right of the data
    (5.0, (-3.0, -2.0), Interval(0.5, 3.0)),  # window left of the data: peak t_lo + ln(1-1/k) < v_lo
    (3.0, (0.3, 0.3), Interval(0.2, 5.0)),  # degenerate window
]


@pytest.mark.parametrize("k, t, domain", GAMMA_WINDOWS, ids=lambda v: str(v))
def test_gamma_log_mean_window_exact(k, t, domain):
    """``Gamma(alpha=k, beta=k / e^t)``: scale = e^t / k, brute force over (y, t)."""
    t_lo, t_hi = (np.float64(v) for v in t)
    params = (Bounds.point(k), Bounds(t_lo, t_hi, "log-mean"))
    rule = log_density_range(op_of("Gamma"), domain, params, NP)
    axes = [("c", domain.lo, domain.hi), ("c", t_lo, t_hi) if t_hi > t_lo else ("d", [t_lo])]
    brute = brute_range(lambda y, tt: pymc_logp("Gamma", y, alpha=k, beta=k / np.exp(tt)), axes)
    assert_exact(rule, brute, label="Gamma log-mean")
    assert_pt_matches_np("Gamma", domain, params)


def test_gamma_log_mean_point_equals_natural_point():
    """A log-mean point ``t`` is the natural scale ``e^t / k``."""
    dom = Interval(0.3, 4.0)
    for k in (0.5, 1.0, 2.0, 7.0):
        for t in (-1.0, 0.2, 1.5):
            a = log_density_range(op_of("Gamma"), dom, (Bounds.point(k), Bounds.point(t, "log-mean")), NP)
            b = log_density_range(op_of("Gamma"), dom, (Bounds.point(k), Bounds.point(math.exp(t) / k)), NP)
            np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-12)


def test_gamma_scale_interval_refusals():
    dom = Interval(0.5, 5.0)
    op = op_of("Gamma")
    assert "scale" in rule_info(op).range_params
    with pytest.raises(UnsupportedFactorError, match="log link"):
        log_density_range(op, dom, (Bounds.point(2.0), Bounds(1.0, 2.0)), NP)
    with pytest.raises(UnsupportedFactorError, match="logit"):
        log_density_range(op, dom, (Bounds.point(2.0), Bounds(1.0, 2.0, "logit")), NP)
    with pytest.raises(UnsupportedFactorError, match="shape"):
        log_density_range(op, dom, (Bounds(1.0, 2.0), Bounds(0.0, 1.0, "log-mean")), NP)


def test_lognormal_mu_window_refusals():
    op = op_of("LogNormal")
    with pytest.raises(UnsupportedFactorError, match="natural"):
        log_density_range(op, Interval(0.5, 5), (Bounds(0.0, 1.0, "log-mean"), Bounds.point(1.0)), NP)
    with pytest.raises(UnsupportedFactorError, match="sigma"):
        log_density_range(op, Interval(0.5, 5), (Bounds.point(0.0), Bounds(1.0, 2.0)), NP)


# --------------------------------------------------------------------------- region: location families

DOMAINS = [Interval(-1, 1), Interval(0, 3), Interval(2, 2.5)]


def _random_location(rng, domain, kind):
    """Offsets ``[o_lo, o_hi]`` anywhere relative to the data and a half-width."""
    c, w = domain.center, domain.half_width
    u = rng.uniform(-6, 6, 2) * (w + 1)
    o_lo, o_hi = c + min(u), c + max(u)
    if rng.random() < 0.2:  # a narrow interval, sometimes a point
        o_hi = o_lo + (0.0 if rng.random() < 0.5 else 0.01)
    half = 0.0 if kind == "span" else float(rng.choice([0.0, rng.uniform(0, 2 * (w + 1))]))
    return float(o_lo), float(o_hi), half


def _loc_param(kind, o_lo, o_hi, half):
    return Span(o_lo, o_hi) if kind == "span" else Window(o_lo, o_hi, half)


def _scale_span(rng):
    lo = float(np.exp(rng.uniform(-2.5, 1.5)))
    return lo, lo * float(np.exp(rng.choice([0.0, rng.uniform(0, 2)])))


def _thetas_location(rng, o_lo, o_hi, half, n=60):
    os_ = _pts(o_lo, o_hi, n, rng)
    hs = np.concatenate([[half, 0.0], rng.uniform(0, half, n)]) if half > 0 else np.zeros(n + 2)
    return os_, hs


LOC_FAMILIES = ["Normal", "Laplace", "StudentT", "Cauchy"]


def _loc_params(family, loc, scale, nu=None):
    if family == "StudentT":
        return (nu, loc, scale)
    return (loc, scale)


@pytest.mark.parametrize("kind", ["span", "window"])
@pytest.mark.parametrize("family", LOC_FAMILIES)
def test_location_region_sound_and_tight(family, kind):
    rng = np.random.default_rng(zlib.crc32(f"{family}-{kind}".encode()))
    for trial in range(40):
        domain = DOMAINS[trial % len(DOMAINS)]
        o_lo, o_hi, half = _random_location(rng, domain, kind)
        s_lo, s_hi = _scale_span(rng)
        nu_lo = float(np.exp(rng.uniform(-1, 3)))
        nu_hi = nu_lo * float(np.exp(rng.choice([0.0, rng.uniform(0, 3)])))
        nu_span = Span(nu_lo, nu_hi) if family == "StudentT" else None
        reg = region(family, domain, _loc_params(family, _loc_param(kind, o_lo, o_hi, half), Span(s_lo, s_hi), nu_span))
        assert reg.shape == () and np.isfinite(reg)
        # soundness: theta sampled inside the region, corners included
        os_, hs = _thetas_location(rng, o_lo, o_hi, half)
        best = -np.inf
        for s in _pts(s_lo, s_hi, 4, rng):
            for nu in (_pts(nu_lo, nu_hi, 3, rng) if family == "StudentT" else [None]):
                loc = Bounds(os_ - hs, os_ + hs)
                params = _loc_params(family, loc, Bounds.point(s), None if nu is None else Bounds.point(nu))
                best = max(best, float(np.max(L_theta(family, domain, params))))
        assert_sound(reg, best, f"{family} {kind} trial {trial}")
        # tightness: the witness of the derivation
        c, w = domain.center, domain.half_width
        W = w + half
        if family in ("Normal", "Laplace"):
            o_w = o_lo if abs(o_lo - c) >= abs(o_hi - c) else o_hi
            cands = [(o_w, None)]
        else:
            cands = []
            for nu in ((nu_lo, nu_hi) if family == "StudentT" else (1.0,)):
                d_star = math.sqrt(nu * s_lo**2 + W**2)
                # the offset in [o_lo, o_hi] at distance clip(d*, d_lo, d_hi) from c
                for o in (c + d_star, c - d_star, o_lo, o_hi):
                    cands.append((float(np.clip(o, o_lo, o_hi)), nu))
        vals = []
        for o, nu in cands:
            loc = Bounds(np.float64(o - half), np.float64(o + half))
            params = _loc_params(family, loc, Bounds.point(s_lo), None if nu is None else Bounds.point(nu))
            vals.append(float(L_theta(family, domain, params)))
        assert float(reg) == pytest.approx(max(vals), rel=1e-9, abs=1e-12), f"{family} {kind} trial {trial}"


@pytest.mark.parametrize("family", LOC_FAMILIES)
def test_location_region_dense_scan_of_offset(family):
    """A fine scan of the offset (the parameter whose sup is not at an end for the heavy tails)
    never exceeds the region value and reaches it."""
    dom = Interval(-1, 2)
    for o_lo, o_hi, half in [(-8.0, 8.0, 0.5), (2.5, 9.0, 0.0), (-30.0, -1.5, 1.0), (0.1, 0.4, 0.2)]:
        params_r = _loc_params(family, Window(o_lo, o_hi, half), Span(0.4, 0.9), Span(2.0, 2.0))
        reg = float(region(family, dom, params_r))
        os_ = np.linspace(o_lo, o_hi, 20001)
        params = _loc_params(family, Bounds(os_ - half, os_ + half), Bounds.point(0.4), Bounds.point(2.0))
        L = L_theta(family, dom, params)
        assert np.all(L <= reg * (1 + 1e-12) + 1e-12)
        assert L.max() == pytest.approx(reg, rel=1e-5)


def test_studentt_nu_is_at_an_end():
    """L is quasi-convex in nu for every distance (docs/theory/glm.md#studentt-nu): the region over a nu
    span equals the max over its ends, and a scan of nu never exceeds it."""
    dom = Interval(0, 2)
    rng = np.random.default_rng(3)
    for _ in range(30):
        o_lo, o_hi = sorted(rng.uniform(-6, 8, 2))
        nu_lo, nu_hi = sorted(np.exp(rng.uniform(-2, 4, 2)))
        s = float(np.exp(rng.uniform(-2, 1)))
        reg = float(region("StudentT", dom, (Span(nu_lo, nu_hi), Window(o_lo, o_hi, 0.3), Span.point(s))))
        nus = np.geomspace(nu_lo, nu_hi, 400)
        os_ = np.linspace(o_lo, o_hi, 400)
        N, O = np.meshgrid(nus, os_)
        L = L_theta("StudentT", dom, (Bounds.point(N), Bounds(O - 0.3, O + 0.3), Bounds.point(s)))
        assert L.max() <= reg * (1 + 1e-12) + 1e-12


def test_studentt_non_symmetric_window_witness():
    """Offsets on one side of the data: d_lo = dist(c, [o_lo, o_hi]) > 0 and the peak distance
    sqrt(nu sigma^2 + W^2) may fall below, inside or above [d_lo, d_hi]."""
    dom = Interval(1, 3)  # c = 2, w = 1
    nu, s, half = 3.0, 0.5, 0.25
    W = 1.25
    d_star = math.sqrt(nu * s**2 + W**2)  # 1.5207
    for o_lo, o_hi, d_hat in [
        (4.0, 6.0, 2.0),  # d* below d_lo = 2: sup at d_lo
        (2.5, 6.0, d_star),  # d* inside [0.5, 4]
        (-0.2, 0.9, d_star),  # left side, d in [1.1, 2.2]
        (2.1, 3.0, 1.0),  # d* above d_hi = 1: sup at d_hi
        (-np.inf, 1.5, d_star),  # one-sided free
    ]:
        reg = float(region("StudentT", dom, (Span.point(nu), Window(o_lo, o_hi, half), Span.point(s))))
        expect = 0.5 * (nu + 1) * math.log((nu * s**2 + (d_hat + W) ** 2) / (nu * s**2 + max(d_hat - W, 0) ** 2))
        assert reg == pytest.approx(expect, rel=1e-12)
        if np.isfinite(o_lo):
            o = 2 + d_hat if o_lo >= 2 else 2 - d_hat
            per = float(L_theta("StudentT", dom, (Bounds.point(nu), Bounds(np.float64(o - half), np.float64(o + half)), Bounds.point(s))))
            assert per == pytest.approx(reg, rel=1e-10)


# --------------------------------------------------------------------------- limits of the location families

def test_free_location_heavy_tails_are_finite():
    """A free intercept: ``(nu + 1) asinh(W / (sigma sqrt nu))`` (Cauchy ``2 asinh(W/beta)``)."""
    dom = Interval(-1, 3)  # w = 2
    for nu, s, half in [(1.0, 0.5, 0.0), (4.0, 0.3, 1.0), (30.0, 2.0, 0.5)]:
        W = 2.0 + half
        expect = (nu + 1) * math.asinh(W / (s * math.sqrt(nu)))
        for loc in (Span(-np.inf, np.inf), Window(-np.inf, np.inf, half), Window(-np.inf, 0.0, half), Window(1.0, np.inf, half)):
            if isinstance(loc, Span) and half:
                continue
            reg = float(region("StudentT", dom, (Span.point(nu), loc, Span(s, 10.0))))
            assert reg == pytest.approx(expect, rel=1e-12)
        if nu == 1.0:
            reg = float(region("Cauchy", dom, (Window(-np.inf, np.inf, half), Span(s, np.inf))))
            assert reg == pytest.approx(2 * math.asinh(W / s), rel=1e-12)


def test_location_limits_infinite_or_zero():
    dom = Interval(0, 1)
    # Normal: unbounded in the location and as sigma -> 0
    assert region("Normal", dom, (Span(-np.inf, 0.0), Span(1.0, 2.0))) == np.inf
    assert region("Normal", dom, (Window(0.0, np.inf, 0.5), Span(1.0, 2.0))) == np.inf
    assert region("Normal", dom, (Window(0.0, 1.0, 0.5), Span(0.0, 2.0))) == np.inf
    # sigma_hi = inf is irrelevant
    assert region("Normal", dom, (Span(0.2, 0.3), Span(0.5, np.inf))) == region("Normal", dom, (Span(0.2, 0.3), Span(0.5, 0.5)))
    # Laplace: bounded in the location, 2 W / b
    assert float(region("Laplace", dom, (Window(-np.inf, np.inf, 0.25), Span(0.5, 1.0)))) == pytest.approx(2 * 0.75 / 0.5)
    assert region("Laplace", dom, (Span(0.0, 1.0), Span(0.0, 1.0))) == np.inf
    # StudentT, sigma_lo = 0: +inf when the peak distance is reachable ...
    assert region("StudentT", dom, (Span.point(3.0), Span(0.0, 1.0), Span(0.0, 1.0))) == np.inf
    # ... and the finite limit (nu+1) ln((d+W)/(d-W)) when the location stays away from the data
    reg = float(region("StudentT", dom, (Span.point(3.0), Span(3.0, 4.0), Span(0.0, 1.0))))
    d, W = 2.5, 0.5
    assert reg == pytest.approx(4 * math.log((d + W) / (d - W)), rel=1e-12)
    near = float(L_theta("StudentT", dom, (Bounds.point(3.0), Bounds.point(3.0), Bounds.point(1e-7))))
    assert near == pytest.approx(reg, rel=1e-9) and near <= reg
    # nu_hi = inf: the Normal limit, unbounded in the location
    reg = float(region("StudentT", dom, (Span(2.0, np.inf), Span(-1.0, 2.0), Span(0.5, 1.0))))
    normal = float(region("Normal", dom, (Span(-1.0, 2.0), Span(0.5, 1.0))))
    assert reg == pytest.approx(max(normal, float(region("StudentT", dom, (Span.point(2.0), Span(-1.0, 2.0), Span(0.5, 1.0))))))
    big = float(L_theta("StudentT", dom, (Bounds.point(1e9), Bounds.point(-1.0), Bounds.point(0.5))))
    assert big <= reg and big == pytest.approx(normal, rel=1e-6)
    assert region("StudentT", dom, (Span(2.0, np.inf), Span(-np.inf, 2.0), Span(0.5, 1.0))) == np.inf
    # a location region at infinity is refused
    with pytest.raises(NoRegionRule, match="infinity"):
        region("StudentT", dom, (Span.point(3.0), Span(np.inf, np.inf), Span(1.0, 1.0)))


def test_location_region_vectorised():
    dom = Interval(-1, 1)
    o_lo, o_hi = np.array([-3.0, 0.0, 2.0, -np.inf]), np.array([-2.0, 0.5, 6.0, np.inf])
    half = np.array([0.0, 0.3, 1.0, 0.2])
    s_lo = np.array([0.3, 0.5, 1.0, 2.0])
    for family in ("StudentT", "Cauchy", "Laplace", "Normal"):
        nu = Span(np.array([1.0, 2.0, 5.0, 3.0]), np.array([1.5, 2.0, 50.0, 4.0]))
        vec = region(family, dom, _loc_params(family, Window(o_lo, o_hi, half), Span(s_lo, s_lo * 2), nu))
        assert vec.shape == (4,)
        for i in range(4):
            nu_i = Span(nu.lo[i], nu.hi[i])
            one = region(family, dom, _loc_params(family, Window(o_lo[i], o_hi[i], half[i]), Span(s_lo[i], 2 * s_lo[i]), nu_i))
            assert vec[i] == pytest.approx(float(one), rel=1e-14) or (vec[i] == one == np.inf)


# --------------------------------------------------------------------------- region: Exponential, Gamma, Beta, LogNormal

def test_exponential_region():
    dom = Interval(0.5, 4.0)
    rng = np.random.default_rng(1)
    for _ in range(20):
        s_lo, s_hi = _scale_span(rng)
        reg = float(region("Exponential", dom, (Span(s_lo, s_hi),)))
        vals = L_theta("Exponential", dom, (Bounds.point(_pts(s_lo, s_hi, 50, rng)),))
        assert_sound(reg, vals)
        assert reg == pytest.approx(float(L_theta("Exponential", dom, (Bounds.point(s_lo),))), rel=1e-12)
    assert region("Exponential", dom, (Span(0.0, 1.0),)) == np.inf


def _corner_max(family, domain, per_param_ends, build):
    import itertools

    return max(float(np.max(L_theta(family, domain, build(*c)))) for c in itertools.product(*per_param_ends))


def test_gamma_natural_region_sound_and_tight():
    rng = np.random.default_rng(11)
    for trial in range(40):
        dom = Interval(float(np.exp(rng.uniform(-3, 0))), float(np.exp(rng.uniform(0.1, 2.5))))
        k_lo = float(np.exp(rng.uniform(-1.5, 2.5)))
        k_hi = k_lo * float(np.exp(rng.choice([0.0, rng.uniform(0, 2)])))
        th_lo, th_hi = _scale_span(rng)
        reg = float(region("Gamma", dom, (Span(k_lo, k_hi), Span(th_lo, th_hi))))
        K, T = np.meshgrid(_pts(k_lo, k_hi, 30, rng), _pts(th_lo, th_hi, 30, rng))
        assert_sound(reg, L_theta("Gamma", dom, (Bounds.point(K), Bounds.point(T))), f"trial {trial}")
        corner = _corner_max("Gamma", dom, [(k_lo, k_hi), (th_lo, th_hi)], lambda k, t: (Bounds.point(k), Bounds.point(t)))
        assert reg == pytest.approx(corner, rel=1e-9)


def test_gamma_log_mean_region_sound_and_tight():
    """Gamma regression: shape span x log-mean window, docs/theory/glm.md#gamma-regression."""
    rng = np.random.default_rng(12)
    for trial in range(40):
        dom = Interval(float(np.exp(rng.uniform(-3, 0))), float(np.exp(rng.uniform(0.1, 2.5))))
        k_lo = float(np.exp(rng.uniform(-1.5, 2.5)))
        k_hi = k_lo * float(np.exp(rng.choice([0.0, rng.uniform(0, 2)])))
        o_lo, o_hi = sorted(rng.uniform(-4, 4, 2))
        half = float(rng.choice([0.0, rng.uniform(0, 1.5)]))
        reg = float(region("Gamma", dom, (Span(k_lo, k_hi), Window(o_lo, o_hi, half, "log-mean"))))
        os_, hs = _thetas_location(rng, o_lo, o_hi, half, n=40)
        best = -np.inf
        for k in _pts(k_lo, k_hi, 6, rng):
            L = L_theta("Gamma", dom, (Bounds.point(k), Bounds(os_ - hs, os_ + hs, "log-mean")))
            best = max(best, float(L.max()))
        assert_sound(reg, best, f"trial {trial}")
        # dense scan of the offset at the corner shapes (the lemma-C claim)
        os_fine = np.linspace(o_lo, o_hi, 4001)
        for k in (k_lo, k_hi):
            L = L_theta("Gamma", dom, (Bounds.point(k), Bounds(os_fine - half, os_fine + half, "log-mean")))
            assert L.max() <= reg * (1 + 1e-12) + 1e-12
        corner = _corner_max(
            "Gamma", dom, [(k_lo, k_hi), (o_lo, o_hi)],
            lambda k, o: (Bounds.point(k), Bounds(np.float64(o - half), np.float64(o + half), "log-mean")),
        )
        assert reg == pytest.approx(corner, rel=1e-9)


def test_gamma_region_limits():
    dom = Interval(0.5, 4.0)
    vlen = math.log(8.0)
    # scale_hi = inf: |k - 1| ln(b/a), the theta -> inf limit
    reg = float(region("Gamma", dom, (Span.point(3.0), Span(50.0, np.inf))))
    assert reg == pytest.approx(max(2 * vlen, float(L_theta("Gamma", dom, (Bounds.point(3.0), Bounds.point(50.0))))))
    far = float(L_theta("Gamma", dom, (Bounds.point(3.0), Bounds.point(1e9))))
    assert far <= reg and far == pytest.approx(2 * vlen, rel=1e-6)
    assert region("Gamma", dom, (Span.point(3.0), Span(0.0, 1.0))) == np.inf
    assert region("Gamma", dom, (Span(1.0, np.inf), Span(1.0, 2.0))) == np.inf
    # log-mean window: o_hi = inf gives |k-1| ln(b/a) + 2 k half; o_lo = -inf gives inf
    half = 0.3
    reg = float(region("Gamma", dom, (Span.point(2.0), Window(40.0, np.inf, half, "log-mean"))))
    assert reg == pytest.approx(vlen + 4 * half, rel=1e-12)
    far = float(L_theta("Gamma", dom, (Bounds.point(2.0), Bounds(np.float64(60 - half), np.float64(60 + half), "log-mean"))))
    assert far <= reg and far == pytest.approx(reg, rel=1e-9)
    assert region("Gamma", dom, (Span.point(2.0), Window(-np.inf, 0.0, half, "log-mean"))) == np.inf
    with pytest.raises(NoRegionRule, match="log-mean"):
        region("Gamma", dom, (Span.point(2.0), Window(0.0, 1.0, 0.1)))


def test_beta_region_sound_and_tight():
    rng = np.random.default_rng(13)
    for trial in range(40):
        lo = float(rng.uniform(0.01, 0.5))
        dom = Interval(lo, float(rng.uniform(lo + 0.05, 0.99)))
        spans = []
        for _ in range(2):
            v = float(np.exp(rng.uniform(-2, 2.5)))
            spans.append((v, v * float(np.exp(rng.choice([0.0, rng.uniform(0, 2)])))))
        reg = float(region("Beta", dom, (Span(*spans[0]), Span(*spans[1]))))
        A, B = np.meshgrid(_pts(*spans[0], 30, rng), _pts(*spans[1], 30, rng))
        assert_sound(reg, L_theta("Beta", dom, (Bounds.point(A), Bounds.point(B))), f"trial {trial}")
        corner = _corner_max("Beta", dom, spans, lambda a, b: (Bounds.point(a), Bounds.point(b)))
        assert reg == pytest.approx(corner, rel=1e-9)
    dom = Interval(0.1, 0.8)
    assert region("Beta", dom, (Span(1.0, np.inf), Span(1.0, 2.0))) == np.inf
    # alpha_lo = 0: a finite limit
    reg = float(region("Beta", dom, (Span(0.0, 1.0), Span.point(2.0))))
    near = float(L_theta("Beta", dom, (Bounds.point(1e-9), Bounds.point(2.0))))
    assert near <= reg * (1 + 1e-9) and near == pytest.approx(reg, rel=1e-6)


def test_lognormal_region_sound_and_tight():
    rng = np.random.default_rng(14)
    for trial in range(40):
        dom = Interval(float(np.exp(rng.uniform(-3, 0))), float(np.exp(rng.uniform(0.1, 2.5))))
        kind = "span" if trial % 2 else "window"
        o_lo, o_hi = sorted(rng.uniform(-4, 4, 2))
        half = 0.0 if kind == "span" else float(rng.choice([0.0, rng.uniform(0, 1.5)]))
        s_lo, s_hi = _scale_span(rng)
        reg = float(region("LogNormal", dom, (_loc_param(kind, o_lo, o_hi, half), Span(s_lo, s_hi))))
        os_, hs = _thetas_location(rng, o_lo, o_hi, half, n=40)
        best = -np.inf
        for s in _pts(s_lo, s_hi, 8, rng):
            best = max(best, float(L_theta("LogNormal", dom, (Bounds(os_ - hs, os_ + hs), Bounds.point(s))).max()))
        assert_sound(reg, best, f"trial {trial}")
        S, O = np.meshgrid(np.geomspace(s_lo, s_hi, 300), np.linspace(o_lo, o_hi, 300))
        L = L_theta("LogNormal", dom, (Bounds(O - half, O + half), Bounds.point(S)))
        assert L.max() <= reg * (1 + 1e-12) + 1e-12
        corner = _corner_max(
            "LogNormal", dom, [(o_lo, o_hi), (s_lo, s_hi)],
            lambda o, s: (Bounds(np.float64(o - half), np.float64(o + half)), Bounds.point(s)),
        )
        assert reg == pytest.approx(corner, rel=1e-9)


def test_lognormal_region_limits():
    dom = Interval(0.5, 6.0)
    reg = float(region("LogNormal", dom, (Span(0.0, 1.0), Span(2.0, np.inf))))
    at2 = float(L_theta("LogNormal", dom, (Bounds(np.float64(0.0), np.float64(1.0)), Bounds.point(2.0))))
    assert reg == pytest.approx(max(at2, math.log(12.0)), rel=1e-12)
    far = float(L_theta("LogNormal", dom, (Bounds.point(0.5), Bounds.point(1e6))))
    assert far <= reg and far == pytest.approx(math.log(12.0), rel=1e-6)
    assert region("LogNormal", dom, (Span(0.0, 1.0), Span(0.0, 1.0))) == np.inf
    assert region("LogNormal", dom, (Span(-np.inf, 1.0), Span(1.0, 2.0))) == np.inf


# --------------------------------------------------------------------------- declared modes == custom

class _Declared:
    """Evaluate a family's declared modes with the generic machinery of ``region.py``: register
    its ``RegionSpec`` without the custom function on a test-only subclass of the Op."""

    def __init__(self, family):
        op = op_of(family)
        spec = _SPECS[type(op)]
        self.shadow_type = type(f"_Declared{family}", (type(op),), {})
        register_region(self.shadow_type, RegionSpec(window=spec.window, params=dict(spec.params)))
        self.op = self.shadow_type.__new__(self.shadow_type)
        self.op.__dict__.update(op.__dict__)

    def __call__(self, domain, params):
        return np.asarray(region_lipschitz(self.op, domain, params), dtype=float)


DECLARED_CASES = [
    ("Normal", Interval(-1, 1), (Window(-2.0, 0.5, 0.3), Span(0.4, 2.0))),
    ("Normal", Interval(-1, 1), (Span(1.5, 4.0), Span(0.7, 0.7))),
    ("Laplace", Interval(0, 2), (Window(-1.0, 5.0, 0.5), Span(0.3, 1.0))),
    ("Laplace", Interval(0, 2), (Span(0.5, 0.9), Span(0.3, 1.0))),
    ("Exponential", Interval(0, 3), (Span(0.2, 5.0),)),
    ("Gamma", Interval(0.2, 5), (Span(0.5, 4.0), Span(0.3, 3.0))),
    ("Gamma", Interval(0.2, 5), (Span(0.5, 4.0), Window(-1.0, 2.0, 0.4, "log-mean"))),
    ("Beta", Interval(0.05, 0.9), (Span(0.4, 3.0), Span(1.5, 6.0))),
    ("LogNormal", Interval(0.5, 6), (Window(-1.0, 2.5, 0.3), Span(0.3, 1.5))),
    ("LogNormal", Interval(0.5, 6), (Span(-1.0, 2.5), Span(0.3, 1.5))),
]


@pytest.mark.parametrize("family, domain, params", DECLARED_CASES, ids=[f"{c[0]}-{i}" for i, c in enumerate(DECLARED_CASES)])
def test_declared_modes_equal_custom(family, domain, params):
    declared = _Declared(family)(domain, params)
    custom = region(family, domain, params)
    assert float(custom) == pytest.approx(float(declared), rel=1e-10)


# --------------------------------------------------------------------------- refusals

def test_region_refusals():
    dom = Interval(-1, 1)
    with pytest.raises(NoRegionRule, match="sigma"):
        region("Normal", dom, (Span(0.0, 1.0), Window(1.0, 2.0, 0.1)))
    with pytest.raises(NoRegionRule, match="natural"):
        region("Normal", dom, (Window(0.0, 1.0, 0.1, "logit"), Span(1.0, 2.0)))
    with pytest.raises(NoRegionRule, match="nu"):
        region("StudentT", dom, (Window(1.0, 2.0, 0.1), Span(0.0, 1.0), Span(1.0, 2.0)))
    with pytest.raises(NoRegionRule, match="empty"):
        region("Laplace", dom, (Span(1.0, 0.0), Span(1.0, 2.0)))
    with pytest.raises(NoRegionRule, match="empty"):
        region("Cauchy", dom, (Window(0.0, 1.0, -0.5), Span(1.0, 2.0)))
    with pytest.raises(NoRegionRule, match="sigma"):
        region("LogNormal", Interval(0.5, 2), (Span(0.0, 1.0), Window(1.0, 2.0, 0.1)))


def test_non_sliding_window_uses_its_hull():
    """A Window with ``sliding=False`` (a table's hull, a link of a window) is one fixed window
    ``[o_lo - half, o_hi + half]``, whatever the family's modes say."""
    dom = Interval(-1, 1)
    for family in LOC_FAMILIES:
        nu = Span.point(3.0)
        fixed = region(family, dom, _loc_params(family, Window(-2.0, 3.0, 0.5, sliding=False), Span(0.5, 1.0), nu))
        hull = region(family, dom, _loc_params(family, Window(0.5, 0.5, 3.0), Span(0.5, 1.0), nu))
        sliding = region(family, dom, _loc_params(family, Window(-2.0, 3.0, 0.5), Span(0.5, 1.0), nu))
        assert float(fixed) == pytest.approx(float(hull), rel=1e-14)
        assert float(fixed) >= float(sliding) - 1e-12
        free = region(family, dom, _loc_params(family, Window(-np.inf, 3.0, 0.5, sliding=False), Span(0.5, 1.0), nu))
        assert free == np.inf
    fixed = region("LogNormal", Interval(0.5, 4), (Window(-1.0, 1.0, 0.2, sliding=False), Span(0.5, 1.0)))
    hull = region("LogNormal", Interval(0.5, 4), (Window(0.0, 0.0, 1.2), Span(0.5, 1.0)))
    assert float(fixed) == pytest.approx(float(hull), rel=1e-14)
    fixed = region("Gamma", Interval(0.5, 4), (Span(1.0, 3.0), Window(-1.0, 1.0, 0.2, "log-mean", sliding=False)))
    hull = region("Gamma", Interval(0.5, 4), (Span(1.0, 3.0), Window(0.0, 0.0, 1.2, "log-mean")))
    assert float(fixed) == pytest.approx(float(hull), rel=1e-14)
