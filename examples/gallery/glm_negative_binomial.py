"""GLM: Negative Binomial Regression (pymc-examples: examples/generalized_linear_models/GLM-negative-binomial-regression.myst.md@355f744b17b67613e954d01f9e441cb17550eb52), written as the gallery writes it.

``m_sneeze_inter``: sneeze counts ~ NegativeBinomial(mu=exp(a + b[0] M + b[1] A + b[2] M A),
alpha), intercept N(0, 5), slopes N(0, 1), alpha ~ Exp(0.5). Private: everything the gallery
puts in ConstantData, ``nomeds`` and ``alcohol`` (bool) and ``nsneeze``. Domains: the two
covariates are yes/no answers (Binary); the sneeze diary has room for at most 100 sneezes a day,
so counts are Integers(0, 100), and generated counts are capped at 100 (the gallery's
overdispersed data reach about 80).
"""

from __future__ import annotations

import numpy as np
import pymc as pm
from scipy import stats

import pymc_dp

TITLE = "GLM: Negative Binomial Regression"
SOURCE = "pymc-devs/pymc-examples: examples/generalized_linear_models/GLM-negative-binomial-regression.myst.md"

MAX_SNEEZES = 100


def make_data(n: int | None = None, seed: int = 0) -> dict[str, np.ndarray]:
    """The notebook's ``df``: 4 cells of ``n`` rows (1000 in the gallery; n // 4 here)."""
    q = 1000 if n is None else max(int(n) // 4, 1)
    rng = np.random.default_rng(seed)
    theta_noalcohol_meds, theta_alcohol_meds, theta_noalcohol_nomeds, theta_alcohol_nomeds = 1, 3, 6, 36
    # Gamma shape parameter
    alpha = 10

    def get_nb_vals(mu, alpha, size):
        """Generate negative binomially distributed samples by drawing a sample from a gamma
        distribution with mean `mu` and shape parameter `alpha', then drawing from a Poisson
        distribution whose rate parameter is given by the sampled gamma variable."""
        g = stats.gamma.rvs(alpha, scale=mu / alpha, size=size, random_state=rng)
        return stats.poisson.rvs(g, random_state=rng)

    nsneeze = np.concatenate(
        (
            get_nb_vals(theta_noalcohol_meds, alpha, q),
            get_nb_vals(theta_alcohol_meds, alpha, q),
            get_nb_vals(theta_noalcohol_nomeds, alpha, q),
            get_nb_vals(theta_alcohol_nomeds, alpha, q),
        )
    )
    return {
        "nsneeze": np.minimum(nsneeze, MAX_SNEEZES),  # public rule: the diary's cap
        "alcohol": np.concatenate((np.repeat(False, q), np.repeat(True, q), np.repeat(False, q), np.repeat(True, q))),
        "nomeds": np.concatenate((np.repeat(False, q), np.repeat(False, q), np.repeat(True, q), np.repeat(True, q))),
    }


def build(data: dict | None = None) -> pm.Model:
    df = make_data() if data is None else data
    COORDS = {"regressor": ["nomeds", "alcohol", "nomeds:alcohol"], "obs_idx": np.arange(len(df["nsneeze"]))}

    with pm.Model(coords=COORDS) as m_sneeze_inter:
        a = pm.Normal("intercept", mu=0, sigma=5)
        b = pm.Normal("slopes", mu=0, sigma=1, dims="regressor")
        alpha = pm.Exponential("alpha", 0.5)

        M = pm.Data("nomeds", np.asarray(df["nomeds"]), dims="obs_idx")
        A = pm.Data("alcohol", np.asarray(df["alcohol"]), dims="obs_idx")
        S = pm.Data("nsneeze", np.asarray(df["nsneeze"]), dims="obs_idx")

        λ = pm.math.exp(a + b[0] * M + b[1] * A + b[2] * M * A)

        y = pm.NegativeBinomial("y", mu=λ, alpha=alpha, observed=S, dims="obs_idx")
    return m_sneeze_inter


DOMAINS = {
    "nomeds": pymc_dp.Binary(),
    "alcohol": pymc_dp.Binary(),
    "nsneeze": pymc_dp.Integers(0, MAX_SNEEZES),
}
PUBLIC: tuple[str, ...] = ()
