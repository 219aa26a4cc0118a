"""Metric DP posterior sampling for continuous records (ALT 2014 Def. 2; docs/theory/metric_dp.md).

``metric_posterior(model, epsilon=..., draws=..., data={"x": Interval(a, b)})`` releases exact
draws of a Normal-mean posterior (known noise sigma, Normal prior on the mean) truncated so that
the per-record log-likelihood is L-Lipschitz **in the record**, ``L = sup |d l / dx|``
(:func:`pymc_dp.metric.location_constant`); the release satisfies, with ``rho = sum_i |x_i - x'_i|``,

    P(B|x) <= exp(epsilon * rho(x, x')) P(B|x')      (epsilon = 2 N L).

The truncation: ``|x - mu| <= L sigma^2`` for every record, i.e. ``mu`` in
``[b - L sigma^2, a + L sigma^2]`` with ``L = epsilon / (2N)``. A Laplace location likelihood has
``L = 1/b`` everywhere (no truncation) but no exact sampler: refused with NotImplementedError.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

import numpy as np

from pymc_dp import metric as mt
from pymc_dp.certification import check_budget, check_containers
from pymc_dp.constraints import IntervalConstraint
from pymc_dp.domains import Domain, Interval
from pymc_dp.exact import conjugate_plan
from pymc_dp.exceptions import BudgetExceededError, NotConjugateError, PathNotImplementedError
from pymc_dp.ledger import Ledger
from pymc_dp.mechanisms.base import Mechanism, build_model
from pymc_dp.mechanisms.plan_release import release_plan_draws
from pymc_dp.private_data import PrivateData
from pymc_dp.release import check_ledger
from pymc_dp.version import software_versions

__all__ = ["MetricPosterior", "metric_posterior"]

MECHANISM = "posterior sampling, metric DP (rho = sum |x_i - x'_i|)"


class MetricPosterior(Mechanism):
    """Exact truncated Normal-mean posterior draws, ``epsilon``-metric-DP per unit of ``rho``."""

    name = MECHANISM
    algorithm = "iid draws of the Normal-mean posterior truncated to |x - mu| <= L sigma^2; L = sup |d l/dx|"

    def __init__(self, model, *, epsilon: float, draws: int, data: Mapping[str, Domain], public: Sequence[str] = (),
                 ledger: Ledger | None | str = "default"):
        self.model = build_model(model)
        check_budget(epsilon, 0.0, draws, "record", None)
        self._ledger_arg = check_ledger(ledger)
        self.last_release, self.draws, self.unit, self.delta = None, int(draws), "record", 0.0
        self.domains = dict(data)
        self.public = tuple(public)
        check_containers(self.model, self.domains, self.public, metric=True)
        obs = [rv for rv in self.model.observed_RVs]
        free = list(self.model.free_RVs)
        if len(obs) != 1 or len(free) != 1 or len(self.domains) != 1:
            raise PathNotImplementedError(
                f"metric_posterior: one free location parameter and one likelihood on one private container; the model "
                f"has free RVs {[v.name for v in free]}, likelihoods {[v.name for v in obs]} and private containers "
                f"{sorted(self.domains)}. Use pymc_dp.make_private for other models.")
        (name, dom), = self.domains.items()
        if not isinstance(dom, Interval):
            raise PathNotImplementedError(f"metric DP needs a continuous Interval domain: data[{name!r}] is {dom}; declare "
                                          "pymc_dp.Interval(lo, hi), or use pymc_dp.make_private.")
        # the metric is |x - x'| per record; an Interval without metric= is read the same way
        # (the report states it), any other metric is refused by Interval itself
        rv, self.var, self.reads = obs[0], free[0].name, (name,)
        family = type(rv.owner.op).__name__.replace("RV", "")
        family = {"normal": "Normal", "laplace": "Laplace", "logistic": "Logistic"}.get(family.lower(), family)
        loc, scale = rv.owner.inputs[-2], rv.owner.inputs[-1]
        while loc.owner is not None and type(loc.owner.op).__name__ == "DimShuffle":  # mu broadcast to the data
            loc = loc.owner.inputs[0]
        if loc is not free[0]:
            raise PathNotImplementedError(f"metric_posterior: the location of the likelihood {rv.name!r} must be the free RV "
                                          f"{self.var!r} itself (no transformation or regression); use pymc_dp.make_private.")
        try:
            s = float(np.min(np.asarray(scale.eval())))  # the constant is largest at the smallest scale
        except Exception as err:  # a scale that reads a free RV
            raise PathNotImplementedError(f"metric_posterior: the scale of the likelihood {rv.name!r} must be a known constant "
                                          "(it reads a free RV); fix the scale, or use pymc_dp.make_private.") from err
        self.family, self.scale = family, s
        L = float(epsilon) / (2 * self.draws)
        if family == "Laplace":
            laplace = mt.location_constant("Laplace", s, (0, 0), (dom.lo, dom.hi))
            raise PathNotImplementedError(
                f"the likelihood {rv.name!r} has a Laplace location: L = 1/b = {laplace:.6g} for every "
                "mu (no truncation), but there is no exact sampler for it and the MCMC metric release is not wired; use a "
                "Normal likelihood, or pymc_dp.make_private.")
        if family != "Normal":
            raise PathNotImplementedError(f"metric_posterior: the likelihood {rv.name!r} is {family} (the exact sampler is for "
                                          "a Normal likelihood only); use pymc_dp.make_private.")
        half = L * s**2
        lo, hi = float(dom.hi) - half, float(dom.lo) + half
        if not lo < hi:
            raise BudgetExceededError(
                f"epsilon={epsilon:g} for {draws} draws gives L = {L:.4g}, not above the smallest possible "
                f"(b - a) / (2 sigma^2) = {(dom.hi - dom.lo) / (2 * s**2):.4g}: raise epsilon")
        self.region = (lo, hi)
        self.constant = mt.location_constant("Normal", s, self.region, (dom.lo, dom.hi))
        g = mt.metric_guarantee(self.constant, self.draws)
        self.epsilon, self.epsilon_per_draw = g["epsilon"], g["epsilon_per_draw"]
        try:
            self.plan = conjugate_plan(self.model, (IntervalConstraint(self.var, lo, hi),), self.domains)
        except NotConjugateError as err:
            raise PathNotImplementedError(f"metric_posterior needs a conjugate Normal prior on {self.var!r}: {err}") from err
        self.private_data = PrivateData.from_model(self.model, self.domains, self.unit)
        self.dataset_id = self.private_data.fingerprint

    def _public(self) -> dict:
        return {
            "mechanism": self.name, "algorithm": self.algorithm, "epsilon": self.epsilon, "delta": 0.0,
            "draws": self.draws, "unit": "record", "rows_per_unit": 1,
            "domains": {k: d.to_dict() for k, d in self.domains.items()}, "public": list(self.public),
            "guarantee": {
                "mode": "metric DP",
                "metric": "rho(x, x') = sum_i |x_i - x'_i| ("
                          + ("declared on the domain: Interval(..., metric='abs')" if self.domains[self.reads[0]].metric
                             else "the metric of an Interval domain without metric=") + ")",
                "statement": mt.metric_statement(self.epsilon),
                "epsilon per unit of rho, per draw": self.epsilon_per_draw,
                f"L = sup |d l/dx| over {self.var} in the truncation and x in the domain": self.constant,
                f"truncation of {self.var}": list(self.region),
                "derivation": ("Normal(mu, sigma): |d l/dx| = |x - mu| / sigma^2, largest at a corner of the box; one draw "
                               "is 2L-metric-DP (ALT Thm 2(i)); N draws 2NL (docs/theory/metric_dp.md)"),
                "note": "the epsilon in the budget is per unit of rho; a Hamming neighbour is at rho <= b - a",
            },
            "seed": "random_seed seeds the exact posterior draws: keep it secret.",
            "versions": software_versions(),
        }

    def sample(self, draws: int | None = None, *, random_seed: Any = None, chains: int | None = None):
        """Charge ``epsilon`` (per unit of rho), then release the draws."""
        return release_plan_draws(self, draws, random_seed, chains, delta=0.0, public=self._public,
                                  note={"metric": "abs"})

    # ------------------------------------------------------------------ audits
    def audit_runs(self, data, runs, rng):
        return np.asarray(self.plan.with_data(data).sample(int(runs), rng)[self.var], float).reshape(int(runs), -1)

    def audit_metric(self, x, y) -> float:
        """Exact ``sup_mu |ln xi(mu|x) - ln xi(mu|y)|`` of one draw: the log-ratio of two truncated
        Normal posteriors of equal sd is linear in mu, so its extremes are at the truncation ends."""
        px, py = self.plan.with_data(x), self.plan.with_data(y)
        ends = {self.var: np.array(self.region, float)}
        return float(np.max(np.abs(px.log_density(ends) - py.log_density(ends))))


def metric_posterior(model, *, epsilon: float, draws: int, data: Mapping[str, Domain], public: Sequence[str] = (),
                     ledger: Ledger | None | str = "default") -> MetricPosterior:
    """Metric-DP posterior draws of a Normal mean; see :mod:`pymc_dp.mechanisms.metric`."""
    return MetricPosterior(model, epsilon=epsilon, draws=draws, data=data, public=public, ledger=ledger)
