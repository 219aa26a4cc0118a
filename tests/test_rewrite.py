"""The model rewrite: a new model with the prior restricted to Theta_L; the user's model untouched."""

import numpy as np
import pymc as pm
import pytest

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


def _dirichlet(a):
    rng = np.random.default_rng(0)
    with pm.Model() as model:
        xd = pm.Data("x", rng.integers(0, 3, 40))
        p = pm.Dirichlet("p", a=np.asarray(a, dtype=float))
        pm.Categorical("obs", p=p, observed=xd)
    return model


@pytest.mark.parametrize("a", [[1, 1, 1], [1, 2, 3]])
def test_thin_potential_region_is_found_by_search_and_sampled_inside(a):
    # regression: no prior draw lands in {ln(max p / min p) <= 0.0125}, which once made the
    # factor "infeasible" with a false claim; the region holds the uniform p
    pmod = pymc_dp.make_private(_dirichlet(a), epsilon=1.0, draws=40, data={"x": pymc_dp.Integers(0, 2)}, ledger=None)
    cert = pmod.certificate
    assert cert.prior_mass_kept == 0.0 and "upper bound" in cert.prior_mass_method
    bound = cert.factors[0].lipschitz
    start = np.asarray(pmod.certification.initvals["p"])
    # the start lies inside the thin region, moved from its minimiser (uniform p) towards the prior
    assert np.log(start.max() / start.min()) <= bound and start.sum() == pytest.approx(1.0)
    for idata in (
        pmod.sample(random_seed=1),
        pmod.sample(method="mcmc", tune=100, chains=2, cores=1, random_seed=1),
    ):
        p = idata.posterior["p"].values.reshape(-1, 3)
        assert np.all(np.log(p.max(axis=1) / p.min(axis=1)) <= bound + 1e-9)


def test_infeasible_factor_claims_a_proof_only_with_a_certified_floor():
    rng = np.random.default_rng(0)
    with pm.Model() as model:
        cd = pm.Data("c", rng.integers(0, 11, 30))
        a = pm.Normal("a", 0, 1)
        b = pm.Normal("b", 0, 1)
        pm.NegativeBinomial("count", mu=pm.math.exp(a + b), alpha=2.0, observed=cd)  # two free RVs: the box solver
    with pytest.raises(pymc_dp.BudgetExceededError) as info:
        pymc_dp.make_private(model, epsilon=1.0, draws=1, data={"c": pymc_dp.Integers(0, 10)}, ledger=None)
    message = str(info.value)
    # the negative binomial constant on Integers(0, 10) has a proved floor whatever mu, and the
    # family has no oscillation certificate (it is not a one-parameter family in mu and alpha)
    assert "'count'" in message and "cannot be met" in message and "(proved)" in message
    assert "at least 1.334" in message
    # the hint names the largest count cap whose floor fits Delta = 0.5
    assert "Integers(0, 6)" in message


def test_a_poisson_of_two_free_rvs_is_certified_by_its_oscillation_below_the_constants_floor():
    """The Poisson's constant on Integers(0, 10) is at least 2.86 whatever mu, so its ``2 L``
    cannot fit epsilon = 1; its oscillation over a box of ``a + b`` (a Span) is ``10 x width`` and
    has no floor: a narrow box fits."""
    rng = np.random.default_rng(0)
    with pm.Model() as model:
        cd = pm.Data("c", rng.integers(0, 11, 30))
        a = pm.Normal("a", 0, 1)
        b = pm.Normal("b", 0, 1)
        pm.Poisson("count", mu=pm.math.exp(a + b), observed=cd)
    cert = pymc_dp.make_private(model, epsilon=1.0, draws=1, data={"c": pymc_dp.Integers(0, 10)}, ledger=None).certificate
    assert cert.factors[0].bound == "oscillation" and cert.epsilon_per_draw <= 1.0 + 1e-9
    assert 0 < cert.prior_mass_kept < 1


def test_infeasible_without_a_floor_does_not_claim_a_proof():
    # a mixture of two narrow Normals: its family states no floor, so only a search speaks
    rng = np.random.default_rng(0)
    with pm.Model() as model:
        yd = pm.Data("y", rng.uniform(-1, 1, 20))
        mu = pm.Normal("mu", 0, 1, shape=2)
        w = pm.Dirichlet("w", np.ones(2))
        pm.NormalMixture("obs", w=w, mu=mu, sigma=0.01, observed=yd)
    with pytest.raises(pymc_dp.BudgetExceededError) as info:
        pymc_dp.make_private(model, epsilon=1.0, draws=1, data={"y": pymc_dp.Interval(-1, 1)}, ledger=None)
    message = str(info.value)
    assert "'obs'" in message and "a search, not a proof" in message
    assert "cannot be met" not in message and "(proved)" not in message


def test_interval_on_a_packed_cholesky_factor_restricts_its_prior_to_the_box():
    """``pm.LKJCholeskyCov``'s packed factor under an elementwise interval: PyMC's univariate
    ``Interval`` is refused on a multivariate RV; ours sums the diagonal Jacobian over the draw.
    Checked against the original density of the packed value plus the sigmoid map's
    ``log((hi - lo) s (1 - s))`` per element, computed here by hand."""
    from pymc.distributions.transforms import Interval
    from pymc.model.transform.conditioning import change_value_transforms

    from pymc_dp.rewrite import _SupportInterval

    lo, hi = np.array([0.1, -0.5, 0.2]), np.array([2.0, 0.5, 1.5])
    with pm.Model() as model:
        pm.LKJCholeskyCov("chol", n=2, eta=2.0, sd_dist=pm.Exponential.dist(1.0, shape=2), compute_corr=False)
    packed = model["chol"]
    transform = _SupportInterval(Interval(bounds_fn=lambda *_: (lo, hi)), 1)
    boxed = change_value_transforms(model, {"chol": transform})
    u = np.array([0.3, -1.2, 2.0])
    s = 1.0 / (1.0 + np.exp(-u))
    x = lo + (hi - lo) * s
    expected = float(pm.logp(packed, x).eval()) + float(np.sum(np.log((hi - lo) * s * (1 - s))))
    (value,) = boxed.value_vars
    assert float(boxed.compile_logp()({value.name: u})) == pytest.approx(expected, rel=1e-10)
    # the sampler's values stay in the box
    with boxed:
        idata = pm.sample(draws=50, tune=50, chains=1, random_seed=0, progressbar=False, compute_convergence_checks=False)
    draws = idata.posterior["chol"].values.reshape(-1, 3)
    assert np.all(draws >= lo) and np.all(draws <= hi)


def test_bounds_on_a_packed_cholesky_factor_keep_its_diagonal_positive():
    """``bounds=`` on the packed factor: a lower end below 0 on the diagonal is raised to the
    support (0), the off-diagonal keeps its negative lower end."""
    rng = np.random.default_rng(0)
    with pm.Model() as model:
        x = pm.Data("x", rng.normal(size=20).clip(-1, 1))
        chol, _, _ = pm.LKJCholeskyCov("chol", n=2, eta=2.0, sd_dist=pm.Exponential.dist(1.0, shape=2))
        pm.Normal("y", mu=chol[1, 0] + chol[1, 1], sigma=1.0, observed=x)
    pmod = pymc_dp.make_private(
        model, epsilon=100.0, draws=1, data={"x": pymc_dp.Interval(-1, 1)}, ledger=None,
        bounds={"chol": (np.array([-1.0, -0.5, -1.0]), np.array([1.0, 0.5, 1.0]))},
    )
    text = str(pmod.certificate)
    assert "chol in [0, 1], [-0.5, 0.5], [0, 1]" in text, text


def test_a_factor_bounded_over_the_whole_support_needs_no_truncation():
    """Student-t location with a fixed scale: ``sup_mu L = (nu + 1) asinh(w / (sigma sqrt(nu)))``
    is finite, so at a large enough share the region is all of R. Regression: the empty interval
    constraint reached PyMC's ``Interval(None, None)`` and crashed the rewrite."""
    rng = np.random.default_rng(0)
    with pm.Model() as model:
        x = pm.Data("x", rng.uniform(-1, 1, 30))
        mu = pm.Normal("mu", 0.0, 1.0)
        pm.StudentT("y", nu=4, mu=mu, sigma=1.0, observed=x)
    pmod = pymc_dp.make_private(model, epsilon=6.0, draws=1, data={"x": pymc_dp.Interval(-1, 1)}, ledger=None)
    (factor,) = pmod.certificate.factors
    assert factor.truncation == () and pmod.certificate.prior_mass_kept == 1.0
    assert pmod.certificate.epsilon_per_draw <= 6.0
    idata = pmod.sample(chains=1, tune=50, random_seed=0, progressbar=False)
    assert idata.posterior["mu"].size == 1


def _deterministic_utility_with_a_zeros_like_reference(n=20):
    """FOUND.md #1, hand-reduced: a softmax utility wrapped in ``pm.Deterministic`` whose
    ``pt.zeros_like`` is the reference utility. The factor's constant reads ``u`` only through
    ``second(u, 0)`` (its shape), ``w`` also directly, and ``x`` only inside ``u``."""
    import pytensor.tensor as pt

    rng = np.random.default_rng(0)
    with pm.Model() as model:
        x = pm.Data("x", rng.uniform(-1, 1, (n, 2)))
        w = pm.Normal("w", 0, 1, shape=2)
        u = pm.Deterministic("u", x @ w)
        utilities = pm.math.stack([u, x[:, 0] * w[1], pt.zeros_like(u)]).T
        pm.Categorical("obs", p=pm.math.softmax(utilities, axis=1), observed=pm.Data("y", rng.integers(0, 3, n)))
    return model, {"x": pymc_dp.Box([-1.0, -1.0], [1.0, 1.0]), "y": pymc_dp.Integers(0, 2)}


def test_potential_of_a_constant_that_reads_a_deterministic_through_its_shape():
    # regression (tests/fuzz/FOUND.md #1, fuzz seed 17): mapping the constant into the new model with
    # PyTensor's graph_replace raised a raw "ValueError: i-N is not a part of graph" (the key u
    # depends on the key w and on x, which the constant reaches only through u)
    from pytensor.compile.mode import Mode

    from pymc_dp.constraints import PotentialConstraint
    from pymc_dp.factors import find_factors
    from pymc_dp.region_context import RegionContext
    from pymc_dp.rewrite import rewrite_model

    model, domains = _deterministic_utility_with_a_zeros_like_reference()
    (factor,) = find_factors(model, {v: v.name for v in model.data_vars}, domains)
    bound = PotentialConstraint("obs", 1.0, ("w",), lambda draws: np.zeros(len(draws["w"])))
    ctx = RegionContext(model, domains, {"w": np.zeros((1, 2))})
    new, initvals = rewrite_model(model, [bound], ctx, {"obs": factor.lipschitz(domains)})
    assert [p.name for p in new.potentials] == ["obs__dp_theta_L"] and [d.name for d in new.deterministics] == ["u"]
    assert sorted(new.named_vars) == ["obs", "obs__dp_theta_L", "u", "w", "x", "y"]
    (pot,) = new.replace_rvs_by_values(new.potentials)
    indicator = new.compile_fn(pot, mode=Mode(linker="py", optimizer="fast_compile"))
    assert indicator({"w": initvals["w"]}) == 0.0  # w = 0: every utility 0, the constant is 0
    assert indicator({"w": np.array([50.0, -50.0])}) == -np.inf
    assert [p.name for p in model.potentials] == []  # the user's model untouched


@pytest.mark.parametrize("kind", ["interval", "ball"])
def test_potential_on_a_free_rv_that_also_has_an_interval_or_a_ball(kind):
    # a factor truncated by a potential reads w, which another factor's interval (or norm ball)
    # rewrites: the potential read the replaced node, which came back into the graph with it and
    # failed with a raw "ValueError: Variable name w already exists" from PyMC's model_from_fgraph
    from pytensor.compile.mode import Mode

    from pymc_dp.constraints import IntervalConstraint, NormBallConstraint, PotentialConstraint
    from pymc_dp.factors import find_factors
    from pymc_dp.region_context import RegionContext
    from pymc_dp.rewrite import rewrite_model

    model, domains = _deterministic_utility_with_a_zeros_like_reference()
    (factor,) = find_factors(model, {v: v.name for v in model.data_vars}, domains)
    other = IntervalConstraint("w", -1.0, 1.0) if kind == "interval" else NormBallConstraint("w", 1.0)
    bound = PotentialConstraint("obs", 1.0, ("w",), lambda draws: np.zeros(len(draws["w"])))
    ctx = RegionContext(model, domains, {"w": np.zeros((1, 2))})
    new, initvals = rewrite_model(model, [other, bound], ctx, {"obs": factor.lipschitz(domains)})
    indicator = new.replace_rvs_by_values([p for p in new.potentials if p.name == "obs__dp_theta_L"])[0]
    # the indicator reads the new model's own value variables, and is 0 at the start
    value_names = {v.name for v in new.value_vars}
    fn = new.compile_fn(indicator, mode=Mode(linker="py", optimizer="fast_compile"))
    start = {k: v for k, v in initvals.items() if k in value_names}
    if kind == "interval":
        assert value_names == {"w_interval__"}
        start = {"w_interval__": np.zeros(2)}  # w = 0, the middle of the interval
    assert fn(start) == 0.0


def test_a_constant_the_rewrite_cannot_carry_is_refused_typed_and_named(monkeypatch):
    # whatever PyTensor raises while the constant is mapped into the new model becomes a typed
    # refusal naming the factor and what it reads, never a raw error
    import pymc_dp.rewrite as rewrite
    from pymc_dp.constraints import PotentialConstraint
    from pymc_dp.factors import find_factors
    from pymc_dp.region_context import RegionContext

    def broken(*args, **kwargs):
        raise ValueError("i-3 is not a part of graph")

    monkeypatch.setattr(rewrite, "clone_get_equiv", broken)
    model, domains = _deterministic_utility_with_a_zeros_like_reference()
    (factor,) = find_factors(model, {v: v.name for v in model.data_vars}, domains)
    bound = PotentialConstraint("obs", 1.0, ("w",), lambda draws: np.zeros(len(draws["w"])))
    ctx = RegionContext(model, domains, {"w": np.zeros((1, 2))})
    with pytest.raises(pymc_dp.UnsupportedFactorError, match=r"factor 'obs'.*reads u, w.*bounds="):
        rewrite.rewrite_model(model, [bound], ctx, {"obs": factor.lipschitz(domains)})


def test_a_box_whose_elements_differ_in_which_ends_are_finite():
    """Campaign seed 1000483 (tests/fuzz/FOUND.md #8): a vector box with some elements bounded
    below and others not raised a raw ``NotImplementedError``. ``_MixedInterval`` maps each
    element onto its own interval; checked here: the round trip, the log-Jacobian against a
    numerical derivative of ``backward``, and draws of the rewritten prior inside the box with
    the truncated normal's mean per element."""
    import pytensor.tensor as pt
    from pymc.model.transform.conditioning import change_value_transforms
    from scipy import stats

    from pymc_dp.rewrite import _MixedInterval

    lo = np.array([-np.inf, 0.5, -1.0, -np.inf])
    hi = np.array([1.0, np.inf, 2.0, np.inf])
    transform = _MixedInterval(lo, hi)
    y = pt.dvector("y")
    x_of = transform.backward(y).eval
    u = np.array([0.7, -1.3, 0.4, 2.5])
    x = x_of({y: u})
    assert np.all(x > np.nan_to_num(lo, neginf=-1e300)) and np.all(x < np.nan_to_num(hi, posinf=1e300))
    np.testing.assert_allclose(transform.forward(pt.as_tensor(x)).eval(), u, rtol=1e-12)
    h = 1e-6
    numeric = np.log(np.abs((x_of({y: u + h}) - x_of({y: u - h})) / (2 * h)))
    np.testing.assert_allclose(transform.log_jac_det(pt.as_tensor(u)).eval(), numeric, rtol=1e-6, atol=1e-8)

    with pm.Model() as model:
        pm.Normal("w", 0.0, 1.0, shape=4)
    boxed = change_value_transforms(model, {"w": transform})
    with boxed:
        idata = pm.sample(draws=1500, tune=500, chains=1, random_seed=1, progressbar=False,
                          compute_convergence_checks=False, initvals={"w": np.array([0.0, 1.0, 0.0, 0.0])})
    w = idata.posterior["w"].values.reshape(-1, 4)
    assert np.all(w >= lo) and np.all(w <= hi)
    expected = stats.truncnorm(lo, hi).mean()
    np.testing.assert_allclose(w.mean(axis=0), expected, atol=0.15)


def test_a_mixed_box_certifies_end_to_end_through_bounds():
    """``bounds=`` with ``-inf`` / ``inf`` in some elements: certified, and the released draws
    respect the box."""
    rng = np.random.default_rng(0)
    with pm.Model() as model:
        x = pm.Data("x", rng.uniform(-1, 1, size=30))
        y = pm.Data("y", rng.uniform(-1, 1, size=30))
        w = pm.Normal("w", 0.0, 1.0, shape=2)
        sigma = pm.HalfNormal("sigma", 1.0, shape=2)  # sigma[1] is read where obs is public
        pm.Normal("obs", mu=w[0] + w[1] * x, sigma=sigma[0], observed=y)
        pm.Normal("public_obs", mu=w[0], sigma=sigma[1], observed=np.zeros(5))
    # sigma: [0.5, 2] for the factor, [0, inf) where only public data read it
    bounds = {"w": (-2.0, 2.0), "sigma": (np.array([0.5, 0.0]), np.array([2.0, np.inf]))}
    pmod = pymc_dp.make_private(model, epsilon=500.0, draws=3, ledger=None, bounds=bounds,
                                data={"x": pymc_dp.Interval(-1, 1), "y": pymc_dp.Interval(-1, 1)})
    idata = pmod.sample(tune=100, random_seed=0, progressbar=False)
    sigma_draws = idata.posterior["sigma"].values.reshape(-1, 2)
    assert np.all((sigma_draws[:, 0] >= 0.5) & (sigma_draws[:, 0] <= 2.0)) and np.all(sigma_draws[:, 1] > 0)


def test_bounds_on_a_factor_whose_observed_value_is_public_is_refused_typed():
    """A public observed array (not a container) with a private covariate under ``bounds=``
    crashed with ``KeyError: None`` in the box model; it is refused, naming the factor and data."""
    rng = np.random.default_rng(0)
    with pm.Model() as model:
        x = pm.Data("x", rng.uniform(-1, 1, size=30))
        w = pm.Normal("w", 0.0, 1.0, shape=2)
        pm.Normal("obs", mu=w[0] + w[1] * x, sigma=1.0, observed=np.zeros(30))
    with pytest.raises(pymc_dp.UnsupportedFactorError, match=r"'obs' reads private data 'x' only through its parameters"):
        pymc_dp.make_private(model, epsilon=50.0, draws=3, data={"x": pymc_dp.Interval(-1, 1)},
                             ledger=None, bounds={"w": (-2.0, 2.0)})


def test_a_region_the_rewrite_cannot_carry_is_a_typed_refusal():
    """An interval and a norm ball on one parameter, or two different norm balls, are refused with
    a RegionNotImplementedError (a PrivacyError and a NotImplementedError) naming the parameter."""
    from pymc_dp.constraints import IntervalConstraint, NormBallConstraint
    from pymc_dp.factors import find_factors
    from pymc_dp.region_context import RegionContext
    from pymc_dp.rewrite import rewrite_model
    from tests.typed_refusals import assert_typed_refusal

    model, domains = _deterministic_utility_with_a_zeros_like_reference()
    (factor,) = find_factors(model, {v: v.name for v in model.data_vars}, domains)
    ctx = RegionContext(model, domains, {"w": np.zeros((1, 2))})
    lipschitz = {"obs": factor.lipschitz(domains)}
    for constraints, match in (
        ([IntervalConstraint("w", -1.0, 1.0), NormBallConstraint("w", 1.0)], r"\['w'\].*interval and a norm ball.*bounds="),
        ([NormBallConstraint("w", 1.0), NormBallConstraint("w", 1.0, (1.0, 2.0))], "two different norm balls on 'w'.*one"),
    ):
        assert_typed_refusal(lambda: rewrite_model(model, constraints, ctx, lipschitz),
                             kind=pymc_dp.RegionNotImplementedError, match=match)
