"""The model rewrite: a new model with the prior restricted to Theta_L; the user's model untouched."""

import numpy as np
import pymc as pm

import pymc_dp


def dirichlet_categorical(n=40, seed=0):
    rng = np.random.default_rng(seed)
    with pm.Model() as model:
        xd = pm.Data("x", rng.integers(0, 3, n))
        p = pm.Dirichlet("p", a=np.ones(3))
        pm.Categorical("obs", p=p, observed=xd)
    return model


def test_potential_fallback_builds_a_model_with_the_indicator():
    # regression: the Theta_L potential once re-registered the names of the data and the RV
    model = dirichlet_categorical()
    pmod = pymc_dp.make_private(model, epsilon=40.0, draws=4, data={"x": pymc_dp.Integers(0, 2)})
    (factor,) = pmod.certificate.factors
    assert factor.solver == "potential"
    assert [p.name for p in pmod.model.potentials] == ["obs__dp_theta_L"]
    assert [p.name for p in model.potentials] == []
    # inside Theta_L the indicator is 0, outside it is -inf
    logp = pmod.model.compile_logp()
    point = pmod.model.initial_point()
    inside = dict(point, p_simplex__=np.zeros(2))  # p = (1/3, 1/3, 1/3): L = 0
    outside = dict(point, p_simplex__=np.array([8.0, -8.0]))  # max/min far above e^5
    assert np.isfinite(logp(inside))
    assert logp(outside) == -np.inf


def _hierarchical_beta(n=30):
    rng = np.random.default_rng(0)
    with pm.Model() as model:
        xd = pm.Data("x", rng.integers(0, 2, n))
        a = pm.Gamma("a", 2, 1)
        p = pm.Beta("p", a, 1)
        pm.Bernoulli("obs", p=p, observed=xd)
    return model, {"x": pymc_dp.Binary()}


def _hierarchical_dirichlet(n=30):
    rng = np.random.default_rng(0)
    with pm.Model() as model:
        xd = pm.Data("x", rng.integers(0, 3, n))
        c = pm.Gamma("c", 2, 1)
        p = pm.Dirichlet("p", a=c * np.ones(3))
        pm.Categorical("obs", p=p, observed=xd)
    return model, {"x": pymc_dp.Integers(0, 2)}


def test_hierarchical_prior_truncates_the_parameter_the_factor_reads():
    # regression: the hyperparameter was counted as read by the factor, and the rewrite crashed
    model, data = _hierarchical_beta()
    pmod = pymc_dp.make_private(model, epsilon=20.0, draws=4, data=data, ledger=None)
    (factor,) = pmod.certificate.factors
    assert factor.solver == "interval"
    assert [c["var"] for c in factor.constraints] == ["p"]
    idata = pmod.sample(tune=100, chains=2, cores=1, random_seed=1)
    (c,) = factor.constraints
    p = idata.posterior["p"].values
    assert np.all((p >= c["lower"]) & (p <= c["upper"]))
    assert "hierarchical" in pmod.exact_unavailable


def test_hierarchical_prior_under_the_potential_fallback():
    model, data = _hierarchical_dirichlet()
    pmod = pymc_dp.make_private(model, epsilon=20.0, draws=4, data=data, ledger=None)
    assert [p.name for p in pmod.model.potentials] == ["obs__dp_theta_L"]
    idata = pmod.sample(tune=100, chains=2, cores=1, random_seed=1)
    p = idata.posterior["p"].values.reshape(-1, 3)
    bound = pmod.certificate.factors[0].lipschitz
    assert np.all(np.log(p.max(axis=1) / p.min(axis=1)) <= bound + 1e-9)
