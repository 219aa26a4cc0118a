"""``pm.Censored``: the per-theta rule against PyMC's own censored log-density, and the region
rule of a censored Normal against the per-theta rule.

Ground truth is ``pm.logp(pm.Censored.dist(base, lower=l, upper=u), y)`` compiled once per
(base family, censoring points) with symbolic base parameters, evaluated on the data grid (whose
ends are the atoms ``y = l``, ``y = u``) jointly with the location window (``test_rules``'s
zoomed brute force).

PyMC's own Normal log-CDF is not exact: ``normal_lcdf`` divides by ``pt.sqrt(2.0)``, a float32
constant, and is about 1.7e-8 too low for ``z < -1`` (checked here against SciPy). The brute-force
comparisons therefore allow ``PYMC_ATOM_ERR`` of absolute slack, and the atoms themselves are
checked against SciPy's ``log_ndtr`` / ``logcdf`` to 1e-12.
"""

from __future__ import annotations

import functools
import math

import numpy as np
import pymc as pm
import pytensor
import pytensor.tensor as pt
import pytest
import scipy.special as sp
import scipy.stats as st

from pymc_dp.domains import Integers, Interval
from pymc_dp.exceptions import DomainError, UnsupportedFactorError
from pymc_dp.rules import (
    NP,
    PT,
    Bounds,
    Nested,
    NestedRegion,
    Span,
    Window,
    log_density_range,
    region_lipschitz,
    rule_info,
)
from pymc_dp.rules.censored import _BASES, SUPPORTED_BASES
from pymc_dp.rules.region import NoRegionRule
from tests.rules.test_rules import GRID_TOL, brute_range, op_params

PYMC_ATOM_ERR = 3e-8  # PyMC's normal_lcdf error (float32 sqrt(2)), see the module docstring
DISCRETE = ("Poisson", "Geometric", "Binomial", "NegativeBinomial")

_EXAMPLE = {
    "Normal": dict(mu=0.0, sigma=1.0),
    "StudentT": dict(nu=3.0, mu=0.0, sigma=1.0),
    "Laplace": dict(mu=0.0, b=1.0),
    "Cauchy": dict(alpha=0.0, beta=1.0),
    "Logistic": dict(mu=0.0, s=1.0),
    "LogNormal": dict(mu=0.0, sigma=1.0),
    "Gamma": dict(alpha=2.0, beta=1.0),
    "Exponential": dict(lam=1.0),
    "Poisson": dict(mu=2.0),
    "Geometric": dict(p=0.3),
    "Binomial": dict(n=10, p=0.3),
    "NegativeBinomial": dict(n=3.0, p=0.4),
    "Beta": dict(alpha=2.0, beta=2.0),
    "Uniform": dict(lower=0.0, upper=1.0),
}


@functools.lru_cache(maxsize=None)
def base_op(family):
    return getattr(pm, family).dist(**_EXAMPLE[family]).owner.op


@functools.lru_cache(maxsize=None)
def censored_op():
    return pm.Censored.dist(pm.Normal.dist(0.0, 1.0), lower=-1.0, upper=1.0).owner.op


@functools.lru_cache(maxsize=None)
def _censored_fn(family, names):
    """One compiled graph per base family: the censoring points are symbolic inputs too (PyMC
    builds the same switches; an infinite point is never equal to a finite value), which keeps
    the number of compilations small."""
    y, lower, upper = pt.dvector("y"), pt.dscalar("lower"), pt.dscalar("upper")
    syms = [pt.lvector(n) if (family, n) == ("Binomial", "n") else pt.dvector(n) for n in names]
    base = getattr(pm, family).dist(**dict(zip(names, syms)))
    rv = pm.Censored.dist(base, lower=lower, upper=upper)
    return pytensor.function([y, lower, upper, *syms], pm.logp(rv, y))


def censored_logp(family, lower, upper, y, **params):
    """PyMC's censored log-density, broadcasting ``y`` against the base parameters."""
    names = tuple(sorted(params))
    fn = _censored_fn(family, names)
    arrays = np.broadcast_arrays(np.asarray(y, float), *(np.asarray(params[n]) for n in names))
    flat = [arrays[0].ravel(), float(lower), float(upper)]
    for n, a_ in zip(names, arrays[1:]):
        flat.append(a_.ravel().astype("int64" if (family, n) == ("Binomial", "n") else "float64"))
    return fn(*flat).reshape(arrays[0].shape)


def test_symbolic_censoring_points_match_constant_ones():
    """The symbolic-bounds graph equals PyMC's graph with constant bounds (incl. one-sided)."""
    ys = np.array([-1.0, -0.3, 0.0, 0.8, 2.0])
    cases = [(-1.0, 2.0), (-1.0, None), (None, 2.0)]
    f64 = np.float64
    graphs = [pm.logp(pm.Censored.dist(pm.Normal.dist(f64(0.2), f64(0.7)), lower=l, upper=u), ys) for l, u in cases]
    graphs.append(pm.logp(pm.Censored.dist(pm.Poisson.dist(f64(3.0)), lower=None, upper=10), np.arange(11.0)))
    wants = pytensor.function([], graphs)()  # one compilation for the four constant-bound graphs
    for (l, u), want in zip(cases, wants):
        got = censored_logp("Normal", -np.inf if l is None else l, np.inf if u is None else u, ys, mu=0.2, sigma=0.7)
        np.testing.assert_allclose(got, want, rtol=1e-12)
    np.testing.assert_allclose(censored_logp("Poisson", -np.inf, 10, np.arange(11.0), mu=3.0), wants[-1], rtol=1e-12)


def cparams(family, base_bounds, lower, upper):
    return (Nested(base_op(family), tuple(base_bounds)), Bounds.point(lower), Bounds.point(upper))


def rule(family, domain, base_bounds, lower, upper, xp=NP):
    return log_density_range(censored_op(), domain, cparams(family, base_bounds, lower, upper), xp)


def assert_exact_censored(r, brute, label=""):
    (r_lo, r_hi), (b_lo, b_hi) = (float(r[0]), float(r[1])), brute
    slack = 1e-9 * (1 + abs(b_lo) + abs(b_hi)) + PYMC_ATOM_ERR
    assert r_lo <= b_lo + slack, f"{label}: rule lo {r_lo!r} above attained min {b_lo!r}"
    assert r_hi >= b_hi - slack, f"{label}: rule hi {r_hi!r} below attained max {b_hi!r}"
    tol = GRID_TOL * (1 + abs(b_lo) + abs(b_hi)) + PYMC_ATOM_ERR
    assert r_lo == pytest.approx(b_lo, abs=tol, rel=0), f"{label}: lo"
    assert r_hi == pytest.approx(b_hi, abs=tol, rel=0), f"{label}: hi"


def _pt_bounds(b):
    conv = lambda v: pt.as_tensor_variable(np.asarray(v, dtype="float64"))  # noqa: E731
    if b.is_point:
        return Bounds.point(conv(b.lo), b.space)
    return Bounds(conv(b.lo), conv(b.hi), b.space)


def assert_pt_matches_np(family, domain, base_bounds, lower, upper):
    np_lo, np_hi = rule(family, domain, base_bounds, lower, upper)
    params = (
        Nested(base_op(family), tuple(_pt_bounds(b) for b in base_bounds)),
        Bounds.point(pt.constant(np.asarray(lower, dtype="float64"))),
        Bounds.point(pt.constant(np.asarray(upper, dtype="float64"))),
    )
    t_lo, t_hi = log_density_range(censored_op(), domain, params, PT)
    assert t_lo.dtype == t_hi.dtype == "float64"
    lo, hi = pytensor.function([], [t_lo, t_hi])()
    np.testing.assert_allclose(lo, np_lo, rtol=1e-11, atol=1e-11)
    np.testing.assert_allclose(hi, np_hi, rtol=1e-11, atol=1e-11)


# --------------------------------------------------------------------------- wiring

def test_registered():
    info = rule_info(censored_op())
    assert info.family == "Censored"
    assert info.param_names == ("dist", "lower", "upper")
    rv = pm.Censored.dist(pm.Normal.dist(0.0, 1.0), lower=-1.0, upper=None)
    assert len(rv.owner.op.dist_params(rv.owner)) == 3


# --------------------------------------------------------------------------- Normal base, per theta

NORMAL_CASES = [
    # (l, u), domain, (m_lo, m_hi), sigma
    ((-1.0, 2.0), Interval(-1, 2), (-0.5, 0.5), 0.7),  # two-sided, window inside
    ((-1.0, 2.0), Interval(-1, 2), (-3.0, -2.0), 0.3),  # window left of the data: upper atom tiny
    ((-1.0, 2.0), Interval(-1, 2), (0.4, 0.4), 1.5),  # degenerate window
    ((-1.0, 2.0), Interval(-1, 2), (1.0, 4.0), 5.0),  # large sigma: atoms near 1/2
    ((0.0, np.inf), Interval(0, 3), (-1.0, 1.0), 0.5),  # lower (left) censoring only
    ((-np.inf, 1.5), Interval(-2, 1.5), (0.0, 3.0), 0.8),  # upper (right) censoring only
    ((-1.0, 2.0), Interval(-1, 1), (-0.2, 0.8), 0.6),  # the domain stops short of u: no upper atom
    ((-1.0, 2.0), Interval(-0.5, 1.5), (0.0, 1.0), 0.6),  # no atom at all: the Normal rule
]


@pytest.mark.parametrize("lu, domain, mu, sigma", NORMAL_CASES, ids=[f"{c[0]}-{c[1]}-{c[2]}-{c[3]}" for c in NORMAL_CASES])
def test_censored_normal_exact(lu, domain, mu, sigma):
    l, u = lu
    m_lo, m_hi = (np.float64(v) for v in mu)
    base = (Bounds(m_lo, m_hi), Bounds.point(sigma))
    r = rule("Normal", domain, base, l, u)
    axes = [("c", domain.lo, domain.hi), ("c", m_lo, m_hi) if m_hi > m_lo else ("d", [m_lo])]
    brute = brute_range(lambda y, m: censored_logp("Normal", l, u, y, mu=m, sigma=sigma), axes)
    assert_exact_censored(r, brute, label="censored Normal")
    assert_pt_matches_np("Normal", domain, base, l, u)


def test_censored_normal_formula_and_atoms_against_scipy():
    """The docs/theory/glm.md#censored-normal formula, with the atoms from SciPy (exact to 1e-12)."""
    l, u, (m_lo, m_hi), s = -1.0, 2.0, (-0.5, 0.5), 0.7
    a, b = l, u
    r_min = max(0.0, l - m_hi, m_lo - u)
    r_max = max(u - m_lo, m_hi - l)
    dens = lambda r: st.norm.logpdf(r, scale=s)  # noqa: E731
    top = max(dens(r_min), sp.log_ndtr((l - m_lo) / s), sp.log_ndtr((m_hi - u) / s))
    bot = min(dens(r_max), sp.log_ndtr((l - m_hi) / s), sp.log_ndtr((m_lo - u) / s))
    lo, hi = rule("Normal", Interval(a, b), (Bounds(np.float64(m_lo), np.float64(m_hi)), Bounds.point(s)), l, u)
    assert lo == pytest.approx(bot, rel=1e-13) and hi == pytest.approx(top, rel=1e-13)


def test_pymc_normal_lcdf_error_is_what_the_slack_covers():
    z = np.linspace(-30, -1.01, 50)
    x = pt.dvector()
    from pymc.distributions.dist_math import normal_lcdf

    err = pytensor.function([x], normal_lcdf(0.0, 1.0, x))(z) - sp.log_ndtr(z)
    assert np.max(np.abs(err)) < PYMC_ATOM_ERR
    # the rule's own ln Phi (both namespaces) is accurate
    from pymc_dp.rules.censored import _log_ndtr

    mine = pytensor.function([x], _log_ndtr(x, PT))(z)
    np.testing.assert_allclose(mine, sp.log_ndtr(z), rtol=1e-14, atol=1e-14)


def test_censored_normal_elementwise_censoring_points():
    """Per-element censoring points: elements whose point is at the domain's end carry the
    atom, the others do not; each equals the scalar call."""
    dom = Interval(-1, 2)
    l = np.array([-1.0, -1.0, -2.0, -np.inf])
    u = np.array([2.0, 3.0, 2.0, np.inf])
    mu = Bounds(np.array([-0.5, 0.0, 1.0, 0.3]), np.array([0.5, 0.2, 2.5, 0.3]))
    base = (mu, Bounds.point(np.array([0.7, 0.4, 1.1, 2.0])))
    lo, hi = rule("Normal", dom, base, l, u)
    assert lo.shape == (4,)
    for i in range(4):
        b_i = (Bounds(mu.lo[i], mu.hi[i]), Bounds.point(base[1].lo[i]))
        s_lo, s_hi = rule("Normal", dom, b_i, l[i], u[i])
        assert lo[i] == pytest.approx(float(s_lo), rel=1e-14) and hi[i] == pytest.approx(float(s_hi), rel=1e-14)
    # the last element has no atom: the Normal rule itself
    n_lo, n_hi = log_density_range(base_op("Normal"), dom, (Bounds.point(0.3), Bounds.point(2.0)), NP)
    assert lo[3] == pytest.approx(float(n_lo)) and hi[3] == pytest.approx(float(n_hi))
    assert_pt_matches_np("Normal", dom, base, l, u)


def test_infinite_censoring_points_are_uncensored_rows():
    """Survival data as PyMC writes it: ``upper = +inf`` on uncensored rows, the study's end
    (here the domain's top) on censored ones. An infinite row is the base's own range, a row
    at the top carries the atom; the rule covers PyMC's censored log-density over each row's
    records. A finite point inside the domain is refused: a neighbour's record may lie beyond it."""
    dom = Interval(0, 5)
    u = np.array([np.inf, 5.0, np.inf, 5.0])
    for scale in (0.4, 1.5, 6.0):
        lo, hi = rule("Exponential", dom, (Bounds.point(scale),), -np.inf, u)
        assert lo.shape == (4,) and np.all(np.isfinite(lo)) and np.all(np.isfinite(hi))
        for i, u_i in enumerate(u):
            vals = censored_logp("Exponential", -np.inf, u_i, np.linspace(0.0, 5.0, 201), lam=1.0 / scale)
            assert lo[i] <= vals.min() + 1e-12 and hi[i] >= vals.max() - 1e-12, (scale, i)
        e_lo, e_hi = log_density_range(base_op("Exponential"), dom, (Bounds.point(scale),), NP)
        assert lo[0] == pytest.approx(float(e_lo)) and hi[0] == pytest.approx(float(e_hi))
        assert hi[1] >= np.log(np.exp(-5.0 / scale)) - 1e-12  # the atom P(Y >= 5)
    with pytest.raises(DomainError, match="smallest finite upper point"):
        rule("Exponential", dom, (Bounds.point(1.0),), -np.inf, np.array([np.inf, 1.2]))


# --------------------------------------------------------------------------- other bases, per theta

OTHER_CASES = [
    # family, fixed PyMC kwargs, window param (PyMC name == Op name) and its interval, l, u, domain
    ("StudentT", dict(nu=3.0, sigma=0.6), "mu", (-0.5, 1.0), -1.0, 2.0, Interval(-1, 2)),
    ("StudentT", dict(nu=1.5, sigma=0.3), "mu", (3.0, 4.0), -np.inf, 2.0, Interval(-1, 2)),
    ("Laplace", dict(b=0.5), "mu", (-0.5, 0.5), -1.0, 1.0, Interval(-1, 1)),
    ("Laplace", dict(b=0.8), "mu", (1.5, 2.5), 0.0, np.inf, Interval(0, 2)),
    ("Cauchy", dict(beta=0.4), "alpha", (-0.3, 0.9), -1.0, 1.0, Interval(-1, 1)),
    ("Cauchy", dict(beta=0.2), "alpha", (-5.0, -4.0), -np.inf, 3.0, Interval(0, 3)),
    ("LogNormal", dict(sigma=0.6), "mu", (0.0, 1.0), 0.5, 6.0, Interval(0.5, 6)),
    ("LogNormal", dict(sigma=1.2), "mu", (-1.0, -1.0), 0.2, np.inf, Interval(0.2, 4)),
    ("Gamma", dict(alpha=2.5, beta=1.5), None, None, 0.25, 4.0, Interval(0.25, 4)),
    ("Gamma", dict(alpha=0.7, beta=0.5), None, None, -np.inf, 3.0, Interval(0.1, 3)),
    ("Exponential", dict(lam=0.7), None, None, 0.5, 5.0, Interval(0.5, 5)),
    ("Exponential", dict(lam=2.0), None, None, -np.inf, 1.5, Interval(0, 1.5)),
]


@pytest.mark.parametrize(
    "family, fixed, name, interval, l, u, domain", OTHER_CASES,
    ids=[f"{c[0]}-{c[3]}-{c[4]}-{c[5]}" for c in OTHER_CASES],
)
def test_censored_other_continuous_exact(family, fixed, name, interval, l, u, domain):
    if name is None:
        base = tuple(Bounds.point(v) for v in op_params(family, **fixed))
        brute = brute_range(lambda y: censored_logp(family, l, u, y, **fixed), [("c", domain.lo, domain.hi)])
    else:
        lo_, hi_ = (np.float64(v) for v in interval)
        probe = op_params(family, **fixed, **{name: float(lo_)})
        i = rule_info(base_op(family)).param_names.index(name)
        base = [Bounds.point(v) for v in probe]
        base[i] = Bounds(lo_, hi_)
        axes = [("c", domain.lo, domain.hi), ("c", lo_, hi_) if hi_ > lo_ else ("d", [lo_])]
        brute = brute_range(lambda y, th: censored_logp(family, l, u, y, **fixed, **{name: th}), axes)
    r = rule(family, domain, base, l, u)
    assert_exact_censored(r, brute, label=family)
    assert_pt_matches_np(family, domain, base, l, u)


@pytest.mark.parametrize("k, t, l, u, domain", [
    (2.0, (-0.5, 0.5), 0.2, 4.0, Interval(0.2, 4)),
    (4.0, (0.5, 1.5), -np.inf, 3.0, Interval(0.3, 3)),
    (0.8, (-1.0, 0.0), 0.5, np.inf, Interval(0.5, 5)),
])
def test_censored_gamma_log_mean_exact(k, t, l, u, domain):
    """Censored Gamma regression: scale = e^t / k, t in a window."""
    t_lo, t_hi = (np.float64(v) for v in t)
    base = (Bounds.point(k), Bounds(t_lo, t_hi, "log-mean"))
    r = rule("Gamma", domain, base, l, u)
    brute = brute_range(
        lambda y, tt: censored_logp("Gamma", l, u, y, alpha=k, beta=k / np.exp(tt)),
        [("c", domain.lo, domain.hi), ("c", t_lo, t_hi)],
    )
    assert_exact_censored(r, brute, label="censored Gamma log-mean")
    assert_pt_matches_np("Gamma", domain, base, l, u)


DISCRETE_CASES = [
    # family, PyMC kwargs (a window: (name, lo, hi)), l, u, domain
    ("Poisson", dict(mu=3.0), None, -np.inf, 10, Integers(0, 10)),  # P(Y >= 10) at 10
    ("Poisson", dict(mu=12.0), None, 2, 10, Integers(2, 10)),
    ("Poisson", dict(mu=0.5), None, 1, 2, Integers(1, 2)),  # atoms only, no interior value
    ("Poisson", dict(), ("mu", 1.0, 6.0), -np.inf, 8, Integers(0, 8)),
    ("Geometric", dict(p=0.3), None, 2, 9, Integers(2, 9)),
    ("Geometric", dict(p=0.05), None, -np.inf, 20, Integers(1, 20)),
    ("Binomial", dict(n=12, p=0.4), None, 2, 9, Integers(2, 9)),
    ("Binomial", dict(n=12), ("p", 0.2, 0.7), 0, 6, Integers(0, 6)),
]


@pytest.mark.parametrize("family, fixed, window, l, u, domain", DISCRETE_CASES, ids=[f"{c[0]}-{c[3]}-{c[4]}-{c[2]}" for c in DISCRETE_CASES])
def test_censored_discrete_exact(family, fixed, window, l, u, domain):
    ys = ("d", np.arange(domain.lo, domain.hi + 1))
    if window is None:
        base = tuple(Bounds.point(v) for v in op_params(family, **fixed))
        brute = brute_range(lambda y: censored_logp(family, l, u, y, **fixed), [ys])
    else:
        name, lo_, hi_ = window
        probe = op_params(family, **fixed, **{name: lo_})
        i = rule_info(base_op(family)).param_names.index(name)
        base = [Bounds.point(v) for v in probe]
        base[i] = Bounds(np.float64(lo_), np.float64(hi_))
        if name not in rule_info(base_op(family)).range_params:
            with pytest.raises(UnsupportedFactorError):
                rule(family, domain, base, l, u)
            return
        brute = brute_range(lambda y, th: censored_logp(family, l, u, y, **fixed, **{name: th}), [ys, ("c", lo_, hi_)])
    r = rule(family, domain, base, l, u)
    assert_exact_censored(r, brute, label=family)
    assert_pt_matches_np(family, domain, base, l, u)


LINK_CASES = [
    # family, fixed PyMC kwargs, link space, window of the link, PyMC kwargs from t, l, u, domain
    ("Poisson", {}, "log-mean", (0.2, 1.8), lambda t: dict(mu=np.exp(t)), -np.inf, 8, Integers(0, 8)),
    ("Poisson", {}, "log-mean", (1.5, 2.5), lambda t: dict(mu=np.exp(t)), 1, 9, Integers(1, 9)),
    ("NegativeBinomial", dict(n=2.5), "log-mean", (0.0, 1.5),
     lambda t: dict(n=2.5, p=2.5 / (2.5 + np.exp(t))), -np.inf, 7, Integers(0, 7)),
    ("Binomial", dict(n=10), "logit", (-1.0, 0.5), lambda t: dict(n=10, p=sp.expit(t)), 1, 7, Integers(1, 7)),
]


@pytest.mark.parametrize(
    "family, fixed, space, window, kw, l, u, domain", LINK_CASES, ids=[f"{c[0]}-{c[2]}-{c[5]}-{c[6]}" for c in LINK_CASES]
)
def test_censored_discrete_link_windows_exact(family, fixed, space, window, kw, l, u, domain):
    """A regression on a link scale (Poisson / NB log-mean, Binomial logit) under censoring."""
    info = rule_info(base_op(family))
    if info is None or "p" not in info.range_params and "mu" not in info.range_params:
        pytest.skip(f"the {family} rule takes no window")
    t_lo, t_hi = (np.float64(v) for v in window)
    name = "mu" if family == "Poisson" else "p"
    i = info.param_names.index(name)
    base = [Bounds.point(v) for v in op_params(family, **kw(float(t_lo)))]
    base[i] = Bounds(t_lo, t_hi, space)
    r = rule(family, domain, base, l, u)
    ys = ("d", np.arange(domain.lo, domain.hi + 1))
    brute = brute_range(lambda y, t: censored_logp(family, l, u, y, **kw(t)), [ys, ("c", t_lo, t_hi)])
    assert_exact_censored(r, brute, label=f"{family} {space}")
    assert_pt_matches_np(family, domain, base, l, u)


def test_censored_poisson_upper_atom_is_tail_mass():
    """Poisson censored at M: the value at M is ln P(Y >= M) (PyMC adds the mass at M)."""
    mu, M = 3.0, 10
    lo, hi = rule("Poisson", Integers(0, M), (Bounds.point(mu),), -np.inf, M)
    vals = np.concatenate([st.poisson.logpmf(np.arange(M), mu), [st.poisson.logsf(M - 1, mu)]])
    assert lo == pytest.approx(vals.min(), rel=1e-12) and hi == pytest.approx(vals.max(), rel=1e-12)


# --------------------------------------------------------------------------- atom functions vs reference CDFs

ATOM_CASES = [
    ("Normal", (0.3, 0.7), st.norm(0.3, 0.7)),
    ("StudentT", (2.5, 0.3, 0.7), st.t(2.5, 0.3, 0.7)),
    ("Laplace", (0.3, 0.7), st.laplace(0.3, 0.7)),
    ("Cauchy", (0.3, 0.7), st.cauchy(0.3, 0.7)),
    ("Logistic", (0.3, 0.7), st.logistic(0.3, 0.7)),
    ("LogNormal", (0.3, 0.7), st.lognorm(0.7, scale=math.exp(0.3))),
    ("Gamma", (2.5, 0.8), st.gamma(2.5, scale=0.8)),
    ("Exponential", (0.8,), st.expon(scale=0.8)),
]


@pytest.mark.parametrize("family, vals, ref", ATOM_CASES, ids=[c[0] for c in ATOM_CASES])
def test_continuous_atoms_against_scipy(family, vals, ref):
    spec = _BASES[type(base_op(family))]
    x = np.concatenate([np.linspace(0.05, 6, 40), [0.3, 1e-3]])
    if family not in ("LogNormal", "Gamma", "Exponential"):
        x = np.concatenate([x, -x, [-40.0, 40.0]])
    np.testing.assert_allclose(spec.log_below(x, vals, NP), ref.logcdf(x), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(spec.log_above(x, vals, NP), ref.logsf(x), rtol=1e-10, atol=1e-12)
    xs = pt.dvector()
    f = pytensor.function([xs], [spec.log_below(xs, tuple(np.float64(v) for v in vals), PT), spec.log_above(xs, tuple(np.float64(v) for v in vals), PT)])
    b, a = f(x)
    np.testing.assert_allclose(b, ref.logcdf(x), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(a, ref.logsf(x), rtol=1e-10, atol=1e-12)


DISCRETE_ATOM_CASES = [
    ("Poisson", (3.7,), st.poisson(3.7), 0),
    ("Geometric", (0.3,), st.geom(0.3), 1),
    ("Binomial", (12.0, 0.35), st.binom(12, 0.35), 0),
    ("NegativeBinomial", (3.0, 0.4), st.nbinom(3.0, 0.4), 0),
]


@pytest.mark.parametrize("family, vals, ref, lo", DISCRETE_ATOM_CASES, ids=[c[0] for c in DISCRETE_ATOM_CASES])
def test_discrete_atoms_against_scipy(family, vals, ref, lo):
    """``ln P(Y <= x)`` and ``ln P(Y >= x)`` (the latter is SciPy's ``logsf(x - 1)``)."""
    spec = _BASES[type(base_op(family))]
    x = np.arange(lo, 13, dtype=float)
    np.testing.assert_allclose(spec.log_below(x, vals, NP), ref.logcdf(x), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(spec.log_above(x, vals, NP), ref.logsf(x - 1), rtol=1e-10, atol=1e-12)


def test_link_spaces_of_atoms():
    """A window on a link scale is mapped to the natural parameter before the atoms."""
    conv = _BASES[type(base_op("NegativeBinomial"))].spaces[("p", "log-mean")]
    n, t = 3.0, 1.2  # mu = e^t, p = n / (n + mu)
    assert conv(t, (n, None), NP) == pytest.approx(n / (n + math.exp(t)))
    conv = _BASES[type(base_op("Gamma"))].spaces[("scale", "log-mean")]
    assert conv(t, (2.5, None), NP) == pytest.approx(math.exp(t) / 2.5)


@pytest.mark.parametrize("family", ["Logistic", "NegativeBinomial"])
def test_bases_without_their_own_rule(family):
    """Logistic / NegativeBinomial have atoms here; their interior needs their own rule."""
    dom = Interval(-1, 1) if family == "Logistic" else Integers(0, 5)
    base = tuple(Bounds.point(v) for v in op_params(family, **_EXAMPLE[family]))
    if rule_info(base_op(family)) is None:
        with pytest.raises(UnsupportedFactorError, match=f"{family}.*Supported bases"):
            rule(family, dom, base, -1.0 if family == "Logistic" else -np.inf, 1.0 if family == "Logistic" else 5)
        return
    l, u = (-1.0, 1.0) if family == "Logistic" else (-np.inf, 5)
    r = rule(family, dom, base, l, u)
    axes = [("c", -1.0, 1.0)] if family == "Logistic" else [("d", np.arange(6))]
    brute = brute_range(lambda y: censored_logp(family, l, u, y, **_EXAMPLE[family]), axes)
    assert_exact_censored(r, brute, label=family)


# --------------------------------------------------------------------------- refusals

def test_censored_refusals():
    normal = (Bounds.point(0.0), Bounds.point(1.0))
    with pytest.raises(DomainError, match="inside \\[lower, upper\\]"):
        rule("Normal", Interval(-2, 1), normal, -1.0, 1.0)
    with pytest.raises(DomainError, match="inside \\[lower, upper\\]"):
        rule("Normal", Interval(-1, 3), normal, -1.0, 2.0)
    with pytest.raises(UnsupportedFactorError, match="Beta.*Supported bases"):
        rule("Beta", Interval(0.1, 0.9), (Bounds.point(2.0), Bounds.point(2.0)), 0.1, 0.9)
    with pytest.raises(UnsupportedFactorError, match="Uniform"):
        rule("Uniform", Interval(0.1, 0.9), (Bounds.point(0.0), Bounds.point(1.0)), 0.1, 0.9)
    with pytest.raises(UnsupportedFactorError, match="lower"):
        log_density_range(censored_op(), Interval(-1, 1), (Nested(base_op("Normal"), normal), Bounds(-1.0, 0.0), Bounds.point(1.0)), NP)
    with pytest.raises(UnsupportedFactorError, match="sigma"):
        rule("Normal", Interval(-1, 1), (Bounds.point(0.0), Bounds(1.0, 2.0)), -1.0, 1.0)
    # a link scale the base's own rule does not take as a window (the Poisson rule reads mu
    # as a natural point) is refused rather than misread
    if "mu" not in rule_info(base_op("Poisson")).range_params:
        with pytest.raises(UnsupportedFactorError, match="log-mean"):
            rule("Poisson", Integers(0, 10), (Bounds.point(0.5, "log-mean"),), -np.inf, 10)
    if "p" not in rule_info(base_op("Binomial")).range_params:
        with pytest.raises(UnsupportedFactorError, match="logit"):
            rule("Binomial", Integers(0, 5), (Bounds.point(10.0), Bounds(-1.0, 1.0, "logit")), -np.inf, 5)
    with pytest.raises(UnsupportedFactorError, match="log-mean"):
        rule("Binomial", Integers(0, 5), (Bounds.point(10.0), Bounds(-1.0, 1.0, "log-mean")), -np.inf, 5)
    with pytest.raises(UnsupportedFactorError, match="nu"):
        rule("StudentT", Interval(-1, 1), (Bounds(1.0, 2.0), Bounds.point(0.0), Bounds.point(1.0)), -1.0, 1.0)
    with pytest.raises(UnsupportedFactorError, match="base distribution"):
        log_density_range(censored_op(), Interval(-1, 1), (Bounds.point(0.0), Bounds.point(-1.0), Bounds.point(1.0)), NP)
    with pytest.raises(DomainError, match="integers"):
        rule("Poisson", Interval(0, 10), (Bounds.point(2.0),), -np.inf, 10)
    with pytest.raises(DomainError, match="support"):
        rule("Geometric", Integers(0, 5), (Bounds.point(0.3),), 0, 5)
    with pytest.raises(UnsupportedFactorError, match="every element or for none"):
        rule("Poisson", Integers(0, 10), (Bounds.point(2.0),), -np.inf, np.array([10.0, 12.0]))
    with pytest.raises(UnsupportedFactorError, match="lower < upper"):
        rule("Normal", Interval(-1, 1), normal, 2.0, 1.0)
    with pytest.raises(UnsupportedFactorError, match="lower < upper"):
        rule("Poisson", Integers(1, 1), (Bounds.point(2.0),), 1, 1)
    # a symbolic censoring point (not a constant of the model)
    params = (
        Nested(base_op("Normal"), tuple(_pt_bounds(b) for b in normal)),
        Bounds.point(pt.dscalar("l")),
        Bounds.point(pt.constant(1.0)),
    )
    with pytest.raises(UnsupportedFactorError, match="constant"):
        log_density_range(censored_op(), Interval(-1, 1), params, PT)


def test_supported_bases_listed():
    assert {"Normal", "StudentT", "Laplace", "Cauchy", "Logistic", "LogNormal", "Gamma", "Exponential",
            "Poisson", "Geometric", "Binomial", "NegativeBinomial"} == set(SUPPORTED_BASES)


# --------------------------------------------------------------------------- region (Normal base)

def creg(domain, mu, sigma, l, u):
    params = (NestedRegion(base_op("Normal"), (mu, sigma)), Span.point(l), Span.point(u))
    return np.asarray(region_lipschitz(censored_op(), domain, params), dtype=float)


def L_theta(domain, m_lo, m_hi, s, l, u):
    lo, hi = rule("Normal", domain, (Bounds(np.asarray(m_lo, float), np.asarray(m_hi, float)), Bounds.point(np.asarray(s, float))), l, u)
    return np.asarray(hi - lo)


REGION_SETUPS = [
    ((-1.0, 2.0), Interval(-1, 2)),
    ((0.0, np.inf), Interval(0, 3)),
    ((-np.inf, 1.0), Interval(-2, 1)),
    ((-1.0, 2.0), Interval(-1, 1.5)),
]


@pytest.mark.parametrize("lu, domain", REGION_SETUPS, ids=[str(s) for s in REGION_SETUPS])
def test_censored_region_sound_and_within_bnb_tolerance(lu, domain):
    l, u = lu
    rng = np.random.default_rng(int(1000 * (domain.lo + 7 * domain.hi)) % 2**31)
    c, w = domain.center, domain.half_width
    for trial in range(12):
        o_lo, o_hi = sorted(c + rng.uniform(-3, 3, 2) * (w + 0.5))
        half = float(rng.choice([0.0, rng.uniform(0, 1.5)]))
        s_lo = float(np.exp(rng.uniform(-1.8, 0.5)))
        s_hi = s_lo * float(np.exp(rng.choice([0.0, rng.uniform(0.1, 2.5)])))
        mu = Span(o_lo, o_hi) if half == 0 and trial % 2 else Window(o_lo, o_hi, half)
        reg = float(creg(domain, mu, Span(s_lo, s_hi), l, u))
        assert np.isfinite(reg)
        # sampled theta, corners included
        os_ = np.concatenate([[o_lo, o_hi], rng.uniform(o_lo, o_hi, 30)])
        hs = np.concatenate([[half, half], rng.uniform(0, half, 30)])
        ss = np.concatenate([[s_lo, s_hi], np.exp(rng.uniform(np.log(s_lo), np.log(s_hi), 20))])
        O, S = np.meshgrid(os_, ss)
        H = np.broadcast_to(hs, O.shape)
        sampled = L_theta(domain, O - H, O + H, S, l, u)
        assert reg >= sampled.max() - 1e-9 * (1 + abs(reg)), f"trial {trial}"
        # a dense sigma scan at the two offset ends (h = half): the B&B bound is within its
        # tolerance of the best value there
        s_fine = np.geomspace(s_lo, s_hi, 3000)
        best = max(float(L_theta(domain, o - half, o + half, s_fine, l, u).max()) for o in (o_lo, o_hi))
        assert reg >= best - 1e-9 * (1 + abs(best))
        assert reg <= best + 1.001e-3 * max(abs(best), 1.0), f"trial {trial}: {reg} vs {best}"


def test_censored_region_point_sigma_is_exact_at_an_end():
    dom, l, u = Interval(-1, 2), -1.0, 2.0
    for o_lo, o_hi, half, s in [(-0.5, 0.5, 0.3, 0.7), (1.0, 3.0, 0.0, 0.4), (-4.0, 0.0, 1.0, 2.0)]:
        reg = float(creg(dom, Window(o_lo, o_hi, half), Span.point(s), l, u))
        ends = max(float(L_theta(dom, o - half, o + half, s, l, u)) for o in (o_lo, o_hi))
        assert reg == pytest.approx(ends, rel=1e-13)


def test_censored_lemma_c_offset_at_an_end():
    """Lemma C of docs/theory/glm.md#censored-offset, re-checked: at fixed sigma, the constant of a sliding window is
    largest at an end of the offset interval (dense scans, one- and two-sided censoring)."""
    rng = np.random.default_rng(8)
    worst = 0.0
    for trial in range(150):
        l, u, domain = [(-1.0, 2.0, Interval(-1, 2)), (0.0, np.inf, Interval(0, 3)), (-np.inf, 1.0, Interval(-2, 1))][trial % 3]
        c, w = domain.center, domain.half_width
        o_lo, o_hi = sorted(c + rng.uniform(-4, 4, 2) * (w + 0.5))
        half = float(rng.choice([0.0, rng.uniform(0, 2)]))
        s = float(np.exp(rng.uniform(-2.5, 1.5)))
        os_ = np.linspace(o_lo, o_hi, 2001)
        L = L_theta(domain, os_ - half, os_ + half, s, l, u)
        ends = max(L[0], L[-1])
        worst = max(worst, (L.max() - ends) / max(abs(ends), 1.0))
    assert worst <= 1e-12


def test_censored_region_sigma_scan_never_exceeds():
    """A dense (offset, sigma) scan inside the region never exceeds the region value."""
    dom, l, u = Interval(-1, 2), -1.0, 2.0
    o_lo, o_hi, half, s_lo, s_hi = -0.8, 1.7, 0.4, 0.2, 3.0
    reg = float(creg(dom, Window(o_lo, o_hi, half), Span(s_lo, s_hi), l, u))
    O, S = np.meshgrid(np.linspace(o_lo, o_hi, 300), np.geomspace(s_lo, s_hi, 300))
    L = L_theta(dom, O - half, O + half, S, l, u)
    assert L.max() <= reg + 1e-9
    assert reg <= L.max() + 1.001e-3 * max(L.max(), 1.0)


def test_censored_region_vectorised_sigma_spans():
    dom, l, u = Interval(-1, 2), np.array([-1.0, -1.0, -2.0]), np.array([2.0, 3.0, 2.0])
    o_lo, o_hi, half = np.array([-0.5, 0.0, 1.0]), np.array([0.5, 0.2, 2.5]), np.array([0.2, 0.0, 0.5])
    s_lo, s_hi = np.array([0.5, 0.5, 0.3]), np.array([2.0, 2.0, 0.3])
    vec = creg(dom, Window(o_lo, o_hi, half), Span(s_lo, s_hi), l, u)
    assert vec.shape == (3,)
    for i in range(3):
        one = float(creg(dom, Window(o_lo[i], o_hi[i], half[i]), Span(s_lo[i], s_hi[i]), l[i], u[i]))
        assert vec[i] == pytest.approx(one, rel=1e-12)


def test_censored_region_limits_and_refusals():
    dom, l, u = Interval(-1, 2), -1.0, 2.0
    assert creg(dom, Window(-np.inf, 0.0, 0.2), Span(0.5, 1.0), l, u) == np.inf
    assert creg(dom, Span(0.0, np.inf), Span(0.5, 1.0), l, u) == np.inf
    with pytest.raises(NoRegionRule, match="both bounds"):
        creg(dom, Window(0.0, 1.0, 0.2), Span(0.5, np.inf), l, u)
    with pytest.raises(NoRegionRule, match="both bounds"):
        creg(dom, Window(0.0, 1.0, 0.2), Span(0.0, 1.0), l, u)
    with pytest.raises(NoRegionRule, match="sigma"):
        creg(dom, Window(0.0, 1.0, 0.2), Window(0.5, 1.0, 0.1), l, u)
    with pytest.raises(NoRegionRule, match="StudentT.*Normal base only"):
        params = (NestedRegion(base_op("StudentT"), (Span.point(3.0), Span(0.0, 1.0), Span(0.5, 1.0))), Span.point(l), Span.point(u))
        region_lipschitz(censored_op(), dom, params)
    with pytest.raises(NoRegionRule, match="fixed"):
        params = (NestedRegion(base_op("Normal"), (Span(0.0, 1.0), Span(0.5, 1.0))), Span(-1.0, 0.0), Span.point(u))
        region_lipschitz(censored_op(), dom, params)
    with pytest.raises(DomainError):
        creg(Interval(-2, 2), Span(0.0, 1.0), Span(0.5, 1.0), l, u)


def test_censored_tau_lipschitz_constant_bounds_the_slopes():
    """Lemma D's constant: on a sigma piece [s0, s1], every finite-difference slope of L in
    tau = ln sigma is at most K(s0) (one- and two-sided censoring, windows anywhere)."""
    from pymc_dp.rules.censored import _normal_tau_lipschitz

    rng = np.random.default_rng(21)
    for trial in range(60):
        l, u, domain = [(-1.0, 2.0, Interval(-1, 2)), (0.0, np.inf, Interval(0, 3)), (-np.inf, 1.0, Interval(-2, 1))][trial % 3]
        a, b = domain.lo, domain.hi
        c = domain.center
        m_lo = c + rng.uniform(-4, 4)
        m_hi = m_lo + float(rng.choice([0.0, rng.uniform(0, 2)]))
        s0 = float(np.exp(rng.uniform(-2.5, 1.5)))
        s1 = s0 * float(np.exp(rng.uniform(0.05, 1.0)))
        taus = np.linspace(np.log(s0), np.log(s1), 4001)
        L = L_theta(domain, m_lo, m_hi, np.exp(taus), l, u)
        slope = np.max(np.abs(np.diff(L) / np.diff(taus)))
        K = float(_normal_tau_lipschitz(a, b, np.float64(l), np.float64(u), np.isfinite(l) & (l == a), np.isfinite(u) & (u == b), m_lo, m_hi, s0))
        assert slope <= K * (1 + 1e-9), f"trial {trial}: slope {slope} > K {K}"


def test_censored_region_non_sliding_window_uses_its_hull():
    dom, l, u = Interval(-1, 2), -1.0, 2.0
    fixed = float(creg(dom, Window(-0.5, 1.0, 0.2, sliding=False), Span(0.5, 1.0), l, u))
    hull = float(creg(dom, Window(0.25, 0.25, 0.95), Span(0.5, 1.0), l, u))
    assert fixed == pytest.approx(hull, rel=1e-12)
