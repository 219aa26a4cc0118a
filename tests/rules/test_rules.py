"""Brute-force tests: every per-family Lipschitz rule returns the exact log-density range.

The ground truth is PyMC's own log-density (``pm.logp``), never a re-derived formula:

* discrete domains are enumerated integer by integer;
* continuous domains are scanned on a 4001-point grid (801 per axis for joint grids) that is
  then zoomed twice (three times for joint grids) around the brute-force argmin and argmax,
  so the final grid spacing is below ``1e-9`` of the domain width. Every grid point lies in the
  domain, so the brute-force min/max are *attained* values: the rule must never report a range
  narrower than them (``-1e-9`` float slack), and after the zooms it must agree with them to
  ``1e-7`` relative, which is far above the discretisation error of the final grid (``h^2``
  at a smooth interior extreme, ``|f'| h`` at a kink, 0 at a domain end) and far below any
  error a wrong rule would make.

``pm.logp(...).eval()`` compiles a graph per call, so the PyMC log-densities are compiled once
per family with symbolic float64 (int64 for counts) inputs and evaluated on whole grids.
"""

from __future__ import annotations

import functools
import math

import numpy as np
import pymc as pm
import pytensor
import pytensor.tensor as pt
import pytest

from pymc_dp.domains import Ball, Binary, Integers, Interval
from pymc_dp.exceptions import DomainError, UnsupportedFactorError
from pymc_dp.rules import NP, PT, Bounds, log_density_range, rule_info

# --------------------------------------------------------------------------- PyMC ground truth

DISCRETE = ("Bernoulli", "Binomial", "Categorical", "Poisson", "Geometric")
CONTINUOUS = (
    "Normal", "Laplace", "StudentT", "Cauchy", "Exponential", "Gamma", "LogNormal", "Beta",
)

# One valid parameterisation per family (PyMC keyword arguments), used to get each Op.
_EXAMPLE = {
    "Bernoulli": dict(p=0.3),
    "Binomial": dict(n=10, p=0.3),
    "Categorical": dict(p=[0.2, 0.3, 0.5]),
    "Poisson": dict(mu=2.0),
    "Geometric": dict(p=0.3),
    "Normal": dict(mu=0.0, sigma=1.0),
    "Laplace": dict(mu=0.0, b=1.0),
    "StudentT": dict(nu=3.0, mu=0.0, sigma=1.0),
    "Cauchy": dict(alpha=0.0, beta=1.0),
    "Exponential": dict(lam=1.0),
    "Gamma": dict(alpha=2.0, beta=1.0),
    "LogNormal": dict(mu=0.0, sigma=1.0),
    "Beta": dict(alpha=2.0, beta=2.0),
}


@functools.lru_cache(maxsize=None)
def op_of(family):
    """The PyTensor RV Op behind ``pm.<family>`` (the rules dispatch on its type)."""
    return getattr(pm, family).dist(**_EXAMPLE[family]).owner.op


def _f64(v):
    return np.asarray(v, dtype="int64" if isinstance(v, int) else "float64")


def op_params(family, **kwargs):
    """The Op's parameters, in ``op.dist_params`` order, as PyMC itself computes them from the
    user-facing keyword arguments (e.g. Exponential ``lam`` -> ``scale = 1/lam``)."""
    rv = getattr(pm, family).dist(**{k: _f64(v) for k, v in kwargs.items()})
    params = rv.owner.op.dist_params(rv.owner)
    values = pytensor.function([], params, mode="FAST_COMPILE")()
    return tuple(np.asarray(v, dtype=float)[()] for v in values)


def point_bounds(family, **kwargs):
    return tuple(Bounds.point(v) for v in op_params(family, **kwargs))


@functools.lru_cache(maxsize=None)
def _logp_fn(family, names):
    x = pt.lvector("x") if family in DISCRETE else pt.dvector("x")
    syms = []
    for name in names:
        if family == "Categorical":
            syms.append(pt.dmatrix(name))
        elif (family, name) == ("Binomial", "n"):
            syms.append(pt.lvector(name))
        else:
            syms.append(pt.dvector(name))
    rv = getattr(pm, family).dist(**dict(zip(names, syms)))
    return pytensor.function([x, *syms], pm.logp(rv, x))


def pymc_logp(family, x, **params):
    """``pm.logp(pm.<family>.dist(**params), x)``, broadcasting ``x`` against the parameters."""
    names = tuple(sorted(params))
    fn = _logp_fn(family, names)
    x = np.asarray(x)
    if family == "Categorical":
        (p,) = (np.asarray(params["p"], dtype=float),)
        shape = np.broadcast_shapes(x.shape, p.shape[:-1])
        xs = np.broadcast_to(x, shape).ravel().astype("int64")
        ps = np.broadcast_to(p, shape + p.shape[-1:]).reshape(-1, p.shape[-1])
        return fn(xs, ps).reshape(shape)
    arrays = np.broadcast_arrays(x, *(np.asarray(params[n]) for n in names))
    shape = arrays[0].shape
    flat = [arrays[0].ravel().astype("int64" if family in DISCRETE else "float64")]
    for n, a in zip(names, arrays[1:]):
        flat.append(a.ravel().astype("int64" if (family, n) == ("Binomial", "n") else "float64"))
    return fn(*flat).reshape(shape)


def _extreme(evaluate, axes, sign, zooms):
    """``sign * max(sign * evaluate)`` over the product of ``axes``, zooming around the argmax.

    An axis is ``("d", values)`` (enumerated, never zoomed) or ``("c", lo, hi)`` (a closed
    interval, scanned on a grid that is narrowed to the two cells around the argmax).
    """
    n_cont = sum(a[0] == "c" for a in axes)
    n = 4001 if n_cont <= 1 else 801
    best = -np.inf
    for _ in range(zooms + 1):
        grids = [np.asarray(a[1]) if a[0] == "d" else np.linspace(a[1], a[2], n) for a in axes]
        vals = sign * evaluate(*np.meshgrid(*grids, indexing="ij"))
        assert not np.any(np.isnan(vals))
        idx = np.unravel_index(np.argmax(vals), vals.shape)
        best = max(best, float(vals[idx]))
        axes = [
            a if a[0] == "d" else ("c", g[max(i - 1, 0)], g[min(i + 1, len(g) - 1)])
            for a, g, i in zip(axes, grids, idx)
        ]
    return sign * best


def brute_range(evaluate, axes):
    """``(min, max)`` of ``evaluate`` over the product of ``axes`` (see :func:`_extreme`)."""
    zooms = 0 if all(a[0] == "d" for a in axes) else (2 if sum(a[0] == "c" for a in axes) == 1 else 3)
    return _extreme(evaluate, axes, -1.0, zooms), _extreme(evaluate, axes, +1.0, zooms)


def x_axis(domain):
    if isinstance(domain, Integers):
        return ("d", np.arange(domain.lo, domain.hi + 1))
    return ("c", domain.lo, domain.hi)


FLOAT_SLACK = 1e-9  # the rule may sit below an attained value by rounding only
GRID_TOL = 1e-7  # relative agreement with the zoomed brute force


def assert_exact(rule, brute, *, tight=True, label=""):
    """The rule's ``(lo, hi)`` contains the brute-force range and (if ``tight``) equals it."""
    (r_lo, r_hi), (b_lo, b_hi) = (float(rule[0]), float(rule[1])), brute
    slack = FLOAT_SLACK * (1 + abs(b_lo) + abs(b_hi))
    # never under-report: the rule's range contains every attained value
    assert r_lo <= b_lo + slack, f"{label}: rule lo {r_lo!r} above attained min {b_lo!r}"
    assert r_hi >= b_hi - slack, f"{label}: rule hi {r_hi!r} below attained max {b_hi!r}"
    assert (r_hi - r_lo) >= (b_hi - b_lo) - slack
    if tight:
        tol = GRID_TOL * (1 + abs(b_lo) + abs(b_hi))
        assert r_lo == pytest.approx(b_lo, abs=tol, rel=0), f"{label}: lo"
        assert r_hi == pytest.approx(b_hi, abs=tol, rel=0), f"{label}: hi"
        assert (r_hi - r_lo) == pytest.approx(b_hi - b_lo, abs=2 * tol, rel=0), f"{label}: L"


def _id(family, kwargs, domain):
    args = ",".join(f"{k}={v:g}" if np.ndim(v) == 0 else f"{k}=[{','.join(f'{e:g}' for e in np.ravel(v))}]" for k, v in kwargs.items())
    return f"{family}({args})-{domain}"


# --------------------------------------------------------------------------- wiring

@pytest.mark.parametrize("family", DISCRETE + CONTINUOUS)
def test_rule_registered_with_op_parameter_order(family):
    op = op_of(family)
    rv = getattr(pm, family).dist(**_EXAMPLE[family])
    info = rule_info(op)
    assert info is not None and info.family == family
    assert len(info.param_names) == len(op.dist_params(rv.owner))


def test_unregistered_op_is_refused():
    with pytest.raises(UnsupportedFactorError, match="no Lipschitz rule"):
        log_density_range(pm.Uniform.dist(0.0, 1.0).owner.op, Interval(0, 1), (), NP)


# --------------------------------------------------------------------------- point parameters

_CAT_P = np.array([0.05, 0.15, 0.4, 0.3, 0.1])

DISCRETE_CASES = [
    ("Bernoulli", dict(p=0.01), Binary()),
    ("Bernoulli", dict(p=0.5), Binary()),
    ("Bernoulli", dict(p=0.99), Binary()),
    ("Bernoulli", dict(p=0.3), Integers(1, 1)),
    ("Binomial", dict(n=10, p=0.5), Integers(0, 10)),
    ("Binomial", dict(n=10, p=0.01), Integers(0, 10)),
    ("Binomial", dict(n=10, p=0.99), Integers(0, 10)),
    ("Binomial", dict(n=10, p=0.3), Integers(4, 8)),  # mode 3 left of the domain
    ("Binomial", dict(n=20, p=0.7), Integers(2, 9)),  # mode 14 right of the domain
    ("Binomial", dict(n=20, p=0.45), Integers(3, 15)),
    ("Categorical", dict(p=_CAT_P), Integers(0, 4)),
    ("Categorical", dict(p=_CAT_P), Integers(1, 3)),
    ("Categorical", dict(p=_CAT_P), Integers(2, 2)),
    ("Poisson", dict(mu=0.5), Integers(0, 10)),
    ("Poisson", dict(mu=3.7), Integers(0, 10)),
    ("Poisson", dict(mu=4.0), Integers(0, 10)),  # integer mu: modes 3 and 4 tie
    ("Poisson", dict(mu=25.0), Integers(0, 10)),  # mode far right of the domain
    ("Poisson", dict(mu=2.5), Integers(5, 20)),  # domain starts above 0 and above the mode
    ("Poisson", dict(mu=9.3), Integers(4, 12)),
    ("Geometric", dict(p=0.3), Integers(1, 10)),
    ("Geometric", dict(p=0.01), Integers(1, 50)),
    ("Geometric", dict(p=0.99), Integers(3, 8)),
    ("Geometric", dict(p=0.5), Integers(3, 20)),
]


@pytest.mark.parametrize(
    "family, kwargs, domain", DISCRETE_CASES, ids=[_id(*c) for c in DISCRETE_CASES]
)
def test_discrete_point_exact(family, kwargs, domain):
    rule = log_density_range(op_of(family), domain, point_bounds(family, **kwargs), NP)
    brute = brute_range(lambda x: pymc_logp(family, x, **kwargs), [x_axis(domain)])
    assert_exact(rule, brute, label=family)


@pytest.mark.parametrize("eta", [-30.0, -5.0, 0.0, 0.7, 12.0, 30.0])
def test_bernoulli_logit_point_exact(eta):
    """On the logit scale ``L = |eta|`` to full precision (computed with log-sigmoid), widened by
    the float error of what PyMC computes from a rounded sigmoid and nothing more (FOUND.md #13)."""
    from pymc_dp.rules.discrete import computed_log_sigmoid_errors

    lo, hi = log_density_range(op_of("Bernoulli"), Binary(), (Bounds.point(eta, "logit"),), NP)
    err_p, err_q = (float(e) for e in computed_log_sigmoid_errors(np.float64(eta), np.float64(eta), NP))
    assert hi - lo == pytest.approx(abs(eta) + err_p + err_q, rel=1e-13, abs=1e-13)
    brute = brute_range(lambda x: pymc_logp("Bernoulli", x, logit_p=eta), [("d", [0, 1])])
    assert_exact((lo, hi), brute, tight=False, label="Bernoulli logit")
    assert lo == pytest.approx(brute[0] - (err_q if eta > 0 else err_p), rel=1e-13)


def test_bernoulli_logit_range_holds_what_pymc_computes_without_rewrites():
    """Brute force against the computation the refutation check evaluates (PyMC's logp without its
    stabilising rewrites: ``log(p)`` and ``log1p(-p)`` of the rounded ``p = sigmoid(eta)``), on a
    fine grid up to the logit where ``ln(1 - p)`` becomes ``-inf``: the widened range contains every
    computed value, and from about 35.3 on the rule is infinite (fails closed)."""
    from scipy.special import expit

    for eta in np.concatenate([np.linspace(-40, 36, 2001), np.linspace(25, 35.3, 2001)]):
        lo, hi = log_density_range(op_of("Bernoulli"), Binary(), (Bounds.point(float(eta), "logit"),), NP)
        p = expit(eta)
        with np.errstate(divide="ignore"):
            computed = (np.log(p), np.log1p(-p))
        assert lo <= min(computed) and max(computed) <= hi, eta
    lo, hi = log_density_range(op_of("Bernoulli"), Binary(), (Bounds.point(36.0, "logit"),), NP)
    assert hi - lo == np.inf
    lo, hi = log_density_range(op_of("Bernoulli"), Binary(), (Bounds(-3.0, 40.0, "logit"),), NP)
    assert hi - lo == np.inf


CONTINUOUS_CASES = [
    ("Normal", dict(mu=0.3, sigma=1.0), Interval(-1, 1)),  # mu inside
    ("Normal", dict(mu=-1.0, sigma=0.5), Interval(-1, 1)),  # mu on the boundary
    ("Normal", dict(mu=5.0, sigma=0.1), Interval(-1, 2)),  # mu outside, small sigma
    ("Normal", dict(mu=0.0, sigma=0.01), Interval(-0.5, 0.5)),
    ("Normal", dict(mu=-40.0, sigma=100.0), Interval(0, 10)),  # large sigma
    ("Laplace", dict(mu=0.2, b=0.5), Interval(-1, 1)),
    ("Laplace", dict(mu=3.0, b=2.0), Interval(-1, 1)),
    ("Laplace", dict(mu=1.0, b=0.05), Interval(-1, 1)),
    ("StudentT", dict(nu=1.0, mu=0.0, sigma=1.0), Interval(-2, 2)),
    ("StudentT", dict(nu=3.0, mu=4.0, sigma=0.5), Interval(-1, 1)),
    ("StudentT", dict(nu=30.0, mu=-0.7, sigma=2.0), Interval(-1, 3)),
    ("Cauchy", dict(alpha=0.5, beta=0.2), Interval(-1, 1)),
    ("Cauchy", dict(alpha=-6.0, beta=3.0), Interval(0, 4)),
    ("Exponential", dict(lam=0.5), Interval(0, 10)),
    ("Exponential", dict(lam=3.0), Interval(1, 4)),
    ("Gamma", dict(alpha=0.5, beta=2.0), Interval(0.1, 5)),  # shape < 1: decreasing
    ("Gamma", dict(alpha=1.0, beta=0.7), Interval(0.1, 5)),  # shape = 1: exponential
    ("Gamma", dict(alpha=3.0, beta=1.0), Interval(0.1, 5)),  # mode 2 inside
    ("Gamma", dict(alpha=9.0, beta=0.5), Interval(0.5, 5)),  # mode 16 right of the domain
    ("Gamma", dict(alpha=2.0, beta=8.0), Interval(1, 3)),  # mode 1/8 left of the domain
    ("LogNormal", dict(mu=math.log(math.sqrt(10)), sigma=0.5), Interval(1, 10)),
    ("LogNormal", dict(mu=5.0, sigma=0.3), Interval(0.5, 20)),  # peak right of the domain
    ("LogNormal", dict(mu=0.0, sigma=2.0), Interval(0.05, 3)),  # peak e^-4 left of the domain
    ("LogNormal", dict(mu=1.0, sigma=0.6), Interval(0.2, 8)),  # peak inside
    ("Beta", dict(alpha=0.5, beta=0.5), Interval(0.01, 0.99)),  # convex, U-shaped
    ("Beta", dict(alpha=1.0, beta=1.0), Interval(0.01, 0.99)),  # flat
    ("Beta", dict(alpha=2.0, beta=5.0), Interval(0.01, 0.99)),  # concave, mode inside
    ("Beta", dict(alpha=5.0, beta=5.0), Interval(0.6, 0.9)),  # mode left of the domain
    ("Beta", dict(alpha=0.5, beta=2.0), Interval(0.01, 0.99)),  # mixed: decreasing
    ("Beta", dict(alpha=3.0, beta=0.7), Interval(0.2, 0.6)),  # mixed: increasing
    ("Beta", dict(alpha=1.5, beta=0.5), Interval(0.05, 0.95)),  # alpha + beta = 2
    ("Beta", dict(alpha=1.0, beta=3.0), Interval(0.1, 0.8)),  # alpha = 1
]


@pytest.mark.parametrize(
    "family, kwargs, domain", CONTINUOUS_CASES, ids=[_id(*c) for c in CONTINUOUS_CASES]
)
def test_continuous_point_exact(family, kwargs, domain):
    rule = log_density_range(op_of(family), domain, point_bounds(family, **kwargs), NP)
    brute = brute_range(lambda x: pymc_logp(family, x, **kwargs), [x_axis(domain)])
    assert_exact(rule, brute, label=family)


# --------------------------------------------------------------------------- range parameters

RANGE_CASES = [
    # family, fixed PyMC kwargs, name of the range parameter, its [lo, hi], domain
    ("Normal", dict(sigma=0.5), "mu", (-2.0, -0.5), Interval(-1, 1)),  # overlaps the domain
    ("Normal", dict(sigma=0.8), "mu", (2.0, 3.5), Interval(-1, 1)),  # a gap to the domain
    ("Laplace", dict(b=0.3), "mu", (-0.2, 0.4), Interval(-1, 1)),
    ("StudentT", dict(nu=2.0, sigma=0.4), "mu", (0.5, 2.5), Interval(-1, 1)),
    ("Cauchy", dict(beta=0.7), "alpha", (-4.0, -1.5), Interval(-1, 1)),
    ("Bernoulli", dict(), "p", (0.2, 0.7), Binary()),
    ("Bernoulli", dict(), "p", (0.01, 0.05), Binary()),
    ("Bernoulli", dict(), "p", (0.9, 0.99), Integers(1, 1)),
    ("Binomial", dict(n=10), "p", (0.2, 0.35), Integers(0, 10)),
    ("Binomial", dict(n=10), "p", (0.6, 0.9), Integers(2, 6)),
    ("Binomial", dict(n=12), "p", (0.01, 0.99), Integers(0, 12)),
]


def _range_id(family, fixed, name, interval, domain):
    fx = "".join(f",{k}={v:g}" for k, v in fixed.items())
    return f"{family}({name}in[{interval[0]:g},{interval[1]:g}]{fx})-{domain}"


@pytest.mark.parametrize(
    "family, fixed, name, interval, domain", RANGE_CASES, ids=[_range_id(*c) for c in RANGE_CASES]
)
def test_range_parameter_exact(family, fixed, name, interval, domain):
    """Brute force jointly over the data value and the parameter interval."""
    op = op_of(family)
    # PyMC's own Op parameters at an interior value tell us where the range parameter sits
    probe = op_params(family, **fixed, **{name: float(np.mean(interval))})
    info = rule_info(op)
    assert name in info.range_params
    i = info.param_names.index(name)
    params = [Bounds.point(v) for v in probe]
    params[i] = Bounds(*interval)
    rule = log_density_range(op, domain, tuple(params), NP)
    brute = brute_range(
        lambda x, th: pymc_logp(family, x, **fixed, **{name: th}),
        [x_axis(domain), ("c", *interval)],
    )
    assert_exact(rule, brute, label=family)


@pytest.mark.parametrize(
    "interval, domain",
    [((-3.0, 1.5), Binary()), ((-30.0, -25.0), Binary()), ((4.0, 30.0), Integers(0, 0))],
    ids=["logit[-3,1.5]", "logit[-30,-25]", "logit[4,30]-zeros-only"],
)
def test_bernoulli_logit_range_exact(interval, domain):
    """Exact up to the float error of PyMC's computation (FOUND.md #13), which is below 1e-9 up to
    a logit of 13 and 9.5e-3 at 30 (there the widening is checked by the test above)."""
    rule = log_density_range(op_of("Bernoulli"), domain, (Bounds(*interval, space="logit"),), NP)
    brute = brute_range(
        lambda x, eta: pymc_logp("Bernoulli", x, logit_p=eta), [x_axis(domain), ("c", *interval)]
    )
    assert_exact(rule, brute, tight=interval[1] <= 13, label="Bernoulli logit range")


_CAT_TABLE = np.array(
    [
        [0.10, 0.20, 0.30, 0.40],
        [0.25, 0.25, 0.25, 0.25],
        [0.70, 0.05, 0.15, 0.10],
    ]
)


@pytest.mark.parametrize(
    "rows, domain",
    [
        (slice(None), Integers(0, 3)),
        (slice(None), Integers(1, 2)),
        (slice(0, 2), Integers(0, 3)),
        (slice(1, 3), Integers(2, 3)),
    ],
    ids=["3rows-all-classes", "3rows-classes1..2", "rows0..1-all-classes", "rows1..2-classes2..3"],
)
def test_categorical_rows_exact(rows, domain):
    """``p = pi[y]``: the rule gets the elementwise hull of the rows; brute force runs over the
    actual rows (not the hull) and every allowed class."""
    table = _CAT_TABLE[rows]
    p = Bounds(table.min(axis=0), table.max(axis=0))
    rule = log_density_range(op_of("Categorical"), domain, (p,), NP)
    brute = brute_range(
        lambda r, x: pymc_logp("Categorical", x, p=table[r]),
        [("d", np.arange(len(table))), x_axis(domain)],
    )
    assert_exact(rule, brute, label="Categorical rows")


# ------------------------------------------------------------- docs/theory/families.md checks

def test_binomial_half_minimises_L():
    """Binomial m = 10: ``L(p) >= L(1/2) = ln C(10, 5)``, so a whole count is a costly record."""
    op, dom = op_of("Binomial"), Integers(0, 10)
    n = Bounds.point(10.0)
    ps = np.linspace(0.01, 0.99, 981)
    lo, hi = log_density_range(op, dom, (n, Bounds.point(ps)), NP)
    L = hi - lo
    ln_c = math.log(math.comb(10, 5))
    assert ln_c == pytest.approx(5.529, abs=1e-3)
    assert ps[np.argmin(L)] == pytest.approx(0.5, abs=1e-12)
    assert L.min() == pytest.approx(ln_c, rel=1e-12)
    brute = pymc_logp("Binomial", np.arange(11), n=10, p=0.5)
    assert brute.max() - brute.min() == pytest.approx(ln_c, rel=1e-12)


def test_poisson_min_L_over_mu():
    """Poisson, x in {0..10}: L(mu) is valley-shaped and never below ~2.86; checked against the
    brute-force L on the same mu grid."""
    mus = np.linspace(0.05, 15.0, 2991)
    lo, hi = log_density_range(op_of("Poisson"), Integers(0, 10), (Bounds.point(mus),), NP)
    L = hi - lo
    vals = pymc_logp("Poisson", np.arange(11)[None, :], mu=mus[:, None])
    brute_L = vals.max(axis=1) - vals.min(axis=1)
    np.testing.assert_allclose(L, brute_L, rtol=1e-10, atol=1e-10)
    assert L.min() == pytest.approx(2.86, abs=5e-3)
    assert 4 < mus[np.argmin(L)] < 5
    # the valley: decreasing then increasing
    k = np.argmin(L)
    assert np.all(np.diff(L[: k + 1]) <= 1e-12) and np.all(np.diff(L[k:]) >= -1e-12)


@pytest.mark.parametrize(
    "w, sigma",
    [(np.array([5.0]), 1.0), (np.array([0.3, -0.4]), 0.5), (np.array([1.0, 2.0, -2.0]), 2.0)],
    ids=["d1-w5-s1", "d2-w.5-s.5", "d3-w3-s2"],
)
def test_linear_regression_normal(w, sigma):
    """``y ~ Normal(X @ w, sigma)`` with ``||x|| <= 1``, ``y in [-1, 1]``: ``mu`` ranges over
    ``[-||w||, ||w||]`` and ``L = (1 + ||w||)^2 / (2 sigma^2)``."""
    r = float(np.linalg.norm(w))
    dom = Interval(-1, 1)
    lo, hi = log_density_range(
        op_of("Normal"), dom, (Bounds(-r, r), Bounds.point(sigma)), NP
    )
    L = hi - lo
    assert L == pytest.approx((1 + r) ** 2 / (2 * sigma**2), rel=1e-12)
    brute = brute_range(
        lambda y, mu: pymc_logp("Normal", y, mu=mu, sigma=sigma), [("c", -1.0, 1.0), ("c", -r, r)]
    )
    assert_exact((lo, hi), brute, label="linear regression")


def test_aaai_linear_regression_formula_under_reports():
    """d = 1, w = 5, sigma = 1: the AAAI-appendix constant ``(1 + 2||w||_1 + d||w||_2) /
    (2 sigma^2) = 16 / 2 = 8`` is below the true ``(1 + 5)^2 / 2 = 18`` (PyMC brute force)."""
    w, sigma, d = np.array([5.0]), 1.0, 1
    r = float(np.linalg.norm(w))
    aaai = (1 + 2 * np.abs(w).sum() + d * r) / (2 * sigma**2)
    lo, hi = log_density_range(
        op_of("Normal"), Interval(-1, 1), (Bounds(-r, r), Bounds.point(sigma)), NP
    )
    ys = np.linspace(-1, 1, 201)[None, :]
    mus = np.linspace(-r, r, 1001)[:, None]
    vals = pymc_logp("Normal", ys, mu=mus, sigma=sigma)
    brute_L = vals.max() - vals.min()
    assert aaai == pytest.approx(8.0) and brute_L == pytest.approx(18.0, rel=1e-12)
    assert hi - lo == pytest.approx(brute_L, rel=1e-12)
    assert aaai < brute_L, "the AAAI formula under-reports L"


@pytest.mark.parametrize(
    "b, r", [(0.0, 0.5), (1.5, 0.5), (-2.0, 3.0), (0.3, 3.0)], ids=lambda v: f"{v:g}"
)
def test_logistic_regression_bernoulli(b, r):
    """``y ~ Bernoulli(sigmoid(x @ w + b))``, ``||x|| <= 1``: logit in ``[b - r, b + r]`` with
    ``r = ||w||`` and ``L = |b| + r``."""
    interval = (b - r, b + r)
    lo, hi = log_density_range(op_of("Bernoulli"), Binary(), (Bounds(*interval, space="logit"),), NP)
    assert hi - lo == pytest.approx(abs(b) + r, rel=1e-13)
    brute = brute_range(
        lambda y, eta: pymc_logp("Bernoulli", y, logit_p=eta), [("d", [0, 1]), ("c", *interval)]
    )
    assert_exact((lo, hi), brute, label="logistic regression")


def test_lognormal_needs_the_jacobian():
    """LogNormal on [1, 10], mu = ln sqrt(10), s = 0.5: the truth is 3.93; the Normal rule on
    the log scale (dropping the ``-ln x`` Jacobian) gives 2.65 and would under-report."""
    mu, s = math.log(math.sqrt(10)), 0.5
    dom = Interval(1, 10)
    lo, hi = log_density_range(op_of("LogNormal"), dom, point_bounds("LogNormal", mu=mu, sigma=s), NP)
    brute = brute_range(lambda x: pymc_logp("LogNormal", x, mu=mu, sigma=s), [x_axis(dom)])
    assert_exact((lo, hi), brute, label="LogNormal")
    assert hi - lo == pytest.approx(3.93, abs=5e-3)
    n_lo, n_hi = log_density_range(
        op_of("Normal"), Interval(0, math.log(10)), (Bounds.point(mu), Bounds.point(s)), NP
    )
    assert n_hi - n_lo == pytest.approx(2.65, abs=5e-3)
    assert n_hi - n_lo < (brute[1] - brute[0]) - 1.0


HEAVY_TAIL_CASES = [
    ("StudentT", 1.0, 1.0, Interval(-1, 1)),
    ("StudentT", 2.5, 0.3, Interval(0, 2)),
    ("StudentT", 10.0, 4.0, Interval(-3, 5)),
    ("Cauchy", None, 0.5, Interval(-1, 1)),
    ("Cauchy", None, 2.0, Interval(2, 12)),
]


@pytest.mark.parametrize(
    "family, nu, sigma, domain",
    HEAVY_TAIL_CASES,
    ids=[f"{f}-nu{nu}-s{s:g}-{d}" for f, nu, s, d in HEAVY_TAIL_CASES],
)
def test_heavy_tail_sup_over_location(family, nu, sigma, domain):
    """For a fixed scale, ``sup_mu L = (nu + 1) asinh(w / (sigma sqrt(nu)))``
    (Cauchy: ``2 asinh((b - a) / (2 sigma))``), ``w`` the half-width: scanned with the rule."""
    c, w = domain.center, domain.half_width
    nu_eff = 1.0 if nu is None else nu
    if family == "Cauchy":
        formula = 2 * math.asinh((domain.hi - domain.lo) / (2 * sigma))
    else:
        formula = (nu + 1) * math.asinh(w / (sigma * math.sqrt(nu)))

    def rule_L(mus):
        if family == "Cauchy":
            params = (Bounds.point(mus), Bounds.point(sigma))
        else:
            params = (Bounds.point(nu), Bounds.point(mus), Bounds.point(sigma))
        lo, hi = log_density_range(op_of(family), domain, params, NP)
        return hi - lo

    far = 20 * (w + sigma * math.sqrt(nu_eff))
    mus = np.linspace(c - far, c + far, 200001)  # both sides, mu inside and outside the domain
    L = rule_L(mus)
    assert np.all(L <= formula + 1e-12)
    # the grid maximum is within O(h^2) of the sup; zoom twice around it to make h negligible
    best = L.max()
    for _ in range(2):
        k = int(np.argmax(L))
        mus = np.linspace(mus[max(k - 1, 0)], mus[min(k + 1, len(mus) - 1)], 2001)
        L = rule_L(mus)
        assert np.all(L <= formula + 1e-12)
        best = max(best, L.max())
    assert best == pytest.approx(formula, rel=1e-12)
    # the maximiser is outside the domain, at distance sqrt(sigma^2 nu + w^2) from its centre
    mu_star = float(mus[np.argmax(L)])
    assert abs(mu_star - c) == pytest.approx(math.sqrt(sigma**2 * nu_eff + w**2), rel=1e-6)
    # and the rule is exact there (PyMC brute force)
    kw = dict(alpha=mu_star, beta=sigma) if family == "Cauchy" else dict(nu=nu, mu=mu_star, sigma=sigma)
    brute = brute_range(lambda x: pymc_logp(family, x, **kw), [x_axis(domain)])
    assert brute[1] - brute[0] == pytest.approx(float(L.max()), rel=1e-9)


# --------------------------------------------------------------------------- vectorisation

_P5 = np.array([0.01, 0.2, 0.5, 0.8, 0.99])
_CAT_ROWS = np.array(
    [
        [0.1, 0.2, 0.3, 0.4],
        [0.25, 0.25, 0.25, 0.25],
        [0.7, 0.05, 0.15, 0.1],
        [0.01, 0.01, 0.01, 0.97],
        [0.4, 0.3, 0.2, 0.1],
    ]
)
_S = Bounds.point  # shorthand for the table below

VECTOR_CASES = [
    ("Bernoulli", Binary(), (_S(_P5),)),
    ("Bernoulli", Binary(), (Bounds(_P5 * 0.5, _P5 * 0.5 + 0.005),)),
    ("Bernoulli", Binary(), (Bounds(np.linspace(-30, 2, 5), np.linspace(-29, 30, 5), "logit"),)),
    ("Binomial", Integers(0, 10), (_S(10.0), _S(_P5))),
    ("Binomial", Integers(1, 7), (_S(np.array([7.0, 8, 9, 10, 20])), _S(_P5))),
    ("Binomial", Integers(0, 10), (_S(10.0), Bounds(_P5 * 0.5, _P5 * 0.5 + 0.3))),
    ("Categorical", Integers(0, 3), (_S(_CAT_ROWS),)),
    ("Categorical", Integers(1, 2), (_S(_CAT_ROWS),)),
    ("Poisson", Integers(2, 12), (_S(np.array([0.3, 2.0, 6.5, 11.9, 30.0])),)),
    ("Geometric", Integers(2, 9), (_S(_P5),)),
    ("Normal", Interval(-1, 1), (_S(np.linspace(-3, 3, 5)), _S(np.linspace(0.1, 2, 5)))),
    ("Normal", Interval(-1, 1), (Bounds(np.linspace(-3, 1, 5), np.linspace(-2, 4, 5)), _S(0.7))),
    ("Laplace", Interval(0, 2), (_S(np.linspace(-3, 3, 5)), _S(0.5))),
    ("StudentT", Interval(0, 2), (_S(np.array([0.5, 1, 2, 5, 50.0])), _S(1.5), _S(0.4))),
    ("Cauchy", Interval(0, 2), (Bounds(np.linspace(-3, 1, 5), np.linspace(-2, 4, 5)), _S(0.3))),
    ("Exponential", Interval(0.5, 3), (_S(np.array([0.1, 0.5, 1, 2, 10.0])),)),
    ("Gamma", Interval(0.2, 4), (_S(np.array([0.3, 1.0, 1.5, 3.0, 8.0])), _S(0.8))),
    ("LogNormal", Interval(0.5, 6), (_S(np.linspace(-2, 4, 5)), _S(0.7))),
    ("Beta", Interval(0.1, 0.9), (_S(np.array([0.3, 1.0, 1.0, 2.5, 6.0])), _S(np.array([0.5, 1.0, 3.0, 1.0, 2.0])))),
]


def _slice_bounds(b, i):
    def pick(v):
        v = np.asarray(v)
        return v if v.ndim == 0 else v[i]

    if b.is_point:
        return Bounds.point(pick(b.lo), b.space)
    return Bounds(pick(b.lo), pick(b.hi), b.space)


@pytest.mark.parametrize(
    "family, domain, params",
    VECTOR_CASES,
    ids=[f"{f}-{'range' if any(not b.is_point for b in ps) else 'point'}-{d}" for f, d, ps in VECTOR_CASES],
)
def test_vectorised_equals_scalar_calls(family, domain, params):
    op = op_of(family)
    lo, hi = log_density_range(op, domain, params, NP)
    assert np.shape(lo) == np.shape(hi) == (5,)
    for i in range(5):
        s_lo, s_hi = log_density_range(op, domain, tuple(_slice_bounds(b, i) for b in params), NP)
        assert np.ndim(s_lo) == 0
        assert lo[i] == pytest.approx(float(s_lo), rel=1e-14, abs=1e-14)
        assert hi[i] == pytest.approx(float(s_hi), rel=1e-14, abs=1e-14)


# --------------------------------------------------------------------------- PyTensor namespace

PT_CASES = [
    ("Bernoulli", Binary(), (_S(0.2),)),
    ("Bernoulli", Binary(), (Bounds(-30.0, 2.0, "logit"),)),
    ("Bernoulli", Binary(), (Bounds(0.1, 0.6),)),
    ("Binomial", Integers(2, 8), (_S(10.0), _S(0.3))),
    ("Binomial", Integers(0, 10), (_S(10.0), Bounds(0.2, 0.45))),
    ("Categorical", Integers(1, 3), (Bounds(_CAT_ROWS.min(0), _CAT_ROWS.max(0)),)),
    ("Poisson", Integers(1, 10), (_S(4.5),)),
    ("Poisson", Integers(3000, 5000), (_S(3100.3),)),  # large counts: float32 gammaln loses 1e-3
    ("Binomial", Integers(0, 40), (_S(40.0), Bounds(0.2, 0.21))),
    ("Geometric", Integers(3, 12), (_S(0.2),)),
    ("Normal", Interval(-1, 1), (Bounds(-2.0, 0.5), _S(0.7))),
    ("Laplace", Interval(-1, 1), (_S(1.7), _S(0.4))),
    ("StudentT", Interval(-1, 1), (_S(3.0), _S(2.0), _S(0.5))),
    ("Cauchy", Interval(-1, 1), (Bounds(1.5, 2.5), _S(0.3))),
    ("Exponential", Interval(0, 5), (_S(0.5),)),
    ("Gamma", Interval(0.1, 5), (_S(0.5), _S(2.0))),
    ("Gamma", Interval(0.1, 5), (_S(3.0), _S(1.0))),
    ("LogNormal", Interval(1, 10), (_S(1.15), _S(0.5))),
    ("Beta", Interval(0.05, 0.95), (_S(2.0), _S(0.6))),
]


def _as_pt(b):
    def conv(v):
        return pt.as_tensor_variable(np.asarray(v, dtype="float64"))

    if b.is_point:
        return Bounds.point(conv(b.lo), b.space)
    return Bounds(conv(b.lo), conv(b.hi), b.space)


@pytest.mark.parametrize(
    "family, domain, params",
    PT_CASES,
    ids=[f"{f}-{'range' if any(not b.is_point for b in ps) else 'point'}-{d}" for f, d, ps in PT_CASES],
)
def test_pytensor_namespace_matches_numpy(family, domain, params):
    op = op_of(family)
    np_lo, np_hi = log_density_range(op, domain, params, NP)
    t_lo, t_hi = log_density_range(op, domain, tuple(_as_pt(b) for b in params), PT)
    assert t_lo.dtype == t_hi.dtype == "float64"
    lo, hi = pytensor.function([], [t_lo, t_hi])()
    assert float(lo) == pytest.approx(float(np_lo), rel=1e-12, abs=1e-12)
    assert float(hi) == pytest.approx(float(np_hi), rel=1e-12, abs=1e-12)


# --------------------------------------------------------------------------- refusals

DOMAIN_ERROR_CASES = [
    ("Bernoulli", Integers(0, 2), (_S(0.3),)),
    ("Bernoulli", Interval(0, 1), (_S(0.3),)),  # not an integer domain
    ("Binomial", Integers(-1, 5), (_S(10.0), _S(0.3))),
    ("Poisson", Integers(-2, 5), (_S(1.0),)),
    ("Geometric", Integers(0, 5), (_S(0.3),)),  # PyMC's Geometric starts at 1
    ("Exponential", Interval(-1, 1), (_S(1.0),)),
    ("Gamma", Interval(0, 1), (_S(2.0), _S(1.0))),
    ("Gamma", Interval(-1, 1), (_S(2.0), _S(1.0))),
    ("Beta", Interval(0, 0.5), (_S(2.0), _S(2.0))),
    ("Beta", Interval(0.5, 1), (_S(2.0), _S(2.0))),
    ("LogNormal", Interval(0, 1), (_S(0.0), _S(1.0))),
    ("Normal", Ball(1.0), (_S(0.0), _S(1.0))),  # a row domain for an elementwise factor
    ("Binomial", Integers(0, 11), (_S(10.0), _S(0.3))),  # above the number of trials
    ("Categorical", Integers(0, 3), (_S(np.array([0.2, 0.3, 0.5])),)),  # above the last class
]


@pytest.mark.parametrize(
    "family, domain, params",
    DOMAIN_ERROR_CASES,
    ids=[f"{f}-{d}" for f, d, _ in DOMAIN_ERROR_CASES],
)
def test_domain_error(family, domain, params):
    with pytest.raises(DomainError):
        log_density_range(op_of(family), domain, params, NP)


_NON_RANGE_DOMAIN = {
    "Binomial": Integers(0, 10),
    "Poisson": Integers(0, 10),
    "Geometric": Integers(1, 10),
    "Normal": Interval(-1, 1),
    "Laplace": Interval(-1, 1),
    "StudentT": Interval(-1, 1),
    "Cauchy": Interval(-1, 1),
    "Exponential": Interval(0, 5),
    "Gamma": Interval(0.5, 5),
    "LogNormal": Interval(0.5, 5),
    "Beta": Interval(0.2, 0.8),
}
_NON_RANGE_VALUES = {
    "Binomial": (10.0, 0.3),
    "Poisson": (2.0,),
    "Geometric": (0.3,),
    "Normal": (0.0, 1.0),
    "Laplace": (0.0, 1.0),
    "StudentT": (3.0, 0.0, 1.0),
    "Cauchy": (0.0, 1.0),
    "Exponential": (1.0,),
    "Gamma": (2.0, 1.0),
    "LogNormal": (0.0, 1.0),
    "Beta": (2.0, 2.0),
}
NON_RANGE_CASES = [
    (family, i, name)
    for family in _NON_RANGE_DOMAIN
    for i, name in enumerate(rule_info(op_of(family)).param_names)
    if name not in rule_info(op_of(family)).range_params
]


@pytest.mark.parametrize(
    "family, index, name", NON_RANGE_CASES, ids=[f"{f}-{n}" for f, _, n in NON_RANGE_CASES]
)
def test_non_range_parameter_interval_refused(family, index, name):
    """Only ``range_params`` may be proper intervals; anything else would silently use one end
    of the interval and under-report L."""
    vals = _NON_RANGE_VALUES[family]
    params = [Bounds.point(v) for v in vals]
    params[index] = Bounds(vals[index], vals[index] + 1.0)
    with pytest.raises(UnsupportedFactorError):
        log_density_range(op_of(family), _NON_RANGE_DOMAIN[family], tuple(params), NP)


def test_normal_sigma_interval_refused():
    with pytest.raises(UnsupportedFactorError, match="sigma"):
        log_density_range(op_of("Normal"), Interval(-1, 1), (_S(0.0), Bounds(1.0, 2.0)), NP)
