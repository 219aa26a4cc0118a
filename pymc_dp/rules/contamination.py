"""The certified oscillation of a Huber-contaminated location likelihood.

A factor contaminated at rate ``p`` by a public density ``g`` (:func:`pymc_dp.contaminate`) has
the per-record log-likelihood

.. math:: \\ell_\\mu(x) = \\ln\\big((1 - p)\\, f_\\mu(x) + p\\, g(x)\\big),
          \\qquad f_\\mu(x) = \\phi((x - \\mu) / \\sigma) / \\sigma,

with ``sigma`` a public number and ``mu`` the free location, truncated to ``Theta = [a, b]``.
By the oscillation theorem (``docs/theory/oscillation.md``) one draw is ``eps0``-DP with

.. math:: \\varepsilon_0 = \\sup_{x, x'} \\operatorname{osc}_{\\mu \\in \\Theta}
          [\\ell_\\mu(x) - \\ell_\\mu(x')]
          = \\sup_{\\mu, \\nu \\in \\Theta} F(\\mu, \\nu), \\qquad
          F(\\mu, \\nu) = \\sup_x h_{\\mu\\nu}(x) + \\sup_{x'} h_{\\nu\\mu}(x'),

``h_{mu nu} = ell_mu - ell_nu``: the sup over the record pair separates into two sups over one
record each (exact, no inequality). ``F`` is computed with certified upper bounds
(``docs/theory/contamination.md``):

* **inner sup over x** -- branch and bound on cells of the data domain with the local Lipschitz
  constant ``|d ell_mu / dx| <= max(|x - mu| / sigma^2, |(ln g)'(x)|)`` (``d ell / dx`` is a convex
  combination of the two scores); beyond ``|x| >= X`` the bound
  ``h_{mu nu}(x) <= ln(1 + rho_mu(x))``, ``rho_mu = (1 - p) f_mu / (p g)``, with ``X`` chosen
  where ``rho`` is proved decreasing and below ``1e-15``;
* **outer sup over (mu, nu)** -- branch and bound on boxes of ``Theta^2`` with the Lipschitz
  constant ``2 S`` per coordinate, ``S >= sup_{mu, x} |d ell_mu(x) / d mu|``
  (:meth:`ContaminatedNormal.score_bound`).

The search's fast path (:meth:`ContaminatedNormal.corner_oscillations`) evaluates ``F(b, a)`` on a
grid; the certificate is :meth:`ContaminatedNormal.certified_oscillation` alone.

It is finite on an unbounded data domain exactly when ``g`` has heavier tails than ``f`` (then
``rho -> 0`` and ``h -> 0`` in both tails) and ``Theta`` is bounded: both are refused otherwise
(:func:`contaminant_of`, :meth:`ContaminatedNormal.check_finite`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy import special

from pymc_dp.exceptions import BudgetExceededError, UnsupportedFactorError

__all__ = ["Contaminant", "ContaminatedNormal", "CONTAMINANTS", "contaminant_of"]

#: families ``g`` may have (a symmetric, unimodal density with full support)
CONTAMINANTS = ("StudentT", "Cauchy", "Laplace", "Normal")
_LOG_SQRT_2PI = 0.5 * math.log(2.0 * math.pi)
#: the tail beyond X contributes at most ln(1 + this) to a sup over x
_TAIL_RATIO = 1e-15
#: the inner branch and bound stops refining beyond this many cells (its bound stays valid)
_MAX_CELLS = 100_000


@dataclass(frozen=True)
class Contaminant:
    """A public contamination density ``g``: ``family`` with location ``loc`` and scale ``scale``
    (``nu`` the Student-t degrees of freedom; Cauchy is ``nu = 1``)."""

    family: str
    loc: float
    scale: float
    nu: float = math.nan

    def __post_init__(self):
        if self.family not in CONTAMINANTS:
            raise UnsupportedFactorError(f"contamination density {self.family!r}: use one of {list(CONTAMINANTS)}.")
        if not (math.isfinite(self.loc) and math.isfinite(self.scale) and self.scale > 0):
            raise UnsupportedFactorError(
                f"contamination density {self.family}: loc={self.loc} and scale={self.scale} must be finite numbers "
                "with scale > 0.")
        if self.family == "StudentT" and not (math.isfinite(self.nu) and self.nu > 0):
            raise UnsupportedFactorError(f"contamination density StudentT: nu={self.nu} must be a finite number > 0.")

    @property
    def _nu(self) -> float:
        return 1.0 if self.family == "Cauchy" else self.nu

    def log_at_distance(self, d):
        """``ln g`` at distance ``d >= 0`` from its centre (``g`` is symmetric and unimodal)."""
        z = np.asarray(d, float) / self.scale
        s = math.log(self.scale)
        if self.family in ("StudentT", "Cauchy"):
            nu = self._nu
            c = special.gammaln((nu + 1) / 2) - special.gammaln(nu / 2) - 0.5 * math.log(nu * math.pi) - s
            return c - (nu + 1) / 2 * np.log1p(z * z / nu)
        if self.family == "Laplace":
            return -math.log(2.0) - s - np.abs(z)
        return -_LOG_SQRT_2PI - s - 0.5 * z * z

    def logpdf(self, x):
        """``ln g(x)``."""
        return self.log_at_distance(np.abs(np.asarray(x, float) - self.loc))

    def score_bound(self, d_max):
        """An upper bound on ``|(ln g)'|`` at points within distance ``d_max`` of the centre."""
        if self.family in ("StudentT", "Cauchy"):
            nu = self._nu  # |(nu+1) z / (nu s^2 + z^2)| <= (nu + 1) / (2 s sqrt(nu))
            return np.full_like(np.asarray(d_max, float), (nu + 1) / (2 * self.scale * math.sqrt(nu)))
        if self.family == "Laplace":
            return np.full_like(np.asarray(d_max, float), 1.0 / self.scale)
        return np.asarray(d_max, float) / self.scale**2

    def sample(self, size: int, rng: np.random.Generator) -> np.ndarray:
        """``size`` independent draws of ``g`` (run-time contamination, :func:`pymc_dp.contamination.apply`)."""
        if self.family in ("StudentT", "Cauchy"):
            return self.loc + self.scale * rng.standard_t(self._nu, size)
        if self.family == "Laplace":
            return rng.laplace(self.loc, self.scale, size)
        return rng.normal(self.loc, self.scale, size)

    def heavier_than_normal(self, sigma: float) -> bool:
        """Whether ``g`` has strictly heavier tails than ``Normal(., sigma)``: ``f / g -> 0``."""
        return self.family != "Normal" or self.scale > sigma

    def describe(self) -> str:
        if self.family == "StudentT":
            return f"StudentT(nu={self.nu:g}, mu={self.loc:g}, sigma={self.scale:g})"
        name = {"Cauchy": "beta", "Laplace": "b", "Normal": "sigma"}[self.family]
        return f"{self.family}({'alpha' if self.family == 'Cauchy' else 'mu'}={self.loc:g}, {name}={self.scale:g})"

    def to_dict(self) -> dict:
        out = {"family": self.family, "loc": self.loc, "scale": self.scale}
        if self.family == "StudentT":
            out["nu"] = self.nu
        return out


def contaminant_of(family: str, params: dict[str, float]) -> Contaminant:
    """The :class:`Contaminant` of a PyMC family name and its parameters (public numbers)."""
    if family == "StudentT":
        return Contaminant("StudentT", float(params["mu"]), float(params["sigma"]), float(params["nu"]))
    if family == "Cauchy":
        return Contaminant("Cauchy", float(params["alpha"]), float(params["beta"]))
    if family == "Laplace":
        return Contaminant("Laplace", float(params["mu"]), float(params["b"]))
    if family == "Normal":
        return Contaminant("Normal", float(params["mu"]), float(params["sigma"]))
    raise UnsupportedFactorError(
        f"contamination density {family}: the certified oscillation is derived for {list(CONTAMINANTS)} only.")


@dataclass(frozen=True)
class ContaminatedNormal:
    """``ell_mu(x) = ln((1 - p) N(x | mu, sigma) + p g(x))`` on the data domain ``[lo, hi]``
    (either end may be infinite), ``mu`` free, ``sigma`` and ``g`` public."""

    p: float
    sigma: float
    g: Contaminant
    lo: float = -math.inf
    hi: float = math.inf

    def __post_init__(self):
        if not 0.0 < self.p < 1.0:
            raise UnsupportedFactorError(f"the contamination rate p={self.p} must lie in (0, 1).")
        if not (math.isfinite(self.sigma) and self.sigma > 0):
            raise UnsupportedFactorError(f"the Normal scale sigma={self.sigma} must be a finite number > 0.")

    # ------------------------------------------------------------------ densities
    def loglik(self, mu, x):
        """``ell_mu(x)`` (broadcast)."""
        mu, x = np.asarray(mu, float), np.asarray(x, float)
        z = (x - mu) / self.sigma
        a = math.log1p(-self.p) - _LOG_SQRT_2PI - math.log(self.sigma) - 0.5 * z * z
        return np.logaddexp(a, math.log(self.p) + self.g.logpdf(x))

    def log_rho(self, mu, x):
        """``ln[(1 - p) f_mu(x) / (p g(x))]``."""
        z = (np.asarray(x, float) - np.asarray(mu, float)) / self.sigma
        return (math.log1p(-self.p) - math.log(self.p) - _LOG_SQRT_2PI - math.log(self.sigma) - 0.5 * z * z
                - self.g.logpdf(x))

    def check_finite(self, what: str, a: float, b: float) -> None:
        """Refuse (BudgetExceededError naming ``what``) where the oscillation is infinite."""
        unbounded = not (math.isfinite(self.lo) and math.isfinite(self.hi))
        if not (math.isfinite(a) and math.isfinite(b)):
            raise BudgetExceededError(
                f"{what}: the location's region [{a:g}, {b:g}] is unbounded, so the contaminated likelihood's "
                "oscillation is infinite (a record far out moves the posterior without limit). Truncate the "
                "location to a bounded interval (epsilon= lets pymc_dp choose one, or bounds={name: (lo, hi)})."
            )
        if unbounded and not self.g.heavier_than_normal(self.sigma):
            raise BudgetExceededError(
                f"{what}: the contamination density {self.g.describe()} is not heavier-tailed than the "
                f"Normal likelihood (sigma={self.sigma:g}), so on an unbounded data domain the oscillation is "
                "infinite. Use a heavier-tailed g (StudentT, Cauchy, Laplace, or a Normal with a larger scale), "
                "or declare a bounded domain."
            )

    # ------------------------------------------------------------------ tail and Lipschitz bounds
    def tail_start(self, m: float) -> float:
        """``X >= 0`` such that for every ``|mu| <= m`` and ``|x| >= X`` (inside the domain) the ratio
        ``rho_mu(x)`` is decreasing in ``|x|`` and below ``1e-15``; ``inf`` when none exists."""
        c = abs(self.g.loc)
        X = m + c + 10.0 * self.sigma
        for _ in range(60):
            # d/d|x| ln rho <= -(|x| - m) / sigma^2 + |(ln g)'| (a bound valid for all larger |x|:
            # Student-t and Laplace scores are bounded; a Normal g's grows as (|x| + c) / tau^2 with
            # tau > sigma, slower than the first term)
            slope = -(X - m) / self.sigma**2 + float(self.g.score_bound(X + c))
            ratio = max(float(self.log_rho(s * m, s * X)) for s in (-1.0, 1.0))
            ratio = max(ratio, float(self.log_rho(m, -X)), float(self.log_rho(-m, X)))
            if slope < 0 and ratio < math.log(_TAIL_RATIO):
                return X
            X *= 1.5
        return math.inf

    def _cell_lipschitz(self, mu, x1, x2):
        """A bound on ``|d ell_mu / dx|`` over ``[x1, x2]``."""
        far = np.maximum(np.abs(x1 - mu), np.abs(x2 - mu)) / self.sigma**2
        gfar = self.g.score_bound(np.maximum(np.abs(x1 - self.g.loc), np.abs(x2 - self.g.loc)))
        return np.maximum(far, gfar)

    def sup_gap(self, mu: float, nu: float, tol: float = 1e-5, X: float | None = None) -> tuple[float, float]:
        """``(lower, upper)`` bounds on ``sup_x [ell_mu(x) - ell_nu(x)]`` over the domain (certified
        upper: branch and bound with the cell Lipschitz constants, plus the tail bound)."""
        if mu == nu:
            return 0.0, 0.0
        if X is None:
            X = self.tail_start(max(abs(mu), abs(nu)))
        left, right = max(self.lo, -X), min(self.hi, X)
        tail = 0.0
        if left > self.lo or right < self.hi:
            tail = math.log1p(_TAIL_RATIO)
        edges = np.linspace(left, right, 257)
        x1, x2 = edges[:-1], edges[1:]

        def h(x):
            return self.loglik(mu, x) - self.loglik(nu, x)

        h1, h2 = h(x1), h(x2)
        best = float(max(h1.max(), h2.max()))
        for _ in range(40):
            lip = self._cell_lipschitz(mu, x1, x2) + self._cell_lipschitz(nu, x1, x2)
            ub = 0.5 * (h1 + h2 + lip * (x2 - x1)) + 1e-12 * (1.0 + np.abs(h1) + np.abs(h2))
            top = float(ub.max())
            if top - best <= tol:
                break
            keep = ub > best + tol
            if 8 * int(keep.sum()) > _MAX_CELLS:  # h nearly flat (mu close to nu): keep the valid bound
                break
            x1, x2 = x1[keep], x2[keep]
            pts = x1[:, None] + (x2 - x1)[:, None] * np.linspace(0.0, 1.0, 9)[None, :]
            x1, x2 = pts[:, :-1].reshape(-1), pts[:, 1:].reshape(-1)
            hp = h(pts)
            h1, h2 = hp[:, :-1].reshape(-1), hp[:, 1:].reshape(-1)
            best = max(best, float(hp.max()))
        return best, max(top, best, tail)

    def score_bound(self, a: float, b: float) -> float:
        """``S >= sup_{mu in [a, b], x} |d ell_mu(x) / d mu|`` (``= w (x - mu) / sigma^2``, ``w`` the
        clean component's weight): ``|u| / sigma^2`` for ``|u| = |x - mu| <= U``, and
        ``|u| rho / sigma^2``, decreasing, beyond (``g`` at distance ``<= |u| + m`` from its centre)."""
        m = max(abs(a - self.g.loc), abs(b - self.g.loc))
        s2 = self.sigma**2

        def bound(t):  # ln(t rho) with g at distance t + m: an upper bound on ln(|u| rho) at |u| = t
            return (math.log(t) + math.log1p(-self.p) - math.log(self.p) - _LOG_SQRT_2PI - math.log(self.sigma)
                    - 0.5 * t * t / s2 - float(self.g.log_at_distance(t + m)))

        U = self.sigma
        for _ in range(200):
            decreasing = 1.0 / U - U / s2 + float(self.g.score_bound(U + m)) < 0
            if decreasing and bound(U) <= math.log(U):
                return U / s2
            U *= 1.25
        return math.inf

    # ------------------------------------------------------------------ the oscillation
    def corner_oscillations(self, a, b) -> np.ndarray:
        """``F(b, a)`` for many intervals at once, on a grid (the search's fast path: not a bound)."""
        a, b = np.asarray(a, float).reshape(-1), np.asarray(b, float).reshape(-1)
        out = np.full(a.size, math.inf)
        ok = np.isfinite(a) & np.isfinite(b)
        if not ok.any():
            return out
        m = float(np.max(np.abs(np.concatenate([a[ok], b[ok]]))))
        X = self.tail_start(m)
        if not math.isfinite(X):
            return out
        # a global grid, and local grids about each interval's ends (where h peaks: within a few
        # sigma of the locations), so that a wide interval's grid is not too coarse to see its peak
        glob = np.linspace(max(self.lo, -X), min(self.hi, X), 1201)
        aa, bb = a[ok][:, None], b[ok][:, None]
        local = np.linspace(-15.0, 15.0, 301)[None, :] * self.sigma
        x = np.clip(np.concatenate([np.broadcast_to(glob, (aa.shape[0], glob.size)), aa + local, bb + local], axis=1),
                    max(self.lo, -X), min(self.hi, X))
        step = min(glob[1] - glob[0], local[0, 1] - local[0, 0])
        total = np.zeros(aa.shape[0])
        for mu, nu in ((bb, aa), (aa, bb)):
            h = self.loglik(mu, x) - self.loglik(nu, x)
            k = np.argmax(h, axis=1)
            fine = x[np.arange(x.shape[0]), k][:, None] + step * np.linspace(-1.0, 1.0, 41)[None, :]
            fine = np.clip(fine, glob[0], glob[-1])
            hf = self.loglik(mu, fine) - self.loglik(nu, fine)
            total += np.maximum(hf.max(axis=1), h.max(axis=1))
        out[ok] = np.where(b[ok] > a[ok], total, 0.0)
        return out

    def certified_oscillation(self, a: float, b: float, rtol: float = 1e-3) -> tuple[float, float]:
        """``(upper, lower)``: a certified upper bound on ``sup_{mu, nu in [a, b]} F(mu, nu)`` and the
        largest value found (attained up to the inner bounds' tolerance). Branch and bound on boxes of
        ``[a, b]^2`` with ``|F(mu, nu) - F(mu', nu')| <= 2 S (|mu - mu'| + |nu - nu'|)``."""
        if not (math.isfinite(a) and math.isfinite(b)):
            return math.inf, math.inf
        if not b > a:
            return 0.0, 0.0
        S = self.score_bound(a, b)
        X = self.tail_start(max(abs(a), abs(b)))
        if not (math.isfinite(S) and math.isfinite(X)):
            return math.inf, math.inf

        def F(mu, nu):
            l1, u1 = self.sup_gap(mu, nu, X=X)
            l2, u2 = self.sup_gap(nu, mu, X=X)
            return l1 + l2, u1 + u2

        lower, _ = F(b, a)
        # boxes (mu centre, nu centre, half width) with mu >= nu (F is symmetric); every pair of the
        # triangle lies in a box, and a box's F is at most F(centre) + 2 S (2 w)
        n0 = 4
        hw = 0.5 * (b - a) / n0
        centres = a + hw * (2 * np.arange(n0) + 1)
        boxes = [(m_, n_, hw) for m_ in centres for n_ in centres if m_ >= n_]
        pruned = -math.inf  # the largest bound of a box dropped (each below the lower bound then)
        top = math.inf
        for _ in range(60):
            scored = []
            for mu, nu, w in boxes:
                lo_, up_ = F(mu, nu)
                lower = max(lower, lo_)
                scored.append((up_ + 4.0 * S * w, mu, nu, w))
            tol = rtol * max(1.0, lower)
            top = max(s[0] for s in scored)
            if top - lower <= tol or len(boxes) > 4096:  # resolved (or too slow to: still a valid bound)
                return max(top, pruned), lower
            live = [s for s in scored if s[0] > lower + tol]
            pruned = max([pruned] + [s[0] for s in scored if s[0] <= lower + tol])
            boxes = []
            for _, mu, nu, w in live:
                h = 0.5 * w
                boxes.extend((mu + dm, nu + dn, h) for dm in (-h, h) for dn in (-h, h) if mu + dm >= nu + dn - 1e-15)
        return max(top, pruned), lower
