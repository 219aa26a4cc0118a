"""The two-stage regression release (pymc_dp.mechanisms.refined).

Checked against exact computations: stage two's loss over a grid of one record's changes for a
fixed fit and band (at most epsilon_2, attained within 1%), and the stage-two spans against the
ranges of their terms; the noise-aware identities ``Z'r = Z'y - Z'Z b`` and
``r'r = y'y - 2 b'Z'y + b'Z'Z b`` when nothing is clipped; the first stage's fit against least
squares; the statistical audit of both stages, which catches a halved second-stage noise; the
release record and the refusals.
"""

from __future__ import annotations

import numpy as np
import pymc as pm
import pytest

import pymc_dp
from pymc_dp.exceptions import PrivacyError, UnsupportedFactorError
from pymc_dp.mechanisms.refined import RefinedRegression, first_stage_fit, stage_two_spans, stage_two_values
from pymc_dp.mechanisms.regression import regression_statistics


def one_covariate(n=6, seed=0, intercept=True):
    rng = np.random.default_rng(seed)
    x = rng.uniform(0, 1, n)
    y = np.clip(0.5 + 1.5 * x + rng.normal(0, 0.2, n), -1, 3)
    with pm.Model() as model:
        xd, yd = pm.Data("x", x), pm.Data("y", y)
        mu = pm.Normal("b", 0, 2) * xd
        if intercept:
            mu = pm.Normal("a", 0, 2) + mu
        pm.Normal("lik", mu, pm.HalfNormal("sigma", 1), observed=yd)
    return model, {"x": pymc_dp.Interval(0, 1), "y": pymc_dp.Interval(-1, 3)}


def test_stage_two_loss_over_one_record_is_epsilon_two_and_attained():
    model, domains = one_covariate()
    mech = pymc_dp.noisy_statistics(model, epsilon=2.0, data=domains, refine=0.75, ledger=None)
    reg = mech.regression
    b, band = np.array([[0.3, 1.2]]), np.array([0.7])
    scales = mech._scales_of(band)[0]
    g = np.linspace(0, 1, 21)
    ys = np.linspace(-1, 3, 81)
    x, y = [a.ravel() for a in np.meshgrid(g, ys)]
    t = np.stack([stage_two_values(reg, {"x": np.array([xi]), "y": np.array([yi])}, b, band)[0] for xi, yi in zip(x, y)])
    loss = np.max(np.abs(t[:, None, :] - t[None, :, :]) @ (1 / scales))
    assert 1.5 / 1.01 <= loss <= 1.5 + 1e-9  # epsilon_2 = 0.75 x 2
    # every span is the range of its term over one record's domain
    spans = np.array([s for _, s, _ in stage_two_spans(reg, 0.7)])
    assert np.allclose(t.max(axis=0) - t.min(axis=0), spans, rtol=0.02)
    assert np.all(t.max(axis=0) - t.min(axis=0) <= spans + 1e-12)


def test_stage_two_identities_hold_when_nothing_is_clipped():
    model, domains = one_covariate(n=30, seed=1)
    reg = RefinedRegression(model, epsilon=1.0, data=domains, refine=0.5, ledger=None).regression
    arrays = {"x": np.asarray(model["x"].get_value()), "y": np.asarray(model["y"].get_value())}
    one = regression_statistics(reg, arrays)  # sum z, sum z^2, sum z y, sum y, sum y^2 (centred)
    n = 30
    S = np.array([[n, one[0]], [one[0], one[1]]])
    Zy = np.array([one[3], one[2]])
    b = np.array([0.1, 1.4])
    two = stage_two_values(reg, arrays, b[None, :], np.array([100.0]))[0]  # band wide: no clip
    Zr = Zy - S @ b
    assert two == pytest.approx([Zr[1], Zr[0], one[4] - 2 * b @ Zy + b @ S @ b], rel=1e-10)


def test_first_stage_fit_is_least_squares_and_the_band_three_residual_sds():
    model, domains = one_covariate(n=200, seed=2)
    mech = RefinedRegression(model, epsilon=1.0, data=domains, refine=0.5, ledger=None)
    reg = mech.regression
    arrays = {"x": np.asarray(model["x"].get_value()), "y": np.asarray(model["y"].get_value())}
    one = regression_statistics(reg, arrays)
    b, band = first_stage_fit(reg, one[None, :], np.full(len(one), 1e-9), 200)
    Z = np.c_[np.ones(200), arrays["x"] - 0.5]
    ls, rss, *_ = np.linalg.lstsq(Z, arrays["y"] - 1.0, rcond=None)
    assert b[0] == pytest.approx(ls, rel=1e-8)
    assert band[0] == pytest.approx(3 * np.sqrt(rss[0] / 198), rel=1e-6)
    # with noise, the band is an upper estimate: wider than three residual sds
    _, wide = first_stage_fit(reg, one[None, :], np.array(list(mech.noise_scales.values())), 200)
    assert wide[0] > band[0]


def test_a_nearly_singular_first_stage_falls_back_instead_of_a_wild_fit():
    # a noisy Z'Z whose covariate block is nearly 0: least squares puts the slope at 10^6; the
    # fit's delta-method error then reaches past max |y|, so the first stage falls back to b = 0
    model, domains = one_covariate(n=200, seed=2)
    mech = RefinedRegression(model, epsilon=1.0, data=domains, refine=0.5, ledger=None)
    reg = mech.regression
    one = np.array([0.0, 1e-6, 3.0, 10.0, 150.0])  # sum z, sum z^2, sum z y, sum y, sum y^2
    b, band = first_stage_fit(reg, one[None, :], np.array(list(mech.noise_scales.values())), 200)
    assert np.all(b == 0.0) and band[0] == pytest.approx(max(abs(v) for v in reg.y_range))


def test_a_first_stage_that_misses_falls_back_to_the_outcome_unclipped():
    model, domains = one_covariate(n=30, seed=1)
    mech = RefinedRegression(model, epsilon=1.0, data=domains, refine=0.5, ledger=None)
    reg = mech.regression
    y_reach = max(abs(reg.y_range[0]), abs(reg.y_range[1]))
    # a noisy residual sum of squares of the order of n y_reach^2: the band would exceed max |y|
    one = np.array([1.0, 2.0, 1.0, 3.0, 30 * y_reach**2 * 5])
    b, band = first_stage_fit(reg, one[None, :], np.array(list(mech.noise_scales.values())), 30)
    assert band[0] == pytest.approx(y_reach) and np.all(b == 0.0)
    arrays = {"x": np.asarray(model["x"].get_value()), "y": np.asarray(model["y"].get_value())}
    two = stage_two_values(reg, arrays, b, band)[0]
    full = regression_statistics(reg, arrays)  # r = y - centre: Z'y, sum y, y'y again, unclipped
    assert two == pytest.approx([full[2], full[3], full[4]], rel=1e-12)
    # and the privacy map at that band is still epsilon_2 (stage two's spans scale with B)
    assert mech._scales_of(band)[0] == pytest.approx(np.array(list(mech.stage_two_scales(y_reach).values())))


def test_release_charges_once_and_states_both_stages(tmp_path):
    model, domains = one_covariate(n=40)
    ledger = pymc_dp.Ledger(tmp_path / "l.sqlite", epsilon=3.0)
    mech = pymc_dp.noisy_statistics(model, epsilon=2.0, data=domains, refine=0.6, ledger=ledger)
    idata = mech.sample(100, tune=100, chains=1, random_seed=0)
    idata2 = mech.sample(100, tune=100, chains=1, random_seed=1)  # post-processing: free
    assert ledger.spent(mech.dataset_id).epsilon == pytest.approx(2.0)
    rec = pymc_dp.record.read(idata)
    assert rec["refine"]["epsilon_stage_one"] == pytest.approx(0.8)
    assert rec["refine"]["epsilon_stage_two"] == pytest.approx(1.2)
    assert set(rec["noise"]["scale"]) >= {"sum(r)", "sum(r^2)"}
    assert set(rec["released"]["statistics"]) >= {"sum(r)", "sum(r^2)"}
    assert "stage two" in rec["law"]["lik"]
    assert set(idata2.posterior.data_vars) == {"a", "b", "sigma"}
    assert "epsilon_2 = 1.2" in str(pymc_dp.report(idata))


def test_it_no_longer_warns_of_undercoverage():
    import warnings

    model, domains = one_covariate()
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)
        pymc_dp.noisy_statistics(model, epsilon=1.0, data=domains, refine=0.5, ledger=None)


def test_refusals():
    model, domains = one_covariate()
    for bad in (0.0, 1.0, 1.5, True):
        with pytest.raises(PrivacyError, match="refine"):
            pymc_dp.noisy_statistics(model, epsilon=1.0, data=domains, refine=bad, ledger=None)
    with pytest.raises(NotImplementedError, match="delta > 0"):
        pymc_dp.noisy_statistics(model, epsilon=1.0, delta=1e-6, data=domains, refine=0.5, ledger=None)
    with pytest.raises(NotImplementedError, match="attribute"):
        pymc_dp.noisy_statistics(model, epsilon=1.0, data=domains, refine=0.5, unit="attribute", ledger=None)
    with pm.Model() as mean_only:
        pm.Normal("lik", pm.Normal("mu"), 1.0, observed=pm.Data("y", np.zeros(5)))
    with pytest.raises(UnsupportedFactorError, match="'lik'|regression"):
        pymc_dp.noisy_statistics(mean_only, epsilon=1.0, data={"y": pymc_dp.Interval(-1, 1)}, refine=0.5, ledger=None)


def test_statistical_audit_passes():
    model, domains = one_covariate(n=4)
    mech = RefinedRegression(model, epsilon=1.0, data=domains, refine=0.5, ledger=None)
    res = pymc_dp.audit(mech, runs=20_000, confidence=0.999, random_seed=0, max_pairs=500)
    assert res.verdict == "pass", str(res)


class FixedFit(RefinedRegression):
    """Stage two about a fixed public fit and a narrow band (stage one's output is ignored: the
    pair stays (epsilon_1 + epsilon_2)-DP), where the clip binds and the second stage's claim
    is attained; at n = 4 the first stage's band is at its cap, and the claim is loose there."""

    def fit(self, outputs):
        rows = np.atleast_2d(outputs).shape[0]
        return np.tile([0.0, 1.5], (rows, 1)), np.full(rows, 0.3)


class HalvedStageTwo(FixedFit):
    """Stage two with half its noise: (epsilon_1 + 2 epsilon_2)-DP, not epsilon."""

    def _scales_of(self, band):
        return super()._scales_of(band) / 2


def test_statistical_audit_passes_where_stage_two_is_tight():
    model, domains = one_covariate(n=4)
    mech = FixedFit(model, epsilon=1.0, data=domains, refine=0.8, ledger=None)
    res = pymc_dp.audit(mech, runs=20_000, confidence=0.999, random_seed=0, max_pairs=500)
    assert res.verdict == "pass", str(res)


@pytest.mark.extended
def test_statistical_audit_catches_halved_stage_two_noise():
    model, domains = one_covariate(n=4)
    bad = HalvedStageTwo(model, epsilon=1.0, data=domains, refine=0.8, ledger=None)
    res = pymc_dp.audit(bad, runs=100_000, confidence=0.999, random_seed=0, max_pairs=500)
    assert res.verdict == "fail", str(res)
    assert res.measured > 1.2


def test_recommend_mentions_two_stages_where_the_first_can_set_a_narrow_band():
    """From public facts only: the band the first stage's noise alone would set, against the
    outcome's half-range (gallery linear regression, n = 300, outcome on [-2, 6]): proposed in
    options there, and not where the first stage's noise is too large."""
    from examples.gallery import glm_linear

    model = glm_linear.build(glm_linear.make_data(300))
    rec = pymc_dp.recommend(model, epsilon=10.0, data=glm_linear.DOMAINS)
    assert rec.path == "noisy_statistics" and rec.options == {"refine": 0.6}
    assert "two stages (refine=0.6)" in rec.reason and "calibrated" in rec.reason
    assert "Not released in two stages" not in rec.reason  # one covariate
    for other in (pymc_dp.recommend(model, epsilon=1.0, data=glm_linear.DOMAINS),
                  pymc_dp.recommend(model, epsilon=10.0, delta=1e-6, data=glm_linear.DOMAINS)):
        assert "two stages" not in other.reason and other.options == {}


def test_recommend_declines_two_stages_with_several_covariates_and_few_records():
    """The diabetes comparison (3 covariates in [-1, 1], outcome in [-1, 1], 309 records, epsilon
    10) is where two stages served worse than one: they are not proposed there, and the reason
    says why (public facts only: the number of covariates and of records); at 1000 records they are."""
    rng = np.random.default_rng(0)
    for n, declined in ((309, True), (1000, False)):
        with pm.Model() as model:
            Xd = pm.Data("X", rng.uniform(-1, 1, (n, 3)))
            yd = pm.Data("y", rng.uniform(-0.5, 0.5, n))
            w = pm.Normal("w", 0.0, 1.0, shape=3)
            pm.Normal("obs", mu=pm.Normal("intercept", 0.0, 1.0) + Xd @ w, sigma=pm.HalfNormal("sigma", 1.0), observed=yd)
        rec = pymc_dp.recommend(model, epsilon=10.0, data={"X": pymc_dp.Box(-1.0, 1.0), "y": pymc_dp.Interval(-1.0, 1.0)})
        assert rec.path == "noisy_statistics"
        assert rec.options == ({} if declined else {"refine": 0.6})
        assert ("Not released in two stages: " in rec.reason and "with 3 covariates and 309 records" in rec.reason) is declined
