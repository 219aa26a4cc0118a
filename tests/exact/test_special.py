"""pymc_dp.exact.special: log CDFs, survival functions and interval masses of the Gamma, Beta and
Normal laws, accurate in both tails (checked against high-precision quadrature and SciPy).

``pymc_dp.audit`` reads the truncated posteriors through these."""

import numpy as np
import pytest
from scipy import special

from pymc_dp.exact import log_beta_cdf, log_beta_mass, log_beta_sf, log_gamma_mass, log_normal_mass


def _mp_log_mass(logpdf, lo, hi):
    """``ln int_lo^hi exp(logpdf)`` with mpmath (any exponent range), split at many points."""
    mpmath = pytest.importorskip("mpmath")
    mpmath.mp.dps = 30
    pts = mpmath.linspace(mpmath.mpf(lo), mpmath.mpf(hi), 129)
    return float(mpmath.log(mpmath.quad(lambda t: mpmath.exp(logpdf(t)), pts)))


@pytest.mark.parametrize(
    "a, b, lo, hi",
    [(2.0, 3.0, 0.3, 0.4), (301.0, 1.0, 0.2, 0.6), (1.0, 5000.0, 0.4, 0.6), (3.5, 2000.0, 0.5, 0.9),
     (120.0, 80.0, 0.01, 0.99), (40.0, 900.0, 0.7, 0.71), (0.5, 0.7, 1e-9, 1e-3)],
)
def test_log_beta_mass_far_in_the_tails(a, b, lo, hi):
    import mpmath

    ref = _mp_log_mass(
        lambda t: (a - 1) * mpmath.log(t) + (b - 1) * mpmath.log(1 - t) - mpmath.log(mpmath.beta(a, b)), lo, hi
    )
    assert float(log_beta_mass(a, b, lo, hi)) == pytest.approx(ref, rel=1e-8, abs=1e-9)


def test_log_beta_cdf_and_sf_match_scipy_where_scipy_is_accurate():
    a, b = np.meshgrid([0.5, 2.0, 30.0], [0.7, 5.0, 80.0])
    for x in (0.05, 0.3, 0.5, 0.8, 0.97):
        assert np.allclose(log_beta_cdf(a, b, x), np.log(special.betainc(a, b, x)), rtol=1e-12)
        assert np.allclose(log_beta_sf(a, b, x), np.log(special.betaincc(a, b, x)), rtol=1e-12)
    # far below the scipy range: the continued fraction keeps going
    assert float(log_beta_cdf(5000.0, 1.0, 0.5)) == pytest.approx(5000 * np.log(0.5), rel=1e-12)
    assert float(log_beta_sf(1.0, 5000.0, 0.5)) == pytest.approx(5000 * np.log(0.5), rel=1e-12)


@pytest.mark.parametrize("mu, sigma, lo, hi", [(0, 1, -1, 2), (0, 1, 40, 41), (0, 1, -41, -40), (3, 0.1, -1, 1), (0, 2, -np.inf, 0.5)])
def test_log_normal_mass(mu, sigma, lo, hi):
    import mpmath

    mpmath.mp.dps = 40
    if lo >= mu:  # survival side: no cancellation in the upper tail
        ref = float(mpmath.log(mpmath.ncdf(-lo, -mu, sigma) - mpmath.ncdf(-hi, -mu, sigma)))
    else:
        ref = float(mpmath.log(mpmath.ncdf(hi, mu, sigma) - mpmath.ncdf(lo, mu, sigma)))
    assert float(log_normal_mass(mu, sigma, lo, hi)) == pytest.approx(ref, rel=1e-10)


def test_log_gamma_mass_far_in_the_tails():
    import mpmath

    for a, x, y in [(2.0, 0.5, 3.0), (500.0, 10.0, 20.0), (3.0, 400.0, 500.0)]:
        ref = _mp_log_mass(lambda t: (a - 1) * mpmath.log(t) - t - mpmath.loggamma(a), x, y)
        assert float(log_gamma_mass(a, x, y)) == pytest.approx(ref, rel=1e-8)
