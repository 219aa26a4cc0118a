"""Linear predictors as users write them: a parameter as a function of one record.

A GLM's parameter is built from the record's private fields with ``+ - *``, division by
parameters or public constants, ``pt.stack`` / ``concatenate`` of columns, ``@``, indexing by
integer containers, casts and ``pm.Deterministic``. :func:`analyse` reads such an expression into
a :class:`Predictor`:

.. math::  \\eta(\\theta, x) = o(\\theta) + \\sum_{c} \\langle a_c(\\theta), x_c \\rangle
           + \\sum_b B_b(\\theta, x)

* ``o(theta)``: the *offset*, reading parameters and public data only;
* one **linear term** per private container ``c``: the record's fields ``x_c`` (a scalar, or a
  row of a matrix container) with coefficients ``a_c(theta)``. Terms on the same container are
  merged (``b1 * X[:, 0] + b2 * X[:, 1]`` is one term with coefficients ``(b1, b2)``);
* **blocks** ``B_b``: everything else, each kept as an interval over the record that depends on
  ``theta`` -- a table indexed by a private label (``alpha[county]``: the hull of the rows the
  label's domain allows) and products of two private terms (``x1 * x2``: interval product).

**Range over one record** (:meth:`Predictor.bounds`), at fixed ``theta``. A linear term on a
container with a ``Ball(R)`` row domain ranges over ``+- R ||a_c||_2``; on a ``Box`` or an
elementwise domain over ``<a_c, centre> +- sum_j |a_cj| halfwidth_j`` -- both exact, every value
attained. The fields of different containers vary independently (a record may hold any value
of each in its domain), so the range of a sum of terms that read *disjoint* containers is the
sum of their ranges, exactly. A block's interval is exact when it reads one container (the hull
of an indexed table is attained by a label) or is a product of exact intervals of disjoint
containers (the extremes of a bilinear function over a box are at its corners, which are
attained). Terms that share a container are added as intervals: sound, not tight --
:attr:`Predictor.exact` is False and :attr:`Predictor.inexact_reason` says why; the certificate
reports it and the audits measure how loose it is.

Record alignment. Element ``i`` of the predictor must read row ``i`` of every container and no
other row: operations that move rows (``y[1:]``, ``X[perm]``, a sum over records) are refused.
A lagged copy of a time series is exactly such a move (:func:`analyse` names it); ``pm.AR`` is
supported as its own factor.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Mapping

import numpy as np
import pytensor.scalar as ps
import pytensor.tensor as pt
from pytensor.compile.ops import DeepCopyOp, ViewOp
from pytensor.graph.basic import Variable
from pytensor.tensor.basic import Join, MakeVector
from pytensor.tensor.blockwise import Blockwise
from pytensor.tensor.elemwise import CAReduce, DimShuffle, Elemwise
from pytensor.tensor.math import Dot, Sum
from pytensor.tensor.shape import SpecifyShape
from pytensor.tensor.subtensor import (
    AdvancedSubtensor,
    AdvancedSubtensor1,
    Subtensor,
    indices_from_subtensor,
)

from pymc_dp.domains import Ball, Box, Domain, Integers, Interval
from pymc_dp.exceptions import UnsupportedFactorError

__all__ = ["Predictor", "LinearTerm", "Block", "analyse", "strip_identity", "NotAPredictor", "value_ancestors"]


class NotAPredictor(UnsupportedFactorError):
    """The expression reads private data in a way the predictor analysis does not cover."""


# --------------------------------------------------------------------------- reading values
def value_ancestors(outputs, blockers=()) -> set:
    """The variables whose *values* ``outputs`` depend on: ancestors, except through the shape
    operations (``x.shape``, ``x.shape[0]``), whose result depends on ``x``'s shape only. The
    shapes of the private data are public (the certificate depends on them), their values are not.
    ``second(x, c)`` (``pt.zeros_like``, ``ones_like``, ``full_like``: ``c`` broadcast to ``x``'s
    shape) reads only ``c``'s values; ``Alloc(c, *shape)`` reaches ``x`` through ``x.shape``.
    """
    from pytensor.tensor.shape import Shape, Shape_i

    seen: set = set()
    stack = list(outputs)
    blockers = set(blockers)
    while stack:
        var = stack.pop()
        if var in seen:
            continue
        seen.add(var)
        if var in blockers or var.owner is None:
            continue
        if isinstance(var.owner.op, (Shape, Shape_i)):
            continue
        if isinstance(var.owner.op, Elemwise) and isinstance(var.owner.op.scalar_op, ps.Second):
            stack.extend(var.owner.inputs[1:])
            continue
        stack.extend(var.owner.inputs)
    return seen


# --------------------------------------------------------------------------- identity ops
_IDENTITY_NAMES = ("OutputGuard", "ModelNamed")


def strip_identity(var: Variable) -> Variable:
    """``var`` without the operations that leave values unchanged: ``pm.Deterministic``'s
    ``ViewOp``, ``DeepCopyOp``, ``SpecifyShape``, identity and cast ``Elemwise``."""
    while var.owner is not None:
        op = var.owner.op
        if isinstance(op, (ViewOp, DeepCopyOp, SpecifyShape)) or type(op).__name__ in _IDENTITY_NAMES:
            var = var.owner.inputs[0]
        elif isinstance(op, Elemwise) and isinstance(op.scalar_op, (ps.Identity, ps.Cast)):
            var = var.owner.inputs[0]
        else:
            break
    return var


# --------------------------------------------------------------------------- the representation
@dataclass(frozen=True)
class LinearTerm:
    """``<coef, x_container>`` per predictor element: ``coef`` has the predictor's axes followed
    by the container's record axes (``()`` for a vector container, ``(d,)`` for rows)."""

    container: str
    coef: Variable
    rec_ndim: int


@dataclass(frozen=True)
class Block:
    """A part of the predictor given by its interval over the record, ``[lo(theta), hi(theta)]``."""

    containers: frozenset[str]
    lo: Variable
    hi: Variable
    exact: bool = True
    what: str = ""


@dataclass(frozen=True)
class Predictor:
    """``offset + sum of linear terms + sum of blocks``; see the module docstring.

    ``ndim`` is the number of the predictor's axes and ``rax`` the position of the record axis
    among them (element ``[..., i, ...]`` with ``i`` at ``rax`` reads record ``i``).
    """

    ndim: int
    rax: int
    offset: Variable | None = None
    linear: tuple[LinearTerm, ...] = ()
    blocks: tuple[Block, ...] = ()

    # ---------------------------------------------------------------- reading
    @property
    def containers(self) -> list[str]:
        found = {t.container for t in self.linear}
        for b in self.blocks:
            found |= set(b.containers)
        return sorted(found)

    @property
    def inexact_reason(self) -> str | None:
        """Why the per-record range is a bound rather than exact (None when exact)."""
        seen: dict[str, int] = {}
        for t in self.linear:
            seen[t.container] = seen.get(t.container, 0) + 1
        for b in self.blocks:
            if not b.exact:
                return b.what or "an interval of terms that share a container"
            for c in b.containers:
                seen[c] = seen.get(c, 0) + 1
        shared = sorted(c for c, k in seen.items() if k > 1)
        if shared:
            return f"container(s) {shared} enter more than one term, whose ranges are added"
        return None

    @property
    def exact(self) -> bool:
        return self.inexact_reason is None

    # ---------------------------------------------------------------- per-record range
    def centre_and_half(self, domains: Mapping[str, Domain]) -> tuple[Variable, Variable]:
        """``(o, h)``: the linear part ranges over ``[o - h, o + h]`` (offset included)."""
        o = self.offset if self.offset is not None else pt.constant(0.0, dtype="float64")
        h = pt.constant(0.0, dtype="float64")
        for t in self.linear:
            c, hw = _linear_range(t, domains[t.container])
            o = o + c
            h = h + hw
        return o, h

    def bounds(self, domains: Mapping[str, Domain]) -> tuple[Variable, Variable]:
        """Elementwise ``(lo, hi)`` of the predictor over one record, as expressions of theta."""
        o, h = self.centre_and_half(domains)
        lo, hi = o - h, o + h
        for b in self.blocks:
            lo, hi = lo + b.lo, hi + b.hi
        return lo, hi

    def region_parts(self, domains: Mapping[str, Domain]) -> dict[str, Variable]:
        """The expressions whose ranges over a box give the region's window: the offset ``o``,
        the half-width ``h`` and, when there are blocks, the window's own ends ``lo``, ``hi``
        (then the window does not slide at a fixed width)."""
        o, h = self.centre_and_half(domains)
        parts = {"o": o, "h": h}
        if self.blocks:
            lo, hi = self.bounds(domains)
            parts.update(lo=lo, hi=hi)
        return parts

    def slide_parts(self, domains: Mapping[str, Domain]) -> list[tuple[Variable, np.ndarray | float, tuple, bool]] | None:
        """What bounds the width of the predictor over a region at one fixed record: per linear
        term ``(coef, half-widths, record axes, ball)``; None when the predictor has blocks (a
        block is known by its interval over the records only, so its width at a fixed record is
        not).

        Why: at a fixed record ``x``, ``eta(x, theta) = o(theta) + sum_c <a_c(theta), x_c - centre_c>``
        (``o`` the offset plus ``<a_c, centre_c>``, :meth:`centre_and_half`), so its range over a
        region is at most ``width(o) + sum_c sum_j width(a_cj) halfwidth_cj`` for a box domain, and
        ``width(o) + R ||width(a_c)||_2`` for a ``Ball(R)`` (``|<a - a', d>| <= ||a - a'||_2 R``), where
        ``width(.)`` is the range over the region of each expression (``hi - lo`` of a sound
        interval: an upper bound)."""
        if self.blocks:
            return None
        parts = []
        for t in self.linear:
            domain = domains[t.container]
            axes = tuple(range(t.coef.ndim - t.rec_ndim, t.coef.ndim))
            if isinstance(domain, Ball):
                parts.append((t.coef, float(domain.radius), axes, True))
            elif isinstance(domain, Box):
                parts.append((t.coef, 0.5 * (np.asarray(domain.hi, float) - np.asarray(domain.lo, float)), axes, False))
            elif isinstance(domain, Interval):
                parts.append((t.coef, float(domain.half_width), axes, False))
            elif isinstance(domain, Integers):
                parts.append((t.coef, 0.5 * float(domain.hi - domain.lo), axes, False))
            else:  # pragma: no cover - every domain type is handled in _linear_range
                return None
        return parts

    # ---------------------------------------------------------------- arithmetic
    def padded(self, ndim: int) -> "Predictor":
        """The same predictor with ``ndim - self.ndim`` broadcast axes in front."""
        k = ndim - self.ndim
        if k <= 0:
            return self
        return self.mapped(lambda x, trailing: _pad_left(x, ndim + trailing), ndim, self.rax + k)

    def scaled(self, s: Variable) -> "Predictor":
        """``s * self`` with ``s`` reading no private data (broadcast on the predictor's axes)."""
        s = pt.as_tensor_variable(s)
        if s.ndim > self.ndim:
            raise NotAPredictor("reads private data through a product that adds axes in front of the records")
        s = _pad_left(s, self.ndim)
        offset = None if self.offset is None else self.offset * s
        linear = tuple(replace(t, coef=t.coef * _append_axes(s, t.rec_ndim)) for t in self.linear)
        blocks = tuple(_scale_block(b, s) for b in self.blocks)
        return Predictor(self.ndim, self.rax, offset, linear, blocks)

    def plus(self, other: "Predictor") -> "Predictor":
        ndim = max(self.ndim, other.ndim)
        a, b = self.padded(ndim), other.padded(ndim)
        if a.rax != b.rax:
            raise NotAPredictor("reads private data through a sum of terms whose records lie on different axes "
                                "(an outer sum pairs every record with every other)")
        if a.offset is None:
            offset = b.offset
        elif b.offset is None:
            offset = a.offset
        else:
            offset = a.offset + b.offset
        terms: dict[str, LinearTerm] = {}
        for t in a.linear + b.linear:
            if t.container in terms:
                prev = terms[t.container]
                terms[t.container] = replace(prev, coef=prev.coef + t.coef)
            else:
                terms[t.container] = t
        return Predictor(ndim, a.rax, offset, tuple(terms.values()), a.blocks + b.blocks)

    def plus_point(self, value: Variable) -> "Predictor":
        value = pt.as_tensor_variable(value)
        ndim = max(self.ndim, value.ndim)
        me = self.padded(ndim)
        value = _pad_left(value, ndim)
        offset = value if me.offset is None else me.offset + value
        return replace(me, offset=offset)

    def mapped(self, fn, ndim: int, rax: int) -> "Predictor":
        """A structural operation on the predictor's axes applied to every part: ``fn(x,
        trailing)`` maps an array whose first ``self.ndim`` axes are the predictor's, followed by
        ``trailing`` record axes (0 for the offset and the blocks)."""
        offset = None if self.offset is None else fn(_pad_left(self.offset, self.ndim), 0)
        linear = tuple(replace(t, coef=fn(_pad_left(t.coef, self.ndim + t.rec_ndim), t.rec_ndim)) for t in self.linear)
        blocks = tuple(
            replace(b, lo=fn(_pad_left(b.lo, self.ndim), 0), hi=fn(_pad_left(b.hi, self.ndim), 0)) for b in self.blocks
        )
        return Predictor(ndim, rax, offset, linear, blocks)

    def to_block(self, domains: Mapping[str, Domain], what: str = "") -> Block:
        """This predictor's range over one record as a single block."""
        lo, hi = self.bounds(domains)
        reason = self.inexact_reason
        return Block(frozenset(self.containers), _pad_left(lo, self.ndim), _pad_left(hi, self.ndim), reason is None, reason or what)


def _pad_left(x: Variable, ndim: int) -> Variable:
    x = pt.as_tensor_variable(x)
    k = ndim - x.ndim
    if k <= 0:
        return x
    return x.dimshuffle(*(["x"] * k + list(range(x.ndim))))


def _append_axes(x: Variable, k: int) -> Variable:
    if k == 0:
        return x
    return x.dimshuffle(*(list(range(x.ndim)) + ["x"] * k))


def _scale_block(b: Block, s: Variable) -> Block:
    lo, hi = b.lo * s, b.hi * s
    return replace(b, lo=pt.minimum(lo, hi), hi=pt.maximum(lo, hi))


def _linear_range(t: LinearTerm, domain: Domain) -> tuple[Variable, Variable]:
    """Centre and half-width of ``<coef, x>`` over the container's record domain (exact)."""
    coef = t.coef
    axes = tuple(range(coef.ndim - t.rec_ndim, coef.ndim))
    if isinstance(domain, Ball):
        if t.rec_ndim != 1:
            raise NotAPredictor(f"{t.container!r}: a Ball domain needs the container's rows on the last axis")
        half = domain.radius * pt.sqrt(pt.sum(pt.square(coef), axis=axes))
        return pt.zeros_like(half), half
    if isinstance(domain, Box):
        lo = pt.as_tensor_variable(np.asarray(domain.lo, dtype="float64"))
        hi = pt.as_tensor_variable(np.asarray(domain.hi, dtype="float64"))
        centre, halfw = 0.5 * (lo + hi), 0.5 * (hi - lo)
    elif isinstance(domain, Interval):
        centre = pt.constant(domain.center, dtype="float64")
        halfw = pt.constant(domain.half_width, dtype="float64")
    elif isinstance(domain, Integers):
        centre = pt.constant(0.5 * (domain.lo + domain.hi), dtype="float64")
        halfw = pt.constant(0.5 * (domain.hi - domain.lo), dtype="float64")
    else:  # pragma: no cover - every domain type is handled above
        raise NotAPredictor(f"{t.container!r}: unsupported domain {domain}")
    if axes:
        return pt.sum(coef * centre, axis=axes), pt.sum(pt.abs(coef) * halfw, axis=axes)
    return coef * centre, pt.abs(coef) * halfw


# --------------------------------------------------------------------------- the analysis
class _Reader:
    def __init__(self, private: Mapping[Variable, str], domains: Mapping[str, Domain], record_shapes: Mapping[str, tuple]):
        self.private = private
        self.domains = domains
        self.record_shapes = record_shapes

    def reads_private(self, var: Variable) -> bool:
        return any(a in self.private for a in value_ancestors([var]))

    def refuse(self, var: Variable, why: str):
        found = sorted({self.private[a] for a in value_ancestors([var]) if a in self.private})
        raise NotAPredictor(f"reads private data {found} through {why}")

    def read(self, var: Variable) -> Predictor | None:
        """The predictor of ``var``, or None when it reads no private data."""
        if not self.reads_private(var):
            return None
        var = strip_identity(var)
        if var in self.private:
            return self._container(var)
        node = var.owner
        op = node.op
        if isinstance(op, Elemwise):
            return self._elemwise(var, node)
        if isinstance(op, DimShuffle):
            return self._dimshuffle(var, node)
        if isinstance(op, Subtensor):
            return self._subtensor(var, node)
        if isinstance(op, (AdvancedSubtensor, AdvancedSubtensor1)):
            return self._advanced(var, node)
        if isinstance(op, Dot) or (isinstance(op, Blockwise) and isinstance(op.core_op, Dot)):
            return self._dot(var, node)
        if isinstance(op, (Join, MakeVector)):
            return self._join(var, node)
        if isinstance(op, Sum):
            return self._sum(var, node)
        if isinstance(op, CAReduce):
            self.refuse(var, f"a reduction ({_op_words(op)})")
        core = op.core_op if isinstance(op, Blockwise) else op
        if type(core).__module__.startswith(("pytensor.tensor.slinalg", "pytensor.tensor.nlinalg", "pytensor.tensor.linalg")):
            self.refuse(var, f"a matrix computation over the records ({_op_words(core)}), such as a Gaussian-process "
                        "covariance computed from all rows of X: every element then depends on every record, and no "
                        "per-record constant exists (give the GP public inputs)")
        self.refuse(var, f"{_op_words(op)}, which the predictor reader does not follow (write the predictor with "
                    "the operations below, or compute the feature from the data before the model with a public "
                    "rule and declare its container's domain)")

    # ---------------------------------------------------------------- leaves
    def _container(self, var) -> Predictor:
        name = self.private[var]
        domain = self.domains.get(name)
        rec_shape = tuple(self.record_shapes[name])
        rec_ndim = len(rec_shape)
        if isinstance(domain, (Ball, Box)) and rec_ndim != 1:
            self.refuse(var, f"a {type(domain).__name__} domain on a container whose records are not rows")
        if rec_ndim == 0:
            coef = pt.ones((1,), dtype="float64")
        elif rec_ndim == 1:
            (d,) = rec_shape
            coef = pt.as_tensor_variable(np.eye(d, dtype="float64")[None])
        else:
            self.refuse(var, "a container with records of more than one axis")
        # the container's value x[i, j...] is field j of record i: the predictor's axes are the
        # container's, and the coefficient of field j' at element (i, j) is [j == j']
        return Predictor(1 + rec_ndim, 0, None, (LinearTerm(name, coef, rec_ndim),), ())

    # ---------------------------------------------------------------- elementwise
    def _elemwise(self, var, node) -> Predictor:
        sop = node.op.scalar_op
        ins = node.inputs
        t = type(sop)
        if t is ps.Add:
            out = None
            points = []
            for i in ins:
                p = self.read(i)
                if p is None:
                    points.append(i)
                else:
                    out = p if out is None else out.plus(p)
            for p in points:
                out = out.plus_point(p)
            return out
        if t is ps.Sub:
            a, b = (self.read(i) for i in ins)
            right = b.scaled(pt.constant(-1.0, dtype="float64")) if b is not None else None
            if a is None:
                return right.plus_point(ins[0])
            if right is None:
                return a.plus_point(-ins[1])
            return a.plus(right)
        if t is ps.Neg:
            return self.read(ins[0]).scaled(pt.constant(-1.0, dtype="float64"))
        if t is ps.Mul:
            private, scale = [], None
            for i in ins:
                p = self.read(i)
                if p is None:
                    scale = i if scale is None else scale * i
                else:
                    private.append(p)
            if len(private) == 1:
                out = private[0]
            else:
                ndim = max(p.ndim for p in private)
                private = [p.padded(ndim) for p in private]
                if len({p.rax for p in private}) > 1:
                    self.refuse(var, "a product of terms whose records lie on different axes")
                block = None
                for p in private:
                    b = p.to_block(self.domains)
                    block = b if block is None else _block_product(block, b)
                out = Predictor(ndim, private[0].rax, None, (), (block,))
            return out.scaled(scale) if scale is not None else out
        if t is ps.TrueDiv:
            num, den = ins
            if self.reads_private(den):
                self.refuse(var, "a division by a quantity that reads private data")
            return self.read(num).scaled(1.0 / den)
        if t is ps.Sqr or (t is ps.Pow and _constant(ins[1]) == 2.0):
            p = self.read(ins[0])
            return Predictor(p.ndim, p.rax, None, (), (_block_square(p.to_block(self.domains)),))
        self.refuse(var, f"the function {_scalar_words(sop)}, which is not linear in the record (to use such a "
                    "feature, compute it from the data before the model with a public rule, enter it as its own "
                    "pm.Data container and declare that container's domain)")

    # ---------------------------------------------------------------- structure
    def _dimshuffle(self, var, node) -> Predictor:
        op = node.op
        p = self.read(node.inputs[0]).padded(op.input_ndim)
        if p.rax in op.drop or p.rax not in op.new_order:
            self.refuse(var, "a reshaping that drops the record axis")
        kept = [i for i in range(op.input_ndim) if i not in op.drop]
        new_rax = list(op.new_order).index(p.rax)

        def fn(x, trailing):
            if op.drop:
                x = x.dimshuffle(*[i for i in range(x.ndim) if i not in op.drop])
            order = ["x" if i == "x" else kept.index(i) for i in op.new_order]
            order += list(range(len(kept), len(kept) + trailing))
            return x.dimshuffle(*order)

        return p.mapped(fn, len(op.new_order), new_rax)

    def _subtensor(self, var, node) -> Predictor:
        op = node.op
        if any(self.reads_private(i) for i in node.inputs[1:]):
            self.refuse(var, "an index computed from private data")
        p = self.read(node.inputs[0]).padded(node.inputs[0].ndim)
        idx = list(indices_from_subtensor(node.inputs[1:], op.idx_list))
        idx += [slice(None)] * (p.ndim - len(idx))
        at = idx[p.rax]
        if not (isinstance(at, slice) and at.start is None and at.stop is None and at.step is None):
            self.refuse(var, "indexing that selects or shifts records (e.g. y[1:] beside y[:-1], a lagged "
                        "copy of a time series: write the series with pm.AR instead)")
        removed_before = sum(1 for i in idx[: p.rax] if not isinstance(i, slice))
        ndim = sum(1 for i in idx if isinstance(i, slice))

        def fn(x, trailing):
            return x[tuple(idx) + (slice(None),) * trailing]

        return p.mapped(fn, ndim, p.rax - removed_before)

    def _advanced(self, var, node) -> Predictor:
        table, *idx = node.inputs
        reading = [i for i in idx if self.reads_private(i)]
        if self.reads_private(table):
            if reading:
                self.refuse(var, "indexing private data by private data")
            self.refuse(var, "indexing private data by a public index (it selects or reorders records)")
        if len(reading) != 1:
            self.refuse(var, "an index computed from several private containers")
        label = strip_identity(reading[0])
        if label not in self.private:
            self.refuse(var, "an index computed from private data")
        name = self.private[label]
        domain = self.domains.get(name)
        if not isinstance(domain, Integers):
            raise NotAPredictor(
                f"uses private {name!r} as an index: declare its domain with pymc_dp.Integers(lo, hi) or pymc_dp.Binary()"
            )
        pos = idx.index(reading[0])
        if pos != 0 or label.ndim != 1:
            self.refuse(var, "an index on a table's second axis, or an index with several axes")
        rest = idx[1:]
        if any(getattr(i, "ndim", 0) > 0 and not isinstance(i, slice) for i in rest):
            self.refuse(var, "an advanced index beside a private label")
        # table[y, rest...]: the hull of the rows the label's domain allows
        rows = table[domain.lo : domain.hi + 1]
        if rest:
            rows = rows[(slice(None),) + tuple(rest)]
        lo, hi = pt.min(rows, axis=0), pt.max(rows, axis=0)
        lo, hi = _pad_left(lo, var.ndim), _pad_left(hi, var.ndim)
        return Predictor(var.ndim, 0, None, (), (Block(frozenset({name}), lo, hi, True, ""),))

    def _dot(self, var, node) -> Predictor:
        x, w = node.inputs
        if self.reads_private(w):
            self.refuse(var, "a matrix product whose right operand reads private data")
        p = self.read(x)
        if p.blocks:
            self.refuse(var, "a matrix product of an indexed or nonlinear term")
        if p.ndim < 1 or w.ndim not in (1, 2) or p.rax == p.ndim - 1:
            self.refuse(var, "a matrix product that contracts the record axis")
        lead = p.ndim - 1
        ndim = lead + (w.ndim - 1)

        def fn(v, trailing):
            out = pt.tensordot(v, w, axes=[[lead], [0]])  # lead axes, trailing axes, w's rest
            if w.ndim == 2 and trailing:
                order = list(range(lead)) + [lead + trailing] + list(range(lead, lead + trailing))
                out = out.dimshuffle(*order)
            return out

        return p.mapped(fn, ndim, p.rax)

    def _join(self, var, node) -> Predictor:
        if isinstance(node.op, MakeVector):
            self.refuse(var, "a vector built from scalars that read private data")
        axis_var, *parts = node.inputs
        axis = _constant(axis_var)
        if axis is None:
            self.refuse(var, "a concatenation along a computed axis")
        ndim = var.ndim
        axis = int(axis) % ndim
        preds = [self.read(q) for q in parts]
        raxes = {q.padded(ndim).rax for q in preds if q is not None}
        if len(raxes) != 1:
            self.refuse(var, "a concatenation of terms whose records lie on different axes")
        (rax,) = raxes
        if axis == rax:
            self.refuse(var, "a concatenation along the record axis")
        shapes = [self._static_shape(q) for q in parts]
        full = tuple(max(s[k] for s in shapes) if k != axis else None for k in range(ndim))

        def part_shape(s):
            return tuple(s[k] if k == axis else full[k] for k in range(ndim))

        containers = sorted({c for q in preds if q is not None for c in q.containers})
        rec = {}
        for q in preds:
            for t in (q.linear if q is not None else ()):
                rec[t.container] = t.rec_ndim
        offsets, blo, bhi = [], [], []
        coefs: dict[str, list] = {c: [] for c in rec}
        exact, bcont = True, set()
        any_blocks = any(q is not None and q.blocks for q in preds)
        for part, q, s in zip(parts, preds, shapes):
            shape = part_shape(s)
            zero = pt.zeros(shape, dtype="float64")
            if q is None:
                offsets.append(_pad_left(part, ndim) + zero)
                for c in rec:
                    coefs[c].append(pt.zeros(shape + tuple(self.record_shapes[c]), dtype="float64"))
                blo.append(zero)
                bhi.append(zero)
                continue
            q = q.padded(ndim)
            offsets.append((q.offset if q.offset is not None else 0.0) + zero)
            terms = {t.container: t for t in q.linear}
            for c in rec:
                target = shape + tuple(self.record_shapes[c])
                coefs[c].append(pt.broadcast_to(terms[c].coef, target) if c in terms else pt.zeros(target, dtype="float64"))
            lo = hi = zero
            if len(q.blocks) > 1:
                exact = False
            for b in q.blocks:
                lo, hi = lo + b.lo, hi + b.hi
                exact &= b.exact
                bcont |= set(b.containers)
            blo.append(lo)
            bhi.append(hi)
        offset = pt.concatenate(offsets, axis=axis)
        linear = tuple(LinearTerm(c, pt.concatenate(coefs[c], axis=axis), rec[c]) for c in rec)
        blocks = ()
        if any_blocks:
            blocks = (Block(frozenset(bcont), pt.concatenate(blo, axis=axis), pt.concatenate(bhi, axis=axis), exact,
                            "" if exact else "a concatenation of several interval terms"),)
        del containers
        return Predictor(ndim, rax, offset, linear, blocks)

    def _static_shape(self, var) -> tuple[int, ...]:
        """The shape of ``var``: the data's shapes are public, and so are shapes computed from them."""
        import pytensor

        shape = tuple(var.type.shape)
        if all(s is not None for s in shape):
            return tuple(int(s) for s in shape)
        return tuple(int(s) for s in pytensor.function([], var.shape, mode="FAST_COMPILE", on_unused_input="ignore")())

    def _sum(self, var, node) -> Predictor:
        op = node.op
        p = self.read(node.inputs[0]).padded(node.inputs[0].ndim)
        axes = tuple(range(p.ndim)) if op.axis is None else tuple(a % p.ndim for a in op.axis)
        if p.rax in axes:
            self.refuse(var, "a sum over records (an aggregate reads many rows at once)")
        new_rax = p.rax - sum(1 for a in axes if a < p.rax)
        summed = Predictor(p.ndim, p.rax, p.offset, p.linear, ())
        out = summed.mapped(lambda x, trailing: pt.sum(x, axis=axes), p.ndim - len(axes), new_rax)
        if p.blocks:
            lo = sum(b.lo for b in p.blocks)
            hi = sum(b.hi for b in p.blocks)
            cont = frozenset().union(*(b.containers for b in p.blocks))
            block = Block(cont, pt.sum(lo, axis=axes), pt.sum(hi, axis=axes), False,
                          "a sum of interval terms over a predictor axis")
            out = replace(out, blocks=(block,))
        return out


def _block_product(a: Block, b: Block) -> Block:
    ends = [a.lo * b.lo, a.lo * b.hi, a.hi * b.lo, a.hi * b.hi]
    lo = pt.minimum(pt.minimum(ends[0], ends[1]), pt.minimum(ends[2], ends[3]))
    hi = pt.maximum(pt.maximum(ends[0], ends[1]), pt.maximum(ends[2], ends[3]))
    exact = a.exact and b.exact and not (a.containers & b.containers)
    what = "" if exact else "a product of terms that share a container (interval product)"
    return Block(a.containers | b.containers, lo, hi, exact, what)


def _block_square(b: Block) -> Block:
    lo2, hi2 = pt.square(b.lo), pt.square(b.hi)
    straddles = pt.and_(pt.le(b.lo, 0.0), pt.ge(b.hi, 0.0))
    lo = pt.switch(straddles, 0.0, pt.minimum(lo2, hi2))
    return Block(b.containers, lo, pt.maximum(lo2, hi2), b.exact, b.what)


def _constant(var) -> float | None:
    """The value of a scalar constant (seen through casts and broadcasting), else None."""
    from pytensor.tensor.basic import get_underlying_scalar_constant_value
    from pytensor.tensor.exceptions import NotScalarConstantError

    try:
        return float(get_underlying_scalar_constant_value(strip_identity(var)))
    except (NotScalarConstantError, TypeError, ValueError):
        return None


def _scalar_words(sop) -> str:
    name = type(sop).__name__
    return {"Exp": "exp", "Log": "log", "Sigmoid": "sigmoid (invlogit)", "Softplus": "softplus", "Pow": "a power",
            "Abs": "abs", "Maximum": "maximum", "Minimum": "minimum", "Switch": "switch (where)", "Tanh": "tanh",
            "Sqrt": "sqrt"}.get(name, name.lower())


def _op_words(op) -> str:
    name = type(op).__name__
    words = {
        "Softmax": "softmax",
        "CumOp": "a cumulative sum",
        "Reshape": "a reshape",
        "Alloc": "a broadcast",
        "Max": "a maximum over elements",
        "Min": "a minimum over elements",
        "Scan": "a loop (scan)",
    }
    return words.get(name, f"the operation {name}")


def analyse(
    var: Variable,
    private: Mapping[Variable, str],
    domains: Mapping[str, Domain],
    record_shapes: Mapping[str, tuple],
) -> Predictor | None:
    """Read ``var`` as a :class:`Predictor` of one record (None: it reads no private data).

    Raises
    ------
    NotAPredictor
        The expression reads private data in a way that is not record-aligned and built from the
        supported operations (the message says which operation).
    """
    return _Reader(private, domains, record_shapes).read(var)
