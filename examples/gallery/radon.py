"""A Primer on Bayesian Methods for Multilevel Modeling (pymc-examples: examples/generalized_linear_models/multilevel_modeling.myst.md@2294d8a7fe7158ccc25f9a190178e5aa07426256), written as the gallery writes it.

``varying_intercept`` (:func:`build`): log-radon ~ Normal(alpha[county] + beta * floor, sd_y)
with alpha_j ~ N(mu_a, sigma_a) over 85 Minnesota counties; also ``varying_intercept_slope``
and the non-centred LKJ ``covariation_intercept_slope``. Private: every household's
``floor_idx`` (0 basement / 1 first floor: Binary), ``county_idx`` (its county: Integers(0, 84),
the public list of 85 surveyed counties) and ``log_radon`` (moved from a numpy array into
pm.Data). Domain of log_radon: ``log(activity + 0.1)`` with activity in [0, 54.4] pCi/L, the
test kit's public reporting range, so [log 0.1, 4.0] inside [-2.5, 4.0]; generated activities are
rounded to 0.1 pCi/L and clipped into that range.
"""

from __future__ import annotations

import numpy as np
import pymc as pm
import pytensor.tensor as pt

import pymc_dp

TITLE = "A Primer on Bayesian Methods for Multilevel Modeling"
SOURCE = "pymc-devs/pymc-examples: examples/generalized_linear_models/multilevel_modeling.myst.md"

N_GALLERY = 919
N_COUNTIES = 85
#: the kit's reporting range in pCi/L: log(54.4 + 0.1) < 4.0
ACTIVITY_MAX = 54.4
LOG_RADON_RANGE = (-2.5, 4.0)


def make_data(n: int | None = None, seed: int = 0) -> dict[str, np.ndarray]:
    """``n`` households (919 in the gallery) in 85 counties, sorted by county as in srrs2.dat
    (so ``factorize`` codes are 0..84 in order), county sizes skewed from 1 to about 116.

    Returns ``county`` (int codes), ``floor`` (int 0/1, about 83% basements), ``activity``
    (pCi/L), ``log_radon`` and ``mn_counties`` (the county names, public)."""
    n = N_GALLERY if n is None else int(n)
    rng = np.random.default_rng(seed)
    weights = rng.lognormal(mean=0.0, sigma=1.5, size=N_COUNTIES)
    weights = np.minimum(weights / weights.sum(), 116 / N_GALLERY)
    sizes = np.floor(weights / weights.sum() * n).astype(int)
    if n >= N_COUNTIES:
        sizes = np.maximum(sizes, 1)
    while sizes.sum() > n:  # trim the largest counties
        sizes[np.argmax(sizes)] -= 1
    while sizes.sum() < n:  # top up in order of weight
        sizes[np.argsort(-weights)[(n - sizes.sum()) % N_COUNTIES]] += 1
    county = np.repeat(np.arange(N_COUNTIES), sizes)
    floor_measure = (rng.random(n) < 0.17).astype(np.int64)
    alpha = rng.normal(1.46, 0.32, N_COUNTIES)
    log_activity = alpha[county] - 0.69 * floor_measure + rng.normal(0.0, 0.76, n)
    activity = np.round(np.clip(np.exp(log_activity) - 0.1, 0.0, ACTIVITY_MAX), 1)  # public rule
    log_radon = np.log(activity + 0.1)
    mn_counties = np.array([f"COUNTY_{j:02d}" for j in range(N_COUNTIES)])
    return {
        "county": county,
        "floor": floor_measure,
        "activity": activity,
        "log_radon": log_radon,
        "mn_counties": mn_counties,
    }


def _unpack(data):
    data = make_data() if data is None else data
    coords = {"county": list(data["mn_counties"])}
    return data["county"], data["floor"], data["log_radon"], coords


def build(data: dict | None = None) -> pm.Model:
    """``varying_intercept``."""
    county, floor_measure, log_radon, coords = _unpack(data)
    with pm.Model(coords=coords) as varying_intercept:
        floor_idx = pm.Data("floor_idx", floor_measure, dims="obs_id")
        county_idx = pm.Data("county_idx", county, dims="obs_id")
        log_radon_ = pm.Data("log_radon", log_radon, dims="obs_id")

        # Priors
        mu_a = pm.Normal("mu_a", mu=0.0, sigma=10.0)
        sigma_a = pm.Exponential("sigma_a", 1)

        # Random intercepts
        alpha = pm.Normal("alpha", mu=mu_a, sigma=sigma_a, dims="county")
        # Common slope
        beta = pm.Normal("beta", mu=0.0, sigma=10.0)

        # Model error
        sd_y = pm.Exponential("sd_y", 1)

        # Expected value
        y_hat = alpha[county_idx] + beta * floor_idx

        # Data likelihood
        y_like = pm.Normal("y_like", mu=y_hat, sigma=sd_y, observed=log_radon_, dims="obs_id")
    return varying_intercept


def build_varying_intercept_slope(data: dict | None = None) -> pm.Model:
    """``varying_intercept_slope`` (centred)."""
    county, floor_measure, log_radon, coords = _unpack(data)
    with pm.Model(coords=coords) as varying_intercept_slope:
        floor_idx = pm.Data("floor_idx", floor_measure, dims="obs_id")
        county_idx = pm.Data("county_idx", county, dims="obs_id")
        log_radon_ = pm.Data("log_radon", log_radon, dims="obs_id")

        # Priors
        mu_a = pm.Normal("mu_a", mu=0.0, sigma=10.0)
        sigma_a = pm.Exponential("sigma_a", 1)

        mu_b = pm.Normal("mu_b", mu=0.0, sigma=10.0)
        sigma_b = pm.Exponential("sigma_b", 1)

        # Random intercepts
        alpha = pm.Normal("alpha", mu=mu_a, sigma=sigma_a, dims="county")
        # Random slopes
        beta = pm.Normal("beta", mu=mu_b, sigma=sigma_b, dims="county")

        # Model error
        sigma_y = pm.Exponential("sigma_y", 1)

        # Expected value
        y_hat = alpha[county_idx] + beta[county_idx] * floor_idx

        # Data likelihood
        y_like = pm.Normal("y_like", mu=y_hat, sigma=sigma_y, observed=log_radon_, dims="obs_id")
    return varying_intercept_slope


def build_covariation_intercept_slope(data: dict | None = None) -> pm.Model:
    """``covariation_intercept_slope``: the notebook's final, non-centred LKJ version."""
    county, floor_measure, log_radon, coords = _unpack(data)
    coords["param"] = ["alpha", "beta"]
    coords["param_bis"] = ["alpha", "beta"]
    with pm.Model(coords=coords) as covariation_intercept_slope:
        floor_idx = pm.Data("floor_idx", floor_measure, dims="obs_id")
        county_idx = pm.Data("county_idx", county, dims="obs_id")
        log_radon_ = pm.Data("log_radon", log_radon, dims="obs_id")

        # prior stddev in intercepts & slopes (variation across counties):
        sd_dist = pm.Exponential.dist(0.5, shape=(2,))

        # get back standard deviations and rho:
        chol, corr, stds = pm.LKJCholeskyCov("chol", n=2, eta=2.0, sd_dist=sd_dist)

        # priors for average intercept and slope:
        mu_alpha_beta = pm.Normal("mu_alpha_beta", mu=0.0, sigma=5.0, shape=2)

        # population of varying effects:
        z = pm.Normal("z", 0.0, 1.0, dims=("param", "county"))
        alpha_beta_county = pm.Deterministic("alpha_beta_county", pt.dot(chol, z).T, dims=("county", "param"))

        # Expected value per county:
        theta = (
            mu_alpha_beta[0]
            + alpha_beta_county[county_idx, 0]
            + (mu_alpha_beta[1] + alpha_beta_county[county_idx, 1]) * floor_idx
        )

        # Model error:
        sigma = pm.Exponential("sigma", 1.0)

        y = pm.Normal("y", theta, sigma=sigma, observed=log_radon_, dims="obs_id")
    return covariation_intercept_slope


#: the other models of the notebook that this module writes, by the gallery's names
BUILDERS = {
    "varying_intercept": build,
    "varying_intercept_slope": build_varying_intercept_slope,
    "covariation_intercept_slope": build_covariation_intercept_slope,
}

DOMAINS = {
    "floor_idx": pymc_dp.Binary(),
    "county_idx": pymc_dp.Integers(0, N_COUNTIES - 1),
    "log_radon": pymc_dp.Interval(*LOG_RADON_RANGE),
}
PUBLIC: tuple[str, ...] = ()
