"""Brute force: the Student-t and Cauchy locations' oscillation (pymc_dp.rules.studentt_location).

Ground truth from PyMC's own ``logp`` where it is cheap (the pair range), and from the
log-density directly over grids of locations and records otherwise: ``sup over x, x'`` of
``max_mu g - min_mu g`` with ``g = logp(x | mu) - logp(x' | mu)``, i.e. the largest range over
records of ``logp(x | mu1) - logp(x | mu2)`` over location pairs. The certified bound must never
be below it (sound) and must be within 1.5% of it (tight; the table's cells move R by about 1 /
1600 of its total variation, and a grid's supremum is itself a little below the truth).
"""

from __future__ import annotations

import numpy as np
import pymc as pm
import pytensor
import pytensor.tensor as pt
import pytest
from scipy.integrate import quad

from pymc_dp.domains import Interval
from pymc_dp.rules.oscillation import StudentTLocation, natural_parameter, oscillation

#: (domain ends, nu, scale): a Student-t, two Cauchys (one with a scale 40 times below the domain)
SETTINGS = [(-1.0, 1.0, 3.0, 0.3), (-1.0, 1.0, 1.0, 0.5), (0.0, 5.0, 10.0, 1.0), (-1.0, 1.0, 1.0, 0.05)]
INTERVALS = [(-0.2, 0.3), (-1.0, 1.0), (-3.0, 3.0), (0.5, 4.0), (2.0, 30.0)]


def _psi(u, nu):
    return -0.5 * (nu + 1.0) * np.log1p(np.square(u) / nu)


def _brute(a, b, nu, s, lo, hi, n_mu=161):
    mu = np.linspace(lo, hi, n_mu)
    x = np.linspace(a, b, 2001)  # the ends, and within 1e-3 of the domain of every critical point
    logp = _psi((x[None, :] - mu[:, None]) / s, nu)  # (mu, x)
    best = 0.0
    for row in logp:
        h = row[None, :] - logp  # h(x) = logp(x | mu1) - logp(x | mu2), over mu2
        best = max(best, float((h.max(axis=1) - h.min(axis=1)).max()))
    return best


@pytest.mark.parametrize("setting", SETTINGS)
def test_the_pair_range_is_the_range_over_records(setting):
    """R(mu1, mu2) in closed form (the ends and the two critical points) against PyMC's logp on a
    fine record grid: never below it, and equal to 1e-6."""
    a, b, nu, s = setting
    loc = StudentTLocation(a, b, nu, s)
    x = np.linspace(a, b, 20001)
    mu = pt.dscalar("mu")
    logp = pytensor.function([mu], pm.logp(pm.StudentT.dist(nu=nu, mu=mu, sigma=s), x))
    rng = np.random.default_rng(0)
    for mu1, mu2 in rng.uniform(a - 3 * s, b + 3 * s, size=(12, 2)):
        h = logp(mu1) - logp(mu2)
        truth = float(h.max() - h.min())
        claimed = float(loc.pair_range(mu1, mu2))
        assert claimed >= truth - 1e-12
        assert claimed == pytest.approx(truth, rel=1e-6, abs=1e-9)


@pytest.mark.parametrize("setting", SETTINGS)
@pytest.mark.parametrize("interval", INTERVALS)
def test_the_oscillation_bounds_the_brute_force_supremum_within_a_few_tenths_of_a_percent(setting, interval):
    a, b, nu, s = setting
    loc = StudentTLocation(a, b, nu, s)
    claimed = float(loc.oscillation(*interval))
    truth = _brute(a, b, nu, s, *interval)
    assert claimed >= truth
    # the absolute slack is a fixed fraction of R's total variation: a small supremum (the Cauchy
    # with a scale 40 times below the domain, seen from far away) is looser relative to itself
    assert claimed <= truth * 1.015 + 0.1, (claimed, truth)


@pytest.mark.parametrize("setting", SETTINGS)
def test_half_lines_and_the_whole_line(setting):
    """Unbounded intervals are finite (the data domain is bounded) and bound every bounded
    interval inside them; the bound is monotone in the interval, 0 on a point, inf for NaN."""
    a, b, nu, s = setting
    loc = StudentTLocation(a, b, nu, s)
    whole = float(loc.oscillation(-np.inf, np.inf))
    right = float(loc.oscillation(0.0, np.inf))
    left = float(loc.oscillation(-np.inf, 0.0))
    assert np.isfinite(whole) and right <= whole and left <= whole
    assert right >= _brute(a, b, nu, s, 0.0, 1e3 * (b - a + s), n_mu=401)
    assert whole >= _brute(a, b, nu, s, -1e3 * (b - a + s), 1e3 * (b - a + s), n_mu=401)
    lo = np.array([-2.0, -1.0, -0.5, 0.0])
    values = loc.oscillation(lo[:, None], lo[:, None] + np.array([0.1, 0.5, 1.0, 4.0])[None, :])
    assert np.all(np.diff(values, axis=1) >= 0)  # a longer interval from the same lower end
    assert float(loc.oscillation(0.3, 0.3)) == 0.0
    assert float(loc.oscillation(np.nan, 1.0)) == np.inf


@pytest.mark.parametrize("setting", SETTINGS)
def test_the_variation_bound_holds_the_integral_of_the_slope_spread(setting):
    """``_variation(p, q) >= int_p^q Lambda``, Lambda(mu) the spread of psi' over the records seen
    from mu (on a record grid holding the ends): by adaptive quadrature on pieces inside,
    straddling and beyond the monotone ends (where the bound is the exact integral)."""
    a, b, nu, s = setting
    loc = StudentTLocation(a, b, nu, s)
    x = np.linspace(a, b, 2001)

    def spread(mu):  # over the records: the grid, and the records where psi' peaks
        u = (np.clip(np.concatenate([x, mu + s * np.sqrt(nu) * np.array([-1.0, 1.0])]), a, b) - mu) / s
        slope = -(nu + 1.0) * u / (nu + np.square(u)) / s
        return slope.max() - slope.min()

    r = s * np.sqrt(nu)
    for p, q in [(a - r - 5.0, a - r), (a - r - 0.3, a + 0.2), (a, b), (b - 0.1, b + r + 0.4), (b + r, b + r + 50.0)]:
        kinks = [k for k in (a - r, a + r, b - r, b + r) if p < k < q]  # where -+sqrt(nu) enter the reach
        integral, _ = quad(spread, p, q, points=kinks or None, limit=200, epsabs=1e-10, epsrel=1e-9)
        assert float(loc._variation(p, q)) >= integral * (1.0 - 1e-6)


def test_the_natural_parameter_of_the_locations_and_of_what_is_left_alone():
    st = pm.StudentT.dist(nu=3, mu=0.0, sigma=1.0).owner.op
    cauchy = pm.Cauchy.dist(alpha=0.0, beta=1.0).owner.op
    found = natural_parameter(st, Interval(-1, 1), (np.asarray(3.0), None, np.asarray(0.5)), 1)
    assert found == StudentTLocation(-1.0, 1.0, 3.0, 0.5)
    assert natural_parameter(cauchy, Interval(-1, 1), (None, np.asarray(0.5)), 0) == StudentTLocation(-1.0, 1.0, 1.0, 0.5)
    assert float(oscillation(found, -0.5, 0.5)) == float(found.oscillation(-0.5, 0.5))
    # the scale or nu free, or a scale that differs between elements: no closed form here
    assert natural_parameter(st, Interval(-1, 1), (np.asarray(3.0), np.asarray(0.0), None), 2) is None
    assert natural_parameter(st, Interval(-1, 1), (None, np.asarray(0.0), np.asarray(1.0)), 0) is None
    assert natural_parameter(cauchy, Interval(-1, 1), (np.asarray(0.0), None), 1) is None
    assert natural_parameter(st, Interval(-1, 1), (np.asarray(3.0), None, np.asarray([0.5, 0.6])), 1) is None
