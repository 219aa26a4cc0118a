"""Privacy accounting: the (epsilon, delta) of N posterior draws.

Kept ignorant of mechanisms (as Opacus keeps its accountant): it sees pure-DP events and
nothing else. Each exact posterior draw of a model whose per-draw loss is ``Delta`` is a
``2 Delta``-DP event (ALT 2014 Thm 2, JMLR 2017 Thm 8); a release of N draws composes N of them.

Two valid bounds are computed for every release, and the smaller one is used
(docs/theory/guarantee.md#composition):

* **basic** composition: ``(N eps0, 0)``-DP;
* the **exact optimal** composition of N pure ``eps0``-DP mechanisms (Kairouz, Oh & Viswanath
  2015; Murtagh & Vadhan 2016): for every ``delta > 0`` the smallest ``eps`` with
  ``delta(eps) <= delta``, where ``delta(eps)`` is the hockey-stick divergence of N-fold
  randomized response (:func:`optimal_delta`). Randomized response with flip probability
  ``1 / (1 + e^eps0)`` dominates every ``eps0``-DP mechanism, so this curve is valid for all of
  them and is attained by one: nothing tighter holds for pure-DP draws in general.

Advanced (Dwork-Rothblum-Vadhan) composition and the zCDP route are both looser than the
optimal curve and can be worse than basic for ``eps0 >= 0.5`` and small N; they are not used.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy import optimize
from scipy.special import gammaln, logsumexp

__all__ = [
    "PureDPEvent",
    "Composition",
    "basic_composition",
    "optimal_delta",
    "optimal_epsilon",
    "compose",
    "per_draw_epsilon",
]

#: relative margin by which reported epsilons are rounded up and per-draw budgets rounded down,
#: so that the float64 error of the log-space sums (about 1e-14 relative) never makes a
#: reported guarantee smaller than the truth
_ROUND = 1e-12


@dataclass(frozen=True)
class PureDPEvent:
    """``draws`` independent releases of an ``epsilon_per_draw``-DP mechanism."""

    epsilon_per_draw: float
    draws: int

    def basic(self) -> float:
        """Basic composition: ``draws * epsilon_per_draw``."""
        return basic_composition(self.epsilon_per_draw, self.draws)

    def compose(self, delta: float = 0.0) -> "Composition":
        """The guarantee of the whole release at ``delta``: see :func:`compose`."""
        return compose(self.epsilon_per_draw, self.draws, delta)


@dataclass(frozen=True)
class Composition:
    """The ``(epsilon, delta)`` guarantee of N pure-DP draws, with every bound computed.

    Attributes
    ----------
    epsilon, delta : float
        The guarantee: ``epsilon = min(epsilon_basic, epsilon_optimal)``.
    epsilon_per_draw : float
        ``eps0`` of one draw.
    draws : int
        N.
    epsilon_basic : float
        ``N eps0`` (valid for every delta, also 0).
    epsilon_optimal : float or None
        The exact optimal composition at ``delta`` (None when ``delta == 0``, where it equals
        basic).
    method : {"basic", "optimal"}
        Which bound gave ``epsilon``.
    """

    epsilon: float
    delta: float
    epsilon_per_draw: float
    draws: int
    epsilon_basic: float
    epsilon_optimal: float | None
    method: str

    def to_dict(self) -> dict:
        return {
            "epsilon": self.epsilon,
            "delta": self.delta,
            "epsilon_per_draw": self.epsilon_per_draw,
            "draws": self.draws,
            "epsilon_basic": self.epsilon_basic,
            "epsilon_optimal": self.epsilon_optimal,
            "method": self.method,
        }


def basic_composition(epsilon_per_draw: float, draws: int) -> float:
    """Basic composition: N releases of an eps0-DP mechanism are (N eps0, 0)-DP."""
    return float(epsilon_per_draw) * int(draws)


def _check(epsilon_per_draw: float, draws: int) -> tuple[float, int]:
    eps0, n = float(epsilon_per_draw), int(draws)
    if not (math.isfinite(eps0) and eps0 >= 0.0):
        raise ValueError(f"epsilon_per_draw={epsilon_per_draw!r} must be finite and >= 0")
    if n < 1:
        raise ValueError(f"draws={draws!r} must be >= 1")
    return eps0, n


def _log_binom(n: int) -> np.ndarray:
    flips = np.arange(n + 1)
    return gammaln(n + 1.0) - gammaln(flips + 1.0) - gammaln(n - flips + 1.0)


def optimal_delta(epsilon_per_draw: float, draws: int, epsilon: float) -> float:
    """The smallest delta such that N pure eps0-DP draws are (epsilon, delta)-DP.

    Derivation. An eps0-DP mechanism is dominated by randomized response on a pair of
    outputs (Kairouz-Oh-Viswanath 2015, Thm 2.5), and composition preserves domination, so the
    N-fold composition is dominated by N-fold randomized response. There, ``l`` flips out of N
    happen with probability ``C(N, l) e^{(N-l) eps0} / (1 + e^eps0)^N`` and give privacy loss
    ``(N - 2l) eps0``, so its hockey-stick divergence at ``e^epsilon`` is

    .. math:: \\delta(\\varepsilon) = (1+e^{\\varepsilon_0})^{-N} \\sum_{l=0}^{N} \\binom{N}{l}
              \\max\\bigl(0,\\; e^{(N-l)\\varepsilon_0} - e^{\\varepsilon + l\\varepsilon_0}\\bigr).

    It is evaluated in log space (terms with loss ``(N - 2l) eps0 > epsilon`` only), so N in
    the tens of thousands and eps0 of 10 are fine.
    """
    eps0, n = _check(epsilon_per_draw, draws)
    return float(min(1.0, math.exp(_log_optimal_delta(eps0, n, float(epsilon)))))


def _log_optimal_delta(eps0: float, n: int, epsilon: float) -> float:
    """``ln optimal_delta`` without leaving log space (-inf when no loss exceeds epsilon)."""
    flips = np.arange(n + 1)  # l in the formula: how many of the N responses were flipped
    loss = (n - 2 * flips) * eps0
    keep = loss > epsilon
    if not np.any(keep):
        return -math.inf
    # ln of C(N,l) e^{(N-l) eps0} (1 - e^{epsilon - loss})
    log_terms = _log_binom(n)[keep] + (n - flips[keep]) * eps0 + np.log(-np.expm1(epsilon - loss[keep]))
    return float(logsumexp(log_terms) - n * np.logaddexp(0.0, eps0))


def optimal_epsilon(epsilon_per_draw: float, draws: int, delta: float) -> float:
    """The smallest epsilon such that N pure eps0-DP draws are (epsilon, delta)-DP.

    Inverts :func:`optimal_delta` (continuous and decreasing in epsilon) by Brent's method on
    ``ln delta(epsilon) - ln delta``, then steps up until ``delta(epsilon) <= delta`` holds as
    computed, and rounds up: the result is never below the truth. ``delta == 0`` gives
    ``N eps0`` (basic composition is then exact).
    """
    eps0, n = _check(epsilon_per_draw, draws)
    delta = float(delta)
    if not 0.0 <= delta < 1.0:
        raise ValueError(f"delta={delta!r} must be in [0, 1)")
    if delta == 0.0 or eps0 == 0.0:
        return n * eps0
    if optimal_delta(eps0, n, 0.0) <= delta:
        return 0.0
    hi = n * eps0
    target = math.log(delta)

    def gap(e):
        return _log_optimal_delta(eps0, n, e) - target

    # delta(e) > 0 for every e < N eps0 (the l = 0 term), so the log is finite below hi
    top = hi * (1.0 - 1e-12)
    if gap(top) >= 0.0:
        return hi  # the optimal curve only meets delta at N eps0: basic composition
    eps = optimize.brentq(gap, 0.0, top, xtol=1e-15, rtol=4 * np.finfo(float).eps)
    eps = min(hi, eps * (1.0 + _ROUND))
    while optimal_delta(eps0, n, eps) > delta:  # pragma: no cover - float safety net
        eps = min(hi, eps * (1.0 + 1e-9))
    return eps


def compose(epsilon_per_draw: float, draws: int, delta: float = 0.0) -> Composition:
    """The guarantee of N draws: the minimum of the valid bounds (basic, optimal)."""
    eps0, n = _check(epsilon_per_draw, draws)
    basic = basic_composition(eps0, n)
    if delta == 0.0:
        return Composition(basic, 0.0, eps0, n, basic, None, "basic")
    optimal = optimal_epsilon(eps0, n, delta)
    if optimal < basic:
        return Composition(optimal, float(delta), eps0, n, basic, optimal, "optimal")
    return Composition(basic, float(delta), eps0, n, basic, optimal, "basic")


def per_draw_epsilon(epsilon: float, delta: float, draws: int) -> float:
    """The largest per-draw eps0 whose N-fold composition fits ``(epsilon, delta)``.

    The inverse of :func:`compose`. Basic composition gives ``epsilon / N``. With ``delta > 0``
    the optimal composition allows more: ``compose(eps0).epsilon <= epsilon`` holds exactly when
    ``optimal_delta(eps0, N, epsilon) <= delta``, and ``optimal_delta`` increases with eps0, so
    one root-find in eps0 suffices. The result is rounded down and checked, so that
    ``compose(per_draw_epsilon(e, d, N), N, d).epsilon <= e`` always holds.
    """
    epsilon, n = float(epsilon), int(draws)
    if not (math.isfinite(epsilon) and epsilon > 0):
        raise ValueError(f"epsilon={epsilon!r} must be finite and > 0")
    basic = epsilon / n
    if delta == 0.0:
        return basic
    target = math.log(delta)

    def gap(e0):
        return _log_optimal_delta(e0, n, epsilon) - target

    # delta(eps0; epsilon) is 0 at eps0 = epsilon / N (every loss is <= epsilon) and positive above
    lo = basic * (1.0 + 1e-12)
    if gap(lo) >= 0.0:
        return basic
    hi = 2.0 * lo
    while gap(hi) < 0.0:
        lo, hi = hi, 2.0 * hi
    eps0 = optimize.brentq(gap, lo, hi, xtol=1e-15, rtol=4 * np.finfo(float).eps)
    eps0 *= 1.0 - _ROUND
    while compose(eps0, n, delta).epsilon > epsilon:  # pragma: no cover - float safety net
        eps0 *= 1.0 - 1e-9
    return max(basic, eps0)
