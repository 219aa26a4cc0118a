"""Censored Data Models (pymc-examples: examples/survival_analysis/censored_data.myst.md@04e12d0ea078b25c246c05ba1a0dd664fb8b1d8a), written as the gallery writes it.

``unimputed_censored_model``: ``pm.Censored(Normal(mu, sigma), lower=3, upper=16)`` with
mu ~ N(0, 6.5) and sigma ~ HalfNormal(6.5). Private: the censored measurements ``censored``.
Domain: the instrument's detection limits 3 and 16 are public (they are the model's censoring
bounds), so every reading lies in Interval(3, 16); the gallery's ``censor`` rule puts every
generated value there.
"""

from __future__ import annotations

from copy import copy

import numpy as np
import pymc as pm

import pymc_dp

TITLE = "Censored Data Models"
SOURCE = "pymc-devs/pymc-examples: examples/survival_analysis/censored_data.myst.md"

# Set censoring limits
low = 3.0
high = 16.0


def censor(x, low, high):
    x = copy(x)
    x[x <= low] = low
    x[x >= high] = high
    return x


def make_data(n: int | None = None, seed: int = 0) -> dict[str, np.ndarray]:
    size = 500 if n is None else int(n)
    rng = np.random.default_rng(1234 + seed)
    # Produce normally distributed samples
    true_mu = 13.0
    true_sigma = 5.0
    samples = rng.normal(true_mu, true_sigma, size)
    # Censor samples
    return {"censored": censor(samples, low, high)}


def build(data: dict | None = None) -> pm.Model:
    data = make_data() if data is None else data
    with pm.Model() as unimputed_censored_model:
        censored = pm.Data("censored", data["censored"])
        mu = pm.Normal("mu", mu=0.0, sigma=(high - low) / 2.0)
        sigma = pm.HalfNormal("sigma", sigma=(high - low) / 2.0)
        y_latent = pm.Normal.dist(mu=mu, sigma=sigma)
        obs = pm.Censored("obs", y_latent, lower=low, upper=high, observed=censored)
    return unimputed_censored_model


DOMAINS = {"censored": pymc_dp.Interval(low, high)}
PUBLIC: tuple[str, ...] = ()
