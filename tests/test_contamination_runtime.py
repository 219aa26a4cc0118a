"""Run-time contamination (``contaminate(..., at_run_time=True)``): the amplification lemma checked
exactly by enumeration, and the release that contaminates its data and charges the amplified loss."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pymc as pm
import pytest
from scipy import special as sc

import pymc_dp as pdp
from pymc_dp import core
from pymc_dp.contamination import amplified_epsilon, contaminate, inner_epsilon
from pymc_dp.exceptions import UnsupportedFactorError

UNBOUNDED = {"y": pdp.Interval(-np.inf, np.inf)}


# --------------------------------------------------------------------------- the lemma, exactly


def _posterior(log_prior, log_lik, counts):
    """Exact posterior over a finite parameter set given value counts (one row per dataset)."""
    post = log_prior[None, :] + counts @ log_lik.T
    return np.exp(post - sc.logsumexp(post, axis=1, keepdims=True))


def _exact_epsilon(n, V, out_of):
    """The largest |log ratio| of the output laws over every pair of datasets in V^n that differ in one record."""
    worst = 0.0
    data = list(itertools.product(range(V), repeat=n))
    laws = {x: out_of(x) for x in data}
    for x in data:
        for i in range(n):
            for v in range(V):
                if v != x[i]:
                    y = x[:i] + (v,) + x[i + 1:]
                    worst = max(worst, float(np.max(np.abs(np.log(laws[x]) - np.log(laws[y])))))
    return worst


def _mechanisms(log_prior, log_lik, g, p, n):
    """``M``: the exact posterior of a dataset; ``M o C``: of its contamination (each record, with
    probability p, replaced by a draw of the pmf g), by enumerating every pattern and draw."""
    V = log_lik.shape[1]

    def M(x):
        return _posterior(log_prior, log_lik, np.bincount(x, minlength=V)[None, :].astype(float))[0]

    def MC(x):
        law = 0.0
        for pattern in itertools.product((0, 1), repeat=n):
            prob = math.prod(p if r else 1 - p for r in pattern)
            idx = [i for i, r in enumerate(pattern) if r]
            for draw in itertools.product(range(V), repeat=len(idx)):
                z = list(x)
                for i, v in zip(idx, draw):
                    z[i] = v
                law = law + prob * math.prod(g[v] for v in draw) * M(tuple(z))
        return law

    return M, MC


def test_amplification_is_never_exceeded_on_random_finite_families():
    rng = np.random.default_rng(0)
    for _ in range(60):
        J, V, n = int(rng.integers(2, 5)), int(rng.integers(2, 4)), int(rng.integers(1, 4))
        log_lik = np.log(rng.dirichlet(np.ones(V), size=J))
        log_prior = rng.normal(size=J)
        g = rng.dirichlet(np.ones(V))
        p = float(rng.uniform(0.02, 0.9))
        M, MC = _mechanisms(log_prior, log_lik, g, p, n)
        eps = _exact_epsilon(n, V, M)
        assert _exact_epsilon(n, V, MC) <= amplified_epsilon(eps, p) + 1e-9


@pytest.mark.parametrize("eps,p", [(0.5, 0.1), (2.0, 0.1), (3.0, 0.5)])
def test_amplification_is_attained_by_randomized_response(eps, p):
    # one record in {0, 1}; the posterior is randomized response (uniform prior, log-lik eps [theta == x]);
    # g a point mass on 1: the bound is attained
    log_lik = np.array([[eps, 0.0], [0.0, eps]])
    M, MC = _mechanisms(np.zeros(2), log_lik, np.array([0.0, 1.0]), p, 1)
    assert _exact_epsilon(1, 2, M) == pytest.approx(eps)
    assert _exact_epsilon(1, 2, MC) == pytest.approx(amplified_epsilon(eps, p), rel=1e-12)


def test_inner_epsilon_inverts_the_amplification_from_below():
    for eps in (0.1, 1.0, 4.0, 20.0):
        for p in (0.01, 0.1, 0.5):
            inner = inner_epsilon(eps, p)
            assert inner > eps and amplified_epsilon(inner, p) <= eps
            assert amplified_epsilon(inner, p) == pytest.approx(eps, rel=1e-9)


# --------------------------------------------------------------------------- the release


def _model(n=30, containers=1):
    y = np.random.default_rng(0).normal(0.0, 1.0, n)
    with pm.Model() as model:
        data = pm.Data("y", y)
        mu = pm.Uniform("mu", -0.25, 0.25)
        pm.Normal("obs", mu, 1.0, observed=data)
        if containers == 2:
            z = pm.Data("z", y.copy())
            pm.Normal("obs_z", mu, 1.0, observed=z)
    return model


def _run_time(model, **kw):
    g = pm.StudentT.dist(nu=3, mu=0, sigma=1)
    return contaminate(model, p=0.1, g={name: g for name in kw.pop("factors", ["obs"])}, at_run_time=True, **kw)


def test_release_contaminates_its_data_and_charges_the_amplified_epsilon(tmp_path, monkeypatch):
    model = _model()
    original = model["y"].get_value().copy()
    cm = _run_time(model)
    ledger = pdp.Ledger(tmp_path / "ledger.sqlite", epsilon=10.0)
    pmod = pdp.make_private(cm, epsilon=3.0, draws=2, data=UNBOUNDED, ledger=ledger)
    c = pmod.certificate
    assert c.epsilon == pytest.approx(3.0) and c.epsilon <= 3.0
    assert c.amplification["epsilon_contaminated"] == pytest.approx(inner_epsilon(3.0, 0.1))
    assert amplified_epsilon(c.draws * c.epsilon_per_draw, 0.1) <= 3.0 + 1e-12
    seen = []
    real = core.run_mcmc

    def spy(model_, **kwargs):
        seen.append(np.array(model_["y"].get_value()))
        return real(model_, **kwargs)

    monkeypatch.setattr(core, "run_mcmc", spy)
    idata = pmod.sample(tune=100, chains=1, random_seed=1)
    assert len(seen) == 1 and not np.array_equal(seen[0], original)  # sampled on contaminated data
    assert 0 < np.mean(seen[0] != original) < 0.35
    assert np.array_equal(pmod.model["y"].get_value(), original)  # and not kept afterwards
    assert np.array_equal(model["y"].get_value(), original)  # the user's model is unchanged
    assert list(idata.posterior.data_vars) == ["mu"] and idata.posterior["mu"].size == 2
    assert pmod.spent().epsilon == pytest.approx(3.0)
    text = pdp.report(idata).to_text()
    assert "Run-time contamination" in text and "log(1 + (1 - p)(e^eps - 1))" in text
    assert "contaminated at run time" in pdp.contamination.contamination_of(cm).describe()


@pytest.mark.parametrize("kwargs,match", [
    ({"data": {"y": pdp.Interval(-5, 5)}}, "Interval\\(-np.inf, np.inf\\)"),
    ({"delta": 1e-6}, "delta > 0"),
    ({"unit": pdp.Users(max_rows=2)}, "unit="),
])
def test_run_time_contamination_refuses_what_the_proof_does_not_cover(kwargs, match):
    kw = {"epsilon": 3.0, "draws": 1, "data": UNBOUNDED, "ledger": None, **kwargs}
    with pytest.raises(UnsupportedFactorError, match=match):
        pdp.make_private(_run_time(_model()), **kw)


def test_run_time_contamination_refuses_two_private_containers():
    cm = _run_time(_model(containers=2), factors=["obs", "obs_z"])
    with pytest.raises(UnsupportedFactorError, match="one container"):
        pdp.make_private(cm, epsilon=3.0, draws=1, data={**UNBOUNDED, "z": pdp.Interval(-np.inf, np.inf)}, ledger=None)
