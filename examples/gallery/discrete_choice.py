"""Discrete Choice and Random Utility Models (pymc-examples: examples/generalized_linear_models/GLM-discrete-choice_models.myst.md@0d4df2b3b378729a13e2f685018929d44b2af7d8), written as the gallery writes it.

``model_2``: multinomial logit over five heating systems (ec, er, gc, gr, hp), utilities
``alpha_j + beta_ic ic.j + beta_oc oc.j`` with hp the zero-utility pivot, softmax kept as the
Deterministic ``p``. The installation and operating costs are plain arrays in the gallery
(public: engineering quotes per household); private is only each household's chosen system,
``observed`` (Integers(0, 4): the five alternatives of the survey).
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pymc as pm

import pymc_dp

TITLE = "Discrete Choice and Random Utility Models"
SOURCE = "pymc-devs/pymc-examples: examples/generalized_linear_models/GLM-discrete-choice_models.myst.md"

ALTS = ["ec", "er", "gc", "gr", "hp"]
#: mean and sd of the installation (ic) and annual operating (oc) costs, as in mlogit's Heating data
_IC = {"gc": (776.8, 115.6), "gr": (921.8, 135.3), "ec": (824.5, 135.3), "er": (983.9, 156.6), "hp": (1046.1, 156.0)}
_OC = {"gc": (172.1, 25.9), "gr": (154.5, 21.0), "ec": (476.7, 94.0), "er": (429.6, 81.7), "hp": (293.1, 43.9)}
#: utilities used to generate the choices (Train's heating model: ic, oc and hp-pivot intercepts)
_TRUE = {"ic": -0.00153, "oc": -0.00699, "alpha": {"ec": 1.65884, "er": 1.85343, "gc": 1.71097, "gr": 0.30826, "hp": 0.0}}


def make_data(n: int | None = None, seed: int = 0) -> dict[str, np.ndarray]:
    """The wide heating frame (900 households): ``idcase``, ``depvar`` (the chosen system's
    name), ``ic.*``, ``oc.*`` (floats), ``income`` (2..7), ``agehed``, ``rooms``, ``region``."""
    n = 900 if n is None else int(n)
    rng = np.random.default_rng(seed)
    df = {"idcase": np.arange(1, n + 1)}
    u = np.empty((n, len(ALTS)))
    for j, a in enumerate(ALTS):
        df[f"ic.{a}"] = np.clip(rng.normal(*_IC[a], n), 430.0, 1450.0)
        df[f"oc.{a}"] = np.clip(rng.normal(*_OC[a], n), 84.0, 720.0)
        u[:, j] = _TRUE["alpha"][a] + _TRUE["ic"] * df[f"ic.{a}"] + _TRUE["oc"] * df[f"oc.{a}"]
    gumbel = rng.gumbel(size=u.shape)
    df["depvar"] = np.array(ALTS)[np.argmax(u + gumbel, axis=1)]
    df["income"] = rng.integers(2, 8, n)
    df["agehed"] = rng.integers(20, 66, n)
    df["rooms"] = rng.integers(2, 8, n)
    df["region"] = rng.choice(["ncostl", "scostl", "mountn", "valley"], n, p=[0.36, 0.25, 0.16, 0.23])
    return df


def build(data: dict | None = None) -> pm.Model:
    """``model_2``: alternative-specific intercepts."""
    wide_heating_df = make_data() if data is None else data
    N = len(wide_heating_df["depvar"])
    # ``pd.Categorical(depvar).codes`` codes the alternatives alphabetically among the values
    # present; the categories are given explicitly so that the coding is public (ec=0 .. hp=4)
    observed = pd.Categorical(wide_heating_df["depvar"], categories=ALTS).codes

    coords = {
        "alts_intercepts": ["ec", "er", "gc", "gr"],
        "alts_probs": ["ec", "er", "gc", "gr", "hp"],
        "obs": range(N),
    }
    with pm.Model(coords=coords) as model_2:
        observed_ = pm.Data("observed", observed, dims="obs")
        beta_ic = pm.Normal("beta_ic", 0, 1)
        beta_oc = pm.Normal("beta_oc", 0, 1)
        alphas = pm.Normal("alpha", 0, 1, dims="alts_intercepts")

        ## Construct Utility matrix and Pivot using an intercept per alternative
        u0 = alphas[0] + beta_ic * wide_heating_df["ic.ec"] + beta_oc * wide_heating_df["oc.ec"]
        u1 = alphas[1] + beta_ic * wide_heating_df["ic.er"] + beta_oc * wide_heating_df["oc.er"]
        u2 = alphas[2] + beta_ic * wide_heating_df["ic.gc"] + beta_oc * wide_heating_df["oc.gc"]
        u3 = alphas[3] + beta_ic * wide_heating_df["ic.gr"] + beta_oc * wide_heating_df["oc.gr"]
        u4 = np.zeros(N)  # Outside Good
        s = pm.math.stack([u0, u1, u2, u3, u4]).T

        ## Apply Softmax Transform
        p_ = pm.Deterministic("p", pm.math.softmax(s, axis=1), dims=("obs", "alts_probs"))

        ## Likelihood
        choice_obs = pm.Categorical("y_cat", p=p_, observed=observed_, dims="obs")
    return model_2


DOMAINS = {"observed": pymc_dp.Integers(0, len(ALTS) - 1)}
PUBLIC: tuple[str, ...] = ()
