"""The protocol every mechanism of :mod:`pymc_dp.mechanisms` implements.

A mechanism is built from a model, a budget and the private data's domains (as
:func:`pymc_dp.make_private`) and is "a certification and a draw function": its
:meth:`Mechanism.sample` hands the draw function to the one release driver
(:func:`pymc_dp.release.release`), which charges the budget ledger *before* the private data
are read and publishes an ``az.InferenceData`` whose release record (``attrs["pymc_dp"]``,
:mod:`pymc_dp.record`) holds public facts only (:func:`pymc_dp.report` renders it). A mechanism
that releases noisy statistics once charges them through :func:`charge` and publishes its
post-processing draws with :func:`pymc_dp.release.publish`.

For :func:`pymc_dp.audit` (statistical method) a mechanism also exposes, **for audits only**
(nothing is charged, and the outputs are not a release):

* :meth:`Mechanism.audit_runs` -- ``runs`` independent outputs of the mechanism on a dataset;
* :meth:`Mechanism.audit_log_ratio` -- the exact log-ratio ``ln p_x(o) - ln p_y(o)`` of the two
  output densities (the Neyman-Pearson statistic), or ``None`` when it is not known;
* :meth:`Mechanism.audit_score` -- how far apart the outputs on ``x`` and ``y`` are (used to
  choose the audited pair among neighbours; larger is more distinguishable), or ``None``.

The audit compares the measured lower bound on epsilon with :attr:`Mechanism.epsilon`.
"""

from __future__ import annotations

import abc
from typing import Any, Callable, Mapping

import numpy as np

from pymc_dp.ledger import Ledger, Spend
from pymc_dp.privacy_report import DEFAULT_CONFIDENCE, DEFAULT_MAX_DIAGNOSTIC_ROWS, report_release

__all__ = ["Mechanism", "build_model", "charge"]


def build_model(model: Any):
    """The ``pm.Model`` a mechanism was given: the model itself, or what a zero-argument builder
    returns (a TypeError otherwise)."""
    import pymc as pm

    if isinstance(model, pm.Model):
        return model
    if callable(model):
        built = model()
        if not isinstance(built, pm.Model):
            raise TypeError(f"the model builder returned {type(built).__name__}, not a pm.Model")
        return built
    raise TypeError(f"expected a pm.Model or a zero-argument function returning one, got {type(model).__name__}")


def charge(mech, **description: Any):
    """The ledger charge of one release of ``mech`` (its ``epsilon`` on its ``dataset_id``), as a
    context (:func:`pymc_dp.release.reservation`): reserved before the private data are read; a
    release that fails after it started stays charged. A mechanism without a ledger
    (``ledger=None``) charges nothing."""
    from pymc_dp.release import reservation
    from pymc_dp.units import describe_unit
    from pymc_dp.version import software_versions

    note = {"mechanism": mech.name, **description, "unit": describe_unit(mech.unit), "pymc_dp": software_versions()["pymc_dp"]}
    return reservation(mech, mech.epsilon, mech.delta, note)


class Mechanism(abc.ABC):
    """Base class of the mechanisms (Laplace on posterior updates, Fourier, private MAP, ...).

    Attributes
    ----------
    name : str
        The mechanism's name, as in the release's ``attrs["pymc_dp"]["mechanism"]``.
    epsilon, delta : float
        The guarantee of one :meth:`sample` release (what is charged to the ledger).
    unit : str or Users
        The privacy unit.
    domains : dict of str to Domain
        The private containers' domains.
    model : pm.Model
        The user's model (never mutated).
    reads : tuple of str
        The private containers the release depends on (the audit changes only these).
    path_choice : PathChoice or None
        How ``make_private(..., path="auto")`` chose this mechanism, and why (public; stated in
        every release record and report); None when the user chose it.
    """

    path_choice: Any = None
    name: str
    epsilon: float
    delta: float
    unit: Any
    domains: Mapping[str, Any]
    model: Any
    reads: tuple[str, ...]

    @property
    def ledger(self):
        """The budget ledger releases are charged to (None: not recorded). The ``"default"``
        argument (``self._ledger_arg``) opens :class:`~pymc_dp.Ledger` at first use and keeps it."""
        if isinstance(self._ledger_arg, str):
            self._ledger_arg = Ledger()
        return self._ledger_arg

    def spent(self) -> Spend | None:
        """What the ledger has recorded for this mechanism's private data (None: no ledger)."""
        return None if self.ledger is None else self.ledger.spent(self.dataset_id)

    @abc.abstractmethod
    def sample(self, draws: int | None = None, *, random_seed: Any = None, **kwargs: Any):
        """Charge the ledger, then release an ``az.InferenceData``.

        One signature for every mechanism, posterior sampling included: ``draws`` first, then
        keywords. Where each draw costs budget (private MAP, noise on posterior updates,
        :meth:`pymc_dp.PrivateModel.sample`) the number is fixed when the mechanism is built and
        ``draws`` must be ``None`` or that number
        (:func:`~pymc_dp.release.check_budgeted_draws`); where the draws are post-processing of a
        release (noisy statistics, noisy counts) any number may be drawn, at no further cost."""

    def report(self, *, confidence: float = DEFAULT_CONFIDENCE, max_diagnostic_rows: int = DEFAULT_MAX_DIAGNOSTIC_ROWS):
        """The :class:`~pymc_dp.PrivacyReport` of the last release (what :func:`pymc_dp.report`
        calls for a mechanism)."""
        last = getattr(self, "last_release", None)
        if last is None:
            raise ValueError(
                f"{type(self).__name__} has not released anything yet: its report describes a release; "
                "call .sample() first (or report the released InferenceData)."
            )
        return report_release(last, confidence=confidence, max_diagnostic_rows=max_diagnostic_rows)

    # ------------------------------------------------------------------ audit protocol
    @abc.abstractmethod
    def audit_runs(self, data: Mapping[str, np.ndarray], runs: int, rng: np.random.Generator) -> np.ndarray:
        """``runs`` independent outputs of the mechanism on ``data`` (container -> array), as an
        array of shape ``(runs, k)``. No ledger, no release: for audits only. ``rng`` seeds what
        the mechanism can seed; inside ``pymc_dp.audit(..., random_seed=...)`` the noise functions
        draw the same law from a seeded generator (``mechanisms.noise.audit_noise``), elsewhere
        from OpenDP's unseedable samplers."""

    def audit_log_ratio(
        self, x: Mapping[str, np.ndarray], y: Mapping[str, np.ndarray]
    ) -> Callable[[np.ndarray], np.ndarray] | None:
        """A function of outputs ``(runs, k)`` giving ``ln p_x(o) - ln p_y(o)``, or ``None``."""
        return None

    def audit_score(self, x: Mapping[str, np.ndarray], y: Mapping[str, np.ndarray]) -> float | None:
        """How distinguishable the outputs on ``x`` and ``y`` are (larger: more), or ``None``."""
        return None
