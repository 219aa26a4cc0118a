"""Analysis of An AR(1) Model in PyMC (pymc-examples: examples/time_series/AR.myst.md@4ee41c65e5642b2b53af93d454fa1013f0cc799c), written as the gallery writes it.

``ar2``: ``pm.AR`` of order 2 with a constant (rho[0]), rho ~ N(0, 1) (shape 3), sigma ~
HalfNormal(3) and init_dist N(0, 10). Private: the series ``y_obs`` (the observed RV keeps the
gallery's name ``y``); one record is one time point. Domain: the measured quantity lies in the
instrument's public range [-15, 15] (the gallery's series spans about -11 to 8); generated
values are clipped into it.
"""

from __future__ import annotations

import numpy as np
import pymc as pm

import pymc_dp

TITLE = "Analysis of An AR(1) Model in PyMC"
SOURCE = "pymc-devs/pymc-examples: examples/time_series/AR.myst.md"

Y_RANGE = (-15.0, 15.0)


def make_data(n: int | None = None, seed: int = 0) -> dict[str, np.ndarray]:
    """The notebook's simulation (T = 10000, last 5000 kept; the loop stops at T - 100, so the
    last 100 points are iid N(-1, 2), a gallery quirk kept here). With ``n``: T = 2n, last n."""
    keep = 5000 if n is None else int(n)
    rs = np.random.RandomState(8927 + seed)
    T = 2 * keep

    # true stationarity:
    true_rho = 0.7, -0.3
    # true standard deviation of the innovation:
    true_sigma = 2.0
    # true process mean:
    true_center = -1.0

    y = rs.normal(loc=true_center, scale=true_sigma, size=T)
    y[1] += true_rho[0] * y[0]
    for t in range(2, T - 100):
        y[t] += true_rho[0] * y[t - 1] + true_rho[1] * y[t - 2]

    y = y[-keep:]
    return {"y": np.clip(y, *Y_RANGE)}  # public rule: the instrument's range


def build(data: dict | None = None) -> pm.Model:
    data = make_data() if data is None else data
    with pm.Model() as ar2:
        y = pm.Data("y_obs", data["y"])
        rho = pm.Normal("rho", 0.0, 1.0, shape=3)
        sigma = pm.HalfNormal("sigma", 3)
        likelihood = pm.AR("y", rho=rho, sigma=sigma, constant=True, init_dist=pm.Normal.dist(0, 10), observed=y)
    return ar2


DOMAINS = {"y_obs": pymc_dp.Interval(*Y_RANGE)}
PUBLIC: tuple[str, ...] = ()
