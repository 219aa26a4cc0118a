"""``@private`` and ``make_private``: from a PyMC model to certified, truncated, released draws."""

from __future__ import annotations

import functools
import math
import numbers
import os
from typing import Any, Callable, Mapping, Sequence

import arviz as az
import numpy as np
import pymc as pm
import pytensor
import xarray as xr
from pytensor.graph.traversal import ancestors

from pymc_dp import accounting, lift
from pymc_dp.certificate import Certificate, FactorCertificate
from pymc_dp.domains import Domain
from pymc_dp.exceptions import BudgetExceededError, DomainError, PrivacyError, UnsupportedFactorError
from pymc_dp.factors import find_factors, private_ancestors
from pymc_dp.rewrite import rewrite_model
from pymc_dp.sampling import run_mcmc
from pymc_dp.units import Users, check_unit, describe_unit
from pymc_dp.truncate import (
    Infeasible,
    IntervalConstraint,
    NormBallConstraint,
    RegionContext,
    prior_mass,
    solve_factor,
)

__all__ = ["private", "make_private", "PrivateModel"]

#: public seed of the prior draws used for prior mass and budget splits (data-independent)
PRIOR_SEED = 20140901
PRIOR_DRAWS = 4000

_FORBIDDEN_SAMPLE_KWARGS = {
    "draws": "set `draws` in private(...): it is part of the privacy budget",
    "model": "the private model samples its own rewritten model",
    "return_inferencedata": "pymc_dp always returns an az.InferenceData",
    "discard_tuned_samples": "warm-up draws are never released",
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


def _check_budget(epsilon, delta, draws, unit, bounds):
    if bounds is None:
        if isinstance(epsilon, bool) or not isinstance(epsilon, numbers.Real) or not math.isfinite(epsilon) or epsilon <= 0:
            raise BudgetExceededError(f"epsilon={epsilon!r} must be a finite number > 0.")
    elif epsilon is not None:
        raise PrivacyError("give either epsilon (a budget) or bounds (explicit truncation), not both.")
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
    ):
        if not isinstance(model, pm.Model):
            raise TypeError(f"expected a pm.Model, got {type(model).__name__}")
        _check_budget(epsilon, delta, draws, unit, bounds)
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
        reads = {f.name: f.reads for f in self.factors}

        draws_ = pm.draw(model.free_RVs, draws=PRIOR_DRAWS, random_seed=PRIOR_SEED) if model.free_RVs else []
        prior_draws = {rv.name: np.asarray(d) for rv, d in zip(model.free_RVs, draws_)}
        ctx = RegionContext(model, self.domains, prior_draws)
        self._ctx = ctx

        self.delta = float(delta)
        if bounds is None:
            eps0 = accounting.per_draw_epsilon(epsilon, delta, draws)
            shares = lift.split_budget(eps0 / 2.0, reads, unit)
            regions = self._solve(ctx, shares, eps0)
            lipschitz = {name: r.share for name, r in regions.items()}
            mode = "budget"
        else:
            regions, lipschitz = self._certify_bounds(ctx, bounds)
            eps0 = lift.epsilon_per_draw_from_delta(lift.lift(lipschitz, reads, unit))
            mode = "bounds"
        guarantee = accounting.compose(eps0, draws, delta)
        constraints = [c for r in regions.values() for c in r.constraints]
        self._constraints = tuple(constraints)
        mass, mass_method = prior_mass(constraints, ctx) if constraints else (1.0, "exact")

        factor_exprs = {f.name: f.lipschitz(self.domains) for f in self.factors}
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
                )
                for f in self.factors
            ),
            domains={k: d.to_dict() for k, d in self.domains.items()},
            public=tuple(self.public),
            composition=guarantee.method,
            epsilon_basic=float(guarantee.epsilon_basic),
            epsilon_optimal=None if guarantee.epsilon_optimal is None else float(guarantee.epsilon_optimal),
            mode=mode,
            versions=_versions(),
            caveats=(
                "MCMC draws are approximate posterior draws; the guarantee is exact for exact draws "
                "(JMLR 2017 Thm 8), and the released draws are chosen by a public thinning rule.",
            ),
        )

    # ------------------------------------------------------------------ checks
    @staticmethod
    def _check_containers(model, data, public):
        if not isinstance(data, Mapping):
            raise DomainError("data must map each private pm.Data container's name to its domain.")
        names = {v.name for v in model.data_vars}
        public = tuple(public)
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

    def _check_free_rvs(self, model):
        private = self._private_vars
        for rv in model.free_RVs:
            found = private_ancestors(rv, private)
            if found:
                raise UnsupportedFactorError(
                    f"free RV {rv.name!r} depends on private data {found} (in its parameters or "
                    "shape). A prior must not read private data: use public sizes and constants."
                )
        for pot in model.potentials:
            found = private_ancestors(pot, private)
            if found:
                raise UnsupportedFactorError(
                    f"Potential {pot.name!r} reads private data {found}; pymc_dp cannot bound an "
                    "arbitrary potential. Write that term as an observed distribution."
                )

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

    def _solve(self, ctx, shares, eps0):
        regions, infeasible = {}, {}
        for f in self.factors:
            try:
                regions[f.name] = solve_factor(f, shares[f.name], ctx)
            except Infeasible as err:
                infeasible[f.name] = err.min_lipschitz
        if infeasible:
            mins = {name: infeasible.get(name, regions[name].min_lipschitz if name in regions else 0.0) or 0.0 for name in shares}
            reads = {f.name: f.reads for f in self.factors}
            eps_min = accounting.compose(
                lift.epsilon_per_draw_from_delta(lift.lift(mins, reads, self.unit)), self.draws, self.delta
            ).epsilon
            name, m = next(iter(infeasible.items()))
            family = next(f.family for f in self.factors if f.name == name)
            raise BudgetExceededError(
                f"the budget cannot be met: factor {name!r} ({family}) has a per-record constant of at "
                f"least {m:.4g} for every parameter value, but its share of the budget is "
                f"{shares[name]:.4g}. The smallest achievable epsilon for {self.draws} draw(s) with "
                f"unit={self.unit!r} is at least {eps_min:.4g}; raise epsilon, lower draws, or remodel "
                "the factor (e.g. Bernoulli records instead of one Binomial count)."
            )
        return regions

    def _certify_bounds(self, ctx, bounds):
        raise NotImplementedError(
            "explicit truncation bounds (bounds=...) are not implemented yet: give a budget "
            "(epsilon=...) and read the truncation from the certificate."
        )

    def _releasable(self, model) -> list[str]:
        names = [rv.name for rv in model.free_RVs]
        private = set(self._private_vars)
        for det in model.deterministics:
            if not (set(ancestors([det])) & private):
                names.append(det.name)
        return names

    # ------------------------------------------------------------------ sampling
    def _chains(self, chains):
        if chains is not None:
            if self.draws % int(chains):
                raise ValueError(
                    f"chains={chains} does not divide draws={self.draws}: every chain must release the "
                    "same number of draws. Choose chains among the divisors of draws."
                )
            return int(chains)
        default = max(2, min(4, os.cpu_count() or 1))
        return max(c for c in range(1, default + 1) if self.draws % c == 0)

    def sample(self, *, chains: int | None = None, tune: int = 1000, thin: int = 1, **kwargs) -> az.InferenceData:
        """Release ``draws`` posterior draws of the truncated model.

        Parameters
        ----------
        chains : int, optional
            Number of chains; it must divide ``draws``. Default: the largest divisor of
            ``draws`` that is at most PyMC's default.
        tune : int
            Warm-up iterations per chain (never released).
        thin : int
            Keep every ``thin``-th draw of each chain: a public, data-independent rule.
        **kwargs
            Passed to :func:`pymc.sample` (``cores``, ``random_seed``, ``progressbar``,
            ``nuts_sampler``, ``target_accept``, ``initvals``, ...).

        Returns
        -------
        az.InferenceData
            Only a ``posterior`` group with ``draws`` draws of the free RVs (and of the
            Deterministics that read no private data), and the certificate as JSON in
            ``attrs["pymc_dp"]``.
        """
        for key, why in _FORBIDDEN_SAMPLE_KWARGS.items():
            if key in kwargs:
                raise TypeError(f"sample() does not take {key!r}: {why}.")
        if int(thin) < 1:
            raise ValueError("thin must be >= 1")
        chains = self._chains(chains)
        per_chain = self.draws // chains
        initvals = dict(self._initvals)
        user_init = kwargs.pop("initvals", None)
        if isinstance(user_init, Mapping):
            initvals.update(user_init)
        posterior = run_mcmc(
            self.model, draws_per_chain=per_chain * int(thin), tune=tune, chains=chains, initvals=initvals, **kwargs
        )
        return self._release(posterior, int(thin))

    def _release(self, posterior: xr.Dataset, thin: int) -> az.InferenceData:
        kept = posterior[self._released_names].isel(draw=slice(thin - 1, None, thin))
        kept = kept.assign_coords(draw=np.arange(kept.sizes["draw"]))
        # rebuilt from scratch so that no attribute of the sampler run travels with it
        data_vars = {name: (kept[name].dims, np.asarray(kept[name].values)) for name in self._released_names}
        coords = {k: np.asarray(v.values) for k, v in kept.coords.items()}
        released = xr.Dataset(data_vars, coords=coords, attrs={"pymc_dp": self.certificate.to_json()})
        assert released.sizes["chain"] * released.sizes["draw"] == self.draws
        idata = az.InferenceData(posterior=released)
        idata.attrs["pymc_dp"] = self.certificate.to_json()
        return idata

    def __repr__(self):
        return f"<PrivateModel {self.certificate.epsilon:.4g}-DP, {self.draws} draws>\n{self.certificate}"


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
) -> PrivateModel:
    """Make an existing PyMC model private; see :func:`private` for the keywords."""
    return PrivateModel(
        model, epsilon=epsilon, draws=draws, data=data, delta=delta, unit=unit, bounds=bounds, public=public
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
        optimal composition of pure-DP mechanisms (DESIGN.md section 2), which gives each
        draw a larger share than ``epsilon / draws``; with ``delta = 0`` composition is basic.
    unit : {"record", "attribute"} or Users
        What neighbouring datasets differ in: a row of every private container, one
        container's value in one row, or every row of one user (``pymc_dp.Users(ids)`` or
        ``pymc_dp.Users(max_rows=m)``).
    bounds : dict, optional
        Explicit truncation instead of a budget (not implemented yet).
    public : sequence of str
        ``pm.Data`` containers that are not private.

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
                model, epsilon=epsilon, draws=draws, data=data, delta=delta, unit=unit, bounds=bounds, public=public
            )

        return wrapper

    return decorator
