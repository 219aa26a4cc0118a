"""The README's demo: a private logistic regression on generated data.

Run with ``python -m pymc_dp.demo`` (or the ``pymc-dp-demo`` console script). It builds an
ordinary PyMC model whose sensitive data sit in ``pm.Data``, makes it private with one
decorator, prints the privacy certificate and ArviZ's summary of the released draws.
"""

from __future__ import annotations

import warnings

import numpy as np
import pymc as pm

import pymc_dp


def generate(n: int = 500, seed: int = 0):
    """Generated records: features in the unit ball, a 0/1 outcome from a logistic model."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 3))
    X /= np.maximum(1.0, np.linalg.norm(X, axis=1, keepdims=True))  # rows inside Ball(1)
    true_w = np.array([1.5, -1.0, 0.5])
    y = (rng.random(n) < 1.0 / (1.0 + np.exp(-(X @ true_w)))).astype(int)
    return X, y


@pymc_dp.private(
    epsilon=20.0,
    draws=20,
    data={"X": pymc_dp.Ball(1.0), "y": pymc_dp.Binary()},
)
def logistic_regression(X, y):
    with pm.Model(coords={"feature": ["a", "b", "c"]}) as model:
        Xd = pm.Data("X", X)
        yd = pm.Data("y", y)
        w = pm.Normal("w", 0.0, 2.0, dims="feature")
        b = pm.Normal("b", 0.0, 1.0)
        pm.Bernoulli("outcome", logit_p=Xd @ w + b, observed=yd)
    return model


def main() -> None:
    import arviz as az

    warnings.filterwarnings("ignore", category=FutureWarning)
    X, y = generate()
    private_model = logistic_regression(X, y)
    print(private_model.certificate)
    print()
    idata = private_model.sample(tune=500, chains=2, cores=1, random_seed=1)
    print(f"released groups: {idata.groups()}, draws: {idata.posterior.sizes['chain'] * idata.posterior.sizes['draw']}")
    print(az.summary(idata, kind="stats"))


if __name__ == "__main__":
    main()
