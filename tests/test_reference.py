"""The admissible prior and the fit objective (pymc_dp/reference.py, ``split="fit"``)."""

from __future__ import annotations

import numpy as np
import pymc as pm
import pytest
from scipy import integrate, stats

import pymc_dp
from pymc_dp.factors import find_factors
from pymc_dp.reference import AdmissiblePrior, admissible_prior, fit_utility, simulate_domain


def _factors(model, domains):
    private = {v: v.name for v in model.data_vars if v.name in domains}
    return [f for f in find_factors(model, private, domains) if f.is_private]


def _location_model(y, prior_sd=3.0):
    with pm.Model() as model:
        yd = pm.Data("y", y)
        mu = pm.Normal("mu", 0.0, prior_sd)
        pm.Normal("obs", mu, 1.0, observed=yd)
    return model


@pytest.mark.parametrize(
    "domain, shape",
    [
        (pymc_dp.Interval(-2.0, 5.0), (50,)),
        (pymc_dp.Integers(0, 7), (50,)),
        (pymc_dp.Binary(), (50,)),
        (pymc_dp.Box([-1.0, 0.0], [1.0, 3.0]), (50, 2)),
        (pymc_dp.Ball(2.5), (50, 3)),
    ],
)
def test_simulated_covariates_lie_in_their_domain_and_have_its_shape(domain, shape):
    values = simulate_domain(domain, shape, np.random.default_rng(0))
    assert values.shape == shape
    domain.validate("x", values)  # raises outside the domain


def test_admissible_prior_matches_the_conditioned_density_by_quadrature():
    """mu ~ N(0, 3), 20 records y ~ N(mu, 1) declared in [-1, 1]: the admissible density is
    N(mu; 0, 3) (Phi(1 - mu) - Phi(-1 - mu))^20; its quantiles by quadrature against the
    reference's draws (resampled from 100000 prior draws)."""
    n = 20
    model = _location_model(np.zeros(n))
    domains = {"y": pymc_dp.Interval(-1.0, 1.0)}
    ref = admissible_prior(model, _factors(model, domains), domains, seed=3)

    grid = np.linspace(-6, 6, 4001)
    dens = stats.norm.pdf(grid, 0, 3) * (stats.norm.cdf(1 - grid) - stats.norm.cdf(-1 - grid)) ** n
    cdf = integrate.cumulative_trapezoid(dens, grid, initial=0.0)
    cdf /= cdf[-1]
    draws = np.asarray(ref.draws["mu"], float)
    for q in (0.1, 0.5, 0.9):
        exact = np.interp(q, cdf, grid)
        assert abs(np.quantile(draws, q) - exact) < 0.05, q
    # the prior's spread is 3; conditioning on 20 records in [-1, 1] makes it about a tenth
    exact_spread = 0.5 * (np.interp(0.841345, cdf, grid) - np.interp(0.158655, cdf, grid))
    assert ref.spreads["mu"][0] == pytest.approx(exact_spread, rel=0.05)
    assert exact_spread < 0.1 * 3.0
    assert ref.conditioned == ("obs",) and not ref.thin and ref.ess > 1000


def test_the_reference_reads_no_data_value():
    """Two datasets of the same shape give the same reference, bit for bit."""
    domains = {"y": pymc_dp.Interval(-1.0, 1.0)}
    refs = []
    for y in (np.full(20, -0.9), np.random.default_rng(1).uniform(-1, 1, 20)):
        model = _location_model(y)
        refs.append(admissible_prior(model, _factors(model, domains), domains, seed=0, candidates=5000))
    np.testing.assert_array_equal(refs[0].draws["mu"], refs[1].draws["mu"])
    assert refs[0].ess == refs[1].ess


def test_a_family_without_a_cdf_is_named_and_left_unconditioned():
    with pm.Model() as model:
        yd = pm.Data("y", np.zeros(10, dtype="int64"))
        p = pm.Dirichlet("p", np.ones(3))
        pm.Categorical("obs", p, observed=yd)
    domains = {"y": pymc_dp.Integers(0, 2)}
    ref = admissible_prior(model, _factors(model, domains), domains, seed=0, candidates=2000)
    assert ref.conditioned == () and "obs" in ref.not_conditioned
    assert "not conditioned: obs" in ref.describe()


def test_fit_utility_is_the_kernel_smoothed_admissible_mass():
    """Four draws, a location ``a`` and a scale ``s`` (log space): the smoothed mass computed by
    hand with scipy's normal CDF, per draw, multiplied over the RVs and averaged."""
    draws = {"a": np.array([-2.0, 0.0, 1.0, 3.0]), "s": np.array([0.5, 1.0, 2.0, 4.0])}
    spreads = {"a": np.array([2.0]), "s": np.array([np.log(2.0)])}
    ref = AdmissiblePrior(draws, spreads, 4, 4.0, ("y",), {}, {"a": "identity", "s": "log"})
    box = {"a": (-1.0, 1.0), "s": (2.0, np.inf)}
    h_a, h_s = 1.06 * 2.0 * 4.0**-0.2, 1.06 * np.log(2.0) * 4.0**-0.2
    mass_a = stats.norm.cdf((1.0 - draws["a"]) / h_a) - stats.norm.cdf((-1.0 - draws["a"]) / h_a)
    mass_s = 1.0 - stats.norm.cdf((np.log(2.0) - np.log(draws["s"])) / h_s)
    assert fit_utility(box, ref) == pytest.approx(np.log(np.mean(mass_a * mass_s)), rel=1e-10)
    # wider is never worse; a box of zero width is -inf; a box far out in the tail stays finite
    assert fit_utility({"a": (-5.0, 5.0)}, ref) > fit_utility({"a": (-1.0, 1.0)}, ref)
    assert fit_utility({"a": (0.5, 0.5)}, ref) == -np.inf
    assert np.isfinite(fit_utility({"a": (40.0, 41.0)}, ref))


def _scale_model(n=40, seed=0):
    """A regression on a private covariate (the box solver's case)."""
    rng = np.random.default_rng(seed)
    x = rng.uniform(0, 1, n)
    y = np.clip(0.2 + 0.5 * x + 0.3 * rng.normal(size=n), -1, 1)
    with pm.Model() as model:
        xd, yd = pm.Data("x", x), pm.Data("y", y)
        a = pm.Normal("a", 0.0, 10.0)
        b = pm.Normal("b", 0.0, 10.0)
        sigma = pm.HalfCauchy("sigma", 10.0)
        pm.Normal("obs", a + b * xd, sigma, observed=yd)
    return model, {"x": pymc_dp.Interval(0.0, 1.0), "y": pymc_dp.Interval(-1.0, 1.0)}


def test_split_fit_moves_the_region_toward_admissible_data_and_says_so():
    """A HalfCauchy(10) scale on an outcome declared in [-1, 1]: the prior keeps sigma >= large
    (its tail), the admissible prior puts sigma below 1; the fit region's lower end on sigma is
    lower, the certificate names the objective, and both certify the same budget."""
    model, domains = _scale_model()
    kw = dict(epsilon=4.0, draws=1, data=domains, ledger=None)
    by_mass = pymc_dp.make_private(model, **kw)
    by_fit = pymc_dp.make_private(model, split="fit", **kw)

    def sigma_floor(pmod):
        (c,) = [c for f in pmod.certificate.factors for c in f.constraints if c.get("var") == "sigma"]
        return c["lower"]

    assert by_fit.certificate.split == "fit" and by_mass.certificate.split_objective == "prior mass"
    assert "conditioned on a simulated dataset inside the declared domains" in by_fit.certificate.split_objective
    assert sigma_floor(by_fit) < 0.8 * sigma_floor(by_mass)
    for pmod in (by_mass, by_fit):
        cert = pmod.certificate
        assert cert.epsilon <= 4.0 * (1 + 1e-9)
        (f,) = cert.factors
        assert f.lipschitz <= cert.Delta_per_draw * (1 + 1e-9)
    # the search did its job: the fit region is at least as close to the reference as the other
    ref = by_fit.certification.context.reference
    box = {c["var"]: (c["lower"] if c["lower"] is not None else -np.inf, c["upper"] if c["upper"] is not None else np.inf)
           for c in by_mass.certificate.factors[0].constraints}
    box_fit = {c["var"]: (c["lower"] if c["lower"] is not None else -np.inf, c["upper"] if c["upper"] is not None else np.inf)
               for c in by_fit.certificate.factors[0].constraints}
    assert fit_utility(box_fit, ref) >= fit_utility(box, ref)
    assert "fit, public:" in str(pymc_dp.report(by_fit))
    assert "fit" in str(by_fit.certificate)


def test_split_fit_is_refused_by_name_when_unknown():
    model, domains = _scale_model()
    with pytest.raises(pymc_dp.PrivacyError, match="split='best'"):
        pymc_dp.make_private(model, epsilon=4.0, draws=1, data=domains, split="best", ledger=None)
