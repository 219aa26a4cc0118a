"""Private Newton steps for a logistic regression (pymc_dp.mechanisms.logistic).

Checked against exact computations: each stage's privacy loss over a grid of one record's
changes (score and information, rotated and not: at most the stage's epsilon, and attained
within a stated factor); the walk replayed from its outputs alone (post-processing); with the
noise gone, the steps reach the mode of the posterior they approximate; the noise-aware posterior
against the Laplace approximation; the statistical audit, which catches a halved score noise;
the release record, the ledger and the refusals.
"""

from __future__ import annotations

import itertools

import numpy as np
import pymc as pm
import pytest
from scipy.optimize import minimize
from scipy.special import expit

import pymc_dp
from pymc_dp.exceptions import DomainError, PrivacyError, UnsupportedFactorError
from pymc_dp.mechanisms.logistic import (
    NoisyLogistic,
    information_change_bound,
    scaled_design,
    score_change_bound,
    score_information,
)
from pymc_dp.mechanisms.noise import continuous_laplace
from pymc_dp.private_data import PrivateData
from tests.typed_refusals import assert_typed_refusal

DOMAINS = {"X": pymc_dp.Box(lo=[0.0, -2.0], hi=[1.0, 3.0]), "y": pymc_dp.Binary()}


def two_covariates(n=40, seed=0, link="logit_p", intercept=True):
    rng = np.random.default_rng(seed)
    X = np.column_stack([rng.uniform(0, 1, n), rng.uniform(-2, 3, n)])
    y = (rng.random(n) < expit(-0.5 + 1.5 * X[:, 0] - 0.8 * X[:, 1])).astype(np.int64)
    with pm.Model() as model:
        Xd, yd = pm.Data("X", X), pm.Data("y", y)
        w = pm.Normal("w", 0.0, 2.0, shape=2)
        eta = Xd @ w
        if intercept:
            eta = pm.Normal("a", 0.0, 2.0) + eta
        if link == "logit_p":
            pm.Bernoulli("obs", logit_p=eta, observed=yd)
        elif link == "p":
            p = pm.Deterministic("p", pm.math.invlogit(eta))
            pm.Bernoulli("obs", p=p, observed=yd)
        else:
            pm.Bernoulli("obs", p=pm.math.invprobit(eta), observed=yd)
    return model


def mechanism(n=40, **kwargs):
    return NoisyLogistic(two_covariates(n), epsilon=kwargs.pop("epsilon", 2.0), data=DOMAINS, ledger=None, **kwargs)


# --------------------------------------------------------------------------- reading
@pytest.mark.parametrize("link", ["logit_p", "p"])
def test_reads_the_logit_and_maps_the_coefficients_to_the_scaled_design(link):
    mech = NoisyLogistic(two_covariates(link=link), epsilon=1.0, data=DOMAINS, ledger=None)
    lg = mech.logistic
    assert lg.intercept and lg.dimension == 3
    assert lg.center == pytest.approx([0.5, 0.5]) and lg.half == pytest.approx([0.5, 2.5])
    # eta = a + w'x = c0 + c'z with z = (x - center) / half: the same logit at every record
    a, w = 0.3, np.array([1.2, -0.7])
    from pytensor.graph.replace import graph_replace

    expr = graph_replace(mech._coefficient_vector(), {mech.model["a"]: np.float64(a), mech.model["w"]: w}, strict=False)
    c = expr.eval()
    X = np.asarray(mech.model["X"].get_value())
    Z = scaled_design(lg, {"X": X})
    assert Z @ c == pytest.approx(a + X @ w)
    assert np.all(np.abs(Z) <= 1.0 + 1e-12)


def test_without_an_intercept_the_covariates_are_scaled_not_centred():
    mech = NoisyLogistic(two_covariates(intercept=False), epsilon=1.0, data=DOMAINS, ledger=None)
    assert not mech.logistic.intercept and mech.logistic.dimension == 2
    assert mech.logistic.center == pytest.approx([0.0, 0.0]) and mech.logistic.half == pytest.approx([1.0, 3.0])


def test_refusals():
    with pytest.raises(UnsupportedFactorError, match="invlogit"):
        NoisyLogistic(two_covariates(link="probit"), epsilon=1.0, data=DOMAINS, ledger=None)
    with pytest.raises(DomainError, match="Binary"):
        NoisyLogistic(two_covariates(), epsilon=1.0, data={**DOMAINS, "y": pymc_dp.Integers(0, 2)}, ledger=None)
    for kwargs, match in (({"delta": 1e-6}, "delta"), ({"weights": {"a": 1.0}}, "weights"), ({"unit": "attribute"}, "attribute")):
        with pytest.raises(NotImplementedError, match=match):
            NoisyLogistic(two_covariates(), epsilon=1.0, data=DOMAINS, ledger=None, **kwargs)
    for bad in ([(0.5, 0.4)], [(0.5, 0.0), (0.5, 0.0)], [(0.0, 1.0)], [], [(0.5, -0.5), (1.0, 0.0)], "x"):
        with pytest.raises(PrivacyError, match="stages"):
            NoisyLogistic(two_covariates(), epsilon=1.0, data=DOMAINS, ledger=None, stages=bad)
    with pytest.raises(UnsupportedFactorError, match="refine"):
        pymc_dp.noisy_statistics(two_covariates(), epsilon=1.0, data=DOMAINS, ledger=None, refine=0.5)


def test_an_option_the_newton_steps_do_not_implement_is_a_typed_refusal_and_charges_nothing(tmp_path):
    """Called directly (not through make_private(path=...)), each option NoisyLogistic does not
    implement is a PathNotImplementedError: a PrivacyError and a NotImplementedError."""
    ledger = pymc_dp.Ledger(tmp_path / "ledger.sqlite", epsilon=10.0)
    model = two_covariates()
    dataset = PrivateData.from_model(model, DOMAINS, "record").fingerprint
    for kwargs, match in (({"delta": 1e-6}, "delta > 0.*delta=0"), ({"weights": {"a": 1.0}}, "weights=.*stages="),
                          ({"unit": "attribute"}, "unit='attribute'.*unit='record'")):
        assert_typed_refusal(lambda: pymc_dp.noisy_statistics(model, epsilon=1.0, data=DOMAINS, ledger=ledger, **kwargs),
                             kind=pymc_dp.PathNotImplementedError, match=match, ledger=ledger, dataset=dataset)


def test_noisy_statistics_routes_a_logistic_regression_here():
    mech = pymc_dp.noisy_statistics(two_covariates(), epsilon=1.0, data=DOMAINS, ledger=None, stages=[(0.5, 0.5)])
    assert isinstance(mech, NoisyLogistic) and mech.stages == ((0.5, 0.5),)
    with pm.Model() as normal:
        pm.Normal("obs", pm.Normal("m", 0, 1), 1.0, observed=pm.Data("y", np.zeros(3)))
    with pytest.raises(UnsupportedFactorError, match="stages"):
        pymc_dp.noisy_statistics(normal, epsilon=1.0, data={"y": pymc_dp.Interval(-1, 1)}, ledger=None, stages=[(1.0, 0.0)])


# --------------------------------------------------------------------------- privacy maps
def _records(lg, per_axis=7):
    """Covariate rows over the declared box (a grid with its corners)."""
    axes = [np.linspace(f.lo, f.hi, per_axis) for f in lg.features]
    return np.array(list(itertools.product(*axes)))


def _max_loss(terms, scales):
    """The largest sum_j |t_j(a) - t_j(b)| / s_j over every pair of records' terms."""
    return np.max(np.abs(terms[:, None, :] - terms[None, :, :]) @ (1.0 / scales))


@pytest.mark.parametrize("stage", [0, 1, 2])
def test_each_stages_loss_over_one_record_is_its_epsilon(stage):
    """For a public iterate, basis and weights (stage 0: the plain coordinates; stage 1: the
    score rotated; stage 2: the information too), the loss of the score's and the information's
    release over every pair of records on a grid is at most its epsilon, and a pair attains
    nearly all of it for the score (its bound is joint over the two records) and most of it for
    the information (its bound is per entry: no pair attains every entry's range at once)."""
    mech = mechanism()
    lg = mech.logistic
    rng = np.random.default_rng(stage)
    D = lg.dimension
    c = rng.normal(0.0, 1.5, (1, D))
    A = rng.normal(size=(D, D))
    H = (A @ A.T + np.diag([0.1, 5.0, 40.0])[:D, :D])[None]  # a public information estimate
    X = _records(lg)
    Z = scaled_design(lg, {"X": X})
    iu = np.triu_indices(D)
    for eps in (0.7, 2.0):
        V, b = mech._score_scales(stage, c, None if stage == 0 else H, eps)
        p = expit(Z @ c[0])
        terms = np.concatenate([(y - p)[:, None] * (Z @ V[0]) for y in (0.0, 1.0)])
        loss = _max_loss(terms, b[0])
        assert loss <= eps * (1 + 1e-9)
        assert loss >= 0.98 * eps
        V, s = mech._information_scales(stage, c, None if stage == 0 else H, eps)
        ZV = Z @ V[0]
        a = p * (1 - p)
        terms = np.array([(a_ * np.outer(z, z))[iu] for a_, z in zip(a, ZV)])
        loss = _max_loss(terms, s[0])
        assert loss <= eps * (1 + 1e-9)
        assert loss >= 0.6 * eps


def test_an_iterate_far_out_keeps_the_information_noisy():
    """Where every record's slope underflows (|z'c| >= 40 over the whole box: a noisy step gone
    far, as at small n), the information's bound must not collapse to 0: sigma'(-40) is 4e-18,
    and p (1 - p) computed as 0 at +40 once set the noise scale to 1e-300. The loss over the
    grid stays within epsilon, and the scale is at least the floor's."""
    mech = mechanism()
    lg = mech.logistic
    D = lg.dimension
    Z = scaled_design(lg, {"X": _records(lg)})
    iu = np.triu_indices(D)
    for sign in (1.0, -1.0):
        c = np.zeros((1, D))
        c[0, 0] = sign * 60.0  # the intercept alone: z'c = +-60 at every record
        V, s = mech._information_scales(0, c, None, 1.0)
        assert np.all(s[0] > 1e-13)
        a = expit(Z @ c[0]) * expit(-(Z @ c[0]))
        terms = np.array([(a_ * np.outer(z, z))[iu] for a_, z in zip(a, Z @ V[0])])
        assert _max_loss(terms, s[0]) <= 1.0 * (1 + 1e-9)
        _, info = score_information(Z, np.zeros(len(Z)), c, V, True)
        assert np.all(np.abs(info[0][iu]) <= len(Z) * 1e-17)


def test_the_score_bound_uses_the_iterate():
    """At c = 0 every residual is +-1/2 and the bound is closed-form, max_Q sum_j |V_j'z| / w_j;
    at a steep iterate the residuals of records whose logits differ in sign cannot both be near 1,
    and the joint bound is below the coordinate-wise one, 2 sigma(max|z'c|) max_Q sum_j |V_j'z|."""
    mech = mechanism()
    D = mech.logistic.dimension
    reach = np.max(np.abs(mech.corners).sum(axis=1))
    _, flat = mech._score_scales(0, np.zeros((1, D)), None, 1.0)
    assert flat[0] == pytest.approx(np.full(D, reach), rel=1e-8)
    c = np.array([[0.3, 4.0, -3.0]])
    _, steep = mech._score_scales(0, c, None, 1.0)
    coordinatewise = 2.0 * expit(np.abs(c @ mech.corners.T).max()) * reach
    assert np.all(steep[0] < 0.9 * coordinatewise)


def test_above_the_slab_dimension_the_score_bound_is_the_coordinatewise_one(monkeypatch):
    """The joint bound enumerates 2^(D-1) sign vectors; above SCORE_SLAB_DIMENSION the scales
    are the coordinate-wise bound's, 2 sigma(max|z'c|) max_Q sum_j |V_j'z| / eps."""
    import pymc_dp.mechanisms.logistic as logistic

    mech = mechanism()
    D = mech.logistic.dimension
    c = np.array([[0.3, 4.0, -3.0]])
    monkeypatch.setattr(logistic, "SCORE_SLAB_DIMENSION", D - 1)
    _, scales = mech._score_scales(0, c, None, 1.0)
    coordinatewise = 2.0 * expit(np.abs(c @ mech.corners.T).max()) * np.abs(mech.corners).sum(axis=1).max()
    assert scales[0] == pytest.approx(np.full(D, coordinatewise), rel=1e-8)


def _random_stage(seed, spreads):
    """A mechanism and a public stage's choices: an iterate (its spread cycling through
    ``spreads``) and an orthonormal basis; and the generator for more."""
    mech = mechanism()
    D = mech.logistic.dimension
    rng = np.random.default_rng(seed)
    c = rng.normal(0.0, spreads[seed % len(spreads)], (1, D))
    return mech, c, np.linalg.qr(rng.normal(size=(D, D)))[0][None], rng


@pytest.mark.parametrize("seed", range(6))
def test_the_score_change_bound_is_the_supremum_over_record_pairs(seed):
    """score_change_bound against brute force: at least the largest change over a fine grid of
    record pairs (41 x 41 covariates, both labels), at most 1% above the change two records at
    its vertices attain, and at most the coordinate-wise bound."""
    mech, c, V, rng = _random_stage(seed, (0.5, 2.0, 8.0))
    lg, D = mech.logistic, mech.logistic.dimension
    A = V / rng.uniform(0.3, 2.0, (1, 1, D))
    bound = score_change_bound(mech.corners, c, A)[0]
    attained = score_change_bound(mech.corners, c, A, attained=True)[0]
    Z = scaled_design(lg, {"X": _records(lg, per_axis=41)})
    p = expit(Z @ c[0])
    grid = _max_loss(np.concatenate([(y - p)[:, None] * (Z @ A[0]) for y in (0.0, 1.0)]), np.ones(D))
    assert grid <= bound
    assert attained <= bound <= 1.01 * attained
    assert bound <= 2.0 * expit(np.abs(c @ mech.corners.T).max()) * np.abs(mech.corners @ A[0]).sum(axis=1).max()


def test_the_score_change_bound_is_exact_where_every_logit_is_equal():
    """With the slopes 0 (the walk's first iterate when the prior centres them there) every record
    has the same logit: one slab, no edge crossings, and the bound is the attained change."""
    mech = mechanism()
    D = mech.logistic.dimension
    c = np.zeros((1, D))
    c[0, 0] = 1.3
    A = np.eye(D)[None] * np.array([1.0, 0.5, 2.0])
    bound = score_change_bound(mech.corners, c, A)[0]
    assert bound == pytest.approx(score_change_bound(mech.corners, c, A, attained=True)[0], rel=1e-8)
    # the residuals are two constants, so each change is linear in z: the corners' pairs attain it
    r = np.array([1.0, 0.0]) - expit(1.3)
    terms = np.concatenate([r_ * (mech.corners @ A[0]) for r_ in r])
    assert bound == pytest.approx(_max_loss(terms, np.ones(D)), rel=1e-8)


@pytest.mark.parametrize("seed", range(6))
def test_the_information_change_bound_covers_each_entrys_range(seed):
    """information_change_bound against brute force: every entry's range over a fine grid of
    records (61 x 61) lies within its bound, the bound is at most the coordinate-wise
    alpha R_j R_k (twice off the diagonal), and it is within 30% of the grid's range."""
    mech, c, V, _ = _random_stage(seed, (0.5, 1.5, 6.0))
    lg, D = mech.logistic, mech.logistic.dimension
    bound = information_change_bound(lg.lo, lg.hi, lg.intercept, c, V)[0]
    Z = scaled_design(lg, {"X": _records(lg, per_axis=61)})
    a = expit(Z @ c[0]) * expit(-(Z @ c[0]))
    iu = np.triu_indices(D)
    ZV = Z @ V[0]
    entries = a[:, None] * ZV[:, iu[0]] * ZV[:, iu[1]]
    spread = entries.max(axis=0) - entries.min(axis=0)
    assert np.all(spread <= bound)
    assert np.all(bound <= 1.3 * spread)
    eta = c[0] @ mech.corners.T
    gap = 0.0 if eta.min() <= 0 <= eta.max() else np.abs(eta).min()
    reach = np.abs(mech.corners @ V[0]).max(axis=0)
    coordinatewise = expit(gap) * expit(-gap) * np.where(iu[0] == iu[1], 1.0, 2.0) * reach[iu[0]] * reach[iu[1]]
    assert np.all(bound <= coordinatewise * (1 + 1e-8))


# --------------------------------------------------------------------------- the walk
def test_the_walk_replays_from_its_outputs_alone():
    mech = mechanism(n=60)
    Z, y = mech._data(mech._values)
    out, states = mech._walk(3, lambda c, V, info: score_information(Z, y, c, V, info),
                             lambda s: continuous_laplace(np.zeros(s.shape), 1.0) * s)
    again, replayed = mech._walk(3, outputs=out)
    assert np.array_equal(again, out)
    for a, b in zip(states, replayed):
        for key in a:
            assert np.allclose(a[key], b[key], rtol=0, atol=0, equal_nan=True), key


def test_without_noise_the_steps_reach_the_mode_they_approximate():
    """At a vanishing noise the walk is Newton's method on the log likelihood plus the prior's
    Gaussian approximation: its last iterate is that objective's maximum."""
    mech = NoisyLogistic(two_covariates(n=300, seed=3), epsilon=1e12, data=DOMAINS, ledger=None,
                         stages=[(0.1, 0.1)] * 5)
    Z, y = mech._data(mech._values)
    _, states = mech._walk(1, lambda c, V, info: score_information(Z, y, c, V, info), lambda s: np.zeros(s.shape))
    m, P = mech.prior_mean, mech.prior_precision

    def objective(c):
        eta = Z @ c
        return -(y @ eta - np.logaddexp(0.0, eta).sum()) + 0.5 * (c - m) @ P @ (c - m)

    best = minimize(objective, np.zeros(len(m)), method="BFGS", options={"gtol": 1e-10}).x
    assert states[-1]["c"][0] == pytest.approx(best, abs=1e-5)


# --------------------------------------------------------------------------- the release
def test_release_charges_once_states_the_stages_and_withholds_what_reads_the_data(tmp_path):
    ledger = pymc_dp.Ledger(tmp_path / "l.sqlite", epsilon=3.0)
    model = two_covariates(n=200, link="p")
    mech = pymc_dp.noisy_statistics(model, epsilon=2.0, data=DOMAINS, ledger=ledger)
    idata = mech.sample(100, tune=200, chains=1, random_seed=0)
    mech.sample(50, tune=100, chains=1, random_seed=1)  # post-processing: free
    assert ledger.spent(mech.dataset_id).epsilon == pytest.approx(2.0)
    assert set(idata.posterior.data_vars) == {"a", "w"}  # p reads the private covariates
    rec = pymc_dp.record.read(idata)
    assert rec["withheld"] == ["p"]
    assert len(rec["newton"]["stages"]) == 5
    shares = [s["epsilon_score"] + s["epsilon_information"] for s in rec["newton"]["stages"]]
    assert sum(shares) == pytest.approx(2.0)
    assert len(rec["released"]["statistics"]) == len(mech.output_names()) == 3 * 6 + 5 * 3
    assert "Bernstein-von Mises" in rec["law"]["obs"]
    assert "private Newton steps" in str(pymc_dp.report(idata))


@pytest.mark.slow
def test_the_noise_aware_posterior_is_the_laplace_approximation_when_the_noise_vanishes():
    """At epsilon 1e6 the released score is the exact score: the posterior is then the
    Bernstein-von Mises normal about the maximum-likelihood estimate, tempered by the prior,
    which at n = 2000 matches the Laplace approximation of the exact posterior."""
    model = two_covariates(n=2000, seed=5)
    mech = NoisyLogistic(model, epsilon=1e6, data=DOMAINS, ledger=None)
    idata = mech.sample(1000, tune=1000, chains=2, random_seed=2)
    Z, y = mech._data(mech._values)
    lg = mech.logistic
    # the exact posterior's mode and curvature in c (the prior N(0, 2^2) on a and w, mapped to c)
    A = np.zeros((3, 3))
    A[0, 0], A[0, 1:], A[1:, 1:] = 1.0, lg.center, np.diag(lg.half)
    P = np.linalg.inv(A @ (4.0 * np.eye(3)) @ A.T)

    def objective(c):
        eta = Z @ c
        return -(y @ eta - np.logaddexp(0.0, eta).sum()) + 0.5 * c @ P @ c

    c_hat = minimize(objective, np.zeros(3), method="BFGS", options={"gtol": 1e-10}).x
    p = expit(Z @ c_hat)
    cov_c = np.linalg.inv(Z.T @ (Z * (p * (1 - p))[:, None]) + P)
    Ainv = np.linalg.inv(A)
    mean_b, sd_b = Ainv @ c_hat, np.sqrt(np.diag(Ainv @ cov_c @ Ainv.T))
    post = idata.posterior
    got_mean = np.r_[post["a"].mean().item(), post["w"].mean(("chain", "draw")).values]
    got_sd = np.r_[post["a"].std().item(), post["w"].std(("chain", "draw")).values]
    assert np.all(np.abs(got_mean - mean_b) < 0.15 * sd_b)
    assert got_sd == pytest.approx(sd_b, rel=0.12)


# --------------------------------------------------------------------------- audit
class HalvedScore(NoisyLogistic):
    """The score released with half its noise: its stages are then 2 epsilon_s-DP."""

    def _score_scales(self, t, c, H, eps):
        V, b = super()._score_scales(t, c, H, eps)
        return V, b / 2


def _tiny(cls, **kwargs):
    rng = np.random.default_rng(0)
    x = rng.uniform(-1, 1, 4)
    with pm.Model() as model:
        xd, yd = pm.Data("x", x), pm.Data("y", np.array([0, 1, 1, 0]))
        pm.Bernoulli("obs", logit_p=pm.Normal("a", 0, 1) + pm.Normal("b", 0, 1) * xd, observed=yd)
    return cls(model, epsilon=1.0, data={"x": pymc_dp.Interval(-1, 1), "y": pymc_dp.Binary()}, ledger=None,
               stages=[(0.6, 0.1), (0.3, 0.0)], **kwargs)


def test_statistical_audit_passes():
    res = pymc_dp.audit(_tiny(NoisyLogistic), runs=20_000, confidence=0.999, random_seed=0, max_pairs=200)
    assert res.verdict == "pass", str(res)


@pytest.mark.extended
def test_statistical_audit_catches_halved_score_noise():
    res = pymc_dp.audit(_tiny(HalvedScore), runs=40_000, confidence=0.999, random_seed=0, max_pairs=200)
    assert res.verdict == "fail", str(res)
    assert res.measured > 1.0


# --------------------------------------------------------------------------- recommend
def test_recommend_proposes_newton_steps_from_n_epsilon_2e5():
    for n, path in ((200, "make_private"), (9_999, "make_private"), (10_000, "noisy_statistics")):
        rec = pymc_dp.recommend(two_covariates(n=n), epsilon=20.0, data=DOMAINS)
        assert rec.path == path, rec.reason
        assert "private Newton steps" in rec.reason
        # below the threshold the advice does not promise a useful release
        assert ("more records or a larger epsilon" in rec.reason) == (path == "make_private")
