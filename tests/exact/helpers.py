"""References and model builders shared by the tests of pymc_dp.exact (not a test module).

Every model is built through ``pymc_dp.make_private`` and its plan through
``conjugate_plan(pmod.model, pmod.certification.constraints, pmod.domains)``. The draws are compared with the
truncated posterior computed *independently* in the tests: from the raw data (counts, sums), and as a CDF
obtained by numerically integrating the closed-form log-density on a fine grid (or, for the
truncated Dirichlet, a one-dimensional integral of incomplete Beta functions, or naive rejection
from the untruncated posterior). None of these references uses the inverse CDFs, the survival-side
split, the tangent envelopes or the cell envelope of the samplers.

Statistical tests (tests/exact/): Kolmogorov-Smirnov (one- or two-sample) at level alpha = 1e-3
each, with fixed seeds, so these files are deterministic. There are 47 such tests; under a fresh
seed a correct sampler would fail at least one of them with probability at most 47 x 1e-3 = 4.7%
(the declared failure rate; the tests are not independent, so this union bound is conservative).
Two further tests check the power: the same draws must be *rejected* (p < 1e-3) against a wrong
posterior.
"""

import numpy as np
import pymc as pm
from scipy import integrate, special, stats

import pymc_dp
from pymc_dp.exact import ConjugatePlan, conjugate_plan

ALPHA = 1e-3
DRAWS = 4000


def grid_cdf(logpdf, lo, hi, n=200_001):
    """CDF of the density ``exp(logpdf)`` restricted to [lo, hi], by trapezoid integration."""
    x = np.linspace(lo, hi, n)
    lp = logpdf(x)
    w = np.exp(lp - np.max(lp))
    cdf = integrate.cumulative_trapezoid(w, x, initial=0.0)
    cdf /= cdf[-1]
    return lambda t: np.interp(t, x, cdf)


def beta_logpdf(a, b):
    return lambda x: (a - 1) * np.log(x) + (b - 1) * np.log1p(-x)


def gamma_logpdf(shape, rate):
    return lambda x: (shape - 1) * np.log(x) - rate * x


def normal_logpdf(mu, sigma):
    return lambda x: -0.5 * ((x - mu) / sigma) ** 2


def ks(draws, cdf):
    return stats.kstest(np.ravel(draws), cdf).pvalue


def plan_of(pmod) -> ConjugatePlan:
    return conjugate_plan(pmod.model, pmod.certification.constraints, pmod.domains)


def certified_interval(pmod, var):
    """The intersection of the certificate's interval constraints on ``var``."""
    lo, hi = -np.inf, np.inf
    for f in pmod.certificate.factors:
        for c in f.constraints:
            if c["kind"] == "interval" and c["var"] == var:
                lo = max(lo, -np.inf if c["lower"] is None else c["lower"])
                hi = min(hi, np.inf if c["upper"] is None else c["upper"])
    return lo, hi


def check_truncation(pmod, plan, draws):
    """The plan samples the certified truncation, and every draw lies inside it."""
    desc = plan.describe()["variables"]
    for f in pmod.certificate.factors:
        for c in f.constraints:
            trunc = desc[c["vars"][0] if c["kind"] == "potential" else c["var"]]["truncation"]
            if c["kind"] == "interval":
                lo, hi = certified_interval(pmod, c["var"])
                assert trunc["kind"] == "interval"
                assert (trunc["lower"] if trunc["lower"] is not None else -np.inf) == max(lo, -np.inf)
                assert (trunc["upper"] if trunc["upper"] is not None else np.inf) == hi
            else:
                assert trunc["kind"] == "ratio"
                assert min(g["bound"] for g in trunc["groups"]) <= c["bound"]
    for c in pmod.certification.constraints:
        assert np.all(c.contains(draws)), c.describe()


def make(build, data, epsilon, draws=1, **kw):
    with pm.Model() as model:
        build()
    return pymc_dp.make_private(model, epsilon=epsilon, draws=draws, data=data, **kw)


def dirichlet_marginal_cdf(alpha, j, log_c, n=200_001):
    """CDF of p_j under Dirichlet(alpha), K = 3, restricted to max/min <= c.

    For fixed p_j = x the other two are ``(1 - x) t`` and ``(1 - x)(1 - t)``; the six pairwise
    ratio constraints make t an interval ``[t_lo, t_hi]``, so the marginal density is
    ``x^(a_j - 1) (1 - x)^(a_1 + a_2 - 1) [I(t_hi) - I(t_lo)]`` with I a regularised incomplete Beta
    function, integrated on a fine grid.
    """
    c = np.exp(log_c)
    a0 = alpha[j]
    a1, a2 = [alpha[k] for k in range(3) if k != j]
    x = np.linspace(1 / (1 + 2 * c), c / (c + 2), n)[1:-1]
    q = 1 - x
    t_lo = np.maximum.reduce([x / (c * q), 1 - c * x / q, np.full_like(x, 1 / (1 + c))])
    t_hi = np.maximum(np.minimum.reduce([1 - x / (c * q), c * x / q, np.full_like(x, c / (1 + c))]), t_lo)
    lower = special.betainc(a1, a2, t_lo) <= 0.5
    mass = np.where(
        lower,
        special.betainc(a1, a2, t_hi) - special.betainc(a1, a2, t_lo),
        special.betaincc(a1, a2, t_lo) - special.betaincc(a1, a2, t_hi),
    )
    with np.errstate(divide="ignore"):
        lp = (a0 - 1) * np.log(x) + (a1 + a2 - 1) * np.log(q) + np.log(np.maximum(mass, 0.0))
    w = np.exp(lp - lp.max())
    cdf = integrate.cumulative_trapezoid(w, x, initial=0.0)
    return lambda t: np.interp(t, x, cdf / cdf[-1])


def dirichlet_model(x, classes=3, hi=None):
    def build():
        xd = pm.Data("x", x)
        p = pm.Dirichlet("p", a=np.ones(classes))
        pm.Categorical("obs", p=p, observed=xd)

    return build
