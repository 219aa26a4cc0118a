"""Continuous regressions on private covariates: the exponential (AFT) regression with a log
link of its scale, ``pm.Gamma(alpha=1, ...)`` read as that exponential, and their region rules
(issue 32, item 4).

Ground truth is PyMC's own ``pm.logp`` (``pymc_logp`` of ``test_rules``), brute-forced jointly
over the data and the linear predictor's window; region rules are checked against the per-theta
rule at many parameter values inside random regions (ends included, dense scans of the offset)
and are tight at the corners the derivations name.
"""

from __future__ import annotations

import numpy as np
import pytest

from pymc_dp.domains import Interval
from pymc_dp.exceptions import DomainError
from pymc_dp.rules import NP, Bounds, Span, Window, log_density_range, region_lipschitz
from pymc_dp.rules.continuous import is_constant_one
from tests.rules.test_continuous_region import assert_pt_matches_np, assert_sound
from tests.rules.test_rules import assert_exact, brute_range, op_of, pymc_logp


def L_theta(family, domain, params):
    lo, hi = log_density_range(op_of(family), domain, params, NP)
    return np.asarray(hi - lo, dtype=float)


def region(family, domain, params):
    return float(np.max(region_lipschitz(op_of(family), domain, params)))


# --------------------------------------------------------------------------- exponential regression

EXP_WINDOWS = [
    # (t_lo, t_hi) of t = ln scale = eta, domain of the survival time
    ((-0.5, 0.7), Interval(0.0, 5.0)),  # the domain starts at 0 (the usual survival domain)
    ((-0.5, 0.7), Interval(0.2, 5.0)),  # ln a = -1.6 left of the window: top at t_lo
    ((-3.0, 1.0), Interval(0.2, 5.0)),  # ln a inside the window: top at t = ln a
    ((1.5, 3.0), Interval(0.0, 2.0)),  # a long mean, short times
    ((-2.0, -2.0), Interval(0.1, 3.0)),  # degenerate window: the point rule
]


@pytest.mark.parametrize("t, domain", EXP_WINDOWS, ids=lambda v: str(v))
def test_exponential_log_mean_window_exact(t, domain):
    """``pm.Exponential(scale=exp(eta))`` and ``lam=exp(-eta)``: brute force over (time, eta)."""
    t_lo, t_hi = (np.float64(v) for v in t)
    params = (Bounds(t_lo, t_hi, "log-mean"),)
    rule = log_density_range(op_of("Exponential"), domain, params, NP)
    axes = [("c", domain.lo, domain.hi), ("c", t_lo, t_hi) if t_hi > t_lo else ("d", [t_lo])]
    for kw in (lambda e: {"scale": np.exp(e)}, lambda e: {"lam": np.exp(-e)}):
        brute = brute_range(lambda y, e, kw=kw: pymc_logp("Exponential", y, **kw(e)), axes)
        assert_exact(rule, brute, label="Exponential log-mean")
    assert_pt_matches_np("Exponential", domain, params)


def test_exponential_log_mean_point_equals_natural_point():
    dom = Interval(0.0, 4.0)
    for t in (-1.0, 0.0, 2.5):
        a = log_density_range(op_of("Exponential"), dom, (Bounds.point(np.float64(t), "log-mean"),), NP)
        b = log_density_range(op_of("Exponential"), dom, (Bounds.point(np.exp(t)),), NP)
        np.testing.assert_allclose(a, b, rtol=1e-13, atol=1e-13)


@pytest.mark.parametrize("t, domain", EXP_WINDOWS[:4], ids=lambda v: str(v))
def test_gamma_shape_one_is_the_exponential(t, domain):
    """``pm.Gamma(alpha=1, beta=exp(-eta))`` (and ``beta = 1 / mu``): the exponential rule, on
    a domain starting at 0 too; brute force against PyMC's Gamma logp."""
    t_lo, t_hi = (np.float64(v) for v in t)
    one = np.float64(1.0)
    for shape in (one, np.ones(3)):
        params = (Bounds.point(shape), Bounds(t_lo, t_hi, "log-mean"))
        lo, hi = log_density_range(op_of("Gamma"), domain, params, NP)
        axes = [("c", domain.lo, domain.hi), ("c", t_lo, t_hi)]
        brute = brute_range(lambda y, e: pymc_logp("Gamma", y, alpha=1.0, beta=np.exp(-e)), axes)
        for i in range(np.size(lo)):
            assert_exact((np.ravel(lo)[i], np.ravel(hi)[i]), brute, label="Gamma(alpha=1)")
    assert_pt_matches_np("Gamma", domain, (Bounds.point(one), Bounds(t_lo, t_hi, "log-mean")))


def test_gamma_at_zero_needs_the_constant_shape_one():
    dom = Interval(0.0, 3.0)
    for shape in (np.float64(2.0), np.array([1.0, 1.5])):
        with pytest.raises(DomainError, match="shape is not the constant 1"):
            log_density_range(op_of("Gamma"), dom, (Bounds.point(shape), Bounds.point(np.float64(1.0))), NP)
    with pytest.raises(DomainError, match="shape is not the constant 1"):
        region_lipschitz(op_of("Gamma"), dom, (Span(0.9, 1.0), Span(1.0, 2.0)))
    assert is_constant_one(np.ones(4)) and not is_constant_one(np.array([1.0, 2.0]))


def _windows(rng, o_lo, o_hi, half, n):
    """Offsets in ``[o_lo, o_hi]`` (ends included) and half-widths in ``[0, half]`` (``half``
    included): parameter values inside the region."""
    os_ = np.concatenate([[o_lo, o_hi, o_lo, o_hi], rng.uniform(o_lo, o_hi, n)])
    hs = np.concatenate([[half, half, 0.0, 0.0], rng.uniform(0.0, half, n)])
    return os_, hs


@pytest.mark.parametrize("family", ["Exponential", "Gamma"])
def test_exponential_log_mean_region_sound_and_tight(family):
    """Window "ends" (every pair difference is affine in ``e^-o``) with ``h = half``: never below
    the per-theta rule inside the region, dense offset scans included, and equal to the larger
    end window. The Gamma with shape 1 on a domain from 0 is the same rule."""
    rng = np.random.default_rng(32)
    for trial in range(30):
        dom = Interval(float(rng.choice([0.0, rng.uniform(0.01, 1.0)])), float(rng.uniform(1.5, 8.0)))
        o_lo, o_hi = sorted(rng.uniform(-3, 4, 2))
        half = float(rng.choice([0.0, rng.uniform(0, 2.0)]))
        win = Window(o_lo, o_hi, half, "log-mean")
        params = (win,) if family == "Exponential" else (Span.point(1.0), win)
        reg = region(family, dom, params)
        os_, hs = _windows(rng, o_lo, o_hi, half, 200)
        inner = Bounds(os_ - hs, os_ + hs, "log-mean")
        vals = L_theta(family, dom, (inner,) if family == "Exponential" else (Bounds.point(1.0), inner))
        assert_sound(reg, vals, f"trial {trial}")
        fine = np.linspace(o_lo, o_hi, 2001)
        dense = Bounds(fine - half, fine + half, "log-mean")
        dense_L = L_theta(family, dom, (dense,) if family == "Exponential" else (Bounds.point(1.0), dense))
        assert dense_L.max() <= reg * (1 + 1e-12) + 1e-12
        ends = [Bounds(np.float64(o - half), np.float64(o + half), "log-mean") for o in (o_lo, o_hi)]
        corner = max(float(L_theta("Exponential", dom, (e,))) for e in ends)
        assert reg == pytest.approx(corner, rel=1e-12)


def test_exponential_log_mean_region_limits():
    dom = Interval(0.0, 5.0)
    # a free intercept below: the rate is unbounded
    assert region("Exponential", dom, (Window(-np.inf, 1.0, 0.5, "log-mean"),)) == np.inf
    assert region("Exponential", dom, (Window(0.0, 1.0, np.inf, "log-mean"),)) == np.inf
    # above: the rate vanishes, only -eta spans its window: 2 half; the per-theta rule tends to it
    reg = region("Exponential", dom, (Window(2.0, np.inf, 0.75, "log-mean"),))
    near = float(L_theta("Exponential", dom, (Bounds(np.float64(2.0 - 0.75), np.float64(2.0 + 0.75), "log-mean"),)))
    assert reg == pytest.approx(max(1.5, near), rel=1e-12)
    far = float(L_theta("Exponential", dom, (Bounds(np.float64(60 - 0.75), np.float64(60 + 0.75), "log-mean"),)))
    assert far == pytest.approx(1.5, rel=1e-12)
    # the natural scale keeps its rule
    assert region("Exponential", Interval(0.5, 4.0), (Span(0.5, 2.0),)) == pytest.approx(7.0)


# --------------------------------------------------------------------------- beta regression

def _beta_params(e_lo, e_hi, phi):
    return (Bounds(np.float64(e_lo), np.float64(e_hi), "logit-mean"), Bounds.point(np.float64(phi), "precision"))


def test_beta_regression_window_exact():
    """``pm.Beta(alpha=mu phi, beta=(1 - mu) phi)``, ``mu = invlogit(eta)``: the rule's range over
    (y, eta) equals PyMC's brute-forced one (and never lies inside it), on random windows,
    precisions below and above 2 and domains near 0 and 1."""
    from scipy.special import expit

    rng = np.random.default_rng(7)
    cases = [(0.05, 0.95, -1.0, 1.0, 2.0), (0.01, 0.3, -4.0, -1.0, 40.0), (0.2, 0.99, 0.5, 0.5, 0.3)]
    for _ in range(9):
        a = float(rng.uniform(0.001, 0.5))
        e = sorted(rng.uniform(-5, 5, 2))
        cases.append((a, float(rng.uniform(a + 0.05, 0.999)), e[0], e[1], float(np.exp(rng.uniform(-2, 5)))))
    for a, b, e_lo, e_hi, phi in cases:
        params = _beta_params(e_lo, e_hi, phi)
        rule = log_density_range(op_of("Beta"), Interval(a, b), params, NP)
        axes = [("c", a, b), ("c", e_lo, e_hi) if e_hi > e_lo else ("d", [e_lo])]
        brute = brute_range(lambda y, e, phi=phi: pymc_logp("Beta", y, alpha=expit(e) * phi, beta=(1 - expit(e)) * phi), axes)
        assert_exact(rule, brute, label=f"Beta regression {a, b, e_lo, e_hi, phi}")
    assert_pt_matches_np("Beta", Interval(0.05, 0.9), _beta_params(-2.0, 1.5, 7.0))


def test_beta_regression_region_sound_and_close():
    """Hull of the window x certified branch and bound in ln phi: never below the per-theta rule
    at windows inside the region and precisions in its span, and within the search's tolerance
    of the per-theta rule on the hull at the best precision of a dense scan."""
    rng = np.random.default_rng(33)
    for trial in range(6):
        a = float(rng.uniform(0.01, 0.3))
        dom = Interval(a, float(rng.uniform(0.6, 0.98)))
        o_lo, o_hi = sorted(rng.uniform(-2, 2, 2))
        half = float(rng.uniform(0, 1.0))
        p_lo = float(np.exp(rng.uniform(-1, 2)))
        p_hi = p_lo * float(np.exp(rng.uniform(0.1, 1.5)))
        reg = region("Beta", dom, (Window(o_lo, o_hi, half, "logit-mean"), Window(p_lo, p_hi, 0.0, "precision")))
        os_, hs = _windows(rng, o_lo, o_hi, half, 30)
        best = 0.0
        for phi in np.concatenate([[p_lo, p_hi], rng.uniform(p_lo, p_hi, 8)]):
            vals = L_theta("Beta", dom, (Bounds(os_ - hs, os_ + hs, "logit-mean"), Bounds.point(np.float64(phi), "precision")))
            assert_sound(reg, vals, f"trial {trial}")
        for phi in np.exp(np.linspace(np.log(p_lo), np.log(p_hi), 400)):
            best = max(best, float(L_theta("Beta", dom, _beta_params(o_lo - half, o_hi + half, phi))))
        assert best <= reg <= best * (1 + 2e-3) + 1e-9
    # an unbounded precision, a precision down to 0 or a window reaching infinity: no bound
    assert region("Beta", Interval(0.1, 0.9), (Window(0.0, 1.0, 0.5, "logit-mean"), Window(1.0, np.inf, 0.0, "precision"))) == np.inf
    assert region("Beta", Interval(0.1, 0.9), (Window(0.0, 1.0, 0.5, "logit-mean"), Window(0.0, 3.0, 0.0, "precision"))) == np.inf
    assert region("Beta", Interval(0.1, 0.9), (Window(0.0, np.inf, 0.5, "logit-mean"), Window(1.0, 3.0, 0.0, "precision"))) == np.inf
