"""One decorator, every path: ``make_private(..., path=...)`` for the noisy-statistics and automatic paths.

:func:`pymc_dp.make_private` (and :func:`pymc_dp.private`) releases by posterior sampling
(``path="posterior"``, the default) or by localize-then-sample (``path="localized"``,
:mod:`pymc_dp.mechanisms.localized`). This module registers two more paths:

* ``path="noisy_statistics"``: noisy sufficient statistics released once and the noise-aware
  posterior given them (:func:`pymc_dp.noisy_statistics`); its draws are post-processing, so
  ``sample(draws)`` gives any number at no further cost (``draws=`` of ``make_private`` is not a
  budget there).
* ``path="auto"``: the path chosen from **public facts only** (the model's structure, the declared
  domains, the number of rows, ``epsilon`` and the prior predictive: what :func:`pymc_dp.recommend`
  reads), by the rule of :func:`choose_path`. The object returned is the chosen path's own
  (one ``sample()``, one certificate or noise law, one report, one ledger entry per release), with
  :class:`PathChoice` attached as ``path_choice``; every release record and report states the
  chosen path and why.

``"auto"`` is not the default: issue 33 makes it the default only once the gallery-wide utility
table (``benchmarks/gallery_utility.py``) shows it is never worse than posterior sampling.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Mapping, Sequence

from pymc_dp.core import make_private, register_path
from pymc_dp.domains import Domain
from pymc_dp.exceptions import CertificateRefutedError, PrivacyError
from pymc_dp.ledger import Ledger
from pymc_dp.mechanisms.base import build_model
from pymc_dp.mechanisms.paths import noisy_statistics, recommend
from pymc_dp.private_data import PrivateData
from pymc_dp.units import Users

__all__ = ["LOCALIZED_FROM_EPSILON", "PathChoice", "choose_path"]

#: ``path="auto"`` localizes (``path="localized"``) from this total epsilon on. Below it the first
#: stage's share (a quarter) locates the posterior too coarsely: benchmarks/results/localized.md
#: measured localize-then-sample *worse* than posterior sampling at epsilon = 1 on the linear and
#: Poisson models (median distance 29.8 vs 14.6 and 22.9 vs 13.0 sds), and better on the largest
#: distance in 5 of the 6 cells at epsilon 3 and 10.
LOCALIZED_FROM_EPSILON = 3.0


@dataclasses.dataclass(frozen=True)
class PathChoice:
    """Which release path ``path="auto"`` chose, and why: public facts only.

    Attributes
    ----------
    path : str
        The chosen path (``"noisy_statistics"``, ``"localized"`` or ``"posterior"``).
    reason : str
        Why, in words a user (and a data-protection officer) can check.
    considered : tuple of (str, str)
        The paths passed over before it, each with the reason.
    """

    path: str
    reason: str
    considered: tuple[tuple[str, str], ...] = ()

    def to_dict(self) -> dict[str, Any]:
        """The JSON form written into the release record (``release["path"]``)."""
        return {"chosen": self.path, "reason": self.reason, "considered": [list(c) for c in self.considered]}

    def __str__(self) -> str:
        lines = [f"path {self.path!r}: {self.reason}"]
        lines += [f"  not {p!r}: {why}" for p, why in self.considered]
        return "\n".join(lines)


def _refuse_posterior_options(path: str, bounds, split) -> None:
    if bounds is not None or split != "optimised":
        raise PrivacyError(
            f"path={path!r} chooses its own release; bounds= and split= belong to path='posterior' "
            "(pass path='posterior' with them, or drop them)."
        )


def _noisy_statistics_path(model, *, epsilon, draws, data, delta, unit, bounds, public, split, ledger):
    """``make_private(..., path="noisy_statistics")``: :func:`pymc_dp.noisy_statistics`."""
    _refuse_posterior_options("noisy_statistics", bounds, split)
    if epsilon is None:
        raise PrivacyError("path='noisy_statistics' needs epsilon: the statistics are released once at that budget.")
    return noisy_statistics(model, epsilon=epsilon, delta=delta, data=data, unit=unit, public=public, ledger=ledger)


def choose_path(
    model,
    *,
    epsilon: float,
    draws: int,
    data: Mapping[str, Domain],
    delta: float = 0.0,
    unit: str | Users = "record",
    public: Sequence[str] = (),
    ledger: Ledger | None | str = "default",
):
    """Build the release of ``model`` on the path that public facts say serves it best.

    The rule, in order (each step reads the model, the domains, the row counts, ``epsilon`` and
    the prior predictive, never the private values; nothing is charged until ``sample()``):

    1. :func:`pymc_dp.recommend` says noisy sufficient statistics apply (iid observations of a
       supported family, a discrete network with Beta / Dirichlet priors, a Normal or logistic
       regression on private covariates): ``"noisy_statistics"``, built with the recommended
       options. Those statistics are released once and the posterior given them is noise-aware.
    2. Otherwise, with total ``epsilon >= LOCALIZED_FROM_EPSILON``: ``"localized"`` (a quarter of
       epsilon locates the posterior, the rest samples a box around it), unless it refuses the
       model (its reason is kept).
    3. Otherwise ``"posterior"``: posterior sampling on one region chosen from public facts.

    A refuted certificate (:class:`~pymc_dp.exceptions.CertificateRefutedError`) is never passed
    over: it is raised.

    Returns
    -------
    PrivateModel or Mechanism
        The chosen path's object, with :class:`PathChoice` as its ``path_choice``.
    """
    # the private values are checked first: a refusal about them goes to the user, never into a
    # reason that the release record publishes
    PrivateData.from_model(build_model(model), data, unit)
    considered: list[tuple[str, str]] = []
    rec = recommend(model, epsilon=epsilon, data=data, unit=unit, public=public, delta=delta)
    if rec.path == "noisy_statistics":
        built = noisy_statistics(model, epsilon=epsilon, delta=delta, data=data, unit=unit, public=public,
                                 ledger=ledger, **rec.options)
        reason = f"{rec.reason}; its draws are post-processing: sample(draws) gives any number at no further cost"
        return _attach(built, PathChoice("noisy_statistics", reason, ()))
    considered.append(("noisy_statistics", rec.reason))
    keywords = dict(epsilon=epsilon, draws=draws, data=data, delta=delta, unit=unit, public=public, ledger=ledger)
    if epsilon >= LOCALIZED_FROM_EPSILON:
        try:
            built = make_private(model, path="localized", **keywords)
        except CertificateRefutedError:
            raise
        except (PrivacyError, NotImplementedError) as err:
            considered.append(("localized", f"refused the model: {err}"))
        else:
            reason = (f"total epsilon {epsilon:g} >= {LOCALIZED_FROM_EPSILON:g}: a quarter of it locates the posterior "
                      "privately and the draws come from a box around that place, which measured closer to the "
                      "non-private posterior than one region around the prior (benchmarks/results/localized.md)")
            return _attach(built, PathChoice("localized", reason, tuple(considered)))
    else:
        considered.append(("localized", f"total epsilon {epsilon:g} < {LOCALIZED_FROM_EPSILON:g}: a quarter of it "
                                        "locates the posterior too coarsely (measured worse than posterior sampling, "
                                        "benchmarks/results/localized.md)"))
    built = make_private(model, path="posterior", **keywords)
    return _attach(built, PathChoice("posterior", "posterior sampling on one region chosen from public facts: "
                                     "the paths above do not serve this model", tuple(considered)))


def _attach(built, choice: PathChoice):
    built.path_choice = choice
    return built


def _auto_path(model, *, epsilon, draws, data, delta, unit, bounds, public, split, ledger):
    """``make_private(..., path="auto")``: :func:`choose_path`."""
    _refuse_posterior_options("auto", bounds, split)
    if epsilon is None:
        raise PrivacyError("path='auto' needs epsilon: the choice among paths reads the budget.")
    return choose_path(model, epsilon=epsilon, draws=draws, data=data, delta=delta, unit=unit, public=public,
                       ledger=ledger)


register_path("noisy_statistics", _noisy_statistics_path)
register_path("auto", _auto_path)
