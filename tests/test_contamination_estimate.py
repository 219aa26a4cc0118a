"""Huber contamination, the paper's Algorithm 1 (issue 14, item 1): a labelled estimate, never a budget."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pymc as pm
import pytest

import pymc_dp as pdp
from pymc_dp.contamination import contaminate, estimate_epsilon
from pymc_dp.contamination_estimate import EpsilonEstimate, EstimatedEpsilon
from pymc_dp.exceptions import EstimateNotBudgetError, PrivacyError
from pymc_dp.ledger import Ledger

T3 = {"obs": pm.StudentT.dist(nu=3, mu=0, sigma=1)}
DOMAIN = (-10.0, 10.0)


def _cmodel(p=0.1, y=None, prior_sd=10.0):
    y = np.random.default_rng(0).normal(0.0, 1.0, 30) if y is None else y
    with pm.Model() as model:
        data = pm.Data("y", y)
        mu = pm.Normal("mu", 0.0, prior_sd)
        pm.Normal("obs", mu, 1.0, observed=data)
    return contaminate(model, p=p, g=T3)


@pytest.fixture(scope="module")
def est():
    return estimate_epsilon(_cmodel(), theta_star={"mu": 0.0}, n=100, n_datasets=8, domain=DOMAIN, random_seed=3)


# --------------------------------------------------------------------------- the estimate and its label
def test_estimate_is_a_frozen_labelled_dataclass(est):
    assert isinstance(est, EpsilonEstimate) and dataclasses.is_dataclass(est)
    with pytest.raises(dataclasses.FrozenInstanceError):
        est.epsilon = 1.0
    assert est.status == "estimated, model-conditional, not DP"
    assert est.assumption == "data i.i.d. from the model at theta_star"
    assert est.delta == 1e-3 and est.gamma == pytest.approx(0.05)
    assert len(est.values) == len(est.etas) == 8 and all(v > 0 for v in est.values)
    assert float(est.epsilon) == pytest.approx(np.quantile(est.values, 0.95))
    assert isinstance(est.epsilon, EstimatedEpsilon)
    assert est.settings["n"] == 100 and est.settings["p"] == pytest.approx(0.1) and est.settings["variant"] == "fixed"
    assert "StudentT" in est.settings["g"] and est.settings["domain"] == DOMAIN
    # magnitude of the paper's Table 1 at n = 100 (2.85), 8 datasets only
    assert 1.0 < float(est.epsilon) < 5.0
    for text in (str(est), est._repr_html_()):
        assert "NOT A DP GUARANTEE" in text and "estimated, model-conditional, not DP" in text
    assert "estimated, model-conditional, not DP" in repr(est.epsilon)


def test_estimate_is_reproducible_and_decreases_with_n():
    kw = dict(theta_star=0.0, n_datasets=4, domain=DOMAIN, random_seed=1)
    a = estimate_epsilon(_cmodel(0.1), n=100, **kw)
    assert a.values == estimate_epsilon(_cmodel(0.1), n=100, **kw).values
    b = estimate_epsilon(_cmodel(1000 ** -0.5), n=1000, **kw)
    assert float(b.epsilon) < float(a.epsilon)


def test_never_reads_the_private_container(monkeypatch):
    """The estimate simulates: a container of sentinel values, or one whose reads raise, changes nothing."""
    kw = dict(theta_star={"mu": 0.0}, n=60, n_datasets=3, domain=DOMAIN, random_seed=5)
    plain = estimate_epsilon(_cmodel(), **kw)
    cm = _cmodel(y=np.full(30, 1e300))
    container = cm["y"]
    container.set_value(np.full(30, np.nan))

    def spy(*args, **kwargs):
        raise AssertionError("estimate_epsilon read the private container")

    monkeypatch.setattr(container, "get_value", spy)
    spied = estimate_epsilon(cm, **kw)
    assert spied.values == plain.values


@pytest.mark.parametrize("variant", ["free", "joint", "nope"])
def test_other_variants_are_not_implemented(variant):
    with pytest.raises(NotImplementedError, match=variant):
        estimate_epsilon(_cmodel(), theta_star=0.0, n=50, n_datasets=1, variant=variant)


def test_refuses_models_outside_the_1d_contaminated_location_model():
    y = np.zeros(5)
    with pm.Model() as clean:
        d = pm.Data("y", y)
        pm.Normal("obs", pm.Normal("mu", 0, 10), 1.0, observed=d)
    with pytest.raises(NotImplementedError, match="not contaminated"):
        estimate_epsilon(clean, theta_star=0.0, n=50)
    with pm.Model() as free_scale:
        d = pm.Data("y", y)
        pm.Normal("obs", pm.Normal("mu", 0, 10), pm.HalfNormal("s", 1.0), observed=d)
    with pytest.raises(NotImplementedError, match="free RVs"):
        estimate_epsilon(contaminate(free_scale, p=0.1, g=T3), theta_star=0.0, n=50)
    with pm.Model() as shifted:
        d = pm.Data("y", y)
        pm.Normal("obs", 2.0 * pm.Normal("mu", 0, 10), 1.0, observed=d)
    with pytest.raises(NotImplementedError, match="location must be the free RV"):
        estimate_epsilon(contaminate(shifted, p=0.1, g=T3), theta_star=0.0, n=50)
    with pytest.raises(NotImplementedError, match="'nu'"):
        estimate_epsilon(_cmodel(), theta_star={"nu": 0.0}, n=50)
    with pytest.raises(NotImplementedError, match="expected a model"):
        estimate_epsilon("model", theta_star=0.0, n=50)


def test_its_refusals_are_typed_privacy_errors_that_are_not_implemented_errors():
    """Called directly, estimate_epsilon refuses a variant, a model or a domain it does not
    implement with an EstimateNotImplementedError (a PrivacyError and a NotImplementedError) that
    names what is missing and says what to do."""
    from tests.typed_refusals import assert_typed_refusal

    y = np.zeros(5)
    with pm.Model() as clean:
        pm.Normal("obs", pm.Normal("mu", 0, 10), 1.0, observed=pm.Data("y", y))
    for call, match in (
        (lambda: estimate_epsilon(_cmodel(), theta_star=0.0, n=50, n_datasets=1, variant="free"), "variant='free'.*use"),
        (lambda: estimate_epsilon(clean, theta_star=0.0, n=50), "factor 'obs' is not contaminated.*pymc_dp.contaminate"),
        (lambda: estimate_epsilon("model", theta_star=0.0, n=50), "expected a model.*build it with pymc_dp.contaminate"),
        (lambda: estimate_epsilon(_cmodel(), theta_star=0.0, n=50, n_datasets=1, domain=(100.0, 101.0), random_seed=0),
         "domain= holds too little.*widen domain="),
    ):
        assert_typed_refusal(call, kind=pdp.EstimateNotImplementedError, match=match)


# --------------------------------------------------------------------------- refused as a budget
@pytest.mark.parametrize("which", ["object", "epsilon"])
def test_refused_as_a_budget_everywhere(est, which, tmp_path):
    value = est if which == "object" else est.epsilon
    cm = _cmodel()
    data = {"y": pdp.Interval(-10, 10)}
    with pytest.raises(EstimateNotBudgetError, match="not a differential-privacy guarantee"):
        pdp.make_private(cm, epsilon=value, draws=1, data=data, ledger=None)
    with pytest.raises(EstimateNotBudgetError, match="estimate"):
        pdp.noisy_statistics(cm, epsilon=value, data=data, ledger=None)
    ledger = Ledger(str(tmp_path / "ledger.db"))
    with pytest.raises(EstimateNotBudgetError):
        with ledger.spend("ds", value, 0.0):
            pass
    with pytest.raises(EstimateNotBudgetError):
        Ledger(str(tmp_path / "other.db"), epsilon=value, delta=1e-5)
    assert issubclass(EstimateNotBudgetError, PrivacyError)
    assert ledger.spent("ds").epsilon == 0.0  # nothing was charged
    with ledger.spend("ds", float(est.epsilon), 0.0):  # a plain number is a budget, as before
        pass
    assert math.isclose(ledger.spent("ds").epsilon, float(est.epsilon))


# --------------------------------------------------------------------------- Table 1 (slow)
PAPER = {100: 2.85, 1000: 0.94, 2000: 0.72, 5000: 0.46, 10000: 0.32, 20000: 0.26, 50000: 0.18}


@pytest.mark.extended
def test_reproduces_table_1():
    """docs/theory/contamination.md's prototype settings: sigma = 1, data in [-10, 10], theta* = 0,
    g = t3(0, 1), prior N(0, 10^2), p_n = n^(-1/2), delta = 1e-3, 100 datasets, 95 % quantile."""
    ns = sorted(PAPER)
    eps = []
    for n in ns:
        e = estimate_epsilon(_cmodel(p=n ** -0.5), theta_star={"mu": 0.0}, n=n, delta=1e-3, n_datasets=100,
                             quantile=0.95, variant="fixed", domain=DOMAIN, random_seed=2024)
        eps.append(float(e.epsilon))
    assert all(a > b for a, b in zip(eps, eps[1:])), eps
    slope = np.polyfit(np.log(ns), np.log(eps), 1)[0]
    assert -0.55 <= slope <= -0.35, (slope, eps)
    for n, value in zip(ns, eps):
        assert PAPER[n] / 1.35 <= value <= PAPER[n] * 1.35, (n, value, PAPER[n])
