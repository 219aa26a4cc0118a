"""The rule registry: one exact Lipschitz rule per PyTensor ``RandomVariable`` Op.

A *rule* answers one question for a likelihood factor: over every record a private dataset may
hold, what is the range of the factor's log-density of one element,

.. math::  \\mathrm{lo}(\\theta) = \\min_{x \\in D} \\ln p_\\theta(x), \\qquad
           \\mathrm{hi}(\\theta) = \\max_{x \\in D} \\ln p_\\theta(x)?

The per-element Lipschitz constant under a replace-one change of the data is
``L(theta) = hi(theta) - lo(theta)``: a neighbouring dataset changes the log-likelihood of that
element by at most ``L`` and, for the worst pair of records, by exactly ``L``.

Parameters may themselves read private data of the same record (``mu = X @ w``, ``p = theta[y]``).
Then a parameter is given as :class:`Bounds` ``[lo, hi]``: the values it can take for one record
as that record ranges over its domain, and the rule returns the range of the log-density jointly
over the data and that parameter interval (exact when, as for rows of a ball or labels of a
class, the data and the parameter vary independently). Only the parameters a rule lists in
``range_params`` may be given as proper intervals.

Rules are registered with :func:`functools.singledispatch` on the type of the RV Op, as PyMC
registers ``_logprob``. Every rule is written against an array namespace ``xp`` (``NP`` or
``PT``) so that one derivation gives both a number and a graph; every rule has a brute-force
test in ``tests/rules``.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import singledispatch
from typing import Any, Callable

from pymc_dp.domains import Domain, Integers, Interval
from pymc_dp.exceptions import DomainError, UnsupportedFactorError

__all__ = [
    "Bounds",
    "Nested",
    "RuleInfo",
    "log_density_range",
    "element_lipschitz",
    "rule_info",
    "register_rule",
    "register_lipschitz",
    "domain_interval",
    "parameter_refusal",
]


@dataclass(frozen=True)
class Bounds:
    """The values one distribution parameter can take for one record, elementwise ``[lo, hi]``.

    ``lo is hi`` (built with :meth:`point`) means the parameter does not read private data.
    ``space`` says on which scale ``[lo, hi]`` is given, when a family takes its parameter
    through a link (each rule lists the spaces it accepts):

    * ``"natural"`` -- the parameter itself;
    * ``"logit"`` -- ``logit p`` (Bernoulli, Binomial);
    * ``"log-mean"`` -- the log of the mean (Poisson ``ln mu``; NegativeBinomial, whose ``p`` is
      ``n / (mu + n)``; Gamma, whose ``scale`` is ``mu / alpha``);
    * ``"softmax"`` -- Categorical ``p = softmax(eta)``: ``lo[..., k, j], hi[..., k, j]`` bound
      ``eta_k - eta_j`` (the pairwise differences, which are all the likelihood depends on);
    * ``"ordered-logistic"``, ``"ordered-probit"`` -- Categorical ``p`` of PyMC's
      ``OrderedLogistic`` / ``OrderedProbit``: ``[lo, hi]`` bounds ``eta``, and ``extra`` holds
      ``(cut_lo, cut_hi)`` (probit: ``(cut_lo, cut_hi, sigma_lo, sigma_hi)``), the cutpoints'
      bounds on the last axis (points when ``cut_lo is cut_hi``).
    """

    lo: Any
    hi: Any
    space: str = "natural"
    extra: Any = None

    @classmethod
    def point(cls, value: Any, space: str = "natural") -> "Bounds":
        return cls(value, value, space)

    @property
    def is_point(self) -> bool:
        return self.lo is self.hi


@dataclass(frozen=True)
class Nested:
    """A component distribution inside a factor: ``pm.Censored``'s base, a mixture's
    components, ``pm.AR``'s ``init_dist``. ``params`` are its own, as :class:`Bounds` (or
    :class:`Nested`), in its Op's ``dist_params`` order."""

    op: Any
    params: tuple

    @property
    def info(self) -> "RuleInfo | None":
        return rule_info(self.op)


@dataclass(frozen=True)
class RuleInfo:
    """Public description of a rule."""

    family: str
    param_names: tuple[str, ...]
    #: parameters that may be given as proper intervals (read private data of the record)
    range_params: frozenset[str]
    #: name of the location and scale parameters, for location-scale families
    location: str | None = None
    scale: str | None = None


_INFO: dict[type, RuleInfo] = {}


@singledispatch
def log_density_range(op, domain: Domain, params: tuple[Bounds, ...], xp) -> tuple[Any, Any]:
    """Return ``(lo, hi)``: the range of one element's log-density over the data domain.

    Parameters
    ----------
    op : RandomVariable
        The Op of the observed RV; dispatch is on its type.
    domain : Domain
        The public domain of the observed data.
    params : tuple of Bounds
        The distribution parameters in the Op's order (``op.dist_params(node)``).
    xp : namespace
        ``pymc_dp.rules.namespaces.NP`` or ``PT``.
    """
    raise UnsupportedFactorError(f"no Lipschitz rule is registered for {type(op).__name__}")


@singledispatch
def element_lipschitz(op, domain: Domain, params: tuple, xp) -> Any:
    """``L`` of one observed element: how much one record can move its log-density.

    By default ``hi - lo`` of :func:`log_density_range`. Families whose constant is not the width
    of one log-density range register their own (mixtures bound ``L`` by the largest
    component's; ``pm.AR`` adds up the terms one value enters) with :func:`register_lipschitz`.
    """
    lo, hi = log_density_range(op, domain, params, xp)
    return hi - lo


def register_lipschitz(op_type: type) -> Callable:
    """Register ``fn(op, domain, params, xp)`` as the :func:`element_lipschitz` of ``op_type``."""

    def decorator(fn):
        element_lipschitz.register(op_type)(fn)
        return fn

    return decorator


def register_rule(
    op_type: type,
    family: str,
    param_names: tuple[str, ...],
    range_params: tuple[str, ...] = (),
    location: str | None = None,
    scale: str | None = None,
) -> Callable:
    """Register ``fn(op, domain, params, xp)`` as the rule of ``op_type``."""

    def decorator(fn):
        _INFO[op_type] = RuleInfo(
            family, tuple(param_names), frozenset(range_params), location, scale
        )
        log_density_range.register(op_type)(fn)
        return fn

    return decorator


def rule_info(op) -> RuleInfo | None:
    """The :class:`RuleInfo` of the rule that handles ``op``, or None when there is none."""
    for klass in type(op).__mro__:
        if klass in _INFO:
            return _INFO[klass]
    return None


#: what to write instead, per family, when a parameter outside ``range_params`` reads private data
_NEXT_STEP = {
    "Exponential": "give the scale a log link of a linear predictor (scale=pm.math.exp(eta) or "
                   "lam=pm.math.exp(-eta))",
    "Gamma": "give the mean a log link (pm.Gamma(alpha=shape, beta=shape / pm.math.exp(eta)))",
    "Beta": "write alpha=mu * phi, beta=(1 - mu) * phi (or mu=mu, nu=phi) with mu = pm.math.invlogit(eta) "
            "and a precision phi that reads no private data",
}
#: how private covariates may enter a family whose ``range_params`` do not say it
_THROUGH = {"Beta": "a logit-link mean with a precision that reads no private data (beta regression)"}


def parameter_refusal(factor: str, info: RuleInfo, pname: str, reads) -> str:
    """The message refusing factor ``factor`` whose parameter ``pname`` reads private ``reads``
    although ``info`` does not list it in ``range_params``: it names the user's variable and data,
    says where the parameter name comes from, and what to do instead."""
    family = info.family
    data = ", ".join(repr(r) for r in reads)
    allowed = sorted(info.range_params)
    if family in _THROUGH or allowed:
        through = _THROUGH.get(family) or f"{' or '.join(repr(a) for a in allowed)} (a regression's location or mean)"
        can = f"pymc_dp bounds a {family} likelihood whose private covariates enter only through {through}"
        can += "" if family in _THROUGH else ": move them there"
    else:
        can = (f"pymc_dp bounds a {family} likelihood only when private data enter as its observed "
               "value, not through its parameters")
    step = _NEXT_STEP.get(family)
    return (
        f"factor {factor!r} reads private data {data} through the {family} parameter {pname!r} "
        f"(the name PyMC's {family} gives the parameter it computes from the arguments you wrote). "
        f"{can}{'; or ' + step if step else ''}; or declare {data} public (public=[...]) if it is not sensitive."
    )


def public_outcome_refusal(factor: str, reads) -> str:
    """The message refusing factor ``factor`` that reads private ``reads`` through its parameters
    while its observed value is public: the per-record rules bound a change of the observed value
    with the parameters' ranges, and have no rule for a change of the parameters alone."""
    data = ", ".join(repr(r) for r in reads)
    return (
        f"factor {factor!r} reads private data {data} only through its parameters, while its observed "
        "value is public; pymc_dp bounds a likelihood whose record includes its observed value. Put the "
        "observed values in a pm.Data container and declare its domain in data={...} (it is then part of "
        f"the private record), or declare {data} public (public=[...]) if it is not sensitive."
    )


def domain_interval(domain: Domain, family: str) -> tuple[float, float]:
    """``(lo, hi)`` of an elementwise domain (an integer domain as its real hull)."""
    if isinstance(domain, Interval):
        return domain.lo, domain.hi
    if isinstance(domain, Integers):
        return float(domain.lo), float(domain.hi)
    raise DomainError(
        f"a {family} factor needs an elementwise domain (Interval, Integers, Binary) for its "
        f"observed data, got {domain}"
    )


def integer_domain(domain: Domain, family: str, support_lo: int = 0) -> tuple[int, int]:
    """``(lo, hi)`` of an integer domain, checked against the family's support."""
    if not isinstance(domain, Integers):
        raise DomainError(
            f"a {family} factor observes integers: declare its data with Integers(lo, hi) or "
            f"Binary(), not {domain}"
        )
    if domain.lo < support_lo:
        raise DomainError(
            f"the {family} family has support starting at {support_lo}, but the declared domain "
            f"{domain} reaches below it"
        )
    return domain.lo, domain.hi
