"""PASS-GLM: noise-aware logistic and Poisson regressions from noisy approximate sufficient
statistics (pymc_dp.mechanisms.pass_glm).

Checked by brute force: every statistic's span against the range of its term over a grid of one
record's domain (corners included) and random records; the certified joint bound against every
pair of corner records and of random records. The Gaussian law of ``u`` against the PASS-GLM
polynomial (its log-density in the coefficients). The statistical audit, which passes and catches
a halved noise scale; the refusals; a posterior near the non-private one at a moderate epsilon.
"""

from __future__ import annotations

import itertools
import json

import numpy as np
import pymc as pm
import pytest
from scipy import optimize, stats
from scipy.special import expit

import pymc_dp
from pymc_dp.exceptions import DomainError, UnsupportedFactorError
from pymc_dp.mechanisms.noise import continuous_laplace
from pymc_dp.mechanisms.pass_glm import PassGLM, glm_statistics, pass_glm, quadratic_approximation, read_glm
from pymc_dp.private_data import PrivateData
from tests.typed_refusals import assert_typed_refusal


def logistic(n=40, seed=0, lo=(0.0, -1.0), hi=(2.0, 3.0), coef=(0.3, 1.0, -0.5), prior_sd=1.5):
    rng = np.random.default_rng(seed)
    X = rng.uniform(lo, hi, (n, 2))
    z = (X - (np.array(lo) + hi) / 2) / ((np.array(hi) - lo) / 2)
    y = rng.binomial(1, expit(coef[0] + z @ np.array(coef[1:])))
    with pm.Model() as model:
        Xd, yd = pm.Data("X", X), pm.Data("y", y)
        a = pm.Normal("alpha", 0, prior_sd)
        b = pm.Normal("beta", 0, prior_sd, shape=2)
        pm.Bernoulli("lik", logit_p=a + Xd @ b, observed=yd)
    return model, {"X": pymc_dp.Box(list(lo), list(hi)), "y": pymc_dp.Binary()}


def poisson(n=40, seed=0, top=20):
    rng = np.random.default_rng(seed)
    x = rng.uniform(-1, 1, n)
    y = np.minimum(rng.poisson(np.exp(1.0 + 0.5 * x)), top)
    with pm.Model() as model:
        xd, yd = pm.Data("x", x), pm.Data("y", y)
        pm.Poisson("lik", mu=pm.math.exp(pm.Normal("a", 1, 1) + pm.Normal("b", 0, 1) * xd), observed=yd)
    return model, {"x": pymc_dp.Interval(-1, 1), "y": pymc_dp.Integers(0, top)}


def _records(domains, model, grid=9, random=400, seed=1):
    """Records of one row over the domain: a grid with the corners, and random ones."""
    glm = read_glm(model, domains)
    lo = np.array([f.lo for f in glm.features])
    hi = np.array([f.hi for f in glm.features])
    ydom = domains[glm.y]
    ys = np.arange(ydom.lo, ydom.hi + 1)
    axes = [np.linspace(a, b, grid) for a, b in zip(lo, hi)]
    rows = np.array([(*x, y) for x in itertools.product(*axes) for y in ys], float)
    rng = np.random.default_rng(seed)
    rand = np.column_stack([rng.uniform(lo, hi, (random, len(lo))), rng.choice(ys, random)])
    return glm, np.concatenate([rows, rand])


def _per_row(glm, rows, containers):
    out = []
    for r in rows:
        arrays = {glm.y: r[-1:]}
        if containers == "X":
            arrays["X"] = r[None, :-1]
        else:
            arrays["x"] = r[:1]
        out.append(glm_statistics(glm, arrays))
    return np.array(out)


# --------------------------------------------------------------------------- sensitivities
@pytest.mark.parametrize("which", ["logistic", "poisson"])
def test_spans_are_the_ranges_over_one_record(which):
    model, domains = logistic() if which == "logistic" else poisson()
    glm, rows = _records(domains, model)
    t = _per_row(glm, rows, "X" if which == "logistic" else "x")
    spans = np.array([s for _, s, _, _ in glm.stats])
    ranges = t.max(axis=0) - t.min(axis=0)
    assert np.all(ranges <= spans + 1e-12)
    np.testing.assert_allclose(ranges, spans, rtol=1e-12)  # attained at corners of the grid


@pytest.mark.parametrize("which", ["logistic", "poisson"])
def test_joint_bound_covers_every_change_and_is_attained(which):
    model, domains = logistic() if which == "logistic" else poisson()
    mech = pass_glm(model, epsilon=1.0, data=domains, ledger=None)
    glm, rows = _records(domains, model, grid=5, random=200)
    t = _per_row(glm, rows, "X" if which == "logistic" else "x")
    spans = np.array([mech.sensitivity[n] for n, *_ in glm.stats])
    change = np.abs(t[:, None, :] - t[None, :, :]) / spans
    worst = float(change.sum(axis=2).max())
    K = mech.joint["K"]
    assert worst <= K * (1 + 1e-12)
    assert worst >= K / 1.02  # the certified bound is within 2% of a change of two records
    # the noise scales are span_j K / epsilon: the release's loss over every pair is <= epsilon
    b = np.array([mech.noise_scales[n] for n, *_ in glm.stats])
    assert float((np.abs(t[:, None, :] - t[None, :, :]) / b).sum(axis=2).max()) <= 1.0 + 1e-9


def test_the_law_of_u_is_the_pass_polynomial():
    """log N(u; S a / y_h, 2 b2 S / y_h^2) - the PASS-GLM log-likelihood is free of c."""
    rng = np.random.default_rng(3)
    n, F = 50, 2
    z = np.column_stack([np.ones(n), rng.uniform(-1, 1, (n, F))])
    y = rng.binomial(1, 0.4, n)
    S = z.T @ z
    for family, y_c, y_h in (("logistic", 0.5, 0.5), ("poisson", 3.0, 3.0)):
        b0, b1, b2 = quadratic_approximation(family, (-2.0, 1.5))
        u = z.T @ ((y - y_c) / y_h)
        diffs = []
        for _ in range(5):
            c = rng.normal(size=F + 1)
            mean = S @ ((b1 - y_c) * np.eye(F + 1)[0] + 2 * b2 * c) / y_h
            law = stats.multivariate_normal(mean, 2 * b2 * S / y_h**2).logpdf(u)
            s = z @ c
            diffs.append(law - np.sum(y * s - (b0 + b1 * s + b2 * s * s)))
        np.testing.assert_allclose(diffs, diffs[0], rtol=0, atol=1e-8)


def test_quadratic_approximation_is_chebyshev():
    b0, b1, b2 = quadratic_approximation("logistic", (-4.0, 4.0))
    assert b1 == pytest.approx(0.5, abs=1e-12) and 0 < b2 < 0.125
    s = np.cos(np.pi * (np.arange(3) + 0.5) / 3) * 4  # the Chebyshev nodes: interpolated exactly
    np.testing.assert_allclose(b0 + b1 * s + b2 * s * s, np.logaddexp(0, s), rtol=1e-12)
    with pytest.raises(ValueError, match="interval"):
        quadratic_approximation("poisson", (1.0, 1.0))


# --------------------------------------------------------------------------- audit
class HalvedPassGLM(PassGLM):
    def _noisy(self, true, runs=None):
        out = {}
        for _, s in self.statistics:
            v = np.full(1 if runs is None else runs, true[s.name], dtype=float)
            out[s.name] = continuous_laplace(v, self.noise_scales[s.name] / 2)
        return out


def test_statistical_audit_passes():
    model, domains = logistic(n=6)
    mech = pass_glm(model, epsilon=1.0, data=domains, ledger=None)
    assert mech.joint["attained"] >= 0.98 * mech.joint["K"]
    res = pymc_dp.audit(mech, runs=200_000, confidence=0.999, random_seed=0, max_pairs=2000)
    assert res.verdict == "pass", str(res)
    assert res.measured > 0.5  # the audit sees the loss (0.59-0.69 over seeds 0, 10-15)


def test_statistical_audit_catches_halved_noise():
    model, domains = logistic(n=6)
    bad = HalvedPassGLM(model, epsilon=1.0, data=domains, ledger=None)
    res = pymc_dp.audit(bad, runs=200_000, confidence=0.999, random_seed=0, max_pairs=2000)
    # the true loss is about 2; the seed fixes the noise too (audit_noise), so this reads 1.43 on
    # every run (1.35-1.60 over seeds 0, 10-15 at 200,000 runs; 1.16-1.50 at 50,000)
    assert res.verdict == "fail", str(res)
    assert res.measured > 1.2


# --------------------------------------------------------------------------- refusals
def test_refusals_name_the_factor():
    rng = np.random.default_rng(0)
    X, y = rng.uniform(-1, 1, (10, 2)), rng.binomial(1, 0.5, 10)
    dom = {"X": pymc_dp.Box(-1, 1), "y": pymc_dp.Binary()}
    with pm.Model() as probit:
        Xd, yd = pm.Data("X", X), pm.Data("y", y)
        pm.Bernoulli("lik", p=pm.math.invprobit(pm.Normal("a") + Xd @ pm.Normal("b", shape=2)), observed=yd)
    with pytest.raises(UnsupportedFactorError, match="'lik'.*logit"):
        pass_glm(probit, epsilon=1.0, data=dom, ledger=None)
    with pm.Model() as no_intercept:
        Xd, yd = pm.Data("X", X), pm.Data("y", y)
        pm.Bernoulli("lik", logit_p=Xd @ pm.Normal("b", shape=2), observed=yd)
    with pytest.raises(UnsupportedFactorError, match="'lik'.*intercept"):
        pass_glm(no_intercept, epsilon=1.0, data=dom, ledger=None)
    with pm.Model() as normal:
        Xd, yd = pm.Data("X", X), pm.Data("y", y.astype(float))
        pm.Normal("lik", pm.Normal("a") + Xd @ pm.Normal("b", shape=2), 1.0, observed=yd)
    with pytest.raises(UnsupportedFactorError, match="'lik'.*Normal"):
        pass_glm(normal, epsilon=1.0, data={"X": pymc_dp.Box(-1, 1), "y": pymc_dp.Interval(0, 1)}, ledger=None)
    with pm.Model() as identity_poisson:
        Xd, yd = pm.Data("X", X), pm.Data("y", y)
        pm.Poisson("lik", mu=pm.math.abs(pm.Normal("a") + Xd @ pm.Normal("b", shape=2)), observed=yd)
    with pytest.raises(UnsupportedFactorError, match="'lik'.*exp"):
        pass_glm(identity_poisson, epsilon=1.0, data={"X": pymc_dp.Box(-1, 1), "y": pymc_dp.Integers(0, 5)}, ledger=None)
    model, domains = poisson()
    with pytest.raises(DomainError, match="'y'.*Integers"):
        pass_glm(model, epsilon=1.0, data={**domains, "y": pymc_dp.Interval(0, 20)}, ledger=None)
    model, domains = logistic()
    with pytest.raises(ValueError, match="approximation='fixed'"):
        pass_glm(model, epsilon=1.0, data=domains, ledger=None, interval=(-3, 3))
    da = pytest.importorskip("dask.array")
    values = {"X": da.from_array(np.asarray(model["X"].get_value()), chunks=10), "y": np.asarray(model["y"].get_value())}
    with pytest.raises(NotImplementedError, match="Dask"):
        pass_glm(model, epsilon=1.0, data=domains, values=values, ledger=None)


# --------------------------------------------------------------------------- utility
def _map_logistic(z, y, prior_sd):
    def neg(c):
        s = z @ c
        return -(np.sum(y * s - np.logaddexp(0, s)) - np.sum(c**2) / (2 * prior_sd**2))
    return optimize.minimize(neg, np.zeros(z.shape[1]), method="BFGS").x


def test_posterior_near_the_non_private_fit_and_charged_once(tmp_path):
    model, domains = logistic(n=400, seed=2, lo=(-1.0, -1.0), hi=(1.0, 1.0), coef=(0.3, 1.0, -0.7))
    X, y = np.asarray(model["X"].get_value()), np.asarray(model["y"].get_value())
    z = np.column_stack([np.ones(len(y)), X])
    ref = _map_logistic(z, y, 1.5)
    ledger = pymc_dp.Ledger(tmp_path / "ledger.sqlite", epsilon=5.0)
    mech = pass_glm(model, epsilon=5.0, data=domains, ledger=ledger)
    idata = mech.sample(200, chains=1, tune=300, random_seed=0)
    post = idata.posterior
    got = np.concatenate([[float(post["alpha"].mean())], post["beta"].mean(("chain", "draw")).values])
    sd = np.concatenate([[float(post["alpha"].std())], post["beta"].std(("chain", "draw")).values])
    # the non-private posterior sds here are about 0.11, 0.19, 0.18; the release within 2 of them
    assert np.all(np.abs(got - ref) < np.array([0.25, 0.4, 0.4])), (got, ref)
    assert np.all(sd < 0.4)
    assert mech.spent().epsilon == pytest.approx(5.0)
    again = mech.sample(20, chains=1, tune=20, random_seed=1)  # post-processing: charged once
    assert mech.spent().epsilon == pytest.approx(5.0)
    attrs = json.loads(idata.attrs["pymc_dp"])
    assert attrs["release"]["charged"] is True and json.loads(again.attrs["pymc_dp"])["release"]["charged"] is False
    assert attrs["approximation"] == {"family": "logistic", "kind": "adaptive"}
    assert set(attrs["released"]) == {"statistics"} and attrs["released"]["statistics"] == mech.released
    report = str(pymc_dp.report(idata))
    assert "PASS-GLM" in report and "sum(y'*z_X[0])" in report


def test_poisson_posterior_is_near_the_non_private_fit():
    """A Poisson regression with counts declared in 0..40: the noise on sum y'z is 20 counts per
    unit of y', so the posterior is wide at n = 300, epsilon = 5 (sds about 0.1 and 0.3 against
    0.03 and 0.06 non-private); it must still hold the non-private fit (3.5 of its sds)."""
    rng = np.random.default_rng(7)
    X = 2.0 * rng.beta(2.0, 2.0, size=(300, 2)) - 1.0
    y = np.minimum(rng.poisson(np.exp(1.5 - 0.5 * X[:, 0] + 0.2 * X[:, 1])), 40)
    with pm.Model() as model:
        Xd, yd = pm.Data("X", X), pm.Data("y", y)
        pm.Poisson("lik", mu=pm.math.exp(pm.Normal("alpha", 1, 0.5) + Xd @ pm.Normal("beta", 0, 0.5, shape=2)), observed=yd)
    z = np.column_stack([np.ones(len(y)), X])

    def neg(c):
        s = z @ c
        return -(np.sum(y * s - np.exp(s)) - (c[0] - 1) ** 2 / 0.5 - np.sum(c[1:] ** 2) / 0.5)

    ref = optimize.minimize(neg, np.zeros(3), method="BFGS").x
    mech = pass_glm(model, epsilon=5.0, data={"X": pymc_dp.Box(-1, 1), "y": pymc_dp.Integers(0, 40)}, ledger=None)
    idata = mech.sample(200, chains=1, tune=250, random_seed=0)
    post = idata.posterior
    got = np.concatenate([[float(post["alpha"].mean())], post["beta"].mean(("chain", "draw")).values])
    sd = np.concatenate([[float(post["alpha"].std())], post["beta"].std(("chain", "draw")).values])
    assert np.all(np.abs(got - ref) < 3.5 * sd), (got, ref, sd)
    assert np.all(sd < 0.6) and sd[0] < 0.25


def test_fixed_approximation_interval_from_the_prior():
    """approximation='fixed': the interval is the prior's central 90% box over the covariate box
    (clipped to [-6, 6] for a logit), the coefficients are Chebyshev's, and the release says so."""
    model, domains = logistic(n=60, lo=(-1.0, -1.0), hi=(1.0, 1.0), prior_sd=0.5)
    mech = pass_glm(model, epsilon=2.0, data=domains, ledger=None, approximation="fixed")
    q = stats.norm.ppf(0.95) * 0.5  # alpha, beta_j ~ N(0, 0.5): each coordinate's box is +-q
    assert mech.interval == pytest.approx((-3 * q, 3 * q), rel=0.1)
    assert mech.coefficients == pytest.approx(quadratic_approximation("logistic", mech.interval))
    wide = pass_glm(logistic(n=60, lo=(-1.0, -1.0), hi=(1.0, 1.0), prior_sd=5.0)[0], epsilon=2.0, data=domains, ledger=None, approximation="fixed")
    assert wide.interval == (-6.0, 6.0)
    given = pass_glm(model, epsilon=2.0, data=domains, ledger=None, approximation="fixed", interval=(-2, 3))
    assert given.interval == (-2.0, 3.0)
    idata = mech.sample(20, chains=1, tune=30, random_seed=0)
    attrs = json.loads(idata.attrs["pymc_dp"])
    assert attrs["approximation"]["kind"] == "fixed" and attrs["approximation"]["interval"] == list(mech.interval)
    assert "Chebyshev" in str(pymc_dp.report(idata))


def test_noisy_statistics_and_recommend_take_pass_glm_for_a_poisson_regression():
    """A Poisson regression on private covariates reaches PASS-GLM through the one entry point
    (it used to reach the Normal linear regression, which refused it), and recommend says so."""
    model, domains = poisson()
    mech = pymc_dp.noisy_statistics(model, epsilon=2.0, data=domains, ledger=None)
    assert isinstance(mech, PassGLM)
    rec = pymc_dp.recommend(model, epsilon=2.0, data=domains)
    assert rec.path == "noisy_statistics" and "PASS-GLM" in rec.reason
    auto = pymc_dp.make_private(model, epsilon=2.0, draws=1, data=domains, ledger=None, path="auto")
    assert isinstance(auto, PassGLM) and auto.path_choice.path == "noisy_statistics"


def test_dask_values_are_a_typed_refusal_and_charge_nothing(tmp_path):
    """Called directly, PASS-GLM refuses Dask values= with a PathNotImplementedError (a
    PrivacyError and a NotImplementedError) that names values= and says to pass NumPy arrays."""
    da = pytest.importorskip("dask.array")
    ledger = pymc_dp.Ledger(tmp_path / "ledger.sqlite", epsilon=10.0)
    model, domains = logistic()
    dataset = PrivateData.from_model(model, domains, "record").fingerprint
    values = {"X": da.from_array(np.asarray(model["X"].get_value()), chunks=10), "y": np.asarray(model["y"].get_value())}
    assert_typed_refusal(lambda: pass_glm(model, epsilon=1.0, data=domains, values=values, ledger=ledger),
                         kind=pymc_dp.PathNotImplementedError, match="values= with Dask.*NumPy arrays",
                         ledger=ledger, dataset=dataset)
