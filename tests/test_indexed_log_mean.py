"""A positive parameter vector read through a private label, as a log-mean (tests/fuzz/FOUND.md #6).

``Poisson(mu=rate[g])`` with ``rate ~ Gamma(..., shape=K)`` and ``g`` a private integer label was
refused ("a positive parameter that is not a product or quotient of exp(linear predictor)") while
the message listed ``theta[y]`` indexing as supported. ``ln rate[g] = (ln rate)[g]``: the factor
graph reads it as the indexed table ``log_rate[g]`` (pymc_dp.rules.log_mean.log_of_indexed), so the
Poisson, negative binomial and exponential rules take it as a log-mean window, the hull of the rows
the label allows. The brute-force test checks the certified constant against the exact sup of the
change of one record's log-likelihood over the certified box.
"""

from __future__ import annotations

import itertools

import numpy as np
import pymc as pm
import pytest
from scipy import stats

import pymc_dp
from pymc_dp.factors import PredictorForm, SpaceForm, find_factors

RNG = np.random.default_rng(3)
N = 6


def _private_factor(model, domains):
    private = {v: v.name for v in model.data_vars if v.name in domains}
    (f,) = [f for f in find_factors(model, private, domains) if f.is_private]
    return f


@pytest.mark.parametrize("family", ["poisson", "poisson_exposure", "negative_binomial", "exponential"])
def test_a_positive_vector_indexed_by_a_private_label_is_a_log_mean(family):
    with pm.Model() as m:
        g = pm.Data("g", RNG.integers(0, 3, N))
        rate = pm.Gamma("rate", 2.0, 1.0, shape=3)
        if family == "exponential":
            y = pm.Data("y", RNG.uniform(0.5, 4.0, N))
            pm.Exponential("lik", lam=rate[g], observed=y)
        else:
            y = pm.Data("y", RNG.integers(0, 5, N))
            if family == "poisson":
                pm.Poisson("lik", mu=rate[g], observed=y)
            elif family == "poisson_exposure":
                pm.Poisson("lik", mu=rate[g] * pm.Data("exposure", RNG.uniform(1, 2, N)), observed=y)
            else:
                pm.NegativeBinomial("lik", mu=rate[g], alpha=2.0, observed=y)
    y_dom = pymc_dp.Interval(0.5, 4.0) if family == "exponential" else pymc_dp.Integers(0, 4)
    f = _private_factor(m, {"g": pymc_dp.Integers(0, 2), "y": y_dom})
    (log_mean,) = [form for form in f.forms if isinstance(form, SpaceForm)]
    assert log_mean.space == "log-mean"
    assert isinstance(log_mean.inner, PredictorForm) and log_mean.inner.predictor.containers == ["g"]


def test_other_functions_of_an_indexed_rate_stay_refused_with_the_log_link_advice():
    with pm.Model() as m:
        g, y = pm.Data("g", RNG.integers(0, 3, N)), pm.Data("y", RNG.integers(0, 5, N))
        rate = pm.Gamma("rate", 2.0, 1.0, shape=3)
        pm.Poisson("lik", mu=rate[g] ** 2, observed=y)
    with pytest.raises(pymc_dp.UnsupportedFactorError, match=r"'lik'.*exp\(eta\)"):
        _private_factor(m, {"g": pymc_dp.Integers(0, 2), "y": pymc_dp.Integers(0, 4)})


def _certified(family, epsilon):
    """A small private model with a Gamma rate vector indexed by a private group, certified."""
    G, Y = pymc_dp.Integers(0, 2), (pymc_dp.Interval(0.5, 4.0) if family == "exponential" else pymc_dp.Integers(0, 4))
    with pm.Model() as m:
        g = pm.Data("g", RNG.integers(0, 3, N))
        rate = pm.Gamma("rate", 2.0, 1.0, shape=3)
        if family == "poisson":
            pm.Poisson("lik", mu=rate[g], observed=pm.Data("y", RNG.integers(0, 5, N)))
        else:
            pm.Exponential("lik", lam=rate[g], observed=pm.Data("y", RNG.uniform(0.5, 4.0, N)))
    cert = pymc_dp.certify(m, epsilon=epsilon, draws=1, data={"g": G, "y": Y}).certificate
    (fc,) = cert.factors
    return fc, Y


@pytest.mark.parametrize("family, epsilon", [("poisson", 20.0), ("exponential", 8.0)])
def test_certified_constant_bounds_the_brute_force_change_of_a_record(family, epsilon):
    """sup over the certified box (a grid of rate vectors, ends included) of
    ``|log p(y, g | rate) - log p(y', g' | rate)|`` over all neighbouring records (the record unit
    changes the row's y and g together) is at most the certified L, and not far below it."""
    fc, Y = _certified(family, epsilon)
    assert fc.bound == "lipschitz" and fc.loose_bound is None
    (box,) = [c for c in fc.constraints if c["var"] == "rate"]
    lower = np.broadcast_to(np.asarray(box["lower"], float), (3,))
    upper = np.broadcast_to(np.asarray(box["upper"], float), (3,))
    assert np.all(np.isfinite(lower)) and np.all(np.isfinite(upper))
    axes = [np.concatenate([[a, b], np.geomspace(a, b, 7)[1:-1]]) for a, b in zip(lower, upper)]
    rates = np.array(list(itertools.product(*axes)))  # (points, 3)
    if family == "poisson":
        ys = np.arange(Y.lo, Y.hi + 1)
        records = [(y, g) for y in ys for g in (0, 1, 2)]
        ll = np.stack([stats.poisson.logpmf(y, rates[:, g]) for y, g in records], axis=1)
    else:
        ys = np.linspace(Y.lo, Y.hi, 9)  # linear in y: the ends are attained
        records = [(y, g) for y in ys for g in (0, 1, 2)]
        ll = np.stack([stats.expon.logpdf(y, scale=1.0 / rates[:, g]) for y, g in records], axis=1)
    brute = float(np.max(ll.max(axis=1) - ll.min(axis=1)))
    assert fc.lipschitz >= brute * (1 - 1e-9)
    assert fc.lipschitz <= 1.5 * brute


def test_fuzz_seed_1000168_is_refused_by_its_budget_not_by_its_form():
    """The campaign recipe (epsilon 2.69 for 5 draws): the Poisson constant has a proved floor above
    the budget, as for the same model written exp(log_rate[g]); the refusal is a budget's."""
    from tests.fuzz.grammar import generate

    gm = generate(1000168, "campaign")
    with pytest.raises(pymc_dp.BudgetExceededError, match="y_lik"):
        pymc_dp.certify(gm.model, **gm.certify_kwargs())
