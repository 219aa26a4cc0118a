"""Noise-aware inference on noisy sufficient statistics: a second private path beside sampling.

For a model whose private data enter only as iid observations of an exponential family, the
posterior depends on the data through a few sums ``T = sum_i t(x_i)``. This mechanism releases
those sums **once**, with Laplace noise from OpenDP (sensitivity from the declared domains), and
then infers in PyMC with the noise in the model: the noisy statistic is observed around the
latent true statistic, whose law given the parameters is exact (Binomial, Poisson, Normal and
scaled chi-square sums) -- so the posterior is the exact posterior given what was released
(Bernstein & Sheldon, NeurIPS 2018), and any number of draws is post-processing. Noisy
sufficient statistics are asymptotically efficient, which one posterior draw is not (Foulds,
Geumlek, Welling & Chaudhuri, UAI 2016).

Supported factors (one per private container, observed directly, parameters the same for every
record and reading no private data; any priors, any expressions of free RVs as parameters):

=========================  ==========================  =======================================
family (domain)            statistics                  law of the statistic given parameters
=========================  ==========================  =======================================
Bernoulli(p) (Binary)      sum x                       Binomial(n, p), summed exactly
Binomial(m, p) (0..m)      sum x                       Binomial(n m, p), summed exactly
Poisson(mu) (0..U)         sum x                       Poisson(n mu), summed exactly
Normal(mu, sigma public)   sum x                       Normal(n mu, sqrt(n) sigma), latent
Normal(mu, sigma free)     sum x, sum x^2              sum x as above; sum x^2 = Q + (sum x)^2/n,
                                                       Q ~ sigma^2 chi^2_{n-1} independent
=========================  ==========================  =======================================

A count statistic is summed over the values the domain allows (``0 .. n x hi``): exactly the
model's law for Bernoulli and for Binomial with ``hi = m``, and the model's law restricted to
those sums where the domain caps the counts (Poisson, ``hi < m``). A count statistic whose
largest value exceeds ``EXACT_SUM_LIMIT`` is given a latent Normal of the same mean and
variance instead: the release says which.

Privacy map. Replacing one record changes ``sum_i t_j(x_i)`` by at most ``span_j``, the range of
``t_j`` over one record's domain (times the elements of a record, times the rows of a user for
``unit=Users(m)``): ``Delta_j``. The spans of different statistics are attained by different
changes (``x`` from ``-a`` to ``a`` moves ``sum x`` by its span and ``sum x^2`` by nothing), so
the release is calibrated to ``K``, a certified bound on ``sum_j |change_j| / Delta_j`` over one
change (:mod:`pymc_dp.mechanisms.sensitivity`; ``K <= d``, the number of statistics, which
basic composition would use): Laplace with scale ``Delta_j K / epsilon`` on each statistic
gives ``epsilon``. ``delta > 0`` (Gaussian noise) is not implemented.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import numbers
import warnings
from typing import Any, Callable, Collection, Mapping, Sequence

import arviz as az
import numpy as np
import pymc as pm
import pytensor.tensor as pt
from pytensor.graph.replace import graph_replace
from pytensor.graph.traversal import ancestors
from pytensor.tensor.random.basic import BernoulliRV, BinomialRV, NormalRV, PoissonRV

from pymc_dp.certification import check_budget as _check_budget
from pymc_dp.certification import check_containers
from pymc_dp.chunks import check_values, summed
from pymc_dp.domains import Domain, Integers, Interval
from pymc_dp.exceptions import DomainError, PrivacyError, UnsupportedFactorError
from pymc_dp.ledger import Ledger
from pymc_dp.mechanisms.base import Mechanism, build_model, charge
from pymc_dp.mechanisms.noise import (
    continuous_gaussian,
    continuous_laplace,
    discrete_gaussian,
    discrete_laplace,
    gaussian_log_ratio,
    gaussian_scale,
    laplace_log_ratio,
    opendp_version,
)
from pymc_dp.preprocess import dataset_id
from pymc_dp.release import check_ledger, ledger_state, publish
from pymc_dp.rewrite import without_initvals
from pymc_dp.sampling import rhat_by_variable
from pymc_dp.units import Users, as_unit, describe_unit
from pymc_dp.version import software_versions

__all__ = ["noise_free_model", "with_initvals", "NoisyStatistics", "StatisticsFactor", "EXACT_SUM_LIMIT", "ReadsPrivateCovariates", "square_span"]

#: largest value of a count statistic whose law is summed exactly (above: a latent Normal)
EXACT_SUM_LIMIT = 50_000

SUPPORTED = "Bernoulli(p), Binomial(n, p), Poisson(mu), Normal(mu, sigma)"


# =========================================================================== statistics per family
@dataclasses.dataclass(frozen=True)
class Statistic:
    """One released sum ``sum_i t(x_i)`` and its replace-one sensitivity per record element."""

    name: str
    integer: bool
    span: float  # range of t over one element's domain
    #: t as a product of the record's coordinates: ``(i,)`` for x_i, ``(i, k)`` for x_i x_k
    term: tuple[int, ...] = (0,)


@dataclasses.dataclass(frozen=True)
class FamilyStatistics:
    """A factor's sufficient statistics: what is summed, and the law of the sums given the
    parameters (added to a PyMC model as the noise-aware likelihood)."""

    factor: str
    container: str
    statistics: tuple[Statistic, ...]
    #: per-record statistics of a chunk of rows: array (rows, ...) -> (len(statistics),) sums
    summarise: Callable[[np.ndarray], np.ndarray]
    #: adds the noise-aware likelihood: (params, n_elements, noisy, scales, prefix) -> law text
    add_law: Callable[..., str]


@functools.singledispatch
def family_statistics(op, factor: str, container: str, params: tuple, domain: Domain) -> FamilyStatistics:
    """The sufficient statistics of a factor of ``op``'s family (singledispatch on the RV Op)."""
    raise UnsupportedFactorError(
        f"factor {factor!r} ({type(op).__name__.removesuffix('RV')}) has no noisy-statistics rule; "
        f"pymc_dp.noisy_statistics supports {SUPPORTED}. Use pymc_dp.make_private (posterior sampling) "
        "for this model."
    )


@functools.singledispatch
def factor_params(op, node) -> tuple:
    """A factor's parameters as its family's rule reads them: ``op.dist_params(node)`` (a
    SymbolicRandomVariable such as PyMC's ``CensoredRV`` registers its own reading)."""
    return tuple(op.dist_params(node))


def _integer_domain(factor: str, container: str, domain: Domain, lo_min: int, hi_max: float, family: str) -> Integers:
    if not isinstance(domain, Integers) or domain.lo < lo_min or domain.hi > hi_max:
        top = "" if math.isinf(hi_max) else f", hi <= {int(hi_max)}"
        raise DomainError(
            f"factor {factor!r} ({family}) observes {container!r}, declared {domain}; its sufficient "
            f"statistic needs an integer domain Integers(lo, hi) with lo >= {lo_min}{top}."
        )
    if domain.hi == domain.lo:
        raise DomainError(f"{container!r} is declared {domain}: a single value holds nothing private to release.")
    return domain


def observe_noisy(name: str, latent, scale, observed, noise: str):
    """The released value observed around its latent true value: Laplace(scale) noise for a pure
    release, Normal(scale) for a Gaussian one (delta > 0)."""
    if noise == "gaussian":
        return pm.Normal(name, mu=latent, sigma=scale, observed=observed)
    return pm.Laplace(name, mu=latent, b=scale, observed=observed)


def _count_law(dist_of_total: Callable, mean_var: Callable, label: str):
    """The law of a count statistic: exact sum over its values, or a latent Normal above the limit."""

    def add_law(params, n_elements, noisy, scales, prefix, top, noise="laplace"):
        (z,), (b,) = noisy, scales
        total = dist_of_total(params, n_elements)
        if top <= EXACT_SUM_LIMIT:
            k = np.arange(int(top) + 1)
            if noise == "gaussian":  # discrete Gaussian pmf of z - k: exp(-(z - k)^2 / 2b^2) / normaliser
                j = np.arange(-int(40 * b) - 2, int(40 * b) + 3)
                log_noise = -((z - k) ** 2) / (2 * b * b) - float(np.log(np.sum(np.exp(-(j**2) / (2 * b * b)))))
            else:  # discrete Laplace pmf of the noise z - k: tanh(1 / 2b) exp(-|z - k| / b)
                log_noise = math.log(math.tanh(0.5 / b)) - np.abs(z - k) / b
            pm.Potential(f"{prefix}noisy_sum", pm.math.logsumexp(pm.logp(total, k) + log_noise))
            return f"{label}, summed exactly over its values 0..{int(top)}"
        mean, var = mean_var(params, n_elements)
        latent = pm.Normal(f"{prefix}sum", mean, pt.sqrt(var))
        observe_noisy(f"{prefix}noisy_sum", latent, b, z, noise)
        return f"{label}, by a latent Normal of the same mean and variance (its largest value {int(top)} > {EXACT_SUM_LIMIT})"

    return add_law


def _count_statistics(factor: str, container: str, dom: Integers, law) -> FamilyStatistics:
    """A count factor's one statistic, ``sum x`` (span ``hi - lo``), summed over ``0 .. n hi``."""
    return FamilyStatistics(
        factor, container, (Statistic(f"sum({container})", True, float(dom.hi - dom.lo)),),
        lambda x: np.array([np.sum(x, dtype=np.int64)]),
        lambda ps, n, z, b, prefix, noise="laplace": law(ps, n, z, b, prefix, n * dom.hi, noise),
    )


@family_statistics.register(BernoulliRV)
def _bernoulli(op, factor, container, params, domain):
    dom = _integer_domain(factor, container, domain, 0, 1, "Bernoulli")
    (p,) = params
    law = _count_law(lambda ps, n: pm.Binomial.dist(n=n, p=ps[0]),
                     lambda ps, n: (n * ps[0], n * ps[0] * (1 - ps[0])), "sum x ~ Binomial(n, p)")
    return _count_statistics(factor, container, dom, law)


@family_statistics.register(BinomialRV)
def _binomial(op, factor, container, params, domain):
    trials, p = params
    if _reads_free_rv(trials):
        raise UnsupportedFactorError(f"factor {factor!r} (Binomial): its number of trials n must be a public constant.")
    m = np.asarray(trials.eval())
    if m.size != 1:
        raise UnsupportedFactorError(f"factor {factor!r} (Binomial): n must be one number for every record, got shape {m.shape}.")
    m = int(m.reshape(()))
    dom = _integer_domain(factor, container, domain, 0, m, "Binomial")
    law = _count_law(lambda ps, n: pm.Binomial.dist(n=n * m, p=ps[1]),
                     lambda ps, n: (n * m * ps[1], n * m * ps[1] * (1 - ps[1])), f"sum x ~ Binomial(n x {m}, p)")
    return _count_statistics(factor, container, dom, law)


@family_statistics.register(PoissonRV)
def _poisson(op, factor, container, params, domain):
    dom = _integer_domain(factor, container, domain, 0, math.inf, "Poisson")
    law = _count_law(lambda ps, n: pm.Poisson.dist(mu=n * ps[0]), lambda ps, n: (n * ps[0], n * ps[0]),
                     "sum x ~ Poisson(n mu)")
    return _count_statistics(factor, container, dom, law)


def square_span(lo: float, hi: float) -> float:
    """The range of ``x**2`` over ``[lo, hi]`` (the span of a sum of squares' one-record change)."""
    low = 0.0 if lo <= 0.0 <= hi else min(lo * lo, hi * hi)
    return max(lo * lo, hi * hi) - low


@family_statistics.register(NormalRV)
def _normal(op, factor, container, params, domain):
    if not isinstance(domain, Interval):
        raise DomainError(f"factor {factor!r} (Normal) observes {container!r}, declared {domain}; declare Interval(lo, hi).")
    mu, sigma = params
    free_scale = _reads_free_rv(sigma)
    stats = [Statistic(f"sum({container})", False, domain.hi - domain.lo)]
    if free_scale:
        stats.append(Statistic(f"sum({container}^2)", False, square_span(domain.lo, domain.hi), (0, 0)))

    def summarise(x):
        x = np.asarray(x, float)
        return np.array([x.sum(), np.square(x).sum()]) if free_scale else np.array([x.sum()])

    def add_law(ps, n, z, b, prefix, noise="laplace"):
        mu_, sigma_ = ps
        # non-centred: sum x = n mu + sqrt(n) sigma e, e ~ N(0, 1)
        e = pm.Normal(f"{prefix}sum_std", 0.0, 1.0)
        s1 = n * mu_ + math.sqrt(n) * sigma_ * e
        observe_noisy(f"{prefix}noisy_sum", s1, b[0], z[0], noise)
        if not free_scale:
            return "sum x ~ Normal(n mu, sqrt(n) sigma) (latent)"
        if n < 2:
            raise UnsupportedFactorError(f"factor {factor!r}: a free scale needs at least 2 observations.")
        # sum x^2 = Q + (sum x)^2 / n, Q = sigma^2 chi2_{n-1} independent of sum x (Cochran)
        g = pm.ChiSquared(f"{prefix}centred_ss_std", nu=n - 1)
        observe_noisy(f"{prefix}noisy_sum_sq", sigma_**2 * g + s1**2 / n, b[1], z[1], noise)
        return ("sum x ~ Normal(n mu, sqrt(n) sigma), sum x^2 = sigma^2 chi2(n - 1) + (sum x)^2 / n, "
                "independent (latent, exact)")

    return FamilyStatistics(factor, container, tuple(stats), summarise, add_law)


# =========================================================================== reading the model
def _reads_free_rv(var) -> bool:
    """Whether ``var`` depends on a random variable (a free parameter) rather than on public
    constants and containers only."""
    from pytensor.tensor.random.op import RandomVariable

    return any(a.owner is not None and isinstance(a.owner.op, RandomVariable) for a in ancestors([var]))


@dataclasses.dataclass(frozen=True)
class StatisticsFactor:
    name: str
    container: str
    op: Any
    params: tuple
    family: FamilyStatistics
    elements: int  # elements of one record
    covariates: tuple[str, ...] = ()  # other private containers the factor reads (a regression)


class ReadsPrivateCovariates(UnsupportedFactorError):
    """A factor's parameter reads private data: not an iid family (perhaps a regression)."""


def _read_factors(model: pm.Model, domains: Mapping[str, Domain]) -> list[StatisticsFactor]:
    from pymc_dp.factors import private_ancestors, strip_casts

    private = {v: v.name for v in model.data_vars if v.name in domains}
    by_name = {v.name: v for v in private}
    factors, observed = [], {}
    for rv in model.observed_RVs:
        reads = private_ancestors(model.rvs_to_values[rv], private)
        if not reads:
            continue
        value = strip_casts(model.rvs_to_values[rv])  # PyMC casts the data to the RV's dtype
        if value not in private:
            raise UnsupportedFactorError(
                f"factor {rv.name!r} observes an expression of the private data {sorted(set(reads))}; "
                "pymc_dp.noisy_statistics needs the pm.Data container itself as the observed value."
            )
        if value.name in observed:
            raise UnsupportedFactorError(
                f"the private container {value.name!r} is observed by two factors ({observed[value.name]!r}, "
                f"{rv.name!r}); noisy_statistics releases the statistics of one factor per container."
            )
        observed[value.name] = rv.name
        node = rv.owner
        params = factor_params(node.op, node)
        for p in params:
            hit = private_ancestors(p, private)
            if hit:
                raise ReadsPrivateCovariates(
                    f"factor {rv.name!r}: a parameter reads the private data {sorted(set(hit))} (a regression "
                    "on private covariates), which the iid families do not cover."
                )
            if p.type.ndim and not all(p.type.broadcastable):
                raise UnsupportedFactorError(
                    f"factor {rv.name!r}: its parameters differ between records (shape {tuple(p.type.shape)}); "
                    "noisy_statistics needs iid records (one parameter value for every record)."
                )
        family = family_statistics(node.op, rv.name, value.name, params, domains[value.name])
        shape = np.asarray(by_name[value.name].get_value()).shape
        elements = int(np.prod(shape[1:])) if len(shape) > 1 else 1
        factors.append(StatisticsFactor(rv.name, value.name, node.op, params, family, elements))
    unobserved = sorted(set(domains) - set(observed))
    if unobserved:
        raise UnsupportedFactorError(
            f"private container(s) {unobserved} are not the observed value of a factor; noisy_statistics "
            f"releases the sufficient statistics of observed iid data ({SUPPORTED})."
        )
    for v in model.free_RVs + model.deterministics + model.potentials:
        hit = private_ancestors(v, private)
        if hit:
            raise UnsupportedFactorError(
                f"{v.name!r} reads the private data {sorted(set(hit))}; only the observed factors may read it."
            )
    return factors


def noise_free_model(model: pm.Model, factors: Collection[str], private: Collection[str]) -> tuple[pm.Model, dict, dict]:
    """A new model: the user's without the factors named ``factors``, the private containers
    ``private`` and the Deterministics that read them (a logistic regression's ``p``: never
    released); the map from the user's variables to the new model's; and the user's initial
    values of the variables kept (an ordered mixture's locations), which the sampler is given:
    as the new model's own they would make it unclonable (``fgraph_from_model`` refuses them, so
    they are lifted during the conversion and put back). Never mutated."""
    from pymc.model.fgraph import fgraph_from_model, model_from_fgraph

    from pymc_dp.factors import private_ancestors

    with without_initvals(model) as initvals:
        fg, _ = fgraph_from_model(model)
    containers = {v: v.name for v in model.data_vars if v.name in private}
    drop = set(factors) | set(private) | {d.name for d in model.deterministics if private_ancestors(d, containers)}
    for i in reversed(range(len(fg.outputs))):
        if fg.outputs[i].name in drop:
            fg.remove_output(i)
    new = model_from_fgraph(fg, mutate_fgraph=True)
    replace = {v: new[v.name] for v in model.free_RVs + model.deterministics + model.data_vars if v.name not in drop}
    starts = {rv.name: np.asarray(v) for rv, v in initvals.items() if v is not None and rv.name not in drop}
    return new, replace, starts


def with_initvals(sample_kwargs: dict, initvals: Mapping[str, np.ndarray]) -> dict:
    """``sample_kwargs`` with the user's initial values (:func:`noise_free_model`) under the
    caller's own ``initvals``."""
    if initvals:
        sample_kwargs["initvals"] = {**initvals, **(sample_kwargs.get("initvals") or {})}
    return sample_kwargs


# =========================================================================== the mechanism
#: chains whose rank-normalised R-hat reaches this disagree (ArviZ's and Vehtari et al.'s threshold)
RHAT_WARN = 1.01


def warn_if_chains_disagree(posterior, names) -> float | None:
    """Warn when the chains of a noise-aware posterior disagree; return the largest R-hat.

    The noise-aware posterior is post-processing of the released statistics, so its draws, and
    diagnostics computed from them, are public; but a posterior whose chains did not converge
    is not the posterior the release describes. ``pm.sample``'s own checks are off here (they
    print to the log), so the release says it: a ``UserWarning`` naming the variables, with the
    remedy (more ``tune``, more chains; further draws are free). With one chain, or chains too
    short for R-hat (fewer than 4 draws), nothing is said.
    """
    if posterior.sizes.get("chain", 1) < 2 or posterior.sizes.get("draw", 0) < 4:
        return None
    worst = rhat_by_variable(posterior, names)
    largest = max(worst.values(), default=1.0)
    if largest >= RHAT_WARN:
        bad = ", ".join(f"{k} {v:.3g}" for k, v in sorted(worst.items(), key=lambda kv: -kv[1]) if v >= RHAT_WARN)
        warnings.warn(
            f"the chains of the noise-aware posterior disagree (R-hat {bad}; below {RHAT_WARN} is expected): these "
            "draws may not be the posterior the release describes. Sample again with more tune= (e.g. 2000) and "
            "chains; the noisy statistics are already released, so further draws cost no privacy.",
            UserWarning,
            stacklevel=3,
        )
    return largest


class NoisyStatistics(Mechanism):
    """Laplace-noised sufficient statistics, released once, and noise-aware posterior draws.

    Build with :func:`noisy_statistics`. :meth:`sample` charges ``epsilon`` to the ledger at the
    first call (before the private data are read), releases the noisy statistics, and draws
    from the posterior given them with ``pm.sample`` (its keyword arguments pass through);
    later calls reuse the released statistics and charge nothing (post-processing).

    Privacy proof
    -------------
    *Claim.* The released statistics are ``(epsilon, 0)``-DP for the privacy unit; every
    posterior draw is post-processing of them.

    1. A unit changes at most ``d`` of the statistics (``unit="record"``: all of them;
       ``"attribute"``: those of one container; :class:`~pymc_dp.Users` ``(m)``: all, each by
       ``m`` rows). Statistic ``j`` is ``sum_i t_j(x_i)``; replacing one record's value ``x``
       by ``x'`` (both in the domain) changes it by ``|t_j(x) - t_j(x')| <= span_j`` times the
       elements of a record (``span_j`` = the range of ``t_j`` on the domain), times ``m``.
    2. Jointly, ``sum_j |change_j| / Delta_j <= K`` over one unit's change, ``K`` certified by
       interval branch and bound (:func:`~pymc_dp.mechanisms.sensitivity.joint_bound`; the
       containers' statistics read disjoint coordinates, so their bounds add, and one
       container's is the attribute unit's). ``K <= d``.
    3. Statistic ``j`` receives Laplace noise of scale ``b_j = Delta_j K / epsilon`` (OpenDP:
       discrete Laplace for integer sums, floating-point-safe Laplace otherwise; OpenDP's map
       is checked on the vector of statistics over their ``Delta_j``, of L1 sensitivity ``K``).
       The log-density ratio of the release on neighbours is at most
       ``sum_j |change_j| / b_j <= epsilon``. Unchanged statistics cost nothing.
    4. The model, the priors, ``n`` (public under replacement), the domains and the noise scales
       are public; the posterior given the noisy statistics uses nothing else.
    """

    name = "noisy_statistics"
    #: ``pm.sample``'s ``init`` when the caller gives none (None: PyMC's default); a public choice
    #: of the sampler that depends on the model's structure only
    default_init: str | None = None
    algorithm = ("noise-aware inference on Laplace-noised sufficient statistics "
                 "(Bernstein & Sheldon 2018; Foulds et al. 2016)")

    def __init__(
        self,
        model,
        *,
        epsilon: float,
        data: Mapping[str, Domain],
        delta: float = 0.0,
        unit: str | Users = "record",
        public: Sequence[str] = (),
        values: Mapping[str, Any] | None = None,
        ledger: Ledger | None | str = "default",
        weights: Mapping[str, float] | None = None,
    ):
        model = build_model(model)
        _check_budget(epsilon, delta, 1, unit, None)
        self._ledger_arg = check_ledger(ledger)
        self.model = model
        self.epsilon, self.delta, self.unit = float(epsilon), float(delta), as_unit(unit)
        #: "laplace" (pure epsilon-DP) or "gaussian" (delta > 0: (epsilon, delta)-DP)
        self.noise = "gaussian" if self.delta > 0 else "laplace"
        if self.noise == "gaussian":
            self.algorithm = self.algorithm.replace("Laplace", "Gaussian")
        self.draws = 0
        values = dict(values or {})
        unknown = sorted(set(values) - set(data))
        if unknown:
            raise DomainError(f"values= names {unknown}, which are not private containers with a declared domain.")
        # the containers' own values unless values= gives a (larger, chunked or Dask) stand-in
        in_model = {v.name: v for v in model.data_vars}
        for name in values:
            if name not in in_model:
                raise DomainError(f"values= names {name!r}, which is not a pm.Data container of the model.")
        # the containers in the model are validated too (a stand-in must lie in the domain)
        self.domains, self.public = check_containers(model, data, public)
        self._values = {k: (values[k] if k in values else np.asarray(in_model[k].get_value())) for k in self.domains}
        self.factors = self._read(model, self.domains)
        self.reads = tuple(sorted({c for f in self.factors for c in (f.container, *f.covariates)}))
        self.weights = self._check_weights(weights)
        self.rows = {k: check_values(k, v, self.domains[k]) for k, v in self._values.items()}
        if len(set(self.rows.values())) > 1 and describe_unit(unit)["kind"] != "attribute":
            raise DomainError(f"the private containers have different numbers of rows {self.rows}; a record is one row of each.")
        if isinstance(unit, Users):
            unit.check_rows(next(iter(self.rows.values())))
        self.rows_per_unit = describe_unit(unit)["max_rows"]
        self.statistics, self.sensitivity, self.noise_scales, self.derivation = self._calibrate()
        # the ledger's name of the dataset: the same data share one budget with make_private
        self.dataset_id = dataset_id(self._values, self.domains, unit)
        self._noise_free, self._replace, self._initvals = noise_free_model(model, [f.name for f in self.factors], self.domains)
        self.released: dict[str, float] | None = None
        self.last_release: az.InferenceData | None = None
        self.laws: dict[str, str] = {}

    def _check_weights(self, weights: Mapping[str, float] | None) -> dict[str, float]:
        """Each released statistic's share of the budget (1 for every statistic unless given):
        statistic ``j`` gets noise of scale ``Delta_j K_w / (w_j epsilon)``. Public: chosen
        before the data are read, and stated in the release."""
        names = [s.name for f in self.factors for s in f.family.statistics]
        weights = dict(weights or {})
        unknown = sorted(set(weights) - set(names))
        if unknown:
            raise PrivacyError(f"weights= names {unknown}, which are not released statistics; they are {names}.")
        for k, w in weights.items():
            if isinstance(w, bool) or not isinstance(w, numbers.Real) or not (math.isfinite(w) and w > 0):
                raise PrivacyError(f"weights[{k!r}]={w!r} must be a finite number > 0 (a statistic's share of the budget).")
        return {k: float(weights.get(k, 1.0)) for k in names}

    def _read(self, model: pm.Model, domains: Mapping[str, Domain]) -> list[StatisticsFactor]:
        """The factors whose statistics are released (a subclass reads other structures)."""
        return _read_factors(model, domains)

    def _statistic_reads(self) -> dict[str, frozenset]:
        """Each statistic's name -> the private containers it reads."""
        return {s.name: frozenset({f.container}) for f in self.factors for s in f.family.statistics}

    def _joint(self, kind: str) -> tuple[float, float, int]:
        """``(K, attained, d)``: a certified bound ``K`` on ``sup sum_j w_j |Delta t_j| / span_j``
        over one unit's change (:func:`~pymc_dp.mechanisms.sensitivity.joint_bound`), the value a change attains, and the number ``d`` of statistics it can
        move (``K <= sum_j w_j``, which is ``d`` with unit weights)."""
        from pymc_dp.mechanisms.sensitivity import joint_bound

        per = {}
        for f in self.factors:
            st = f.family.statistics
            if getattr(f.family, "joint_bound", None) is not None:  # a family that derives its own K by cases
                per[f.container] = f.family.joint_bound([self.weights[s.name] for s in st])
                continue
            if len(st) == 1:
                w = self.weights[st[0].name]
                per[f.container] = (w, w, 1)
                continue
            dom = self.domains[f.container]
            up, low = joint_bound([s.term for s in st], [s.span for s in st], [dom.lo], [dom.hi],
                                  weights=[self.weights[s.name] for s in st])
            per[f.container] = (up, low, len(st))
        if kind == "attribute":  # the containers' statistics are disjoint: the worst container
            return max(per.values())
        return tuple(sum(v[i] for v in per.values()) for i in range(3))  # disjoint coordinates add

    # ------------------------------------------------------------------ calibration
    def _calibrate(self):
        kind = describe_unit(self.unit)["kind"]
        m = self.rows_per_unit
        K, attained, d = self._joint(kind)
        # Gaussian: each normalised change a_j = w_j |dt_j| / Delta_j is at most w_j and they sum to
        # at most K, so the L2 norm of the normalised change is at most sqrt(max_j w_j K)
        # (sum a_j^2 <= max a_j sum a_j)
        K2 = math.sqrt(max(self.weights.values(), default=1.0) * K)
        unit_scale = K / self.epsilon if self.noise == "laplace" else gaussian_scale(K2, self.epsilon, self.delta)
        stats, sens, scales = [], {}, {}
        for f in self.factors:
            for s in f.family.statistics:
                delta_j = s.span * f.elements * m
                stats.append((f, s))
                sens[s.name] = delta_j
                w = self.weights[s.name]
                scales[s.name] = delta_j / w * unit_scale
                if s.integer and self.noise == "laplace":  # one statistic per count factor: its own map is the release's
                    discrete_laplace(np.zeros(0, np.int64), scales[s.name], sensitivity=delta_j, epsilon=self.epsilon * w / K)
        # the release as one vector of the statistics over their sensitivities: L1 change <= K (L2 <= sqrt K)
        if self.noise == "laplace":
            continuous_laplace(np.zeros(0), unit_scale, sensitivity=K, epsilon=self.epsilon)
        else:
            continuous_gaussian(np.zeros(0), unit_scale, sensitivity=K2, epsilon=self.epsilon, delta=self.delta)
        unit_text = {"record": "one record changes every statistic", "attribute": "one container's value changes its own statistics"}
        per_statistic = (
            f"{unit_text.get(kind, f'a user of up to {m} rows changes every statistic')}; statistic j changes by at "
            "most Delta_j = span_j x elements per record" + (f" x {m} rows" if m > 1 else "")
            + ": " + ", ".join(f"{k}: {v:g}" for k, v in sens.items())
        )
        weighted = any(w != 1.0 for w in self.weights.values())
        # how K was found: a family's own bound (exact by cases), else the certified solver
        how = ("certified: " + "; ".join(
            [f"{f.name!r}: exact by cases ({type(f.family).__name__})" for f in self.factors
             if getattr(f.family, "joint_bound", None) is not None]
            + (["the others: exact reduction to a concave quadratic, else interval branch and bound"]
               if any(getattr(f.family, "joint_bound", None) is None and len(f.family.statistics) > 1 for f in self.factors)
               else [])))
        if how == "certified: ":
            how = "certified: exact reduction to a concave quadratic, else interval branch and bound"
        if weighted:
            per_statistic += "; the statistics' shares of the budget (weights w_j): " + ", ".join(
                f"{k}: {w:g}" for k, w in self.weights.items())
        if self.noise == "laplace" and weighted:
            derivation = per_statistic + (
                f". Jointly, sum_j w_j |change_j| / Delta_j <= K = {K:.6g} over one change ({how}; "
                f"a change attains {attained:.6g}; the sum of the weights would bound it by "
                f"{sum(self.weights.values()):g}), so Laplace scales b_j = Delta_j K / (w_j epsilon) give epsilon"
            )
        elif self.noise == "laplace":
            derivation = per_statistic + (
                f". Jointly, sum_j |change_j| / Delta_j <= K = {K:.6g} over one change ({how}; "
                f"a change attains {attained:.6g}; basic composition over the d = {d} statistics would use "
                f"{d}), so Laplace scales b_j = Delta_j K / epsilon give epsilon"
            )
        else:
            derivation = per_statistic + (
                f". Each w_j |change_j| / Delta_j <= w_j and their sum is <= K = {K:.6g} (certified), so their L2 norm "
                f"is <= sqrt(max_j w_j K) = {K2:.6g}; Gaussian scales Delta_j s / w_j with s = {unit_scale:.6g}, the least scale whose "
                f"OpenDP map (rho-zCDP, rho = {K2:.4g}^2 / 2s^2, converted) gives (epsilon, delta) = "
                f"({self.epsilon:g}, {self.delta:g})"
            )
        self.joint = {"K": K, "attained": attained, "d": d, "l2": K2}
        return stats, sens, scales, derivation

    # ------------------------------------------------------------------ the private step
    def _true_statistics(self, values: Mapping[str, Any]) -> dict[str, float]:
        out = {}
        for f in self.factors:
            sums = summed(values[f.container], f.family.summarise)
            for s, v in zip(f.family.statistics, np.asarray(sums).reshape(-1)):
                out[s.name] = int(v) if s.integer else float(v)
        return out

    def _noisy(self, true: Mapping[str, float], runs: int | None = None) -> dict[str, np.ndarray]:
        out = {}
        integer, real = (discrete_laplace, continuous_laplace) if self.noise == "laplace" else (discrete_gaussian, continuous_gaussian)
        for f, s in self.statistics:
            v = np.full(1 if runs is None else runs, true[s.name])
            if s.integer:
                out[s.name] = integer(v.astype(np.int64), self.noise_scales[s.name])
            else:
                out[s.name] = real(v.astype(float), self.noise_scales[s.name])
        return out

    def release_statistics(self) -> dict[str, float]:
        """Charge ``epsilon`` and release the noisy statistics (once; later calls return them)."""
        if self.released is not None:
            return dict(self.released)
        with charge(self):
            noisy = self._noisy(self._true_statistics(self._values))
            self.released = {k: (int(v[0]) if v.dtype.kind in "iu" else float(v[0])) for k, v in noisy.items()}
        return dict(self.released)

    # ------------------------------------------------------------------ noise-aware model
    def noise_aware_model(self) -> pm.Model:
        """The user's priors and public parts, with each noisy statistic observed around the law
        of its true statistic (releases the statistics first if needed). A new ``pm.Model``."""
        released = self.release_statistics()
        from pymc.model.fgraph import clone_model

        new = clone_model(self._noise_free)
        replace = {old: new[var.name] for old, var in self._replace.items()}
        laws = {}
        with new:
            for f in self.factors:
                # one value for every record (checked): as a scalar
                params = [pt.reshape(q, ()) if q.type.ndim else q for q in graph_replace(list(f.params), replace, strict=False)]
                names = [s.name for s in f.family.statistics]
                n = self.rows[f.container] * f.elements
                laws[f.name] = f.family.add_law(
                    params, n, [released[k] for k in names], [self.noise_scales[k] for k in names], f"_nss_{f.container}_",
                    noise=self.noise,
                )
        self.laws = laws
        return new

    def sample(self, draws: int = 1000, *, random_seed: Any = None, **sample_kwargs: Any) -> az.InferenceData:
        """Release the noisy statistics (charging ``epsilon`` at the first call only), then draw
        from the noise-aware posterior with ``pm.sample(draws=draws, **sample_kwargs)``.

        Returns an ``az.InferenceData`` with the posterior of the user's free RVs and
        Deterministics (the latent statistics are left out), ``sample_stats``, and
        ``attrs["pymc_dp"]``: the noisy statistics, their noise, sensitivity and law, the ledger.
        """
        if isinstance(draws, bool) or not isinstance(draws, numbers.Integral) or draws < 1:
            raise ValueError(f"draws={draws!r} must be an integer >= 1")
        charged_now = self.released is None
        model = self.noise_aware_model()
        # what the noise-free model kept: the free RVs and the Deterministics that read no private data
        keep = [v.name for v in self.model.free_RVs + self.model.deterministics if v.name in self._noise_free.named_vars]
        sample_kwargs.setdefault("progressbar", False)
        sample_kwargs.setdefault("compute_convergence_checks", False)
        dense = self.default_init is not None and "init" not in sample_kwargs
        if dense:
            sample_kwargs["init"] = self.default_init
        with model, warnings.catch_warnings():
            if dense:  # PyMC calls its full-matrix adaptation experimental; the choice is ours, so say it once in the docs
                warnings.filterwarnings("ignore", message="QuadPotentialFullAdapt is an experimental feature")
            idata = pm.sample(draws=int(draws), random_seed=random_seed, var_names=keep,
                              **with_initvals(sample_kwargs, self._initvals))
        self.draws = int(idata.posterior.sizes["chain"] * idata.posterior.sizes["draw"])
        warn_if_chains_disagree(idata.posterior, [v.name for v in self.model.free_RVs])
        keep_groups = {g: getattr(idata, g) for g in ("posterior", "sample_stats") if g in idata.groups()}
        release = {
            "chains": int(idata.posterior.sizes["chain"]),
            "draws_per_chain": int(idata.posterior.sizes["draw"]),
            "charged": charged_now,
            "ledger": ledger_state(self.ledger, self.dataset_id),
        }
        # the statistics were charged when released; these draws are post-processing
        return publish(self, keep_groups, {**self._public(), "release": release})

    def _public(self) -> dict:
        return {
            "mechanism": self.name,
            "algorithm": self.algorithm,
            "epsilon": self.epsilon,
            "delta": self.delta,
            "draws": self.draws,
            "unit": describe_unit(self.unit)["kind"],
            "rows_per_unit": self.rows_per_unit,
            "domains": {k: d.to_dict() for k, d in self.domains.items()},
            "public": list(self.public),
            "rows": dict(self.rows),
            "sensitivity": {"l1": self.joint["K"], **({"l2": self.joint["l2"]} if self.noise == "gaussian" else {}),
                            "derivation": self.derivation, "per_statistic": dict(self.sensitivity),
                            "weights": dict(self.weights)},
            "noise": {
                "distribution": ("Laplace per statistic (discrete for integer sums)" if self.noise == "laplace"
                                 else "Gaussian per statistic (discrete for integer sums)"),
                "sampler": f"OpenDP make_{self.noise} (OS CSPRNG, not seedable)",
                "scale": dict(self.noise_scales),
            },
            "released": {"statistics": dict(self.released or {})},
            "law": dict(self.laws),
            "seed": "random_seed seeds the posterior draws given the released statistics (post-processing); the noise cannot be seeded.",
            "versions": {**software_versions(), "opendp": opendp_version()},
        }

    # ------------------------------------------------------------------ audit protocol
    def _stat_vector(self, data: Mapping[str, np.ndarray]) -> np.ndarray:
        true = self._true_statistics(data)
        return np.array([true[s.name] for _, s in self.statistics], float)

    def audit_runs(self, data, runs, rng):
        """``runs`` noisy statistic vectors on ``data`` (the release before post-processing)."""
        noisy = self._noisy(self._true_statistics(data), int(runs))
        return np.stack([np.asarray(noisy[s.name], float) for _, s in self.statistics], axis=1)

    def audit_log_ratio(self, x, y):
        b = np.array([self.noise_scales[s.name] for _, s in self.statistics])
        ratio = laplace_log_ratio if self.noise == "laplace" else gaussian_log_ratio
        return ratio(self._stat_vector(x), self._stat_vector(y), b)

    def audit_score(self, x, y):
        b = np.array([self.noise_scales[s.name] for _, s in self.statistics])
        change = np.abs(self._stat_vector(x) - self._stat_vector(y)) / b
        return float(np.sum(change) if self.noise == "laplace" else np.sqrt(np.sum(change**2)))

    def __repr__(self):
        return (f"<NoisyStatistics ({self.epsilon:g}, {self.delta:g})-DP, unit={describe_unit(self.unit)['kind']}, "
                f"statistics {[s.name for _, s in self.statistics]}>")
