"""``@private`` and ``make_private``: from a PyMC model to certified, truncated, released draws."""

from __future__ import annotations

import contextlib
import copy
import functools
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

from pymc_dp.certification import (  # noqa: F401  (PRIOR_*, SPLITS, check_budget: public names of this module before the move)
    MCMC_CAVEAT,
    PRIOR_DRAWS,
    PRIOR_SEED,
    SPLITS,
    Certification,
    certify,
    check_arguments,
    check_budget,
    check_containers,
    same_order,
)
from pymc_dp.contamination import RunTimeContamination, inner_epsilon
from pymc_dp.domains import Domain
from pymc_dp.exceptions import (
    NotConjugateError,
    PathNotImplementedError,
    PrivacyError,
    StuckChainError,
)
from pymc_dp.ledger import Ledger, Spend
from pymc_dp.privacy_report import (
    DEFAULT_CONFIDENCE,
    DEFAULT_MAX_DIAGNOSTIC_ROWS,
    normalised,
    release_payload,
    report_certificate,
    report_release,
)
from pymc_dp.private_data import PrivateData
from pymc_dp.release import check_budgeted_draws, check_ledger, draws_dataset, path_choice
from pymc_dp.release import release as release_draws
from pymc_dp.sampling import check_backend, pilot_unmoved, run_mcmc, starts_at_initvals
from pymc_dp.seeds import check_mcmc_seed, exact_rng
from pymc_dp.units import Users, describe_unit

__all__ = ["private", "make_private", "PrivateModel"]

#: sampling methods of PrivateModel.sample
METHODS = ("auto", "exact", "mcmc")

#: pm.sample keywords that mean something to every method (the rest only to MCMC)
_GENERAL_SAMPLE_KWARGS = {"progressbar", "cores", "compute_convergence_checks"}

_FORBIDDEN_SAMPLE_KWARGS = {
    "model": "the private model samples its own rewritten model",
    "return_inferencedata": "pymc_dp always returns an az.InferenceData",
    "discard_tuned_samples": "warm-up draws are never released",
    # a step instance is bound to the variables of the model it was built in, not to the
    # rewritten copy that is sampled; it would fail inside pm.sample, after the ledger charged
    "step": "the private model samples a rewritten copy of your model, to which a step method "
    "built in your model does not apply; tune NUTS with keywords instead (target_accept=..., "
    "nuts_sampler=...)",
}


class PrivateModel:
    """A PyMC model made differentially private.

    Build it with :func:`private` or :func:`make_private`. It holds the certificate, the
    rewritten (truncated) model, and releases posterior draws with :meth:`sample`.

    Attributes
    ----------
    certificate : Certificate
        The privacy guarantee and everything public about it.
    certification : Certification
        What :func:`pymc_dp.certify` established (factors, regions, constraints, the truncated
        model and its start values, the certificate): public fields, frozen.
    model : pm.Model
        The rewritten model whose prior is restricted to Theta_L. The user's model is unchanged.
    path_choice : PathChoice or None
        How ``make_private(..., path="auto")`` chose posterior sampling, and why (public; stated
        in every release record and report); None when the user chose it.
    """

    path_choice: Any = None

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
        check_arguments(model, epsilon, delta, draws, unit, bounds, split)  # before the ledger, as always
        #: run-time contamination (``contaminate(..., at_run_time=True)``), else None
        self.run_time = RunTimeContamination.check(model, delta=delta, unit=unit, data=data, public=public)
        self._ledger_arg = check_ledger(ledger)
        #: the InferenceData of the last release (None before the first), for the report
        self.last_release: az.InferenceData | None = None
        if self.run_time is not None and epsilon is not None:  # the budget on the contaminated data
            epsilon = inner_epsilon(epsilon, self.run_time.p)
        #: what certify() established: factors, regions, truncated model, start values, certificate
        self.certification = certify(model, epsilon=epsilon, draws=draws, data=data, delta=delta, unit=unit,
                                     bounds=bounds, public=public, split=split)
        c = self.certification
        self.draws = c.draws
        self.unit = c.unit
        self.delta = c.delta
        self.domains, self.public = dict(c.domains), c.public
        self.factors = list(c.factors)
        #: the rewritten model (truncated prior) that is sampled
        self.model = c.truncated_model
        self.certificate = c.certificate if self.run_time is None else self.run_time.amplify(c.certificate)
        self._plan, self._plan_refusal = c.conjugate_plan, c.plan_refusal
        #: the private values, validated, with their domains and unit (never released)
        self.private_data = PrivateData.from_model(self.model, self.domains, self.unit)
        #: the ledger's name for this dataset: a hash of the private data, never released
        self.dataset_id = self.private_data.fingerprint

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

        new_data = self.private_data.with_values(data)
        values = {name: new_data.values[name] for name in data}
        # fgraph_from_model deep-copies the data containers: the copy shares no storage with self
        fgraph, _ = fgraph_from_model(self.model)
        model = rebuild_model(fgraph)
        same_order(model, self.model)
        for name, arr in values.items():
            model.set_data(name, arr)
        other = copy.copy(self)
        other.model = model
        other.last_release = None
        for cached in ("_plan", "_plan_refusal"):
            other.__dict__.pop(cached, None)
        other.private_data = new_data
        other.dataset_id = new_data.fingerprint
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
                self._plan, self._plan_refusal = conjugate_plan(self.model, self.certification.constraints, self.domains), None
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
        draws: int | None = None,
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
        draws : int, optional
            ``None`` or the certificate's number of draws (set in ``private(..., draws=...)``: it
            is part of the budget); the one ``sample(draws, *, random_seed, ...)`` signature of
            every mechanism.
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
        check_budgeted_draws(draws, self.draws)
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
        if exact and self.run_time is not None:  # pragma: no cover - a mixture likelihood has no exact sampler
            raise AssertionError("run-time contamination samples by MCMC only")
        # arguments that fail in the sampler fail here, before the ledger charges the release
        if exact:
            rng = exact_rng(random_seed)
        else:
            check_backend(str(kwargs.get("nuts_sampler", "pymc")))
            check_mcmc_seed(random_seed)
        _ = self.ledger  # opened (or refused with LedgerError) before anything runs
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
        if not exact:
            self._refuse_immobile_region(self.draws // chains, kwargs)

        def draw() -> dict[str, xr.Dataset]:
            if exact:
                posterior = self._sample_exact(chains, rng)
            else:
                initvals = dict(self.certification.initvals)
                user_init = kwargs.pop("initvals", None)
                if isinstance(user_init, Mapping):
                    initvals.update(user_init)
                with self._contaminated():
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
                    [rv.name for rv in self.model.free_RVs if rv.name in self.certification.released_names],
                    initvals if starts_at_initvals(self.model, kwargs) else {},
                )
            return {"posterior": self._released_posterior(posterior)}

        return release_draws(
            self,
            draw,
            epsilon=self.certificate.epsilon,
            delta=self.certificate.delta,
            note=self._spend_note(release),
            record=lambda ledger_now: self._record({**release, "ledger": ledger_now}),
            allow_nan=True,
        )

    def _refuse_immobile_region(self, per_chain: int, kwargs: Mapping[str, Any]) -> None:
        """Refuse, before the charge, a release whose sampler cannot move in Theta_L.

        After the release, :func:`_refuse_stuck_chains` sees a chain whose every RV kept its
        start; it cannot see a chain of one draw, nor one discrete RV stuck while NUTS moves the
        others (a compound step). Those cases get a public pilot run on the truncated prior
        (:func:`~pymc_dp.sampling.pilot_unmoved`, no private data read). An RV the pilot never
        moved is refused when it is continuous (Theta_L has prior mass, so it is not a point in
        that RV) or when the public prior draws inside Theta_L hold other values of it (the
        region is not one value, the sampler just cannot reach the others).
        """
        free = [rv for rv in self.model.free_RVs if rv.name in self.certification.released_names]
        discrete = any(rv.type.dtype.startswith(("int", "uint", "bool")) for rv in free)
        if (per_chain > 1 and not discrete) or not starts_at_initvals(self.model, kwargs):
            return
        if not hasattr(self, "_unmoved"):  # public: the same answer for every release
            start = self.certification.initvals
            self._unmoved = pilot_unmoved(self.model, start, [rv.name for rv in free])
        if not self._unmoved:
            return
        ctx = self.certification.context
        inside = np.all([c.contains(ctx.draws) for c in self.certification.constraints], axis=0)
        start = self.certification.initvals
        stuck = [
            name for name in self._unmoved
            if not np.issubdtype(np.asarray(start[name]).dtype, np.integer)
            or np.any(np.asarray(ctx.draws[name])[inside] != np.asarray(start[name]))
        ]
        if stuck:
            raise StuckChainError(
                f"the sampler cannot move {stuck} away from its start {[start[n].tolist() for n in stuck]} in "
                "the truncation region: a pilot run on the truncated prior alone (public, no data read) never "
                "moved it, although the region holds other values. Nothing was sampled or charged. Give it a "
                "wider region (raise epsilon or lower draws), replace a discrete parameter by a continuous one "
                "(e.g. a smooth switch, pm.math.sigmoid((t - tau) / width), with tau continuous), or set "
                "explicit truncation bounds (bounds=...)."
            )

    @contextlib.contextmanager
    def _contaminated(self):
        """Run-time contamination: the sampled model holds freshly contaminated values of its
        private container while it samples, and the original values again afterwards (the
        contaminated ones are neither kept nor released)."""
        if self.run_time is None:
            yield
            return
        name = self.run_time.container
        original = self.private_data.values[name]
        self.model.set_data(name, self.run_time.contaminated(original))
        try:
            yield
        finally:
            self.model.set_data(name, original)

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
        dets = [d for d in self.certification.released_names if d not in values]
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

    def _released_posterior(self, posterior: xr.Dataset) -> xr.Dataset:
        """The released names only, laid out as ``(chain, draw)``; rebuilt from scratch so that
        no attribute of the sampler run travels with it."""
        kept = posterior[list(self.certification.released_names)]
        kept = kept.assign_coords(draw=np.arange(kept.sizes["draw"]), chain=np.arange(kept.sizes["chain"]))
        data_vars = {name: (kept[name].dims, np.asarray(kept[name].values)) for name in self.certification.released_names}
        coords = {k: np.asarray(v.values) for k, v in kept.coords.items()}
        released = xr.Dataset(data_vars, coords=coords)
        assert released.sizes["chain"] * released.sizes["draw"] == self.draws
        return released

    def _record(self, release: dict) -> dict:
        """The release record: the certificate and the release's public facts."""
        return {**self.certificate.to_dict(), "release": release}

    def report(self, *, confidence: float = DEFAULT_CONFIDENCE, max_diagnostic_rows: int = DEFAULT_MAX_DIAGNOSTIC_ROWS):
        """The :class:`~pymc_dp.PrivacyReport` of this model and its last release (if any).

        Before any release it says what a release would guarantee (no diagnostics). The last
        release must carry this model's certificate (else report the release itself)."""
        last = getattr(self, "last_release", None)
        if last is None:
            return report_certificate(self.certificate.to_dict(), confidence=confidence,
                                      max_diagnostic_rows=max_diagnostic_rows, path=path_choice(self))
        released_cert = {k: v for k, v in release_payload(last).items() if k not in ("release", "schema")}
        if released_cert != normalised(self.certificate.to_dict()):
            raise ValueError(
                "the private model's last release carries another certificate than the model's "
                "own; report the release itself: pymc_dp.report(idata)."
            )
        return report_release(last, confidence=confidence, max_diagnostic_rows=max_diagnostic_rows)

    def __repr__(self):
        c = self.certificate
        return f"<PrivateModel ({c.epsilon:.4g}, {c.delta:.3g})-DP, {self.draws} draws>\n{c}"


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
    path: str = "posterior",
) -> PrivateModel:
    """Make an existing PyMC model private; see :func:`private` for the keywords."""
    if path != "posterior":
        return _other_path(path, model, epsilon=epsilon, draws=draws, data=data, delta=delta, unit=unit,
                           bounds=bounds, public=public, split=split, ledger=ledger)
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


#: the release paths other than posterior sampling, registered by their mechanisms' modules
#: (``register_path``) so that this layer imports none of them: name -> factory(model, **keywords)
_PATHS: dict[str, Callable[..., Any]] = {}


def register_path(name: str, factory: Callable[..., Any]) -> None:
    """Offer ``make_private(..., path=name)``: ``factory(model, **keywords of make_private)``
    builds the mechanism (it refuses the keywords it does not take)."""
    _PATHS[name] = factory


def _other_path(path, model, **keywords):
    """The mechanism of ``path`` (not plain posterior sampling), or a refusal naming the choices."""
    factory = _PATHS.get(path)
    if factory is None:
        raise PrivacyError(
            f"path={path!r} is not a release path; use one of {['posterior', *sorted(_PATHS)]} ('auto' chooses "
            "among them from public facts; pymc_dp.recommend says which it would choose and why)."
        )
    try:
        return factory(model, **keywords)
    except NotImplementedError as err:  # a typed refusal, whichever mechanism raised it (FOUND.md #14)
        if str(err).startswith("path="):  # already names its path and containers (a nested make_private)
            raise
        private = ", ".join(repr(str(name)) for name in (keywords.get("data") or {}))
        # keep a typed refusal's own kind (PathNotImplementedError, RegionNotImplementedError ...)
        kind = type(err) if isinstance(err, PrivacyError) else PathNotImplementedError
        raise kind(f"path={path!r} on the private containers {private}: {err}") from err


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
    path: str = "posterior",
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
    path : {"posterior", "localized", "noisy_statistics", "auto"}
        How the draws are released. ``"posterior"``: posterior sampling on one region chosen from
        public facts. ``"localized"``: a quarter of ``epsilon`` locates the posterior privately,
        the rest samples a region around that place
        (:class:`~pymc_dp.mechanisms.localized.LocalizedPosterior`, docs/theory/localized.md).
        ``"noisy_statistics"``: noisy sufficient statistics released once and the noise-aware
        posterior given them (:func:`pymc_dp.noisy_statistics`; any number of draws, free).
        ``"auto"``: the path public facts say serves the model best
        (:func:`pymc_dp.mechanisms.auto.choose_path`; its ``path_choice`` and every report say
        which and why). Each returns its mechanism, with the same ``sample()`` and report.

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
                path=path,
            )

        return wrapper

    return decorator
