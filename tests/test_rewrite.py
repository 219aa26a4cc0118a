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
