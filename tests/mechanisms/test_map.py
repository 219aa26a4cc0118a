"""Private MAP (pymc_dp.mechanisms.map): the exponential mechanism of AAAI 2016 Alg. 3.

The privacy checks compute the mechanism's output density *independently*, by quadrature of
``prior(theta) x p_theta(x)^beta`` on the truncation interval (from the raw data, not through the
exact plan or the model graph), for worst-case neighbouring datasets within the declared domains,
and check ``sup_theta |ln q_x - ln q_y| <= eps0`` -- and that the worst pair comes close to it.
The samplers (exact, and MCMC on the tempered model) are checked against the same densities by
Kolmogorov-Smirnov tests with fixed seeds at level 1e-3; one test checks the power (the exact
draws are rejected against the untempered posterior).
"""

from __future__ import annotations

import json
import math

import numpy as np
import pymc as pm
import pytest
from scipy import integrate, special, stats

import pymc_dp
from pymc_dp import accounting
from pymc_dp.exceptions import BudgetExceededError, NotConjugateError, PrivacyError, UnsupportedFactorError
from pymc_dp.mechanisms.map import MECHANISM, TEMPER_POTENTIAL, PrivateMAP

ALPHA = 1e-3
A0, B0 = 2.0, 2.0  # the coin's Beta prior
N_COIN = 100


# --------------------------------------------------------------------------- models
def coin(n=N_COIN, seed=0):
    x = np.random.default_rng(seed).integers(0, 2, n)
    with pm.Model() as model:
        xd = pm.Data("x", x)
        p = pm.Beta("p", A0, B0)
        pm.Bernoulli("obs", p=p, observed=xd)
    return model


def laplace_location(n=40, seed=0):
    """Non-conjugate, one parameter: mu ~ Normal(0, 1), x_i ~ Laplace(mu, 1), x in [-1, 1]."""
    x = np.random.default_rng(seed).uniform(-1, 1, n)
    with pm.Model() as model:
        xd = pm.Data("x", x)
        mu = pm.Normal("mu", 0.0, 1.0)
        pm.Laplace("obs", mu=mu, b=1.0, observed=xd)
    return model


COIN_DOMAIN = {"x": pymc_dp.Binary()}
LAPLACE_DOMAIN = {"x": pymc_dp.Interval(-1.0, 1.0)}


def interval(mech: PrivateMAP, var: str) -> tuple[float, float]:
    lo, hi = -np.inf, np.inf
    for f in mech.certificate.factors:
        for c in f.constraints:
            if c["kind"] == "interval" and c["var"] == var:
                lo = max(lo, -np.inf if c["lower"] is None else c["lower"])
                hi = min(hi, np.inf if c["upper"] is None else c["upper"])
    return lo, hi


@pytest.fixture(scope="module")
def coin_mechs():
    model = coin()
    return {
        s: pymc_dp.private_map(model, epsilon=1.0, data=COIN_DOMAIN, sensitivity=s, ledger=None)
        for s in (None, 2.0, 0.3)
    }


@pytest.fixture(scope="module")
def laplace_mech():
    # the oscillation 2 |[lo, hi] ∩ [-1, 1]| / b is at most 4 = 2 Delta_u for every region: Delta_u = 2
    # truncates only where the prior mass is negligible, and the worst pair comes close to eps0
    return pymc_dp.private_map(laplace_location(), epsilon=1.0, data=LAPLACE_DOMAIN, sensitivity=2.0, ledger=None)


# --------------------------------------------------------------------------- quadrature references
def quadrature_grid(lo: float, hi: float, points: int) -> np.ndarray:
    """A grid over the region of mu, clipped to +-8: the Laplace location's oscillation leaves the
    region unbounded where g is constant (beyond the domain), and the N(0, 1) prior puts under
    1e-15 of its mass beyond +-8."""
    return np.linspace(max(lo, -8.0), min(hi, 8.0), points)


def coin_log_density(k, n, beta, lo, hi, t):
    """ln q(t) of prior x Bernoulli-likelihood^beta restricted to [lo, hi], normalised by quad."""

    def log_kernel(s):
        return special.xlogy(A0 - 1 + beta * k, s) + special.xlog1py(B0 - 1 + beta * (n - k), -s)

    mode = np.max(log_kernel(np.linspace(lo, hi, 2001)))
    z, _ = integrate.quad(lambda s: np.exp(log_kernel(s) - mode), lo, hi, epsabs=0, epsrel=1e-12, limit=200)
    return log_kernel(t) - mode - math.log(z)


def laplace_log_kernel(x, beta, t):
    """ln of N(t; 0, 1) x prod_i Laplace(x_i; t, 1)^beta, up to a constant."""
    return -0.5 * t**2 - beta * np.sum(np.abs(np.asarray(x)[:, None] - t[None, :]), axis=0)


def normalised(log_kernel, grid):
    m = np.max(log_kernel)
    return log_kernel - m - math.log(integrate.trapezoid(np.exp(log_kernel - m), grid))


# --------------------------------------------------------------------------- sensitivity, beta, accounting
def test_sensitivity_is_the_certificates(coin_mechs):
    for s, mech in coin_mechs.items():
        core = mech.private_model.certificate
        assert mech.sensitivity == core.epsilon_per_draw / 2.0
        assert mech.sensitivity == (0.5 if s is None else s)  # default: eps0 / 2 with eps0 = 1
        # the truncation's factors lift to at most Delta_u (one Bernoulli factor: L = Delta_u exactly)
        assert sum(f.lipschitz for f in core.factors) <= mech.sensitivity * (1 + 1e-12)
        # one Bernoulli factor: the log-likelihood's change between neighbours is +-logit(p), whose
        # oscillation over [lo, hi] is logit(hi) - logit(lo): the region uses all of 2 Delta_u
        lo, hi = interval(mech, "p")
        width = special.logit(hi) - special.logit(lo)
        assert width <= 2 * mech.sensitivity * (1 + 1e-12)
        assert width == pytest.approx(2 * mech.sensitivity, rel=1e-6)
        # and sits where the symmetric Beta(2, 2) prior has its mass
        assert special.logit(lo) + special.logit(hi) == pytest.approx(0.0, abs=1e-3 * mech.sensitivity)
        # the mechanism's certificate carries the truncation unchanged
        assert mech.certificate.factors == core.factors
        assert mech.certificate.prior_mass_kept == core.prior_mass_kept


def test_beta(coin_mechs):
    assert coin_mechs[None].beta == 1.0
    assert coin_mechs[2.0].beta == pytest.approx(1.0 / 4.0, rel=1e-15)
    assert coin_mechs[0.3].beta == pytest.approx(1.0 / 0.6, rel=1e-15)
    for mech in coin_mechs.values():
        assert mech.epsilon_per_draw == 1.0 and mech.certificate.epsilon == 1.0
        assert mech.conjugate_plan.beta == mech.beta
        # the tempered sufficient statistics: alpha = a0 + beta k, beta = b0 + beta (n - k)
        k = int(np.sum(mech.private_model.model["x"].get_value()))
        post = mech.conjugate_plan.posteriors()["p"]
        assert post["alpha"][0] == pytest.approx(A0 + mech.beta * k, rel=1e-14)
        assert post["beta"][0] == pytest.approx(B0 + mech.beta * (N_COIN - k), rel=1e-14)


def test_draws_compose_as_the_core():
    mech = pymc_dp.private_map(coin(20), epsilon=3.0, draws=5, delta=1e-6, data=COIN_DOMAIN, sensitivity=0.7, ledger=None)
    eps0 = accounting.per_draw_epsilon(3.0, 1e-6, 5)
    guarantee = accounting.compose(eps0, 5, 1e-6)
    c = mech.certificate
    assert mech.epsilon_per_draw == eps0 > 3.0 / 5  # the optimal composition gives each draw more
    assert mech.beta == pytest.approx(eps0 / 1.4, rel=1e-15)
    assert (c.epsilon, c.epsilon_basic, c.epsilon_optimal, c.composition) == (
        guarantee.epsilon, guarantee.epsilon_basic, guarantee.epsilon_optimal, guarantee.method
    )
    assert c.epsilon <= 3.0 and c.draws == 5 and c.delta == 1e-6 and c.epsilon_per_draw == eps0
    idata = mech.sample(random_seed=3, chains=1)
    assert idata.posterior["p"].shape == (1, 5)


# --------------------------------------------------------------------------- privacy by quadrature
@pytest.mark.parametrize("sensitivity", [None, 2.0, 0.3])
def test_coin_privacy_by_quadrature(coin_mechs, sensitivity):
    """Replace-one neighbours on Binary records are k vs k + 1 ones, for every k."""
    mech = coin_mechs[sensitivity]
    lo, hi = interval(mech, "p")
    t = np.concatenate([[lo, hi], np.linspace(lo, hi, 4001)])  # the log-ratio is monotone: ends included
    logq = [coin_log_density(k, N_COIN, mech.beta, lo, hi, t) for k in range(N_COIN + 1)]
    worst = max(np.max(np.abs(logq[k] - logq[k + 1])) for k in range(N_COIN))
    eps0 = mech.epsilon_per_draw
    assert worst <= eps0 * (1 + 1e-9)
    assert worst >= 0.9 * eps0  # the claim is not loose (n = 100: about 0.93-0.98 of eps0)
    # the exact hook's log-ratio is the same function of theta
    for k in (0, 37, N_COIN - 1):
        x = np.r_[np.ones(k), np.zeros(N_COIN - k)].astype(int)
        y = x.copy()
        y[k] = 1
        ratio = mech._log_density_ratio({"x": x}, {"x": y})({"p": t})
        np.testing.assert_allclose(ratio, logq[k] - logq[k + 1], atol=1e-7)


def test_coin_privacy_fails_for_a_wrong_beta(coin_mechs):
    """The check has power: the same quadrature at twice the certified beta exceeds eps0."""
    mech = coin_mechs[2.0]
    lo, hi = interval(mech, "p")
    t = np.linspace(lo, hi, 2001)
    logq = [coin_log_density(k, N_COIN, 2 * mech.beta, lo, hi, t) for k in (40, 41)]
    assert np.max(np.abs(logq[0] - logq[1])) > mech.epsilon_per_draw


def test_laplace_privacy_by_quadrature(laplace_mech):
    """Non-conjugate: neighbours replace one record by any value of [-1, 1] (searched on a grid)."""
    mech = laplace_mech
    lo, hi = interval(mech, "mu")
    assert lo <= -1.0 and hi >= 1.0 and mech.certificate.factors[0].lipschitz <= 2.0
    grid = quadrature_grid(lo, hi, 4001)
    eps0, beta = mech.epsilon_per_draw, mech.beta
    bases = {
        "data": np.asarray(mech.private_model.model["x"].get_value()),
        "all -1": -np.ones(40),
        "all +1": np.ones(40),
        "half": np.r_[-np.ones(20), np.ones(20)],
    }
    worst = 0.0
    for x in bases.values():
        lx = normalised(laplace_log_kernel(x, beta, grid), grid)
        for i in range(len(x)) if len(set(x)) > 2 else [0, len(x) - 1]:
            for v in np.linspace(-1, 1, 9):
                y = x.copy()
                y[i] = v
                ly = normalised(laplace_log_kernel(y, beta, grid), grid)
                worst = max(worst, float(np.max(np.abs(lx - ly))))
    assert worst <= eps0 * (1 + 1e-6)
    assert worst >= 0.9 * eps0  # about 0.94 (all -1, one record moved to +1)


def test_mcmc_target_is_the_tempered_density(laplace_mech):
    """The MCMC model's log-density (prior, truncation, Potential) equals prior x likelihood^beta."""
    from pymc.model.transform.conditioning import remove_value_transforms

    model = remove_value_transforms(laplace_mech.model)
    assert TEMPER_POTENTIAL in [p.name for p in laplace_mech.model.potentials]
    logp = model.compile_logp(jacobian=False)
    lo, hi = interval(laplace_mech, "mu")
    t = np.linspace(0.99 * lo, 0.99 * hi, 25)
    x = np.asarray(laplace_mech.private_model.model["x"].get_value())
    ours = np.array([logp({"mu": v}) for v in t])
    ref = laplace_log_kernel(x, laplace_mech.beta, t)
    np.testing.assert_allclose(ours - ours[0], ref - ref[0], atol=1e-9)


# --------------------------------------------------------------------------- samplers against quadrature
def test_exact_sampler_matches_quadrature(coin_mechs):
    mech = coin_mechs[2.0]
    lo, hi = interval(mech, "p")
    k = int(np.sum(mech.private_model.model["x"].get_value()))
    grid = np.linspace(lo, hi, 20001)
    cdf_of = {}
    for name, beta in (("tempered", mech.beta), ("posterior", 1.0)):
        dens = np.exp(coin_log_density(k, N_COIN, beta, lo, hi, grid))
        cdf = integrate.cumulative_trapezoid(dens, grid, initial=0.0)
        cdf_of[name] = lambda s, c=cdf / cdf[-1]: np.interp(s, grid, c)
    draws = mech._audit_draws(4000, np.random.default_rng(11))["p"]
    assert draws.shape == (4000,) and np.all((draws >= lo) & (draws <= hi))
    assert stats.kstest(draws, cdf_of["tempered"]).pvalue > ALPHA
    assert stats.kstest(draws, cdf_of["posterior"]).pvalue < ALPHA  # power: beta = 1/4 is not 1


def test_mcmc_sampler_matches_quadrature(laplace_mech):
    """200 independent one-draw MCMC releases (100 warm-up steps each) against the quadrature CDF."""
    x = np.asarray(laplace_mech.private_model.model["x"].get_value())
    lo, hi = interval(laplace_mech, "mu")
    grid = quadrature_grid(lo, hi, 8001)
    dens = np.exp(normalised(laplace_log_kernel(x, laplace_mech.beta, grid), grid))
    cdf = integrate.cumulative_trapezoid(dens, grid, initial=0.0)
    cdf /= cdf[-1]
    draws = laplace_mech._audit_draws(200, np.random.default_rng(5), tune=100)["mu"]
    assert draws.shape == (200,) and np.all((draws >= lo) & (draws <= hi))
    assert stats.kstest(draws, lambda s: np.interp(s, grid, cdf)).pvalue > ALPHA


# --------------------------------------------------------------------------- posterior sampling at beta = 1
def test_default_sensitivity_is_posterior_sampling():
    model = coin(40)
    core = pymc_dp.make_private(model, epsilon=1.5, draws=3, data=COIN_DOMAIN, ledger=None)
    mech = pymc_dp.private_map(model, epsilon=1.5, draws=3, data=COIN_DOMAIN, ledger=None)
    assert mech.beta == 1.0 and mech.sensitivity == core.certificate.epsilon_per_draw / 2
    assert mech.model.potentials == [] and len(core.model.potentials) == 0
    pc, pm_ = core.conjugate_plan.posteriors()["p"], mech.conjugate_plan.posteriors()["p"]
    for key in ("alpha", "beta", "lower", "upper"):
        np.testing.assert_array_equal(pc[key], pm_[key])
    a = core.sample(random_seed=7, chains=1).posterior["p"].values
    b = mech.sample(random_seed=7, chains=1).posterior["p"].values
    np.testing.assert_array_equal(a, b)  # the same exact sampler: the same draws for the same seed
    for field in ("epsilon", "delta", "draws", "epsilon_per_draw", "prior_mass_kept", "factors", "composition"):
        assert getattr(mech.certificate, field) == getattr(core.certificate, field)


# --------------------------------------------------------------------------- release, ledger, report
def _snapshot(model):
    return {
        "free": [rv.name for rv in model.free_RVs],
        "observed": [rv.name for rv in model.observed_RVs],
        "potentials": [p.name for p in model.potentials],
        "deterministics": [d.name for d in model.deterministics],
        "transforms": {rv.name: type(t).__name__ for rv, t in model.rvs_to_transforms.items()},
        "data": {v.name: np.asarray(v.get_value()).copy() for v in model.data_vars},
        "logp": float(model.compile_logp()(model.initial_point())),
    }


def _same(a, b):
    assert a.keys() == b.keys()
    for k in a:
        if k == "data":
            assert a[k].keys() == b[k].keys() and all(np.array_equal(a[k][n], b[k][n]) for n in a[k])
        else:
            assert a[k] == b[k], k


def test_user_and_core_models_not_mutated():
    model = laplace_location()
    before = _snapshot(model)
    mech = pymc_dp.private_map(model, epsilon=1.0, data=LAPLACE_DOMAIN, sensitivity=2.0, ledger=None)
    core_before = _snapshot(mech.private_model.model)
    mech.sample(method="mcmc", tune=30, chains=1, random_seed=1)
    mech.with_data({"x": np.zeros(40)})
    _same(_snapshot(model), before)
    _same(_snapshot(mech.private_model.model), core_before)
    assert TEMPER_POTENTIAL not in core_before["potentials"]
    assert mech.model is not mech.private_model.model and TEMPER_POTENTIAL in [p.name for p in mech.model.potentials]


@pytest.mark.parametrize("method", ["exact", "mcmc"])
def test_release_has_only_the_posterior_and_the_mechanism(coin_mechs, method):
    mech = coin_mechs[2.0]
    kwargs = {"tune": 30, "chains": 1} if method == "mcmc" else {}
    idata = mech.sample(method=method, random_seed=2, **kwargs)
    assert list(idata.groups()) == ["posterior"]
    assert list(idata.posterior.data_vars) == ["p"] and idata.posterior["p"].shape == (1, 1)
    lo, hi = interval(mech, "p")
    assert lo <= float(idata.posterior["p"].values[0, 0]) <= hi
    payload = json.loads(idata.attrs["pymc_dp"])
    assert payload == json.loads(idata.posterior.attrs["pymc_dp"])
    release = payload["release"]
    assert release["method"] == method
    assert release["mechanism"] == MECHANISM == "exponential (private MAP)"
    assert release["beta"] == mech.beta and release["sensitivity"] == mech.sensitivity
    assert payload["epsilon"] == mech.certificate.epsilon and payload["epsilon_per_draw"] == 1.0
    if method == "exact":
        assert release["plan"]["likelihood_power"] == mech.beta
    assert mech.last_release is idata


def test_ledger_charged_once_and_refused_when_exhausted(tmp_path):
    ledger = pymc_dp.Ledger(tmp_path / "ledger.sqlite", epsilon=1.5, delta=0.0)
    mech = pymc_dp.private_map(coin(20), epsilon=1.0, data=COIN_DOMAIN, sensitivity=2.0, ledger=ledger)
    assert ledger.spent(mech.dataset_id).epsilon == 0.0  # building spends nothing
    idata = mech.sample(random_seed=1)
    spend = ledger.spent(mech.dataset_id)
    assert (spend.epsilon, spend.releases, spend.pending, spend.failed) == (1.0, 1, 0, 0)
    assert json.loads(idata.attrs["pymc_dp"])["release"]["ledger"]["spent_epsilon"] == 1.0
    with pytest.raises(BudgetExceededError):
        mech.sample(random_seed=2)
    spend = ledger.spent(mech.dataset_id)
    assert (spend.epsilon, spend.releases, spend.pending) == (1.0, 1, 0)
    assert mech.last_release is idata
    # the same data released by the core counts against the same dataset
    core = pymc_dp.make_private(coin(20), epsilon=0.5, draws=1, data=COIN_DOMAIN, ledger=ledger)
    assert core.dataset_id == mech.dataset_id
    # audit hooks spend nothing
    other = mech.with_data({"x": np.zeros(20, dtype=int)})
    assert other.ledger is None
    other._audit_draws(10, np.random.default_rng(0))
    other.sample(random_seed=3)
    assert ledger.spent(mech.dataset_id).epsilon == 1.0


def test_report_renders_the_mechanism():
    # beta = 1/4: the factors lift to Delta_u = 2 > eps0 / 2 (not an inconsistency here)
    mech = pymc_dp.private_map(coin(20), epsilon=1.0, data=COIN_DOMAIN, sensitivity=2.0, ledger=None)
    before = pymc_dp.report(mech).to_dict()
    assert before["status"] == "not released" and before["mechanism"]["beta"] == mech.beta
    assert not [w for w in before["warnings"] if w["kind"] == "inconsistent"]
    rep = pymc_dp.report(mech.sample(random_seed=4))
    d = rep.to_dict()
    assert d["status"] == "released"
    assert d["mechanism"] == {"name": MECHANISM, "beta": mech.beta, "sensitivity": 2.0}
    assert not [w for w in d["warnings"] if w["kind"] == "inconsistent"]
    assert d["split"]["truncation_Delta"] == 2.0 and d["budget"]["Delta"] == 0.5
    text = str(rep)
    assert "exponential (private MAP)" in text and "likelihood power beta" in text
    assert "Delta_u = 2" in text
    assert "exponential" in rep.to_markdown() and "exponential" in rep.to_html()
    assert mech.report() == rep
    # a posterior-sampling release reports no mechanism
    core = pymc_dp.make_private(coin(20), epsilon=1.0, draws=1, data=COIN_DOMAIN, ledger=None)
    assert "mechanism" not in pymc_dp.report(core.sample(random_seed=1)).to_dict()


def test_report_flags_an_inconsistent_mechanism(coin_mechs):
    """The consistency check compares the lifted constants with Delta_u: a forged smaller one fails."""
    idata = coin_mechs[2.0].sample(random_seed=5)
    payload = json.loads(idata.attrs["pymc_dp"])
    payload["release"]["sensitivity"] = 1.0
    idata.attrs["pymc_dp"] = idata.posterior.attrs["pymc_dp"] = json.dumps(payload)
    assert [w for w in pymc_dp.report(idata).to_dict()["warnings"] if w["kind"] == "inconsistent"]


# --------------------------------------------------------------------------- audit hooks
def test_audit_hooks(coin_mechs, laplace_mech):
    mech = coin_mechs[0.3]
    x = np.zeros(N_COIN, dtype=int)
    other = mech.with_data({"x": x})
    assert other.beta == mech.beta and other.certificate == mech.certificate
    post = other.conjugate_plan.posteriors()["p"]
    assert post["alpha"][0] == pytest.approx(A0) and post["beta"][0] == pytest.approx(B0 + mech.beta * N_COIN)
    d1 = other._audit_draws(5, np.random.default_rng(1))
    d2 = other._audit_draws(5, np.random.default_rng(1))
    np.testing.assert_array_equal(d1["p"], d2["p"])
    # the original is unchanged
    k = int(np.sum(mech.private_model.model["x"].get_value()))
    assert mech.conjugate_plan.posteriors()["p"]["alpha"][0] == pytest.approx(A0 + mech.beta * k)
    with pytest.raises(NotConjugateError, match="Laplace"):
        laplace_mech._log_density_ratio({"x": np.zeros(40)}, {"x": np.ones(40)})


# --------------------------------------------------------------------------- refusals
@pytest.mark.parametrize("epsilon", [0.0, -1.0, float("nan"), float("inf")])
def test_refuses_bad_epsilon(epsilon):
    with pytest.raises(BudgetExceededError, match="epsilon"):
        pymc_dp.private_map(coin(5), epsilon=epsilon, data=COIN_DOMAIN, ledger=None)


@pytest.mark.parametrize("sensitivity", [0.0, -0.5, float("nan"), float("inf"), True, "1"])
def test_refuses_bad_sensitivity(sensitivity):
    with pytest.raises(PrivacyError, match="sensitivity"):
        pymc_dp.private_map(coin(5), epsilon=1.0, data=COIN_DOMAIN, sensitivity=sensitivity, ledger=None)


def test_refuses_an_infeasible_sensitivity(lipschitz_only):
    """By the per-record constant alone (the fixture): Laplace(mu, 0.1) on [0, 1] has L >= 0.5 /
    0.1 = 5 > Delta_u = 1 at every mu, a proved floor. (Its oscillation, 2 |[lo, hi] ∩ [0, 1]| /
    0.1, has none: by default the region shrinks instead, as for the Normal mean.)"""
    with pm.Model() as model:
        xd = pm.Data("y", np.full(5, 0.5))
        mu = pm.Normal("mu", 0.5, 1.0)
        pm.Laplace("lik", mu=mu, b=0.1, observed=xd)
    with pytest.raises(BudgetExceededError, match="'lik'.*|sensitivity") as err:
        pymc_dp.private_map(model, epsilon=1.0, data={"y": pymc_dp.Interval(0, 1)}, sensitivity=1.0, ledger=None)
    assert "lik" in str(err.value) and "sensitivity" in str(err.value)


def test_refuses_unsupported_models():
    with pm.Model() as model:
        xd = pm.Data("x", np.array([0, 1, 1]))
        p = pm.Beta("p", 1 + xd.mean() * 0, 1, shape=1)  # a prior that reads the private data's values
        pm.Bernoulli("obs", p=p[0], observed=xd)
    with pytest.raises(UnsupportedFactorError, match="'p'"):
        pymc_dp.private_map(model, epsilon=1.0, data=COIN_DOMAIN, ledger=None)
    with pytest.raises(TypeError):
        pymc_dp.private_map("not a model", epsilon=1.0, data=COIN_DOMAIN, ledger=None)


# --------------------------------------------------------------------------- pymc_dp.audit
@pytest.mark.parametrize("sensitivity", [None, 2.0, 0.3])
def test_exact_audit_of_the_tempered_posterior(coin_mechs, sensitivity):
    """pymc_dp.audit searches neighbours in the domain and bounds the tempered density's loss."""
    mech = coin_mechs[sensitivity]
    res = pymc_dp.audit(mech, max_bases=40)
    assert res.method == "exact" and res.verdict == "pass", str(res)
    assert res.claimed == pytest.approx(mech.epsilon_per_draw)
    assert 0.8 * res.claimed <= res.measured <= res.claimed * (1 + 1e-6)


def test_audit_catches_a_wrong_beta(coin_mechs, monkeypatch):
    """A mechanism that tempered with twice its beta would be caught (a wrong sensitivity)."""
    mech = coin_mechs[2.0]
    wrong = mech.conjugate_plan.tempered(2.0)  # powers multiply: the likelihood to 2 beta
    monkeypatch.setattr(mech, "conjugate_plan", wrong)
    res = pymc_dp.audit(mech, max_bases=40)
    assert res.verdict == "fail" and res.measured > 1.2 * res.claimed, str(res)


def test_numerical_audit_of_a_non_conjugate_mechanism(laplace_mech):
    res = pymc_dp.audit(laplace_mech, max_bases=30)
    assert res.method == "numerical" and res.verdict == "pass", str(res)
    assert 0.85 * res.claimed <= res.measured <= res.claimed


def test_statistical_audit_of_private_map(coin_mechs):
    """The acceptance check of issue 6: the statistical audit passes on the released mechanism."""
    mech = coin_mechs[2.0]
    res = pymc_dp.audit(mech, method="statistical", runs=100_000, max_bases=30, random_seed=3)
    assert res.sampler == "exact" and res.verdict == "pass", str(res)
    assert res.measured <= res.claimed < res.power


@pytest.mark.extended
@pytest.mark.parametrize("backend, needs", [("numpyro", "numpyro"), ("blackjax", "blackjax"), ("nutpie", "nutpie")])
def test_other_nuts_backends_sample_the_tempered_density(backend, needs):
    """The tempering Potential reaches every backend: 400 released draws against the quadrature CDF."""
    pytest.importorskip(needs)
    mech = pymc_dp.private_map(laplace_location(), epsilon=40.0, data=LAPLACE_DOMAIN, sensitivity=2.0,
                               draws=400, ledger=None)
    assert mech.beta == pytest.approx(mech.epsilon_per_draw / 4.0)
    idata = mech.sample(method="mcmc", nuts_sampler=backend, chains=2, tune=300, random_seed=11, progressbar=False)
    assert json.loads(idata.attrs["pymc_dp"])["release"]["sampler"] == backend
    draws = idata.posterior["mu"].values.ravel()
    lo, hi = interval(mech, "mu")
    assert np.all((draws >= lo) & (draws <= hi))
    x = np.asarray(mech.private_model.model["x"].get_value())
    grid = quadrature_grid(lo, hi, 8001)
    dens = np.exp(normalised(laplace_log_kernel(x, mech.beta, grid), grid))
    cdf = integrate.cumulative_trapezoid(dens, grid, initial=0.0)
    cdf /= cdf[-1]
    assert stats.kstest(draws, lambda s: np.interp(s, grid, cdf)).pvalue > ALPHA


def test_accepts_a_model_builder():
    """As the other mechanisms: a zero-argument function returning the model."""
    mech = pymc_dp.private_map(coin, epsilon=1.0, data=COIN_DOMAIN, ledger=None)
    ref = pymc_dp.private_map(coin(), epsilon=1.0, data=COIN_DOMAIN, ledger=None)
    assert mech.certificate == ref.certificate
    with pytest.raises(TypeError, match="not a pm.Model"):
        pymc_dp.private_map(lambda: None, epsilon=1.0, data=COIN_DOMAIN, ledger=None)
