"""PrivateModel.sample(nuts_sampler=...) on every rewrite kind: PyMC's NUTS, numpyro, blackjax, nutpie.

The optional backends skip when their extra is not installed (``pip install "pymc-dp[jax]"`` /
``"pymc-dp[nutpie]"``). Small settings: compilation dominates (nutpie compiles with numba,
numpyro and blackjax re-JIT on every call).
"""

import json
import sys

import numpy as np
import pytest

import pymc_dp
from pymc_dp import sampling
from tests import models

BACKENDS = {
    "pymc": (),
    "numpyro": ("jax", "numpyro"),
    "blackjax": ("jax", "blackjax"),
    "nutpie": ("nutpie",),
}
# method="mcmc": conjugate test models would otherwise take the exact sampler
SAMPLE = dict(method="mcmc", tune=150, chains=2, cores=1, progressbar=False)


def _need(backend):
    for module in BACKENDS[backend]:
        pytest.importorskip(module)
    if backend == "blackjax":
        try:
            sampling.check_backend("blackjax")
        except ImportError as err:  # blackjax >= 1.6 with PyMC's blackjax sampler (pymc#8367)
            pytest.skip(str(err))


# each builder: (model, domains, epsilon, draws)
def beta_bernoulli(seed=0):
    return (*models.coin(n=60, seed=seed), 2.0, 4)


def naive_bayes(seed=0):
    return (*models.naive_bayes(n=100, m=4, seed=seed), 40.0, 4)


def logistic(seed=0):
    return (*models.logistic(n=100, d=3, seed=seed, w_norm=True), 30.0, 4)


def linear(seed=0):
    # "fitted" reads private data: it must never be released
    return (*models.linear(n=100, d=3, seed=seed, fitted=True), 20.0, 4)


def dirichlet_categorical(seed=0):
    return (*models.dirichlet_categorical(n=40, seed=seed), 40.0, 4)


# model -> (builder, the rewrite kinds its truncation must use, public variables released)
MODELS = {
    "beta_bernoulli": (beta_bernoulli, {"interval"}, {"p"}),
    "naive_bayes": (naive_bayes, {"interval"}, {"pi", "theta"}),
    "logistic": (logistic, {"norm_ball", "interval"}, {"w", "b", "w_norm"}),
    "linear": (linear, {"norm_ball", "interval"}, {"w", "b", "sigma"}),
    "dirichlet_categorical": (dirichlet_categorical, {"potential"}, {"p"}),
}
# one model per rewrite kind runs by default; the others are slow
FAST = {"beta_bernoulli", "logistic", "dirichlet_categorical"}

_PMODS = {}


def _pmod(name):
    if name not in _PMODS:
        build, kinds, _ = MODELS[name]
        model, data, epsilon, draws = build()
        pmod = pymc_dp.make_private(model, epsilon=epsilon, draws=draws, data=data)
        assert {c["kind"] for f in pmod.certificate.factors for c in f.constraints} == kinds
        _PMODS[name] = pmod
    return _PMODS[name]


def _cases():
    for backend in BACKENDS:
        for name in MODELS:
            marks = () if name in FAST else (pytest.mark.extended,)
            yield pytest.param(backend, name, id=f"{backend}-{name}", marks=marks)


def _draws(idata, var):
    values = idata.posterior[var].values
    return values.reshape(values.shape[0] * values.shape[1], *values.shape[2:])


def _check_release(pmod, idata, public):
    assert idata.groups() == ["posterior"]
    post = idata.posterior
    assert set(post.data_vars) == public  # no polar auxiliaries, no data-reading Deterministic
    assert set(post.attrs) == {"pymc_dp"} and set(idata.attrs) == {"pymc_dp"}
    payload = json.loads(post.attrs["pymc_dp"])
    release = payload.pop("release")
    assert payload.pop("schema") == "pymc_dp.release/1"  # the record's schema tag (pymc_dp.record)
    assert payload == pmod.certificate.to_dict()
    assert release["method"] == "mcmc" and release["sampler"] in BACKENDS
    for var in post.data_vars:
        assert post[var].attrs == {}
    assert post.sizes["chain"] * post.sizes["draw"] == pmod.certificate.draws
    draws = {v: _draws(idata, v) for v in post.data_vars}
    for c in pmod.certification.constraints:
        assert np.all(c.contains(draws)), c.describe()
    for v in draws.values():
        assert np.all(np.isfinite(v))


@pytest.mark.parametrize("backend,name", list(_cases()))
def test_release_respects_truncation(backend, name):
    _need(backend)
    pmod = _pmod(name)
    idata = pmod.sample(nuts_sampler=backend, random_seed=11, **SAMPLE)
    _check_release(pmod, idata, MODELS[name][2])


@pytest.mark.parametrize("backend", list(BACKENDS))
def test_random_seed_reproduces_per_backend(backend):
    _need(backend)
    pmod = _pmod("logistic")
    a = pmod.sample(nuts_sampler=backend, random_seed=5, **SAMPLE)
    b = pmod.sample(nuts_sampler=backend, random_seed=5, **SAMPLE)
    c = pmod.sample(nuts_sampler=backend, random_seed=6, **SAMPLE)
    for var in ("w", "b"):
        np.testing.assert_array_equal(a.posterior[var].values, b.posterior[var].values)
    assert not np.array_equal(a.posterior["w"].values, c.posterior["w"].values)


@pytest.mark.parametrize("backend", list(BACKENDS))
def test_run_mcmc_returns_only_posterior_draws(backend):
    _need(backend)
    pmod = _pmod("linear")
    post = sampling.run_mcmc(
        pmod.model, draws_per_chain=3, tune=100, chains=2, initvals=pmod.certification.initvals, nuts_sampler=backend,
        random_seed=1, cores=1,
    )
    names = {v.name for v in (*pmod.model.free_RVs, *pmod.model.deterministics)}
    assert set(post.data_vars) == names  # no transformed values, no sampler extras
    assert post.attrs == {} and all(post[v].attrs == {} for v in post.data_vars)
    assert (post.sizes["chain"], post.sizes["draw"]) == (2, 3)
    # the default start of sigma (lower bound 1.6...) lies outside its interval: this run only
    # works because the backend started from the initial values
    sigma = next(c for c in pmod.certification.constraints if getattr(c, "var", None) == "sigma")
    assert sigma.lower > 1.0 and np.all(post["sigma"].values >= sigma.lower)


@pytest.mark.parametrize("backend,extra", [("numpyro", "jax"), ("blackjax", "jax"), ("nutpie", "nutpie")])
def test_missing_backend_says_which_extra_to_install(backend, extra, monkeypatch):
    missing = BACKENDS[backend][-1]
    monkeypatch.setitem(sys.modules, missing, None)  # `import missing` now raises ImportError
    pmod = _pmod("beta_bernoulli")
    with pytest.raises(ImportError, match=rf'pip install "pymc-dp\[{extra}\]"'):
        pmod.sample(nuts_sampler=backend, **SAMPLE)


def test_blackjax_too_new_for_pymc_is_refused(monkeypatch):
    monkeypatch.setattr(sampling, "_import_module", lambda name: None)  # with or without jax
    monkeypatch.setattr(sampling.importlib.metadata, "version", lambda name: "1.7.1")
    with pytest.raises(ImportError, match=r"blackjax>=1.2,<1.6"):
        sampling.check_backend("blackjax")
    monkeypatch.setattr(sampling.importlib.metadata, "version", lambda name: "1.5")
    sampling.check_backend("blackjax")


def test_unknown_backend_is_refused():
    with pytest.raises(ValueError, match="nuts_sampler"):
        _pmod("beta_bernoulli").sample(nuts_sampler="stan", **SAMPLE)


def test_blackjax_chains_run_vectorised_when_jax_has_one_device(monkeypatch):
    jax = pytest.importorskip("jax")
    monkeypatch.setattr(jax, "local_device_count", lambda: 1)
    assert sampling._blackjax_chain_method(None, chains=2) == {"chain_method": "vectorized"}
    assert sampling._blackjax_chain_method({"chain_method": "parallel"}, chains=2) == {"chain_method": "parallel"}
    assert sampling._blackjax_chain_method({}, chains=1) == {}
    monkeypatch.setattr(jax, "local_device_count", lambda: 100)
    assert sampling._blackjax_chain_method({"step_size": 0.1}, chains=4) == {"step_size": 0.1}


@pytest.mark.extended
def test_blackjax_after_jax_started_elsewhere(tmp_path):
    # importing blackjax (or any JAX computation) before PyMC's JAX module leaves one CPU
    # device; PyMC's pmap over two chains then failed with "cannot select an axis to squeeze out"
    _need("blackjax")
    import os
    import subprocess
    import textwrap

    script = tmp_path / "jax_first.py"
    script.write_text(textwrap.dedent(
        """
        import jax.numpy as jnp
        import blackjax  # noqa: F401  (starts JAX's backend with one CPU device)
        jnp.zeros(1).block_until_ready()
        import numpy as np, pymc as pm, pymc_dp
        with pm.Model() as model:
            xd = pm.Data("x", np.array([0, 1, 1, 0, 1]))
            p = pm.Beta("p", 1, 1)
            pm.Bernoulli("obs", p=p, observed=xd)
        pmod = pymc_dp.make_private(model, epsilon=2.0, draws=4, data={"x": pymc_dp.Binary()})
        idata = pmod.sample(method="mcmc", nuts_sampler="blackjax", tune=100, chains=2, random_seed=1, progressbar=False)
        assert idata.posterior["p"].shape == (2, 2)
        print("OK")
        """
    ))
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([root, os.environ.get("PYTHONPATH", "")]))
    env.pop("XLA_FLAGS", None)
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env, timeout=600)
    assert out.returncode == 0 and "OK" in out.stdout, out.stderr[-3000:]
