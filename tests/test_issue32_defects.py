"""Defects found trying models the gallery does not hold (issue 32, item 4): each a regression
test that failed before its fix."""

from __future__ import annotations

import numpy as np
import pymc as pm
import pytensor.tensor as pt
import pytest

import pymc_dp
from pymc_dp.sampling import pilot_unmoved


def _switchpoint():
    """The coal-mining switchpoint model as PyMC's introduction writes it; the counts private."""
    years = np.arange(1851, 1871)
    rng = np.random.default_rng(0)
    counts = np.r_[rng.poisson(3, 10), rng.poisson(1, 10)]
    with pm.Model() as model:
        switchpoint = pm.DiscreteUniform("switchpoint", lower=years.min(), upper=years.max())
        early_rate = pm.Exponential("early_rate", 1.0)
        late_rate = pm.Exponential("late_rate", 1.0)
        rate = pm.math.switch(switchpoint >= years, early_rate, late_rate)
        pm.Poisson("disasters", rate, observed=pm.Data("counts", counts))
    return model


COUNTS = {"counts": pymc_dp.Integers(0, 10)}


def test_switchpoint_model_certifies_or_is_refused_typed_at_every_draw_count():
    # the fallback search fed a float to the integer switchpoint: a raw PyTensor TypeError
    with pytest.raises(pymc_dp.BudgetExceededError, match="disasters"):
        pymc_dp.certify(_switchpoint(), epsilon=10.0, draws=2, data=COUNTS)
    cert = pymc_dp.certify(_switchpoint(), epsilon=20.0, draws=2, data=COUNTS)
    start = cert.initvals["switchpoint"]
    assert np.issubdtype(np.asarray(start).dtype, np.integer) and 1851 <= start <= 1870


def test_pilot_on_the_truncated_prior_finds_a_discrete_rv_that_cannot_move():
    with pm.Model() as walled:  # a region {0, 20}: Metropolis's unit steps all cross the wall
        k = pm.DiscreteUniform("k", 0, 20)
        pm.Normal("x", 0, 1)
        pm.Potential("f__dp_theta_L", pt.switch(pt.eq(k, 0) | pt.eq(k, 20), 0.0, -np.inf))
    assert pilot_unmoved(walled, {"k": np.int64(20), "x": np.float64(0.0)}, ["k", "x"], tune=100, draws=50) == ["k"]
    pmod = pymc_dp.make_private(_switchpoint(), epsilon=10.0, draws=1, data=COUNTS, ledger=None)
    names = ["switchpoint", "early_rate", "late_rate"]
    assert pilot_unmoved(pmod.model, pmod.certification.initvals, names) == []  # this region is not a trap


def test_one_draw_release_that_cannot_move_is_refused_before_the_charge(monkeypatch, tmp_path):
    import pymc_dp.core as core

    ledger = pymc_dp.Ledger(tmp_path / "l.sqlite")
    pmod = pymc_dp.make_private(_switchpoint(), epsilon=10.0, draws=1, data=COUNTS, ledger=ledger)

    def sampled(*args, **kwargs):  # pragma: no cover - reached only on a bug
        raise AssertionError("sampled the private model although the pilot could not move")

    monkeypatch.setattr(core, "pilot_unmoved", lambda model, start, names, **kw: ["switchpoint"])
    monkeypatch.setattr(core, "run_mcmc", sampled)
    with pytest.raises(pymc_dp.StuckChainError, match=r"\['switchpoint'\].*Nothing was sampled or charged"):
        pmod.sample(random_seed=1)
    assert pmod.spent().epsilon == 0.0


@pytest.mark.parametrize("reference", ["zeros_like", "full_like"])
def test_discrete_choice_with_a_zero_reference_utility_certifies(reference):
    # pt.zeros_like(u) is second(u, 0): it reads u's shape only, which is public; it was refused
    # "through the function second"
    rng = np.random.default_rng(0)
    n = 40
    with pm.Model() as model:
        x1 = pm.Data("x1", rng.uniform(-1, 1, (n, 2)))
        x2 = pm.Data("x2", rng.uniform(-1, 1, (n, 2)))
        b = pm.Normal("b", 0, 1, shape=2)
        a = pm.Normal("a", 0, 1, shape=2)
        us = [a[0] + x1 @ b, a[1] + x2 @ b]
        ref = pt.zeros_like(us[0]) if reference == "zeros_like" else pt.full_like(us[0], 0.5)
        utilities = pm.math.stack(us + [ref]).T
        pm.Categorical("choice", p=pm.math.softmax(utilities, axis=-1), observed=pm.Data("y", rng.integers(0, 3, n)))
    box = pymc_dp.Box([-1.0, -1.0], [1.0, 1.0])
    cert = pymc_dp.certify(model, epsilon=10.0, draws=2, data={"x1": box, "x2": box, "y": pymc_dp.Integers(0, 2)})
    assert cert.certificate.factors[0].reads == ("x1", "x2", "y")


def _survival(end=5.0):
    """An exponential survival model as PyMC writes it: ``upper = +inf`` on uncensored rows, the
    study's end on censored ones (``y = min(t, end)``)."""
    t = np.random.default_rng(0).exponential(2.0, 30)
    y = np.minimum(t, end)
    with pm.Model() as model:
        lam = pm.Gamma("lam", 2, 2)
        upper = pm.Data("upper", np.where(t > end, end, np.inf))
        pm.Censored("obs", pm.Exponential.dist(lam=lam), lower=None, upper=upper, observed=pm.Data("y", y))
    return model


def test_survival_model_with_infinite_censoring_bounds():
    # a public censoring container: +inf is PyMC's "uncensored" (it was "holds NaN or infinite
    # values", then "must be a constant of the model")
    cert = pymc_dp.certify(_survival(), epsilon=40.0, draws=2, data={"y": pymc_dp.Interval(0, 5)}, public=["upper"])
    assert cert.certificate.factors[0].reads == ("y",)
    # a private one: refused with what to do, not "clean or impute" alone
    with pytest.raises(pymc_dp.DomainError, match="uncensored rows of a pm.Censored bound.*public"):
        pymc_dp.certify(_survival(), epsilon=40.0, draws=2, data={"y": pymc_dp.Interval(0, 5), "upper": pymc_dp.Interval(0, 5)})
