"""Regression Models with Ordered Categorical Outcomes (pymc-examples: examples/generalized_linear_models/GLM-ordinal-regression.myst.md@5b71c0cd242eb865457f814364a9aebaac496a31), written as the gallery writes it.

``model3`` of the notebook's ``make_model`` factory: OrderedLogistic rating with Normal
cutpoints (ordered transform, sigma ~ Exp(1)) and ``mu = beta[0] salary + beta[1] work_sat +
beta[2] work_from_home`` kept as a Deterministic; :func:`build_probit` is the same model with
``logit=False`` (OrderedProbit). The covariates are passed as plain arrays, as in the gallery
(public); private is only the manager's rating ``explicit_rating``, on the survey's public 0-8
scale (Integers(0, 8), K = 9 categories); generated ratings are rounded and clipped to 0..8.
"""

from __future__ import annotations

import numpy as np
import pymc as pm
import pytensor.tensor as pt
from scipy.stats import bernoulli

import pymc_dp

TITLE = "Regression Models with Ordered Categorical Outcomes"
SOURCE = "pymc-devs/pymc-examples: examples/generalized_linear_models/GLM-ordinal-regression.myst.md"

#: number of rating categories: the public 0..8 scale. The gallery computes
#: ``K = len(df["explicit_rating"].unique())`` from the data (9 on its data); a category count
#: read off the private ratings would leak, so K is the scale's size.
K = 9


def make_data(n: int | None = None, seed: int = 0) -> dict[str, np.ndarray]:
    """The notebook's ``make_data`` (500 rows), seeded by ``seed`` (100 in the gallery)."""
    n = 500 if n is None else int(n)
    rs = np.random.RandomState(100 + seed)
    salary = rs.normal(40, 10, n)
    work_sat = rs.beta(1, 0.4, n)
    work_from_home = bernoulli.rvs(0.7, size=n, random_state=rs)
    work_from_home_calc = np.where(work_from_home, 1.4 * work_from_home, work_from_home)
    latent_rating = 0.08423 * salary + 0.2 * work_sat + work_from_home_calc + rs.normal(0, 1, n)
    explicit_rating = np.clip(np.round(latent_rating, 0), 0, K - 1) + 0.0  # public rule: the 0..8 scale
    return {
        "salary": salary,
        "work_sat": work_sat,
        "work_from_home": work_from_home,
        "latent_rating": latent_rating,
        "explicit_rating": explicit_rating,  # float 0.0..8.0, as in the gallery's frame
    }


def constrainedUniform(N, min=0, max=1):
    return pm.Deterministic(
        "cutpoints",
        pt.concatenate(
            [
                np.ones(1) * min,
                pt.extra_ops.cumsum(pm.Dirichlet("cuts_unknown", a=np.ones(N - 2))) * (max - min) + min,
            ]
        ),
    )


def make_model(df, priors, model_spec=1, constrained_uniform=False, logit=True):
    """The gallery's factory, without the sampling calls; ``df`` is the data dict."""
    with pm.Model() as model:
        explicit_rating = pm.Data("explicit_rating", np.asarray(df["explicit_rating"]))
        if constrained_uniform:
            cutpoints = constrainedUniform(K, 0, K)
        else:
            sigma = pm.Exponential("sigma", priors["sigma"])
            cutpoints = pm.Normal(
                "cutpoints",
                mu=priors["mu"],
                sigma=sigma,
                # the gallery's ``univariate_ordered``; PyMC >= 5.16 calls it ``ordered``
                transform=pm.distributions.transforms.ordered,
            )

        if model_spec == 1:
            beta = pm.Normal("beta", priors["beta"][0], priors["beta"][1], size=1)
            mu = pm.Deterministic("mu", beta[0] * df["salary"])
        elif model_spec == 2:
            beta = pm.Normal("beta", priors["beta"][0], priors["beta"][1], size=2)
            mu = pm.Deterministic("mu", beta[0] * df["salary"] + beta[1] * df["work_sat"])
        elif model_spec == 3:
            beta = pm.Normal("beta", priors["beta"][0], priors["beta"][1], size=3)
            mu = pm.Deterministic(
                "mu", beta[0] * df["salary"] + beta[1] * df["work_sat"] + beta[2] * df["work_from_home"]
            )
        if logit:
            y_ = pm.OrderedLogistic("y", cutpoints=cutpoints, eta=mu, observed=explicit_rating)
        else:
            y_ = pm.OrderedProbit("y", cutpoints=cutpoints, eta=mu, observed=explicit_rating)
    return model


priors = {"sigma": 1, "beta": [0, 1], "mu": np.linspace(0, K, K - 1)}


def build(data: dict | None = None) -> pm.Model:
    """``model3``: full covariates, Normal ordered cutpoints, logit."""
    return make_model(make_data() if data is None else data, priors, model_spec=3)


def build_probit(data: dict | None = None) -> pm.Model:
    """``model3`` with ``logit=False``: OrderedProbit."""
    return make_model(make_data() if data is None else data, priors, model_spec=3, logit=False)


DOMAINS = {"explicit_rating": pymc_dp.Integers(0, K - 1)}
PUBLIC: tuple[str, ...] = ()
