"""Write the release fixtures that ``tests/test_record.py`` reads back: releases saved by an
earlier pymc_dp, which every later pymc_dp must still read (report, query, plots).

Run once per release-record schema, and keep the files that earlier schemas wrote:

    PYTHONPATH=. python tests/data/make_release_fixtures.py

Each file is what a user saves: ``idata.to_netcdf(path)`` of a release (the ``posterior`` group
and the record in the attrs). The data are synthetic (a public seed): nothing private is stored.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pymc as pm

import pymc_dp
from pymc_dp.record import SCHEMA

HERE = Path(__file__).parent
TAG = SCHEMA.replace("pymc_dp.release/", "v").replace(".", "_")


def coin() -> pm.Model:
    """A Beta-Bernoulli model of 40 synthetic coin flips (public seed)."""
    x = np.random.default_rng(0).binomial(1, 0.3, 40)
    with pm.Model() as model:
        data = pm.Data("x", x)
        pm.Bernoulli("obs", p=pm.Beta("p", 2.0, 2.0), observed=data)
    return model


def posterior_sampling() -> Path:
    """The coin released by posterior sampling (exact sampler, 4 draws)."""
    private = pymc_dp.make_private(coin(), epsilon=2.0, draws=4, data={"x": pymc_dp.Binary()}, ledger=None)
    idata = private.sample(random_seed=1)
    path = HERE / f"release_{TAG}_posterior_sampling.nc"
    idata.to_netcdf(path)
    return path


def laplace_updates() -> Path:
    """The coin released by Laplace noise on its posterior updates (4 draws)."""
    mech = pymc_dp.laplace_updates(coin(), epsilon=2.0, draws=4, data={"x": pymc_dp.Binary()}, ledger=None)
    idata = mech.sample(random_seed=1)
    path = HERE / f"release_{TAG}_laplace_updates.nc"
    idata.to_netcdf(path)
    return path


if __name__ == "__main__":
    for make in (posterior_sampling, laplace_updates):
        print("wrote", make().relative_to(HERE.parent.parent))
