"""Models, claims and wrong rules shared by the tests of pymc_dp.audits (not a test module).

* conjugate models (``CONJUGATE``, exact audits): every conjugate family, record / attribute / user units;
* other models (``NUMERICAL``, numerical audits, at most two free parameters): every other family,
  linear and logistic regression;
* :func:`wrong_rule` injects a rule that reports a fraction of the true range (a Bernoulli, Laplace
  or Normal rule that reports half of it, so that the truncation is too wide): the audits must
  answer "fail" with a witness.
"""

from __future__ import annotations

import contextlib

import numpy as np
import pymc as pm

import pymc_dp
from pymc_dp.audits import AuditResult
from pymc_dp.rules.base import log_density_range
from tests import models

TOL = 1e-6  # the audit's relative tolerance on the claim (the truncation is solved to 1e-9)


def private(model_domains, epsilon, unit="record", draws=1, **kw):
    model, domains = model_domains
    return pymc_dp.make_private(model, epsilon=epsilon, draws=draws, data=domains, unit=unit, ledger=None, **kw)


def within_claim(res: AuditResult):
    return res.measured <= res.claimed * (1 + TOL) + res.error


def _data(rng, dom, n):
    if isinstance(dom, pymc_dp.Integers):
        return rng.integers(dom.lo, dom.hi + 1, n)
    return rng.uniform(dom.lo, dom.hi, n)


#: one-parameter models: (domain, prior, likelihood, epsilon); no exact sampler
SCALAR = {
    "Laplace": (pymc_dp.Interval(-1, 1), lambda: pm.Normal("mu", 0, 1), lambda t, o: pm.Laplace("obs", mu=t, b=0.5, observed=o), 6.0),
    "StudentT": (pymc_dp.Interval(-1, 1), lambda: pm.Normal("mu", 0, 1), lambda t, o: pm.StudentT("obs", nu=3, mu=t, sigma=0.3, observed=o), 2.0),
    "Cauchy": (pymc_dp.Interval(-1, 1), lambda: pm.Normal("mu", 0, 1), lambda t, o: pm.Cauchy("obs", alpha=t, beta=0.5, observed=o), 2.0),
    "LogNormal": (pymc_dp.Interval(1, 10), lambda: pm.Normal("mu", 1, 1), lambda t, o: pm.LogNormal("obs", mu=t, sigma=0.7, observed=o), 4.0),
    "Exponential": (pymc_dp.Interval(0, 5), lambda: pm.LogNormal("lam", 0, 1), lambda t, o: pm.Exponential("obs", lam=t, observed=o), 2.0),
    "Gamma": (pymc_dp.Interval(0.5, 5), lambda: pm.Gamma("rate", 2, 1), lambda t, o: pm.Gamma("obs", alpha=2.0, beta=t, observed=o), 2.0),
    "Beta": (pymc_dp.Interval(0.1, 0.9), lambda: pm.Gamma("a", 2, 1), lambda t, o: pm.Beta("obs", alpha=t, beta=2.0, observed=o), 3.0),
    "Geometric": (pymc_dp.Integers(1, 10), lambda: pm.Beta("p", 1, 1), lambda t, o: pm.Geometric("obs", p=t, observed=o), 2.0),
    "Poisson": (pymc_dp.Integers(0, 10), lambda: pm.LogNormal("lam", 1, 1), lambda t, o: pm.Poisson("obs", mu=t, observed=o), 8.0),
    "Bernoulli": (pymc_dp.Binary(), lambda: pm.Normal("theta", 0, 1), lambda t, o: pm.Bernoulli("obs", logit_p=t, observed=o), 2.0),
}


def scalar(family, n=30, seed=0):
    rng = np.random.default_rng(seed)
    dom, prior, lik, _ = SCALAR[family]
    with pm.Model() as model:
        xd = pm.Data("x", _data(rng, dom, n))
        lik(prior(), xd)
    return model, {"x": dom}


def location_scale(family, n=30, seed=0):
    rng = np.random.default_rng(seed)
    with pm.Model() as model:
        yd = pm.Data("y", rng.uniform(-1, 1, n))
        mu = pm.Normal("mu", 0, 1)
        s = pm.HalfNormal("s", 1)
        dist = {"Normal": pm.Normal, "Laplace": pm.Laplace, "StudentT": None}[family]
        if family == "Laplace":
            dist("obs", mu=mu, b=s, observed=yd)
        else:
            dist("obs", mu=mu, sigma=s, observed=yd)
    return model, {"y": pymc_dp.Interval(-1, 1)}


def logistic1(n=30, seed=0):
    """Logistic regression with one feature and an intercept: two free parameters."""
    rng = np.random.default_rng(seed)
    X = rng.uniform(-1, 1, (n, 1))
    y = (rng.random(n) < 1 / (1 + np.exp(-2 * X[:, 0]))).astype(int)
    with pm.Model() as model:
        Xd, yd = pm.Data("X", X), pm.Data("y", y)
        w = pm.Normal("w", 0, 2, shape=1)
        b = pm.Normal("b", 0, 1)
        pm.Bernoulli("obs", logit_p=Xd @ w + b, observed=yd)
    return model, {"X": pymc_dp.Ball(1.0), "y": pymc_dp.Binary()}


def linear1(n=30, seed=0, free_sigma=True):
    """Linear regression with one feature: weight and scale, or weight and intercept (known scale)."""
    rng = np.random.default_rng(seed)
    X = rng.uniform(-1, 1, (n, 1))
    y = np.clip(0.5 * X[:, 0] + 0.2 * rng.normal(size=n), -1, 1)
    with pm.Model() as model:
        Xd, yd = pm.Data("X", X), pm.Data("y", y)
        w = pm.Normal("w", 0, 1, shape=1)
        if free_sigma:
            pm.Normal("obs", mu=Xd @ w, sigma=pm.HalfNormal("sigma", 1), observed=yd)
        else:
            pm.Normal("obs", mu=Xd @ w + pm.Normal("b", 0, 1), sigma=0.5, observed=yd)
    return model, {"X": pymc_dp.Ball(1.0), "y": pymc_dp.Interval(-1, 1)}


def binomial(n=20, seed=0):
    rng = np.random.default_rng(seed)
    with pm.Model() as model:
        kd = pm.Data("k", rng.integers(0, 4, n))
        p = pm.Beta("p", 2, 2)
        pm.Binomial("obs", n=3, p=p, observed=kd)
    return model, {"k": pymc_dp.Integers(0, 3)}


def gamma_exponential(n=20, seed=0):
    rng = np.random.default_rng(seed)
    with pm.Model() as model:
        zd = pm.Data("z", rng.uniform(0, 5, n))
        lam = pm.Gamma("lam", 2.0, 1.0)
        pm.Exponential("obs", lam=lam, observed=zd)
    return model, {"z": pymc_dp.Interval(0, 5)}


def normal_mean(n=20, seed=0):
    rng = np.random.default_rng(seed)
    with pm.Model() as model:
        yd = pm.Data("y", rng.uniform(-1, 1, n))
        mu = pm.Normal("mu", 0, 1)
        pm.Normal("obs", mu=mu, sigma=0.5, observed=yd)
    return model, {"y": pymc_dp.Interval(-1, 1)}


def gamma_poisson(n=20, seed=0):
    rng = np.random.default_rng(seed)
    with pm.Model() as model:
        cd = pm.Data("c", rng.integers(0, 11, n))
        lam = pm.Gamma("lam", 2.0, 0.5)
        pm.Poisson("obs", mu=lam, observed=cd)
    return model, {"c": pymc_dp.Integers(0, 10)}


#: conjugate models (exact audits): builder, epsilon per draw, units
CONJUGATE = {
    "Bernoulli": (lambda: models.coin(n=30), 1.0),
    "Binomial": (binomial, 4.0),
    "Categorical": (lambda: models.dirichlet_categorical(n=12), 2.0),
    "Poisson": (gamma_poisson, 8.0),
    "Exponential": (gamma_exponential, 2.0),
    "Normal": (normal_mean, 6.0),
    "naive Bayes": (lambda: models.naive_bayes(n=6, m=3), 2.0),
    "chain net": (lambda: models.chain_net(n=8), 1.2),
    "Poisson and Bernoulli": (lambda: models.poisson_bernoulli(n=8), 8.0),
}


#: models with several private containers, where the attribute unit differs from the record unit
MULTI = ["naive Bayes", "chain net", "Poisson and Bernoulli"]


NUMERICAL = {
    **{f: (lambda f=f: scalar(f), SCALAR[f][3]) for f in SCALAR},
    "Normal location-scale": (lambda: location_scale("Normal"), 2.0),
    "Laplace location-scale": (lambda: location_scale("Laplace"), 2.0),
    "logistic regression": (logistic1, 2.0),
    "linear regression": (linear1, 2.0),
    "linear regression, known scale": (lambda: linear1(free_sigma=False), 6.0),
}


@contextlib.contextmanager
def wrong_rule(op_type, fraction):
    """Register a rule that reports ``fraction`` of the true range of the log-density, so that
    the truncation is too wide for the claim (restored afterwards). The tests that use it
    certify by the per-record constant alone (``lipschitz_only``): a factor with a closed-form
    oscillation is otherwise certified by it, and the constant's rule is never used.

    The independent refutation check (pymc_dp/refutation.py) would refuse such a certificate
    before the audit sees it (tests/test_refutation.py shows it does); inside this context it is
    switched off, so that these tests measure the audits' own power."""
    true_rule = log_density_range.registry[op_type]

    def wrong(op, domain, params, xp):
        lo, hi = true_rule(op, domain, params, xp)
        return lo, lo + fraction * (hi - lo)

    log_density_range.register(op_type)(wrong)
    try:
        with refutation_off():
            yield
    finally:
        log_density_range.register(op_type)(true_rule)


@contextlib.contextmanager
def refutation_off():
    """Certify without the independent refutation check (pymc_dp/refutation.py), for the tests of
    the audits' own power against a wrong rule (restored afterwards)."""
    import pymc_dp.certification as certification

    class _Off:
        def summary(self) -> str:
            return "refutation check switched off by the test"

    true_refute = certification.refute_claims
    certification.refute_claims = lambda *args, **kwargs: _Off()
    try:
        yield
    finally:
        certification.refute_claims = true_refute
