"""Exact rules for discrete likelihoods: Bernoulli, Binomial, Categorical, Poisson, Geometric."""

from __future__ import annotations

import numpy as np
from pytensor.tensor.random.basic import (
    BernoulliRV,
    BinomialRV,
    CategoricalRV,
    GeometricRV,
    PoissonRV,
)

from pymc_dp.exceptions import DomainError, UnsupportedFactorError
from pymc_dp.rules.base import Bounds, integer_domain, register_rule


def _point(bounds: Bounds, family: str, name: str):
    """The value of a parameter that may not read private data (not in ``range_params``)."""
    if not bounds.is_point:
        raise UnsupportedFactorError(
            f"the {family} parameter {name!r} cannot read private data"
        )
    return bounds.lo


def _logit_bounds(p: Bounds, xp):
    """Bounds of ``logit(p)``; computed from ``p`` unless already on the logit scale."""
    if p.space == "logit":
        return p.lo, p.hi
    lo = xp.log(p.lo) - xp.log1p(-p.lo)
    if p.is_point:
        return lo, lo
    return lo, xp.log(p.hi) - xp.log1p(-p.hi)


@register_rule(BernoulliRV, "Bernoulli", ("p",), range_params=("p",))
def bernoulli_range(op, domain, params, xp):
    """Bernoulli(p), x in {0, 1}.

    Derivation. With ``eta = logit p``: ``ln p(1) = ln sigmoid(eta)`` (increasing in eta) and
    ``ln p(0) = ln sigmoid(-eta)`` (decreasing). Over ``eta in [eta_lo, eta_hi]`` and both
    values of x, the largest log-mass is ``max(ln s(eta_hi), ln s(-eta_lo))`` and the smallest
    ``min(ln s(eta_lo), ln s(-eta_hi))``. For a point ``eta`` this gives ``L = |logit p|``
    (DESIGN.md section 4); for a logistic regression ``eta in [b - R||w||, b + R||w||]`` it gives
    ``L = |b| + R||w||``. Computed with log-sigmoid, not ``log(1 - sigmoid)``, which loses
    precision near ``|eta| ~ 30``.
    """
    lo_x, hi_x = integer_domain(domain, "Bernoulli")
    if hi_x > 1:
        raise DomainError(f"Bernoulli data are 0/1 but the declared domain is {domain}")
    (p,) = params
    eta_lo, eta_hi = _logit_bounds(p, xp)
    his, los = [], []
    if lo_x <= 1 <= hi_x:
        his.append(xp.log_sigmoid(eta_hi))
        los.append(xp.log_sigmoid(eta_lo))
    if lo_x <= 0 <= hi_x:
        his.append(xp.log_sigmoid(-eta_lo))
        los.append(xp.log_sigmoid(-eta_hi))
    hi, lo = his[0], los[0]
    for h, l_ in zip(his[1:], los[1:]):
        hi, lo = xp.maximum(hi, h), xp.minimum(lo, l_)
    return lo, hi


def _binomial_logpmf(x, n, p, xp):
    # a Python-float x would become a float32 constant under PT (gammaln(11.0) is float32)
    x = xp.asarray(x)
    return (
        xp.gammaln(n + 1.0)
        - xp.gammaln(x + 1.0)
        - xp.gammaln(n - x + 1.0)
        + x * xp.log(p)
        + (n - x) * xp.log1p(-p)
    )


@register_rule(BinomialRV, "Binomial", ("n", "p"), range_params=("p",))
def binomial_range(op, domain, params, xp):
    """Binomial(n, p), x in {lo..hi} inside {0..n} (a domain above n is refused).

    Derivation. The pmf is log-concave in x, so over an integer interval its largest value is at
    the mode ``floor((n+1)p)`` clipped to the interval and its smallest at an end. With
    ``{lo..hi} = {0..n}`` this is DESIGN.md's ``ln Bin(k; m, p) - m ln min(p, 1-p)``; its minimum,
    ``ln C(m, floor(m/2))`` at ``p = 1/2``, is why a whole Binomial count cannot be one record
    of a small budget. For ``p`` in an interval (``theta[y]``), ``ln pmf(x; p)`` is concave in p:
    the smallest value over the box is at a vertex, and the largest is
    ``max_x ln pmf(x; clip(x/n, p_lo, p_hi))``, enumerated over the domain.
    """
    lo_x, hi_x = integer_domain(domain, "Binomial")
    n, p = params
    if not n.is_point:
        raise UnsupportedFactorError("the Binomial number of trials n cannot read private data")
    n = n.lo
    n_known = np.asarray(n, dtype=float) if xp.name == "numpy" else _constant_value(n)
    if n_known is not None and hi_x > np.max(n_known):
        # a record above n has probability 0: the posterior of such a neighbour does not exist
        raise DomainError(
            f"the declared domain {domain} reaches above the number of trials n = "
            f"{np.max(n_known):g}: Binomial data lie in {{0..n}}; declare Integers(0, {int(np.max(n_known))})"
        )
    hi_eff = xp.minimum(float(hi_x), n)
    ends = (xp.asarray(float(lo_x)), hi_eff)
    if p.is_point:
        mode = xp.clip(xp.floor((n + 1.0) * p.lo), float(lo_x), hi_eff)
        hi = _binomial_logpmf(mode, n, p.lo, xp)
        lo = xp.minimum(*(_binomial_logpmf(e, n, p.lo, xp) for e in ends))
        return lo, hi
    n_const = np.asarray(n, dtype=float) if xp.name == "numpy" else _constant_value(n)
    if n_const is None:
        raise UnsupportedFactorError(
            "a Binomial factor whose p reads private data needs a constant number of trials n"
        )
    lo = xp.minimum(
        xp.minimum(_binomial_logpmf(ends[0], n, p.lo, xp), _binomial_logpmf(ends[0], n, p.hi, xp)),
        xp.minimum(_binomial_logpmf(ends[1], n, p.lo, xp), _binomial_logpmf(ends[1], n, p.hi, xp)),
    )
    top = int(min(hi_x, np.max(n_const)))
    hi = None
    for x in range(lo_x, top + 1):
        px = xp.clip(x / n, p.lo, p.hi)
        val = xp.where(x <= n, _binomial_logpmf(float(x), n, px, xp), -np.inf)
        hi = val if hi is None else xp.maximum(hi, val)
    return lo, hi


def _constant_value(var):
    from pytensor.graph.basic import Constant

    try:
        from pytensor.tensor.basic import get_underlying_scalar_constant_value
    except ImportError:  # pragma: no cover
        get_underlying_scalar_constant_value = None
    if isinstance(var, Constant):
        return np.asarray(var.data, dtype=float)
    if get_underlying_scalar_constant_value is not None:
        try:
            return np.asarray(get_underlying_scalar_constant_value(var), dtype=float)
        except Exception:
            return None
    return None


@register_rule(CategoricalRV, "Categorical", ("p",), range_params=("p",))
def categorical_range(op, domain, params, xp):
    """Categorical(p) over K classes, x in {lo..hi} subset of {0..K-1} (larger domains are refused).

    Derivation. ``ln p(x) = ln p_x``: over the classes the domain allows, the range is
    ``[ln min_x p_x, ln max_x p_x]`` and ``L = ln(max p / min p)`` (DESIGN.md section 4). When
    ``p`` reads private data (``pi[y]``, one simplex per class), ``p_x`` ranges over the
    per-component hull ``[p_lo_x, p_hi_x]``, and the extremes over the hull are the extremes over
    the rows themselves.
    """
    lo_x, hi_x = integer_domain(domain, "Categorical")
    (p,) = params
    classes = np.shape(p.hi)[-1] if xp.name == "numpy" else getattr(p.hi.type, "shape", (None,))[-1]
    if classes is not None and hi_x > classes - 1:
        # a record naming a class the model does not have has probability 0
        raise DomainError(
            f"the declared domain {domain} reaches above the last class {classes - 1} of a "
            f"{classes}-class Categorical; declare Integers(0, {classes - 1})"
        )
    sl = slice(lo_x, hi_x + 1)
    hi = xp.log(xp.amax(p.hi[..., sl], axis=-1))
    lo = xp.log(xp.amin(p.lo[..., sl], axis=-1))
    return lo, hi


def _poisson_logpmf(x, mu, xp):
    x = xp.asarray(x)  # see _binomial_logpmf: keep gammaln(x + 1) in float64 under PT
    return x * xp.log(mu) - mu - xp.gammaln(x + 1.0)


@register_rule(PoissonRV, "Poisson", ("mu",))
def poisson_range(op, domain, params, xp):
    """Poisson(mu), x in {lo..hi}.

    Derivation. ``f(x) = x ln mu - mu - ln x!`` is concave in x (the pmf is log-concave): the
    largest value is at the mode ``floor(mu)`` clipped to the domain, the smallest at an end.
    With ``lo = 0`` this is DESIGN.md's ``max_x f(x) - min(0, f(M))``. L is valley-shaped in mu
    and never 0 (``M = 10``: at least 2.86).
    """
    lo_x, hi_x = integer_domain(domain, "Poisson")
    (mu,) = params
    mu = _point(mu, "Poisson", "mu")
    mode = xp.clip(xp.floor(mu), float(lo_x), float(hi_x))
    hi = _poisson_logpmf(mode, mu, xp)
    lo = xp.minimum(_poisson_logpmf(float(lo_x), mu, xp), _poisson_logpmf(float(hi_x), mu, xp))
    return lo, hi


@register_rule(GeometricRV, "Geometric", ("p",))
def geometric_range(op, domain, params, xp):
    """Geometric(p): number of trials up to the first success, x in {lo..hi}, lo >= 1.

    Derivation. ``ln p(x) = ln p + (x - 1) ln(1 - p)`` is linear and decreasing in x, so
    ``L = -(hi - lo) ln(1 - p)``. (DESIGN.md counts failures from 0 to M, which is the same rule
    with ``hi - lo = M``.)
    """
    lo_x, hi_x = integer_domain(domain, "Geometric", support_lo=1)
    (p,) = params
    p = _point(p, "Geometric", "p")
    hi = xp.log(p) + (lo_x - 1.0) * xp.log1p(-p)
    lo = xp.log(p) + (hi_x - 1.0) * xp.log1p(-p)
    return lo, hi
