"""GLM: Poisson Regression (pymc-examples: examples/generalized_linear_models/GLM-poisson-regression.myst.md@c3b666e611f840fc335615a561239cce097f9898), written as the gallery writes it.

``mdl_fish``: sneeze counts ~ Poisson(exp(b0 + b1 alcohol + b2 nomeds + b3 alcohol:nomeds)), all
coefficients N(0, 10). Private: the design matrix ``mx_ex`` (columns alcohol, nomeds,
alcohol:nomeds; each 0/1) and the counts ``nsneeze`` (the gallery's ``mx_en["nsneeze"]``).
Domains: the design columns are yes/no answers (Binary, every element 0 or 1: the notebook's
design of two yes/no factors and their product); the sneeze diary has room
for at most 100 sneezes a day, so counts are Integers(0, 100), and generated counts are capped
at 100 (none reaches it at the gallery's rates 1/3/6/36).
"""

from __future__ import annotations

import numpy as np
import pymc as pm

import pymc_dp

TITLE = "GLM: Poisson Regression"
SOURCE = "pymc-devs/pymc-examples: examples/generalized_linear_models/GLM-poisson-regression.myst.md"

MAX_SNEEZES = 100
#: formulae's column names of the design matrix (the Intercept column is implicit: b0 is added)
MX_COLUMNS = ("alcohol", "nomeds", "alcohol:nomeds")


def make_data(n: int | None = None, seed: int = 0) -> dict[str, np.ndarray]:
    """The notebook's ``df``: 4 cells of ``q`` rows (q = 1000 in the gallery; n // 4 here)."""
    q = 1000 if n is None else max(int(n) // 4, 1)
    rng = np.random.default_rng(8927 + seed)
    # decide poisson theta values
    theta_noalcohol_meds = 1  # no alcohol, took an antihist
    theta_alcohol_meds = 3  # alcohol, took an antihist
    theta_noalcohol_nomeds = 6  # no alcohol, no antihist
    theta_alcohol_nomeds = 36  # alcohol, no antihist
    nsneeze = np.concatenate(
        (
            rng.poisson(theta_noalcohol_meds, q),
            rng.poisson(theta_alcohol_meds, q),
            rng.poisson(theta_noalcohol_nomeds, q),
            rng.poisson(theta_alcohol_nomeds, q),
        )
    )
    return {
        "nsneeze": np.minimum(nsneeze, MAX_SNEEZES),  # public rule: the diary's cap
        "alcohol": np.concatenate((np.repeat(False, q), np.repeat(True, q), np.repeat(False, q), np.repeat(True, q))),
        "nomeds": np.concatenate((np.repeat(False, q), np.repeat(False, q), np.repeat(True, q), np.repeat(True, q))),
    }


def design_matrices(data: dict) -> tuple[np.ndarray, np.ndarray]:
    """What ``design_matrices("nsneeze ~ alcohol * nomeds", df)`` gives (without the Intercept
    column): ``mx_ex`` with columns alcohol, nomeds, alcohol:nomeds (float) and ``mx_en``."""
    a = np.asarray(data["alcohol"], float)
    m = np.asarray(data["nomeds"], float)
    return np.column_stack([a, m, a * m]), np.asarray(data["nsneeze"])


def build(data: dict | None = None) -> pm.Model:
    data = make_data() if data is None else data
    mx_ex_values, mx_en_values = design_matrices(data)
    with pm.Model() as mdl_fish:
        mx_ex = pm.Data("mx_ex", mx_ex_values)
        nsneeze = pm.Data("nsneeze", mx_en_values)

        # define priors, weakly informative Normal
        b0 = pm.Normal("Intercept", mu=0, sigma=10)
        b1 = pm.Normal("alcohol", mu=0, sigma=10)
        b2 = pm.Normal("nomeds", mu=0, sigma=10)
        b3 = pm.Normal("alcohol:nomeds", mu=0, sigma=10)

        # define linear model and exp link function
        theta = b0 + b1 * mx_ex[:, 0] + b2 * mx_ex[:, 1] + b3 * mx_ex[:, 2]

        ## Define Poisson likelihood
        y = pm.Poisson("y", mu=pm.math.exp(theta), observed=nsneeze)
    return mdl_fish


DOMAINS = {"mx_ex": pymc_dp.Binary(), "nsneeze": pymc_dp.Integers(0, MAX_SNEEZES)}
PUBLIC: tuple[str, ...] = ()
