"""Noisy sufficient statistics of an iid censored Normal (``pm.Censored(pm.Normal.dist(mu, sigma), lower, upper)``).

Registers the censored Normal with :func:`~pymc_dp.mechanisms.statistics.family_statistics` (on
PyMC's ``CensoredRV``), so that :func:`pymc_dp.noisy_statistics`, ``make_private(...,
path="noisy_statistics")`` and ``path="auto"`` serve it. The derivations are on
``docs/theory/censored_statistics.md``.

Statistics
----------
``lower`` and ``upper`` are public constants (either may be ``-inf`` / ``inf``: no censoring on
that side). A record is *censored low* (``x = lower``), *censored high* (``x = upper``) or
*interior*. With the interior's ends ``a, b`` (the censoring points, or the domain's ends on an
uncensored side), its centre ``c = (a + b) / 2`` and half-width ``h = (b - a) / 2``, and
``u = x - c``, the released sums are (a side without censoring has no count)::

    c_lo = #{x = lower},   c_hi = #{x = upper},
    S1   = sum_interior u,
    S2   = sum_interior u^2 + (c_lo + c_hi) g h^2        (g = 23/32; only with sigma free)

``n`` is public, so the interior count is ``m = n - c_lo - c_hi``, and the sums of the interior
``x`` and ``x^2`` follow from these by post-processing. Centring (``u`` instead of ``x``) and the
fill ``g h^2`` that a censored record puts into ``S2`` only lower the joint sensitivity.

Sensitivity
-----------
Spans (range over one record): ``c_lo, c_hi``: 1; ``S1``: ``2h`` (``u`` in ``(-h, h)``, 0 for a
censored record); ``S2``: ``h^2`` (``u^2`` in ``[0, h^2)``, ``g h^2`` for a censored record).
Divided by the spans, a record is one of

    censored low  (1, 0, 0, g),   censored high  (0, 1, 0, g),   interior s  (0, 0, s/2, s^2),

``s = u / h`` in ``[-1, 1]`` (open at a censoring point). With weights ``w`` (1 by default),
``K = sup sum_j w_j |change_j| / Delta_j`` is the largest of three cases (:func:`joint_bound`):

* low vs high: ``w_lo + w_hi`` (2);
* censored vs interior: ``w_c + max_s (w_1 s / 2 + w_2 |g - s^2|)``, a concave quadratic on
  ``[0, sqrt g]`` and increasing on ``[sqrt g, 1]``: the maximum is at one of
  ``0, min(w_1 / 4 w_2, sqrt g), sqrt g, 1`` (``1 + max(g + 1/16, 3/2 - g) = 57/32``; ``g = 23/32``
  balances the two, which is why it is chosen);
* interior vs interior: ``max (s - t)(w_1 / 2 + w_2 (s + t))``, at ``s = 1``,
  ``t = clip(-w_1 / 4 w_2, -1, 1)`` (``25/16``, the centred Normal family's ``K``).

So with unit weights ``K = 2`` when both sides are censored, ``57/32`` for one side (``3/2``, ``1``
without ``S2``); basic composition would use ``d = 4``. The suprema are approached, not always
attained (the interior is open at a censoring point). Laplace noise of scale ``Delta_j K / (w_j
epsilon)`` on each statistic (discrete for the counts; the driver,
:class:`~pymc_dp.mechanisms.statistics.NoisyStatistics`, draws it with OpenDP) gives ``epsilon``.

Law of the true statistics given (mu, sigma) -- a CLT approximation
---------------------------------------------------------------------
Unlike the other families (exact laws), this one is **approximate**. With ``alpha = (a - mu) /
sigma``, ``beta = (b - mu) / sigma``, ``p_lo = Phi(alpha)``, ``p_hi = 1 - Phi(beta)`` and
``Z = Phi(beta) - Phi(alpha)`` (0 terms on an uncensored side):

* the counts ``(c_lo, c_hi)`` are multinomial ``(n; p_lo, p_hi)``; they are given the latent
  bivariate Normal of the same mean ``n p`` and covariance ``n (diag p - p p')``;
* given the interior count ``m``, ``S1`` and ``S2`` are sums of ``m`` iid ``(u, u^2)`` with ``x``
  a Normal truncated to ``(a, b)``; they are given the bivariate Normal ``N(m E, m C)`` with the
  truncated Normal's exact mean ``E`` and covariance ``C`` of ``(u, u^2)``.

Truncated moments (``y = (x - mu) / sigma`` on ``(alpha, beta)``, ``r_a = phi(alpha) / Z``,
``r_b = phi(beta) / Z``; integrating ``y^k phi(y)`` by parts)::

    M1 = r_a - r_b,   M2 = 1 + alpha r_a - beta r_b,
    M3 = 2 M1 + alpha^2 r_a - beta^2 r_b,   M4 = 3 M2 + alpha^3 r_a - beta^3 r_b,

``v = M2 - M1^2 = 1 - r_a (r_a - alpha) - r_b (r_b + beta) + 2 r_a r_b``, ``k3 = M3 - 3 M1 M2 + 2 M1^3``, ``k4 = M4 - 4 M1 M3 + 6 M1^2 M2 - 3 M1^4``.
Writing ``u = E_u + sigma w`` (``w = y - M1``): ``E_u = mu - c + sigma M1``, ``Var u = sigma^2 v``,
``E u^2 = E_u^2 + Var u``, ``Cov(u, u^2) = 2 E_u sigma^2 v + sigma^3 k3`` and
``Var u^2 = 4 E_u^2 sigma^2 v + 4 E_u sigma^3 k3 + sigma^4 (k4 - v^2)``. ``r_a``, ``r_b`` and
``log Z`` are computed with ``erfcx`` in the tails (:func:`truncated_moments`).
"""

from __future__ import annotations

import dataclasses
import math
from typing import Callable, Sequence

import numpy as np
import pymc as pm
import pytensor.tensor as pt
from pymc.distributions.censored import CensoredRV
from pytensor.graph.traversal import ancestors
from pytensor.tensor.random.basic import NormalRV
from pytensor.tensor.random.op import RandomVariable

from pymc_dp.domains import Domain, Interval
from pymc_dp.exceptions import DomainError, UnsupportedFactorError
from pymc_dp.mechanisms.statistics import (
    FamilyStatistics,
    Statistic,
    factor_params,
    family_statistics,
    observe_noisy,
)

__all__ = ["CensoredNormalStatistics", "FILL", "joint_bound", "truncated_moments"]

#: a censored record's value in ``S2``, in units of ``h^2``: balances the two worst changes of
#: a censored against an interior record (``g + 1/16 = 3/2 - g``)
FILL = 23.0 / 32.0

_LOG_SQRT_2PI = 0.5 * math.log(2.0 * math.pi)


def joint_bound(has_lower: bool, has_upper: bool, free_scale: bool, weights: Sequence[float]) -> tuple[float, float, int]:
    """``(K, K, d)``: ``K = sup sum_j w_j |change_j| / Delta_j`` over one record's replacement, exactly.

    ``weights`` are the statistics' in their order (``c_lo`` if ``has_lower``, ``c_hi`` if
    ``has_upper``, ``S1``, ``S2`` if ``free_scale``). The supremum is the largest of the three
    cases of the module docstring (approached as an interior record nears a censoring point, so
    the second entry, the value a change attains, is ``K`` up to that limit); ``d`` is the number
    of statistics.
    """
    w = [float(v) for v in weights]
    if len(w) != int(has_lower) + int(has_upper) + 1 + int(free_scale) or not all(math.isfinite(v) and v > 0 for v in w):
        raise ValueError(f"weights={weights!r}: one finite weight > 0 per statistic")
    w_counts = w[: int(has_lower) + int(has_upper)]
    w1 = w[len(w_counts)]
    w2 = w[-1] if free_scale else 0.0
    g = FILL if free_scale else 0.0
    cases = []
    if has_lower and has_upper:
        cases.append(w_counts[0] + w_counts[1])  # low vs high: the counts move, S1 and S2 do not
    # censored vs interior s: w_c + max_s (w1 s / 2 + w2 |g - s^2|)
    points = [0.0, 1.0, math.sqrt(g)]
    if w2 > 0:
        points.append(min(w1 / (4.0 * w2), math.sqrt(g)))
    phi = max(w1 * s / 2.0 + w2 * abs(g - s * s) for s in points)
    cases.extend(wc + phi for wc in w_counts)
    # interior vs interior: (s - t)(w1 / 2 + w2 (s + t)) at s = 1, t = clip(-w1 / 4 w2, -1, 1)
    t = max(-1.0, min(1.0, -w1 / (4.0 * w2))) if w2 > 0 else -1.0
    cases.append((1.0 - t) * (w1 / 2.0 + w2 * (1.0 + t)))
    k = max(cases)
    if not math.isfinite(k):  # fail closed
        raise ValueError(f"the joint bound is not finite ({k}) for weights {weights!r}")
    return k, k, len(w)


_SQRT2 = math.sqrt(2.0)
_SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)


def _log_ncdf(x):
    """``log Phi(x)``, stable in both tails; each branch reads a clamped input (no inf in the other branch's gradient)."""
    lo, hi = pt.minimum(x, -1.0), pt.maximum(x, -1.0)
    return pt.switch(pt.lt(x, -1.0), pt.log(0.5 * pt.erfcx(-lo / _SQRT2)) - 0.5 * lo * lo, pt.log1p(-0.5 * pt.erfc(hi / _SQRT2)))


def _tail(alpha, beta):
    """``(phi(alpha) / Z, phi(beta) / Z, log Z)`` for ``0 <= alpha < beta`` (``beta`` None: infinite),
    ``Z = Phi(beta) - Phi(alpha)`` by ``erfcx`` (no underflow far in the tail)."""
    alpha = pt.maximum(alpha, 0.0)
    d = pt.erfcx(alpha / _SQRT2)
    if beta is not None:
        beta = pt.maximum(beta, alpha)
        shrink = pt.exp(0.5 * (alpha - beta) * (alpha + beta))  # phi(beta) / phi(alpha)
        d = d - pt.erfcx(beta / _SQRT2) * shrink
    d = pt.switch(pt.gt(d, 0.0), d, 1.0)  # only outside the branch's region
    r_a = _SQRT_2_OVER_PI / d
    return r_a, (r_a * shrink if beta is not None else 0.0), -math.log(2.0) - 0.5 * alpha * alpha + pt.log(d)


def _middle(alpha, beta):
    """The same for ``alpha <= 0 <= beta`` (either None: infinite), where ``Z >= 0`` has no tail to lose."""
    a_ = pt.minimum(alpha, 0.0) if alpha is not None else None
    b_ = pt.maximum(beta, 0.0) if beta is not None else None
    z = 0.5 * ((pt.erf(b_ / _SQRT2) if b_ is not None else 1.0) - (pt.erf(a_ / _SQRT2) if a_ is not None else -1.0))
    z = pt.switch(pt.gt(z, 0.0), z, 1.0)
    phi = (lambda v: pt.exp(-0.5 * v * v - _LOG_SQRT_2PI) / z)
    return (phi(a_) if a_ is not None else 0.0), (phi(b_) if b_ is not None else 0.0), pt.log(z)


def _ratios(alpha, beta):
    """``(r_a, r_b, log Z)``: ``phi(alpha) / Z``, ``phi(beta) / Z`` (0 for an infinite end) and ``log Z``."""
    if alpha is None and beta is None:
        return 0.0, 0.0, pt.as_tensor_variable(0.0)
    mid = _middle(alpha, beta)
    if alpha is not None:
        up = _tail(alpha, None if beta is None else beta)
        choose_up = pt.ge(alpha, 0.0)
    if beta is not None:
        mirrored = _tail(-beta, None if alpha is None else -alpha)  # y -> -y: the roles of the ends swap
        down = (mirrored[1], mirrored[0], mirrored[2])
        choose_down = pt.le(beta, 0.0)
    out = []
    for i in range(3):
        v = mid[i]
        if beta is not None:
            v = pt.switch(choose_down, down[i], v)
        if alpha is not None:
            v = pt.switch(choose_up, up[i], v)
        out.append(v)
    return tuple(out)


def truncated_moments(mu, sigma, a: float, b: float, centre: float) -> dict:
    """PyTensor expressions of the censored Normal's probabilities and of the truncated moments of
    ``u = x - centre`` for ``x ~ Normal(mu, sigma)`` truncated to ``(a, b)`` (either end may be
    infinite): ``log_p_lo``, ``log_p_hi``, ``log_z`` (``None`` for an uncensored side's
    probability), ``mean_u``, ``var_u``, ``mean_u2``, ``cov_u_u2``, ``var_u2``.

    ``phi / Z`` is computed by ``erfcx`` in the tails (no ``exp(log phi - log Z)`` round trip), and
    ``Var y`` as ``1 - r_a (r_a - alpha) - r_b (r_b + beta) + 2 r_a r_b`` (no ``M2 - M1^2``
    cancellation); the third and fourth central moments lose digits far in a tail (``alpha`` of
    tens of sds), where a variance is floored at a tiny positive value."""
    # in double precision (a Python float such as 9.0 would otherwise be a float32 constant)
    mu, sigma = pt.cast(pt.as_tensor_variable(mu), "float64"), pt.cast(pt.as_tensor_variable(sigma), "float64")
    alpha = (a - mu) / sigma if math.isfinite(a) else None
    beta = (b - mu) / sigma if math.isfinite(b) else None
    r_a, r_b, log_z = _ratios(alpha, beta)
    log_p_lo = _log_ncdf(alpha) if alpha is not None else None
    log_p_hi = _log_ncdf(-beta) if beta is not None else None
    al = alpha if alpha is not None else 0.0  # an infinite end's terms vanish (r = 0)
    be = beta if beta is not None else 0.0
    m1 = r_a - r_b
    m2 = 1.0 + al * r_a - be * r_b
    m3 = 2.0 * m1 + al**2 * r_a - be**2 * r_b
    m4 = 3.0 * m2 + al**3 * r_a - be**3 * r_b
    v = 1.0 - r_a * (r_a - al) - r_b * (r_b + be) + 2.0 * r_a * r_b
    k3 = m3 - 3.0 * m1 * m2 + 2.0 * m1**3
    k4 = m4 - 4.0 * m1 * m3 + 6.0 * m1**2 * m2 - 3.0 * m1**4
    mean_u = mu - centre + sigma * m1
    var_u = sigma**2 * v
    return {
        "log_p_lo": log_p_lo, "log_p_hi": log_p_hi, "log_z": log_z,
        "mean_u": mean_u, "var_u": var_u, "mean_u2": mean_u**2 + var_u,
        "cov_u_u2": 2.0 * mean_u * var_u + sigma**3 * k3,
        "var_u2": 4.0 * mean_u**2 * var_u + 4.0 * mean_u * sigma**3 * k3 + sigma**4 * (k4 - v**2),
    }


@dataclasses.dataclass(frozen=True)
class CensoredNormalStatistics(FamilyStatistics):
    """:class:`~pymc_dp.mechanisms.statistics.FamilyStatistics` with its own exact ``K`` by cases
    (``joint_bound(weights) -> (K, attained, d)``), read by ``NoisyStatistics``."""

    joint_bound: Callable[[Sequence[float]], tuple[float, float, int]] | None = None
    #: each statistic's per-record values of an array of records (``recommend``'s variance inflation)
    per_record: Callable[[np.ndarray], list] | None = None


def _reads_rv(var) -> bool:
    return any(v.owner is not None and isinstance(v.owner.op, RandomVariable) for v in ancestors([var]))


def _name(node) -> str:
    return next((o.name for o in node.outputs if o.name), "a pm.Censored factor")


@factor_params.register(CensoredRV)
def _censored_params(op, node) -> tuple:
    """``(mu, sigma, lower, upper)`` of ``pm.Censored(pm.Normal.dist(mu, sigma), lower, upper)``."""
    dist, lower, upper = op.dist_params(node)
    if dist.owner is None or not isinstance(dist.owner.op, NormalRV):
        base = type(dist.owner.op).__name__.removesuffix("RV") if dist.owner is not None else "?"
        raise UnsupportedFactorError(
            f"factor {_name(node)!r} censors a {base}: pymc_dp.noisy_statistics supports pm.Censored of a "
            "pm.Normal.dist only. Use pymc_dp.make_private (posterior sampling) for this model."
        )
    mu, sigma = dist.owner.op.dist_params(dist.owner)
    return (mu, sigma, lower, upper)


def _public_bound(factor: str, var, which: str) -> float:
    if _reads_rv(var):
        raise UnsupportedFactorError(f"factor {factor!r}: its censoring bound {which}= must be a public constant, not a random variable.")
    value = np.asarray(var.eval(), float)
    if value.size != 1 or math.isnan(float(value.reshape(-1)[0])):
        raise UnsupportedFactorError(f"factor {factor!r}: {which}= must be one number for every record, got {value!r}.")
    return float(value.reshape(-1)[0])


def _end(factor: str, container: str, bound: float, dom_end: float, which: str, dtype_eps: float) -> float:
    """The interior's end on one side: the censoring point (the domain must end there) or, without
    censoring, the domain's end (finite)."""
    if math.isinf(bound):
        if math.isinf(dom_end):
            raise DomainError(f"{container!r} is declared with an infinite end and {factor!r} is not censored there; "
                              "declare a finite Interval(lo, hi).")
        return float(dom_end)
    if math.isinf(dom_end) or abs(dom_end - bound) > 4 * dtype_eps * max(1.0, abs(bound)):
        raise DomainError(
            f"factor {factor!r} is censored at {which}={bound:g} but {container!r} is declared with the end {dom_end:g}; "
            f"declare the censoring point as the domain's end (Interval({which}=...) at {bound:g}): a censored value equals it."
        )
    return float(dom_end)  # the domain's value (a float64), which the data hold exactly


@family_statistics.register(CensoredRV)
def _censored_normal(op, factor: str, container: str, params: tuple, domain: Domain) -> FamilyStatistics:
    if not isinstance(domain, Interval):
        raise DomainError(f"factor {factor!r} (censored Normal) observes {container!r}, declared {domain}; declare Interval(lo, hi).")
    mu, sigma, lower_var, upper_var = params
    eps = float(np.finfo(lower_var.dtype).eps) if lower_var.dtype.startswith("float") else 0.0
    lower, upper = _public_bound(factor, lower_var, "lower"), _public_bound(factor, upper_var, "upper")
    a = _end(factor, container, lower, domain.lo, "lower", eps)
    b = _end(factor, container, upper, domain.hi, "upper", eps)
    has_lo, has_hi = math.isfinite(lower), math.isfinite(upper)
    free_scale = _reads_rv(sigma)
    centre, half = 0.5 * (a + b), 0.5 * (b - a)
    fill = FILL * half * half if free_scale else 0.0
    stats = []
    if has_lo:
        stats.append(Statistic(f"count({container} = lower)", True, 1.0))
    if has_hi:
        stats.append(Statistic(f"count({container} = upper)", True, 1.0))
    stats.append(Statistic(f"sum({container} - {centre:g}; interior)", False, 2.0 * half))
    if free_scale:
        stats.append(Statistic(f"sum(({container} - {centre:g})^2; interior, censored {FILL:g} h^2)", False, half * half, (0, 0)))

    def summarise(x):
        x = np.asarray(x, float).reshape(-1)
        at_lo = (x == a) if has_lo else np.zeros(x.shape, bool)
        at_hi = (x == b) if has_hi else np.zeros(x.shape, bool)
        u = np.where(at_lo | at_hi, 0.0, x - centre)
        out = [int(at_lo.sum())] * has_lo + [int(at_hi.sum())] * has_hi + [float(u.sum())]
        if free_scale:
            out.append(float(np.square(u).sum()) + fill * int(at_lo.sum() + at_hi.sum()))
        return np.array(out, float)

    def per_record(x):
        x = np.asarray(x, float)
        at_lo = (x <= a) if has_lo else np.zeros(x.shape, bool)
        at_hi = (x >= b) if has_hi else np.zeros(x.shape, bool)
        u = np.where(at_lo | at_hi, 0.0, x - centre)
        out = [at_lo.astype(float)] * has_lo + [at_hi.astype(float)] * has_hi + [u]
        return out + ([u * u + fill * (at_lo | at_hi)] if free_scale else [])

    def add_law(ps, n, z, bs, prefix, noise="laplace"):
        mu_, sigma_ = ps[0], ps[1]
        t = truncated_moments(mu_, sigma_, a if has_lo else -math.inf, b if has_hi else math.inf, centre)
        log_z = t["log_z"]
        k = 0
        counts = []
        if has_lo or has_hi:  # the multinomial counts by a latent Normal of the same moments
            e = pm.Normal(f"{prefix}count_std", 0.0, 1.0, shape=int(has_lo) + int(has_hi))
            log_p = [t["log_p_lo"]] * has_lo + [t["log_p_hi"]] * has_hi
            # first count: n p1 + sqrt(n p1 (1 - p1)) e0, with 1 - p1 = Z (+ p_hi)
            log_q1 = pt.logaddexp(log_z, t["log_p_hi"]) if (has_lo and has_hi) else log_z
            c1 = n * pt.exp(log_p[0]) + math.sqrt(n) * pt.exp(0.5 * (log_p[0] + log_q1)) * e[0]
            counts.append(c1)
            if len(log_p) == 2:  # conditional Cholesky row: -sqrt(n) p2 sqrt(p1 / q1) e0 + sqrt(n p2 Z / q1) e1
                c2 = (n * pt.exp(log_p[1])
                      - math.sqrt(n) * pt.exp(log_p[1] + 0.5 * (log_p[0] - log_q1)) * e[0]
                      + math.sqrt(n) * pt.exp(0.5 * (log_p[1] + log_z - log_q1)) * e[1])
                counts.append(c2)
            for c in counts:
                observe_noisy(f"{prefix}noisy_count_{k}", c, bs[k], z[k], noise)
                k += 1
        m = n - sum(counts) if counts else pt.as_tensor_variable(float(n))
        root_m = pt.sqrt(pt.maximum(m, 0.0))
        l11 = pt.sqrt(pt.maximum(t["var_u"], 1e-12 * half**2))
        es = pm.Normal(f"{prefix}interior_std", 0.0, 1.0, shape=1 + int(free_scale))
        s1 = m * t["mean_u"] + root_m * l11 * es[0]
        observe_noisy(f"{prefix}noisy_sum", s1, bs[k], z[k], noise)
        law = ("CLT approximation (not exact): " + ("the censored counts by a latent Normal with the multinomial's "
               "mean and covariance; " if counts else "") + "given the interior count m, ")
        if not free_scale:
            return law + "sum u ~ Normal(m E[u], sqrt(m Var u)), u = x - centre of the truncated Normal (latent)"
        l21 = t["cov_u_u2"] / l11
        l22 = pt.sqrt(pt.maximum(t["var_u2"] - l21**2, 1e-12 * half**4))
        s2 = m * t["mean_u2"] + root_m * (l21 * es[0] + l22 * es[1]) + (n - m) * fill
        observe_noisy(f"{prefix}noisy_sum_sq", s2, bs[k + 1], z[k + 1], noise)
        return law + ("(sum u, sum u^2) ~ bivariate Normal(m E, m C) with the truncated Normal's exact mean and "
                      "covariance of (u, u^2), u = x - centre, plus the censored records' fill (latent)")

    return CensoredNormalStatistics(
        factor, container, tuple(stats), summarise, add_law,
        joint_bound=lambda weights: joint_bound(has_lo, has_hi, free_scale, weights), per_record=per_record,
    )
