"""Private MAP point estimates: the exponential mechanism with the prior as base measure.

AAAI 2016 (Zhang, Rubinstein & Dimitrakakis, *On the Differential Privacy of Bayesian
Inference*), Alg. 3 "Mechanism for MAP Point Estimates", Thm 4 and Cor. 4; docs/mechanisms.md.
The mechanism outputs ``theta`` with density

.. math:: q_x(\\theta) \\;\\propto\\; \\exp\\Bigl(\\frac{\\varepsilon_0\\, u(x, \\theta)}{2 \\Delta_u}\\Bigr)\\, \\xi_L(\\theta),
          \\qquad u(x, \\theta) = \\ln p_\\theta(x),

with respect to the truncated prior ``xi_L`` (the user's prior restricted to Theta_L, built by
:class:`pymc_dp.PrivateModel`), where ``Delta_u`` bounds the change of the log-likelihood of the
private data by one privacy unit on Theta_L: the certificate's ``epsilon_per_draw / 2``.
Writing ``beta = eps0 / (2 Delta_u)``, the output is a draw of the *tempered* truncated posterior
``xi_L(theta) p_theta(x)^beta``: sampled exactly when the truncated model is conjugate
(:meth:`pymc_dp.exact.ConjugatePlan.tempered`), else by :func:`pymc.sample` on a copy of the
truncated model with the private log-likelihood scaled by ``beta``.

Posterior sampling is the special case ``beta = 1`` (the default ``sensitivity``).
"""

from __future__ import annotations

import dataclasses
import math
import numbers
import warnings
from typing import Any, Callable, Mapping, Sequence

import arviz as az
import numpy as np
import pymc as pm

from pymc_dp import accounting
from pymc_dp.certificate import Certificate
from pymc_dp.certification import SPLITS, same_order
from pymc_dp.certification import check_budget as _check_budget
from pymc_dp.core import PrivateModel
from pymc_dp.domains import Domain
from pymc_dp.exceptions import BudgetExceededError, NotConjugateError, PrivacyError
from pymc_dp.ledger import Ledger
from pymc_dp.mechanisms.base import build_model
from pymc_dp.privacy_report import DEFAULT_CONFIDENCE, DEFAULT_MAX_DIAGNOSTIC_ROWS, report_certificate, report_release
from pymc_dp.release import check_ledger
from pymc_dp.sampling import run_mcmc
from pymc_dp.units import Users, as_unit

__all__ = ["PrivateMAP", "private_map", "MECHANISM"]

#: the name of this mechanism in a release's ``attrs["pymc_dp"]["release"]["mechanism"]``
MECHANISM = "exponential (private MAP)"

#: the Potential that scales the private log-likelihood of the MCMC model by beta
TEMPER_POTENTIAL = "__dp_map_tempering"


def _check_sensitivity(sensitivity) -> float | None:
    if sensitivity is None:
        return None
    if (
        isinstance(sensitivity, bool)
        or not isinstance(sensitivity, numbers.Real)
        or not math.isfinite(sensitivity)
        or sensitivity <= 0
    ):
        raise PrivacyError(
            f"sensitivity={sensitivity!r} must be a finite number > 0: Delta_u, the most one privacy "
            "unit may change the log-likelihood on the truncated prior's support (None: eps0 / 2, "
            "which makes the mechanism posterior sampling)."
        )
    return float(sensitivity)


class PrivateMAP:
    """A private MAP-style point estimate: the exponential mechanism of AAAI 2016 Alg. 3.

    Build it with :func:`private_map`; release with :meth:`sample`.

    The mechanism releases ``draws`` independent draws of

    .. math:: q_x(\\theta) \\propto p_\\theta(x)^{\\beta}\\, \\xi_L(\\theta), \\qquad
              \\beta = \\frac{\\varepsilon_0}{2 \\Delta_u},

    the exponential mechanism with utility ``u(x, theta) = ln p_theta(x)`` (the log-likelihood
    of the factors that read private data), sensitivity ``Delta_u`` and base measure ``xi_L``,
    the user's prior restricted to Theta_L (likelihood factors that read no private data are
    public and belong to the base measure). At ``beta = 1`` its mode is the MAP of the truncated
    model; a larger ``beta`` moves the draws towards the maximum likelihood in Theta_L, a smaller
    one towards the prior.

    **Posterior sampling is the exponential mechanism at temperature 1.** With the default
    ``sensitivity=None``, ``Delta_u = eps0 / 2`` and ``beta = 1``: the truncation is exactly the
    one :func:`pymc_dp.make_private` builds for the same budget, and one draw of this mechanism
    *is* one posterior draw of that private model (same law; the exact sampler even gives the
    same numbers for the same seed). This is why both carry the factor 2: ``eps0 = 2 Delta``.
    A larger ``sensitivity`` keeps more of the prior (a wider Theta_L, :attr:`certificate`
    ``.prior_mass_kept``) and pays with tempering (``beta < 1``: a flatter density); a smaller one
    truncates more and sharpens (``beta > 1``). Each draw is ``eps0``-DP either way.

    Privacy proof
    -------------
    *Claim.* Each released draw is ``eps0``-DP for the privacy unit, and the release of N draws
    is ``(certificate.epsilon, certificate.delta)``-DP.

    1. *Sensitivity.* The truncation is built by :class:`~pymc_dp.PrivateModel` with per-draw
       loss ``2 Delta_u`` (one draw, ``delta = 0``): its certificate guarantees, by the exact
       per-family rules lifted through the DAG (docs/theory/families.md, lift.md, truncation.md), that for all neighbours
       ``x ~ y`` the change ``g(theta) = ln p_theta(x) - ln p_theta(y)`` oscillates by at most
       ``2 Delta_u`` over the support Theta_L of ``xi_L``: ``sup g - inf g <= 2 Delta_u``, where
       ``Delta_u = certificate.epsilon_per_draw / 2`` of that model (:attr:`sensitivity`). (A
       factor certified by its per-record constant gives ``|g| <= Delta_u``, hence this; one
       certified by its oscillation gives it directly, docs/theory/oscillation.md.)
    2. *One draw* (McSherry & Talwar 2007, Thm 6; AAAI 2016 Cor. 4, in the oscillation form).
       The output density with respect to ``xi_L`` is ``q_x(theta) = exp(beta u(x, theta)) /
       Z(x)``, ``Z(x) = int exp(beta u(x, t)) dxi_L(t)``, so ``ln q_x(theta) - ln q_y(theta) =
       beta g(theta) - ln int exp(beta g(t)) dq_y(t)``, which lies between ``beta (g(theta) -
       sup g)`` and ``beta (g(theta) - inf g)``: its absolute value is at most ``beta (sup g -
       inf g) <= 2 beta Delta_u = eps0`` for every ``theta``, and integrating over any event
       ``B``, ``P_x(B) <= e^{eps0} P_y(B)``. (``Z`` is positive, and finite when the likelihood
       is bounded on Theta_L -- probabilities of discrete data, densities whose scale Theta_L
       bounds below -- or, for ``beta <= 1``, by Jensen's inequality whenever the marginal
       likelihood is.)
    3. *N draws* are independent runs of the same ``eps0``-DP mechanism; their guarantee is
       computed by :func:`pymc_dp.accounting.compose` exactly as for posterior draws: basic
       ``N eps0``, and with ``delta > 0`` the exact optimal composition, whichever is smaller;
       ``eps0`` is the largest per-draw loss whose composition fits ``epsilon``
       (:func:`pymc_dp.accounting.per_draw_epsilon`).
    4. Nothing else leaves the mechanism: the release is built by the core's release code
       (posterior draws of the free RVs and data-free Deterministics, public metadata only).

    The proof is for exact draws: it is exact with the conjugate sampler; with MCMC the draws are
    approximate (the certificate's caveat says so), as for posterior sampling.

    Note on the paper: Alg. 3 writes the utility as the posterior ``xi(theta | D)``; its proof
    (via Dimitrakakis et al. 2015, Thm 6) uses the Lipschitz bound of the log-likelihood, which
    is what is certified here, so the utility used is ``ln p_theta(D)`` and the base measure the
    (truncated) prior, as in its footnote 4.

    Attributes
    ----------
    certificate : Certificate
        The guarantee of the release: ``epsilon``, ``delta``, ``draws``, ``epsilon_per_draw``
        (``eps0``), the composition, and the truncation's factors, prior mass kept and domains.
        Its ``L_j`` bound the *untempered* log-likelihood's change between neighbours (half its
        oscillation over Theta_L; they lift to ``Delta_u``); the tempered one's change oscillates
        by at most ``2 beta Delta_u = eps0``.
    sensitivity : float
        ``Delta_u``.
    beta : float
        ``eps0 / (2 Delta_u)``.
    private_model : PrivateModel
        The truncation (per-draw loss ``2 Delta_u``, no ledger). Never sampled by this class.
    model : pm.Model
        The model the MCMC path samples: a copy of ``private_model.model`` with a Potential
        ``(beta - 1) x`` the private log-likelihood (no Potential when ``beta == 1``).
    conjugate_plan : ConjugatePlan or None
        The exact sampler of the tempered density, when the truncated model is conjugate.
    """

    def __init__(
        self,
        model: pm.Model | Callable[[], pm.Model],
        *,
        epsilon: float,
        data: Mapping[str, Domain],
        draws: int = 1,
        delta: float = 0.0,
        sensitivity: float | None = None,
        unit: str | Users = "record",
        public: Sequence[str] = (),
        split: str = "optimised",
        ledger: Ledger | None | str = "default",
        bounds: Mapping[str, Any] | None = None,
    ):
        model = build_model(model)
        _check_budget(epsilon, delta, draws, unit, None)
        delta_u = _check_sensitivity(sensitivity)
        if split not in SPLITS:
            raise PrivacyError(f"split={split!r} is not a budget split; use one of {list(SPLITS)}.")
        if bounds is not None and delta_u is not None:
            raise PrivacyError(
                "private_map: give either bounds= (the region; Delta_u is then certified over it) or "
                "sensitivity= (Delta_u; the region is then chosen to fit it), not both."
            )
        ledger = check_ledger(ledger)
        eps0 = accounting.per_draw_epsilon(epsilon, delta, draws)
        if delta_u is None:
            delta_u = eps0 / 2.0
        try:
            core = PrivateModel(
                model, epsilon=None if bounds is not None else 2.0 * delta_u, draws=1, data=data, delta=0.0,
                unit=unit, bounds=bounds, public=public, split=split, ledger=None,
            )
        except BudgetExceededError as err:
            if bounds is not None:
                raise

            raise BudgetExceededError(
                f"private_map: the truncation for sensitivity Delta_u = {delta_u:.6g} is infeasible "
                f"(below, 'epsilon' is the truncation's per-draw loss 2 Delta_u = {2 * delta_u:.6g}, and "
                f"the smallest feasible Delta_u is half the smallest epsilon it names; raise "
                f"sensitivity{'' if sensitivity is not None else ' (or epsilon)'}): {err}"
            ) from err
        guarantee = accounting.compose(eps0, draws, delta)
        self.epsilon_per_draw = float(eps0)
        self.sensitivity = core.certificate.epsilon_per_draw / 2.0
        if not self.sensitivity < math.inf:  # a region the rules cannot bound (NaN fails closed)
            raise BudgetExceededError(
                f"private_map: the log-likelihood's change is not bounded on the region "
                f"(Delta_u = {self.sensitivity}); give narrower bounds."
            )
        # Delta_u = 0: the private likelihood does not change between neighbours on the region,
        # every beta is 0-DP; beta = 1 keeps the posterior
        self.beta = self.epsilon_per_draw / (2.0 * self.sensitivity) if self.sensitivity > 0 else 1.0
        self.draws = int(draws)
        self.delta = float(delta)
        self.unit = as_unit(unit)
        note = (
            f"Exponential mechanism (private MAP, AAAI 2016 Alg. 3): each draw is from the truncated "
            f"prior times the private likelihood to the power beta = eps0 / (2 Delta_u) = {self.beta:.6g}, "
            f"Delta_u = {self.sensitivity:.6g}; the factors' L_j bound the untempered log-likelihood "
            f"(they lift to Delta_u: half the oscillation of its change between neighbours over the "
            f"region), so the tempered one's change oscillates by at most 2 beta Delta_u = eps0."
        )
        self.certificate: Certificate = dataclasses.replace(
            core.certificate,
            epsilon=float(guarantee.epsilon),
            delta=float(delta),
            draws=self.draws,
            epsilon_per_draw=float(eps0),
            composition=guarantee.method,
            epsilon_basic=float(guarantee.epsilon_basic),
            epsilon_optimal=None if guarantee.epsilon_optimal is None else float(guarantee.epsilon_optimal),
            caveats=core.certificate.caveats + (note,),
        )
        self._ledger_arg = ledger
        self._attach(core)

    def _attach(self, core: PrivateModel) -> None:
        """Use ``core`` (the truncation, holding the private data) for everything data-bound."""
        self.private_model = core
        self.model = _tempered_model(core, self.beta)
        plan = core.conjugate_plan
        self.conjugate_plan = None if plan is None else plan.tempered(self.beta)
        self._engine = _TemperedEngine(self, core)

    # ------------------------------------------------------------------ facts
    @property
    def mechanism(self) -> dict[str, Any]:
        """The public facts of the mechanism that a release carries (``release`` section)."""
        return {
            "mechanism": MECHANISM,
            "beta": self.beta,
            "sensitivity": self.sensitivity,
            "utility": "log-likelihood of the factors that read private data",
            "base_measure": "the prior truncated to Theta_L (and the public factors' likelihood)",
            "reference": "AAAI 2016 Alg. 3, Cor. 4; McSherry & Talwar 2007 Thm 6",
        }

    @property
    def epsilon(self) -> float:
        """The guarantee of the whole release (``certificate.epsilon``)."""
        return self.certificate.epsilon

    @property
    def dataset_id(self) -> str:
        """The ledger's name for the private data (the same as the core's for the same data)."""
        return self.private_model.dataset_id

    @property
    def ledger(self) -> Ledger | None:
        """The budget ledger releases are charged to (None: not recorded)."""
        return self._engine.ledger

    @property
    def last_release(self) -> az.InferenceData | None:
        """The InferenceData of the last release (None before the first)."""
        return self._engine.last_release

    # ------------------------------------------------------------------ release
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
        """Release ``draws`` draws of the exponential mechanism.

        Charged to the ledger (``certificate.epsilon``, ``certificate.delta``) before anything
        touches the private data; refused with :class:`~pymc_dp.BudgetExceededError` when that
        would overspend. ``draws``: ``None`` or the certificate's number (part of the budget).
        The keywords are those of :meth:`pymc_dp.PrivateModel.sample`:
        ``method`` ("auto": exact when the truncated model is conjugate, else MCMC; "exact";
        "mcmc"), ``chains``, ``tune``, ``thin``, ``random_seed``, and any :func:`pymc.sample`
        keyword (``nuts_sampler``, ``cores``, ``target_accept``, ``initvals``, ...).

        Returns
        -------
        az.InferenceData
            Only a ``posterior`` group of ``draws`` draws, and ``attrs["pymc_dp"]``: the
            certificate and the ``release`` facts, including ``mechanism``, ``beta`` and
            ``sensitivity`` (``Delta_u``). :func:`pymc_dp.report` renders it.
        """
        return self._engine.sample(draws, method=method, chains=chains, tune=tune, thin=thin, random_seed=random_seed, **kwargs)

    def report(self, *, confidence: float = DEFAULT_CONFIDENCE, max_diagnostic_rows: int = DEFAULT_MAX_DIAGNOSTIC_ROWS):
        """The :class:`~pymc_dp.PrivacyReport` of this mechanism: its last release's, else its
        certificate's (what a release would guarantee)."""
        if self.last_release is not None:
            return report_release(self.last_release, confidence=confidence, max_diagnostic_rows=max_diagnostic_rows)
        return report_certificate(self.certificate.to_dict(), confidence=confidence,
                                  max_diagnostic_rows=max_diagnostic_rows, mechanism=self.mechanism)

    # ------------------------------------------------------------------ audits (no ledger)
    def with_data(self, data: Mapping[str, Any]) -> "PrivateMAP":
        """The same mechanism (truncation, beta, certificate) on other private data of the same
        shapes, recording nothing in any ledger. For audits; see
        :meth:`pymc_dp.PrivateModel.with_data`."""
        other = object.__new__(PrivateMAP)
        other.__dict__.update(self.__dict__)
        other._ledger_arg = None
        other._attach(self.private_model.with_data(data))
        return other

    def _audit_draws(self, n: int, rng: np.random.Generator, **mcmc_kwargs: Any) -> dict[str, np.ndarray]:
        """``n`` independent draws of the per-draw mechanism (each ``epsilon_per_draw``-DP), for
        audits: nothing is charged or recorded. **Reads the private data.**

        Exact (iid draws of the tempered truncated posterior) when :attr:`conjugate_plan` exists;
        otherwise ``n`` independent MCMC chains of one draw each after ``tune`` warm-up steps
        (default 200; ``mcmc_kwargs`` go to :func:`pymc.sample`), i.e. ``n`` independent
        one-draw releases. Returns name -> array of shape ``(n, *shape)`` for every free RV.
        """
        n = int(n)
        if n < 1:
            raise ValueError(f"n={n} must be >= 1")
        if self.conjugate_plan is not None:
            return self.conjugate_plan.sample(n, rng)
        tune = int(mcmc_kwargs.pop("tune", 200))
        batch = int(mcmc_kwargs.pop("batch", 100))
        mcmc_kwargs.setdefault("cores", 1)
        out: dict[str, list] = {}
        done = 0
        while done < n:
            k = min(batch, n - done)
            with warnings.catch_warnings():  # ArviZ: "more chains than draws", by design here
                warnings.simplefilter("ignore", UserWarning)
                post = run_mcmc(
                    self.model, draws_per_chain=1, tune=tune, chains=k, initvals=dict(self.private_model.certification.initvals),
                    random_seed=int(rng.integers(2**31 - 1)), **mcmc_kwargs,
                )
            for rv in self.model.free_RVs:
                out.setdefault(rv.name, []).append(np.asarray(post[rv.name].values)[:, 0])
            done += k
        return {name: np.concatenate(v) for name, v in out.items()}

    def _log_density_ratio(self, x_data: Mapping[str, Any], y_data: Mapping[str, Any]) -> Callable[[Mapping[str, np.ndarray]], np.ndarray]:
        """``ln q_x(theta) - ln q_y(theta)`` of the per-draw output densities on two datasets, as a
        function of points (name -> array ``(G, *shape)``) returning shape ``(G,)``; exact, from
        the tempered conjugate plan. **Reads the data it is given.**

        Raises
        ------
        NotConjugateError
            The truncated model has no exact sampler (hence no closed-form density).
        """
        plan = self.conjugate_plan
        if plan is None:
            raise NotConjugateError(
                "private_map: no closed-form output density for this model: "
                f"{self.private_model.exact_unavailable}"
            )
        px, py = plan.with_data(x_data), plan.with_data(y_data)

        def log_ratio(values: Mapping[str, np.ndarray]) -> np.ndarray:
            with np.errstate(invalid="ignore"):
                return px.log_density(values) - py.log_density(values)

        return log_ratio

    def __repr__(self):
        c = self.certificate
        return (
            f"<PrivateMAP ({c.epsilon:.4g}, {c.delta:.3g})-DP, {self.draws} draw(s), "
            f"beta = {self.beta:.4g}, Delta_u = {self.sensitivity:.4g}>\n{c}"
        )


class _TemperedEngine(PrivateModel):
    """The core's release machinery (ledger, exact/MCMC sampling, release building) pointed at
    the tempered density: ``model`` and ``conjugate_plan`` are the mechanism's, the certificate
    and draws the mechanism's, and every release carries the mechanism's facts."""

    def __init__(self, mech: PrivateMAP, core: PrivateModel):  # noqa: D107 - not PrivateModel's
        self.__dict__.update(core.__dict__)
        self.__dict__.pop("_plan", None)
        self.__dict__.pop("_plan_refusal", None)
        self._core = core
        self._mech = mech
        self.model = mech.model
        self.certificate = mech.certificate
        self.draws = mech.draws
        self.delta = mech.delta
        self._ledger_arg = None  # unused: the ledger property reads the mechanism's
        self.last_release = None

    @property
    def ledger(self) -> Ledger | None:
        if isinstance(self._mech._ledger_arg, str):  # "default": opened at first use, kept by the mechanism
            self._mech._ledger_arg = Ledger()
        return self._mech._ledger_arg

    @property
    def conjugate_plan(self):
        return self._mech.conjugate_plan

    @property
    def exact_unavailable(self) -> str | None:
        return self._core.exact_unavailable

    @property
    def _plan_refusal(self):
        return self._core._plan_refusal

    def with_data(self, data):  # pragma: no cover - PrivateMAP.with_data is the entry point
        raise NotImplementedError("use PrivateMAP.with_data")

    def _spend_note(self, release: dict) -> dict:
        return {**super()._spend_note(release), "mechanism": MECHANISM, "beta": self._mech.beta}

    def _record(self, release: dict) -> dict:
        return super()._record({**release, **self._mech.mechanism})


def _tempered_model(core: PrivateModel, beta: float) -> pm.Model:
    """A fresh copy of the truncated model whose private log-likelihood is multiplied by ``beta``.

    ``pm.Potential((beta - 1) * sum_j ln p_j)`` over the factors ``j`` that read private data
    (``core.factors``), on a FunctionGraph copy of ``core.model``: neither the user's model nor
    the core's is touched. ``beta == 1``: the copy without a Potential.
    """
    from pymc.model.fgraph import fgraph_from_model

    from pymc_dp.rewrite import rebuild_model

    fgraph, _ = fgraph_from_model(core.model)
    model = rebuild_model(fgraph)
    same_order(model, core.model)
    if beta != 1.0:
        private = {f.name for f in core.factors}
        terms = [pm.logp(rv, model.rvs_to_values[rv]).sum() for rv in model.observed_RVs if rv.name in private]
        with model:
            pm.Potential(TEMPER_POTENTIAL, (beta - 1.0) * sum(terms[1:], terms[0]))
    return model


def private_map(
    model: pm.Model | Callable[[], pm.Model],
    *,
    epsilon: float,
    data: Mapping[str, Domain],
    unit: str | Users = "record",
    public: Sequence[str] = (),
    ledger: Ledger | None | str = "default",
    draws: int = 1,
    delta: float = 0.0,
    sensitivity: float | None = None,
    split: str = "optimised",
    bounds: Mapping[str, Any] | None = None,
) -> PrivateMAP:
    """A private MAP-style estimate of a PyMC model: the exponential mechanism with the
    log-likelihood as utility and the truncated prior as base measure (AAAI 2016 Alg. 3).

    Release with :meth:`PrivateMAP.sample`; see :class:`PrivateMAP` for the mechanism and its
    privacy proof. The user's model is never modified.

    Parameters
    ----------
    model : pm.Model or callable
        The model (or a zero-argument function building it); its private data in ``pm.Data``
        containers, as for :func:`pymc_dp.make_private`.
    epsilon : float
        Total budget of the release of ``draws`` draws.
    data : dict of str to Domain
        Each private container's name and the public domain of its records.
    unit : {"record", "attribute"} or Users
        The privacy unit.
    public : sequence of str
        Containers that are not private.
    ledger : Ledger, "default" or None
        Where the release is charged (before sampling), as for :func:`pymc_dp.make_private`.
    draws : int, default 1
        Number of independent draws released. One draw is the point estimate; N draws compose
        (:mod:`pymc_dp.accounting`: basic, and exact optimal when ``delta > 0``).
    delta : float, default 0
        The delta of the release's (epsilon, delta)-DP (only used by the composition of draws).
    sensitivity : float, optional
        ``Delta_u``: the per-unit change of the log-likelihood that the truncation guarantees.
        Default ``eps0 / 2``, i.e. ``beta = 1``: posterior sampling. Larger: a wider Theta_L and
        a flatter (tempered) density; smaller: a narrower Theta_L and a sharper one.
    split : {"optimised", "equal"}
        How ``Delta_u`` is shared among the factors (as in :func:`pymc_dp.make_private`).
    bounds : dict, optional
        An explicit region instead of ``sensitivity`` (as ``bounds=`` of
        :func:`pymc_dp.make_private`): ``Delta_u`` is then certified over it, and ``beta``
        follows, so that each draw is ``eps0``-DP whatever the region's width.

    Returns
    -------
    PrivateMAP

    Raises
    ------
    BudgetExceededError
        ``epsilon <= 0``, or no truncation achieves ``Delta_u`` (the message names the factor).
    PrivacyError
        ``sensitivity`` not a finite number > 0; and every refusal of the core (undeclared or
        bad domains, unsupported factors, priors that read private data), unchanged.

    Examples
    --------
    >>> with pm.Model() as coin:
    ...     x = pm.Data("x", np.array([0, 1, 1, 1]))
    ...     p = pm.Beta("p", 1, 1)
    ...     pm.Bernoulli("obs", p=p, observed=x)
    >>> mech = pymc_dp.private_map(coin, epsilon=1.0, data={"x": pymc_dp.Binary()}, sensitivity=1.0)
    >>> mech.beta
    0.5
    >>> idata = mech.sample(random_seed=1)   # one draw: the private point estimate
    """
    return PrivateMAP(
        model, epsilon=epsilon, data=data, draws=draws, delta=delta, sensitivity=sensitivity,
        unit=unit, public=public, split=split, ledger=ledger, bounds=bounds,
    )
