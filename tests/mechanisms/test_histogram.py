"""The noisy histogram (pymc_dp/mechanisms/histogram.py, docs/theory/histogram.md): its cells, its
sensitivity by brute force, its audit (passes, and fails on half the noise), the noise-aware
posterior against exact quadrature, the release record and the refusals."""

from __future__ import annotations

import itertools
import json
import math

import numpy as np
import pymc as pm
import pytest
from scipy import stats
from scipy.special import logsumexp

import pymc_dp
from pymc_dp.mechanisms.histogram import NoisyHistogram, cell_counts, cut_points, default_bins
from pymc_dp.mechanisms.noise import discrete_laplace

DOMAIN = {"x": pymc_dp.Interval(-4.0, 4.0)}


def normal_location(n=30, seed=0, sigma=1.0):
    x = np.random.default_rng(seed).normal(0.5, sigma, n).clip(-4, 4)
    with pm.Model() as m:
        xd = pm.Data("x", x)
        pm.Normal("obs", mu=pm.Normal("mu", 0.0, 1.0), sigma=sigma, observed=xd)
    return m


def student_iid(n=40, seed=0):
    x = np.random.default_rng(seed).standard_t(3, n).clip(-4, 4)
    with pm.Model() as m:
        xd = pm.Data("x", x)
        pm.StudentT("obs", nu=3, mu=pm.Normal("mu", 0.0, 2.0), sigma=pm.HalfNormal("sigma", 1.0), observed=xd)
    return m


# --------------------------------------------------------------------------- the cells
def test_a_value_on_a_cut_point_is_in_the_lower_cell_as_the_cdf_counts_it():
    cuts = cut_points(pymc_dp.Interval(0.0, 4.0), 4)
    assert np.allclose(cuts, [1.0, 2.0, 3.0])
    # cell k is (t_k, t_{k+1}]: P(cell 0) = F(t_1) holds x = 1.0; the domain's ends are in the end cells
    assert cell_counts(np.array([0.0, 1.0, 1.0 + 1e-12, 2.0, 4.0]), cuts).tolist() == [2, 2, 0, 1]


def test_integer_cells_are_single_values_or_runs_and_partition_the_values():
    assert cut_points(pymc_dp.Integers(0, 5), 64).tolist() == [0, 1, 2, 3, 4]
    cuts = cut_points(pymc_dp.Integers(0, 99), 8)
    assert len(cuts) == 7
    cells = cell_counts(np.arange(100), cuts)
    assert cells.sum() == 100 and cells.min() >= 12 and cells.max() <= 13
    # a brute-force assignment: x in cell #{t < x}
    for x in range(100):
        assert cell_counts(np.array([x]), cuts).argmax() == sum(t < x for t in cuts)


def test_default_bins_is_public_and_bounded():
    assert default_bins(500, 10.0) == 34
    assert default_bins(10, 0.01) == 8 and default_bins(10**9, 10.0) == 128
    assert default_bins(500, 10.0, unit_rows=8) < default_bins(500, 10.0)


# --------------------------------------------------------------------------- sensitivity
@pytest.mark.parametrize("domain", [pymc_dp.Interval(-4.0, 4.0), pymc_dp.Integers(0, 20)])
def test_one_record_moves_the_count_vector_by_at_most_two_by_brute_force(domain):
    """Replace any record of a dataset by any other value (the domain's ends, every cut point and
    points beside them, interior points): the counts' L1 change is at most 2, and 2 is attained."""
    cuts = cut_points(domain, 6)
    grid = np.unique(np.concatenate([[domain.lo, domain.hi], cuts, cuts + 0.5, cuts - 0.5,
                                     np.linspace(domain.lo, domain.hi, 9)]))
    grid = grid[(grid >= domain.lo) & (grid <= domain.hi)]
    if isinstance(domain, pymc_dp.Integers):
        grid = np.unique(np.round(grid))
    base = np.random.default_rng(0).choice(grid, 15)
    before = cell_counts(base, cuts)
    worst = 0
    for i, v in itertools.product(range(len(base)), grid):
        changed = base.copy()
        changed[i] = v
        worst = max(worst, int(np.abs(cell_counts(changed, cuts) - before).sum()))
    assert worst == 2


def test_the_noise_scale_is_the_sensitivity_over_epsilon_and_a_user_moves_m_counts_each_way():
    mech = NoisyHistogram(normal_location(), epsilon=2.0, data=DOMAIN, ledger=None)
    assert mech.sensitivity == 2.0 and mech.noise_scale == pytest.approx(1.0)
    users = NoisyHistogram(normal_location(), epsilon=2.0, data=DOMAIN, ledger=None, unit=pymc_dp.Users(max_rows=3))
    assert users.sensitivity == 6.0 and users.noise_scale == pytest.approx(3.0)


# --------------------------------------------------------------------------- audit
class HalvedHistogram(NoisyHistogram):
    """A broken histogram: half the noise it claims (bypassing OpenDP's map check)."""

    def audit_runs(self, data, runs, rng):
        counts = self.true_counts(data)
        return np.stack([discrete_laplace(counts, self.noise_scale / 2) for _ in range(int(runs))]).astype(float)


def test_the_audit_passes_the_histogram_and_catches_half_the_noise():
    model = normal_location(n=10)
    mech = NoisyHistogram(model, epsilon=1.0, data=DOMAIN, ledger=None, bins=8)
    res = pymc_dp.audit(mech, runs=40_000, confidence=0.999, random_seed=1)
    assert res.verdict == "pass", str(res)
    assert 0.6 < res.measured <= 1.0
    broken = HalvedHistogram(model, epsilon=1.0, data=DOMAIN, ledger=None, bins=8)
    res = pymc_dp.audit(broken, runs=40_000, confidence=0.999, random_seed=1)
    assert res.verdict == "fail", str(res)
    assert res.measured > 1.3


# --------------------------------------------------------------------------- the noise-aware posterior
def test_the_noise_aware_posterior_is_the_exact_one_given_the_noisy_counts():
    """mu ~ N(0, 1), x ~ N(mu, 1) on [-4, 4], 8 cells, epsilon 1: the posterior given fixed noisy
    counts, by quadrature over mu with the latent counts summed over 0..400 (no window), against
    the mechanism's MCMC draws."""
    model = normal_location(n=30)
    mech = NoisyHistogram(model, epsilon=1.0, data=DOMAIN, ledger=None, bins=8)
    y = np.array([0, 2, 3, 9, 8, 5, -1, 1])  # noisy counts (a negative one: noise)
    mech.released = y.copy()
    b, n, cuts = mech.noise_scale, mech.n, mech.cuts
    mu = np.linspace(-3, 3, 2001)
    cdf = stats.norm.cdf(cuts[None, :], loc=mu[:, None])
    edges = np.concatenate([np.zeros((len(mu), 1)), cdf, np.ones((len(mu), 1))], axis=1)
    p = np.clip(np.diff(edges, axis=1), 1e-300, 1)  # (grid, K)
    c = np.arange(401)
    log_noise = -np.abs(y[:, None] - c[None, :]) / b  # (K, C)
    log_pois = stats.poisson.logpmf(c[None, None, :], n * p[:, :, None])  # (grid, K, C)
    loglik = logsumexp(log_pois + log_noise[None], axis=2).sum(axis=1)
    logpost = stats.norm.logpdf(mu) + loglik
    w = np.exp(logpost - logpost.max())
    w /= w.sum()
    mean = float(np.sum(w * mu))
    sd = float(np.sqrt(np.sum(w * (mu - mean) ** 2)))
    idata = mech.sample(2000, chains=2, tune=500, random_seed=3)
    draws = idata.posterior["mu"].values.ravel()
    assert abs(draws.mean() - mean) < 0.05 * sd + 4 * sd / math.sqrt(800)
    assert draws.std() == pytest.approx(sd, rel=0.1)


def test_the_release_charges_once_and_holds_only_public_facts(tmp_path):
    ledger = pymc_dp.Ledger(tmp_path / "ledger.sqlite")
    mech = pymc_dp.noisy_histogram(student_iid(), epsilon=3.0, data=DOMAIN, ledger=ledger)
    idata = mech.sample(100, chains=1, tune=200, random_seed=0)
    mech.sample(50, chains=1, tune=100, random_seed=1)
    assert ledger.spent(mech.dataset_id).epsilon == pytest.approx(3.0)
    assert set(idata.groups()) <= {"posterior", "sample_stats"}
    assert set(idata.posterior.data_vars) == {"mu", "sigma"}
    record = json.loads(idata.attrs["pymc_dp"])
    assert record["mechanism"] == "noisy_histogram" and record["noise"]["scale"] == pytest.approx(2.0 / 3.0)
    assert len(record["released"]["counts"]) == mech.bins == len(record["released"]["cut_points"]) + 1
    assert record["released"]["counts"] == mech.released.tolist()


# --------------------------------------------------------------------------- refusals
def test_what_the_histogram_cannot_serve_is_refused_typed_and_named(tmp_path):
    ledger = pymc_dp.Ledger(tmp_path / "ledger.sqlite")
    x = np.linspace(-1, 1, 20)
    with pm.Model() as regression:
        xd, yd = pm.Data("x", x), pm.Data("y", x.copy())
        pm.Normal("obs", mu=pm.Normal("a", 0, 1) * xd, sigma=1.0, observed=yd)
    with pytest.raises(pymc_dp.UnsupportedFactorError, match="2 private containers"):
        pymc_dp.noisy_histogram(regression, epsilon=1.0, data={"x": pymc_dp.Interval(-1, 1), "y": pymc_dp.Interval(-1, 1)},
                                ledger=ledger)
    with pytest.raises(pymc_dp.UnsupportedFactorError, match=r"read the data containers \['x'\]"):
        pymc_dp.noisy_histogram(regression, epsilon=1.0, data={"y": pymc_dp.Interval(-1, 1)}, public=["x"], ledger=ledger)
    with pytest.raises(pymc_dp.PathNotImplementedError, match="delta > 0"):
        NoisyHistogram(normal_location(), epsilon=1.0, delta=1e-6, data=DOMAIN, ledger=ledger)
    with pytest.raises(pymc_dp.PrivacyError, match="bins="):
        pymc_dp.noisy_histogram(normal_location(), epsilon=1.0, data=DOMAIN, ledger=ledger, bins=1)
    for rows in (3, 4, 10):  # one location per record, whatever the number of rows
        with pm.Model() as per_record:
            xd = pm.Data("x", np.zeros(rows))
            pm.Normal("obs", mu=pm.Normal("mu", 0, 1, shape=rows), sigma=1.0, observed=xd)
        with pytest.raises(pymc_dp.UnsupportedFactorError, match="differs between records"):
            pymc_dp.noisy_histogram(per_record, epsilon=1.0, data=DOMAIN, ledger=ledger)
    z = np.linspace(-1, 1, 20)  # a covariate written as a plain array (the gallery's ordinal model): one law per record
    with pm.Model() as plain_covariate:
        xd = pm.Data("x", np.zeros(20))
        pm.Normal("obs", mu=pm.Normal("b", 0, 1) * z, sigma=1.0, observed=xd)
    with pytest.raises(pymc_dp.UnsupportedFactorError, match="constant arrays with one value per record"):
        pymc_dp.noisy_histogram(plain_covariate, epsilon=1.0, data=DOMAIN, ledger=ledger)
    with pm.Model() as matrix:
        xd = pm.Data("x", np.zeros((5, 2)))
        pm.Normal("obs", mu=pm.Normal("mu", 0, 1), sigma=1.0, observed=xd)
    with pytest.raises(pymc_dp.UnsupportedFactorError, match="2 dimensions"):
        pymc_dp.noisy_histogram(matrix, epsilon=1.0, data=DOMAIN, ledger=ledger)
    assert ledger.spent(pymc_dp.noisy_histogram(normal_location(), epsilon=1.0, data=DOMAIN, ledger=ledger).dataset_id).epsilon == 0
