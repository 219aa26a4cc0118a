"""GLM: Robust Linear Regression (pymc-examples: examples/generalized_linear_models/GLM-robust.myst.md@41dc905716a358a517df77739dd4a123543c91db), written as the gallery writes it.

``robust_model``: StudentT(nu=3) likelihood around ``mu = intercept + slope * x`` (kept as the
Deterministic ``mu``), intercept, slope ~ N(0, 1), sigma ~ HalfCauchy(10), on the notebook's
line plus three outliers. Private: the covariate ``x`` (the gallery's ConstantData "x") and the
outcome ``y_out``. Domains: ``x`` is a design point in [0, 1]; ``y`` is a reading on an
instrument with the public range [-2, 10] (wide enough for the gallery's outliers 8, 6, 9);
generated readings are clipped into it.
"""

from __future__ import annotations

import numpy as np
import pymc as pm

import pymc_dp

TITLE = "GLM: Robust Linear Regression"
SOURCE = "pymc-devs/pymc-examples: examples/generalized_linear_models/GLM-robust.myst.md"

Y_RANGE = (-2.0, 10.0)


def make_data(n: int | None = None, seed: int = 0) -> dict[str, np.ndarray]:
    """``n`` points on ``1 + 2 x + N(0, 0.5^2)`` plus the gallery's 3 outliers (n + 3 rows;
    the gallery has n = 100)."""
    size = 100 if n is None else max(int(n) - 3, 1)
    rng = np.random.default_rng(8927 + seed)
    true_intercept = 1
    true_slope = 2

    x = np.linspace(0, 1, size)
    # y = a + b*x
    true_regression_line = true_intercept + true_slope * x
    # add noise
    y = true_regression_line + rng.normal(scale=0.5, size=size)

    # Add outliers
    x_out = np.append(x, [0.1, 0.15, 0.2])
    y_out = np.append(y, [8, 6, 9])
    y_out = np.clip(y_out, *Y_RANGE)  # public rule: the instrument's range
    return {"x": x_out, "y": y_out}


def build(data: dict | None = None) -> pm.Model:
    data = make_data() if data is None else data
    x_out, y_out = data["x"], data["y"]
    with pm.Model() as robust_model:
        xdata = pm.Data("x", x_out, dims="obs_id")
        ydata = pm.Data("y_out", y_out, dims="obs_id")

        # define priors
        intercept = pm.Normal("intercept", mu=0, sigma=1)
        slope = pm.Normal("slope", mu=0, sigma=1)
        sigma = pm.HalfCauchy("sigma", beta=10)

        mu = pm.Deterministic("mu", intercept + slope * xdata, dims="obs_id")

        # define likelihood
        likelihood = pm.StudentT("y", mu=mu, sigma=sigma, nu=3, observed=ydata, dims="obs_id")
    return robust_model


DOMAINS = {"x": pymc_dp.Interval(0.0, 1.0), "y_out": pymc_dp.Interval(*Y_RANGE)}
PUBLIC: tuple[str, ...] = ()
