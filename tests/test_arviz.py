"""ArviZ on released data: summaries, diagnostics and plots work, see only released draws, and
a release survives NetCDF with its privacy record."""

from __future__ import annotations

import json

import arviz as az
import matplotlib
import matplotlib.pyplot as plt
import numpy as np
import pytest
import xarray as xr

import pymc_dp
from tests import models

matplotlib.use("Agg")  # no display: every figure is drawn off-screen

# ArviZ 0.23's matplotlib backend uses an API that matplotlib 3.11 deprecates (removed in 3.13)
pytestmark = pytest.mark.filterwarnings("ignore:Passing a dict or None as alias_mapping:DeprecationWarning")


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    plt.close("all")


@pytest.fixture(scope="module")
def exact_release():
    model, domains = models.naive_bayes(n=60, m=3)
    pmod = pymc_dp.make_private(model, epsilon=4.0, delta=1e-6, draws=40, data=domains, ledger=None)
    idata = pmod.sample(random_seed=7)
    assert json.loads(idata.attrs["pymc_dp"])["release"]["method"] == "exact"
    return idata


@pytest.fixture(scope="module")
def mcmc_release():
    model, domains = models.logistic(n=50, d=2)
    pmod = pymc_dp.make_private(model, epsilon=20.0, draws=100, data=domains, ledger=None)
    idata = pmod.sample(random_seed=7, chains=2, tune=200, cores=1, progressbar=False)
    assert json.loads(idata.attrs["pymc_dp"])["release"]["method"] == "mcmc"
    return idata


@pytest.fixture(params=["exact", "mcmc"])
def release(request):
    return request.getfixturevalue(f"{request.param}_release")


def _released_only(idata) -> az.InferenceData:
    """A new InferenceData made from nothing but the released numbers (values and coords)."""
    post = idata.posterior
    return az.InferenceData(
        posterior=xr.Dataset(
            {k: (v.dims, np.array(v.values)) for k, v in post.data_vars.items()},
            coords={k: np.array(v.values) for k, v in post.coords.items()},
        )
    )


def _components(idata) -> int:
    return sum(int(np.prod(v.shape[2:])) for v in idata.posterior.data_vars.values())


# --------------------------------------------------------------------------- what ArviZ sees
def test_a_release_holds_only_released_draws(release):
    assert list(release.groups()) == ["posterior"]
    for group in ("sample_stats", "observed_data", "constant_data", "log_likelihood", "warmup_posterior"):
        assert not hasattr(release, group)
    assert set(release.posterior.dims) >= {"chain", "draw"}
    cert = json.loads(release.attrs["pymc_dp"])
    assert release.posterior.sizes["chain"] * release.posterior.sizes["draw"] == cert["draws"]


def test_summary_ess_rhat_are_functions_of_the_released_draws(release):
    summary = az.summary(release)
    # every number equals ArviZ's on an InferenceData rebuilt from the released values alone
    rebuilt = az.summary(_released_only(release))
    assert summary.equals(rebuilt)
    assert len(summary) == _components(release)
    for name, da in release.posterior.data_vars.items():
        flat = da.values.reshape(-1, *da.shape[2:]).reshape(da.shape[0] * da.shape[1], -1)
        rows = [r for r in summary.index if r == name or r.startswith(f"{name}[")]
        np.testing.assert_allclose(summary.loc[rows, "mean"], flat.mean(axis=0), atol=6e-3)  # summary rounds
        np.testing.assert_allclose(summary.loc[rows, "sd"], flat.std(axis=0, ddof=1), atol=6e-3)
    ess, rhat = az.ess(release), az.rhat(release)
    assert set(ess.data_vars) == set(rhat.data_vars) == set(release.posterior.data_vars)
    for name in release.posterior.data_vars:
        assert np.all(np.isfinite(ess[name].values)) and np.all(ess[name].values > 0)
        assert np.all(np.isfinite(rhat[name].values))
    scalar = next(k for k, v in release.posterior.data_vars.items() if v.ndim == 2)
    assert float(ess[scalar]) == pytest.approx(az.ess(release.posterior[scalar].values), rel=1e-12)
    assert float(rhat[scalar]) == pytest.approx(az.rhat(release.posterior[scalar].values), rel=1e-12)


def test_plot_trace_has_no_divergences_to_show(release):
    axes = az.plot_trace(release, divergences="bottom")
    assert axes.shape == (len(release.posterior.data_vars), 2)
    markers = [ln for ax in axes.ravel() for ln in ax.get_lines() if ln.get_marker() == "|"]
    assert markers == []  # no sample_stats were released: no divergence markers
    # the check has teeth: the same draws *with* divergences in sample_stats get markers
    leaky = _released_only(release)
    shape = (release.posterior.sizes["chain"], release.posterior.sizes["draw"])
    diverging = np.zeros(shape, bool)
    diverging[0, :3] = True
    leaky.add_groups(sample_stats=xr.Dataset({"diverging": (("chain", "draw"), diverging)}))
    axes = az.plot_trace(leaky, divergences="bottom")
    assert [ln for ax in axes.ravel() for ln in ax.get_lines() if ln.get_marker() == "|"] != []
    # and what needs sampler statistics refuses
    with pytest.raises(ValueError, match="sample_stats"):
        az.plot_energy(release)
    with pytest.raises((ValueError, AttributeError, KeyError)):
        az.bfmi(release)


def test_plot_posterior_and_forest_draw_every_component(release):
    axes = [ax for ax in np.ravel(az.plot_posterior(release)) if ax.get_title()]  # grids pad with empty Axes
    assert len(axes) == _components(release)
    for ax in axes:
        assert len(ax.get_lines()) >= 1  # the density
    (forest,) = az.plot_forest(release, combined=True)
    labels = [t.get_text() for t in forest.get_yticklabels()]
    assert len(labels) == _components(release)
    for name in release.posterior.data_vars:
        assert any(label.startswith(name) for label in labels)


# --------------------------------------------------------------------------- NetCDF
def test_netcdf_round_trip_keeps_draws_and_the_privacy_record(release, tmp_path):
    path = tmp_path / "release.nc"
    release.to_netcdf(path)
    loaded = az.from_netcdf(path)
    assert list(loaded.groups()) == ["posterior"]
    assert loaded.attrs["pymc_dp"] == release.attrs["pymc_dp"]
    assert loaded.posterior.attrs["pymc_dp"] == release.attrs["pymc_dp"]
    record = json.loads(loaded.attrs["pymc_dp"])
    assert record["epsilon"] == json.loads(release.attrs["pymc_dp"])["epsilon"]
    assert "release" in record and "ledger" in record["release"]
    xr.testing.assert_identical(loaded.posterior, release.posterior)
    assert az.summary(loaded).equals(az.summary(release))
