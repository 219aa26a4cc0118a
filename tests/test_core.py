"""PrivateModel.sample: the sampling method, the budget ledger, and what a release holds."""

from __future__ import annotations

import json
import sqlite3

import numpy as np
import pymc as pm
import pytest

import pymc_dp
from pymc_dp import BudgetExceededError, Ledger, NotConjugateError, PrivacyError

FAST = dict(tune=100, chains=2, cores=1, progressbar=False)


def coin(n=30, seed=0, deterministic=False):
    rng = np.random.default_rng(seed)
    with pm.Model() as model:
        xd = pm.Data("x", rng.integers(0, 2, n))
        p = pm.Beta("p", 2, 2)
        if deterministic:
            pm.Deterministic("odds", p / (1 - p))
        pm.Bernoulli("obs", p=p, observed=xd)
    return model


def logistic(n=40, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 2))
    X /= np.maximum(1.0, np.linalg.norm(X, axis=1, keepdims=True))
    y = rng.integers(0, 2, n)
    with pm.Model() as model:
        Xd, yd = pm.Data("X", X), pm.Data("y", y)
        w = pm.Normal("w", 0, 1, shape=2)
        pm.Bernoulli("obs", logit_p=Xd @ w, observed=yd)
    return model


BINARY = {"x": pymc_dp.Binary()}
LOGISTIC = {"X": pymc_dp.Ball(1.0), "y": pymc_dp.Binary()}


def _rows(path):
    with sqlite3.connect(path) as conn:
        return conn.execute("SELECT epsilon, delta, status FROM releases ORDER BY id").fetchall()


# --------------------------------------------------------------------------- ledger
def test_ledger_charges_each_release_and_refuses_overspending(tmp_path, monkeypatch):
    ledger = Ledger(tmp_path / "l.sqlite", epsilon=2.5)
    pmod = pymc_dp.make_private(coin(), epsilon=1.0, draws=4, data=BINARY, ledger=ledger)
    first = pmod.sample(random_seed=1)
    pmod.sample(random_seed=2)
    assert pmod.spent().epsilon == pytest.approx(2.0)
    assert pmod.remaining()[0] == pytest.approx(0.5)
    assert json.loads(first.attrs["pymc_dp"])["release"]["ledger"] == {
        "spent_epsilon": pytest.approx(1.0),
        "spent_delta": 0.0,
        "releases": 1,
        "total_epsilon": 2.5,
        "total_delta": 0.0,
    }
    before = _rows(ledger.path)

    def boom(*args, **kwargs):  # pragma: no cover - reached only on a bug
        raise AssertionError("sampled although the budget is exhausted")

    monkeypatch.setattr(type(pmod.conjugate_plan), "sample", boom)
    monkeypatch.setattr(pm, "sample", boom)
    with pytest.raises(BudgetExceededError) as info:
        pmod.sample(random_seed=3)
    message = str(info.value)
    assert "1" in message and "2" in message and "0.5" in message  # requested, spent, remaining
    assert _rows(ledger.path) == before


def test_a_release_that_fails_stays_charged(tmp_path, monkeypatch):
    ledger = Ledger(tmp_path / "l.sqlite")
    pmod = pymc_dp.make_private(logistic(), epsilon=20.0, draws=2, data=LOGISTIC, ledger=ledger)

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(pm, "sample", interrupted)
    with pytest.raises(KeyboardInterrupt):
        pmod.sample(**FAST)
    assert _rows(ledger.path) == [(20.0, 0.0, "failed")]
    assert pmod.spent().epsilon == pytest.approx(20.0)


def test_default_ledger_accumulates_across_private_models():
    # the default ledger lives at PYMC_DP_LEDGER (a temporary file for the test session)
    data = coin(seed=11)
    a = pymc_dp.make_private(data, epsilon=1.0, draws=2, data=BINARY)
    b = pymc_dp.make_private(coin(seed=11), epsilon=0.5, draws=2, data=BINARY)  # same data: same dataset
    other = pymc_dp.make_private(coin(seed=12), epsilon=0.5, draws=2, data=BINARY)
    assert a.dataset_id == b.dataset_id != other.dataset_id
    assert a.ledger.path == pymc_dp.default_ledger_path()
    start = a.spent().epsilon
    a.sample(random_seed=1)
    second = b.sample(random_seed=1)
    assert json.loads(second.attrs["pymc_dp"])["release"]["ledger"]["spent_epsilon"] == pytest.approx(start + 1.5)
    assert other.spent().epsilon == 0.0


def test_no_ledger():
    pmod = pymc_dp.make_private(coin(), epsilon=1.0, draws=2, data=BINARY, ledger=None)
    idata = pmod.sample(random_seed=1)
    assert pmod.ledger is None and pmod.spent() is None
    assert json.loads(idata.attrs["pymc_dp"])["release"]["ledger"] is None


def test_bad_ledger_argument():
    with pytest.raises(PrivacyError, match="ledger"):
        pymc_dp.make_private(coin(), epsilon=1.0, draws=2, data=BINARY, ledger="/tmp/some.sqlite")


def test_release_holds_no_fingerprint_and_no_seed(tmp_path):
    pmod = pymc_dp.make_private(coin(), epsilon=1.0, draws=4, data=BINARY, ledger=Ledger(tmp_path / "l.sqlite"))
    seed = 918273645
    idata = pmod.sample(random_seed=seed)
    path = tmp_path / "release.nc"
    idata.to_netcdf(path)
    blob = path.read_bytes() + idata.attrs["pymc_dp"].encode()
    assert pmod.dataset_id[:8].encode() not in blob
    assert str(seed).encode() not in blob
    assert pmod.dataset_id not in repr(pmod)


# --------------------------------------------------------------------------- methods
def test_auto_picks_exact_for_conjugate_models_and_mcmc_otherwise():
    conj = pymc_dp.make_private(coin(), epsilon=2.0, draws=4, data=BINARY, ledger=None)
    assert conj.conjugate_plan is not None and conj.exact_unavailable is None
    assert json.loads(conj.sample(random_seed=1).attrs["pymc_dp"])["release"]["method"] == "exact"
    assert json.loads(conj.sample(method="mcmc", random_seed=1, **FAST).attrs["pymc_dp"])["release"]["method"] == "mcmc"

    lr = pymc_dp.make_private(logistic(), epsilon=20.0, draws=2, data=LOGISTIC, ledger=None)
    assert lr.conjugate_plan is None and "w" in lr.exact_unavailable
    release = json.loads(lr.sample(random_seed=1, **FAST).attrs["pymc_dp"])["release"]
    assert release["method"] == "mcmc" and release["tune"] == 100 and "approximate" in release["caveat"]


def test_exact_on_a_model_without_exact_sampler_is_refused_before_charging(tmp_path):
    ledger = Ledger(tmp_path / "l.sqlite")
    lr = pymc_dp.make_private(logistic(), epsilon=20.0, draws=2, data=LOGISTIC, ledger=ledger)
    with pytest.raises(NotConjugateError, match="w"):
        lr.sample(method="exact")
    assert _rows(ledger.path) == []
    with pytest.raises(ValueError, match="method"):
        lr.sample(method="nuts")


def test_auto_warns_that_mcmc_arguments_are_ignored():
    pmod = pymc_dp.make_private(coin(), epsilon=2.0, draws=4, data=BINARY, ledger=None)
    with pytest.warns(UserWarning, match="target_accept"):
        pmod.sample(target_accept=0.95, random_seed=1)


def test_exact_and_mcmc_releases_have_the_same_layout():
    pmod = pymc_dp.make_private(coin(deterministic=True), epsilon=3.0, draws=6, data=BINARY, ledger=None)
    exact = pmod.sample(method="exact", random_seed=1)
    mcmc = pmod.sample(method="mcmc", random_seed=1, **FAST)
    assert exact.groups() == mcmc.groups() == ["posterior"]
    for var in ("p", "odds"):
        assert exact.posterior[var].dims == mcmc.posterior[var].dims
        assert exact.posterior[var].shape == mcmc.posterior[var].shape == (2, 3)
    assert set(exact.attrs) == set(mcmc.attrs) == {"pymc_dp"}
    # the Deterministic of the exact path is the function of the released draws
    p = exact.posterior["p"].values
    np.testing.assert_allclose(exact.posterior["odds"].values, p / (1 - p), rtol=1e-12)
    # truncation respected by both
    (c,) = pmod.certificate.factors[0].constraints
    for idata in (exact, mcmc):
        assert np.all((idata.posterior["p"].values >= c["lower"]) & (idata.posterior["p"].values <= c["upper"]))


def test_exact_release_is_reproducible_and_chains_follow_the_argument():
    pmod = pymc_dp.make_private(coin(), epsilon=2.0, draws=6, data=BINARY, ledger=None)
    a, b = pmod.sample(random_seed=5), pmod.sample(random_seed=5)
    np.testing.assert_array_equal(a.posterior["p"].values, b.posterior["p"].values)
    assert not np.array_equal(a.posterior["p"].values, pmod.sample(random_seed=6).posterior["p"].values)
    assert pmod.sample(chains=3, random_seed=5).posterior["p"].shape == (3, 2)
    with pytest.raises(ValueError, match="divide"):
        pmod.sample(chains=4)


# --------------------------------------------------------------------------- split
def test_split_option():
    equal = pymc_dp.make_private(coin(), epsilon=2.0, draws=1, data=BINARY, split="equal", ledger=None)
    assert equal.certificate.split == "equal"
    with pytest.raises(PrivacyError, match="split"):
        pymc_dp.make_private(coin(), epsilon=2.0, draws=1, data=BINARY, split="best")


def test_exact_release_keeps_pymc_dims_and_coords():
    rng = np.random.default_rng(0)
    y = rng.integers(0, 2, 40)
    X = rng.integers(0, 2, (40, 3))
    with pm.Model(coords={"cls": ["no", "yes"], "feature": ["a", "b", "c"]}) as model:
        Xd, yd = pm.Data("X", X), pm.Data("y", y)
        pi = pm.Beta("pi", 1, 1)
        pm.Bernoulli("c", p=pi, observed=yd)
        theta = pm.Beta("theta", 1, 1, dims=("cls", "feature"))
        eta = pm.Beta("eta", 1, 1, shape=(2, 3))  # unnamed dims, read by no factor
        pm.Bernoulli("f", p=theta[yd], observed=Xd)
        pm.Deterministic("gap", theta[1] - theta[0] + 0 * eta[0], dims="feature")
    pmod = pymc_dp.make_private(model, epsilon=40.0, draws=4, data={"X": pymc_dp.Binary(), "y": pymc_dp.Binary()}, ledger=None)
    exact = pmod.sample(method="exact", random_seed=1)
    mcmc = pmod.sample(method="mcmc", random_seed=1, **FAST)
    for var in ("pi", "theta", "eta", "gap"):
        assert exact.posterior[var].dims == mcmc.posterior[var].dims, var
        assert exact.posterior[var].shape == mcmc.posterior[var].shape, var
    assert list(exact.posterior["theta"].coords["feature"].values) == ["a", "b", "c"]
    assert exact.posterior["eta"].dims == ("chain", "draw", "eta_dim_0", "eta_dim_1")
    th = exact.posterior["theta"].values
    np.testing.assert_allclose(exact.posterior["gap"].values, th[..., 1, :] - th[..., 0, :], atol=1e-12)


def test_certificate_says_which_sampler_auto_uses():
    conj = pymc_dp.make_private(coin(), epsilon=2.0, draws=2, data=BINARY, ledger=None).certificate
    assert conj.sampler == "exact" and conj.exact_unavailable is None
    assert not any("MCMC" in c for c in conj.caveats)
    lr = pymc_dp.make_private(logistic(), epsilon=20.0, draws=2, data=LOGISTIC, ledger=None).certificate
    assert lr.sampler == "mcmc" and "'w'" in lr.exact_unavailable
    assert any("MCMC draws are approximate" in c for c in lr.caveats)
    assert "sampler: MCMC" in str(lr)


_RELEASE_SCRIPT = """
import sys, numpy as np, pymc as pm, pymc_dp
with pm.Model() as model:
    xd = pm.Data("x", np.arange(40) % 2)
    p = pm.Beta("p", 2, 2)
    pm.Bernoulli("obs", p=p, observed=xd)
pmod = pymc_dp.make_private(model, epsilon=1.0, draws=2, data={"x": pymc_dp.Binary()},
                            ledger=pymc_dp.Ledger(sys.argv[1], epsilon=3.0))
pmod.sample(method="mcmc", tune=10**7, chains=1, cores=1, progressbar=False)  # killed long before the end
"""


def test_sigkill_in_the_middle_of_a_release_leaves_it_pending_and_counted(tmp_path):
    import os
    import signal
    import subprocess
    import sys
    import time
    from pathlib import Path

    path = tmp_path / "l.sqlite"
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[1]))
    proc = subprocess.Popen([sys.executable, "-c", _RELEASE_SCRIPT, str(path)], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and not (path.exists() and _rows(path)):
            assert proc.poll() is None, "the release process ended before it was killed"
            time.sleep(0.2)
        time.sleep(1.0)  # let it get into the sampler
        assert proc.poll() is None
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:  # pragma: no cover
            proc.kill()
    assert _rows(path) == [(1.0, 0.0, "pending")]
    with sqlite3.connect(path) as conn:
        assert conn.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    ledger = Ledger(path, epsilon=3.0)
    spent = ledger.spent(ledger.releases()[0]["dataset"])
    assert (spent.epsilon, spent.pending) == (1.0, 1)
    assert ledger.remaining(ledger.releases()[0]["dataset"])[0] == pytest.approx(2.0)


# --------------------------------------------------------------------------- other data
def test_with_data_runs_the_same_mechanism_on_other_data():
    model = coin(n=30, seed=0)
    pmod = pymc_dp.make_private(model, epsilon=6.0, draws=1000, data=BINARY, ledger=None)
    ones = pmod.with_data({"x": np.ones(30, dtype=int)})
    zeros = pmod.with_data({"x": np.zeros(30, dtype=int)})
    assert ones.certificate is pmod.certificate
    assert len({pmod.dataset_id, ones.dataset_id, zeros.dataset_id}) == 3
    p1 = ones.sample(random_seed=1).posterior["p"].values
    p0 = zeros.sample(random_seed=1).posterior["p"].values
    (c,) = pmod.certificate.factors[0].constraints
    assert p1.mean() > 0.5 > p0.mean()  # the data moved the posterior...
    assert p1.max() <= c["upper"] and p0.min() >= c["lower"]  # ...inside the same truncation
    # neither the original private model nor the user's model changed
    np.testing.assert_array_equal(pmod.model["x"].get_value(), model["x"].get_value())
    again = pmod.sample(random_seed=1).posterior["p"].values
    assert p0.mean() < again.mean() < p1.mean()


def test_with_data_refuses_what_the_certificate_does_not_cover():
    pmod = pymc_dp.make_private(coin(n=10), epsilon=2.0, draws=2, data=BINARY, ledger=None)
    with pytest.raises(pymc_dp.DomainError, match="'x'"):
        pmod.with_data({"x": np.full(10, 2)})  # outside Binary()
    with pytest.raises(pymc_dp.DomainError, match="shape"):
        pmod.with_data({"x": np.zeros(11, dtype=int)})
    with pytest.raises(pymc_dp.DomainError, match="'z'"):
        pmod.with_data({"z": np.zeros(10, dtype=int)})
