"""Metric DP: the constants sup |d l/dx| (brute force), the release path and the exact audit."""

import copy

import numpy as np
import pymc as pm
import pytest
from scipy import stats

import pymc_dp
from pymc_dp.exceptions import BudgetExceededError, DomainError
from pymc_dp.mechanisms.metric import metric_posterior
from pymc_dp.metric import location_constant, metric_guarantee, metric_statement
from pymc_dp.private_data import PrivateData
from tests.typed_refusals import assert_typed_refusal

LOGPDF = {
    "Normal": lambda x, mu, s: stats.norm.logpdf(x, mu, s),
    "Laplace": lambda x, mu, s: stats.laplace.logpdf(x, mu, s),
    "Logistic": lambda x, mu, s: stats.logistic.logpdf(x, mu, s),
}


def _brute(family, scale, theta, x, k=401):
    """sup over a grid of mu and of record pairs of |l(x) - l(x')| / |x - x'|."""
    mus = np.linspace(*theta, 61)
    xs = np.linspace(*x, k)
    best = 0.0
    for mu in mus:
        ll = LOGPDF[family](xs, mu, scale)
        d = np.abs(ll[:, None] - ll[None, :])
        dx = np.abs(xs[:, None] - xs[None, :])
        best = max(best, float(np.max(d[dx > 0] / dx[dx > 0])))
    return best


@pytest.mark.parametrize("family,scale,theta,x", [
    ("Normal", 1.0, (-0.5, 0.5), (-1.0, 1.0)),
    ("Normal", 0.7, (0.0, 2.0), (-1.0, 3.0)),
    ("Laplace", 0.5, (-1.0, 1.0), (-2.0, 2.0)),
    ("Laplace", 2.0, (-5.0, 5.0), (0.0, 1.0)),
    ("Logistic", 0.8, (-1.0, 1.0), (-2.0, 2.0)),
])
def test_constant_is_the_brute_force_supremum(family, scale, theta, x):
    L = location_constant(family, scale, theta, x)
    brute = _brute(family, scale, theta, x)
    assert brute <= L * (1 + 1e-9)  # the constant bounds every difference quotient
    assert brute >= 0.98 * L  # and is attained in the limit: a halved constant is violated
    assert brute > L / 2


def test_guarantee_and_statement():
    g = metric_guarantee(1.5, 4)
    assert g["epsilon_per_draw"] == 3.0 and g["epsilon"] == 12.0
    assert "exp(12 * rho(x, x'))" in metric_statement(g["epsilon"])
    with pytest.raises(NotImplementedError):
        location_constant("Gamma", 1.0, (0, 1), (0, 1))


def _normal_mean(n=10):
    with pm.Model() as m:
        xd = pm.Data("x", np.random.default_rng(0).uniform(-1, 1, n))
        mu = pm.Normal("mu", 0, 1)
        pm.Normal("obs", mu=mu, sigma=1.0, observed=xd)
    return m


def test_release_ledger_report_and_exact_audit(tmp_path):
    ledger = pymc_dp.Ledger(tmp_path / "l.sqlite", epsilon=8.0)
    mech = metric_posterior(_normal_mean(), epsilon=8.0, draws=2, data={"x": pymc_dp.Interval(-1, 1)}, ledger=ledger)
    assert mech.region == (-1.0, 1.0) and mech.constant == pytest.approx(2.0) and mech.epsilon_per_draw == pytest.approx(4.0)
    res = pymc_dp.audit(mech)
    assert res.method == "exact" and res.verdict == "pass" and 0 < res.measured <= res.claimed
    assert res.measured > mech.constant * 0.8  # the likelihood's share is attained; the marginal's partly
    probe = copy.copy(mech)
    probe.epsilon_per_draw = res.measured / 2
    assert pymc_dp.audit(probe).verdict == "fail"
    idata = mech.sample(random_seed=1)
    assert idata.posterior["mu"].size == 2
    assert float(idata.posterior["mu"].min()) >= -1 and float(idata.posterior["mu"].max()) <= 1
    assert ledger.spent(mech.dataset_id).epsilon == pytest.approx(8.0)
    text = pymc_dp.report(idata).to_text()
    assert "metric DP: P(B|x) <= exp(8 * rho(x, x')) P(B|x')" in text
    with pytest.raises(BudgetExceededError):
        mech.sample(random_seed=2)


def test_refusals():
    with pytest.raises(BudgetExceededError, match="raise epsilon"):
        metric_posterior(_normal_mean(), epsilon=4.0, draws=2, data={"x": pymc_dp.Interval(-1, 1)}, ledger=None)
    with pm.Model() as m:
        xd = pm.Data("x", np.zeros(4))
        mu = pm.Normal("mu", 0, 1)
        pm.Laplace("obs", mu=mu, b=0.5, observed=xd)
    with pytest.raises(NotImplementedError, match="L = 1/b = 2"):
        metric_posterior(m, epsilon=8.0, draws=1, data={"x": pymc_dp.Interval(-1, 1)}, ledger=None)


def test_a_domain_that_declares_the_metric():
    dom = pymc_dp.Interval(-1, 1, metric="abs")
    assert dom.to_dict()["metric"] == "abs" and "metric='abs'" in str(dom)
    assert "metric" not in pymc_dp.Interval(-1, 1).to_dict()  # fingerprints of plain domains unchanged
    with pytest.raises(DomainError, match="metric="):
        pymc_dp.Interval(-1, 1, metric="euclid")
    mech = metric_posterior(_normal_mean(), epsilon=8.0, draws=2, data={"x": dom}, ledger=None)
    assert mech.constant == pytest.approx(2.0)
    guarantee = mech._public()
    assert guarantee["domains"]["x"]["metric"] == "abs" and "declared on the domain" in guarantee["guarantee"]["metric"]
    # a release with a replace-one guarantee does not silently ignore the declared metric
    for release in (lambda: pymc_dp.make_private(_normal_mean(), epsilon=8.0, draws=2, data={"x": dom}, ledger=None),
                    lambda: pymc_dp.noisy_statistics(_normal_mean(), epsilon=8.0, data={"x": dom}, ledger=None)):
        with pytest.raises(DomainError, match="metric_posterior"):
            release()


def test_a_model_the_metric_release_does_not_implement_is_a_typed_refusal_and_charges_nothing(tmp_path):
    """Called directly, metric_posterior refuses a Laplace likelihood and an Integers domain with a
    PathNotImplementedError (a PrivacyError and a NotImplementedError) naming the variable and
    what to use; the helpers refuse another family or metric the same way."""
    ledger = pymc_dp.Ledger(tmp_path / "ledger.sqlite", epsilon=10.0)
    with pm.Model() as m:
        xd = pm.Data("x", np.zeros(4))
        mu = pm.Normal("mu", 0, 1)
        pm.Laplace("obs", mu=mu, b=0.5, observed=xd)
    domains = {"x": pymc_dp.Interval(-1, 1)}
    dataset = PrivateData.from_model(m, domains, "record").fingerprint
    assert_typed_refusal(lambda: metric_posterior(m, epsilon=8.0, draws=1, data=domains, ledger=ledger),
                         kind=pymc_dp.PathNotImplementedError, match="'obs'.*L = 1/b = 2.*make_private",
                         ledger=ledger, dataset=dataset)
    with pm.Model() as counts:  # integer records: a Normal location, but no continuous domain
        pm.Normal("obs", mu=pm.Normal("mu", 0, 1), sigma=1.0, observed=pm.Data("x", np.zeros(4)))
    assert_typed_refusal(lambda: metric_posterior(counts, epsilon=8.0, draws=1, data={"x": pymc_dp.Integers(-1, 1)},
                                                  ledger=ledger),
                         kind=pymc_dp.PathNotImplementedError, match=r"data\['x'\] is Integers.*pymc_dp.Interval",
                         ledger=ledger)
    assert_typed_refusal(lambda: location_constant("Gamma", 1.0, (0, 1), (0, 1)), kind=pymc_dp.PathNotImplementedError,
                         match="family='Gamma'.*Normal")
    assert_typed_refusal(lambda: metric_statement(1.0, metric="sq"), kind=pymc_dp.PathNotImplementedError,
                         match="metric='sq'.*metric='abs'")
