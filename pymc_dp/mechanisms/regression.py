"""Noisy sufficient statistics of a linear regression, and the noise-aware posterior.

The noisy-statistics path (:func:`pymc_dp.noisy_statistics`) for a Normal likelihood whose mean
is a linear predictor of private covariates, as PyMC users write it::

    pm.Normal("y_obs", mu=alpha + X @ beta, sigma=sigma, observed=y)       # or b1 * x1 + b2 * x2

With ``z = (1, x)`` the design row (the ``1`` when the predictor has an offset), the posterior
depends on the data only through ``ZᵀZ``, ``Zᵀy`` and ``yᵀy``. They are released **once** with
Laplace noise (sensitivities from the domains, ``epsilon / d`` per statistic), and the posterior
is computed by ``pm.sample`` with the noise in the model (Bernstein & Sheldon, NeurIPS 2019):

* the latent design statistics ``ZᵀZ = n [[1, mᵀ], [m, L Lᵀ + m mᵀ]]`` -- ``m`` the covariates'
  mean over the records, ``L`` the Cholesky factor of their covariance -- with a weak public
  prior (``m`` uniform on the coordinate ranges of the domain, LKJ(1) correlations, half-normal
  scales of half the ranges); the noisy ``ZᵀZ`` entries are observed around them;
* given ``ZᵀZ``, **exactly** (Cochran): ``y = Z w + e``, ``e ~ N(0, sigma² I)``, so
  ``Zᵀy = ZᵀZ w + sigma L_Z u`` and ``yᵀy = wᵀZᵀZ w + 2 sigma wᵀ L_Z u + sigma² (uᵀu + q)``,
  with ``L_Z`` the Cholesky factor of ``ZᵀZ``, ``u ~ N(0, I_D)`` and ``q ~ chi²(n - D)``
  independent (``uᵀu`` is ``eᵀPe / sigma²`` for the projection ``P`` on the columns of ``Z``, and
  ``q`` is ``eᵀ(I - P)e / sigma²``). The model holds ``q`` as its own free RV, independent of
  ``sigma`` a priori, and ``RSS = sigma² q``. Holding ``RSS ~ Gamma((n - D)/2, rate 1/(2 sigma²))``
  instead (the same law) makes a funnel as ``sigma -> 0``: at ``epsilon = 1`` NUTS then diverged
  or under-sampled small ``sigma``, against a sequential Monte Carlo reference that this form matches.

Privacy map: each released statistic ``sum_i t_j(z_i, y_i)`` changes by at most ``span_j``, the
range of ``t_j`` over one record's domain (:func:`_spans`, checked by enumeration in the tests),
and gets Laplace noise of scale ``span_j K / epsilon``, where ``K`` bounds
``sum_j |change of t_j| / span_j`` over one record's change
(:func:`pymc_dp.mechanisms.sensitivity.joint_bound`, certified; at most the ``d`` of basic
composition; with an offset every coordinate is centred and ``K`` is exact,
``p (p + 4)^2 / (4 (p + 3))`` for ``p = F + 1`` coordinates: 44.2 for 10 covariates where
``d = 77``, ``docs/theory/joint_sensitivity.md``): the release is ``epsilon``-DP.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
from typing import Any, Mapping, Sequence

import numpy as np
import pymc as pm
import pytensor.tensor as pt
from pytensor.graph.replace import graph_replace
from pytensor.tensor.random.basic import NormalRV

from pymc_dp.chunks import CHUNK_ROWS, is_dask
from pymc_dp.domains import Ball, Box, Domain, Interval
from pymc_dp.exceptions import DomainError, UnsupportedFactorError
from pymc_dp.mechanisms.statistics import (
    FamilyStatistics,
    NoisyStatistics,
    Statistic,
    StatisticsFactor,
    observe_noisy,
    square_span,
)

__all__ = ["NoisyRegression", "coordinate_range", "private_factors", "read_linear_predictor", "read_regression", "regression_design", "regression_statistics", "standardized_sums"]


@dataclasses.dataclass(frozen=True)
class _Feature:
    """One covariate: column ``column`` of ``container`` (``-1``: a vector container)."""

    container: str
    column: int
    lo: float  # the range of the centred coordinate x - center
    hi: float
    ball: float | None  # the radius when the container's rows lie in a Ball
    center: float = 0.0  # public: the midpoint of the declared range (0 without an intercept)

    @property
    def label(self) -> str:
        name = self.container if self.column < 0 else f"{self.container}[{self.column}]"
        return name if self.center == 0 else f"({name}{-self.center:+g})"


def coordinate_range(domain: Domain, name: str, column: int, width: int) -> tuple[float, float, float | None]:
    """``(lo, hi, radius)`` of column ``column`` of a ``width``-wide container's rows over its
    domain (``radius``: the Ball's, else None); a typed refusal for other domains."""
    if isinstance(domain, Ball):
        return -domain.radius, domain.radius, domain.radius
    if isinstance(domain, Box):
        lo, hi = np.broadcast_to(domain.lo, (width,)), np.broadcast_to(domain.hi, (width,))
        return float(lo[column]), float(hi[column]), None
    if isinstance(domain, Interval):
        return float(domain.lo), float(domain.hi), None
    raise DomainError(
        f"the covariate container {name!r} is declared {domain}; a regression's covariates need Interval, Box or "
        "Ball domains."
    )


def _product_span(a: tuple[float, float], b: tuple[float, float]) -> float:
    """The range of ``u v`` for ``u`` in ``a`` and ``v`` in ``b`` varying independently (corners)."""
    corners = [x * y for x in a for y in b]
    return max(corners) - min(corners)


def _matvec(A, x):
    """``A @ x`` for a small matrix, as an elementwise product and a sum.

    PyTensor compiles ``dot`` to BLAS ops (Gemv, Ger, Dot22) that run in Python where it links no
    BLAS (pip installs, its warning at import), about 4 us each per gradient evaluation; the
    elementwise form compiles to C. For the ``D <= ~12`` columns of a regression's design the
    arithmetic is negligible either way."""
    return pt.sum(A * x[None, :], axis=1)


def _gram(A):
    """``A @ A.T`` for a small matrix, without BLAS ops (see :func:`_matvec`)."""
    return pt.sum(A[:, None, :] * A[None, :, :], axis=2)


def _spans(features: Sequence[_Feature], intercept: bool, y: tuple[float, float], yname: str, ylabel: str | None = None) -> list[tuple]:
    """``(name, span, containers read, term)`` of every released statistic, in release order:
    ``sum x_j`` (with an intercept), ``sum x_j x_k`` (``j <= k``), ``sum x_j y``, ``sum y`` (with an
    intercept), ``sum y^2``.

    Span of one record's term over its domain: ``x_j`` ranges over its coordinate interval (a
    Ball of radius R: ``[-R, R]``); ``x_j^2`` over ``[min, max]`` of the square there (Ball:
    ``[0, R^2]``); ``x_j x_k`` over the corner products when the two vary independently (other
    containers, or a box), and over ``[-R^2/2, R^2/2]`` for two coordinates of one Ball row;
    ``x_j y`` over the corner products (``y`` is another container). Every bound is attained.
    """
    out = []
    ylabel = yname if ylabel is None else ylabel
    F = len(features)  # the record's coordinates: the features, then the outcome at index F
    if intercept:
        for j, f in enumerate(features):
            out.append((f"sum({f.label})", f.hi - f.lo, frozenset({f.container}), (j,)))
    for j, k in itertools.combinations_with_replacement(range(F), 2):
        a, b = features[j], features[k]
        if j == k:
            span = a.ball**2 if a.ball is not None else square_span(a.lo, a.hi)
            name = f"sum({a.label}^2)"
        else:
            same_ball = a.ball is not None and a.container == b.container
            span = a.ball**2 if same_ball else _product_span((a.lo, a.hi), (b.lo, b.hi))
            name = f"sum({a.label}*{b.label})"
        out.append((name, span, frozenset({a.container, b.container}), (j, k)))
    for j, f in enumerate(features):
        out.append((f"sum({f.label}*{ylabel})", _product_span((f.lo, f.hi), y), frozenset({f.container, yname}), (j, F)))
    if intercept:
        out.append((f"sum({ylabel})", y[1] - y[0], frozenset({yname}), (F,)))
    out.append((f"sum({ylabel}^2)", square_span(*y), frozenset({yname}), (F, F)))
    return out


@dataclasses.dataclass(frozen=True)
class _Regression:
    factor: str
    y: str
    features: tuple[_Feature, ...]
    intercept: bool
    offset: Any  # the predictor's offset (a scalar expression) or None
    coefs: tuple  # per linear term: (container, coefficient expression, record width)
    sigma: Any
    stats: tuple  # (name, span, containers, term)
    y_center: float = 0.0  # public: the midpoint of the outcome's domain (0 without an intercept)
    y_range: tuple = ()  # the range of the centred outcome y - y_center


def private_factors(model: pm.Model, domains: Mapping[str, Domain]) -> list:
    """The observed RVs that read a private container (as their value or through a parameter)."""
    from pymc_dp.factors import private_ancestors

    private = {v: v.name for v in model.data_vars if v.name in domains}
    return [rv for rv in model.observed_RVs
            if private_ancestors(model.rvs_to_values[rv], private) or any(private_ancestors(p, private) for p in rv.owner.inputs)]


def read_linear_predictor(rv, expr, what: str, path: str, y: str, private, domains, shapes):
    """``(offset, coefficients, columns)`` of ``expr``, factor ``rv``'s ``what`` (its mean, its
    logit), read as ``offset + linear terms in private covariates``: ``coefficients`` lists
    ``(container, coefficient expression, record width)`` and ``columns`` ``(container, column,
    lo, hi, radius)`` per covariate (column ``-1`` for a vector container). A typed refusal that
    names the factor and ``path`` (the mechanism) otherwise."""
    from pymc_dp.factors import private_ancestors
    from pymc_dp.predictor import NotAPredictor, analyse

    try:
        pred = analyse(expr, private, domains, {k: s[1:] for k, s in shapes.items()})
    except NotAPredictor as err:
        raise UnsupportedFactorError(f"factor {rv.name!r}: its {what} is not a linear predictor of the covariates ({err}).") from None
    if pred is None or pred.blocks or pred.ndim != 1 or pred.rax != 0 or not pred.linear:
        raise UnsupportedFactorError(
            f"factor {rv.name!r}: the {what} must be offset + linear terms in private covariates (no tables indexed "
            f"by private labels, no products of covariates); {path} of such predictors are not implemented."
        )
    if y in pred.containers:
        raise UnsupportedFactorError(f"factor {rv.name!r} reads its own outcome {y!r} in its {what}.")
    offset = pred.offset
    if offset is not None:
        if private_ancestors(offset, private) or (offset.type.ndim and not all(offset.type.broadcastable)):
            raise UnsupportedFactorError(
                f"factor {rv.name!r}: the offset of its {what} differs between records (public covariates are not "
                f"supported by {path}: declare them private with a domain)."
            )
    coefs, columns = [], []
    for t in pred.linear:
        if not t.coef.type.broadcastable[0]:
            raise UnsupportedFactorError(
                f"factor {rv.name!r}: the coefficients of {t.container!r} differ between records (or their shape "
                f"is not known statically); {path} need one coefficient per covariate."
            )
        width = shapes[t.container][1] if t.rec_ndim else 1
        if t.rec_ndim > 1 or len(shapes[t.container]) != 1 + t.rec_ndim:
            raise UnsupportedFactorError(f"factor {rv.name!r}: covariate container {t.container!r} must be a vector or a matrix.")
        for j in range(width):
            columns.append((t.container, j if t.rec_ndim else -1, *coordinate_range(domains[t.container], t.container, j, width)))
        coefs.append((t.container, t.coef, width))
    return offset, coefs, columns


def read_regression(model: pm.Model, domains: Mapping[str, Domain]) -> _Regression:
    """The linear regression of ``model``, or a typed refusal naming the factor."""
    from pymc_dp.factors import private_ancestors, strip_casts

    private = {v: v.name for v in model.data_vars if v.name in domains}
    shapes = {v.name: tuple(np.shape(v.get_value())) for v in private}
    factors = private_factors(model, domains)
    if len(factors) != 1:
        raise UnsupportedFactorError(
            f"noisy statistics of a regression need one factor reading the private data, found {[f.name for f in factors]}."
        )
    (rv,) = factors
    if not isinstance(rv.owner.op, NormalRV):
        raise UnsupportedFactorError(
            f"factor {rv.name!r} ({type(rv.owner.op).__name__.removesuffix('RV')}) reads private covariates; noisy "
            "sufficient statistics of a regression are implemented for a Normal likelihood. Use pymc_dp.make_private."
        )
    value = strip_casts(model.rvs_to_values[rv])
    if value not in private or len(shapes[value.name]) != 1:
        raise UnsupportedFactorError(
            f"factor {rv.name!r} must observe a private vector pm.Data container (one outcome per record) directly."
        )
    y = value.name
    mu, sigma = rv.owner.op.dist_params(rv.owner)
    if private_ancestors(sigma, private) or (sigma.type.ndim and not all(sigma.type.broadcastable)):
        raise UnsupportedFactorError(f"factor {rv.name!r}: sigma must be one value for every record, reading no private data.")
    offset, coefs, columns = read_linear_predictor(rv, mu, "mean", "noisy statistics", y, private, domains, shapes)
    if not isinstance(domains[y], Interval):
        raise DomainError(f"the outcome {y!r} is declared {domains[y]}; declare Interval(lo, hi).")
    features = [_Feature(container, column, lo, hi, ball) for container, column, lo, hi, ball in columns]
    unread = sorted(set(domains) - {y} - {f.container for f in features})
    if unread:
        raise UnsupportedFactorError(f"private container(s) {unread} are not read by the regression {rv.name!r}.")
    for v in model.free_RVs + model.deterministics + model.potentials:
        if private_ancestors(v, private):
            raise UnsupportedFactorError(f"{v.name!r} reads the private data; only the regression's factor may read it.")
    intercept = offset is not None
    y_center = 0.0
    if intercept:  # centre every coordinate at its domain's midpoint (public): see _centred
        features = [_centred(f) for f in features]
        y_center = 0.5 * (domains[y].lo + domains[y].hi)
    y_range = (domains[y].lo - y_center, domains[y].hi - y_center)
    ylabel = y if y_center == 0 else f"({y}{-y_center:+g})"
    stats = tuple(_spans(features, intercept, y_range, y, ylabel))
    return _Regression(rv.name, y, tuple(features), intercept, offset, tuple(coefs), sigma, stats, y_center, y_range)


def _centred(f: _Feature) -> _Feature:
    """The feature centred at the midpoint of its range.

    With an offset in the predictor, ``y = a + x b + e`` is ``y - c_y = (a + c b - c_y) + (x - c) b + e``:
    the same model on centred coordinates, with a shifted offset, so the statistics of the centred
    record carry the same information. They are cheaper: the range of ``x^2`` on ``[c - h, c + h]`` is
    at least ``h^2``, attained at ``c = 0``, and the range of ``x y`` over a box at least ``2 h_x h_y``
    (the alternating sum of the four corners is ``4 h_x h_y``), also attained when centred. A Ball is
    centred already."""
    if f.ball is not None:
        return f
    c = 0.5 * (f.lo + f.hi)
    return dataclasses.replace(f, lo=f.lo - c, hi=f.hi - c, center=c)


def regression_design(features: Sequence[_Feature], arrays: Mapping[str, np.ndarray]) -> np.ndarray:
    cols = []
    for f in features:
        a = np.asarray(arrays[f.container], float)
        cols.append((a if f.column < 0 else a[:, f.column]) - f.center)
    return np.stack(cols, axis=1)


def standardized_sums(n: int, center: float, scale: float, c: float, mid: float, half: float, s1, s2):
    """``(sum u / 2, sum u^2)`` that :func:`pymc_dp.standardize` released noisily for one column,
    ``u = (x - mid) / half``, from the regression's sums ``s1 = sum x''`` and ``s2 = sum x''^2`` of
    the column standardised (``x' = (x - center) / scale``) and centred (``x'' = x' - c``): ``x =
    center + scale (x'' + c)``, so ``u = delta + r x''`` with ``r = scale / half`` and ``delta =
    (center + scale c - mid) / half``. NumPy or PyTensor ``s1, s2``."""
    r, delta = scale / half, (center + scale * c - mid) / half
    return (n * delta + r * s1) / 2.0, n * delta**2 + 2.0 * delta * r * s1 + r**2 * s2


def regression_statistics(reg: _Regression, arrays: Mapping[str, np.ndarray]) -> np.ndarray:
    """The released statistics' true values on rows ``arrays`` (release order)."""
    x = regression_design(reg.features, arrays)
    y = np.asarray(arrays[reg.y], float) - reg.y_center
    F = x.shape[1]
    out = []
    if reg.intercept:
        out += list(x.sum(axis=0))
    xx = x.T @ x
    out += [xx[j, k] for j, k in itertools.combinations_with_replacement(range(F), 2)]
    out += list(x.T @ y)
    if reg.intercept:
        out.append(y.sum())
    out.append(y @ y)
    return np.asarray(out, float)


class NoisyRegression(NoisyStatistics):
    """Laplace-noised ``ZᵀZ, Zᵀy, yᵀy`` of a linear regression, released once, and the
    noise-aware posterior (see :mod:`pymc_dp.mechanisms.regression`).

    Built by :func:`pymc_dp.noisy_statistics` for a Normal likelihood whose mean is a linear
    predictor of private covariates. :meth:`sample` charges ``epsilon`` at its first call and
    draws with ``pm.sample`` (its keyword arguments pass through); later calls are free.

    Privacy proof
    -------------
    1. Replacing one record changes statistic ``j`` by at most ``span_j`` (:func:`_spans`; every
       bound is the range of the record's term over its domain), times ``m`` for ``Users(m)``.
    2. Jointly, ``sum_j |change_j| / span_j <= K`` over one record's change (certified: the exact
       reduction to a concave quadratic on a centred box, else interval branch and bound;
       ``"attribute"``: also at most the number of statistics reading the container).
    3. Laplace noise of scale ``span_j K / epsilon`` on statistic ``j``: the log-density ratio of
       the release is at most ``sum_j |change_j| / b_j <= epsilon``. ``n``, the domains, the
       priors and the scales are public; the posterior is post-processing.
    """

    algorithm = ("noise-aware inference on Laplace-noised sufficient statistics of a linear regression "
                 "(Bernstein & Sheldon 2019)")
    #: a dense mass matrix: ``Z'y`` pins ``L_Z'w + sigma u`` and ``y'y`` pins ``sigma^2 q``, so ``(w, u)`` and
    #: ``(log sigma, log q)`` lie on ridges that a diagonal adaptation crosses in long trajectories (issue 33
    #: item 4: mean tree depth 6.7 on the gallery's linear model at epsilon = 10, 4.0 with this;
    #: docs/mechanisms.md). ``init=`` overrides it.
    default_init = "jitter+adapt_full"

    def __init__(self, model, **kwargs):
        super().__init__(model, **kwargs)
        if any(is_dask(v) for v in self._values.values()):  # refuse before anything is charged
            raise NotImplementedError(
                "values= with Dask collections is not implemented for a regression (its rows span several "
                "containers); pass NumPy arrays, which are summed in chunks of rows."
            )

    def _read(self, model, domains):
        reg = read_regression(model, domains)
        self.regression = reg
        stats = tuple(Statistic(n, False, s, term) for n, s, _, term in reg.stats)
        family = FamilyStatistics(reg.factor, reg.y, stats, None, None)
        return [StatisticsFactor(reg.factor, reg.y, type(None), (), family, 1, tuple(sorted({f.container for f in reg.features})))]

    def _statistic_reads(self) -> dict[str, frozenset]:
        return {n: r for n, _, r, _ in self.regression.stats}

    def _joint(self, kind: str) -> tuple[float, float, int]:
        """The joint bound over one record's change (coordinates: the features, then the
        outcome). One container's change moves fewer statistics and is no worse than a whole
        record's, so ``"attribute"`` takes the smaller of ``K`` and its own count."""
        from pymc_dp.mechanisms.sensitivity import statistics_joint_bound

        reg = self.regression
        lo = [f.lo for f in reg.features] + [reg.y_range[0]]
        hi = [f.hi for f in reg.features] + [reg.y_range[1]]
        balls: dict = {}
        for j, f in enumerate(reg.features):
            if f.ball is not None:
                balls.setdefault(f.ball, []).append(j)
        return statistics_joint_bound(reg.stats, self.weights, lo, hi, kind, self.reads, radius=balls)

    def _true_statistics(self, values: Mapping[str, Any]) -> dict[str, float]:
        reg = self.regression
        names = [n for n, *_ in reg.stats]
        containers = [reg.y] + sorted({f.container for f in reg.features})
        if any(is_dask(values[c]) for c in containers):
            raise NotImplementedError(
                "values= with Dask collections is not implemented for a regression (its rows span several "
                "containers); pass NumPy arrays, which are summed in chunks of rows."
            )
        arrays = {c: np.asarray(values[c]) for c in containers}
        n = len(arrays[reg.y])
        total = np.zeros(len(names))
        for start in range(0, n, CHUNK_ROWS):
            total += regression_statistics(reg, {c: a[start : start + CHUNK_ROWS] for c, a in arrays.items()})
        return dict(zip(names, total.tolist()))

    def _observe_more(self, prefix: str, S, Szy, Syy) -> None:
        """Observations a subclass adds on the same latent ``ZᵀZ, Zᵀy, yᵀy`` (none here)."""

    def noise_aware_model(self) -> pm.Model:
        released = self.release_statistics()
        from pymc.model.fgraph import clone_model

        reg = self.regression
        new = clone_model(self._noise_free)
        replace = {old: new[var.name] for old, var in self._replace.items()}
        n = self.rows[reg.y]
        F = len(reg.features)
        D = F + int(reg.intercept)
        if n <= D:
            raise UnsupportedFactorError(f"factor {reg.factor!r}: the noise-aware law needs more records ({n}) than design columns ({D}).")
        prefix = f"_nss_{reg.y}_"
        with new:
            parts = graph_replace([c for _, c, _ in reg.coefs] + ([reg.offset] if reg.intercept else []) + [reg.sigma], replace, strict=False)
            coefs, rest = parts[: len(reg.coefs)], parts[len(reg.coefs):]
            w = [pt.reshape(c, (width,)) for c, (_, _, width) in zip(coefs, reg.coefs)]
            sigma = pt.reshape(rest[-1], ())
            if reg.intercept:  # the offset of the centred model: a + c b - c_y
                centers = np.array([f.center for f in reg.features])
                shift = pt.sum(pt.concatenate(w) * centers) - reg.y_center if np.any(centers) or reg.y_center else 0.0
                w = [pt.reshape(rest[0] + shift, (1,))] + w
            w = pt.concatenate(w)
            lo = np.array([f.lo for f in reg.features])
            hi = np.array([f.hi for f in reg.features])
            # the covariates' mean and covariance over the records: latent, weak public prior
            mean = pm.Uniform(f"{prefix}x_mean", lo, hi, shape=F)
            if F == 1:
                chol = pt.reshape(pm.HalfNormal(f"{prefix}x_sd", (hi - lo)[0] / 2), (1, 1))
            else:
                chol, _, _ = pm.LKJCholeskyCov(f"{prefix}x_cov", n=F, eta=1.0,
                                               sd_dist=pm.HalfNormal.dist((hi - lo) / 2, shape=F), compute_corr=True)
            if reg.intercept:
                top = pt.concatenate([pt.ones((1, 1)), pt.zeros((1, F))], axis=1)
                low = pt.concatenate([mean[:, None], chol], axis=1)
                L = math.sqrt(n) * pt.concatenate([top, low], axis=0)
            else:
                L = pt.linalg.cholesky(n * (pt.outer(mean, mean) + _gram(chol)))
            S = _gram(L)
            u = pm.Normal(f"{prefix}u", 0.0, 1.0, shape=D)
            # the residual sum of squares sigma^2 q, q ~ chi2(n - D) independent of sigma: written as
            # RSS ~ Gamma(rate 1 / (2 sigma^2)) it makes a funnel in (log sigma, log RSS) as sigma -> 0,
            # which NUTS under-explores (divergences, a biased sigma; benchmarks/results/calibration.md)
            rss = sigma**2 * pm.ChiSquared(f"{prefix}q", nu=n - D)
            # v = L_Z'w + sigma u: Z'y = L_Z v and y'y = v'v + RSS, the same numbers as Z'Z w + sigma L_Z u and
            # w'Z'Z w + 2 sigma w'L_Z u + sigma^2 u'u + RSS, in two small products instead of five
            v = _matvec(L.T, w) + sigma * u
            Szy = _matvec(L, v)
            Syy = pt.sum(v * v) + rss
            # the latent statistics in release order, gathered by two constant indices: one scalar
            # Subtensor per entry costs a full-matrix IncSubtensor per entry in the gradient (65 of
            # them for 10 covariates, the most expensive ops of the evaluation)
            off = int(reg.intercept)
            pairs = ([(0, 1 + j) for j in range(F)] if reg.intercept else []) + [
                (off + j, off + k) for j, k in itertools.combinations_with_replacement(range(F), 2)]
            flat = np.array([j * D + k for j, k in pairs], dtype=np.int64)
            zy = np.array([off + j for j in range(F)] + ([0] if reg.intercept else []), dtype=np.int64)
            latent = pt.concatenate([pt.reshape(S, (D * D,))[flat], Szy[zy], pt.reshape(Syy, (1,))])
            names = [n_ for n_, *_ in reg.stats]
            # the released numbers as data: a release of the same shapes compiles to the same graph
            # (PyTensor's cache), and they stay visible as what the posterior conditions on
            noisy = pm.Data(f"{prefix}released", np.array([released[k] for k in names]))
            observe_noisy(f"{prefix}noisy", latent, np.array([self.noise_scales[k] for k in names]), noisy, self.noise)
            preprocessing = self._observe_preprocessing(prefix, S, Szy, Syy, n)
            self._observe_more(prefix, S, Szy, Syy)
        self.laws = {reg.factor: (
            "latent design statistics Z'Z = n [[1, m'], [m, L L' + m m']] (m ~ Uniform on the coordinate ranges, "
            "L ~ LKJ(1) correlations with half-normal scales of half the ranges); given Z'Z, exactly: Z'y = Z'Z w + "
            "sigma L_Z u, y'y = w'Z'Z w + 2 sigma w'L_Z u + sigma^2 (u'u + q), u ~ N(0, I), q ~ chi2(n - D) "
            "independent (Cochran)" + preprocessing)}
        return new

    def _observe_preprocessing(self, prefix: str, S, Szy, Syy, n: int) -> str:
        """The released statistics of :func:`pymc_dp.standardize` behind the domains, observed
        around the same latent statistics (issue 33: the released centre of the outcome, not only
        a shift): for a column standardised as ``x' = (x - m) / s`` and centred here at ``c``,
        ``u = (x - mid) / half = delta + r x''`` with ``x'' = x' - c``, ``r = s / half`` and
        ``delta = (m + s c - mid) / half``, so ``sum u = n delta + r sum x''`` and ``sum u^2 = n
        delta^2 + 2 delta r sum x'' + r^2 sum x''^2``; each released entry is that plus Laplace noise
        of the release's public scale. The text for the law (empty when nothing is read).

        With an offset only: ``sum y''`` is latent there (``Z'y``'s first entry)."""
        reg = self.regression
        if not reg.intercept:
            return ""
        off = 1
        columns = [(f.container, max(f.column, 0), f.center, S[0, off + j], S[off + j, off + j])
                   for j, f in enumerate(reg.features)]
        columns.append((reg.y, 0, reg.y_center, Szy[0], Syy))
        read = []
        for container, col, c, s1, s2 in columns:
            est = getattr(self.domains.get(container), "preprocessing", None)
            rel = None if est is None else est.release
            if rel is None or container not in rel.released or rel.rows != n or not math.isfinite(rel.noise_scale):
                continue
            part = rel.released[container]
            m, scale = float(np.ravel(rel.center[container])[col]), float(np.ravel(rel.scale[container])[col])
            mid, half = float(part["mid"][col]), float(part["half"][col])
            half_sum, sum_sq = standardized_sums(n, m, scale, c, mid, half, s1, s2)
            tag = f"{prefix}std_{container}_{col}_"
            pm.Laplace(f"{tag}sum_u_half", mu=half_sum, b=rel.noise_scale, observed=float(part["sum_u_half"][col]))
            if "sum_u2" in part:
                pm.Laplace(f"{tag}sum_u2", mu=sum_sq, b=rel.noise_scale, observed=float(part["sum_u2"][col]))
            read.append(container if container == reg.y else f"{container}[{col}]")
        if not read:
            return ""
        return ("; pymc_dp.standardize's released sum u / 2 and sum u^2 (u = (x - mid) / half) of "
                f"{', '.join(dict.fromkeys(read))} observed around the same latent statistics (Laplace, its scale)")
