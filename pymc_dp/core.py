"""``@private`` and ``make_private``: from a PyMC model to certified, truncated, released draws."""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import functools
import math
import numbers
import os
import warnings
from typing import Any, Callable, Mapping, Sequence

import arviz as az
import numpy as np
import pymc as pm
import pytensor
import xarray as xr
from pytensor.graph.replace import graph_replace
from pytensor.graph.traversal import ancestors

from pymc_dp import accounting, lift
from pymc_dp.certificate import Certificate, FactorCertificate
from pymc_dp.domains import Domain
from pymc_dp.exceptions import (
    BudgetExceededError,
    DomainError,
    NotConjugateError,
    PrivacyError,
    StuckChainError,
    UnsupportedFactorError,
)
from pymc_dp.factors import find_factors, private_ancestors
from pymc_dp.rewrite import rewrite_model
from pymc_dp.sampling import check_backend, run_mcmc, starts_at_initvals
from pymc_dp.units import Users, check_unit, describe_unit
from pymc_dp.ledger import Ledger, Spend
from pymc_dp.preprocess import dataset_id
from pymc_dp.record import attach
from pymc_dp.split import BudgetSplit, InfeasibleBudget, choose_split
from pymc_dp.truncate import RegionContext, prior_draws, prior_mass

__all__ = ["private", "make_private", "PrivateModel"]

#: public seed of the prior draws used for prior mass and budget splits (data-independent)
PRIOR_SEED = 20140901
PRIOR_DRAWS = 4000

#: sampling methods of PrivateModel.sample
METHODS = ("auto", "exact", "mcmc")

MCMC_CAVEAT = (
    "MCMC draws are approximate posterior draws; the guarantee is exact for exact draws "
    "(JMLR 2017 Thm 8), and the released draws are chosen by a public thinning rule."
)

#: pm.sample keywords that mean something to every method (the rest only to MCMC)
_GENERAL_SAMPLE_KWARGS = {"progressbar", "cores", "compute_convergence_checks"}

_FORBIDDEN_SAMPLE_KWARGS = {
    "draws": "set `draws` in private(...): it is part of the privacy budget",
    "model": "the private model samples its own rewritten model",
    "return_inferencedata": "pymc_dp always returns an az.InferenceData",
    "discard_tuned_samples": "warm-up draws are never released",
    # a step instance is bound to the variables of the model it was built in, not to the
    # rewritten copy that is sampled; it would fail inside pm.sample, after the ledger charged
    "step": "the private model samples a rewritten copy of your model, to which a step method "
    "built in your model does not apply; tune NUTS with keywords instead (target_accept=..., "
    "nuts_sampler=...)",
}


def _versions() -> dict[str, str]:
    from pymc_dp import __version__

    return {
        "pymc_dp": __version__,
        "pymc": pm.__version__,
        "pytensor": pytensor.__version__,
        "arviz": az.__version__,
        "numpy": np.__version__,
    }


#: budget splits (docs/theory/truncation.md#split): maximise the prior mass kept, equal shares, or
#: the least expected distance from the admissible prior (docs/theory/truncation.md#fit)
SPLITS = ("optimised", "equal", "fit")


def _float_or_none(value) -> float | None:
    return None if value is None else float(value)


def _check_ledger(ledger):
    """``"default"`` (a ledger in the user's data directory, opened at the first release), a
    :class:`~pymc_dp.ledger.Ledger`, or ``None`` (no ledger: nothing is recorded)."""
    if ledger is None or isinstance(ledger, Ledger) or (isinstance(ledger, str) and ledger == "default"):
        return ledger
    raise PrivacyError(
        f"ledger={ledger!r} is not a budget ledger; pass pymc_dp.Ledger(path, epsilon=..., delta=...), "
        "'default' (the default ledger in your data directory) or None (record nothing)."
    )


def _check_budget(epsilon, delta, draws, unit, bounds):
    if bounds is None or epsilon is not None:  # with bounds, epsilon is a cap on what they cost
        if isinstance(epsilon, bool) or not isinstance(epsilon, numbers.Real) or not math.isfinite(epsilon) or epsilon <= 0:
            raise BudgetExceededError(f"epsilon={epsilon!r} must be a finite number > 0.")
    if bounds is not None and not isinstance(bounds, Mapping):
        raise PrivacyError("bounds must map free RV names to (lower, upper) truncation bounds.")
    if isinstance(delta, bool) or not isinstance(delta, numbers.Real) or not (0.0 <= delta < 1.0):
        raise BudgetExceededError(f"delta={delta!r} must be in [0, 1).")
    if isinstance(draws, bool) or not isinstance(draws, numbers.Integral) or draws < 1:
        raise PrivacyError(f"draws={draws!r} must be an integer >= 1: the number of released posterior draws.")
    check_unit(unit)


class PrivateModel:
    """A PyMC model made differentially private.

    Build it with :func:`private` or :func:`make_private`. It holds the certificate, the
    rewritten (truncated) model, and releases posterior draws with :meth:`sample`.

    Attributes
    ----------
    certificate : Certificate
        The privacy guarantee and everything public about it.
    model : pm.Model
        The rewritten model whose prior is restricted to Theta_L. The user's model is unchanged.
    """

    def __init__(
        self,
        model: pm.Model,
        *,
        epsilon: float | None,
        draws: int,
        data: Mapping[str, Domain],
        delta: float = 0.0,
        unit: str | Users = "record",
        bounds: Mapping[str, Any] | None = None,
        public: Sequence[str] = (),
        split: str = "optimised",
        ledger: Ledger | None | str = "default",
    ):
        if not isinstance(model, pm.Model):
            raise TypeError(f"expected a pm.Model, got {type(model).__name__}")
        _check_budget(epsilon, delta, draws, unit, bounds)
        if split not in SPLITS:
            raise PrivacyError(f"split={split!r} is not a budget split; use one of {list(SPLITS)}.")
        self._ledger_arg = _check_ledger(ledger)
        #: the InferenceData of the last release (None before the first), for the report
        self.last_release: az.InferenceData | None = None
        self._user_model = model
        self.draws = int(draws)
        self.unit = unit
        self.domains, self.public = self._check_containers(model, data, public)
        self._private_vars = {v: v.name for v in model.data_vars if v.name in self.domains}
        self._check_free_rvs(model)

        factors = find_factors(model, self._private_vars, self.domains)
        self.factors = [f for f in factors if f.is_private]
        if not self.factors:
            raise PrivacyError(
                f"no likelihood factor reads the private data {sorted(self.domains)}: there is "
                "nothing to make private. Check that observed= and the parameters use the pm.Data containers."
            )
        self._check_record_lengths()
        self._check_lagged_copies()
        reads = {f.name: f.reads for f in self.factors}

        ctx = RegionContext(model, self.domains, prior_draws(model, PRIOR_DRAWS, PRIOR_SEED))
        self._ctx = ctx
        if split == "fit" and bounds is None:
            from pymc_dp.reference import admissible_prior

            # public: priors, domains and shapes only (pymc_dp/reference.py)
            ctx.reference = admissible_prior(model, self.factors, self.domains, seed=PRIOR_SEED)

        self.delta = float(delta)
        if bounds is None:
            eps0 = accounting.per_draw_epsilon(epsilon, delta, draws)
            budget_split = self._split(ctx, eps0, split)
            regions = dict(budget_split.regions)
            lipschitz = {name: r.share for name, r in regions.items()}
            mass, mass_method = budget_split.prior_mass, budget_split.prior_mass_method
            mode = "budget"
        else:
            regions, lipschitz = self._certify_bounds(ctx, bounds)
            eps0 = lift.epsilon_per_draw_from_Delta(lift.lift(lipschitz, reads, unit))
            budget_split = None  # the truncation is the user's: there is nothing to split
            mode = "bounds"
            cons = [c for r in regions.values() for c in r.constraints]
            mass, mass_method = prior_mass(cons, ctx) if cons else (1.0, "exact")
        guarantee = accounting.compose(eps0, draws, delta)
        if mode == "bounds" and epsilon is not None and guarantee.epsilon > epsilon * (1 + 1e-12):
            raise BudgetExceededError(
                f"the truncation bounds={dict(bounds)!r} cost epsilon = {guarantee.epsilon:.4g} for {draws} "
                f"draw(s) (epsilon per draw {eps0:.4g}), above epsilon = {epsilon:g}. Narrow the bounds of "
                f"the parameters with the largest constants ({', '.join(f'{k}: {v:.3g}' for k, v in lipschitz.items())}), "
                "lower draws, or give only epsilon and let pymc_dp choose the truncation."
            )
        constraints = [c for r in regions.values() for c in r.constraints]
        self._constraints = tuple(constraints)

        # the Lipschitz graphs are needed only by indicator potentials (the fallback solver)
        walled = {c.factor for c in constraints if hasattr(c, "factor")}
        factor_exprs = {f.name: ctx.lipschitz(f) for f in self.factors if f.name in walled}
        self.model, self._initvals = rewrite_model(model, constraints, ctx, factor_exprs)
        self._released_names = self._releasable(model)

        self.certificate = Certificate(
            epsilon=float(guarantee.epsilon),
            delta=float(delta),
            draws=self.draws,
            epsilon_per_draw=float(eps0),
            unit=describe_unit(unit)["kind"],
            rows_per_unit=lift.rows_per_unit(unit),
            prior_mass_kept=float(mass),
            prior_mass_method=mass_method,
            factors=tuple(
                FactorCertificate(
                    name=f.name,
                    family=f.family,
                    reads=tuple(f.reads),
                    lipschitz=float(lipschitz[f.name]),
                    truncation=tuple(c.describe() for c in regions[f.name].constraints),
                    solver=regions[f.name].solver,
                    constraints=tuple(c.to_dict() for c in regions[f.name].constraints),
                    equal_share=_float_or_none(budget_split and budget_split.equal_shares.get(f.name)),
                    min_lipschitz=_float_or_none(budget_split and budget_split.min_shares.get(f.name)),
                    loose_bound=getattr(regions[f.name], "inexact_reason", None),
                    bound=getattr(regions[f.name], "bound", "lipschitz"),
                )
                for f in self.factors
            ),
            split=("fit" if ctx.reference is not None else budget_split.method) if budget_split else "none",
            split_objective=(ctx.reference.describe() if ctx.reference is not None else "prior mass") if budget_split else "none",
            equal_split_prior_mass=_float_or_none(budget_split and budget_split.equal_prior_mass),
            domains={k: d.to_dict() for k, d in self.domains.items()},
            public=tuple(self.public),
            composition=guarantee.method,
            epsilon_basic=float(guarantee.epsilon_basic),
            epsilon_optimal=None if guarantee.epsilon_optimal is None else float(guarantee.epsilon_optimal),
            mode=mode,
            versions=_versions(),
        )
        # the sampler method="auto" will use: decided from structure, truncation and domains only
        sampler = "exact" if self.conjugate_plan is not None else "mcmc"
        self.certificate = dataclasses.replace(
            self.certificate,
            sampler=sampler,
            exact_unavailable=self.exact_unavailable,
            caveats=self.certificate.caveats + ((MCMC_CAVEAT,) if sampler == "mcmc" else ()),
        )
        private_values = {v.name: np.asarray(v.get_value()) for v in self.model.data_vars if v.name in self.domains}
        #: the ledger's name for this dataset: a hash of the private data, never released
        self.dataset_id = dataset_id(private_values, self.domains, unit)

    # ------------------------------------------------------------------ checks
    @staticmethod
    def _check_containers(model, data, public):
        if not isinstance(data, Mapping):
            raise DomainError("data must map each private pm.Data container's name to its domain.")
        names = {v.name for v in model.data_vars}
        public = (public,) if isinstance(public, str) else tuple(public)  # public="X": one name, not 'X'
        for name in public:
            if name not in names:
                raise DomainError(f"public container {name!r} is not a pm.Data container of the model (it has {sorted(names)}).")
        domains = {}
        for name, dom in data.items():
            if name not in names:
                raise DomainError(
                    f"a domain is declared for {name!r}, but the model has no pm.Data container of that "
                    f"name (it has {sorted(names)}). Fix the name, or wrap the data in pm.Data({name!r}, ...)."
                )
            if name in public:
                raise DomainError(f"{name!r} is declared both public and private; choose one.")
            if not isinstance(dom, Domain):
                raise DomainError(f"the domain of {name!r} must be a pymc_dp domain (Interval, Binary, Integers, Ball, Box), got {dom!r}.")
            domains[name] = dom
        for v in model.data_vars:
            if v.name not in domains and v.name not in public:
                raise DomainError(
                    f"pm.Data container {v.name!r} is private (every container is, unless listed in "
                    f"public=) but has no domain. Declare it: data={{{v.name!r}: pymc_dp.Interval(lo, hi)}} "
                    "(or Binary(), Integers(lo, hi), Ball(r), Box(lo, hi)), or add it to public=."
                )
        for v in model.data_vars:
            if v.name in domains:
                value = v.get_value() if hasattr(v, "get_value") else getattr(v, "data", None)
                domains[v.name].validate(v.name, np.asarray(value))
        return domains, public

    def _observed_private(self, model) -> dict:
        """Observed RVs whose observed value reads private data, with the containers it reads.

        Wherever such an RV appears inside another variable, PyMC evaluates it as its observed
        value -- the private data -- but its graph does not show that dependence (with an
        explicit ``shape=``, not even through its size), so ancestor checks must look for it.
        """
        out = {}
        for rv in model.observed_RVs:
            found = private_ancestors(model.rvs_to_values[rv], self._private_vars)
            if found:
                out[rv] = found
        return out

    def _check_free_rvs(self, model):
        private = self._private_vars
        observed = self._observed_private(model)

        def through_observed(var, what):
            names = sorted(o.name for o in ancestors([var]) if o in observed and o is not var)
            if names:
                data = sorted({c for o in ancestors([var]) if o in observed and o is not var for c in observed[o]})
                raise UnsupportedFactorError(
                    f"{what} reads the observed RV(s) {names}, which PyMC evaluates as their "
                    f"observed values: the private data {data}. pymc_dp cannot see or bound that "
                    "dependence; use the pm.Data container itself where a supported form allows "
                    "it (e.g. theta[yd], not theta[y]), or remove the dependence."
                )

        for rv in model.free_RVs:
            found = private_ancestors(rv, private)
            if found:
                raise UnsupportedFactorError(
                    f"free RV {rv.name!r} has a prior that reads the private data {found}: every record "
                    "then moves the prior itself (a Gaussian-process latent whose covariance is computed "
                    "from all rows of X is the common case), so no per-record constant bounds what one "
                    "record changes, and pymc_dp cannot certify it. A prior must read only parameters and "
                    "public data: compute the GP on public inputs (or a public grid), or model the private "
                    "covariates through a likelihood factor."
                )
            through_observed(rv, f"free RV {rv.name!r}")
        for pot in model.potentials:
            found = private_ancestors(pot, private)
            if found:
                raise UnsupportedFactorError(
                    f"Potential {pot.name!r} reads private data {found}; pymc_dp cannot bound an "
                    "arbitrary potential. Write that term as an observed distribution."
                )
            through_observed(pot, f"Potential {pot.name!r}")
        for rv in model.observed_RVs:
            op = rv.owner.op
            params = op.dist_params(rv.owner) if hasattr(op, "dist_params") else rv.owner.inputs[2:]
            for param in params:
                through_observed(param, f"factor {rv.name!r}")

    def _check_record_lengths(self):
        if self.unit == "attribute":
            return
        lengths = {}
        for v in self._private_vars:
            if any(v.name in f.reads for f in self.factors):
                lengths[v.name] = int(np.shape(v.get_value())[0])
        if len(set(lengths.values())) > 1:
            raise DomainError(
                f"unit={self.unit!r} changes whole rows of every private container, but the containers "
                f"have different numbers of rows {lengths}; align them or use unit='attribute'."
            )
        if isinstance(self.unit, Users) and lengths:
            self.unit.check_rows(next(iter(lengths.values())))

    def _check_lagged_copies(self):
        """Refuse one time series entered twice as shifted private containers (``y`` and
        ``y_lag``): one observation would sit in two rows that the unit counts as independent.
        A check of the data the analyst holds, before anything runs; refusing reveals no more
        than the analyst already sees."""
        from pymc_dp.rules.timeseries import refuse_lagged_copies

        values = {v.name: np.asarray(v.get_value()) for v in self._private_vars}
        refuse_lagged_copies(values, self.unit, min_overlap=20, min_distinct=3)

    def _split(self, ctx, eps0: float, split: str) -> BudgetSplit:
        """Per-factor shares of ``Delta = eps0 / 2`` and the regions they give (docs/theory/truncation.md#split).

        A user unit is ``m`` records: its factors share ``Delta / m`` as records do.
        """
        Delta_record = eps0 / 2.0 / lift.rows_per_unit(self.unit)
        try:
            return choose_split(self.factors, Delta_record, lift.base_unit(self.unit), ctx, optimise=split != "equal")
        except InfeasibleBudget as err:
            raise self._infeasible_message(err, ctx, eps0, Delta_record) from None

    def _infeasible_message(self, err: InfeasibleBudget, ctx, eps0: float, Delta_record: float) -> BudgetExceededError:
        """Why no truncation fits, in words: proven (a certified floor), or not found (a search)."""
        reads = {f.name: f.reads for f in self.factors}
        lifted = lift.lift(err.mins, reads, self.unit)
        eps_min = accounting.compose(lift.epsilon_per_draw_from_Delta(lifted), self.draws, self.delta).epsilon
        name = max(err.mins, key=err.mins.get)
        factor = next(f for f in self.factors if f.name == name)
        others = sum(v for k, v in err.mins.items() if k != name)
        available = max(Delta_record - others, 0.0)  # what this factor may have, the others at their floors
        hint = _budget_hint(factor, ctx, available)
        if lifted >= Delta_record * (1 - 1e-12) and err.certified.get(name, True):
            return BudgetExceededError(
                f"the budget cannot be met: factor {name!r} ({factor.family}) has a per-record constant of at "
                f"least {err.mins[name]:.4g} for every parameter value (proved), and the factors' smallest "
                f"constants lift to more than the budget's Delta = {eps0 / 2:.4g} per draw. The smallest "
                f"epsilon the per-record constant can certify for {self.draws} draw(s) with unit={self.unit!r} "
                f"is at least {eps_min:.4g}.{_oscillation_note(factor)} To do: raise epsilon, lower draws, or {hint}."
            )
        if lifted >= Delta_record * (1 - 1e-12):
            return BudgetExceededError(
                f"no truncation that meets the budget was found: factor {name!r} ({factor.family}) has no "
                f"parameter value with a per-record constant below {err.mins[name]:.4g} that a numerical search "
                f"of the prior's support found (a search, not a proof that none exists), above the budget's "
                f"Delta = {eps0 / 2:.4g} per draw. epsilon about {eps_min:.4g} for {self.draws} draw(s) would "
                f"be needed at that point. To do: raise epsilon, lower draws, {hint}, or give explicit "
                "truncation bounds (bounds=...) to have their epsilon computed."
            )
        return BudgetExceededError(
            f"no truncation that meets the budget was found for factor {name!r} ({factor.family}): parameter "
            f"values with constants down to {err.mins[name]:.4g} exist (below the budget's Delta = "
            f"{eps0 / 2:.4g} per draw), but no region around them that the solvers can certify fits. To do: "
            f"raise epsilon, lower draws, {hint}, or give explicit truncation bounds (bounds=...)."
        )

    def _certify_bounds(self, ctx, bounds):
        """Explicit truncation (docs/theory/truncation.md#explicit-bounds): each named free RV is restricted to its bounds,
        and each factor's constant is the certified sup of its rule over that box (the region
        rules of :mod:`pymc_dp.rules.region`); epsilon follows from them."""
        from pymc_dp.boxes import BoxModel, _Unsupported
        from pymc_dp.oscillation import OscillationModel
        from pymc_dp.rules.region import NoRegionRule
        from pymc_dp.truncate import FactorRegion

        constraints, box = _bounds_constraints(bounds, ctx)
        read_by = {}
        regions, lipschitz = {}, {}
        for f in self.factors:
            try:
                bm = BoxModel(f, ctx)
            except (_Unsupported, NoRegionRule) as err:
                raise UnsupportedFactorError(
                    f"bounds=: factor {f.name!r} ({f.family}) has no rule that bounds its constant over a "
                    f"box of parameters ({err}); give epsilon= instead and let pymc_dp choose the truncation."
                ) from None
            full = {}
            for name in bm.vars:
                lo_s, hi_s = ctx.support(name)
                if math.isnan(lo_s):
                    lo_s, hi_s = -math.inf, math.inf
                full[name] = box.get(name, (lo_s, hi_s))
                read_by.setdefault(name, []).append(f.name)
            L = bm.region_L(full)
            bound = "lipschitz"
            osc_model = OscillationModel.build(f, ctx)
            if osc_model is not None:  # the sharper certificate, where the family has one
                half_osc = 0.5 * osc_model.oscillation(*(np.asarray(v, dtype=float) for v in full[osc_model.name]))
                if half_osc < L:
                    L, bound = half_osc, "oscillation"
            if not math.isfinite(L):
                open_vars = [n for n in bm.vars if n not in box]
                hint = (f"bound {open_vars} as well (their support is unbounded in a direction that makes the "
                        "constant grow)" if open_vars else "narrow the bounds (the constant is infinite at their ends)")
                raise BudgetExceededError(
                    f"bounds=: factor {f.name!r} ({f.family}) has no finite per-record constant over these bounds, "
                    f"so epsilon would be infinite; {hint}."
                )
            regions[f.name] = FactorRegion(f, L, [c for c in constraints if c.var in bm.vars], "bounds", None, bound)
            lipschitz[f.name] = L
        unread = sorted(set(box) - set(read_by))
        if unread:
            raise PrivacyError(
                f"bounds= gives bounds for {unread}, which no likelihood factor that reads private data "
                "depends on: their truncation does not change epsilon. Remove them (truncate such priors in "
                "the model itself if you want them truncated)."
            )
        return regions, lipschitz

    def _releasable(self, model) -> list[str]:
        names = [rv.name for rv in model.free_RVs]
        # an observed RV inside a Deterministic is evaluated as its observed value (the data)
        private = set(self._private_vars) | set(self._observed_private(model))
        for det in model.deterministics:
            if not (set(ancestors([det])) & private):
                names.append(det.name)
        return names

    # ------------------------------------------------------------------ other data
    def with_data(self, data: Mapping[str, Any]) -> "PrivateModel":
        """The same private mechanism on other private data of the same shapes.

        The truncation, the budget split and the certificate depend on the model, the domains
        and the data's *shapes* only, never on the values, so they carry over unchanged; the
        returned PrivateModel samples a fresh copy of the truncated model holding the new values,
        and is charged to the ledger under the new data's own fingerprint. This is what the
        audits use to run one mechanism on neighbouring datasets.

        Parameters
        ----------
        data : dict of str to array_like
            New values for some or all private containers; each must lie in its declared domain
            and have the container's current shape.

        Returns
        -------
        PrivateModel
            Shares this one's certificate; this one is unchanged.
        """
        from pymc.model.fgraph import fgraph_from_model
        from pymc_dp.rewrite import rebuild_model

        if not isinstance(data, Mapping):
            raise DomainError("with_data needs a dict mapping private container names to new values.")
        current = {v.name: v.get_value() for v in self.model.data_vars if v.name in self.domains}
        values = {}
        for name, value in data.items():
            if name not in current:
                raise DomainError(
                    f"with_data: {name!r} is not a private container of this model (it has {sorted(current)})."
                )
            arr = np.asarray(value)
            self.domains[name].validate(name, arr)
            if arr.shape != current[name].shape:
                raise DomainError(
                    f"with_data: {name!r} has shape {arr.shape}, but the private model was certified for "
                    f"shape {current[name].shape}; the truncation may depend on shapes, so make a new "
                    "private model for data of another shape."
                )
            values[name] = arr.astype(current[name].dtype)
        # fgraph_from_model deep-copies the data containers: the copy shares no storage with self
        fgraph, _ = fgraph_from_model(self.model)
        model = rebuild_model(fgraph)
        _same_order(model, self.model)
        for name, arr in values.items():
            model.set_data(name, arr)
        other = copy.copy(self)
        other.model = model
        other.last_release = None
        for cached in ("_plan", "_plan_refusal"):
            other.__dict__.pop(cached, None)
        private_values = {v.name: np.asarray(v.get_value()) for v in model.data_vars if v.name in self.domains}
        other.dataset_id = dataset_id(private_values, self.domains, self.unit)
        if (other.conjugate_plan is None) != (self.conjugate_plan is None):  # pragma: no cover - structure only
            raise AssertionError("the exact sampler's availability must not depend on the data")
        return other

    # ------------------------------------------------------------------ ledger
    @property
    def ledger(self) -> Ledger | None:
        """The budget ledger releases are recorded in (None: not recorded)."""
        if isinstance(self._ledger_arg, str):  # "default": opened at first use
            self._ledger_arg = Ledger()
        return self._ledger_arg

    def spent(self) -> Spend | None:
        """What the ledger has recorded for this model's private data, domains and unit."""
        return None if self.ledger is None else self.ledger.spent(self.dataset_id)

    def remaining(self) -> tuple[float, float] | None:
        """The ledger's remaining ``(epsilon, delta)`` for this dataset (inf: no total)."""
        return None if self.ledger is None else self.ledger.remaining(self.dataset_id)

    # ------------------------------------------------------------------ sampling
    def _chains(self, chains):
        if chains is not None:
            if isinstance(chains, bool) or not isinstance(chains, numbers.Integral) or chains < 1:
                raise ValueError(f"chains={chains!r} must be an integer >= 1")
            if self.draws % int(chains):
                raise ValueError(
                    f"chains={chains} does not divide draws={self.draws}: every chain must release the "
                    "same number of draws. Choose chains among the divisors of draws."
                )
            return int(chains)
        default = max(2, min(4, os.cpu_count() or 1))
        return max(c for c in range(1, default + 1) if self.draws % c == 0)

    @property
    def conjugate_plan(self):
        """The exact sampler of the truncated model, or None when it has none (see
        :attr:`exact_unavailable`). Decided from the model's structure, the truncation and
        the domains only -- never from the data values -- so the choice of sampler leaks nothing."""
        if not hasattr(self, "_plan"):
            from pymc_dp.exact import conjugate_plan

            try:
                self._plan, self._plan_refusal = conjugate_plan(self.model, self._constraints, self.domains), None
            except NotConjugateError as err:
                self._plan, self._plan_refusal = None, err
        return self._plan

    @property
    def exact_unavailable(self) -> str | None:
        """Why there is no exact sampler (None when there is one)."""
        return None if self.conjugate_plan is not None else str(self._plan_refusal)

    def _use_exact(self, method: str, mcmc_kwargs: dict) -> bool:
        if method not in METHODS:
            raise ValueError(f"method={method!r} is not a sampling method; use one of {list(METHODS)}.")
        if method == "mcmc":
            return False
        if self.conjugate_plan is None:
            if method == "exact":
                raise self._plan_refusal
            return False
        if method == "auto" and mcmc_kwargs:
            warnings.warn(
                f"method='auto' uses the exact conjugate sampler for this model; the MCMC keyword "
                f"argument(s) {sorted(mcmc_kwargs)} are ignored. Pass method='mcmc' to use them.",
                UserWarning,
                stacklevel=3,
            )
        return True

    def sample(
        self,
        *,
        method: str = "auto",
        chains: int | None = None,
        tune: int | None = None,
        thin: int = 1,
        random_seed: Any = None,
        **kwargs: Any,
    ) -> az.InferenceData:
        """Release ``draws`` posterior draws of the truncated model.

        The release is charged to the budget ledger *before* anything runs on the private data
        (a release that would overspend raises :class:`BudgetExceededError`, and nothing is
        sampled); a release that fails after it started stays charged.

        Parameters
        ----------
        method : {"auto", "exact", "mcmc"}
            ``"exact"``: iid draws from the truncated conjugate posterior (the guarantee is then
            exact); it raises :class:`NotConjugateError` when the model has no exact sampler.
            ``"mcmc"``: :func:`pymc.sample` on the rewritten model. ``"auto"``: exact when
            available, else MCMC; the choice depends on the model, never on the data values.
        chains : int, optional
            Number of chains; it must divide ``draws``. Default: the largest divisor of
            ``draws`` that is at most PyMC's default. Exact draws are laid out in the same
            ``(chain, draw)`` shape.
        tune : int, optional
            MCMC warm-up iterations per chain (never released); default 1000.
        thin : int
            MCMC: keep every ``thin``-th draw of each chain, a public, data-independent rule.
        random_seed : int, optional
            Makes the release reproducible. Keep it secret: whoever knows the seed and the
            algorithm can recompute the draws for candidate datasets.
        **kwargs
            Passed to :func:`pymc.sample` (``cores``, ``progressbar``, ``target_accept``,
            ``initvals``, ...). ``nuts_sampler="numpyro" | "blackjax"`` needs the ``jax`` extra
            and ``"nutpie"`` the ``nutpie`` extra (``pip install "pymc-dp[jax,nutpie]"``); every
            backend starts inside the truncation. JAX backends' draws for a given seed depend on
            how many CPU devices JAX has; ``nuts_sampler_kwargs={"chain_method": "vectorized"}``
            makes them independent of it.

        Returns
        -------
        az.InferenceData
            Only a ``posterior`` group with ``draws`` draws of the free RVs (and of the
            Deterministics that read no private data), and the certificate and the release's
            public facts as JSON in ``attrs["pymc_dp"]``.
        """
        for key, why in _FORBIDDEN_SAMPLE_KWARGS.items():
            if key in kwargs:
                raise TypeError(f"sample() does not take {key!r}: {why}.")
        if isinstance(thin, bool) or not isinstance(thin, numbers.Integral) or thin < 1:
            raise ValueError(f"thin={thin!r} must be an integer >= 1")
        if tune is not None and (isinstance(tune, bool) or not isinstance(tune, numbers.Integral) or tune < 0):
            raise ValueError(f"tune={tune!r} must be an integer >= 0")
        chains = self._chains(chains)
        mcmc_kwargs = {k: v for k, v in kwargs.items() if k not in _GENERAL_SAMPLE_KWARGS}
        if tune is not None:
            mcmc_kwargs["tune"] = tune
        if thin != 1:
            mcmc_kwargs["thin"] = thin
        exact = self._use_exact(method, mcmc_kwargs)
        # arguments that fail in the sampler fail here, before the ledger charges the release
        if exact:
            rng = _exact_rng(random_seed)
        else:
            check_backend(str(kwargs.get("nuts_sampler", "pymc")))
            _check_mcmc_seed(random_seed)
        ledger = self.ledger  # opened (or refused with LedgerError) before anything runs
        release = {"method": "exact" if exact else "mcmc", "chains": chains, "draws_per_chain": self.draws // chains}
        if exact:
            release.update(sampler="exact conjugate", plan=self.conjugate_plan.describe())
        else:
            release.update(
                sampler=str(kwargs.get("nuts_sampler", "pymc")),
                tune=1000 if tune is None else int(tune),
                thin=int(thin),
                caveat=MCMC_CAVEAT,
            )
        spending = (
            ledger.spend(self.dataset_id, self.certificate.epsilon, self.certificate.delta, description=self._spend_note(release))
            if ledger is not None
            else contextlib.nullcontext()
        )
        with spending:
            if exact:
                posterior = self._sample_exact(chains, rng)
            else:
                initvals = dict(self._initvals)
                user_init = kwargs.pop("initvals", None)
                if isinstance(user_init, Mapping):
                    initvals.update(user_init)
                posterior = run_mcmc(
                    self.model,
                    draws_per_chain=self.draws // chains * int(thin),
                    tune=1000 if tune is None else int(tune),
                    chains=chains,
                    initvals=initvals,
                    random_seed=random_seed,
                    **kwargs,
                )
                posterior = posterior.isel(draw=slice(int(thin) - 1, None, int(thin)))
                _refuse_stuck_chains(
                    posterior,
                    [rv.name for rv in self.model.free_RVs if rv.name in self._released_names],
                    initvals if starts_at_initvals(self.model, kwargs) else {},
                )
            release["ledger"] = ledger_state(ledger, self.dataset_id)
            return self._release(posterior, release)

    def _spend_note(self, release: dict) -> dict:
        """What the ledger row says about the release: public facts only."""
        return {
            "epsilon_per_draw": self.certificate.epsilon_per_draw,
            "draws": self.draws,
            "unit": describe_unit(self.unit),
            "factors": [f.name for f in self.certificate.factors],
            "method": release["method"],
            "pymc_dp": self.certificate.versions["pymc_dp"],
        }

    def _sample_exact(self, chains: int, random_seed: Any) -> xr.Dataset:
        rng = random_seed if isinstance(random_seed, np.random.Generator) else np.random.default_rng(random_seed)
        draws = self.conjugate_plan.sample(self.draws, rng)
        values = {name: np.asarray(draws[name]) for name in self.conjugate_plan.variables}
        dets = [d for d in self._released_names if d not in values]
        if dets:
            values.update(self._deterministics(dets, values))
        return draws_dataset(self.model, values, chains)

    def _deterministics(self, names: list[str], values: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        """Released Deterministics (functions of free RVs only), evaluated draw by draw."""
        free = [rv for rv in self.model.free_RVs if rv.name in values]
        # an observed RV stands for its observed value, as in pm.sample (not for a random draw)
        observed = {rv: self.model.rvs_to_values[rv] for rv in self.model.observed_RVs}
        outs = graph_replace([self.model[name] for name in names], observed, strict=False)
        fn = pytensor.function(free, outs, on_unused_input="ignore")
        rows = [fn(*(values[rv.name][i] for rv in free)) for i in range(self.draws)]
        return {name: np.stack([np.asarray(r[j]) for r in rows]) for j, name in enumerate(names)}

    def _release(self, posterior: xr.Dataset, release: dict) -> az.InferenceData:
        kept = posterior[self._released_names]
        kept = kept.assign_coords(draw=np.arange(kept.sizes["draw"]), chain=np.arange(kept.sizes["chain"]))
        # rebuilt from scratch so that no attribute of the sampler run travels with it
        data_vars = {name: (kept[name].dims, np.asarray(kept[name].values)) for name in self._released_names}
        coords = {k: np.asarray(v.values) for k, v in kept.coords.items()}
        released = xr.Dataset(data_vars, coords=coords)
        assert released.sizes["chain"] * released.sizes["draw"] == self.draws
        idata = az.InferenceData(posterior=released)
        attach(idata, {**self.certificate.to_dict(), "release": release}, allow_nan=True)
        self.last_release = idata
        return idata

    def report(self, **kwargs: Any):
        """The :class:`~pymc_dp.PrivacyReport` of this model and its last release (if any)."""
        from pymc_dp.privacy_report import report

        return report(self, **kwargs)

    def __repr__(self):
        c = self.certificate
        return f"<PrivateModel ({c.epsilon:.4g}, {c.delta:.3g})-DP, {self.draws} draws>\n{c}"


def _budget_hint(factor, ctx, available: float) -> str:
    """What would make ``factor`` fit, in its family's terms (a public computation)."""
    family = factor.family
    domain = ctx.domains.get(factor.observed_container)
    if family in ("Poisson", "NegativeBinomial", "Geometric") and hasattr(domain, "lo"):
        cap = _feasible_cap(factor, ctx, available)
        if cap is not None:
            return (f"cap the counts with a public rule and declare Integers({domain.lo}, {cap}) (the largest "
                    f"cap whose proved smallest constant fits this factor's share, {available:.3g})")
        return "cap the counts with a smaller domain (a smaller Integers(lo, hi))"
    if family == "Binomial":
        return ("observe Bernoulli records instead of one Binomial count (a count of n trials as one record "
                "has L >= ln C(n, n/2) whatever p), or marginalise p into a pm.BetaBinomial, whose constant can be 0")
    if family in ("Normal", "StudentT", "Laplace", "Cauchy", "LogNormal", "Censored", "Mixture", "AR"):
        return ("narrow the observed data's domain (the constant grows with its width over the scale), or give the "
                "scale parameter a prior with mass at larger values")
    if family == "Categorical":
        return "declare fewer classes in the domain, or use a prior with mass near uniform class probabilities"
    return "remodel the factor"


def _feasible_cap(factor, ctx, available: float) -> int | None:
    """The largest count cap ``M`` whose certified floor fits ``available`` (None if none does)."""
    from pymc_dp.boxes import certified_floor
    from pymc_dp.domains import Integers

    domain = ctx.domains[factor.observed_container]
    saved = ctx.domains[factor.observed_container]
    best = None
    try:
        for cap in range(domain.lo + 1, domain.hi + 1):
            ctx.domains[factor.observed_container] = Integers(domain.lo, cap)
            floor = certified_floor(factor, ctx)  # None: no positive floor at this cap
            if floor is not None and floor > available:
                break
            best = cap
    finally:
        ctx.domains[factor.observed_container] = saved
    return best


def _refuse_stuck_chains(posterior: xr.Dataset, names: Sequence[str], start: Mapping[str, Any]) -> None:
    """Raise :class:`StuckChainError` when a chain's draws of every free RV equal its start point.

    Such a chain never left its start, through warm-up and sampling (every proposal was rejected,
    e.g. at the wall of an indicator potential): its draws are not posterior draws, and releasing
    them as such would be wrong. Equal consecutive draws alone are not evidence (NUTS may keep
    its point for a step, and a release may hold two draws per chain); equality to the start
    after the warm-up is. The check reads only the draws that would be released and the public
    start point, so refusing leaks nothing more than releasing would; the charge stays on the
    ledger. Without a known start for every RV (a jittered start), nothing is checked.
    """
    per_chain = posterior.sizes.get("draw", 0)
    if per_chain < 1 or not names or any(name not in start for name in names):
        return
    for c in range(posterior.sizes["chain"]):
        stuck = all(
            np.array_equal(np.asarray(posterior[name].isel(chain=c).values),
                           np.broadcast_to(np.asarray(start[name], float), posterior[name].isel(chain=c).shape))
            for name in names
        )
        if stuck:
            raise StuckChainError(
                f"chain {c} of the release did not move: its {per_chain} draws of {list(names)} are all equal "
                "to its starting point, so they are not posterior draws and nothing was released (the "
                "ledger keeps the charge). The truncation region is probably hard to sample (an indicator "
                "potential); increase tune=, raise epsilon for a wider region, or write the factor in a form "
                "the box or affine solvers handle (see the certificate's solver)."
            )


def _oscillation_note(factor) -> str:
    """For a family with a closed-form oscillation (which has no floor: only a region's width
    costs), how to write the factor so that pymc_dp certifies it; empty otherwise."""
    from pymc_dp.rules.oscillation import natural_parameter

    if natural_parameter.dispatch(type(factor.op)) is natural_parameter.dispatch(object):
        return ""
    return (
        f" The oscillation certificate (docs/theory/oscillation.md) has no such floor for a {factor.family} "
        "factor, but pymc_dp applies it only where the parameter is an expression of one free RV that "
        f"reads no private data; {factor.name!r} is not written that way."
    )


def _bounds_constraints(bounds: Mapping[str, Any], ctx) -> tuple[list, dict]:
    """Interval constraints and the box ``name -> (lo, hi)`` of a ``bounds=`` mapping.

    Each value is ``(lower, upper)``; either may be None (unbounded), a number (every element)
    or an array of the RV's shape (per element).
    """
    from pymc_dp.boxes import packed_cholesky_diagonal
    from pymc_dp.truncate import ElementIntervalConstraint, IntervalConstraint

    constraints, box = [], {}
    for name, value in bounds.items():
        if name not in ctx.free:
            raise PrivacyError(f"bounds= names {name!r}, which is not a free RV of the model (it has {sorted(ctx.free)}).")
        try:
            lower, upper = value
        except (TypeError, ValueError):
            raise PrivacyError(f"bounds[{name!r}] must be a pair (lower, upper), got {value!r}.") from None
        shape = ctx.shapes[name]
        lo_s, hi_s = ctx.support(name)
        if math.isnan(lo_s):
            lo_s, hi_s = -math.inf, math.inf
        lo = np.broadcast_to(np.asarray(-math.inf if lower is None else lower, dtype=float), shape)
        hi = np.broadcast_to(np.asarray(math.inf if upper is None else upper, dtype=float), shape)
        lo, hi = np.maximum(lo, lo_s), np.minimum(hi, hi_s)
        diagonal = packed_cholesky_diagonal(ctx.model.rvs_to_transforms.get(ctx.free[name]), int(np.prod(shape)))
        if diagonal is not None:  # a packed Cholesky factor: its diagonal is positive
            lo = np.where(diagonal.reshape(shape), np.maximum(lo, 0.0), lo)
        if np.any(np.isnan(lo)) or np.any(np.isnan(hi)) or np.any(lo >= hi):
            raise PrivacyError(f"bounds[{name!r}] = {value!r} is empty inside the support of {name!r} ({lo_s:g}, {hi_s:g}).")
        box[name] = (lo, hi)
        if lo.size and np.all(lo == lo.reshape(-1)[0]) and np.all(hi == hi.reshape(-1)[0]):
            l0, h0 = float(lo.reshape(-1)[0]) if lo.size else lo_s, float(hi.reshape(-1)[0]) if hi.size else hi_s
            constraints.append(IntervalConstraint(name, None if l0 <= lo_s else l0, None if h0 >= hi_s else h0))
        else:
            constraints.append(ElementIntervalConstraint(name, tuple(lo.reshape(-1).tolist()), tuple(hi.reshape(-1).tolist())))
    return constraints, box


def draws_dataset(model: pm.Model, values: Mapping[str, np.ndarray], chains: int) -> xr.Dataset:
    """Draws (name -> array with the draws on the first axis) laid out as ``(chain, draw, ...)``
    with the dims and coords PyMC gives the same variables: the model's, else ``<name>_dim_<i>``."""
    draws = len(next(iter(values.values())))
    per_chain = draws // chains
    data_vars, coords = {}, {"chain": np.arange(chains), "draw": np.arange(per_chain)}
    for name, v in values.items():
        dims = tuple(model.named_vars_to_dims.get(name, ())) or tuple(f"{name}_dim_{i}" for i in range(v.ndim - 1))
        data_vars[name] = (("chain", "draw", *dims), v.reshape((chains, per_chain) + v.shape[1:]))
        for i, dim in enumerate(dims):
            labels = model.coords.get(dim)
            coords[dim] = np.asarray(labels) if labels is not None else np.arange(v.shape[1 + i])
    return xr.Dataset(data_vars, coords=coords)


def ledger_state(ledger: Ledger | None, dataset_id: str) -> dict | None:
    """What a release says of the ledger after it was charged (pending counts), or None."""
    if ledger is None:
        return None
    spend = ledger.spent(dataset_id)
    return {
        "spent_epsilon": spend.epsilon,
        "spent_delta": spend.delta,
        "releases": spend.releases + spend.pending + spend.failed,
        "total_epsilon": ledger.epsilon,
        "total_delta": ledger.delta,
    }


def _same_order(model: pm.Model, like: pm.Model) -> None:
    """Order ``model``'s variable lists as ``like``'s (same names).

    A FunctionGraph round trip lists independent variables in another order, and the samplers
    draw their random numbers in the order of ``free_RVs``: without this, the same seed would
    give other draws on the same data.
    """
    for attr in ("free_RVs", "observed_RVs", "potentials", "deterministics", "data_vars"):
        rank = {v.name: i for i, v in enumerate(getattr(like, attr))}
        getattr(model, attr).sort(key=lambda v: rank[v.name])


def _bad_seed(random_seed, err: Exception) -> Exception:
    return type(err)(
        f"random_seed={random_seed!r} is not a seed ({err}); give an integer >= 0, a sequence of "
        "them, or a numpy Generator."
    )


def _exact_rng(random_seed) -> np.random.Generator:
    """The exact samplers' generator for ``random_seed``."""
    if isinstance(random_seed, np.random.Generator):
        return random_seed
    try:
        return np.random.default_rng(random_seed)
    except (TypeError, ValueError) as err:
        raise _bad_seed(random_seed, err) from None


def _check_mcmc_seed(random_seed) -> None:
    """Refuse what pm.sample would refuse as a seed, without drawing from a generator."""
    if random_seed is None or isinstance(random_seed, (np.random.Generator, np.random.RandomState)):
        return
    try:
        np.random.SeedSequence(random_seed)
    except (TypeError, ValueError) as err:
        raise _bad_seed(random_seed, err) from None


def make_private(
    model: pm.Model,
    *,
    epsilon: float | None = None,
    draws: int,
    data: Mapping[str, Domain],
    delta: float = 0.0,
    unit: str | Users = "record",
    bounds: Mapping[str, Any] | None = None,
    public: Sequence[str] = (),
    split: str = "optimised",
    ledger: Ledger | None | str = "default",
) -> PrivateModel:
    """Make an existing PyMC model private; see :func:`private` for the keywords."""
    return PrivateModel(
        model,
        epsilon=epsilon,
        draws=draws,
        data=data,
        delta=delta,
        unit=unit,
        bounds=bounds,
        public=public,
        split=split,
        ledger=ledger,
    )


def private(
    *,
    epsilon: float | None = None,
    draws: int,
    data: Mapping[str, Domain],
    delta: float = 0.0,
    unit: str | Users = "record",
    bounds: Mapping[str, Any] | None = None,
    public: Sequence[str] = (),
    split: str = "optimised",
    ledger: Ledger | None | str = "default",
) -> Callable[[Callable[..., pm.Model]], Callable[..., PrivateModel]]:
    """Decorate a function that builds and returns a ``pm.Model``.

    Parameters
    ----------
    epsilon : float
        Total privacy budget of releasing ``draws`` posterior draws.
    draws : int
        Number of posterior draws released; together they cost at most ``epsilon``.
    data : dict of str to Domain
        Each private ``pm.Data`` container's name and the public domain of its records.
    delta : float, default 0
        The delta of (epsilon, delta)-DP. With ``delta > 0`` the draws compose by the exact
        optimal composition of pure-DP mechanisms (docs/theory/guarantee.md#composition), which gives each
        draw a larger share than ``epsilon / draws``; with ``delta = 0`` composition is basic.
    unit : {"record", "attribute"} or Users
        What neighbouring datasets differ in: a row of every private container, one
        container's value in one row, or every row of one user (``pymc_dp.Users(ids)`` or
        ``pymc_dp.Users(max_rows=m)``).
    bounds : dict, optional
        Explicit truncation instead of a budget: ``{"w": (-1, 1), "sigma": (0.5, None)}``
        restricts each named free RV to ``[lower, upper]`` (None: unbounded; an array: per
        element). epsilon is then computed from the certified constants over those bounds;
        with ``epsilon`` given too, it is a cap, and bounds that cost more are refused.
    public : sequence of str
        ``pm.Data`` containers that are not private.
    split : {"optimised", "equal", "fit"}
        How the per-draw loss is shared among the factors and where the regions sit:
        ``"optimised"`` keeps the most prior mass (docs/theory/truncation.md#split; the equal
        split's mass is reported beside it); ``"equal"`` gives equal shares; ``"fit"`` aims at
        the prior conditioned on a simulated dataset inside the declared domains, and keeps the
        regions closest to it (docs/theory/truncation.md#fit: public, spends nothing; the
        certificate states it and the reference's effective sample size).
    ledger : Ledger, "default" or None
        Where releases are recorded and charged. ``"default"``: a ledger in your data
        directory (``PYMC_DP_LEDGER`` overrides the path) with no total, which records every
        release so that the cumulative spend on a dataset is visible across sessions.
        ``pymc_dp.Ledger(path, epsilon=total, delta=total)`` also refuses releases that would
        overspend the total. ``None``: nothing is recorded.

    Returns
    -------
    decorator
        Calling the decorated function returns a :class:`PrivateModel`.

    Examples
    --------
    >>> @pymc_dp.private(epsilon=1.0, draws=10, data={"x": pymc_dp.Binary()})
    ... def coin(x):
    ...     with pm.Model() as m:
    ...         xd = pm.Data("x", x)
    ...         p = pm.Beta("p", 1, 1)
    ...         pm.Bernoulli("obs", p=p, observed=xd)
    ...     return m
    >>> idata = coin(np.array([0, 1, 1])).sample(random_seed=1)
    """

    def decorator(build: Callable[..., pm.Model]) -> Callable[..., PrivateModel]:
        @functools.wraps(build)
        def wrapper(*args, **kwargs) -> PrivateModel:
            model = build(*args, **kwargs)
            return make_private(
                model,
                epsilon=epsilon,
                draws=draws,
                data=data,
                delta=delta,
                unit=unit,
                bounds=bounds,
                public=public,
                split=split,
                ledger=ledger,
            )

        return wrapper

    return decorator
