"""Brute-force tests of the count rules: Poisson and Binomial with link windows, NegativeBinomial,
BetaBinomial, their region rules and the families' smallest constants (``min_lipschitz``).

Ground truth is PyMC's own ``pm.logp`` (compiled once per family with symbolic inputs), enumerated
over the integer domain jointly with a zoomed grid of the window (``brute_range`` of
``test_rules``). Region rules are checked by sampling parameter values inside random regions
(their ends and corners included) and by dense scans of the parameter the region mode is about;
the floors by dense scans of the free parameter.
"""

from __future__ import annotations

import functools
import math

import numpy as np
import pymc as pm
import pytensor
import pytensor.tensor as pt
import pytest
from scipy import stats

from pymc_dp.domains import Binary, Integers, Interval
from pymc_dp.exceptions import DomainError, UnsupportedFactorError
from pymc_dp.rules import NP, PT, Bounds, Span, Window, log_density_range, region_lipschitz, rule_info
from pymc_dp.rules.count import POISSON_ALPHA, negative_binomial_alpha_lipschitz
from pymc_dp.rules.discrete import min_lipschitz
from pymc_dp.rules.region import NoRegionRule
from tests.rules.test_rules import assert_exact, brute_range

# --------------------------------------------------------------------------- PyMC ground truth

_INT_PARAMS = {"n_int"}

# kind -> (parameter names, builder); "n_int" is an int64 number of trials
_BUILDERS = {
    "poisson": (("mu",), lambda mu: pm.Poisson.dist(mu=mu)),
    "poisson_log": (("t",), lambda t: pm.Poisson.dist(mu=pt.exp(t))),
    "nb": (("t", "alpha"), lambda t, alpha: pm.NegativeBinomial.dist(mu=pt.exp(t), alpha=alpha)),
    "nb_np": (("n", "p"), lambda n, p: pm.NegativeBinomial.dist(n=n, p=p)),
    "binom_logit": (("n_int", "u"), lambda n, u: pm.Binomial.dist(n=n, logit_p=u)),
    "binom": (("n_int", "p"), lambda n, p: pm.Binomial.dist(n=n, p=p)),
    "bern_logit": (("u",), lambda u: pm.Bernoulli.dist(logit_p=u)),
    "bern": (("p",), lambda p: pm.Bernoulli.dist(p=p)),
    "geometric": (("p",), lambda p: pm.Geometric.dist(p=p)),
    "betabinom": (("n_int", "a", "b"), lambda n, a, b: pm.BetaBinomial.dist(n=n, alpha=a, beta=b)),
}


@functools.lru_cache(maxsize=None)
def _logp_fn(kind):
    names, build = _BUILDERS[kind]
    y = pt.lvector("y")
    syms = [pt.lvector(n) if n in _INT_PARAMS else pt.dvector(n) for n in names]
    return pytensor.function([y, *syms], pm.logp(build(*syms), y))


def logp(kind, y, *args):
    """``pm.logp`` of the family ``kind`` at data ``y``, broadcasting ``y`` against the args."""
    names, _ = _BUILDERS[kind]
    arrays = np.broadcast_arrays(np.asarray(y), *(np.asarray(a) for a in args))
    flat = [arrays[0].ravel().astype("int64")]
    for n, a in zip(names, arrays[1:]):
        flat.append(a.ravel().astype("int64" if n in _INT_PARAMS else "float64"))
    return _logp_fn(kind)(*flat).reshape(arrays[0].shape)


@functools.lru_cache(maxsize=None)
def op_of(family):
    examples = {
        "Poisson": dict(mu=2.0),
        "NegativeBinomial": dict(mu=2.0, alpha=3.0),
        "BetaBinomial": dict(n=10, alpha=2.0, beta=3.0),
        "Binomial": dict(n=10, p=0.3),
        "Bernoulli": dict(p=0.3),
        "Geometric": dict(p=0.3),
    }
    return getattr(pm, family).dist(**examples[family]).owner.op


def L_of(family, domain, params):
    lo, hi = log_density_range(op_of(family), domain, params, NP)
    return np.asarray(hi, float) - np.asarray(lo, float)


def ys(domain):
    return ("d", np.arange(domain.lo, domain.hi + 1))


P = Bounds.point

# --------------------------------------------------------------------------- wiring


def test_pymc_negative_binomial_parametrisation():
    """``pm.NegativeBinomial(mu=, alpha=)`` builds ``(n, p) = (alpha, alpha / (mu + alpha))``."""
    mu, alpha = 3.7, 1.9
    rv = pm.NegativeBinomial.dist(mu=np.float64(mu), alpha=np.float64(alpha))
    n, p = pytensor.function([], rv.owner.op.dist_params(rv.owner))()
    assert float(n) == pytest.approx(alpha, rel=1e-6)  # PyMC casts alpha to float32 here
    assert float(p) == pytest.approx(alpha / (mu + alpha), rel=1e-6)
    info = rule_info(rv.owner.op)
    assert info.family == "NegativeBinomial" and info.param_names == ("n", "p")
    assert info.range_params == frozenset({"p"})


def test_registrations():
    assert rule_info(op_of("Poisson")).range_params == frozenset({"mu"})
    bb = rule_info(op_of("BetaBinomial"))
    assert bb.family == "BetaBinomial" and bb.param_names == ("n", "alpha", "beta")
    assert bb.range_params == frozenset()
    rv = pm.BetaBinomial.dist(n=7, alpha=2.0, beta=3.0)
    assert len(rv.owner.op.dist_params(rv.owner)) == 3


# --------------------------------------------------------------------------- Poisson, windows of ln mu

POISSON_WINDOWS = [
    (-1.0, 1.5, Integers(0, 10)),
    (1.2, 1.2, Integers(0, 10)),  # degenerate window = a point mu
    (0.0, 3.5, Integers(0, 10)),  # window's mean above the domain
    (-6.0, -4.0, Integers(0, 6)),  # tiny means
    (0.5, 2.0, Integers(5, 20)),  # domain starting above 0 and above the means
    (2.0, 2.6, Integers(3, 9)),
    (3.9, 4.3, Integers(40, 70)),
]


@pytest.mark.parametrize("t_lo, t_hi, domain", POISSON_WINDOWS, ids=[f"t[{a},{b}]-{d}" for a, b, d in POISSON_WINDOWS])
def test_poisson_log_mean_window_exact(t_lo, t_hi, domain):
    rule = log_density_range(op_of("Poisson"), domain, (Bounds(t_lo, t_hi, "log-mean"),), NP)
    brute = brute_range(lambda y, t: logp("poisson_log", y, t), [ys(domain), ("c", t_lo, t_hi)])
    assert_exact(rule, brute, label="Poisson log-mean")


def _poisson_window_enumerated(t_lo, t_hi, lo, hi):
    """docs/theory/families.md's O(M) formula with scipy: max_y g(y, clip(ln y)), min over the four corners."""
    y = np.arange(lo, hi + 1)
    t_y = np.where(y > 0, np.clip(np.log(np.maximum(y, 1)), t_lo, t_hi), t_lo)
    top = stats.poisson.logpmf(y, np.exp(t_y)).max()
    bottom = min(stats.poisson.logpmf(y, np.exp(t)).min() for t in (t_lo, t_hi))
    return bottom, top


def test_poisson_window_candidates_equal_enumeration():
    """The O(1) candidate search equals the O(M) enumeration on 600 random windows/domains."""
    rng = np.random.default_rng(0)
    for _ in range(600):
        lo = int(rng.integers(0, 30))
        hi = lo + int(rng.integers(0, 60))
        t_lo = rng.uniform(-5, 5)
        t_hi = t_lo + rng.choice([0.0, rng.exponential(1.0)])
        r_lo, r_hi = log_density_range(op_of("Poisson"), Integers(lo, hi), (Bounds(t_lo, t_hi, "log-mean"),), NP)
        b_lo, b_hi = _poisson_window_enumerated(t_lo, t_hi, lo, hi)
        assert r_lo == pytest.approx(b_lo, rel=1e-11, abs=1e-11)
        assert r_hi == pytest.approx(b_hi, rel=1e-11, abs=1e-11)


def test_poisson_window_forms_agree():
    """A zero-width window is the point rule; a natural interval is the window of its logs."""
    dom = Integers(0, 12)
    mus = np.array([0.2, 1.0, 3.0, 4.0, 7.5, 30.0])
    point = L_of("Poisson", dom, (P(mus),))
    window = L_of("Poisson", dom, (Bounds(np.log(mus), np.log(mus), "log-mean"),))
    np.testing.assert_allclose(window, point, rtol=1e-12, atol=1e-12)
    nat = log_density_range(op_of("Poisson"), dom, (Bounds(mus, 2 * mus),), NP)
    lm = log_density_range(op_of("Poisson"), dom, (Bounds(np.log(mus), np.log(2 * mus), "log-mean"),), NP)
    np.testing.assert_allclose(nat, lm, rtol=1e-13)


def test_poisson_natural_interval_exact():
    dom = Integers(2, 14)
    rule = log_density_range(op_of("Poisson"), dom, (Bounds(0.8, 6.5),), NP)
    brute = brute_range(lambda y, mu: logp("poisson", y, mu), [ys(dom), ("c", 0.8, 6.5)])
    assert_exact(rule, brute, label="Poisson natural interval")


# --------------------------------------------------------------------------- NegativeBinomial

NB_WINDOWS = [
    # t_lo, t_hi, alpha, domain
    (-0.5, 1.5, 2.0, Integers(0, 15)),
    (1.0, 1.0, 2.0, Integers(0, 15)),  # degenerate
    (0.3, 2.2, 0.4, Integers(0, 12)),  # alpha < 1: pmf decreasing in y
    (0.3, 2.2, 1.0, Integers(0, 12)),  # alpha = 1: geometric
    (-3.0, -1.0, 5.0, Integers(0, 8)),
    (2.5, 3.1, 7.0, Integers(4, 30)),  # domain starting above 0
    (0.0, 1.0, 30.0, Integers(6, 25)),  # means below the domain
    (3.0, 3.4, 1e6, Integers(10, 40)),  # nearly Poisson
    (1.5, 2.5, 0.05, Integers(1, 20)),
]


@pytest.mark.parametrize(
    "t_lo, t_hi, alpha, domain", NB_WINDOWS, ids=[f"t[{a},{b}]-alpha{c:g}-{d}" for a, b, c, d in NB_WINDOWS]
)
def test_negative_binomial_log_mean_window_exact(t_lo, t_hi, alpha, domain):
    rule = log_density_range(op_of("NegativeBinomial"), domain, (P(alpha), Bounds(t_lo, t_hi, "log-mean")), NP)
    brute = brute_range(lambda y, t: logp("nb", y, t, alpha), [ys(domain), ("c", t_lo, t_hi)])
    assert_exact(rule, brute, label="NB log-mean")


NB_POINTS = [(2.0, 0.3, Integers(0, 20)), (0.5, 0.1, Integers(0, 20)), (1.0, 0.6, Integers(2, 9)),
             (12.0, 0.05, Integers(100, 400)), (3.5, 0.9, Integers(0, 3)), (1e12, 1e12 / (1e12 + 4.0), Integers(0, 15))]


@pytest.mark.parametrize("n, p, domain", NB_POINTS, ids=[f"n{n:g}-p{p:g}-{d}" for n, p, d in NB_POINTS])
def test_negative_binomial_natural_point_exact(n, p, domain):
    """``pm.NegativeBinomial(n=, p=)``; the last case is above alpha = 1e10, where PyMC's logp is
    the Poisson one."""
    rule = log_density_range(op_of("NegativeBinomial"), domain, (P(n), P(p)), NP)
    brute = brute_range(lambda y: logp("nb_np", y, n, p), [ys(domain)])
    assert_exact(rule, brute, label="NB natural point")


def test_negative_binomial_natural_interval_exact():
    dom, n = Integers(0, 18), 2.5
    rule = log_density_range(op_of("NegativeBinomial"), dom, (P(n), Bounds(0.15, 0.55)), NP)
    brute = brute_range(lambda y, p: logp("nb_np", y, n, p), [ys(dom), ("c", 0.15, 0.55)])
    assert_exact(rule, brute, label="NB natural interval")


def _nb_window_enumerated(t_lo, t_hi, alpha, lo, hi):
    """The O(M) formula of docs/theory/glm.md#negative-binomial-window by scipy's nbinom, independent of the rule's algebra."""
    y = np.arange(lo, hi + 1)

    def lpmf(y, t):
        return stats.nbinom.logpmf(y, alpha, alpha / (alpha + np.exp(t)))

    t_y = np.where(y > 0, np.clip(np.log(np.maximum(y, 1)), t_lo, t_hi), t_lo)
    top = lpmf(y, t_y).max()
    bottom = min(lpmf(y, t).min() for t in (t_lo, t_hi))
    return bottom, top


def test_negative_binomial_candidates_equal_enumeration():
    """The O(1) candidate search equals the O(M) enumeration on 800 random windows, alphas and
    domains (alpha from 0.02 to 1e5)."""
    rng = np.random.default_rng(1)
    for _ in range(800):
        lo = int(rng.integers(0, 25))
        hi = lo + int(rng.integers(0, 60))
        alpha = float(np.exp(rng.uniform(np.log(0.02), np.log(1e5))))
        t_lo = rng.uniform(-4, 5)
        t_hi = t_lo + rng.choice([0.0, rng.exponential(1.0)])
        params = (P(alpha), Bounds(t_lo, t_hi, "log-mean"))
        r = log_density_range(op_of("NegativeBinomial"), Integers(lo, hi), params, NP)
        b = _nb_window_enumerated(t_lo, t_hi, alpha, lo, hi)
        tol = 1e-9 * (1 + abs(b[0]))
        assert float(r[0]) == pytest.approx(b[0], abs=tol, rel=0)
        assert float(r[1]) == pytest.approx(b[1], abs=tol, rel=0)


def test_negative_binomial_poisson_switch():
    """Above alpha = 1e10 PyMC's logp is Poisson(mu): the rule gives the Poisson rule's range."""
    dom = Integers(0, 25)
    nb = log_density_range(op_of("NegativeBinomial"), dom, (P(2 * POISSON_ALPHA), Bounds(0.5, 1.7, "log-mean")), NP)
    po = log_density_range(op_of("Poisson"), dom, (Bounds(0.5, 1.7, "log-mean"),), NP)
    np.testing.assert_allclose(nb, po, rtol=1e-13)


# --------------------------------------------------------------------------- BetaBinomial

BB_CASES = [
    (10, 2.0, 3.0, Integers(0, 10)),
    (10, 1.0, 1.0, Integers(0, 10)),  # uniform: L = 0
    (12, 0.3, 0.5, Integers(0, 12)),  # U-shaped
    (20, 0.7, 4.0, Integers(0, 20)),  # J-shaped
    (15, 6.0, 2.5, Integers(3, 11)),
    (40, 25.0, 25.0, Integers(0, 40)),
]


@pytest.mark.parametrize("n, a, b, domain", BB_CASES, ids=[f"n{n}-a{a:g}-b{b:g}-{d}" for n, a, b, d in BB_CASES])
def test_beta_binomial_exact(n, a, b, domain):
    rule = log_density_range(op_of("BetaBinomial"), domain, (P(float(n)), P(a), P(b)), NP)
    brute = brute_range(lambda y: logp("betabinom", y, n, a, b), [ys(domain)])
    assert_exact(rule, brute, label="BetaBinomial")


def test_beta_binomial_uniform_is_free():
    """a = b = 1: the uniform pmf on {0..n}, L = 0 (also on a sub-domain)."""
    for dom in (Integers(0, 9), Integers(2, 5)):
        assert L_of("BetaBinomial", dom, (P(9.0), P(1.0), P(1.0))) == pytest.approx(0.0, abs=1e-12)


def test_beta_binomial_per_row_trials():
    """n differs per row: each row's values stop at its own n, as PyMC's logp is -inf above n."""
    ns = np.array([4.0, 7.0, 10.0, 10.0])
    a, b = np.array([0.5, 2.0, 1.0, 3.0]), np.array([0.5, 1.5, 1.0, 0.8])
    dom = Integers(0, 10)
    lo, hi = log_density_range(op_of("BetaBinomial"), dom, (P(ns), P(a), P(b)), NP)
    for i in range(4):
        vals = logp("betabinom", np.arange(int(ns[i]) + 1), int(ns[i]), a[i], b[i])
        assert lo[i] == pytest.approx(vals.min(), rel=1e-12) and hi[i] == pytest.approx(vals.max(), rel=1e-12)


# --------------------------------------------------------------------------- Binomial and Bernoulli on the logit scale

BINOM_LOGIT = [
    (10, -1.0, 0.5, Integers(0, 10)),
    (10, 0.4, 0.4, Integers(0, 10)),  # a point
    (12, -4.0, -2.0, Integers(0, 12)),
    (20, 1.0, 3.0, Integers(2, 9)),  # sub-domain, means above it
    (25, -0.5, 2.5, Integers(4, 22)),
    (7, -25.0, 25.0, Integers(0, 7)),
]


@pytest.mark.parametrize(
    "n, u_lo, u_hi, domain", BINOM_LOGIT, ids=[f"n{n}-u[{a},{b}]-{d}" for n, a, b, d in BINOM_LOGIT]
)
def test_binomial_logit_exact(n, u_lo, u_hi, domain):
    bounds = P(u_lo, "logit") if u_lo == u_hi else Bounds(u_lo, u_hi, "logit")
    rule = log_density_range(op_of("Binomial"), domain, (P(float(n)), bounds), NP)
    brute = brute_range(lambda y, u: logp("binom_logit", y, n, u), [ys(domain), ("c", u_lo, u_hi)])
    # exact up to the float error of PyMC's computation from a rounded sigmoid (FOUND.md #13):
    # below 1e-9 up to a logit of 13; 4.5e-4 at 25 with n = 7 (contained, not tight)
    assert_exact(rule, brute, tight=max(abs(u_lo), abs(u_hi)) <= 13, label="Binomial logit")


def test_binomial_logit_equals_natural():
    dom, n = Integers(1, 9), 11.0
    ps = np.array([0.05, 0.3, 0.5, 0.81])
    nat = log_density_range(op_of("Binomial"), dom, (P(n), Bounds(ps, ps + 0.1)), NP)
    logits = Bounds(np.log(ps / (1 - ps)), np.log((ps + 0.1) / (0.9 - ps)), "logit")
    lgt = log_density_range(op_of("Binomial"), dom, (P(n), logits), NP)
    np.testing.assert_allclose(nat, lgt, rtol=1e-11)
    pt_nat = log_density_range(op_of("Binomial"), dom, (P(n), P(ps)), NP)
    pt_lgt = log_density_range(op_of("Binomial"), dom, (P(n), P(np.log(ps / (1 - ps)), "logit")), NP)
    np.testing.assert_allclose(pt_nat, pt_lgt, rtol=1e-11)


# --------------------------------------------------------------------------- lemma C: window ends

def _window_scan(family, domain, fixed, s, b_grid, space):
    """L at every offset of ``b_grid`` for windows ``[b - s, b + s]`` (vectorised over b)."""
    params = tuple(fixed) + (Bounds(b_grid - s, b_grid + s, space),)
    return L_of(family, domain, params)


LEMMA_C_FAMILIES = [
    ("Poisson", "log-mean", lambda rng: ()),
    ("NegativeBinomial", "log-mean", lambda rng: (P(float(np.exp(rng.uniform(np.log(0.05), np.log(200))))),)),
    ("Binomial", "logit", lambda rng: (P(float(rng.integers(1, 40))),)),
    ("Bernoulli", "logit", lambda rng: ()),
]


@pytest.mark.parametrize("family, space, fixed_of", LEMMA_C_FAMILIES, ids=[f[0] for f in LEMMA_C_FAMILIES])
def test_window_ends_lemma(family, space, fixed_of):
    """Lemma C by brute force: over random domains {lo..hi}, half-widths and offset intervals, the
    constant of a window sliding over 1201 offsets never exceeds its value at the two ends, and
    the region rule returns exactly that (attained) value."""
    rng = np.random.default_rng(2)
    op = op_of(family)
    for _ in range(120):
        fixed = fixed_of(rng)
        if family == "Bernoulli":
            dom = Binary()
        elif family == "Binomial":
            n = int(fixed[0].lo)
            lo = int(rng.integers(0, n + 1))
            dom = Integers(lo, int(rng.integers(lo, n + 1)))
        else:
            lo = int(rng.integers(0, 20))
            dom = Integers(lo, lo + int(rng.integers(0, 40)))
        s = float(rng.exponential(0.7))
        b1 = float(rng.uniform(-4, 4))
        b2 = b1 + float(rng.exponential(2.0))
        scan = _window_scan(family, dom, fixed, s, np.linspace(b1, b2, 1201), space)
        ends = _window_scan(family, dom, fixed, s, np.array([b1, b2]), space)
        region = region_lipschitz(op, dom, tuple(Span.point(f.lo) for f in fixed) + (Window(b1, b2, s, space),))
        assert float(region) == pytest.approx(float(ends.max()), rel=1e-12, abs=1e-12)
        assert scan.max() <= float(region) + 1e-9 * (1 + abs(float(region)))


# --------------------------------------------------------------------------- region soundness and tightness

def _sample_windows(rng, o_lo, o_hi, half, k=60):
    """Offsets and half-widths inside a region: the two ends at full width, then random ones."""
    offs = np.concatenate([[o_lo, o_hi, o_lo, o_hi], rng.uniform(o_lo, o_hi, k)])
    halves = np.concatenate([[half, half, 0.0, 0.0], rng.uniform(0, half, k)])
    return offs, halves


REGION_FAMILIES = ["Poisson", "NegativeBinomial", "Binomial", "Bernoulli"]


@pytest.mark.parametrize("family", REGION_FAMILIES)
def test_region_windows_sound_and_tight(family):
    rng = np.random.default_rng(3)
    op = op_of(family)
    space = "logit" if family in ("Binomial", "Bernoulli") else "log-mean"
    for _ in range(40):
        o_lo = float(rng.uniform(-3, 3))
        o_hi = o_lo + float(rng.exponential(1.5))
        half = float(rng.exponential(0.8))
        if family == "Poisson":
            dom, fixed, spans = Integers(int(rng.integers(0, 5)), int(rng.integers(6, 30))), (), ()
        elif family == "NegativeBinomial":
            alpha = float(np.exp(rng.uniform(-2, 4)))
            dom, fixed, spans = Integers(0, int(rng.integers(5, 40))), (P(alpha),), (Span.point(alpha),)
        elif family == "Binomial":
            n = float(rng.integers(2, 30))
            dom, fixed, spans = Integers(0, int(n)), (P(n),), (Span.point(n),)
        else:
            dom, fixed, spans = Binary(), (), ()
        region = float(region_lipschitz(op, dom, spans + (Window(o_lo, o_hi, half, space),)))
        offs, halves = _sample_windows(rng, o_lo, o_hi, half)
        vals = L_of(family, dom, fixed + (Bounds(offs - halves, offs + halves, space),))
        assert vals.max() <= region + 1e-9 * (1 + region)
        assert region == pytest.approx(vals[:2].max(), rel=1e-12)  # attained at an end window


def test_region_natural_window_takes_the_hull():
    """A window on the natural scale (no proof of lemma C there) and a window that does not slide
    both take their hull: the rule at the hull, >= every window inside it."""
    op, dom = op_of("Poisson"), Integers(0, 20)
    w = Window(2.0, 6.0, 1.0, "natural")
    hull = L_of("Poisson", dom, (Bounds(1.0, 7.0),))
    assert float(region_lipschitz(op, dom, (w,))) == pytest.approx(float(hull), rel=1e-13)
    w_log = Window(0.5, 1.5, 0.2, "log-mean", sliding=False)
    hull = L_of("Poisson", dom, (Bounds(0.3, 1.7, "log-mean"),))
    assert float(region_lipschitz(op, dom, (w_log,))) == pytest.approx(float(hull), rel=1e-13)
    opb = op_of("Binomial")
    wb = Window(0.3, 0.5, 0.1, "natural")
    hb = L_of("Binomial", Integers(0, 10), (P(10.0), Bounds(0.2, 0.6)))
    assert float(region_lipschitz(opb, Integers(0, 10), (Span.point(10.0), wb))) == pytest.approx(float(hb), rel=1e-13)


SPAN_CASES = [
    # family, domain, fixed prefix (Bounds), name index of the Span, sampler of [lo, hi]
    ("Poisson", Integers(0, 10), (), lambda rng: np.sort(np.exp(rng.uniform(-3, 4, 2)))),
    ("Poisson", Integers(4, 25), (), lambda rng: np.sort(np.exp(rng.uniform(-1, 4, 2)))),
    ("Binomial", Integers(0, 12), (12.0,), lambda rng: np.sort(rng.uniform(0.001, 0.999, 2))),
    ("Binomial", Integers(3, 9), (15.0,), lambda rng: np.sort(rng.uniform(0.001, 0.999, 2))),
    ("Bernoulli", Binary(), (), lambda rng: np.sort(rng.uniform(0.001, 0.999, 2))),
    ("Geometric", Integers(1, 12), (), lambda rng: np.sort(rng.uniform(0.001, 0.999, 2))),
    ("NegativeBinomial", Integers(0, 20), (2.5,), lambda rng: np.sort(rng.uniform(0.01, 0.99, 2))),
    ("NegativeBinomial", Integers(2, 30), (0.4,), lambda rng: np.sort(rng.uniform(0.01, 0.99, 2))),
]


@pytest.mark.parametrize("family, domain, fixed, sampler", SPAN_CASES, ids=[f"{c[0]}-{c[1]}" for c in SPAN_CASES])
def test_region_span_modes(family, domain, fixed, sampler):
    """A free parameter (no covariates) over a Span: the region value is >= a dense scan of the
    span (quasi-convexity / monotonicity) and is attained at one of its ends."""
    rng = np.random.default_rng(4)
    op = op_of(family)
    for _ in range(25):
        lo, hi = sampler(rng)
        region = float(region_lipschitz(op, domain, tuple(Span.point(f) for f in fixed) + (Span(lo, hi),)))
        grid = np.linspace(lo, hi, 2001) if family != "Poisson" else np.exp(np.linspace(np.log(lo), np.log(hi), 2001))
        scan = L_of(family, domain, tuple(P(f) for f in fixed) + (P(grid),))
        assert scan.max() <= region + 1e-9 * (1 + region)
        assert region == pytest.approx(max(scan[0], scan[-1]), rel=1e-12)


def test_convexity_on_the_link_scale():
    """The Span claims: L is convex in ln mu (Poisson), logit p (Binomial) and ln(1 - p) (NB,
    alpha fixed): second differences of L on a uniform grid of the link value are >= 0."""
    u = np.linspace(-6, 6, 4001)
    v = np.linspace(-8, -1e-3, 4001)  # v = ln(1 - p)
    for L in (
        L_of("Poisson", Integers(2, 17), (P(np.exp(u)),)),
        L_of("Binomial", Integers(1, 9), (P(13.0), P(u, "logit"))),
        L_of("NegativeBinomial", Integers(0, 14), (P(3.0), P(-np.expm1(v)))),
        L_of("NegativeBinomial", Integers(3, 14), (P(0.4), P(-np.expm1(v)))),
    ):
        assert np.all(np.diff(L, 2) >= -1e-9)


# --------------------------------------------------------------------------- NegativeBinomial alpha: branch and bound

def _nb_alpha_region_case(rng):
    a0 = float(np.exp(rng.uniform(np.log(0.05), np.log(20))))
    a1 = a0 * float(np.exp(rng.uniform(0.1, 3.0)))
    dom = Integers(int(rng.integers(0, 4)), int(rng.integers(5, 35)))
    if rng.uniform() < 0.6:
        o = float(rng.uniform(-2, 3))
        p_region = Window(o, o + float(rng.exponential(0.8)), float(rng.exponential(0.5)), "log-mean")
    else:
        lo = float(rng.uniform(0.02, 0.9))
        p_region = Span(lo, min(lo + float(rng.exponential(0.2)), 0.98))
    return a0, a1, dom, p_region


def _nb_p_candidates(p_region):
    if isinstance(p_region, Window):
        return [Bounds(o - p_region.half, o + p_region.half, "log-mean") for o in (p_region.o_lo, p_region.o_hi)]
    return [P(p_region.lo), P(p_region.hi)]


def test_negative_binomial_alpha_branch_and_bound():
    """alpha in [a0, a1]: the certified bound is >= L on a dense log grid of alpha (at every
    candidate of p) and within the branch-and-bound tolerance (1e-3) of the best grid value."""
    rng = np.random.default_rng(5)
    op = op_of("NegativeBinomial")
    for _ in range(30):
        a0, a1, dom, p_region = _nb_alpha_region_case(rng)
        region = float(region_lipschitz(op, dom, (Span(a0, a1), p_region)))
        alphas = np.exp(np.linspace(np.log(a0), np.log(a1), 1501))
        best = max(float(L_of("NegativeBinomial", dom, (P(alphas), c)).max()) for c in _nb_p_candidates(p_region))
        assert best <= region + 1e-9 * (1 + region)
        assert region <= best * (1 + 1.5e-3) + 1e-9


def test_negative_binomial_alpha_wide_ranges():
    """Wide alpha ranges, up to the Poisson limit: sound against a dense grid and quick (the
    constant captures the O(1/alpha^2) cancellation of d_alpha ln p for a large alpha)."""
    op, dom = op_of("NegativeBinomial"), Integers(0, 200)
    for a0, a1 in ((0.01, 1e4), (1.0, 1e9)):
        region = float(region_lipschitz(op, dom, (Span(a0, a1), Window(0.0, 3.0, 1.0, "log-mean"))))
        alphas = np.exp(np.linspace(np.log(a0), np.log(a1), 4001))
        best = max(
            float(L_of("NegativeBinomial", dom, (P(alphas), Bounds(o - 1.0, o + 1.0, "log-mean"))).max())
            for o in (0.0, 3.0)
        )
        assert best <= region + 1e-9 * region and region <= best * (1 + 1.5e-3)


def test_negative_binomial_alpha_lipschitz_constant():
    """The lemma D constant (in ln alpha) bounds the slope of L on random pieces, and the width
    of ``d_alpha ln p`` over sampled records (numerical derivative of PyMC's logp)."""
    rng = np.random.default_rng(6)
    op = op_of("NegativeBinomial")
    for _ in range(40):
        a0, a1, dom, p_region = _nb_alpha_region_case(rng)
        for cand in _nb_p_candidates(p_region):
            K = float(negative_binomial_alpha_lipschitz(op, dom, (None, cand), a0, a1))
            la = np.linspace(np.log(a0), np.log(a1), 401)
            L = L_of("NegativeBinomial", dom, (P(np.exp(la)), cand))
            slopes = np.abs(np.diff(L)) / np.diff(la)
            assert slopes.max() <= K * (1 + 1e-9) + 1e-9
            # the derivative itself, from PyMC: width over records (y, mu) at sampled alphas
            y = np.arange(dom.lo, dom.hi + 1)[:, None]
            if cand.space == "log-mean":
                t = np.linspace(float(cand.lo), float(cand.hi), 7)[None, :]
                for a in rng.uniform(a0, a1, 3):
                    h = 1e-6 * a
                    d = (logp("nb", y, t, a + h) - logp("nb", y, t, a - h)) / (2 * h)
                    assert a * (d.max() - d.min()) <= K * (1 + 1e-5) + 1e-6


def test_negative_binomial_alpha_refusals():
    op, dom = op_of("NegativeBinomial"), Integers(0, 10)
    w = Window(0.0, 1.0, 0.5, "log-mean")
    with pytest.raises(NoRegionRule, match="alpha"):
        region_lipschitz(op, dom, (Span(0.0, 3.0), w))
    with pytest.raises(NoRegionRule, match="1e10"):
        region_lipschitz(op, dom, (Span(1.0, 1e11), w))
    with pytest.raises(NoRegionRule, match="one interval"):
        region_lipschitz(op, dom, (Span(np.array([1.0, 2.0]), np.array([3.0, 4.0])), w))


# --------------------------------------------------------------------------- BetaBinomial region

def test_beta_binomial_region_corners():
    """(alpha, beta) box: >= a 50 x 50 grid of the box, and equal to the two corners of docs/theory/glm.md#beta-binomial:
    max(L(a_hi, b_lo), L(a_lo, b_hi)) (attained: exact)."""
    rng = np.random.default_rng(7)
    op = op_of("BetaBinomial")
    for _ in range(25):
        n = float(rng.integers(1, 40))
        lo = int(rng.integers(0, n + 1))
        dom = Integers(lo, int(rng.integers(lo, n + 1)))
        a_lo, b_lo = np.exp(rng.uniform(-2.5, 2.5, 2))
        a_hi, b_hi = a_lo * np.exp(rng.uniform(0, 2.5)), b_lo * np.exp(rng.uniform(0, 2.5))
        region = float(region_lipschitz(op, dom, (Span.point(n), Span(a_lo, a_hi), Span(b_lo, b_hi))))
        A, B = np.meshgrid(np.linspace(a_lo, a_hi, 50), np.linspace(b_lo, b_hi, 50))
        grid = L_of("BetaBinomial", dom, (P(n), P(A), P(B)))
        assert grid.max() <= region + 1e-9 * (1 + region)
        corners = max(float(L_of("BetaBinomial", dom, (P(n), P(a), P(b)))) for a, b in ((a_hi, b_lo), (a_lo, b_hi)))
        assert region == pytest.approx(corners, rel=1e-12, abs=1e-12)


def test_beta_binomial_region_refusals():
    op, dom = op_of("BetaBinomial"), Integers(0, 10)
    with pytest.raises(NoRegionRule, match="alpha"):
        region_lipschitz(op, dom, (Span.point(10.0), Span(0.0, 2.0), Span(1.0, 2.0)))
    with pytest.raises(NoRegionRule, match="fixed"):
        region_lipschitz(op, dom, (Span(8.0, 10.0), Span(1.0, 2.0), Span(1.0, 2.0)))


# --------------------------------------------------------------------------- smallest constants

def test_poisson_floor():
    """{0..10}: 2.8637 (docs/theory/families.md: 2.86) at mu* = (10!)^(1/10); below every value of a dense mu
    grid and within the grid's resolution of its minimum; None where L can be 0."""
    op = op_of("Poisson")
    for dom in (Integers(0, 10), Integers(5, 20), Integers(0, 3), Integers(30, 80)):
        m = min_lipschitz(op, dom, (None,))
        u = np.linspace(-3, 6, 200001)
        L = L_of("Poisson", dom, (P(np.exp(u)),))
        # L is piecewise linear in u = ln mu with slopes at most hi - lo
        assert m <= L.min() and L.min() - m < (dom.hi - dom.lo) * (u[1] - u[0])
        # the free rate is also a lower bound for any window of ln mu
        assert m <= float(L_of("Poisson", dom, (Bounds(0.0, 0.01, "log-mean"),)))
    assert min_lipschitz(op, Integers(0, 10), (None,)) == pytest.approx(2.8637, abs=1e-4)
    assert min_lipschitz(op, Integers(0, 10), (Span(1.0, 8.0),)) == min_lipschitz(op, Integers(0, 10), (None,))
    assert min_lipschitz(op, Integers(3, 4), (None,)) is None  # two values: the ends tie at mu = 4
    assert min_lipschitz(op, Integers(3, 3), (None,)) is None
    fixed = min_lipschitz(op, Integers(0, 10), (P(2.0),))
    assert fixed == pytest.approx(float(L_of("Poisson", Integers(0, 10), (P(2.0),))), rel=1e-8)


def test_binomial_floor():
    op = op_of("Binomial")
    assert min_lipschitz(op, Integers(0, 10), (P(10.0), None)) == pytest.approx(math.log(math.comb(10, 5)), rel=1e-8)
    for n, dom in ((10, Integers(0, 10)), (15, Integers(2, 9)), (30, Integers(20, 30)), (7, Integers(0, 4))):
        m = min_lipschitz(op, dom, (P(float(n)), None))
        u = np.linspace(-12, 12, 200001)
        L = L_of("Binomial", dom, (P(float(n)), P(u, "logit")))
        assert m <= L.min() and L.min() - m < (dom.hi - dom.lo) * (u[1] - u[0])
    # per-row n: the smallest element's floor
    ns = np.array([6.0, 10.0, 20.0])
    m = min_lipschitz(op, Integers(0, 6), (P(ns), None))
    each = [min_lipschitz(op, Integers(0, 6), (P(v), None)) for v in ns]
    assert m == pytest.approx(min(each), rel=1e-9)
    assert min_lipschitz(op, Integers(0, 10), (None, None)) is None


def _zoom_min(f, lo, hi, n=4001, zooms=4):
    """``(argmin, min)`` of a (quasi-convex) ``f`` on ``[lo, hi]``: a grid zoomed around its
    argmin; every value is attained, so the result is >= the true minimum."""
    best_v, best = None, np.inf
    for _ in range(zooms + 1):
        g = np.linspace(lo, hi, n)
        vals = f(g)
        k = int(np.argmin(vals))
        if vals[k] < best:
            best_v, best = float(g[k]), float(vals[k])
        lo, hi = g[max(k - 1, 0)], g[min(k + 1, n - 1)]
    return best_v, best


def test_negative_binomial_floor():
    """alpha fixed, p free: below a dense grid of p and within its resolution of the minimum
    (alpha > 1); for alpha <= 1 the infimum is approached as p -> 0."""
    op = op_of("NegativeBinomial")
    for alpha, dom in ((3.0, Integers(0, 10)), (20.0, Integers(0, 30)), (1.7, Integers(4, 15)),
                       (0.5, Integers(0, 10)), (1.0, Integers(0, 10)), (0.2, Integers(2, 12))):
        m = min_lipschitz(op, dom, (P(alpha), None))

        def L_at(v):  # v = ln(-u), u = ln(1 - p) from -e^-25 (p -> 0) to -30 (p = 1 - 1e-13)
            return L_of("NegativeBinomial", dom, (P(alpha), P(-np.expm1(-np.exp(v)))))

        v, L = _zoom_min(L_at, -25.0, math.log(30.0))
        if alpha == 1.0:
            assert m is None and L < 1e-8
            continue
        assert m <= L
        if alpha > 1:  # attained at p*; for alpha < 1 only approached as p -> 0
            assert L - m < 1e-7
        else:
            assert v == pytest.approx(-25.0) and L - m < 1e-6
    m_big = min_lipschitz(op, Integers(0, 10), (P(3e10), None))
    assert m_big == pytest.approx(min_lipschitz(op_of("Poisson"), Integers(0, 10), (None,)), rel=1e-8)
    assert min_lipschitz(op, Integers(0, 10), (None, None)) is None
    assert min_lipschitz(op, Integers(0, 10), (Span(1.0, 4.0), P(0.3))) is None


def test_floors_without_a_positive_minimum():
    assert min_lipschitz(op_of("Bernoulli"), Binary(), (None,)) is None
    assert min_lipschitz(op_of("Geometric"), Integers(1, 10), (None,)) is None
    assert min_lipschitz(op_of("BetaBinomial"), Integers(0, 10), (P(10.0), None, None)) is None
    assert min_lipschitz(op_of("Bernoulli"), Binary(), (P(0.8),)) == pytest.approx(math.log(4), rel=1e-8)
    bb = min_lipschitz(op_of("BetaBinomial"), Integers(0, 10), (P(10.0), P(2.0), P(3.0)))
    assert bb == pytest.approx(float(L_of("BetaBinomial", Integers(0, 10), (P(10.0), P(2.0), P(3.0)))), rel=1e-8)
    assert min_lipschitz(op_of("Bernoulli"), Binary(), (P(0.5),)) is None  # L = 0


# --------------------------------------------------------------------------- PyTensor == NumPy

def _as_pt(b):
    def conv(v):
        return pt.as_tensor_variable(np.asarray(v, dtype="float64"))

    if b.is_point:
        return Bounds.point(conv(b.lo), b.space)
    return Bounds(conv(b.lo), conv(b.hi), b.space)


_V = np.array([0.3, 1.0, 2.5])
PT_CASES = [
    ("Poisson", Integers(0, 12), (Bounds(-1.0, 1.3, "log-mean"),)),
    ("Poisson", Integers(3000, 5000), (Bounds(8.0, 8.1, "log-mean"),)),
    ("Poisson", Integers(2, 9), (Bounds(0.5, 4.0),)),
    ("Poisson", Integers(0, 9), (P(_V, "log-mean"),)),
    ("NegativeBinomial", Integers(0, 20), (P(2.0), Bounds(0.0, 1.5, "log-mean"))),
    ("NegativeBinomial", Integers(0, 20), (P(_V), Bounds(_V - 1, _V + 1, "log-mean"))),
    ("NegativeBinomial", Integers(1, 30), (P(0.3), P(0.2))),
    ("NegativeBinomial", Integers(1, 30), (P(4.0), Bounds(0.2, 0.4))),
    ("NegativeBinomial", Integers(0, 30), (P(5e10), Bounds(0.2, 1.4, "log-mean"))),
    ("BetaBinomial", Integers(0, 12), (P(np.array([8.0, 12.0, 12.0])), P(_V), P(_V[::-1]))),
    ("Binomial", Integers(0, 10), (P(10.0), Bounds(-1.0, 2.0, "logit"))),
    ("Binomial", Integers(2, 9), (P(np.array([9.0, 12.0, 20.0])), P(_V, "logit"))),
    ("Binomial", Integers(0, 40), (P(40.0), Bounds(0.2, 0.21))),
]


@pytest.mark.parametrize("family, domain, params", PT_CASES, ids=[f"{c[0]}-{i}" for i, c in enumerate(PT_CASES)])
def test_pytensor_namespace_matches_numpy(family, domain, params):
    op = op_of(family)
    np_lo, np_hi = log_density_range(op, domain, params, NP)
    t_lo, t_hi = log_density_range(op, domain, tuple(_as_pt(b) for b in params), PT)
    assert t_lo.dtype == t_hi.dtype == "float64"
    lo, hi = pytensor.function([], [t_lo, t_hi])()
    np.testing.assert_allclose(lo, np_lo, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(hi, np_hi, rtol=1e-12, atol=1e-12)


def test_pytensor_symbolic_trials():
    """A Binomial / BetaBinomial whose n is a symbolic input (unknown when the graph is built):
    the enumeration masks values above n instead of needing a constant."""
    n = pt.dvector("n")
    u = pt.dvector("u")
    params = (Bounds.point(n), Bounds(u - 0.5, u + 0.5, "logit"))
    lo, hi = log_density_range(op_of("Binomial"), Integers(0, 10), params, PT)
    f = pytensor.function([n, u], [lo, hi])
    ns, us = np.array([6.0, 10.0]), np.array([0.2, -1.0])
    got = f(ns, us)
    want = log_density_range(op_of("Binomial"), Integers(0, 10), (P(ns), Bounds(us - 0.5, us + 0.5, "logit")), NP)
    np.testing.assert_allclose(got, want, rtol=1e-12)


# --------------------------------------------------------------------------- refusals

REFUSALS = [
    ("NegativeBinomial", Integers(0, 10), (Bounds(1.0, 2.0), P(0.3)), UnsupportedFactorError),
    ("NegativeBinomial", Integers(0, 10), (P(1.0), Bounds(0.0, 1.0, "logit")), UnsupportedFactorError),
    ("NegativeBinomial", Integers(-1, 10), (P(1.0), P(0.3)), DomainError),
    ("NegativeBinomial", Interval(0, 10), (P(1.0), P(0.3)), DomainError),
    ("BetaBinomial", Integers(0, 10), (P(10.0), Bounds(1.0, 2.0), P(1.0)), UnsupportedFactorError),
    ("BetaBinomial", Integers(0, 10), (Bounds(9.0, 10.0), P(1.0), P(1.0)), UnsupportedFactorError),
    ("BetaBinomial", Integers(0, 11), (P(10.0), P(1.0), P(1.0)), DomainError),
    ("BetaBinomial", Integers(5, 8), (P(np.array([4.0, 10.0])), P(1.0), P(1.0)), DomainError),
    ("Poisson", Integers(0, 10), (Bounds(0.0, 1.0, "logit"),), UnsupportedFactorError),
    ("Binomial", Integers(0, 10), (P(10.0), Bounds(0.0, 1.0, "log-mean")), UnsupportedFactorError),
    ("Binomial", Integers(7, 10), (P(np.array([5.0, 10.0])), P(0.3)), DomainError),
    ("Bernoulli", Binary(), (Bounds(0.0, 1.0, "log-mean"),), UnsupportedFactorError),
]


@pytest.mark.parametrize("family, domain, params, error", REFUSALS, ids=[f"{c[0]}-{i}" for i, c in enumerate(REFUSALS)])
def test_refusals(family, domain, params, error):
    with pytest.raises(error):
        log_density_range(op_of(family), domain, params, NP)


def test_domain_error_names_what_to_do():
    with pytest.raises(DomainError, match=r"Integers\(0, 10\)"):
        log_density_range(op_of("BetaBinomial"), Integers(0, 12), (P(10.0), P(1.0), P(2.0)), NP)
