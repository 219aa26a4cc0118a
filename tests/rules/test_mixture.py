"""Brute-force tests of the mixture rules (``pymc_dp.rules.mixture``).

Ground truth is PyMC's own ``pm.logp`` of the mixture (``pm.NormalMixture``, ``pm.Mixture``,
``pm.ZeroInflated*``, ``pm.Hurdle*``), compiled once per family with symbolic float64 (int64
for counts) inputs (``FAST_COMPILE``: no C compilation, the grids are NumPy-sized) and evaluated
on grids: integer domains are enumerated, continuous axes are scanned and zoomed (the helpers of
``test_rules``). A rule claimed exact must agree to ``1e-7`` relative; a bound must never be
below the brute force (``-1e-9`` slack).

What is claimed, and checked here:

* general mixtures -- a sound bound; exact for an enumerated integer domain with point
  parameters and at one-hot weights; its looseness on separated / overlapping Normal mixtures
  is measured against the brute force (``docs/rules/mixture.md``);
* zero-inflated (Poisson, Binomial; NegativeBinomial when its rule is registered) -- exact,
  windows included (Binomial ``p`` interval; Poisson ``log-mean`` windows when the Poisson rule
  accepts them);
* hurdle Poisson -- exact with ``mu`` windows (natural and ``log-mean``); other discrete hurdles
  exact at point parameters; continuous hurdles exact (atom + density);
* region rules -- sound over random regions (``theta`` sampled inside, corners included) and
  tight (attained at a corner, or within the branch-and-bound tolerance).
"""

from __future__ import annotations

import functools
import math
import warnings

import numpy as np
import pymc as pm
import pytensor
import pytensor.tensor as pt
import pytest

from pymc_dp.domains import Integers, Interval
from pymc_dp.exceptions import DomainError, UnsupportedFactorError
from pymc_dp.rules import NP, PT, Bounds, Nested, element_lipschitz, log_density_range, rule_info
from pymc_dp.rules import region as region_mod
from pymc_dp.rules.mixture import (
    CONTINUOUS_PIECES,
    hurdle_continuous_range,
    mediant_lipschitz,
    mixture_components,
)
from pymc_dp.rules.region import NestedRegion, NoRegionRule, RegionSpec, Span, Window, region_lipschitz
from tests.rules.test_rules import assert_exact, brute_range, op_of, point_bounds, x_axis

FLOAT_SLACK = 1e-9


def _quiet(fn):
    @functools.wraps(fn)
    def wrapper(*a, **k):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return fn(*a, **k)

    return wrapper


# --------------------------------------------------------------------------- PyMC ground truth

# name -> (builder(symbols) -> rv, [(symbol name, kind)]); kind: "v" float vector, "i" int
# vector, "m" float matrix (last axis = component)
_TRUTH = {
    "NormalMixture": (
        lambda s: pm.NormalMixture.dist(w=s["w"], mu=s["mu"], sigma=s["sigma"]),
        [("w", "m"), ("mu", "m"), ("sigma", "m")],
    ),
    "Normal+StudentT": (
        lambda s: pm.Mixture.dist(
            w=s["w"],
            comp_dists=[
                pm.Normal.dist(mu=s["mu1"], sigma=s["s1"]),
                pm.StudentT.dist(nu=s["nu"], mu=s["mu2"], sigma=s["s2"]),
            ],
        ),
        [("w", "m"), ("mu1", "v"), ("s1", "v"), ("nu", "v"), ("mu2", "v"), ("s2", "v")],
    ),
    "PoissonMixture": (
        lambda s: pm.Mixture.dist(w=s["w"], comp_dists=[pm.Poisson.dist(mu=s["mu1"]), pm.Poisson.dist(mu=s["mu2"])]),
        [("w", "m"), ("mu1", "v"), ("mu2", "v")],
    ),
    "PoissonMixtureBatched": (
        lambda s: pm.Mixture.dist(w=s["w"], comp_dists=pm.Poisson.dist(mu=s["mu"])),
        [("w", "m"), ("mu", "m")],
    ),
    "ZIP": (lambda s: pm.ZeroInflatedPoisson.dist(psi=s["psi"], mu=s["mu"]), [("psi", "v"), ("mu", "v")]),
    "ZIB": (
        lambda s: pm.ZeroInflatedBinomial.dist(psi=s["psi"], n=s["n"], p=s["p"]),
        [("psi", "v"), ("n", "i"), ("p", "v")],
    ),
    "ZINB": (
        lambda s: pm.ZeroInflatedNegativeBinomial.dist(psi=s["psi"], mu=s["mu"], alpha=s["alpha"]),
        [("psi", "v"), ("mu", "v"), ("alpha", "v")],
    ),
    "HurdlePoisson": (lambda s: pm.HurdlePoisson.dist(psi=s["psi"], mu=s["mu"]), [("psi", "v"), ("mu", "v")]),
    "HurdleNB": (
        lambda s: pm.HurdleNegativeBinomial.dist(psi=s["psi"], mu=s["mu"], alpha=s["alpha"]),
        [("psi", "v"), ("mu", "v"), ("alpha", "v")],
    ),
    "HurdleGamma": (
        lambda s: pm.HurdleGamma.dist(psi=s["psi"], alpha=s["alpha"], beta=s["beta"]),
        [("psi", "v"), ("alpha", "v"), ("beta", "v")],
    ),
    "HurdleLogNormal": (
        lambda s: pm.HurdleLogNormal.dist(psi=s["psi"], mu=s["mu"], sigma=s["sigma"]),
        [("psi", "v"), ("mu", "v"), ("sigma", "v")],
    ),
}
_DISCRETE_TRUTH = {"PoissonMixture", "PoissonMixtureBatched", "ZIP", "ZIB", "ZINB", "HurdlePoisson", "HurdleNB"}


@functools.lru_cache(maxsize=None)
@_quiet
def _truth_fn(key):
    build, inputs = _TRUTH[key]
    x = pt.lvector("x") if key in _DISCRETE_TRUTH else pt.dvector("x")
    syms = {}
    for name, kind in inputs:
        syms[name] = {"v": pt.dvector, "i": pt.lvector, "m": pt.dmatrix}[kind](name)
    rv = build(syms)
    fn = pytensor.function([x, *syms.values()], pm.logp(rv, x), mode="FAST_COMPILE")
    return fn, inputs


@_quiet
def truth(key, x, **params):
    """``pm.logp`` of the mixture ``key`` at ``x``, every argument broadcast to one grid
    (matrix parameters carry a trailing component axis)."""
    fn, inputs = _truth_fn(key)
    kinds = dict(inputs)
    x = np.asarray(x)
    lead = [np.asarray(params[n]) if kinds[n] != "m" else np.asarray(params[n])[..., 0] for n, _ in inputs]
    shape = np.broadcast_shapes(x.shape, *(a.shape for a in lead))
    args = [np.broadcast_to(x, shape).ravel().astype("int64" if key in _DISCRETE_TRUTH else "float64")]
    for name, kind in inputs:
        v = np.asarray(params[name], dtype=float)
        if kind == "m":
            K = v.shape[-1]
            args.append(np.broadcast_to(v, shape + (K,)).reshape(-1, K).astype("float64"))
        else:
            args.append(np.broadcast_to(v, shape).ravel().astype("int64" if kind == "i" else "float64"))
    return fn(*args).reshape(shape)


def brute_L(evaluate, axes):
    lo, hi = brute_range(evaluate, axes)
    return hi - lo


# --------------------------------------------------------------------------- building params

MIX_OP = pm.NormalMixture.dist(w=[0.5, 0.5], mu=[0.0, 1.0], sigma=[1.0, 1.0]).owner.op
HURDLE_OP = pm.HurdlePoisson.dist(psi=0.5, mu=1.0).owner.op
DIRAC_OP = pm.ZeroInflatedPoisson.dist(psi=0.5, mu=1.0).owner.inputs[2].owner.op
_P = Bounds.point


def _w(*w):
    return _P(np.asarray(w, dtype=float))


def atom(c=0):
    return Nested(DIRAC_OP, (_P(np.asarray(c)),))


def normal(mu, sigma):
    return Nested(op_of("Normal"), (mu if isinstance(mu, Bounds) else _P(np.asarray(mu, float)), _P(np.asarray(sigma, float))))


def poisson(mu):
    return Nested(op_of("Poisson"), (mu if isinstance(mu, Bounds) else _P(np.asarray(mu, float)),))


def studentt(nu, mu, sigma):
    return Nested(op_of("StudentT"), (_P(float(nu)), mu if isinstance(mu, Bounds) else _P(float(mu)), _P(float(sigma))))


def binomial(n, p):
    return Nested(op_of("Binomial"), (_P(float(n)), p if isinstance(p, Bounds) else _P(float(p))))


def _nb_op():
    op = pm.NegativeBinomial.dist(mu=2.0, alpha=3.0).owner.op
    return op if rule_info(op) is not None else None


def _to_pt(p):
    if isinstance(p, Nested):
        return Nested(p.op, tuple(_to_pt(q) for q in p.params))

    def conv(v):
        return pt.as_tensor_variable(np.asarray(v, dtype="int8" if np.asarray(v).dtype.kind == "i" else "float64"))

    if p.is_point:
        return Bounds.point(conv(p.lo), p.space)
    return Bounds(conv(p.lo), conv(p.hi), p.space, p.extra)


def assert_pt_equals_np(op, domain, params):
    """The PyTensor graphs of the range and of L evaluate to the NumPy values (one compile)."""
    np_lo, np_hi = log_density_range(op, domain, params, NP)
    L_np = element_lipschitz(op, domain, params, NP)
    pt_params = tuple(_to_pt(p) for p in params)
    t_lo, t_hi = log_density_range(op, domain, pt_params, PT)
    L_pt = element_lipschitz(op, domain, pt_params, PT)
    assert t_lo.dtype == t_hi.dtype == L_pt.dtype == "float64"
    lo, hi, L = pytensor.function([], [t_lo, t_hi, L_pt], mode="FAST_COMPILE")()
    np.testing.assert_allclose(lo, np_lo, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(hi, np_hi, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(L, L_np, rtol=1e-12, atol=1e-12)


def assert_sound(rule_L, brute, label=""):
    assert float(rule_L) >= brute - FLOAT_SLACK * (1 + abs(brute)), f"{label}: rule {rule_L!r} < brute {brute!r}"


# --------------------------------------------------------------------------- recogniser


@_quiet
def test_mixture_components_batched_list_and_hurdle():
    nm = pm.NormalMixture.dist(w=[0.3, 0.7], mu=[0.0, 1.0], sigma=[1.0, 2.0])
    w, comps = mixture_components(nm.owner)
    assert len(comps) == 1 and comps[0].batched and type(comps[0].op).__name__ == "NormalRV"
    assert len(comps[0].params) == 2

    mx = pm.Mixture.dist(w=[0.3, 0.7], comp_dists=[pm.Normal.dist(0, 1), pm.StudentT.dist(nu=3, mu=0, sigma=1)])
    w, comps = mixture_components(mx.owner)
    assert [type(c.op).__name__ for c in comps] == ["NormalRV", "StudentTRV"]
    assert not any(c.batched for c in comps)

    zi = pm.ZeroInflatedPoisson.dist(psi=0.7, mu=2.0)
    w, comps = mixture_components(zi.owner)
    assert [type(c.op).__name__ for c in comps] == ["DiracDeltaRV", "PoissonRV"]
    np.testing.assert_allclose(pytensor.function([], w)(), [0.3, 0.7])  # psi is the base's weight

    hp = pm.HurdlePoisson.dist(psi=0.7, mu=2.0)
    w, comps = mixture_components(hp.owner)
    assert type(comps[1].op).__name__ == "PoissonRV" and comps[1].truncation is not None
    assert float(comps[1].params[0].data) == 2.0

    hg = pm.HurdleGamma.dist(psi=0.7, alpha=2.0, beta=1.0)
    w, comps = mixture_components(hg.owner)
    assert type(comps[1].op).__name__ == "GammaRV" and comps[1].truncation is None

    with pytest.raises(UnsupportedFactorError, match="not a PyMC mixture"):
        mixture_components(pm.Normal.dist().owner)


def test_registered_info():
    assert rule_info(MIX_OP).family == "Mixture"
    assert rule_info(MIX_OP).range_params == frozenset()
    assert rule_info(HURDLE_OP).family == "Hurdle"
    assert rule_info(HURDLE_OP).param_names == ("w", "zero_dist", "nonzero_dist")
    # the Mixture's names cover a list of components (a zip over dist_params drops none)
    assert len(rule_info(MIX_OP).param_names) >= 3


# --------------------------------------------------------------------------- general mixtures

POISSON_MIX_CASES = [
    # weights, mu1, mu2, domain
    ((0.5, 0.5), 1.0, 8.0, Integers(0, 15)),
    ((0.9, 0.1), 0.3, 20.0, Integers(0, 30)),
    ((0.2, 0.8), 4.0, 4.5, Integers(2, 12)),
    ((0.5, 0.5), 2.0, 9.0, Integers(5, 5)),
]


@pytest.mark.parametrize("w, mu1, mu2, domain", POISSON_MIX_CASES)
def test_poisson_mixture_enumerated_exact(w, mu1, mu2, domain):
    """Point parameters on an enumerated integer domain: the weighted range is exact (list and
    batched forms), and never above the mediant bound."""
    brute = brute_range(lambda x: truth("PoissonMixture", x, w=np.asarray(w), mu1=mu1, mu2=mu2), [x_axis(domain)])
    for params in (
        (_w(*w), poisson(mu1), poisson(mu2)),
        (_w(*w), poisson([mu1, mu2])),
    ):
        rule = log_density_range(MIX_OP, domain, params, NP)
        assert_exact(rule, brute, label="Poisson mixture")
        L = element_lipschitz(MIX_OP, domain, params, NP)
        assert float(L) == pytest.approx(brute[1] - brute[0], rel=1e-9, abs=1e-9)
        med = mediant_lipschitz(domain, np.asarray(w), list(params[1:]), NP, len(params) == 2)
        assert float(L) <= float(med) + 1e-12


def test_poisson_mixture_large_domain_blocks_sound():
    """A domain with more values than DISCRETE_ENUMERATE is cut into blocks: sound, and close."""
    domain = Integers(0, 300)
    w, mu1, mu2 = np.array([0.6, 0.4]), 5.0, 150.0
    L = float(element_lipschitz(MIX_OP, domain, (_w(*w), poisson(mu1), poisson(mu2)), NP))
    brute = brute_L(lambda x: truth("PoissonMixture", x, w=w, mu1=mu1, mu2=mu2), [x_axis(domain)])
    assert_sound(L, brute, "blocks")
    assert L <= 1.05 * brute


# (weights, mu, sigma, domain, largest allowed rule / brute): the measured looseness of the
# weighted range bound with CONTINUOUS_PIECES = 32 (docs/rules/mixture.md)
NORMAL_MIX_CASES = [
    ((0.5, 0.5), (-3.0, 3.0), (1.0, 1.0), Interval(-5, 5), 1.11),  # well separated
    ((0.5, 0.5), (-1.0, 1.0), (1.0, 1.0), Interval(-5, 5), 1.02),  # overlapping
    ((0.5, 0.5), (0.0, 0.0), (1.0, 3.0), Interval(-5, 5), 1.001),  # same mean
    ((0.9, 0.1), (-3.0, 3.0), (1.0, 1.0), Interval(-5, 5), 1.10),  # separated, unequal weights
    ((0.2, 0.3, 0.5), (-2.0, 0.0, 2.0), (0.5, 1.0, 0.7), Interval(-4, 4), 1.01),
    ((0.5, 0.5), (-1.0, 1.0), (0.3, 0.3), Interval(-2, 2), 1.001),
]


@pytest.mark.parametrize("w, mu, sigma, domain, loose", NORMAL_MIX_CASES)
def test_normal_mixture_sound_and_measured(w, mu, sigma, domain, loose):
    """``pm.NormalMixture``: the rule is >= the brute force, within the documented looseness;
    the mediant bound ``max_k L_k`` is far looser at fixed weights (up to 9x here)."""
    assert CONTINUOUS_PIECES == 32  # the looseness column was measured with 32 pieces
    w, mu, sigma = (np.asarray(v, float) for v in (w, mu, sigma))
    params = (_P(w), normal(mu, sigma))
    lo, hi = log_density_range(MIX_OP, domain, params, NP)
    brute = brute_range(lambda x: truth("NormalMixture", x, w=w, mu=mu, sigma=sigma), [x_axis(domain)])
    assert_exact((lo, hi), brute, tight=False, label="NormalMixture")
    L = float(element_lipschitz(MIX_OP, domain, params, NP))
    b = brute[1] - brute[0]
    assert_sound(L, b)
    assert L <= loose * b
    med = float(mediant_lipschitz(domain, w, [params[1]], NP, True))
    comp_L = [float(element_lipschitz(op_of("Normal"), domain, (_P(m), _P(s)), NP)) for m, s in zip(mu, sigma)]
    assert med == pytest.approx(max(comp_L), rel=1e-12)
    assert L <= med + 1e-12


def test_normal_studentt_list_mixture_sound():
    w = np.array([0.4, 0.6])
    domain = Interval(-3, 4)
    params = (_P(w), normal(0.5, 0.8), studentt(3.0, 2.0, 0.5))
    L = float(element_lipschitz(MIX_OP, domain, params, NP))
    brute = brute_L(
        lambda x: truth("Normal+StudentT", x, w=w, mu1=0.5, s1=0.8, nu=3.0, mu2=2.0, s2=0.5), [x_axis(domain)]
    )
    assert_sound(L, brute)
    assert L <= 1.05 * brute


@pytest.mark.parametrize("k", [0, 1])
def test_one_hot_weights_exact(k):
    """At a vertex ``w = e_k`` the mixture is component k: the rule is exact there (which is why
    the region rule, the mediant bound, is exact when the weights are free)."""
    w = np.eye(2)[k]
    mu, sigma = np.array([-1.0, 2.0]), np.array([0.7, 1.3])
    domain = Interval(-2, 3)
    L = float(element_lipschitz(MIX_OP, domain, (_P(w), normal(mu, sigma)), NP))
    comp = float(element_lipschitz(op_of("Normal"), domain, (_P(mu[k]), _P(sigma[k])), NP))
    assert L == pytest.approx(comp, rel=1e-12)
    brute = brute_L(lambda x: truth("NormalMixture", x, w=w, mu=mu, sigma=sigma), [x_axis(domain)])
    assert L == pytest.approx(brute, rel=1e-7)


@pytest.mark.parametrize(
    "w, b, c, domain",
    [
        ((0.5, 0.5), (-1.0, 1.0), (0.5, -0.8), Interval(-2, 2)),
        pytest.param((0.3, 0.7), (0.0, 0.2), (1.5, 1.0), Interval(-1, 1), marks=pytest.mark.extended),
    ],
)
def test_mixture_of_regressions_sound(w, b, c, domain):
    """``y ~ NormalMixture(w, mu_k = b_k + c_k z, sigma)`` with a covariate ``z in [-1, 1]``:
    one record sets both components' means. The rule gets each component's window
    ``[b_k - |c_k|, b_k + |c_k|]`` and must bound the brute force over (y, z)."""
    w, b, c = (np.asarray(v, float) for v in (w, b, c))
    sigma = np.array([0.6, 0.9])
    params = (_P(w), normal(Bounds(b - np.abs(c), b + np.abs(c)), sigma))
    L = float(element_lipschitz(MIX_OP, domain, params, NP))

    def ev(y, z):
        return truth("NormalMixture", y, w=w, mu=b + c * z[..., None], sigma=sigma)

    brute = brute_L(ev, [x_axis(domain), ("c", -1.0, 1.0)])
    assert_sound(L, brute)
    # and the bound does not get worse than treating the windows as independent (its premise)
    def ev_decoupled(y, m1, m2):
        return truth("NormalMixture", y, w=w, mu=np.stack([m1, m2], -1), sigma=sigma)

    # a plain 81^3 grid (no zoom: a lower estimate of the decoupled sup, enough for both checks)
    grids = np.meshgrid(
        np.linspace(domain.lo, domain.hi, 81),
        np.linspace(b[0] - abs(c[0]), b[0] + abs(c[0]), 81),
        np.linspace(b[1] - abs(c[1]), b[1] + abs(c[1]), 81),
        indexing="ij",
    )
    vals = ev_decoupled(*grids)
    indep = float(vals.max() - vals.min())
    assert_sound(L, indep)
    assert L <= 1.15 * indep


def test_zero_weight_component_drops_out():
    """A component of weight exactly 0 is not in the mixture: neither bound counts it."""
    domain = Interval(-1, 1)
    params = (_w(1.0, 0.0), normal(0.0, 1.0), normal(50.0, 0.1))
    L = float(element_lipschitz(MIX_OP, domain, params, NP))
    assert L == pytest.approx(float(element_lipschitz(op_of("Normal"), domain, (_P(0.0), _P(1.0)), NP)), rel=1e-12)


# --------------------------------------------------------------------------- zero-inflated

ZIP_CASES = [
    (0.7, 2.0, Integers(0, 10)),
    (0.1, 2.0, Integers(0, 10)),
    (0.95, 0.2, Integers(0, 6)),
    (0.5, 15.0, Integers(0, 20)),
    (0.5, 3.0, Integers(2, 12)),  # no zero in the domain: the Poisson's constant
    (0.3, 3.0, Integers(0, 0)),  # only zeros
    (0.6, 4.0, Integers(0, 1)),
]


@pytest.mark.parametrize("psi, mu, domain", ZIP_CASES)
def test_zero_inflated_poisson_exact(psi, mu, domain):
    params = (_w(1 - psi, psi), atom(), poisson(mu))
    rule = log_density_range(MIX_OP, domain, params, NP)
    brute = brute_range(lambda x: truth("ZIP", x, psi=psi, mu=mu), [x_axis(domain)])
    assert_exact(rule, brute, label="ZIP")
    assert float(element_lipschitz(MIX_OP, domain, params, NP)) == pytest.approx(brute[1] - brute[0], abs=1e-9)
    if domain.lo > 0:
        base = log_density_range(op_of("Poisson"), domain, (_P(mu),), NP)
        assert rule[1] - rule[0] == pytest.approx(base[1] - base[0], rel=1e-12)


@pytest.mark.parametrize(
    "psi, n, p, domain",
    [(0.6, 10, (0.2, 0.45), Integers(0, 10)), (0.2, 8, (0.05, 0.1), Integers(0, 8)), (0.8, 12, (0.5, 0.9), Integers(1, 9)),
     (0.5, 10, (0.3, 0.3), Integers(0, 10))],
)
def test_zero_inflated_binomial_window_exact(psi, n, p, domain):
    """``p`` reading the record (``p = table[z]``): brute force jointly over y and p."""
    pb = Bounds(*p) if p[0] != p[1] else _P(p[0])
    params = (_w(1 - psi, psi), atom(), binomial(n, pb))
    rule = log_density_range(MIX_OP, domain, params, NP)
    axes = [x_axis(domain)] + ([("c", *p)] if p[0] != p[1] else [])
    if p[0] != p[1]:
        brute = brute_range(lambda x, q: truth("ZIB", x, psi=psi, n=n, p=q), axes)
    else:
        brute = brute_range(lambda x: truth("ZIB", x, psi=psi, n=n, p=p[0]), axes)
    assert_exact(rule, brute, label="ZIB")


def test_zero_inflated_poisson_log_mean_window_exact():
    """A Poisson regression mean ``ln mu in [t_lo, t_hi]``: exact when the Poisson rule takes
    log-mean windows (being added beside this rule; skipped until then)."""
    domain = Integers(0, 12)
    t = (-0.5, 1.8)
    psi = 0.65
    params = (_w(1 - psi, psi), atom(), poisson(Bounds(*t, space="log-mean")))
    try:
        rule = log_density_range(MIX_OP, domain, params, NP)
    except UnsupportedFactorError:
        pytest.skip("the Poisson rule does not take log-mean windows yet")
    brute = brute_range(lambda x, tt: truth("ZIP", x, psi=psi, mu=np.exp(tt)), [x_axis(domain), ("c", *t)])
    assert_exact(rule, brute, label="ZIP log-mean")


def test_zero_inflated_negative_binomial_exact():
    op = _nb_op()
    if op is None:
        pytest.skip("no NegativeBinomial rule registered yet")
    psi, mu, alpha, domain = 0.6, 3.0, 2.0, Integers(0, 15)
    base = Nested(op, point_bounds_nb(mu, alpha))
    rule = log_density_range(MIX_OP, domain, (_w(1 - psi, psi), atom(), base), NP)
    brute = brute_range(lambda x: truth("ZINB", x, psi=psi, mu=mu, alpha=alpha), [x_axis(domain)])
    assert_exact(rule, brute, label="ZINB")
    # a negative binomial regression mean: ln mu in a window
    t = (-0.5, 2.0)
    base = Nested(op, (_P(alpha), Bounds(*t, space="log-mean")))
    rule = log_density_range(MIX_OP, domain, (_w(1 - psi, psi), atom(), base), NP)
    brute = brute_range(
        lambda x, tt: truth("ZINB", x, psi=psi, mu=np.exp(tt), alpha=alpha), [x_axis(domain), ("c", *t)]
    )
    assert_exact(rule, brute, label="ZINB window")


def point_bounds_nb(mu, alpha):
    return point_bounds_generic(pm.NegativeBinomial.dist(mu=np.float64(mu), alpha=np.float64(alpha)))


def point_bounds_generic(rv):
    values = pytensor.function([], rv.owner.op.dist_params(rv.owner), mode="FAST_COMPILE")()
    return tuple(_P(np.asarray(v, float)) for v in values)


# --------------------------------------------------------------------------- hurdle

HURDLE_POISSON_CASES = [
    # psi, mu (point or (lo, hi) natural) or ("log", t_lo, t_hi), domain
    (0.7, 2.0, Integers(0, 10)),
    (0.05, 0.3, Integers(0, 10)),
    (0.99, 12.0, Integers(0, 15)),
    (0.5, 3.0, Integers(2, 9)),
    (0.5, 1e-3, Integers(0, 5)),
    (0.4, (0.5, 6.0), Integers(0, 12)),
    (0.8, (2.0, 2.5), Integers(1, 7)),
    (0.3, ("log", -2.0, 2.5), Integers(0, 15)),
    (0.6, ("log", 1.0, 3.5), Integers(0, 20)),
    (0.6, ("log", -4.0, -3.0), Integers(0, 4)),
]


@pytest.mark.parametrize("psi, mu, domain", HURDLE_POISSON_CASES)
def test_hurdle_poisson_exact(psi, mu, domain):
    if isinstance(mu, tuple) and mu[0] == "log":
        mb = Bounds(mu[1], mu[2], space="log-mean")
        axes = [x_axis(domain), ("c", mu[1], mu[2])]
        ev = lambda x, t: truth("HurdlePoisson", x, psi=psi, mu=np.exp(t))  # noqa: E731
    elif isinstance(mu, tuple):
        mb = Bounds(*mu)
        axes = [x_axis(domain), ("c", *mu)]
        ev = lambda x, m: truth("HurdlePoisson", x, psi=psi, mu=m)  # noqa: E731
    else:
        mb = _P(mu)
        axes = [x_axis(domain)]
        ev = lambda x: truth("HurdlePoisson", x, psi=psi, mu=mu)  # noqa: E731
    params = (_w(1 - psi, psi), atom(), poisson(mb))
    rule = log_density_range(HURDLE_OP, domain, params, NP)
    assert_exact(rule, brute_range(ev, axes), label="HurdlePoisson")


@pytest.mark.parametrize("seed", [0, pytest.param(1, marks=pytest.mark.extended), pytest.param(2, marks=pytest.mark.extended)])
def test_random_windows_exact(seed):
    """Random psi, ``ln mu`` windows and domains: the zero-inflated and hurdle Poisson rules equal
    the brute force over (y, ln mu)."""
    rng = np.random.default_rng(500 + seed)
    for _ in range(4):
        psi = rng.uniform(0.02, 0.98)
        t_lo = rng.uniform(-3, 3)
        t = (t_lo, t_lo + rng.uniform(0, 2.5))
        lo = int(rng.integers(0, 3))
        domain = Integers(lo, lo + int(rng.integers(0, 20)))
        mb = poisson(Bounds(*t, space="log-mean"))
        for op, key in ((HURDLE_OP, "HurdlePoisson"), (MIX_OP, "ZIP")):
            try:
                rule = log_density_range(op, domain, (_w(1 - psi, psi), atom(), mb), NP)
            except UnsupportedFactorError:
                pytest.skip("the Poisson rule does not take log-mean windows yet")
            brute = brute_range(lambda x, tt: truth(key, x, psi=psi, mu=np.exp(tt)), [x_axis(domain), ("c", *t)])
            assert_exact(rule, brute, label=f"{key} psi={psi:.3f} t={t} {domain}")


def test_hurdle_poisson_window_beats_composition():
    """The generic composition (base rule + normaliser at its worst) is a sound bound for a
    window; the Poisson's own rule is exact and smaller."""
    from pymc_dp.rules.mixture import hurdle_discrete_range, hurdle_poisson_range

    domain, t = Integers(0, 12), (-1.0, 2.0)
    ln0, ln1 = np.log(0.4), np.log(0.6)
    exact = hurdle_poisson_range(domain, ln0, ln1, Bounds(*t, space="log-mean"), NP)
    brute = brute_range(lambda x, tt: truth("HurdlePoisson", x, psi=0.6, mu=np.exp(tt)), [x_axis(domain), ("c", *t)])
    assert_exact(exact, brute)
    try:
        comp = hurdle_discrete_range(domain, ln0, ln1, poisson(Bounds(*t, space="log-mean")), NP)
    except UnsupportedFactorError:
        pytest.skip("the Poisson rule does not take log-mean windows yet")
    assert comp[1] - comp[0] >= exact[1] - exact[0] - 1e-12


@pytest.mark.parametrize("psi, mu, alpha, domain", [(0.6, 3.0, 2.0, Integers(0, 15)), (0.2, 0.5, 0.7, Integers(0, 8))])
def test_hurdle_negative_binomial_point_exact(psi, mu, alpha, domain):
    op = _nb_op()
    if op is None:
        pytest.skip("no NegativeBinomial rule registered yet")
    params = (_w(1 - psi, psi), atom(), Nested(op, point_bounds_nb(mu, alpha)))
    rule = log_density_range(HURDLE_OP, domain, params, NP)
    brute = brute_range(lambda x: truth("HurdleNB", x, psi=psi, mu=mu, alpha=alpha), [x_axis(domain)])
    assert_exact(rule, brute, label="HurdleNB")


HURDLE_NB_WINDOW_CASES = [
    # psi, alpha, (t_lo, t_hi) of ln mu, domain
    (0.6, 3.0, (-0.5, 1.5), Integers(0, 15)),
    (0.3, 0.6, (0.5, 2.5), Integers(0, 25)),
    (0.8, 20.0, (1.0, 1.2), Integers(1, 12)),
    (0.5, 1.0, (-3.0, -1.0), Integers(0, 5)),
    (0.5, 2.0, (2.0, 3.0), Integers(0, 8)),  # means far above the domain
]


@pytest.mark.parametrize("psi, alpha, t, domain", HURDLE_NB_WINDOW_CASES)
def test_hurdle_negative_binomial_window_exact(psi, alpha, t, domain):
    """A negative binomial regression mean: exact (the zero-truncated NB's own rule)."""
    op = _nb_op()
    if op is None:
        pytest.skip("no NegativeBinomial rule registered yet")
    params = (_w(1 - psi, psi), atom(), Nested(op, (_P(alpha), Bounds(*t, space="log-mean"))))
    rule = log_density_range(HURDLE_OP, domain, params, NP)
    brute = brute_range(
        lambda x, tt: truth("HurdleNB", x, psi=psi, mu=np.exp(tt), alpha=alpha), [x_axis(domain), ("c", *t)]
    )
    assert_exact(rule, brute, label="HurdleNB window")


def test_hurdle_negative_binomial_window_domain_from_two_is_sound():
    """A domain starting at 2 or above: the composed bound (sound, not exact)."""
    op = _nb_op()
    if op is None:
        pytest.skip("no NegativeBinomial rule registered yet")
    psi, alpha, t, domain = 0.6, 3.0, (0.0, 2.0), Integers(2, 14)
    params = (_w(1 - psi, psi), atom(), Nested(op, (_P(alpha), Bounds(*t, space="log-mean"))))
    lo, hi = log_density_range(HURDLE_OP, domain, params, NP)
    brute = brute_range(
        lambda x, tt: truth("HurdleNB", x, psi=psi, mu=np.exp(tt), alpha=alpha), [x_axis(domain), ("c", *t)]
    )
    assert_exact((lo, hi), brute, tight=False, label="HurdleNB window, lo = 2")


CONT_HURDLE_CASES = [
    ("HurdleGamma", "Gamma", dict(alpha=2.0, beta=1.0), 0.7, (0.5, 6.0)),
    ("HurdleGamma", "Gamma", dict(alpha=0.6, beta=3.0), 0.2, (0.1, 2.0)),
    ("HurdleLogNormal", "LogNormal", dict(mu=0.5, sigma=0.8), 0.4, (0.2, 8.0)),
    ("HurdleLogNormal", "LogNormal", dict(mu=-1.0, sigma=0.3), 0.9, (0.5, 3.0)),
]


@pytest.mark.parametrize("key, base, kw, psi, ab", CONT_HURDLE_CASES)
def test_continuous_hurdle_exact(key, base, kw, psi, ab):
    """Positive values in [a, b], a > 0 (no zeros): the base's constant (``ln psi`` cancels);
    and with an atom at 0 (``hurdle_continuous_range(zero=True)``, the domain ``{0} U [a, b]``)
    the union of the atom and the density, checked against PyMC at 0 and on [a, b]."""
    op = HURDLE_OP
    bb = point_bounds(base, **kw)
    params = (_w(1 - psi, psi), atom(0.0), Nested(op_of(base), bb))
    domain = Interval(*ab)
    rule = log_density_range(op, domain, params, NP)
    brute = brute_range(lambda x: truth(key, x, psi=psi, **kw), [x_axis(domain)])
    assert_exact(rule, brute, label=key)
    base_rng = log_density_range(op_of(base), domain, bb, NP)
    assert rule[1] - rule[0] == pytest.approx(base_rng[1] - base_rng[0], rel=1e-12)
    # with zeros: {0} U [a, b]
    with_zero = hurdle_continuous_range(True, domain, np.log(1 - psi), np.log(psi), Nested(op_of(base), bb), NP)
    at_zero = float(truth(key, np.array([0.0]), psi=psi, **kw)[0])
    assert at_zero == pytest.approx(math.log(1 - psi), rel=1e-12)
    b_lo, b_hi = min(brute[0], at_zero), max(brute[1], at_zero)
    assert_exact(with_zero, (b_lo, b_hi), label=key + " with zeros")


# --------------------------------------------------------------------------- PT == NP

PT_CASES = [
    ("NormalMixture", Interval(-3, 3), (_w(0.3, 0.7), normal([-1.0, 1.5], [0.5, 1.0]))),
    ("Poisson batched", Integers(0, 12), (_w(0.2, 0.3, 0.5), poisson([0.5, 3.0, 9.0]))),
    ("ZIP", Integers(0, 10), (_w(0.3, 0.7), atom(), poisson(2.0))),
    ("ZIP log-mean", Integers(0, 10), (_w(0.3, 0.7), atom(), poisson(Bounds(-1.0, 1.5, space="log-mean")))),
    ("ZIB window", Integers(0, 10), (_w(0.4, 0.6), atom(), binomial(10, Bounds(0.2, 0.45)))),
]
# the list form builds one graph per component and domain piece: seconds to build and compile
PT_SLOW_CASES = [
    ("NormalMixture window", Interval(-2, 2), (_w(0.5, 0.5), normal(Bounds(np.array([-1.0, 0.0]), np.array([0.5, 1.0])), [0.6, 0.9]))),
    ("Normal+StudentT", Interval(-2, 4), (_w(0.4, 0.6), normal(0.5, 0.8), studentt(3.0, 2.0, 0.5))),
    ("Poisson list", Integers(0, 12), (_w(0.5, 0.5), poisson(1.0), poisson(8.0))),
    ("Poisson blocks", Integers(0, 100), (_w(0.5, 0.5), poisson(2.0), poisson(60.0))),
]
PT_HURDLE_CASES = [
    ("HurdlePoisson", Integers(0, 10), (_w(0.3, 0.7), atom(), poisson(2.0))),
    ("HurdlePoisson window", Integers(0, 15), (_w(0.3, 0.7), atom(), poisson(Bounds(0.5, 6.0)))),
    ("HurdlePoisson log", Integers(1, 15), (_w(0.3, 0.7), atom(), poisson(Bounds(-1.0, 2.0, space="log-mean")))),
    ("HurdleGamma", Interval(0.5, 5), (_w(0.3, 0.7), atom(0.0), Nested(op_of("Gamma"), point_bounds("Gamma", alpha=2.0, beta=1.0)))),
    ("HurdleNB window", Integers(0, 15), "nb-window"),
    ("HurdleNB point", Integers(0, 15), "nb-point"),
]


@pytest.mark.parametrize(
    "label, domain, params",
    PT_CASES + [pytest.param(*c, marks=pytest.mark.extended) for c in PT_SLOW_CASES],
    ids=[c[0] for c in PT_CASES + PT_SLOW_CASES],
)
def test_pytensor_matches_numpy_mixture(label, domain, params):
    try:
        assert_pt_equals_np(MIX_OP, domain, params)
    except UnsupportedFactorError:
        if label != "ZIP log-mean":
            raise
        pytest.skip("the Poisson rule does not take log-mean windows yet")


@pytest.mark.parametrize("label, domain, params", PT_HURDLE_CASES, ids=[c[0] for c in PT_HURDLE_CASES])
def test_pytensor_matches_numpy_hurdle(label, domain, params):
    if isinstance(params, str):
        op = _nb_op()
        if op is None:
            pytest.skip("no NegativeBinomial rule registered yet")
        p = Bounds(-0.5, 1.5, space="log-mean") if params == "nb-window" else _P(0.4)
        params = (_w(0.3, 0.7), atom(), Nested(op, (_P(2.5), p)))
    assert_pt_equals_np(HURDLE_OP, domain, params)


def test_pytensor_symbolic_weights():
    """Weights as a symbolic ``pt.stack([1 - psi, psi])`` (what PyMC builds) evaluate as NumPy."""
    psi = pt.dscalar("psi")
    w = pt.stack([1 - psi, psi])
    params = (Bounds.point(w), _to_pt(atom()), _to_pt(poisson(2.0)))
    lo, hi = log_density_range(MIX_OP, Integers(0, 10), params, PT)
    f = pytensor.function([psi], hi - lo, mode="FAST_COMPILE")
    for v in (0.1, 0.5, 0.9):
        lo_n, hi_n = log_density_range(MIX_OP, Integers(0, 10), (_w(1 - v, v), atom(), poisson(2.0)), NP)
        assert float(f(v)) == pytest.approx(hi_n - lo_n, rel=1e-12)


def test_vectorised_elements():
    """Per-element parameters (one row per record) give per-element constants."""
    psis = np.array([0.1, 0.5, 0.9])
    w = np.stack([1 - psis, psis], -1)
    mus = np.array([0.5, 2.0, 7.0])
    for op in (MIX_OP, HURDLE_OP):
        L = element_lipschitz(op, Integers(0, 10), (_P(w), atom(), poisson(mus)), NP)
        assert np.shape(L) == (3,)
        for i in range(3):
            Li = element_lipschitz(op, Integers(0, 10), (_P(w[i]), atom(), poisson(mus[i])), NP)
            assert L[i] == pytest.approx(float(Li), rel=1e-13)
    W = np.array([[0.5, 0.5], [0.9, 0.1]])
    L = element_lipschitz(MIX_OP, Interval(-2, 2), (_P(W), normal([-1.0, 1.0], [0.5, 0.5])), NP)
    assert np.shape(L) == (2,)
    for i in range(2):
        Li = element_lipschitz(MIX_OP, Interval(-2, 2), (_P(W[i]), normal([-1.0, 1.0], [0.5, 0.5])), NP)
        assert L[i] == pytest.approx(float(Li), rel=1e-13)


# --------------------------------------------------------------------------- refusals


def test_private_weights_refused():
    with pytest.raises(UnsupportedFactorError, match="weights"):
        element_lipschitz(MIX_OP, Interval(-1, 1), (Bounds(np.array([0.2, 0.3]), np.array([0.7, 0.8])), normal([0.0, 1.0], [1.0, 1.0])), NP)
    with pytest.raises(UnsupportedFactorError, match="weights"):
        log_density_range(HURDLE_OP, Integers(0, 5), (Bounds(np.array([0.2, 0.3]), np.array([0.7, 0.8])), atom(), poisson(1.0)), NP)


def test_mixed_support_refused_naming_components():
    with pytest.raises(UnsupportedFactorError, match="Normal.*Poisson"):
        element_lipschitz(MIX_OP, Integers(0, 5), (_w(0.5, 0.5), normal(0.0, 1.0), poisson(1.0)), NP)


def test_component_without_rule_refused():
    uniform = Nested(pm.Uniform.dist(0.0, 1.0).owner.op, (_P(0.0), _P(1.0)))
    with pytest.raises(UnsupportedFactorError, match="Uniform"):
        element_lipschitz(MIX_OP, Interval(0, 1), (_w(0.5, 0.5), normal(0.0, 1.0), uniform), NP)


@_quiet
def test_truncated_component_of_a_plain_mixture_refused():
    """Only a hurdle's ``Truncated`` part is read as its base; in a plain mixture the truncation's
    normaliser is part of the component's log-density, and no rule covers it."""
    mx = pm.Mixture.dist(
        w=[0.5, 0.5], comp_dists=[pm.Truncated.dist(pm.Poisson.dist(2.0), lower=1), pm.Poisson.dist(3.0)]
    )
    with pytest.raises(UnsupportedFactorError, match="Truncated"):
        mixture_components(mx.owner)
    trunc_op = mx.owner.inputs[2].owner.op
    with pytest.raises(UnsupportedFactorError, match="Truncated"):
        element_lipschitz(MIX_OP, Integers(0, 5), (_w(0.5, 0.5), Nested(trunc_op, (_P(2.0),)), poisson(3.0)), NP)


def test_point_mass_outside_zero_inflated_refused():
    with pytest.raises(UnsupportedFactorError, match="DiracDelta"):
        element_lipschitz(MIX_OP, Integers(0, 5), (_w(0.2, 0.3, 0.5), atom(), poisson(1.0), poisson(4.0)), NP)
    # a point mass with a continuous density: no common unit
    with pytest.raises(UnsupportedFactorError, match="continuous"):
        element_lipschitz(MIX_OP, Integers(0, 5), (_w(0.5, 0.5), atom(0.0), normal(0.0, 1.0)), NP)


@pytest.mark.parametrize(
    "op, domain, params",
    [
        (MIX_OP, Interval(0, 5), (_w(0.3, 0.7), atom(), poisson(1.0))),  # ZI counts on an Interval
        (HURDLE_OP, Integers(-1, 5), (_w(0.3, 0.7), atom(), poisson(1.0))),
        (HURDLE_OP, Interval(0, 5), (_w(0.3, 0.7), atom(), poisson(1.0))),
        (HURDLE_OP, Interval(0, 5), (_w(0.3, 0.7), atom(0.0), Nested(op_of("Gamma"), point_bounds("Gamma", alpha=2.0, beta=1.0)))),
        (HURDLE_OP, Interval(-1, 5), (_w(0.3, 0.7), atom(0.0), Nested(op_of("LogNormal"), point_bounds("LogNormal", mu=0.0, sigma=1.0)))),
        (MIX_OP, Integers(-2, 5), (_w(0.5, 0.5), poisson(1.0), poisson(3.0))),  # a component refuses
    ],
    ids=["ZI-interval", "hurdle-negative", "hurdle-counts-interval", "hurdle-gamma-zero", "hurdle-lognormal-negative", "mixture-negative"],
)
def test_domain_errors(op, domain, params):
    with pytest.raises(DomainError):
        log_density_range(op, domain, params, NP)


def test_continuous_hurdle_zero_message():
    params = (_w(0.3, 0.7), atom(0.0), Nested(op_of("Gamma"), point_bounds("Gamma", alpha=2.0, beta=1.0)))
    with pytest.raises(DomainError, match="bounded away from 0"):
        log_density_range(HURDLE_OP, Interval(0, 5), params, NP)


# --------------------------------------------------------------------------- regions


class _NormalStubSpec:
    """A region spec for the Normal used only when the continuous rules register none yet:
    L = [(d + W)^2 - (d - W)_+^2] / (2 sigma^2) increases in d (mu: ends) and decreases in sigma;
    windows: lemma C (Normal, docs/theory/glm.md#normal-sigma)."""

    spec = RegionSpec(window="ends", params={"mu": "ends", "sigma": "decreasing"})


@pytest.fixture
def normal_region(monkeypatch):
    op = op_of("Normal")
    if region_mod.region_spec(op) is None:
        monkeypatch.setitem(region_mod._SPECS, type(op), _NormalStubSpec.spec)
    return op


def _sample(lo, hi, rng, n):
    """``n`` values in ``[lo, hi]``: both ends and uniform draws."""
    lo, hi = np.asarray(lo, float), np.asarray(hi, float)
    u = np.concatenate([[0.0, 1.0], rng.uniform(size=n)])
    return [lo + t * (hi - lo) for t in u]


@pytest.mark.parametrize("seed", [0, 1, pytest.param(2, marks=pytest.mark.extended), pytest.param(3, marks=pytest.mark.extended)])
@pytest.mark.parametrize("form", ["list", "batched"])
def test_mixture_region_sound_and_tight(normal_region, seed, form):
    rng = np.random.default_rng(seed)
    domain = Interval(-1.5, 2.0)
    mu_lo = rng.uniform(-3, 2, size=2)
    mu_hi = mu_lo + rng.uniform(0, 2, size=2)
    s_lo = rng.uniform(0.3, 1.0, size=2)
    s_hi = s_lo + rng.uniform(0, 1, size=2)
    w_span = Span(np.zeros(2), np.ones(2))
    if form == "list":
        comps = tuple(NestedRegion(normal_region, (Span(mu_lo[k], mu_hi[k]), Span(s_lo[k], s_hi[k]))) for k in range(2))
    else:
        comps = (NestedRegion(normal_region, (Span(mu_lo, mu_hi), Span(s_lo, s_hi))),)
    R = float(region_lipschitz(MIX_OP, domain, (w_span, *comps)))
    best = -np.inf
    for w1 in [0.0, 1.0, *rng.uniform(size=2)]:
        w = np.array([1 - w1, w1])
        for m0, m1 in zip(_sample(mu_lo[0], mu_hi[0], rng, 2), _sample(mu_lo[1], mu_hi[1], rng, 2)):
            for s0, s1 in zip(_sample(s_lo[0], s_hi[0], rng, 1), _sample(s_lo[1], s_hi[1], rng, 1)):
                if form == "list":
                    params = (_P(w), normal(m0, s0), normal(m1, s1))
                else:
                    params = (_P(w), normal([m0, m1], [s0, s1]))
                L = float(element_lipschitz(MIX_OP, domain, params, NP))
                assert L <= R + 1e-9 * (1 + R)
                best = max(best, L)
    # tight: attained at a one-hot weight and a corner (mu end, sigma_lo) of one component
    corners = []
    for k in range(2):
        for m in (mu_lo[k], mu_hi[k]):
            w = np.eye(2)[k]
            if form == "list":
                p = [normal(0.0, 1.0), normal(0.0, 1.0)]
                p[k] = normal(m, s_lo[k])
                params = (_P(w), *p)
            else:
                mm, ss = np.array([0.0, 0.0]), np.array([1.0, 1.0])
                mm[k], ss[k] = m, s_lo[k]
                params = (_P(w), normal(mm, ss))
            corners.append(float(element_lipschitz(MIX_OP, domain, params, NP)))
    assert R == pytest.approx(max(corners), rel=1e-9)


@pytest.mark.parametrize("seed", range(2))
def test_mixture_of_regressions_region_sound(normal_region, seed):
    """Components whose means read the record (windows ``[o - h, o + h]``, offsets moving over
    the region): the batched component is split and each Normal's own region rule applies."""
    rng = np.random.default_rng(700 + seed)
    domain = Interval(-1, 1)
    o_lo = rng.uniform(-2, 1, size=2)
    o_hi = o_lo + rng.uniform(0, 1, size=2)
    half = rng.uniform(0.1, 0.8, size=2)
    sigma = rng.uniform(0.4, 1.2, size=2)
    comp = NestedRegion(normal_region, (Window(o_lo, o_hi, half), Span.point(sigma)))
    R = float(region_lipschitz(MIX_OP, domain, (Span(np.zeros(2), np.ones(2)), comp)))
    best = -np.inf
    for w1 in (0.0, 0.3, 1.0):
        for u in np.linspace(0, 1, 11):
            for v in (0.0, 0.5, 1.0):
                o = o_lo + np.array([u, v]) * (o_hi - o_lo)
                params = (_w(1 - w1, w1), normal(Bounds(o - half, o + half), sigma))
                L = float(element_lipschitz(MIX_OP, domain, params, NP))
                assert L <= R + 1e-9 * (1 + R)
                best = max(best, L)
    assert R == pytest.approx(best, rel=1e-9)  # at a one-hot weight and an end window


def test_mixture_region_zero_weight_excluded(normal_region):
    domain = Interval(-1, 1)
    comps = (NestedRegion(normal_region, (Span(0.0, 0.0), Span(1.0, 1.0))), NestedRegion(normal_region, (Span(40.0, 40.0), Span(0.1, 0.1))))
    R = region_lipschitz(MIX_OP, domain, (Span(np.array([0.0, 0.0]), np.array([1.0, 0.0])), *comps))
    assert float(R) == pytest.approx(float(element_lipschitz(op_of("Normal"), domain, (_P(0.0), _P(1.0)), NP)), rel=1e-12)


def _zi_region_params(psi_lo, psi_hi, base):
    return (Span(np.array([1 - psi_hi, psi_lo]), np.array([1 - psi_lo, psi_hi])), NestedRegion(DIRAC_OP, (Span.point(0),)), base)


def _check_region(op, domain, region_params, thetas, per_theta, *, tol=1e-3):
    R = np.asarray(region_lipschitz(op, domain, region_params), float)
    best = -np.inf
    for th in thetas:
        L = float(element_lipschitz(op, domain, per_theta(*th), NP))
        assert L <= float(R) + 1e-9 * (1 + abs(float(R))), (th, L, float(R))
        best = max(best, L)
    # tight: within the branch-and-bound tolerance of a sampled value (ends included)
    assert float(R) <= best + tol * max(abs(best), 1.0) + 1e-9
    return float(R), best


@pytest.mark.parametrize("seed", [0, 1, 2, pytest.param(3, marks=pytest.mark.extended), pytest.param(4, marks=pytest.mark.extended)])
def test_zero_inflated_binomial_region(seed):
    rng = np.random.default_rng(100 + seed)
    n = 10
    domain = Integers(0, n)
    psi_lo = rng.uniform(0.05, 0.8)
    psi_hi = min(psi_lo + rng.uniform(0, 0.4), 0.97)
    p_lo = rng.uniform(0.02, 0.7)
    p_hi = min(p_lo + rng.uniform(0, 0.3), 0.98)
    base = NestedRegion(op_of("Binomial"), (Span.point(float(n)), Span(p_lo, p_hi)))
    thetas = [(ps, p) for ps in _sample(psi_lo, psi_hi, rng, 3) for p in np.linspace(p_lo, p_hi, 401)]
    _check_region(
        MIX_OP, domain, _zi_region_params(psi_lo, psi_hi, base), thetas,
        lambda ps, p: (_w(1 - ps, ps), atom(), binomial(n, float(p))),
    )


@pytest.mark.parametrize("seed", range(2))
def test_zero_inflated_binomial_sliding_window_region(seed):
    """``p = table[z] `` style window with a moving offset: interval branch and bound."""
    rng = np.random.default_rng(200 + seed)
    n, domain = 8, Integers(0, 8)
    psi_lo, psi_hi = 0.3, 0.7
    o_lo = rng.uniform(0.1, 0.5)
    o_hi = o_lo + rng.uniform(0.05, 0.3)
    half = rng.uniform(0.01, 0.08)
    base = NestedRegion(op_of("Binomial"), (Span.point(float(n)), Window(o_lo, o_hi, half)))
    thetas = [(ps, o, h) for ps in (psi_lo, psi_hi, 0.5) for o in np.linspace(o_lo, o_hi, 201) for h in (half, half / 2)]
    _check_region(
        MIX_OP, domain, _zi_region_params(psi_lo, psi_hi, base), thetas,
        lambda ps, o, h: (_w(1 - ps, ps), atom(), binomial(n, Bounds(o - h, o + h))),
    )


@pytest.mark.parametrize("psi", [(0.2, 0.9), (0.5, 0.5)])
def test_zero_inflated_poisson_region_fixed_mean(psi):
    """ZIP with a fixed mean and psi over an interval: psi at its ends (proved), exact."""
    domain = Integers(0, 10)
    base = NestedRegion(op_of("Poisson"), (Span.point(2.5),))
    thetas = [(ps,) for ps in np.linspace(psi[0], psi[1], 201)]
    R, best = _check_region(MIX_OP, domain, _zi_region_params(*psi, base), thetas,
                            lambda ps: (_w(1 - ps, ps), atom(), poisson(2.5)), tol=0.0)
    assert R == pytest.approx(best, rel=1e-12)


def test_zero_inflated_region_non_sliding_window_uses_hull():
    """A Window that does not slide at a fixed width (``sliding=False``): only its hull is
    used (sound for every window inside it), so the region value is the rule at the hull."""
    n, domain = 8, Integers(0, 8)
    win = Window(0.2, 0.4, 0.05, sliding=False)
    base = NestedRegion(op_of("Binomial"), (Span.point(float(n)), win))
    R = float(region_lipschitz(MIX_OP, domain, _zi_region_params(0.3, 0.7, base)))
    at_hull = max(
        float(element_lipschitz(MIX_OP, domain, (_w(1 - ps, ps), atom(), binomial(n, Bounds(0.15, 0.45))), NP))
        for ps in (0.3, 0.7)
    )
    assert R == pytest.approx(at_hull, rel=1e-12)


def test_zero_inflated_region_without_zero_delegates(monkeypatch):
    """Zero outside the domain: the base's own region rule (here a Poisson spec stub if none)."""
    op = op_of("Poisson")
    if region_mod.region_spec(op) is None:
        monkeypatch.setitem(region_mod._SPECS, type(op), RegionSpec())
    base = NestedRegion(op, (Span.point(3.0),))
    R = region_lipschitz(MIX_OP, Integers(1, 10), _zi_region_params(0.2, 0.9, base))
    L = element_lipschitz(op, Integers(1, 10), (_P(3.0),), NP)
    assert float(R) == pytest.approx(float(L), rel=1e-12)


@pytest.mark.parametrize("seed", range(4))
def test_hurdle_poisson_region_span(seed):
    rng = np.random.default_rng(300 + seed)
    domain = Integers(0, 12)
    psi_lo = rng.uniform(0.05, 0.6)
    psi_hi = min(psi_lo + rng.uniform(0, 0.3), 0.95)
    mu_lo = rng.uniform(0.1, 5)
    mu_hi = mu_lo + rng.uniform(0, 6)
    base = NestedRegion(op_of("Poisson"), (Span(mu_lo, mu_hi),))
    thetas = [(ps, m) for ps in (psi_lo, psi_hi) for m in np.geomspace(mu_lo, mu_hi, 801)]
    thetas += [(ps, m) for ps in rng.uniform(psi_lo, psi_hi, 3) for m in rng.uniform(mu_lo, mu_hi, 20)]
    _check_region(HURDLE_OP, domain, _zi_region_params(psi_lo, psi_hi, base), thetas,
                  lambda ps, m: (_w(1 - ps, ps), atom(), poisson(float(m))))


@pytest.mark.parametrize("seed", range(4))
def test_hurdle_poisson_region_log_mean_window(seed):
    rng = np.random.default_rng(400 + seed)
    domain = Integers(0, 15)
    psi_lo, psi_hi = 0.3, 0.8
    o_lo = rng.uniform(-2, 2)
    o_hi = o_lo + rng.uniform(0, 1.5)
    half = rng.uniform(0, 1.0)
    base = NestedRegion(op_of("Poisson"), (Window(o_lo, o_hi, half, "log-mean"),))
    thetas = [(ps, o, h) for ps in (psi_lo, psi_hi) for o in np.linspace(o_lo, o_hi, 401) for h in (half, 0.0)]
    _check_region(HURDLE_OP, domain, _zi_region_params(psi_lo, psi_hi, base), thetas,
                  lambda ps, o, h: (_w(1 - ps, ps), atom(), poisson(Bounds(o - h, o + h, "log-mean"))))


@pytest.mark.parametrize("seed", range(2))
def test_hurdle_negative_binomial_region_window(seed):
    op = _nb_op()
    if op is None:
        pytest.skip("no NegativeBinomial rule registered yet")
    rng = np.random.default_rng(600 + seed)
    domain = Integers(0, 12)
    psi_lo, psi_hi, alpha = 0.25, 0.75, float(rng.uniform(0.7, 5.0))
    o_lo = rng.uniform(-1.5, 1.5)
    o_hi = o_lo + rng.uniform(0, 1.0)
    half = rng.uniform(0, 0.6)
    base = NestedRegion(op, (Span.point(alpha), Window(o_lo, o_hi, half, "log-mean")))
    thetas = [(ps, o) for ps in (psi_lo, psi_hi) for o in np.linspace(o_lo, o_hi, 201)]
    _check_region(HURDLE_OP, domain, _zi_region_params(psi_lo, psi_hi, base), thetas,
                  lambda ps, o: (_w(1 - ps, ps), atom(), Nested(op, (_P(alpha), Bounds(o - half, o + half, "log-mean")))))
    # alpha moving over the region: not covered (refused, not guessed)
    base = NestedRegion(op, (Span(alpha, alpha + 1.0), Window(o_lo, o_hi, half, "log-mean")))
    with pytest.raises(NoRegionRule, match="alpha|'n'"):
        region_lipschitz(HURDLE_OP, domain, _zi_region_params(psi_lo, psi_hi, base))


def test_continuous_hurdle_region_delegates(monkeypatch):
    op = op_of("Gamma")
    if region_mod.region_spec(op) is None:
        monkeypatch.setitem(region_mod._SPECS, type(op), RegionSpec())
    bb = point_bounds("Gamma", alpha=2.0, beta=1.0)
    base = NestedRegion(op, tuple(Span.point(b.lo) for b in bb))
    params = (Span(np.array([0.1, 0.2]), np.array([0.8, 0.9])), NestedRegion(DIRAC_OP, (Span.point(0.0),)), base)
    R = region_lipschitz(HURDLE_OP, Interval(0.5, 5), params)
    L = element_lipschitz(op, Interval(0.5, 5), bb, NP)
    assert float(R) == pytest.approx(float(L), rel=1e-12)
    with pytest.raises(DomainError):
        region_lipschitz(HURDLE_OP, Interval(0, 5), params)


def test_region_refusals():
    with pytest.raises(NoRegionRule, match="weights"):
        region_lipschitz(MIX_OP, Interval(-1, 1), (Window(0.0, 0.0, 0.1), NestedRegion(op_of("Normal"), (Span.point(0.0), Span.point(1.0)))))
    # a Span of a parameter the base does not take as an interval (Binomial n)
    base = NestedRegion(op_of("Binomial"), (Span(5.0, 10.0), Span.point(0.3)))
    with pytest.raises(NoRegionRule, match="'n'"):
        region_lipschitz(MIX_OP, Integers(0, 5), _zi_region_params(0.2, 0.8, base))
