"""The neighbouring datasets an audit tries: record changes over a domain's values, structured base datasets, the user's pairs (:class:`DataSpace`)."""

from __future__ import annotations

import itertools
import math
from functools import singledispatch
from typing import Any, Mapping, Sequence

import numpy as np

from pymc_dp.audits.result import AuditError
from pymc_dp.domains import Ball, Box, Integers, Interval
from pymc_dp.units import Attribute, Record, Users, as_unit, describe_unit


# =========================================================================== the data space
def _scalar_values(domain, levels: int) -> np.ndarray:
    if isinstance(domain, Integers):
        if domain.hi - domain.lo + 1 <= max(levels, 12):
            return np.arange(domain.lo, domain.hi + 1)
        return np.unique(np.round(np.linspace(domain.lo, domain.hi, levels)).astype(np.int64))
    if isinstance(domain, Interval):
        if getattr(domain, "unbounded", False):  # a contaminated factor's domain: near and far records
            reach = np.array([0.0, 0.25, 0.5, 1.0, 2.0, 3.0, 5.0, 10.0, 30.0, 100.0, 1000.0])
            vals = np.concatenate([-reach, reach, [domain.lo, domain.hi]])
            return np.unique(vals[np.isfinite(vals) & (vals >= domain.lo) & (vals <= domain.hi)])
        return np.linspace(domain.lo, domain.hi, levels)
    raise AuditError(f"no candidate values for the domain {domain}")  # pragma: no cover


def _unit_vectors(rng, k, d):
    u = rng.normal(size=(k, d))
    return u / np.linalg.norm(u, axis=1, keepdims=True)


def _row_candidates(domain, row_shape, levels, rng, cap=64) -> list[np.ndarray]:
    """Candidate values of one row of a container (shape ``row_shape``) inside its domain."""
    if isinstance(domain, Ball):
        d = int(row_shape[-1])
        r = domain.radius
        eye = np.eye(d)
        cands = [np.zeros(d), *(r * eye), *(-r * eye), r * np.ones(d) / math.sqrt(d), -r * np.ones(d) / math.sqrt(d)]
        cands += list(r * _unit_vectors(rng, 4, d)) + list(0.5 * r * _unit_vectors(rng, 2, d))
        return [np.asarray(c, float).reshape(row_shape) for c in cands]
    if isinstance(domain, Box):
        d = int(row_shape[-1])
        lo = np.broadcast_to(domain.lo, (d,)).astype(float)
        hi = np.broadcast_to(domain.hi, (d,)).astype(float)
        if 2**d <= 16:
            corners = [np.where(np.array(bits, bool), hi, lo) for bits in itertools.product((0, 1), repeat=d)]
        else:
            corners = [lo, hi] + [np.where(rng.random(d) < 0.5, hi, lo) for _ in range(8)]
        cands = corners + [0.5 * (lo + hi)] + [lo + (hi - lo) * rng.random(d) for _ in range(2)]
        return [np.asarray(c, float).reshape(row_shape) for c in cands]
    vals = _scalar_values(domain, levels)
    size = int(np.prod(row_shape, dtype=int))
    if size == 1:
        return [np.full(row_shape, v) for v in vals]
    if len(vals) ** size <= cap:
        return [np.array(c).reshape(row_shape) for c in itertools.product(vals, repeat=size)]
    cands = [np.full(row_shape, v) for v in vals]
    cands += [rng.choice(vals, size=size).reshape(row_shape) for _ in range(max(cap - len(vals), 0))]
    return cands


def _random_rows(domain, shape, rng) -> np.ndarray:
    """A dataset of ``shape`` with rows uniform in the domain (continuous or discrete)."""
    if isinstance(domain, Ball):
        d = shape[-1]
        u = _unit_vectors(rng, int(np.prod(shape[:-1])), d)
        rad = domain.radius * rng.random(len(u)) ** (1.0 / d)
        return (u * rad[:, None]).reshape(shape)
    if isinstance(domain, Box):
        lo, hi = np.broadcast_to(domain.lo, shape[-1:]), np.broadcast_to(domain.hi, shape[-1:])
        return lo + (hi - lo) * rng.random(shape)
    if isinstance(domain, Integers):
        return rng.integers(domain.lo, domain.hi + 1, size=shape)
    if getattr(domain, "unbounded", False):  # heavy-tailed rows (standard Cauchy), inside a finite end
        return np.clip(rng.standard_cauchy(shape), domain.lo, domain.hi)
    return domain.lo + (domain.hi - domain.lo) * rng.random(shape)


def array_key(arr) -> bytes:
    """The bytes of an array's values: a cache key for a dataset or grid (same dtype and shape assumed).

    Parameters
    ----------
    arr : array_like

    Returns
    -------
    bytes
    """
    return np.ascontiguousarray(arr).tobytes()


class DataSpace:
    """Neighbouring datasets for a private model: base datasets and their unit changes."""

    def __init__(self, model, domains, unit, reads, *, include_data, levels, max_bases, groups, n_random, rng):
        """``model``: the model holding the private containers; ``domains``: every private
        container's domain; ``unit``: the privacy unit; ``reads``: the containers the release
        depends on (the only ones changed)."""
        self.unit = unit
        self.rng = rng
        self.levels = levels
        self.groups = groups
        read = sorted(set(reads))
        self.names = read
        self.domains = {c: domains[c] for c in read}
        self.current = {v.name: np.array(v.get_value()) for v in model.data_vars if v.name in self.domains}
        self.dtypes = {k: v.dtype for k, v in self.current.items()}
        self.n = {k: int(v.shape[0]) for k, v in self.current.items()}
        self.row_shape = {k: v.shape[1:] for k, v in self.current.items()}
        common = set(self.n.values())
        self.rows = next(iter(common)) if len(common) == 1 else None
        # public per-row data: rows with the same private values may differ through them
        self.public_rows = {
            v.name: np.asarray(v.get_value())
            for v in model.data_vars
            if v.name not in domains and self.rows is not None and np.ndim(v.get_value()) >= 1
            and np.shape(v.get_value())[0] == self.rows
        }
        self.container_cands = {
            c: _row_candidates(self.domains[c], self.row_shape[c], levels, rng) for c in self.names
        }
        self.record_cands = self._records()
        self.include_data = include_data
        self.max_bases = max_bases
        self.n_random = n_random

    # ------------------------------------------------------------------ records
    def _records(self, cap=128) -> list[dict]:
        lists = [self.container_cands[c] for c in self.names]
        total = int(np.prod([len(x) for x in lists]))
        if total <= cap:
            combos = list(itertools.product(*[range(len(x)) for x in lists]))
        else:
            longest = max(len(x) for x in lists)
            combos = [tuple(i % len(x) for x in lists) for i in range(longest)]
            combos += [tuple(int(self.rng.integers(len(x))) for x in lists) for _ in range(cap - longest)]
        out, seen = [], set()
        for combo in combos:
            rec = {c: lists[j][i] for j, (c, i) in enumerate(zip(self.names, combo))}
            key = b"".join(array_key(np.asarray(rec[c], float)) for c in self.names)
            if key not in seen:
                seen.add(key)
                out.append(rec)
        return out

    def _cast(self, data: dict) -> dict:
        return {c: np.asarray(v).astype(self.dtypes[c]) for c, v in data.items()}

    # ------------------------------------------------------------------ base datasets
    def bases(self) -> list[tuple[str, dict]]:
        out = []
        if self.include_data:
            out.append(("data", {c: v.copy() for c, v in self.current.items()}))
        consts = []
        for r in self.record_cands:
            consts.append(("constant", self._cast({c: np.broadcast_to(r[c], self.current[c].shape).copy() for c in self.names})))
        mixtures = []
        recs = self.record_cands
        if len(recs) >= 2:
            if len(recs) <= 6:
                pairs = list(itertools.combinations(range(len(recs)), 2))
            else:
                pairs = {tuple(sorted(self.rng.choice(len(recs), 2, replace=False))) for _ in range(16)}
                pairs = sorted(pairs)
            for i, j in pairs:
                for k in self._k_grid():
                    data = {}
                    for c in self.names:
                        n_c = self.n[c]
                        kc = int(round(k * n_c / max(self.rows or n_c, 1)))
                        arr = np.broadcast_to(recs[j][c], self.current[c].shape).copy()
                        arr[:kc] = recs[i][c]
                        data[c] = arr
                    mixtures.append((f"mixture k={k}", self._cast(data)))
        randoms = []
        for _ in range(self.n_random):
            idx = self.rng.integers(len(recs), size=max(self.n.values()))
            randoms.append(("random records", self._cast({c: np.stack([recs[i][c] for i in idx[: self.n[c]]]) for c in self.names})))
            randoms.append(("random", self._cast({c: _random_rows(self.domains[c], self.current[c].shape, self.rng) for c in self.names})))
        rest = mixtures + randoms
        budget = max(self.max_bases - len(out), 0)
        if len(consts) + len(rest) > budget:
            # half of the budget to constant datasets (at least), the rest to mixtures and random ones
            n_const = min(len(consts), max(budget // 2, budget - len(rest)))
            # the first and last records (a scalar domain's ends) always: a constant dataset at an
            # end of the domain piles the posterior at an end of the region, where the oscillation
            # certificate is attained (a Geometric's all-ones dataset)
            ends = [0, len(consts) - 1][: min(n_const, 2)]
            middle = np.arange(1, len(consts) - 1)
            picked = self.rng.choice(middle, size=max(n_const - len(ends), 0), replace=False) if middle.size else []
            consts = [consts[i] for i in np.sort(np.concatenate([ends, picked]).astype(int))]
            keep = np.sort(self.rng.choice(len(rest), size=min(len(rest), budget - n_const), replace=False))
            rest = [rest[i] for i in keep]
        return out + consts + rest

    def changes_per_base(self) -> int:
        """About how many neighbours :meth:`changes` gives per base dataset."""
        if self.unit == "attribute":
            per_row = sum(len(v) for v in self.container_cands.values())
        else:
            per_row = len(self.record_cands)
        return max(1, per_row * 2 * self.groups)

    def _k_grid(self) -> list[int]:
        n = self.rows or max(self.n.values())
        if n - 1 <= 400:
            return list(range(1, n))
        ks = set(range(1, 9)) | set(range(n - 8, n)) | set(np.round(np.linspace(1, n - 1, 48)).astype(int).tolist())
        return sorted(ks)

    # ------------------------------------------------------------------ neighbours
    def _row_groups(self, data: dict, containers: Sequence[str]) -> list[np.ndarray]:
        """Rows grouped by content (the containers' values, and the public per-row data)."""
        n = self.n[containers[0]]
        cols = [np.asarray(data[c], float).reshape(n, -1) for c in containers]
        if self.rows is not None and n == self.rows:
            cols += [np.asarray(v, float).reshape(n, -1) for v in self.public_rows.values()]
        table = np.concatenate(cols, axis=1)
        _, inverse = np.unique(table, axis=0, return_inverse=True)
        inverse = np.asarray(inverse).reshape(-1)
        order = np.argsort(inverse, kind="stable")
        bounds = np.flatnonzero(np.diff(inverse[order])) + 1
        return np.split(order, bounds)

    def _representative_rows(self, data: dict, containers: Sequence[str]) -> list[int]:
        """The first and last row of up to ``groups`` groups of identical rows."""
        groups = self._row_groups(data, containers)
        if len(groups) > self.groups:
            pick = self.rng.choice(len(groups), size=self.groups, replace=False)
            groups = [groups[i] for i in sorted(pick)]
        rows = set()
        for g in groups:
            rows.add(int(g[0]))
            rows.add(int(g[-1]))
        return sorted(rows)

    def user_groups(self, data: dict) -> list[np.ndarray]:
        unit: Users = self.unit
        n = self.rows
        if unit.ids is not None:
            ids = np.asarray(unit.ids)
            _, inverse = np.unique(ids, return_inverse=True)
            inverse = np.asarray(inverse).reshape(-1)
            order = np.argsort(inverse, kind="stable")
            groups = np.split(order, np.flatnonzero(np.diff(inverse[order])) + 1)
            keyed = {}
            for g in groups:
                k = b"".join(sorted(b"".join(array_key(data[c][i]) for c in self.names) for i in g))
                keyed.setdefault((len(g), k), g)
            groups = list(keyed.values())
            if len(groups) > self.groups:
                pick = self.rng.choice(len(groups), size=self.groups, replace=False)
                groups = [groups[i] for i in sorted(pick)]
            return groups
        m = min(unit.max_rows, n)
        groups = []
        for same in self._row_groups(data, self.names)[: self.groups]:
            for g in (same[:m], same[-m:]):
                g = list(g)
                if len(g) < m:
                    taken = set(g)
                    g = sorted(g + [j for j in range(n) if j not in taken][: m - len(g)])
                groups.append(np.array(g))
        groups += [np.arange(m), np.arange(n - m, n)]
        keyed = {tuple(int(i) for i in g): g for g in groups}
        return list(keyed.values())

    def changes(self, data: dict):
        """Yield ``(change, new_values)``: ``new_values`` maps container -> (rows, values); what
        one unit may change is the unit's (:func:`unit_changes`, registered per unit)."""
        yield from unit_changes(as_unit(self.unit), self, data)

    def apply(self, data: dict, new: dict) -> dict:
        out = dict(data)
        for c, (rows, value) in new.items():
            arr = data[c].copy()
            arr[rows] = np.asarray(value).astype(self.dtypes[c])
            out[c] = arr
        return out

    def validate(self, data: Mapping[str, Any]) -> dict:
        out = {}
        for c in self.names:
            if c not in data:
                raise AuditError(f"a given dataset lacks the private container {c!r}")
            arr = np.asarray(data[c])
            if arr.shape != self.current[c].shape:
                raise AuditError(f"a given dataset's {c!r} has shape {arr.shape}, the model's has {self.current[c].shape}")
            self.domains[c].validate(c, arr)
            out[c] = arr.astype(self.dtypes[c])
        return out

    def describe_pair(self, x: dict, y: dict) -> dict:
        """The change between two given datasets (checked to be neighbours under the unit)."""
        rows = sorted({int(i) for c in self.names for i in np.flatnonzero(
            np.any((x[c] != y[c]).reshape(self.n[c], -1), axis=1))})
        containers = [c for c in self.names if np.any(x[c] != y[c])]
        unit = describe_unit(self.unit)
        if unit["kind"] == "attribute" and len(containers) > 1:
            raise AuditError(f"the given datasets differ in {containers}: not attribute neighbours")
        if len(rows) > unit["max_rows"]:
            raise AuditError(f"the given datasets differ in {len(rows)} rows: not neighbours for unit {unit}")
        if isinstance(self.unit, Users) and self.unit.ids is not None and rows:
            if len({self.unit.ids[i] for i in rows}) > 1:
                raise AuditError("the given datasets differ in the rows of several users")
        return {
            "unit": unit["kind"], "rows": rows, "containers": containers,
            "from": {c: x[c][rows].tolist() for c in containers}, "to": {c: y[c][rows].tolist() for c in containers},
        }


# =========================================================================== entry point
def pairs_from_search(space: DataSpace, bases):
    """Every neighbouring pair the search tries: each base dataset with each of its unit changes.

    Parameters
    ----------
    space : DataSpace
    bases : iterable of (str, dict)
        ``(label, dataset)`` pairs, as :meth:`DataSpace.bases` gives them.

    Yields
    ------
    tuple
        ``(label, x, change, y)``: the base, its neighbour, and the change between them.
    """
    for label, x in bases:
        for change, new in space.changes(x):
            yield label, x, change, space.apply(x, new)


def given_pairs(space: DataSpace, pairs):
    """The user's ``pairs=``, validated against the domains, in the search's form.

    Parameters
    ----------
    space : DataSpace
    pairs : sequence of (dict, dict)
        ``(x, y)`` datasets, each container name -> array.

    Returns
    -------
    list of tuple
        ``("given", x, change, y)`` per pair.

    Raises
    ------
    AuditError
        A pair that is not two datasets, or a dataset outside the declared domains.
    """
    out = []
    for p in pairs:
        if not (isinstance(p, (tuple, list)) and len(p) == 2):
            raise AuditError("pairs= must be a sequence of (x, y) dataset pairs, each a dict of container -> array")
        x, y = space.validate(p[0]), space.validate(p[1])
        out.append(("given", x, space.describe_pair(x, y), y))
    return out


def heuristic_pair(space: DataSpace):
    """Without a density to search with: all rows at one extreme record, one unit at another.

    Parameters
    ----------
    space : DataSpace

    Returns
    -------
    tuple
        ``("constant", x, change, y)``: the change moves the unit farthest from the base record.
    """
    recs = space.record_cands
    x = space._cast({c: np.broadcast_to(recs[0][c], space.current[c].shape).copy() for c in space.names})
    change, new = next(iter(space.changes(x)))
    best = None
    for ch, nw in space.changes(x):
        dist = sum(float(np.sum(np.abs(np.asarray(v, float) - x[c][rows].astype(float)))) for c, (rows, v) in nw.items())
        if best is None or dist > best[0]:
            best = (dist, ch, nw)
    _, change, new = best
    return ("constant", x, change, space.apply(x, new))


# --------------------------------------------------------------------------- per unit
@singledispatch
def unit_changes(unit, space: DataSpace, data: dict):
    """The neighbours of ``data`` an audit tries under ``unit``: ``(change, new_values)`` pairs.
    A unit with no registration has no audit (refused, never guessed)."""
    raise AuditError(f"no neighbour changes are registered for the unit {str(unit)!r} ({type(unit).__name__}); register them with pymc_dp.audits.neighbours.unit_changes.register")


@unit_changes.register
def _(unit: Users, space, data):
    """Every row of a group of rows (a user's, or a run of similar rows) set to one record."""
    for g in space.user_groups(data):
        for r in space.record_cands:
            if all(np.array_equal(data[c][i], r[c]) for c in space.names for i in g):
                continue
            yield (
                {"unit": "user", "rows": g.tolist(), "containers": list(space.names),
                 "from": {c: data[c][g].tolist() for c in space.names}, "to": {c: np.asarray(r[c]).tolist() for c in space.names}},
                {c: (g, r[c]) for c in space.names},
            )


@unit_changes.register
def _(unit: Record, space, data):
    """One representative row of every private container replaced by a candidate record."""
    for i in space._representative_rows(data, space.names):
        for r in space.record_cands:
            if all(np.array_equal(data[c][i], r[c]) for c in space.names):
                continue
            yield (
                {"unit": "record", "rows": [i], "containers": list(space.names),
                 "from": {c: data[c][i].tolist() for c in space.names}, "to": {c: np.asarray(r[c]).tolist() for c in space.names}},
                {c: (np.array([i]), r[c]) for c in space.names},
            )


@unit_changes.register
def _(unit: Attribute, space, data):
    """One container's value in one representative row replaced by a candidate value."""
    for c in space.names:
        for i in space._representative_rows(data, [c]):
            for v in space.container_cands[c]:
                if np.array_equal(data[c][i], v):
                    continue
                yield (
                    {"unit": "attribute", "rows": [i], "containers": [c],
                     "from": {c: data[c][i].tolist()}, "to": {c: np.asarray(v).tolist()}},
                    {c: (np.array([i]), v)},
                )
