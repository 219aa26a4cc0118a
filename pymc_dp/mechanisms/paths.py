"""Choosing a private path: which noisy-statistics mechanism fits a model, and which path serves it better.

:func:`noisy_statistics` builds the mechanism that fits the model (noisy counts with an exact
posterior for a discrete network with Beta / Dirichlet priors, noisy sufficient statistics of
iid families, of a Normal linear regression on private covariates, or private Newton steps for
a logistic regression). :func:`recommend` says,
from public facts only, whether that path or posterior sampling (:func:`pymc_dp.make_private`)
is expected to serve the model better. Both sit above the three mechanisms they choose among.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any, Mapping, Sequence

import numpy as np
import pymc as pm

from pymc_dp.domains import Domain
from pymc_dp.exceptions import DomainError, UnsupportedFactorError
from pymc_dp.ledger import Ledger
from pymc_dp.mechanisms.base import build_model
from pymc_dp.mechanisms.counts import NoisyCounts
from pymc_dp.mechanisms.histogram import NoisyHistogram
from pymc_dp.mechanisms.logistic import NoisyLogistic, is_logistic
from pymc_dp.mechanisms.pass_glm import PassGLM, read_glm
from pymc_dp.mechanisms.refined import RefinedRegression
from pymc_dp.mechanisms.regression import NoisyRegression
from pymc_dp.mechanisms.statistics import NoisyStatistics, ReadsPrivateCovariates
from pymc_dp.mechanisms.table import NoisyTable
from pymc_dp.sampling import quiet_sampler
from pymc_dp.units import Users

__all__ = ["Recommendation", "noisy_statistics", "recommend"]


def noisy_statistics(
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
    refine: float | None = None,
    stages: Sequence[tuple[float, float]] | None = None,
) -> NoisyStatistics:
    """Noise-aware inference on noisy sufficient statistics (:mod:`pymc_dp.mechanisms.statistics`, :mod:`pymc_dp.mechanisms.counts`, :mod:`pymc_dp.mechanisms.regression`).

    Parameters
    ----------
    model : pm.Model or callable
        A model whose private ``pm.Data`` containers are each observed by one factor of a
        supported family (Bernoulli, Binomial, Poisson, Normal) with parameters shared by every
        record, or a discrete network with Beta / Dirichlet priors whose parameters are gathered
        by at most one private class variable (Dirichlet-Categorical, naive Bayes), or a Normal
        (linear) or Bernoulli with an ``invlogit`` link (logistic) regression on private
        covariates. Never mutated.
    epsilon : float
        The budget of the one release of the statistics (every later draw is free).
    data : dict of str to Domain
        Each private container's domain (the sensitivity comes from it).
    delta : float
        0 (default): Laplace noise, pure ``epsilon``-DP. ``0 < delta < 1``: Gaussian noise calibrated
        to the L2 sensitivity by OpenDP's zCDP map, ``(epsilon, delta)``-DP (no exact-count path:
        discrete networks then go to the Gaussian statistics of each factor).
    unit : {"record", "attribute"} or Users
        The privacy unit.
    public : sequence of str
        Containers that are public.
    values : dict of str to array_like, optional
        The private values to use instead of the containers' own: a NumPy array (summed in
        chunks of rows) or a Dask array / dataframe (summed block by block, never loaded whole),
        for data larger than memory. The container in the model may then hold a small stand-in.
    ledger : Ledger, None or "default"
        Where the charge is recorded.
    weights : dict of str to float, optional
        Each released statistic's share of the budget, by its name (``mech.noise_scales`` lists
        them; 1 for those not given): statistic ``j`` gets noise of scale ``Delta_j K_w / (w_j
        epsilon)``, ``K_w`` the certified bound on ``sum_j w_j |change_j| / Delta_j``, so the
        release stays ``epsilon``-DP whatever the weights. A larger weight buys a statistic less
        noise at the others' expense, e.g. ``{"sum(y^2)": 3}`` where a regression's scale matters
        and the outcome's range is wide. Choose them from public knowledge, never from the data;
        the release states them. Given weights select the per-statistic path (a discrete network
        then releases the statistics of each factor, not one vector of counts).
    refine : float, optional
        Linear regressions only: release in two stages, ``(1 - refine) epsilon`` on ``ZᵀZ, Zᵀy,
        yᵀy`` and ``refine epsilon`` on the statistics of the residual about the first stage's fit,
        clipped to a band the first stage sets
        (:class:`~pymc_dp.mechanisms.refined.RefinedRegression`). It pays for the residuals'
        spread instead of the outcome's declared range: where the covariates explain much of the
        outcome and ``n epsilon`` is large enough for the first stage to find the fit, the scale
        and the coefficients come out much closer (``docs/mechanisms.md``). Its posterior is
        sampled with a dense mass matrix (``init="jitter+adapt_full"`` unless ``init=`` is
        given): with PyMC's diagonal one its intervals undercovered (0.84 of 0.90); with the dense
        one they cover 0.895 (200 datasets at epsilon = 5, ``benchmarks/results/calibration.md``).
        :func:`recommend` proposes it where the first stage can set a narrow band.
    stages : sequence of (float, float), optional
        Logistic regressions only: the plan of the private Newton steps
        (:class:`~pymc_dp.mechanisms.logistic.NoisyLogistic`), ``(score share, information
        share)`` of ``epsilon`` per stage, shares summing to 1 (default
        :data:`~pymc_dp.mechanisms.logistic.DEFAULT_STAGES`: five stages, the last two releasing
        the score only).

    Returns
    -------
    NoisyCounts, NoisyStatistics or NoisyHistogram
        :class:`~pymc_dp.mechanisms.counts.NoisyCounts` for a discrete network with Beta /
        Dirichlet priors (Beta-Bernoulli, Dirichlet-Categorical, naive Bayes: noisy counts and
        the exact posterior given them, iid draws); :class:`NoisyStatistics` for the families
        above (posterior by ``pm.sample``); else, for one container of scalar records under one
        law with a ``logcdf`` in PyMC (a mixture, a Student-t, ...; ``delta = 0``),
        :class:`~pymc_dp.mechanisms.histogram.NoisyHistogram`: a noisy histogram and the
        noise-aware posterior given it. Call ``sample`` to release.
    """
    model = build_model(model)
    kwargs = dict(epsilon=epsilon, data=data, unit=unit, public=public, values=values, ledger=ledger)
    if is_logistic(model, data):  # a Bernoulli with an invlogit link: private Newton steps
        if refine is not None:
            raise UnsupportedFactorError("refine= is for a Normal linear regression; a logistic regression's plan is stages=.")
        return NoisyLogistic(model, delta=delta, weights=weights, stages=stages, **kwargs)
    if stages is not None:
        raise UnsupportedFactorError("stages= is the plan of a logistic regression's private Newton steps; this model is not one.")
    if refine is not None:  # two stages: a linear regression only (read_regression refuses the rest, by name)
        return RefinedRegression(model, delta=delta, weights=weights, refine=refine, **kwargs)
    if weights is not None:  # per-statistic shares: the statistics paths
        try:
            return NoisyStatistics(model, delta=delta, weights=weights, **kwargs)
        except ReadsPrivateCovariates:
            return _covariate_regression(model, delta=delta, weights=weights, **kwargs)
    if delta == 0.0:
        try:  # a discrete network with Beta / Dirichlet priors: exact posterior, iid draws
            return NoisyCounts(model, **kwargs)
        except NotImplementedError as not_here:  # first: a PathNotImplementedError is an UnsupportedFactorError too
            try:
                return NoisyStatistics(model, **kwargs)
            except NotImplementedError:
                raise
            except (UnsupportedFactorError, DomainError):
                raise not_here from None
        except (UnsupportedFactorError, DomainError):
            pass  # not such a network: the paths below say what they need
    try:
        return NoisyStatistics(model, delta=delta, **kwargs)
    except ReadsPrivateCovariates:  # a regression on private covariates
        return _covariate_regression(model, delta=delta, **kwargs)
    except (UnsupportedFactorError, DomainError) as no_family:
        # no exponential family of its own: one container of scalar records under one law (a
        # mixture, a Student-t, ...) gets a noisy histogram; otherwise the families' reason stands
        if delta != 0.0 or kwargs.get("values") is not None:
            raise
        return _histogram_or_table(model, no_family, {k: v for k, v in kwargs.items() if k != "values"})


def _histogram_or_table(model, no_family: Exception, kwargs):
    """A model no exponential family serves: a noisy histogram (one law for every record), else a
    noisy table of record cells (one law per kind of record: a regression on public inputs or on
    covariates with public cells); else ``no_family``'s reason with both of theirs."""
    try:
        return NoisyHistogram(model, **kwargs)
    except (UnsupportedFactorError, DomainError) as no_histogram:
        try:
            return NoisyTable(model, **kwargs)
        except (UnsupportedFactorError, DomainError) as no_table:
            raise type(no_family)(f"{no_family} A noisy histogram does not apply either: {no_histogram} Nor a noisy "
                                  f"table: {no_table}") from no_family


def _exact_table(model, *, delta, weights, **kwargs) -> NoisyTable | None:
    """A :class:`NoisyTable` of ``model`` if one applies and its law is exact
    (:attr:`NoisyTable.exact_law`: no binned covariate), else None (public facts only)."""
    if delta != 0.0 or weights is not None or kwargs.get("values") is not None:
        return None
    try:
        table = NoisyTable(model, **{k: v for k, v in kwargs.items() if k != "values"})
    except (UnsupportedFactorError, DomainError):
        return None
    return table if table.exact_law else None


def _covariate_regression(model, *, delta, weights=None, **kwargs):
    """A regression on private covariates: for a Poisson regression with a log link, a noisy
    table if its law is exact (:func:`_exact_table`), else PASS-GLM's noisy quadratic statistics
    (:mod:`pymc_dp.mechanisms.pass_glm`); else the Normal linear
    regression (:class:`NoisyRegression`, which refuses any other likelihood by name)."""
    glm_refusal = None
    try:
        glm = read_glm(model, kwargs["data"])
    except (UnsupportedFactorError, DomainError, NotImplementedError) as err:
        glm, glm_refusal = None, err
    if glm is not None and glm.family == "poisson":
        # a table whose covariate cells are single values has the model's own law at every record;
        # PASS-GLM replaces exp by one quadratic over the predictor's range, which biases it where
        # the rates differ widely (the gallery's Poisson model, rates 1 to 36, n = 4,000, epsilon 10:
        # 31 posterior sds away, the table 0.1; benchmarks/results/gallery_utility.md)
        exact = _exact_table(model, delta=delta, weights=weights, **kwargs)
        return exact if exact is not None else PassGLM(model, delta=delta, weights=weights, **kwargs)
    try:
        return NoisyRegression(model, delta=delta, weights=weights, **kwargs)
    except (UnsupportedFactorError, DomainError) as err:
        # any other family (a negative binomial, a Student-t, an ordinal or indexed regression) on
        # covariates with public cells: a noisy table of record cells
        table_refusal = None
        if delta == 0.0 and weights is None and kwargs.get("values") is None:
            try:
                return NoisyTable(model, **{k: v for k, v in kwargs.items() if k != "values"})
            except (UnsupportedFactorError, DomainError) as no_table:
                table_refusal = no_table
        also = f" A noisy table does not apply either: {table_refusal}" if table_refusal is not None else ""
        if glm_refusal is None:
            raise type(err)(f"{err}{also}") from err
        # both refused: say both, so that a Poisson regression's user reads what PASS-GLM needs
        # (a covariate's domain, a public covariate) and not only the Normal regression's reason (FOUND.md #15)
        raise type(err)(f"{err} PASS-GLM (a Poisson regression with a log link) refused it too: {glm_refusal}{also}") from err


@dataclasses.dataclass(frozen=True)
class Recommendation:
    """Which private path is expected to serve a model better, from public facts only.

    Attributes
    ----------
    path : {"noisy_statistics", "make_private"}
        The recommended constructor.
    reason : str
        Why, in words a user can check.
    variance_inflation : dict of str to float
        For the noisy-statistics path: per statistic, ``1 + Var(noise_j) / (n Var(t_j))`` (``2 b_j^2``
        for Laplace, ``s_j^2`` for Gaussian noise), the factor by which the noise inflates the
        statistic's sampling variance (``Var(t_j)`` under
        the prior predictive, which is public). Empty when that path does not apply.
    options : dict
        Keyword arguments for the recommended constructor (empty unless a path needs some):
        ``{"refine": 0.6}`` for a regression whose first stage can set a narrow residual band.
    preview : UtilityPreview or None
        With ``recommend(..., preview=k)``: how far ``k`` releases of the recommended path land
        from the non-private posterior on simulated data (:func:`pymc_dp.preview`).
    """

    path: str
    reason: str
    variance_inflation: dict
    options: dict = dataclasses.field(default_factory=dict)
    preview: Any = None

    def __str__(self):
        text = f"{self.path}: {self.reason}"
        return text if self.preview is None else f"{text}\n{self.preview}"


def recommend(
    model,
    *,
    epsilon: float,
    data: Mapping[str, Domain],
    unit: str | Users = "record",
    public: Sequence[str] = (),
    random_seed: int = 0,
    delta: float = 0.0,
    preview: int = 0,
    draws: int = 1,
) -> Recommendation:
    """Say which private path is expected to serve ``model`` better, from public facts only.

    The choice reads the model's structure, the domains, the number of rows (public under
    replacement), ``epsilon`` and the prior predictive; it releases nothing and charges nothing.

    * Where :func:`noisy_statistics` applies (iid observations of a supported family), it is
      recommended: noisy sufficient statistics are asymptotically efficient and the
      noise-aware posterior is calibrated, while one posterior draw is not efficient
      (Foulds et al. 2016) and needs the prior truncated; its reason gives the expected
      variance inflation of each statistic.
    * Otherwise :func:`pymc_dp.make_private` (posterior sampling), with the reason the
      noisy-statistics path does not apply.

    The user can still pick either path. ``delta > 0`` advises on the Gaussian-noise release.
    ``preview=k`` (k > 0) also previews the recommended path's utility on ``k`` simulated datasets
    (:func:`pymc_dp.preview`, at ``draws`` draws for posterior sampling; minutes, nothing spent):
    the recommendation's ``preview``.
    """
    rec = _recommend(model, epsilon=epsilon, data=data, unit=unit, public=public, random_seed=random_seed, delta=delta)
    if not preview:
        return rec
    from pymc_dp.mechanisms.preview import preview as run_preview

    path = "noisy_statistics" if rec.path == "noisy_statistics" else "posterior"
    return dataclasses.replace(rec, preview=run_preview(model, epsilon=epsilon, draws=draws, data=data, path=path,
                                                        delta=delta, unit=unit, public=public, datasets=int(preview),
                                                        random_seed=random_seed))


def _recommend(model, *, epsilon, data, unit, public, random_seed, delta) -> Recommendation:
    try:
        mech = noisy_statistics(model, epsilon=epsilon, delta=delta, data=data, unit=unit, public=public, ledger=None)
    except (UnsupportedFactorError, DomainError, NotImplementedError) as err:
        return Recommendation(
            "make_private",
            f"noisy sufficient statistics do not apply ({err}); posterior sampling with a truncated prior does",
            {},
        )
    if isinstance(mech, NoisyHistogram):
        return Recommendation("noisy_statistics", (
            f"one container of scalar records under one law ({mech.factor.name!r}) with no sufficient statistics of "
            f"its own: a histogram of {mech.bins} public cells is released once with discrete Laplace noise of scale "
            f"{mech.noise_scale:.3g} per count, and the noise-aware posterior given it is sampled "
            "(docs/theory/histogram.md); one posterior draw would need the prior truncated"), {})
    if isinstance(mech, NoisyTable):
        return Recommendation("noisy_statistics", (
            f"one factor ({mech.factor.name!r}) whose records are few kinds of rows: a table of {mech.cells} public cells "
            f"({mech.describe_cells()}) is released once with discrete Laplace noise of scale {mech.noise_scale:.3g} per "
            "count, and the noise-aware posterior given it is sampled (docs/theory/table.md); one posterior draw would "
            "need the prior truncated"), {})
    if not isinstance(mech, NoisyStatistics):  # a discrete network: noisy counts, exact posterior
        return _recommend_counts(mech, epsilon, random_seed)
    if hasattr(mech, "regression"):  # the covariates are private: no prior predictive of them
        return _recommend_regression(mech, epsilon)
    if isinstance(mech, NoisyLogistic):
        return _recommend_logistic(mech, epsilon)
    if isinstance(mech, PassGLM):
        return Recommendation("noisy_statistics", (
            "a Poisson regression on private covariates: PASS-GLM's noisy quadratic statistics (sum z, sum z z', "
            "sum y' z) are released once and the noise-aware posterior given them is calibrated "
            "(benchmarks/results/calibration_pass_glm.md: 87-89% of 90% intervals at n = 300)"), {})
    inflation = {}
    with quiet_sampler():  # advice, not a release: no "Sampling: [...]" on the user's console
        prior = pm.sample_prior_predictive(draws=2000, model=mech.model, random_seed=random_seed,
                                           var_names=[f.name for f in mech.factors])
    for f in mech.factors:
        x = np.asarray(prior.prior_predictive[f.name].values, float)
        x = x.reshape(-1, *x.shape[2:])  # (draws, rows, ...)
        n = mech.rows[f.container] * f.elements
        # a family with other statistics than sum x, sum x^2 gives its own per-record values (censored_statistics)
        per_record = f.family.per_record(x) if getattr(f.family, "per_record", None) is not None else [x, x**2]
        for s, t in zip(f.family.statistics, per_record):
            var = float(np.mean(np.var(t.reshape(t.shape[0], -1), axis=1)))
            b = mech.noise_scales[s.name]
            inflation[s.name] = 1.0 + _noise_variance(mech, b) / (n * var) if var > 0 else math.inf
    worst = max(inflation.values())
    reason = (
        "every private factor is an iid observation of a supported family: the noisy sufficient "
        f"statistics are released once and the posterior given them is calibrated; the {mech.noise.capitalize()} noise "
        f"inflates the statistics' sampling variance by at most {worst:.3g}x at epsilon = {float(epsilon):g}"
    )
    return Recommendation("noisy_statistics", reason, inflation)


def _recommend_counts(mech, epsilon: float, random_seed: int) -> Recommendation:
    """The noisy-counts path's advice: per released count, ``1 + 2 b^2 / (n Var(t))`` with
    ``t`` the indicator that a record adds to it, ``Var(t)`` under the prior predictive."""
    with quiet_sampler():
        prior = pm.sample_prior_predictive(draws=200, model=mech.model, random_seed=random_seed,
                                           var_names=[rv.name for rv in mech.model.observed_RVs])
    pred = prior.prior_predictive
    from pymc_dp.factors import strip_casts

    obs_of = {rv.name: strip_casts(mech.model.rvs_to_values[rv]).name for rv in mech.model.observed_RVs}
    frac = []
    for d in range(200):
        data = {obs_of[k]: np.asarray(pred[k].values.reshape(-1, *pred[k].shape[2:])[d]) for k in pred.data_vars if obs_of.get(k) in mech.net.containers}
        frac.append(mech.true_counts(data) / mech.net.rows)
    f = np.asarray(frac)
    var = np.mean(f * (1 - f), axis=0)
    b = mech.noise_scale
    with np.errstate(divide="ignore"):
        infl = np.where(var > 0, 1.0 + 2.0 * b * b / (mech.n * np.maximum(var, 1e-300)), math.inf)
    inflation = dict(zip(mech.entry_names(), infl.tolist()))
    reason = (
        "the private data form a discrete network with Beta / Dirichlet priors (Beta-Bernoulli, "
        "Dirichlet-Categorical or naive Bayes): its counts are released once and the exact posterior given "
        "them is calibrated, with iid draws; the Laplace noise inflates the counts' sampling variance by at "
        f"most {max(inflation.values()):.3g}x at epsilon = {float(epsilon):g}"
    )
    return Recommendation("noisy_statistics", reason, inflation)


def _noise_variance(mech, scale: float) -> float:
    """The variance of one statistic's noise: ``2 b^2`` for Laplace(b), ``s^2`` for Gaussian(s)."""
    return scale * scale if getattr(mech, "noise", "laplace") == "gaussian" else 2.0 * scale * scale


def _recommend_regression(mech, epsilon: float) -> Recommendation:
    """A regression's advice from public facts only. The prior predictive would read the private
    covariates, so the per-record variance of each statistic's term is bounded by ``(span/2)^2``
    instead: the inflation ``1 + 2 b^2 / (n Var)`` is then a lower bound."""
    n = mech.rows[mech.regression.y]
    inflation = {}
    for _, s in mech.statistics:
        b = mech.noise_scales[s.name]
        inflation[s.name] = 1.0 + _noise_variance(mech, b) / (n * (s.span / 2.0) ** 2)
    reason = (
        "the private data enter a Normal regression through Z'Z, Z'y and y'y: they are released once and the "
        f"noise-aware posterior given them is calibrated; the {mech.noise.capitalize()} noise inflates those statistics' sampling "
        f"variance by at least {max(inflation.values()):.3g}x at epsilon = {float(epsilon):g} (a lower bound: "
        "the covariates are private, so their spread is bounded by the domains, not simulated)"
    )
    band = _noise_band(mech, REFINE)
    half = (mech.regression.y_range[1] - mech.regression.y_range[0]) / 2.0
    covariates = len(mech.regression.features)
    options = {}
    if band is not None and band < half / 2.0 and covariates > 1 and n < MEASURED_ROWS:
        reason += (
            f". Not released in two stages: the first stage's noise alone would set a residual band of about +-{band:.3g}, "
            f"but with {covariates} covariates and {n} records its noisy Z'Z may not locate the fit, and two stages then "
            f"serve worse than one (3 covariates, 309 records: every first stage fell back, docs/mechanisms.md, 'Where it "
            f"fails'); two stages are proposed with one covariate, or from {MEASURED_ROWS} records, where they were measured "
            "to help. refine= remains available"
        )
    elif band is not None and band < half / 2.0:
        options = {"refine": REFINE}
        reason += (
            f". Released in two stages (refine={REFINE:g}): at epsilon_1 = {(1 - REFINE) * float(epsilon):g} the first "
            f"stage's noise alone sets a residual band of about +-{band:.3g}, under half the outcome's half-range "
            f"{half:g}, so the second stage pays for the residuals' spread instead of the outcome's range and comes "
            "closer to the non-private posterior (calibrated: 0.895 of 0.90 over 200 datasets at epsilon = 5, "
            "benchmarks/results/calibration.md)"
        )
    return Recommendation("noisy_statistics", reason, inflation, options)


def _recommend_logistic(mech, epsilon: float) -> Recommendation:
    """A logistic regression's advice from public facts only: private Newton steps from
    ``n epsilon >= NEWTON_N_EPSILON`` records x budget, posterior sampling below.

    The threshold is measured, not derived: on the gallery's census regression (age and age²
    nearly collinear: the hardest direction has 1/1000 of the largest information) the last
    iterate of 400 walks lands within 2 posterior sds for every coefficient in 99.5% of releases
    at ``n epsilon = 3.3e5``, 96% at ``2e5``, 65% at ``1e5`` and 1.5% at ``3e4``
    (``benchmarks/gallery_logistic.py``); the covariates' spread, which decides it, is private.
    Below the threshold neither path is expected to come close on such data: on the census
    regression at ``n epsilon = 3e3`` posterior sampling lands a median 3.7 posterior sds away
    (``docs/gallery.md``), and the advice says so."""
    n = mech.rows[mech.logistic.y]
    budget = n * float(epsilon)
    if budget >= NEWTON_N_EPSILON:
        reason = (
            f"the private data enter a logistic regression: private Newton steps release its score and Fisher information "
            f"at public iterates ({len(mech.stages)} stages), and the posterior given the last noisy score has its noise "
            f"in the model; with n epsilon = {budget:.3g} >= {NEWTON_N_EPSILON:.3g} they were measured to land within 2 "
            "posterior sds of the non-private posterior (census data, benchmarks/results/gallery_logistic.md), where one "
            "posterior draw from a truncated prior does not"
        )
        return Recommendation("noisy_statistics", reason, {})
    reason = (
        f"private Newton steps apply (a logistic regression), but with n epsilon = {budget:.3g} < {NEWTON_N_EPSILON:.3g} "
        "their noise dominates the score (on the census data they missed by hundreds of sds at n epsilon = 3e4); "
        "posterior sampling with a truncated prior serves better there. Expect neither to come close to the "
        "non-private posterior at such n epsilon where covariates are nearly collinear (census data at n epsilon = 3e3: "
        "posterior sampling a median 3.7 posterior sds away, docs/gallery.md); more records or a larger epsilon is "
        "what helps"
    )
    return Recommendation("make_private", reason, {})


#: n x epsilon from which :func:`recommend` proposes private Newton steps for a logistic regression
NEWTON_N_EPSILON = 2e5

#: the second stage's share that :func:`recommend` proposes for a regression
REFINE = 0.6
#: with more than one covariate, two stages are proposed from this many records (measured to help
#: with 2 covariates at 1000 records, benchmarks/calibration.py; to hurt with 3 at 309)
MEASURED_ROWS = 1000


def _noise_band(mech, refine: float) -> float | None:
    """The band half-width a two-stage release's first stage would set from its noise alone
    (a residual sum of squares of 0, the ``y'y`` term of the noise's delta-method sd): public.
    None where the two-stage release is not implemented (Gaussian noise, ``unit="attribute"``)."""
    from pymc_dp.mechanisms.refined import BAND_SDS, UPPER_SDS
    from pymc_dp.units import describe_unit

    if mech.noise != "laplace" or describe_unit(mech.unit)["kind"] == "attribute":
        return None
    reg = mech.regression
    b_yy = mech.noise_scales[reg.stats[-1][0]] / (1.0 - refine)  # the scale of y'y at epsilon_1
    dof = max(mech.rows[reg.y] - len(reg.features) - int(reg.intercept), 1)
    return BAND_SDS * math.sqrt(UPPER_SDS * math.sqrt(2.0) * b_yy / dof)
