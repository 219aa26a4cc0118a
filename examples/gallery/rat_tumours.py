"""Hierarchical Binomial Model: Rat Tumor Example (pymc-examples: examples/generalized_linear_models/GLM-hierarchical-binomial-model.myst.md@0a0197e85566f23ab799bafce4c79d67bcb55ff0), written as the gallery writes it.

Binomial tumour counts with one theta_i ~ Beta(alpha, beta) per experiment, (alpha, beta) ~
HalfNormal(10) plus the Potential (alpha + beta)^(-5/2), Deterministics X = log(alpha/beta) and
Z = log(alpha + beta). The group sizes ``n_val`` are public (the design of each experiment);
private are the tumour counts ``y_obs`` (the observed RV keeps the gallery's name ``y``). Domain:
a count is at most its group's size, and no experiment has more than 52 rats (the largest
public n), so Integers(0, 52); generated counts are Binomial(n_i, theta_i) <= n_i.
"""

from __future__ import annotations

import numpy as np
import pymc as pm
import pytensor.tensor as pt

import pymc_dp

TITLE = "Hierarchical Binomial Model: Rat Tumor Example"
SOURCE = "pymc-devs/pymc-examples: examples/generalized_linear_models/GLM-hierarchical-binomial-model.myst.md"

# group sizes of the 71 experiments (BDA3, p. 102), public
# fmt: off
N_GALLERY = np.array([
    20, 20, 20, 20, 20, 20, 20, 19, 19, 19, 19, 18, 18, 17, 20, 20, 20,
    20, 19, 19, 18, 18, 25, 24, 23, 20, 20, 20, 20, 20, 20, 10, 49, 19,
    46, 27, 17, 49, 47, 20, 20, 13, 48, 50, 20, 20, 20, 20, 20, 20, 20,
    48, 19, 19, 19, 22, 46, 49, 20, 20, 23, 19, 22, 20, 20, 20, 52, 46,
    47, 24, 14
])
# fmt: on
MAX_RATS = 52


def make_data(n: int | None = None, seed: int = 0) -> dict[str, np.ndarray]:
    """``n`` (group sizes: the gallery's 71 by default, else drawn from them) and ``y``
    (tumour counts from theta_i ~ Beta(2.4, 14.3), BDA3's posterior-mean hyperparameters)."""
    rng = np.random.default_rng(seed)
    sizes = N_GALLERY.copy() if n is None else rng.choice(N_GALLERY, size=int(n))
    theta = rng.beta(2.4, 14.3, size=len(sizes))
    y = rng.binomial(sizes, theta)
    return {"n": sizes.astype(np.int64), "y": y.astype(np.int64)}


def logp_ab(value):
    """prior density"""
    return pt.log(pt.pow(pt.sum(value), -5 / 2))


def build(data: dict | None = None) -> pm.Model:
    data = make_data() if data is None else data
    n, y = data["n"], data["y"]
    N = len(n)
    coords = {
        "obs_id": np.arange(N),
        "param": ["alpha", "beta"],
    }
    with pm.Model(coords=coords) as model:
        # Uninformative prior for alpha and beta
        n_val = pm.Data("n_val", n)
        y_obs = pm.Data("y_obs", y)
        ab = pm.HalfNormal("ab", sigma=10, dims="param")
        pm.Potential("p(a, b)", logp_ab(ab))

        X = pm.Deterministic("X", pt.log(ab[0] / ab[1]))
        Z = pm.Deterministic("Z", pt.log(pt.sum(ab)))

        theta = pm.Beta("theta", alpha=ab[0], beta=ab[1], dims="obs_id")

        p = pm.Binomial("y", p=theta, observed=y_obs, n=n_val)
    return model


DOMAINS = {"y_obs": pymc_dp.Integers(0, MAX_RATS)}
PUBLIC: tuple[str, ...] = ("n_val",)


def audit_pairs(model: pm.Model) -> list[tuple[dict, dict]]:
    """A neighbouring pair inside the model's support, for ``pymc_dp.audit(pairs=...)``.

    The audit's default pair (every record at one end of the domain, one moved to the other)
    puts 52 tumours in a lab of fewer rats: a dataset of likelihood 0 for every theta, which has
    no posterior. Here every lab has no tumour, and the largest lab's count moves to all of its
    rats (the largest change of one record that the model can produce)."""
    n = np.asarray(model["n_val"].get_value())
    x = np.zeros_like(np.asarray(model["y_obs"].get_value()))
    y = x.copy()
    i = int(np.argmax(n))
    y[i] = n[i]
    return [({"y_obs": x}, {"y_obs": y})]
