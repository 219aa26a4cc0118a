"""Linear predictors as users write them (pymc_dp.predictor).

Ground truth: the predictor itself, evaluated with every row of the private data set to one
candidate record, over a grid of records that contains every corner of the domains (where an
affine or bilinear function of independent fields attains its extremes). The analysis must never
be narrower than that (sound) and, where it says it is exact, must equal it.
"""

from __future__ import annotations

import itertools

import numpy as np
import pymc as pm
import pytensor
import pytensor.tensor as pt
import pytest

from pymc_dp.domains import Ball, Binary, Box, Integers, Interval
from pymc_dp.predictor import NotAPredictor, analyse, strip_identity

N = 4
DOMAINS = {"x1": Interval(0, 10), "x2": Binary(), "g": Integers(0, 3), "X": Box(-1, 1), "B": Ball(1.0)}


def _model():
    rng = np.random.default_rng(1)
    with pm.Model() as m:
        pm.Data("x1", rng.uniform(0, 10, N))
        pm.Data("x2", rng.integers(0, 2, N))
        pm.Data("g", rng.integers(0, 4, N))
        pm.Data("X", rng.uniform(-1, 1, (N, 3)))
        pm.Data("B", np.full((N, 2), 0.5))
        pm.Normal("b", shape=4)
        pm.Normal("a", shape=4)
        pm.Normal("w", shape=3)
        pm.Normal("W", shape=(3, 2))
    return m


def _expressions(m):
    x1, x2, g, X, B = (m[k] for k in ("x1", "x2", "g", "X", "B"))
    b, a, w, W = (m[k] for k in ("b", "a", "w", "W"))
    return {
        # name: (expression, exact?)
        "columnwise": (b[0] + b[1] * x1 + b[2] * x2, True),
        "interaction": (b[0] + b[1] * x1 + b[2] * x2 + b[3] * x1 * x2, False),
        "deterministic": (pm.Deterministic("mu", b[0] + b[1] * x1, model=m), True),
        "varying_intercept": (a[g] + b[1] * x1, True),
        "varying_slopes": (a[g] + b[g] * x1, False),
        "matvec_box": (X @ w + b[0], True),
        "matvec_ball": (B @ w[:2], True),
        "columns": (b[1] * X[:, 0] - b[2] * X[:, 2] / 2.0, True),
        "columns_same_container": (b[1] * X[:, 0] + b[2] * X[:, 1] + b[3] * X[:, 2], True),
        "stack_T": (pt.stack([b[0] + b[1] * x1, b[2] * x2, pt.zeros(N)]).T, True),
        # a reference alternative's utility: zeros_like / full_like of a private expression read its
        # shape only (second(u, c)), a public constant
        "stack_zeros_like": (pt.stack([b[0] + b[1] * x1, pt.zeros_like(b[1] * x1)]).T, True),
        "stack_full_like": (pt.stack([X @ w, pt.full_like(X @ w, 0.5), pt.ones_like(x1) * b[2]]).T, True),
        "concatenate": (pt.concatenate([(b[1] * x1)[:, None], (b[2] * x2)[:, None]], axis=1), True),
        "matmat": (X @ W, True),
        "squared_column": (b[0] * x1**2 + b[1] * x1, False),
        "cast_and_divide": (pt.cast(x2, "float64") / 4.0 + b[0], True),
    }


def _records():
    for x1, x2, g, X, B in itertools.product(
        np.linspace(0, 10, 11), (0, 1), range(4), itertools.product((-1.0, 0.3, 1.0), repeat=3),
        [(1.0, 0.0), (0.0, 1.0), (-0.6, 0.8), (np.sqrt(0.5), -np.sqrt(0.5))],
    ):
        yield x1, x2, g, np.array(X), np.array(B)


@pytest.fixture(scope="module")
def setup():
    m = _model()
    exprs = _expressions(m)
    private = {v: v.name for v in m.data_vars}
    shapes = {v.name: v.get_value().shape[1:] for v in m.data_vars}
    rng = np.random.default_rng(2)
    values = {k: rng.normal(size=m[k].type.shape if all(m[k].type.shape) else None) for k in ("b", "a", "w", "W")}
    values = {k: rng.normal(size=tuple(pm.draw(m[k]).shape)) for k in ("b", "a", "w", "W")}
    return m, exprs, private, shapes, values


def _brute(m, expr, values):
    fn = pytensor.function([m["b"], m["a"], m["w"], m["W"]], expr, on_unused_input="ignore")
    lo = hi = None
    for i, (x1, x2, g, X, B) in enumerate(_records()):
        if i % 2:  # half the grid, corners included (the Box corners recur with every x1)
            continue
        m.set_data("x1", np.full(N, x1))
        m.set_data("x2", np.full(N, x2))
        m.set_data("g", np.full(N, g))
        m.set_data("X", np.tile(X, (N, 1)))
        m.set_data("B", np.tile(B, (N, 1)))
        v = fn(values["b"], values["a"], values["w"], values["W"])
        lo = v if lo is None else np.minimum(lo, v)
        hi = v if hi is None else np.maximum(hi, v)
    return lo, hi


@pytest.mark.parametrize("name", list(_expressions(_model())))
def test_range_over_one_record(setup, name):
    m, exprs, private, shapes, values = setup
    expr, exact = exprs[name]
    pred = analyse(expr, private, DOMAINS, shapes)
    assert pred.exact is exact, pred.inexact_reason
    lo, hi = pred.bounds(DOMAINS)
    fn = pytensor.function([m["b"], m["a"], m["w"], m["W"]], [pt.broadcast_to(lo, expr.shape), pt.broadcast_to(hi, expr.shape)],
                           on_unused_input="ignore")
    rlo, rhi = fn(values["b"], values["a"], values["w"], values["W"])
    blo, bhi = _brute(m, expr, values)
    assert np.all(rlo <= blo + 1e-9) and np.all(rhi >= bhi - 1e-9), "narrower than the data allow"
    if exact and name != "matvec_ball":  # the Ball's extremes lie between the grid's rows
        np.testing.assert_allclose(rlo, blo, atol=1e-9)
        np.testing.assert_allclose(rhi, bhi, atol=1e-9)
    if not exact:
        assert pred.inexact_reason


def test_ball_row_range_is_the_dual_norm(setup):
    m, exprs, private, shapes, values = setup
    pred = analyse(exprs["matvec_ball"][0], private, DOMAINS, shapes)
    lo, hi = pred.bounds(DOMAINS)
    w = values["w"][:2]
    fn = pytensor.function([m["w"]], hi, on_unused_input="ignore")
    np.testing.assert_allclose(fn(values["w"]), np.linalg.norm(w))


def test_deterministic_is_seen_through(setup):
    m, exprs, private, shapes, _ = setup
    det = exprs["deterministic"][0]
    assert strip_identity(det) is not det  # pm.Deterministic is a ViewOp
    assert analyse(det, private, DOMAINS, shapes).containers == ["x1"]


@pytest.mark.parametrize(
    "make,words",
    [
        (lambda m: m["b"][0] * m["x1"][1:], "selects or shifts records"),
        (lambda m: m["b"][0] + m["x1"].sum(), "records"),
        (lambda m: pt.exp(m["x1"]) * m["b"][0], "exp, which is not linear in the record.*before the model"),
        (lambda m: pt.cumsum(m["x1"]) * m["b"][0], "cumulative sum, which.*before the model"),
        (lambda m: m["b"][0] / m["x1"], "division by a quantity that reads private data"),
        (lambda m: m["x1"][:, None] + m["x1"][None, :], "different axes"),
        (lambda m: pt.concatenate([m["x1"], m["x1"]]), "record axis"),
        (lambda m: m["X"][m["g"]] @ m["w"], "indexing private data"),
    ],
)
def test_refusals_say_what_in_words(setup, make, words):
    m, _, private, shapes, _ = setup
    with pytest.raises(NotAPredictor, match=words) as info:
        analyse(make(m), private, DOMAINS, shapes)
    assert "Elemwise" not in str(info.value) and "Subtensor" not in str(info.value)
