"""Gaussian Mixture Model (pymc-examples: examples/mixture_models/gaussian_mixture_model.myst.md@411b8973415da69f540a8cb405950f29e69abe5d), written as the gallery writes it.

Three-component ``NormalMixture`` with ordered means μ ~ N(0, 5), σ ~ HalfNormal(1) and weights
w ~ Dirichlet(1, 1, 1). Private: the measurements ``x_obs`` (the observed RV keeps the gallery's
name ``x``). Domain: the instrument reads in [-10, 10] (the gallery's data span about -6.5 to 7);
generated values are clipped into that public range.
"""

from __future__ import annotations

import numpy as np
import pymc as pm

import pymc_dp

TITLE = "Gaussian Mixture Model"
SOURCE = "pymc-devs/pymc-examples: examples/mixture_models/gaussian_mixture_model.myst.md"

X_RANGE = (-10.0, 10.0)
k = 3


def make_data(n: int | None = None, seed: int = 0) -> dict[str, np.ndarray]:
    ndata = 500 if n is None else int(n)
    rng = np.random.default_rng(8927 + seed)
    centers = np.array([-5, 0, 5])
    sds = np.array([0.5, 2.0, 0.75])
    idx = rng.integers(0, k, ndata)
    x = rng.normal(loc=centers[idx], scale=sds[idx], size=ndata)
    return {"x": np.clip(x, *X_RANGE)}  # public rule: the instrument's range


def build(data: dict | None = None) -> pm.Model:
    data = make_data() if data is None else data
    with pm.Model(coords={"cluster": range(k)}) as model:
        x = pm.Data("x_obs", data["x"])
        μ = pm.Normal(
            "μ",
            mu=0,
            sigma=5,
            transform=pm.distributions.transforms.ordered,
            initval=[-4, 0, 4],
            dims="cluster",
        )
        σ = pm.HalfNormal("σ", sigma=1, dims="cluster")
        weights = pm.Dirichlet("w", np.ones(k), dims="cluster")
        pm.NormalMixture("x", w=weights, mu=μ, sigma=σ, observed=x)
    return model


DOMAINS = {"x_obs": pymc_dp.Interval(*X_RANGE)}
PUBLIC: tuple[str, ...] = ()
