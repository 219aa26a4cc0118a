"""The README's demo: two private models on generated data, one decorator each.

Run with ``python -m pymc_dp.demo`` (or the ``pymc-dp-demo`` console script).

1. A logistic regression: its truncation is a norm ball on the weights, so it is sampled by
   MCMC (``pm.sample`` on the rewritten model), and the certificate says the draws are approximate.
2. A survey (which of three options each respondent prefers; Dirichlet prior, Categorical
   answers): the truncated model is conjugate, so the draws are exact iid draws of the truncated
   posterior, and ``delta > 0`` lets the draws compose optimally.

Both releases are charged to the default budget ledger in your data directory (``PYMC_DP_LEDGER``
overrides it): run the demo twice and watch the cumulative spend on each dataset grow.
"""

from __future__ import annotations

import warnings

import numpy as np
import pymc as pm

import pymc_dp
from pymc_dp.record import read


def generate(n: int = 500, seed: int = 0):
    """Generated records: features in the unit ball, a 0/1 outcome from a logistic model."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 3))
    X /= np.maximum(1.0, np.linalg.norm(X, axis=1, keepdims=True))  # rows inside Ball(1)
    true_w = np.array([1.5, -1.0, 0.5])
    y = (rng.random(n) < 1.0 / (1.0 + np.exp(-(X @ true_w)))).astype(int)
    return X, y


def generate_survey(n: int = 2000, seed: int = 0):
    """Generated answers: each respondent picks option 0, 1 or 2."""
    rng = np.random.default_rng(seed)
    return rng.choice(3, size=n, p=[0.27, 0.33, 0.40])


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


@pymc_dp.private(epsilon=10.0, delta=1e-6, draws=10, data={"answer": pymc_dp.Integers(0, 2)})
def survey(answers):
    with pm.Model(coords={"option": ["A", "B", "C"]}) as model:
        answer = pm.Data("answer", answers)
        share = pm.Dirichlet("share", a=np.ones(3), dims="option")
        pm.Categorical("answers", p=share, observed=answer)
    return model


def _release_line(idata) -> str:
    release = read(idata)["release"]
    ledger = release["ledger"]
    spent = "" if ledger is None else f"; spent on this dataset so far: epsilon = {ledger['spent_epsilon']:.4g} over {ledger['releases']} release(s)"
    return f"released {release['chains'] * release['draws_per_chain']} draws by {release['method']}{spent}"


def main() -> None:
    import arviz as az

    warnings.filterwarnings("ignore", category=FutureWarning)
    print("== 1. logistic regression (MCMC on the truncated model)\n")
    X, y = generate()
    private_model = logistic_regression(X, y)
    print(private_model.certificate, "\n")
    idata = private_model.sample(tune=500, chains=2, cores=1, random_seed=1)
    print(_release_line(idata))
    print(az.summary(idata, kind="stats"), "\n")

    print("== 2. a survey (exact draws of the truncated conjugate posterior)\n")
    private_model = survey(generate_survey())
    print(private_model.certificate, "\n")
    idata = private_model.sample(random_seed=2)
    print(_release_line(idata))
    print(az.summary(idata, kind="stats"), "   (generated from shares 0.27, 0.33, 0.40)")
    print(f"\nledger: {private_model.ledger.path}")


if __name__ == "__main__":
    main()
