"""Reproducibility: the same ``random_seed`` gives the same release.

"The same release" means equal posterior arrays (bit for bit), coordinates and dims, and the same
public metadata, for two *separately built* PrivateModels of the same model and data (each
certifies, truncates and rewrites on its own), for the exact samplers and for MCMC (PyMC's NUTS,
and numpyro / nutpie when installed). Different seeds give different draws, and ``with_data``
given the same data releases what the original releases.

With a ledger the ``release["ledger"]`` section records the cumulative spend, which grows with
every release; everything else stays the same (``ledger=None`` elsewhere in this module).
"""

from __future__ import annotations

import json
import warnings

import numpy as np
import pytest

import pymc_dp
from tests import models

FAST = dict(tune=60, chains=2, cores=1, progressbar=False)


def _private(build, *, epsilon, draws, ledger=None, **kw):
    model, data = build()  # a fresh model from the same data (the builders are seeded)
    return pymc_dp.make_private(model, epsilon=epsilon, draws=draws, data=data, ledger=ledger, **kw)


def assert_same_release(a, b):
    assert a.groups() == b.groups() == ["posterior"]
    assert a.posterior.identical(b.posterior)  # values, dims, coords and attrs
    for name in a.posterior.data_vars:
        np.testing.assert_array_equal(a.posterior[name].values, b.posterior[name].values)
    assert a.attrs == b.attrs


def assert_different_draws(a, b):
    assert set(a.posterior.data_vars) == set(b.posterior.data_vars)
    assert any(not np.array_equal(a.posterior[n].values, b.posterior[n].values) for n in a.posterior.data_vars)


def _quiet(pmod, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return pmod.sample(**kw)


EXACT = {
    "coin": (models.coin, 2.0, 6),
    "naive_bayes": (lambda: models.naive_bayes(n=60, m=3), 40.0, 4),
    "dirichlet_categorical": (models.dirichlet_categorical, 20.0, 4),
    "poisson_bernoulli": (models.poisson_bernoulli, 40.0, 2),
}


@pytest.mark.parametrize("name", sorted(EXACT))
def test_exact_release_is_reproducible(name):
    build, epsilon, draws = EXACT[name]
    first = _private(build, epsilon=epsilon, draws=draws)
    second = _private(build, epsilon=epsilon, draws=draws)
    assert first is not second and first.model is not second.model
    assert first.conjugate_plan is not None and second.conjugate_plan is not None
    a, b = first.sample(random_seed=11), second.sample(random_seed=11)
    assert json.loads(a.attrs["pymc_dp"])["release"]["method"] == "exact"
    assert_same_release(a, b)
    assert_same_release(a, first.sample(random_seed=11))  # and again on the same PrivateModel
    assert_different_draws(a, first.sample(random_seed=12))
    # a numpy Generator in the same state is a seed too
    assert_same_release(
        first.sample(random_seed=np.random.default_rng(5)), second.sample(random_seed=np.random.default_rng(5))
    )
    # with_data on the same data: the same mechanism, the same release
    same = first.with_data({v.name: v.get_value() for v in first.model.data_vars if v.name in first.domains})
    assert same.dataset_id == first.dataset_id
    assert_same_release(a, same.sample(random_seed=11))


def test_mcmc_release_is_reproducible():
    """Logistic regression: a polar reparametrisation (two auxiliary free RVs) and an intercept,
    whose order in the rewritten model decides how NUTS draws its random numbers."""
    build = lambda: models.logistic(n=40, d=2, w_norm=True)  # noqa: E731
    first = _private(build, epsilon=30.0, draws=4)
    second = _private(build, epsilon=30.0, draws=4)
    a, b = _quiet(first, random_seed=3, **FAST), _quiet(second, random_seed=3, **FAST)
    assert json.loads(a.attrs["pymc_dp"])["release"]["method"] == "mcmc"
    assert set(a.posterior.data_vars) == {"w", "b", "w_norm"}
    assert_same_release(a, b)
    same = first.with_data({"X": first.model["X"].get_value(), "y": first.model["y"].get_value()})
    assert [v.name for v in same.model.free_RVs] == [v.name for v in first.model.free_RVs]
    assert_same_release(a, _quiet(same, random_seed=3, **FAST))


def test_mcmc_different_seeds_and_thinning():
    build = lambda: models.coin(n=20)  # noqa: E731
    first = _private(build, epsilon=4.0, draws=4)
    second = _private(build, epsilon=4.0, draws=4)
    kw = dict(method="mcmc", thin=2, random_seed=8, **FAST)
    a, b = _quiet(first, **kw), _quiet(second, **kw)
    assert json.loads(a.attrs["pymc_dp"])["release"]["thin"] == 2
    assert_same_release(a, b)
    assert_different_draws(a, _quiet(first, **{**kw, "random_seed": 9}))


def test_a_ledger_changes_only_the_ledger_section(tmp_path):
    ledger = pymc_dp.Ledger(tmp_path / "l.sqlite")
    first = _private(models.coin, epsilon=2.0, draws=4, ledger=ledger)
    second = _private(models.coin, epsilon=2.0, draws=4, ledger=ledger)
    a, b = first.sample(random_seed=1), second.sample(random_seed=1)
    assert a.posterior.identical(b.posterior) is False  # the attrs differ ...
    for name in a.posterior.data_vars:  # ... the draws do not
        np.testing.assert_array_equal(a.posterior[name].values, b.posterior[name].values)
    pa, pb = json.loads(a.attrs["pymc_dp"]), json.loads(b.attrs["pymc_dp"])
    assert pa["release"].pop("ledger")["spent_epsilon"] == pytest.approx(2.0)
    assert pb["release"].pop("ledger")["spent_epsilon"] == pytest.approx(4.0)
    assert pa == pb


@pytest.mark.extended
@pytest.mark.parametrize("backend", ["numpyro", "nutpie"])
def test_other_backends_are_reproducible(backend):
    pytest.importorskip(backend)
    if backend == "numpyro":
        pytest.importorskip("jax")
        extra = dict(nuts_sampler_kwargs={"chain_method": "vectorized"})
    else:
        extra = {}
    build = lambda: models.logistic(n=40, d=2)  # noqa: E731
    first = _private(build, epsilon=30.0, draws=4)
    second = _private(build, epsilon=30.0, draws=4)
    kw = dict(nuts_sampler=backend, random_seed=5, **FAST, **extra)
    a, b = _quiet(first, **kw), _quiet(second, **kw)
    assert json.loads(a.attrs["pymc_dp"])["release"]["sampler"] == backend
    assert_same_release(a, b)
    assert_different_draws(a, _quiet(first, **{**kw, "random_seed": 6}))
