"""A noisy table of record cells, released once, and the noise-aware posterior given it: the
statistics path for a regression whose records are few kinds of rows.

For a model whose private outcome is one container of scalar records observed by one factor
whose parameters read, per record, covariates with a finite or bounded domain (private) or public
values, e.g. the gallery's negative binomial regression on two yes/no answers::

    lam = pm.math.exp(a + b[0] * M + b[1] * A + b[2] * M * A)          # M, A: Binary (private)
    pm.NegativeBinomial("y", mu=lam, alpha=alpha, observed=S)          # S: Integers(0, 100)

the mechanism (docs/theory/table.md) releases the counts of the records in the public cells
``(covariate cell c, outcome cell k)``, each with discrete Laplace noise of scale ``2 m / epsilon``
(OpenDP), and draws from the posterior given the noisy counts with ``pm.sample``.

Privacy proof. The cells partition the records' space (every record is in exactly one), so
replacing one record moves one count down by one and another up by one (a user of ``m`` rows: at
most ``m`` each way): the count vector's L1 sensitivity is ``2 m`` whatever the cells, and iid
discrete Laplace noise of scale ``b = 2 m / epsilon`` makes the release ``epsilon``-DP (OpenDP's
map on the vector is checked at build time). The cells are chosen from public facts only: the
declared domains, the public containers' values, ``n`` and ``epsilon``. Every later draw is
post-processing.

The covariate cells, two kinds (:class:`TableFactor`):

* **binned** -- some covariate is private. Each private covariate's domain is cut into public
  cells: every value of an ``Integers`` / ``Binary`` domain its own cell (an index such as a
  county is never merged), a bounded ``Interval`` (or a column of a ``Box`` / ``Ball``) into equal
  widths represented by their midpoints; a public per-record input (a ``pm.Data`` container or a
  constant array of one value per record) by its distinct values, or by quantile cells
  represented by their means. The covariate cells are the grid of these, ``C`` of them. Their
  records' shares are unknown (private), so the noise-aware model gives them nuisance rates
  ``lambda_c ~ Gamma(1, C / n)`` with the public ``n`` observed as ``Poisson(n; sum_c lambda_c)``
  (``pi = lambda / sum lambda`` is then ``Dirichlet(1, ..., 1)``), and cell ``(c, k)`` the rate
  ``lambda_c p_k(theta; x_c)``.
* **clustered** -- every covariate is public. The records are grouped by a k-d tree over the
  public values (median splits of the widest standardised column), ``C`` groups of known size,
  and cell ``(c, k)`` gets the exact rate ``sum_{i in c} p_k(theta; x_i)``: the model's own
  probabilities of every record, only aggregated.

The noise-aware posterior. The counts are modelled as independent Poisson with those rates (the
multinomial's Poissonisation: given the true counts the likelihood is proportional in ``theta``),
each released count ``y_ck`` as ``N_ck + Z_ck`` with ``Z`` discrete Laplace of scale ``b``, the
latent count summed out exactly over ``N in [y - 30 b, y + 30 b]``, ``0 <= N <= cap``
(:func:`~pymc_dp.mechanisms.histogram.latent_count_loglik`), and the law's mass outside the
declared domain (no record is there) by its Poisson zero ``-rate_out``. An outcome on an
``Integers`` domain gets its cells' probabilities from PyMC's ``logp`` at each value; an
``Interval`` from its ``logcdf`` at the cut points (the end cells take the tails, as data clipped
into the domain would).

What is approximated (utility, never privacy): a binned covariate's records sit at their cell's
midpoint, the outcome's values inside a cell (Interval outcomes), and the Poissonisation.
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
import pytensor
import pytensor.tensor as pt
from pytensor.graph.replace import graph_replace
from pytensor.graph.traversal import ancestors

from pymc_dp.certification import check_budget as _check_budget
from pymc_dp.certification import check_containers
from pymc_dp.chunks import check_values
from pymc_dp.domains import Ball, Box, Domain, Integers, Interval
from pymc_dp.exceptions import PathNotImplementedError, PrivacyError, UnsupportedFactorError
from pymc_dp.factors import private_ancestors, strip_casts
from pymc_dp.ledger import Ledger
from pymc_dp.mechanisms.base import Mechanism, build_model, charge
from pymc_dp.mechanisms.histogram import CountVectorRelease, cut_points, default_bins, latent_count_loglik, per_record_constants
from pymc_dp.mechanisms.noise import discrete_laplace, opendp_version
from pymc_dp.mechanisms.statistics import noise_free_model, warn_if_chains_disagree, with_initvals
from pymc_dp.preprocess import dataset_id
from pymc_dp.release import check_ledger, ledger_state, publish
from pymc_dp.units import Users, as_unit, describe_unit
from pymc_dp.version import software_versions

__all__ = ["NoisyTable", "noisy_table", "TableFactor", "CovariateAxis", "read_table_factor", "table_shape"]

#: records per cell the default size aims at: ``n epsilon / (RECORDS_PER_CELL m)`` cells in all
#: (a choice of utility, never of privacy: any cells give epsilon)
RECORDS_PER_CELL = 4.0
#: the fewest and most cells in all
MIN_CELLS, MAX_CELLS = 16, 20_000
#: an Integers covariate or outcome with more values than this is refused (its values are cells)
MAX_LEVELS = 256
#: a public input with at most this many distinct values gets one cell per value
PUBLIC_LEVELS = 16
#: the most cells along one binned continuous covariate
MAX_COVARIATE_BINS = 32
#: the names of the noise-aware model's Potentials (the counts; the public n) and nuisance rates
POTENTIAL = "__dp_noisy_table"
TOTAL = "__dp_table_rows"
WEIGHTS = "__dp_table_rates"


# =========================================================================== the cells
@dataclasses.dataclass(frozen=True)
class CovariateAxis:
    """One covariate column's public cells.

    ``cuts``: a record with value ``x`` is in cell ``#{t in cuts : t < x}``; ``centres``: the
    value that represents each cell in the noise-aware model (an integer level, a midpoint or
    the mean of a public cell's values)."""

    source: str  # the container's name, or "constant <k>" for a per-record constant of the graph
    column: int | None  # the column of a matrix input (None: a vector)
    public: bool
    cuts: np.ndarray
    centres: np.ndarray
    kind: str  # "levels" (every value its own cell) or "bins"

    @property
    def cells(self) -> int:
        return len(self.centres)

    def describe(self) -> str:
        where = self.source if self.column is None else f"{self.source}[:, {self.column}]"
        return f"{where}: {self.cells} {'levels' if self.kind == 'levels' else 'cells'}"


def _levels_axis(source, column, public, lo: int, hi: int) -> CovariateAxis:
    values = np.arange(int(lo), int(hi) + 1, dtype=float)
    return CovariateAxis(source, column, public, values[:-1].copy(), values, "levels")


def _interval_axis(source, column, lo: float, hi: float, bins: int) -> CovariateAxis:
    edges = np.linspace(float(lo), float(hi), int(bins) + 1)
    return CovariateAxis(source, column, False, edges[1:-1].copy(), 0.5 * (edges[1:] + edges[:-1]), "bins")


def _public_axis(source, column, values: np.ndarray, bins: int) -> CovariateAxis:
    """A public input's cells: its distinct values (at most :data:`PUBLIC_LEVELS`), else ``bins``
    quantile cells represented by the mean of their values (all public). Every cell holds a
    record: the cuts are values of the input (its ``inverted_cdf`` quantiles) below its largest."""
    values = np.asarray(values, float)
    distinct = np.unique(values)
    if len(distinct) <= PUBLIC_LEVELS:
        return CovariateAxis(source, column, True, 0.5 * (distinct[1:] + distinct[:-1]), distinct, "levels")
    cuts = np.unique(np.quantile(values, np.arange(1, bins) / bins, method="inverted_cdf"))
    cuts = cuts[cuts < distinct[-1]]
    index = np.searchsorted(cuts, values, side="left")
    centres = np.array([values[index == j].mean() for j in range(len(cuts) + 1)])
    return CovariateAxis(source, column, True, cuts, centres, "bins")


def _private_axes(name: str, domain: Domain, columns: int | None, bins: int) -> list[CovariateAxis]:
    """The cells of a private covariate from its declared domain (None: an unsupported domain)."""
    cols = [None] if columns is None else list(range(columns))
    if isinstance(domain, Integers):
        if domain.hi - domain.lo + 1 > MAX_LEVELS:
            raise UnsupportedFactorError(
                f"path 'noisy_statistics' (table): the covariate {name!r} has {domain.hi - domain.lo + 1} integer values "
                f"({domain}); a table gives each value its own cell and takes at most {MAX_LEVELS}. Declare a narrower "
                "domain, or use posterior sampling (path='posterior').")
        return [_levels_axis(name, c, False, domain.lo, domain.hi) for c in cols]
    if isinstance(domain, Interval) and math.isfinite(domain.lo) and math.isfinite(domain.hi) and columns is None:
        return [_interval_axis(name, None, domain.lo, domain.hi, bins)]
    if isinstance(domain, Box) and columns is not None:
        lo = np.broadcast_to(domain.lo, (columns,))
        hi = np.broadcast_to(domain.hi, (columns,))
        return [_interval_axis(name, c, lo[c], hi[c], bins) for c in cols]
    if isinstance(domain, Ball) and columns is not None:
        return [_interval_axis(name, c, -domain.radius, domain.radius, bins) for c in cols]
    raise UnsupportedFactorError(
        f"path 'noisy_statistics' (table): the covariate {name!r} has the domain {domain}, which gives no public "
        "cells (a vector needs Integers, Binary or a bounded Interval; a matrix Box, Ball or Integers).")


def outcome_cells(domain: Domain, bins: int) -> tuple[np.ndarray, np.ndarray | None]:
    """The outcome's cut points and, for an ``Integers`` domain, its values (probabilities by
    ``logp`` at each value, summed into the cells); for an ``Interval``, ``None`` (by ``logcdf``)."""
    cuts = cut_points(domain, bins)
    if isinstance(domain, Integers):
        if domain.hi - domain.lo + 1 > MAX_LEVELS:
            return cuts, None
        return cuts, np.arange(domain.lo, domain.hi + 1, dtype=float)
    return cuts, None


def table_shape(n: int, epsilon: float, unit_rows: int, *, outcome_values: int | None, levels: int,
                continuous: int) -> tuple[int, int]:
    """The public size of the table: ``(outcome cells, cells per continuous covariate)``.

    In all about ``T = n epsilon / (RECORDS_PER_CELL m)`` cells (within ``[MIN_CELLS, MAX_CELLS]``):
    noise of scale ``2 m / epsilon`` on ``T`` cells adds about ``T`` times its mean size to ``n``
    records. The outcome gets :func:`~pymc_dp.mechanisms.histogram.default_bins` cells (every
    value where an ``Integers`` domain has fewer) but no more than ``T`` over the covariates'
    ``levels``; what is left goes to the continuous covariates, equally (2 to
    :data:`MAX_COVARIATE_BINS` each)."""
    total = min(MAX_CELLS, max(MIN_CELLS, n * float(epsilon) / (RECORDS_PER_CELL * max(unit_rows, 1))))
    k = default_bins(n, epsilon, unit_rows)
    if outcome_values is not None:
        k = min(k, outcome_values)
    k = int(max(2, min(k, total / max(levels, 1))))
    if outcome_values is not None:
        k = min(k, outcome_values)
    per = 1
    if continuous:
        per = int(min(MAX_COVARIATE_BINS, max(2, math.floor((total / (k * max(levels, 1))) ** (1.0 / continuous)))))
    return k, per


def kd_clusters(Z: np.ndarray, clusters: int) -> np.ndarray:
    """A public grouping of the rows of ``Z`` (n x q) into about ``clusters`` groups: median
    splits of the column with the largest standardised spread, to depth ``ceil(log2 clusters)``;
    returns each row's group (0 .. G-1, groups of equal size up to one row). Deterministic."""
    n = Z.shape[0]
    Z = np.asarray(Z, float).reshape(n, -1)
    sd = Z.std(axis=0)
    Z = (Z[:, sd > 0] - Z[:, sd > 0].mean(axis=0)) / sd[sd > 0] if np.any(sd > 0) else np.zeros((n, 0))
    groups = [np.arange(n)]
    depth = max(0, math.ceil(math.log2(max(int(clusters), 1))))
    for _ in range(depth):
        split = []
        for rows in groups:
            if len(rows) < 2 or Z.shape[1] == 0:
                split.append(rows)
                continue
            block = Z[rows]
            j = int(np.argmax(block.max(axis=0) - block.min(axis=0)))
            order = rows[np.argsort(block[:, j], kind="stable")]
            half = len(order) // 2
            split += [order[:half], order[half:]]
        groups = split
    label = np.empty(n, np.int64)
    for g, rows in enumerate(groups):
        label[rows] = g
    return label


# =========================================================================== the factor
@dataclasses.dataclass(frozen=True)
class TableFactor:
    """The factor a table is released for (public facts only)."""

    name: str  # the observed RV
    container: str  # the private outcome it observes
    rv: Any
    domain: Domain
    covariates: tuple[str, ...]  # private containers its parameters read
    public_inputs: tuple[Any, ...]  # the public per-record inputs: pm.Data variables or graph constants
    public_names: tuple[str, ...]
    fills: tuple[Any, ...] = ()  # constant arrays of n equal rows in the parameters' graph


def read_table_factor(model: pm.Model, domains: Mapping[str, Domain]) -> TableFactor:
    """The factor, or an :class:`UnsupportedFactorError` naming what the path needs.

    Needs: one observed RV reading private data, observing one private container of scalar
    records directly; its parameters may read private covariates (each read by it alone, with a
    domain that gives cells) and public per-record inputs, never the outcome itself; no Potential
    reads private data."""
    private = {v: v.name for v in model.data_vars if v.name in domains}
    readers = [rv for rv in model.observed_RVs if private_ancestors(model.rvs_to_values[rv], private)
               or private_ancestors(rv, private)]
    potentials = [p.name for p in model.potentials if private_ancestors(p, private)]
    if len(readers) != 1 or potentials:
        raise UnsupportedFactorError(
            f"path 'noisy_statistics' (table): private data are read by {[r.name for r in readers] + potentials}; a "
            "table is released for exactly one observed RV reading them (and no Potential).")
    rv = readers[0]
    observed = strip_casts(model.rvs_to_values[rv])
    if observed not in private:
        raise UnsupportedFactorError(
            f"path 'noisy_statistics' (table): the factor {rv.name!r} does not observe a private container directly "
            "(observed= must be the private pm.Data itself).")
    container = private[observed]
    if observed.type.ndim != 1:
        raise UnsupportedFactorError(
            f"path 'noisy_statistics' (table): the outcome {container!r} has {observed.type.ndim} dimensions; a table "
            "needs one value per record (a vector).")
    if getattr(rv.owner.op, "ndim_supp", 0) != 0:
        # a multivariate law (pm.AR, a GaussianRandomWalk, an MvNormal over the records) gives the
        # whole container one joint value: its records are not independent given the parameters,
        # and the law has no per-record cell probabilities (found by gallery_utility on the AR model)
        raise UnsupportedFactorError(
            f"path 'noisy_statistics' (table): the factor {rv.name!r} ({type(rv.owner.op).__name__}) is one "
            f"multivariate law over all of {container!r}, not one law per record; a table needs records that are "
            "independent given the parameters. Use posterior sampling (path='posterior').")
    params = rv.owner.inputs[2:]
    read = sorted({c for p in params for c in private_ancestors(p, private)})
    if container in read:
        raise UnsupportedFactorError(
            f"path 'noisy_statistics' (table): the parameters of {rv.name!r} read its own outcome {container!r} (a lag "
            "or an autoregression); a table needs records that are independent given the parameters.")
    n = int(np.shape(model[container].get_value())[0])
    free = set(model.free_RVs)
    for var in ancestors(params, blockers=list(free)):
        if var in free and n > 1 and var.type.ndim >= 1 and int(var.shape[0].eval()) == n:
            raise UnsupportedFactorError(
                f"path 'noisy_statistics' (table): the parameters of {rv.name!r} read {var.name!r}, which has one value per "
                f"record ({n}): counts of record cells cannot tell the records apart, so they say nothing of each one's "
                "own parameter. Use posterior sampling (path='posterior'), or a model whose parameters are shared by records.")
    every = {v: v.name for v in model.data_vars}
    public_read = sorted({c for p in params for c in private_ancestors(p, every)} - set(read))
    inputs, names = [], []
    for name in public_read:
        value = np.asarray(model[name].get_value())
        if value.ndim == 0 or value.shape[0] != n:
            continue  # a public array of another length (a lookup table): not per record
        inputs.append(model[name])
        names.append(name)
    constants, fills = per_record_constants(rv, n)
    for k, const in enumerate(constants):
        inputs.append(const)
        names.append(f"constant {k}")
    for name in read:
        value = np.asarray(model[name].get_value())
        if value.ndim not in (1, 2) or value.shape[0] != n:
            raise UnsupportedFactorError(
                f"path 'noisy_statistics' (table): the covariate {name!r} has shape {value.shape}; a table needs one "
                f"row per record of {container!r} ({n} rows; a vector or a matrix).")
        others = [r.name for r in model.observed_RVs if r is not rv and private_ancestors(r, {model[name]: name})]
        if others:
            raise UnsupportedFactorError(
                f"path 'noisy_statistics' (table): the covariate {name!r} is read by {others} too; a table is released "
                f"for the one factor {rv.name!r}.")
    return TableFactor(rv.name, container, rv, domains[container], tuple(read), tuple(inputs), tuple(names), tuple(fills))


def _rebuild(rv, free: Mapping, data: Mapping):
    """``rv`` with the user's variables ``free`` replaced by the noise-aware model's (kept as
    they are: they are that model's) and the per-record inputs ``data`` by their values at the
    cells (of another length: the nodes are rebuilt). A PyTensor clone would copy the new model's
    variables too, which would then be random draws, not the model's parameters."""
    stand_ins = {old: old.type() for old in free}
    rebuilt = pytensor.clone_replace(rv, {**stand_ins, **data}, rebuild_strict=False)
    return graph_replace(rebuilt, {stand_ins[old]: new for old, new in free.items()}, strict=False)


def _probabilities_at_values(rv, values: np.ndarray, batch: int):
    """``(batch, V)``: the factor's probability of each value for every batch entry: a
    Categorical's (ordered logistic and probit are Categoricals in PyMC) read off its
    probabilities, else ``exp`` of one ``logp`` of a ``(V, batch)`` value where the law broadcasts
    (a univariate family), else of one ``logp`` per value."""
    from pytensor.tensor.random.basic import CategoricalRV

    if isinstance(rv.owner.op, CategoricalRV):
        # its probabilities themselves: log(p) and back would give NaN gradients where a class's p underflows
        p = rv.owner.inputs[2]
        p = pt.broadcast_to(p / pt.sum(p, axis=-1, keepdims=True), (batch, p.shape[-1]))
        padded = pt.concatenate([p, pt.zeros((batch, 1))], axis=1)  # the last column: a value outside the support
        K = p.shape[-1]
        index = np.asarray(values, np.int64)
        cols = pt.switch((index >= 0) & (index < K), index, K)
        return padded[:, cols]
    if all(p.type.ndim <= 1 for p in rv.owner.inputs[2:]):
        grid = np.broadcast_to(np.asarray(values)[:, None], (len(values), batch)).astype(rv.dtype)
        return pt.exp(pt.broadcast_to(pm.logp(rv, pt.as_tensor(grid)), (len(values), batch)).T)
    return pt.exp(pt.stack([pt.broadcast_to(pm.logp(rv, pt.full((batch,), v, dtype=rv.dtype)), (batch,)) for v in values],
                           axis=1))


# =========================================================================== the mechanism
class NoisyTable(CountVectorRelease, Mechanism):
    """Discrete-Laplace-noised counts of record cells, released once, and noise-aware posterior
    draws (module docstring; build with :func:`noisy_table`).

    Attributes
    ----------
    mode : {"binned", "clustered"}
        How records are grouped by their covariates (module docstring).
    axes : list of CovariateAxis
        The covariate cells' axes (binned mode).
    groups : int
        The number of covariate cells (binned) or record groups (clustered), ``C``.
    outcome_cuts : np.ndarray
        The outcome's cut points (``K - 1`` of them).
    cells : int
        ``C K``, the released counts.
    noise_scale : float
        ``b = 2 m / epsilon``.
    released : np.ndarray or None
        The noisy counts (``C x K``, flattened row-major), after the first :meth:`sample`.
    """

    name = "noisy_table"
    algorithm = ("noise-aware inference on a discrete-Laplace-noised table of record cells (covariate cells x "
                 "outcome cells; latent counts summed out exactly)")

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
        outcome_bins: int | None = None,
        covariate_bins: int | None = None,
        groups: int | None = None,
    ):
        model = build_model(model)
        _check_budget(epsilon, delta, 1, unit, None)
        if delta != 0.0:
            raise PathNotImplementedError(
                "a noisy table with delta > 0 (Gaussian noise) is not implemented: use delta=0 (discrete Laplace).")
        self._ledger_arg = check_ledger(ledger)
        self.model = model
        self.epsilon, self.delta, self.unit = float(epsilon), 0.0, as_unit(unit)
        self.domains, self.public = check_containers(model, data, public)
        self.factor = read_table_factor(model, self.domains)
        f = self.factor
        self._values = {c: np.asarray(model[c].get_value()) for c in (f.container, *f.covariates)}
        self.n = check_values(f.container, self._values[f.container], f.domain)
        for c in f.covariates:
            check_values(c, self._values[c], self.domains[c])
        if isinstance(unit, Users):
            unit.check_rows(self.n)
        self.rows_per_unit = describe_unit(unit)["max_rows"]
        self.mode = "binned" if f.covariates else "clustered"
        self._public_values = [np.asarray(v.get_value() if hasattr(v, "get_value") else v.data, float).reshape(self.n, -1)
                               for v in f.public_inputs]
        self._choose_cells(outcome_bins, covariate_bins, groups)
        self.sensitivity = 2.0 * self.rows_per_unit
        self.noise_scale = self.sensitivity / self.epsilon
        # OpenDP's map of the release: the count vector, L1 sensitivity 2m, scale b
        discrete_laplace(np.zeros(0, np.int64), self.noise_scale, sensitivity=self.sensitivity, epsilon=self.epsilon)
        self.reads = (f.container, *f.covariates)
        self.dataset_id = dataset_id(self._values, self.domains, unit)
        self._noise_free, self._replace, self._initvals = noise_free_model(model, [f.name], self.domains)
        self.released: np.ndarray | None = None
        try:  # build the law once on zero counts: whatever PyMC cannot give fails here, before any charge
            self.noise_aware_model(counts=np.zeros(self.cells))
        except (NotImplementedError, ValueError, TypeError) as err:
            raise UnsupportedFactorError(
                f"path 'noisy_statistics' (table): the cell probabilities of {f.name!r} cannot be built from its law "
                f"({type(err).__name__}: {err}). Use posterior sampling (path='posterior').") from err
        self.draws = 0
        self.last_release: az.InferenceData | None = None

    # ------------------------------------------------------------------ public choices
    def _choose_cells(self, outcome_bins, covariate_bins, groups) -> None:
        f = self.factor
        for name, value in (("outcome_bins", outcome_bins), ("covariate_bins", covariate_bins), ("groups", groups)):
            if value is not None and (isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 1
                                      or (name == "outcome_bins" and value < 2)):
                raise PrivacyError(f"{name}={value!r} must be an integer >= {2 if name == 'outcome_bins' else 1}.")
        _, values = outcome_cells(f.domain, 2)
        m = self.rows_per_unit
        if self.mode == "binned":
            columns = {c: (None if self._values[c].ndim == 1 else self._values[c].shape[1]) for c in f.covariates}
            probe = {c: _private_axes(c, self.domains[c], columns[c], 2) for c in f.covariates}
            public_probe = [_public_axis(nm, None if v.shape[1] == 1 else j, v[:, j], 2)
                            for nm, v in zip(f.public_names, self._public_values) for j in range(v.shape[1])]
            levels = math.prod(ax.cells for axes in probe.values() for ax in axes if ax.kind == "levels")
            levels *= math.prod(ax.cells for ax in public_probe if ax.kind == "levels")
            continuous = sum(ax.kind == "bins" for axes in probe.values() for ax in axes)
            continuous += sum(ax.kind == "bins" for ax in public_probe)
            k, per = table_shape(self.n, self.epsilon, m, outcome_values=None if values is None else len(values),
                                 levels=levels, continuous=continuous)
            k = int(outcome_bins) if outcome_bins is not None else k
            per = int(covariate_bins) if covariate_bins is not None else per
            self.axes = [ax for c in f.covariates for ax in _private_axes(c, self.domains[c], columns[c], per)]
            self.axes += [_public_axis(nm, None if v.shape[1] == 1 else j, v[:, j], per)
                          for nm, v in zip(f.public_names, self._public_values) for j in range(v.shape[1])]
            self.groups = math.prod(ax.cells for ax in self.axes)
            self._group_of_public = None
        else:
            k, _ = table_shape(self.n, self.epsilon, m, outcome_values=None if values is None else len(values),
                               levels=1, continuous=0)
            k = int(outcome_bins) if outcome_bins is not None else k
            self.axes = []
            target = int(groups) if groups is not None else max(1, int(min(MAX_CELLS, max(
                MIN_CELLS, self.n * self.epsilon / (RECORDS_PER_CELL * m))) // k))
            Z = np.concatenate(self._public_values, axis=1) if self._public_values else np.zeros((self.n, 0))
            self._group_of_public = kd_clusters(Z, min(target, max(self.n // 2, 1)))
            self.groups = int(self._group_of_public.max()) + 1
            self.group_sizes = np.bincount(self._group_of_public, minlength=self.groups)
        self.outcome_cuts, self._outcome_values = outcome_cells(f.domain, k)
        self.outcome_bins = len(self.outcome_cuts) + 1
        self.cells = self.groups * self.outcome_bins
        if self.cells > MAX_CELLS:
            axes = ", ".join(ax.describe() for ax in self.axes)
            raise UnsupportedFactorError(
                f"path 'noisy_statistics' (table): {self.groups} covariate cells ({axes}) x {self.outcome_bins} outcome "
                f"cells of {f.container!r} = {self.cells} counts, more than {MAX_CELLS}; the noise on so many cells would "
                "swamp the records. Declare coarser domains, or use posterior sampling (path='posterior').")

    # ------------------------------------------------------------------ the private step
    def group_index(self, values: Mapping[str, Any]) -> np.ndarray:
        """Each record's covariate cell (reads private covariates: the release and audits only)."""
        if self.mode == "clustered":
            return self._group_of_public
        index = np.zeros(self.n, np.int64)
        public = {(nm, None if v.shape[1] == 1 else j): v[:, j]
                  for nm, v in zip(self.factor.public_names, self._public_values) for j in range(v.shape[1])}
        for ax in self.axes:
            if ax.public:
                x = public[(ax.source, ax.column)]
            else:
                x = np.asarray(values[ax.source], float)
                x = x if ax.column is None else x[:, ax.column]
            index = index * ax.cells + np.searchsorted(ax.cuts, x.reshape(-1), side="left")
        return index

    def true_counts(self, values: Mapping[str, Any]) -> np.ndarray:
        """The cell counts (``C K``, row-major) of ``values`` (reads private data: the release and audits only)."""
        y = np.asarray(values[self.factor.container], float).reshape(-1)
        k = np.searchsorted(np.asarray(self.outcome_cuts, float), y, side="left")
        joint = self.group_index(values) * self.outcome_bins + k
        return np.bincount(joint, minlength=self.cells).astype(np.int64)

    def release_counts(self) -> np.ndarray:
        """Charge ``epsilon`` and release the noisy counts (once; later calls return them)."""
        if self.released is None:
            with charge(self):
                self.released = discrete_laplace(self.true_counts(self._values), self.noise_scale)
        return self.released.copy()

    # ------------------------------------------------------------------ noise-aware model
    def _representatives(self) -> dict:
        """Binned mode: each covariate input's value at every covariate cell, ``C`` rows (the grid)."""
        grids = np.meshgrid(*[ax.centres for ax in self.axes], indexing="ij")
        at = {(ax.source, ax.column): g.reshape(-1) for ax, g in zip(self.axes, grids)}
        out = {}
        f = self.factor
        for name in f.covariates:
            var = self.model[name]
            if self._values[name].ndim == 1:
                rep = at[(name, None)]
            else:
                rep = np.stack([at[(name, j)] for j in range(self._values[name].shape[1])], axis=1)
            out[var] = pt.as_tensor(rep.astype(var.dtype))
        for name, var, v in zip(f.public_names, f.public_inputs, self._public_values):
            rep = at[(name, None)] if v.shape[1] == 1 else np.stack([at[(name, j)] for j in range(v.shape[1])], axis=1)
            shape = (self.groups, *np.shape(var.get_value() if hasattr(var, "get_value") else var.data)[1:])
            out[var] = pt.as_tensor(rep.reshape(shape).astype(var.dtype))
        for var in f.fills:
            out[var] = pt.as_tensor(np.broadcast_to(var.data[:1], (self.groups, *var.data.shape[1:])).astype(var.dtype))
        return out

    def _cell_probabilities(self, rv, batch: int):
        """``(batch, K)`` probabilities of the outcome cells, and ``(batch,)`` of the law's mass
        outside the declared domain (0 where the end cells take the tails)."""
        if self._outcome_values is not None:
            values = self._outcome_values
            probs = _probabilities_at_values(rv, values, batch)  # (batch, V)
            cell = np.searchsorted(self.outcome_cuts, values, side="left")
            member = np.zeros((len(values), self.outcome_bins))
            member[np.arange(len(values)), cell] = 1.0
            inside = pt.dot(probs, member)
            return inside, pt.clip(1.0 - pt.sum(probs, axis=1), 0.0, 1.0)
        cdf = pt.exp(pm.logcdf(rv, pt.as_tensor(np.asarray(self.outcome_cuts, float))[:, None]))  # (K-1, batch)
        cdf = pt.broadcast_to(cdf, (len(self.outcome_cuts), batch)).T
        edges = pt.concatenate([pt.zeros((batch, 1)), cdf, pt.ones((batch, 1))], axis=1)
        return edges[:, 1:] - edges[:, :-1], pt.zeros((batch,))

    def noise_aware_model(self, counts: np.ndarray | None = None) -> pm.Model:
        """The user's priors and public parts with the noisy counts observed around their law
        (releases the counts first if needed; ``counts``: public stand-ins instead, to build the
        law without releasing). A new ``pm.Model``."""
        y = (self.release_counts() if counts is None else np.asarray(counts)).astype(float)
        from pymc.model.fgraph import clone_model

        new = clone_model(self._noise_free)
        replace = {old: new[var.name] for old, var in self._replace.items()}
        with new:
            if self.mode == "binned":
                rv = _rebuild(self.factor.rv, replace, self._representatives())
                prob, outside = self._cell_probabilities(rv, self.groups)
                # the cells' unknown shares as free rates on the log scale, the public n observed
                # around their sum: pi = lambda / sum(lambda) is Dirichlet(1), and with exact counts
                # theta's posterior is the Dirichlet form's (the sum factors out); NUTS moves far
                # better here than on the simplex, whose log-ratios all share the last cell's noise
                # (gallery Poisson model: tree depth 8.0 -> 5.9, step size 0.019 -> 0.072)
                if self.groups > 1:
                    scale = pm.Gamma(WEIGHTS, alpha=1.0, beta=self.groups / self.n, shape=self.groups)
                    pm.Potential(TOTAL, pm.logp(pm.Poisson.dist(pt.sum(scale)), self.n))
                else:
                    scale = pt.full((1,), float(self.n))
                rate = scale[:, None] * prob  # (C, K)
                rate_out = scale * outside
                caps = np.full(self.cells, float(self.n))
            else:
                rv = _rebuild(self.factor.rv, replace, {})
                prob, outside = self._cell_probabilities(rv, self.n)  # (n, K): every record's own law
                rate = pt.inc_subtensor(pt.zeros((self.groups, self.outcome_bins))[self._group_of_public], prob)
                rate_out = pt.sum(outside)
                caps = np.repeat(self.group_sizes.astype(float), self.outcome_bins)
            loglik = latent_count_loglik(y, pt.clip(rate.reshape((-1,)), 1e-300, np.inf), self.noise_scale, caps)
            pm.Potential(POTENTIAL, loglik - pt.sum(rate_out))
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
        sample_kwargs.setdefault("target_accept", 0.95)  # as the histogram's (a scale near 0 where records are few)
        with model, warnings.catch_warnings():
            idata = pm.sample(draws=int(draws), random_seed=random_seed, var_names=keep,
                              **with_initvals(sample_kwargs, self._initvals))
        self.draws = int(idata.posterior.sizes["chain"] * idata.posterior.sizes["draw"])
        warn_if_chains_disagree(idata.posterior, [v.name for v in self.model.free_RVs])
        groups = {g: getattr(idata, g) for g in ("posterior", "sample_stats") if g in idata.groups()}
        release = {"chains": int(idata.posterior.sizes["chain"]), "draws_per_chain": int(idata.posterior.sizes["draw"]),
                   "charged": charged_now, "ledger": ledger_state(self.ledger, self.dataset_id)}
        return publish(self, groups, {**self._public(), "release": release})

    @property
    def exact_law(self) -> bool:
        """Whether the noise-aware model evaluates the user's law at every record's own inputs:
        no covariate axis is binned (each covariate cell is one value, or records are grouped by
        public inputs whose per-row probabilities are summed exactly). Then the only coarsening
        is the outcome's cells, whose likelihood is exact for the counts; a binned axis puts each
        record at its cell's centre instead (``docs/theory/table.md``). A public fact."""
        return not any(ax.kind == "bins" for ax in self.axes)

    def describe_cells(self) -> str:
        """The cells in words (public)."""
        if self.mode == "binned":
            cov = " x ".join(ax.describe() for ax in self.axes)
            return f"{self.groups} covariate cells ({cov}) x {self.outcome_bins} cells of {self.factor.container!r}"
        return (f"{self.groups} public groups of records (a k-d tree over {list(self.factor.public_names) or 'no inputs'}) "
                f"x {self.outcome_bins} cells of {self.factor.container!r}")

    def _public(self) -> dict:
        cells = {"mode": self.mode, "outcome_cut_points": [float(t) for t in self.outcome_cuts], "groups": self.groups,
                 "description": self.describe_cells()}
        if self.mode == "binned":
            cells["axes"] = [{"input": ax.source, "column": ax.column, "public": ax.public, "kind": ax.kind,
                              "cut_points": [float(t) for t in ax.cuts], "centres": [float(c) for c in ax.centres]}
                             for ax in self.axes]
        else:
            cells["group_sizes"] = [int(s) for s in self.group_sizes]
        return {
            **self.count_release_facts(f"the {self.cells} cells ({self.describe_cells()}) partition the records"),
            "cells": cells,
            "released": {"counts": [int(c) for c in (self.released if self.released is not None else [])]},
            "law": {self.factor.name: (
                ("cell counts Poisson(lambda_c p_k(theta; covariate cell c's centre)), lambda_c ~ Gamma(1, C / n) the "
                 "cells' unknown sizes with the public n observed as Poisson(n; sum lambda)" if self.mode == "binned" else
                 "cell counts Poisson(sum over the group's records of p_k(theta; the record's public inputs))")
                + ", each observed with discrete Laplace noise; the latent counts summed out exactly over "
                "+-30 noise scales; the law's mass outside the declared domain by its Poisson zero")},
            "seed": "random_seed seeds the posterior draws given the released counts (post-processing); the noise cannot be seeded.",
            "versions": {**software_versions(), "opendp": opendp_version()},
        }

    def __repr__(self):
        return (f"<NoisyTable {self.epsilon:g}-DP, unit={describe_unit(self.unit)['kind']}, {self.mode}: "
                f"{self.describe_cells()}>")


def noisy_table(model, *, epsilon: float, data: Mapping[str, Domain], unit: str | Users = "record",
                public: Sequence[str] = (), ledger: Ledger | None | str = "default", outcome_bins: int | None = None,
                covariate_bins: int | None = None, groups: int | None = None) -> NoisyTable:
    """A noisy table of record cells and the noise-aware posterior given it.

    Parameters
    ----------
    model : pm.Model or callable
        One private outcome container of scalar records observed by one factor whose parameters
        read per-record covariates: private ones with an ``Integers`` / ``Binary`` / bounded
        domain, or public ones (never mutated).
    epsilon : float
        The budget of the one release of the counts (every later draw is free).
    data : dict of str to Domain
        The private containers' domains (the cells come from them).
    unit : {"record", "attribute"} or Users
        The privacy unit.
    public : sequence of str
        Containers that are public.
    ledger : Ledger, None or "default"
        Where the charge is recorded.
    outcome_bins, covariate_bins, groups : int, optional
        The outcome's cells, the cells of each continuous covariate (binned mode) and the number
        of public groups (clustered mode); defaults from :func:`table_shape`. Choose them from
        public knowledge, never from the data.

    Returns
    -------
    NoisyTable
        Call ``sample`` to release.
    """
    return NoisyTable(model, epsilon=epsilon, data=data, unit=unit, public=public, ledger=ledger,
                      outcome_bins=outcome_bins, covariate_bins=covariate_bins, groups=groups)
