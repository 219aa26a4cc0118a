"""A noisy histogram, released once, and the noise-aware posterior given it: the statistics path
for any iid one-dimensional factor whose law PyMC can integrate.

For a model whose private data are one container of scalar records observed iid by one factor
whose parameters are the same for every record (a mixture, a censored or truncated family, a
Student-t, a Gamma, ... -- any univariate distribution with a ``logcdf`` in PyMC)::

    pm.NormalMixture("x", w=w, mu=mu, sigma=sigma, observed=x_data)      # x_data: Interval(-10, 10)

the mechanism (docs/theory/histogram.md) releases the counts of the records in ``K`` public
cells of the declared domain, each with discrete Laplace noise of scale ``2 m / epsilon``
(OpenDP), and draws from the posterior given the noisy counts with ``pm.sample``.

Privacy proof. The cells partition the domain, so replacing one record moves one count down by
one and another up by one (a user of ``m`` rows: at most ``m`` each way): the count vector's L1
sensitivity is ``2 m``, and iid discrete Laplace noise of scale ``b = 2 m / epsilon`` on every
count makes the release ``epsilon``-DP (OpenDP's map on the vector is checked at build time).
The cells, ``K`` and ``n`` (public under replacement) are chosen before any data value is read.
The posterior given the noisy counts is post-processing: any number of draws, at no further cost.

The noise-aware posterior. With ``F`` the factor's cdf and ``t_1 < ... < t_{K-1}`` the cells'
cut points, cell ``k`` holds a record with probability ``p_k(theta)`` (``F(t_1)``, the
differences ``F(t_{k+1}) - F(t_k)``, ``1 - F(t_{K-1})``: the end cells take the tails, as data
clipped into the domain would). The counts are modelled as independent
``Poisson(n p_k(theta))`` -- the multinomial's Poissonisation: given the true counts the two
likelihoods are proportional in ``theta``, since their total ``n`` carries no information about
it -- and each released count ``y_k`` is observed as ``c_k + Z_k``, ``Z_k`` discrete Laplace of
scale ``b``. The latent count is summed out exactly over ``c in [y_k - W, y_k + W]`` (``W =``
:data:`WINDOW_SCALES` ``b``: the noise's mass beyond is below ``e^-30``) and ``c >= 0``::

    log p(y | theta) = sum_k logsumexp_c [c log(n p_k) - n p_k - log c! - |y_k - c| / b] + const.

What is approximated (utility, never privacy): the records' values inside a cell (the binning)
and the Poissonisation of the counts' sum; ``benchmarks/calibration.py``-style checks measure the
coverage (tests/mechanisms/test_histogram.py).
"""

from __future__ import annotations

import dataclasses
import math
import numbers
import warnings
from typing import Any, Mapping, Sequence

import arviz as az
import numpy as np
import pymc as pm
import pytensor.tensor as pt
from pytensor.graph.replace import graph_replace
from pytensor.graph.traversal import ancestors

from pymc_dp.certification import check_budget as _check_budget
from pymc_dp.certification import check_containers
from pymc_dp.chunks import check_values
from pymc_dp.domains import Domain, Integers, Interval
from pymc_dp.exceptions import DomainError, PathNotImplementedError, PrivacyError, UnsupportedFactorError
from pymc_dp.factors import private_ancestors, strip_casts
from pymc_dp.ledger import Ledger
from pymc_dp.mechanisms.base import Mechanism, build_model, charge
from pymc_dp.mechanisms.noise import discrete_laplace, laplace_log_ratio, opendp_version
from pymc_dp.mechanisms.statistics import noise_free_model, warn_if_chains_disagree, with_initvals
from pymc_dp.preprocess import dataset_id
from pymc_dp.release import check_ledger, ledger_state, publish
from pymc_dp.units import Users, as_unit, describe_unit
from pymc_dp.version import software_versions

__all__ = ["NoisyHistogram", "noisy_histogram", "default_bins", "cut_points", "HistogramFactor", "read_histogram_factor",
           "latent_count_loglik", "per_record_constants"]

#: the number of cells when ``bins=`` is not given: ``round(2 (n epsilon)^(1/3))``, within these
MIN_BINS, MAX_BINS = 8, 128
#: the latent count is summed over ``y_k +- WINDOW_SCALES b`` (the noise's tail beyond: < e^-30)
WINDOW_SCALES = 30
#: the name of the noise-aware model's Potential
POTENTIAL = "__dp_noisy_histogram"


def default_bins(n: int, epsilon: float, unit_rows: int = 1) -> int:
    """The public number of cells: ``round(2 (n epsilon / m)^(1/3))`` within ``[MIN_BINS, MAX_BINS]``.

    A histogram's binning error falls with the cells' width and its noise grows with their
    number; ``n^(1/3)`` is the classical balance for a density (Freedman-Diaconis, Scott), and the
    noise of scale ``2 m / epsilon`` acts as ``n epsilon / m`` records' worth of signal. A choice
    of utility, never of privacy (any ``K`` gives ``epsilon``)."""
    raw = 2.0 * (max(n, 1) * float(epsilon) / max(unit_rows, 1)) ** (1.0 / 3.0)
    return int(min(MAX_BINS, max(MIN_BINS, round(raw))))


def cut_points(domain: Domain, bins: int) -> np.ndarray:
    """The ``K - 1`` interior cut points ``t_k`` of the public cells of ``domain``.

    A record ``x`` is in cell ``#{k : t_k < x}``, so cell ``k`` is ``(t_k, t_{k+1}]`` and its
    probability is ``F(t_{k+1}) - F(t_k)`` for a cdf ``F(t) = P(X <= t)``. ``Interval(lo, hi)``:
    ``K`` equal widths. ``Integers(lo, hi)``: every value its own cell when there are at most
    ``bins`` of them, else ``K`` runs of consecutive integers (``t_k`` the last integer of run
    ``k``)."""
    if isinstance(domain, Integers):
        values = int(domain.hi) - int(domain.lo) + 1
        k = min(int(bins), values)
        # run k ends at the integer below the (k+1)-th of K equal shares of the values
        ends = int(domain.lo) - 1 + np.floor(np.arange(1, k) * values / k).astype(np.int64)
        return np.unique(ends).astype(float)
    if isinstance(domain, Interval) and math.isfinite(domain.lo) and math.isfinite(domain.hi):
        return np.linspace(float(domain.lo), float(domain.hi), int(bins) + 1)[1:-1]
    raise DomainError(f"a histogram needs a bounded Interval or an Integers domain, got {domain}")


def cell_counts(values: np.ndarray, cuts: np.ndarray) -> np.ndarray:
    """The count of ``values`` in each cell of the cut points ``cuts`` (``len(cuts) + 1`` cells)."""
    index = np.searchsorted(np.asarray(cuts, float), np.asarray(values, float).reshape(-1), side="left")
    return np.bincount(index, minlength=len(cuts) + 1).astype(np.int64)


def latent_count_loglik(y: np.ndarray, rate, b: float, caps: np.ndarray, *, log_rate=None):
    """``sum_k log sum_c Poisson(c; rate_k) exp(-|y_k - c| / b)``: the log-likelihood of noisy
    counts ``y`` (discrete Laplace of scale ``b`` on latent Poisson counts of rates ``rate``, a
    tensor), up to a constant, the latent count summed out exactly over ``c in [y_k - W, y_k + W]``
    (``W = WINDOW_SCALES b``: the noise's mass beyond is below ``e^-30``), ``0 <= c <= caps_k``.

    ``caps`` (public) bound each latent count (a cell holds at most the records that can reach
    it); a window clipped at its cap repeats one value, which is counted once. ``log_rate`` may
    give ``log(rate)`` in a more exact form."""
    y = np.asarray(y, float)
    half = int(math.ceil(WINDOW_SCALES * b))
    start = np.maximum(y - half, 0.0)
    grid = np.minimum(start[:, None] + np.arange(2 * half + 1)[None, :], np.asarray(caps, float)[:, None])  # public
    log_rate = pt.log(rate) if log_rate is None else log_rate
    terms = grid * log_rate[:, None] - rate[:, None] - pt.gammaln(grid + 1.0) - np.abs(y[:, None] - grid) / b
    distinct = np.concatenate([np.ones((len(y), 1), bool), np.diff(grid, axis=1) > 0], axis=1)
    terms = pt.where(distinct, terms, -np.inf)
    return pt.sum(pt.logsumexp(terms, axis=1))


def per_record_constants(rv, n: int) -> tuple[list, list]:
    """Constant arrays of the parameters' graph with ``n`` rows (one per record): public
    per-record inputs written as plain arrays, as the gallery writes covariates, and fills (every
    row the same: a zero utility), which carry no record's information but the record count."""
    inputs, fills = [], []
    for var in ancestors(rv.owner.inputs[2:]):
        if isinstance(var, pt.TensorConstant) and var.ndim >= 1 and n > 1 and var.data.shape[0] == n:
            rows = np.asarray(var.data).reshape(n, -1)
            (fills if np.all(rows == rows[:1]) else inputs).append(var)
    return inputs, fills


@dataclasses.dataclass(frozen=True)
class HistogramFactor:
    """The one factor a histogram path releases for (public facts only)."""

    name: str  # the observed RV
    container: str  # the private pm.Data it observes
    rv: Any  # the observed RV
    domain: Domain


def read_histogram_factor(model: pm.Model, domains: Mapping[str, Domain]) -> HistogramFactor:
    """The factor, or an :class:`UnsupportedFactorError` naming what the path needs.

    Needs: one private container, of scalar records (one dimension), observed directly by one
    univariate observed RV whose parameters read no data container (the same law for every
    record), read by nothing else (no Potential, no other factor); a bounded Interval or an
    Integers domain; and PyMC's ``logcdf`` of the factor."""
    private = {v: v.name for v in model.data_vars if v.name in domains}
    if len(private) != 1:
        raise UnsupportedFactorError(
            f"path 'noisy_statistics' (histogram): the model has {len(private)} private containers "
            f"({sorted(private.values())}); a histogram is released for one container of scalar records.")
    container_var, container = next(iter(private.items()))
    if container_var.type.ndim != 1:
        raise UnsupportedFactorError(
            f"path 'noisy_statistics' (histogram): the private container {container!r} has {container_var.type.ndim} "
            "dimensions; a histogram needs one value per record (a vector).")
    readers = [rv for rv in model.observed_RVs if private_ancestors(model.rvs_to_values[rv], private)
               or private_ancestors(rv, private)]
    readers += [p for p in model.potentials if private_ancestors(p, private)]
    if len(readers) != 1 or readers[0] not in model.observed_RVs:
        raise UnsupportedFactorError(
            f"path 'noisy_statistics' (histogram): the private container {container!r} is read by "
            f"{[getattr(r, 'name', str(r)) for r in readers]}; a histogram needs exactly one observed RV reading it "
            "and nothing else.")
    rv = readers[0]
    if strip_casts(model.rvs_to_values[rv]) is not container_var:
        raise UnsupportedFactorError(
            f"path 'noisy_statistics' (histogram): the factor {rv.name!r} does not observe the container {container!r} "
            "directly (observed=the pm.Data itself is needed).")
    every_container = {v: v.name for v in model.data_vars}
    reads_data = sorted({c for i in rv.owner.inputs for c in private_ancestors(i, every_container)})
    if reads_data:
        raise UnsupportedFactorError(
            f"path 'noisy_statistics' (histogram): the parameters of {rv.name!r} read the data containers "
            f"{reads_data} (a regression, or a parameter per record); a histogram needs one law for every record.")
    n = int(np.shape(container_var.get_value())[0])
    if per_record_constants(rv, n)[0]:  # covariates written as plain arrays: one law per record
        raise UnsupportedFactorError(
            f"path 'noisy_statistics' (histogram): the parameters of {rv.name!r} read constant arrays with one value per "
            f"record ({n}; covariates written as plain arrays); a histogram needs one law for every record.")
    domain = domains[container]
    try:
        cut_points(domain, MIN_BINS)
    except DomainError as err:
        raise UnsupportedFactorError(f"path 'noisy_statistics' (histogram): the container {container!r}: {err}.") from None
    try:
        probes = [pm.logcdf(rv, pt.as_tensor(np.arange(k, dtype=float))) for k in (3, 4)]
    except NotImplementedError as err:
        raise UnsupportedFactorError(
            f"path 'noisy_statistics' (histogram): PyMC has no logcdf for {rv.name!r} ({err}); the cells' "
            "probabilities need it.") from None
    except (ValueError, TypeError):
        probes = None
    # one law for every record: its cdf broadcasts against cut points of any length (a parameter
    # with one value per record would broadcast against n of them only)
    if probes is None or any(p.type.ndim != 1 or p.type.shape[0] not in (None, k) for p, k in zip(probes, (3, 4))):
        raise UnsupportedFactorError(
            f"path 'noisy_statistics' (histogram): the law of {rv.name!r} differs between records (a parameter with "
            "one value per record); a histogram needs one law for every record.")
    return HistogramFactor(rv.name, container, rv, domain)


class CountVectorRelease:
    """What a release of a discrete-Laplace count vector shares, whatever its cells (the histogram,
    the table): the noise's public description and the audit protocol. A class using it has
    ``true_counts(data)`` (the count vector, read only inside the release and the audit) and
    ``noise_scale``."""

    noise_scale: float

    def count_release_facts(self, partition: str) -> dict:
        """The release record's public facts that every count-vector release states alike:
        budget, unit, domains, rows, and the sensitivity with its derivation (``partition``
        says what the cells partition)."""
        m = self.rows_per_unit
        return {
            "mechanism": self.name,
            "algorithm": self.algorithm,
            "epsilon": self.epsilon,
            "delta": 0.0,
            "draws": self.draws,
            "unit": describe_unit(self.unit)["kind"],
            "rows_per_unit": m,
            "domains": {k: d.to_dict() for k, d in self.domains.items()},
            "public": list(self.public),
            "rows": {self.factor.container: self.n},
            "sensitivity": {"l1": self.sensitivity, "derivation": (
                f"{partition}: replacing one " + (f"user's {m} rows" if m > 1 else "record")
                + f" moves at most {m} count(s) down and {m} up, so the count vector's L1 sensitivity is "
                f"{self.sensitivity:g}; discrete Laplace noise of scale {self.sensitivity:g} / epsilon on every "
                "count gives epsilon")},
            "noise": self.count_noise(),
        }

    def count_noise(self) -> dict:
        """The noise's public description for the release record."""
        return {"distribution": "discrete Laplace per count", "sampler": "OpenDP make_laplace (OS CSPRNG, not seedable)",
                "scale": self.noise_scale}

    # ------------------------------------------------------------------ audit protocol
    def audit_runs(self, data, runs, rng):
        """``runs`` noisy count vectors on ``data`` (the release before post-processing)."""
        counts = self.true_counts(data)
        return np.stack([discrete_laplace(counts, self.noise_scale) for _ in range(int(runs))]).astype(float)

    def audit_log_ratio(self, x, y):
        return laplace_log_ratio(self.true_counts(x), self.true_counts(y), self.noise_scale)

    def audit_score(self, x, y):
        return float(np.sum(np.abs(self.true_counts(x) - self.true_counts(y))) / self.noise_scale)


class NoisyHistogram(CountVectorRelease, Mechanism):
    """Discrete-Laplace-noised cell counts of one container, released once, and noise-aware
    posterior draws (module docstring; build with :func:`noisy_histogram`).

    Attributes
    ----------
    cuts : np.ndarray
        The public cut points of the cells (``bins - 1`` of them).
    noise_scale : float
        ``b = 2 m / epsilon``, the scale of every count's discrete Laplace noise.
    released : np.ndarray or None
        The noisy counts, after the first :meth:`sample`.
    """

    name = "noisy_histogram"
    algorithm = ("noise-aware inference on a discrete-Laplace-noised histogram of the records "
                 "(the perturbed histogram of Wasserman & Zhou 2010; latent counts summed out exactly)")

    def __init__(
        self,
        model,
        *,
        epsilon: float,
        data: Mapping[str, Domain],
        delta: float = 0.0,
        unit: str | Users = "record",
        public: Sequence[str] = (),
        ledger: Ledger | None | str = "default",
        bins: int | None = None,
    ):
        model = build_model(model)
        _check_budget(epsilon, delta, 1, unit, None)
        if delta != 0.0:
            raise PathNotImplementedError(
                "a noisy histogram with delta > 0 (Gaussian noise) is not implemented: use delta=0 (discrete Laplace).")
        self._ledger_arg = check_ledger(ledger)
        self.model = model
        self.epsilon, self.delta, self.unit = float(epsilon), 0.0, as_unit(unit)
        self.domains, self.public = check_containers(model, data, public)
        self.factor = read_histogram_factor(model, self.domains)
        values = np.asarray(model[self.factor.container].get_value())
        self.n = check_values(self.factor.container, values, self.factor.domain)
        self._values = {self.factor.container: values}
        if isinstance(unit, Users):
            unit.check_rows(self.n)
        self.rows_per_unit = describe_unit(unit)["max_rows"]
        if bins is None:
            bins = default_bins(self.n, self.epsilon, self.rows_per_unit)
        if isinstance(bins, bool) or not isinstance(bins, numbers.Integral) or bins < 2:
            raise PrivacyError(f"bins={bins!r} must be an integer >= 2 (the number of public cells).")
        self.cuts = cut_points(self.factor.domain, int(bins))
        self.bins = len(self.cuts) + 1
        self.sensitivity = 2.0 * self.rows_per_unit
        self.noise_scale = self.sensitivity / self.epsilon
        # OpenDP's map of the release: the count vector, L1 sensitivity 2m, scale b
        discrete_laplace(np.zeros(0, np.int64), self.noise_scale, sensitivity=self.sensitivity, epsilon=self.epsilon)
        self.reads = (self.factor.container,)
        self.dataset_id = dataset_id(self._values, self.domains, unit)
        self._noise_free, self._replace, self._initvals = noise_free_model(model, [self.factor.name], self.domains)
        self.released: np.ndarray | None = None
        self.draws = 0
        self.last_release: az.InferenceData | None = None

    # ------------------------------------------------------------------ the private step
    def true_counts(self, values: Mapping[str, Any]) -> np.ndarray:
        """The cell counts of ``values[container]`` (reads private data: the release and audits only)."""
        return cell_counts(np.asarray(values[self.factor.container]), self.cuts)

    def release_counts(self) -> np.ndarray:
        """Charge ``epsilon`` and release the noisy counts (once; later calls return them)."""
        if self.released is None:
            with charge(self):
                self.released = discrete_laplace(self.true_counts(self._values), self.noise_scale)
        return self.released.copy()

    # ------------------------------------------------------------------ noise-aware model
    def noise_aware_model(self) -> pm.Model:
        """The user's priors and public parts with the noisy counts observed around their law
        (releases the counts first if needed). A new ``pm.Model``."""
        y = self.release_counts().astype(float)
        from pymc.model.fgraph import clone_model

        new = clone_model(self._noise_free)
        replace = {old: new[var.name] for old, var in self._replace.items()}
        with new:
            rv = graph_replace(self.factor.rv, replace, strict=False)
            cdf = pt.exp(pm.logcdf(rv, pt.as_tensor(self.cuts)))
            edges = pt.concatenate([pt.zeros(1), cdf, pt.ones(1)])
            prob = pt.clip(edges[1:] - edges[:-1], 1e-300, 1.0)
            log_rate = math.log(self.n) + pt.log(prob)
            loglik = latent_count_loglik(y, self.n * prob, self.noise_scale, np.full(len(y), float(self.n)), log_rate=log_rate)
            pm.Potential(POTENTIAL, loglik)
        return new

    def sample(self, draws: int = 1000, *, random_seed: Any = None, **sample_kwargs: Any) -> az.InferenceData:
        """Release the noisy counts (charging ``epsilon`` at the first call only), then draw from
        the noise-aware posterior with ``pm.sample(draws=draws, **sample_kwargs)``."""
        if isinstance(draws, bool) or not isinstance(draws, numbers.Integral) or draws < 1:
            raise ValueError(f"draws={draws!r} must be an integer >= 1")
        charged_now = self.released is None
        model = self.noise_aware_model()
        keep = [v.name for v in self.model.free_RVs + self.model.deterministics if v.name in model.named_vars]
        sample_kwargs.setdefault("progressbar", False)
        sample_kwargs.setdefault("compute_convergence_checks", False)
        # a public sampler choice: where the records sit in one or two cells, the scale's posterior
        # reaches towards 0 and PyMC's 0.8 diverged in 10 of 40 calibration datasets at epsilon 1
        # (benchmarks/results/calibration_histogram.md), whose intervals then undercovered
        sample_kwargs.setdefault("target_accept", 0.95)
        with model, warnings.catch_warnings():
            idata = pm.sample(draws=int(draws), random_seed=random_seed, var_names=keep,
                              **with_initvals(sample_kwargs, self._initvals))
        self.draws = int(idata.posterior.sizes["chain"] * idata.posterior.sizes["draw"])
        warn_if_chains_disagree(idata.posterior, [v.name for v in self.model.free_RVs])
        groups = {g: getattr(idata, g) for g in ("posterior", "sample_stats") if g in idata.groups()}
        release = {"chains": int(idata.posterior.sizes["chain"]), "draws_per_chain": int(idata.posterior.sizes["draw"]),
                   "charged": charged_now, "ledger": ledger_state(self.ledger, self.dataset_id)}
        return publish(self, groups, {**self._public(), "release": release})

    def _public(self) -> dict:
        return {
            **self.count_release_facts(f"the {self.bins} cells partition the domain of {self.factor.container!r}"),
            "released": {"cut_points": [float(t) for t in self.cuts],
                         "counts": [int(c) for c in (self.released if self.released is not None else [])]},
            "law": {self.factor.name: (
                "cell counts Poisson(n p_k(theta)) with p_k from the factor's cdf at the cut points (end cells take "
                "the tails), each observed with discrete Laplace noise; the latent counts summed out exactly over "
                f"+-{WINDOW_SCALES} noise scales")},
            "seed": "random_seed seeds the posterior draws given the released counts (post-processing); the noise cannot be seeded.",
            "versions": {**software_versions(), "opendp": opendp_version()},
        }

    def __repr__(self):
        return (f"<NoisyHistogram {self.epsilon:g}-DP, unit={describe_unit(self.unit)['kind']}, "
                f"{self.bins} cells of {self.factor.container!r}>")


def noisy_histogram(model, *, epsilon: float, data: Mapping[str, Domain], unit: str | Users = "record",
                    public: Sequence[str] = (), ledger: Ledger | None | str = "default",
                    bins: int | None = None) -> NoisyHistogram:
    """A noisy histogram of one container of scalar records and the noise-aware posterior given it.

    Parameters
    ----------
    model : pm.Model or callable
        One private container of scalar records observed iid by one univariate factor whose
        parameters are the same for every record (never mutated).
    epsilon : float
        The budget of the one release of the counts (every later draw is free).
    data : dict of str to Domain
        The container's domain: a bounded ``Interval`` or ``Integers``.
    unit : {"record"} or Users
        The privacy unit.
    public : sequence of str
        Containers that are public.
    ledger : Ledger, None or "default"
        Where the charge is recorded.
    bins : int, optional
        The number of public cells (default :func:`default_bins`).

    Returns
    -------
    NoisyHistogram
        Call ``sample`` to release.
    """
    return NoisyHistogram(model, epsilon=epsilon, data=data, unit=unit, public=public, ledger=ledger, bins=bins)
