"""Private Newton steps for a logistic regression, and the noise-aware posterior given the last.

The noisy-statistics path (:func:`pymc_dp.noisy_statistics`) for a Bernoulli likelihood whose
logit is a linear predictor of private covariates, as PyMC users write it::

    pm.Bernoulli("y_obs", logit_p=alpha + X @ beta, observed=y)
    pm.Bernoulli("y_obs", p=pm.math.invlogit(alpha + b1 * x1 + b2 * x2), observed=y)

A logistic likelihood has no finite sufficient statistics, but its **score** and **Fisher
information** at a point are sums over records. The release takes a few Newton steps from public
iterates: stage ``t`` releases, at the public iterate ``c_t``, the information
``sum_i sigma'(z_iᵀc_t) z_i z_iᵀ`` (where its plan says so) and the score
``sum_i z_i (y_i - sigma(z_iᵀc_t))`` with Laplace noise, and steps to ``c_{t+1}``. Everything a
stage uses -- its iterate, its basis, its noise scales -- is computed from the earlier stages'
*noisy* outputs and public facts only. The posterior is then drawn by ``pm.sample`` from the
user's priors and the last stage's noisy score observed around its law given the coefficients
(Bernstein-von Mises, below).

Coordinates. The design row is ``z = (1, (x - m) / h)`` with ``m`` the midpoint and ``h`` the
half-width of each covariate's declared range (``z = x / max|x|`` without an intercept): public,
so every ``z`` lies in a box inside ``[-1, 1]``. The logit ``offset + sum_j b_j x_j`` is ``zᵀc``
with ``c_0 = offset + sum_j b_j m_j`` and ``c_j = b_j h_j``.

Bases and budget. After the first stage, each release is made in the eigenbasis ``V`` of the
latest noisy information (plus the prior's precision), with the budget spread unequally: along a
direction the data barely inform (small eigenvalue ``lambda``; age and age² on the gallery's
census data) the step divides the noise by ``lambda``, so that direction gets less noise. For the
score, coordinate ``j`` of ``Vᵀs`` gets Laplace scale ``b_j ∝ (R_j lambda_j)^(1/3)`` (which
minimises ``sum_j b_j² / lambda_j``, the step's error in posterior sds, for the sum of
sensitivities ``sum_j R_j / b_j``); for the information, entry ``(j, k)`` of ``VᵀHV`` gets scale
``∝ (D_jk lambda_j lambda_k)^(1/3)`` (which minimises ``sum s_jk² / (lambda_j lambda_k)``, the
error in posterior sds that the entry's noise gives a step of a posterior sd, for
``sum D_jk / s_jk``). The score is rotated from stage ``ROTATE_SCORE_FROM``
and the information from stage ``ROTATE_INFORMATION_FROM``: a first information at a small budget
is too noisy to choose a basis for the next one (measured, ``benchmarks/logistic_feasibility.py``).
Only utility depends on these choices, never privacy.

Privacy proof
-------------
Fix a stage and its public inputs (iterate ``c``, orthonormal basis ``V``, weights ``w``). Up to
``MAX_CORNER_COVARIATES`` covariates, over the domain box of ``z`` (corners ``Q``, of the bounding
box for a Ball; a convex function of ``z`` is largest at one), let
``R_j = max_Q |V_jᵀz|``, ``rho = sigma(max_Q |zᵀc|)`` and ``alpha = sigma'(dist(0, [min_Q zᵀc,
max_Q zᵀc]))`` (``zᵀc`` is linear, so its range over the box is that of the corners, and
``sigma'`` decreases in ``|zᵀc|``).

1. *Score.* One record adds ``q(z, y) = r Vᵀz`` with ``r = y - sigma(zᵀc)``. Replacing it by
   ``(z', y')`` changes ``sum_j |change_j| / w_j`` by at most ``S = sup ||(q(z, y) - q(z', y')) /
   w||_1`` over two records of the box, and :func:`score_change_bound` bounds ``S`` from above
   (its derivation: sign vectors, slabs of ``zᵀc`` on which ``r`` lies in an interval, and the
   vertices of box ∩ slab; within 1% of what two records attain, a test). The coordinate-wise
   bound ``2 rho max_Q sum_j |V_jᵀz| / w_j`` (``|r| <= rho`` for both records) also holds, and the
   lesser of the two is used (the coordinate-wise one alone above ``SCORE_SLAB_DIMENSION``
   coefficients). With ``b_j = w_j T`` and ``T = m S / epsilon_s`` (``m`` rows per
   unit) the Laplace release is ``epsilon_s``-DP.
2. *Information.* One record adds ``a (V_jᵀz)(V_kᵀz)`` with ``a = sigma'(zᵀc)``, so one change
   moves entry ``(j, k)`` by at most the entry's range over the box, which
   :func:`information_change_bound` bounds from above by interval arithmetic on cells of the box;
   the coordinate-wise bounds ``D_jj = alpha R_j²`` (a diagonal entry lies in
   ``[0, alpha R_j²]``) and ``D_jk = 2 alpha R_j R_k`` also hold, and the lesser is used (times
   ``m``; never below ``SLOPE_FLOOR`` in place of ``alpha``). Scales
   ``s_jk = w_jk sum(D / w) / epsilon_i`` make the release of the upper triangle
   ``epsilon_i``-DP.
*Any number of covariates, Ball domains* (``docs/theory/logistic_newton.md``): the logit's
range and each ``R_j`` are exact support functions of the records' set (:func:`geometry_of`), so
``rho``, ``alpha`` and the coordinate-wise bounds above need no corners; the score's change is
also at most :func:`score_l1_bound` (``2 rho min(sum_j R_j / w_j, ||1/w|| ||V|| sup||z||)``) and
the information's whole weighted change at most :func:`information_l1_bound` (``2 alpha
lambda_max(B) ||V||² sup||z||²``). All are upper bounds; the least is used, and above
``MAX_CORNER_COVARIATES`` only these (the cells' bound runs on the bounding box).

3. Every stage's inputs are functions of the earlier outputs (post-processing), so adaptive
   sequential composition gives ``sum_t (epsilon_s,t + epsilon_i,t) = epsilon``. The posterior
   is post-processing of the outputs. ``n`` (public under replacement), the domains, the priors
   and the plan are public.

The noise-aware posterior
-------------------------
Let ``c_L`` be the last stage's iterate, ``H`` the last released information (likelihood only,
eigenvalues floored) and ``u = Vᵀs(c_L) + e`` the last noisy score. Near the maximum-likelihood
estimate ``ĉ`` the score is ``s(c_L) ≈ H (ĉ - c_L)``, and given the coefficients ``ĉ`` is about
``N(c, H⁻¹)`` (Bernstein-von Mises), so the model holds a latent ``s ~ N(H (c - c_L), H)`` and
observes ``u = Vᵀs + e`` with ``e ~ Laplace(b)`` latent. It is an *asymptotic* law: the information's own noise is not
modelled (it is plugged in), nor the linearisation about ``c_L``, nor the earlier stages (they only
bring ``c_L`` near ``ĉ``). At the gallery's census size (n = 32,561) the releases land within
2 posterior sds of the non-private posterior (``docs/gallery.md``); at a few hundred records the
noise dominates and :func:`pymc_dp.recommend` does not propose this path.
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
from pytensor.scalar.math import Sigmoid
from pytensor.tensor.elemwise import Elemwise
from pytensor.tensor.random.basic import BernoulliRV
from scipy.special import expit

from pymc_dp.chunks import CHUNK_ROWS, is_dask
from pymc_dp.domains import Domain, Integers
from pymc_dp.exceptions import DomainError, PathNotImplementedError, PrivacyError, UnsupportedFactorError
from pymc_dp.mechanisms.logistic_bounds import (
    SCORE_SLAB_DIMENSION,
    SLOPE_FLOOR,
    Geometry,
    information_change_bound,
    information_l1_bound,
    largest_slope,
    linear_range,
    reach_bound,
    score_change_bound,
    score_l1_bound,
    sigmoid_slope,
)
from pymc_dp.mechanisms.noise import continuous_laplace
from pymc_dp.mechanisms.regression import private_factors, read_linear_predictor
from pymc_dp.mechanisms.statistics import FamilyStatistics, NoisyStatistics, StatisticsFactor
from pymc_dp.units import describe_unit

__all__ = ["DEFAULT_STAGES", "NoisyLogistic", "is_logistic", "read_logistic"]

#: (score share, information share) of epsilon per stage. Three stages release both and bring the
#: iterate near the maximum; two release the score only and step with the last information
#: (chord steps: 5 numbers instead of 20). The best of a search on the gallery's census data at
#: n = 32,561 (benchmarks/logistic_feasibility.py): 97-98.5% of releases within 2 sds there.
DEFAULT_STAGES = ((0.05, 0.05), (0.05, 0.05), (0.05, 0.25), (0.10, 0.0), (0.40, 0.0))
#: the first stage whose score is released in the eigenbasis of the latest information
ROTATE_SCORE_FROM = 1
#: the first stage whose information is released in that basis, with its budget spread unequally
ROTATE_INFORMATION_FROM = 2
#: eigenvalues of a noisy information below this share of the largest are floored there
EIGEN_FLOOR = 1e-3
#: up to this many covariates the maps also enumerate the 2^F corners of the (bounding) box, whose
#: joint bounds are tighter; above it only the closed forms of ``logistic_bounds`` (any F) are used
MAX_CORNER_COVARIATES = 12
#: draws of the prior that give its mean and precision on ``c`` (public: the Newton steps' ridge)
PRIOR_DRAWS = 4000


@dataclasses.dataclass(frozen=True)
class _Covariate:
    """One covariate: column ``column`` of ``container`` (``-1``: a vector container), declared in
    [lo, hi]; ``ball``: the radius when the container's rows lie in a Ball (then [lo, hi] is its
    bounding interval)."""

    container: str
    column: int
    lo: float
    hi: float
    ball: float | None = None


@dataclasses.dataclass(frozen=True)
class _Logistic:
    factor: str
    y: str
    features: tuple[_Covariate, ...]
    intercept: bool
    offset: Any  # the logit's offset (a scalar expression) or None
    coefs: tuple  # per linear term: (container, coefficient expression, record width)
    center: np.ndarray  # public: subtracted from each covariate
    half: np.ndarray  # public: each covariate is divided by it after centring
    lo: np.ndarray  # the box of the scaled covariates
    hi: np.ndarray

    @property
    def dimension(self) -> int:
        return len(self.features) + int(self.intercept)


def _logit_of(p):
    """``eta`` when ``p`` is ``sigmoid(eta)`` (``pm.math.invlogit``, or ``logit_p=``), else None."""
    from pymc_dp.predictor import strip_identity

    p = strip_identity(p)
    if p.owner is not None and isinstance(p.owner.op, Elemwise) and isinstance(p.owner.op.scalar_op, Sigmoid):
        return p.owner.inputs[0]
    return None


def is_logistic(model: pm.Model, domains: Mapping[str, Domain]) -> bool:
    """Whether the one factor reading private data is a Bernoulli whose ``p`` is ``invlogit`` of
    an expression (the path :class:`NoisyLogistic` reads; it refuses the rest by name)."""
    factors = private_factors(model, domains)
    if len(factors) != 1 or not isinstance(factors[0].owner.op, BernoulliRV):
        return False
    (p,) = factors[0].owner.op.dist_params(factors[0].owner)
    return _logit_of(p) is not None


def read_logistic(model: pm.Model, domains: Mapping[str, Domain]) -> _Logistic:
    """The logistic regression of ``model``, or a typed refusal naming the factor."""
    from pymc_dp.factors import private_ancestors, strip_casts

    private = {v: v.name for v in model.data_vars if v.name in domains}
    shapes = {v.name: tuple(np.shape(v.get_value())) for v in private}
    factors = private_factors(model, domains)
    if len(factors) != 1:
        raise UnsupportedFactorError(
            f"private Newton steps need one factor reading the private data, found {[f.name for f in factors]}."
        )
    (rv,) = factors
    if not isinstance(rv.owner.op, BernoulliRV):
        raise UnsupportedFactorError(f"factor {rv.name!r} is not a Bernoulli; private Newton steps are for a logistic regression.")
    value = strip_casts(model.rvs_to_values[rv])
    if value not in private or len(shapes[value.name]) != 1:
        raise UnsupportedFactorError(
            f"factor {rv.name!r} must observe a private vector pm.Data container (one outcome per record) directly."
        )
    y = value.name
    if not (isinstance(domains[y], Integers) and domains[y].lo == 0 and domains[y].hi == 1):
        raise DomainError(f"the outcome {y!r} is declared {domains[y]}; a logistic regression's outcome is Binary().")
    (p,) = rv.owner.op.dist_params(rv.owner)
    eta = _logit_of(p)
    if eta is None:
        raise UnsupportedFactorError(
            f"factor {rv.name!r}: its p must be pm.math.invlogit(linear predictor) (or logit_p=); other links are "
            "not implemented for private Newton steps. Use pymc_dp.make_private."
        )
    offset, coefs, columns = read_linear_predictor(rv, eta, "logit", "private Newton steps", y, private, domains, shapes)
    features = []
    for container, column, lo, hi, ball in columns:
        if ball is not None and any(f.container == container and f.column == column for f in features):
            # two coordinates equal to one Ball column leave the Ball (|a1 + a2| <= sqrt(2) ||(a1, a2)||)
            raise PathNotImplementedError(
                f"column {column} of the Ball container {container!r} enters the logit twice; private Newton steps "
                "bound a Ball's records by its radius over distinct columns: combine the two terms into one."
            )
        features.append(_Covariate(container, column, lo, hi, ball))
    unread = sorted(set(domains) - {y} - {f.container for f in features})
    if unread:
        raise UnsupportedFactorError(f"private container(s) {unread} are not read by the logistic regression {rv.name!r}.")
    for v in model.free_RVs + model.potentials:
        if private_ancestors(v, private):
            raise UnsupportedFactorError(f"{v.name!r} reads the private data; only the regression's factor may read it.")
    lo = np.array([f.lo for f in features])
    hi = np.array([f.hi for f in features])
    intercept = offset is not None
    if intercept:
        center, half = (lo + hi) / 2.0, (hi - lo) / 2.0
    else:
        center, half = np.zeros(len(features)), np.maximum(np.abs(lo), np.abs(hi))
    if np.any(half <= 0):
        raise DomainError(f"factor {rv.name!r}: a covariate's declared range is a single point; it carries no information.")
    return _Logistic(rv.name, y, tuple(features), intercept, offset, tuple(coefs), center, half,
                     (lo - center) / half, (hi - center) / half)


# --------------------------------------------------------------------------- the statistics
def scaled_design(lg: _Logistic, arrays: Mapping[str, np.ndarray]) -> np.ndarray:
    """``(n, D)``: the rows ``z = (1, (x - m) / h)`` (no leading 1 without an intercept)."""
    cols = []
    for j, f in enumerate(lg.features):
        a = np.asarray(arrays[f.container], float)
        cols.append(((a if f.column < 0 else a[:, f.column]) - lg.center[j]) / lg.half[j])
    x = np.stack(cols, axis=1)
    return np.concatenate([np.ones((len(x), 1)), x], axis=1) if lg.intercept else x


def geometry_of(lg: _Logistic) -> Geometry:
    """The set of scaled records ``z`` (public): the box ``[lo, hi]`` of the scaled covariates,
    except that the columns of each Ball container form one block ``||(x_b - m_b)||_2 <= r``,
    i.e. ``z_b = centre_b + (r / h_b) u_b`` with ``||u_b|| <= 1`` (``docs/theory/logistic_newton.md#geometry``)."""
    k = int(lg.intercept)
    centre = np.concatenate([np.ones(k), (lg.lo + lg.hi) / 2.0])
    half = np.concatenate([np.zeros(k), (lg.hi - lg.lo) / 2.0])
    blocks: dict[str, list[int]] = {}
    for j, f in enumerate(lg.features):
        if f.ball is not None:
            blocks.setdefault(f.container, []).append(j)
    balls = []
    for js in blocks.values():
        idx = np.array(js) + k
        half[idx] = 0.0
        balls.append((idx, np.array([lg.features[j].ball / lg.half[j] for j in js])))
    return Geometry(centre, half, tuple(balls))


def box_corners(lg: _Logistic) -> np.ndarray:
    """``(2^F, D)``: the corners of the scaled covariates' box (with the intercept's 1); for a
    Ball, of its bounding box (a superset: bounds over it hold over the Ball)."""
    corners = np.array(list(itertools.product(*zip(lg.lo, lg.hi))), float).reshape(-1, len(lg.features))
    return np.concatenate([np.ones((len(corners), 1)), corners], axis=1) if lg.intercept else corners


def score_information(Z: np.ndarray, y: np.ndarray, c: np.ndarray, V: np.ndarray, information: bool):
    """The score ``Vᵀ sum z (y - sigma(zᵀc))`` ``(R, D)`` and, if asked, the information
    ``Vᵀ (sum sigma'(zᵀc) z zᵀ) V`` ``(R, D, D)`` for each row of ``c`` ``(R, D)`` and basis ``V``
    ``(R, D, D)``, summed in chunks of rows."""
    R, D = c.shape
    score = np.zeros((R, D))
    info = np.zeros((R, D, D)) if information else None
    for start in range(0, len(y), CHUNK_ROWS):
        z, yy = Z[start : start + CHUNK_ROWS], y[start : start + CHUNK_ROWS]
        eta = c @ z.T  # (R, rows)
        score += (yy[None, :] - expit(eta)) @ z
        if information:
            info += np.einsum("rn,nd,ne->rde", sigmoid_slope(eta), z, z)
    score = np.einsum("rd,rdk->rk", score, V)
    if information:
        info = np.einsum("rdj,rde,rek->rjk", V, info, V)
    return score, info


def _floored_eigh(H: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    val, vec = np.linalg.eigh(0.5 * (H + np.swapaxes(H, -1, -2)))
    top = np.max(val, axis=-1, keepdims=True)
    return np.maximum(val, EIGEN_FLOOR * np.maximum(top, 1e-12)), vec


class NoisyLogistic(NoisyStatistics):
    """Private Newton steps for a logistic regression, and the noise-aware posterior given the
    last noisy score (see :mod:`pymc_dp.mechanisms.logistic`).

    Built by :func:`pymc_dp.noisy_statistics` for a Bernoulli likelihood whose ``p`` is
    ``invlogit`` of a linear predictor of private covariates. :meth:`sample` charges ``epsilon``
    at its first call, runs the stages, and draws with ``pm.sample`` (its keyword arguments pass
    through); later calls are free. ``stages`` is the plan: ``(score share, information share)``
    of ``epsilon`` per stage, shares summing to 1, the first stage releasing both.
    """

    #: a dense mass matrix: the coefficients of collinear covariates (age, age²) are strongly
    #: correlated a posteriori, which a diagonal adaptation crawls through (260 s and chains that
    #: disagreed on the gallery's census data; ``init=`` overrides it)
    default_init = "jitter+adapt_full"
    algorithm = ("private Newton steps for a logistic regression: Laplace-noised score and Fisher information at "
                 "public iterates (budget and basis from earlier outputs), and the posterior given the last noisy "
                 "score with its noise in the model (Bernstein-von Mises)")

    def __init__(self, model, *, stages: Sequence[tuple[float, float]] | None = None, **kwargs):
        if kwargs.get("delta", 0.0):
            raise PathNotImplementedError("private Newton steps with delta > 0 are not implemented: use delta=0 (Laplace).")
        if kwargs.get("weights") is not None:
            raise PathNotImplementedError("weights= is not implemented for private Newton steps: their plan is stages=.")
        if describe_unit(kwargs.get("unit", "record"))["kind"] == "attribute":
            raise PathNotImplementedError(
                "unit='attribute' is not implemented for private Newton steps: the score reads the outcome and every "
                "covariate, so one container's change moves every statistic; use unit='record' or a Users unit."
            )
        self.stages = _check_stages(DEFAULT_STAGES if stages is None else stages)
        super().__init__(model, **kwargs)
        if any(is_dask(v) for v in self._values.values()):
            raise PathNotImplementedError(
                "values= with Dask collections is not implemented for private Newton steps (each stage reads the data "
                "again); pass NumPy arrays, which are summed in chunks of rows."
            )
        self.trace: dict | None = None  # after the release: the public iterates, bases and scales

    def _read(self, model, domains):
        lg = read_logistic(model, domains)
        self.logistic = lg
        family = FamilyStatistics(lg.factor, lg.y, (), None, None)
        return [StatisticsFactor(lg.factor, lg.y, BernoulliRV, (), family, 1, tuple(sorted({f.container for f in lg.features})))]

    def _statistic_reads(self) -> dict[str, frozenset]:
        return {}

    # ------------------------------------------------------------------ calibration (public)
    def _calibrate(self):
        lg = self.logistic
        self.geometry = geometry_of(lg)
        self.corners = box_corners(lg) if len(lg.features) <= MAX_CORNER_COVARIATES else None
        self.prior_mean, self.prior_precision = self._prior_on_c()
        for share in {e * self.epsilon for pair in self.stages for e in pair if e > 0}:
            continuous_laplace(np.zeros(0), 1.0 / share, sensitivity=1.0, epsilon=share)  # OpenDP's map at each share
        m = self.rows_per_unit
        derivation = (
            f"{len(self.stages)} stages of private Newton steps at public iterates c_t (epsilon shares, score / "
            f"information: {', '.join(f'{a:g}/{b:g}' for a, b in self.stages)}). Over the corners Q of the scaled box "
            "(z = (1, (x - m) / h)): R_j = max_Q |V_j'z|, rho = sigmoid(max_Q |z'c|), alpha = sigmoid'(dist(0, "
            "[min_Q z'c, max_Q z'c])). Score in basis V with Laplace scales b_j = w_j T, T = m S / epsilon_s "
            f"(m = {m} rows per unit), S the lesser of two upper bounds on one change's sum_j |change_j| / w_j: "
            "the joint bound over two records (slabs of z'c on which y - sigmoid(z'c) lies in an interval, vertices "
            f"of box and slab; up to {SCORE_SLAB_DIMENSION} coefficients) and 2 rho max_Q sum_j |V_j'z| / w_j: epsilon_s-DP. Information V'HV, upper triangle, "
            "Laplace scales s_jk = w_jk sum(D / w) / epsilon_i with D_jk the lesser of the entry's range bound by "
            "interval arithmetic on cells of the box and alpha m R_j^2 (diagonal) or 2 alpha m R_j R_k: epsilon_i-DP. "
            "Closed forms that enumerate nothing (docs/theory/logistic_newton.md) also bound both, and above "
            f"{MAX_CORNER_COVARIATES} covariates (or for a Ball) they replace the corners: the exact support function "
            "of the records' set for the logit's range and R_j, 2 rho min(sum_j R_j / w_j, ||1/w|| ||V|| sup||z||) for "
            "the score, 2 alpha lambda_max(B) ||V||^2 sup||z||^2 for the information's weighted L1 change; the least "
            "bound is used. Every stage's c_t, V and w are functions of the earlier noisy outputs: adaptive sequential "
            "composition gives "
            f"epsilon = {self.epsilon:g}"
        )
        self.joint = {"K": 1.0, "attained": None, "d": None}
        return [], {}, {}, derivation

    def _coefficient_vector(self, replace: Mapping | None = None):
        """``c`` as an expression of the model's coefficients (``c_0 = offset + b'm``, ``c_j = b_j h_j``)."""
        lg = self.logistic
        exprs = [c for _, c, _ in lg.coefs] + ([lg.offset] if lg.intercept else [])
        if replace is not None:
            exprs = graph_replace(exprs, replace, strict=False)
        w = pt.concatenate([pt.reshape(c, (width,)) for c, (_, _, width) in zip(exprs[: len(lg.coefs)], lg.coefs)])
        slopes = w * lg.half
        if not lg.intercept:
            return slopes
        return pt.concatenate([pt.reshape(exprs[-1] + pt.dot(w, lg.center), (1,)), slopes])

    def _prior_on_c(self) -> tuple[np.ndarray, np.ndarray]:
        """The prior's mean and precision on ``c`` from ``PRIOR_DRAWS`` draws (public): the ridge
        of the Newton steps, so that they find the posterior's mode rather than a likelihood that
        can be flat (separation). Zero where the draws are not finite (a heavy-tailed prior)."""
        D = self.logistic.dimension
        draws = np.asarray(pm.draw(self._coefficient_vector(), draws=PRIOR_DRAWS, random_seed=0), float).reshape(-1, D)
        if not np.all(np.isfinite(draws)):
            return np.zeros(D), np.zeros((D, D))
        val, vec = np.linalg.eigh(np.atleast_2d(np.cov(draws, rowvar=False)))
        val = np.maximum(val, 1e-12 * max(val.max(), 1e-300))
        return draws.mean(axis=0), (vec / val) @ vec.T

    # ------------------------------------------------------------------ one stage's public choices
    def _reach(self, V: np.ndarray) -> np.ndarray:
        """``(R, C, D)``: ``|V_jᵀz|`` at every corner (of the bounding box; only where enumerated)."""
        return np.abs(np.einsum("cd,rdk->rck", self.corners, V))

    def _logit_range(self, c: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``(R,)`` each: the range of ``zᵀc`` over the records' set (closed form, exact)."""
        return linear_range(self.geometry, c)

    def _basis(self, rotate: bool, c, H):
        """``(curvatures, basis)``: the eigenpairs of the latest information plus the prior's
        precision where the stage rotates, else ones and the plain coordinates."""
        R, D = c.shape
        if rotate:
            return _floored_eigh(H + self.prior_precision)
        return np.ones((R, D)), np.broadcast_to(np.eye(D), (R, D, D)).copy()

    def _information_scales(self, t: int, c, H, eps: float):
        """The basis and the ``(R, D(D+1)/2)`` Laplace scales of stage ``t``'s information."""
        D = c.shape[1]
        rotate = H is not None and t >= ROTATE_INFORMATION_FROM
        lam, V = self._basis(rotate, c, H)
        # the margin covers a last-ulp rounding of the data's own slopes
        alpha = np.maximum(largest_slope(*self._logit_range(c)) * (1.0 + 1e-9), SLOPE_FLOOR)  # (R,)
        reach = reach_bound(self.geometry, V)  # (R, D): exact, the corners' without enumerating them
        iu = np.triu_indices(D)
        factor = np.where(iu[0] == iu[1], 1.0, 2.0)
        coordinatewise = factor * reach[:, iu[0]] * reach[:, iu[1]]  # (R, entries)
        d = alpha[:, None] * coordinatewise
        # the cells' bound sees where the slope is small (both are upper bounds); the floor's
        # rationale is SLOPE_FLOOR's
        cells = information_change_bound(self.logistic.lo, self.logistic.hi, self.logistic.intercept, c, V)
        d = self.rows_per_unit * np.maximum(np.minimum(d, cells), SLOPE_FLOOR * coordinatewise)
        if rotate:
            w = np.cbrt(d * lam[:, iu[0]] * lam[:, iu[1]])
            w = np.where(w > 0, w, 1.0)
        else:
            w = np.ones_like(d)
        total = np.sum(d / w, axis=1)
        # the joint bound over the entries (closed form): far below the sum of ranges over a Ball
        total = np.minimum(total, self.rows_per_unit * information_l1_bound(self.geometry, V, w, alpha))
        return V, np.maximum(w * total[:, None] / eps, 1e-300)

    def _score_scales(self, t: int, c, H, eps: float):
        """The basis and the ``(R, D)`` Laplace scales of stage ``t``'s score."""
        rotate = H is not None and t >= ROTATE_SCORE_FROM
        lam, V = self._basis(rotate, c, H)
        w = np.cbrt(reach_bound(self.geometry, V) * lam) if rotate else np.ones_like(lam)
        w = np.where(w > 0, w, 1.0)
        lo, hi = self._logit_range(c)
        rho = expit(np.maximum(-lo, hi))  # (R,): sup |y - sigma(z'c)|
        change = score_l1_bound(self.geometry, V, w, rho)  # closed forms, any number of covariates
        if self.corners is not None:  # every bound below is an upper bound: the least is used
            proj = self._reach(V)  # (R, C, D)
            change = np.minimum(change, 2.0 * rho * np.max(np.sum(proj / w[:, None, :], axis=2), axis=1))
            if c.shape[1] <= SCORE_SLAB_DIMENSION:  # the joint bound over records
                change = np.minimum(change, score_change_bound(self.corners, c, V / w[:, None, :]))
        T = self.rows_per_unit * change / eps
        return V, np.maximum(w * T[:, None], 1e-300)

    def _step(self, c, H, score_c):
        """One Newton step on the log posterior's Gaussian-prior approximation (public)."""
        val, vec = _floored_eigh(H + self.prior_precision)
        g = score_c - (c - self.prior_mean) @ self.prior_precision
        return c + np.einsum("rdk,rk->rd", vec, np.einsum("rdk,rd->rk", vec, g) / val)

    # ------------------------------------------------------------------ the stages
    def _walk(self, runs: int, values_of=None, noise=None, outputs=None) -> tuple[np.ndarray, list[dict]]:
        """Walk the stages for ``runs`` releases: with ``outputs`` ``(runs, d)`` given, replay
        them (every public choice recomputed from them alone); otherwise each release is
        ``values_of(c, V, information)`` plus ``noise(scales)``. Returns the outputs and, per
        stage, its public choices."""
        D = self.logistic.dimension
        iu = np.triu_indices(D)
        c = np.tile(self.prior_mean, (runs, 1))
        H = None
        pieces, states, at = [], [], 0
        for t, (score_share, info_share) in enumerate(self.stages):
            state = {"c": c}
            if info_share > 0:
                V, s = self._information_scales(t, c, H, info_share * self.epsilon)
                if outputs is None:
                    _, info = values_of(c, V, True)
                    out = info[:, iu[0], iu[1]] + noise(s)
                else:
                    out = outputs[:, at : at + len(iu[0])]
                at += len(iu[0])
                pieces.append(out)
                W = np.zeros((runs, D, D))
                W[:, iu[0], iu[1]] = out
                W[:, iu[1], iu[0]] = out
                H = np.einsum("rdj,rjk,rek->rde", V, W, V)
                state.update(information_basis=V, information_scales=s)
            V, b = self._score_scales(t, c, H, score_share * self.epsilon)
            if outputs is None:
                true, _ = values_of(c, V, False)
                out = true + noise(b)
            else:
                out = outputs[:, at : at + D]
            at += D
            pieces.append(out)
            state.update(score_basis=V, score_scales=b, score=out, information=H)
            states.append(state)
            c = self._step(c, H, np.einsum("rdk,rk->rd", V, out))
        states.append({"c": c})
        return np.concatenate(pieces, axis=1), states

    def _data(self, values: Mapping[str, Any]) -> tuple[np.ndarray, np.ndarray]:
        lg = self.logistic
        containers = sorted({f.container for f in lg.features})
        arrays = {k: np.asarray(values[k]) for k in containers}
        return scaled_design(lg, arrays), np.asarray(values[lg.y], float)

    def release_statistics(self) -> dict[str, float]:
        """Charge ``epsilon`` and run the stages (once; later calls return the outputs)."""
        if self.released is not None:
            return dict(self.released)
        from pymc_dp.mechanisms.base import charge

        with charge(self):
            Z, y = self._data(self._values)

            def noise(scales):  # OpenDP's floating-point-safe Laplace, one scale per entry
                return np.array([[continuous_laplace(np.zeros(1), float(s))[0] for s in row] for row in scales])

            outputs, states = self._walk(1, lambda c, V, info: score_information(Z, y, c, V, info), noise)
        self.trace = states
        self.released = {name: float(v) for name, v in zip(self.output_names(), outputs[0])}
        return dict(self.released)

    def output_names(self) -> list[str]:
        """The names of the released numbers, in release order."""
        D = self.logistic.dimension
        names = []
        for t, (_, info_share) in enumerate(self.stages):
            if info_share > 0:
                names += [f"stage {t}: information[{j},{k}]" for j, k in zip(*np.triu_indices(D))]
            names += [f"stage {t}: score[{j}]" for j in range(D)]
        return names

    # ------------------------------------------------------------------ noise-aware model
    def noise_aware_model(self) -> pm.Model:
        self.release_statistics()
        from pymc.model.fgraph import clone_model

        last = self.trace[-2]
        pilot = last["c"][0]
        V, b, u = last["score_basis"][0], last["score_scales"][0], last["score"][0]
        val, vec = _floored_eigh(last["information"][0])
        H = (vec * val) @ vec.T
        chol_factor = np.linalg.cholesky(H)
        new = clone_model(self._noise_free)
        replace = {old: new[var.name] for old, var in self._replace.items()}
        prefix = f"_nss_{self.logistic.y}_"
        D = self.logistic.dimension
        with new:
            c = self._coefficient_vector(replace)
            # the released u = V's + e: with the noise e latent, the score s = V (u - e) is observed
            # around its law given c. (A latent s observed through the Laplace pins s and c to a
            # ridge, which NUTS crawled along: R-hat 1.2 after 200 s on the census data.)
            # (and in units of its scale: at a large epsilon a Laplace(1e-6) latent stalled NUTS)
            noise = pm.Laplace(f"{prefix}noise", 0.0, 1.0, shape=D)
            released = pm.Data(f"{prefix}released", u)
            pm.MvNormal(f"{prefix}score", mu=pt.dot(H, c - pilot) + pt.dot(V, b * noise), chol=chol_factor,
                        observed=pt.dot(V, released))
        self.laws = {self.logistic.factor: (
            "the last stage's score s at its public iterate c_L: s ~ N(H (c - c_L), H) (Bernstein-von Mises: the "
            "maximum-likelihood estimate is about N(c, H^-1) given the coefficients), H the last noisy information "
            "plugged in (eigenvalues floored); released u = V's + b e in the stage's basis V, e ~ Laplace(1) latent; "
            "asymptotic")}
        return new

    def _public(self) -> dict:
        out = super()._public()
        out["sensitivity"] = {"derivation": self.derivation, "rows_per_unit": self.rows_per_unit}
        stages = []
        for t, (a, b) in enumerate(self.stages):
            row = {"epsilon_score": a * self.epsilon, "epsilon_information": b * self.epsilon}
            if self.trace is not None:
                st = self.trace[t]
                row.update(iterate=st["c"][0].tolist(), score_scales=st["score_scales"][0].tolist(),
                           score_basis=st["score_basis"][0].tolist())
                if b > 0:
                    row.update(information_scales=st["information_scales"][0].tolist(),
                               information_basis=st["information_basis"][0].tolist())
            stages.append(row)
        lg = self.logistic
        out["newton"] = {
            "stages": stages,
            "coordinates": {"center": lg.center.tolist(), "half_width": lg.half.tolist(), "intercept": lg.intercept,
                            "rule": "z = (1, (x - center) / half_width); c_0 = offset + b'center, c_j = b_j half_width_j"},
            "prior_on_c": {"mean": self.prior_mean.tolist(), "precision": self.prior_precision.tolist(),
                           "rule": f"moments of {PRIOR_DRAWS} prior draws (public): the Newton steps' ridge"},
            **({} if self.trace is None else {"final_iterate": self.trace[-1]["c"][0].tolist()}),
        }
        out["noise"] = {"distribution": "Laplace per released number", "sampler": "OpenDP make_laplace (OS CSPRNG, not seedable)",
                        "scale": ({} if self.trace is None else dict(zip(self.output_names(), self._scales_vector().tolist())))}
        withheld = [d.name for d in self.model.deterministics if d.name not in self._noise_free.named_vars]
        if withheld:
            out["withheld"] = withheld
        return out

    def _scales_vector(self) -> np.ndarray:
        parts = []
        for t, (_, b) in enumerate(self.stages):
            if b > 0:
                parts.append(self.trace[t]["information_scales"][0])
            parts.append(self.trace[t]["score_scales"][0])
        return np.concatenate(parts)

    # ------------------------------------------------------------------ audit protocol
    def _scales_of(self, states) -> np.ndarray:
        parts = []
        for t, (_, b) in enumerate(self.stages):
            if b > 0:
                parts.append(states[t]["information_scales"])
            parts.append(states[t]["score_scales"])
        return np.concatenate(parts, axis=1)

    def _values_at(self, data, states) -> np.ndarray:
        """The true statistics of ``data`` at each stage's public choices ``(R, d)``."""
        Z, y = self._data(data)
        D = self.logistic.dimension
        iu = np.triu_indices(D)
        parts = []
        for t, (_, b) in enumerate(self.stages):
            st = states[t]
            if b > 0:
                _, info = score_information(Z, y, st["c"], st["information_basis"], True)
                parts.append(info[:, iu[0], iu[1]])
            score, _ = score_information(Z, y, st["c"], st["score_basis"], False)
            parts.append(score)
        return np.concatenate(parts, axis=1)

    def audit_runs(self, data, runs, rng):
        """``runs`` outputs of every stage on ``data`` (OpenDP's unit Laplace noise times each
        run's scales: the release's law)."""
        Z, y = self._data(data)
        out, _ = self._walk(int(runs), lambda c, V, info: score_information(Z, y, c, V, info),
                            lambda s: continuous_laplace(np.zeros(s.shape), 1.0) * s)
        return out

    def audit_log_ratio(self, x, y):
        """The exact log-density ratio of the stages' outputs: given the outputs, every stage's
        iterate, basis and scales are fixed, and each stage's term is a Laplace ratio."""

        def log_ratio(z):
            z = np.atleast_2d(np.asarray(z, float))
            _, states = self._walk(len(z), outputs=z)
            scales = self._scales_of(states)
            tx, ty = self._values_at(x, states), self._values_at(y, states)
            return np.sum((np.abs(z - ty) - np.abs(z - tx)) / scales, axis=1)

        return log_ratio

    def audit_score(self, x, y):
        """How far apart the outputs on ``x`` and ``y`` are, at the public choices of ``x``'s
        noise-free walk."""
        Zx, yx = self._data(x)
        _, states = self._walk(1, lambda c, V, info: score_information(Zx, yx, c, V, info), lambda s: np.zeros(s.shape))
        return float(np.sum(np.abs(self._values_at(x, states) - self._values_at(y, states)) / self._scales_of(states)))

    def __repr__(self):
        return (f"<NoisyLogistic {self.epsilon:g}-DP in {len(self.stages)} private Newton stages, "
                f"unit={describe_unit(self.unit)['kind']}>")


def _check_stages(stages) -> tuple[tuple[float, float], ...]:
    try:
        plan = tuple((float(a), float(b)) for a, b in stages)
    except (TypeError, ValueError):
        raise PrivacyError(f"stages={stages!r} must be (score share, information share) pairs.") from None
    if not plan:
        raise PrivacyError("stages= must list at least one stage.")
    if any(not (math.isfinite(a) and math.isfinite(b)) or a <= 0 or b < 0 for a, b in plan):
        raise PrivacyError(f"stages={stages!r}: every stage needs a score share > 0 and an information share >= 0.")
    if plan[0][1] <= 0:
        raise PrivacyError(f"stages={stages!r}: the first stage must release the information (its share > 0).")
    total = sum(a + b for a, b in plan)
    if abs(total - 1.0) > 1e-9:
        raise PrivacyError(f"stages={stages!r}: the shares sum to {total:g}, not 1.")
    return plan
