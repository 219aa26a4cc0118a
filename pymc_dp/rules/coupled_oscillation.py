"""The coupled oscillation: a region's per-draw loss that shrinks with the region's width even
where the record changes the parameters (a GLM on private covariates).

Why (``docs/theory/oscillation.md``, "The coupled oscillation"). One draw from the posterior on a
region ``Theta`` is ``eps_0``-DP with ``eps_0 = sup over neighbours of osc_Theta g``,
``g(theta) = ln p(r | theta) - ln p(r' | theta)`` (:mod:`pymc_dp.rules.oscillation`). When the
record ``r = (x, y)`` enters the parameters (``eta(x, theta)``), ``A(eta)`` no longer cancels and
the closed form there does not apply; its relaxation (the Normal's window hull) treats the
predictor of a record at two parameters as free in the hull, which does not shrink with the
region. Here the two records are taken apart instead:

.. math:: \\mathrm{osc}_\\Theta g \\le \\mathrm{osc}_\\Theta \\ln p(r \\mid \\cdot) +
          \\mathrm{osc}_\\Theta \\ln p(r' \\mid \\cdot) \\le 2 \\sup_r \\mathrm{osc}_\\Theta \\ln p(r \\mid \\cdot),

so half the oscillation (what stands in for the factor's constant in the lift) is at most
``sup_r osc_Theta ln p(r | .)``. At a fixed record the log-density ``f(y, p_1, ..., p_k)`` reads
the region through its parameters only, and the set of their values ``{p(x, theta)}`` lies in
the product of their ranges ``[lo_k(x), hi_k(x)]``, each of width at most ``W_k`` (a Window's
``slide``: the predictor's width at a fixed record; a Span's ``hi - lo``). Within that product
box, moving one coordinate at a time, the mean-value theorem gives

.. math:: \\mathrm{osc}\\, f \\le \\sum_k S_k W_k,
          \\qquad S_k = \\sup |\\partial f / \\partial p_k|

with each supremum over the whole box of parameter values (a Window's hull, a Span) and the
domain's outcomes ``y``: a sound bound, linear in the widths, so it vanishes with the region.
Each rule below states ``f``, its partial derivatives and their suprema, and is checked by
brute force in ``tests/rules/test_coupled_oscillation.py`` (records on a grid of the domain,
parameters on a grid of the region, ``sup_r (max - min)`` of ``ln p(r | theta)``; the rule
must be above it).

Registered per RV Op by :func:`functools.singledispatch`; a family or a parametrisation without a
rule returns None (the factor keeps its other certificates).
"""

from __future__ import annotations

from functools import singledispatch

import numpy as np
from pytensor.tensor.random.basic import BernoulliRV, BinomialRV, NormalRV, PoissonRV

from pymc_dp.domains import Domain
from pymc_dp.rules.base import domain_interval, integer_domain
from pymc_dp.rules.region import Span, Window

__all__ = ["has_coupled_oscillation", "region_half_coupled_oscillation"]


def _range_and_width(p, space: str):
    """``(lo, hi, width)`` of a parameter over the region on ``space``: a Window on that space with
    a known slide (its hull and slide), or a Span (natural space only; its range, width hi - lo).
    None when the parameter is neither."""
    if isinstance(p, Window):
        if p.space != space or p.slide is None or not p.sliding:
            return None
        hull = p.hull
        return np.asarray(hull.lo, float), np.asarray(hull.hi, float), np.asarray(p.slide, float)
    if isinstance(p, Span) and space == "natural":
        lo, hi = np.asarray(p.lo, float), np.asarray(p.hi, float)
        return lo, hi, hi - lo
    return None


def _fail_closed(x) -> np.ndarray:
    x = np.asarray(x, float)
    return np.where(np.isnan(x), np.inf, x)


@singledispatch
def region_half_coupled_oscillation(op, domain: Domain, params: tuple) -> np.ndarray | None:
    """Per element, ``sup_r osc_Theta ln p(r | .)`` over the region given as Spans and Windows
    (with slides), or None (module docstring)."""
    return None


def has_coupled_oscillation(op) -> bool:
    """Whether the family of the RV Op ``op`` registered :func:`region_half_coupled_oscillation`."""
    dispatch = region_half_coupled_oscillation.dispatch
    return dispatch(type(op)) is not dispatch(object)


@region_half_coupled_oscillation.register(NormalRV)
def _normal(op, domain, params):
    """``f = -(y - mu)^2 / (2 s^2) - ln s``, ``y in [a, b]``, ``mu`` in ``[m_lo, m_hi]``, ``s`` in
    ``[s_lo, s_hi]`` (``s_lo > 0``):

    * ``df/dmu = (y - mu) / s^2``, ``|.| <= far / s_lo^2`` with ``far = max(|b - m_lo|, |m_hi - a|)``;
    * ``df/ds = (y - mu)^2 / s^3 - 1 / s``, between ``near^2 / s_hi^3 - 1 / s_lo`` and
      ``far^2 / s_lo^3 - 1 / s_hi`` (``near`` the distance from ``[a, b]`` to ``[m_lo, m_hi]``),
      so ``|.|`` is at most the larger absolute value of the two.
    """
    mu, sigma = params
    m = _range_and_width(mu, "natural")
    s = _range_and_width(sigma, "natural") if isinstance(sigma, Span) else None
    if m is None or s is None:
        return None
    a, b = domain_interval(domain, "Normal")
    m_lo, m_hi, w_mu = m
    s_lo, s_hi, w_s = s
    with np.errstate(all="ignore"):
        far = np.maximum(np.abs(b - m_lo), np.abs(m_hi - a))
        near = np.maximum(0.0, np.maximum(m_lo - b, a - m_hi))
        s_mu = far / np.square(s_lo)
        d_s = np.maximum(np.abs(np.square(far) / s_lo**3 - 1.0 / s_hi), np.abs(np.square(near) / s_hi**3 - 1.0 / s_lo))
        out = s_mu * w_mu + np.where(w_s > 0, d_s * w_s, 0.0)
    return np.where(s_lo > 0, _fail_closed(out), np.inf)


def _sigmoid(x):
    with np.errstate(over="ignore"):
        return 1.0 / (1.0 + np.exp(-np.asarray(x, float)))


def _canonical(param, space: str, domain, family: str, mean, trials=1.0) -> np.ndarray | None:
    """A canonical link: ``f = y eta - A(eta) + h(y)``, ``df/deta = y - A'(eta)`` with the mean
    ``A'`` increasing, so over the counts ``{lo..hi}`` and ``eta in [e_lo, e_hi]`` ``|df/deta|`` is at
    most ``max(|hi - A'(e_lo)|, |A'(e_hi) - lo|)``; times the window's slide. For a probability
    (logit scale) the model's float64 ``ln p`` and ``ln(1 - p)`` err near 0 and 1: twice ``trials``
    times that error at the hull's ends is added (:func:`~pymc_dp.rules.oscillation.probability_error`,
    largest at an end: it is convex in p)."""
    from pymc_dp.rules.oscillation import probability_error

    e = _range_and_width(param, space)
    if e is None:
        return None
    y_lo, y_hi = integer_domain(domain, family)
    e_lo, e_hi, w = e
    with np.errstate(over="ignore", invalid="ignore"):
        score = np.maximum(np.abs(y_hi - mean(e_lo)), np.abs(mean(e_hi) - y_lo))
        out = score * w
        if space == "logit":
            error = np.maximum(probability_error(_sigmoid(e_lo)), probability_error(_sigmoid(e_hi)))
            out = out + 2.0 * np.asarray(trials, float) * np.where(w > 0, error, 0.0)
        return _fail_closed(out)


@region_half_coupled_oscillation.register(BernoulliRV)
def _bernoulli(op, domain, params):
    """Logit link: ``f = y eta - ln(1 + e^eta)``, ``A'(eta) = sigmoid(eta)`` (:func:`_canonical`)."""
    (p,) = params
    return _canonical(p, "logit", domain, "Bernoulli", _sigmoid)


@region_half_coupled_oscillation.register(BinomialRV)
def _binomial(op, domain, params):
    """Logit link, ``n`` public: ``f = y eta - n ln(1 + e^eta) + ln C(n, y)``, ``A'(eta) = n
    sigmoid(eta)`` (:func:`_canonical`)."""
    n, p = params
    if not (isinstance(n, Span) and n.is_point):
        return None
    n = np.asarray(n.lo, float)
    return _canonical(p, "logit", domain, "Binomial", lambda e: n * _sigmoid(e), trials=n)


@region_half_coupled_oscillation.register(PoissonRV)
def _poisson(op, domain, params):
    """Log link: ``f = y eta - e^eta - ln y!``, ``A'(eta) = e^eta`` (:func:`_canonical`)."""
    (mu,) = params
    return _canonical(mu, "log-mean", domain, "Poisson", np.exp)
