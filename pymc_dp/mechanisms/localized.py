"""Localize, then sample: spend a little of the budget to find where the posterior is, and the
rest on draws from a region around that place.

Posterior sampling truncates the prior to a region ``Theta_L`` chosen from public facts only,
so the region sits where the *prior* is; wherever the posterior is narrow and far from the
prior's centre, the released draws pile against the region's wall. This mechanism (issue 33,
``docs/theory/localized.md``) releases in two stages:

1. **Locate** (``epsilon_1 = localize x epsilon``). One draw ``theta_hat`` of the exponential
   mechanism (:class:`~pymc_dp.mechanisms.map.PrivateMAP`) on a *wide* public box ``B_1`` (by
   default the prior's central ``1 - 1e-3`` interval of every free RV): the prior truncated to
   ``B_1`` times the private likelihood to the power ``beta_1 = epsilon_1 / eps0(B_1)``, where
   ``eps0(B_1)`` is the certified per-draw loss of posterior sampling on ``B_1``.
2. **Sample** (``epsilon_2 = epsilon - epsilon_1``). A box ``B_2 = theta_hat +- c s`` in each
   free RV's unconstrained space, where ``s`` is a *public* posterior scale at ``theta_hat``
   (the Laplace approximation of the model on a dataset simulated at ``theta_hat``: covariates
   drawn from their declared domains, outcomes from the model, clipped into their domains) and
   ``c`` the smallest width (on a geometric grid) that covers the first stage's error and the
   released spread at ``confidence`` standard deviations, ``c >= k sqrt(1/beta_1 + 1/beta_2(c))``,
   grown while ``beta_2`` stays 1. The ``draws`` released are the exponential mechanism on
   ``B_2`` with ``beta_2 = min(1, eps0_2 / eps0(B_2))``, ``eps0_2`` the per-draw share of
   ``epsilon_2``: exact posterior draws restricted to ``B_2`` where the budget allows it
   (``beta_2 = 1``), tempered ones where it does not.

Privacy proof (``docs/theory/localized.md``): stage 1 is ``epsilon_1``-DP (one draw of the
exponential mechanism with the certified oscillation, :class:`PrivateMAP`'s proof); ``B_2`` is
a function of stage 1's output and of public facts (the model, the domains, the data's shapes,
a public simulation seed), so stage 2, ``epsilon_2``-DP for *every* box, composes adaptively:
the pair is ``(epsilon_1 + epsilon_2, delta)``-DP. Neither the width rule nor the simulation
reads a data value. The location ``theta_hat`` and ``B_2`` are released with the draws (they
are paid for).
"""

from __future__ import annotations

import dataclasses
import math
import numbers
import warnings
from typing import Any, Mapping, Sequence

import numpy as np
import pymc as pm
import xarray as xr

from pymc_dp import accounting
from pymc_dp.certificate import Certificate
from pymc_dp.core import PrivateModel, register_path
from pymc_dp.domains import Domain
from pymc_dp.exceptions import BudgetExceededError, PrivacyError, UnsupportedFactorError
from pymc_dp.ledger import Ledger
from pymc_dp.mechanisms.base import Mechanism, build_model
from pymc_dp.mechanisms.map import PrivateMAP
from pymc_dp.release import check_budgeted_draws, check_ledger, release
from pymc_dp.sampling import quiet_sampler
from pymc_dp.units import Users, as_unit, describe_unit

__all__ = ["LocalizedPosterior", "localized_posterior", "MECHANISM"]

#: the name of this mechanism in a release's record
MECHANISM = "localized posterior sampling (two stages)"
#: the public seed of the width rule's simulated dataset and of the prior draws of B_1
PUBLIC_SEED = 20_261_128
#: the prior's tail mass left out of the default first-stage box (per element, both tails)
WIDE_TAIL = 1e-3
#: the first stages: a tempered draw on a wide box, a posterior draw on a region chosen for the
#: budget, or the first unless its draw would be spread over the box (then it is nearly a prior
#: draw): "auto" keeps the tempered stage when its public spread, ``s / sqrt(beta_1)`` at the
#: median of the draws the box was made from, is at most INFORMATIVE of the box's half-width
#: (median over the elements; unconstrained space)
FIRST_STAGES = ("auto", "tempered", "posterior")
INFORMATIVE = 0.5
#: the width grid: c_k = c_min * GRID_RATIO**k, k < GRID_STEPS
GRID_RATIO, GRID_STEPS = 1.3, 14


def _elementwise_transform(model, rv):
    """The RV's value transform if it maps elements one by one (None: the identity), else refuse."""
    transform = model.rvs_to_transforms.get(rv)
    if transform is None:
        return None
    kind = type(transform).__name__
    if kind in ("LogTransform", "IntervalTransform", "Interval", "LogOddsTransform", "LogExpM1"):
        return transform
    raise UnsupportedFactorError(
        f"path 'localized': the free RV {rv.name!r} has a {kind} value transform, which does not map a "
        "box to a box; use posterior sampling (pymc_dp.make_private) or private_map for this model."
    )


def wide_box(model: pm.Model, tail: float = WIDE_TAIL, seed: int = PUBLIC_SEED, *,
             data: Mapping[str, Domain] | None = None) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """The default first-stage box: per element of every free RV, the central ``1 - tail``
    interval of public draws (no data value read) of the *admissible prior* when ``data`` (the
    private containers' domains) is given and its reference is not thin — the prior conditioned on
    a dataset simulated inside the declared domains (:mod:`pymc_dp.reference`: a residual scale
    beyond the outcome's span, a mean of 10^6 counts declared below 100, are left out) — else of
    the prior (10,000 draws)."""
    return _wide_box_and_median(model, tail, seed, data)[0]


def _wide_box_and_median(model, tail, seed, data):
    """:func:`wide_box` and the elementwise median of the draws it was made from (public)."""
    _check_boxable(model)
    draws = None
    if data is not None:
        draws = _admissible_draws(model, data, seed)
    if draws is None:
        values = pm.draw(list(model.free_RVs), draws=10_000, random_seed=seed)
        draws = {rv.name: np.asarray(v, dtype=float) for rv, v in zip(model.free_RVs, values)}
    box, median = {}, {}
    for rv in model.free_RVs:
        values = np.asarray(draws[rv.name], dtype=float)
        box[rv.name] = tuple(np.quantile(values, [tail / 2, 1 - tail / 2], axis=0))
        median[rv.name] = np.median(values, axis=0)
    return box, median


def _budget_stage(cls, model, **keywords):
    """``cls`` (PrivateMAP at beta 1, or PrivateModel) on a region chosen for its budget: the fit
    split where the admissible prior is available, else the optimised one."""
    try:
        return cls(model, split="fit", ledger=None, **keywords)
    except PrivacyError:
        return cls(model, split="optimised", ledger=None, **keywords)


def _check_boxable(model) -> None:
    """Refuse a free RV that no box of the localized path can hold: a discrete one, or one whose
    value transform does not map a box to a box."""
    for rv in model.free_RVs:
        if rv.type.dtype.startswith(("int", "uint", "bool")):
            raise UnsupportedFactorError(
                f"path 'localized': the free RV {rv.name!r} is discrete; the localized path boxes continuous "
                "parameters only. Use posterior sampling (pymc_dp.make_private) for this model."
            )
        _elementwise_transform(model, rv)


def _admissible_draws(model, data, seed) -> dict[str, np.ndarray] | None:
    """Public draws of the admissible prior, or None when it is unavailable or thin."""
    from pymc_dp.factors import find_factors
    from pymc_dp.reference import ReferenceUnavailable, admissible_prior

    private = {v: v.name for v in model.data_vars if v.name in data}
    try:
        factors = [f for f in find_factors(model, private, data) if f.is_private]
        reference = admissible_prior(model, factors, data, seed=seed)
    except (ReferenceUnavailable, PrivacyError):
        return None
    return None if reference.thin else dict(reference.draws)


class LocalizedPosterior(Mechanism):
    """Two-stage posterior sampling: a private location, then draws around it (module docstring).

    Build it with :func:`localized_posterior` (or ``pymc_dp.make_private(..., path="localized")``);
    release with :meth:`sample`.

    Attributes
    ----------
    certificate : Certificate
        The guarantee of one release: ``epsilon = epsilon_1 + epsilon_2`` and ``delta``. Its
        factors and truncation are the *first* stage's (``B_1``); the second stage's box is
        chosen at release time from the first stage's output and stated in the release record.
    locate : PrivateMAP
        The first stage (one draw, ``epsilon_1``, no ledger).
    epsilon_locate, epsilon_sample : float
        ``epsilon_1`` and ``epsilon_2``.
    """

    name = MECHANISM

    def __init__(
        self,
        model: pm.Model,
        *,
        epsilon: float,
        draws: int,
        data: Mapping[str, Domain],
        delta: float = 0.0,
        unit: str | Users = "record",
        public: Sequence[str] = (),
        ledger: Ledger | None | str = "default",
        localize: float = 0.25,
        wide: Mapping[str, Any] | None = None,
        confidence: float = 3.0,
        first_stage: str = "auto",
    ):
        model = build_model(model)
        if isinstance(localize, bool) or not isinstance(localize, numbers.Real) or not 0 < localize < 1:
            raise PrivacyError(f"localize={localize!r} must be a number in (0, 1): the share of epsilon spent on the location")
        if not (isinstance(confidence, numbers.Real) and confidence > 0 and math.isfinite(confidence)):
            raise PrivacyError(f"confidence={confidence!r} must be a finite number > 0 (standard deviations)")
        if not (isinstance(epsilon, numbers.Real) and 0 < epsilon < math.inf):
            raise BudgetExceededError(f"epsilon={epsilon!r} must be a finite number > 0")
        self._model = model
        self._kwargs = dict(data=data, unit=unit, public=public)
        self.epsilon_locate = float(epsilon) * float(localize)
        self.epsilon_sample = float(epsilon) - self.epsilon_locate
        self.draws = int(draws)
        self.delta = float(delta)
        self.unit = as_unit(unit)
        self.confidence = float(confidence)
        if first_stage not in FIRST_STAGES:
            raise PrivacyError(f"first_stage={first_stage!r} is not one of {list(FIRST_STAGES)}")
        _check_boxable(model)
        self.first_stage, self.wide, self.locate = first_stage, None, None
        if first_stage in ("auto", "tempered"):
            if wide is None:
                self.wide, self._wide_median = _wide_box_and_median(model, WIDE_TAIL, PUBLIC_SEED, data)
            else:
                self.wide, self._wide_median = dict(wide), None
            try:
                self.locate = PrivateMAP(model, epsilon=self.epsilon_locate, draws=1, bounds=self.wide, ledger=None,
                                         **self._kwargs)
            except BudgetExceededError:  # the rules cannot bound the wide box (a probability reaching 0 or 1)
                if first_stage == "tempered":
                    raise
                self.locate = None
            self.first_stage = "tempered"
            if first_stage == "auto" and (self.locate is None or not self._tempered_is_informative()):
                # the wide box costs so much that its draw is nearly a prior draw (public: beta_1)
                self.first_stage, self.wide = "posterior", None
        if self.first_stage == "posterior":
            self.locate = _budget_stage(PrivateMAP, model, epsilon=self.epsilon_locate, draws=1, delta=0.0, **self._kwargs)
        observed = {f.observed_container for f in self.locate.private_model.factors if f.observed_container}
        _check_simulable({k: d for k, d in data.items() if k not in observed}, model)
        # checks draws / delta / unit as every release does (stage 2's per-draw share must exist)
        self.epsilon_per_draw = accounting.per_draw_epsilon(self.epsilon_sample, self.delta, self.draws)
        guarantee_sample = accounting.compose(self.epsilon_per_draw, self.draws, self.delta)
        total = self.epsilon_locate + guarantee_sample.epsilon
        where = (f"the exponential mechanism on the box B_1 below (beta_1 = {self.locate.beta:.4g})"
                 if self.first_stage == "tempered" else "posterior sampling on the region below (chosen for its budget)")
        note = (
            f"Localized posterior sampling (docs/theory/localized.md): stage 1 spends epsilon_1 = "
            f"{self.epsilon_locate:.4g} on one draw of {where}; stage 2 spends epsilon_2 = {guarantee_sample.epsilon:.4g} on {self.draws} "
            f"draw(s) from a box B_2 around stage 1's draw, chosen from public facts and stated in the release; "
            "the two stages compose adaptively."
        )
        base = self.locate.certificate
        self.certificate: Certificate = dataclasses.replace(
            base,
            epsilon=float(total),
            delta=self.delta,
            draws=self.draws,
            epsilon_per_draw=float(self.epsilon_per_draw),
            composition=f"adaptive: {self.epsilon_locate:.6g} (location) + {guarantee_sample.method} over the draws",
            epsilon_basic=float(self.epsilon_locate + guarantee_sample.epsilon_basic),
            epsilon_optimal=None,
            caveats=base.caveats + (note,),
        )
        self.epsilon = self.certificate.epsilon
        self.domains = dict(data)
        self.reads = tuple(sorted({r for f in self.locate.private_model.factors for r in f.reads}))
        self._ledger_arg = check_ledger(ledger)
        self._data_override: Mapping[str, Any] | None = None
        self.last_release = None

    # ------------------------------------------------------------------ facts
    @property
    def dataset_id(self) -> str:
        return self.locate.private_model.dataset_id

    def _core_for(self, bounds, draws: int, epsilon: float | None) -> PrivateModel:
        # delta as the release's: with delta > 0 the draws compose by the optimal composition,
        # under which eps0(B_2) <= eps0_2 gives compose(eps0(B_2)) <= epsilon_2 (monotone)
        core = PrivateModel(self._model, epsilon=epsilon, draws=draws, delta=self.delta,
                            bounds=bounds, ledger=None, **self._kwargs)
        return core.with_data(self._data_override) if self._data_override is not None else core

    # ------------------------------------------------------------------ stage 2's box (public)
    def public_scale(self, theta_hat: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        """The posterior's standard deviation at ``theta_hat`` in each free RV's unconstrained
        space, from the Laplace approximation on a dataset simulated at ``theta_hat`` (public:
        ``theta_hat`` is released, the simulation reads the domains and shapes only)."""
        return simulated_laplace_scale(self._model, theta_hat, self.locate.private_model, seed=PUBLIC_SEED)

    def _unconstrained(self, rv, x) -> np.ndarray:
        t = self._model.rvs_to_transforms.get(rv)
        x = np.asarray(x, dtype=float)
        return x if t is None else np.asarray(t.forward(x, *rv.owner.inputs).eval(), dtype=float)

    def _tempered_is_informative(self) -> bool:
        """Public: whether the tempered first stage's draw would locate, i.e. its spread
        ``s / sqrt(beta_1)`` (``s`` the simulated Laplace scale at the median of the public draws
        the wide box was made from, or at the box's centre for a box given as ``wide=``) is at most
        ``INFORMATIVE`` of the box's half-width, median over the elements, in the unconstrained
        space. Otherwise its draw is spread over the box, nearly a prior draw."""
        model = self._model
        try:
            point = self._wide_median
            if point is None:
                point = {}
                for rv in model.free_RVs:
                    lo, hi = (self._unconstrained(rv, end) for end in self.wide[rv.name])
                    t = model.rvs_to_transforms.get(rv)
                    mid = 0.5 * (lo + hi)
                    point[rv.name] = mid if t is None else np.asarray(t.backward(mid, *rv.owner.inputs).eval(), dtype=float)
            scale = simulated_laplace_scale(model, point, self.locate.private_model, seed=PUBLIC_SEED)
        except Exception:  # noqa: BLE001 - no public scale: judge by the temperature alone
            return self.locate.beta >= 0.01
        ratios = []
        for rv in model.free_RVs:
            lo, hi = (self._unconstrained(rv, end) for end in self.wide[rv.name])
            half = 0.5 * np.abs(hi - lo)
            spread = np.asarray(scale[rv.name], float) / math.sqrt(self.locate.beta)
            ratios.append(np.ravel(np.where(half > 0, spread / np.where(half > 0, half, 1.0), np.inf)))
        return bool(np.median(np.concatenate(ratios)) <= INFORMATIVE)

    def second_box(self, theta_hat: Mapping[str, np.ndarray]) -> dict[str, Any]:
        """``B_2`` and the facts of its choice, from ``theta_hat`` and public facts only."""
        model = self._model
        try:
            scale = self.public_scale(theta_hat)
        except Exception as err:  # noqa: BLE001 - any failure of the simulation: the certified first box
            return {**self._fallback(), "c": None, "c_min": None, "scale": None,
                    "fallback": f"public scale unavailable ({type(err).__name__})"}
        beta_1 = self.locate.beta
        k = self.confidence
        c_min = k * math.sqrt(1.0 / beta_1 + 1.0)

        def box(c):
            out = {}
            for rv in model.free_RVs:
                t = model.rvs_to_transforms.get(rv)
                u = self._unconstrained(rv, theta_hat[rv.name])
                ends = [u - c * scale[rv.name], u + c * scale[rv.name]]
                if t is not None:
                    ends = [np.asarray(t.backward(e, *rv.owner.inputs).eval(), dtype=float) for e in ends]
                out[rv.name] = (np.minimum(*ends), np.maximum(*ends))
            return out

        def beta_2(c):
            try:
                core = PrivateModel(model, epsilon=None, draws=1, bounds=box(c), ledger=None, **self._kwargs)
            except PrivacyError:  # a box the rules cannot bound: stage 2 would be the prior
                return 0.0
            eps0 = core.certificate.epsilon_per_draw
            return 1.0 if eps0 <= self.epsilon_per_draw else self.epsilon_per_draw / eps0

        # the smallest grid width that covers both spreads; failing that, the feasible width that
        # comes closest (largest c / required); failing that, the first stage's box (certified)
        chosen, b2, best = None, None, None
        for i in range(GRID_STEPS):
            c = c_min * GRID_RATIO**i
            b = beta_2(c)
            if b <= 0:  # the rules cannot bound this box (e.g. a predictor too large for a float)
                break
            required = k * math.sqrt(1.0 / beta_1 + 1.0 / b)
            if c >= required:
                chosen, b2 = c, b
                break
            if best is None or c / required > best[0]:
                best = (c / required, c, b)
        if chosen is None and best is not None:
            _, chosen, b2 = best
        if chosen is None:
            return {**self._fallback(), "c": None, "c_min": c_min, "scale": {k_: v.tolist() for k_, v in scale.items()},
                    "fallback": "no box around the location has a finite certified loss"}
        while b2 == 1.0 and chosen < 4 * c_min:  # untempered: widen while the budget still allows it
            wider = chosen * GRID_RATIO
            if beta_2(wider) < 1.0:
                break
            chosen = wider
        return {"bounds": box(chosen), "c": chosen, "c_min": c_min, "beta_2": b2,
                "scale": {k_: v.tolist() for k_, v in scale.items()}}

    def _fallback(self) -> dict:
        """Stage 2 when no box around the location is certified: the first stage's box (tempered
        first stage) or posterior sampling on a region chosen for epsilon_2 (``bounds`` None)."""
        if self.wide is None:
            return {"bounds": None, "beta_2": 1.0}
        eps0_wide = 2.0 * self.locate.sensitivity
        return {"bounds": dict(self.wide), "beta_2": 1.0 if eps0_wide <= self.epsilon_per_draw else self.epsilon_per_draw / eps0_wide}

    # ------------------------------------------------------------------ release
    def _run(self, *, random_seed, chains, tune, kwargs) -> tuple[xr.Dataset, dict]:
        """Both stages on the private data: the released posterior group and the public facts."""
        rng = np.random.default_rng(random_seed)
        locate = self.locate if self._data_override is None else self.locate.with_data(self._data_override)
        mcmc = {} if tune is None else {"tune": tune}
        with warnings.catch_warnings(), quiet_sampler():  # the user sees one sampler run: the released one
            warnings.simplefilter("ignore", UserWarning)
            first = locate.sample(chains=1, random_seed=int(rng.integers(2**31 - 1)), **mcmc,
                                  **{k: v for k, v in kwargs.items() if k in ("progressbar", "nuts_sampler")})
        theta_hat = {rv.name: np.asarray(first.posterior[rv.name].values)[0, -1] for rv in self._model.free_RVs}
        choice = self.second_box(theta_hat)
        eps_sample = accounting.compose(self.epsilon_per_draw, self.draws, self.delta).epsilon
        if choice["bounds"] is None:
            stage = _budget_stage(PrivateModel, self._model, epsilon=eps_sample, draws=self.draws, delta=self.delta,
                                  **self._kwargs)
            if self._data_override is not None:
                stage = stage.with_data(self._data_override)
        elif choice["beta_2"] >= 1.0:
            stage = self._core_for(choice["bounds"], self.draws, None)
        else:
            stage = PrivateMAP(self._model, epsilon=eps_sample, draws=self.draws, delta=self.delta,
                               bounds=choice["bounds"], ledger=None, **self._kwargs)
            if self._data_override is not None:
                stage = stage.with_data(self._data_override)
        # the guarantee of stage 2 fits epsilon_2 whatever the box (certified again here); a box that
        # did not would be this module's error: nothing is released and the charge stays (failed)
        if not stage.certificate.epsilon <= eps_sample * (1 + 1e-9):
            raise BudgetExceededError(
                f"path 'localized': the second stage's region certified epsilon {stage.certificate.epsilon:.6g} > its "
                f"share {eps_sample:.6g}; nothing was released and the ledger keeps the charge as failed. This is a "
                "defect of pymc_dp (please report it with the certificate); use path='posterior' meanwhile."
            )
        second = stage.sample(chains=chains, random_seed=int(rng.integers(2**31 - 1)), **mcmc, **kwargs)
        facts = {
            "mechanism": MECHANISM,
            "epsilon_locate": self.epsilon_locate,
            "epsilon_sample": eps_sample,
            "beta_locate": self.locate.beta,
            "location": {k: np.asarray(v).tolist() for k, v in theta_hat.items()},
            "first_stage": self.first_stage,
            "box_locate": ({k: [np.asarray(a).tolist() for a in v] for k, v in self.wide.items()} if self.wide is not None
                           else [t for f in self.locate.certificate.factors for t in f.truncation]),
            "box_sample": ({k: [np.asarray(a).tolist() for a in v] for k, v in choice["bounds"].items()}
                           if choice["bounds"] is not None else [t for f in stage.certificate.factors for t in f.truncation]),
            "fallback": choice.get("fallback"),
            "width_rule": {"c": choice["c"], "c_min": choice["c_min"], "confidence_sds": self.confidence,
                           "public_scale": choice["scale"]},
            "beta_sample": choice["beta_2"],
        }
        posterior = second.posterior.copy()
        posterior.attrs = {}
        return posterior, facts

    def sample(self, draws: int | None = None, *, random_seed: Any = None, chains: int | None = None,
               tune: int | None = None, **kwargs: Any):
        """Charge ``certificate.epsilon`` to the ledger, then run both stages and release the
        second stage's ``draws`` draws (``az.InferenceData``; the record states the location,
        both boxes, ``beta_1``, ``beta_2`` and the width rule)."""
        check_budgeted_draws(draws, self.draws)
        kwargs.setdefault("progressbar", False)
        facts: dict = {}

        def draw():
            posterior, more = self._run(random_seed=random_seed, chains=chains, tune=tune, kwargs=kwargs)
            facts.update(more)
            return {"posterior": posterior}

        note = {"mechanism": MECHANISM, "unit": describe_unit(self.unit)}
        return release(self, draw, epsilon=self.epsilon, delta=self.delta, note=note,
                       record=lambda ledger_now: {**self.certificate.to_dict(),
                                                  "release": {**facts, "method": "mcmc", "ledger": ledger_now}},
                       allow_nan=True)

    # ------------------------------------------------------------------ audits (no ledger)
    def with_data(self, data: Mapping[str, Any]) -> "LocalizedPosterior":
        """The same mechanism on other private data of the same shapes, with no ledger."""
        other = object.__new__(LocalizedPosterior)
        other.__dict__.update(self.__dict__)
        other._ledger_arg = None
        other._data_override = dict(data)
        other.last_release = None
        return other

    def audit_runs(self, data: Mapping[str, np.ndarray], runs: int, rng: np.random.Generator) -> np.ndarray:
        """``runs`` independent two-stage releases on ``data`` (one draw each, flattened)."""
        other = self.with_data(data)
        rows = []
        for _ in range(int(runs)):
            with quiet_sampler():
                    posterior, _ = other._run(random_seed=int(rng.integers(2**31 - 1)), chains=1, tune=300,
                                          kwargs={"progressbar": False, "compute_convergence_checks": False})
            rows.append(np.concatenate([np.asarray(posterior[v].values)[0, -1].ravel() for v in posterior.data_vars]))
        return np.asarray(rows)


def simulated_laplace_scale(model: pm.Model, theta_hat: Mapping[str, np.ndarray], core: PrivateModel, *,
                            seed: int = PUBLIC_SEED) -> dict[str, np.ndarray]:
    """Per free RV, the Laplace approximation's standard deviation (unconstrained space) of
    ``model`` at ``theta_hat`` on a *simulated* dataset: each private container that a factor
    observes is drawn from the model at ``theta_hat`` and clipped into its domain; every other
    private container is drawn from its declared domain. No data value is read.

    Where the negative Hessian is not positive definite, each element falls back to
    ``1 / sqrt(max(diagonal, 1e-12))``; a non-finite scale is replaced by 1.
    """
    from pymc.model.fgraph import fgraph_from_model

    from pymc_dp.reference import simulate_domain
    from pymc_dp.rewrite import rebuild_model

    rng = np.random.default_rng(seed)
    fgraph, _ = fgraph_from_model(model)
    sim = rebuild_model(fgraph)
    domains = core.domains
    observed = {f.observed_container for f in core.factors if f.observed_container}
    shapes = {name: np.shape(sim[name].get_value()) for name in domains}
    values = {name: simulate_domain(domains[name], shapes[name], rng) for name in domains if name not in observed}
    for name, v in values.items():
        sim.set_data(name, np.asarray(v, dtype=sim[name].dtype))
    if observed:
        conditioned = pm.do(sim, {name: np.asarray(v) for name, v in theta_hat.items()})
        obs_rvs = [conditioned[f.name] for f in core.factors if f.observed_container]
        drawn = pm.draw(obs_rvs, random_seed=rng) if obs_rvs else []
        drawn = drawn if isinstance(drawn, list) else [drawn]
        by_factor = {f.name: f.observed_container for f in core.factors if f.observed_container}
        for rv, value in zip(obs_rvs, drawn):
            name = by_factor.get(rv.name)
            if name is None:
                continue
            lo, hi = _domain_hull(domains[name])
            sim.set_data(name, np.clip(np.asarray(value, dtype=float), lo, hi).astype(sim[name].dtype))
    point = {}
    for rv in sim.free_RVs:
        t = sim.rvs_to_transforms.get(rv)
        x = np.asarray(theta_hat[rv.name], dtype=float)
        point[sim.rvs_to_values[rv].name] = x if t is None else np.asarray(t.forward(x, *rv.owner.inputs).eval())
    neg = -np.asarray(sim.compile_d2logp(jacobian=True, negate_output=False)(point), dtype=float)
    try:
        cov = np.linalg.inv(neg)
        sd = np.sqrt(np.diag(cov)) if np.all(np.diag(cov) > 0) and np.all(np.linalg.eigvalsh(neg) > 0) else None
    except np.linalg.LinAlgError:
        sd = None
    if sd is None:
        sd = 1.0 / np.sqrt(np.maximum(np.diag(neg), 1e-12))
    sd = np.where(np.isfinite(sd) & (sd > 0), sd, 1.0)
    out, i = {}, 0
    for rv in sim.free_RVs:
        size = int(np.prod(np.shape(theta_hat[rv.name])))
        out[rv.name] = sd[i:i + size].reshape(np.shape(theta_hat[rv.name]))
        i += size
    return out


def _check_simulable(data: Mapping[str, Domain], model: pm.Model) -> None:
    """Refuse, before anything is charged, a covariate domain the width rule cannot simulate from."""
    from pymc_dp.reference import ReferenceUnavailable, simulate_domain

    rng = np.random.default_rng(0)
    for name, domain in data.items():
        try:
            simulate_domain(domain, np.shape(model[name].get_value()), rng)
        except (ReferenceUnavailable, NotImplementedError, TypeError) as err:
            raise PrivacyError(
                f"path 'localized': the domain of {name!r} ({domain}) cannot be simulated from ({err}); the "
                "second stage's width rule draws a public dataset from the declared domains. Declare a bounded "
                "domain, or use posterior sampling (path='posterior')."
            ) from None


def _domain_hull(domain: Domain) -> tuple[Any, Any]:
    lo, hi = getattr(domain, "lo", -np.inf), getattr(domain, "hi", np.inf)
    return lo, hi


def _from_make_private(model, *, epsilon, draws, data, delta, unit, bounds, public, split, ledger) -> LocalizedPosterior:
    """``make_private(..., path="localized")``."""
    if bounds is not None or split != "optimised":
        raise PrivacyError(
            "path='localized' chooses both of its regions itself (a wide public box, then a box around a "
            "private location); bounds= and split= belong to path='posterior'."
        )
    if epsilon is None:
        raise PrivacyError("path='localized' needs epsilon: it splits it between the location and the draws.")
    return LocalizedPosterior(model, epsilon=epsilon, draws=draws, data=data, delta=delta, unit=unit,
                              public=public, ledger=ledger)


register_path("localized", _from_make_private)


def localized_posterior(model, *, epsilon: float, draws: int, data: Mapping[str, Domain], **kwargs: Any) -> LocalizedPosterior:
    """Localize, then sample (:class:`LocalizedPosterior`); keywords as :func:`pymc_dp.make_private`
    plus ``localize`` (the share of epsilon spent on the location, default 0.25), ``wide`` (the
    first stage's box, default the prior's central 99.9%) and ``confidence`` (standard deviations
    the second box covers, default 3)."""
    return LocalizedPosterior(model, epsilon=epsilon, draws=draws, data=data, **kwargs)
