"""Laplace mechanism on posterior updates (AAAI 2016, Alg. 1)."""

from __future__ import annotations

import itertools
import json

import numpy as np
import pytest

import pymc_dp
from pymc_dp.exact import conjugate_plan
from pymc_dp.mechanisms.updates import draw_posterior
from tests.models import (
    chain_net,
    coin,
    dirichlet_categorical,
    naive_bayes,
    normal_location_scale,
    poisson_bernoulli,
)


def _records(net):
    """Every record of the network (container -> row value)."""
    per = []
    for c, (_, shape) in net.containers.items():
        vals = list(net.variables[[v.container for v in net.variables].index(c)].values)
        size = int(np.prod(shape, dtype=int))
        per.append([(c, np.array(r).reshape(shape)) for r in itertools.product(vals, repeat=size)])
    return [dict(combo) for combo in itertools.product(*per)]


def _datasets(net):
    recs = _records(net)
    for rows in itertools.product(range(len(recs)), repeat=net.rows):
        yield {c: np.stack([recs[i][c] for i in rows]) for c in net.containers}, recs


def _brute_force_l1(mech, unit="record"):
    """max over every dataset and every neighbour of the L1 change of the count vector."""
    net, best = mech.net, 0
    for data, recs in _datasets(net):
        base = net.flat_counts(data)
        for i in range(net.rows):
            if unit == "record":
                changes = [{c: r[c] for c in net.containers} for r in recs]
            else:
                changes = [{c: r[c]} for r in recs for c in net.containers]
            for ch in changes:
                other = {c: v.copy() for c, v in data.items()}
                for c, v in ch.items():
                    other[c][i] = v
                best = max(best, int(np.abs(net.flat_counts(other) - base).sum()))
    return best


@pytest.mark.parametrize(
    "build, kw, expected",
    [(coin, {"n": 3}, 2), (chain_net, {"n": 3}, 6), (naive_bayes, {"n": 3, "m": 2}, 6)],
)
def test_record_sensitivity_is_exact_by_enumeration(build, kw, expected):
    model, domains = build(**kw)
    mech = pymc_dp.laplace_updates(model, epsilon=1.0, data=domains, ledger=None)
    assert mech.sensitivity == expected  # 2|I|
    assert _brute_force_l1(mech) == mech.sensitivity  # tight, and never exceeded


def test_attribute_sensitivity_chain_is_exact():
    model, domains = chain_net(n=3)
    mech = pymc_dp.laplace_updates(model, epsilon=1.0, data=domains, unit="attribute", ledger=None)
    assert mech.sensitivity == 4  # A is read by a (observed) and b (parent)
    assert _brute_force_l1(mech, unit="attribute") == 4


def test_users_multiply_the_sensitivity():
    model, domains = chain_net(n=6)
    mech = pymc_dp.laplace_updates(model, epsilon=2.0, data=domains, unit=pymc_dp.Users(max_rows=3), ledger=None)
    assert mech.sensitivity == 18 and mech.noise_scale == 9.0


@pytest.mark.parametrize("build", [naive_bayes, chain_net, dirichlet_categorical])
def test_counts_are_the_conjugate_updates(build):
    model, domains = build(**({"n": 25, "m": 3} if build is naive_bayes else {}))
    net = pymc_dp.laplace_updates(model, epsilon=1.0, data=domains, ledger=None).net
    data = {v.name: np.asarray(v.get_value()) for v in model.data_vars}
    post = conjugate_plan(model, (), domains).posteriors()
    counts = net.counts(data)
    for name, p in net.params.items():
        if p["family"] == "Beta":
            want = np.stack([post[name]["alpha"], post[name]["beta"]], axis=1) - p["prior"]
        else:
            want = post[name]["alpha"].reshape(p["cells"], p["K"]) - p["prior"]
        np.testing.assert_array_equal(counts[name], want)


def test_noise_scale_and_distribution():
    model, domains = naive_bayes(n=10, m=2)
    mech = pymc_dp.laplace_updates(model, epsilon=0.5, data=domains, ledger=None)
    assert mech.noise_scale == 6 / 0.5
    data = {v.name: np.asarray(v.get_value()) for v in model.data_vars}
    z = mech.audit_runs(data, 20_000, None) - mech.net.flat_counts(data)
    b = mech.noise_scale
    # discrete Laplace: P(k) ∝ exp(-|k|/b), variance 2 e^{-1/b} / (1 - e^{-1/b})^2
    q = np.exp(-1 / b)
    var = 2 * q / (1 - q) ** 2
    assert abs(z.mean()) < 4 * np.sqrt(var / z.size)
    assert abs(z.var() / var - 1) < 0.03
    assert np.issubdtype(z.dtype, np.integer)


def test_opendp_privacy_map_refuses_too_little_noise():
    model, domains = coin(n=5)
    mech = pymc_dp.laplace_updates(model, epsilon=1.0, data=domains, ledger=None)
    mech.noise_scale /= 2
    with pytest.raises(pymc_dp.PrivacyError, match="privacy map"):
        mech.sample(random_seed=0)


def test_release_shape_truncation_and_attrs():
    model, domains = naive_bayes(n=30, m=3)
    mech = pymc_dp.laplace_updates(model, epsilon=0.2, data=domains, draws=60, ledger=None)
    idata = mech.sample(random_seed=3)
    assert list(idata.groups()) == ["posterior"]
    assert idata.posterior.sizes["chain"] * idata.posterior.sizes["draw"] == 60
    assert idata.posterior["theta"].shape[2:] == (2, 3)
    meta = json.loads(idata.attrs["pymc_dp"])
    assert meta["mechanism"] == "laplace_updates" and meta["epsilon"] == 0.2 and meta["delta"] == 0.0
    assert meta["sensitivity"]["l1"] == 8 and meta["noise"]["scale"] == 40
    assert "OpenDP" in meta["noise"]["sampler"] and "opendp" in meta["versions"]
    for p in meta["released"]["posterior_parameters"].values():
        for key in ("alpha", "beta"):
            z = np.asarray(p[key]) - 1.0  # prior Beta(1, 1)
            assert np.all(z >= 0) and np.all(z <= 30)  # clipped to [0, n]
            assert np.all(z == np.round(z))


def test_release_holds_no_raw_counts(monkeypatch):
    model, domains = naive_bayes(n=30, m=3)
    mech = pymc_dp.laplace_updates(model, epsilon=1.0, data=domains, draws=8, ledger=None)
    data = {v.name: np.asarray(v.get_value()) for v in model.data_vars}
    raw = mech.net.flat_counts(data)
    # a known, non-zero "noise" that keeps every count inside [0, n] where it can
    monkeypatch.setattr(type(mech), "_noisy", lambda self, c, runs=None: np.where(c >= 15, c - 7, c + 7))
    idata = mech.sample(random_seed=0)
    text = idata.attrs["pymc_dp"]
    meta = json.loads(text)
    released = np.concatenate(
        [np.stack([np.asarray(p["alpha"]), np.asarray(p["beta"])], axis=1).reshape(-1) - 1
         for p in meta["released"]["posterior_parameters"].values()]
    )
    assert not np.any(released == raw)
    keys = set()

    def walk(obj):
        if isinstance(obj, dict):
            keys.update(obj)
            for v in obj.values():
                walk(v)
        elif isinstance(obj, list):
            for v in obj:
                walk(v)

    walk(meta)
    assert not keys & {"count", "counts", "n", "rows", "n_rows", "observed", "data", "raw"}
    # every number in the attrs is public: structure, budget, versions, or a noisy parameter
    assert str(int(raw.sum())) not in text.replace(" ", "").split(",")  # the total count is not spelled out
    assert set(idata.groups()) == {"posterior"}
    assert set(idata.posterior.data_vars) == {"pi", "theta"}


def test_ledger_charged_once_before_reading_and_refuses_when_exhausted(tmp_path, monkeypatch):
    model, domains = coin(n=20)
    ledger = pymc_dp.Ledger(tmp_path / "ledger.sqlite", epsilon=1.5)
    mech = pymc_dp.laplace_updates(model, epsilon=1.0, data=domains, draws=10, ledger=ledger)
    seen = []
    original = type(mech)._data

    def spy(self):
        seen.append(self.ledger.spent(self.dataset_id))
        return original(self)

    monkeypatch.setattr(type(mech), "_data", spy)
    first = mech.sample(random_seed=0)
    assert seen[0].pending == 1 and seen[0].epsilon == pytest.approx(1.0)  # charged before the data are read
    assert ledger.spent(mech.dataset_id).epsilon == pytest.approx(1.0)
    assert ledger.spent(mech.dataset_id).releases == 1
    with pytest.raises(pymc_dp.BudgetExceededError):
        mech.sample(random_seed=1)
    assert len(seen) == 1  # the data were not read
    assert mech.last_release is first
    assert ledger.spent(mech.dataset_id).epsilon == pytest.approx(1.0)


def test_seed_makes_the_post_processing_deterministic_not_the_noise():
    model, domains = naive_bayes(n=30, m=3)
    mech = pymc_dp.laplace_updates(model, epsilon=1.0, data=domains, draws=50, ledger=None)
    params = {name: p["prior"] + 3.0 for name, p in mech.net.params.items()}
    a = draw_posterior(mech.net, params, 50, np.random.default_rng(7))
    b = draw_posterior(mech.net, params, 50, np.random.default_rng(7))
    c = draw_posterior(mech.net, params, 50, np.random.default_rng(8))
    for k in a:
        np.testing.assert_array_equal(a[k], b[k])
        assert not np.array_equal(a[k], c[k])
    r1 = json.loads(mech.sample(random_seed=1).attrs["pymc_dp"])["released"]
    r2 = json.loads(mech.sample(random_seed=1).attrs["pymc_dp"])["released"]
    assert r1 != r2  # OpenDP noise is not seedable (equal with probability ~ 1e-8 at this scale)


def test_builder_callable_and_dirichlet():
    mech = pymc_dp.laplace_updates(lambda: dirichlet_categorical(n=40)[0], epsilon=1.0,
                                   data={"x": pymc_dp.Integers(0, 2)}, draws=20, ledger=None)
    assert mech.sensitivity == 2
    idata = mech.sample(random_seed=0)
    p = idata.posterior["p"].values
    np.testing.assert_allclose(p.sum(axis=-1), 1.0)


def test_refusals():
    m, d = poisson_bernoulli()
    with pytest.raises(pymc_dp.UnsupportedFactorError, match="count.*Poisson"):
        pymc_dp.laplace_updates(m, epsilon=1.0, data=d, ledger=None)
    m, d = normal_location_scale()
    with pytest.raises(pymc_dp.UnsupportedFactorError):
        pymc_dp.laplace_updates(m, epsilon=1.0, data=d, ledger=None)
    m, _ = coin()
    with pytest.raises(pymc_dp.DomainError, match="'x'.*no domain"):
        pymc_dp.laplace_updates(m, epsilon=1.0, data={}, ledger=None)
    with pytest.raises(pymc_dp.DomainError, match="finite domains"):
        pymc_dp.laplace_updates(m, epsilon=1.0, data={"x": pymc_dp.Interval(0, 1)}, ledger=None)
    with pytest.raises(pymc_dp.BudgetExceededError):
        pymc_dp.laplace_updates(m, epsilon=0.0, data={"x": pymc_dp.Binary()}, ledger=None)
    with pytest.raises(pymc_dp.PrivacyError, match="draws"):
        pymc_dp.laplace_updates(m, epsilon=1.0, draws=0, data={"x": pymc_dp.Binary()}, ledger=None)
    with pytest.raises(pymc_dp.PrivacyError, match="unit"):
        pymc_dp.laplace_updates(m, epsilon=1.0, unit="row", data={"x": pymc_dp.Binary()}, ledger=None)
    with pytest.raises(pymc_dp.PrivacyError, match="ledger"):
        pymc_dp.laplace_updates(m, epsilon=1.0, data={"x": pymc_dp.Binary()}, ledger="mine")


@pytest.mark.parametrize("kind", ["laplace", "fourier"])
def test_report_renders_a_mechanism_release(kind, tmp_path):
    import arviz as az

    model, domains = naive_bayes(n=20, m=2)
    build = pymc_dp.laplace_updates if kind == "laplace" else pymc_dp.fourier_updates
    ledger = pymc_dp.Ledger(tmp_path / "l.sqlite", epsilon=5.0)
    mech = build(model, epsilon=0.7, data=domains, draws=200, ledger=ledger)
    with pytest.raises(ValueError, match="sample"):
        mech.report()  # nothing released yet
    idata = mech.sample(random_seed=0)
    rep = pymc_dp.report(idata)
    assert mech.report() == rep
    text = str(rep)
    assert f"{kind}_updates" in text and "0.7" in text and "domain of X   {0, 1}" in text
    assert "L1 sensitivity" in text and "noise scale" in text and "ess_bulk" in text.lower() and "opendp" in text
    assert ("Non-negativity" in text) == (kind == "fourier")
    assert "Distinguishability" not in text and "prior mass" not in text  # core-only sections are omitted
    assert rep["budget"]["epsilon"] == 0.7 and rep["ledger"]["spent_epsilon"] == pytest.approx(0.7)
    assert rep.to_markdown() and rep.to_html()
    # a release saved and read back gives the same report
    path = tmp_path / "r.nc"
    idata.to_netcdf(path)
    assert pymc_dp.report(az.from_netcdf(path)) == rep


def test_noise_never_comes_from_numpy(monkeypatch):
    """The release's noise is OpenDP's: numpy's Laplace sampler is never called."""

    def forbidden(*a, **k):
        raise AssertionError("numpy Laplace sampler used")

    import inspect
    import re

    import pymc_dp.mechanisms.noise as noise_mod
    import pymc_dp.mechanisms.updates as updates_mod

    for mod in (noise_mod, updates_mod):  # no Generator.laplace / np.random.laplace call anywhere
        assert not re.search(r"\.laplace\(", inspect.getsource(mod))
    monkeypatch.setattr(np.random, "laplace", forbidden)
    model, domains = chain_net(n=10)
    pymc_dp.laplace_updates(model, epsilon=1.0, data=domains, draws=4, ledger=None).sample(random_seed=0)
    pymc_dp.fourier_updates(model, epsilon=1.0, data=domains, draws=4, ledger=None).sample(random_seed=0)
