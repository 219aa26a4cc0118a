"""Bad inputs: a typed PrivacyError naming the variable, and nothing sampled."""

import numpy as np
import pymc as pm
import pytensor.tensor as pt
import pytest

import pymc_dp
from pymc_dp import BudgetExceededError, DomainError, PrivacyError, UnsupportedFactorError


@pytest.fixture(autouse=True)
def no_sampling(monkeypatch):
    def fail(*args, **kwargs):  # pragma: no cover - reached only on a bug
        raise AssertionError("pm.sample was called for a refused model")

    monkeypatch.setattr(pm, "sample", fail)


def coin(values, **kw):
    with pm.Model() as m:
        xd = pm.Data("x", values)
        p = pm.Beta("p", 1, 1)
        pm.Bernoulli("obs", p=p, observed=xd)
    return m


def normal_model(values, observed=None, mu=None, extra=None):
    with pm.Model() as m:
        xd = pm.Data("x", values)
        mu_ = pm.Normal("mu", 0, 1)
        if extra == "shape":
            pm.Normal("z", 0, 1, shape=xd.shape[0])
        loc = mu_ if mu is None else mu(xd, mu_)
        pm.Normal("obs", loc, 1.0, observed=xd if observed is None else observed(xd))
    return m


X01 = np.array([0.1, 0.5, 0.9])
CASES = [
    ("outside domain", lambda: coin(np.array([0, 1, 2])), dict(data={"x": pymc_dp.Binary()}), DomainError, "x"),
    ("nan", lambda: _with_nan(normal_model(np.array([0.1, 0.2]))), dict(data={"x": pymc_dp.Interval(0, 1)}), DomainError, "x"),
    ("inf", lambda: normal_model(np.array([0.1, np.inf])), dict(data={"x": pymc_dp.Interval(0, 1)}), DomainError, "x"),
    ("no domain", lambda: coin(np.array([0, 1])), dict(data={}), DomainError, "x"),
    ("unknown container", lambda: coin(np.array([0, 1])), dict(data={"x": pymc_dp.Binary(), "zz": pymc_dp.Binary()}), DomainError, "zz"),
    ("family without rule", lambda: _weibull(), dict(data={"x": pymc_dp.Interval(0.1, 1)}), UnsupportedFactorError, "obs"),
    ("aggregate over rows", lambda: normal_model(X01, mu=lambda xd, m: xd.mean() + m), dict(data={"x": pymc_dp.Interval(0, 1)}), UnsupportedFactorError, "obs"),
    ("private shape", lambda: normal_model(X01, extra="shape"), dict(data={"x": pymc_dp.Interval(0, 1)}), UnsupportedFactorError, "z"),
    ("transformed observation", lambda: normal_model(X01, observed=lambda xd: pt.log(xd)), dict(data={"x": pymc_dp.Interval(0.1, 1)}), UnsupportedFactorError, "obs"),
    ("row domain on observed", lambda: normal_model(X01[:, None]), dict(data={"x": pymc_dp.Ball(1.0)}), UnsupportedFactorError, "x"),
    ("epsilon zero", lambda: coin(np.array([0, 1])), dict(data={"x": pymc_dp.Binary()}, epsilon=0.0), BudgetExceededError, "epsilon"),
    ("epsilon negative", lambda: coin(np.array([0, 1])), dict(data={"x": pymc_dp.Binary()}, epsilon=-1.0), BudgetExceededError, "epsilon"),
    ("epsilon nan", lambda: coin(np.array([0, 1])), dict(data={"x": pymc_dp.Binary()}, epsilon=float("nan")), BudgetExceededError, "epsilon"),
    ("delta one", lambda: coin(np.array([0, 1])), dict(data={"x": pymc_dp.Binary()}, delta=1.0), BudgetExceededError, "delta"),
    ("draws zero", lambda: coin(np.array([0, 1])), dict(data={"x": pymc_dp.Binary()}, draws=0), PrivacyError, "draws"),
    ("unit unknown", lambda: coin(np.array([0, 1])), dict(data={"x": pymc_dp.Binary()}, unit="person"), PrivacyError, "unit"),
    ("budget too small", lambda: _binomial(), dict(data={"k": pymc_dp.Integers(0, 10)}, epsilon=0.1), BudgetExceededError, "count"),
    ("not a domain", lambda: coin(np.array([0, 1])), dict(data={"x": (0, 1)}), DomainError, "x"),
]


def _with_nan(model):
    # pm.Data refuses NaN itself; data swapped in later (set_value) must still be checked
    model["x"].set_value(np.array([0.1, np.nan]))
    return model


def _weibull():
    with pm.Model() as m:
        xd = pm.Data("x", X01)
        a = pm.HalfNormal("a", 1)
        pm.Weibull("obs", alpha=a, beta=1.0, observed=xd)
    return m


def _binomial():
    with pm.Model() as m:
        kd = pm.Data("k", np.array([3, 5, 7]))
        p = pm.Beta("p", 1, 1)
        pm.Binomial("count", n=10, p=p, observed=kd)
    return m


@pytest.mark.parametrize("build, kwargs, error, name", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_refused(build, kwargs, error, name):
    kwargs = {"epsilon": 1.0, "draws": 1, **kwargs}
    model = build()
    with pytest.raises(error) as info:
        pymc_dp.make_private(model, **kwargs)
    assert isinstance(info.value, PrivacyError) and isinstance(info.value, ValueError)
    assert name in str(info.value)


def test_budget_message_states_smallest_epsilon():
    with pytest.raises(BudgetExceededError) as info:
        pymc_dp.make_private(_binomial(), epsilon=0.1, draws=1, data={"k": pymc_dp.Integers(0, 10)})
    # ln C(10, 5) = 5.529..., per draw 2 x that
    assert "11.06" in str(info.value)
