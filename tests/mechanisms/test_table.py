"""The noisy table of record cells (pymc_dp/mechanisms/table.py, docs/theory/table.md): its cells,
its sensitivity by brute force in both modes, its audit (passes, and fails on half the noise), the
noise-aware law against a direct computation, the release record, the routing and the refusals."""

from __future__ import annotations

import itertools
import json

import numpy as np
import pymc as pm
import pytest
from scipy import stats
from scipy.special import gammaln, logsumexp

import pymc_dp
from pymc_dp.mechanisms.noise import discrete_laplace
from pymc_dp.mechanisms.table import NoisyTable, kd_clusters, table_shape

DOMAINS = {"g": pymc_dp.Binary(), "x": pymc_dp.Interval(0.0, 1.0), "y": pymc_dp.Integers(0, 6)}


def count_regression(n=40, seed=0):
    """Poisson counts on a private yes/no answer and a private covariate in [0, 1] (binned mode)."""
    rng = np.random.default_rng(seed)
    g, x = rng.integers(0, 2, n), rng.random(n)
    y = np.minimum(rng.poisson(np.exp(0.3 + 0.5 * g - 0.4 * x)), 6)
    with pm.Model() as m:
        gd, xd, yd = pm.Data("g", g), pm.Data("x", x), pm.Data("y", y)
        a, b, c = pm.Normal("a", 0, 1), pm.Normal("b", 0, 1), pm.Normal("c", 0, 1)
        pm.Poisson("obs", mu=pm.math.exp(a + b * gd + c * xd), observed=yd)
    return m


def public_ordinal(n=40, seed=0):
    """An ordered logistic rating on public covariates written as plain arrays (clustered mode)."""
    rng = np.random.default_rng(seed)
    z = rng.normal(size=(n, 2))
    y = np.clip(np.round(1.5 + z[:, 0] + rng.normal(0, 1, n)), 0, 3).astype(int)
    with pm.Model() as m:
        yd = pm.Data("y", y)
        beta = pm.Normal("beta", 0, 1, shape=2)
        cuts = pm.Normal("cuts", mu=[0.5, 1.5, 2.5], sigma=1.0, transform=pm.distributions.transforms.ordered)
        pm.OrderedLogistic("obs", cutpoints=cuts, eta=beta[0] * z[:, 0] + beta[1] * z[:, 1], observed=yd)
    return m


# --------------------------------------------------------------------------- the cells
def test_the_binned_cells_are_every_level_times_equal_widths_and_partition_the_records():
    mech = NoisyTable(count_regression(), epsilon=10.0, data=DOMAINS, ledger=None, covariate_bins=4)
    assert mech.mode == "binned" and [ax.kind for ax in mech.axes] == ["levels", "bins"]
    assert mech.axes[0].centres.tolist() == [0.0, 1.0]
    assert np.allclose(mech.axes[1].centres, [0.125, 0.375, 0.625, 0.875])
    assert mech.groups == 8 and mech.outcome_bins == 7 and mech.cells == 56  # every count 0..6 its own cell
    counts = mech.true_counts(mech._values)
    assert counts.sum() == mech.n and counts.shape == (56,)


def test_the_table_size_is_public_and_bounded():
    assert table_shape(4000, 10.0, 1, outcome_values=101, levels=4, continuous=0) == (68, 1)
    k, per = table_shape(103, 10.0, 1, outcome_values=None, levels=1, continuous=1)
    assert k * per <= 103 * 10 / 4 and per >= 2
    assert table_shape(103, 1.0, 1, outcome_values=None, levels=1, continuous=1)[1] == 2  # few cells at small n epsilon
    assert table_shape(919, 10.0, 1, outcome_values=None, levels=170, continuous=0)[0] == 13


def test_public_groups_are_a_deterministic_kd_tree_of_equal_sizes():
    z = np.random.default_rng(0).normal(size=(37, 3))
    label = kd_clusters(z, 8)
    assert np.array_equal(label, kd_clusters(z, 8)) and label.max() == 7
    assert np.bincount(label).max() - np.bincount(label).min() <= 1
    mech = NoisyTable(public_ordinal(), epsilon=2.0, data={"y": pymc_dp.Integers(0, 3)}, ledger=None, groups=4)
    assert mech.mode == "clustered" and mech.groups == 4 and mech.group_sizes.sum() == 40


# --------------------------------------------------------------------------- sensitivity
def _grid(domain, cuts=()):
    pts = [domain.lo, domain.hi, *cuts, *(np.asarray(cuts) + 1e-9), *np.linspace(domain.lo, domain.hi, 7)]
    pts = np.unique(np.clip(pts, domain.lo, domain.hi))
    return np.unique(np.round(pts)) if isinstance(domain, pymc_dp.Integers) else pts


@pytest.mark.parametrize("model, data", [(count_regression, DOMAINS), (public_ordinal, {"y": pymc_dp.Integers(0, 3)})])
def test_one_record_moves_the_count_vector_by_at_most_two_by_brute_force(model, data):
    """Replace any record by any row of the domains' grid (ends, every cut point and beside it,
    interior points; every private container together): the counts' L1 change is at most 2, and 2
    is attained."""
    mech = NoisyTable(model(n=12), epsilon=5.0, data=data, ledger=None, covariate_bins=3)
    grids = {c: _grid(data[c], next((ax.cuts for ax in mech.axes if ax.source == c), mech.outcome_cuts if c == "y" else ()))
             for c in mech.reads}
    base = {c: np.asarray(v, float) for c, v in mech._values.items()}
    before = mech.true_counts(base)
    worst = 0
    for i in range(mech.n):
        for row in itertools.product(*(grids[c] for c in mech.reads)):
            changed = {c: v.copy() for c, v in base.items()}
            for c, value in zip(mech.reads, row):
                changed[c][i] = value
            worst = max(worst, int(np.abs(mech.true_counts(changed) - before).sum()))
    assert worst == 2
    users = NoisyTable(model(n=12), epsilon=5.0, data=data, ledger=None, unit=pymc_dp.Users(max_rows=3))
    assert users.sensitivity == 6.0 and users.noise_scale == pytest.approx(6.0 / 5.0)


# --------------------------------------------------------------------------- audit
class HalvedTable(NoisyTable):
    """A broken table: half the noise it claims (bypassing OpenDP's map check)."""

    def audit_runs(self, data, runs, rng):
        counts = self.true_counts(data)
        return np.stack([discrete_laplace(counts, self.noise_scale / 2) for _ in range(int(runs))]).astype(float)


def test_the_audit_passes_the_table_and_catches_half_the_noise():
    model = count_regression(n=8)
    kwargs = dict(epsilon=1.0, data=DOMAINS, ledger=None, covariate_bins=2)
    res = pymc_dp.audit(NoisyTable(model, **kwargs), runs=40_000, confidence=0.999, random_seed=1)
    assert res.verdict == "pass", str(res)
    assert 0.6 < res.measured <= 1.0
    res = pymc_dp.audit(HalvedTable(model, **kwargs), runs=40_000, confidence=0.999, random_seed=1)
    assert res.verdict == "fail", str(res)
    assert res.measured > 1.3


# --------------------------------------------------------------------------- the noise-aware law
def _direct_loglik(y, rate, b, caps, rate_out):
    """The noisy counts' log-likelihood summed over every latent count 0..cap (no window)."""
    total = 0.0
    for yk, lam, cap in zip(y, rate, caps):
        c = np.arange(int(cap) + 1)
        total += logsumexp(c * np.log(lam) - lam - gammaln(c + 1) - np.abs(yk - c) / b)
    return total - rate_out


def _law_at(mech, model, point):
    """The noise-aware Potential at ``point`` (a dict of the model's value variables)."""
    return float(model.compile_logp(vars=model.potentials, jacobian=False)(point))


def test_the_binned_law_is_the_direct_sum_over_latent_counts():
    mech = NoisyTable(count_regression(n=30), epsilon=2.0, data=DOMAINS, ledger=None, covariate_bins=2)
    mech.released = discrete_laplace(mech.true_counts(mech._values), mech.noise_scale)
    model = mech.noise_aware_model()
    rng = np.random.default_rng(0)
    cen_g, cen_x = np.meshgrid([0.0, 1.0], [0.25, 0.75], indexing="ij")
    values = np.arange(7)
    for _ in range(3):
        a, b, c = rng.normal(size=3)
        lam = mech.n * rng.dirichlet(np.ones(4)) * rng.uniform(0.8, 1.2)  # the cells' rates
        point = {"a": a, "b": b, "c": c, "__dp_table_rates_log__": np.log(lam)}
        mu = np.exp(a + b * cen_g.ravel() + c * cen_x.ravel())  # (4,) covariate cells
        pk = stats.poisson.pmf(values[None, :], mu[:, None])  # (4, 7): every count its own cell
        rate = (lam[:, None] * pk).ravel()
        rate_out = float(np.sum(lam * (1 - pk.sum(axis=1))))
        want = _direct_loglik(mech.released, rate, mech.noise_scale, np.full(mech.cells, mech.n), rate_out)
        want += stats.poisson.logpmf(mech.n, lam.sum())  # the public n around the rates' sum
        assert _law_at(mech, model, point) == pytest.approx(want, rel=1e-9, abs=1e-7)


def test_the_clustered_law_sums_every_records_own_probabilities():
    m = public_ordinal(n=24)
    mech = NoisyTable(m, epsilon=2.0, data={"y": pymc_dp.Integers(0, 3)}, ledger=None, groups=4)
    mech.released = discrete_laplace(mech.true_counts(mech._values), mech.noise_scale)
    model = mech.noise_aware_model()
    z = np.random.default_rng(0).normal(size=(24, 2))  # public_ordinal's covariates
    rng = np.random.default_rng(1)
    for _ in range(3):
        beta = rng.normal(size=2)
        cuts = np.sort(rng.normal(1.5, 1.0, 3))
        eta = z @ beta
        cdf = 1 / (1 + np.exp(-(cuts[None, :] - eta[:, None])))  # P(y <= k)
        p = np.diff(np.concatenate([np.zeros((24, 1)), cdf, np.ones((24, 1))], axis=1), axis=1)
        rate = np.zeros((4, 4))
        np.add.at(rate, mech._group_of_public, p)
        caps = np.repeat(mech.group_sizes, 4)
        want = _direct_loglik(mech.released, rate.ravel(), mech.noise_scale, caps, 0.0)
        point = {"beta": beta, "cuts_ordered__": pm.distributions.transforms.ordered.forward(cuts).eval()}
        assert _law_at(mech, model, point) == pytest.approx(want, rel=1e-9, abs=1e-7)


# --------------------------------------------------------------------------- release, routing
def test_the_release_charges_once_and_holds_only_public_facts(tmp_path):
    ledger = pymc_dp.Ledger(tmp_path / "ledger.sqlite")
    mech = pymc_dp.noisy_table(count_regression(), epsilon=3.0, data=DOMAINS, ledger=ledger, covariate_bins=2)
    idata = mech.sample(60, chains=1, tune=100, random_seed=0)
    mech.sample(30, chains=1, tune=50, random_seed=1)
    assert ledger.spent(mech.dataset_id).epsilon == pytest.approx(3.0)
    assert set(idata.groups()) <= {"posterior", "sample_stats"}
    assert set(idata.posterior.data_vars) == {"a", "b", "c"}  # not the nuisance weights
    record = json.loads(idata.attrs["pymc_dp"])
    assert record["mechanism"] == "noisy_table" and record["noise"]["scale"] == pytest.approx(2.0 / 3.0)
    assert record["released"]["counts"] == mech.released.tolist() and len(mech.released) == mech.cells
    assert record["cells"]["mode"] == "binned" and len(record["cells"]["axes"]) == 2
    text = json.dumps(record)
    assert str(mech.true_counts(mech._values).tolist()) not in text


def test_noisy_statistics_and_auto_route_a_regression_with_cells_to_the_table():
    mech = pymc_dp.noisy_statistics(count_regression(), epsilon=3.0, data=DOMAINS, ledger=None)
    assert isinstance(mech, NoisyTable)
    rec = pymc_dp.recommend(count_regression(), epsilon=3.0, data=DOMAINS)
    assert rec.path == "noisy_statistics" and "table of" in rec.reason
    auto = pymc_dp.make_private(public_ordinal(), epsilon=3.0, draws=1, data={"y": pymc_dp.Integers(0, 3)},
                                path="auto", ledger=None)
    assert isinstance(auto, NoisyTable) and auto.path_choice.path == "noisy_statistics"


def yes_no_poisson(n=60, seed=0, domain=None):
    """The gallery's Poisson regression in small: counts on a private design of yes/no columns."""
    rng = np.random.default_rng(seed)
    X = rng.integers(0, 2, size=(n, 2)).astype(float)
    y = np.minimum(rng.poisson(np.exp(0.2 + X @ [0.8, -0.5])), 8)
    with pm.Model() as m:
        Xd, yd = pm.Data("X", X), pm.Data("y", y)
        beta = pm.Normal("beta", 0, 2, shape=2)
        pm.Poisson("obs", mu=pm.math.exp(pm.Normal("a", 0, 2) + Xd @ beta), observed=yd)
    return m, {"X": domain or pymc_dp.Binary(), "y": pymc_dp.Integers(0, 8)}


def test_a_poisson_regression_takes_the_table_before_pass_glm_only_where_its_law_is_exact():
    """Yes/no covariates: every covariate cell is one value, the table's law is the model's own,
    and it comes before PASS-GLM's quadratic of exp; declared continuous (Box), the table would
    put records at bin centres, and PASS-GLM keeps the regression."""
    from pymc_dp.mechanisms.pass_glm import PassGLM

    model, domains = yes_no_poisson()
    mech = pymc_dp.noisy_statistics(model, epsilon=3.0, data=domains, ledger=None)
    assert isinstance(mech, NoisyTable) and mech.exact_law and mech.groups == 4
    auto = pymc_dp.make_private(model, epsilon=3.0, draws=1, data=domains, path="auto", ledger=None)
    assert isinstance(auto, NoisyTable)
    model, domains = yes_no_poisson(domain=pymc_dp.Box(0.0, 1.0))
    assert isinstance(pymc_dp.noisy_statistics(model, epsilon=3.0, data=domains, ledger=None), PassGLM)
    assert not NoisyTable(model, epsilon=3.0, data=domains, ledger=None).exact_law
    assert NoisyTable(public_ordinal(), epsilon=2.0, data={"y": pymc_dp.Integers(0, 3)}, ledger=None).exact_law
    assert not NoisyTable(count_regression(), epsilon=3.0, data=DOMAINS, ledger=None).exact_law


# --------------------------------------------------------------------------- refusals
def test_a_multivariate_law_over_the_records_is_refused_before_anything_is_released(tmp_path):
    """Found by gallery_utility on the AR model: pm.AR gives the whole series one joint value, so
    it has no per-record cell probabilities; the table took it, released (and charged) the counts,
    then crashed with PyMC's raw NotImplementedError (no logcdf). Now it is refused at build time,
    typed and named, and auto goes on to another path."""
    ledger = pymc_dp.Ledger(tmp_path / "ledger.sqlite")
    y = np.clip(np.cumsum(np.random.default_rng(0).normal(0, 0.3, 30)), -3, 3)
    with pm.Model() as ar:
        yd = pm.Data("y", y)
        rho = pm.Normal("rho", 0.5, 0.2, shape=1)
        pm.AR("obs", rho=rho, sigma=0.3, init_dist=pm.Normal.dist(0, 1), observed=yd)
    domains = {"y": pymc_dp.Interval(-3.0, 3.0)}
    with pytest.raises(pymc_dp.UnsupportedFactorError, match="'obs'.*one multivariate law over all of 'y'"):
        NoisyTable(ar, epsilon=5.0, data=domains, ledger=ledger)
    with pytest.raises(pymc_dp.UnsupportedFactorError, match="multivariate law"):
        pymc_dp.noisy_statistics(ar, epsilon=5.0, data=domains, ledger=ledger)
    assert ledger.releases() == []  # nothing charged


def test_a_law_pymc_cannot_build_is_refused_at_build_time_and_charges_nothing(tmp_path, monkeypatch):
    """The table builds its noise-aware law once on zero counts in the constructor, so whatever
    PyMC cannot give (a logcdf, a logp) is a typed refusal before anything is released."""
    def no_law(self, rv, batch):
        raise NotImplementedError("LogCDF method not implemented for SomeRV")

    monkeypatch.setattr(NoisyTable, "_cell_probabilities", no_law)
    ledger = pymc_dp.Ledger(tmp_path / "ledger.sqlite")
    with pytest.raises(pymc_dp.UnsupportedFactorError, match="cell probabilities of 'obs'.*LogCDF"):
        NoisyTable(count_regression(), epsilon=3.0, data=DOMAINS, ledger=ledger)
    assert ledger.releases() == []


def test_what_the_table_cannot_serve_is_refused_typed_and_named(tmp_path):
    ledger = pymc_dp.Ledger(tmp_path / "ledger.sqlite")
    y = np.arange(10) % 3
    with pm.Model() as lagged:  # the outcome read by its own parameters
        yd = pm.Data("y", y)
        pm.Poisson("obs", mu=pm.math.exp(pm.Normal("a", 0, 1) * yd), observed=yd)
    with pytest.raises(pymc_dp.UnsupportedFactorError, match="its own outcome 'y'"):
        NoisyTable(lagged, epsilon=1.0, data={"y": pymc_dp.Integers(0, 2)}, ledger=ledger)
    with pm.Model() as per_record:  # one parameter per record: the rat tumours' theta
        yd = pm.Data("y", y)
        pm.Binomial("obs", n=3, p=pm.Beta("theta", 1, 1, shape=10), observed=yd)
    with pytest.raises(pymc_dp.UnsupportedFactorError, match="'theta', which has one value per record"):
        NoisyTable(per_record, epsilon=1.0, data={"y": pymc_dp.Integers(0, 3)}, ledger=ledger)
    g = np.arange(10)
    with pm.Model() as wide:
        gd, yd = pm.Data("g", g), pm.Data("y", y)
        pm.Poisson("obs", mu=pm.math.exp(pm.Normal("a", 0, 1, shape=1000)[gd]), observed=yd)
    with pytest.raises(pymc_dp.UnsupportedFactorError, match="'g' has 1000 integer values"):
        NoisyTable(wide, epsilon=1.0, data={"g": pymc_dp.Integers(0, 999), "y": pymc_dp.Integers(0, 2)}, ledger=ledger)
    with pytest.raises(pymc_dp.UnsupportedFactorError, match="more than 20000"):  # 2 x 5000 covariate cells x 7
        NoisyTable(count_regression(), epsilon=1.0, data=DOMAINS, ledger=ledger, covariate_bins=5000)
    with pm.Model() as two:
        gd, yd = pm.Data("g", g % 2), pm.Data("y", y)
        pm.Poisson("o1", mu=pm.math.exp(pm.Normal("a", 0, 1) * gd), observed=yd)
        pm.Normal("o2", mu=0.0, sigma=1.0, observed=gd)
    with pytest.raises(pymc_dp.UnsupportedFactorError, match=r"read by \['o1', 'o2'\]"):
        NoisyTable(two, epsilon=1.0, data={"g": pymc_dp.Binary(), "y": pymc_dp.Integers(0, 2)}, ledger=ledger)
    with pytest.raises(pymc_dp.PathNotImplementedError, match="delta > 0"):
        NoisyTable(count_regression(), epsilon=1.0, delta=1e-6, data=DOMAINS, ledger=ledger)
    with pytest.raises(pymc_dp.PrivacyError, match="groups="):
        NoisyTable(public_ordinal(), epsilon=1.0, data={"y": pymc_dp.Integers(0, 3)}, ledger=ledger, groups=0)
    assert ledger.spent(NoisyTable(count_regression(), epsilon=1.0, data=DOMAINS, ledger=ledger).dataset_id).epsilon == 0
