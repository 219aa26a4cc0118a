"""The stochastic-Lipschitz (epsilon, delta) guarantee of an *untruncated* posterior draw.

docs/theory/stochastic_lipschitz.md has the derivation; each function below carries the part of
the proof it implements (OpenDP style: a small function with its proof beside it).

What the seeds say, and why it is not used as stated. ALT 2014 Thm 2(ii) and JMLR 2017
Thm 8(2) give, under the stochastic Lipschitz assumption ``xi(Theta_L) >= 1 - exp(-c (L - L0))``,
a ``(0, sqrt(C (1 + 2 L0 + 1/c) / 2))``-DP bound under the pseudo-metric ``sqrt(rho)``, where
``C`` is the ratio of the maximum to the marginal likelihood (JMLR eq. 9): not a prior mass,
and ``C`` is unbounded over datasets for most families. JMLR Cor. 9 states that the posterior
is ``(2L, 0, exp(-c (L - L0)))``-*randomly* DP, where the randomness is the **prior** measure:
that is not ``(epsilon, delta)``-DP. Taking ``delta = xi(Theta \\ Theta_L)`` (the prior mass of
the non-Lipschitz set) is false in general: a dataset can move the posterior onto that set
(:func:`finite_family_profile` and tests/test_stochastic.py give a two-point family where the
true delta is ~0.9 while the prior mass is 0.01).

What holds instead (:func:`stochastic_guarantee`): with ``G`` a set on which the prior restricted
to ``G`` gives an ``eps0``-DP posterior (the truncation region Theta_L of the truncated mode) and

.. math:: \\eta^* = \\sup_{x} \\xi(\\Theta \\setminus G \\mid x)

the largest *posterior* mass of the complement over every dataset of the public size, one
untruncated posterior draw is ``(eps0 + ln 1/(1 - eta*), eta*)``-DP.

Where the posterior depends on the data through one sum, the exact privacy profile of a draw is
computable instead (:func:`neighbour_pairs`, :func:`exact_profile`): the largest hockey-stick
divergence over every pair of posteriors neighbouring datasets give. It is the least delta, and
far below the theorem's bound on conjugate families.
"""

from __future__ import annotations

import math

import numpy as np
from scipy import special as sc

from pymc_dp import accounting
from pymc_dp.exceptions import PathNotImplementedError

__all__ = [
    "stochastic_guarantee",
    "outside_mass",
    "compose_approximate",
    "hockey_stick",
    "hockey_sticks",
    "exact_profile",
    "neighbour_pairs",
    "finite_family_profile",
]


def stochastic_guarantee(epsilon_truncated: float, eta: float) -> tuple[float, float]:
    """``(eps0 + ln(1/(1 - eta)), eta)``: the guarantee of one untruncated posterior draw.

    Claim. Let ``G`` be a set of parameters such that the posterior of the prior restricted to
    ``G``, ``xi_G(. | x)``, is ``eps0``-DP: ``xi_G(A|x) <= e^{eps0} xi_G(A|y)`` for all
    neighbours ``x, y`` and events ``A``. Let ``eta(x) = xi(G^c | x)`` be the untruncated
    posterior mass of the complement and ``eta* >= sup_x eta(x) < 1``. Then for all
    neighbours and events ``xi(A|x) <= e^{eps0} / (1 - eta*) xi(A|y) + eta*``.

    Proof. ``xi(. | x)`` restricted to ``G`` and renormalised is ``xi_G(. | x)`` (Bayes' rule
    commutes with restriction), so

    * ``xi(A|x) = xi(A & G|x) + xi(A & G^c|x) <= (1 - eta(x)) xi_G(A|x) + eta(x)``;
    * ``xi_G(A|x) <= e^{eps0} xi_G(A|y)`` (the truncated guarantee);
    * ``xi(A|y) >= xi(A & G|y) = (1 - eta(y)) xi_G(A|y)``, so ``xi_G(A|y) <= xi(A|y) / (1 - eta(y))``.

    Chaining, ``xi(A|x) <= e^{eps0} (1 - eta(x)) / (1 - eta(y)) xi(A|y) + eta(x)``
    ``<= e^{eps0} / (1 - eta*) xi(A|y) + eta*``. QED. Nothing about ``G`` but the truncated
    guarantee is used, so any certified truncation region of the truncated mode serves as ``G``.
    The supremum is over every dataset of the public size in the declared domains (not the
    prior mass of ``G^c``, which does not bound ``eta(x)``).
    """
    eps0, eta = float(epsilon_truncated), float(eta)
    if not (math.isfinite(eps0) and eps0 >= 0):
        raise ValueError(f"epsilon_truncated={epsilon_truncated!r} must be finite and >= 0")
    if not 0.0 <= eta <= 1.0:
        raise ValueError(f"eta={eta!r} must be a probability")
    if eta >= 1.0:
        return math.inf, 1.0
    # -log1p(-eta) >= ln(1/(1-eta)) in exact arithmetic; round up by a relative 1e-12
    return (eps0 - math.log1p(-eta)) * (1 + 1e-12), eta


def outside_mass(family: str, params: dict, lower: float, upper: float) -> np.ndarray:
    """Posterior mass outside ``[lower, upper]`` of conjugate posteriors (one per entry).

    ``family`` and ``params`` as :meth:`pymc_dp.exact.ConjugatePlan.posteriors` gives them:
    Beta (``alpha``, ``beta``): ``I_l(a, b) + (1 - I_u(a, b))``; Normal (``mu``, ``sigma``):
    ``Phi((l - m)/s) + Phi((m - u)/s)``; Gamma (``alpha`` shape, ``rate``):
    ``P(a, r l) + Q(a, r u)``; each the exact regularised special function, summed in float64
    (relative error about 1e-15; the caller rounds up).
    """
    lo, hi = float(lower), float(upper)
    if family == "Beta":
        a, b = np.asarray(params["alpha"], float), np.asarray(params["beta"], float)
        return sc.betainc(a, b, max(lo, 0.0)) + sc.betaincc(a, b, min(hi, 1.0))
    if family == "Normal":
        m, s = np.asarray(params["mu"], float), np.asarray(params["sigma"], float)
        return sc.ndtr((lo - m) / s) + sc.ndtr((m - hi) / s)
    if family == "Gamma":
        a, r = np.asarray(params["alpha"], float), np.asarray(params["rate"], float)
        below = sc.gammainc(a, r * max(lo, 0.0))
        above = np.zeros_like(below) if math.isinf(hi) else sc.gammaincc(a, r * hi)
        return below + above
    raise PathNotImplementedError(f"outside_mass: family={family!r} has no closed form here; give a Beta, Normal or Gamma "
                                  "posterior (for other models use the truncated mode, pymc_dp.make_private).")


def compose_approximate(epsilon_per_draw: float, delta_per_draw: float, draws: int, epsilon: float) -> float:
    """The delta of N draws, each ``(eps_d, delta_d)``-DP, at total ``epsilon``.

    ``1 - (1 - delta_d)^N (1 - delta_pure(epsilon))``, where ``delta_pure`` is the optimal
    composition of N pure ``eps_d``-DP mechanisms (:func:`pymc_dp.accounting.optimal_delta`).
    This is the optimal composition theorem for (eps, delta)-DP mechanisms (Kairouz, Oh &
    Viswanath 2015, Thm 3.3; Murtagh & Vadhan 2016, Thm 1.5): an ``(eps_d, delta_d)``-DP
    mechanism is dominated by one that, with probability ``delta_d``, reveals the dataset and
    otherwise runs randomized response with parameter ``eps_d``.
    """
    eps_d, delta_d, n = float(epsilon_per_draw), float(delta_per_draw), int(draws)
    if not math.isfinite(eps_d) or delta_d >= 1.0:
        return 1.0
    pure = accounting.optimal_delta(eps_d, n, float(epsilon))
    return float(min(1.0, -math.expm1(n * math.log1p(-delta_d)) + math.exp(n * math.log1p(-delta_d)) * pure))


def hockey_stick(family: str, px: dict, py: dict, epsilon: float) -> float:
    """Exact ``H_{e^eps}(P || Q) = sup_A P(A) - e^eps Q(A)`` of two scalar conjugate posteriors.

    The supremum is attained at ``A = {g > eps}``, ``g = ln p - ln q`` (Neyman-Pearson). For the
    pairs one record change produces here ``g`` is monotone, so ``A`` is a half-line whose end
    is in closed form:

    * Beta with ``alpha_x + beta_x = alpha_y + beta_y`` (Bernoulli, Binomial):
      ``g = d logit(t) + B(a_y, b_y) - B(a_x, b_x)`` in log space, ``d = a_x - a_y``;
    * Normal with equal ``sigma`` (known observation noise): ``g`` is linear, and
      ``H = Phi(D/2s - eps s/D) - e^eps Phi(-D/2s - eps s/D)``, ``D = |m_x - m_y|``;
    * Gamma with equal ``rate`` (Poisson): ``g = d ln t + lnGamma(a_y) - lnGamma(a_x)``.

    Any other pair raises NotImplementedError (the half-line argument does not hold).
    """
    return float(hockey_sticks(family, px, py, epsilon)[0])


def hockey_sticks(family: str, px: dict, py: dict, epsilon: float) -> np.ndarray:
    """:func:`hockey_stick` of many pairs at once: ``px`` and ``py`` hold arrays of equal length
    (one entry per pair); returns the divergences as an array. Same closed forms."""
    eps = float(epsilon)

    def arr(d, k):
        return np.atleast_1d(np.asarray(d[k], float)).ravel()

    if family == "Normal":
        mx, sx, my, sy = arr(px, "mu"), arr(px, "sigma"), arr(py, "mu"), arr(py, "sigma")
        if not np.allclose(sx, sy, rtol=1e-12, atol=0):
            raise PathNotImplementedError("hockey_stick: the Normal posteriors px and py have unequal sigma; the closed form "
                                          "needs one sigma (a posterior sd that does not depend on the data).")
        D, s = np.abs(mx - my), sx
        with np.errstate(divide="ignore", invalid="ignore"):
            h = sc.ndtr(D / (2 * s) - eps * s / D) - math.exp(eps) * sc.ndtr(-D / (2 * s) - eps * s / D)
        return np.where(D == 0, 0.0, np.maximum(h, 0.0))
    if family == "Beta":
        ax, bx, ay, by = arr(px, "alpha"), arr(px, "beta"), arr(py, "alpha"), arr(py, "beta")
        if not np.allclose(ax + bx, ay + by, rtol=1e-12, atol=1e-12):
            raise PathNotImplementedError("hockey_stick: the Beta posteriors px and py have unequal alpha + beta; the closed "
                                          "form needs one total (neighbouring datasets of one size).")
        d = ax - ay
        c = sc.betaln(ay, by) - sc.betaln(ax, bx)
        with np.errstate(divide="ignore", invalid="ignore"):
            t = sc.expit((eps - c) / d)  # g > eps  <=>  d logit t > eps - c
        p = np.where(d > 0, sc.betaincc(ax, bx, t), sc.betainc(ax, bx, t))
        q = np.where(d > 0, sc.betaincc(ay, by, t), sc.betainc(ay, by, t))
        return np.where(d == 0, 0.0, np.maximum(p - math.exp(eps) * q, 0.0))
    if family == "Gamma":
        ax, rx, ay, ry = arr(px, "alpha"), arr(px, "rate"), arr(py, "alpha"), arr(py, "rate")
        if not np.allclose(rx, ry, rtol=1e-12, atol=0):
            raise PathNotImplementedError("hockey_stick: the Gamma posteriors px and py have unequal rate; the closed form "
                                          "needs one rate (neighbouring datasets of one size).")
        d = ax - ay
        c = sc.gammaln(ay) - sc.gammaln(ax) + d * np.log(rx)
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            t = np.exp((eps - c) / d)
        p = np.where(d > 0, sc.gammaincc(ax, rx * t), sc.gammainc(ax, rx * t))
        q = np.where(d > 0, sc.gammaincc(ay, rx * t), sc.gammainc(ay, rx * t))
        return np.where(d == 0, 0.0, np.maximum(p - math.exp(eps) * q, 0.0))
    raise PathNotImplementedError(f"hockey_stick: family={family!r} has no closed form here; give a Beta, Normal or "
                                  "Gamma posterior.")


def neighbour_pairs(family: str, path: list[dict], n: int, record_range: float) -> tuple[dict, dict]:
    """Every pair of posteriors that two neighbouring datasets can give, as arrays for
    :func:`hockey_sticks` (both orders), where the posterior depends on the data through the
    sum ``s`` only and is affine in it (the mechanism checks both).

    * Beta, Gamma (integer records in ``[lo, hi]``, ``record_range = hi - lo``): ``path[i]`` is
      the posterior of ``s = n lo + i``. One record's change moves ``s`` by any ``d`` with
      ``1 <= |d| <= hi - lo``, and every such pair with both sums in ``[n lo, n hi]`` is realised:
      for ``d > 0`` put one record at ``max(lo, s - (n - 1) hi) <= hi - d`` (true iff
      ``s + d <= n hi``) and spread the rest of ``s`` over the other ``n - 1`` records; ``d < 0``
      by symmetry. So the pairs returned are exactly the realisable ones.
    * Normal (``path`` the two extreme posteriors, equal sigma): the mean is affine in ``s``, so
      neighbours' means differ by at most ``D = |m(n hi) - m(n lo)| / n`` (one record moves ``s``
      by at most ``hi - lo``). For two Normals of equal sigma the divergence depends on ``D`` only
      and is increasing in it (``mu = D / sigma``-GDP: Dong, Roth & Su 2022, the trade-off
      function ``G_mu`` decreases in ``mu``; checked numerically in the tests), so the one pair
      at the largest ``D`` gives the supremum.
    """
    if family == "Normal":
        lo, hi = path
        D = abs(float(np.ravel(hi["mu"])[0]) - float(np.ravel(lo["mu"])[0])) / int(n)
        m, sig = float(np.ravel(lo["mu"])[0]), float(np.ravel(lo["sigma"])[0])
        return {"mu": np.array([m]), "sigma": np.array([sig])}, {"mu": np.array([m + D]), "sigma": np.array([sig])}
    r = int(round(record_range))
    keys = list(path[0])
    cols = {k: np.array([float(np.ravel(p[k])[0]) for p in path]) for k in keys}
    i = np.concatenate([np.arange(len(path) - d) for d in range(1, r + 1)]) if r >= 1 else np.zeros(0, int)
    j = np.concatenate([np.arange(d, len(path)) for d in range(1, r + 1)]) if r >= 1 else np.zeros(0, int)
    a, b = np.concatenate([i, j]), np.concatenate([j, i])
    return {k: v[a] for k, v in cols.items()}, {k: v[b] for k, v in cols.items()}


def exact_profile(family: str, pairs: tuple[dict, dict], epsilon: float) -> float:
    """``delta(eps)`` of one draw: the largest exact hockey-stick divergence over ``pairs``
    (:func:`neighbour_pairs`: every pair neighbouring datasets can give), i.e. the smallest
    ``delta`` for which one untruncated draw is ``(eps, delta)``-DP. Exact up to float rounding
    (the caller rounds up)."""
    h = hockey_sticks(family, pairs[0], pairs[1], epsilon)
    return float(np.max(h)) if h.size else 0.0


def finite_family_profile(log_lik: np.ndarray, log_prior: np.ndarray, good: np.ndarray, counts) -> dict:
    """Exact check of :func:`stochastic_guarantee` on a finite parameter set (JMLR Example 1).

    ``log_lik[j, v]`` is ``ln p_{theta_j}(v)`` for a record value ``v``; ``log_prior[j]`` the
    prior; ``good`` a boolean mask (the set ``G``); ``counts`` every dataset as a vector of how
    many records take each value (all of one size). Returns the truncated ``eps0`` (exact: the
    largest log-ratio of the posteriors restricted to ``G`` over every neighbouring pair),
    ``eta_star`` (the largest posterior mass of ``G^c``), ``prior_mass`` (of ``G^c``), and a
    function ``delta(eps)``: the exact largest hockey-stick divergence over neighbouring pairs
    (one record changed from value ``u`` to ``v``) of the untruncated posteriors.
    """
    log_lik, log_prior, good = np.asarray(log_lik, float), np.asarray(log_prior, float), np.asarray(good, bool)
    counts = [np.asarray(c, int) for c in counts]
    index = {tuple(c): i for i, c in enumerate(counts)}
    post = np.array([log_prior + log_lik @ c for c in counts])
    post = post - sc.logsumexp(post, axis=1, keepdims=True)
    pg = np.where(good, post, -np.inf)
    pg = pg - sc.logsumexp(pg, axis=1, keepdims=True)
    pairs = []
    for i, c in enumerate(counts):
        for u in np.flatnonzero(c):
            for v in range(len(c)):
                if v != u:
                    e = c.copy()
                    e[u] -= 1
                    e[v] += 1
                    if tuple(e) in index:
                        pairs.append((i, index[tuple(e)]))
    eps0 = max(float(np.max(np.abs(pg[i, good] - pg[j, good]))) for i, j in pairs)
    eta = np.exp(sc.logsumexp(np.where(good, -np.inf, post), axis=1))

    def delta(eps: float) -> float:
        px, py = np.exp(post[[i for i, _ in pairs]]), np.exp(post[[j for _, j in pairs]])
        return float(np.max(np.sum(np.maximum(px - math.exp(eps) * py, 0.0), axis=1)))

    prior = np.exp(log_prior - sc.logsumexp(log_prior))
    return {"eps0": eps0, "eta_star": float(np.max(eta)), "prior_mass": float(prior[~good].sum()), "delta": delta}
