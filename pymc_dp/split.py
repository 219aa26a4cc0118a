"""Split the per-draw budget ``Delta`` across factors to keep the most prior mass.

JMLR 2017 Thm 17: the utility loss of posterior sampling on the truncated prior is
``O(1 - xi(Theta_L)) + sqrt(ln(1/delta)/N)``, where ``xi(Theta_L)`` is the prior mass of the
region the budget allows. Factor j's share ``L_j`` becomes a region ``Theta_{L_j}`` (its
truncation, :func:`pymc_dp.truncate.solve_factor`); the model's region is their intersection.
Any split with ``lift(L, reads, unit) <= Delta`` is valid (docs/theory/lift.md); this module
chooses the one whose intersection keeps the most prior mass.

**Feasible set and its boundary.** A region never shrinks when its share grows, so the best
split lifts exactly to ``Delta``. Some factors cannot go below a minimum constant ``m_j``
(Poisson on ``Integers(0, 10)``: 2.86; Binomial: ``ln C(m, m/2)``; Normal with known sigma:
``(b-a)^2 / (8 sigma^2)``): their solver raises :class:`~pymc_dp.constraints.Infeasible` with it.
The boundary above the minimums is parametrised by positive weights ``w = exp(z)``:

    L_j = m_j + s(w) * w_j,   s(w) = min_k (Delta - M_k) / W_k,

with ``M_k, W_k`` the sums of ``m_j, w_j`` over the factors that read container k (record unit:
one container read by all factors). Every ``z`` lifts exactly to ``Delta`` and meets every
minimum; every boundary point with ``L > m`` is reached; ``z`` and ``z + c`` give the same split,
so the first log-weight is fixed at 0 and the search runs over ``J - 1`` coordinates.

**Objective.** The log prior mass of the intersection of all regions: exact (in log space, no
underflow with many truncated elements) when :func:`pymc_dp.masses.exact_log_mass` applies,
else the log of the Monte Carlo mass over the public prior draws ``ctx.draws`` (fixed draws: a
deterministic objective). It depends on public things only -- priors, domains, data shapes --
never on data values.

**Search.** Nelder-Mead over the log-weights from the equal split (:func:`pymc_dp.lift.
split_budget`), or, when the equal split is infeasible, from the minimums plus an equal share of
the rest; restarted from the best point while it improves; at most ``max_evals`` distinct
splits are solved. The best split seen is kept, and it replaces the equal split only when it
keeps more prior mass (by a factor of at least ``1 + 1e-7``, above the solvers' noise).

Layering: the top of the truncation. It calls the driver :func:`pymc_dp.truncate.solve_factor`
and reads the layers below it (constraints, region context, prior masses, the oscillation
solver's probe and the fit objective); only :mod:`pymc_dp.certification` imports it.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
from pytensor.graph.basic import Constant
from scipy import optimize

from pymc_dp.constraints import FactorRegion, Infeasible, constraints_box
from pymc_dp.exceptions import BudgetExceededError
from pymc_dp.factors import Factor, IndexForm, LinkForm, PointForm
from pymc_dp.lift import UNITS, lift, split_budget
from pymc_dp.masses import box_log_mass, exact_log_mass, prior_mass
from pymc_dp.oscillation import reaches
from pymc_dp.reference import fit_utility_of_constraints
from pymc_dp.region_context import RegionContext, constant_params, observed_shape, plain_free_rv
from pymc_dp.truncate import solve_factor

__all__ = ["BudgetSplit", "InfeasibleBudget", "choose_split", "min_shares"]

#: the share used to ask a solver for its minimum constant: relative to Delta, and not below
#: _PROBE_FLOOR: below ~1e-11 the interval solver's own verification fails on rounding and
#: solve_factor falls back to the Potential solver, whose "minimum" is over prior draws
_PROBE = 1e-9
_PROBE_FLOOR = 1e-9
#: the least gain in log prior mass that counts as better: above the solvers' own noise (their
#: "step inside" moves a bound by ~1e-9 of its distance to the minimiser, so the mass is not
#: exactly monotone in the share: relative wiggles of ~1e-9)
_GAIN = 1e-7
#: log-weights are kept within this distance of the first one (shares down to e^-30 of the rest)
_Z_BOUND = 30.0
#: separable splits of more factors than this keep the multiplier search's answer unpolished
#: (a Nelder-Mead over J - 1 shares costs J solves per step)
_POLISH_MAX = 8


class InfeasibleBudget(BudgetExceededError):
    """No split meets the budget: carries each factor's minimum constant.

    Attributes
    ----------
    mins : dict of str to float
        Factor name -> the smallest constant its solver can reach (0 when none).
    Delta : float
        The per-draw budget ``Delta`` that was asked for.
    lifted : float
        ``lift(mins, reads, unit)``: the smallest ``Delta`` any split could meet (``>= Delta``).
    """

    def __init__(
        self,
        mins: Mapping[str, float],
        Delta: float = math.nan,
        lifted: float = math.nan,
        unit: str = "record",
        certified: Mapping[str, bool] | None = None,
    ):
        self.mins = dict(mins)
        #: factor -> whether its minimum is the rule's own (True) or a numerical search's (False)
        self.certified = {name: True for name in self.mins} | dict(certified or {})
        self.Delta = Delta
        self.lifted = lifted
        self.unit = unit
        worst = ", ".join(f"{k!r}: {v:.4g}" for k, v in self.mins.items())
        if lifted >= Delta:
            why = f"meets every factor's minimum constant ({worst}); together they need Delta > {lifted:.4g}"
        else:
            why = f"that the search tried could be certified (minimum constants found: {worst})"
        super().__init__(
            f"no split of the per-draw budget Delta = {Delta:.4g} (unit={unit!r}) {why}. Raise "
            "epsilon, lower draws, or remodel the factor with the largest minimum."
        )


@dataclass(frozen=True)
class BudgetSplit:
    """The chosen split of ``Delta`` across factors, its regions and the prior mass they keep."""

    #: factor name -> L_j; ``lift(shares, reads, unit) == Delta`` (never above it)
    shares: Mapping[str, float]
    #: factor name -> ``solve_factor(f, shares[f], ctx)``
    regions: Mapping[str, FactorRegion]
    #: prior mass of the intersection of all regions' constraints (``masses.prior_mass``)
    prior_mass: float
    prior_mass_method: str
    #: "optimised", or "equal" (nothing beats it, ``optimise=False``, or one factor)
    method: str
    equal_shares: Mapping[str, float]
    #: None when the equal split is infeasible
    equal_prior_mass: float | None
    #: factor name -> smallest reachable constant (0 when none; empty when not probed)
    min_shares: Mapping[str, float] = field(default_factory=dict)
    #: distinct splits solved (the equal split included)
    evaluations: int = 0


def min_shares(
    factors: Sequence[Factor], Delta: float, ctx: RegionContext, certified: dict[str, bool] | None = None
) -> dict[str, float]:
    """Each factor's minimum constant: its solver's, from a tiny share (``1e-9 * Delta``, at
    least ``1e-9``).

    A solver that cannot reach the tiny share raises :class:`~pymc_dp.constraints.Infeasible`
    carrying its minimum ``m``; one that can gets 0. A minimum is kept only when the solver
    also refuses ``m (1 - 1e-6)``: otherwise the refusal was not a minimum (a numerical failure
    at the tiny share) and the factor gets 0, which only widens the search. If ``certified`` is
    given, it is filled with whether each minimum is the rule's own (True) or only the least
    value a numerical search found (False, the Potential fallback).
    """
    probe = max(_PROBE * Delta, _PROBE_FLOOR)
    mins = {}
    for f in factors:
        if reaches(f, probe, ctx):  # the oscillation search finds a region at the probe
            mins[f.name] = 0.0
            continue
        try:
            solve_factor(f, probe, ctx)
            mins[f.name] = 0.0
            continue
        except Infeasible as err:
            m = float(err.min_lipschitz)
            if certified is not None:
                certified[f.name] = err.certified
        if m > probe:
            try:
                solve_factor(f, m * (1 - 1e-6), ctx)
                m = 0.0
            except Infeasible:
                pass
        mins[f.name] = m
    return mins


class _Objective:
    """``shares -> (log prior mass, regions)``, memoised per split and per (factor, share)."""

    def __init__(self, factors: Sequence[Factor], ctx: RegionContext):
        self.factors = list(factors)
        self.ctx = ctx
        self._regions: dict = {}
        self._splits: dict = {}

    def region(self, f: Factor, share: float) -> FactorRegion | None:
        key = (f.name, share)
        if key not in self._regions:
            try:
                self._regions[key] = solve_factor(f, share, self.ctx)
            except Infeasible:
                self._regions[key] = None
        return self._regions[key]

    @property
    def evaluations(self) -> int:
        return len(self._splits)

    def __call__(self, shares: Mapping[str, float]) -> tuple[float, dict | None]:
        key = tuple(float(shares[f.name]) for f in self.factors)
        if key not in self._splits:
            regions = {}
            for f in self.factors:
                r = self.region(f, float(shares[f.name]))
                if r is None:
                    self._splits[key] = (-math.inf, None)
                    return self._splits[key]
                regions[f.name] = r
            self._splits[key] = (_log_mass(regions, self.ctx), regions)
        return self._splits[key]


def _constraints(regions: Mapping[str, FactorRegion]) -> list:
    return [c for r in regions.values() for c in r.constraints]


def _log_mass(regions, ctx) -> float:
    """The search's objective: the log prior mass kept, or with ``split="fit"`` the utility of
    :func:`pymc_dp.reference.fit_utility` (both: larger is better)."""
    cons = _constraints(regions)
    if not cons:
        return 0.0
    if getattr(ctx, "reference", None) is not None:
        return fit_utility_of_constraints(cons, ctx.reference, ctx)
    exact = exact_log_mass(cons, ctx)
    if exact is not None:
        return exact
    box = constraints_box(cons, ctx)
    if box is not None:  # in log space: a tiny mass still ranks the candidates
        return box_log_mass(box, ctx)
    p, _ = prior_mass(cons, ctx)
    return math.log(p) if p > 0 else -math.inf


def _mass(regions, ctx) -> tuple[float, str]:
    cons = _constraints(regions)
    return prior_mass(cons, ctx) if cons else (1.0, "exact")


class _Boundary:
    """``z -> L``: the boundary ``lift(L) = Delta`` above the minimums (module docstring)."""

    def __init__(self, names, reads, unit, Delta, mins):
        self.names = list(names)
        self.Delta = float(Delta)
        self.reads = reads
        self.unit = unit
        self.m = np.array([mins[n] for n in self.names], dtype=float)
        if unit == "record":
            self.groups = [np.arange(len(self.names))]
        else:
            containers = sorted({k for n in self.names for k in reads[n]})
            self.groups = [np.array([i for i, n in enumerate(self.names) if k in reads[n]]) for k in containers]

    def shares(self, z: np.ndarray) -> dict[str, float]:
        w = np.exp(z - np.max(z))
        s = min((self.Delta - self.m[g].sum()) / w[g].sum() for g in self.groups)
        L = self.m + s * w
        for i in range(60):  # never above Delta, rounding included
            shares = {n: float(v) for n, v in zip(self.names, L)}
            if lift(shares, self.reads, self.unit) <= self.Delta:
                return shares
            L = self.m + (L - self.m) * (1 - 2.0 ** (i - 52))
        raise AssertionError("could not fit the split under Delta")  # pragma: no cover

    def weights_of(self, shares: Mapping[str, float]) -> np.ndarray:
        """Log-weights whose boundary point is ``shares`` (when ``shares`` lifts to Delta)."""
        extra = np.array([shares[n] for n in self.names]) - self.m
        return np.log(np.maximum(extra, 1e-300))


def choose_split(
    factors: Sequence[Factor],
    Delta: float,
    unit: str,
    ctx: RegionContext,
    *,
    optimise: bool = True,
    max_evals: int | None = None,
) -> BudgetSplit:
    """The split of ``Delta`` across ``factors`` that keeps the most prior mass.

    Parameters
    ----------
    factors : sequence of Factor
        The private likelihood factors (each reads at least one private container).
    Delta : float
        The per-draw budget ``Delta`` (one draw is ``2 Delta``-DP).
    unit : {"record", "attribute"}
        The privacy unit of :func:`pymc_dp.lift.lift`.
    ctx : RegionContext
        The model's free RVs, domains and public prior draws (a caching context: the search
        solves the same factors many times).
    optimise : bool, default True
        False: the equal split of :func:`pymc_dp.lift.split_budget`, as before.
    max_evals : int, optional
        Most distinct splits to solve; default ``60 + 60 (J - 1)`` capped at 400.

    Returns
    -------
    BudgetSplit

    Raises
    ------
    InfeasibleBudget
        When no split meets every factor's minimum constant (or, with ``optimise=False``,
        when the equal split does not).
    """
    if unit not in UNITS:
        raise ValueError(f"unknown unit {unit!r}")
    if isinstance(Delta, bool) or not isinstance(Delta, numbers.Real) or not (math.isfinite(Delta) and Delta > 0):
        raise ValueError(f"Delta={Delta!r} must be a finite number > 0")
    factors = list(factors)
    if not factors:
        raise ValueError("choose_split needs at least one factor")
    names = [f.name for f in factors]
    if len(set(names)) != len(names):
        raise ValueError(f"factor names must be unique, got {names}")
    reads = {f.name: tuple(f.reads) for f in factors}
    if not all(reads.values()):
        raise ValueError(f"every factor must read private data; {[n for n in names if not reads[n]]} do not")
    J = len(factors)
    if max_evals is None:
        max_evals = min(400, 60 + 60 * (J - 1))

    objective = _Objective(factors, ctx)
    equal = split_budget(float(Delta), reads, unit)
    equal_log, equal_regions = objective(equal)
    equal_mass = _mass(equal_regions, ctx) if equal_regions is not None else None

    def result(shares, regions, method, mins):
        mass, how = _mass(regions, ctx)
        return BudgetSplit(
            shares=dict(shares),
            regions=dict(regions),
            prior_mass=float(mass),
            prior_mass_method=how,
            method=method,
            equal_shares=dict(equal),
            equal_prior_mass=None if equal_mass is None else float(equal_mass[0]),
            min_shares=dict(mins),
            evaluations=objective.evaluations,
        )

    if J == 1 or not optimise:
        if equal_regions is None:
            certified: dict[str, bool] = {}
            mins = min_shares(factors, Delta, ctx, certified)
            raise InfeasibleBudget(mins, float(Delta), lift(mins, reads, unit), unit, certified)
        return result(equal, equal_regions, "equal", {})

    certified = {}
    mins = min_shares(factors, Delta, ctx, certified)
    lifted_min = lift(mins, reads, unit)
    if not lifted_min < Delta:  # NaN fails closed
        raise InfeasibleBudget(mins, float(Delta), lifted_min, unit, certified)
    start = None
    if unit == "record" and _separable(factors, equal_regions, ctx):
        # the log mass is a sum over factors: a multiplier search, then (few factors) a polish
        shares = _lagrangian_split(factors, float(Delta), mins, objective, ctx, reads, unit)
        if shares is not None:
            value, regions = objective(shares)
            if regions is not None and value > equal_log + _GAIN:
                start = shares
        if J > _POLISH_MAX:
            if start is not None:
                return result(start, objective(start)[1], "optimised", mins)
            return result(equal, equal_regions, "equal", mins)
    boundary = _Boundary(names, reads, unit, Delta, mins)

    if start is not None:
        z0 = boundary.weights_of(start)
    elif equal_regions is not None:
        z0 = boundary.weights_of(equal)
    else:  # the minimums plus an equal share of the rest
        z0 = np.zeros(J)
    z0 = np.clip(z0 - z0[0], -_Z_BOUND, _Z_BOUND)

    best = {"value": equal_log, "shares": equal, "regions": equal_regions}
    if start is not None:
        value, regions = objective(start)
        best = {"value": value, "shares": start, "regions": regions}

    def g(u: np.ndarray) -> float:
        z = np.concatenate([[0.0], np.clip(u, -_Z_BOUND, _Z_BOUND)])
        shares = boundary.shares(z)
        if objective.evaluations >= max_evals and tuple(shares[n] for n in names) not in objective._splits:
            raise _Budget
        value, regions = objective(shares)
        if regions is not None and (best["regions"] is None or value > best["value"]):
            best.update(value=value, shares=shares, regions=regions)
        return -value if math.isfinite(value) else math.inf

    u = z0[1:]
    step = 1.0
    try:
        for _ in range(4):  # Nelder-Mead, restarted from the best point while it improves
            before = best["value"]
            simplex = np.vstack([u, u + step * np.eye(J - 1)])
            optimize.minimize(
                g,
                u,
                method="Nelder-Mead",
                options={
                    "initial_simplex": simplex,
                    "xatol": 1e-3,
                    "fatol": 1e-7,
                    "maxfev": max_evals,
                    "adaptive": J > 3,
                },
            )
            if best["regions"] is None or best["shares"] is equal:
                break
            u = boundary.weights_of(best["shares"])
            u = np.clip(u[1:] - u[0], -_Z_BOUND, _Z_BOUND)
            step = 0.25
            if not best["value"] > before + _GAIN:
                break
    except _Budget:
        pass

    if best["regions"] is None:
        raise InfeasibleBudget(mins, float(Delta), lifted_min, unit)  # pragma: no cover - every start fits
    if equal_regions is not None and not best["value"] > equal_log + _GAIN:
        return result(equal, equal_regions, "equal", mins)
    return result(best["shares"], best["regions"], "optimised", mins)


def _signature(factor, ctx):
    """A key equal for factors whose regions are the same function of their share (the same
    family, domain, observed shape and parameters that are a free RV with the same constant-
    parameter prior, or the same constant), None when no such key is computed."""
    def rv_sig(expr):
        name = plain_free_rv(expr, ctx)
        if name is None:
            return None
        rv = ctx.free[name]
        params = constant_params(rv)
        if params is None:
            return None
        return (type(rv.owner.op).__name__, tuple(p.tobytes() for p in params), tuple(ctx.shapes[name]), str(rv.dtype),
                type(ctx.model.rvs_to_transforms.get(rv)).__name__)

    parts = []
    for form in factor.forms:
        link = None
        if isinstance(form, LinkForm):
            link, form = form.link, form.inner
        if isinstance(form, PointForm):
            sig = rv_sig(form.expr)
            if sig is None:
                if ctx.free_rvs_of(form.expr) or not isinstance(form.expr, Constant):
                    return None
                sig = ("const", np.asarray(form.expr.data).tobytes())
        elif isinstance(form, IndexForm):
            sig = rv_sig(form.table)
            if sig is None:
                return None
            sig = ("index", sig, ctx.domains[form.container])
        else:
            return None
        parts.append((link, sig))
    return (type(factor.op).__name__, ctx.domains[factor.observed_container], observed_shape(factor, ctx), tuple(parts))


def _separable(factors, equal_regions, ctx) -> bool:
    """Whether the log prior mass is a sum of one term per factor: the factors' constraints
    bind disjoint free RVs, each with an exact (independent-root) mass."""
    if equal_regions is None or getattr(ctx, "reference", None) is not None:
        return False  # the fit objective is not a sum of exact per-factor log masses
    seen: set = set()
    for f in factors:
        cons = equal_regions[f.name].constraints
        names = {c.var for c in cons if hasattr(c, "var")} | {v for c in cons for v in getattr(c, "vars", ())}
        if names & seen or exact_log_mass(cons, ctx) is None:
            return False
        seen |= names
    return True


def _lagrangian_split(factors, Delta, mins, objective, ctx, reads, unit, points: int = 28):
    """The split maximising ``sum_j g_j(L_j)`` subject to ``sum_j L_j = Delta`` when the log
    mass is a sum of per-factor terms ``g_j`` (:func:`_separable`): each ``g_j`` is tabulated on
    a grid of shares above its minimum, and the multiplier ``lambda`` of the budget is found by
    bisection so that the shares maximising ``g_j(L) - lambda L`` fill the budget. J x points
    solves instead of a search over J - 1 dimensions; any split it returns lifts to ``Delta``."""
    total_min = sum(mins[f.name] for f in factors)
    room = Delta - total_min
    if room <= 0:
        return None
    grid_u = np.geomspace(1e-4, 1.0, points)
    tables = []
    by_signature: dict = {}  # identical factors (same family, domain, prior, shapes) share a table
    for f in factors:
        shares = mins[f.name] + room * grid_u
        sig = _signature(f, ctx)
        key = None if sig is None else (sig, mins[f.name])
        if key is not None and key in by_signature:
            tables.append((shares, by_signature[key]))
            continue
        values = []
        for share in shares:
            region = objective.region(f, float(share))
            if region is None:
                values.append(-math.inf)
                continue
            value = exact_log_mass(region.constraints, ctx)
            values.append(-math.inf if value is None else value)
        values = np.asarray(values, dtype=float)
        if key is not None:
            by_signature[key] = values
        tables.append((shares, values))

    def pick(lam):
        return np.array([sh[np.argmax(np.where(np.isfinite(v), v - lam * sh, -np.inf))] for sh, v in tables])

    lo, hi = 0.0, 1.0
    while pick(hi).sum() > Delta and hi < 1e12:
        lo, hi = hi, hi * 4.0
    for _ in range(60):
        mid = 0.5 * (lo + hi)
        if pick(mid).sum() > Delta:
            lo = mid
        else:
            hi = mid
    chosen = pick(hi)
    m = np.array([mins[f.name] for f in factors])
    spent = chosen.sum() - m.sum()
    if spent <= 0:
        return None
    chosen = m + (chosen - m) * (room / spent)  # the whole budget: a larger share never loses mass
    shares = {f.name: float(v) for f, v in zip(factors, chosen)}
    for i in range(60):  # never above Delta, rounding included
        if lift(shares, reads, unit) <= Delta:
            return shares
        shares = {k: mins[k] + (v - mins[k]) * (1 - 2.0 ** (i - 52)) for k, v in shares.items()}
    return None  # pragma: no cover


class _Budget(Exception):
    """The evaluation budget is spent."""
