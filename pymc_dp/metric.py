"""Metric DP for continuous records (ALT 2014 Def. 2): constants ``sup |d l / dx|`` of location families.

docs/theory/metric_dp.md has the derivation. Under a pseudo-metric ``rho`` on datasets a release
is ``eps``-metric-DP when ``P(B|x) <= exp(eps rho(x, y)) P(B|y)`` for all datasets and events.
Here ``rho(x, y) = sum_i |x_i - y_i|`` (ALT Lemma 1: the per-record metric ``|x - x'|`` summed).

If the per-record log-likelihood is L-Lipschitz in the record, ``|l_theta(x) - l_theta(x')| <=
L |x - x'|`` for every theta of the (truncated) prior's support, then one posterior draw is
``2L``-metric-DP (ALT Thm 2(i), JMLR Thm 8(1) with ``rho``): the likelihood ratio gives one ``L``
and the marginal likelihood ratio ``phi(y)/phi(x) <= e^{L rho}`` the other. N draws compose
linearly: ``2 N L`` per unit of ``rho``. For a differentiable ``l_theta`` on an interval the
smallest such L is ``sup_{theta, x} |d l_theta(x) / dx|`` (mean value theorem; and no smaller L
holds, letting ``x' -> x``).
"""

from __future__ import annotations

import math

from pymc_dp.exceptions import PathNotImplementedError

__all__ = ["location_constant", "metric_guarantee", "metric_statement", "FAMILIES"]

#: location families with a closed-form constant
FAMILIES = ("Normal", "Laplace", "Logistic")


def location_constant(family: str, scale: float, theta: tuple[float, float], x: tuple[float, float]) -> float:
    """``sup |d l_mu(x) / dx|`` over ``mu`` in ``theta = [lo, hi]`` and records ``x`` in ``[a, b]``.

    * Normal(mu, sigma): ``l = -(x - mu)^2 / (2 sigma^2) + c``, ``dl/dx = -(x - mu)/sigma^2``;
      ``|x - mu|`` is convex in ``(x, mu)``, so its maximum over the box is at a corner:
      ``max(b - lo, hi - a) / sigma^2`` (infinite if either range is unbounded).
    * Laplace(mu, b): ``l = -|x - mu| / b + c``; ``|l(x) - l(x')| <= |x - x'| / b`` by the
      triangle inequality, attained for ``x, x'`` on one side of ``mu``: ``1 / b`` for every mu
      and domain (no truncation needed).
    * Logistic(mu, s): ``dl/dx = -tanh((x - mu)/(2s)) / s``, so the constant is
      ``tanh(max(b - lo, hi - a) / (2s)) / s`` (``<= 1/s``; ``tanh`` of the corner distance).
    """
    s = float(scale)
    if not (math.isfinite(s) and s > 0):
        raise ValueError(f"scale={scale!r} must be finite and > 0")
    lo, hi = (float(t) for t in theta)
    a, b = (float(t) for t in x)
    if lo > hi or a > b:
        raise ValueError("empty parameter or record range")
    reach = max(b - lo, hi - a)  # the largest |x - mu| over the box (a corner), >= 0 if the boxes meet
    reach = max(reach, 0.0)
    if family == "Normal":
        return reach / s**2
    if family == "Laplace":
        return 1.0 / s
    if family == "Logistic":
        return math.tanh(reach / (2 * s)) / s if math.isfinite(reach) else 1.0 / s
    raise PathNotImplementedError(f"family={family!r}: no metric-DP constant for this likelihood; use one of the location "
                                  f"families {list(FAMILIES)}, or pymc_dp.make_private.")


def metric_guarantee(constant: float, draws: int) -> dict:
    """``eps`` per unit of ``rho``: ``2 L`` per draw (ALT Thm 2(i)), ``2 N L`` for N draws.

    Proof of composition: each draw satisfies ``P(B|x) <= e^{2L rho} P(B|y)`` for every event of
    its output given the earlier ones, so the joint densities' ratio is at most
    ``e^{2 N L rho}`` (the same argument as basic composition, with ``eps rho`` for ``eps``)."""
    L, n = float(constant), int(draws)
    return {"constant": L, "epsilon_per_draw": 2 * L, "epsilon": 2 * L * n, "draws": n}


def metric_statement(epsilon: float, metric: str = "abs") -> str:
    """The guarantee in its metric form, for reports."""
    if metric != "abs":
        raise PathNotImplementedError(f"metric={metric!r} is not implemented: use metric='abs' (|x - x'| per record, summed "
                                      "over records).")
    return (f"metric DP: P(B|x) <= exp({epsilon:.6g} * rho(x, x')) P(B|x') for all datasets x, x' and events B, "
            "rho(x, x') = sum_i |x_i - x'_i|")
