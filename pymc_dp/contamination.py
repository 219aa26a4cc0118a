"""Huber contamination: a non-mutating rewrite and its certified oscillation (``docs/theory/contamination.md``).

:func:`contaminate` replaces each chosen likelihood factor ``f`` that observes a ``pm.Data``
container by the public mixture ``(1 - p) f + p g`` (``pm.Mixture`` with weights ``[1 - p, p]``,
the same name and observed container), as PyMC's own model transforms do: the model is turned
into a ``FunctionGraph``, the observed node is replaced, and a new model is built; the user's
model is not changed. The new model carries a public :class:`ContaminationSpec` (``p``, each
factor's ``g``) that :func:`contamination_of` returns.

Certification (:class:`ContaminatedOscillationModel`): a two-component mixture with constant
weights ``[1 - p, p]`` whose first component is a Normal with one free location and a public
scale, and whose second is a public StudentT / Cauchy / Laplace / Normal, is certified by the
oscillation of the contaminated log-likelihood (:mod:`pymc_dp.rules.contamination`). The
oscillation solver (:mod:`pymc_dp.oscillation`) uses it as it uses a one-parameter exponential
family: the search on the grid value of the corner pair, the certificate on the branch-and-bound
bound alone. It is finite on an unbounded data domain (``Interval(-inf, inf)``), which
:func:`check_unbounded_domains` accepts only where every factor reading the container is such a
mixture.

:func:`estimate_epsilon` (re-exported from :mod:`pymc_dp.contamination_estimate`) is the paper's
Algorithm 1 on simulated data: an estimate labelled "estimated, model-conditional, not DP", which
every budget entry point refuses.

What is not done (issue 14, item 1): run-time contamination of the data by the library and its
amplification (:func:`apply`), a free or truncated Normal scale, location families other than
the Normal.

Layering: with the truncation's modules (it rewrites a model as :mod:`pymc_dp.rewrite` does and
reads factors through the region context); :mod:`pymc_dp.oscillation` dispatches to it.
"""

from __future__ import annotations

import math
import weakref
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

import numpy as np
import pymc as pm
from pymc.distributions.mixture import MixtureRV
from pymc.distributions.shape_utils import change_dist_size
from pymc.model.fgraph import ModelObservedRV, fgraph_from_model, model_observed_rv
from pytensor.compile.sharedvalue import SharedVariable
from pytensor.graph.basic import Constant, Variable
from pytensor.graph.traversal import ancestors
from pytensor.tensor.random.basic import NormalRV
from pytensor.tensor.random.op import RandomVariable
from pytensor.tensor.random.type import RandomType

from pymc_dp.contamination_estimate import estimate_epsilon  # noqa: F401  (the spec's pymc_dp.contamination.estimate_epsilon)
from pymc_dp.domains import Interval
from pymc_dp.exceptions import DomainError, PrivacyError, UnsupportedFactorError
from pymc_dp.factors import Factor, NestedForm, PointForm, strip_casts
from pymc_dp.region_context import plain_free_rv
from pymc_dp.rewrite import rebuild_model
from pymc_dp.rules import rule_info
from pymc_dp.rules.contamination import CONTAMINANTS, Contaminant, ContaminatedNormal, contaminant_of

__all__ = [
    "ContaminationSpec",
    "contaminate",
    "contamination_of",
    "ContaminatedOscillationModel",
    "check_unbounded_domains",
    "apply",
    "estimate_epsilon",
]

#: models built by :func:`contaminate` -> their public spec (weak: the model owns its lifetime)
_SPECS: "weakref.WeakKeyDictionary[pm.Model, ContaminationSpec]" = weakref.WeakKeyDictionary()


@dataclass(frozen=True)
class ContaminationSpec:
    """The public description of a contamination: the rate ``p`` and each factor's ``g``."""

    p: float
    g: tuple[tuple[str, Contaminant], ...]
    mode: str = "model"  # the likelihood is the mixture; the data are not contaminated at run time

    def describe(self) -> str:
        gs = ", ".join(f"{name}: {g.describe()}" for name, g in self.g)
        return f"Huber contamination p = {self.p:g} ({gs}); likelihood (1 - p) f + p g"

    def to_dict(self) -> dict[str, Any]:
        return {"p": self.p, "mode": self.mode, "g": {name: g.to_dict() for name, g in self.g}}


def contamination_of(model: pm.Model) -> ContaminationSpec | None:
    """The :class:`ContaminationSpec` of a model returned by :func:`contaminate`, else None."""
    return _SPECS.get(model)


def _public_contaminant(name: str, dist: Any) -> Contaminant:
    """The :class:`Contaminant` of a ``.dist()`` variable: no free RV, only public constants."""
    if not (isinstance(dist, Variable) and dist.owner is not None and isinstance(dist.owner.op, RandomVariable)):
        raise UnsupportedFactorError(
            f"contaminate: g for factor {name!r} must be a distribution made with .dist() (e.g. "
            f"pm.StudentT.dist(nu=3, mu=0, sigma=1)), got {dist!r}.")
    info = rule_info(dist.owner.op)
    family = info.family if info is not None else type(dist.owner.op).__name__
    if family not in CONTAMINANTS:
        raise UnsupportedFactorError(
            f"contaminate: g for factor {name!r} is a {family}; the certified oscillation is derived for "
            f"{list(CONTAMINANTS)} (heavy-tailed, symmetric, full support).")
    params = dist.owner.op.dist_params(dist.owner)
    values = {}
    for pname, param in zip(info.param_names, params):
        bad = [v for v in ancestors([param]) if v.owner is None and not isinstance(v, Constant)
               and not isinstance(v.type, RandomType)]
        if bad or any(isinstance(v, SharedVariable) for v in ancestors([param])):
            raise UnsupportedFactorError(
                f"contaminate: g for factor {name!r} has a parameter {pname!r} that is not a public constant "
                "(it reads a model variable or a data container); give g numbers only.")
        value = np.asarray(param.eval(), float)
        if value.size != 1:
            raise UnsupportedFactorError(f"contaminate: g for factor {name!r}: {pname} must be a scalar, got shape "
                                         f"{value.shape}.")
        values[pname] = float(value.reshape(()))
    return contaminant_of(family, values)


def contaminate(model: pm.Model, p: float, g: Mapping[str, Any] | Any,
                factors: Sequence[str] | None = None) -> pm.Model:
    """A new model whose chosen factors have the Huber-contaminated likelihood ``(1 - p) f + p g``.

    Parameters
    ----------
    model : pm.Model
        The user's model; not changed.
    p : float
        The public contamination rate, ``0 < p < 1``.
    g : dict or distribution
        Factor name -> a public ``.dist()`` (StudentT, Cauchy, Laplace or Normal with numeric
        parameters), or one ``.dist()`` for every factor in ``factors``.
    factors : sequence of str, optional
        The observed factors to contaminate (default: the keys of ``g``). Each must observe a
        ``pm.Data`` container.

    Returns
    -------
    pm.Model
        A new model; :func:`contamination_of` returns its :class:`ContaminationSpec`.

    Raises
    ------
    UnsupportedFactorError
        ``p`` outside ``(0, 1)``, ``g`` not a public ``.dist()`` of a supported family, or a
        factor that is not an observed RV of a ``pm.Data`` container (the factor is named).
    """
    if not isinstance(model, pm.Model):
        raise TypeError(f"expected a pm.Model, got {type(model).__name__}")
    try:
        p = float(p)
    except (TypeError, ValueError):
        raise UnsupportedFactorError(f"contaminate: p={p!r} is not a number.") from None
    if not 0.0 < p < 1.0:
        raise UnsupportedFactorError(f"contaminate: the contamination rate p={p} must lie in (0, 1).")
    if isinstance(g, Mapping):
        names = list(g) if factors is None else list(factors)
        missing = [n for n in names if n not in g]
        if missing:
            raise UnsupportedFactorError(f"contaminate: no g is given for factor(s) {missing}.")
        gs = {n: g[n] for n in names}
    else:
        if factors is None:
            raise UnsupportedFactorError("contaminate: one g for all factors needs factors=[...] naming them.")
        gs = {n: g for n in factors}
    if not gs:
        raise UnsupportedFactorError("contaminate: no factor to contaminate (g is empty).")
    observed = {rv.name: rv for rv in model.observed_RVs}
    containers = {v.name for v in model.data_vars}
    spec_g = []
    for name, dist in gs.items():
        if name not in observed:
            raise UnsupportedFactorError(
                f"contaminate: {name!r} is not an observed likelihood factor of the model (it has "
                f"{sorted(observed)}).")
        data = strip_casts(model.rvs_to_values[observed[name]])
        if getattr(data, "name", None) not in containers:
            raise UnsupportedFactorError(
                f"contaminate: factor {name!r} does not observe a pm.Data container; wrap the data in "
                "pm.Data so that it is private.")
        if observed[name].owner.op.ndim_supp != 0:
            raise UnsupportedFactorError(f"contaminate: factor {name!r} is multivariate; only scalar families are "
                                         "supported.")
        spec_g.append((name, _public_contaminant(name, dist)))

    fgraph, _ = fgraph_from_model(model)
    nodes = {n.outputs[0].name: n for n in fgraph.apply_nodes if isinstance(n.op, ModelObservedRV)}
    weights = np.array([1.0 - p, p])
    for name, dist in gs.items():
        node = nodes[name]
        rv, data, *dims = node.inputs
        g_sized = change_dist_size(dist, rv.shape)
        mixture = pm.Mixture.dist(w=weights, comp_dists=[rv, g_sized])
        new = model_observed_rv(mixture, data, *dims)
        new.name = node.outputs[0].name
        fgraph.replace(node.outputs[0], new, import_missing=True)
    out = rebuild_model(fgraph)
    _SPECS[out] = ContaminationSpec(p, tuple(spec_g))
    return out


def apply(data: np.ndarray, p: float, g: Any, rng: Any) -> np.ndarray:
    """Run-time contamination of the data by the library: not implemented.

    Raises
    ------
    NotImplementedError
        Always: its amplification ``log(1 + (1 - p)(e^eps - 1))`` is used only once its proof is
        written and checked exactly on a small discrete case (issue 14, item 1); neither is done.
    """
    raise NotImplementedError(
        "run-time contamination (and its amplification) is not implemented: the amplification's proof and its "
        "exact check on a small discrete case are not written yet (issue 14, item 1).")


# --------------------------------------------------------------------------- certification
def _numeric_scalar(expr, ctx) -> float | None:
    value = np.asarray(ctx.numeric(expr), float)
    if value.size == 0 or not np.all(value == value.reshape(-1)[0]):
        return None
    return float(value.reshape(-1)[0])


def contaminated_likelihood(factor: Factor, ctx) -> tuple[ContaminatedNormal, str] | None:
    """``(ContaminatedNormal, free RV name)`` when ``factor`` is ``(1 - p) Normal(v, sigma) + p g``
    with constant weights, ``v`` one free RV (itself, up to casts and broadcasting), ``sigma`` and
    ``g`` public numbers, observing a container with an :class:`~pymc_dp.Interval` domain; else None."""
    if factor.info is None or not isinstance(factor.op, MixtureRV) or factor.observed_container is None:
        return None
    if set(factor.reads) != {factor.observed_container} or len(factor.forms) != 3:
        return None
    w, comp_f, comp_g = factor.forms
    if not (isinstance(w, PointForm) and isinstance(comp_f, NestedForm) and isinstance(comp_g, NestedForm)):
        return None
    if not isinstance(comp_f.op, NormalRV) or not all(isinstance(f, PointForm) for f in comp_f.forms + comp_g.forms):
        return None
    domain = ctx.domains.get(factor.observed_container)
    if not isinstance(domain, Interval) or ctx.free_rvs_of(w.expr):
        return None
    weights = np.asarray(ctx.numeric(w.expr), float).reshape(-1, 2)
    if not np.all(weights == weights[0]) or not math.isclose(weights[0].sum(), 1.0, rel_tol=1e-12):
        return None
    mu_form, sigma_form = comp_f.forms
    name = plain_free_rv(mu_form.expr, ctx)
    if name is None or ctx.free_rvs_of(sigma_form.expr) or any(ctx.free_rvs_of(f.expr) for f in comp_g.forms):
        return None
    sigma = _numeric_scalar(sigma_form.expr, ctx)
    info = rule_info(comp_g.op)
    if sigma is None or info is None or info.family not in CONTAMINANTS:
        return None
    values = {}
    for pname, form in zip(info.param_names, comp_g.forms):
        values[pname] = _numeric_scalar(form.expr, ctx)
        if values[pname] is None:
            return None
    try:
        g = contaminant_of(info.family, values)
        model = ContaminatedNormal(float(weights[0, 1]), sigma, g, domain.lo, domain.hi)
    except PrivacyError:
        return None
    return model, name


class ContaminatedOscillationModel:
    """The oscillation model of a contaminated Normal location factor (the interface of
    :class:`pymc_dp.oscillation.OscillationModel`: ``name``, :meth:`oscillations`,
    :meth:`oscillation`). One record is one element (a 1-d observed container)."""

    #: the search's value is the grid value of the corner pair raised by this relative margin, so
    #: that the certified bound of its final interval (branch and bound to 1e-3) stays below it
    SEARCH_MARGIN = 2e-3

    def __init__(self, factor: Factor, name: str, likelihood: ContaminatedNormal):
        self.factor, self.name, self.likelihood = factor, name, likelihood
        self.attained: float | None = None

    @classmethod
    def build(cls, factor: Factor, ctx) -> "ContaminatedOscillationModel | None":
        """None unless :func:`contaminated_likelihood` recognises the factor and its observed value
        has one axis (one element per record)."""
        found = contaminated_likelihood(factor, ctx)
        if found is None or len(factor.observed.type.shape) != 1:
            return None
        return cls(factor, found[1], found[0])

    def oscillations(self, lo, hi) -> np.ndarray:
        """The search's per-record oscillation over ``[lo[k], hi[k]]`` (a grid value with a margin)."""
        value = self.likelihood.corner_oscillations(lo, hi)
        return value + self.SEARCH_MARGIN * (1.0 + value)

    def oscillation(self, lo: float, hi: float) -> float:
        """The certified oscillation over ``[lo, hi]`` (branch and bound: an upper bound)."""
        upper, lower = self.likelihood.certified_oscillation(float(lo), float(hi))
        self.attained = lower
        return upper


def check_unbounded_domains(factors: Sequence[Factor], domains: Mapping[str, Any], ctx) -> None:
    """Refuse an unbounded :class:`~pymc_dp.Interval` domain unless every factor that reads the
    container is a contaminated Normal location factor (:func:`contaminated_likelihood`), whose
    oscillation is finite on a bounded region of its location."""
    for cname, domain in domains.items():
        if not (isinstance(domain, Interval) and domain.unbounded):
            continue
        readers = [f for f in factors if cname in f.reads]
        bad = [f.name for f in readers if ContaminatedOscillationModel.build(f, ctx) is None]
        if bad:
            raise DomainError(
                f"the domain {domain} of {cname!r} is unbounded; pymc_dp accepts that only for a container "
                f"read by contaminated factors alone (pymc_dp.contaminate: (1 - p) Normal(mu, sigma) + p g, "
                f"sigma a number, g heavier-tailed), and factor(s) {bad} are not. Declare a bounded domain, "
                "or contaminate them.")
        for f in readers:
            found = contaminated_likelihood(f, ctx)
            found[0].check_finite(f"factor {f.name!r}", -1.0, 1.0)
