"""OpenDP noise wrappers: the privacy maps are checked against the budget, outputs keep shape and
type, the samplers refuse what they cannot release, and the log-ratio statistics are exact."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from pymc_dp.exceptions import PrivacyError
from pymc_dp.mechanisms import noise


def test_laplace_maps_are_checked_against_the_budget():
    noise.continuous_laplace(np.zeros(0), 2.0, sensitivity=2.0, epsilon=1.0)  # 2 / 2 = 1: allowed
    with pytest.raises(PrivacyError, match="more than the budget"):
        noise.continuous_laplace(np.zeros(0), 1.0, sensitivity=2.0, epsilon=1.0)
    with pytest.raises(PrivacyError, match="more than the budget"):
        noise.discrete_laplace(np.zeros(0, np.int64), 1.0, sensitivity=3, epsilon=1.0)


def test_shapes_types_and_refusals():
    out = noise.discrete_laplace(np.arange(6).reshape(2, 3), 1.0)
    assert out.shape == (2, 3) and out.dtype == np.int64
    out = noise.continuous_gaussian(np.zeros((3, 2)), 1.0)
    assert out.shape == (3, 2) and out.dtype == float
    with pytest.raises(TypeError, match="integer"):
        noise.discrete_laplace(np.array([0.5]), 1.0)
    with pytest.raises(TypeError, match="integer"):
        noise.discrete_gaussian(np.array([0.5]), 1.0)
    with pytest.raises(PrivacyError, match="finite"):
        noise.continuous_laplace(np.array([np.inf]), 1.0)
    with pytest.raises(PrivacyError, match="scale"):
        noise.continuous_laplace(np.zeros(1), 0.0)
    with pytest.raises(PrivacyError, match="scale"):
        noise.continuous_gaussian(np.zeros(1), -1.0)


def test_noise_has_the_stated_spread():
    z = noise.continuous_laplace(np.zeros(20_000), 2.0)
    assert stats.kstest(z, stats.laplace(scale=2.0).cdf).pvalue > 1e-4
    g = noise.continuous_gaussian(np.zeros(20_000), 3.0)
    assert stats.kstest(g, stats.norm(scale=3.0).cdf).pvalue > 1e-4
    d = noise.discrete_gaussian(np.zeros(20_000, np.int64), 3.0)
    assert abs(d.std() - 3.0) < 0.1 and np.all(d == np.round(d))


def test_log_ratios_are_the_densities_log_ratios():
    tx, ty, b = np.array([0.0, 1.0]), np.array([1.0, -1.0]), np.array([0.5, 2.0])
    z = np.array([[0.3, 0.2], [-1.0, 4.0]])
    want = stats.laplace.logpdf(z, tx, b).sum(1) - stats.laplace.logpdf(z, ty, b).sum(1)
    np.testing.assert_allclose(noise.laplace_log_ratio(tx, ty, b)(z), want, rtol=1e-12)
    want = stats.norm.logpdf(z, tx, b).sum(1) - stats.norm.logpdf(z, ty, b).sum(1)
    np.testing.assert_allclose(noise.gaussian_log_ratio(tx, ty, b)(z), want, rtol=1e-12)


def test_gaussian_delta_is_the_hockey_stick_divergence():
    """delta(eps) = E_P[(1 - e^{eps - L})_+] for N(mu, 1) against N(0, 1), by quadrature."""
    for mu, eps in [(0.5, 0.3), (1.0, 1.0), (2.0, 0.5)]:
        x = np.linspace(-12, 14, 200_001)
        p, q = stats.norm.pdf(x, mu), stats.norm.pdf(x)
        numeric = np.trapezoid(np.maximum(p - math.exp(eps) * q, 0.0), x)
        assert noise.gaussian_delta(mu, eps) == pytest.approx(numeric, rel=1e-6, abs=1e-12)
