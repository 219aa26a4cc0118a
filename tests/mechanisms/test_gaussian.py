"""Gaussian noise for delta > 0 on the noisy-statistics path: the scale is the least that OpenDP's map
allows, the L2 bound holds over every neighbour of a grid, the exact privacy profile (Balle & Wang)
stays within delta and catches a halved noise scale, and the release goes end to end."""

from __future__ import annotations

import itertools

import numpy as np
import pymc as pm
import pytest

import pymc_dp
from pymc_dp.mechanisms import noise
from pymc_dp.mechanisms.statistics import NoisyStatistics

EPS, DELTA = 1.0, 1e-6


def normal_free_scale(n=8, seed=0):
    rng = np.random.default_rng(seed)
    with pm.Model() as model:
        xd = pm.Data("x", np.clip(rng.normal(1, 1, n), -5, 5))
        pm.Normal("obs", pm.Normal("mu", 0, 3), pm.HalfNormal("s", 2), observed=xd)
    return model, {"x": pymc_dp.Interval(-5, 5)}


@pytest.mark.parametrize("sens,eps,delta", [(1.0, 1.0, 1e-6), (3.0, 0.5, 1e-5), (0.2, 4.0, 1e-9)])
def test_gaussian_scale_is_the_least_that_openDP_allows(sens, eps, delta):
    s = noise.gaussian_scale(sens, eps, delta)
    assert noise.gaussian_epsilon(s, sens, delta) <= eps * (1 + 1e-9)
    assert noise.gaussian_epsilon(0.999 * s, sens, delta) > eps
    # OpenDP's converted zCDP bound is sound: the exact profile at that scale is within delta
    assert noise.gaussian_delta(sens / s, eps) <= delta


def _worst_l2(mech, grid):
    """Brute force: the largest L2 norm of the statistics' change over the noise scales when record 0
    is replaced by any grid point (the exact Gaussian audit's mu)."""
    values = np.asarray(mech.model["x"].get_value(), float)
    base = mech._stat_vector({"x": values})
    b = np.array([mech.noise_scales[s.name] for _, s in mech.statistics])
    worst = 0.0
    for u, v in itertools.product(grid, grid):
        x, y = values.copy(), values.copy()
        x[0], y[0] = u, v
        worst = max(worst, float(np.linalg.norm((mech._stat_vector({"x": x}) - mech._stat_vector({"x": y})) / b)))
    del base
    return worst


def test_exact_audit_passes_and_catches_a_halved_noise_scale():
    model, domains = normal_free_scale()
    mech = pymc_dp.noisy_statistics(model, epsilon=EPS, delta=DELTA, data=domains, ledger=None)
    assert mech.noise == "gaussian" and mech.delta == DELTA
    grid = np.linspace(-5, 5, 81)
    mu = _worst_l2(mech, grid)
    # the certified L2 bound holds on every pair of the grid (in units of the normalised scale)
    unit_scale = mech.noise_scales["sum(x)"] / 10.0
    assert mu * unit_scale <= mech.joint["l2"] * (1 + 1e-12)
    assert noise.gaussian_delta(mu, EPS) <= DELTA  # the release's exact delta at its epsilon
    # half the noise: the exact profile exceeds the claimed delta by far
    assert noise.gaussian_delta(2 * mu, EPS) > 100 * DELTA


def test_statistical_audit_passes_on_a_gaussian_release():
    y = np.random.default_rng(1).binomial(1, 0.3, 20)
    with pm.Model() as coin:
        yd = pm.Data("y", y)
        pm.Bernoulli("o", pm.Beta("p", 1, 1), observed=yd)
    mech = pymc_dp.noisy_statistics(coin, epsilon=0.5, delta=DELTA, data={"y": pymc_dp.Binary()}, ledger=None)
    assert isinstance(mech, NoisyStatistics) and mech.noise == "gaussian"
    res = pymc_dp.audit(mech, runs=20_000, confidence=0.999, random_seed=0, max_pairs=200)
    assert res.verdict == "pass", str(res)  # seeded (audit_noise): the same verdict on every run
    assert res.measured <= 0.5 and res.delta == DELTA


def test_gaussian_release_end_to_end_and_report(tmp_path):
    model, domains = normal_free_scale(n=500, seed=2)
    ledger = pymc_dp.Ledger(tmp_path / "l.sqlite", epsilon=2.0, delta=1e-5)
    mech = pymc_dp.noisy_statistics(model, epsilon=EPS, delta=DELTA, data=domains, ledger=ledger)
    idata = mech.sample(300, tune=300, chains=1, random_seed=3)
    spent = ledger.spent(mech.dataset_id)
    assert spent.epsilon == pytest.approx(EPS) and spent.delta == pytest.approx(DELTA)
    x = np.asarray(model["x"].get_value())
    post = idata.posterior
    assert abs(float(post["mu"].mean()) - x.mean()) < 4 * float(post["mu"].std()) + 0.05
    text = str(pymc_dp.report(idata))
    assert "1e-06)-differential privacy" in text and "L2 sensitivity" in text and "Gaussian" in text


def test_regression_takes_gaussian_noise():
    rng = np.random.default_rng(4)
    X = rng.uniform(-1, 1, (100, 6))
    y = np.clip(X @ rng.normal(0, 0.3, 6) + rng.normal(0, 0.3, 100), -3, 3)
    with pm.Model() as model:
        Xd, yd = pm.Data("X", X), pm.Data("y", y)
        pm.Normal("lik", pm.Normal("a") + Xd @ pm.Normal("b", shape=6), pm.HalfNormal("s"), observed=yd)
    domains = {"X": pymc_dp.Box(-1, 1), "y": pymc_dp.Interval(-3, 3)}
    gauss = pymc_dp.noisy_statistics(model, epsilon=1.0, delta=1e-6, data=domains, ledger=None)
    assert type(gauss).__name__ == "NoisyRegression" and gauss.noise == "gaussian"
    assert gauss.joint["l2"] == pytest.approx(np.sqrt(gauss.joint["K"]))
    # 35 statistics: Gaussian noise on the sqrt(K) L2 bound is smaller than Laplace on K
    lap = pymc_dp.noisy_statistics(model, epsilon=1.0, data=domains, ledger=None)
    assert gauss.noise_scales["sum(y^2)"] < lap.noise_scales["sum(y^2)"]
    gauss.released = {s.name: 0.0 for _, s in gauss.statistics}
    noisy = gauss.noise_aware_model()
    assert type(noisy["_nss_y_noisy"].owner.op).__name__ == "NormalRV"


def test_recommend_advises_on_the_gaussian_release():
    model, domains = normal_free_scale(n=200, seed=5)
    lap = pymc_dp.recommend(model, epsilon=1.0, data=domains)
    gauss = pymc_dp.recommend(model, epsilon=1.0, delta=DELTA, data=domains)
    assert gauss.path == "noisy_statistics" and "Gaussian noise" in gauss.reason
    # two statistics at delta = 1e-6: Gaussian noise costs more than Laplace here
    assert gauss.variance_inflation["sum(x)"] > lap.variance_inflation["sum(x)"] > 1
