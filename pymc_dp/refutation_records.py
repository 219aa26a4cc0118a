"""The public records the refutation check (:mod:`pymc_dp.refutation`) probes: rows of each
declared domain, and the tuples of rows (one per private container) that make a record.

Everything here reads the declared domains and a public seed only, never a data value
(docs/theory/refutation.md, "Records").
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from pymc_dp.domains import Ball, Box, Integers, Interval

__all__ = ["candidate_rows", "corner_combos"]


def candidate_rows(domain, row_shape: tuple, count: int, rng) -> np.ndarray | None:
    """Rows of a domain: its corners first (all lower, all upper, alternating, random), then
    random points; for a ball, the axis points ``+-r e_i`` and points on the sphere. None for a
    domain this check does not know."""
    shape = (count,) + tuple(row_shape)
    if isinstance(domain, Ball):
        d = row_shape[-1] if row_shape else 1
        rows = []
        for i in rng.permutation(d)[: max(count // 2, 1)]:
            e = np.zeros(row_shape)
            e[..., i] = domain.radius * (1 if len(rows) % 2 == 0 else -1)
            rows.append(e)
        while len(rows) < count:
            g = rng.normal(size=row_shape)
            norm = np.sqrt(np.sum(g**2, axis=-1, keepdims=True))
            rows.append(domain.radius * g / np.where(norm > 0, norm, 1.0) * (1.0 if len(rows) % 3 else 0.5))
        return np.stack(rows[:count])
    if isinstance(domain, Box):
        lo = np.broadcast_to(domain.lo, row_shape)
        hi = np.broadcast_to(domain.hi, row_shape)
        integer = False
    elif isinstance(domain, Integers):
        if not row_shape and domain.hi - domain.lo < max(2 * count, 16):  # a few labels or counts: all of them
            ends = np.unique([float(domain.lo), float(domain.hi)])  # both ends first, as below
            return np.concatenate([ends, np.arange(domain.lo + 1, domain.hi, dtype=float)])
        lo, hi = np.full(row_shape, float(domain.lo)), np.full(row_shape, float(domain.hi))
        integer = True
    elif isinstance(domain, Interval):
        lo, hi = np.full(row_shape, domain.lo), np.full(row_shape, domain.hi)
        integer = False
        # an unbounded end (a contaminated factor): probe far out, finitely
        far = rng.choice([1.0, 10.0, 1e3], size=row_shape)
        lo = np.where(np.isfinite(lo), lo, np.where(np.isfinite(hi), hi, 0.0) - far)
        hi = np.where(np.isfinite(hi), hi, lo + 2 * far)
    else:
        return None
    size = int(np.prod(row_shape, dtype=int))
    alt = (np.arange(size) % 2 == 0).reshape(row_shape)
    mid = np.floor(0.5 * (lo + hi)) if integer else 0.5 * (lo + hi)
    rows = [lo, hi, np.where(alt, lo, hi), np.where(alt, hi, lo), mid]
    u = rng.random(shape)
    corner = np.where(rng.random(shape) < 0.5, lo, hi)
    interior = np.minimum(np.floor(lo + u * (hi - lo + 1)) if integer else lo + u * (hi - lo), hi)
    # random corners and random interior points in turn (one element: its corners are above)
    rows += [corner[i] if i % 2 == 0 and size > 1 else interior[i] for i in range(count)]
    out, seen = [], set()
    for r in rows:  # distinct rows, in this order, ``count`` of them (at least both ends)
        key = np.asarray(r, float).tobytes()
        if key not in seen:
            seen.add(key)
            out.append(np.asarray(r, float))
    return np.stack(out[: max(count, 2)])


def corner_combos(sizes: Sequence[int], count: int, rng) -> np.ndarray:
    """``count`` record tuples (one row index per container) when not all combinations fit: the
    domains' joint corners first, then random tuples.

    Each container's candidate rows start with its lower end (row 0) and its upper end (row 1;
    :func:`candidate_rows`). A predictor
    monotone in each coordinate reaches its extremes where *every* container sits at an end,
    and a likelihood its worst change there (FOUND.md #13: a logit beyond 30 needs the covariates at
    their upper ends together with the other outcome). So the tuples are: all lower, all upper, and
    for each container all at one end but that one at the other; random tuples fill the rest."""
    ends = [(0, min(1, s - 1)) for s in sizes]
    structured = [[lo for lo, _ in ends], [hi for _, hi in ends]]
    for j in range(len(sizes)):
        for side in (0, 1):
            row = [e[side] for e in ends]
            row[j] = ends[j][1 - side]
            structured.append(row)
    out, seen = [], set()
    for row in structured:
        if tuple(row) not in seen and len(out) < count:
            seen.add(tuple(row))
            out.append(row)
    rest = count - len(out)
    if rest > 0:
        out.extend(np.stack([rng.integers(0, s, rest) for s in sizes], axis=1).tolist())
    return np.asarray(out, dtype=int)
