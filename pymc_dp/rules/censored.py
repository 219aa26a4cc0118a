"""Censored likelihoods: ``pm.Censored(base, lower=l, upper=u)`` (docs/theory/glm.md#censored).

PyMC's censored log-density of one element is (``pymc.logprob.censoring.clip_logprob``)

* ``ln P(Y <= l)`` at ``y = l`` (an atom; only when ``l`` is finite),
* ``ln P(Y >= u)`` at ``y = u`` (an atom; for a discrete base PyMC adds the mass at ``u`` to
  ``P(Y > u)``, so this is ``P(Y >= u)`` for every base),
* the base's own log-density (or log-mass) strictly between ``l`` and ``u``,
* ``-inf`` outside ``[l, u]`` -- so the declared domain must lie inside ``[l, u]``.

The rule is the range of these over every record: the base rule's range over the data strictly
inside ``(l, u)`` (for a continuous base the closure, a sup approached, not attained), joined with
each atom's range over the base parameters that read the record. An atom appears only when the
domain reaches the censoring point (``a == l`` or ``b == u``); a side whose censoring point lies
beyond the domain is just a domain bound.

The atoms are monotone in each parameter that may read the record (a location, a log-link mean,
a probability), so their extremes over a window are at the window's two ends.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np
import pytensor.tensor as pt
import scipy.special as sp
from pymc.distributions.censored import CensoredRV
from pytensor.tensor.random.basic import (
    BinomialRV,
    CauchyRV,
    ExponentialRV,
    GammaRV,
    GeometricRV,
    LaplaceRV,
    LogisticRV,
    LogNormalRV,
    NegBinomialRV,
    NormalRV,
    PoissonRV,
    StudentTRV,
)

from pymc_dp.domains import Integers
from pymc_dp.exceptions import DomainError, UnsupportedFactorError
from pymc_dp.rules.base import (
    Bounds,
    Nested,
    domain_interval,
    element_lipschitz,
    log_density_range,
    register_rule,
    rule_info,
)
from pymc_dp.rules.continuous import region_location, region_span
from pymc_dp.rules.namespaces import NP
from pymc_dp.rules.region import (
    NestedRegion,
    NoRegionRule,
    RegionSpec,
    Span,
    certified_sup_1d,
    register_region,
)

__all__ = ["censored_range", "censored_region", "SUPPORTED_BASES"]

_LOG_PI = float(np.log(np.pi))
_LOG_2 = float(np.log(2.0))


def _special(xp, name: str):
    """A special function of the namespace (:mod:`~pymc_dp.rules.namespaces` does not carry these)."""
    if xp.name == "numpy":
        return {"gammainc": sp.gammainc, "gammaincc": sp.gammaincc, "betainc": sp.betainc,
                "arctan2": np.arctan2}[name]
    return getattr(pt, name)


def _log_ndtr(x, xp):
    """``ln Phi(x)``. Under PyTensor not ``PT.log_ndtr``: PyMC's ``normal_lcdf`` divides by
    ``pt.sqrt(2.0)``, a float32 constant, and is off by about 1.7e-8 (absolute) for x < -1."""
    if xp.name == "numpy":
        return xp.log_ndtr(x)
    x = pt.as_tensor_variable(x)
    r2 = pt.constant(np.float64(np.sqrt(2.0)))
    left = pt.log(pt.erfcx(-x / r2) / 2.0) - pt.sqr(x) / 2.0  # Phi(x) = erfcx(-x/r2) e^{-x^2/2} / 2
    right = pt.log1p(-pt.erfc(x / r2) / 2.0)
    return pt.switch(pt.lt(x, -1.0), left, right)


# --------------------------------------------------------------------------- base families
#
# For each base: ln P(Y <= x) and ln P(Y >= x) as functions of its natural parameters (in the Op's
# dist_params order), the parameters in which both are monotone (those may be windows), and the
# link spaces such a window may be given in, mapped to the natural parameter.


@dataclass(frozen=True)
class _Base:
    family: str
    discrete: bool
    support_lo: float
    #: parameters in which both atoms are monotone: only these may be windows
    monotone: tuple[str, ...]
    log_below: Callable[..., Any]  # (x, vals, xp) -> ln P(Y <= x)
    log_above: Callable[..., Any]  # (x, vals, xp) -> ln P(Y >= x)
    #: (param name, space) -> (value on that scale, vals, xp) -> natural value
    spaces: dict = None


def _normal_below(x, v, xp):
    mu, sigma = v
    return _log_ndtr((x - mu) / sigma, xp)


def _normal_above(x, v, xp):
    mu, sigma = v
    return _log_ndtr((mu - x) / sigma, xp)


def _student_log_cdf(t, nu, xp):
    # F(t) = I_{nu/(nu+t^2)}(nu/2, 1/2) / 2 for t <= 0 (no cancellation in the left tail)
    half_i = 0.5 * _special(xp, "betainc")(nu / 2.0, xp.asarray(0.5), nu / (nu + xp.square(t)))
    return xp.where(t <= 0, xp.log(half_i), xp.log1p(-half_i))


def _laplace_log_cdf(z, xp):
    return xp.where(
        z <= 0, xp.minimum(z, 0.0) - _LOG_2, xp.log1p(-0.5 * xp.exp(-xp.maximum(z, 0.0)))
    )


def _cauchy_log_cdf(z, xp):
    # F(z) = atan2(1, -z) / pi: the left tail without the cancellation of 1/2 + atan(z)/pi
    return xp.log(_special(xp, "arctan2")(xp.asarray(1.0), -z)) - _LOG_PI


def _poisson_above(x, v, xp):
    (mu,) = v
    x1 = xp.maximum(x, 1.0)
    return xp.where(x >= 1, xp.log(_special(xp, "gammainc")(x1, mu)), 0.0)


def _binomial_below(x, v, xp):
    n, p = v
    nl = xp.maximum(n - x, 1.0)
    return xp.where(x >= n, 0.0, xp.log(_special(xp, "betainc")(nl, x + 1.0, 1.0 - p)))


def _binomial_above(x, v, xp):
    n, p = v
    x1 = xp.maximum(x, 1.0)
    return xp.where(x <= 0, 0.0, xp.log(_special(xp, "betainc")(x1, xp.maximum(n - x + 1.0, 1.0), p)))


def _negbin_above(x, v, xp):
    n, p = v
    x1 = xp.maximum(x, 1.0)
    return xp.where(x <= 0, 0.0, xp.log(_special(xp, "betainc")(x1, n, 1.0 - p)))


_BASES: dict[type, _Base] = {
    NormalRV: _Base("Normal", False, -np.inf, ("mu",), _normal_below, _normal_above),
    StudentTRV: _Base(
        "StudentT", False, -np.inf, ("mu",),
        lambda x, v, xp: _student_log_cdf((x - v[1]) / v[2], v[0], xp),
        lambda x, v, xp: _student_log_cdf((v[1] - x) / v[2], v[0], xp),
    ),
    LaplaceRV: _Base(
        "Laplace", False, -np.inf, ("mu",),
        lambda x, v, xp: _laplace_log_cdf((x - v[0]) / v[1], xp),
        lambda x, v, xp: _laplace_log_cdf((v[0] - x) / v[1], xp),
    ),
    CauchyRV: _Base(
        "Cauchy", False, -np.inf, ("alpha",),
        lambda x, v, xp: _cauchy_log_cdf((x - v[0]) / v[1], xp),
        lambda x, v, xp: _cauchy_log_cdf((v[0] - x) / v[1], xp),
    ),
    LogisticRV: _Base(
        "Logistic", False, -np.inf, ("mu",),
        lambda x, v, xp: xp.log_sigmoid((x - v[0]) / v[1]),
        lambda x, v, xp: xp.log_sigmoid((v[0] - x) / v[1]),
    ),
    LogNormalRV: _Base(
        "LogNormal", False, 0.0, ("mu",),
        lambda x, v, xp: _log_ndtr((xp.log(x) - v[0]) / v[1], xp),
        lambda x, v, xp: _log_ndtr((v[0] - xp.log(x)) / v[1], xp),
    ),
    GammaRV: _Base(
        "Gamma", False, 0.0, ("scale",),
        lambda x, v, xp: xp.log(_special(xp, "gammainc")(v[0], x / v[1])),
        lambda x, v, xp: xp.log(_special(xp, "gammaincc")(v[0], x / v[1])),
        {("scale", "log-mean"): lambda t, v, xp: xp.exp(t) / v[0]},
    ),
    ExponentialRV: _Base(
        "Exponential", False, 0.0, ("scale",),
        lambda x, v, xp: xp.log(-xp.expm1(-x / v[0])),
        lambda x, v, xp: -x / v[0],
    ),
    PoissonRV: _Base(
        "Poisson", True, 0, ("mu",),
        lambda x, v, xp: xp.log(_special(xp, "gammaincc")(x + 1.0, v[0])),
        _poisson_above,
        {("mu", "log-mean"): lambda t, v, xp: xp.exp(t)},
    ),
    GeometricRV: _Base(
        "Geometric", True, 1, ("p",),
        lambda x, v, xp: xp.log(-xp.expm1(x * xp.log1p(-v[0]))),
        lambda x, v, xp: (x - 1.0) * xp.log1p(-v[0]),
    ),
    BinomialRV: _Base(
        "Binomial", True, 0, ("p",), _binomial_below, _binomial_above,
        {("p", "logit"): lambda t, v, xp: xp.sigmoid(t)},
    ),
    NegBinomialRV: _Base(
        "NegativeBinomial", True, 0, ("p",),
        lambda x, v, xp: xp.log(_special(xp, "betainc")(v[0], x + 1.0, v[1])),
        _negbin_above,
        {("p", "log-mean"): lambda t, v, xp: v[0] / (v[0] + xp.exp(t))},
    ),
}

#: the base families pm.Censored is supported for (when their own rule is registered)
SUPPORTED_BASES = tuple(b.family for b in _BASES.values())


def _base_spec(op) -> _Base | None:
    for klass in type(op).__mro__:
        if klass in _BASES:
            return _BASES[klass]
    return None


def _supported_message() -> str:
    return ", ".join(SUPPORTED_BASES)


def _resolve_base(base) -> tuple[_Base, Any]:
    if not isinstance(base, Nested):
        raise UnsupportedFactorError(
            "pm.Censored: the base distribution must be given as Nested(op, params)"
        )
    spec, info = _base_spec(base.op), rule_info(base.op)
    name = info.family if info is not None else type(base.op).__name__
    if spec is None or info is None:
        raise UnsupportedFactorError(
            f"pm.Censored of a {name} base is not supported: no exact rule for its atoms "
            f"P(Y <= lower), P(Y >= upper) and its density. Supported bases: {_supported_message()}"
            + ("" if info is not None else f" (and {name} has no Lipschitz rule of its own)")
        )
    return spec, info


def _constant(value, what: str) -> np.ndarray:
    """The numeric value of a censoring point (a constant of the model, never private data)."""
    if isinstance(value, (int, float, np.number, np.ndarray, list, tuple)):
        return np.asarray(value, dtype=float)
    from pytensor.graph.basic import Constant

    if isinstance(value, Constant):
        return np.asarray(value.data, dtype=float)
    from pytensor.compile.sharedvalue import SharedVariable

    if isinstance(value, SharedVariable):  # a public pm.Data container (a private one never gets here)
        return np.asarray(value.get_value(), dtype=float)
    try:
        from pytensor.tensor.basic import get_underlying_scalar_constant_value

        return np.asarray(get_underlying_scalar_constant_value(value), dtype=float)
    except Exception:
        raise UnsupportedFactorError(
            f"pm.Censored: the {what} censoring point must be a constant of the model (a number "
            f"or an array), so that the rule knows which records are atoms"
        ) from None


def _censoring_point(bounds, what: str) -> np.ndarray:
    if isinstance(bounds, Bounds):
        if not bounds.is_point:
            raise UnsupportedFactorError(
                f"pm.Censored: the {what} censoring point cannot read private data"
            )
        return _constant(bounds.lo, what)
    if isinstance(bounds, Span):
        if not bounds.is_point:
            raise NoRegionRule(f"pm.Censored: the {what} censoring point must be fixed over the region")
        return np.asarray(bounds.lo, dtype=float)
    return _constant(bounds, what)


def _atoms_and_domain(spec: _Base, domain, l, u):
    """``(a, b, lower_atom, upper_atom)``: the domain's ends and where each atom is reachable."""
    family = f"Censored {spec.family}"
    if spec.discrete:
        if not isinstance(domain, Integers):
            raise DomainError(
                f"a {family} factor observes integers: declare its data with Integers(lo, hi), "
                f"not {domain}"
            )
        a, b = float(domain.lo), float(domain.hi)
    else:
        a, b = domain_interval(domain, family)
    if a < spec.support_lo:
        raise DomainError(
            f"the {spec.family} family has support starting at {spec.support_lo:g}, but the "
            f"declared domain {domain} reaches below it"
        )
    if np.any(np.isnan(l)) or np.any(np.isnan(u)) or np.any(l >= u):
        # l == u makes every value the single point l (PyMC then reports ln P(Y <= l) there)
        raise UnsupportedFactorError(f"pm.Censored needs lower < upper, got lower={l}, upper={u}")
    if np.any(a < l) or np.any(b > u):
        # +inf (PyMC's "uncensored") passes; a finite point inside the domain does not: a
        # neighbouring record of that row may lie beyond it, where the likelihood is 0
        raise DomainError(
            f"the declared domain {domain} reaches outside the censoring interval "
            f"[{np.max(l):g}, {np.min(u):g}] of some element: a censored record lies in [lower, upper] "
            f"(outside it the likelihood is 0), and every record of the domain must be possible in "
            f"every row. Declare a domain inside [lower, upper] (e.g. up to the smallest finite upper "
            f"point), or censor at the domain's ends (administrative censoring at the study's end, "
            f"upper = the domain's top, and +inf for uncensored rows)"
        )
    lower_atom = np.isfinite(l) & (l == a)
    upper_atom = np.isfinite(u) & (u == b)
    return a, b, lower_atom, upper_atom


def _natural_values(spec: _Base, info, params: tuple, xp):
    """Candidate natural parameter tuples: every vertex of the parameters given as intervals
    (both atoms are monotone in each of them, so their extremes over a box are at a vertex)."""
    per_param = []
    for name, p in zip(info.param_names, params):
        if isinstance(p, Nested):
            raise UnsupportedFactorError(f"pm.Censored of a nested {spec.family} base is not supported")
        ends = [p.lo] if p.is_point else [p.lo, p.hi]
        if not p.is_point and name not in spec.monotone:
            raise UnsupportedFactorError(
                f"the {spec.family} parameter {name!r} cannot read private data under pm.Censored "
                f"(only {', '.join(spec.monotone)} can)"
            )
        # a link scale only where the base's own rule takes that parameter as a window (its
        # rule then reads ``space``; a rule without range parameters may ignore it)
        known = (name, p.space) in (spec.spaces or {}) and name in info.range_params
        if p.space != "natural" and not known:
            raise UnsupportedFactorError(
                f"pm.Censored: the {spec.family} parameter {name!r} is not supported on the "
                f"{p.space!r} scale"
            )
        per_param.append([(e, p.space) for e in ends])
    out = []
    for combo in itertools.product(*per_param):
        vals = [e for e, _ in combo]
        # map link-scale values to natural ones (a converter may read the other, natural, values)
        for i, (name, (e, space)) in enumerate(zip(info.param_names, combo)):
            if space != "natural":
                vals[i] = spec.spaces[(name, space)](e, tuple(vals), xp)
        out.append(tuple(vals))
    return out


@register_rule(CensoredRV, "Censored", ("dist", "lower", "upper"))
def censored_range(op, domain, params, xp):
    """``pm.Censored(base, lower=l, upper=u)``, data in ``[a, b]`` inside ``[l, u]``.

    ``params = (Nested(base_op, base_params), Bounds.point(l), Bounds.point(u))``; ``l``/``u``
    may be ``-inf``/``inf`` (one-sided censoring) and elementwise arrays. Supported bases:
    Normal, StudentT, Laplace, Cauchy, Logistic, LogNormal, Gamma, Exponential (continuous),
    Poisson, Geometric, Binomial, NegativeBinomial (discrete), each when its own rule is
    registered; a base parameter that reads the record (a location window, a log-link mean) is
    handled as by the base's own rule.

    Derivation (docs/theory/glm.md#censored-normal for the Normal, the same for every base). The records are
    the data values ``y in [a, b]`` jointly with the base parameters' window. Values strictly
    inside ``(l, u)`` give the base's log-density: its range is the base rule's range over the
    domain (for a continuous base the closure ``[a, b]``: the atoms' points are limits of
    interior points, so the sup over ``(l, u)`` is the same; for a discrete base the integers
    strictly inside). ``y = l`` (possible iff ``a == l``) gives ``ln P(Y <= l)``, ``y = u`` (iff
    ``b == u``) gives ``ln P(Y >= u)``; each is monotone in the location (``F((l - mu)/sigma)``
    decreases in ``mu``), the log-link mean, the probability ``p``, so its range over the window
    is the two values at the window's ends. ``L = top - bot`` of the union: exact, with the top
    density value a sup (approached, not attained) for a continuous base; for the Normal::

        top = max{ -ln sigma - ln(2 pi)/2 - r_min^2/(2 sigma^2),
                   ln Phi((l - m_lo)/sigma),  ln Phi((m_hi - u)/sigma) }
        bot = min{ -ln sigma - ln(2 pi)/2 - r_max^2/(2 sigma^2),
                   ln Phi((l - m_hi)/sigma),  ln Phi((m_lo - u)/sigma) }

    Nothing cancels between an atom (a probability) and a density (per unit of y): both bounds
    on the scale are needed over a region (docs/theory/glm.md#censored).
    """
    base, lower, upper = params
    spec, info = _resolve_base(base)
    l, u = _censoring_point(lower, "lower"), _censoring_point(upper, "upper")
    a, b, lower_atom, upper_atom = _atoms_and_domain(spec, domain, l, u)
    tops, bots = [], []
    # the interior: the base's own rule over the data strictly inside (l, u)
    if spec.discrete:
        for mask, side in ((lower_atom, "lower"), (upper_atom, "upper")):
            if np.any(mask) and not np.all(mask):
                raise UnsupportedFactorError(
                    f"pm.Censored of a discrete {spec.family} base: the {side} censoring point "
                    f"must be at the domain's end for every element or for none"
                )
        i_lo, i_hi = int(a) + int(np.all(lower_atom)), int(b) - int(np.all(upper_atom))
        if i_lo <= i_hi:
            lo, hi = log_density_range(base.op, Integers(i_lo, i_hi), base.params, xp)
            tops.append(hi)
            bots.append(lo)
    else:
        lo, hi = log_density_range(base.op, domain, base.params, xp)
        tops.append(hi)
        bots.append(lo)
    # the atoms, at the window's ends
    candidates = _natural_values(spec, info, base.params, xp)
    for mask, point, fill, fn in (
        (lower_atom, l, a, spec.log_below),
        (upper_atom, u, b, spec.log_above),
    ):
        if not np.any(mask):
            continue
        x = np.where(mask, point, fill)  # a finite stand-in where the atom is not reachable
        vals = [fn(xp.asarray(x), v, xp) for v in candidates]
        hi = lo = vals[0]
        for v in vals[1:]:
            hi, lo = xp.maximum(hi, v), xp.minimum(lo, v)
        tops.append(xp.where(mask, hi, -np.inf))
        bots.append(xp.where(mask, lo, np.inf))
    top, bot = tops[0], bots[0]
    for t, s in zip(tops[1:], bots[1:]):
        top, bot = xp.maximum(top, t), xp.minimum(bot, s)
    return bot, top


# --------------------------------------------------------------------------- region

def _normal_tau_lipschitz(a, b, l, u, lower_atom, upper_atom, m_lo, m_hi, sigma0):
    """A Lipschitz constant in ``tau = ln sigma`` of the censored-Normal ``L`` over
    ``sigma >= sigma0``, window ``[m_lo, m_hi]`` (lemma D, docs/theory/glm.md#censored-sigma).

    ``L(tau)`` is a sup over pairs of records of ``l_x(tau) - l_x'(tau)``, so it is Lipschitz with
    the width of the range of ``d l_x / d tau`` over the records:

    * density record (``r = |y - mu|``): ``d/dtau = r^2/sigma^2 - 1 in [-1, r_max^2/sigma0^2 - 1]``;
    * lower atom ``ln Phi(z)``, ``z = (l - mu)/sigma``: ``d/dtau = -z phi(z)/Phi(z)``; for
      ``z >= 0`` it lies in ``[-0.2946, 0]`` (``max_{z>=0} z phi/Phi = 0.29453``), for ``z < 0``
      in ``[0, |z|(|z| + 1)]`` (Mills: ``phi(x)/(1 - Phi(x)) <= x + 1`` for ``x >= 0``), and
      ``|z| <= X = max(0, (m_hi - l)/sigma0)``;
    * upper atom ``ln Phi((mu - u)/sigma)``: the same with ``X = max(0, (u - m_lo)/sigma0)``.

    Every derivative is ``>= -1``, so ``K = 1 + max(r_max^2/sigma0^2 - 1, X_l(X_l + 1), X_u(X_u + 1))``.
    """
    r_max = np.maximum(b - m_lo, m_hi - a)
    top = np.square(r_max / sigma0) - 1.0
    x_l = np.maximum(0.0, (m_hi - np.where(lower_atom, l, a)) / sigma0)
    x_u = np.maximum(0.0, (np.where(upper_atom, u, b) - m_lo) / sigma0)
    top = np.maximum(top, np.where(lower_atom, x_l * (x_l + 1.0), -1.0))
    top = np.maximum(top, np.where(upper_atom, x_u * (x_u + 1.0), -1.0))
    return top + 1.0


def censored_region(op, domain, params) -> np.ndarray:
    """sup L of ``pm.Censored(Normal(mu, sigma), l, u)`` over a region (docs/theory/glm.md#censored-normal).

    ``params = (NestedRegion(NormalRV, (mu, sigma)), lower, upper)``: ``mu`` a Window (or a Span,
    a window of half-width 0), ``sigma`` a Span with ``0 < sigma_lo`` and ``sigma_hi < inf`` --
    both are needed (``sigma -> 0``: the density grows without bound; ``sigma -> inf``: the
    density goes to 0 while the atoms go to 1/2), ``lower``/``upper`` points.

    * Window half-width: ``h = half`` (lemma B: a range over a larger window is larger).
    * Offset: at one of its two ends (lemma C, docs/theory/glm.md#censored-offset: the log-density is concave in mu
      for every record -- ``ln phi`` and ``ln Phi`` are concave -- and no pair function has an
      interior maximum consistent with its records being the max and the min: density-density
      pairs are linear in the offset, density max against an upper-atom min has a negative
      slope because the inverse Mills ratio exceeds ``-x``, atom max against density min is
      convex, atom-atom pairs are monotone). Re-checked by brute force in
      ``tests/rules/test_censored.py``. An infinite offset end gives ``+inf`` (an atom tends to
      0 or is absent while some record's log-density tends to ``-inf``).
    * ``sigma``: no endpoint theorem (docs/theory/glm.md#censored-sigma: observed at an end, not proved), so a certified
      1-D branch and bound in ``tau = ln sigma`` (lemma D) with the constant of
      :func:`_normal_tau_lipschitz`: the result is >= the sup and within 0.1% of a value
      attained on the grid it evaluated.

    Other bases have a per-theta rule but no region rule yet: they are refused here.
    """
    base, lower, upper = params
    if not isinstance(base, NestedRegion):
        raise NoRegionRule("pm.Censored: the base distribution must be a NestedRegion over a region")
    spec = _base_spec(base.op)
    if spec is None or spec.family != "Normal":
        name = spec.family if spec is not None else type(base.op).__name__
        raise NoRegionRule(
            f"pm.Censored of a {name} base has a per-parameter rule but no region rule: a "
            f"region rule (a bound over a truncation region) exists for a Normal base only"
        )
    l, u = _censoring_point(lower, "lower"), _censoring_point(upper, "upper")
    mu, sigma = base.params
    o_lo, o_hi, half = region_location(mu, "Censored Normal", "mu")
    s_lo, s_hi = region_span(sigma, "Censored Normal", "sigma")
    if np.any(s_lo <= 0) or np.any(~np.isfinite(s_hi)):
        raise NoRegionRule(
            "pm.Censored(Normal): over a region sigma needs both bounds, 0 < sigma_lo and a finite "
            f"sigma_hi (got [{np.min(s_lo):g}, {np.max(s_hi):g}]): the censored likelihood's "
            "constant is unbounded as sigma -> 0 and does not settle as sigma -> inf; truncate "
            "sigma to an interval"
        )
    a, b, lower_atom, upper_atom = _atoms_and_domain(spec, domain, l, u)
    shape = np.broadcast(o_lo, o_hi, half, s_lo, s_hi, l, u).shape
    arrays = (o_lo, o_hi, half, s_lo, s_hi, l, u, lower_atom, upper_atom)
    flat = [np.broadcast_to(v, shape).reshape(-1) for v in arrays]
    o_lo, o_hi, half, s_lo, s_hi, l, u, lower_atom, upper_atom = flat
    unbounded = np.isinf(o_lo) | np.isinf(o_hi) | np.isinf(half)
    out = np.full(o_lo.shape, np.inf)
    normal_op = base.op

    def L_at(idx, m_lo, m_hi, s):
        p = (
            Nested(normal_op, (Bounds(m_lo, m_hi), Bounds.point(np.full(m_lo.shape, float(s))))),
            Bounds.point(l[idx]),
            Bounds.point(u[idx]),
        )
        return np.asarray(element_lipschitz(op, domain, p, NP), dtype=float)

    finite = np.flatnonzero(~unbounded)
    # one branch and bound per distinct sigma interval (certified_sup_1d needs one interval)
    keys = {(float(s_lo[i]), float(s_hi[i])) for i in finite}
    for key in keys:
        idx = finite[(s_lo[finite] == key[0]) & (s_hi[finite] == key[1])]
        best = None
        for o in (o_lo[idx], o_hi[idx]):
            m_lo, m_hi = o - half[idx], o + half[idx]

            def f(s, idx=idx, m_lo=m_lo, m_hi=m_hi):
                return L_at(idx, m_lo, m_hi, s)

            def lip(s0, s1, idx=idx, m_lo=m_lo, m_hi=m_hi):
                return _normal_tau_lipschitz(
                    a, b, l[idx], u[idx], lower_atom[idx], upper_atom[idx], m_lo, m_hi, s0
                )

            val = certified_sup_1d(f, key[0], key[1], lip, log_scale=True)
            best = val if best is None else np.maximum(best, val)
        out[idx] = best
    return out.reshape(shape)


register_region(CensoredRV, RegionSpec(custom=censored_region))
