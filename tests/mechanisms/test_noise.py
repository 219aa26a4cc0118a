"""OpenDP noise wrappers: the privacy maps are checked against the budget, outputs keep shape and
type, the samplers refuse what they cannot release, and the log-ratio statistics are exact.

The seeded audit samplers (``noise.audit_noise``): each has the closed-form law of OpenDP's
sampler at several scales (chi-square on the pmf, Kolmogorov-Smirnov on the cdf, with fixed
seeds, so these tests are deterministic), OpenDP's map is still checked, the context is reset
after its block (also on an exception), and a release outside it still draws OpenDP's noise."""

from __future__ import annotations

import math
import threading

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


# --------------------------------------------------------------------------- seeded audit noise
def _chi_square_pvalue(z: np.ndarray, pmf, half_width: int) -> float:
    """Chi-square goodness of fit of integer draws ``z`` to ``pmf`` on ``-half_width..half_width``
    (cells of expected count < 5 and the two tails pooled into one cell)."""
    ks = np.arange(-half_width, half_width + 1)
    expected = pmf(ks) * z.size
    observed = np.bincount(z[np.abs(z) <= half_width] + half_width, minlength=ks.size).astype(float)
    big = expected >= 5
    obs = np.r_[observed[big], z.size - observed[big].sum()]
    exp = np.r_[expected[big], z.size - expected[big].sum()]
    return float(stats.chisquare(obs, exp).pvalue)


def _discrete_laplace_pmf(b):
    q = math.exp(-1.0 / b)
    return lambda k: (1 - q) / (1 + q) * q ** np.abs(k)


def _discrete_gaussian_pmf(sigma):
    support = np.arange(-int(40 * sigma) - 5, int(40 * sigma) + 6)
    norm = np.exp(-(support**2) / (2 * sigma**2)).sum()
    return lambda k: np.exp(-(np.asarray(k, float) ** 2) / (2 * sigma**2)) / norm


@pytest.mark.parametrize("b", [0.3, 1.0, 4.0, 25.0])
def test_audit_discrete_laplace_is_the_discrete_laplace(b):
    with noise.audit_noise(np.random.default_rng(11)):
        z = noise.discrete_laplace(np.zeros(200_000, np.int64), b)
    assert z.dtype == np.int64
    assert _chi_square_pvalue(z, _discrete_laplace_pmf(b), int(12 * b) + 3) > 1e-3
    assert _chi_square_pvalue(z, _discrete_laplace_pmf(1.1 * b), int(12 * b) + 3) < 1e-6  # the test sees a 10% error
    q = math.exp(-1.0 / b)
    assert z.var() == pytest.approx(2 * q / (1 - q) ** 2, rel=0.03)  # the scale, not a multiple of it


@pytest.mark.parametrize("sigma", [0.5, 1.0, 3.0, 7.5, 40.0])
def test_audit_discrete_gaussian_is_the_discrete_gaussian(sigma):
    with noise.audit_noise(np.random.default_rng(12)):
        z = noise.discrete_gaussian(np.zeros(200_000, np.int64), sigma)
    assert z.dtype == np.int64
    assert _chi_square_pvalue(z, _discrete_gaussian_pmf(sigma), int(7 * sigma) + 2) > 1e-3
    assert _chi_square_pvalue(z, _discrete_gaussian_pmf(1.1 * sigma), int(7 * sigma) + 2) < 1e-6
    ks = np.arange(-int(40 * sigma) - 5, int(40 * sigma) + 6)
    assert z.var() == pytest.approx(np.sum(ks**2 * _discrete_gaussian_pmf(sigma)(ks)), rel=0.02)


@pytest.mark.parametrize("b", [0.05, 1.0, 30.0])
def test_audit_continuous_noise_has_the_closed_form_cdf(b):
    with noise.audit_noise(np.random.default_rng(13)):
        lap = noise.continuous_laplace(np.full(100_000, 2.0), b)
        gau = noise.continuous_gaussian(np.full(100_000, 2.0), b)
    assert stats.kstest(lap, stats.laplace(loc=2.0, scale=b).cdf).pvalue > 1e-3
    assert stats.kstest(gau, stats.norm(loc=2.0, scale=b).cdf).pvalue > 1e-3
    assert stats.kstest(lap, stats.laplace(loc=2.0, scale=1.1 * b).cdf).pvalue < 1e-6  # the test sees a 10% error
    assert stats.kstest(gau, stats.norm(loc=2.0, scale=1.1 * b).cdf).pvalue < 1e-6


def test_opendp_discrete_laplace_has_the_same_closed_form():
    """The law the seeded sampler copies is OpenDP's: its discrete Laplace against the same pmf
    (OpenDP cannot be seeded: this test fails by chance with probability 1e-6)."""
    z = noise.discrete_laplace(np.zeros(40_000, np.int64), 2.0)
    assert _chi_square_pvalue(z, _discrete_laplace_pmf(2.0), 30) > 1e-6
    z = noise.discrete_gaussian(np.zeros(40_000, np.int64), 3.0)
    assert _chi_square_pvalue(z, _discrete_gaussian_pmf(3.0), 23) > 1e-6


def test_audit_noise_adds_to_the_values_and_keeps_shape_and_type():
    values = np.arange(6).reshape(2, 3)
    with noise.audit_noise(np.random.default_rng(0)):
        d = noise.discrete_laplace(values, 1e-3)  # p(nonzero) ~ 2 e^-1000: the values themselves
        g = noise.discrete_gaussian(values, 1e-3)
        c = noise.continuous_gaussian(values.astype(float), 2.0)
        e = noise.continuous_laplace(np.zeros(0), 1.0)
    np.testing.assert_array_equal(d, values)
    np.testing.assert_array_equal(g, values)
    assert d.dtype == g.dtype == np.int64 and c.shape == (2, 3) and c.dtype == float and e.size == 0


def test_audit_noise_is_reproducible_and_a_release_is_not():
    def draws(rng):
        with noise.audit_noise(rng):
            return [noise.discrete_laplace(np.zeros(50, np.int64), 3.0), noise.continuous_laplace(np.zeros(50), 3.0),
                    noise.discrete_gaussian(np.zeros(50, np.int64), 3.0), noise.continuous_gaussian(np.zeros(50), 3.0)]

    a, b, c = draws(np.random.default_rng(5)), draws(np.random.default_rng(5)), draws(np.random.default_rng(6))
    for x, y, z in zip(a, b, c):
        np.testing.assert_array_equal(x, y)
        assert not np.array_equal(x, z)
    # no context: OpenDP's samplers, unseedable (two calls equal with probability ~ 1e-30)
    assert noise.audit_noise_generator() is None
    assert not np.array_equal(noise.discrete_laplace(np.zeros(50, np.int64), 3.0), noise.discrete_laplace(np.zeros(50, np.int64), 3.0))
    assert not np.array_equal(noise.continuous_laplace(np.zeros(50), 3.0), noise.continuous_laplace(np.zeros(50), 3.0))
    np.random.seed(0)
    first = noise.continuous_gaussian(np.zeros(50), 3.0)
    np.random.seed(0)  # numpy's global state plays no part in a release
    assert not np.array_equal(first, noise.continuous_gaussian(np.zeros(50), 3.0))


def test_audit_noise_still_checks_the_privacy_map():
    with noise.audit_noise(np.random.default_rng(0)):
        with pytest.raises(PrivacyError, match="more than the budget"):
            noise.discrete_laplace(np.zeros(3, np.int64), 1.0, sensitivity=2, epsilon=1.0)
        with pytest.raises(PrivacyError, match="more than the budget"):
            noise.continuous_laplace(np.zeros(3), 1.0, sensitivity=2.0, epsilon=1.0)
        with pytest.raises(PrivacyError, match="more than the budget"):
            noise.continuous_gaussian(np.zeros(3), 0.1, sensitivity=1.0, epsilon=1.0, delta=1e-6)
        with pytest.raises(PrivacyError, match="more than the budget"):
            noise.discrete_gaussian(np.zeros(3, np.int64), 0.1, sensitivity=1.0, epsilon=1.0, delta=1e-6)
        with pytest.raises(PrivacyError, match="scale"):
            noise.continuous_laplace(np.zeros(3), math.nan)
        assert noise.discrete_laplace(np.zeros(3, np.int64), 2.0, sensitivity=2, epsilon=1.0).shape == (3,)


def test_audit_noise_context_is_reset_after_the_block():
    rng, inner = np.random.default_rng(0), np.random.default_rng(1)
    with noise.audit_noise(rng) as got:
        assert got is rng and noise.audit_noise_generator() is rng
        with noise.audit_noise(inner):
            assert noise.audit_noise_generator() is inner
        assert noise.audit_noise_generator() is rng
        seen = []
        thread = threading.Thread(target=lambda: seen.append(noise.audit_noise_generator()))
        thread.start()
        thread.join()
        assert seen == [None]  # another thread does not see it
    assert noise.audit_noise_generator() is None
    with pytest.raises(ZeroDivisionError):
        with noise.audit_noise(rng):
            1 / 0
    assert noise.audit_noise_generator() is None
    with pytest.raises(TypeError, match="Generator"):
        with noise.audit_noise(0):
            pass
    assert noise.audit_noise_generator() is None


@pytest.mark.parametrize("fn", [noise.continuous_laplace, noise.continuous_gaussian])
def test_audit_continuous_noise_leaves_no_trace_of_the_centre(fn):
    """On the grid, the outputs for two centres are the same draws shifted by a whole number of
    grid steps: their difference is one number. Float noise added to a float centre
    (``rng.laplace(loc, b)``) is rounded in a pattern that depends on the centre (Mironov 2012),
    and the audit's float log-ratio statistic saw it (a lower bound of 1.05 on a claim of 1)."""
    tx, ty, b = -3 * math.sqrt(2), -2 * math.sqrt(2), math.sqrt(2)  # the Fourier coin's coefficients
    with noise.audit_noise(np.random.default_rng(0)):
        zx = fn(np.full(100_000, tx), b)
    with noise.audit_noise(np.random.default_rng(0)):
        zy = fn(np.full(100_000, ty), b)
    assert np.unique(zy - zx).size == 1 and (zy - zx)[0] == pytest.approx(ty - tx, abs=1e-9 * b)
    rounded = np.random.default_rng(0).laplace(tx, b, 100_000), np.random.default_rng(0).laplace(ty, b, 100_000)
    assert np.unique(rounded[1] - rounded[0]).size > 1  # what the grid avoids
    if fn is noise.continuous_laplace:
        # the event the audit found: {log-ratio <= -1.0000000000000004} (float rounding; exactly
        # -1 in reals), P_y / P_x = e^1.47 for float noise, within e^1 on the grid
        g, t = noise.laplace_log_ratio([tx], [ty], b), -1.0000000000000004
        with noise.audit_noise(np.random.default_rng(1)):
            zy = fn(np.full(100_000, ty), b)
        kx, ky = np.sum(g(zx[:, None]) <= t), np.sum(g(zy[:, None]) <= t)
        fx, fy = np.sum(g(rounded[0][:, None]) <= t), np.sum(g(np.random.default_rng(1).laplace(ty, b, 100_000)[:, None]) <= t)
        assert ky <= 1.15 * math.e * kx and fy > 1.3 * math.e * fx, (kx, ky, fx, fy)


def test_audit_continuous_noise_on_large_values_keeps_its_scale():
    """Values far above the scale make the grid coarser (every index below 2^50), never the noise wrong."""
    with noise.audit_noise(np.random.default_rng(4)):
        z = noise.continuous_laplace(np.full(50_000, 3e9), 1.0)
    assert stats.kstest(z - 3e9, stats.laplace(scale=1.0).cdf).pvalue > 1e-3
