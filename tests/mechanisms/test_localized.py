"""Localize, then sample (pymc_dp/mechanisms/localized.py; docs/theory/localized.md).

The privacy proof is adaptive composition of two exponential mechanisms, each with a certified
oscillation on its box; the second box is a function of the first stage's output and public
facts. Checked here: each stage's exact output density ratio on a conjugate model (Beta-Bernoulli)
against its share, for the first box and for second boxes built at several locations; a doubled
first-stage temperature (half the noise) is caught by the same exact check; the second box does
not move when the private data change (it reads the location and public facts only); the ledger
is charged once, before anything runs, with the sum of the two stages.
"""

import json
import logging

import numpy as np
import pymc as pm
import pytest

import pymc_dp
from pymc_dp.mechanisms.localized import LocalizedPosterior, wide_box

X = np.array([1, 1, 0, 1, 1, 1, 0, 1])
GRID = {"p": np.linspace(0.001, 0.999, 999)}


def coin():
    with pm.Model() as model:
        xd = pm.Data("x", X)
        p = pm.Beta("p", 2, 2)
        pm.Bernoulli("obs", p=p, observed=xd)
    return model


def neighbours():
    """Every record-unit neighbour of X (one row replaced by the other value)."""
    for i in range(len(X)):
        y = X.copy()
        y[i] = 1 - y[i]
        yield y


def worst_log_ratio(mech, epsilon_share):
    """The largest |ln q_x - ln q_y| over the grid inside the box, over every neighbour y."""
    worst = 0.0
    for y in neighbours():
        lr = mech._log_density_ratio({"x": X}, {"x": y})(GRID)
        worst = max(worst, float(np.nanmax(np.abs(lr[np.isfinite(lr)]))))
    return worst


@pytest.fixture(scope="module")
def mech():
    return LocalizedPosterior(coin(), epsilon=4.0, draws=1, data={"x": pymc_dp.Binary()}, ledger=None)


def test_the_first_stage_is_exactly_within_its_share(mech):
    assert mech.locate.conjugate_plan is not None  # the exact density is known
    assert mech.epsilon_locate == pytest.approx(1.0)
    worst = worst_log_ratio(mech.locate, mech.epsilon_locate)
    assert worst <= mech.epsilon_locate * (1 + 1e-9)
    assert worst >= 0.3 * mech.epsilon_locate  # and the share is not wasted


def test_a_halved_first_stage_noise_is_caught_by_the_exact_check(mech):
    """beta_1 doubled (the first stage's temperature twice the certified one): the exact ratio
    exceeds epsilon_1 for some neighbour, so the check above can fail."""
    wrong = mech.locate.with_data({"x": X})
    wrong.beta = 2 * mech.locate.beta
    wrong.conjugate_plan = wrong.private_model.conjugate_plan.tempered(wrong.beta)
    assert worst_log_ratio(wrong, mech.epsilon_locate) > mech.epsilon_locate


@pytest.mark.parametrize("location", [0.2, 0.55, 0.9])
def test_the_second_stage_fits_its_share_for_every_box(mech, location):
    """Stage 2 at the box the width rule builds around a location: exact ratio <= epsilon_2."""
    from pymc_dp.mechanisms.map import PrivateMAP

    choice = mech.second_box({"p": np.array(location)})
    lo, hi = choice["bounds"]["p"]
    assert lo < location < hi
    stage = PrivateMAP(coin(), epsilon=mech.epsilon_sample, draws=1, bounds=choice["bounds"],
                       data={"x": pymc_dp.Binary()}, ledger=None)
    assert stage.beta <= 1.0 or choice["beta_2"] == 1.0
    assert worst_log_ratio(stage, mech.epsilon_sample) <= mech.epsilon_sample * (1 + 1e-9)


def test_the_second_box_reads_no_data_value(mech):
    """The width rule sees the location and public facts only: other private data, same box."""
    other = mech.with_data({"x": 1 - X})
    a = mech.second_box({"p": np.array(0.6)})
    b = other.second_box({"p": np.array(0.6)})
    np.testing.assert_array_equal(a["bounds"]["p"], b["bounds"]["p"])
    assert a["c"] == b["c"] and a["beta_2"] == b["beta_2"]


def test_the_release_is_charged_once_with_both_stages_and_states_them(tmp_path):
    ledger = pymc_dp.Ledger(tmp_path / "ledger.sqlite", epsilon=10.0)
    mech = LocalizedPosterior(coin(), epsilon=4.0, draws=2, data={"x": pymc_dp.Binary()}, ledger=ledger)
    idata = mech.sample(random_seed=3)
    assert idata.posterior.sizes["draw"] * idata.posterior.sizes["chain"] == 2
    record = json.loads(idata.attrs["pymc_dp"])
    assert record["epsilon"] == pytest.approx(4.0)
    release = record["release"]
    assert release["epsilon_locate"] + release["epsilon_sample"] == pytest.approx(4.0)
    lo, hi = release["box_sample"]["p"]
    draws = idata.posterior["p"].values.ravel()
    assert np.all((draws >= lo) & (draws <= hi))
    assert lo <= release["location"]["p"] <= hi
    spent = ledger.spent(mech.dataset_id)
    assert spent.epsilon == pytest.approx(4.0)
    with pytest.raises(pymc_dp.BudgetExceededError):  # 8 > 10 - 4: refused before anything runs
        LocalizedPosterior(coin(), epsilon=8.0, draws=1, data={"x": pymc_dp.Binary()}, ledger=ledger).sample(random_seed=1)
    assert ledger.spent(mech.dataset_id).epsilon == pytest.approx(4.0)


def test_the_default_first_box_is_the_priors_central_interval():
    """About 99.9% of the prior inside, a little of each tail outside (public prior draws)."""
    from scipy import stats

    lo, hi = wide_box(coin())["p"]
    prior = stats.beta(2, 2)
    inside = prior.cdf(hi) - prior.cdf(lo)
    assert 0.997 <= inside <= 0.99995
    assert prior.cdf(lo) > 0 and prior.sf(hi) > 0


def test_a_discrete_parameter_is_refused_typed_and_named():
    with pm.Model() as model:
        xd = pm.Data("x", np.array([0, 3, 5]))
        k = pm.DiscreteUniform("k", 0, 5)
        pm.Poisson("obs", mu=k + 1.0, observed=xd)
    with pytest.raises(pymc_dp.UnsupportedFactorError, match="'k' is discrete"):
        LocalizedPosterior(model, epsilon=4.0, draws=1, data={"x": pymc_dp.Integers(0, 10)}, ledger=None)


@pytest.mark.parametrize("bad", [0.0, 1.0, -0.1, True])
def test_the_location_share_must_be_a_fraction(bad):
    with pytest.raises(pymc_dp.PrivacyError, match="localize"):
        LocalizedPosterior(coin(), epsilon=4.0, draws=1, data={"x": pymc_dp.Binary()}, ledger=None, localize=bad)


def test_make_private_and_the_decorator_offer_the_localized_path():
    mech = pymc_dp.make_private(coin(), epsilon=4.0, draws=1, data={"x": pymc_dp.Binary()}, ledger=None, path="localized")
    assert isinstance(mech, LocalizedPosterior)

    @pymc_dp.private(epsilon=4.0, draws=1, data={"x": pymc_dp.Binary()}, ledger=None, path="localized")
    def build():
        return coin()

    assert isinstance(build(), LocalizedPosterior)
    with pytest.raises(pymc_dp.PrivacyError, match="not a release path"):
        pymc_dp.make_private(coin(), epsilon=4.0, draws=1, data={"x": pymc_dp.Binary()}, ledger=None, path="bogus")
    with pytest.raises(pymc_dp.PrivacyError, match="bounds= and split="):
        pymc_dp.make_private(coin(), epsilon=4.0, draws=1, data={"x": pymc_dp.Binary()}, ledger=None,
                             path="localized", bounds={"p": (0.1, 0.9)})


def test_an_unbounded_covariate_domain_is_refused_before_anything_is_charged():
    """The width rule simulates covariates from their domains: an unbounded one is refused at
    construction (not after the charge)."""
    rng = np.random.default_rng(0)
    with pm.Model() as model:
        x = pm.Data("x", rng.normal(size=20))
        y = pm.Data("y", rng.integers(0, 2, 20))
        w = pm.Normal("w", 0, 1)
        pm.Bernoulli("obs", logit_p=w * x, observed=y)
    with pytest.raises(pymc_dp.PrivacyError, match="'x'"):
        LocalizedPosterior(model, epsilon=4.0, draws=1, data={"x": pymc_dp.Interval(-np.inf, np.inf), "y": pymc_dp.Binary()},
                           ledger=None)


def test_with_delta_and_many_draws_the_second_stage_fits_its_share():
    """delta > 0: the draws compose optimally; a box with eps0(B_2) <= eps0_2 then fits epsilon_2."""
    mech = LocalizedPosterior(coin(), epsilon=4.0, draws=50, delta=1e-5, data={"x": pymc_dp.Binary()}, ledger=None)
    choice = mech.second_box({"p": np.array(0.6)})
    if choice["beta_2"] >= 1.0:
        stage = mech._core_for(choice["bounds"], mech.draws, None)
        assert stage.certificate.epsilon <= mech.epsilon_sample * (1 + 1e-9)
    idata = mech.sample(random_seed=2)
    assert idata.posterior.sizes["draw"] * idata.posterior.sizes["chain"] == 50


def test_a_first_box_too_costly_to_locate_falls_back_to_a_posterior_draw():
    """The gallery's linear regression: the wide box reaches scales near 0, where one record moves
    the likelihood without bound, so beta_1 is below 1e-2 (its draw would be nearly a prior draw):
    the first stage is posterior sampling on a region chosen for epsilon_1 (public choice)."""
    from examples.gallery import glm_linear as mod

    model = mod.build(mod.make_data())
    mech = LocalizedPosterior(model, epsilon=10.0, draws=1, data=mod.DOMAINS, public=mod.PUBLIC, ledger=None)
    assert mech.first_stage == "posterior" and mech.locate.beta == 1.0 and mech.wide is None
    tempered = LocalizedPosterior(model, epsilon=10.0, draws=1, data=mod.DOMAINS, public=mod.PUBLIC, ledger=None,
                                  first_stage="tempered")
    assert tempered.first_stage == "tempered" and tempered.locate.beta < 1e-2


def test_a_first_box_the_rules_cannot_bound_falls_back_to_a_posterior_draw(monkeypatch):
    """The gallery's rat tumours: the wide box reaches probabilities of 0 or 1, where the Binomial's
    constant is infinite, and the tempered first stage is refused; path 'auto' then locates with a
    posterior draw (benchmarks/results/gallery_utility_smoke.md had it refused at certify)."""
    import pymc_dp.mechanisms.localized as localized

    real = localized.PrivateMAP

    def refusing(*args, bounds=None, **kwargs):
        if bounds is not None:
            raise pymc_dp.BudgetExceededError("bounds=: factor 'obs' (Bernoulli) has no finite per-record constant")
        return real(*args, **kwargs)

    monkeypatch.setattr(localized, "PrivateMAP", refusing)
    mech = LocalizedPosterior(coin(), epsilon=4.0, draws=1, data={"x": pymc_dp.Binary()}, ledger=None)
    assert mech.first_stage == "posterior" and mech.wide is None
    with pytest.raises(pymc_dp.BudgetExceededError):
        LocalizedPosterior(coin(), epsilon=4.0, draws=1, data={"x": pymc_dp.Binary()}, ledger=None, first_stage="tempered")


# --------------------------------------------------------------------------- what a release holds
#: the release section of a localized record: the paid-for stage facts and the driver's fields
RELEASE_KEYS = {"mechanism", "epsilon_locate", "epsilon_sample", "beta_locate", "location", "first_stage", "box_locate",
                "box_sample", "fallback", "width_rule", "beta_sample", "method", "ledger"}
#: what may differ between the records of two datasets of the same shapes: functions of the
#: location, which is paid for by the first stage's share
PAID_FOR = {"location", "box_sample", "fallback", "width_rule", "beta_sample"}


def _student(y):
    with pm.Model() as model:
        yd = pm.Data("y", y)
        pm.StudentT("obs", nu=3, mu=pm.Normal("mu", 0, 3), sigma=1.0, observed=yd)
    return model


def test_a_release_holds_released_draws_and_public_facts_only(tmp_path):
    """What a release may hold (docs/theory/release.md), for the two-stage release: only the
    posterior group, no attribute but the record, no data value or statistic or fingerprint in it, and between two datasets of the
    same shapes the record differs only in the paid-for functions of the location."""
    h5py = pytest.importorskip("h5py")
    rng = np.random.default_rng(7)
    ya, yb = rng.uniform(-4, 4, 24), rng.uniform(-4, 4, 24)
    records, releases = [], []
    for y in (ya, yb):
        mech = LocalizedPosterior(_student(y), epsilon=4.0, draws=3, data={"y": pymc_dp.Interval(-5, 5)}, ledger=None)
        idata = mech.sample(random_seed=5, chains=1, tune=200)
        assert idata.groups() == ["posterior"] and set(idata.posterior.data_vars) == {"mu"}
        assert set(idata.attrs) == {"pymc_dp"} and set(idata.posterior.attrs) == {"pymc_dp"}
        text = idata.attrs["pymc_dp"]
        assert mech.dataset_id[:8] not in text
        for stat in (*y, y.mean(), y.sum(), float(np.median(y)), y.std()):
            assert repr(float(stat)) not in text, stat
        record = json.loads(text)
        assert set(record["release"]) == RELEASE_KEYS, sorted(record["release"])
        records.append(record)
        path = tmp_path / f"{len(releases)}.nc"
        idata.to_netcdf(path)
        with h5py.File(path, "r") as f:
            assert set(f.keys()) == {"posterior"}
        assert mech.dataset_id[:8].encode() not in path.read_bytes()
        assert y.astype(np.float64).tobytes() not in path.read_bytes()
        releases.append(idata)
    a, b = ({**r, "release": {k: v for k, v in r["release"].items() if k not in PAID_FOR}} for r in records)
    assert a == b


def test_the_first_stage_runs_quietly_and_the_released_run_as_pymc_speaks(caplog):
    mech = LocalizedPosterior(_student(np.linspace(-1, 2, 12)), epsilon=4.0, draws=2, data={"y": pymc_dp.Interval(-5, 5)},
                              ledger=None)
    with caplog.at_level(logging.INFO, logger="pymc"):
        mech.sample(random_seed=1, chains=1, tune=100)
    runs = [r for r in caplog.records if r.getMessage().startswith("Sampling 1 chain")]
    assert len(runs) == 1 and "2 draw iterations" in runs[0].getMessage()
    assert logging.getLogger("pymc").level == logging.NOTSET or logging.getLogger("pymc").level <= logging.INFO


def test_a_second_stage_over_its_share_is_a_typed_refusal_and_the_charge_stays(tmp_path, monkeypatch):
    """A second box certified above epsilon_2 would be pymc_dp's defect: it must be caught, typed,
    with nothing released (the first stage already ran, so the charge stays, as failed)."""
    ledger = pymc_dp.Ledger(tmp_path / "ledger.sqlite")
    mech = LocalizedPosterior(coin(), epsilon=4.0, draws=1, data={"x": pymc_dp.Binary()}, ledger=ledger)
    honest = mech.second_box

    def too_wide(theta_hat):  # the whole unit interval at beta_2 = 1: 2 ln(0.999 / 0.001) > epsilon_2 = 3
        return {**honest(theta_hat), "bounds": {"p": (0.001, 0.999)}, "beta_2": 1.0}

    monkeypatch.setattr(mech, "second_box", too_wide)
    with pytest.raises(pymc_dp.BudgetExceededError, match="defect of pymc_dp"):
        mech.sample(random_seed=2)
    assert mech.last_release is None
    (row,) = ledger.releases()
    assert row["status"] == "failed" and row["epsilon"] == pytest.approx(4.0)
