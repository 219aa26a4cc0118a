"""The utility preview (pymc_dp/mechanisms/preview.py): public facts only, nothing spent."""

from __future__ import annotations

import numpy as np
import pymc as pm
import pytest

import pymc_dp
from pymc_dp.mechanisms.preview import UtilityPreview, simulated_datasets

X = pymc_dp.Binary()


def coin(x):
    with pm.Model() as model:
        xd = pm.Data("x", x)
        pm.Bernoulli("obs", p=pm.Beta("p", 2, 2), observed=xd)
    return model


def regression(X_, y):
    with pm.Model() as model:
        Xd, yd = pm.Data("X", X_), pm.Data("y", y)
        w = pm.Normal("w", 0, 1, shape=2)
        pm.Normal("obs", pm.math.dot(Xd, w), 1.0, observed=yd)
    return model


def test_the_simulated_datasets_read_no_private_value_and_leave_the_model_alone():
    rng = np.random.default_rng(0)
    a = regression(rng.uniform(-1, 1, (30, 2)), rng.uniform(-3, 3, 30))
    b = regression(np.zeros((30, 2)), np.full(30, 2.5))
    domains = {"X": pymc_dp.Box([-1, -1], [1, 1]), "y": pymc_dp.Interval(-3, 3)}
    before = {name: np.array(a[name].get_value()) for name in ("X", "y")}
    _, sa, out_a = simulated_datasets(a, domains, datasets=3, random_seed=4)
    _, sb, out_b = simulated_datasets(b, domains, datasets=3, random_seed=4)
    assert out_a == out_b
    for da, db in zip(sa, sb):
        assert set(da) == {"X", "y"}
        np.testing.assert_array_equal(da["X"], db["X"])
        np.testing.assert_array_equal(da["y"], db["y"])
        assert np.all(np.abs(da["y"]) <= 3) and np.all(np.abs(da["X"]) <= 1)
    for name, value in before.items():  # the user's model still holds its own data
        np.testing.assert_array_equal(a[name].get_value(), value)


def test_the_kept_datasets_are_prior_draws_inside_the_domains_and_the_fewest_outside_only_as_a_fallback():
    with pm.Model() as wide:
        yd = pm.Data("y", np.zeros(20))
        pm.Normal("obs", pm.Normal("mu", 0, 10), 0.1, observed=yd)
    domains = {"y": pymc_dp.Interval(-1, 1)}
    # the rule: draws with (at most 1% of) their records outside are dropped; about 1 in 18 is kept here
    _, sims, outside = simulated_datasets(wide, domains, datasets=4, random_seed=0)
    assert outside == [0, 0, 0, 0]
    assert all(np.all(np.abs(s["y"]) < 1) for s in sims)  # nothing clipped: the draws as simulated
    # too few candidates to accept 4: the rest are the draws with the fewest records outside, clipped
    _, sims, outside = simulated_datasets(wide, domains, datasets=4, candidates=3, random_seed=0)
    assert len(sims) == 3 and outside == sorted(outside) and outside[-1] > 0
    assert all(np.all(np.abs(s["y"]) <= 1) for s in sims)


def test_a_wide_noise_prior_yields_datasets_with_the_noise_the_domain_allows():
    # the gallery's linear model: sigma ~ HalfCauchy(10) against an outcome range of width 8. The
    # rule before (64 draws, the fewest records outside) kept draws with most records clipped and a
    # residual sd near 2 (a wide reference posterior: distances in its sds came out small)
    rng = np.random.default_rng(0)
    with pm.Model() as model:
        x, y = pm.Data("x", rng.uniform(0, 1, 200)), pm.Data("y", rng.uniform(-2, 6, 200))
        mu = pm.Normal("a", 0, 20) + pm.Normal("b", 0, 20) * x
        pm.Normal("obs", mu, pm.HalfCauchy("sigma", 10), observed=y)
    domains = {"x": pymc_dp.Interval(0, 1), "y": pymc_dp.Interval(-2, 6)}
    _, before, out_before = simulated_datasets(model, domains, datasets=3, candidates=64, tolerance=0.0)
    _, after, out_after = simulated_datasets(model, domains, datasets=3)
    assert min(out_before) > 50 and max(out_after) <= 2

    def residual_sd(d):
        design = np.c_[np.ones(200), d["x"]]
        return np.std(d["y"] - design @ np.linalg.lstsq(design, d["y"], rcond=None)[0])

    assert max(map(residual_sd, after)) < 1.5 < min(map(residual_sd, before))


def test_a_tighter_budget_previews_a_farther_release_and_nothing_is_spent(tmp_path):
    model = coin(np.r_[np.ones(120), np.zeros(80)].astype(int))
    ledger = pymc_dp.Ledger(tmp_path / "ledger.sqlite")
    tight = pymc_dp.preview(model, epsilon=0.05, draws=1, data={"x": X}, datasets=3, random_seed=1)
    loose = pymc_dp.preview(model, epsilon=50.0, draws=1, data={"x": X}, datasets=3, random_seed=1)
    assert isinstance(tight, UtilityPreview) and len(tight.releases) == 3
    assert tight.median_distance > loose.median_distance
    assert 0.0 <= loose.within_2_sds <= 1.0 and loose.chosen == "posterior"
    assert "utility preview of path 'posterior'" in str(loose)
    assert ledger.releases() == []


def test_a_path_that_refuses_every_simulated_dataset_says_so():
    with pm.Model() as model:
        yd = pm.Data("y", np.zeros(10))
        # one location per record: no sufficient statistics, and no one law for a histogram
        pm.StudentT("obs", nu=3, mu=pm.Normal("mu", 0, 1, shape=10), sigma=1.0, observed=yd)
    with pytest.raises(pymc_dp.PrivacyError, match="differ"):
        pymc_dp.preview(model, epsilon=1.0, draws=1, data={"y": pymc_dp.Interval(-2, 2)}, path="noisy_statistics",
                        datasets=1)
    with pytest.raises(ValueError, match="datasets"):
        pymc_dp.preview(model, epsilon=1.0, draws=1, data={"y": pymc_dp.Interval(-2, 2)}, datasets=0)


def test_recommend_previews_the_recommended_path_on_request():
    model = coin(np.r_[np.ones(30), np.zeros(20)].astype(int))
    plain = pymc_dp.recommend(model, epsilon=1.0, data={"x": X})
    assert plain.preview is None
    rec = pymc_dp.recommend(model, epsilon=1.0, data={"x": X}, preview=1)
    assert rec.path == plain.path and isinstance(rec.preview, UtilityPreview)
    assert rec.preview.path == "noisy_statistics" and "utility preview" in str(rec)


def test_datasets_that_leave_most_of_the_domain_unused_are_dropped():
    # a noise prior that puts most draws' spread far below the declared range's: with the fill rule
    # every kept dataset's sd is at least 1/32 of the width; without it most are narrower
    with pm.Model() as model:
        yd = pm.Data("y", np.zeros(50))
        pm.Normal("obs", pm.Normal("mu", 0, 0.2), pm.HalfCauchy("sigma", 0.005), observed=yd)
    domains = {"y": pymc_dp.Interval(-1, 1)}
    _, filled, _ = simulated_datasets(model, domains, datasets=4, random_seed=3)
    _, unfilled, _ = simulated_datasets(model, domains, datasets=4, fill=0.0, random_seed=3)
    assert min(np.std(s["y"]) for s in filled) >= 2 / 32
    assert np.median([np.std(s["y"]) for s in unfilled]) < 2 / 32


def test_a_prior_draw_the_sampler_cannot_simulate_is_dropped_not_raised():
    # a Poisson rate exp(N(0, 30)) passes 2**63 in some draws: numpy raises "lam value too large"
    with pm.Model() as model:
        yd = pm.Data("y", np.zeros(30, dtype="int64"))
        pm.Poisson("obs", pm.math.exp(pm.Normal("b", 0, 30)), observed=yd)
    with pytest.raises(ValueError, match="lam"):
        pm.draw(pm.Poisson.dist(np.exp(60.0)), random_seed=0)
    _, sims, outside = simulated_datasets(model, {"y": pymc_dp.Integers(0, 50)}, datasets=3, random_seed=0)
    assert len(sims) == 3 and outside == [0, 0, 0]
    assert all(np.all((s["y"] >= 0) & (s["y"] <= 50)) for s in sims)
