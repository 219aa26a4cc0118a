"""Beta regression on private covariates: a logit-link mean and a precision (issue 32).

Users write ``mu = pm.math.invlogit(eta)``, ``pm.Beta("y", alpha=mu * phi, beta=(1 - mu) * phi)``
(or ``pm.Beta("y", mu=mu, nu=phi)``, which PyMC builds the same way), with ``eta = b0 + x . w`` a
linear predictor of private covariates and ``phi`` a precision that reads no private data.
:func:`match_mean_precision` finds ``(eta, phi)`` in the two parameters; the factor graph then
hands the Beta rule ``alpha`` as a window of ``eta`` (``Bounds(..., space="logit-mean")``) and
``beta`` as the precision (``space="precision"``, a point per theta).

Per-record constant (:func:`beta_logit_mean_range`: exact up to the convergence of a 1-D search,
always bounded from above by a tangent). With ``A = mu phi`` (``phi - A = (1 - mu) phi``),

``f(A, y) = lnG(phi) - lnG(A) - lnG(phi - A) + (A - 1) ln y + (phi - A - 1) ln(1 - y)``.

One record changes ``(x, y)``: ``y`` anywhere in ``[a, b]`` (``0 < a < b < 1``) and ``A`` anywhere in
``[phi sigmoid(eta_lo), phi sigmoid(eta_hi)]``, independently, so the constant is the range of
``f`` over that box.

* ``f`` is concave in ``A`` for every ``y`` (``d_A^2 f = -psi'(A) - psi'(phi - A) < 0``): its minimum
  over the box is on the edges ``A = A_lo`` or ``A = A_hi``, where the range over ``y`` is the Beta
  rule's (ends and the clipped mode).
* The maximum is on the boundary of the box: an interior critical point has
  ``y = (A - 1)/(phi - 2)`` and ``psi(A) - ln(A - 1) = psi(phi - A) - ln(phi - A - 1)``; with
  ``k(x) = psi(x) - ln(x - 1)`` strictly decreasing (``psi'(x) < 1/(x - 1)``) that forces
  ``A = phi / 2``, ``y = 1/2``, where the Hessian determinant is
  ``16 [(phi/2 - 1) psi'(phi/2) - 1] < 0`` (``psi'(x) < 1/x + 1/x^2``): a saddle. For ``phi < 2``
  an interior critical point has ``A < 1`` and ``phi - A < 1``, where ``f`` is convex in ``y``: not
  a maximum either. On the edges ``A = A_lo, A_hi`` the maximum over ``y`` is the Beta rule's; on
  the edges ``y = a, b`` it is the maximum of the concave ``f(., y)`` over ``[A_lo, A_hi]``,
  approached by Newton steps on ``d_A f = ln(y/(1-y)) - psi(A) + psi(phi - A)`` and bounded above
  by the tangent at the point reached (:func:`_edge_top`).

Region (:func:`beta_logit_mean_region`): the window's hull ``[o_lo - half, o_hi + half]`` (lemma
B: every window of the region lies inside it) and a certified branch and bound in ``ln phi``
(lemma D, :func:`precision_lipschitz`). Brute-force tests against ``pm.logp``:
``tests/rules/test_glm_continuous.py``.
"""

from __future__ import annotations

import numpy as np
import pytensor.scalar as ps
from pytensor.graph.basic import Constant, Variable
from pytensor.tensor.elemwise import DimShuffle, Elemwise
from scipy.special import digamma, expit, polygamma

from pymc_dp.exceptions import UnsupportedFactorError
from pymc_dp.predictor import strip_identity
from pymc_dp.rules.namespaces import NP
from pymc_dp.rules.region import NoRegionRule, Span, Window, certified_sup_1d

__all__ = ["match_mean_precision", "beta_logit_mean_range", "precision_lipschitz", "beta_logit_mean_region"]

_BISECTION_STEPS = 60
_NEWTON_STEPS = 12


# --------------------------------------------------------------------------- the parametrisation
def _strip(var):
    var = strip_identity(var)
    while var.owner is not None and isinstance(var.owner.op, DimShuffle) and var.owner.op.is_expand_dims:
        var = strip_identity(var.owner.inputs[0])
    return var


def _factors(var) -> list:
    """The factors of a product (``a * b * c``), each stripped of identities and broadcasting."""
    var = _strip(var)
    node = var.owner
    if node is not None and isinstance(node.op, Elemwise) and isinstance(node.op.scalar_op, ps.Mul):
        return [f for i in node.inputs for f in _factors(i)]
    return [var]


def _is_sigmoid(var) -> bool:
    return var.owner is not None and isinstance(var.owner.op, Elemwise) and isinstance(var.owner.op.scalar_op, ps.Sigmoid)


def _is_one_minus(var, s) -> bool:
    """Whether ``var`` is ``1 - s``."""
    node = var.owner
    if node is None or not isinstance(node.op, Elemwise) or not isinstance(node.op.scalar_op, ps.Sub):
        return False
    one, other = (_strip(i) for i in node.inputs)
    return other is s and isinstance(one, Constant) and bool(np.all(np.asarray(one.data) == 1))


def match_mean_precision(alpha: Variable, beta: Variable) -> tuple[Variable, Variable] | None:
    """``(eta, phi)`` when ``alpha = sigmoid(eta) * phi`` and ``beta = (1 - sigmoid(eta)) * phi``
    (PyMC's ``pm.Beta(mu=, nu=)`` and the gallery's ``alpha=mu * phi, beta=(1 - mu) * phi``), else
    None. ``phi`` may be a product of several factors, in any order, the same in both."""
    fa, fb = _factors(alpha), _factors(beta)
    sig = [f for f in fa if _is_sigmoid(f)]
    if len(sig) != 1:
        return None
    s = sig[0]
    rest_a = [f for f in fa if f is not s]
    comp = [f for f in fb if _is_one_minus(f, s)]
    if len(comp) != 1:
        return None
    rest_b = [f for f in fb if f is not comp[0]]
    if not rest_a or sorted(map(id, rest_a)) != sorted(map(id, rest_b)):
        return None
    phi = rest_a[0]
    for f in rest_a[1:]:
        phi = phi * f
    return s.owner.inputs[0], phi


# --------------------------------------------------------------------------- per-record rule
def _f(A, phi, y, xp):
    return xp.gammaln(phi) - xp.gammaln(A) - xp.gammaln(phi - A) + (A - 1.0) * xp.log(y) + (phi - A - 1.0) * xp.log1p(-y)


def _y_range(A, phi, a, b, xp):
    """Range over ``y in [a, b]`` of ``f(A, y)``: the ends and the clipped mode (the Beta rule)."""
    B = phi - A
    denom = A + B - 2.0
    safe = xp.where(xp.abs(denom) > 1e-12, denom, 1.0)
    mode = xp.clip(xp.where(xp.abs(denom) > 1e-12, (A - 1.0) / safe, a), a, b)
    vals = [_f(A, phi, xp.asarray(a) + 0.0 * A, xp), _f(A, phi, xp.asarray(b) + 0.0 * A, xp), _f(A, phi, mode, xp)]
    lo, hi = vals[0], vals[0]
    for v in vals[1:]:
        lo, hi = xp.minimum(lo, v), xp.maximum(hi, v)
    return lo, hi


def _edge_top(y: float, phi, A_lo, A_hi, xp):
    """An upper bound on ``max_{A in [A_lo, A_hi]} f(A, y)``, ``f(., y)`` concave: a point ``A~``
    near the argmax, then the tangent there, which lies above a concave function:
    ``max f <= f(A~) + max(f'(A~) (A_hi - A~), f'(A~) (A_lo - A~))`` -- sound for any ``A~``, and
    tight when ``A~`` is the argmax (``f'(A~) = 0``, or ``A~`` the end it leans on). ``A~``: Newton
    steps clipped to the interval (NumPy), or bisection on the sign of ``f'`` (PyTensor graphs).
    """
    u = float(np.log(y) - np.log1p(-y))

    def slope(A):
        return u - xp.digamma(A) + xp.digamma(phi - A)

    if xp is NP:
        A = np.clip(phi * y, A_lo, A_hi)
        for _ in range(_NEWTON_STEPS):
            curv = polygamma(1, A) + polygamma(1, phi - A)  # -f''(A) > 0
            A = np.clip(A + slope(A) / curv, A_lo, A_hi)
    else:
        lo, A = A_lo, A_hi
        for _ in range(_BISECTION_STEPS):
            mid = 0.5 * (lo + A)
            up = slope(mid) > 0
            lo, A = xp.where(up, mid, lo), xp.where(up, A, mid)
    d = slope(A)
    return _f(A, phi, y, xp) + xp.maximum(d * (A_hi - A), d * (A_lo - A))


def beta_logit_mean_range(a: float, b: float, eta_lo, eta_hi, phi, xp):
    """``(lo, hi)`` of ``ln Beta(y | mu phi, (1 - mu) phi)`` over ``y in [a, b]`` and
    ``mu = sigmoid(eta)``, ``eta in [eta_lo, eta_hi]``, ``phi`` a point (module docstring)."""
    A_lo, A_hi = phi * xp.sigmoid(eta_lo), phi * xp.sigmoid(eta_hi)
    lo_1, hi_1 = _y_range(A_lo, phi, a, b, xp)
    lo_2, hi_2 = _y_range(A_hi, phi, a, b, xp)
    top = xp.maximum(xp.maximum(hi_1, hi_2), xp.maximum(_edge_top(a, phi, A_lo, A_hi, xp), _edge_top(b, phi, A_lo, A_hi, xp)))
    return xp.minimum(lo_1, lo_2), top


def check_parts(alpha, beta) -> None:
    """A logit-mean ``alpha`` needs the precision as ``beta`` (a point per theta)."""
    if beta.space != "precision" or not beta.is_point:
        raise UnsupportedFactorError(
            "a Beta mean on the logit scale needs its precision as the second parameter "
            "(space 'precision'), a value that reads no private data"
        )


# --------------------------------------------------------------------------- region rule
def _interval_product(lo1, hi1, lo2, hi2):
    c = [lo1 * lo2, lo1 * hi2, hi1 * lo2, hi1 * hi2]
    return np.minimum.reduce(c), np.maximum.reduce(c)


def precision_lipschitz(a, b, eta_lo, eta_hi, phi0, phi1):
    """Lemma D constant of ``L`` in ``ln phi`` on ``[phi0, phi1]``, per element.

    ``L(phi) = max_r f - min_r f`` over records ``r = (y, eta)``, so ``|L(phi) - L(phi')|`` is at
    most the width, over records and ``phi'' in [phi0, phi1]``, of the range of
    ``d_phi f = psi(phi) - mu psi(mu phi) - (1 - mu) psi((1 - mu) phi) + mu ln y + (1 - mu) ln(1 - y)``
    times ``|phi - phi'|``, and ``|d phi| <= phi1 |d ln phi|``. The width is bounded by interval
    arithmetic: ``psi`` increasing gives ``psi(phi) in [psi(phi0), psi(phi1)]``, ``psi(mu phi) in
    [psi(m0 phi0), psi(m1 phi1)]`` (``mu in [m0, m1]``), and so on; products of intervals at their
    corners.
    """
    m0, m1 = expit(eta_lo), expit(eta_hi)
    s1 = _interval_product(m0, m1, digamma(m0 * phi0), digamma(m1 * phi1))
    s2 = _interval_product(1.0 - m1, 1.0 - m0, digamma((1.0 - m1) * phi0), digamma((1.0 - m0) * phi1))
    t1 = _interval_product(m0, m1, np.log(a), np.log(b))
    t2 = _interval_product(1.0 - m1, 1.0 - m0, np.log1p(-b), np.log1p(-a))
    width = (digamma(phi1) - digamma(phi0)) + sum(hi - lo for lo, hi in (s1, s2, t1, t2))
    return phi1 * width


def beta_logit_mean_region(a: float, b: float, alpha, beta) -> np.ndarray:
    """sup L of the Beta regression over a region: ``alpha`` a :class:`Window` of ``eta``
    (``space="logit-mean"``), ``beta`` the precision's span (a :class:`Window` of half-width 0 on
    the ``"precision"`` scale, or a :class:`Span`).

    The window is replaced by its hull ``[o_lo - half, o_hi + half]`` (lemma B; sound, not claimed
    exact: the per-record constant is not shown quasi-convex in the offset). The precision is
    searched by :func:`~pymc_dp.rules.region.certified_sup_1d` in ``ln phi`` with
    :func:`precision_lipschitz` (lemma D). An unbounded window or precision, or ``phi_lo = 0``,
    gives ``+inf`` (no region rule: the factor is restricted further).
    """
    if not isinstance(alpha, Window) or alpha.space != "logit-mean":
        raise NoRegionRule("a Beta regression needs its mean as a window of the logit-scale predictor")
    if isinstance(beta, Window):
        if beta.space != "precision":
            raise NoRegionRule("a Beta regression needs its precision as the second parameter")
        p_lo, p_hi = np.asarray(beta.o_lo, float) - beta.half, np.asarray(beta.o_hi, float) + beta.half
    elif isinstance(beta, Span):
        p_lo, p_hi = np.asarray(beta.lo, float), np.asarray(beta.hi, float)
    else:
        raise NoRegionRule("a Beta regression's precision must read no private data")
    with np.errstate(invalid="ignore"):
        e_lo = np.asarray(alpha.o_lo, float) - np.asarray(alpha.half, float)
        e_hi = np.asarray(alpha.o_hi, float) + np.asarray(alpha.half, float)
    if not (np.all(np.isfinite(e_lo)) and np.all(np.isfinite(e_hi))):
        return np.full(np.broadcast(e_lo, e_hi).shape, np.inf)
    if np.any(np.isnan(p_lo)) or np.any(np.isnan(p_hi)) or not np.all(p_lo > 0) or not np.all(np.isfinite(p_hi)):
        return np.full(np.broadcast(e_lo, e_hi, p_lo).shape, np.inf)
    # one precision interval for every element (the hull of theirs: L is searched over it)

    # elements with the same window share their bound: search the distinct windows only
    shape = np.broadcast(e_lo, e_hi, p_lo).shape
    pairs, inverse = np.unique(np.stack([np.broadcast_to(e_lo, shape).ravel(), np.broadcast_to(e_hi, shape).ravel()]),
                               axis=1, return_inverse=True)
    u_lo, u_hi = pairs
    phi_lo, phi_hi = float(np.min(p_lo)), float(np.max(p_hi))

    def at(phi):
        lo, hi = beta_logit_mean_range(a, b, u_lo, u_hi, np.asarray(phi, float), NP)
        return hi - lo

    def lip(phi0, phi1):
        return precision_lipschitz(a, b, u_lo, u_hi, phi0, phi1)

    with np.errstate(over="ignore", invalid="ignore"):
        out = certified_sup_1d(at, np.full(u_lo.shape, phi_lo), np.full(u_lo.shape, phi_hi), lip, log_scale=True)
    out = np.where(np.isnan(out), np.inf, out)
    return out[np.ravel(inverse)].reshape(shape)
