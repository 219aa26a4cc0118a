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

Run-time contamination (``contaminate(..., at_run_time=True)``): the library itself replaces each
record with probability ``p`` by a fresh draw of ``g`` (:func:`apply`, OS-entropy randomness) just
before it samples, and never stores or releases the contaminated values. The model is then right
about its data, and the release is amplified: an ``eps``-DP release of the contaminated data is
``log(1 + (1 - p)(e^eps - 1))``-DP for the original data (:func:`amplified_epsilon`, proof there
and in ``docs/theory/contamination.md``, checked exactly by enumeration in the tests). The release
driver (:class:`pymc_dp.PrivateModel`) certifies at :func:`inner_epsilon` and charges the amplified
total.

What is not done: a free or truncated Normal scale, location families other than the Normal,
run-time contamination with ``delta > 0``, several private containers or a unit other than one
record (the amplification needs the whole neighbouring unit to be replaced together).

Layering: with the truncation's modules (it rewrites a model as :mod:`pymc_dp.rewrite` does and
reads factors through the region context); :mod:`pymc_dp.oscillation` dispatches to it.
"""

from __future__ import annotations

import dataclasses
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
    "amplified_epsilon",
    "RunTimeContamination",
    "inner_epsilon",
    "estimate_epsilon",
]

#: models built by :func:`contaminate` -> their public spec (weak: the model owns its lifetime)
_SPECS: "weakref.WeakKeyDictionary[pm.Model, ContaminationSpec]" = weakref.WeakKeyDictionary()


@dataclass(frozen=True)
class ContaminationSpec:
    """The public description of a contamination: the rate ``p`` and each factor's ``g``."""

    p: float
    g: tuple[tuple[str, Contaminant], ...]
    #: "model": the likelihood is the mixture, the data are not contaminated; "run time": the
    #: library also contaminates the data before each release (amplification)
    mode: str = "model"

    def describe(self) -> str:
        gs = ", ".join(f"{name}: {g.describe()}" for name, g in self.g)
        run = "; the data are contaminated at run time by the library" if self.mode == "run time" else ""
        return f"Huber contamination p = {self.p:g} ({gs}); likelihood (1 - p) f + p g{run}"

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
                factors: Sequence[str] | None = None, at_run_time: bool = False) -> pm.Model:
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
    at_run_time : bool, default False
        Also contaminate the data: each release replaces every record with probability ``p`` by
        a fresh draw of ``g`` before it samples (never stored or released), and is charged the
        amplified epsilon (:func:`amplified_epsilon`). Needs one private container, declared
        ``Interval(-np.inf, np.inf)`` (``g``'s draws must lie in the domain the certificate
        covers), ``unit="record"`` and ``delta=0``; the release refuses otherwise.

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
    _SPECS[out] = ContaminationSpec(p, tuple(spec_g), "run time" if at_run_time else "model")
    return out


def apply(data: np.ndarray, p: float, g: Contaminant, rng: np.random.Generator | None = None) -> np.ndarray:
    """Run-time contamination: a new array in which every entry is, independently with
    probability ``p``, replaced by a fresh draw of ``g``; ``data`` is not changed.

    ``rng`` is for tests only: by default a generator seeded from the operating system's entropy
    (``np.random.SeedSequence()``), never from a user's seed, so the pattern of replaced records
    cannot be recomputed. The caller must neither store nor release the result.
    """
    p = float(p)
    if not 0.0 < p < 1.0:
        raise PrivacyError(f"contamination rate p={p} must lie in (0, 1).")
    if not isinstance(g, Contaminant):
        raise UnsupportedFactorError(
            f"apply: g={g!r} is not a Contaminant; build it with pymc_dp.rules.contamination.contaminant_of(family, "
            "params), or let contaminate(..., at_run_time=True) do it from a pm.<Dist>.dist(...).")
    rng = np.random.default_rng(np.random.SeedSequence()) if rng is None else rng
    x = np.array(data, dtype=float, copy=True)
    replaced = rng.random(x.shape) < p
    x[replaced] = g.sample(int(replaced.sum()), rng)
    return x


class RunTimeContamination:
    """What a release needs to contaminate its data at run time (built by :meth:`check`).

    ``container``: the one private container; ``g``: its factor's contaminant; ``p``: the rate."""

    def __init__(self, spec: ContaminationSpec, container: str, g: Contaminant):
        self.spec, self.container, self.g, self.p = spec, container, g, spec.p

    @classmethod
    def check(cls, model: pm.Model, *, delta: float, unit: Any, data: Mapping[str, Any],
              public: Sequence[str] = ()) -> "RunTimeContamination | None":
        """None for a model without run-time contamination; else the plan, after refusing what
        the amplification's proof does not cover (before anything is charged)."""
        spec = contamination_of(model)
        if spec is None or spec.mode != "run time":
            return None
        why = None
        private = sorted(v.name for v in model.data_vars if v.name not in set(public))
        if float(delta) != 0.0:
            why = "delta > 0 (the amplification is proved for pure epsilon)"
        elif not (isinstance(unit, str) and unit == "record"):
            why = f"unit={unit!r} (the proof replaces one record; a unit of several records is not replaced together)"
        elif len(private) != 1 or len(spec.g) != 1:
            why = (f"private containers {private} and contaminated factors {[n for n, _ in spec.g]} (the proof needs one "
                   "container, read by one contaminated factor: a record must be replaced whole)")
        if why is None:
            name = private[0]
            domain = data.get(name)
            if not (isinstance(domain, Interval) and domain.lo == -math.inf and domain.hi == math.inf):
                why = (f"the domain {domain} of {name!r}: g's draws lie anywhere, so the certificate must cover every "
                       "value; declare pymc_dp.Interval(-np.inf, np.inf)")
            elif np.ndim(model[name].get_value()) != 1:
                why = f"container {name!r} of shape {np.shape(model[name].get_value())} (one record per entry: a 1-D array)"
        if why is not None:
            raise UnsupportedFactorError(f"run-time contamination (contaminate(..., at_run_time=True)) is not "
                                         f"supported here: {why}. Use at_run_time=False, or change the model.")
        return cls(spec, private[0], spec.g[0][1])

    def contaminated(self, values: np.ndarray, rng: np.random.Generator | None = None) -> np.ndarray:
        """The container's values contaminated afresh (:func:`apply`)."""
        return apply(values, self.p, self.g, rng)

    def amplify(self, certificate):
        """The certificate of the release on contaminated data, stated for the original data:
        ``epsilon`` amplified; ``amplification`` keeps the rate, ``g`` and the epsilon on the
        contaminated data (the per-draw and composition fields are the contaminated data's)."""
        amplification = {"p": self.p, "container": self.container, "g": self.g.describe(),
                         "epsilon_contaminated": float(certificate.epsilon)}
        return dataclasses.replace(certificate, epsilon=amplified_epsilon(certificate.epsilon, self.p),
                                   amplification=amplification)


def amplified_epsilon(epsilon: float, p: float) -> float:
    """``log(1 + (1 - p)(e^eps - 1))``: the loss, for the original data, of an ``eps``-DP release
    run on run-time-contaminated data (each record replaced with probability ``p`` by a draw of ``g``).

    Claim. Let ``M`` be ``eps``-DP under replacing one record, on every dataset of the domain
    (which must contain ``g``'s support), and ``C`` the contamination. Then ``M o C`` is
    ``eps' = log(1 + (1 - p)(e^eps - 1))``-DP under replacing one record.

    Proof. Neighbours ``x, y`` differ in record ``i``. Couple ``C(x)`` and ``C(y)``: the same coin
    for every record and the same draws of ``g``. With ``q = 1 - p``, condition on record ``i``'s
    coin: ``P_x = p Q + q R_x`` and ``P_y = p Q + q R_y``, where ``Q`` is the law of the output when
    record ``i`` is replaced (the same for ``x`` and ``y``: they agree elsewhere) and ``R_x``,
    ``R_y`` the laws when it is kept. Given the other coins and draws, ``R_x`` and ``R_y`` come from
    neighbouring datasets, and so do ``R_x`` and ``Q`` given also ``i``'s draw; mixing over them keeps
    the inequalities: ``R_x <= e^eps R_y`` and ``R_x <= e^eps Q`` on every event. So for any
    ``a`` in ``[0, 1]``, ``R_x <= e^eps (a R_y + (1 - a) Q)``, and with ``a = e^{eps' - eps}``
    (``<= 1``):

        ``P_x <= (p + q e^eps (1 - a)) Q + q e^{eps'} R_y = (p + q e^eps - q e^{eps'}) Q + q e^{eps'} R_y``.

    ``p + q e^eps - q e^{eps'} <= p e^{eps'}`` is ``p + q e^eps <= e^{eps'}``, which is the definition
    of ``eps'``; so ``P_x <= e^{eps'} (p Q + q R_y) = e^{eps'} P_y``. QED. (Balle, Barthe & Gaboardi
    2018 give the same bound for subsampling; it is attained by randomized response with ``g`` a
    point mass on the other value, which the tests check by enumeration.)
    """
    eps, p = float(epsilon), float(p)
    return float(math.log1p((1.0 - p) * math.expm1(eps)))


def inner_epsilon(epsilon: float, p: float) -> float:
    """The inverse of :func:`amplified_epsilon`: the budget a release on contaminated data may
    have so that its amplified loss is ``epsilon``: ``log(1 + (e^eps - 1) / (1 - p))``, rounded
    down by a relative 1e-12 so that amplifying it never exceeds ``epsilon``."""
    eps, p = float(epsilon), float(p)
    inner = math.log1p(math.expm1(eps) / (1.0 - p)) * (1.0 - 1e-12)
    while amplified_epsilon(inner, p) > eps:  # pragma: no cover - float safety
        inner = math.nextafter(inner, 0.0)
    return inner


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
