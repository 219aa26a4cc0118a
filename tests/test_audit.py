"""Privacy audits (pymc_dp.audits): the real rules pass, deliberately wrong rules are caught, and
every number the audit reports is checked against an independent computation.

* exact audits (conjugate models): every conjugate family, record / attribute / user units;
* numerical audits (any family, at most two free parameters): every other family, linear and
  logistic regression, attribute and user units;
* statistical audits: Clopper-Pearson bounds from 1e5 runs of the exact samplers (slow), the grid
  sampler, and MCMC (where the runs are too few to conclude: "inconclusive");
* wrong rules injected here (a Bernoulli, Laplace and Normal rule that report half the true range,
  so that the truncation is too wide) give "fail" with a witness;
* the audit spends nothing from the ledger and says that its output is not a DP release.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json

import numpy as np
import pymc as pm
import pytest
from pytensor.tensor.random.basic import BernoulliRV, LaplaceRV, NormalRV
from scipy import stats

import pymc_dp
from pymc_dp.audits import AuditError, AuditResult, audit, clopper_pearson
from pymc_dp.rules.base import log_density_range
from tests import models

TOL = 1e-6  # the audit's relative tolerance on the claim (the truncation is solved to 1e-9)


def private(model_domains, epsilon, unit="record", draws=1, **kw):
    model, domains = model_domains
    return pymc_dp.make_private(model, epsilon=epsilon, draws=draws, data=domains, unit=unit, ledger=None, **kw)


def within_claim(res: AuditResult):
    return res.measured <= res.claimed * (1 + TOL) + res.error


# =========================================================================== model builders
def _data(rng, dom, n):
    if isinstance(dom, pymc_dp.Integers):
        return rng.integers(dom.lo, dom.hi + 1, n)
    return rng.uniform(dom.lo, dom.hi, n)


#: one-parameter models: (domain, prior, likelihood, epsilon); no exact sampler
SCALAR = {
    "Laplace": (pymc_dp.Interval(-1, 1), lambda: pm.Normal("mu", 0, 1), lambda t, o: pm.Laplace("obs", mu=t, b=0.5, observed=o), 6.0),
    "StudentT": (pymc_dp.Interval(-1, 1), lambda: pm.Normal("mu", 0, 1), lambda t, o: pm.StudentT("obs", nu=3, mu=t, sigma=0.3, observed=o), 2.0),
    "Cauchy": (pymc_dp.Interval(-1, 1), lambda: pm.Normal("mu", 0, 1), lambda t, o: pm.Cauchy("obs", alpha=t, beta=0.5, observed=o), 2.0),
    "LogNormal": (pymc_dp.Interval(1, 10), lambda: pm.Normal("mu", 1, 1), lambda t, o: pm.LogNormal("obs", mu=t, sigma=0.7, observed=o), 4.0),
    "Exponential": (pymc_dp.Interval(0, 5), lambda: pm.LogNormal("lam", 0, 1), lambda t, o: pm.Exponential("obs", lam=t, observed=o), 2.0),
    "Gamma": (pymc_dp.Interval(0.5, 5), lambda: pm.Gamma("rate", 2, 1), lambda t, o: pm.Gamma("obs", alpha=2.0, beta=t, observed=o), 2.0),
    "Beta": (pymc_dp.Interval(0.1, 0.9), lambda: pm.Gamma("a", 2, 1), lambda t, o: pm.Beta("obs", alpha=t, beta=2.0, observed=o), 3.0),
    "Geometric": (pymc_dp.Integers(1, 10), lambda: pm.Beta("p", 1, 1), lambda t, o: pm.Geometric("obs", p=t, observed=o), 2.0),
    "Poisson": (pymc_dp.Integers(0, 10), lambda: pm.LogNormal("lam", 1, 1), lambda t, o: pm.Poisson("obs", mu=t, observed=o), 8.0),
    "Bernoulli": (pymc_dp.Binary(), lambda: pm.Normal("theta", 0, 1), lambda t, o: pm.Bernoulli("obs", logit_p=t, observed=o), 2.0),
}


def scalar(family, n=30, seed=0):
    rng = np.random.default_rng(seed)
    dom, prior, lik, _ = SCALAR[family]
    with pm.Model() as model:
        xd = pm.Data("x", _data(rng, dom, n))
        lik(prior(), xd)
    return model, {"x": dom}


def location_scale(family, n=30, seed=0):
    rng = np.random.default_rng(seed)
    with pm.Model() as model:
        yd = pm.Data("y", rng.uniform(-1, 1, n))
        mu = pm.Normal("mu", 0, 1)
        s = pm.HalfNormal("s", 1)
        dist = {"Normal": pm.Normal, "Laplace": pm.Laplace, "StudentT": None}[family]
        if family == "Laplace":
            dist("obs", mu=mu, b=s, observed=yd)
        else:
            dist("obs", mu=mu, sigma=s, observed=yd)
    return model, {"y": pymc_dp.Interval(-1, 1)}


def logistic1(n=30, seed=0):
    """Logistic regression with one feature and an intercept: two free parameters."""
    rng = np.random.default_rng(seed)
    X = rng.uniform(-1, 1, (n, 1))
    y = (rng.random(n) < 1 / (1 + np.exp(-2 * X[:, 0]))).astype(int)
    with pm.Model() as model:
        Xd, yd = pm.Data("X", X), pm.Data("y", y)
        w = pm.Normal("w", 0, 2, shape=1)
        b = pm.Normal("b", 0, 1)
        pm.Bernoulli("obs", logit_p=Xd @ w + b, observed=yd)
    return model, {"X": pymc_dp.Ball(1.0), "y": pymc_dp.Binary()}


def linear1(n=30, seed=0, free_sigma=True):
    """Linear regression with one feature: weight and scale, or weight and intercept (known scale)."""
    rng = np.random.default_rng(seed)
    X = rng.uniform(-1, 1, (n, 1))
    y = np.clip(0.5 * X[:, 0] + 0.2 * rng.normal(size=n), -1, 1)
    with pm.Model() as model:
        Xd, yd = pm.Data("X", X), pm.Data("y", y)
        w = pm.Normal("w", 0, 1, shape=1)
        if free_sigma:
            pm.Normal("obs", mu=Xd @ w, sigma=pm.HalfNormal("sigma", 1), observed=yd)
        else:
            pm.Normal("obs", mu=Xd @ w + pm.Normal("b", 0, 1), sigma=0.5, observed=yd)
    return model, {"X": pymc_dp.Ball(1.0), "y": pymc_dp.Interval(-1, 1)}


def binomial(n=20, seed=0):
    rng = np.random.default_rng(seed)
    with pm.Model() as model:
        kd = pm.Data("k", rng.integers(0, 4, n))
        p = pm.Beta("p", 2, 2)
        pm.Binomial("obs", n=3, p=p, observed=kd)
    return model, {"k": pymc_dp.Integers(0, 3)}


def gamma_exponential(n=20, seed=0):
    rng = np.random.default_rng(seed)
    with pm.Model() as model:
        zd = pm.Data("z", rng.uniform(0, 5, n))
        lam = pm.Gamma("lam", 2.0, 1.0)
        pm.Exponential("obs", lam=lam, observed=zd)
    return model, {"z": pymc_dp.Interval(0, 5)}


def normal_mean(n=20, seed=0):
    rng = np.random.default_rng(seed)
    with pm.Model() as model:
        yd = pm.Data("y", rng.uniform(-1, 1, n))
        mu = pm.Normal("mu", 0, 1)
        pm.Normal("obs", mu=mu, sigma=0.5, observed=yd)
    return model, {"y": pymc_dp.Interval(-1, 1)}


def gamma_poisson(n=20, seed=0):
    rng = np.random.default_rng(seed)
    with pm.Model() as model:
        cd = pm.Data("c", rng.integers(0, 11, n))
        lam = pm.Gamma("lam", 2.0, 0.5)
        pm.Poisson("obs", mu=lam, observed=cd)
    return model, {"c": pymc_dp.Integers(0, 10)}


#: conjugate models (exact audits): builder, epsilon per draw, units
CONJUGATE = {
    "Bernoulli": (lambda: models.coin(n=30), 1.0),
    "Binomial": (binomial, 4.0),
    "Categorical": (lambda: models.dirichlet_categorical(n=12), 2.0),
    "Poisson": (gamma_poisson, 8.0),
    "Exponential": (gamma_exponential, 2.0),
    "Normal": (normal_mean, 6.0),
    "naive Bayes": (lambda: models.naive_bayes(n=6, m=3), 2.0),
    "chain net": (lambda: models.chain_net(n=8), 1.2),
    "Poisson and Bernoulli": (lambda: models.poisson_bernoulli(n=8), 8.0),
}


# =========================================================================== exact audits
#: models with several private containers, where the attribute unit differs from the record unit
MULTI = ["naive Bayes", "chain net", "Poisson and Bernoulli"]


@pytest.mark.parametrize(
    "name, unit", [(n, "record") for n in CONJUGATE] + [(n, "attribute") for n in MULTI]
)
def test_exact_audit_passes(name, unit):
    build, eps = CONJUGATE[name]
    pmod = private(build(), eps, unit=unit)
    res = audit(pmod, max_bases=40)
    assert res.method == "exact" and res.verdict == "pass", str(res)
    assert within_claim(res)
    assert res.measured > 0.3 * res.claimed  # the audit sees a real change: not vacuous
    assert res.pairs > 10 and res.error == 0.0
    w = res.witness
    changed = [c for c in w.x if not np.array_equal(w.x[c], w.y[c])]
    if unit == "attribute":
        assert len(changed) == 1
    rows = {int(i) for c in changed for i in np.flatnonzero(np.any((w.x[c] != w.y[c]).reshape(len(w.x[c]), -1), axis=1))}
    assert len(rows) == 1


@pytest.mark.parametrize("unit", [pymc_dp.Users(max_rows=3), pymc_dp.Users(np.repeat(np.arange(10), [3, 1, 2, 3, 1, 1, 3, 2, 2, 2]))])
def test_exact_audit_user_unit(unit):
    pmod = private(models.coin(n=20), 3.0, unit=unit)
    res = audit(pmod)
    assert res.verdict == "pass" and within_claim(res), str(res)
    assert res.measured > 0.5 * res.claimed
    w = res.witness
    rows = np.flatnonzero(w.x["x"] != w.y["x"])
    assert 1 <= len(rows) <= 3 and res.unit == {"kind": "user", "max_rows": 3}
    if unit.ids is not None:
        assert len({unit.ids[i] for i in rows}) == 1  # the rows of one user


def test_exact_audit_is_tight_at_large_n():
    """One draw is 2 Delta-DP and the factor 2 is necessary: the audit finds it (docs/theory/guarantee.md)."""
    pmod = private(models.coin(n=300), 1.0)
    res = audit(pmod)
    assert res.verdict == "pass"
    assert 0.9 * res.claimed <= res.measured <= res.claimed * (1 + TOL)
    assert res.pairs >= 600  # every count configuration k = 0..300 and both changes


def _random_points(plan, region_draws, rng):
    return plan.sample(region_draws, rng)


@pytest.mark.parametrize("name", ["naive Bayes", "Categorical", "Poisson", "Normal", "Exponential"])
def test_exact_supremum_is_the_supremum(name):
    """The closed-form extremes of the log-ratio against direct evaluation of both truncated
    densities (ConjugatePlan.log_density) at many parameter values inside the truncation."""
    build, eps = CONJUGATE[name]
    pmod = private(build(), eps)
    res = audit(pmod, max_bases=20)
    w = res.witness
    plan = pmod.conjugate_plan
    px, py = plan.with_data(dict(w.x)), plan.with_data(dict(w.y))
    rng = np.random.default_rng(1)
    points = {k: np.concatenate([a, b]) for (k, a), b in zip(px.sample(20000, rng).items(), py.sample(20000, rng).values())}
    g = px.log_density(points) - py.log_density(points)
    assert np.max(np.abs(g)) <= res.measured * (1 + 1e-9)
    if name in ("Poisson", "Normal", "Exponential"):  # a scalar: the witness theta is the argmax
        (var,) = plan.variables
        theta = w.theta[var]
        post = px.posteriors()[var]
        if theta <= 0.0 and post["family"] != "Normal":  # a supremum approached at the support's end (Gamma: rate -> 0)
            theta = 1e-12 * post["upper"]
        at = px.log_density({var: np.array([theta])}) - py.log_density({var: np.array([theta])})
        assert float(at[0]) == pytest.approx(w.log_ratio, rel=1e-9, abs=1e-9)
        assert abs(w.log_ratio) == pytest.approx(res.measured, rel=1e-12)


@pytest.mark.parametrize("name", ["Bernoulli", "Poisson", "Normal"])
def test_exact_and_numerical_audits_agree(name):
    """Two independent computations of the same suprema: closed form (exact plan) and quadrature
    of the model's own logp on a grid."""
    build, eps = CONJUGATE[name]
    pmod = private(build(), eps)
    ex = audit(pmod, method="exact", max_bases=15, random_seed=3)
    nu = audit(pmod, method="numerical", max_bases=15, random_seed=3)
    assert nu.verdict == "pass" and nu.error < 1e-4
    assert nu.pairs == ex.pairs
    assert nu.measured == pytest.approx(ex.measured, abs=10 * nu.error + 1e-6)


# =========================================================================== numerical audits
NUMERICAL = {
    **{f: (lambda f=f: scalar(f), SCALAR[f][3]) for f in SCALAR},
    "Normal location-scale": (lambda: location_scale("Normal"), 2.0),
    "Laplace location-scale": (lambda: location_scale("Laplace"), 2.0),
    "logistic regression": (logistic1, 2.0),
    "linear regression": (linear1, 2.0),
    "linear regression, known scale": (lambda: linear1(free_sigma=False), 6.0),
}


@pytest.mark.parametrize("name", list(NUMERICAL))
def test_numerical_audit_passes(name):
    build, eps = NUMERICAL[name]
    pmod = private(build(), eps)
    assert pmod.conjugate_plan is None
    res = audit(pmod, max_bases=8)
    assert res.method == "numerical" and res.verdict == "pass", str(res)
    assert within_claim(res) and res.error < 1e-2
    assert res.measured > 0.3 * res.claimed


@pytest.mark.parametrize(
    "build, eps, unit",
    [(logistic1, 2.0, "attribute"), (logistic1, 4.0, pymc_dp.Users(max_rows=2)), (lambda: scalar("Laplace"), 12.0, pymc_dp.Users(max_rows=2))],
    ids=["logistic-attribute", "logistic-user", "Laplace-user"],
)
def test_numerical_audit_attribute_and_user_units(build, eps, unit):
    res = audit(private(build(), eps, unit=unit), max_bases=6)
    assert res.verdict == "pass" and within_claim(res), str(res)
    assert res.measured > 0.3 * res.claimed


# =========================================================================== wrong rules
@contextlib.contextmanager
def wrong_rule(op_type, fraction):
    """Register a rule that reports ``fraction`` of the true range of the log-density, so that
    the truncation is too wide for the claim (restored afterwards). The tests that use it
    certify by the per-record constant alone (``lipschitz_only``): a factor with a closed-form
    oscillation is otherwise certified by it, and the constant's rule is never used."""
    true_rule = log_density_range.registry[op_type]

    def wrong(op, domain, params, xp):
        lo, hi = true_rule(op, domain, params, xp)
        return lo, lo + fraction * (hi - lo)

    log_density_range.register(op_type)(wrong)
    try:
        yield
    finally:
        log_density_range.register(op_type)(true_rule)


def test_wrong_bernoulli_rule_is_caught_by_the_exact_audit(lipschitz_only):
    with wrong_rule(BernoulliRV, 0.5):
        pmod = private(models.coin(n=300), 1.0)
    res = audit(pmod)
    assert res.verdict == "fail", str(res)
    assert res.measured > 1.5 * res.claimed  # the true loss approaches twice the claim
    w = res.witness
    assert abs(w.log_ratio) == pytest.approx(res.measured)
    # the witness holds up: recompute the log-ratio at the witness theta from the two densities
    plan = pmod.conjugate_plan
    theta = {"p": np.array([w.theta["p"]])}
    value = plan.with_data(dict(w.x)).log_density(theta) - plan.with_data(dict(w.y)).log_density(theta)
    assert float(value[0]) == pytest.approx(w.log_ratio, rel=1e-9)
    assert "FAIL" in str(res) and np.sum(w.x["x"] != w.y["x"]) == 1


def test_wrong_normal_rule_is_caught_by_the_exact_audit(lipschitz_only):
    """A Normal rule with 4 sigma^2 in place of 2 sigma^2."""
    with wrong_rule(NormalRV, 0.5):
        pmod = private(normal_mean(n=30), 6.0)
    res = audit(pmod, max_bases=40)
    assert res.method == "exact" and res.verdict == "fail", str(res)


def test_wrong_laplace_rule_is_caught_by_the_numerical_audit():
    with wrong_rule(LaplaceRV, 0.5):
        pmod = private(scalar("Laplace"), 3.0)  # infeasible with the true rule (its minimum is 4)
    res = audit(pmod, max_bases=12)
    assert res.method == "numerical" and res.verdict == "fail", str(res)
    assert res.measured - res.error > 1.2 * res.claimed


def test_wrong_bernoulli_rule_is_caught_by_the_statistical_audit(lipschitz_only):
    """1e5 exact draws on each of the two datasets the search picks: the Clopper-Pearson lower
    bound at 95% exceeds the claim."""
    with wrong_rule(BernoulliRV, 0.25):
        pmod = private(models.coin(n=4), 1.0)
    res = audit(pmod, method="statistical", runs=100_000, random_seed=0)
    assert res.sampler == "exact" and res.verdict == "fail", str(res)
    assert res.measured > res.claimed and res.witness.event["statistic"] == "log-ratio"


# =========================================================================== the result, the ledger, privacy
@pytest.fixture(scope="module")
def coin_audit():
    pmod = private(models.coin(n=40), 1.0)
    return pmod, audit(pmod)


def test_result_object(coin_audit):
    pmod, res = coin_audit
    assert isinstance(res, AuditResult) and res.passed
    assert res.claimed == pmod.certificate.epsilon_per_draw and res.epsilon_total == pmod.certificate.epsilon
    assert res.ratio == pytest.approx(res.measured / res.claimed)
    with pytest.raises(dataclasses.FrozenInstanceError):
        res.verdict = "fail"
    with pytest.raises(ValueError):
        res.witness.x["x"][0] = 1  # read-only witness arrays
    d = json.loads(res.to_json())
    assert d["verdict"] == "pass" and d["method"] == "exact" and d["not_a_release"] is True
    assert d["witness"]["change"]["unit"] == "record"
    text = str(res)
    assert "PASS" in text and "NOT a differentially private release" in text and "spent nothing" in text


def test_plot(coin_audit):
    matplotlib = pytest.importorskip("matplotlib")
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    _, res = coin_audit
    ax = res.plot()
    assert ax.get_lines() and max(np.max(np.abs(line.get_ydata())) for line in ax.get_lines()) >= res.measured * 0.999
    plt.close("all")


def test_include_data_false_reads_only_public_information():
    a = private(models.coin(n=40, seed=0), 1.0)
    b = private(models.coin(n=40, seed=1), 1.0)
    ra, rb = audit(a, include_data=False), audit(b, include_data=False)
    assert not ra.reads_private_data and "read no private data" in str(ra)
    assert ra.measured == rb.measured and ra.pairs == rb.pairs  # the data never entered
    assert ra.witness.base != "data"


def test_given_pairs():
    pmod = private(models.coin(n=40), 1.0)
    x = {"x": np.zeros(40, int)}
    y = {"x": np.r_[1, np.zeros(39, int)]}
    res = audit(pmod, pairs=[(x, y)])
    assert res.pairs == 1 and res.witness.base == "given" and res.verdict == "pass"
    assert res.witness.change["rows"] == [0]
    with pytest.raises(AuditError, match="neighbours"):
        audit(pmod, pairs=[(x, {"x": np.r_[1, 1, np.zeros(38, int)]})])
    with pytest.raises(AuditError, match="shape"):
        audit(pmod, pairs=[(x, {"x": np.zeros(39, int)})])


def test_audit_spends_nothing_from_the_ledger(tmp_path):
    ledger = pymc_dp.Ledger(tmp_path / "ledger.sqlite", epsilon=1.5)
    model, domains = models.coin(n=20)
    pmod = pymc_dp.make_private(model, epsilon=1.0, draws=1, data=domains, ledger=ledger)
    audit(pmod)
    audit(pmod, method="statistical", runs=2000)
    audit(pmod, method="numerical", max_bases=4)
    spent = ledger.spent(pmod.dataset_id)
    assert spent.releases == 0 and spent.pending == 0 and spent.epsilon == 0.0
    pmod.sample(random_seed=1)  # a real release is still charged: one fits the total, two do not
    assert ledger.spent(pmod.dataset_id).epsilon == pytest.approx(1.0)


def test_method_choice_and_refusals():
    assert audit(private(models.coin(n=10), 1.0), max_bases=4).method == "exact"
    assert audit(private(scalar("Laplace"), 6.0), max_bases=4).method == "numerical"
    lap = private(scalar("Laplace"), 6.0)
    with pytest.raises(AuditError, match="conjugate"):
        audit(lap, method="exact")
    with pytest.raises(AuditError, match="conjugate"):
        audit(lap, method="statistical", sampler="exact")
    big = private(models.logistic(n=30, d=3), 4.0)
    with pytest.raises(AuditError, match="at most 2"):
        audit(big, method="numerical")
    with pytest.raises(AuditError, match="statistical"):
        audit(lap, release="full")
    with pytest.raises(AuditError):
        audit(lap, method="bogus")


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


# =========================================================================== slow: statistical audits, 1e5 runs
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


def test_public_per_row_data():
    """Public group indices: rows that differ only through public data are different rows to
    the search, and row subsets are evaluated with their public rows."""
    g = np.arange(20) % 2
    with pm.Model() as model:
        xd = pm.Data("x", np.random.default_rng(0).uniform(-1, 1, 20))
        gd = pm.Data("g", g)
        mu = pm.Normal("mu", 0, 1, shape=2)
        pm.Laplace("obs", mu=mu[gd], b=0.5, observed=xd)
    pmod = pymc_dp.make_private(model, epsilon=6.0, draws=1, data={"x": pymc_dp.Interval(-1, 1)}, public=["g"], ledger=None)
    res = audit(pmod, max_bases=6)
    assert res.method == "numerical" and res.verdict == "pass" and within_claim(res), str(res)
    assert res.measured > 0.3 * res.claimed


def test_attribute_unit_with_containers_of_different_lengths():
    rng = np.random.default_rng(2)
    with pm.Model() as model:
        xd, zd = pm.Data("x", rng.integers(0, 2, 30)), pm.Data("z", rng.integers(0, 2, 12))
        p, q = pm.Beta("p", 1, 1), pm.Beta("q", 2, 2)
        pm.Bernoulli("a", p=p, observed=xd)
        pm.Bernoulli("b", p=q, observed=zd)
    pmod = private((model, {"x": pymc_dp.Binary(), "z": pymc_dp.Binary()}), 2.0, unit="attribute")
    ex = audit(pmod, max_bases=30)
    nu = audit(pmod, method="numerical", max_bases=30)
    assert ex.verdict == nu.verdict == "pass"
    assert nu.measured == pytest.approx(ex.measured, abs=3 * nu.error + 1e-6) and ex.measured > 0.8 * ex.claimed


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
