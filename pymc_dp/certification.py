"""Certification: from a PyMC model, a budget and the data's domains to a frozen, public result.

:func:`certify` reads the model as a factor graph, checks every private factor, splits the
per-draw budget ``Delta`` across the factors, truncates the priors to the certified regions and
rewrites the model (a new model: the user's is never mutated). Its result,
:class:`Certification`, holds everything a release needs as public fields -- the factors, their
regions and constraints, the truncated model and its start values, the certificate -- so that
the release driver (:class:`pymc_dp.core.PrivateModel`), the audits, the plots and the report
read fields rather than another object's private attributes. The stages are documented in
``docs/theory/truncation.md``; the rules in ``docs/theory/families.md``.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

import numpy as np
import pymc as pm
from pytensor.graph.traversal import ancestors

from pymc_dp import accounting, lift
from pymc_dp.certificate import Certificate, FactorCertificate
from pymc_dp.contamination import check_unbounded_domains, contamination_of
from pymc_dp.domains import Domain
from pymc_dp.exceptions import (
    BudgetExceededError,
    DomainError,
    NotConjugateError,
    PrivacyError,
    UnsupportedFactorError,
    refuse_estimate,
)
from pymc_dp.factors import Factor, find_factors
from pymc_dp.graph_checks import check_graph, observed_private
from pymc_dp.refutation import refute_claims
from pymc_dp.rewrite import rewrite_model
from pymc_dp.split import BudgetSplit, InfeasibleBudget, choose_split
from pymc_dp.truncate import FactorRegion, RegionContext, prior_draws, prior_mass
from pymc_dp.units import Users, as_unit, check_unit, describe_unit
from pymc_dp.version import software_versions

__all__ = ["Certification", "certify", "check_containers"]

#: public seed of the prior draws used for prior mass and budget splits (data-independent)
PRIOR_SEED = 20140901
PRIOR_DRAWS = 4000

#: budget splits (docs/theory/truncation.md#split): maximise the prior mass kept, equal shares, or
#: the largest smoothed mass under the admissible prior (docs/theory/truncation.md#fit)
SPLITS = ("optimised", "equal", "fit")

MCMC_CAVEAT = (
    "MCMC draws are approximate posterior draws; the guarantee is exact for exact draws "
    "(JMLR 2017 Thm 8), and the released draws are chosen by a public thinning rule."
)


@dataclass(frozen=True)
class Certification:
    """What :func:`certify` established about a model: public fields, frozen.

    Attributes
    ----------
    user_model : pm.Model
        The model as the user wrote it (never mutated).
    domains : dict of str to Domain
        The private containers' declared domains.
    public : tuple of str
        The containers declared public.
    unit : Unit
        The privacy unit (:class:`~pymc_dp.Record`, :class:`~pymc_dp.Attribute` or
        :class:`~pymc_dp.Users`; it compares equal to its name).
    draws : int
        Released draws the budget was split for.
    delta : float
        DP's delta of the whole release.
    factors : tuple of Factor
        The likelihood factors that read private data.
    regions : dict of str to FactorRegion
        Per factor, its certified region (constraints, solver, certified constant).
    constraints : tuple
        Every region's constraints on the free RVs: the truncation the certificate claims.
    truncated_model : pm.Model
        The rewritten model whose prior is restricted to the regions.
    initvals : dict of str to ndarray
        Start values inside the truncation (public).
    released_names : tuple of str
        Free RVs and the Deterministics that read no private data: what a release may hold.
    context : RegionContext
        The solvers' context: free RVs, domains, public prior draws, compiled caches.
    certificate : Certificate
        The privacy guarantee and everything public about it.
    conjugate_plan : object or None
        The exact sampler of the truncated model (None: MCMC; see ``plan_refusal``).
    plan_refusal : Exception or None
        Why there is no exact sampler.
    """

    user_model: pm.Model
    domains: Mapping[str, Domain]
    public: tuple[str, ...]
    unit: Any
    draws: int
    delta: float
    factors: tuple[Factor, ...]
    regions: Mapping[str, FactorRegion]
    constraints: tuple
    truncated_model: pm.Model
    initvals: Mapping[str, Any]
    released_names: tuple[str, ...]
    context: RegionContext
    certificate: Certificate
    conjugate_plan: Any = None
    plan_refusal: Exception | None = None


def same_order(model: pm.Model, like: pm.Model) -> None:
    """Order ``model``'s variable lists as ``like``'s (same names).

    A FunctionGraph round trip lists independent variables in another order, and the samplers
    draw their random numbers in the order of ``free_RVs``: without this, the same seed would
    give other draws on the same data.
    """
    for attr in ("free_RVs", "observed_RVs", "potentials", "deterministics", "data_vars"):
        rank = {v.name: i for i, v in enumerate(getattr(like, attr))}
        getattr(model, attr).sort(key=lambda v: rank[v.name])


def _float_or_none(value) -> float | None:
    return None if value is None else float(value)


def check_budget(epsilon, delta, draws, unit, bounds) -> None:
    """Refuse a budget that is not one: epsilon > 0 finite (unless bounds= give the truncation),
    0 <= delta < 1, draws a positive integer, a known unit."""
    import numbers

    refuse_estimate("epsilon", epsilon)
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


def check_arguments(model, epsilon, delta, draws, unit, bounds, split) -> None:
    """Refuse arguments that are not a model, a budget and a split (cheap: before anything runs)."""
    if not isinstance(model, pm.Model):
        raise TypeError(f"expected a pm.Model, got {type(model).__name__}")
    check_budget(epsilon, delta, draws, unit, bounds)
    if split not in SPLITS:
        raise PrivacyError(f"split={split!r} is not a budget split; use one of {list(SPLITS)}.")


def certify(
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
) -> Certification:
    """Certify ``model`` for ``draws`` released draws at ``(epsilon, delta)``.

    The arguments are those of :func:`pymc_dp.make_private` without the ledger: nothing is
    released or charged, and nothing about the data values is in the result's certificate.

    Returns
    -------
    Certification

    Raises
    ------
    DomainError, UnsupportedFactorError, BudgetExceededError, PrivacyError
        As :func:`pymc_dp.make_private`, with the variable named and what to do.
    """
    check_arguments(model, epsilon, delta, draws, unit, bounds, split)
    c = _Certifier(model, epsilon=epsilon, draws=draws, data=data, delta=delta, unit=unit, bounds=bounds,
                   public=public, split=split)
    return Certification(
        user_model=model,
        domains=c.domains,
        public=tuple(c.public),
        unit=c.unit,
        draws=int(draws),
        delta=float(delta),
        factors=tuple(c.factors),
        regions=c.regions,
        constraints=tuple(c._constraints),
        truncated_model=c.model,
        initvals=c._initvals,
        released_names=tuple(c._released_names),
        context=c._ctx,
        certificate=c.certificate,
        conjugate_plan=c.plan,
        plan_refusal=c.plan_refusal,
    )


def check_claims(regions: Mapping[str, Any], lipschitz: Mapping[str, float], reads, unit, eps0: float) -> None:
    """Fail closed before a certificate is issued: every factor's certified bound is a number at
    most its share, and the shares lift to at most the per-draw budget. A NaN anywhere fails
    (``a <= b`` is False for NaN; ``not a > b`` would pass it). A failure is a bug in a solver,
    never the user's: it raises :class:`PrivacyError` and nothing is certified."""
    for name, region in regions.items():
        share = lipschitz[name]
        certified = getattr(region, "certified_lipschitz", None)
        if not (0.0 <= share < math.inf) or (certified is not None and not certified <= share * (1 + 1e-9)):
            raise PrivacyError(
                f"internal check failed for factor {name!r}: its certified bound {certified!r} does not fit its share "
                f"{share!r} of the budget. This is a bug in pymc_dp; nothing was certified. Please report it."
            )
    eps_lifted = lift.epsilon_per_draw_from_Delta(lift.lift(dict(lipschitz), reads, unit))
    if not eps_lifted <= eps0 * (1 + 1e-9):
        raise PrivacyError(
            f"internal check failed: the factors' shares lift to epsilon per draw {eps_lifted!r}, above the budget's "
            f"{eps0!r}. This is a bug in pymc_dp; nothing was certified. Please report it."
        )


def _family_of(factor, contamination) -> str:
    """A factor's family as the certificate states it: a contaminated factor says by what."""
    if contamination is None:
        return factor.family
    g = dict(contamination.g).get(factor.name)
    if g is None:
        return factor.family
    return (f"{factor.family} (Huber contamination of the model's likelihood f: (1 - p) f + p g, p = {contamination.p:g}, "
            f"g = {g.describe()})")


def check_containers(model, data, public, *, unbounded: bool = False, metric: bool = False):
    """Validate ``data`` (container -> Domain) and ``public`` against ``model``'s containers and
    their values: every container is private unless public, every private one has a domain, and
    its values lie in it. Returns ``(domains, public)``.

    An unbounded ``Interval`` is refused unless ``unbounded`` (posterior sampling, which then
    accepts it only for contaminated factors): a release whose sensitivity comes from the
    domain has none to come from. A domain that declares a metric (``Interval(..., metric="abs")``)
    is refused unless ``metric`` (the metric-DP release)."""
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
        if getattr(dom, "unbounded", False) and not unbounded:
            raise DomainError(
                f"the domain {dom} of {name!r} is unbounded: this release's sensitivity comes from the domain, so it "
                "needs finite bounds. Declare the public range the data can take; only posterior sampling of a "
                "contaminated model (pymc_dp.contaminate, then pymc_dp.make_private) accepts an unbounded domain."
            )
        if getattr(dom, "metric", None) is not None and not metric:
            raise DomainError(
                f"the domain {dom} of {name!r} declares a metric: metric DP is released by pymc_dp.metric_posterior. "
                "This release gives replace-one DP instead; declare the domain without metric= to use it."
            )
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


class _Certifier:
    """The stages of :func:`certify` on one model (working state; the result is frozen)."""

    def __init__(self, model, *, epsilon, draws, data, delta, unit, bounds, public, split):
        self.draws = int(draws)
        self.unit = as_unit(unit)
        self.domains, self.public = check_containers(model, data, public, unbounded=True)
        self._private_vars = {v: v.name for v in model.data_vars if v.name in self.domains}
        check_graph(model, self._private_vars)

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
        check_unbounded_domains(self.factors, self.domains, ctx)
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
            check_claims(regions, lipschitz, reads, self.unit, eps0)
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
        if mode == "bounds" and epsilon is not None and not guarantee.epsilon <= epsilon * (1 + 1e-12):  # NaN fails closed
            raise BudgetExceededError(
                f"the truncation bounds={dict(bounds)!r} cost epsilon = {guarantee.epsilon:.4g} for {draws} "
                f"draw(s) (epsilon per draw {eps0:.4g}), above epsilon = {epsilon:g}. Narrow the bounds of "
                f"the parameters with the largest constants ({', '.join(f'{k}: {v:.3g}' for k, v in lipschitz.items())}), "
                "lower draws, or give only epsilon and let pymc_dp choose the truncation."
            )
        constraints = [c for r in regions.values() for c in r.constraints]
        check_regions_have_width(constraints, ctx)
        self._constraints = tuple(constraints)

        # the Lipschitz graphs are needed only by indicator potentials (the fallback solver)
        walled = {c.factor for c in constraints if hasattr(c, "factor")}
        factor_exprs = {f.name: ctx.lipschitz(f) for f in self.factors if f.name in walled}
        self.model, self._initvals = rewrite_model(model, constraints, ctx, factor_exprs)
        self._released_names = self._releasable(model)

        contamination = contamination_of(model)
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
                    family=_family_of(f, contamination),
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
            versions=software_versions(),
        )
        # the sampler method="auto" will use: decided from structure, truncation and domains only
        from pymc_dp.exact import conjugate_plan

        try:
            self.plan, self.plan_refusal = conjugate_plan(self.model, self._constraints, self.domains), None
        except NotConjugateError as err:
            self.plan, self.plan_refusal = None, err
        sampler = "exact" if self.plan is not None else "mcmc"
        # PyMC's own logp searched for a counterexample to every claim (raises CertificateRefutedError)
        claims = {f.name: (lipschitz[f.name], getattr(regions[f.name], "bound", "lipschitz")) for f in self.factors}
        refutation = refute_claims(model, self.factors, claims, constraints, self.domains, unit, ctx)
        self.certificate = dataclasses.replace(
            self.certificate,
            refutation=refutation.summary(),
            sampler=sampler,
            exact_unavailable=None if self.plan is not None else str(self.plan_refusal),
            caveats=self.certificate.caveats + ((MCMC_CAVEAT,) if sampler == "mcmc" else ()),
        )
        self.regions = regions

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
        from pymc_dp.boxes import BoxModel, BoxModelUnsupported
        from pymc_dp.oscillation import OscillationModel
        from pymc_dp.rules.region import NoRegionRule
        from pymc_dp.truncate import FactorRegion

        constraints, box = _bounds_constraints(bounds, ctx)
        read_by = {}
        regions, lipschitz = {}, {}
        for f in self.factors:
            try:
                bm = BoxModel(f, ctx)
            except (BoxModelUnsupported, NoRegionRule) as err:
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
            try:
                L, bound = bm.region_bound(full)
            except PrivacyError as err:  # the rules' messages name the family, not the user's variables
                raise type(err)(f"factor {f.name!r} observing private {f.observed_container!r}: {err}") from None
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
        private = set(self._private_vars) | set(observed_private(model, self._private_vars))
        for det in model.deterministics:
            if not (set(ancestors([det])) & private):
                names.append(det.name)
        return names


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


def check_regions_have_width(constraints, ctx) -> None:
    """Refuse a region that leaves a continuous parameter a single point (or nothing) in some
    element: its truncated prior has no mass, so there is no posterior to draw from (fuzz
    campaign seeds 1000137, 1000271: ``intercept in [42.3134, 42.3134]``, stated with prior mass 0)."""
    from pymc_dp.constraints import box_of

    for c in constraints:
        var = getattr(c, "var", None)
        if var is None or var not in ctx.free or str(ctx.free[var].dtype).startswith(("int", "uint", "bool")):
            continue
        support = ctx.support(var)
        if math.isnan(support[0]):  # an ordered vector: its elements are real
            support = (-math.inf, math.inf)
        box = box_of(c, ctx.shapes.get(var, ()), support)
        if box is None:
            continue
        lo, hi = np.broadcast_arrays(np.asarray(box[0], float), np.asarray(box[1], float))
        if not np.all(lo < hi):  # NaN fails closed
            bad = np.argwhere(~(lo < hi))
            where = "" if lo.ndim == 0 else f" (element {tuple(int(i) for i in bad[0])})"
            raise BudgetExceededError(
                f"the truncation leaves the continuous parameter {var!r} the single point or empty interval "
                f"[{float(lo[tuple(bad[0])]):.6g}, {float(hi[tuple(bad[0])]):.6g}]{where}: its prior keeps no mass "
                "there, so there is no posterior to draw from. Raise epsilon, lower draws, or give wider explicit "
                "bounds=."
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
