"""Ranges of expressions over boxes (pymc_dp.intervals): sound always, exact on affine ones.

Ground truth: the expression compiled by PyTensor and evaluated at many points of the box (its
corners included, where affine and bilinear expressions attain their extremes).
"""

from __future__ import annotations

import itertools

import numpy as np
import pymc as pm
import pytensor
import pytensor.tensor as pt
import pytest

from pymc_dp.intervals import BoxEvaluator, UnsupportedExpression


@pytest.fixture(scope="module")
def model():
    with pm.Model() as m:
        pm.Normal("b0")
        pm.Normal("b1")
        pm.Normal("w", shape=3)
        pm.HalfNormal("s")
        pm.Data("X", np.array([[1.0, 2, 3], [-1, 0.5, 2]]))
        pm.Data("secret", np.array([1.0, 2.0]))
    return m


BOX = {"b0": (-1.0, 2.0), "b1": (0.5, 1.5), "w": (np.array([-1, 0, 1.0]), np.array([1, 0.5, 2.0])), "s": (0.5, 4.0)}


def _points(box, names, rng, n=4000):
    """Random points of the box, a third of the coordinates snapped to an end, plus all corners of
    the scalar coordinates."""
    out = []
    for _ in range(n):
        point = []
        for name in names:
            lo, hi = (np.asarray(v, float) for v in box[name])
            u = rng.random(lo.shape)
            u = np.where(rng.random(lo.shape) < 1 / 3, np.round(u), u)
            point.append(lo + (hi - lo) * u)
        out.append(point)
    return out


def _brute(exprs, m, box, rng):
    rvs = [m[n] for n in ("b0", "b1", "w", "s")]
    fn = pytensor.function(rvs, exprs, on_unused_input="ignore")
    lo = hi = None
    for point in _points(box, ["b0", "b1", "w", "s"], rng):
        vals = fn(*point)
        lo = vals if lo is None else [np.minimum(a, b) for a, b in zip(lo, vals)]
        hi = vals if hi is None else [np.maximum(a, b) for a, b in zip(hi, vals)]
    return lo, hi


def _exprs(m):
    b0, b1, w, s = m["b0"], m["b1"], m["w"], m["s"]
    X = m["X"]
    return {
        "cancels": (b0 + b1 * 2.0) - (b0 + b1 * 5.0),  # exactly -3 b1: affine arithmetic keeps b1 correlated
        "matvec": pt.dot(X, w) + b0,
        "stack_T": pt.stack([b0, 2 * b1, b0 - b1]).T,
        "pairwise": w[:, None] - w[None, :],
        "indexed": w[[0, 2, 2]] * 3.0 - b1,
        "product": b0 * b1,
        "nonlinear": pt.exp(b0) * s + pt.log(s) - pt.sigmoid(b1),
        "quotient": pt.sum(w * np.array([1.0, -1, 2])) / s,
        "square": (b0 - b1) ** 2 + pt.abs(b0),
        "reduce": pt.max(w) - pt.min(w),
    }


AFFINE = ("cancels", "matvec", "stack_T", "pairwise", "indexed")


def test_sound_on_every_expression_and_exact_on_affine_ones(model):
    exprs = _exprs(model)
    ev = BoxEvaluator(list(exprs.values()), {v.name: v for v in model.free_RVs})
    ranges = dict(zip(exprs, ev(BOX)))
    lo, hi = _brute(list(exprs.values()), model, BOX, np.random.default_rng(0))
    for (name, (rlo, rhi)), blo, bhi in zip(ranges.items(), lo, hi):
        assert np.all(rlo <= blo + 1e-12), name
        assert np.all(rhi >= bhi - 1e-12), name
        if name in AFFINE:  # extremes at corners, which the sample contains: exact
            np.testing.assert_allclose(rlo, blo, atol=1e-9, err_msg=name)
            np.testing.assert_allclose(rhi, bhi, atol=1e-9, err_msg=name)
    # the cancellation is exact: interval arithmetic would give [-4.5 - 3, -1.5 + 3]
    np.testing.assert_allclose(ranges["cancels"], [-4.5, -1.5])
    # the diagonal of w_i - w_j is exactly 0
    np.testing.assert_allclose(np.diag(ranges["pairwise"][0]), 0.0)
    np.testing.assert_allclose(np.diag(ranges["pairwise"][1]), 0.0)


def test_infinite_ends_give_sound_one_sided_ranges(model):
    s = model["s"]
    ev = BoxEvaluator([1.0 / s, pt.log(s), s * 2.0 + 1.0], {"s": s})
    (inv_lo, inv_hi), (log_lo, log_hi), (lin_lo, lin_hi) = ev({"s": (0.5, np.inf)})
    assert inv_lo == 0.0 and inv_hi == 2.0
    assert log_lo == pytest.approx(np.log(0.5)) and log_hi == np.inf
    assert lin_lo == 2.0 and lin_hi == np.inf
    (inv_lo, inv_hi), *_ = ev({"s": (0.0, 3.0)})
    assert inv_hi == np.inf and inv_lo == pytest.approx(1 / 3)


def test_refuses_private_data_and_unknown_operations(model):
    with pytest.raises(UnsupportedExpression, match="private"):
        BoxEvaluator([model["b0"] * model["secret"]], {"b0": model["b0"]}, forbidden=[model["secret"]])
    ev = BoxEvaluator([pt.gammaln(model["s"])], {"s": model["s"]})
    with pytest.raises(UnsupportedExpression, match="GammaLn"):
        ev({"s": (1.0, 2.0)})


@pytest.mark.parametrize("lo,hi", list(itertools.product([-2.0, 0.0, 1.0], [1.5, 3.0])))
def test_product_of_correlated_values(model, lo, hi):
    """x * (x + 1) over x in [lo, hi]: the affine enclosure is sound whatever the sign pattern."""
    b0 = model["b0"]
    ev = BoxEvaluator([b0 * (b0 + 1.0)], {"b0": b0})
    ((rlo, rhi),) = ev({"b0": (lo, hi)})
    x = np.linspace(lo, hi, 2001)
    values = x * (x + 1)
    assert rlo <= values.min() + 1e-12 and rhi >= values.max() - 1e-12


def test_unpacked_cholesky_times_free_matrix_is_sound():
    """``chol @ z`` of the non-centred LKJ hierarchy: the packed factor set into a matrix
    (``AdvancedSetSubtensor``), times a free matrix. Brute force over the box's points (corners
    included); the interval of each entry is exact here (each is a sum of products of distinct
    box coordinates, multilinear, extreme at corners)."""
    with pm.Model():
        packed = pm.Normal("packed", shape=3)
        z = pm.Normal("z", shape=(2, 4))
        chol = pm.expand_packed_triangular(2, packed, lower=True)
        ab = pt.dot(chol, z).T
        theta = ab[np.array([0, 3, 1]), 0] + ab[np.array([0, 3, 1]), 1] * 2.0
        vec = pt.dot(packed[:2], z[:, 0])  # vector @ vector of two free values
        inc = pt.inc_subtensor(pt.zeros(3)[np.array([0, 2])], packed[1:])  # increment at distinct indices
    box = {"packed": (np.array([0.2, -0.5, 0.1]), np.array([1.5, 0.4, 1.0])), "z": (-np.ones((2, 4)), 2 * np.ones((2, 4)))}
    exprs = [ab, theta, vec, inc]
    ev = BoxEvaluator(exprs, {"packed": packed, "z": z})
    ranges = ev(box)
    fn = pytensor.function([packed, z], exprs)
    rng = np.random.default_rng(1)
    lo = hi = None
    for _ in range(6000):
        point = []
        for name in ("packed", "z"):
            a, b = box[name]
            u = rng.random(np.shape(a))
            u = np.where(rng.random(u.shape) < 0.5, np.round(u), u)
            point.append(a + (b - a) * u)
        vals = fn(*point)
        lo = vals if lo is None else [np.minimum(x, y) for x, y in zip(lo, vals)]
        hi = vals if hi is None else [np.maximum(x, y) for x, y in zip(hi, vals)]
    for (rlo, rhi), blo, bhi in zip(ranges, lo, hi):
        assert np.shape(rlo) == np.shape(blo)
        assert np.all(rlo <= blo + 1e-12) and np.all(rhi >= bhi - 1e-12)
    # chol @ z entrywise: [L00 z0j, L10 z0j + L11 z1j]; extremes at corners, which the sample hits
    np.testing.assert_allclose(ranges[0][0], lo[0], atol=1e-9)
    np.testing.assert_allclose(ranges[0][1], hi[0], atol=1e-9)
    # the element that no index increments stays exactly 0
    np.testing.assert_allclose(ranges[3][0][1], 0.0)
    np.testing.assert_allclose(ranges[3][1][1], 0.0)


def test_increment_at_repeated_indices_is_refused():
    with pm.Model():
        w = pm.Normal("w", shape=2)
        expr = pt.inc_subtensor(pt.zeros(3)[np.array([0, 0])], w)
    ev = BoxEvaluator([expr], {"w": w})
    with pytest.raises(UnsupportedExpression, match="repeated"):
        ev({"w": (-1.0, 1.0)})


# ---------------------------------------------------------------- fail closed (issue 32)
def test_products_of_ends_map_only_zero_times_inf_to_zero():
    from pymc_dp.intervals import _mul_ends

    out = _mul_ends(np.array([0.0, np.nan, 2.0, -np.inf, 0.0]), np.array([np.inf, 1.0, np.inf, 3.0, -np.inf]))
    assert out[0] == 0.0 and out[4] == 0.0
    assert np.isnan(out[1])  # an unknown end stays unknown (widened by the evaluator), never 0
    assert out[2] == np.inf and out[3] == -np.inf


@pytest.mark.parametrize("d", [1, 5, 20])
@pytest.mark.parametrize("side", ["upper", "lower", "both"])
def test_public_matrix_times_an_unbounded_vector_is_unbounded(d, side):
    """``b + X @ w`` with a public X of both signs and ``w`` unbounded on a side: every row's range
    is unbounded on both sides (a row with entries of both signs reaches +-inf through w). BLAS
    gave NaN for such rows, and the sum with ``b`` counted the NaN as 0."""
    X = np.random.default_rng(0).normal(size=(30, d))
    X[0, 0] = 0.0  # a zero entry: 0 * inf = 0 for that product
    with pm.Model():
        Xd = pm.Data("X", X)
        w = pm.Normal("w", shape=d)
        b = pm.Normal("b")
    expr = b + pt.dot(Xd, w)
    lo = np.full(d, -0.5 if side == "upper" else -np.inf)
    hi = np.full(d, 0.5 if side == "lower" else np.inf)
    (out_lo, out_hi), = BoxEvaluator([expr], {"w": w, "b": b})({"w": (lo, hi), "b": (-1.0, 1.0)})
    assert not np.any(np.isnan(out_lo)) and not np.any(np.isnan(out_hi))
    rows = np.ones(30, bool)
    if d == 1:
        rows[0] = False  # its only entry is 0: b alone
        assert out_lo[0] == -1.0 and out_hi[0] == 1.0
    # each row reaches the infinite side through some w_j (sign of X_ij decides which end)
    assert np.all(np.isinf(out_lo[rows]) | np.isinf(out_hi[rows]))
    if side == "both":
        assert np.all(out_lo[rows] == -np.inf) and np.all(out_hi[rows] == np.inf)


def test_nan_box_ends_widen_to_the_support():
    """An end the box search left unknown (NaN) is an open end, not a point."""
    with pm.Model():
        w = pm.Normal("w", shape=2)
    expr = 2.0 * w
    (lo, hi), = BoxEvaluator([expr], {"w": w})({"w": (np.array([np.nan, 0.0]), np.array([1.0, np.nan]))})
    assert lo[0] == -np.inf and hi[1] == np.inf and lo[1] == 0.0 and hi[0] == 2.0


def test_student_t_slope_spread_at_open_and_unknown_ends():
    """``psi'`` over ``(-inf, -5]`` spreads from 0 (its limit) to ``psi'(-5)``; a NaN end fails closed."""
    from pymc_dp.rules.studentt_location import StudentTLocation

    table = StudentTLocation.__new__(StudentTLocation)
    object.__setattr__(table, "nu", 1.0)  # only nu enters the slope
    spread = table._slope_spread(np.array([-np.inf, np.nan, -2.0]), np.array([-5.0, 1.0, 2.0]))
    assert spread[0] == pytest.approx(table._slope(np.array(-5.0)))
    assert spread[1] == np.inf
    u = np.linspace(-2, 2, 100001)
    assert spread[2] == pytest.approx(np.ptp(table._slope(u)), rel=1e-6)


def test_reciprocal_of_a_subnormal_end_is_an_infinite_end():
    """Fuzzer hole #2 (tests/fuzz/FOUND.md): ``1 / exp(b)`` with ``b`` far down its support overflows;
    the end is +inf (sound), not a NumPy warning raised inside pymc_dp."""
    with pm.Model():
        b = pm.Normal("b")
    (lo, hi), = BoxEvaluator([1.0 / pt.exp(b)], {"b": b})({"b": (-744.0, 1.0)})
    assert hi == np.inf and lo == pytest.approx(np.exp(-1.0))
