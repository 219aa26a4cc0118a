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

from pymc_dp.units import UNITS, Users

__all__ = ["UNITS", "lift", "split_budget", "epsilon_per_draw_from_Delta", "rows_per_unit", "base_unit"]


def rows_per_unit(unit: Any) -> int:
    """``m``: how many rows one unit can change (1 for record and attribute units)."""
    return unit.max_rows if isinstance(unit, Users) else 1


def base_unit(unit: Any) -> str:
    """The unit a user unit reduces to: a user is ``m`` records."""
    return "record" if isinstance(unit, Users) else unit


def lift(lipschitz: Mapping[str, float], reads: Mapping[str, Sequence[str]], unit: Any) -> float:
    """Per-draw ``Delta`` from per-factor constants (only factors that read private data)."""
    if isinstance(unit, Users):
        return unit.max_rows * lift(lipschitz, reads, "record")
    if unit == "record":
        return float(sum(lipschitz[j] for j in lipschitz if reads[j]))
    if unit == "attribute":
        containers = sorted({k for j in lipschitz for k in reads[j]})
        return float(
            max((sum(lipschitz[j] for j in lipschitz if k in reads[j]) for k in containers), default=0.0)
        )
    raise ValueError(f"unknown unit {unit!r}")


def split_budget(Delta: float, reads: Mapping[str, Sequence[str]], unit: Any) -> dict[str, float]:
    """Split the per-draw ``Delta`` across factors so that :func:`lift` gives back ``Delta``.

    Record unit: an equal share ``Delta / J``; user unit: ``Delta / (m J)``. Attribute unit: factor j gets
    ``Delta / max_{k in reads_j} n_k`` where ``n_k`` counts the factors reading container k;
    then ``sum_{j reads k} L_j <= Delta`` for every k, with equality at the busiest container.
    """
    if isinstance(unit, Users):
        return split_budget(Delta / unit.max_rows, reads, "record")
    private = [j for j in reads if reads[j]]
    if not private:
        return {}
    if unit == "record":
        return {j: Delta / len(private) for j in private}
    if unit == "attribute":
        count = {}
        for j in private:
            for k in reads[j]:
                count[k] = count.get(k, 0) + 1
        return {j: Delta / max(count[k] for k in reads[j]) for j in private}
    raise ValueError(f"unknown unit {unit!r}")


def epsilon_per_draw_from_Delta(Delta: float) -> float:
    """One exact posterior draw is ``2 Delta``-DP (the factor 2 is necessary)."""
    return 2.0 * Delta
