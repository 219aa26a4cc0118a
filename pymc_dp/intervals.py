"""Sound ranges of PyTensor expressions over a box of free-RV values (affine arithmetic).

A truncation region is a box: every element of a free RV ``v`` lies in ``[lo_v, hi_v]``. To
certify a factor over the region, pymc_dp needs the range, over the box, of expressions of the
free RVs: a linear predictor's offset (``b0 + b1 * c``), a coefficient (``beta[group]``), a
scale (``exp(log_sigma)``), a hyperprior's draw (``mu_a + z * sigma_a``).

:class:`BoxEvaluator` evaluates an expression's graph once into a sequence of NumPy steps and
then, for any box, returns elementwise ``(lo, hi)`` with ``lo <= f(theta) <= hi`` for every
``theta`` in the box. Each value carries

* an **interval** ``[lo, hi]`` (interval arithmetic: sound for every supported operation,
  infinite ends included), and
* where every input is bounded, an **affine form** ``c + A @ eps + [-e, e]`` over noise symbols
  ``eps in [-1, 1]``, one per free-RV element (affine arithmetic, Comba & Stolfi 1993): linear
  operations are exact, so ``(a0 + b * x) - (a1 + b * x')`` keeps the two ``b``'s correlated
  and its range is exact, where interval arithmetic would count ``b`` twice. Products add the
  standard quadratic remainder ``rad(x) rad(y)``; nonlinear elementwise functions fall back to
  the interval of their input.

The reported range is the intersection of the two enclosures, each sound, so it is sound.

Subgraphs that do not depend on the free RVs (public data, shapes, constants) are computed once
by PyTensor. They must not read private data: ``forbidden`` lists the private containers, and an
expression that reaches one is refused (:class:`UnsupportedExpression`), so that a region can
never depend on the private data's values.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Mapping, Sequence

import numpy as np
import pytensor
import pytensor.scalar as ps
from pytensor.compile.ops import DeepCopyOp, ViewOp
from pytensor.graph.basic import Constant, Variable
from pytensor.graph.traversal import ancestors, toposort
from pytensor.tensor.basic import Alloc, Join, MakeVector
from pytensor.tensor.elemwise import CAReduce, DimShuffle, Elemwise
from pytensor.tensor.math import Dot, Max, Min, Sum
from pytensor.tensor.shape import Reshape, SpecifyShape
from pytensor.tensor.subtensor import (
    AdvancedIncSubtensor,
    AdvancedIncSubtensor1,
    AdvancedSubtensor,
    AdvancedSubtensor1,
    IncSubtensor,
    Subtensor,
    indices_from_subtensor,
)

__all__ = ["BoxEvaluator", "UnsupportedExpression", "Box"]


class UnsupportedExpression(Exception):
    """The expression uses an operation the evaluator cannot bound (or reads private data)."""


#: ``name -> (lo, hi)`` arrays broadcastable to the free RV's shape
Box = Mapping[str, tuple[Any, Any]]


def _mul_ends(a, b):
    """Elementwise ``a * b`` of interval ends, with ``0 * inf = 0``.

    An end of exactly 0 times an infinite end is 0: every value of the other interval times 0 is
    0. Nothing else is mapped: a NaN end (an unknown bound) stays NaN, and :meth:`BoxEvaluator.__call__`
    widens it to an infinite end. (Mapping every NaN product to 0 let a NaN range of ``X @ w``
    with ``w`` unbounded count as 0 in ``b + X @ w``: a false certificate, issue 32.)"""
    a, b = np.asarray(a, float), np.asarray(b, float)
    zero_times_inf = ((a == 0.0) & np.isinf(b)) | (np.isinf(a) & (b == 0.0))
    with np.errstate(invalid="ignore", over="ignore"):
        out = a * b
    return np.where(zero_times_inf, 0.0, out)


def _matmul_ends(M: np.ndarray, v: np.ndarray, left: bool) -> np.ndarray:
    """``M @ v`` (``left``) or ``v @ M`` of a finite public matrix and interval ends ``v``, with
    ``0 * inf = 0`` in every product (as :func:`_mul_ends`) and ``inf - inf`` a NaN (unknown:
    widened by :meth:`BoxEvaluator.__call__`). BLAS's matmul gives ``0 * inf = NaN`` where a public
    design matrix's zero entry meets an unbounded coefficient, and NaN for every row of a matrix
    with entries of both signs."""
    M, v = np.asarray(M, float), np.asarray(v, float)
    if not np.all(np.isfinite(M)):
        raise UnsupportedExpression("a product with a public matrix that holds NaN or infinite values")
    prod = (lambda a, b: a @ b) if left else (lambda a, b: b @ a)
    finite = np.where(np.isfinite(v), v, 0.0)
    out = prod(M, finite)
    if np.all(np.isfinite(v)):
        return out
    pos_M, neg_M = (M > 0.0).astype(float), (M < 0.0).astype(float)
    up, down = (v == np.inf).astype(float), (v == -np.inf).astype(float)
    # how many products are +inf and how many -inf (a NaN end counts as both: unknown)
    unknown = np.isnan(v).astype(float)
    plus = prod(pos_M, up + unknown) + prod(neg_M, down + unknown)
    minus = prod(pos_M, down + unknown) + prod(neg_M, up + unknown)
    out = np.where(plus > 0, np.inf, out)
    out = np.where(minus > 0, -np.inf, out)
    return np.where((plus > 0) & (minus > 0), np.nan, out)


@dataclass
class _Val:
    """A value over the box: the interval ``[lo, hi]`` and, if bounded, an affine form."""

    lo: np.ndarray
    hi: np.ndarray
    c: np.ndarray | None = None  # centre
    A: np.ndarray | None = None  # coefficients, shape c.shape + (n_symbols,)
    e: np.ndarray | None = None  # remainder radius >= 0

    @property
    def affine(self) -> bool:
        return self.c is not None

    @classmethod
    def const(cls, x) -> "_Val":
        x = np.asarray(x, dtype=float)
        return cls(x, x, x, None, np.zeros_like(x))

    @classmethod
    def from_affine(cls, c, A, e, lo=None, hi=None) -> "_Val":
        rad = e + (np.sum(np.abs(A), axis=-1) if A is not None else 0.0)
        alo, ahi = c - rad, c + rad
        if lo is not None:
            alo, ahi = np.maximum(alo, lo), np.minimum(ahi, hi)
        return cls(alo, ahi, c, A, e)

    @classmethod
    def interval(cls, lo, hi) -> "_Val":
        return cls(np.asarray(lo, float), np.asarray(hi, float))


def _fail_closed(v: _Val) -> _Val:
    """``v`` with every unknown end widened: a NaN lower end is ``-inf``, a NaN upper end ``+inf``
    (NaN comes from ``inf - inf``, ``0 * inf`` outside :func:`_mul_ends`, a function outside its
    domain). An affine form with a non-finite part is dropped (the interval alone is sound)."""
    lo, hi = np.asarray(v.lo, float), np.asarray(v.hi, float)
    bad_lo, bad_hi = np.isnan(lo), np.isnan(hi)
    if not (bad_lo.any() or bad_hi.any()):
        if v.affine and not (np.all(np.isfinite(v.c)) and np.all(np.isfinite(v.e)) and (v.A is None or np.all(np.isfinite(v.A)))):
            return _Val.interval(lo, hi)
        return v
    return _Val.interval(np.where(bad_lo, -np.inf, lo), np.where(bad_hi, np.inf, hi))


def _shape_of(v: _Val):
    return np.broadcast_shapes(np.shape(v.lo), np.shape(v.hi))


def _broadcast_A(v: _Val, shape, m):
    if v.A is None:
        return np.zeros(tuple(shape) + (m,))
    return np.broadcast_to(v.A, tuple(shape) + (v.A.shape[-1],))


def _combine_linear(vals: Sequence[_Val], weights: Sequence[float | np.ndarray], m: int) -> _Val:
    """``sum_i w_i v_i`` (weights public arrays): exact on affine forms."""
    lo = hi = 0.0
    for v, w in zip(vals, weights):
        w = np.asarray(w, float)
        a, b = _mul_ends(w, v.lo), _mul_ends(w, v.hi)
        lo, hi = lo + np.minimum(a, b), hi + np.maximum(a, b)
    if all(v.affine for v in vals):
        shape = np.broadcast_shapes(*(np.shape(v.c) for v in vals), *(np.shape(w) for w in weights))
        c = sum(np.asarray(w, float) * v.c for v, w in zip(vals, weights))
        A = sum(np.asarray(w, float)[..., None] * _broadcast_A(v, np.shape(v.c), m) for v, w in zip(vals, weights))
        e = sum(np.abs(np.asarray(w, float)) * v.e for v, w in zip(vals, weights))
        c = np.broadcast_to(c, shape)
        return _Val.from_affine(c, np.broadcast_to(A, tuple(shape) + (m,)), np.broadcast_to(e, shape), lo, hi)
    return _Val.interval(lo, hi)


def _product(x: _Val, y: _Val, m: int) -> _Val:
    ends = [_mul_ends(p, q) for p in (x.lo, x.hi) for q in (y.lo, y.hi)]
    lo = np.minimum.reduce(ends)
    hi = np.maximum.reduce(ends)
    if x.affine and y.affine:
        shape = np.broadcast_shapes(np.shape(x.c), np.shape(y.c))
        Ax, Ay = _broadcast_A(x, np.shape(x.c), m), _broadcast_A(y, np.shape(y.c), m)
        rx = x.e + np.sum(np.abs(Ax), axis=-1)
        ry = y.e + np.sum(np.abs(Ay), axis=-1)
        c = x.c * y.c
        A = x.c[..., None] * Ay + y.c[..., None] * Ax
        e = np.abs(x.c) * y.e + np.abs(y.c) * x.e + rx * ry
        return _Val.from_affine(np.broadcast_to(c, shape), np.broadcast_to(A, tuple(shape) + (m,)), np.broadcast_to(e, shape), lo, hi)
    return _Val.interval(lo, hi)


def _monotone(fn: Callable, x: _Val, increasing: bool = True) -> _Val:
    with np.errstate(all="ignore"):
        a, b = fn(x.lo), fn(x.hi)
    return _Val.interval(a, b) if increasing else _Val.interval(b, a)


def _square(x: _Val) -> _Val:
    lo2, hi2 = np.square(x.lo), np.square(x.hi)
    straddles = (x.lo <= 0) & (x.hi >= 0)
    return _Val.interval(np.where(straddles, 0.0, np.minimum(lo2, hi2)), np.maximum(lo2, hi2))


def _abs(x: _Val) -> _Val:
    straddles = (x.lo <= 0) & (x.hi >= 0)
    a, b = np.abs(x.lo), np.abs(x.hi)
    return _Val.interval(np.where(straddles, 0.0, np.minimum(a, b)), np.maximum(a, b))


def _reciprocal(x: _Val) -> _Val:
    """``1 / x``; an end at 0 maps to an infinite end (the limit), an interval across 0 to R."""
    lo, hi = np.asarray(x.lo, float), np.asarray(x.hi, float)
    with np.errstate(divide="ignore", over="ignore"):  # 1/0 = inf; 1/subnormal overflows to inf: both sound ends
        inv_lo, inv_hi = 1.0 / np.abs(lo), 1.0 / np.abs(hi)  # magnitudes
    nonneg, nonpos = lo >= 0, hi <= 0
    out_lo = np.where(nonneg, inv_hi, np.where(nonpos, -inv_hi, -np.inf))
    out_hi = np.where(nonneg, inv_lo, np.where(nonpos, -inv_lo, np.inf))
    return _Val.interval(out_lo, out_hi)


def _pow(x: _Val, p: np.ndarray) -> _Val:
    p = np.asarray(p, float)
    if p.size != 1:
        raise UnsupportedExpression("a power with a non-scalar exponent")
    p = float(p.reshape(()))
    if p == 2.0:
        return _square(x)
    if p == 1.0:
        return x
    if float(p).is_integer() and p > 0:
        if int(p) % 2 == 0:
            sq = _square(x)
            return _monotone(lambda t: t ** (p / 2), sq)
        return _monotone(lambda t: np.power(t, p), x)
    if np.any(x.lo < 0):
        raise UnsupportedExpression("a fractional power of a value that may be negative")
    return _monotone(lambda t: np.power(t, p), x, increasing=p > 0)


_INCREASING = {
    ps.Exp: np.exp,
    ps.Log: np.log,
    ps.Log1p: np.log1p,
    ps.Expm1: np.expm1,
    ps.Sqrt: np.sqrt,
    ps.Tanh: np.tanh,
    ps.Sinh: np.sinh,
    ps.ArcSinh: np.arcsinh,
    ps.Softplus: lambda t: np.logaddexp(0.0, t),
    ps.Erf: None,
    ps.Log2: np.log2,
    ps.Log10: np.log10,
    ps.Floor: np.floor,
    ps.Ceil: np.ceil,
}


def _sigmoid(t):
    return 0.5 * (1.0 + np.tanh(0.5 * t))


_INCREASING[ps.Sigmoid] = _sigmoid
_INCREASING.pop(ps.Erf)


class BoxEvaluator:
    """Ranges of ``outputs`` (expressions of free RVs) over boxes of the free RVs' values.

    Parameters
    ----------
    outputs : sequence of Variable
        Expressions of the model's free RVs and of public data.
    free : mapping of str to Variable
        The free RVs, by name, that may appear (the box's keys).
    forbidden : iterable of Variable
        Variables that must not be reached (the private data containers).
    """

    def __init__(self, outputs: Sequence[Variable], free: Mapping[str, Variable], forbidden=()):
        self.outputs = list(outputs)
        self.free = dict(free)
        rv_of = {rv: name for name, rv in self.free.items()}
        forbidden = set(forbidden)
        blockers = list(self.free.values())
        from pymc_dp.predictor import value_ancestors

        reached = set(ancestors(self.outputs, blockers=blockers))
        if value_ancestors(self.outputs, blockers=blockers) & forbidden:
            raise UnsupportedExpression("the expression reads private data")
        self.inputs = [name for name, rv in self.free.items() if rv in reached]
        depends = set()
        nodes = []
        for node in toposort(self.outputs, blockers=blockers):
            if any(i in rv_of or i in depends for i in node.inputs):
                depends.update(node.outputs)
                nodes.append(node)
        self.nodes = nodes
        self.depends = depends
        # constant inputs of dependent nodes: computed once (public data and shapes)
        consts = []
        for node in nodes:
            for i in node.inputs:
                if i not in depends and i not in rv_of and not isinstance(i, Constant) and i not in consts:
                    consts.append(i)
        for out in self.outputs:
            if out not in depends and out not in rv_of and not isinstance(out, Constant) and out not in consts:
                consts.append(out)
        self.const_values: dict[Variable, np.ndarray] = {}
        if consts:
            fn = pytensor.function([], consts, mode="FAST_COMPILE", on_unused_input="ignore")
            for var, value in zip(consts, fn()):
                self.const_values[var] = np.asarray(value)
        self.rv_of = rv_of

    def _value_of(self, var, env):
        if var in env:
            return env[var]
        if isinstance(var, Constant):
            return _Val.const(var.data)
        if var in self.const_values:
            return _Val.const(self.const_values[var])
        raise UnsupportedExpression(f"no value for {var}")  # pragma: no cover

    def _raw(self, var):
        """The numeric value of a constant input (indices, shapes, exponents)."""
        if isinstance(var, Constant):
            return np.asarray(var.data)
        if var in self.const_values:
            return self.const_values[var]
        raise UnsupportedExpression(f"{var} is not a public constant")

    def __call__(self, box: Box) -> list[tuple[np.ndarray, np.ndarray]]:
        """``[(lo, hi), ...]`` per output: elementwise bounds over the box."""
        env: dict = {}
        sizes = []
        for name in self.inputs:
            rv = self.free[name]
            lo, hi = box[name]
            shape = tuple(int(s) for s in self._rv_shape(rv))
            # an unknown end (NaN) is an open one: fail closed
            lo = np.broadcast_to(np.nan_to_num(np.asarray(lo, float), nan=-np.inf, posinf=np.inf, neginf=-np.inf), shape)
            hi = np.broadcast_to(np.nan_to_num(np.asarray(hi, float), nan=np.inf, posinf=np.inf, neginf=-np.inf), shape)
            sizes.append((name, rv, lo, hi))
        m = sum(lo.size for _, _, lo, hi in sizes if np.all(np.isfinite(lo)) and np.all(np.isfinite(hi)))
        offset = 0
        for name, rv, lo, hi in sizes:
            if np.all(np.isfinite(lo)) and np.all(np.isfinite(hi)):
                c = 0.5 * (lo + hi)
                r = 0.5 * (hi - lo)
                A = np.zeros(lo.shape + (m,))
                idx = np.arange(lo.size)
                A.reshape(lo.size, m)[idx, offset + idx] = r.reshape(-1)
                offset += lo.size
                env[rv] = _Val(lo.copy(), hi.copy(), c, A, np.zeros(lo.shape))
            else:
                env[rv] = _Val.interval(lo.copy(), hi.copy())
        self._m = m
        for node in self.nodes:
            # every step is sound under IEEE arithmetic with its NaNs widened: an overflow is an
            # infinite end, 1/0 an infinite end, and inf - inf or 0 * inf (outside _mul_ends) a NaN
            # that _fail_closed turns into an open end
            with np.errstate(over="ignore", divide="ignore", invalid="ignore"):
                outs = self._apply(node, [self._value_of(i, env) if (i in env or i in self.depends or i in self.rv_of) else None for i in node.inputs], m)
            for o, v in zip(node.outputs, outs):
                env[o] = _fail_closed(v)
        result = []
        for out in self.outputs:
            v = self._value_of(out, env)
            result.append((np.asarray(v.lo, float), np.asarray(v.hi, float)))
        return result

    def _rv_shape(self, rv):
        if not hasattr(self, "_shapes"):
            self._shapes = {}
        if rv not in self._shapes:
            self._shapes[rv] = tuple(pytensor.function([], rv.shape, mode="FAST_COMPILE")())
        return self._shapes[rv]

    # ------------------------------------------------------------------ operations
    def _apply(self, node, vals, m):
        op = node.op
        ins = [v if v is not None else _Val.const(self._raw(i)) for v, i in zip(vals, node.inputs)]
        if isinstance(op, (ViewOp, DeepCopyOp, SpecifyShape)) or type(op).__name__ in ("OutputGuard", "ModelNamed"):
            return [ins[0]]
        if isinstance(op, Elemwise):
            return [self._elemwise(op.scalar_op, ins, node, m)]
        if isinstance(op, DimShuffle):
            return [self._struct(ins[0], lambda a: _dimshuffle(a, op), lambda A: _dimshuffle_A(A, op))]
        if isinstance(op, Subtensor):
            idx = indices_from_subtensor([self._raw(i) for i in node.inputs[1:]], op.idx_list)
            return [self._struct(ins[0], lambda a: a[idx], lambda A: A[tuple(idx) + (slice(None),)] if isinstance(idx, tuple) else A[idx])]
        if isinstance(op, (AdvancedSubtensor1, AdvancedSubtensor)):
            if any(i in self.depends or i in self.rv_of for i in node.inputs[1:]):
                raise UnsupportedExpression("an index that depends on the parameters")
            raw = [self._raw(i) for i in node.inputs[1:]]
            if isinstance(op, AdvancedSubtensor1):
                idx = (np.asarray(raw[0], dtype=int),)
            else:
                idx = tuple(_as_index(r) for r in raw)
            return [self._struct(ins[0], lambda a: a[idx], lambda A: A[idx + (slice(None),)])]
        if isinstance(op, (IncSubtensor, AdvancedIncSubtensor1, AdvancedIncSubtensor)):
            return [self._inc_subtensor(node, ins, m)]
        if isinstance(op, (Join, MakeVector)):
            if isinstance(op, Join):
                axis = int(self._raw(node.inputs[0]))
                parts = ins[1:]
            else:
                axis = 0
                parts = [self._struct(p, lambda a: np.reshape(a, (1,)), lambda A: np.reshape(A, (1, A.shape[-1]))) for p in ins]
            return [self._join(parts, axis, m)]
        if isinstance(op, Alloc):
            shape = tuple(int(self._raw(s)) for s in node.inputs[1:])
            return [self._struct(ins[0], lambda a: np.broadcast_to(a, shape), lambda A: np.broadcast_to(A, shape + (A.shape[-1],)))]
        if isinstance(op, Reshape):
            shape = tuple(int(s) for s in np.asarray(self._raw(node.inputs[1])).reshape(-1))
            return [self._struct(ins[0], lambda a: np.reshape(np.broadcast_to(a, _shape_of(ins[0])), shape), lambda A: np.reshape(A, shape + (A.shape[-1],)))]
        if isinstance(op, Sum):
            return [self._sum(ins[0], op.axis, m)]
        if isinstance(op, (Max, Min)) or (isinstance(op, CAReduce) and isinstance(op.scalar_op, (ps.ScalarMaximum, ps.ScalarMinimum))):
            axis = op.axis
            red = np.max if isinstance(op.scalar_op, ps.ScalarMaximum) else np.min
            return [_Val.interval(red(ins[0].lo, axis=axis), red(ins[0].hi, axis=axis))]
        if isinstance(op, Dot) or (type(op).__name__ == "Blockwise" and isinstance(getattr(op, "core_op", None), Dot)):
            return [self._dot(ins[0], ins[1], node, m)]
        raise UnsupportedExpression(f"the operation {type(op).__name__}")

    def _struct(self, v: _Val, f, fA) -> _Val:
        """A structural operation (indexing, broadcasting, reshaping) applied to every part."""
        shape = _shape_of(v)
        lo, hi = f(np.broadcast_to(v.lo, shape)), f(np.broadcast_to(v.hi, shape))
        if v.affine:
            c = f(np.broadcast_to(v.c, shape))
            e = f(np.broadcast_to(v.e, shape))
            A = fA(_broadcast_A(v, shape, self._m))
            return _Val(np.asarray(lo), np.asarray(hi), np.asarray(c), np.asarray(A), np.asarray(e))
        return _Val.interval(lo, hi)

    def _inc_subtensor(self, node, ins, m) -> _Val:
        """``x[idx] = y`` (``set_subtensor``) or ``x[idx] += y`` at public indices: a packed
        Cholesky factor unpacked into its matrix (``LKJCholeskyCov``), a vector assembled in place.
        Set: the indexed elements take ``y``'s bounds and affine form. Increment: ``x[idx] + y``
        there (each index once; repeated indices would add ``y`` several times and are refused)."""
        op = node.op
        if any(i in self.depends or i in self.rv_of for i in node.inputs[2:]):
            raise UnsupportedExpression("an index that depends on the parameters")
        raw = [self._raw(i) for i in node.inputs[2:]]
        if isinstance(op, IncSubtensor):
            idx = indices_from_subtensor(raw, op.idx_list)
            idx = idx if isinstance(idx, tuple) else (idx,)
        elif isinstance(op, AdvancedIncSubtensor1):
            idx = (np.asarray(raw[0], dtype=int),)
        else:
            idx = tuple(_as_index(r) for r in raw)
        x, y = ins[0], ins[1]
        shape = _shape_of(x)
        probe = np.zeros(shape, dtype=int)
        np.add.at(probe, idx, 1)
        if not op.set_instead_of_inc and probe.max(initial=0) > 1:
            raise UnsupportedExpression("an increment at repeated indices")
        target_shape = np.zeros(shape)[idx].shape

        def put(base, value):
            out = np.array(np.broadcast_to(base, shape), dtype=float)
            value = np.broadcast_to(value, target_shape)
            if op.set_instead_of_inc:
                out[idx] = value
            else:
                out[idx] = out[idx] + value
            return out

        if not op.set_instead_of_inc:
            # x[idx] + y, elementwise over the indexed part: add y's ranges there (exact on affine forms)
            y_full = self._inc_subtensor_zero_like(y, shape, idx, target_shape, m)
            return _combine_linear([x, y_full], [1.0, 1.0], m)
        lo, hi = put(x.lo, y.lo), put(x.hi, y.hi)
        if x.affine and y.affine:
            c, e = put(x.c, y.c), put(x.e, y.e)
            A = np.array(_broadcast_A(x, shape, m), dtype=float)
            A[idx] = np.broadcast_to(_broadcast_A(y, _shape_of(y), m), target_shape + (m,))
            return _Val(lo, hi, c, A, e)
        return _Val.interval(lo, hi)

    def _inc_subtensor_zero_like(self, y: _Val, shape, idx, target_shape, m) -> _Val:
        """A value of ``shape`` that is 0 everywhere and ``y`` at ``idx``."""

        def put(value):
            out = np.zeros(shape)
            out[idx] = np.broadcast_to(value, target_shape)
            return out

        lo, hi = put(y.lo), put(y.hi)
        if y.affine:
            A = np.zeros(tuple(shape) + (m,))
            A[idx] = np.broadcast_to(_broadcast_A(y, _shape_of(y), m), target_shape + (m,))
            return _Val(lo, hi, put(y.c), A, put(y.e))
        return _Val.interval(lo, hi)

    def _join(self, parts, axis, m):
        shapes = [_shape_of(p) for p in parts]
        lo = np.concatenate([np.broadcast_to(p.lo, s) for p, s in zip(parts, shapes)], axis=axis)
        hi = np.concatenate([np.broadcast_to(p.hi, s) for p, s in zip(parts, shapes)], axis=axis)
        if all(p.affine for p in parts):
            c = np.concatenate([np.broadcast_to(p.c, s) for p, s in zip(parts, shapes)], axis=axis)
            e = np.concatenate([np.broadcast_to(p.e, s) for p, s in zip(parts, shapes)], axis=axis)
            ax = axis if axis >= 0 else axis - 1
            A = np.concatenate([_broadcast_A(p, s, m) for p, s in zip(parts, shapes)], axis=ax)
            return _Val(lo, hi, c, A, e)
        return _Val.interval(lo, hi)

    def _sum(self, v: _Val, axis, m):
        shape = _shape_of(v)
        axis = tuple(range(len(shape))) if axis is None else tuple(axis)
        lo = np.sum(np.broadcast_to(v.lo, shape), axis=axis)
        hi = np.sum(np.broadcast_to(v.hi, shape), axis=axis)
        if v.affine:
            c = np.sum(np.broadcast_to(v.c, shape), axis=axis)
            e = np.sum(np.broadcast_to(v.e, shape), axis=axis)
            A = np.sum(_broadcast_A(v, shape, m), axis=axis)
            return _Val.from_affine(c, A, e, lo, hi)
        return _Val.interval(lo, hi)

    def _dot(self, x: _Val, y: _Val, node, m):
        xc = node.inputs[0] not in self.depends and node.inputs[0] not in self.rv_of
        yc = node.inputs[1] not in self.depends and node.inputs[1] not in self.rv_of
        if xc or yc:
            M = self._raw(node.inputs[0] if xc else node.inputs[1]).astype(float)
            v = y if xc else x
            shape = _shape_of(v)

            def lin(a):
                return M @ a if xc else a @ M

            P, N = np.maximum(M, 0.0), np.minimum(M, 0.0)
            lo_v, hi_v = np.broadcast_to(v.lo, shape), np.broadcast_to(v.hi, shape)
            with np.errstate(invalid="ignore"):  # inf - inf: NaN, widened in __call__
                lo = _matmul_ends(P, lo_v, xc) + _matmul_ends(N, hi_v, xc)
                hi = _matmul_ends(P, hi_v, xc) + _matmul_ends(N, lo_v, xc)
            if v.affine:
                c = lin(np.broadcast_to(v.c, shape))
                e = (np.abs(M) @ np.broadcast_to(v.e, shape)) if xc else (np.broadcast_to(v.e, shape) @ np.abs(M))
                A = _broadcast_A(v, shape, m)
                A = np.einsum("...ij,j...s->i...s", M, A) if (xc and A.ndim > 2) else (
                    np.tensordot(M, A, axes=([M.ndim - 1], [0])) if xc else np.moveaxis(np.tensordot(A, M, axes=([A.ndim - 2], [0])), -2, -1)
                )
                return _Val.from_affine(c, A, e, lo, hi)
            return _Val.interval(lo, hi)
        return self._dot_free(x, y, m)

    def _dot_free(self, x: _Val, y: _Val, m) -> _Val:
        """``x @ y`` where both depend on the parameters (``chol @ z`` in a non-centred
        hierarchy): elementwise interval / affine products, summed over the inner axis. Sound
        (each product is), and exact on the interval part when one factor is a point."""
        sx, sy = _shape_of(x), _shape_of(y)
        if len(sx) not in (1, 2) or len(sy) not in (1, 2):
            raise UnsupportedExpression("a product of tensors of more than two axes that both depend on the parameters")
        # (i, k) @ (k, j): broadcast to (i, k, j) and sum over k; a vector gets a unit axis
        xv = x if len(sx) == 2 else self._struct(x, lambda a: np.reshape(np.broadcast_to(a, sx), (1,) + sx), lambda A: np.reshape(A, (1,) + sx + (A.shape[-1],)))
        yv = y if len(sy) == 2 else self._struct(y, lambda a: np.reshape(np.broadcast_to(a, sy), sy + (1,)), lambda A: np.reshape(A, sy + (1, A.shape[-1])))
        n_i, n_k = _shape_of(xv)
        n_k2, n_j = _shape_of(yv)
        if n_k != n_k2:
            raise UnsupportedExpression("a matrix product of mismatched shapes")
        x3 = self._struct(xv, lambda a: np.broadcast_to(a, (n_i, n_k))[:, :, None], lambda A: _broadcast_A_shape(A, (n_i, n_k))[:, :, None, :])
        y3 = self._struct(yv, lambda a: np.broadcast_to(a, (n_k, n_j))[None, :, :], lambda A: _broadcast_A_shape(A, (n_k, n_j))[None, :, :, :])
        out = self._sum(_product(x3, y3, m), (1,), m)
        if len(sx) == 1 and len(sy) == 1:
            return self._struct(out, lambda a: np.reshape(a, ()), lambda A: np.reshape(A, (A.shape[-1],)))
        if len(sx) == 1:
            return self._struct(out, lambda a: np.reshape(a, (n_j,)), lambda A: np.reshape(A, (n_j, A.shape[-1])))
        if len(sy) == 1:
            return self._struct(out, lambda a: np.reshape(a, (n_i,)), lambda A: np.reshape(A, (n_i, A.shape[-1])))
        return out

    def _elemwise(self, sop, ins, node, m) -> _Val:
        t = type(sop)
        if t in (ps.Identity,) or isinstance(sop, ps.Cast):
            return ins[0]
        if t is ps.Add:
            return _combine_linear(ins, [1.0] * len(ins), m)
        if t is ps.Sub:
            return _combine_linear(ins, [1.0, -1.0], m)
        if t is ps.Neg:
            return _combine_linear(ins, [-1.0], m)
        if t is ps.Mul:
            out = ins[0]
            for i, (v, var) in enumerate(zip(ins[1:], node.inputs[1:])):
                const_v = var not in self.depends and var not in self.rv_of
                const_out = i == 0 and node.inputs[0] not in self.depends and node.inputs[0] not in self.rv_of
                if const_v:
                    out = _combine_linear([out], [self._raw(var).astype(float)], m)
                elif const_out:
                    out = _combine_linear([v], [self._raw(node.inputs[0]).astype(float)], m)
                else:
                    out = _product(out, v, m)
            return out
        if t is ps.TrueDiv:
            x, y = ins
            if node.inputs[1] not in self.depends and node.inputs[1] not in self.rv_of:
                return _combine_linear([x], [1.0 / self._raw(node.inputs[1]).astype(float)], m)
            return _product(x, _reciprocal(y), m)
        if t is ps.Reciprocal:
            return _reciprocal(ins[0])
        if t is ps.Sqr:
            return _square(ins[0])
        if t is ps.Abs:
            return _abs(ins[0])
        if t is ps.Pow:
            if node.inputs[1] in self.depends or node.inputs[1] in self.rv_of:
                raise UnsupportedExpression("a power whose exponent depends on the parameters")
            return _pow(ins[0], self._raw(node.inputs[1]))
        if t in _INCREASING:
            return _monotone(_INCREASING[t], ins[0])
        if t is ps.Maximum:
            return _Val.interval(np.maximum(ins[0].lo, ins[1].lo), np.maximum(ins[0].hi, ins[1].hi))
        if t is ps.Minimum:
            return _Val.interval(np.minimum(ins[0].lo, ins[1].lo), np.minimum(ins[0].hi, ins[1].hi))
        if t is ps.Second:
            shape = np.broadcast_shapes(_shape_of(ins[0]), _shape_of(ins[1]))
            return self._struct(ins[1], lambda a: np.broadcast_to(a, shape), lambda A: np.broadcast_to(A, tuple(shape) + (A.shape[-1],)))
        if t is ps.Switch:
            cond, a, b = ins
            if node.inputs[0] not in self.depends and node.inputs[0] not in self.rv_of:
                mask = self._raw(node.inputs[0]).astype(bool)
                return _Val.interval(np.where(mask, a.lo, b.lo), np.where(mask, a.hi, b.hi))
            return _Val.interval(np.minimum(a.lo, b.lo), np.maximum(a.hi, b.hi))
        if isinstance(sop, ps.Composite):
            raise UnsupportedExpression("a fused (Composite) operation")
        raise UnsupportedExpression(f"the function {t.__name__}")


def _as_index(raw):
    if isinstance(raw, slice):
        return raw
    arr = np.asarray(raw)
    if arr.dtype == object:  # a slice stored as a constant
        return arr.item()
    return arr.astype(int) if arr.dtype.kind in "iub" else arr


def _broadcast_A_shape(A: np.ndarray, shape) -> np.ndarray:
    return np.broadcast_to(A, tuple(shape) + (A.shape[-1],))


def _dimshuffle(a: np.ndarray, op: DimShuffle, trailing: int = 0) -> np.ndarray:
    """Apply ``op`` to the leading ``op.input_ndim`` axes of ``a`` (``trailing`` axes follow)."""
    a = np.asarray(a)
    lead = a.ndim - trailing
    if lead != op.input_ndim:  # a broadcast value stored with fewer axes
        a = np.reshape(a, (1,) * (op.input_ndim - lead) + a.shape)
    drop = tuple(op.drop)
    if drop:
        a = np.squeeze(a, axis=drop)
    kept = [i for i in range(op.input_ndim) if i not in drop]
    order = [kept.index(i) for i in op.new_order if i != "x"]
    n_kept = len(kept)
    a = np.transpose(a, order + list(range(n_kept, n_kept + trailing)))
    for pos, i in enumerate(op.new_order):
        if i == "x":
            a = np.expand_dims(a, pos)
    return a


def _dimshuffle_A(A: np.ndarray, op: DimShuffle) -> np.ndarray:
    """:func:`_dimshuffle` of the leading axes of a coefficient array (symbols last)."""
    return _dimshuffle(A, op, trailing=1)
