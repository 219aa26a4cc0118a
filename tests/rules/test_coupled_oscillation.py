"""Brute force: the coupled oscillation (pymc_dp/rules/coupled_oscillation.py) of GLM factors whose
predictor reads a private covariate, over boxes of the parameters.

Ground truth from PyMC's own ``logp``: the predictor ``eta = b + w x`` with ``x`` on a grid of its
domain and the outcome ``y`` on its domain (integers enumerated), the parameters on a grid of the
box (ends included); ``sup over record pairs (r, r') of [max_theta g - min_theta g]`` with
``g = logp(r | theta) - logp(r' | theta)``. Twice the rule (half the oscillation) must be above
it (sound), and not far above it (useful); and it must shrink with the box (the point of it).
"""

from __future__ import annotations

import itertools

import numpy as np
import pymc as pm
import pytest

from pymc_dp.domains import Binary, Integers, Interval
from pymc_dp.rules.coupled_oscillation import has_coupled_oscillation, region_half_coupled_oscillation
from pymc_dp.rules.region import Span, Window

X_HALF = 1.0  # x in [-1, 1]: centre 0, half-width 1
XS = np.linspace(-X_HALF, X_HALF, 9)


def _window(b, w, space):
    """The box rules' Window of ``eta = b + w x`` over ``b in b, w in w`` (x centred at 0)."""
    half = max(abs(w[0]), abs(w[1])) * X_HALF
    slide = (b[1] - b[0]) + X_HALF * (w[1] - w[0])
    return Window(np.asarray(b[0]), np.asarray(b[1]), np.asarray(half), space, None, True, np.asarray(slide))


def _brute(dist_of, ys, b, w, extra=((None, None),)):
    """sup over record pairs of the oscillation of g over a grid of the box."""
    grid = [np.linspace(*b, 7), np.linspace(*w, 7)] + [np.linspace(*e, 5) for e in extra if e[0] is not None]
    thetas = np.array(list(itertools.product(*grid)))  # (T, k)
    records = np.array(list(itertools.product(XS, ys)))  # (R, 2)
    eta = thetas[None, :, 0] + thetas[None, :, 1] * records[:, None, 0]  # (R, T)
    rest = thetas[None, :, 2] if thetas.shape[1] > 2 else None
    dist = dist_of(eta, rest)
    y = np.broadcast_to(records[:, None, 1], eta.shape)
    logp = np.asarray(pm.logp(dist, y.astype(dist.dtype)).eval(), float)  # (R, T)
    # the oscillation of g = logp_r - logp_r' over the grid, for every pair, exactly
    best = 0.0
    for i in range(len(records)):
        g = logp[i][None, :] - logp
        best = max(best, float(np.max(g.max(axis=1) - g.min(axis=1))))
    return best


CASES = {
    "Normal mu, sigma fixed": (
        lambda eta, s: pm.Normal.dist(mu=eta, sigma=0.7), np.linspace(-2, 3, 11), Interval(-2, 3),
        lambda win: (win, Span(np.asarray(0.7), np.asarray(0.7))), "natural", (None, None)),
    "Normal mu, sigma free": (
        lambda eta, s: pm.Normal.dist(mu=eta, sigma=s), np.linspace(-2, 3, 11), Interval(-2, 3),
        lambda win, s=(0.5, 0.8): (win, Span(np.asarray(s[0]), np.asarray(s[1]))), "natural", (0.5, 0.8)),
    "Bernoulli logit": (
        lambda eta, s: pm.Bernoulli.dist(logit_p=eta), np.array([0, 1]), Binary(),
        lambda win: (win,), "logit", (None, None)),
    "Binomial logit": (
        lambda eta, s: pm.Binomial.dist(n=4, logit_p=eta), np.arange(5), Integers(0, 4),
        lambda win: (Span(np.asarray(4.0), np.asarray(4.0)), win), "logit", (None, None)),
    "Poisson log": (
        lambda eta, s: pm.Poisson.dist(mu=np.exp(eta)), np.arange(9), Integers(0, 8),
        lambda win: (win,), "log-mean", (None, None)),
}
BOXES = [((0.2, 0.4), (0.8, 1.1)), ((-0.5, 0.5), (-0.3, 0.6)), ((1.0, 1.05), (1.5, 1.52))]


@pytest.mark.parametrize("label", list(CASES))
@pytest.mark.parametrize("box", BOXES)
def test_the_coupled_oscillation_bounds_the_brute_force(label, box):
    dist_of, ys, domain, params_of, space, extra = CASES[label]
    b, w = box
    op = dist_of(np.zeros(1), np.ones(1)).owner.op
    assert has_coupled_oscillation(op)
    half = region_half_coupled_oscillation(op, domain, params_of(_window(b, w, space)))
    assert half is not None
    brute = _brute(dist_of, ys, b, w, (extra,))
    assert 2 * float(half) >= brute * (1 - 1e-9), (2 * float(half), brute)
    assert 2 * float(half) <= 6 * brute + 1e-9, (2 * float(half), brute)


@pytest.mark.parametrize("label", list(CASES))
def test_the_coupled_oscillation_vanishes_with_the_box(label):
    """Halving the box's widths about its centre halves the bound, or more (the suprema of the
    scores shrink too): unlike the hull, it charges a region by its width."""
    dist_of, ys, domain, params_of, space, extra = CASES[label]
    op = dist_of(np.zeros(1), np.ones(1)).owner.op
    b, w = (0.0, 0.4), (0.6, 1.0)
    big = float(region_half_coupled_oscillation(op, domain, params_of(_window(b, w, space))))
    inner = _window((0.1, 0.3), (0.7, 0.9), space)
    small_params = params_of(inner, (0.575, 0.725)) if extra[0] is not None else params_of(inner)  # sigma halved too
    small = float(region_half_coupled_oscillation(op, domain, small_params))
    assert small <= 0.5 * big * (1 + 1e-9)


def test_what_the_coupled_oscillation_does_not_bound():
    """A window without a slide (blocks: only its hull is known), a window on another scale, an
    unknown family: None."""
    normal = pm.Normal.dist(0.0, 1.0).owner.op
    no_slide = Window(np.asarray(0.0), np.asarray(1.0), np.asarray(0.5), "natural", None, True, None)
    assert region_half_coupled_oscillation(normal, Interval(-1, 1), (no_slide, Span(np.asarray(1.0), np.asarray(1.0)))) is None
    poisson = pm.Poisson.dist(1.0).owner.op
    wrong_space = _window((0.0, 0.1), (0.0, 0.1), "logit")
    assert region_half_coupled_oscillation(poisson, Integers(0, 5), (wrong_space,)) is None
    assert not has_coupled_oscillation(pm.Gamma.dist(2.0, 1.0).owner.op)
