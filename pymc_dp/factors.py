"""Read a PyMC model as a factor graph with data dependencies.

Every observed RV is a likelihood *factor*. For each factor we find which private ``pm.Data``
containers it reads, as its observed value or inside its parameters, and in what *form* each
parameter reads them. Only forms that read one record at a time are accepted:

* :class:`PointForm` -- the parameter reads no private data;
* :class:`AffineForm` -- ``X @ w + offset`` with ``X`` a private matrix whose rows lie in a
  :class:`~pymc_dp.Ball` or :class:`~pymc_dp.Box`;
* :class:`IndexForm` -- ``table[y]`` with ``y`` a private integer container (naive Bayes);
* :class:`LinkForm` -- a monotone elementwise link (``sigmoid``, ``exp``) of one of the above.

Anything else that reads private data -- an aggregate over rows such as ``X.mean()``, private
data used as a shape, an unknown Op -- is refused with :class:`UnsupportedFactorError`. The
user's model is only read, never changed.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pytensor.scalar as ps
import pytensor.tensor as pt
from pytensor.graph.basic import Variable
from pytensor.graph.traversal import ancestors
from pytensor.tensor.blockwise import Blockwise
from pytensor.tensor.elemwise import CAReduce, DimShuffle, Elemwise
from pytensor.tensor.math import Dot
from pytensor.tensor.subtensor import AdvancedSubtensor, AdvancedSubtensor1

from pymc_dp.domains import Ball, Box, Domain, Integers
from pymc_dp.exceptions import PrivacyError, UnsupportedFactorError
from pymc_dp.rules import PT, Bounds, log_density_range, rule_info
from pymc_dp.rules.base import RuleInfo

__all__ = [
    "Factor",
    "PointForm",
    "AffineForm",
    "IndexForm",
    "LinkForm",
    "find_factors",
    "private_ancestors",
]


# --------------------------------------------------------------------------- parameter forms
@dataclass(frozen=True)
class PointForm:
    """A parameter that reads no private data (it may read free RVs and public data)."""

    expr: Variable

    def bounds(self, domains, xp=PT, hull=None):
        return Bounds.point(self.expr)


@dataclass(frozen=True)
class AffineForm:
    """``X @ weights + offset``: ``X`` a private matrix with a row domain.

    For a Ball(R) row, ``w . x`` ranges over ``[-R ||w||_2, R ||w||_2]``; for a Box row over
    ``[sum min(w lo, w hi), sum max(w lo, w hi)]``. Both ranges are exact and record-independent.
    """

    container: str
    weights: Variable
    offset: Variable | None = None

    def bounds(self, domains, xp=PT, hull=None):
        domain = domains[self.container]
        w = self.weights
        if isinstance(domain, Ball):
            r = domain.radius * pt.sqrt(pt.sum(pt.square(w)))
            lo, hi = -r, r
        elif isinstance(domain, Box):
            lo_x = pt.as_tensor_variable(np.asarray(domain.lo, dtype="float64"))
            hi_x = pt.as_tensor_variable(np.asarray(domain.hi, dtype="float64"))
            lo = pt.sum(pt.minimum(w * lo_x, w * hi_x))
            hi = pt.sum(pt.maximum(w * lo_x, w * hi_x))
        else:  # pragma: no cover - checked in analysis
            raise AssertionError(domain)
        if self.offset is not None:
            lo, hi = lo + self.offset, hi + self.offset
        return Bounds(lo, hi)


@dataclass(frozen=True)
class IndexForm:
    """``table[y]``: row ``y`` (a private integer label) of a table that reads no private data.

    For one record the parameter is one of the rows ``table[lo..hi]`` (the label's domain), so
    its elementwise range is the hull ``[min_c table[c], max_c table[c]]``.
    """

    container: str
    table: Variable

    def bounds(self, domains, xp=PT, hull=None):
        if hull is not None and self.table in hull:
            lo, hi = hull[self.table]
            return Bounds(lo, hi)
        dom = domains[self.container]
        rows = self.table[dom.lo : dom.hi + 1]
        return Bounds(pt.min(rows, axis=0), pt.max(rows, axis=0))


_MONOTONE_LINKS = {
    ps.Sigmoid: "sigmoid",
    ps.Exp: "exp",
    ps.Log: "log",
    ps.Softplus: "softplus",
    ps.Tanh: "tanh",
}


@dataclass(frozen=True)
class LinkForm:
    """An increasing elementwise link of a private-reading form."""

    link: str
    inner: Any
    op: Any = field(compare=False, default=None)

    def bounds(self, domains, xp=PT, hull=None):
        b = self.inner.bounds(domains, xp, hull)
        fn = getattr(pt, self.link)
        return Bounds(fn(b.lo), fn(b.hi))


# --------------------------------------------------------------------------- the factor
@dataclass
class Factor:
    """One observed RV of the model, with what it reads."""

    name: str
    rv: Variable
    info: RuleInfo | None
    #: private containers read, in model order
    reads: tuple[str, ...]
    #: the private container that is the observed value (None if the observed value is public)
    observed_container: str | None
    #: one form per distribution parameter, in the Op's order
    forms: tuple[Any, ...]
    #: the observed value expression in the model
    observed: Variable

    @property
    def op(self):
        return self.rv.owner.op

    @property
    def family(self) -> str:
        return self.info.family if self.info else type(self.op).__name__

    @property
    def is_private(self) -> bool:
        return bool(self.reads)

    def lipschitz_per_element(self, domains, xp=PT, hull=None):
        """``L`` of each observed element as a PyTensor expression of the model's free RVs."""
        params = []
        for name, form in zip(self.info.param_names, self.forms):
            b = form.bounds(domains, xp, hull)
            if self.info.family == "Bernoulli" and isinstance(form, LinkForm) and form.link == "sigmoid":
                inner = form.inner.bounds(domains, xp, hull)
                b = Bounds(inner.lo, inner.hi, space="logit")
            params.append(b)
        domain = domains.get(self.observed_container) if self.observed_container else None
        if domain is None:
            # the observed value is public: only the parameters change with the record
            raise UnsupportedFactorError(
                f"factor {self.name!r} reads private data only through its parameters while its "
                "observed value is public; pymc_dp does not support this yet. Make the observed "
                "data a private container with a declared domain."
            )
        try:
            lo, hi = log_density_range(self.op, domain, tuple(params), PT)
        except PrivacyError as err:  # the rules' messages name the family, not the variables
            raise type(err)(
                f"factor {self.name!r} observing private {self.observed_container!r}: {err}"
            ) from None
        return hi - lo

    def lipschitz(self, domains, hull=None):
        """The per-record constant ``L_j(theta)``: a scalar PyTensor expression.

        The elementwise constants are broadcast to the observed value's shape, summed over the
        elements of one record (every axis but the first) and maximised over records.
        """
        per_element = self.lipschitz_per_element(domains, hull=hull)
        full = per_element + pt.zeros_like(self.observed, dtype="float64")
        if full.ndim == 0:
            return full
        per_record = full.sum(axis=tuple(range(1, full.ndim))) if full.ndim > 1 else full
        return pt.max(per_record)


# --------------------------------------------------------------------------- analysis
def private_ancestors(var: Variable, private: dict[Variable, str]) -> list[str]:
    """Names of the private containers ``var`` depends on, in a stable order."""
    found = {private[a] for a in ancestors([var]) if a in private}
    return sorted(found)


def _strip_casts(var: Variable) -> Variable:
    while (
        var.owner is not None
        and isinstance(var.owner.op, Elemwise)
        and isinstance(var.owner.op.scalar_op, ps.Cast)
    ):
        var = var.owner.inputs[0]
    return var


def _strip_expand_dims(var: Variable) -> Variable:
    while var.owner is not None and isinstance(var.owner.op, DimShuffle) and var.owner.op.is_expand_dims:
        var = var.owner.inputs[0]
    return var


class _Analyzer:
    def __init__(self, factor_name: str, private: dict[Variable, str], domains: dict[str, Domain]):
        self.factor_name = factor_name
        self.private = private
        self.domains = domains

    def refuse(self, var: Variable, why: str):
        containers = private_ancestors(var, self.private)
        raise UnsupportedFactorError(
            f"factor {self.factor_name!r} reads private data {containers} through {why}. "
            "pymc_dp certifies factors that read one record at a time: the observed value, "
            "X @ w + b with X rows in a Ball or Box, a label used as an index (theta[y]), or a "
            "monotone link (sigmoid, exp) of these. Rewrite the model in one of these forms, or "
            "declare the container public if it is not sensitive."
        )

    def form(self, var: Variable):
        if not private_ancestors(var, self.private):
            return PointForm(var)
        var = _strip_casts(var)
        if var in self.private:
            self.refuse(var, "a parameter that is the private container itself")
        node = var.owner
        op = node.op
        if isinstance(op, CAReduce) or (
            isinstance(op, Elemwise)
            and any(i.owner is not None and isinstance(i.owner.op, CAReduce) and private_ancestors(i, self.private) for i in node.inputs)
        ):
            self.refuse(var, f"an aggregate over many rows ({op})")
        if isinstance(op, DimShuffle):
            # only a squeeze of the trailing unit axis of X @ w[:, None]
            inner = node.inputs[0]
            if inner.owner is not None and self._is_dot(inner.owner):
                return self._affine(inner.owner)
            self.refuse(var, f"a reshaping of private data ({op})")
        if self._is_dot(node):
            return self._affine(node)
        if isinstance(op, (AdvancedSubtensor, AdvancedSubtensor1)):
            return self._index(node)
        if isinstance(op, Elemwise):
            scalar = type(op.scalar_op)
            if scalar in _MONOTONE_LINKS and len(node.inputs) == 1:
                return LinkForm(_MONOTONE_LINKS[scalar], self.form(node.inputs[0]))
            if isinstance(op.scalar_op, ps.Add):
                private_inputs = [i for i in node.inputs if private_ancestors(i, self.private)]
                public_inputs = [i for i in node.inputs if not private_ancestors(i, self.private)]
                if len(private_inputs) == 1:
                    inner = self.form(private_inputs[0])
                    if isinstance(inner, AffineForm):
                        offset = inner.offset
                        for p in public_inputs:
                            offset = p if offset is None else offset + p
                        return AffineForm(inner.container, inner.weights, offset)
            self.refuse(var, f"the elementwise operation {op.scalar_op}")
        self.refuse(var, f"the operation {op}")

    @staticmethod
    def _is_dot(node) -> bool:
        op = node.op
        return isinstance(op, Dot) or (isinstance(op, Blockwise) and isinstance(op.core_op, Dot))

    def _affine(self, node):
        x, w = node.inputs
        x_s = _strip_casts(x)
        if x_s not in self.private or private_ancestors(w, self.private):
            self.refuse(node.outputs[0], "a matrix product that is not X @ w with X a private container")
        name = self.private[x_s]
        if not isinstance(self.domains.get(name), (Ball, Box)):
            raise UnsupportedFactorError(
                f"factor {self.factor_name!r} computes X @ w with private {name!r}: declare its "
                "rows' domain with pymc_dp.Ball(radius) or pymc_dp.Box(lo, hi)."
            )
        w = _strip_expand_dims(w)
        if w.ndim != 1:
            self.refuse(node.outputs[0], "a matrix product with a weight matrix (only vectors are supported)")
        return AffineForm(name, w)

    def _index(self, node):
        table, *idx = node.inputs
        if private_ancestors(table, self.private) or len(idx) != 1:
            self.refuse(node.outputs[0], "advanced indexing other than table[y]")
        y = _strip_casts(idx[0])
        if y not in self.private:
            self.refuse(node.outputs[0], "an index computed from private data")
        name = self.private[y]
        if not isinstance(self.domains.get(name), Integers):
            raise UnsupportedFactorError(
                f"factor {self.factor_name!r} uses private {name!r} as an index: declare its "
                "domain with pymc_dp.Integers(lo, hi) or pymc_dp.Binary()."
            )
        return IndexForm(name, table)


def find_factors(model, private: dict[Variable, str], domains: dict[str, Domain]) -> list[Factor]:
    """Every observed RV of ``model`` as a :class:`Factor` (public ones included)."""
    factors = []
    for rv in model.observed_RVs:
        observed = model.rvs_to_values[rv]
        reads_obs = private_ancestors(observed, private)
        node = rv.owner
        op = node.op
        dist_params = op.dist_params(node) if hasattr(op, "dist_params") else node.inputs[2:]
        reads = sorted(set(reads_obs).union(*(private_ancestors(p, private) for p in dist_params)))
        info = rule_info(op)
        if not reads:
            factors.append(Factor(rv.name, rv, info, (), None, (), observed))
            continue
        if info is None:
            raise UnsupportedFactorError(
                f"factor {rv.name!r} (family {type(op).__name__.removesuffix('RV')}) reads private "
                f"data {reads}, and pymc_dp has no Lipschitz rule for this family. Supported: "
                "Bernoulli, Binomial, Categorical, Poisson, Geometric, Normal, Laplace, StudentT, "
                "Cauchy, Exponential, Gamma, LogNormal, Beta."
            )
        obs_container = None
        if reads_obs:
            stripped = _strip_casts(observed)
            if stripped not in private:
                raise UnsupportedFactorError(
                    f"factor {rv.name!r} observes a transformation of private data {reads_obs}; "
                    "observe the private container itself (transform the data before it enters "
                    "pm.Data, with a public rule, and declare the domain of the result)."
                )
            obs_container = private[stripped]
            if domains[obs_container].event_ndim != 0:
                raise UnsupportedFactorError(
                    f"factor {rv.name!r} observes {obs_container!r}, whose domain "
                    f"{domains[obs_container]} is a row domain; observed data need an elementwise "
                    "domain (Interval, Integers, Binary)."
                )
        analyzer = _Analyzer(rv.name, private, domains)
        forms = tuple(analyzer.form(p) for p in dist_params)
        for pname, form in zip(info.param_names, forms):
            if not isinstance(form, PointForm) and pname not in info.range_params:
                raise UnsupportedFactorError(
                    f"factor {rv.name!r}: the {info.family} parameter {pname!r} reads private "
                    f"data; only {sorted(info.range_params) or 'none'} may."
                )
        factors.append(Factor(rv.name, rv, info, tuple(reads), obs_container, forms, observed))
    return factors
