"""A utility preview before anything is spent: how far a release would land from the non-private posterior.

:func:`preview` answers, for the user's model, ``n``, ``epsilon`` and path, the question a user
asks before spending budget: *how close to the non-private posterior will the release be?* It
reads public facts only -- the model (its priors and structure), the declared domains, the
containers' shapes (``n`` is public under replacement) and the public containers' values -- and
never a private value:

1. **Simulated datasets.** Each private container that no factor observes (a covariate) is drawn
   from its declared domain; then ``candidates`` draws of the prior predictive give parameters
   ``theta`` and observed data. A draw whose records leave the declared domains is not data the
   release could receive, so the ``datasets`` draws with the fewest records outside their domains
   are kept (ties in the draw's order), and their records are clipped into the domains.
2. **Per dataset**: the non-private posterior by ``pm.sample`` (the reference), and one release of
   the chosen path (``make_private(..., path=path, ledger=None)``; nothing is charged, since no
   private data are read) on the same simulated data.
3. **The distance** of each released parameter element from the reference: ``|mean of the
   released draws - reference mean| / reference sd``; per release its median and largest over
   the elements. The preview states the median over datasets of both, and the share of releases
   with every element within 2 sds.

It spends no budget and leaks nothing (no private value is read), so it can be run and shown
freely; its cost is ``datasets`` non-private fits and releases (minutes for a small model). It is
an estimate on the prior predictive: data unlike the prior's (a prior that misplaces the data)
land elsewhere. ``benchmarks/preview.py`` checks it against releases on real data.
"""

from __future__ import annotations

import dataclasses
import time
import warnings
from typing import Any, Mapping, Sequence

import numpy as np
import pymc as pm
from pymc.model.fgraph import fgraph_from_model

from pymc_dp.core import make_private
from pymc_dp.domains import Domain
from pymc_dp.exceptions import PrivacyError
from pymc_dp.factors import strip_casts
from pymc_dp.mechanisms.counts import NoisyCounts
from pymc_dp.mechanisms.localized import quiet_sampler
from pymc_dp.reference import simulate_domain
from pymc_dp.rewrite import rebuild_model
from pymc_dp.units import Users

__all__ = ["UtilityPreview", "preview", "simulated_datasets"]

#: ``pm.sample`` settings of the non-private reference fit on each simulated dataset
REFERENCE = {"draws": 500, "tune": 500, "chains": 2}


@dataclasses.dataclass(frozen=True)
class UtilityPreview:
    """How far releases of one path land from the non-private posterior, on simulated data.

    Attributes
    ----------
    path : str
        The path previewed (``"auto"`` resolves to the chosen one: ``chosen``).
    chosen : str
        The path the releases took.
    epsilon : float
        The total budget of one release.
    draws : int
        Draws per release.
    median_distance, largest_distance : float
        Over the simulated releases, the median of each release's median and largest distance
        (in non-private posterior sds) over the parameter elements.
    within_2_sds : float
        The share of simulated releases with every element within 2 sds.
    releases : tuple of dict
        Per simulated dataset: ``median``, ``largest``, ``outside`` (records clipped into the
        domains) or ``refused`` (the path's refusal).
    seconds : float
        Wall time of the preview.
    """

    path: str
    chosen: str
    epsilon: float
    draws: int
    median_distance: float
    largest_distance: float
    within_2_sds: float
    releases: tuple[dict, ...]
    seconds: float

    def __str__(self) -> str:
        done = [r for r in self.releases if "median" in r]
        return (
            f"utility preview of path {self.chosen!r} at epsilon = {self.epsilon:g}, {self.draws} draw(s), on "
            f"{len(done)} simulated dataset(s): median distance {self.median_distance:.3g} and largest "
            f"{self.largest_distance:.3g} non-private posterior sds (medians over releases); "
            f"{100 * self.within_2_sds:.0f}% of releases within 2 sds"
        )


def _observed_containers(model: pm.Model, data: Mapping[str, Domain]) -> dict[str, str]:
    """Private container -> the observed RV that reads it (the factors' outcomes)."""
    out = {}
    for rv in model.observed_RVs:
        name = strip_casts(model.rvs_to_values[rv]).name
        if name in data:
            out[name] = rv.name
    return out


def _hull(domain: Domain) -> tuple[Any, Any]:
    return getattr(domain, "lo", -np.inf), getattr(domain, "hi", np.inf)


def simulated_datasets(model: pm.Model, data: Mapping[str, Domain], *, datasets: int, candidates: int = 64,
                       random_seed: int = 0) -> tuple[pm.Model, list[dict[str, np.ndarray]], list[int]]:
    """Public datasets of ``model``'s shapes (module docstring, step 1).

    Returns
    -------
    (pm.Model, list of dict, list of int)
        A copy of the model holding the simulated covariates (the user's model is not touched),
        the kept datasets (private container -> values, covariates included), and per dataset the
        number of records that left their domains and were clipped.
    """
    rng = np.random.default_rng(random_seed)
    sim = rebuild_model(fgraph_from_model(model)[0])
    observed = _observed_containers(sim, data)
    covariates = {}
    for name, domain in data.items():
        if name not in observed:
            value = simulate_domain(domain, np.shape(sim[name].get_value()), rng)
            covariates[name] = np.asarray(value, dtype=sim[name].dtype)
            sim.set_data(name, covariates[name])
    if not observed:
        return sim, [dict(covariates)] * datasets, [0] * datasets
    with warnings.catch_warnings(), quiet_sampler():
        warnings.simplefilter("ignore")
        prior = pm.sample_prior_predictive(draws=candidates, model=sim, var_names=sorted(observed.values()),
                                           random_seed=rng)
    drawn = {name: np.asarray(prior.prior_predictive[rv].values)[0] for name, rv in observed.items()}
    outside = np.zeros(candidates, dtype=int)
    for name, values in drawn.items():
        lo, hi = _hull(data[name])
        bad = (values < lo) | (values > hi) | ~np.isfinite(values)
        outside += bad.reshape(candidates, -1).sum(axis=1)
    keep = np.argsort(outside, kind="stable")[:datasets]
    out = []
    for k in keep:
        values = dict(covariates)
        for name in observed:
            lo, hi = _hull(data[name])
            values[name] = np.clip(np.nan_to_num(drawn[name][k], nan=lo if np.isfinite(lo) else 0.0), lo, hi).astype(
                sim[name].dtype)
        out.append(values)
    return sim, out, [int(outside[k]) for k in keep]


def _reference(model: pm.Model, seed: int) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    with warnings.catch_warnings(), quiet_sampler(), model:
        warnings.simplefilter("ignore")
        idata = pm.sample(**REFERENCE, random_seed=seed, progressbar=False, compute_convergence_checks=False)
    out = {}
    for rv in model.free_RVs:
        x = np.asarray(idata.posterior[rv.name].values, float)
        x = x.reshape(x.shape[0] * x.shape[1], -1)
        out[rv.name] = (x.mean(0), x.std(0))
    return out


def _distances(posterior, reference) -> np.ndarray:
    out = []
    for name, (mean, sd) in reference.items():
        x = np.asarray(posterior[name].values, float)
        x = x.reshape(x.shape[0] * x.shape[1], -1)
        with np.errstate(divide="ignore", invalid="ignore"):
            d = np.abs(x.mean(0) - mean) / sd
        out.append(np.where(np.isfinite(d), d, np.inf))  # a released NaN is as far as it gets
    return np.concatenate(out)


def preview(
    model: pm.Model,
    *,
    epsilon: float,
    draws: int,
    data: Mapping[str, Domain],
    path: str = "posterior",
    delta: float = 0.0,
    unit: str | Users = "record",
    public: Sequence[str] = (),
    datasets: int = 4,
    random_seed: int = 0,
    sample_kwargs: Mapping[str, Any] | None = None,
) -> UtilityPreview:
    """Preview the utility of a release before anything is spent (module docstring).

    Parameters
    ----------
    model : pm.Model
        The user's model (never mutated; its private values are never read).
    epsilon, draws, data, delta, unit, public
        As for :func:`pymc_dp.make_private`.
    path : str
        The release path to preview (``"auto"`` previews the path it chooses).
    datasets : int
        Simulated datasets (one release each).
    random_seed : int
        Seeds the simulation, the reference fits and the releases (public).
    sample_kwargs : dict, optional
        Passed to each release's ``sample()`` (e.g. ``tune``).

    Returns
    -------
    UtilityPreview
    """
    if isinstance(datasets, bool) or not isinstance(datasets, int) or datasets < 1:
        raise ValueError(f"datasets={datasets!r} must be an integer >= 1")
    t0 = time.perf_counter()
    sim, simulated, outside = simulated_datasets(model, data, datasets=datasets, random_seed=random_seed)
    kwargs = {"chains": 1, **dict(sample_kwargs or {})}
    rows, chosen, built = [], path, None
    for k, values in enumerate(simulated):
        row: dict[str, Any] = {"outside": outside[k]}
        try:
            with warnings.catch_warnings(), quiet_sampler():
                warnings.simplefilter("ignore")
                if built is not None and hasattr(built, "with_data"):  # certified once: the certificate is public
                    release = built.with_data(values)
                else:
                    for name, v in values.items():
                        sim.set_data(name, v)
                    release = built = make_private(sim, epsilon=epsilon, draws=draws, data=data, delta=delta,
                                                   unit=unit, public=public, ledger=None, path=path)
                    choice = getattr(built, "path_choice", None)
                    chosen = choice.path if choice is not None else path
                quiet = {} if isinstance(release, NoisyCounts) else {"progressbar": False}  # iid draws: no sampler
                idata = release.sample(random_seed=random_seed + 1 + k, **{**quiet, **kwargs})
        except PrivacyError as err:  # the path refuses the simulated data: say so, do not guess a distance
            row["refused"] = f"{type(err).__name__}: {err}"
            rows.append(row)
            continue
        for name, v in values.items():
            sim.set_data(name, v)
        d = _distances(idata.posterior, _reference(sim, random_seed + 101 + k))
        row.update(median=float(np.median(d)), largest=float(np.max(d)))
        rows.append(row)
    done = [r for r in rows if "median" in r]
    if not done:
        raise PrivacyError(f"preview: path {path!r} refused every simulated dataset ({rows[0]['refused']}).")
    return UtilityPreview(
        path=path, chosen=chosen, epsilon=float(epsilon), draws=int(draws),
        median_distance=float(np.median([r["median"] for r in done])),
        largest_distance=float(np.median([r["largest"] for r in done])),
        within_2_sds=float(np.mean([r["largest"] <= 2.0 for r in done])),
        releases=tuple(rows), seconds=time.perf_counter() - t0,
    )

