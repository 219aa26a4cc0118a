"""Typed errors. Every pymc_dp refusal is a :class:`PrivacyError`.

A refusal happens *before* anything is sampled or spent: when one of these is raised, nothing
was released and no budget ledger changed. Every message names the variable concerned and says
what to do about it.
"""

from __future__ import annotations

__all__ = [
    "PrivacyError",
    "DomainError",
    "UnsupportedFactorError",
    "BudgetExceededError",
    "LedgerError",
    "NotConjugateError",
    "StuckChainError",
    "CertificateRefutedError",
    "EstimateNotBudgetError",
    "PathNotImplementedError",
    "RegionNotImplementedError",
    "EstimateNotImplementedError",
    "refuse_estimate",
]


class PrivacyError(ValueError):
    """Base class: pymc_dp refused to certify or release something."""


class DomainError(PrivacyError):
    """A private container has no declared domain, a bad one, or data outside it."""


class UnsupportedFactorError(PrivacyError):
    """A likelihood factor reads private data in a way no exact rule covers."""


class PathNotImplementedError(UnsupportedFactorError, NotImplementedError):
    """A release path does not implement what was asked of it (a unit, ``delta > 0``, an option):
    a refusal like any other (nothing is released or charged), and a ``NotImplementedError``."""


class RegionNotImplementedError(PrivacyError, NotImplementedError):
    """A truncation region combines constraints that pymc_dp cannot yet carry (two different norm
    balls on one parameter, an interval and a norm ball together, overlapping boxes on an ordered
    vector) or draw (:func:`pymc_dp.plots.plot_truncation`): a refusal like any other (nothing is
    sampled or charged), and a ``NotImplementedError``."""


class EstimateNotImplementedError(PrivacyError, NotImplementedError):
    """:func:`pymc_dp.contamination.estimate_epsilon` (Algorithm 1: an *estimate*, not a DP
    guarantee) does not implement the model, option or domain it was given: a refusal (nothing is
    simulated or estimated), and a ``NotImplementedError``."""


class BudgetExceededError(PrivacyError):
    """The requested privacy budget cannot be met, or would overspend a ledger."""


class EstimateNotBudgetError(BudgetExceededError):
    """An *estimate* of epsilon (``pymc_dp.contamination.estimate_epsilon``: random DP under the
    model, not a DP guarantee) was passed where a privacy budget is expected."""


def refuse_estimate(name: str, value) -> None:
    """Raise :class:`EstimateNotBudgetError` if ``value`` is flagged ``not_a_dp_guarantee`` (an
    ``EpsilonEstimate`` or its ``epsilon``); a plain number passes."""
    if getattr(value, "not_a_dp_guarantee", False) is True:
        raise EstimateNotBudgetError(
            f"{name}={value!r} is an estimate (estimated, model-conditional, not DP: Algorithm 1 on data simulated "
            "from the model), not a differential-privacy guarantee; it cannot be spent or used as a budget. Give a "
            "budget as a plain number.")


class LedgerError(PrivacyError):
    """The budget ledger cannot be opened, written or trusted (unwritable path, corrupted file)."""


class NotConjugateError(PrivacyError):
    """``method="exact"`` was asked for, but the truncated model has no exact conjugate sampler."""


class StuckChainError(PrivacyError):
    """An MCMC chain of a release did not move: its draws are its starting point, not posterior
    draws. Nothing is released; the ledger keeps the charge (the release ran on the data)."""


class CertificateRefutedError(PrivacyError):
    """The independent refutation check (:mod:`pymc_dp.refutation`) measured, with PyMC's own logp of
    the model, a change of one record's log-likelihood above the constant a factor's certificate
    claims: a bug in pymc_dp, found before anything was certified, sampled or charged.

    Attributes
    ----------
    factor : str
        The factor whose claim is refuted.
    point : dict
        The parameter point (public: a point of the truncation region).
    records : tuple of dict
        The two neighbouring records (public: points of the declared domains).
    claimed, measured : float
        The certificate's constant and the measured change (or half oscillation).
    """

    def __init__(self, message: str, *, factor: str = "", point: dict | None = None, records: tuple = (),
                 claimed: float = float("nan"), measured: float = float("nan")):
        super().__init__(message)
        self.factor = factor
        self.point = dict(point or {})
        self.records = tuple(records)
        self.claimed = claimed
        self.measured = measured
