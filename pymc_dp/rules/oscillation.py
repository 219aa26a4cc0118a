"""Oscillation rules: the sharper per-draw certificate for one-parameter exponential families and
the Laplace location.

Why (``docs/theory/oscillation.md``). For neighbouring datasets ``x, x'`` and ``g(theta) =
ln p(x | theta) - ln p(x' | theta)``,

.. math:: \\ln \\frac{\\pi(\\theta \\mid x)}{\\pi(\\theta \\mid x')} = g(\\theta) - \\ln
          \\mathbb{E}_{\\pi(\\cdot \\mid x')}\\left[e^{g}\\right]
          \\in [\\inf_\\Theta g - \\sup_\\Theta g,\\ \\sup_\\Theta g - \\inf_\\Theta g],

so one draw from the posterior on ``Theta`` is ``eps_0``-DP with ``eps_0 = sup over neighbours of
osc_Theta g = sup_Theta g - inf_Theta g``. Always ``osc <= 2 sup_Theta |g| <= 2 Delta``; for a
sum of factors ``osc(sum) <= sum of osc``, so half a factor's oscillation can stand in for its
``L`` in the lift (``Delta = sum_j osc_j / 2``, ``eps_0 = 2 Delta``).

The closed form. A factor whose one free parameter ``theta`` enters as an exponential family,

.. math:: \\ln p(x \\mid \\theta) = \\eta(\\theta)\\, T(x) - A(\\theta) + h(x),

changed in one element ``x -> x'`` (same element, so the same fixed parameters) has
``g(theta) = eta(theta) (T(x) - T(x'))``: ``A`` and ``h`` cancel. For fixed ``x, x'`` it is
linear in ``eta``, so over a region where ``eta`` ranges over ``[eta_lo, eta_hi]``

.. math:: \\mathrm{osc}\\, g = |T(x) - T(x')| (\\eta_{hi} - \\eta_{lo}),
          \\qquad \\sup_{x, x'} \\mathrm{osc}\\, g = \\mathrm{span}_D(T)\\,(\\eta_{hi} - \\eta_{lo}),

attained by the two records at the ends of ``T``'s range over the domain ``D``. The location of
the region costs nothing: only its width in ``eta``. (For Bernoulli, ``eta = logit p``, a
symmetric interval ``[-L, L]`` gives ``2L``, the old certificate; the same width anywhere else
gives the same ``eps_0``.)

Each rule below names ``eta`` (monotone in the parameter), the direction of that monotonicity
and ``span_D(T)`` per element, and is checked by brute force in
``tests/rules/test_oscillation.py`` (sup over record pairs of ``sup - inf`` over a parameter grid
equals the formula, attained at the grid's ends).

The Laplace location with a public scale is not an exponential family; :class:`LaplaceLocation`
gives its exact oscillation, derivation in its docstring, brute-force test beside the others.
Neither are the Student-t and Cauchy locations: :class:`~pymc_dp.rules.studentt_location.
StudentTLocation` bounds theirs soundly within about 1% (a closed form for two locations and a
table of its supremum over intervals; derivation in its module).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import singledispatch
from typing import Callable

import numpy as np
from pytensor.tensor.random.basic import (
    BernoulliRV,
    BetaRV,
    BinomialRV,
    CauchyRV,
    ExponentialRV,
    GammaRV,
    GeometricRV,
    LaplaceRV,
    LogNormalRV,
    NormalRV,
    PoissonRV,
    StudentTRV,
)

from pymc_dp.domains import Domain
from pymc_dp.rules.base import domain_interval, integer_domain
from pymc_dp.rules.continuous import region_location, region_span
from pymc_dp.rules.studentt_location import StudentTLocation

__all__ = [
    "LaplaceLocation",
    "NaturalParameter",
    "StudentTLocation",
    "has_region_oscillation",
    "natural_parameter",
    "normal_predictor_oscillation",
    "oscillation",
    "region_half_oscillation",
]


@dataclass(frozen=True)
class NaturalParameter:
    """How one free parameter of a factor enters its log-density: ``eta(theta) T(x)``.

    ``eta`` maps parameter values (arrays, broadcast with the factor's fixed parameters) to the
    natural parameter; it is increasing when ``increasing`` else decreasing, on the parameter's
    support. ``t_span`` is ``max_D T - min_D T`` per element (broadcastable)."""

    family: str
    eta: Callable[[np.ndarray], np.ndarray]
    increasing: bool
    t_span: np.ndarray
    #: an upper bound on the absolute error, at a parameter value, of ``eta`` as the model's
    #: float64 log-density computes it (None: negligible). A probability near 0 or 1 is the case:
    #: PyMC evaluates ``ln p`` and ``ln(1 - p)`` from the rounded ``p``, so ``ln(1 - p)`` carries an
    #: absolute error of about ``eps / (1 - p)`` (6e-4 at ``p = sigmoid(29.7)``, campaign seed
    #: 1000622); the sampled density is the computed one, so the certificate adds the error
    float_error: Callable[[np.ndarray], np.ndarray] | None = None

    def eta_range(self, lo, hi) -> tuple[np.ndarray, np.ndarray]:
        """``[eta_lo, eta_hi]`` over parameter values in ``[lo, hi]`` (elementwise)."""
        with np.errstate(all="ignore"):
            a, b = self.eta(np.asarray(lo, float)), self.eta(np.asarray(hi, float))
        return (a, b) if self.increasing else (b, a)


@dataclass(frozen=True)
class LaplaceLocation:
    """The location ``mu`` of a Laplace with a public scale ``s`` on the domain ``[a, b]``: not an
    exponential family, so its oscillation has its own closed form.

    Derivation (``docs/theory/oscillation.md``, "The Laplace location"). ``ln p(x | mu) =
    -|x - mu| / s - ln(2 s)``, so for records ``x <= x'`` ``g(mu) = (|x' - mu| - |x - mu|) / s`` is
    ``(x' - x) / s`` for ``mu <= x``, falls with slope ``-2 / s`` on ``[x, x']`` and is
    ``(x - x') / s`` for ``mu >= x'``: monotone, so its oscillation over ``[lo, hi]`` is
    ``2 |[lo, hi] ∩ [x, x']| / s``, largest for the domain's ends:

    ``sup over x, x' of osc g = 2 |[lo, hi] ∩ [a, b]| / s`` (attained by ``x = a``, ``x' = b``).

    A region may reach beyond the domain for free (``g`` is constant there).
    """

    a: float
    b: float
    scale: np.ndarray

    def oscillation(self, lo, hi) -> np.ndarray:
        overlap = np.maximum(0.0, np.minimum(np.asarray(hi, float), self.b) - np.maximum(np.asarray(lo, float), self.a))
        return 2.0 * overlap / self.scale


def oscillation(natural: NaturalParameter | LaplaceLocation | StudentTLocation, lo, hi) -> np.ndarray:
    """``sup`` over element changes of the oscillation over parameters in ``[lo, hi]``, per element:
    ``span_D(T) (eta_hi - eta_lo)`` (0 where the interval is a point; inf at an end where eta is);
    a location's own bound for a :class:`LaplaceLocation` or :class:`StudentTLocation`."""
    if isinstance(natural, (LaplaceLocation, StudentTLocation)):
        return natural.oscillation(lo, hi)
    e_lo, e_hi = natural.eta_range(lo, hi)
    # over: t_span x a huge width overflows to +inf, the sound (fail-closed) bound; found by the
    # 10,000-model campaign, seeds 1002560 and 1002570 (Gamma, log link, public design)
    with np.errstate(invalid="ignore", over="ignore"):
        # a point only where eta is finite there: logit(0) = logit(0) = -inf is a p that saturated
        # in floats (sigmoid of any eta below -745), not a constant parameter (FOUND.md #12)
        point = (e_hi == e_lo) & np.isfinite(e_lo)
        width = np.where(point, 0.0, e_hi - e_lo)  # -inf - (-inf) is NaN: inf below
        if natural.float_error is not None:
            # the computed g errs by at most t_span x the error of eta at each of the two points,
            # and the error bound is convex in p: largest at an end of [lo, hi]
            error = np.maximum(natural.float_error(lo), natural.float_error(hi))
            width = width + 2.0 * np.where(point, 0.0, error)
        out = np.asarray(natural.t_span, float) * width
    return np.where(np.isnan(out), np.inf, out)


@singledispatch
def natural_parameter(op, domain: Domain, params: tuple, free: int) -> NaturalParameter | None:
    """The :class:`NaturalParameter` of parameter ``free`` of ``op``'s family, or None.

    ``params`` holds the other parameters as public numbers (arrays); ``params[free]`` is None.
    None means no closed form is registered (the factor keeps the ``2 L`` certificate)."""
    return None


def _logit(p):
    return np.log(p) - np.log1p(-p)


#: relative rounding of a probability as a model computes it (a sigmoid, a product, a division:
#: a few ulps), with room to spare
_P_ROUNDING = 16 * np.finfo(float).eps


def probability_error(p):
    """The absolute error of ``ln p - ln(1 - p)`` computed from ``p`` rounded by ``_P_ROUNDING``
    relative: ``ln p`` errs by about ``_P_ROUNDING``, ``ln(1 - p)`` by ``_P_ROUNDING p / (1 - p)``."""
    p = np.asarray(p, float)
    with np.errstate(divide="ignore", invalid="ignore"):
        out = _P_ROUNDING * (1.0 + p / (1.0 - p))
    return np.where(np.isnan(out), np.inf, out)


def _count_span(domain, family, support_lo=0) -> float:
    lo, hi = integer_domain(domain, family, support_lo)
    return float(hi - lo)


@natural_parameter.register(BernoulliRV)
def _bernoulli(op, domain, params, free):
    """``ln p(x) = x logit(p) + ln(1 - p)``: ``eta = logit p`` (increasing), ``T = x``."""
    return NaturalParameter("Bernoulli", _logit, True, np.asarray(_count_span(domain, "Bernoulli")), probability_error)


@natural_parameter.register(BinomialRV)
def _binomial(op, domain, params, free):
    """``ln p(x) = x logit(p) + n ln(1 - p) + ln C(n, x)``, ``p`` free (``n`` fixed, the element's
    own: it cancels with ``A``): ``eta = logit p``, ``T = x``."""
    if free != 1:
        return None
    return NaturalParameter("Binomial", _logit, True, np.asarray(_count_span(domain, "Binomial")), probability_error)


@natural_parameter.register(PoissonRV)
def _poisson(op, domain, params, free):
    """``ln p(x) = x ln(mu) - mu - ln x!``: ``eta = ln mu`` (increasing), ``T = x``."""
    return NaturalParameter("Poisson", np.log, True, np.asarray(_count_span(domain, "Poisson")))


@natural_parameter.register(GeometricRV)
def _geometric(op, domain, params, free):
    """Trials to the first success, ``ln p(x) = (x - 1) ln(1 - p) + ln p``: ``eta = ln(1 - p)``
    (decreasing in p), ``T = x``."""
    return NaturalParameter("Geometric", lambda p: np.log1p(-p), False, np.asarray(_count_span(domain, "Geometric", 1)),
                            probability_error)


@natural_parameter.register(ExponentialRV)
def _exponential(op, domain, params, free):
    """Scale ``s`` (PyMC's ``1 / lam``): ``ln p(x) = -x / s - ln s``: ``eta = -1/s`` (increasing
    in s, ``= -lam``), ``T = x``."""
    a, b = domain_interval(domain, "Exponential")
    return NaturalParameter("Exponential", lambda s: -1.0 / s, True, np.asarray(b - a))


@natural_parameter.register(NormalRV)
def _normal(op, domain, params, free):
    """``ln p(x) = -(x - mu)^2 / (2 sigma^2) - ln sigma - ln(2 pi) / 2``.

    ``mu`` free (sigma fixed): ``eta = mu / sigma^2`` (increasing), ``T = x``, span ``b - a``.
    ``sigma`` free (mu fixed): ``eta = -1 / (2 sigma^2)`` (increasing), ``T = (x - mu)^2``, whose
    span over ``[a, b]`` is ``max((a - mu)^2, (b - mu)^2) - (dist(mu, [a, b]))^2``."""
    a, b = domain_interval(domain, "Normal")
    mu, sigma = params
    if free == 0:
        s2 = np.square(np.asarray(sigma, float))
        return NaturalParameter("Normal", lambda m: m / s2, True, np.asarray(b - a))
    mu = np.asarray(mu, float)
    far = np.maximum(np.square(a - mu), np.square(b - mu))
    near = np.square(np.maximum(0.0, np.maximum(a - mu, mu - b)))
    return NaturalParameter("Normal", lambda s: -0.5 / np.square(s), True, far - near)


@natural_parameter.register(LogNormalRV)
def _lognormal(op, domain, params, free):
    """``mu`` free (sigma fixed): ``ln p(x) = -(ln x - mu)^2 / (2 sigma^2) - ln x - ...``, so
    ``eta = mu / sigma^2``, ``T = ln x``, span ``ln(b / a)`` (the Jacobian ``-ln x`` is ``h``)."""
    if free != 0:
        return None
    a, b = domain_interval(domain, "LogNormal")
    if a <= 0:
        return None
    s2 = np.square(np.asarray(params[1], float))
    return NaturalParameter("LogNormal", lambda m: m / s2, True, np.asarray(np.log(b / a)))


@natural_parameter.register(GammaRV)
def _gamma(op, domain, params, free):
    """``ln p(x) = (k - 1) ln x - x / s - k ln s - ln Gamma(k)``.

    Scale ``s`` free: ``eta = -1/s`` (increasing), ``T = x``, span ``b - a``. Shape ``k`` free:
    ``eta = k``, ``T = ln x``, span ``ln(b / a)`` (needs ``a > 0``)."""
    a, b = domain_interval(domain, "Gamma")
    if free == 1:
        return NaturalParameter("Gamma", lambda s: -1.0 / s, True, np.asarray(b - a))
    if a <= 0:
        return None
    return NaturalParameter("Gamma", lambda k: np.asarray(k, float), True, np.asarray(np.log(b / a)))


@natural_parameter.register(BetaRV)
def _beta(op, domain, params, free):
    """``ln p(x) = (alpha - 1) ln x + (beta - 1) ln(1 - x) - ln B(alpha, beta)``: ``alpha`` free:
    ``eta = alpha``, ``T = ln x``; ``beta`` free: ``eta = beta``, ``T = ln(1 - x)``."""
    a, b = domain_interval(domain, "Beta")
    if not (0 < a and b < 1):
        return None
    span = np.log(b / a) if free == 0 else np.log((1 - a) / (1 - b))
    return NaturalParameter("Beta", lambda v: np.asarray(v, float), True, np.asarray(span))


@natural_parameter.register(LaplaceRV)
def _laplace(op, domain, params, free):
    """``mu`` free (scale ``b`` fixed): :class:`LaplaceLocation`'s closed form."""
    if free != 0:
        return None
    a, b = domain_interval(domain, "Laplace")
    return LaplaceLocation(a, b, np.asarray(params[1], float))


def _public_number(value) -> float | None:
    """A public parameter that is one number (every element equal), else None."""
    arr = np.asarray(value, float)
    if arr.size == 0 or not np.all(np.isfinite(arr)) or np.ptp(arr) != 0:
        return None
    return float(arr.reshape(-1)[0])


def _studentt_location(a: float, b: float, nu, scale) -> StudentTLocation | None:
    nu, scale = _public_number(nu), _public_number(scale)
    if nu is None or scale is None or not (nu > 0 and scale > 0 and math.isfinite(a) and math.isfinite(b)):
        return None
    return StudentTLocation(a, b, nu, scale)


@natural_parameter.register(StudentTRV)
def _studentt(op, domain, params, free):
    """``mu`` free (``nu`` and ``sigma`` public numbers, a bounded domain):
    :class:`StudentTLocation`."""
    if free != 1:
        return None
    a, b = domain_interval(domain, "StudentT")
    return _studentt_location(a, b, params[0], params[2])


@natural_parameter.register(CauchyRV)
def _cauchy(op, domain, params, free):
    """``alpha`` free (``beta`` a public number, a bounded domain): the Student-t location with
    ``nu = 1`` (the Cauchy log-density is the Student-t one with ``nu = 1``, up to a constant)."""
    if free != 0:
        return None
    a, b = domain_interval(domain, "Cauchy")
    return _studentt_location(a, b, 1.0, params[1])


def normal_predictor_oscillation(y_lo, y_hi, eta_lo, eta_hi, sigma, scale_free) -> np.ndarray:
    """An upper bound on one element's oscillation for a Normal whose location ``eta`` (a linear
    predictor, say) ranges over ``[eta_lo, eta_hi]`` for every record and parameter of the region,
    with ``y`` in ``[y_lo, y_hi]``; the scale is ``sigma`` (``scale_free``: the region's lower end
    of a free scale). It is attained when the region reaches both ends of ``eta`` at one record
    (a ball and an interval centred on the data, for instance).

    Derivation (``docs/theory/oscillation.md``, "The Normal linear predictor"). For records ``(z, y)``
    and ``(z', y')`` and parameters ``theta``, with ``r = y - eta(z)``,
    ``g(theta) = (r'^2 - r^2) / (2 sigma^2)``: the ``-ln sigma`` and ``ln(2 pi)`` terms cancel.
    Treat the two records' predictors at the two parameters as four free values in
    ``[eta_lo, eta_hi]`` (a relaxation: an upper bound). With ``far(y) = max(y - eta_lo, eta_hi - y)``
    and ``near(y)`` the distance from ``y`` to ``[eta_lo, eta_hi]``,
    ``sup F = far(y')^2 - near(y)^2`` and ``inf F = near(y')^2 - far(y)^2`` for
    ``F = r'^2 - r^2``, so with ``h(y) = far(y)^2 - near(y)^2`` and ``S = sup_y h``:

    * known scale: ``osc = (sup F - inf F) / (2 sigma^2) <= 2 S / (2 sigma^2)``;
    * free scale ``>= sigma``: ``sup g = max(0, sup F) / (2 sigma^2)`` (a negative ``F`` is
      best at the largest scale, where it tends to 0) and ``inf g = min(0, inf F) / (2 sigma^2)``,
      so ``osc <= max(far_max^2 - near_min^2, 2 S) / (2 sigma^2)`` (also for a scale bounded
      above: a negative ``F`` at the largest scale is still below 0).

    ``h`` is convex on ``[eta_lo, eta_hi]`` (the larger of two squares) and linear beyond it, so
    ``S`` is attained at ``y_lo``, ``y_hi`` or an end of ``eta`` inside the domain. Both bounds are
    at most the ``2 L`` certificate ``2 (far_max^2 - near_min^2) / (2 sigma^2)``; for a predictor
    narrower than the data (``eta in [-H, H]``, ``y in [-c, c]``, ``H <= c``) the known-scale
    bound is ``4 c H / sigma^2`` against ``2L = (c + H)^2 / sigma^2``.
    """
    y_lo, y_hi = np.asarray(y_lo, float), np.asarray(y_hi, float)
    eta_lo, eta_hi, sigma = np.asarray(eta_lo, float), np.asarray(eta_hi, float), np.asarray(sigma, float)

    def h(y):  # far(y)^2 - near(y)^2
        far = np.maximum(y - eta_lo, eta_hi - y)
        near = np.maximum(0.0, np.maximum(eta_lo - y, y - eta_hi))
        return np.square(far) - np.square(near)

    with np.errstate(invalid="ignore", over="ignore"):
        # the predictor's ends inside the domain (clipped: outside, they are the domain's ends)
        top = np.maximum.reduce([h(y_lo), h(y_hi), h(np.clip(eta_lo, y_lo, y_hi)), h(np.clip(eta_hi, y_lo, y_hi))])
        value = 2.0 * top
        far_max = np.maximum(y_hi - eta_lo, eta_hi - y_lo)
        near_min = np.maximum(0.0, np.maximum(eta_lo - y_hi, y_lo - eta_hi))
        value = np.where(scale_free, np.maximum(value, np.square(far_max) - np.square(near_min)), value)
        out = value / (2.0 * np.square(sigma)) * (1.0 + 1e-12)
    # an infinite predictor end or a zero scale: no finite bound
    return np.where(np.isfinite(out), out, np.inf)


@singledispatch
def region_half_oscillation(op, domain: Domain, params: tuple) -> np.ndarray | None:
    """Half the oscillation, per element, of a factor over a region of its parameters (given as
    the region rules' Spans and Windows), where the family has it; None otherwise. It may stand in
    for the factor's constant in the lift (module docstring)."""
    return None


def has_region_oscillation(op) -> bool:
    """Whether the family of the RV Op ``op`` registered :func:`region_half_oscillation`."""
    return region_half_oscillation.dispatch(type(op)) is not region_half_oscillation.dispatch(object)


@region_half_oscillation.register(NormalRV)
def _normal_region_half_oscillation(op, domain, params):
    """A Normal whose location is a window (a predictor over private covariates, or a Span) and
    whose scale reads no private data: :func:`normal_predictor_oscillation` on the window's hull
    ``[o_lo - half, o_hi + half]`` (a free scale where the scale's span is not a point)."""
    mu, sigma = params
    a, b = domain_interval(domain, "Normal")
    o_lo, o_hi, half = region_location(mu, "Normal", "mu")
    s_lo, s_hi = region_span(sigma, "Normal", "sigma")
    return 0.5 * normal_predictor_oscillation(a, b, o_lo - half, o_hi + half, s_lo, s_hi > s_lo)


def _span_half_oscillation(op, domain, params):
    """Half the oscillation of a factor whose parameters all read no private data (Spans over the
    region) and of which at most one varies: ``span_D(T) (eta_hi - eta_lo) / 2`` per element.

    Why (module docstring). The record changes the observed element only, so the fixed parameters
    are the same on both sides and ``g(theta) = eta(theta) (T(x) - T(x'))``: over a region where the
    one varying parameter ranges over ``[lo, hi]`` (the Span, a sound hull of its values over the
    box, from the interval evaluator), ``eta`` ranges over ``eta_range(lo, hi)`` by its
    monotonicity, and the supremum over element pairs of the oscillation is
    :func:`oscillation`. Several varying parameters (a Gamma's shape and rate both free), a
    parameter that reads the record (a Window), or no closed form: None, the family's constant
    stands. No varying parameter: ``g`` is constant over the region, oscillation 0.
    """
    from pymc_dp.rules.region import Span

    if not all(isinstance(p, Span) for p in params):
        return None
    spans = [region_span(p, "oscillation", str(i)) for i, p in enumerate(params)]
    varying = [i for i, (lo, hi) in enumerate(spans) if not np.array_equal(lo, hi)]
    if not varying:
        shape = np.broadcast_shapes(*(np.shape(lo) for lo, _ in spans))
        if _saturated_point(op, domain, spans):
            return np.full(shape, np.inf)
        return np.zeros(shape)
    if len(varying) != 1:
        return None
    (free,) = varying
    fixed = tuple(None if j == free else lo for j, (lo, _) in enumerate(spans))
    try:
        natural = natural_parameter(op, domain, fixed, free)
    except Exception:  # noqa: BLE001 - a domain the family refuses: its constant's rule says why
        return None
    if natural is None:
        return None
    lo, hi = spans[free]
    return 0.5 * oscillation(natural, lo, hi)


def _saturated_point(op, domain, spans) -> bool:
    """Whether a parameter that the interval evaluator returned as one point may be a float that
    *saturated* (tests/fuzz/FOUND.md #12): ``sigmoid(eta)`` is ``0.0`` for every ``eta < -745``
    and ``1.0`` above 37, so a Span of ``p`` collapses to a point while the model's own logp,
    which PyMC computes from the logit stably, still varies over the region. A point whose
    natural parameter is not finite (``logit(0)``, ``logit(1)``, ``ln 0``) proves nothing
    constant: the caller fails closed."""
    for i, (lo, _) in enumerate(spans):
        fixed = tuple(None if j == i else point for j, (point, _) in enumerate(spans))
        try:
            natural = natural_parameter(op, domain, fixed, i)
        except Exception:  # noqa: BLE001 - no natural parameter: nothing to saturate
            continue
        if not isinstance(natural, NaturalParameter):  # None, or a location's own bound: nothing saturates
            continue
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            eta = np.asarray(natural.eta(np.asarray(lo, float)), float)
        if not np.all(np.isfinite(eta)):
            return True
    return False


for _op in (BernoulliRV, BinomialRV, PoissonRV, GeometricRV, ExponentialRV, GammaRV, LogNormalRV, BetaRV,
            LaplaceRV, StudentTRV, CauchyRV):
    region_half_oscillation.register(_op)(_span_half_oscillation)
