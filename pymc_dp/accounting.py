"""Privacy accounting: composition of N posterior draws.

Kept ignorant of mechanisms (as Opacus keeps its accountant): it sees pure-DP events and
nothing else. Each posterior draw of a model whose per-draw loss is ``Delta`` is a
``2 Delta``-DP event (ALT 2014 Thm 2, JMLR 2017 Thm 8); N draws compose.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["PureDPEvent", "basic_composition", "per_draw_epsilon"]


@dataclass(frozen=True)
class PureDPEvent:
    """``draws`` independent releases of an ``epsilon_per_draw``-DP mechanism."""

    epsilon_per_draw: float
    draws: int

    def basic(self) -> float:
        return basic_composition(self.epsilon_per_draw, self.draws)


def basic_composition(epsilon_per_draw: float, draws: int) -> float:
    """Basic composition: N releases of an eps0-DP mechanism are (N eps0, 0)-DP."""
    return float(epsilon_per_draw) * int(draws)


def per_draw_epsilon(epsilon: float, delta: float, draws: int) -> float:
    """The largest per-draw eps0 whose N-fold composition fits ``(epsilon, delta)``.

    Basic composition (valid for every delta). The exact optimal composition of
    Kairouz-Oh-Viswanath for ``delta > 0`` is not implemented yet (issue "Exact samplers, optimal
    composition..."), so a positive delta is accepted but not used to stretch the budget.
    """
    return float(epsilon) / int(draws)
