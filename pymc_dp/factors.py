"""Read a PyMC model as a factor graph with data dependencies.

Every observed RV is a likelihood *factor*. For each factor we find which private ``pm.Data``
containers it reads, as its observed value or inside its parameters, and in what *form* each
parameter reads them. Only forms that read one record at a time are accepted:

* :class:`PointForm` -- the parameter reads no private data;
* :class:`AffineForm` -- ``X @ w + offset`` with ``X`` a private matrix whose rows lie in a
  :class:`~pymc_dp.Ball` or :class:`~pymc_dp.Box`;
* :class:`IndexForm` -- ``table[y]`` with ``y`` a private integer container (naive Bayes);
* :class:`LinkForm` -- a monotone elementwise link (``sigmoid``, ``exp``) of one of the above;
* :class:`PredictorForm` -- any other linear predictor as users write it (``b0 + b1 * x1 +
  b2 * x2``, ``alpha[county] + beta * floor``, ``pt.stack([...]).T @ w``, interactions), read by
  :mod:`pymc_dp.predictor` with its exact (or sound, flagged) range over one record;
* :class:`SpaceForm` -- a parameter a family reads through its link (``logit p``, ``ln mu`` of a
  Poisson, negative binomial or Gamma mean, the ``eta`` of a softmax or an ordered logistic);
* :class:`NestedForm` -- a component distribution (``pm.Censored``'s base, a mixture's
  components, ``pm.AR``'s ``init_dist``), with the forms of its own parameters.

Operations that leave values unchanged -- ``pm.Deterministic`` (a ``ViewOp``), casts, copies --
are seen through. Anything else that reads private data -- an aggregate over rows such as
``X.mean()``, private data used as a shape, rows shifted against each other -- is refused with
:class:`UnsupportedFactorError`, in words a PyMC user reads (no PyTensor Op names). The user's
model is only read, never changed.
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
from pymc_dp.predictor import NotAPredictor, Predictor, analyse, strip_identity, value_ancestors
from pymc_dp.rules import PT, Bounds, Nested, element_lipschitz, rule_info
from pymc_dp.rules.base import RuleInfo, parameter_refusal, public_outcome_refusal
from pymc_dp.rules.beta_regression import match_mean_precision
from pymc_dp.rules.log_mean import canonical, log_of_indexed, match_nb_mean

__all__ = [
    "Factor", "PointForm", "AffineForm", "IndexForm", "LinkForm", "PredictorForm", "SpaceForm", "NestedForm",
    "find_factors", "private_ancestors", "strip_casts", "strip_expand_dims",
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

#: (family, parameter, link) -> the Bounds space the family's rule takes the link's argument in
LINK_SPACES = {
    ("Bernoulli", "p", "sigmoid"): "logit",
    ("Binomial", "p", "sigmoid"): "logit",
    ("Poisson", "mu", "exp"): "log-mean",
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


@dataclass(frozen=True)
class PredictorForm:
    """A linear predictor of one record (:class:`pymc_dp.predictor.Predictor`)."""

    predictor: Predictor

    def bounds(self, domains, xp=PT, hull=None):
        lo, hi = self.predictor.bounds(domains)
        return Bounds(lo, hi)

    @property
    def exact(self) -> bool:
        return self.predictor.exact


@dataclass(frozen=True)
class SpaceForm:
    """A parameter given to its family's rule on another scale (``Bounds.space``): ``inner`` is
    the form of that scale's value (``logit p``, ``ln mu``, ``eta``); ``extra`` are expressions
    the space needs besides (ordered cutpoints, a probit's sigma), reading no private data."""

    space: str
    inner: Any
    extra: tuple = ()

    def bounds(self, domains, xp=PT, hull=None):
        b = self.inner.bounds(domains, xp, hull)
        extra = None
        if self.extra:
            extra = []
            for e in self.extra:
                extra += [e, e]
            extra = tuple(extra)
        return Bounds(b.lo, b.hi, self.space, extra)


@dataclass(frozen=True)
class NestedForm:
    """A component distribution (its RV node's Op and the forms of its parameters)."""

    op: Any
    node: Any
    forms: tuple

    def bounds(self, domains, xp=PT, hull=None):
        return Nested(self.op, tuple(f.bounds(domains, xp, hull) for f in self.forms))

    @property
    def info(self) -> RuleInfo | None:
        return rule_info(self.op)


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
            space = LINK_SPACES.get((self.info.family, name, form.link)) if isinstance(form, LinkForm) else None
            if space is not None:
                inner = form.inner.bounds(domains, xp, hull)
                b = Bounds(inner.lo, inner.hi, space=space)
            params.append(b)
        domain = self.observed_domain(domains)
        try:
            return element_lipschitz(self.op, domain, tuple(params), PT)
        except PrivacyError as err:  # the rules' messages name the family, not the variables
            raise type(err)(
                f"factor {self.name!r} observing private {self.observed_container!r}: {err}"
            ) from None

    def observed_domain(self, domains) -> Domain:
        """The declared domain of the private observed value; a public one is refused (typed)."""
        if self.observed_container is None or self.observed_container not in domains:
            raise UnsupportedFactorError(public_outcome_refusal(self.name, self.reads))
        return domains[self.observed_container]

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
    """Names of the private containers whose values ``var`` depends on, in a stable order
    (a dependence through their shapes only, which are public, does not count)."""
    found = {private[a] for a in value_ancestors([var]) if a in private}
    return sorted(found)


def strip_casts(var: Variable) -> Variable:
    """``var`` without the dtype casts on top of it (PyMC casts observed data to the RV's dtype).

    Parameters
    ----------
    var : Variable
        A graph variable.

    Returns
    -------
    Variable
        The first ancestor along the chain of casts that is not a cast.
    """
    while (
        var.owner is not None
        and isinstance(var.owner.op, Elemwise)
        and isinstance(var.owner.op.scalar_op, ps.Cast)
    ):
        var = var.owner.inputs[0]
    return var


def strip_expand_dims(var: Variable) -> Variable:
    """``var`` without the broadcasting (``expand_dims``) ``DimShuffle``s on top of it.

    Parameters
    ----------
    var : Variable
        A graph variable.

    Returns
    -------
    Variable
        The first ancestor along the chain of added broadcast axes that adds none.
    """
    while var.owner is not None and isinstance(var.owner.op, DimShuffle) and var.owner.op.is_expand_dims:
        var = var.owner.inputs[0]
    return var


class _Analyzer:
    def __init__(self, factor_name: str, private: dict[Variable, str], domains: dict[str, Domain], model_rvs=()):
        self.factor_name = factor_name
        self.private = private
        self.domains = domains
        self._record_shapes = None
        #: the model's own RVs: as parameters they are values, not component distributions
        self.model_rvs = set(model_rvs)

    @property
    def record_shapes(self) -> dict[str, tuple]:
        """The shape of one record of each private container (shapes are public)."""
        if self._record_shapes is None:
            self._record_shapes = {name: tuple(np.shape(v.get_value()))[1:] for v, name in self.private.items()}
        return self._record_shapes

    def refuse(self, var: Variable, why: str):
        containers = private_ancestors(var, self.private)
        raise UnsupportedFactorError(
            f"factor {self.factor_name!r} reads private data {containers} through {why}. "
            "pymc_dp certifies factors that read one record at a time: the observed value, linear "
            "predictors built with + - * / (by parameters or constants), @, stack/concatenate of "
            "columns and indexing by integer containers (theta[y], alpha[group]), and links "
            "(sigmoid, exp) of these. Rewrite the model in one of these forms, or declare the "
            "container public if it is not sensitive."
        )

    def form(self, var: Variable):
        if not private_ancestors(var, self.private):
            return PointForm(var)
        var = strip_identity(var)
        if var in self.private:
            self.refuse(var, "a parameter that is the private container itself")
        node = var.owner
        op = node.op
        if isinstance(op, Elemwise):
            scalar = type(op.scalar_op)
            if scalar in _MONOTONE_LINKS and len(node.inputs) == 1:
                return LinkForm(_MONOTONE_LINKS[scalar], self.form(node.inputs[0]))
        try:
            return self._classic(var)
        except UnsupportedFactorError as classic:
            try:
                predictor = analyse(var, self.private, self.domains, self.record_shapes)
            except NotAPredictor as err:
                if "aggregate" in str(classic) or "aggregate" in str(err):
                    raise classic from None
                raise UnsupportedFactorError(
                    f"factor {self.factor_name!r} {err}. pymc_dp certifies factors that read one record at a "
                    "time: linear predictors built with + - * / (by parameters or constants), @, "
                    "stack/concatenate of columns, indexing by integer containers (alpha[group]), and "
                    "links (sigmoid, exp) of these. Rewrite that part of the model, or declare the "
                    "container public if it is not sensitive."
                ) from None
            return PredictorForm(predictor)

    def _classic(self, var: Variable):
        """The exact forms of the first releases: ``X @ w + b``, ``table[y]``."""
        node = var.owner
        op = node.op
        if isinstance(op, CAReduce) or (
            isinstance(op, Elemwise)
            and any(i.owner is not None and isinstance(i.owner.op, CAReduce) and private_ancestors(i, self.private) for i in node.inputs)
        ):
            self.refuse(var, "an aggregate over many rows (a sum, mean or other reduction)")
        if isinstance(op, DimShuffle):
            # only a squeeze of the trailing unit axis of X @ w[:, None]
            inner = strip_identity(node.inputs[0])
            if inner.owner is not None and self._is_dot(inner.owner):
                return self._affine(inner.owner)
            self.refuse(var, "a reshaping of private data")
        if self._is_dot(node):
            return self._affine(node)
        if isinstance(op, (AdvancedSubtensor, AdvancedSubtensor1)):
            return self._index(node)
        if isinstance(op, Elemwise):
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
            self.refuse(var, "an elementwise operation")
        self.refuse(var, "an operation")

    @staticmethod
    def _is_dot(node) -> bool:
        op = node.op
        return isinstance(op, Dot) or (isinstance(op, Blockwise) and isinstance(op.core_op, Dot))

    def _affine(self, node):
        x, w = node.inputs
        x_s = strip_identity(x)
        if x_s not in self.private or private_ancestors(w, self.private):
            self.refuse(node.outputs[0], "a matrix product that is not X @ w with X a private container")
        name = self.private[x_s]
        if not isinstance(self.domains.get(name), (Ball, Box)):
            raise UnsupportedFactorError(
                f"factor {self.factor_name!r} computes X @ w with private {name!r}: declare its "
                "rows' domain with pymc_dp.Ball(radius) or pymc_dp.Box(lo, hi)."
            )
        w = strip_expand_dims(strip_identity(w))
        if w.ndim != 1:
            self.refuse(node.outputs[0], "a matrix product with a weight matrix")
        return AffineForm(name, w)

    def _index(self, node):
        table, *idx = node.inputs
        if private_ancestors(table, self.private) or len(idx) != 1:
            self.refuse(node.outputs[0], "advanced indexing other than table[y]")
        y = strip_identity(idx[0])
        if y not in self.private:
            self.refuse(node.outputs[0], "an index computed from private data")
        name = self.private[y]
        if not isinstance(self.domains.get(name), Integers):
            raise UnsupportedFactorError(
                f"factor {self.factor_name!r} uses private {name!r} as an index: declare its "
                "domain with pymc_dp.Integers(lo, hi) or pymc_dp.Binary()."
            )
        return IndexForm(name, table)

    # ---------------------------------------------------------------- family parametrisations
    def log_form(self, var: Variable):
        """The form of ``ln(var)`` for a positive parameter built by products, quotients and
        ``exp`` of linear predictors (``exp(eta) * exposure``, ``alpha / exp(eta)``). Logs of
        parameter-only factors that appear with opposite signs cancel (``scale = mu / alpha`` with
        ``alpha`` the shape gives ``ln mu`` exactly), so the window is not widened by them."""
        logs: dict[Variable, float] = {}
        preds: list = []
        self._collect_logs(var, 1.0, logs, preds)
        return logs, preds

    def _collect_logs(self, var, sign, logs, preds):
        if not private_ancestors(var, self.private):
            key = canonical(var)
            logs[key] = logs.get(key, 0.0) + sign
            return
        var = strip_identity(var)
        node = var.owner
        op = node.op if node is not None else None
        if isinstance(op, DimShuffle) and op.is_expand_dims:
            return self._collect_logs(node.inputs[0], sign, logs, preds)
        logged = log_of_indexed(var, lambda v: bool(private_ancestors(v, self.private)))
        if logged is not None:  # rate[g] with a private label: ln rate[g] = (ln rate)[g] (FOUND.md #6)
            preds.append((sign, logged))
            return
        if isinstance(op, Elemwise):
            t = type(op.scalar_op)
            if t is ps.Exp:
                preds.append((sign, node.inputs[0]))
                return
            if t is ps.Mul:
                for i in node.inputs:
                    self._collect_logs(i, sign, logs, preds)
                return
            if t is ps.TrueDiv:
                self._collect_logs(node.inputs[0], sign, logs, preds)
                self._collect_logs(node.inputs[1], -sign, logs, preds)
                return
            if t is ps.Reciprocal:
                return self._collect_logs(node.inputs[0], -sign, logs, preds)
        self.refuse(var, "a positive parameter that is not a product or quotient of exp(linear predictor) "
                    "and parameters (use a log link: mu = exp(eta))")

    def predictor_form(self, var: Variable):
        """``PredictorForm`` of ``var`` (``PointForm`` if it reads no private data)."""
        if not private_ancestors(var, self.private):
            return PointForm(var)
        try:
            return PredictorForm(analyse(var, self.private, self.domains, self.record_shapes))
        except NotAPredictor as err:
            raise UnsupportedFactorError(
                f"factor {self.factor_name!r} {err}. pymc_dp certifies linear predictors built with "
                "+ - * / (by parameters or constants), @, stack/concatenate of columns and indexing "
                "by integer containers."
            ) from None

    def log_space(self, var: Variable, extra_logs: dict | None = None):
        """``SpaceForm("log-mean", form of ln var + sum c ln v)``."""
        logs, preds = self.log_form(var)
        for k, c in (extra_logs or {}).items():
            key = canonical(k)
            logs[key] = logs.get(key, 0.0) + c
        point = None
        for v, c in logs.items():
            if abs(c) < 1e-15:
                continue
            term = c * pt.log(v)
            point = term if point is None else point + term
        inner = None
        for sign, eta in preds:
            f = self.predictor_form(eta if sign > 0 else -eta)
            inner = f if inner is None else _sum_forms(inner, f, self)
        if inner is None:
            inner = PointForm(point)
        elif point is not None:
            inner = _sum_forms(inner, PointForm(point), self)
        return inner


def _sum_forms(a, b, analyzer: "_Analyzer"):
    """The form of ``a + b`` (both forms of the same record)."""
    pa, pb = _as_predictor(a), _as_predictor(b)
    if pa is None and pb is None:
        return PointForm(a.expr + b.expr)
    if pa is None:
        return PredictorForm(pb.plus_point(a.expr))
    if pb is None:
        return PredictorForm(pa.plus_point(b.expr))
    return PredictorForm(pa.plus(pb))


def _as_predictor(form):
    if isinstance(form, PointForm):
        return None
    if isinstance(form, PredictorForm):
        return form.predictor
    raise UnsupportedFactorError("cannot combine these parameter forms")  # pragma: no cover


#: families with a rule, for messages
SUPPORTED_FAMILIES = (
    "Bernoulli, Binomial, BetaBinomial, Categorical (also through softmax, OrderedLogistic, "
    "OrderedProbit), Poisson, NegativeBinomial, Geometric, Normal, Laplace, StudentT, Cauchy, "
    "Exponential, Gamma, LogNormal, Beta, Censored, Mixture (NormalMixture, zero-inflated, hurdle), AR"
)


def _dist_params(op, node) -> list:
    return list(op.dist_params(node)) if hasattr(op, "dist_params") else list(node.inputs[2:])


def _is_rv_node(var) -> bool:
    from pymc.distributions.distribution import SymbolicRandomVariable
    from pytensor.tensor.random.op import RandomVariable

    return var.owner is not None and isinstance(var.owner.op, (RandomVariable, SymbolicRandomVariable))


def _family_forms(analyzer: "_Analyzer", op, node, info: RuleInfo, name: str, params=None) -> tuple:
    """The forms of a factor's (or a component's) distribution parameters, each on the scale
    its family's rule takes it (:data:`LINK_SPACES`, log-mean windows, softmax, ordered)."""
    from pymc.distributions.mixture import _BaseMixtureRV

    if params is None and isinstance(op, _BaseMixtureRV):
        return _mixture_forms(analyzer, node, info, name)
    params = _dist_params(op, node) if params is None else list(params)
    family = info.family
    if family == "Beta" and any(private_ancestors(p, analyzer.private) for p in params):
        # beta regression: alpha = sigmoid(eta) phi, beta = (1 - sigmoid(eta)) phi (rules/beta_regression.py)
        eta, phi = match_mean_precision(*params) or (None, None)
        if eta is None or private_ancestors(phi, analyzer.private):
            reads = private_ancestors(params[0] if private_ancestors(params[0], analyzer.private) else params[1], analyzer.private)
            raise UnsupportedFactorError(parameter_refusal(name, info, "alpha" if eta is None else "beta", reads))
        return (SpaceForm("logit-mean", analyzer.predictor_form(eta)), SpaceForm("precision", PointForm(phi)))
    forms = []
    for pname, param in zip(info.param_names, params):
        reads = private_ancestors(param, analyzer.private)
        if _is_rv_node(param) and param not in analyzer.model_rvs and not isinstance(param.owner.op, type(op)):
            sub = param.owner
            sub_info = rule_info(sub.op)
            if sub_info is None:
                raise UnsupportedFactorError(
                    f"factor {name!r}: its component {type(sub.op).__name__.removesuffix('RV')} has no "
                    f"Lipschitz rule. Supported: {SUPPORTED_FAMILIES}."
                )
            forms.append(NestedForm(sub.op, sub, _family_forms(analyzer, sub.op, sub, sub_info, name)))
            continue
        if not reads and (family, pname) in _SPACE_EVEN_PUBLIC:
            # a parameter on its link's scale even when it reads no private data: the region
            # rules bound the linear predictor, where interval arithmetic on the parameter itself
            # (ordered probabilities as differences of sigmoids) would be hopelessly loose
            form = _space_form(analyzer, family, pname, param, params, info, name)
            if isinstance(form, SpaceForm):
                forms.append(form)
                continue
        if not reads:
            anc = ancestors([param])
            if any(a in analyzer.private for a in anc) and not any(
                a.owner is not None and _is_rv_node(a) for a in anc
            ):
                # it reads the private data's shapes only (public, fixed for the certificate):
                # its value, as a constant the rules can read
                import pytensor

                value = pytensor.function([], param, mode="FAST_COMPILE", on_unused_input="ignore")()
                param = pt.constant(np.asarray(value), dtype=param.dtype)
            forms.append(PointForm(param))
            continue
        if pname not in info.range_params:
            raise UnsupportedFactorError(parameter_refusal(name, info, pname, reads))
        forms.append(_space_form(analyzer, family, pname, param, params, info, name))
    return tuple(forms)


def _mixture_forms(analyzer, node, info: RuleInfo, name: str) -> tuple:
    """A mixture's weights and one :class:`NestedForm` per component (a hurdle's positive part
    as its base distribution; a batched component as one)."""
    from pymc_dp.rules.mixture import mixture_components

    weights, components = mixture_components(node)
    if private_ancestors(weights, analyzer.private):
        raise UnsupportedFactorError(
            f"factor {name!r}: the mixture weights read private data {private_ancestors(weights, analyzer.private)}; "
            "pymc_dp certifies mixtures whose weights are parameters."
        )
    forms = [PointForm(weights)]
    for comp in components:
        sub_info = rule_info(comp.op)
        if type(comp.op).__name__ == "DiracDeltaRV":  # a zero-inflation's point mass: the rule knows it
            if any(private_ancestors(p, analyzer.private) for p in comp.params):
                analyzer.refuse(comp.params[0], "a point mass located by private data")
            forms.append(NestedForm(comp.op, None, tuple(PointForm(p) for p in comp.params)))
            continue
        if sub_info is None:
            raise UnsupportedFactorError(
                f"factor {name!r}: its component {type(comp.op).__name__.removesuffix('RV')} has no Lipschitz "
                f"rule. Supported: {SUPPORTED_FAMILIES}."
            )
        forms.append(NestedForm(comp.op, None, _family_forms(analyzer, comp.op, None, sub_info, name, comp.params)))
    return tuple(forms)


#: parameters given on their link's scale whether or not they read private data
_SPACE_EVEN_PUBLIC = {("Categorical", "p")}


def _space_form(analyzer, family, pname, param, params, info, name):
    if family == "Poisson" and pname == "mu":
        return SpaceForm("log-mean", analyzer.log_space(param))
    if family == "NegativeBinomial" and pname == "p":
        n = params[info.param_names.index("n")]
        mu = match_nb_mean(param, n)
        if mu is None:
            analyzer.refuse(param, "a negative binomial p that is not PyMC's alpha / (mu + alpha); write "
                            "pm.NegativeBinomial(mu=pm.math.exp(eta), alpha=alpha)")
        return SpaceForm("log-mean", analyzer.log_space(mu))
    if family == "Exponential":  # the scale is the mean: ln mu = ln scale
        return SpaceForm("log-mean", analyzer.log_space(param))
    if family == "Gamma" and pname == "scale":
        shape = params[info.param_names.index("shape")]
        # scale = mu / shape: ln mu = ln scale + ln shape (parameter logs cancel exactly)
        return SpaceForm("log-mean", analyzer.log_space(param, {shape: 1.0}))
    if family == "Categorical" and pname == "p":
        from pymc_dp.rules import categorical as cat

        ordered = getattr(cat, "match_ordered", lambda p: None)(param)
        if ordered is not None:
            kind, eta, cutpoints, sigma = ordered
            if private_ancestors(cutpoints, analyzer.private) or (sigma is not None and private_ancestors(sigma, analyzer.private)):
                analyzer.refuse(param, "ordered cutpoints (or sigma) that read private data")
            extra = (cutpoints,) if sigma is None else (cutpoints, sigma)
            return SpaceForm(kind, analyzer.predictor_form(eta), extra)
        eta = getattr(cat, "match_softmax", lambda p: None)(param)
        if eta is not None:
            return SpaceForm("softmax", _pairwise(analyzer, eta))
    return analyzer.form(param)


def _pairwise(analyzer, eta):
    """The form of the pairwise differences ``eta[..., k] - eta[..., j]`` (shape ``(..., K, K)``)."""
    f = analyzer.predictor_form(eta)
    if isinstance(f, PointForm):
        e = f.expr
        return PointForm(e[..., :, None] - e[..., None, :])
    pred = f.predictor
    last = pred.ndim - 1
    if pred.rax == last:
        analyzer.refuse(eta, "a softmax over the record axis")

    def col(k_axis_first):
        def fn(x, trailing):
            order = list(range(pred.ndim))
            new = order + ["x"] if k_axis_first else order[:-1] + ["x", last]
            return x.dimshuffle(*(new + list(range(pred.ndim, pred.ndim + trailing))))
        return fn

    a = pred.mapped(col(True), pred.ndim + 1, pred.rax)   # eta_k at [..., k, j]
    b = pred.mapped(col(False), pred.ndim + 1, pred.rax)  # eta_j at [..., k, j]
    return PredictorForm(a.plus(b.scaled(pt.constant(-1.0, dtype="float64"))))


def find_factors(model, private: dict[Variable, str], domains: dict[str, Domain]) -> list[Factor]:
    """Every observed RV of ``model`` as a :class:`Factor` (public ones included)."""
    factors = []
    for rv in model.observed_RVs:
        observed = model.rvs_to_values[rv]
        reads_obs = private_ancestors(observed, private)
        node = rv.owner
        op = node.op
        dist_params = _dist_params(op, node)
        reads = sorted(set(reads_obs).union(*(private_ancestors(p, private) for p in dist_params)))
        info = rule_info(op)
        if not reads:
            factors.append(Factor(rv.name, rv, info, (), None, (), observed))
            continue
        if info is None:
            raise UnsupportedFactorError(
                f"factor {rv.name!r} (family {type(op).__name__.removesuffix('RV')}) reads private "
                f"data {reads}, and pymc_dp has no Lipschitz rule for this family. Supported: "
                f"{SUPPORTED_FAMILIES}. Rewrite the likelihood with a supported family, or declare "
                "the data public if they are not sensitive."
            )
        obs_container = None
        if reads_obs:
            stripped = strip_identity(observed)
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
        analyzer = _Analyzer(rv.name, private, domains, list(model.free_RVs) + list(model.observed_RVs))
        forms = _family_forms(analyzer, op, node, info, rv.name)
        _check_alignment(rv.name, op, forms, observed)
        factors.append(Factor(rv.name, rv, info, tuple(reads), obs_container, forms, observed))
    return factors


def _predictors(form):
    while isinstance(form, (LinkForm, SpaceForm)):
        form = form.inner
    if isinstance(form, PredictorForm):
        yield form.predictor
    elif isinstance(form, NestedForm):
        for f in form.forms:
            yield from _predictors(f)


def _check_alignment(name, op, forms, observed):
    """Each predictor's record axis must be the observed value's first axis after broadcasting."""
    ndims = getattr(op, "ndims_params", None) or (0,) * len(forms)
    for form, core in zip(forms, ndims):
        for pred in _predictors(form):
            space = form.space if isinstance(form, SpaceForm) else None
            if space == "softmax":  # pairwise differences: (records, K, K)
                target = observed.ndim + (core or 0) + 1
            elif space in ("ordered-logistic", "ordered-probit"):  # eta: one value per record
                target = observed.ndim
            else:
                target = observed.ndim + (core or 0)
            if pred.rax + (target - pred.ndim) != 0:
                raise UnsupportedFactorError(
                    f"factor {name!r}: a parameter's element i does not read record i of the private "
                    "data (its records lie on another axis than the observed values'); write the "
                    "predictor with one row per record, like the observed data."
                )
