"""run_mcmc: only posterior draws leave it, and every chain starts inside Theta_L (default NUTS)."""

import warnings

import numpy as np
import pytensor
import pytest
import xarray as xr
from pymc.exceptions import SamplingError
from pymc.initial_point import make_initial_point_fn
from pymc.model.fgraph import fgraph_from_model

import pymc_dp
from pymc_dp.sampling import posterior_only, run_mcmc
from tests import models

RUN = dict(draws_per_chain=4, tune=100, chains=2, cores=1, random_seed=2)


def linear(seed=0):
    """Norm ball on w, intervals on b and on sigma (a lower bound above sigma's default start)."""
    model, data = models.linear(n=80, d=3, seed=seed, w_norm=True)
    return pymc_dp.make_private(model, epsilon=20.0, draws=8, data=data)


def naive_bayes(seed=0):
    model, data = models.naive_bayes(n=60, m=3, seed=seed)
    return pymc_dp.make_private(model, epsilon=40.0, draws=4, data=data)


def dirichlet_categorical(seed=0):
    model, data = models.dirichlet_categorical(n=40, seed=seed)
    return pymc_dp.make_private(model, epsilon=40.0, draws=4, data=data)


BUILDERS = {"linear": linear, "naive_bayes": naive_bayes, "dirichlet_categorical": dirichlet_categorical}


@pytest.fixture(scope="module")
def pmods():
    return {name: build() for name, build in BUILDERS.items()}


def _values_at(model, point):
    """Free RVs and Deterministics of ``model`` at a point of its (transformed) value variables."""
    names = [v.name for v in (*model.free_RVs, *model.deterministics)]
    outs = model.replace_rvs_by_values([model[n] for n in names])
    fn = pytensor.function(model.value_vars, outs, on_unused_input="ignore")
    values = fn(*[point[v.name] for v in model.value_vars])
    return {n: np.asarray(v)[None] for n, v in zip(names, values)}


@pytest.mark.parametrize("name", sorted(BUILDERS))
def test_initial_values_lie_inside_theta_L(pmods, name):
    pmod = pmods[name]
    kinds = {type(c).__name__ for c in pmod.certification.constraints}
    assert kinds, "the model must be truncated"
    point = make_initial_point_fn(model=pmod.model, overrides=pmod.certification.initvals, return_transformed=True)(0)
    assert np.isfinite(pmod.model.compile_logp()(point))
    assert np.all(np.isfinite(np.concatenate([np.ravel(g) for g in pmod.model.compile_dlogp()(point)])))
    values = _values_at(pmod.model, point)
    for c in pmod.certification.constraints:
        assert np.all(c.contains(values)), c.describe()


def test_rewrite_kinds_are_covered(pmods):
    kinds = {type(c).__name__ for p in pmods.values() for c in p.certification.constraints}
    assert kinds == {"IntervalConstraint", "NormBallConstraint", "PotentialConstraint"}


def test_rewritten_model_carries_no_initvals(pmods):
    # PyMC's graph transforms (and nutpie's JAX backend, through freeze_dims_and_data) refuse
    # models with initvals: the starting values travel beside the model, not on it
    for pmod in pmods.values():
        assert all(v is None for v in pmod.model.rvs_to_initial_values.values())
        fgraph_from_model(pmod.model)


def test_default_sampler_starts_from_the_initial_values(pmods):
    pmod = pmods["linear"]
    # PyMC's own start is outside Theta_L (sigma below its lower bound, a zero polar direction)
    assert not np.isfinite(pmod.model.compile_logp()(pmod.model.initial_point()))
    with pytest.raises(SamplingError, match="Initial evaluation"):
        run_mcmc(pmod.model, initvals={}, **RUN)
    post = run_mcmc(pmod.model, initvals=pmod.certification.initvals, **RUN)
    sigma = next(c for c in pmod.certification.constraints if getattr(c, "var", None) == "sigma")
    assert np.all(post["sigma"].values >= sigma.lower)


def test_run_mcmc_returns_only_a_posterior_dataset(pmods):
    pmod = pmods["linear"]
    post = run_mcmc(pmod.model, initvals=pmod.certification.initvals, **RUN)
    assert isinstance(post, xr.Dataset)
    names = {v.name for v in (*pmod.model.free_RVs, *pmod.model.deterministics)}
    assert set(post.data_vars) == names  # no sigma_interval__ / transformed values
    assert post.attrs == {}  # no sampling_time, tuning_steps, library versions, ...
    assert all(post[v].attrs == {} for v in post.data_vars)
    assert set(post.dims) == {"chain", "draw", "w_dim_0", "w__dp_direction_dim_0", "w__dp_radius_dim_0"}
    assert (post.sizes["chain"], post.sizes["draw"]) == (2, 4)
    # the arrays are plain copies, not views into the sampler's trace
    assert all(isinstance(post[v].data, np.ndarray) for v in post.data_vars)


def test_posterior_only_drops_everything_else(pmods):
    pmod = pmods["dirichlet_categorical"]
    raw = xr.Dataset(
        {
            "p": (("chain", "draw", "p_dim_0"), np.full((1, 2, 3), 1 / 3), {"units": "x"}),
            "p_simplex__": (("chain", "draw", "p_simplex___dim_0"), np.zeros((1, 2, 2))),
            "lp": (("chain", "draw"), np.zeros((1, 2))),
        },
        coords={"chain": [0], "draw": [0, 1], "p_dim_0": [0, 1, 2]},
        attrs={"sampling_time": 1.0, "inference_library": "nutpie"},
    )
    post = posterior_only(raw, pmod.model)
    assert set(post.data_vars) == {"p"} and post.attrs == {} and post["p"].attrs == {}
    with pytest.raises(RuntimeError, match="no draws"):
        posterior_only(raw.drop_vars("p"), pmod.model)


def test_var_names_cannot_trim_what_the_release_needs(pmods):
    pmod = pmods["dirichlet_categorical"]
    with pytest.warns(UserWarning, match="var_names is ignored"):
        post = run_mcmc(pmod.model, initvals=pmod.certification.initvals, var_names=[], **RUN)
    assert set(post.data_vars) == {"p"}
    c = pmod.certification.constraints[0]
    assert np.all(c.contains({"p": post["p"].values.reshape(-1, 3)}))


def test_one_draw_per_chain_raises_no_shape_warning(pmods):
    """A release of as many draws as chains (1 per chain) is intended: ArviZ's "More chains
    than draws" shape guess is silenced inside run_mcmc, and the layout is (chain, draw)."""
    pmod = pmods["linear"]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        posterior = run_mcmc(pmod.model, **{**RUN, "draws_per_chain": 1}, initvals=pmod.certification.initvals)
    assert not [w for w in caught if "More chains" in str(w.message)]
    assert posterior.sizes["chain"] == 2 and posterior.sizes["draw"] == 1
    with warnings.catch_warnings(record=True) as after:
        warnings.simplefilter("always")
        warnings.warn("More chains (2) than draws (1). Passed array should have shape (chains, draws, *shape)", UserWarning)
    assert after, "the filter must not outlive the call"


def test_rhat_by_variable_skips_constant_coordinates_and_single_chains():
    from pymc_dp.sampling import rhat_by_variable

    rng = np.random.default_rng(0)
    post = xr.Dataset({"a": (("chain", "draw"), rng.normal(size=(4, 300))),
                       "c": (("chain", "draw"), np.ones((4, 300))),  # constant: R-hat NaN, left out
                       "v": (("chain", "draw", "v_dim_0"), np.stack([rng.normal(size=(4, 300)), np.ones((4, 300))], -1))})
    post["a"][0] += 5.0
    got = rhat_by_variable(post, ["a", "c", "v", "missing"])
    assert set(got) == {"a", "v"} and got["a"] > 1.5 and got["v"] < 1.05
    assert rhat_by_variable(post.isel(chain=[0]), ["a"]) == {}
