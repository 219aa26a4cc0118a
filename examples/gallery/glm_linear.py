"""GLM: Linear regression (pymc-devs/pymc: docs/source/learn/core_notebooks/GLM_linear.ipynb@0cc291aed423e8474ed69c817f06bc1ee030d8dd; the pymc-examples gallery page links it), written as the gallery writes it.

``y ~ Normal(Intercept + slope * x, sigma)`` with Intercept, slope ~ N(0, 20) and
sigma ~ HalfCauchy(10). Private: the covariate ``x`` and the outcome ``y_obs`` (the observed
RV keeps the gallery's name ``y``). Domains: ``x`` is a design point in [0, 1] (the notebook's
``np.linspace(0, 1, size)``); ``y`` is a reading on an instrument with the public range
[-2, 6]; generated readings are clipped into it (none is, at the gallery's noise level).
"""

from __future__ import annotations

import numpy as np
import pymc as pm
from pymc import HalfCauchy, Model, Normal

import pymc_dp

TITLE = "GLM: Linear regression"
SOURCE = "pymc-devs/pymc: docs/source/learn/core_notebooks/GLM_linear.ipynb (pymc-examples: examples/generalized_linear_models/GLM-linear.ipynb)"

Y_RANGE = (-2.0, 6.0)


def make_data(n: int | None = None, seed: int = 0) -> dict[str, np.ndarray]:
    """The notebook's ``x`` (evenly spaced on [0, 1]) and ``y = 1 + 2 x + N(0, 0.5^2)``."""
    size = 200 if n is None else int(n)
    rng = np.random.default_rng(8927 + seed)
    true_intercept = 1
    true_slope = 2
    x = np.linspace(0, 1, size)
    # y = a + b*x
    true_regression_line = true_intercept + true_slope * x
    # add noise
    y = true_regression_line + rng.normal(scale=0.5, size=size)
    y = np.clip(y, *Y_RANGE)  # public rule: the instrument's range
    return {"x": x, "y": y}


def build(data: dict | None = None) -> pm.Model:
    data = make_data() if data is None else data
    with Model() as model:  # model specifications in PyMC are wrapped in a with-statement
        x = pm.Data("x", data["x"])
        y = pm.Data("y_obs", data["y"])

        # Define priors
        sigma = HalfCauchy("sigma", beta=10)
        intercept = Normal("Intercept", 0, sigma=20)
        slope = Normal("slope", 0, sigma=20)

        # Define likelihood
        likelihood = Normal("y", mu=intercept + slope * x, sigma=sigma, observed=y)
    return model


DOMAINS = {"x": pymc_dp.Interval(0.0, 1.0), "y_obs": pymc_dp.Interval(*Y_RANGE)}
PUBLIC: tuple[str, ...] = ()
