"""The oscillation of a Student-t (or Cauchy) location with a public scale: a closed form for two
locations, and a sound table of its supremum over intervals.

Why (``docs/theory/oscillation.md``, "The Student-t and Cauchy locations"). With
``psi(u) = -(nu + 1)/2 ln(1 + u^2 / nu)`` the per-record log-density is ``psi((x - mu) / s)`` up
to a constant, and the oscillation over a region ``Theta`` of ``g(mu) = ln p(x | mu) - ln p(x' |
mu)``, maximised over the records ``x, x'`` of the domain ``[a, b]``, is

.. math:: \\varepsilon_0 = \\sup_{\\mu_1, \\mu_2 \\in \\Theta} R(\\mu_1, \\mu_2), \\qquad
          R(\\mu_1, \\mu_2) = \\operatorname{range}_{x \\in [a, b]}
          \\big[\\psi((x - \\mu_1)/s) - \\psi((x - \\mu_2)/s)\\big]

(``g(mu_1) - g(mu_2) = h(x) - h(x')`` with ``h`` the bracket; the sup over ``x, x'`` is the range).

**R in closed form.** With ``u = (x - mu_1)/s`` and ``delta = (mu_2 - mu_1)/s`` the bracket is
``k(u) = psi(u) - psi(u - delta)``, and ``k'(u) = 0`` iff ``psi'(u) = psi'(u - delta)``, i.e.
(``psi'(u) = -(nu + 1) u / (nu + u^2)``; clearing denominators leaves
``-delta (u^2 - delta u - nu) = 0``) ``u = delta/2 +- sqrt(delta^2/4 + nu)``. So the range of
``k`` over ``[A, B] = [(a - mu_1)/s, (b - mu_1)/s]`` is attained among ``A``, ``B`` and these
two points where they lie inside: four evaluations, exact (:meth:`StudentTLocation.pair_range`).

**The supremum over an interval, soundly.** ``R`` moves little with the locations: for any
``x, y`` in the domain,

.. math:: \\big|\\partial_{\\mu_1}\\big[h(x) - h(y)\\big]\\big| = \\big|\\psi'(u_x) - \\psi'(u_y)\\big| / s
          \\le \\operatorname{osc}_{u \\in [(a - \\mu_1)/s,\\ (b - \\mu_1)/s]} \\psi'(u) / s
          =: \\Lambda(\\mu_1),

and ``|R(mu) - R(mu')| <= sup_{x, y} |(h(x) - h(y))(mu) - (h(x) - h(y))(mu')|``, so over a cell
``[p_1, q_1] x [p_2, q_2]`` ``R <= R(m_1, m_2) + V_1 + V_2``, with ``m`` the midpoints and ``V_i``
the larger of the integrals of ``Lambda`` over the two halves of the cell's side. On a finite
piece ``V <= width x Lambda``'s sup, which is ``osc psi'`` over the union of the ``u`` ranges
(``psi'`` is odd with extremes at ``u = -+sqrt(nu)`` and monotone between them: its range is read
off the ends and those two points). On the two unbounded pieces beyond
``a - s sqrt(nu)`` and ``b + s sqrt(nu)`` every ``u`` lies where ``psi'`` is monotone, and the
integral is exact: ``int_{-inf}^{g} Lambda = psi((a - g)/s) - psi((b - g)/s)`` (and its mirror),
the range of ``psi`` over the domain seen from ``g`` (it vanishes as ``g`` goes to infinity).

The table. Cells of the real line are cut where the integral of ``Lambda`` reaches equal steps,
so every cell moves ``R`` by about the same small amount; the bound ``C(p, q)`` above is computed
for every pair of cells, and ``U(i, j) = max_{i <= p <= q <= j} C(p, q)`` by one pass over the
diagonals. The oscillation over ``[lo, hi]`` is then at most ``U`` of the cells holding ``lo``
and ``hi``: a sound upper bound, monotone in the interval, read in constant time (the solver's
search calls it for thousands of intervals). ``tests/rules/test_studentt_location.py`` checks
it against brute force over records and locations.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

__all__ = ["StudentTLocation"]

#: the cells of the table (per axis); each cell moves R by about 1 / CELLS of R's total variation
CELLS = 1600
#: candidate cut points for the equal-variation cells: at least this many near the domain, and
#: at most the second figure (so that each cell holds several unless the scale is tiny against
#: the domain, where the cells are coarser and the bound looser, never unsound)
_CANDIDATES, _MAX_CANDIDATES = 40_000, 2_000_000
#: the table's finite grid reaches this many (half-domain + scale) units beyond the domain: the
#: unbounded end cells then move R by about 1e-9
_REACH = 1e9
#: relative and absolute float margins on every evaluated R (a few ulps of the log terms summed)
_REL_MARGIN, _ABS_MARGIN = 1e-12, 1e-12


@dataclass(frozen=True)
class StudentTLocation:
    """The location ``mu`` of a StudentT(nu, mu, s) (Cauchy: ``nu = 1``) with public ``nu`` and
    ``s`` on the bounded data domain ``[a, b]`` (module docstring for the derivation)."""

    a: float
    b: float
    nu: float
    scale: float

    # ------------------------------------------------------------------ the closed forms
    def _log_ratio(self, u, v):
        """``psi(u) - psi(v) = (nu + 1)/2 ln[(nu + v^2) / (nu + u^2)]`` (accurate as a ratio)."""
        return 0.5 * (self.nu + 1.0) * np.log((self.nu + np.square(v)) / (self.nu + np.square(u)))

    def _slope(self, u):
        """``psi'(u) = -(nu + 1) u / (nu + u^2)``."""
        return -(self.nu + 1.0) * u / (self.nu + np.square(u))

    def _slope_spread(self, lo_u, hi_u):
        """``max - min`` of ``psi'`` over ``[lo_u, hi_u]`` (elementwise): the ends and ``-+sqrt(nu)``."""
        r = math.sqrt(self.nu)
        with np.errstate(invalid="ignore"):  # psi'(+-inf) is its limit, 0
            values = [np.where(np.isinf(u), 0.0, self._slope(u)) for u in (lo_u, hi_u)]
        for c in (-r, r):
            values.append(np.where((lo_u <= c) & (c <= hi_u), self._slope(np.full_like(lo_u, c)), np.nan))
        stack = np.stack(values)
        with np.errstate(invalid="ignore"):
            spread = np.fmax.reduce(stack, axis=0) - np.fmin.reduce(stack, axis=0)  # the absent turning points: NaN
        # an unknown end (NaN) leaves the spread unknown: fail closed
        return np.where(np.isnan(lo_u) | np.isnan(hi_u), np.inf, spread)

    def pair_range(self, mu1, mu2) -> np.ndarray:
        """``R(mu1, mu2)``: the range over ``x in [a, b]`` of ``psi((x - mu1)/s) - psi((x - mu2)/s)``
        (broadcast; exact: the ends and the two critical points), raised by a float margin."""
        mu1, mu2 = np.broadcast_arrays(np.asarray(mu1, float), np.asarray(mu2, float))
        s = self.scale
        lo_u, hi_u, delta = (self.a - mu1) / s, (self.b - mu1) / s, (mu2 - mu1) / s
        root = np.sqrt(0.25 * np.square(delta) + self.nu)
        candidates = [lo_u, hi_u]
        for c in (0.5 * delta - root, 0.5 * delta + root):
            candidates.append(np.clip(c, lo_u, hi_u))  # a critical point outside: an end again
        k = np.stack([self._log_ratio(u, u - delta) for u in candidates])
        top, bottom = k.max(axis=0), k.min(axis=0)
        # each term is the log of a ratio: its float error is a few ulps of 1 + |term|
        return top - bottom + _REL_MARGIN * (1.0 + np.abs(k).max(axis=0)) + _ABS_MARGIN

    def _variation(self, p, q):
        """An upper bound on ``int_p^q Lambda`` for ``p <= q`` (elementwise; either may be
        infinite). Beyond ``a - s sqrt(nu)`` and ``b + s sqrt(nu)`` every ``u`` lies where ``psi'``
        is monotone and the integral is exact (``F(q) - F(p)`` with ``F(t) = psi((a - t)/s) -
        psi((b - t)/s)`` on the left, its mirror on the right); between them, the width times the
        spread of ``psi'`` over every ``u`` the piece reaches."""
        p, q = np.broadcast_arrays(np.asarray(p, float), np.asarray(q, float))
        s, r = self.scale, math.sqrt(self.nu)
        left, right = self.a - s * r, self.b + s * r

        def outer(t, a_end, b_end):  # psi((a_end - t)/s) - psi((b_end - t)/s); 0 at infinity
            with np.errstate(invalid="ignore"):
                value = self._log_ratio((a_end - t) / s, (b_end - t) / s)
            return np.where(np.isinf(t), 0.0, value)

        lq, lp = np.minimum(q, left), np.minimum(p, left)
        on_left = np.where(lq > lp, outer(lq, self.a, self.b) - outer(lp, self.a, self.b), 0.0)
        rp, rq = np.maximum(p, right), np.maximum(q, right)
        on_right = np.where(rq > rp, outer(rp, self.b, self.a) - outer(rq, self.b, self.a), 0.0)
        mp, mq = np.clip(p, left, right), np.clip(q, left, right)
        with np.errstate(invalid="ignore"):
            middle = (mq - mp) / s * self._slope_spread((self.a - mq) / s, (self.b - mp) / s)
        total = np.abs(on_left) + np.abs(on_right) + np.where(mq > mp, middle, 0.0)
        return total * (1.0 + 1e-9) + _ABS_MARGIN

    # ------------------------------------------------------------------ the table
    def _grid(self) -> np.ndarray:
        """Finite cut points with about equal variation of ``R`` between neighbours."""
        s, r = self.scale, math.sqrt(self.nu)
        unit = 0.5 * (self.b - self.a) + s * (1.0 + r)
        left, right = self.a - s * r, self.b + s * r
        width = right - left + 80.0 * unit
        count = int(min(_MAX_CANDIDATES, max(_CANDIDATES, 200.0 * width / s)))
        near = np.linspace(left - 40.0 * unit, right + 40.0 * unit, count)
        far = np.geomspace(40.0 * unit, _REACH * unit, 2000)
        t = np.concatenate([left - far[::-1], near, right + far])
        pieces = self._variation(t[:-1], t[1:])
        steps = np.concatenate([[0.0], np.cumsum(pieces)])
        targets = np.linspace(0.0, steps[-1], CELLS - 1)
        cut = np.unique(np.searchsorted(steps, targets).clip(0, t.size - 1))
        return t[cut]

    def _build(self) -> tuple[np.ndarray, np.ndarray]:
        """``(cuts, U)``: the finite cut points and the range-maximum table of the cell bounds."""
        g = self._grid()
        n = g.size + 1  # cells: (-inf, g0], [g0, g1], ..., [g_last, inf)
        mids = np.concatenate([[g[0]], 0.5 * (g[:-1] + g[1:]), [g[-1]]])
        half = np.empty(n)
        half[1:-1] = np.maximum(self._variation(g[:-1], mids[1:-1]), self._variation(mids[1:-1], g[1:]))
        half[0], half[-1] = self._variation(-np.inf, g[0]), self._variation(g[-1], np.inf)
        bound = np.empty((n, n))
        for i in range(n):  # row by row: bounded memory
            bound[i] = self.pair_range(mids[i], mids) + half[i] + half
        upper = np.full((n, n), -np.inf)
        idx = np.arange(n)
        upper[idx, idx] = bound[idx, idx]
        for d in range(1, n):  # U(i, i + d) = max(C(i, i + d), U(i + 1, i + d), U(i, i + d - 1))
            i = idx[: n - d]
            upper[i, i + d] = np.maximum(bound[i, i + d], np.maximum(upper[i + 1, i + d], upper[i, i + d - 1]))
        return g, upper

    def oscillation(self, lo, hi) -> np.ndarray:
        """A certified upper bound on ``sup`` over record pairs of the oscillation over locations in
        ``[lo, hi]`` (elementwise, broadcast; ends may be infinite): the table's ``U`` of the cells
        holding ``lo`` and ``hi``, 0 where ``lo == hi``."""
        lo, hi = np.broadcast_arrays(np.asarray(lo, float), np.asarray(hi, float))
        cuts, upper = _table(self)
        # the cell holding a value: cell c spans [cuts[c - 1], cuts[c]] (a cut belongs to both; take
        # the wider reach, i.e. the lower cell for lo and the upper cell for hi)
        i = np.searchsorted(cuts, lo, side="left")
        j = np.searchsorted(cuts, hi, side="right")
        value = upper[np.minimum(i, j), np.maximum(i, j)]
        value = np.where(hi > lo, value, 0.0)
        return np.where(np.isnan(lo) | np.isnan(hi), np.inf, value)


@lru_cache(maxsize=8)
def _table(location: StudentTLocation) -> tuple[np.ndarray, np.ndarray]:
    """The table of one location's public numbers (about 20 MB, 0.3 s), shared by every factor
    with the same ``a, b, nu, scale``."""
    return location._build()
