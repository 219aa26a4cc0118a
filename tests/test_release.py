"""End to end: certify, truncate, sample, release (small settings; compilation dominates)."""

import json

import arviz as az
import numpy as np
import pymc as pm
import pytest

import pymc_dp
from tests import models

SAMPLE = dict(tune=150, chains=2, cores=1, progressbar=False, random_seed=3)


naive_bayes_model = models.naive_bayes
logistic_model = models.logistic


def linear_model(n=200, d=3, seed=0):
    # w_norm (a function of w) is released; fitted (reads the data) never is
    return models.linear(n=n, d=d, seed=seed, w_norm=True, fitted=True)


CASES = {
    "naive_bayes": (naive_bayes_model, 40.0, 20),
    "linear": (linear_model, 20.0, 10),
    "logistic": (logistic_model, 30.0, 10),
}


def _snapshot(model):
    return (
        [rv.name for rv in model.free_RVs],
        {rv.name: type(t).__name__ for rv, t in model.rvs_to_transforms.items()},
        len(model.potentials),
        {v.name: np.array(v.get_value()) for v in model.data_vars},
        float(model.compile_logp()(model.initial_point())),
    )


@pytest.fixture(scope="module", params=sorted(CASES))
def released(request):
    build, epsilon, draws = CASES[request.param]
    model, data = build()
    before = _snapshot(model)
    pmod = pymc_dp.make_private(model, epsilon=epsilon, draws=draws, data=data)
    idata = pmod.sample(**SAMPLE)
    return model, before, pmod, idata


def _satisfies(constraint, values):
    v = values.reshape(values.shape[0] * values.shape[1], -1)
    if constraint["kind"] == "interval":
        lo = -np.inf if constraint["lower"] is None else constraint["lower"]
        hi = np.inf if constraint["upper"] is None else constraint["upper"]
        return np.all((v >= lo - 1e-12) & (v <= hi + 1e-12))
    assert constraint["kind"] == "norm_ball" and constraint["norm"] == "l2"
    return np.all(np.linalg.norm(v, axis=1) <= constraint["radius"] * (1 + 1e-9))


def test_certificate_lifts_to_the_budget(released):
    _, _, pmod, _ = released
    cert = pmod.certificate
    assert cert.epsilon_per_draw == pytest.approx(cert.epsilon / cert.draws)
    assert 2 * sum(f.lipschitz for f in cert.factors) == pytest.approx(cert.epsilon_per_draw, rel=1e-12)
    assert 0.0 < cert.prior_mass_kept <= 1.0
    assert all(f.truncation for f in cert.factors)


def test_release_holds_only_truncated_posterior_draws(released):
    model, _, pmod, idata = released
    assert idata.groups() == ["posterior"]
    post = idata.posterior
    assert post.sizes["chain"] * post.sizes["draw"] == pmod.certificate.draws
    expected = {rv.name for rv in model.free_RVs} | ({"w_norm"} if "w_norm" in model.named_vars else set())
    assert set(post.data_vars) == expected  # no aux variables, no data-reading Deterministic
    assert set(post.attrs) == {"pymc_dp"}
    payload = json.loads(idata.attrs["pymc_dp"])
    release = payload.pop("release")
    assert payload.pop("schema") == "pymc_dp.release/1"  # the record's schema tag (pymc_dp.record)
    assert payload == pmod.certificate.to_dict()
    assert release["method"] == ("exact" if pmod.conjugate_plan is not None else "mcmc")
    assert release["chains"] * release["draws_per_chain"] == pmod.certificate.draws
    assert ("caveat" in release) == (release["method"] == "mcmc")
    assert post.attrs["pymc_dp"] == idata.attrs["pymc_dp"]
    for f in pmod.certificate.factors:
        for c in f.constraints:
            assert _satisfies(c, post[c["var"]].values), c
    az.summary(idata)


def test_users_model_is_unchanged(released):
    model, before, _, _ = released
    after = _snapshot(model)
    assert after[:3] == before[:3]
    for k in before[3]:
        np.testing.assert_array_equal(after[3][k], before[3][k])
    assert after[4] == before[4]


def test_plot_trace_accepts_release(released):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    az.plot_trace(released[3])
    plt.close("all")


def test_random_seed_reproduces_and_kwargs_pass_through():
    model, data = logistic_model(n=50)
    pmod = pymc_dp.make_private(model, epsilon=30.0, draws=4, data=data)
    a = pmod.sample(target_accept=0.9, **SAMPLE)
    b = pmod.sample(target_accept=0.9, **SAMPLE)
    np.testing.assert_array_equal(a.posterior["w"].values, b.posterior["w"].values)
    with pytest.raises(TypeError, match="draws"):
        pmod.sample(draws=10)
    with pytest.raises(ValueError, match="divide"):
        pmod.sample(chains=3)


def test_decorator_matches_make_private():
    deco = pymc_dp.private(epsilon=2.0, draws=2, data={"x": pymc_dp.Binary()})

    @deco
    def coin(x):
        with pm.Model() as m:
            xd = pm.Data("x", x)
            p = pm.Beta("p", 1, 1)
            pm.Bernoulli("obs", p=p, observed=xd)
        return m

    pmod = coin(np.array([0, 1, 1, 0]))
    (factor,) = pmod.certificate.factors
    assert factor.family == "Bernoulli" and factor.reads == ("x",)
    assert factor.lipschitz == pytest.approx(0.5)
    # certified by the oscillation: logit p spans at most 2 Delta = 1, centred where the uniform
    # prior's mass is (symmetric: about [expit(-0.5), expit(0.5)])
    from scipy.special import expit, logit

    (c,) = factor.constraints
    assert logit(c["upper"]) - logit(c["lower"]) <= 1.0 * (1 + 1e-12)
    assert logit(c["upper"]) - logit(c["lower"]) == pytest.approx(1.0, rel=1e-6)
    assert c["lower"] == pytest.approx(expit(-0.5), abs=1e-3)
    assert c["upper"] == pytest.approx(expit(0.5), abs=1e-3)
    assert pmod.certificate.prior_mass_method == "exact"
    assert pmod.certificate.prior_mass_kept == pytest.approx(c["upper"] - c["lower"], rel=1e-9)
