"""pymc_dp.audits.statistical: Clopper-Pearson bounds from many runs of the exact samplers (1e5 runs:
extended), the grid sampler, long chains and MCMC (where the runs are too few to conclude:
"inconclusive"); the chain sampler's range check and mixing diagnostics; a wrong rule is caught."""

from __future__ import annotations

import numpy as np
import pymc as pm
import pytest
from pytensor.tensor.random.basic import BernoulliRV
from scipy import stats

import pymc_dp
from pymc_dp.audits import audit, clopper_pearson
from tests import models
from tests.audits.helpers import CONJUGATE, NUMERICAL, private, scalar, wrong_rule


def test_wrong_bernoulli_rule_is_caught_by_the_statistical_audit(lipschitz_only):
    """1e5 exact draws on each of the two datasets the search picks: the Clopper-Pearson lower
    bound at 95% exceeds the claim."""
    with wrong_rule(BernoulliRV, 0.25):
        pmod = private(models.coin(n=4), 1.0)
    res = audit(pmod, method="statistical", runs=100_000, random_seed=0)
    assert res.sampler == "exact" and res.verdict == "fail", str(res)
    assert res.measured > res.claimed and res.witness.event["statistic"] == "log-ratio"


def test_clopper_pearson_matches_scipy():
    for k, n in [(0, 10), (3, 10), (10, 10), (480, 5000), (1, 100000)]:
        lo, hi = clopper_pearson(k, n, 0.025)
        ci = stats.binomtest(k, n).proportion_ci(confidence_level=0.95, method="exact")
        assert lo == pytest.approx(ci.low, rel=1e-5, abs=1e-15)  # scipy's root finder: ~1e-6
        assert hi == pytest.approx(ci.high, rel=1e-5)
        if 0 < k < n:
            assert lo == pytest.approx(stats.beta.ppf(0.025, k, n - k + 1), rel=1e-9)
            assert hi == pytest.approx(stats.beta.isf(0.025, k + 1, n - k), rel=1e-9)
    assert clopper_pearson(1, 100000, 0.025)[0] == pytest.approx(-np.expm1(np.log(0.975) / 100000), rel=1e-12)


def test_statistical_audit_small_release_full():
    """release='full': a statistic of a whole release of N draws against the total epsilon."""
    pmod = private(models.coin(n=6), 1.0 * 3, draws=3)
    res = audit(pmod, method="statistical", release="full", runs=20_000)
    assert res.claimed == pmod.certificate.epsilon and res.release == "full"
    assert res.verdict == "pass" and res.measured <= res.claimed


def test_statistical_audit_grid_sampler():
    pmod = private(scalar("Laplace"), 6.0)
    res = audit(pmod, method="statistical", runs=40_000, max_bases=30)
    assert res.sampler == "grid" and res.verdict == "pass" and res.measured <= res.claimed
    assert res.measured > 0.2 * res.claimed  # the pilot found a pair where the loss is visible


@pytest.mark.extended
@pytest.mark.parametrize(
    "name",
    ["Bernoulli", "Binomial", "Categorical", "Poisson", "Exponential", "Normal", "naive Bayes", "chain net"],
)
def test_statistical_audit_passes_with_exact_samplers(name):
    build, eps = CONJUGATE[name]
    model, domains = build()
    n = len(next(iter(v.get_value() for v in model.data_vars)))
    pmod = private((model, domains), eps)
    res = audit(pmod, method="statistical", runs=100_000, max_bases=60, random_seed=5)
    assert res.sampler == "exact" and res.runs == 100_000
    assert res.verdict == "pass", str(res)
    assert res.measured <= res.claimed and res.power > res.claimed
    assert n > 0


@pytest.mark.extended
@pytest.mark.parametrize("unit", ["attribute", pymc_dp.Users(max_rows=2)])
def test_statistical_audit_passes_other_units(unit):
    pmod = private(models.naive_bayes(n=6, m=3), 2.0, unit=unit)
    res = audit(pmod, method="statistical", runs=100_000, max_bases=40, random_seed=6)
    assert res.verdict == "pass", str(res)


@pytest.mark.extended
@pytest.mark.parametrize("name", ["logistic regression", "Normal location-scale", "Geometric"])
def test_statistical_audit_grid_sampler_families(name):
    build, eps = NUMERICAL[name]
    res = audit(private(build(), eps), method="statistical", runs=100_000, max_bases=8, random_seed=7)
    assert res.sampler == "grid" and res.verdict == "pass", str(res)


@pytest.mark.extended
def test_statistical_audit_of_mcmc_is_inconclusive_with_few_runs(tmp_path):
    """MCMC runs cost seconds each: 12 runs cannot refute a claim of 1 and the verdict says so;
    the runs are real releases of the copy made for the audit, and nothing is charged."""
    ledger = pymc_dp.Ledger(tmp_path / "ledger.sqlite")
    model, domains = models.coin(n=10)
    pmod = pymc_dp.make_private(model, epsilon=1.0, draws=2, data=domains, ledger=ledger)
    res = audit(pmod, method="statistical", sampler="mcmc", runs=12,
                mcmc_kwargs={"tune": 100, "chains": 1, "cores": 1}, random_seed=2)
    assert res.sampler == "mcmc" and res.verdict == "inconclusive", str(res)
    assert res.power <= res.claimed
    assert ledger.spent(pmod.dataset_id).releases == 0


def test_chain_sampler_is_the_default_for_many_parameters_and_draws_only_released_names():
    """More than two free scalars and no conjugate plan: the statistical audit runs thinned long
    chains on the truncated posterior; its statistics are the released names and the
    log-likelihood ratio, never a Deterministic that reads private data (which differs between
    neighbours by construction and would read as a privacy loss)."""
    from pymc_dp.audits.statistical import _ChainRuns

    rng = np.random.default_rng(3)
    n = 12
    with pm.Model() as model:
        xd = pm.Data("x", rng.uniform(0, 1, n))
        yd = pm.Data("y", rng.integers(0, 2, n))
        b = pm.Normal("b", 0, 1, shape=3)
        eta = pm.Deterministic("eta", b[0] + b[1] * xd + b[2] * xd * xd)
        pm.Bernoulli("obs", logit_p=eta, observed=yd)
    domains = {"x": pymc_dp.Interval(0, 1), "y": pymc_dp.Binary()}
    pmod = pymc_dp.make_private(model, epsilon=4.0, draws=2, data=domains, ledger=None)
    x = {"x": np.zeros(n), "y": np.zeros(n, dtype=int)}
    y = {"x": np.r_[1.0, np.zeros(n - 1)], "y": np.r_[1, np.zeros(n - 1, dtype=int)]}
    draw_x, _ = _ChainRuns(pmod, x, y, {"tune": 200, "chains": 2}).samplers()
    out = draw_x(40, np.random.default_rng(0))
    assert set(out) == {"b", "__log_ratio__"} and out["b"].shape == (40, 3)
    assert np.all(np.isfinite(out["__log_ratio__"]))
    res = audit(pmod, runs=200, mcmc_kwargs={"tune": 200, "chains": 2}, random_seed=1)
    assert res.method == "statistical" and res.sampler == "chain"
    assert res.verdict in ("pass", "inconclusive") and res.measured <= res.claimed


def test_chain_audit_refutes_a_wrong_rule_by_the_range_over_visited_points(lipschitz_only):
    """The chain sampler's range check: the log-likelihood ratio's range over the points the
    chains visit is a lower bound on the oscillation the certificate bounds by the claim, and a
    wrong rule (a quarter of the Bernoulli range, so a region four times too wide) is refuted by
    it with parameter points as the witness, whatever the chains' mixing."""
    with wrong_rule(BernoulliRV, 0.25):
        pmod = private(models.coin(n=4), 1.0)
    res = audit(pmod, method="statistical", sampler="chain", runs=200, random_seed=0,
                mcmc_kwargs={"tune": 300, "chains": 2})
    assert res.verdict == "fail" and res.measured_by == "range", str(res)
    assert res.measured > 1.5 * res.claimed
    ev = res.witness.event
    assert ev["max"] - ev["min"] == pytest.approx(res.measured) and res.witness.log_ratio == pytest.approx(res.measured)
    # and it is a lower bound on the truth: the wrong region is |logit p| <= 2 (a quarter of the
    # range within Delta = 0.5), where one record's log-ratio +-logit p oscillates by at most 4
    assert res.measured <= 4.0 + 1e-9
    assert "visited points" in str(res) and "whatever the chains' mixing" in str(res)


def test_chain_verdict_sets_the_event_test_aside_only_when_the_chains_did_not_mix():
    """chain_verdict on synthetic outcomes: a range above the claim fails whatever the mixing;
    chains that mixed keep the event test's verdict; chains that did not mix (a centred
    hierarchical funnel: R-hat 2, divergences) have their event test set aside for the range."""
    from pymc_dp.audits.result import Witness
    from pymc_dp.audits.statistical import chain_verdict

    w = Witness({}, {}, {}, 1.0, None, {"statistic": "sigma_b"}, "constant")
    mixed = {"rhat": 1.01, "worst": "b", "divergent": 0.0, "mixed": True}
    stuck = {"rhat": 2.04, "worst": "sigma_a", "divergent": 0.03, "mixed": False}

    def res(osc, mixing):
        return {"oscillation": osc, "g_max": osc / 2, "g_min": -osc / 2, "visited": 800, "witness": w,
                "mixing": {"x": mixing, "y": mixed}}

    notes = []
    r = res(1.3, mixed)
    assert chain_verdict("pass", 0.2, r, 1.0, 1e-6, notes) == ("fail", 1.3, "range")
    assert r["witness"].event["max"] == 0.65 and r["witness"].log_ratio == 1.3
    assert chain_verdict("fail", 1.6, res(1.3, stuck), 1.0, 1e-6, []) == ("fail", 1.3, "range")
    assert chain_verdict("fail", 1.6, res(0.45, mixed), 1.0, 1e-6, []) == ("fail", 1.6, "event")
    assert chain_verdict("inconclusive", 0.1, res(0.45, mixed), 1.0, 1e-6, []) == ("inconclusive", 0.1, "event")
    notes = []
    assert chain_verdict("fail", 1.6, res(0.45, stuck), 1.0, 1e-6, notes) == ("pass", 0.45, "range")
    assert "did not mix" in notes[-1] and "R-hat 2.04 (sigma_a)" in notes[-1] and "set aside" in notes[-1]


def test_mixing_reads_rhat_and_divergences():
    """Two chains stuck at different values: R-hat far above 1; divergences counted."""
    import arviz as az

    from pymc_dp.audits.statistical import _mixing

    rng = np.random.default_rng(0)
    good = az.from_dict(posterior={"a": rng.normal(size=(2, 200))},
                        sample_stats={"diverging": np.zeros((2, 200), bool)})
    bad = az.from_dict(posterior={"a": rng.normal(size=(2, 200)) + np.array([[0.0], [5.0]]),
                                  "hidden": rng.normal(size=(2, 200)) + np.array([[0.0], [50.0]])},
                       sample_stats={"diverging": rng.random((2, 200)) < 0.05})
    g = _mixing(good, {"a"})
    assert g["mixed"] and g["rhat"] < 1.05 and g["divergent"] == 0.0
    b = _mixing(bad, {"a"})
    assert not b["mixed"] and b["worst"] == "a" and b["rhat"] > 1.5 and 0.02 < b["divergent"] < 0.08
