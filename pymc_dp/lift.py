"""Lift per-factor Lipschitz constants through the model's DAG to the loss of one draw.

AAAI 2016 Lemmas 2-3, JMLR 2017 Lemma 24 (docs/theory/lift.md). Factor ``j`` reads the private
containers ``reads_j`` and changes by at most ``L_j`` when the record it reads changes.

* ``record`` unit (one row of every private container changes): ``Delta = sum_j L_j``;
* ``attribute`` unit (one container's value in one row changes): ``Delta = max_k sum_{j reads k}
  L_j``. For a discrete Bayes net whose nodes are containers, the factors reading ``k`` are ``k``
  and its children: JMLR Lemma 24's ``1 + outdeg(k)``.
* user unit (:class:`~pymc_dp.Users`, at most ``m`` rows per user): ``Delta = m sum_j L_j``,
  since each of the user's rows moves the log-likelihood by at most the record ``Delta``.

One posterior draw is then ``2 Delta``-DP.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

from pymc_dp.units import UNITS, Unit, as_unit

__all__ = ["UNITS", "lift", "split_budget", "epsilon_per_draw_from_Delta", "rows_per_unit", "base_unit"]


def rows_per_unit(unit: Any) -> int:
    """``m``: how many rows one unit can change (1 for record and attribute units)."""
    return as_unit(unit).max_rows


def base_unit(unit: Any) -> Unit:
    """The unit a user unit reduces to: a user is ``m`` records."""
    return as_unit(unit).base


def lift(lipschitz: Mapping[str, float], reads: Mapping[str, Sequence[str]], unit: Any) -> float:
    """Per-draw ``Delta`` from per-factor constants (only factors that read private data)."""
    return as_unit(unit).lift(lipschitz, reads)


def split_budget(Delta: float, reads: Mapping[str, Sequence[str]], unit: Any) -> dict[str, float]:
    """Split the per-draw ``Delta`` across factors so that :func:`lift` gives back ``Delta``.

    Record unit: an equal share ``Delta / J``; user unit: ``Delta / (m J)``. Attribute unit: factor j gets
    ``Delta / max_{k in reads_j} n_k`` where ``n_k`` counts the factors reading container k;
    then ``sum_{j reads k} L_j <= Delta`` for every k, with equality at the busiest container.
    """
    if not any(reads[j] for j in reads):
        return {}
    return as_unit(unit).equal_split(Delta, reads)


def epsilon_per_draw_from_Delta(Delta: float) -> float:
    """One exact posterior draw is ``2 Delta``-DP (the factor 2 is necessary)."""
    return 2.0 * Delta
