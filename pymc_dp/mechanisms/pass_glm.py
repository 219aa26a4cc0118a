"""PASS-GLM: noise-aware logistic and Poisson regressions from noisy approximate sufficient statistics.

The path for a canonical-link GLM whose linear predictor reads private covariates, as PyMC users
write it::

    pm.Bernoulli("y_obs", logit_p=alpha + X @ beta, observed=y)            # y: Binary()
    pm.Poisson("y_obs", mu=pm.math.exp(alpha + X @ beta), observed=y)      # y: Integers(0, m)

Coordinates. The design row is ``z = (1, (x - m) / h)`` with ``m`` the midpoint and ``h`` the
half-width of each covariate's declared range (public), so ``z`` lies in ``[-1, 1]^F`` after its
leading 1 (a Ball is bounded by its bounding box). The linear predictor ``offset + sum_j b_j x_j``
is ``s = zᵀc`` with ``c_0 = offset + sum_j b_j m_j`` and ``c_j = b_j h_j``. The outcome is centred
and scaled to ``y' = (y - y_c) / y_h`` in ``[-1, 1]`` (logistic: ``y' = 2y - 1``; Poisson on
``0..M``: ``y_c = y_h = M / 2``).

The approximation (Huggins, Adams & Broderick, NeurIPS 2017). Both likelihoods are canonical:
``log p(y | s) = y s - A(s) + log h(y)`` with ``A(s) = log(1 + e^s)`` (logistic) or ``e^s``
(Poisson). ``A`` is replaced by a quadratic ``b0 + b1 s + b2 s²`` (``b2 > 0``): with
``approximation="fixed"`` its degree-2 Chebyshev interpolant on a public interval ``[s_lo, s_hi]``
of the linear predictor (:func:`predictor_interval`), as published; with ``"adaptive"`` (the
default) the quadratic refitted inside the model at each point of the posterior
(:meth:`PassGLM._law_coefficients`). Either way the log-likelihood
``cᵀ sum_i y_i z_i - n b0 - b1 cᵀ sum_i z_i - b2 cᵀ (sum_i z_i z_iᵀ) c`` then depends on the data only through
``S = sum_i z_i z_iᵀ`` (its first row is ``n`` and ``sum z``) and ``u = sum_i y'_i z_i``. They are released once with Laplace noise (:class:`PassGLM`).

The noise-aware posterior (in the spirit of Kulkarni, Jälkö, Koskela, Kaski & Honkela, ICML 2021,
with Bernstein & Sheldon's latent design statistics). The model holds the latent true ``S`` as the
linear regression does (:mod:`pymc_dp.mechanisms.regression`: ``S = n [[1, mᵀ], [m, L Lᵀ + m mᵀ]]``,
``m`` uniform on the box, ``L`` LKJ(1) with half-normal scales), and given ``S`` and ``c`` the
latent ``u`` is Gaussian::

    u ~ N(S ((b1 - y_c) e_0 + 2 b2 c) / y_h,  2 b2 S / y_h²).

Its log-density in ``c`` is, up to terms free of ``c``, **exactly** the PASS-GLM polynomial
log-likelihood ``(1 / y_h) ... = cᵀ sum y z - b1 cᵀ sum z - b2 cᵀ S c`` (``docs/theory/pass_glm.md``),
so with noiseless statistics the posterior is the PASS-GLM posterior; and it is a normalised law of
``u``, so the noise is integrated out without the outward tilt that a bare ``pm.Potential`` of the
polynomial with a latent ``u`` would give (there ``∫ exp(cᵀu) p(noisy | u) du`` grows with
``|c|``). Read as a law of the data, it is the CLT for ``sum y z`` with the mean ``A'(s)`` and the
variance ``A''(s)`` of each record replaced by those of the quadratic (``b1 + 2 b2 s`` and
``2 b2``). The noisy statistics are observed around ``S`` and ``u`` with the Laplace law of their
noise. What is approximated (utility, never privacy): ``A`` on the interval (worse outside it),
the CLT for ``u``, and the weak model of ``S``; ``benchmarks/calibration_pass_glm.py`` measures the
coverage of the result.

Privacy map: each released statistic ``sum_i t_j(z_i, y'_i)`` changes by at most ``span_j``, the
range of ``t_j`` over the box of one record (``z`` in the scaled box, ``y'`` in ``[-1, 1]``, a
superset of the outcome's values), and gets Laplace noise of scale ``span_j K / epsilon`` with
``K`` a certified bound on ``sum_j |change_j| / span_j`` over one record's change
(:func:`pymc_dp.mechanisms.sensitivity.joint_bound`): the release is ``epsilon``-DP, and the
posterior is post-processing. The interval ``[s_lo, s_hi]`` and every constant above are public.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
from typing import Any, Mapping, Sequence

import numpy as np
import pymc as pm
import pytensor.tensor as pt
from numpy.polynomial import chebyshev, polynomial
from pytensor.graph.replace import graph_replace
from pytensor.scalar.basic import Exp
from pytensor.tensor.elemwise import Elemwise
from pytensor.tensor.random.basic import BernoulliRV, PoissonRV

from pymc_dp.chunks import CHUNK_ROWS, is_dask
from pymc_dp.domains import Domain, Integers
from pymc_dp.exceptions import DomainError, PathNotImplementedError, UnsupportedFactorError
from pymc_dp.mechanisms.logistic import is_logistic
from pymc_dp.mechanisms.regression import private_factors, read_linear_predictor
from pymc_dp.mechanisms.statistics import (
    FamilyStatistics,
    NoisyStatistics,
    Statistic,
    StatisticsFactor,
    observe_noisy,
    square_span,
)
from pymc_dp.units import Users

__all__ = ["PassGLM", "pass_glm", "predictor_interval", "quadratic_approximation", "read_glm", "glm_statistics"]

#: the linear predictor's interval is clipped here for a logistic regression (probabilities
#: 0.0025 .. 0.9975): beyond it the quadratic fits the middle, where records are, worse
LOGIT_LIMIT = 6.0
#: a Poisson regression's log rate is clipped to [POISSON_LOG_RATE_FLOOR, log(M) + 1] (M: the
#: outcome's declared maximum): the records' rates lie near that range
POISSON_LOG_RATE_FLOOR = -3.0
#: the approximations of the log-partition function (see :func:`pass_glm`)
APPROXIMATIONS = ("adaptive", "fixed")
#: prior draws that give the public box of the coefficients (scaled coordinates)
PRIOR_DRAWS = 1000
#: the central share of the prior draws that make the box
PRIOR_BOX_MASS = 0.9


@dataclasses.dataclass(frozen=True)
class _Covariate:
    container: str
    column: int  # -1: a vector container
    lo: float  # declared range (a Ball: its bounding interval)
    hi: float

    @property
    def label(self) -> str:
        return self.container if self.column < 0 else f"{self.container}[{self.column}]"


@dataclasses.dataclass(frozen=True)
class _GLM:
    factor: str
    y: str
    family: str  # "logistic" or "poisson"
    features: tuple[_Covariate, ...]
    offset: Any  # the predictor's offset (a scalar expression)
    coefs: tuple  # per linear term: (container, coefficient expression, record width)
    center: np.ndarray  # public: subtracted from each covariate
    half: np.ndarray  # public: each covariate is divided by it after centring
    y_center: float  # public: y' = (y - y_center) / y_half lies in [-1, 1]
    y_half: float
    stats: tuple  # (name, span, containers read, term)

    @property
    def dimension(self) -> int:
        return len(self.features) + 1


def _exp_of(mu):
    """``eta`` when ``mu`` is ``exp(eta)``, else None."""
    from pymc_dp.predictor import strip_identity

    mu = strip_identity(mu)
    if mu.owner is not None and isinstance(mu.owner.op, Elemwise) and isinstance(mu.owner.op.scalar_op, Exp):
        return mu.owner.inputs[0]
    return None


def read_glm(model: pm.Model, domains: Mapping[str, Domain]) -> _GLM:
    """The logistic or Poisson regression of ``model``, or a typed refusal naming the factor."""
    from pymc_dp.factors import private_ancestors, strip_casts
    from pymc_dp.predictor import strip_identity

    private = {v: v.name for v in model.data_vars if v.name in domains}
    shapes = {v.name: tuple(np.shape(v.get_value())) for v in private}
    factors = private_factors(model, domains)
    if len(factors) != 1:
        raise UnsupportedFactorError(f"PASS-GLM needs one factor reading the private data, found {[f.name for f in factors]}.")
    (rv,) = factors
    op = rv.owner.op
    value = strip_casts(model.rvs_to_values[rv])
    if value not in private or len(shapes[value.name]) != 1:
        raise UnsupportedFactorError(
            f"factor {rv.name!r} must observe a private vector pm.Data container (one outcome per record) directly."
        )
    y = value.name
    dom = domains[y]
    if isinstance(op, BernoulliRV):
        if not is_logistic(model, domains):
            raise UnsupportedFactorError(
                f"factor {rv.name!r} (Bernoulli): its p must be pm.math.invlogit(linear predictor) (or logit_p=); PASS-GLM "
                "approximates the canonical (logit) link only. Use pymc_dp.make_private."
            )
        if not (isinstance(dom, Integers) and dom.lo == 0 and dom.hi == 1):
            raise DomainError(f"the outcome {y!r} is declared {dom}; a logistic regression's outcome is Binary().")
        family, eta, y_center, y_half = "logistic", strip_identity(rv.owner.op.dist_params(rv.owner)[0]).owner.inputs[0], 0.5, 0.5
    elif isinstance(op, PoissonRV):
        (mu,) = op.dist_params(rv.owner)
        eta = _exp_of(mu)
        if eta is None:
            raise UnsupportedFactorError(
                f"factor {rv.name!r} (Poisson): its mu must be pm.math.exp(linear predictor); PASS-GLM approximates the "
                "canonical (log) link only. Use pymc_dp.make_private."
            )
        if not (isinstance(dom, Integers) and dom.lo == 0 and dom.hi >= 1 and math.isfinite(dom.hi)):
            raise DomainError(f"the outcome {y!r} is declared {dom}; a Poisson regression's outcome needs Integers(0, M), M >= 1.")
        family, y_center, y_half = "poisson", dom.hi / 2.0, dom.hi / 2.0
    else:
        raise UnsupportedFactorError(
            f"factor {rv.name!r} ({type(op).__name__.removesuffix('RV')}) reads private covariates; PASS-GLM is "
            "implemented for a Bernoulli with a logit link and a Poisson with a log link. Use pymc_dp.make_private."
        )
    offset, coefs, columns = read_linear_predictor(rv, eta, "linear predictor", "PASS-GLM", y, private, domains, shapes)
    if offset is None:
        raise UnsupportedFactorError(
            f"factor {rv.name!r}: PASS-GLM needs an intercept (an offset) in the linear predictor; add one, e.g. "
            "pm.Normal('alpha', 0, 2.5) + X @ beta."
        )
    features = [_Covariate(container, column, lo, hi) for container, column, lo, hi, _ in columns]
    if len({(f.container, f.column) for f in features}) != len(features):
        raise UnsupportedFactorError(f"factor {rv.name!r}: a covariate enters the linear predictor twice; combine the terms.")
    unread = sorted(set(domains) - {y} - {f.container for f in features})
    if unread:
        raise UnsupportedFactorError(f"private container(s) {unread} are not read by the regression {rv.name!r}.")
    for v in model.free_RVs + model.potentials:
        if private_ancestors(v, private):
            raise UnsupportedFactorError(f"{v.name!r} reads the private data; only the regression's factor may read it.")
    lo = np.array([f.lo for f in features])
    hi = np.array([f.hi for f in features])
    center, half = (lo + hi) / 2.0, (hi - lo) / 2.0
    if np.any(half <= 0) or not np.all(np.isfinite(half)):
        raise DomainError(f"factor {rv.name!r}: a covariate's declared range is a single point or unbounded; declare a finite Box.")
    return _GLM(rv.name, y, family, tuple(features), offset, tuple(coefs), center, half, y_center, y_half,
                tuple(_spans(features) + _outcome_spans(y, features)))


def _spans(features: Sequence[_Covariate]) -> list[tuple]:
    """``(name, span, containers read, term)`` of every released statistic, in release order:
    ``sum z_j``, ``sum z_j z_k`` (``j <= k``), ``sum y' z_j``, ``sum y'``. The record's coordinates
    are ``(z_1 .. z_F, y')``, each in ``[-1, 1]``; a term's span is its range there: 2 for ``z_j``,
    ``y'`` and every product of two coordinates, 1 for a square. Every bound is attained on the box
    (the outcome's values ``-1, 1`` are its corners)."""
    F = len(features)
    out = [(f"sum(z_{f.label})", 2.0, frozenset({f.container}), (j,)) for j, f in enumerate(features)]
    for j, k in itertools.combinations_with_replacement(range(F), 2):
        a, b = features[j], features[k]
        if j == k:
            out.append((f"sum(z_{a.label}^2)", square_span(-1.0, 1.0), frozenset({a.container}), (j, j)))
        else:
            out.append((f"sum(z_{a.label}*z_{b.label})", 2.0, frozenset({a.container, b.container}), (j, k)))
    return out


def _outcome_spans(y: str, features: Sequence[_Covariate]) -> list[tuple]:
    """The outcome's statistics, after the design's: ``sum y' z_j`` then ``sum y'`` (``y'`` is the
    record's coordinate ``F``)."""
    F = len(features)
    out = [(f"sum(y'*z_{f.label})", 2.0, frozenset({f.container, y}), (j, F)) for j, f in enumerate(features)]
    out.append(("sum(y')", 2.0, frozenset({y}), (F,)))
    return out


def scaled_design(glm: _GLM, arrays: Mapping[str, np.ndarray]) -> np.ndarray:
    """``(n, F)``: the scaled covariates ``(x - m) / h`` (without the leading 1)."""
    cols = []
    for j, f in enumerate(glm.features):
        a = np.asarray(arrays[f.container], float)
        cols.append(((a if f.column < 0 else a[:, f.column]) - glm.center[j]) / glm.half[j])
    return np.stack(cols, axis=1)


def glm_statistics(glm: _GLM, arrays: Mapping[str, np.ndarray]) -> np.ndarray:
    """The released statistics' true values on rows ``arrays`` (release order)."""
    z = scaled_design(glm, arrays)
    y = (np.asarray(arrays[glm.y], float) - glm.y_center) / glm.y_half
    F = z.shape[1]
    zz = z.T @ z
    out = list(z.sum(axis=0))
    out += [zz[j, k] for j, k in itertools.combinations_with_replacement(range(F), 2)]
    out += list(z.T @ y)
    out.append(y.sum())
    return np.asarray(out, float)


# --------------------------------------------------------------------------- the approximation
def _log_partition(family: str):
    if family == "logistic":
        return lambda s: np.logaddexp(0.0, s)
    return np.exp


def quadratic_approximation(family: str, interval: tuple[float, float]) -> tuple[float, float, float]:
    """``(b0, b1, b2)``: the degree-2 Chebyshev interpolant ``b0 + b1 s + b2 s²`` of the family's
    log-partition function ``A`` (``log(1 + e^s)`` or ``e^s``) on ``interval``. ``A`` is convex, so
    ``b2 > 0``; a non-finite or non-positive ``b2`` is refused."""
    lo, hi = map(float, interval)
    if not (math.isfinite(lo) and math.isfinite(hi) and hi > lo):
        raise UnsupportedFactorError(
            f"interval={interval!r} must be two finite numbers lo < hi (the linear predictor's range): pass a finite "
            "interval=, or approximation='adaptive'.")
    mid, half = (lo + hi) / 2.0, (hi - lo) / 2.0
    A = _log_partition(family)
    cheb = chebyshev.chebinterpolate(lambda t: A(mid + half * t), 2)
    in_t = polynomial.Polynomial(chebyshev.cheb2poly(cheb))
    in_s = in_t(polynomial.Polynomial([-mid / half, 1.0 / half])).coef  # t = (s - mid) / half
    b = np.zeros(3)
    b[: len(in_s)] = in_s
    if not (np.all(np.isfinite(b)) and b[2] > 0):
        raise UnsupportedFactorError(
            f"the quadratic approximation on {interval} has b2 = {b[2]!r}: pass a wider finite interval=, or "
            "approximation='adaptive'.")
    return float(b[0]), float(b[1]), float(b[2])


def _prior_coefficients(model: pm.Model, glm: _GLM, draws: int = PRIOR_DRAWS) -> np.ndarray:
    """``(draws, D)``: prior draws of ``c`` (public: the prior only, a fixed seed)."""
    exprs = [glm.offset] + [c for _, c, _ in glm.coefs]
    with model:
        got = pm.draw(exprs, draws=draws, random_seed=20171204)
    offset = np.asarray(got[0], float).reshape(draws, -1)[:, 0]
    b = np.concatenate([np.asarray(g, float).reshape(draws, -1)[:, :width] * np.ones((1, width))
                        for g, (_, _, width) in zip(got[1:], glm.coefs)], axis=1)
    return np.concatenate([(offset + b @ glm.center)[:, None], b * glm.half], axis=1)


def predictor_interval(model: pm.Model, glm: _GLM) -> tuple[float, float]:
    """The public interval of the linear predictor ``s = zᵀc`` on which ``A`` is approximated.

    The prior's central ``PRIOR_BOX_MASS`` box of ``c`` (per coordinate, from ``PRIOR_DRAWS``
    draws with a fixed seed: public) and the box of ``z`` (``z_0 = 1``, ``|z_j| <= 1``) give
    ``s`` in ``[q_lo(c_0) - sum_j B_j, q_hi(c_0) + sum_j B_j]`` with ``B_j = max(|q_lo(c_j)|, |q_hi(c_j)|)``;
    it is clipped to ``[-LOGIT_LIMIT, LOGIT_LIMIT]`` (logistic) or
    ``[POISSON_LOG_RATE_FLOOR, log(M) + 1]`` (Poisson), and widened to at least 1 around its centre.
    """
    c = _prior_coefficients(model, glm)
    tail = (1.0 - PRIOR_BOX_MASS) / 2.0
    q_lo, q_hi = np.quantile(c, tail, axis=0), np.quantile(c, 1.0 - tail, axis=0)
    reach = float(np.sum(np.maximum(np.abs(q_lo[1:]), np.abs(q_hi[1:]))))
    lo, hi = float(q_lo[0]) - reach, float(q_hi[0]) + reach
    if glm.family == "logistic":
        clip = (-LOGIT_LIMIT, LOGIT_LIMIT)
    else:
        clip = (POISSON_LOG_RATE_FLOOR, math.log(2.0 * glm.y_half) + 1.0)
    lo, hi = max(lo, clip[0]), min(hi, clip[1])
    if not (math.isfinite(lo) and math.isfinite(hi)) or hi - lo < 1.0:
        mid = (max(min(lo, clip[1]), clip[0]) + max(min(hi, clip[1]), clip[0])) / 2.0 if math.isfinite(lo + hi) else 0.0
        lo, hi = mid - 0.5, mid + 0.5
    return lo, hi


# --------------------------------------------------------------------------- the mechanism
class PassGLM(NoisyStatistics):
    """Laplace-noised ``sum z, sum z zᵀ, sum y' z`` of a logistic or Poisson regression, released
    once, and the noise-aware posterior under the PASS-GLM quadratic approximation (see
    :mod:`pymc_dp.mechanisms.pass_glm`).

    Build with :func:`pass_glm`. :meth:`sample` charges ``epsilon`` at its first call and draws
    with ``pm.sample`` (its keyword arguments pass through); later calls are free.

    Privacy proof
    -------------
    1. The record's coordinates ``(z, y')`` lie in ``[-1, 1]^(F+1)`` (public scaling by the
       declared domains). Replacing one record changes statistic ``j`` by at most ``span_j``
       (:func:`_spans`: 2 for a coordinate or a product of two, 1 for a square; attained), times
       ``m`` for ``Users(m)``.
    2. Jointly, ``sum_j |change_j| / span_j <= K`` over one record's change, certified by
       :func:`~pymc_dp.mechanisms.sensitivity.joint_bound` over the box (a superset of the
       records: sound); ``"attribute"``: also at most the number of statistics reading the
       container.
    3. Laplace noise (OpenDP) of scale ``span_j K / epsilon`` on statistic ``j``: the log-density
       ratio of the release is at most ``sum_j |change_j| / b_j <= epsilon``. ``n``, the domains,
       the priors, the interval of the approximation and the scales are public; the posterior is
       post-processing.
    """

    name = "pass_glm"
    algorithm = ("noise-aware inference on Laplace-noised PASS-GLM statistics (Huggins, Adams & Broderick 2017; "
                 "Kulkarni et al. 2021)")

    def __init__(self, model, *, approximation: str = "adaptive", interval: tuple[float, float] | None = None, **kwargs):
        if approximation not in APPROXIMATIONS:
            raise ValueError(f"approximation={approximation!r} must be one of {APPROXIMATIONS}.")
        if interval is not None and approximation != "fixed":
            raise ValueError("interval= is the public interval of approximation='fixed'; pass approximation='fixed' with it.")
        self.approximation = approximation
        self._interval_arg = interval
        values = kwargs.get("values") or {}
        if any(is_dask(v) for v in values.values()):  # refuse before anything is charged
            raise PathNotImplementedError(
                "values= with Dask collections is not implemented for PASS-GLM (its rows span several containers); "
                "pass NumPy arrays, which are summed in chunks of rows."
            )
        super().__init__(model, **kwargs)

    def _read(self, model, domains):
        glm = read_glm(model, domains)
        self.glm = glm
        self.interval, self.coefficients = None, None
        if self.approximation == "fixed":
            self.interval = predictor_interval(model, glm) if self._interval_arg is None else tuple(map(float, self._interval_arg))
            self.coefficients = quadratic_approximation(glm.family, self.interval)
        stats = tuple(Statistic(n, False, s, term) for n, s, _, term in glm.stats)
        family = FamilyStatistics(glm.factor, glm.y, stats, None, None)
        return [StatisticsFactor(glm.factor, glm.y, type(None), (), family, 1, tuple(sorted({f.container for f in glm.features})))]

    def _statistic_reads(self) -> dict[str, frozenset]:
        return {n: r for n, _, r, _ in self.glm.stats}

    def _joint(self, kind: str) -> tuple[float, float, int]:
        """The joint bound over one record's change on the box ``[-1, 1]^(F+1)`` of ``(z, y')``;
        ``"attribute"`` takes the smaller of ``K`` and the weights of one container's statistics."""
        from pymc_dp.mechanisms.sensitivity import statistics_joint_bound

        glm = self.glm
        p = len(glm.features) + 1
        return statistics_joint_bound(glm.stats, self.weights, [-1.0] * p, [1.0] * p, kind, self.reads,
                                      require_finite=True)

    def _true_statistics(self, values: Mapping[str, Any]) -> dict[str, float]:
        glm = self.glm
        names = [n for n, *_ in glm.stats]
        containers = [glm.y] + sorted({f.container for f in glm.features})
        if any(is_dask(values[c]) for c in containers):
            raise PathNotImplementedError("values= with Dask collections is not implemented for PASS-GLM; pass NumPy arrays.")
        arrays = {c: np.asarray(values[c]) for c in containers}
        n = len(arrays[glm.y])
        total = np.zeros(len(names))
        for start in range(0, n, CHUNK_ROWS):
            total += glm_statistics(glm, {c: a[start : start + CHUNK_ROWS] for c, a in arrays.items()})
        return dict(zip(names, total.tolist()))

    def _law_coefficients(self, c, mean, chol):
        """``(b1, b2)`` of the quadratic that replaces ``A`` in the law of ``u``: the fixed
        Chebyshev coefficients, or (``"adaptive"``) the least-squares line ``b1 + 2 b2 s`` of
        ``A'(s)`` under ``s ~ N(mu, v)``, the law of the records' linear predictor when the scaled
        covariates have the latent mean ``mean`` and covariance ``chol cholᵀ``: by Stein's lemma its
        slope is ``E A''(s)`` and it passes through ``(mu, E A'(s))``, so ``S (b1 e0 + 2 b2 c) =
        n E[z A'(zᵀc)]`` for Normal covariates. Logistic: ``E sigma(s) ~ sigma(k mu)`` and
        ``E sigma'(s) ~ k sigma'(k mu)``, ``k = (1 + pi v / 8)^(-1/2)`` (the probit approximation);
        Poisson: ``E e^s = E A''(s) = exp(mu + v / 2)`` (exact)."""
        if self.approximation == "fixed":
            _, b1, b2 = self.coefficients
            return b1, b2
        mu = c[0] + c[1:] @ mean
        v = pt.sum(pt.square(chol.T @ c[1:]))
        if self.glm.family == "logistic":
            k = 1.0 / pt.sqrt(1.0 + (math.pi / 8.0) * v)
            p = pt.sigmoid(k * mu)
            value, slope = p, k * p * (1.0 - p)
        else:
            value = slope = pt.exp(mu + v / 2.0)
        return value - slope * mu, slope / 2.0

    def noise_aware_model(self) -> pm.Model:
        """The user's priors; the latent ``S`` (weak public model) and ``u`` given ``S`` and the
        coefficients (the Gaussian law whose log-density in ``c`` is the PASS-GLM polynomial);
        the noisy statistics observed around them. A new ``pm.Model``."""
        released = self.release_statistics()
        from pymc.model.fgraph import clone_model

        glm = self.glm
        new = clone_model(self._noise_free)
        replace = {old: new[var.name] for old, var in self._replace.items()}
        n = self.rows[glm.y]
        F = len(glm.features)
        if n <= F + 1:
            raise UnsupportedFactorError(f"factor {glm.factor!r}: PASS-GLM needs more records ({n}) than design columns ({F + 1}).")
        prefix = f"_pass_{glm.y}_"
        with new:
            parts = graph_replace([c for _, c, _ in glm.coefs] + [glm.offset], replace, strict=False)
            b = pt.concatenate([pt.reshape(c, (width,)) if c.type.ndim else pt.reshape(c, (1,)) * pt.ones(width)
                                for c, (_, _, width) in zip(parts[:-1], glm.coefs)])
            offset = pt.reshape(parts[-1], ())
            c = pt.concatenate([pt.reshape(offset + b @ glm.center, (1,)), b * glm.half])
            # the scaled covariates' mean and covariance over the records: latent, weak public prior
            mean = pm.Uniform(f"{prefix}z_mean", -1.0, 1.0, shape=F)
            if F == 1:
                chol = pt.reshape(pm.HalfNormal(f"{prefix}z_sd", 1.0), (1, 1))
            else:
                chol, _, _ = pm.LKJCholeskyCov(f"{prefix}z_cov", n=F, eta=1.0, sd_dist=pm.HalfNormal.dist(1.0, shape=F),
                                               compute_corr=True)
            top = pt.concatenate([pt.ones((1, 1)), pt.zeros((1, F))], axis=1)
            low = pt.concatenate([mean[:, None], chol], axis=1)
            L = math.sqrt(n) * pt.concatenate([top, low], axis=0)
            S = L @ L.T
            e0 = np.eye(F + 1)[0]
            b1, b2 = self._law_coefficients(c, mean, chol)
            # u = sum y' z ~ N(S ((b1 - y_c) e0 + 2 b2 c) / y_h, 2 b2 S / y_h^2)
            u_mean = (S @ ((b1 - glm.y_center) * e0 + 2.0 * b2 * c)) / glm.y_half
            u_chol = (pt.sqrt(2.0 * b2) / glm.y_half) * L
            # non-centred (sampled as u itself, NUTS stalled on released values with little noise)
            u = u_mean + u_chol @ pm.Normal(f"{prefix}w", 0.0, 1.0, shape=F + 1)
            latent = [S[0, 1 + j] for j in range(F)]
            latent += [S[1 + j, 1 + k] for j, k in itertools.combinations_with_replacement(range(F), 2)]
            latent += [u[1 + j] for j in range(F)] + [u[0]]
            names = [n_ for n_, *_ in glm.stats]
            noisy = pm.Data(f"{prefix}released", np.array([released[k] for k in names]))
            observe_noisy(f"{prefix}noisy", pt.stack(latent), np.array([self.noise_scales[k] for k in names]), noisy, self.noise)
        A = "log(1 + e^s)" if glm.family == "logistic" else "e^s"
        if self.approximation == "fixed":
            (b0, b1, b2), (lo, hi) = self.coefficients, self.interval
            approx = (f"A(s) = {A} replaced by its degree-2 Chebyshev interpolant {b0:.6g} + {b1:.6g} s + {b2:.6g} s^2 on "
                      f"the linear predictor's public interval [{lo:.4g}, {hi:.4g}]")
        else:
            approx = (f"A(s) = {A} replaced by the quadratic b0 + b1 s + b2 s^2 whose derivative b1 + 2 b2 s is the "
                      "least-squares line of A'(s) under the records' law of s = z'c in the model (Normal, from the "
                      "latent m, L and c: slope E A''(s), value E A'(s) at E s; "
                      + ("probit approximation of the logistic-normal integrals)" if glm.family == "logistic" else "exact lognormal moments)"))
        self.laws = {glm.factor: (
            f"PASS-GLM: {approx}; z = (1, (x - m) / h), y' = (y - {glm.y_center:g}) / {glm.y_half:g}; latent design statistics "
            "S = sum z z' = n [[1, m'], [m, L L' + m m']] (m ~ Uniform(-1, 1), L ~ LKJ(1) with half-normal(1) scales); given "
            "S, u = sum y' z ~ N(S ((b1 - y_c) e0 + 2 b2 c) / y_h, 2 b2 S / y_h^2), whose log-density in c is the PASS-GLM "
            "quadratic log-likelihood (at the law's b1, b2)")}
        return new

    def _public(self) -> dict:
        out = super()._public()
        if self.approximation == "fixed":
            rule = ("given by the caller" if self._interval_arg is not None else
                    f"the prior's central {PRIOR_BOX_MASS:g} box of the coefficients over the covariates' box, clipped")
            out["approximation"] = {"family": self.glm.family, "kind": "fixed", "interval": list(self.interval),
                                    "coefficients": list(self.coefficients), "interval_rule": rule}
        else:
            out["approximation"] = {"family": self.glm.family, "kind": "adaptive"}
        return out

    def __repr__(self):
        return (f"<PassGLM {self.glm.family} ({self.epsilon:g}, {self.delta:g})-DP, {self.approximation} approximation, "
                f"statistics {[s.name for _, s in self.statistics]}>")


def pass_glm(
    model,
    *,
    epsilon: float,
    data: Mapping[str, Domain],
    delta: float = 0.0,
    unit: str | Users = "record",
    public: Sequence[str] = (),
    values: Mapping[str, Any] | None = None,
    ledger: Any = "default",
    weights: Mapping[str, float] | None = None,
    approximation: str = "adaptive",
    interval: tuple[float, float] | None = None,
) -> PassGLM:
    """A noise-aware logistic or Poisson regression from noisy PASS-GLM statistics.

    Parameters
    ----------
    model : pm.Model or callable
        A model whose one private factor is ``pm.Bernoulli(logit_p=offset + linear terms)`` (outcome
        ``Binary()``) or ``pm.Poisson(mu=pm.math.exp(offset + linear terms))`` (outcome
        ``Integers(0, M)``), with private covariates declared in finite ``Box``/``Interval``/``Ball`` domains.
    epsilon : float
        The budget, spent once at the first :meth:`PassGLM.sample`.
    data : mapping
        The private containers' domains.
    delta : float
        ``> 0``: Gaussian noise, ``(epsilon, delta)``-DP; 0 (default): Laplace, pure DP.
    unit, public, values, ledger, weights
        As :func:`pymc_dp.noisy_statistics`.
    approximation : {"adaptive", "fixed"}
        ``"fixed"``: the degree-2 Chebyshev interpolant of the log-partition function on a public
        interval (Huggins et al.'s PASS-GLM as published); ``"adaptive"`` (default): the quadratic
        refitted inside the model to the law of the records' linear predictor that the latent
        covariate moments and the coefficients imply (better calibrated: the fixed quadratic biases
        the coefficients when the interval is wider than the data's linear predictors).
    interval : (float, float), optional
        ``"fixed"`` only: the public interval of the linear predictor; default
        :func:`predictor_interval` (from the prior and the domains).

    Returns
    -------
    PassGLM
        The mechanism: :meth:`~PassGLM.sample`, its release record and the audit protocol.
    """
    return PassGLM(model, epsilon=epsilon, data=data, delta=delta, unit=unit, public=public, values=values,
                   ledger=ledger, weights=weights, approximation=approximation, interval=interval)
