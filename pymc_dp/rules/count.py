"""Exact rules for over-dispersed counts: NegativeBinomial and BetaBinomial.

* **NegativeBinomial** (PyTensor's ``NegBinomialRV``, parameters ``(n, p)``). PyMC's
  ``pm.NegativeBinomial(mu=, alpha=)`` builds ``n = alpha`` and ``p = alpha / (mu + alpha)``, so a
  negative binomial regression ``mu = exp(X @ w + b)`` reaches the rule as ``n`` a point and
  ``p`` a window of ``t = ln mu`` (``Bounds(..., space="log-mean")``); ``p`` may also be a
  natural point (``pm.NegativeBinomial(n=, p=)``) or a natural interval (a table ``p[group]``).
  Exact, O(1) per element (docs/theory/glm.md#negative-binomial, with a closed-form search over the data values).
  Region: windows of ``ln mu`` at their ends (lemma C, proved in
  :func:`pymc_dp.rules.discrete.link_region` for any domain ``{lo..hi}``), a free ``p`` at its
  ends (quasi-convex), ``alpha`` by certified branch and bound (docs/theory/glm.md#lemma-d).
* **BetaBinomial** (``BetaBinomialRV``, parameters ``(n, alpha, beta)``, all public). Exact, by
  enumeration over the domain (docs/theory/glm.md#beta-binomial). Region: the (alpha, beta) box at its
  vertices, which include the corners ``(a_hi, b_lo)`` and ``(a_lo, b_hi)`` of that derivation.

Both register :func:`~pymc_dp.rules.discrete.min_lipschitz`. Derivations, exactness checks and
region modes: ``docs/rules/counts.md``; brute-force tests: ``tests/rules/test_count.py``.
"""

from __future__ import annotations

import numpy as np
from pytensor.tensor.random.basic import BetaBinomialRV, NegBinomialRV
from scipy.special import digamma, gammaln

from pymc_dp.exceptions import UnsupportedFactorError
from pymc_dp.rules.base import Bounds, element_lipschitz, integer_domain, register_rule
from pymc_dp.rules.discrete import (
    link_region,
    min_lipschitz,
)
from pymc_dp.rules.integer_helpers import (
    check_trials_domain,
    constant_floor,
    domain_values,
    fixed_params,
    fixed_value,
    floor_with_margin,
    known_trials,
    point_value,
    profile_candidates,
    value_axis,
)
from pymc_dp.rules.namespaces import NP
from pymc_dp.rules.region import BranchAndBound, NoRegionRule, RegionSpec, Span, register_region

__all__ = [
    "negative_binomial_range",
    "negative_binomial_alpha_lipschitz",
    "negative_binomial_min_lipschitz",
    "beta_binomial_range",
    "beta_binomial_min_lipschitz",
    "POISSON_ALPHA",
]

#: PyMC's NegativeBinomial logp is the Poisson(mu) logp above this alpha (``pt.gt(alpha, 1e10)``)
POISSON_ALPHA = 1e10

# =========================================================================== NegativeBinomial


def nb_logpmf(y, alpha, s, xp):
    """``ln NB(y; alpha, p)`` as PyMC computes it, with ``s = ln(mu / alpha) = logit(1 - p)``.

    ``ln p = -softplus(s)``, ``ln(1 - p) = -softplus(-s)``:
    ``lnG(y + alpha) - lnG(alpha) - ln y! - alpha softplus(s) - y softplus(-s)``; above
    ``alpha = 1e10`` PyMC returns the Poisson logp ``y t - e^t - ln y!`` (``t = s + ln alpha``),
    and so does this. ``0 * inf`` is taken as 0.
    """
    y = xp.asarray(y)
    nb = (
        xp.gammaln(y + alpha)
        - xp.gammaln(alpha)
        - xp.gammaln(y + 1.0)
        - alpha * xp.softplus(s)
        - xp.where(y > 0, y * xp.softplus(-s), 0.0)
    )
    t = s + xp.log(alpha)
    poisson = xp.where(y > 0, y * t, 0.0) - xp.exp(t) - xp.gammaln(y + 1.0)
    return xp.where(alpha > POISSON_ALPHA, poisson, nb)


def nb_window(p: Bounds, alpha, xp):
    """``(s_lo, s_hi)``, ``s = ln(mu / alpha)``, from ``p`` on the natural or log-mean scale."""
    if p.space == "log-mean":
        log_alpha = xp.log(alpha)
        return xp.asarray(p.lo) - log_alpha, xp.asarray(p.hi) - log_alpha
    if p.space != "natural":
        raise UnsupportedFactorError(
            f"a NegativeBinomial p given on the {p.space!r} scale: only 'natural' and 'log-mean' "
            "(a window of ln mu) are supported"
        )

    def s_of(q):  # decreasing in p
        q = xp.asarray(q)
        return xp.log1p(-q) - xp.log(q)

    if p.is_point:
        s = s_of(p.lo)
        return s, s
    return s_of(p.hi), s_of(p.lo)


@register_rule(NegBinomialRV, "NegativeBinomial", ("n", "p"), range_params=("p",))
def negative_binomial_range(op, domain, params, xp):
    """NegativeBinomial(n = alpha, p), y in {lo..hi}, lo >= 0; ``p`` a natural point or interval,
    or a window ``t = ln mu in [t_lo, t_hi]`` (``space="log-mean"``, ``mu = alpha (1 - p) / p``).

    Derivation (docs/theory/glm.md#negative-binomial, exact). With ``s = t - ln alpha``,
    ``g(y, s) = lnG(y + alpha) - lnG(alpha) - ln y! - alpha softplus(s) - y softplus(-s)``;
    ``d_t g = alpha (y - mu) / (alpha + mu)``, ``d_t^2 g = -alpha mu (alpha + y)/(alpha + mu)^2 < 0``:
    concave in t with its peak at ``t = ln y``. The record's count and its covariates vary
    independently, so the range is over the box ``{lo..hi} x [t_lo, t_hi]``:

    * smallest value: at a corner. t at an end by concavity; y at an end because the pmf is
      log-concave in y for alpha >= 1 and decreasing in y for alpha < 1 (ratio
      ``pmf(y+1)/pmf(y) = (y + alpha)(1 - p)/(y + 1) < 1``).
    * largest value: ``max_y G(y)``, ``G(y) = g(y, clip(ln y, t_lo, t_hi))`` (y = 0 at ``t_lo``),
      the O(M) enumeration of docs/theory/glm.md#negative-binomial-window, found in O(1): let ``a = e^{t_lo} = mu_lo`` and
      ``y_c = ceil(a) - 1``. For ``y <= y_c`` (``y < a``), ``G(y) = g(y, t_lo)``, the pmf at
      ``mu_lo``: unimodal, largest at ``floor((alpha - 1) mu_lo / alpha)`` (the NB mode; below 0
      for alpha < 1, i.e. at ``lo``). For ``y >= y_c`` G does not increase: the best ``t*`` of
      ``y + 1`` is ``clip(ln(y+1)) <= ln(y+1)``, and at ``mu* = e^{t*} <= y + 1`` the ratio
      ``(y + alpha) mu* / ((y + 1)(alpha + mu*)) <= 1`` (iff ``alpha (mu* - y - 1) <= mu*``), so
      ``G(y+1) <= g(y, t*) <= G(y)``. Hence the argmax over ``{lo..hi}`` is the clipped NB mode at
      ``mu_lo`` or ``clip(y_c)``; both, with a margin of one for rounding, are evaluated exactly.

    A natural point p is the window ``s = ln((1 - p)/p)`` of width 0; a natural interval
    ``[p_lo, p_hi]`` is ``s in [s(p_hi), s(p_lo)]`` (s decreases in p). PyMC's logp is the
    Poisson logp above alpha = 1e10; the rule follows it (the same argument with the Poisson
    ratio ``mu/(y + 1)``). Checked against ``pm.logp(pm.NegativeBinomial.dist(mu=, alpha=))`` by
    enumeration over the data and a grid of the window.
    """
    lo_x, hi_x = integer_domain(domain, "NegativeBinomial")
    n, p = params
    alpha = xp.asarray(point_value(n, "NegativeBinomial", "n (alpha)"))
    s_lo, s_hi = nb_window(p, alpha, xp)
    lo = None
    for y in (float(lo_x), float(hi_x)):
        for s in (s_lo, s_hi):
            v = nb_logpmf(y, alpha, s, xp)
            lo = v if lo is None else xp.minimum(lo, v)
    # candidates only steer the search (each is evaluated exactly): cap e^s far above any domain
    e_s = xp.exp(xp.minimum(s_lo, 700.0))
    mu_lo = alpha * e_s
    mode = xp.floor(xp.maximum(alpha - 1.0, 0.0) * e_s)  # the NB mode at mu_lo (0 for alpha < 1)
    y_c = -xp.floor(-mu_lo) - 1.0  # ceil(mu_lo) - 1
    log_alpha = xp.log(alpha)
    hi = None
    # mode + {-1..2} and y_c + {-1..2}, clipped to the domain
    for y in profile_candidates(mode + 1.0, lo_x, hi_x, xp) + profile_candidates(y_c + 1.0, lo_x, hi_x, xp):
        s_y = xp.where(y > 0, xp.clip(xp.log(xp.maximum(y, 1.0)) - log_alpha, s_lo, s_hi), s_lo)
        v = nb_logpmf(y, alpha, s_y, xp)
        hi = v if hi is None else xp.maximum(hi, v)
    return lo, hi


def negative_binomial_alpha_lipschitz(op, domain, params, alpha_lo, alpha_hi) -> np.ndarray:
    """Lemma D constant of the NegativeBinomial L in ``ln alpha`` on ``[alpha_lo, alpha_hi]``.

    ``L(alpha)`` is a max over pairs of records of ``ln p(r) - ln p(r')``, so it is Lipschitz with
    the largest width, over alpha in the piece, of the range of ``d_alpha ln p`` over the records
    (docs/theory/glm.md#lemma-d); in ``ln alpha`` the constant is multiplied by alpha <= alpha_hi.

    * ``p`` a window of ``ln mu`` (mu fixed per record while alpha moves; ``mu in [mu_lo, mu_hi]``):
      ``d_alpha ln p = T(y, alpha) + h(mu, y, alpha)``, ``T = psi(y + alpha) - psi(alpha)``
      (increasing in y, decreasing in alpha), ``h = -ln(1 + mu/alpha) + (mu - y)/(alpha + mu)``
      with ``d_y h = -1/(alpha + mu) < 0``, ``d_mu h = (y - mu)/(alpha + mu)^2`` and
      ``d_alpha h = (mu^2 + alpha y) / (alpha (alpha + mu)^2) > 0``. So over the whole box
      ``T in [psi(lo + a1) - psi(a1), psi(hi + a0) - psi(a0)]``, ``max h = h(clip(lo, mu_lo, mu_hi),
      lo, a1)``, ``min h = min(h(mu_lo, hi, a0), h(mu_hi, hi, a0))``, and the width is at most
      the sum of the two widths. (The ``psi(M + a0) - psi(a0) + 1 + ln(1 + mu_hi/a0) + M/a0`` of
      docs/theory/glm.md#negative-binomial-alpha bounds the same quantity more loosely.)
      For a large alpha the two parts cancel (the pmf tends to the Poisson one), and the
      bound ``2 S + mu_hi^2 / (2 a0)``, ``S = sum_{j<hi} max_mu |mu - j| / (a0 + j)``, on the width
      of ``alpha d_alpha ln p`` is smaller: ``d_alpha ln p = A - phi`` with
      ``A = sum_{j<y} (mu - j) / ((alpha + j)(alpha + mu))`` (``alpha |A| <= S``) and
      ``phi = ln(1 + mu/alpha) - mu/(alpha + mu) in [0, mu^2 / (2 alpha^2)]``
      (``ln(1 + x) - x/(1 + x) <= x^2 / 2``). The smaller of the two is returned.
    * ``p`` natural (p fixed per record while alpha moves): ``d_alpha ln p = psi(y + alpha) -
      psi(alpha) + ln p``; width ``psi(hi + alpha) - psi(lo + alpha) + ln(p_hi / p_lo)``,
      decreasing in alpha: its value at ``a0``.
    """
    (_, p) = params
    a0, a1 = float(alpha_lo), float(alpha_hi)
    lo_x, hi_x = integer_domain(domain, "NegativeBinomial")
    if p.space == "log-mean":
        mu_lo, mu_hi = np.exp(np.asarray(p.lo, float)), np.exp(np.asarray(p.hi, float))
        t_width = (digamma(hi_x + a0) - digamma(a0)) - (digamma(lo_x + a1) - digamma(a1))

        def h(mu, y, a):
            return -np.log1p(mu / a) + (mu - y) / (a + mu)

        h_max = h(np.clip(float(lo_x), mu_lo, mu_hi), float(lo_x), a1)
        h_min = np.minimum(h(mu_lo, float(hi_x), a0), h(mu_hi, float(hi_x), a0))
        separate = a1 * (t_width + (h_max - h_min))
        # the two parts cancel to O(1/alpha^2) for a large alpha (the pmf tends to the Poisson
        # one): d_alpha ln p = A - phi with A = sum_{j<y} (mu - j) / ((alpha + j)(alpha + mu)) and
        # phi = ln(1 + mu/alpha) - mu/(alpha + mu) in [0, mu^2 / (2 alpha^2)], so
        # alpha |A| <= sum_{j<hi} max_mu |mu - j| / (a0 + j) =: S and the width of alpha (A - phi)
        # is at most 2 S + mu_hi^2 / (2 a0)
        j = np.arange(hi_x, dtype=float)
        far = np.maximum(np.abs(mu_lo[..., None] - j), np.abs(mu_hi[..., None] - j))
        S = np.sum(far / (a0 + j), axis=-1)
        joint = 2.0 * S + np.square(mu_hi) / (2.0 * a0)
        return np.asarray(np.minimum(separate, joint), dtype=float)
    else:
        p_lo, p_hi = np.asarray(p.lo, float), np.asarray(p.hi, float)
        width = (digamma(hi_x + a0) - digamma(lo_x + a0)) + (np.log(p_hi) - np.log(p_lo))
    return a1 * np.asarray(width, dtype=float)


_NB_REGION = link_region(
    "NegativeBinomial",
    ("log-mean",),
    {"n": BranchAndBound(negative_binomial_alpha_lipschitz, log_scale=True), "p": "ends"},
    positive={
        "n": (
            "the NegativeBinomial alpha (n) must stay above 0 over the truncation region: "
            "ln p(y >= 1) ~ ln(alpha / y) -> -inf as alpha -> 0, so the constant is unbounded. "
            "Truncate alpha to [alpha_lo, alpha_hi] with alpha_lo > 0 (a prior bounded away from 0)"
        )
    },
)


def negative_binomial_region(op, domain, params) -> np.ndarray:
    """sup L of NegativeBinomial(n = alpha, p) over a region (the family's custom region rule).

    * ``p`` a window of ``ln mu`` (negative binomial regression): its two end windows -- lemma C
      for fixed alpha (proof in :func:`pymc_dp.rules.discrete.link_region`, any domain
      ``{lo..hi}``); other windows: the hull.
    * ``p`` a Span (a free p, no covariates): ends. With ``u = ln(1 - p)``,
      ``ln pmf = c_y + y u + alpha ln p`` (``c_y = lnG(y + alpha) - lnG(alpha) - ln y!``); the last
      term cancels in every pair difference, so ``L(u) = max_y (c_y + y u) - min_y (c_y + y u)`` is
      convex in u, and u is monotone in p (above alpha = 1e10, the Poisson case in
      ``ln mu = ln alpha + u - ln(1 - e^u)``, also monotone in p).
    * ``n`` (alpha) a Span: certified branch and bound in ``ln alpha`` with
      :func:`negative_binomial_alpha_lipschitz` (lemma D; the sup was observed at an end of the
      alpha interval but not proved, docs/theory/glm.md#negative-binomial-alpha). ``alpha_lo > 0`` is required; ``alpha_hi`` must
      stay at most 1e10, where PyMC's logp switches to the Poisson one (L jumps there).
    """
    alpha = params[0]
    if isinstance(alpha, Span) and not alpha.is_point and np.any(np.asarray(alpha.hi, float) > POISSON_ALPHA):
        raise NoRegionRule(
            "the NegativeBinomial alpha (n) reaches above 1e10 over the truncation region, where "
            "PyMC's logp switches to the Poisson one; bound alpha below 1e10 or use a Poisson likelihood"
        )
    return _NB_REGION(op, domain, params)


register_region(
    NegBinomialRV,
    RegionSpec(
        window="ends",
        params={"n": BranchAndBound(negative_binomial_alpha_lipschitz, log_scale=True), "p": "ends"},
        custom=negative_binomial_region,
    ),
)


@min_lipschitz.register(NegBinomialRV)
def negative_binomial_min_lipschitz(op, domain, params) -> float | None:
    """NegativeBinomial with alpha fixed, p (or mu) free: the floor ``inf_p L``, per element.

    With ``u = ln(1 - p) in (-inf, 0)``, ``ln pmf = c_y + y u + alpha ln p``: the log-linear case of
    :func:`pymc_dp.rules.discrete._log_linear_floor_point`, ``c_y = lnG(y + alpha) - ln y!``, whose
    second difference has the sign of ``1 - alpha`` (concave for alpha >= 1, convex for alpha <= 1).
    ``L(u)`` is convex with its minimum at ``u* = (c_lo - c_hi)/(hi - lo)``:

    * alpha > 1: ``u* < 0``, floor ``L(p* = 1 - e^{u*})``;
    * alpha <= 1: ``u* >= 0`` lies outside ``u < 0``, L decreases towards ``u = 0`` (p -> 0,
      mu -> inf), and the floor is the infimum ``c_lo - c_hi`` (not attained; 0 at alpha = 1);
    * alpha > 1e10: PyMC's Poisson logp, the Poisson floor.

    A free alpha: None (alpha = 1, p -> 0 makes L -> 0). A window of ``ln mu`` only widens the
    range (lemma B): the floor holds for regressions too.
    """
    fixed = fixed_params(params)
    if fixed is not None:
        return constant_floor(op, domain, fixed)
    fixed_alpha = fixed_value(params[0])
    if fixed_alpha is None:
        return None
    alpha = fixed_alpha[0]
    lo, hi = integer_domain(domain, "NegativeBinomial")
    if hi == lo:
        return None

    # c_lo - c_hi = -sum_{j=lo}^{hi-1} ln((j + alpha)/(j + 1)), summed term by term: a difference
    # of lnG values of size ~alpha ln alpha would lose digits for a large alpha
    j = np.arange(lo, hi, dtype=float)
    drop = -np.sum(np.log1p((np.asarray(alpha, float)[..., None] - 1.0) / (j + 1.0)), axis=-1)
    u_star = drop / (hi - lo)
    neg = u_star < 0
    p_star = np.where(neg, -np.expm1(np.where(neg, u_star, -1.0)), 0.5)
    L_nb = element_lipschitz(op, domain, (Bounds.point(alpha), Bounds.point(p_star)), NP)
    nb = np.where(neg, L_nb, drop)
    # above alpha = 1e10 PyMC's logp is Poisson(mu), mu = alpha (1 - p)/p over (0, inf)
    t_pois = (gammaln(hi + 1.0) - gammaln(lo + 1.0)) / (hi - lo)
    L_pois = element_lipschitz(
        op, domain, (Bounds.point(np.broadcast_to(np.float64(2 * POISSON_ALPHA), np.shape(alpha))),
                     Bounds.point(np.float64(t_pois), "log-mean")), NP,
    )
    # rounding: the rule's lnG differences carry an absolute error of a few ulps of lnG(hi + alpha)
    a = np.asarray(alpha, float)
    scale = np.where(
        a > POISSON_ALPHA,
        gammaln(hi + 1.0) + hi * abs(t_pois) + np.exp(t_pois),
        np.abs(gammaln(hi + a)) + np.abs(gammaln(a)),
    )
    return floor_with_margin(np.where(alpha > POISSON_ALPHA, L_pois, nb), scale=scale)


# =========================================================================== BetaBinomial


def _beta_binomial_logpmf(y, n, a, b, xp):
    """``ln C(n, y) + ln B(y + a, n - y + b) - ln B(a, b)`` (PyMC's logp, y <= n)."""
    return (
        xp.gammaln(n + 1.0)
        - xp.gammaln(y + 1.0)
        - xp.gammaln(n - y + 1.0)
        + xp.gammaln(y + a)
        + xp.gammaln(n - y + b)
        - xp.gammaln(n + a + b)
        - xp.gammaln(a)
        - xp.gammaln(b)
        + xp.gammaln(a + b)
    )


@register_rule(BetaBinomialRV, "BetaBinomial", ("n", "alpha", "beta"))
def beta_binomial_range(op, domain, params, xp):
    """BetaBinomial(n, alpha, beta), y in {lo..hi} inside {0..n}; all parameters public points.

    Derivation (docs/theory/glm.md#beta-binomial). ``ln p(y) = ln C(n, y) + ln B(y + a, n - y + b) - ln B(a, b)``;
    the pmf may be unimodal, U-shaped or monotone in y, so its range is enumerated over the
    domain (O(M) per element, exact). n may differ per element (per-row trials): each element's
    values stop at its own n, as for the Binomial (a record above its row's n has probability 0);
    a domain above every n, or starting above some n, is refused. At ``a = b = 1`` the pmf is
    uniform on ``{0..n}``: L = 0.
    """
    lo_x, hi_x = integer_domain(domain, "BetaBinomial")
    n, a, b = params
    n = point_value(n, "BetaBinomial", "n")
    a = point_value(a, "BetaBinomial", "alpha")
    b = point_value(b, "BetaBinomial", "beta")
    check_trials_domain("BetaBinomial", domain, lo_x, hi_x, known_trials(n, xp))
    y = domain_values(lo_x, hi_x, xp)
    n_e, a_e, b_e = value_axis(n, xp), value_axis(a, xp), value_axis(b, xp)
    vals = _beta_binomial_logpmf(y, n_e, a_e, b_e, xp)
    inside = y <= n_e
    hi = xp.amax(xp.where(inside, vals, -np.inf), axis=-1)
    lo = xp.amin(xp.where(inside, vals, np.inf), axis=-1)
    return lo, hi


_BB_POSITIVE = (
    "the BetaBinomial {name} must stay above 0 over the truncation region (ln p(y) ~ lnG({name}) "
    "-> inf as it goes to 0); truncate it to an interval with a positive lower end"
)

# BetaBinomial: (alpha, beta) box at its vertices. For y > y', ``f(y) - f(y') =
# sum_{j=y'}^{y-1} ln(j + a) - sum_{j=n-y}^{n-y'-1} ln(j + b) + const`` increases in a and decreases
# in b (docs/theory/glm.md#beta-binomial); for y < y' the opposite. So L(a) = max(increasing, decreasing) is
# quasi-convex in a for every b (and in b for every a): "ends" in each. The four vertices include
# that page's corners (a_hi, b_lo) and (a_lo, b_hi), so the value is exact. n must be fixed.
register_region(
    BetaBinomialRV,
    RegionSpec(
        params={"alpha": "ends", "beta": "ends"},
        custom=link_region(
            "BetaBinomial",
            (),
            {"alpha": "ends", "beta": "ends"},
            positive={k: _BB_POSITIVE.format(name=k) for k in ("alpha", "beta")},
        ),
    ),
)


@min_lipschitz.register(BetaBinomialRV)
def beta_binomial_min_lipschitz(op, domain, params) -> float | None:
    """BetaBinomial: the constant itself when n, alpha and beta are fixed; otherwise None (with
    both shapes free, ``a = b = 1`` gives the uniform pmf and L = 0; with one free no floor is
    stated)."""
    fixed = fixed_params(params)
    return None if fixed is None else constant_floor(op, domain, fixed)
