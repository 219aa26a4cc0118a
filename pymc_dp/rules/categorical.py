"""Catalogue of same-shaped rules (range, Lipschitz constant, region, floor) registered by singledispatch on the RV Op.

Categorical likelihoods: ``p`` on the simplex, through a softmax, or from PyMC's ordinal models.

One rule, registered for PyTensor's ``CategoricalRV`` (it replaces ``discrete.categorical_range``,
whose behaviour it keeps for the natural space), reads the parameter ``p`` on one of four scales
(:class:`~pymc_dp.rules.base.Bounds` ``space``):

* ``"natural"`` -- ``p`` itself: a point simplex, or the per-class hull of the rows ``pi[y]``;
* ``"softmax"`` -- ``p = softmax(eta)``; ``lo[..., k, j] <= eta_k - eta_j <= hi[..., k, j]``
  as the record varies (``pm.Categorical(logit_p=eta)``, ``pm.math.softmax(s, axis=-1)``);
* ``"ordered-logistic"`` -- PyMC's ``OrderedLogistic(eta, cutpoints)``: ``[lo, hi]`` bounds
  ``eta``, ``extra = (cut_lo, cut_hi)``;
* ``"ordered-probit"`` -- ``OrderedProbit(eta, cutpoints, sigma)``: ``extra = (cut_lo, cut_hi,
  sigma_lo, sigma_hi)`` (``extra = (cut_lo, cut_hi)`` means PyMC's default ``sigma = 1``).

The derivations are in each function's docstring and in ``docs/rules/categorical.md``. The module
also registers the family's region rule (:func:`categorical_region`) and the graph recognisers
:func:`match_softmax` and :func:`match_ordered`, which find those parametrisations in a model.

No positive floor holds for a free ``p``: in every space the constant can be brought to 0 (a
uniform ``p``; ``eta`` differences equal to 0; an ordinal predictor window of width 0 with
cutpoints that give equal class probabilities). :func:`categorical_min_lipschitz` (registered with
``discrete.min_lipschitz``) states a floor only when ``p`` is fixed: the constant itself.
"""

from __future__ import annotations

from collections import deque

import numpy as np
import pytensor.scalar as ps
import pytensor.tensor as pt
from pytensor.compile.ops import ViewOp
from pytensor.graph.basic import Variable, equal_computations
from pytensor.tensor.elemwise import DimShuffle, Elemwise
from pytensor.tensor.random.basic import CategoricalRV
from pytensor.tensor.special import Softmax

from pymc_dp.domains import Domain
from pymc_dp.exceptions import DomainError, UnsupportedFactorError
from pymc_dp.rules.base import Bounds, integer_domain, register_lipschitz, register_rule
from pymc_dp.rules.discrete import min_lipschitz
from pymc_dp.rules.namespaces import NP
from pymc_dp.rules.region import (
    NoRegionRule,
    RegionSpec,
    Span,
    Window,
    certified_sup_1d,
    register_region,
)

__all__ = [
    "SPACES",
    "categorical_range",
    "categorical_lipschitz",
    "categorical_region",
    "categorical_min_lipschitz",
    "softmax_pair_bounds",
    "computed_softmax_log_range",
    "SOFTMAX_LN_P_FLOOR",
    "SOFTMAX_LN_P_ERROR",
    "ORDERED_P_ERROR",
    "ordered_ln_p_error",
    "match_softmax",
    "match_ordered",
]

SPACES = ("natural", "softmax", "ordered-logistic", "ordered-probit")
_ORDERED = ("ordered-logistic", "ordered-probit")
_LN2 = float(np.log(2.0))


# --------------------------------------------------------------------------- array helpers
def _static_last(x, xp, axis: int = -1) -> int | None:
    """The static length of ``x`` along ``axis`` (None when PyTensor does not know it)."""
    if xp.name == "numpy":
        return int(np.shape(x)[axis])
    shape = getattr(getattr(x, "type", None), "shape", None)
    if shape is None:  # a Python number or a NumPy array handed to the PT namespace
        return int(np.shape(x)[axis])
    return shape[axis]


def _concat(parts, xp):
    if xp.name == "numpy":
        return np.concatenate(parts, axis=-1)
    return pt.concatenate(parts, axis=-1)


def _eye(n: int | None, like, xp):
    """A boolean identity matrix of the size of ``like``'s last axis."""
    if n is not None:
        eye = np.eye(n, dtype=bool)
        return eye if xp.name == "numpy" else pt.as_tensor_variable(eye)
    k = pt.arange(like.shape[-1])
    return pt.eq(k[:, None], k[None, :])


def _log1mexp(x, xp):
    """``ln(1 - e^x)`` for ``x < 0`` (Maechler's two branches, no cancellation)."""
    x = xp.minimum(x, xp.asarray(-1e-300))  # callers mask x >= 0 themselves
    # each branch sees only its own half of the line, so neither evaluates log(0) (no warnings,
    # no infinite gradients in the branch a PyTensor switch discards)
    near = xp.maximum(x, xp.asarray(-_LN2))
    far = xp.minimum(x, xp.asarray(-_LN2))
    return xp.where(x > -_LN2, xp.log(-xp.expm1(near)), xp.log1p(-xp.exp(far)))


def _check_classes(domain: Domain, n_classes: int | None) -> tuple[int, int]:
    lo_x, hi_x = integer_domain(domain, "Categorical")
    if n_classes is not None and hi_x > n_classes - 1:
        # a record naming a class the model does not have has probability 0
        raise DomainError(
            f"the declared domain {domain} reaches above the last class {n_classes - 1} of a "
            f"{n_classes}-class Categorical; declare Integers(0, {n_classes - 1})"
        )
    return lo_x, hi_x


# --------------------------------------------------------------------------- natural space
def _natural_range(p: Bounds, domain: Domain, xp):
    """Natural ``p``: the rule of ``discrete.categorical_range``, unchanged.

    ``ln p(x) = ln p_x``: over the classes the domain allows the range is
    ``[ln min_x p_x, ln max_x p_x]`` and ``L = ln(max p / min p)`` (docs/theory/families.md#categorical). When
    ``p`` reads private data (``pi[y]``, one simplex per class), ``p_x`` ranges over the
    per-component hull ``[p_lo_x, p_hi_x]``, and the extremes over the hull are the extremes over
    the rows themselves (each bound is a component of one row): exact.
    """
    lo_x, hi_x = _check_classes(domain, _static_last(p.hi, xp))
    sl = slice(lo_x, hi_x + 1)
    hi = xp.log(xp.amax(p.hi[..., sl], axis=-1))
    lo = xp.log(xp.amin(p.lo[..., sl], axis=-1))
    return lo, hi


# --------------------------------------------------------------------------- softmax space
def _softmax_tables(p: Bounds, xp):
    """Per class ``y``: ``top_y = -ln(1 + sum_{k != y} e^{lo[k, y]})`` and
    ``bot_y = -ln(1 + sum_{k != y} e^{hi[k, y]})`` (``(..., K)`` each)."""
    n = _static_last(p.lo, xp)
    n_rows = _static_last(p.lo, xp, axis=-2)
    if n is not None and n_rows is not None and n != n_rows:
        raise UnsupportedFactorError(
            "softmax bounds must be (..., K, K) matrices of the differences eta_k - eta_j, got "
            f"last axes {n_rows} x {n}"
        )
    eye = _eye(n, p.lo, xp)
    zero = xp.asarray(0.0)
    # the diagonal is eta_y - eta_y = 0: it is the "1 +" of the formula, whatever the caller put
    top = -xp.logsumexp(xp.where(eye, zero, p.lo), axis=-2)
    bot = top if p.is_point else -xp.logsumexp(xp.where(eye, zero, p.hi), axis=-2)
    return top, bot, n


def _softmax_range(p: Bounds, domain: Domain, xp):
    """``p = softmax(eta)``, ``lo[k, j] <= eta_k - eta_j <= hi[k, j]`` over the records.

    Derivation. ``ln p_y = -ln(1 + sum_{k != y} e^{eta_k - eta_y})`` depends on ``eta`` only
    through the differences in column ``y`` and decreases in each of them. Over every record
    (any differences inside the boxes) and every class the domain allows:

    * ``max ln p <= max_y -ln(1 + sum_{k != y} e^{lo[k, y]})``,
    * ``min ln p >= min_y -ln(1 + sum_{k != y} e^{hi[k, y]})``,

    each attained iff one record puts every difference of column ``y`` at its bound together.

    Exactness. Always sound. Exact (both ends attained) when ``K = 2`` (one difference,
    ``L = max(|lo|, |hi|)`` of ``eta_1 - eta_0``: the Bernoulli-logit rule), when ``eta`` reads
    no private data (a point: ``L = ln(max p / min p)``), and whenever one record reaches a whole
    column at its lower bounds for the maximising class and another a whole column at its upper
    bounds for the minimising class -- e.g. a scalar covariate and no intercepts with the
    extreme classes being the extreme slopes. For ``K >= 3`` and covariates in a ball the
    extremes of the column entries need different directions of ``z``: a bound, measured in
    ``docs/rules/categorical.md``. Over a region of per-class balls without intercepts the
    hull of the boxes gives exactly docs/theory/glm.md#softmax-balls (see :func:`categorical_region`).
    """
    top, bot, n = _softmax_tables(p, xp)
    lo_x, hi_x = _check_classes(domain, n)
    sl = slice(lo_x, hi_x + 1)
    return computed_softmax_log_range(xp.amin(bot[..., sl], axis=-1), xp.amax(top[..., sl], axis=-1), xp)


#: below this ``ln p`` PyMC's softmax, ``exp(eta - max) / sum``, leaves the normal floats: subnormal
#: from -708 (relative precision lost), 0 from -745, where the computed ``ln p`` is ``-inf``
SOFTMAX_LN_P_FLOOR = -700.0
#: the absolute error of ``ln p`` computed from ``p = exp(eta - max) / sum`` (a few roundings,
#: each relative, above the floor), generous
SOFTMAX_LN_P_ERROR = 1e-13


def computed_softmax_log_range(lo, hi, xp):
    """The range ``[lo, hi]`` of ``ln p`` widened to what PyMC *computes* (tests/fuzz/FOUND.md #11).

    The sampled density is the computed one: where the exact ``ln p`` can fall below
    :data:`SOFTMAX_LN_P_FLOOR`, the computed one can be ``-inf`` (a discrete-choice utility of
    ``1.25 x 1000`` against the pivot's 0), so the lower end is ``-inf`` (fails closed: the
    constant is infinite and the region is narrowed); elsewhere both ends move out by
    :data:`SOFTMAX_LN_P_ERROR`."""
    floor = xp.asarray(SOFTMAX_LN_P_FLOOR)
    lo = xp.where(lo < floor, xp.asarray(-np.inf), lo - SOFTMAX_LN_P_ERROR)
    return lo, hi + SOFTMAX_LN_P_ERROR


def softmax_pair_bounds(eta_lo, eta_hi, xp=None) -> Bounds:
    """Softmax-space :class:`Bounds` from per-class intervals ``eta_lo <= eta <= eta_hi``.

    ``eta_k - eta_j`` lies in ``[eta_lo_k - eta_hi_j, eta_hi_k - eta_lo_j]``: sound whatever
    couples the classes, and loose when the classes move together (a shared covariate), where
    the pairwise window of the linear predictor (``(b_k - b_j) +- R ||w_k - w_j||``) is the
    better input.
    """
    if xp is None or xp.name == "numpy":
        lo_, hi_ = np.asarray(eta_lo, float), np.asarray(eta_hi, float)
    else:
        lo_, hi_ = pt.as_tensor_variable(eta_lo), pt.as_tensor_variable(eta_hi)
    return Bounds(lo_[..., :, None] - hi_[..., None, :], hi_[..., :, None] - lo_[..., None, :], "softmax")


# --------------------------------------------------------------------------- ordinal spaces
def _log_ndtr(x, xp):
    """``ln Phi(x)``. Under PT this is PyMC's ``normal_lcdf`` with float64 constants: PyMC's own
    writes ``pt.sqrt(2.0)``, a float32 constant (``1.41421354``), which moves ``ln Phi`` by up to
    ~1e-7 (the same constant sits in ``OrderedProbit``'s log-probabilities)."""
    if xp.name == "numpy":
        return xp.log_ndtr(x)
    r2 = pt.constant(np.sqrt(2.0), dtype="float64")
    half = pt.constant(0.5, dtype="float64")
    return pt.switch(
        pt.lt(x, -1.0),
        pt.log(pt.erfcx(-x / r2) * half) - pt.sqr(x) * half,
        pt.log1p(-pt.erfc(x / r2) * half),
    )


def _log_cdf(x, link: str, sigma, xp):
    """``ln F(x)``: logistic ``ln sigmoid(x)``, probit ``ln Phi(x / sigma)``."""
    if link == "ordered-logistic":
        return xp.log_sigmoid(x)
    return _log_ndtr(x / sigma, xp)


def _log_interval(A, B, link: str, sigma, xp):
    """``ln(F(B) - F(A))`` for ``A < B``, ``-inf`` where ``A >= B`` (an empty category).

    Logistic: ``sigmoid(B) - sigmoid(A) = sigmoid(B) sigmoid(-A) (1 - e^{A - B})``, exact in
    floating point for every ``A < B``. Probit: reflect to ``A + B <= 0`` (``Phi(B) - Phi(A) =
    Phi(-A) - Phi(-B)``) and use ``ln Phi(B) + ln(1 - e^{ln Phi(A) - ln Phi(B)})``, which never
    subtracts two numbers near 1.
    """
    ok = B > A
    if link == "ordered-logistic":
        val = xp.log_sigmoid(B) + xp.log_sigmoid(-A) + _log1mexp(A - B, xp)
    else:
        x, y = A / sigma, B / sigma
        flip = (x + y) > 0
        x, y = xp.where(flip, -y, x), xp.where(flip, -x, y)
        ly = _log_ndtr(y, xp)
        val = ly + _log1mexp(_log_ndtr(x, xp) - ly, xp)
    return xp.where(ok, val, -np.inf)


def _class_logp(eta0, eta_mid, eta_last, lower, upper, link, sigma, xp):
    """``G_k = ln P_k`` of every class, ``(..., K)``.

    PyMC's ``compute_p``: ``P_k = F(c_{k+1} - eta) - F(c_k - eta)`` with ``c_0 = -inf``,
    ``c_K = +inf``; ``cutpoints[..., i] = c_{i+1}``. Class ``k`` reads ``c_k`` from ``lower`` and
    ``c_{k+1}`` from ``upper`` (two corners of the cutpoint boxes); its predictor value is
    ``eta0`` (class 0), ``eta_mid[..., k - 1]`` (middle classes) or ``eta_last`` (class K-1),
    each ``(..., 1)`` or ``(..., K-2)``. The end classes are written without infinities, so the
    PyTensor graph has finite gradients.
    """
    # [..., 0][..., None], not [..., :1]: PyTensor knows the former has length 1 and broadcasts it
    first = _log_cdf(upper[..., 0][..., None] - eta0, link, sigma, xp)
    mid = _log_interval(lower[..., :-1] - eta_mid, upper[..., 1:] - eta_mid, link, sigma, xp)
    last = _log_cdf(eta_last - lower[..., -1][..., None], link, sigma, xp)
    return _concat([first, mid, last], xp)


def _ordered_inputs(p: Bounds, xp, sigma=None):
    """``(a, b, cut_lo, cut_hi, sigma)`` of an ordinal Bounds, broadcast for the class axis."""
    if p.extra is None or len(p.extra) not in (2, 4):
        raise UnsupportedFactorError(
            f"a Categorical in space {p.space!r} needs extra=(cut_lo, cut_hi"
            + (", sigma_lo, sigma_hi)" if p.space == "ordered-probit" else ")")
        )
    cut_lo, cut_hi = p.extra[0], p.extra[1]
    if p.space == "ordered-logistic":
        if len(p.extra) != 2:
            raise UnsupportedFactorError("ordered-logistic takes extra=(cut_lo, cut_hi): it has no sigma")
        s = None
    elif sigma is not None:
        s = sigma  # given by the region rule, already (..., 1)
    elif len(p.extra) == 2:
        s = 1.0  # PyMC's default
    else:
        s_lo, s_hi = p.extra[2], p.extra[3]
        if s_lo is not s_hi and not (
            xp.name == "numpy" and np.array_equal(np.asarray(s_lo), np.asarray(s_hi))
        ):
            raise UnsupportedFactorError(
                "the OrderedProbit sigma is one value per parameter draw: a sigma interval is "
                "handled over a truncation region (region_lipschitz), not by the per-record rule"
            )
        s = s_lo
    a, b = xp.asarray(p.lo), xp.asarray(p.hi)
    a, b = a[..., None], b[..., None]
    cl, ch = xp.asarray(cut_lo), xp.asarray(cut_hi)
    if s is not None and sigma is None:
        s = xp.asarray(s)[..., None]
    return a, b, cl, ch, s


def _ordered_tables(a, b, cl, ch, link, s, xp, need_same=True):
    """Per class (``(..., K)`` each) over the window ``eta in [a, b]`` and cutpoints in the boxes
    ``[cl, ch]``: ``top`` (largest ``G_k``), ``bot`` (smallest), ``same`` (largest
    ``G_k(eta) - G_k(eta')`` with one cutpoint vector), ``empty`` (the category can be empty).

    Derivation (docs/theory/glm.md#ordered-logistic, for a general window ``[a, b]`` and for any link ``F``
    with a symmetric log-concave density ``f``: logistic, and normal of any scale ``sigma``):

    * ``P_k(eta) = int_{c_k}^{c_{k+1}} f(t - eta) dt`` is log-concave in ``eta`` (Prekopa) and
      symmetric about the midpoint ``m_k = (c_k + c_{k+1}) / 2``, so ``G_k`` is concave with its
      mode at ``m_k`` (class 0: decreasing, class K-1: increasing). Over ``[a, b]`` its largest
      value is at ``clip(m_k, a, b)``, its smallest at ``a`` or ``b``.
    * ``G_k`` increases in ``c_{k+1}`` and decreases in ``c_k``, so the largest value over the
      boxes is at ``(c_k, c_{k+1}) = (lo_k, hi_{k+1})`` and the smallest at ``(hi_k, lo_{k+1})``.
    * ``dG_k/deta`` is nondecreasing in both cutpoints. With ``H(x, y) = ln(F(y) - F(x))``,
      ``x = c_k - eta``, ``y = c_{k+1} - eta`` and ``D = F(y) - F(x)``:
      ``d/dc_k dG/deta = [f'(x) D + f(x)^2 - f(x) f(y)] / D^2``; the bracket is 0 at ``y = x``
      and its ``y``-derivative ``f(x) f(y) [f'(x)/f(x) - f'(y)/f(y)]`` is ``>= 0`` (``ln f``
      concave), so it is ``>= 0``; the ``c_{k+1}`` case mirrors it. (Logistic: ``dG/deta =
      sigmoid(c_k - eta) + sigmoid(c_{k+1} - eta) - 1``.) Hence for one category and one
      cutpoint vector, ``D_-(c) = G_k(clip m_k) - G_k(a) = int_a^{clip m_k} dG/deta`` is
      nondecreasing in both cutpoints (the integrand grows and the upper limit moves up over a
      nonnegative integrand): its sup is at ``(hi_k, hi_{k+1})``; ``D_+(c) = G_k(clip m_k) -
      G_k(b)`` mirrors it at ``(lo_k, lo_{k+1})``. ``same_k = max(D_-, D_+)``.

    Nothing here uses ``a = -s, b = s``: the derivation holds for any window.
    """
    # give a and b the full leading shape (..., 1), so the class pieces concatenate
    zero = 0.0 * (a + b + cl[..., 0][..., None] + ch[..., 0][..., None])
    if s is not None:
        zero = zero + 0.0 * s
    a, b = a + zero, b + zero
    # largest G_k: cutpoints (lo_k, hi_{k+1}), eta at the clipped mode
    m_top = 0.5 * (cl[..., :-1] + ch[..., 1:])
    top = _class_logp(a, xp.clip(m_top, a, b), b, cl, ch, link, s, xp)
    # smallest G_k: cutpoints (hi_k, lo_{k+1}), eta at an end (concave in eta)
    bot = xp.minimum(
        _class_logp(a, a, a, ch, cl, link, s, xp), _class_logp(b, b, b, ch, cl, link, s, xp)
    )
    # category k (0 < k < K-1) can be empty when box k and box k+1 meet
    empty_mid = ch[..., :-1] >= cl[..., 1:]
    if not need_same:
        return top, bot, None, empty_mid
    # one category, one cutpoint vector: D_- at (hi, hi), D_+ at (lo, lo)
    m_hh = 0.5 * (ch[..., :-1] + ch[..., 1:])
    d_minus = _class_logp(a, xp.clip(m_hh, a, b), b, ch, ch, link, s, xp) - _class_logp(
        a, a, a, ch, ch, link, s, xp
    )
    m_ll = 0.5 * (cl[..., :-1] + cl[..., 1:])
    d_plus = _class_logp(a, xp.clip(m_ll, a, b), b, cl, cl, link, s, xp) - _class_logp(
        b, b, b, cl, cl, link, s, xp
    )
    same = xp.maximum(d_minus, d_plus)
    return top, bot, same, empty_mid


#: the absolute error of PyMC's ordered-logistic ``p_k = sigmoid(c_k - eta) - sigmoid(c_{k-1} - eta)``
#: (two sigmoids <= 1, each a few roundings, and their difference), generous
ORDERED_P_ERROR = 16 * np.finfo(float).eps
_LN_ORDERED_P_ERROR = float(np.log(ORDERED_P_ERROR))


def ordered_ln_p_error(ln_p, link: str, xp):
    """A bound on ``|computed ln p - ln p|`` where the exact class probability is ``>= exp(ln_p)``.

    Ordered logistic: ``p_k`` is a difference of two sigmoids, so the computed one errs by up to
    :data:`ORDERED_P_ERROR` *absolutely* and ``ln p`` by ``-ln(1 - delta / p)``: infinite where
    ``p <= 2 delta`` (the difference may be 0: ``ln p = -inf``). Ordered probit: PyMC computes
    ``ln p`` stably and exponentiates it, which underflows below ``ln p = -745``: infinite below
    :data:`SOFTMAX_LN_P_FLOOR`, else :data:`SOFTMAX_LN_P_ERROR`. (tests/fuzz/FOUND.md #11.)"""
    inf = xp.asarray(np.inf)
    if link == "ordered-probit":
        return xp.where(ln_p >= SOFTMAX_LN_P_FLOOR, xp.asarray(SOFTMAX_LN_P_ERROR), inf)
    ratio = xp.exp(xp.minimum(_LN_ORDERED_P_ERROR - ln_p, np.log(0.5)))  # delta / p, capped where it is inf anyway
    return xp.where(ln_p > _LN_ORDERED_P_ERROR + np.log(2.0), -xp.log1p(-ratio), inf)


def _computed_ordered_tables(top, bot, same, link, xp):
    """The tables widened to what PyMC computes (:func:`ordered_ln_p_error`): the largest ``ln p``
    up, the smallest down, and a same-class change by both ends' errors."""
    up, down = ordered_ln_p_error(top, link, xp), ordered_ln_p_error(bot, link, xp)
    same = None if same is None else same + up + down
    return top + up, bot - down, same


def _ordered_parts(p: Bounds, domain: Domain, xp, window=None, cuts=None, sigma=None, need_same=True):
    """The tables of :func:`_ordered_tables` restricted to the classes of the domain (``same``
    is None when the cutpoints are points, or not needed)."""
    a, b, cl, ch, s = _ordered_inputs(p, xp, sigma)
    if window is not None:
        a, b = window
    if cuts is not None:
        cl, ch = cuts
    n_cuts = _static_last(cl, xp)
    if n_cuts is not None and n_cuts < 1:
        raise UnsupportedFactorError("an ordinal Categorical needs at least one cutpoint")
    lo_x, hi_x = _check_classes(domain, None if n_cuts is None else n_cuts + 1)
    link = p.space
    need_same = need_same and cl is not ch
    top, bot, same, empty_mid = _ordered_tables(a, b, cl, ch, link, s, xp, need_same)
    top, bot, same = _computed_ordered_tables(top, bot, same, link, xp)
    sl = slice(lo_x, hi_x + 1)
    same = None if same is None else same[..., sl]
    # middle class k (0 < k < K-1) is empty_mid[..., k - 1]; the end classes are never empty (a
    # stop past the end is clipped by slicing)
    return top[..., sl], bot[..., sl], same, empty_mid[..., max(lo_x, 1) - 1 : hi_x]


def _any_last(mask, xp):
    if xp.name == "numpy":
        return np.any(mask, axis=-1)
    return pt.any(mask, axis=-1)


def _ordered_range(p: Bounds, domain: Domain, xp):
    """``OrderedLogistic`` / ``OrderedProbit``: ``eta in [lo, hi]`` over the records, cutpoints
    points (one parameter draw) or boxes.

    Per draw (cutpoints points ``c``, sigma a point): ``ln P_y`` is concave in ``eta`` with its
    mode at the midpoint of its two cutpoints (see :func:`_ordered_tables`), so the largest value
    over records is ``max_y G_y(clip(m_y, lo, hi))`` and the smallest ``min_y min(G_y(lo),
    G_y(hi))`` -- exact: the data ``y`` and the predictor vary independently.

    With cutpoint boxes the returned range is the range over the boxes too: sound, but its width
    can exceed the constant, which evaluates both records at one cutpoint vector; the exact
    constant over boxes is :func:`categorical_lipschitz`. Overlapping boxes make a category of
    the domain possibly empty: ``lo = -inf``.
    """
    top, bot, _, _ = _ordered_parts(p, domain, xp, need_same=False)
    return xp.amin(bot, axis=-1), xp.amax(top, axis=-1)


def _ordered_lipschitz(p: Bounds, domain: Domain, xp, window=None, cuts=None, sigma=None):
    """The exact constant over a window ``[a, b]`` and cutpoint boxes (docs/theory/glm.md#ordered-logistic):

    ``L = max( max_{k != j} (top_k - bot_j), max_k same_k )``, over the classes of the domain,
    and ``+inf`` when a category of the domain can be empty (two boxes meet).

    Proof. ``L = sup_c max_{k, j} [max_eta G_k - min_eta G_j]``. For ``k != j`` the two records'
    cutpoint demands never conflict: ``top_k`` wants ``c_k`` low and ``c_{k+1}`` high, ``bot_j``
    wants ``c_j`` high and ``c_{j+1}`` low; they share an index only when ``j = k + 1`` (both
    want ``c_{k+1}`` high) or ``j = k - 1`` (both want ``c_k`` low). So ``top_k - bot_j`` is
    attained. For ``k = j`` the two records share ``(c_k, c_{k+1})``: ``same_k`` (see
    :func:`_ordered_tables`). With point cutpoints this is ``max top - min bot``.
    """
    top, bot, same, empty = _ordered_parts(p, domain, xp, window, cuts, sigma)
    if same is None:  # point cutpoints: the two records' demands never conflict
        return xp.where(_any_last(empty, xp), np.inf, xp.amax(top, axis=-1) - xp.amin(bot, axis=-1))
    n = top.shape[-1] if xp.name == "numpy" else None
    pair = top[..., :, None] - bot[..., None, :]
    eye = _eye(n, top, xp)
    cross = xp.amax(xp.where(eye, -np.inf, pair), axis=(-2, -1))
    L = xp.maximum(cross, xp.amax(same, axis=-1))
    return xp.where(_any_last(empty, xp), np.inf, L)


# --------------------------------------------------------------------------- the rule
def _space(p: Bounds) -> str:
    if p.space not in SPACES:
        raise UnsupportedFactorError(
            f"the Categorical rule reads p on the scales {SPACES}, not {p.space!r}"
        )
    return p.space


@register_rule(CategoricalRV, "Categorical", ("p",), range_params=("p",))
def categorical_range(op, domain, params, xp):
    """Categorical(p) over K classes, ``x`` in ``{lo..hi}`` inside ``{0..K-1}`` (larger domains
    are refused: a class the model does not have has probability 0).

    ``p`` is read on its ``space`` (see the module docstring); each space's derivation is in
    :func:`_natural_range`, :func:`_softmax_range` and :func:`_ordered_range`.
    """
    (p,) = params
    space = _space(p)
    if space == "natural":
        return _natural_range(p, domain, xp)
    if space == "softmax":
        return _softmax_range(p, domain, xp)
    return _ordered_range(p, domain, xp)


@register_lipschitz(CategoricalRV)
def categorical_lipschitz(op, domain, params, xp):
    """``L`` of one element: ``hi - lo`` of :func:`categorical_range`, except in the ordinal
    spaces with cutpoint boxes, where both records share one cutpoint vector and the exact
    constant is :func:`_ordered_lipschitz` (equal to ``hi - lo`` when the cutpoints are points).
    """
    (p,) = params
    if _space(p) in _ORDERED:
        if xp.name == "numpy":
            with np.errstate(invalid="ignore"):
                return _ordered_lipschitz(p, domain, xp)
        return _ordered_lipschitz(p, domain, xp)
    lo, hi = categorical_range(op, domain, params, xp)
    return hi - lo


# --------------------------------------------------------------------------- region rule
def _probit_sigma_sup(p: Bounds, domain, window, cuts, s_lo, s_hi):
    """``sup`` over ``sigma in [s_lo, s_hi]`` of the ordered-probit constant (lemma D).

    By scale invariance every term of :func:`_ordered_lipschitz` is ``G(eta*; c*, sigma)`` with
    ``eta*`` and the corner ``c*`` independent of ``sigma``, so ``L(tau)``, ``tau = ln sigma``,
    is a max of finitely many differences ``G_k - G_j``. ``dG/dtau = E[T^2] - 1`` for ``T`` a
    standard normal truncated to ``[(c_k - eta)/sigma, (c_{k+1} - eta)/sigma]`` (differentiate
    ``ln(Phi(beta) - Phi(alpha))`` with ``alpha, beta`` proportional to ``1/sigma``), so
    ``-1 <= dG/dtau <= X^2 + X``, ``X = max |c - eta| / sigma`` over the finite ends (a finite
    interval: ``E[T^2] <= max(alpha^2, beta^2)``; a half line ``T <= beta < 0``: ``E[T^2] = 1 +
    |beta| h(|beta|) <= 1 + |beta| (|beta| + 1)`` with the normal hazard ``h(t) <= t + 1``).
    Each difference, hence ``L``, is ``(X^2 + X + 1)``-Lipschitz in ``tau`` on a piece, with
    ``X`` taken at the piece's smallest sigma. Each element runs over its own interval through
    ``tau = ln s_lo + u (ln s_hi - ln s_lo)``, ``u in [0, 1]``.
    """
    a, b = window
    cl, ch = cuts
    t_lo, t_hi = np.log(s_lo), np.log(s_hi)  # (..., 1), like a and b
    reach = np.maximum.reduce(
        [np.abs(cl - a), np.abs(cl - b), np.abs(ch - a), np.abs(ch - b)]
    ).max(axis=-1, keepdims=True)  # max |c - eta| over the boxes' ends and the window's ends

    def sigma_at(u):
        return np.exp(t_lo + u * (t_hi - t_lo))

    empty = None

    def f(u):
        nonlocal empty
        with np.errstate(invalid="ignore"):
            L = _ordered_lipschitz(p, domain, NP, window, cuts, sigma_at(u))
        empty = ~np.isfinite(L)
        return np.where(empty, 0.0, L)

    def lip(u0, u1):
        X = reach / sigma_at(u0)
        return ((X * X + X + 1.0) * (t_hi - t_lo))[..., 0]

    f(0.0)
    out = certified_sup_1d(f, 0.0, 1.0, lambda u0, u1: np.where(empty, 0.0, lip(u0, u1)))
    return np.where(empty, np.inf, out)


def _ordered_region(op, domain, w: Window) -> np.ndarray:
    """Region constant of an ordinal Categorical (custom rule).

    * ``eta``: the Window's hull ``[o_lo - half, o_hi + half]`` (lemma B: a range over a larger
      window is larger; sound). When the offset is fixed (``o_lo == o_hi``: no intercept, which
      the cutpoints absorb, the usual case) the hull is every window the region makes and the
      constant is exact. With a moving offset the shift invariance ``P(eta; c) = P(eta - o;
      c - o)`` gives a second sound bound, window ``[-half, half]`` with cutpoint boxes widened
      to ``[cut_lo - o_hi, cut_hi - o_lo]``; the smaller of the two is returned (the second only
      for a sliding Window: ``Window.sliding`` False promises just the hull). Window ends
      (lemma C) are not claimed: the offset moves every cutpoint at once, and that has not been
      proved to keep the sup at an end.
    * cutpoints: disjoint ordered boxes, exact (:func:`_ordered_lipschitz`); meeting boxes give
      ``inf``.
    * probit ``sigma``: a point, or an interval bounded by branch and bound
      (:func:`_probit_sigma_sup`, within ``1e-3`` relative).
    """
    o_lo, o_hi, half = (np.asarray(v, float) for v in (w.o_lo, w.o_hi, w.half))
    p = Bounds(o_lo - half, o_hi + half, w.space, w.extra)
    cl, ch = (np.asarray(v, float) for v in w.extra[:2])
    sig = None
    if w.space == "ordered-probit":
        if len(w.extra) == 4:
            s_lo, s_hi = np.asarray(w.extra[2], float), np.asarray(w.extra[3], float)
        else:
            s_lo = s_hi = np.asarray(1.0)
        if np.any(s_lo <= 0) or not np.all(np.isfinite(s_hi)):
            raise NoRegionRule("an OrderedProbit sigma interval must be positive and bounded")
        sig = (s_lo, s_hi)
    candidates = [((o_lo - half)[..., None], (o_hi + half)[..., None], cl, ch)]
    # the shift bound needs windows [o - h, o + h] with h <= half; a non-sliding Window (a
    # table's hull, a link of a window) promises only its hull
    if getattr(w, "sliding", True) and not np.array_equal(o_lo, o_hi):
        candidates.append(
            ((-half)[..., None], half[..., None], cl - o_hi[..., None], ch - o_lo[..., None])
        )
    best = None
    for a, b, c_lo, c_hi in candidates:
        if sig is None or np.array_equal(sig[0], sig[1]):
            s = None if sig is None else sig[0][..., None]
            with np.errstate(invalid="ignore"):
                val = _ordered_lipschitz(p, domain, NP, (a, b), (c_lo, c_hi), s)
        else:
            val = _probit_sigma_sup(p, domain, (a, b), (c_lo, c_hi), sig[0][..., None], sig[1][..., None])
        val = np.asarray(val, float)
        best = val if best is None else np.minimum(best, val)
    return best


def _softmax_offset_region(domain: Domain, c_lo, c_hi, half) -> np.ndarray:
    """Softmax region with per-class offsets: ``eta_k - eta_j`` in ``[c_k - c_j - h_kj,
    c_k - c_j + h_kj]`` with ``c`` in the box ``[c_lo, c_hi]`` (per-class intercepts) and
    ``h_kj <= half_kj`` (covariates: ``R (B_k + B_j)`` for per-class balls).

    The exact sup of the per-draw softmax rule over that set -- the ``U'`` of docs/theory/glm.md#softmax-intercepts, for any
    radii and intercept boxes. For a pair of classes ``(y, y')`` (max record ``y``, min record
    ``y'``), the per-draw value is ``-ln(1 + sum_{k != y} e^{c_k - c_y - h_ky}) + ln(1 +
    sum_{k != y'} e^{c_k - c_y' + h_ky'})`` (``h = half``: the rule grows with ``h``).

    * ``y != y'``: it increases in ``c_y`` and decreases in ``c_y'`` (each appears with one sign
      in both terms): ``c_y = hi``, ``c_y' = lo``. With ``x_k = e^{c_k}`` for the other classes
      it is ``ln((C + gamma . x) / (A + alpha . x))``, ``C = 1 + e^{c_y - c_y' + h_yy'}``,
      ``A = 1 + e^{c_y' - c_y - h_y'y}``, ``gamma_k = e^{h_ky' - c_y'}``, ``alpha_k =
      e^{-h_ky - c_y}``.
    * ``y = y'``: with ``u = e^{-c_y}``, ``ln(1 + u P) - ln(1 + u M)``, ``P >= M``, increases in
      ``u``: ``c_y = lo``; the rest is ``ln((1 + gamma . x) / (1 + alpha . x))``, ``gamma_k =
      e^{h_ky - c_y}``, ``alpha_k = e^{-h_ky - c_y}``.

    A linear-fractional function with positive coefficients is maximised over a box where
    ``N - r* D`` is: ``x_k`` at its top iff ``gamma_k / alpha_k > r*`` -- a threshold in the
    order of ``gamma_k / alpha_k``. The ``n + 1`` threshold vertices are evaluated (in log
    space), so the max is exact. With equal radii this is the ``U' = max(G_same, U_cross)`` of
    docs/theory/glm.md#softmax-intercepts, where only ``sum x_k`` matters and the thresholds are
    "all low" / "all high".
    """
    c_lo, c_hi, half = (np.asarray(v, float) for v in (c_lo, c_hi, half))
    K = c_lo.shape[-1]
    lo_x, hi_x = _check_classes(domain, K)
    lead = np.broadcast_shapes(c_lo.shape[:-1], c_hi.shape[:-1], half.shape[:-2])
    c_lo, c_hi = np.broadcast_to(c_lo, lead + (K,)), np.broadcast_to(c_hi, lead + (K,))
    half = np.broadcast_to(half, lead + (K, K))
    best = np.full(lead, -np.inf)
    for y in range(lo_x, hi_x + 1):
        for y2 in range(lo_x, hi_x + 1):
            others = [k for k in range(K) if k not in (y, y2)]
            if y == y2:
                ln_a = ln_c = np.zeros(lead)
                la = -c_lo[..., y, None] - half[..., others, y]
                lg = -c_lo[..., y, None] + half[..., others, y]
            else:
                ln_a = np.logaddexp(0.0, c_lo[..., y2] - c_hi[..., y] - half[..., y2, y])
                ln_c = np.logaddexp(0.0, c_hi[..., y] - c_lo[..., y2] + half[..., y, y2])
                la = -c_hi[..., y, None] - half[..., others, y]
                lg = -c_lo[..., y2, None] + half[..., others, y2]
            n = len(others)
            if n == 0:
                best = np.maximum(best, ln_c - ln_a)
                continue
            order = np.argsort(la - lg, axis=-1)  # gamma_k / alpha_k, largest first
            pick = lambda v: np.take_along_axis(v, order, axis=-1)[..., None, :]  # noqa: E731
            top = np.arange(n)[None, :] < np.arange(n + 1)[:, None]  # vertex j: first j at hi
            cs = np.where(top, pick(c_hi[..., others]), pick(c_lo[..., others]))
            num = np.logaddexp(ln_c[..., None], _np_logsumexp(pick(lg) + cs))
            den = np.logaddexp(ln_a[..., None], _np_logsumexp(pick(la) + cs))
            best = np.maximum(best, np.max(num - den, axis=-1))
    return best


def _np_logsumexp(x):
    from scipy.special import logsumexp

    return logsumexp(x, axis=-1)


def categorical_region(op, domain, params) -> np.ndarray:
    """Sound ``sup L`` over a truncation region, per element (the family's custom region rule).

    * a :class:`Span` (``p`` reads no private data, natural space): the per-class hull
      ``[lo, hi]`` -- ``ln(max_x hi_x / min_x lo_x)``: sound (``L(theta) = ln(max p / min p)``
      increases in every ``max`` and decreases in every ``min``), exact when the region holds a
      simplex reaching the largest ``hi_x`` and the smallest ``lo_x`` at once;
    * a :class:`Window` in the natural or softmax space: its hull (lemma B; the softmax rule
      decreases in every ``lo`` and increases in every ``hi``: sound). For the softmax space the
      hull equals docs/theory/glm.md#softmax-balls -- exact -- for per-class balls without intercepts (``o = 0``,
      ``half = R (B_k + B_j)``); with moving offsets (intercepts) it is a bound, because two
      records of one class see one offset of a draw while the hull lets them see two (measured
      in ``docs/rules/categorical.md``: up to 1.36x). A softmax
      Window may carry ``extra = (c_lo, c_hi)``, per-class offset bounds (``..., K``) such that
      ``o_kj = c_k - c_j`` (intercepts ``b_k in [c_lo_k, c_hi_k]``): then the smaller of the hull
      and :func:`_softmax_offset_region` (the ``U'`` of docs/theory/glm.md#softmax-intercepts, tighter) is returned;
    * a :class:`Window` in an ordinal space: :func:`_ordered_region`.
    """
    (p,) = params
    if isinstance(p, Span):
        b = Bounds(np.asarray(p.lo, float), np.asarray(p.hi, float))
        lo, hi = _natural_range(b, domain, NP)
        return np.asarray(hi - lo, float)
    if not isinstance(p, Window):
        raise NoRegionRule(f"Categorical: p of kind {type(p).__name__} has no region rule")
    if p.space not in SPACES:
        raise NoRegionRule(f"Categorical: no region rule for p in space {p.space!r}")
    if p.space in _ORDERED:
        return _ordered_region(op, domain, p)
    lo, hi = categorical_range(op, domain, (p.hull,), NP)
    value = np.asarray(hi - lo, float)
    if p.space == "softmax" and p.extra is not None and getattr(p, "sliding", True):
        c_lo, c_hi = p.extra
        # the hull's computed range is infinite where ln p may underflow: the offsets' exact sup
        # (real arithmetic) must not hide that; elsewhere it carries the same float error
        offset = _softmax_offset_region(domain, c_lo, c_hi, p.half) + 2.0 * SOFTMAX_LN_P_ERROR
        value = np.where(np.isfinite(value), np.minimum(value, offset), value)
    return value


register_region(CategoricalRV, RegionSpec(custom=categorical_region))


def _fixed_categorical_p(p) -> Bounds | None:
    """``p`` as a point :class:`Bounds` when it is fixed (ordinal cutpoints and sigma too)."""
    if p is None or isinstance(p, Window):
        return None
    if isinstance(p, Span):
        return Bounds.point(np.asarray(p.lo, float)) if p.is_point else None
    if not isinstance(p, Bounds):
        return Bounds.point(np.asarray(p, float))
    if not (p.is_point or np.array_equal(np.asarray(p.lo), np.asarray(p.hi))):
        return None
    lo = np.asarray(p.lo, float)
    if p.space in _ORDERED and p.extra is not None:
        pairs = [p.extra[i : i + 2] for i in range(0, len(p.extra), 2)]
        if not all(np.array_equal(np.asarray(u), np.asarray(v)) for u, v in pairs):
            return None
        extra = tuple(x for u, _ in pairs for x in (np.asarray(u, float),) * 2)
        return Bounds(lo, lo, p.space, extra)
    return Bounds(lo, lo, p.space, p.extra)


@min_lipschitz.register(CategoricalRV)
def categorical_min_lipschitz(op, domain, params) -> float | None:
    """A floor on the constant only when ``p`` is fixed (then the constant itself, less a
    rounding margin ``1e-9 (1 + m)``); None when anything is free: a uniform ``p``, equal
    ``eta``'s, or a degenerate ordinal window with cutpoints equalising the classes give
    ``L = 0``, so no positive floor holds in any space."""
    (p,) = params
    fixed = _fixed_categorical_p(p)
    if fixed is None:
        return None
    with np.errstate(invalid="ignore", divide="ignore"):
        values = np.asarray(categorical_lipschitz(op, domain, (fixed,), NP), float)
    if values.size == 0 or np.any(np.isnan(values)):
        return None
    m = float(np.min(values))
    m -= 1e-9 * (1.0 + abs(m))
    return m if m > 0 else None


# --------------------------------------------------------------------------- graph recognisers
def _is_transparent(var: Variable) -> bool:
    """A view, cast, identity, or leading ``expand_dims`` (a RandomVariable broadcasting its
    parameter to the batch shape): nothing that changes a value or the class axis."""
    node = var.owner
    if node is None:
        return False
    if isinstance(node.op, ViewOp):
        return True
    if isinstance(node.op, DimShuffle) and node.op.is_expand_dims:
        n_in = node.inputs[0].type.ndim
        order = tuple(node.op.new_order)
        k = len(order) - n_in
        return n_in >= 1 and order == ("x",) * k + tuple(range(n_in))
    return isinstance(node.op, Elemwise) and isinstance(node.op.scalar_op, (ps.Cast, ps.Identity))


def _strip(var: Variable) -> Variable:
    """See through ``pm.Deterministic`` (a ``ViewOp``), casts, identities and batch
    ``expand_dims``."""
    while _is_transparent(var):
        var = var.owner.inputs[0]
    return var


def match_softmax(p: Variable) -> Variable | None:
    """The pre-softmax tensor ``eta`` when ``p`` is ``softmax(eta)`` over its last axis, else None.

    Recognises ``pm.Categorical(logit_p=eta)`` (PyMC builds ``softmax(eta, axis=-1)``) and
    ``pm.math.softmax(s, axis=1)`` of a matrix, through ``pm.Deterministic`` and casts.
    ``eta``'s last axis is the classes.
    """
    if not isinstance(p, Variable):
        return None
    v = _strip(p)
    node = v.owner
    if node is None or not isinstance(node.op, Softmax):
        return None
    axis, ndim = node.op.axis, v.type.ndim
    if (axis is None and ndim == 1) or (axis is not None and axis % max(ndim, 1) == ndim - 1):
        return node.inputs[0]
    return None


def _nearby_nodes(v: Variable, max_depth: int = 32, max_nodes: int = 4000):
    """Apply nodes within ``max_depth`` steps above ``v`` (breadth first)."""
    seen, out = set(), []
    queue = deque([(v, 0)])
    while queue and len(out) < max_nodes:
        var, depth = queue.popleft()
        node = var.owner
        if node is None or node in seen or depth > max_depth:
            continue
        seen.add(node)
        out.append(node)
        queue.extend((i, depth + 1) for i in node.inputs)
    return out


def _expand_chain(var: Variable) -> list[Variable]:
    """``var`` and what it is an ``expand_dims`` of, repeatedly (broadcasting inserts them)."""
    out = [var]
    while var.owner is not None and isinstance(var.owner.op, DimShuffle) and var.owner.op.is_expand_dims:
        var = var.owner.inputs[0]
        out.append(var)
    return out[::-1]  # the original variable first: it is what the user passed


def _is_padright(var: Variable) -> Variable | None:
    """``x`` when ``var`` is ``shape_padright(x)`` (possibly under broadcasting's expand_dims)."""
    for v in _expand_chain(var):
        node = v.owner
        if node is not None and isinstance(node.op, DimShuffle):
            order = tuple(node.op.new_order)
            n_in = node.inputs[0].type.ndim
            if order == tuple(range(n_in)) + ("x",):
                return node.inputs[0]
    return None


def _elemwise(node, scalar_type) -> bool:
    return isinstance(node.op, Elemwise) and isinstance(node.op.scalar_op, scalar_type)


def _same_graph(a: Variable, b: Variable) -> bool:
    try:
        return bool(equal_computations([a], [b]))
    except Exception:  # pragma: no cover - mismatched types in a candidate
        return False


def match_ordered(p: Variable) -> tuple[str, Variable, Variable, Variable | None] | None:
    """``(kind, eta, cutpoints, sigma)`` when ``p`` is PyMC's ordinal ``compute_p``, else None.

    ``kind`` is ``"ordered-logistic"`` (``OrderedLogistic.compute_p(eta, cutpoints)``, ``sigma``
    None) or ``"ordered-probit"`` (``OrderedProbit.compute_p(eta, cutpoints, sigma)``). PyMC
    wraps ``p`` in ``pm.Deterministic(f"{name}_probs", p)`` unless ``compute_p=False``; the
    ``ViewOp`` is seen through.

    Method: candidates for ``eta`` and ``cutpoints`` are read off the nodes where ``compute_p``
    combines them (``sigmoid(cutpoints - shape_padright(eta))``; ``shape_padright(eta) -
    cutpoints``), candidates for ``sigma`` are the divisors in the graph; each candidate is
    confirmed only if ``compute_p`` rebuilt from it is the same graph as ``p``
    (``equal_computations``), so a look-alike is never accepted.
    """
    from pymc.distributions.discrete import OrderedLogistic, OrderedProbit

    if not isinstance(p, Variable):
        return None
    v = _strip(p)
    if v.owner is None:
        return None
    nodes = _nearby_nodes(v)
    logistic, probit, sigmas = [], [], []
    for node in nodes:
        if _elemwise(node, ps.Sigmoid):
            inner = node.inputs[0]
            if inner.owner is not None and _elemwise(inner.owner, ps.Sub):
                x, y = inner.owner.inputs
                eta = _is_padright(y)
                if eta is not None:
                    logistic += [(e, c) for e in _expand_chain(eta) for c in _expand_chain(x)]
        elif _elemwise(node, ps.Sub):
            x, y = node.inputs
            eta = _is_padright(x)
            if eta is not None:
                probit += [(e, c) for e in _expand_chain(eta) for c in _expand_chain(y)]
        elif _elemwise(node, ps.TrueDiv):
            for s in _expand_chain(node.inputs[1]):
                if s not in sigmas:
                    sigmas.append(s)
    for eta, cut in logistic:
        try:
            rebuilt = OrderedLogistic.compute_p(eta, cut)
        except Exception:
            continue
        if _same_graph(v, rebuilt):
            return "ordered-logistic", eta, cut, None
    for eta, cut in probit:
        for s in sigmas:
            try:
                rebuilt = OrderedProbit.compute_p(eta, cut, s)
            except Exception:
                continue
            if _same_graph(v, rebuilt):
                return "ordered-probit", eta, cut, s
    return None
