"""Noisy counts of a discrete Bayes network, and the exact posterior given them.

The noisy-statistics path (:func:`pymc_dp.noisy_statistics`) for models whose private data are
Bernoulli / Categorical observations with Beta / Dirichlet priors, gathered by at most one
private "class" variable (Beta-Bernoulli, Dirichlet-Categorical, naive Bayes). The counts -- the
sufficient statistics of the Beta / Dirichlet posteriors -- are released **once** with discrete
Laplace noise from OpenDP; the posterior given the released counts is then computed *exactly*
(no MCMC, no approximation): every latent true count is summed over, and the draws are iid.
Any number of draws is post-processing. Against the Laplace mechanism on posterior updates
(AAAI 2016 Alg. 1, :func:`pymc_dp.laplace_updates`), which releases the same kind of counts and
uses them as pseudo-counts, this is the Bayes-optimal use of the release (Bernstein & Sheldon,
NeurIPS 2018).

What is released
----------------
The network's count table (:meth:`BayesNet.counts`): per parameter cell, one count per value.
A Beta cell observed by parent-less nodes only releases its count of ones alone (its zeros are
the public number of observations minus it), which halves that node's sensitivity.

Privacy map
-----------
Replacing one record moves each node's observation between count entries: ``-1`` at one entry,
``+1`` at another (L1 change ``<= 2``); a node whose cell releases its ones alone changes one
entry by at most 1; a node that cannot move changes nothing. Summed over the nodes of one record
(:func:`_sensitivity` covers the units), the L1 sensitivity is ``Delta``, and OpenDP's discrete
Laplace with scale ``Delta / epsilon`` is ``epsilon``-DP (its map is checked).

The exact posterior
-------------------
Write ``N`` for the latent class counts (the counts of the class variable's values, a
composition of the public ``n``) and ``s_r`` for a cell's latent count vector, a composition of
its number of trials ``T_r(N)`` (linear in ``N``). With the Beta / Dirichlet parameters integrated
out, the latent counts have a Dirichlet-multinomial law, and the noise is independent of
everything else, so

    p(N, s | z) ∝ DM(N; n, a_root) L(z_root | N) prod_r DM(s_r; T_r(N), a_r) L(z_r | s_r),

``L(z | s) = prod_k exp(-|z_k - s_k| / b)`` over the released entries. Summing ``s_r`` out cell
by cell gives ``p(N | z)`` up to a constant on a finite set; given ``N``, the cells are
independent; and given the counts, the parameters are ``Dirichlet(a + counts)``. Draws follow
that order. The sums are exact enumerations, limited by :data:`MAX_ENUMERATION`.
"""

from __future__ import annotations

import dataclasses
import math
import numbers
from typing import Any, Mapping, Sequence

import arviz as az
import numpy as np
from scipy import special as sc

from pymc_dp.chunks import CHUNK_ROWS, check_values, is_dask
from pymc_dp.domains import Domain
from pymc_dp.exceptions import DomainError, PathNotImplementedError
from pymc_dp.ledger import Ledger
from pymc_dp.mechanisms.base import charge
from pymc_dp.mechanisms.bayesnet import BayesNet, Node
from pymc_dp.mechanisms.noise import discrete_laplace, laplace_log_ratio
from pymc_dp.mechanisms.updates import PosteriorUpdates, check_chains
from pymc_dp.release import draws_dataset, ledger_state, publish
from pymc_dp.seeds import exact_rng
from pymc_dp.units import Users, describe_unit

__all__ = ["NoisyCounts", "MAX_ENUMERATION"]

#: most latent count vectors the exact posterior may enumerate (over all cells and classes)
MAX_ENUMERATION = 5_000_000


# =========================================================================== the network's shape
@dataclasses.dataclass(frozen=True)
class _Cell:
    """One parameter cell: its trials ``T(N) = const + coef . N`` and its count columns."""

    param: str
    cell: int
    reachable: tuple[int, ...]  # count columns a record can reach
    released: tuple[int, ...]  # count columns released with noise
    const: int  # trials from parent-less nodes (n each)
    coef: tuple[int, ...]  # trials per class value position (empty without a class variable)


@dataclasses.dataclass(frozen=True)
class _Block:
    """A class variable with its own root cell and the cells it gathers (or the free cells)."""

    variable: int | None
    root: _Cell | None  # the class variable's own cell (its latent counts are N)
    root_columns: tuple[int, ...]  # count column of each class value position
    cells: tuple[_Cell, ...]


def _column(net: BayesNet, param: str, value: int) -> int:
    """The count column a value updates (Beta: ones in column 0, zeros in 1; Dirichlet: value)."""
    return (1 - int(value)) if net.params[param]["family"] == "Beta" else int(value)


def _ones_only(net: BayesNet, nodes: Sequence[Node]) -> set[tuple[str, int]]:
    """Beta cells observed by parent-less nodes only: they release their count of ones alone."""
    touched: dict[tuple[str, int], bool] = {}
    for nd in nodes:
        for c in set(nd.table):
            key = (nd.param, c)
            touched[key] = touched.get(key, True) and not nd.parents
    return {k for k, root in touched.items() if root and net.params[k[0]]["family"] == "Beta"}


def _plan(net: BayesNet, n: int) -> list[_Block]:
    """The blocks of the exact posterior, or a NotImplementedError naming what does not fit."""
    roots = {nd.variable: nd for nd in net.nodes if not nd.parents}
    classes = sorted({p for nd in net.nodes for p in nd.parents})
    for nd in net.nodes:
        if len(nd.parents) > 1:
            raise PathNotImplementedError(
                f"factor {nd.factor!r} element {nd.column}: its parameter is gathered by {len(nd.parents)} "
                "variables; the exact noise-aware posterior handles one class variable per node (naive "
                "Bayes). Use pymc_dp.laplace_updates or pymc_dp.make_private for this network."
            )
    for v in classes:
        label = net.variables[v].label
        if v not in roots:
            raise PathNotImplementedError(
                f"the variable {label!r} gathers a parameter but is itself observed with a gathered parameter "
                "(a network deeper than one level); the exact noise-aware posterior is implemented for naive "
                "Bayes structures. Use pymc_dp.laplace_updates or pymc_dp.make_private."
            )
    ones = _ones_only(net, net.nodes)
    trials: dict[tuple[str, int], dict] = {}
    for nd in net.nodes:
        if nd.variable in classes:
            continue  # a class variable's own cell is its block's root
        cols = {_column(net, nd.param, x) for x in net.variables[nd.variable].values}
        if not nd.parents:
            t = trials.setdefault((nd.param, nd.table[0]), {"const": 0, "cls": None, "coef": None, "cols": set()})
            t["const"] += n
            t["cols"] |= cols
            continue
        (v,) = nd.parents
        for pos, c in enumerate(nd.table):
            t = trials.setdefault((nd.param, c), {"const": 0, "cls": None, "coef": None, "cols": set()})
            if t["cls"] not in (None, v):
                raise PathNotImplementedError(
                    f"the cell {nd.param}[{c}] is gathered by two class variables; the exact noise-aware "
                    "posterior needs each cell to depend on one. Use pymc_dp.laplace_updates."
                )
            if t["coef"] is None:
                t["cls"], t["coef"] = v, np.zeros(len(net.variables[v].values), dtype=np.int64)
            t["coef"][pos] += 1
            t["cols"] |= cols

    def cell(key, t) -> _Cell:
        cols = tuple(sorted(t["cols"]))
        released = (0,) if key in ones else tuple(range(net.params[key[0]]["K"]))
        coef = () if t["coef"] is None else tuple(int(c) for c in t["coef"])
        return _Cell(key[0], key[1], cols, released, int(t["const"]), coef)

    blocks = []
    for v in classes:
        root = roots[v]
        key = (root.param, root.table[0])
        if key in trials:
            raise PathNotImplementedError(
                f"the class variable {net.variables[v].label!r} shares its parameter cell {root.param}[{key[1]}] "
                "with other observations; the exact noise-aware posterior needs the class counts in a cell of "
                "their own. Give the class variable its own parameter, or use pymc_dp.laplace_updates or "
                "pymc_dp.make_private."
            )
        values = net.variables[v].values
        root_cols = tuple(_column(net, root.param, x) for x in values)
        root_cell = cell(key, {"const": n, "coef": None, "cols": set(root_cols)})
        mine = tuple(cell(k, t) for k, t in sorted(trials.items()) if t["cls"] == v)
        blocks.append(_Block(v, root_cell, root_cols, mine))
    free = tuple(cell(k, t) for k, t in sorted(trials.items()) if t["cls"] is None)
    if free:
        blocks.append(_Block(None, None, (), free))
    # every parameter cell is drawn: cells no node reaches keep their prior (no counts)
    return blocks


def _compositions(total: int, parts: int) -> np.ndarray:
    """Every vector of ``parts`` non-negative integers summing to ``total``, ``(M, parts)``."""
    if parts == 1:
        return np.array([[total]], dtype=np.int64)
    if parts == 2:
        s = np.arange(total + 1, dtype=np.int64)
        return np.stack([s, total - s], axis=1)
    out = [np.concatenate([np.full((len(rest), 1), first, dtype=np.int64), rest], axis=1)
           for first in range(total + 1) for rest in [_compositions(total - first, parts - 1)]]
    return np.concatenate(out, axis=0)


def _n_compositions(total: int, parts: int) -> int:
    return math.comb(total + parts - 1, parts - 1)


def _log_dm(counts: np.ndarray, alpha: np.ndarray) -> np.ndarray:
    """Dirichlet-multinomial log pmf of count vectors ``(M, K)`` (ordered records: with the
    multinomial coefficient), prior ``alpha`` ``(K,)``."""
    counts = np.asarray(counts, float)
    total = counts.sum(axis=1)
    a0 = float(np.sum(alpha))
    return (sc.gammaln(total + 1) - sc.gammaln(counts + 1).sum(axis=1) + sc.gammaln(a0) - sc.gammaln(total + a0)
            + (sc.gammaln(alpha + counts) - sc.gammaln(alpha)).sum(axis=1))


# =========================================================================== the exact posterior
class _CellPosterior:
    """Per number of trials ``T``: the latent counts' conditional given the noisy counts, and
    ``f(T) = log sum_s DM(s; T, a) L(z | s)``."""

    def __init__(self, cell: _Cell, alpha: np.ndarray, z: np.ndarray, b: float, totals: Sequence[int]):
        self.cell, self.alpha = cell, np.asarray(alpha, float)
        K = len(self.alpha)
        self.rows: dict[int, np.ndarray] = {}
        self.logp: dict[int, np.ndarray] = {}
        self.f: dict[int, float] = {}
        rel = np.asarray(cell.released)
        for T in sorted(set(int(t) for t in totals)):
            comp = _compositions(T, len(cell.reachable))
            full = np.zeros((len(comp), K), dtype=np.int64)
            full[:, list(cell.reachable)] = comp
            lw = _log_dm(full, self.alpha) - np.abs(z[rel][None, :] - full[:, rel]).sum(axis=1) / b
            top = sc.logsumexp(lw)
            self.rows[T], self.logp[T], self.f[T] = full, lw - top, float(top)

    def draw(self, totals: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """Latent count vectors ``(draws, K)`` given each draw's number of trials."""
        out = np.zeros((len(totals), len(self.alpha)), dtype=np.int64)
        for T in np.unique(totals):
            at = np.flatnonzero(totals == T)
            pick = rng.choice(len(self.rows[int(T)]), size=len(at), p=np.exp(self.logp[int(T)]))
            out[at] = self.rows[int(T)][pick]
        return out

    def mean_fraction(self, T: int) -> np.ndarray:
        """``E[(a + s) / (A + T) | T, z]``: the posterior mean of the cell's probabilities."""
        w = np.exp(self.logp[T])
        return (w[:, None] * (self.alpha[None, :] + self.rows[T])).sum(axis=0) / (self.alpha.sum() + T)


class _ExactPosterior:
    """The exact posterior of every Beta / Dirichlet given noisy counts (see the module text)."""

    def __init__(self, net: BayesNet, blocks: Sequence[_Block], noisy: Mapping[str, np.ndarray], b: float, n: int):
        self.net, self.blocks, self.n = net, blocks, n
        self.alpha = {k: np.asarray(p["prior"], float) for k, p in net.params.items()}
        self.parts = []
        for blk in blocks:
            if blk.variable is None:
                cells = [_CellPosterior(c, self.alpha[c.param][c.cell], noisy[c.param][c.cell], b, [c.const]) for c in blk.cells]
                self.parts.append((blk, None, None, cells))
                continue
            comp = _compositions(n, len(blk.root_columns))
            K = self.alpha[blk.root.param].shape[1]
            full = np.zeros((len(comp), K), dtype=np.int64)
            full[:, list(blk.root_columns)] = comp
            rel = np.asarray(blk.root.released)
            zr = noisy[blk.root.param][blk.root.cell]
            logw = _log_dm(full, self.alpha[blk.root.param][blk.root.cell]) - np.abs(zr[rel][None, :] - full[:, rel]).sum(axis=1) / b
            cells = []
            for c in blk.cells:
                totals = c.const + comp @ np.asarray(c.coef, dtype=np.int64)
                cp = _CellPosterior(c, self.alpha[c.param][c.cell], noisy[c.param][c.cell], b, totals)
                logw = logw + np.array([cp.f[int(t)] for t in totals])
                cells.append(cp)
            logw = logw - sc.logsumexp(logw)
            self.parts.append((blk, comp, logw, cells))

    def draw(self, draws: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
        counts = {k: np.zeros((draws, *a.shape), dtype=np.int64) for k, a in self.alpha.items()}
        for blk, comp, logw, cells in self.parts:
            if blk.variable is None:
                for cp in cells:
                    counts[cp.cell.param][:, cp.cell.cell] = cp.draw(np.full(draws, cp.cell.const), rng)
                continue
            N = comp[rng.choice(len(comp), size=draws, p=np.exp(logw))]
            counts[blk.root.param][:, blk.root.cell][:, list(blk.root_columns)] = N
            for cp in cells:
                counts[cp.cell.param][:, cp.cell.cell] = cp.draw(cp.cell.const + N @ np.asarray(cp.cell.coef), rng)
        out = {}
        for name, p in self.net.params.items():
            a = self.alpha[name][None] + counts[name]  # (draws, cells, K)
            if p["family"] == "Beta":
                x = rng.beta(a[..., 0], a[..., 1])
            else:
                g = rng.gamma(a)
                x = g / g.sum(axis=-1, keepdims=True)
            out[name] = x.reshape((draws, *p["shape"]))
        return out

    def means(self) -> dict[str, np.ndarray]:
        """The exact posterior means of every parameter (``(cells, K)`` probabilities)."""
        out = {k: a / a.sum(axis=1, keepdims=True) for k, a in self.alpha.items()}  # cells no node reaches
        for blk, comp, logw, cells in self.parts:
            if blk.variable is None:
                for cp in cells:
                    out[cp.cell.param][cp.cell.cell] = cp.mean_fraction(cp.cell.const)
                continue
            w = np.exp(logw)
            a = self.alpha[blk.root.param][blk.root.cell]
            K = len(a)
            full = np.zeros((len(comp), K))
            full[:, list(blk.root_columns)] = comp
            out[blk.root.param][blk.root.cell] = (w[:, None] * (a + full)).sum(axis=0) / (a.sum() + self.n)
            for cp in cells:
                totals = cp.cell.const + comp @ np.asarray(cp.cell.coef)
                out[cp.cell.param][cp.cell.cell] = sum(wi * cp.mean_fraction(int(t)) for wi, t in zip(w, totals))
        return out


def _enumeration_size(blocks: Sequence[_Block], n: int) -> int:
    size = 0
    for blk in blocks:
        comp = _compositions(n, len(blk.root_columns)) if blk.variable is not None else None
        if comp is not None:
            size += len(comp)
        for c in blk.cells:
            totals = {c.const} if comp is None else set((c.const + comp @ np.asarray(c.coef)).tolist())
            size += sum(_n_compositions(T, len(c.reachable)) for T in totals)
    return size


# =========================================================================== the mechanism
class NoisyCounts(PosteriorUpdates):
    """Laplace-noised counts of a discrete Bayes network, released once, and exact posterior draws.

    Build with :func:`pymc_dp.noisy_statistics` (which chooses this class for Beta-Bernoulli,
    Dirichlet-Categorical and naive Bayes models). :meth:`sample` charges ``epsilon`` to the
    ledger at the first call, before the private data are read, releases the noisy counts, and
    draws iid from the exact posterior given them; later calls reuse the release and charge
    nothing (post-processing).

    Privacy proof
    -------------
    *Claim.* The released counts are ``(epsilon, 0)``-DP for the privacy unit; every posterior
    draw is post-processing of them.

    1. A record's observation of a node adds 1 to one count entry of one cell (its cell and
       value). Replacing the record moves that 1 to another entry: the released vector changes
       by ``-1`` and ``+1`` (L1 ``2``) -- or, for a cell that releases its count of ones alone
       (a Beta cell observed by parent-less nodes only), by at most 1 -- and by 0 for a node
       whose entry cannot move on the domain.
    2. ``unit="record"``: the changes add over the nodes of one record (triangle inequality):
       ``Delta = sum_nodes delta_node``; ``"attribute"``: over the nodes that read one container
       (as observation or parent), maximised over containers; ``Users(m)``: ``m`` records,
       ``m`` times the record's.
    3. OpenDP's discrete Laplace with scale ``b = Delta / epsilon`` on the integer vector is
       ``epsilon``-DP (its privacy map is evaluated and checked at construction).
    4. ``n`` (public under replacement), the priors, the domains and ``b`` are public; the
       posterior given the noisy counts uses nothing else.
    """

    name = "noisy_statistics"
    algorithm = ("noise-aware inference on discrete-Laplace-noised counts of a discrete Bayes network: "
                 "the exact posterior given the release (Bernstein & Sheldon 2018)")

    def __init__(
        self,
        model,
        *,
        epsilon: float,
        data: Mapping[str, Domain],
        unit: str | Users = "record",
        public: Sequence[str] = (),
        values: Mapping[str, Any] | None = None,
        ledger: Ledger | None | str = "default",
    ):
        super().__init__(model, epsilon=epsilon, data=data, draws=1, unit=unit, public=public, ledger=ledger)
        self.draws = 0
        self._values = self._check_values(dict(values or {}))
        self.n = self._rows()
        if isinstance(unit, Users):
            unit.check_rows(self.n)
        if self._values:  # the ledger's name of the dataset is that of the values released
            from pymc_dp.preprocess import dataset_id

            self.dataset_id = dataset_id(self._values, self.domains, unit)
        self.blocks = _plan(self.net, self.n)
        size = _enumeration_size(self.blocks, self.n)
        if size > MAX_ENUMERATION:
            raise PathNotImplementedError(
                f"the exact noise-aware posterior of this network at n = {self.n} would enumerate {size} latent "
                f"count vectors (more than {MAX_ENUMERATION}); an approximate (CLT) posterior for large networks "
                "is not implemented. Use pymc_dp.laplace_updates, or fewer classes / values."
            )
        self.entries = self._entries()
        self.sensitivity, self.derivation = self._sensitivity()
        self.noise_scale = self.sensitivity / self.epsilon
        discrete_laplace(np.zeros(0, np.int64), self.noise_scale, sensitivity=self.sensitivity, epsilon=self.epsilon)
        self.released: dict[str, int] | None = None
        self._posterior_cache: _ExactPosterior | None = None

    # ------------------------------------------------------------------ data
    def _check_values(self, values: dict) -> dict:
        unknown = sorted(set(values) - set(self.net.containers))
        if unknown:
            raise DomainError(f"values= names {unknown}, which are not private containers the network reads.")
        if values and set(values) != set(self.net.containers):
            raise DomainError(
                f"values= must give every container the network reads ({sorted(self.net.containers)}), so that "
                "the rows of a record stay together."
            )
        if any(is_dask(v) for v in values.values()) and len(values) > 1:
            raise PathNotImplementedError(
                "values= with Dask collections is implemented for a network that reads one container; "
                "for several, pass NumPy arrays (they are counted in chunks of rows)."
            )
        for name, v in values.items():

            check_values(name, v, self.domains[name])
            shape = tuple(np.shape(v)[1:]) if not is_dask(v) else tuple(v.shape[1:])
            if shape != tuple(self.net.containers[name][1]):
                raise DomainError(f"values[{name!r}] has rows of shape {shape}; the model's container has {self.net.containers[name][1]}.")
        return values

    def _rows(self) -> int:
        if not self._values:
            return self.net.rows
        rows = {int(np.shape(v)[0]) if not is_dask(v) else int(v.shape[0]) for v in self._values.values()}
        if len(rows) != 1:
            raise DomainError(f"values= gives containers with different numbers of rows {sorted(rows)}.")
        return rows.pop()

    def _entries(self) -> list[tuple[str, int, int]]:
        """The released entries ``(param, cell, column)``, in release order."""
        released = {(c.param, c.cell): c.released for blk in self.blocks for c in ((blk.root,) if blk.root else ()) + blk.cells}
        out = []
        for name, p in self.net.params.items():
            for cell in range(p["cells"]):
                for col in released.get((name, cell), ()):
                    out.append((name, cell, col))
        return out

    def entry_names(self) -> list[str]:
        """Readable names of the released counts: ``theta[1, 4] ones``, ``p[2]`` (category 2)."""
        names = []
        for name, cell, col in self.entries:
            p = self.net.params[name]
            if p["family"] == "Beta":
                idx = np.unravel_index(cell, p["shape"]) if p["shape"] else ()
                at = f"[{', '.join(map(str, idx))}]" if idx else ""
                names.append(f"count {name}{at} {'ones' if col == 0 else 'zeros'}")
            else:
                idx = np.unravel_index(cell, p["shape"][:-1]) if len(p["shape"]) > 1 else ()
                at = f"[{', '.join(map(str, idx))}]" if idx else ""
                names.append(f"count {name}{at} category {col}")
        return names

    def true_counts(self, data: Mapping[str, Any]) -> np.ndarray:
        """The released entries' true counts on ``data`` (chunked; Dask block by block)."""
        def count(chunk: Mapping[str, np.ndarray]) -> np.ndarray:
            rows = len(next(iter(chunk.values())))
            net = dataclasses.replace(self.net, containers={k: (rows, s) for k, (_, s) in self.net.containers.items()}, rows=rows)
            c = net.counts(chunk)
            return np.array([c[name][cell, col] for name, cell, col in self.entries], dtype=np.int64)

        if len(data) == 1 and is_dask(next(iter(data.values()))):
            import dask
            import dask.array as da

            (name, v), = data.items()
            arr = v.to_dask_array(lengths=True) if hasattr(v, "to_dask_array") else da.asarray(v)
            parts = [dask.delayed(lambda blk: count({name: np.asarray(blk)}))(blk) for blk in arr.blocks.ravel()]
            return np.sum(dask.compute(*parts), axis=0).astype(np.int64)
        arrays = {k: np.asarray(v) for k, v in data.items()}
        n = len(next(iter(arrays.values())))
        total = np.zeros(len(self.entries), dtype=np.int64)
        for start in range(0, n, CHUNK_ROWS):
            total += count({k: a[start : start + CHUNK_ROWS] for k, a in arrays.items()})
        return total

    # ------------------------------------------------------------------ privacy map
    def _node_change(self, node: Node) -> int:
        """The L1 change of the released counts when one record's observation of ``node`` changes."""
        if not self.net.movable(node):
            return 0
        ones = {(c.param, c.cell) for blk in self.blocks for c in ((blk.root,) if blk.root else ()) + blk.cells if c.released == (0,)}
        return 1 if (node.param, node.table[0]) in ones and not node.parents else 2

    def _sensitivity(self) -> tuple[float, str]:
        net = self.net
        change = [self._node_change(nd) for nd in net.nodes]
        kind = describe_unit(self.unit)["kind"]
        if kind == "attribute":
            per = {c: sum(d for nd, d in zip(net.nodes, change) if net.reads(c, nd)) for c in net.containers}
            c = max(per, key=per.get)
            return float(per[c]), (
                f"unit=attribute: one container's value in one row; the nodes reading {c!r} move their counts by "
                f"at most {per[c]} in L1 (2 per node, 1 for a node whose cell releases its ones alone)"
            )
        m = self.rows_per_unit
        ones = sum(1 for d in change if d == 1)
        text = (f"a record is observed by {len(net.nodes)} node(s); changing it moves each node's count from one "
                f"entry to another (L1 2){f', or changes a released count of ones by 1 ({ones} node(s))' if ones else ''}: "
                f"Delta = {sum(change)}")
        if m > 1:
            text += f"; a user changes at most {m} records: Delta = {m} x {sum(change)}"
        return float(sum(change) * m), text

    # ------------------------------------------------------------------ release
    def _noisy(self, counts: np.ndarray, runs: int | None = None) -> np.ndarray:
        reps = counts if runs is None else np.broadcast_to(counts, (runs, counts.size))
        return discrete_laplace(reps.astype(np.int64), self.noise_scale)

    def release_statistics(self) -> dict[str, int]:
        """Charge ``epsilon`` and release the noisy counts (once; later calls return them)."""
        if self.released is not None:
            return dict(self.released)
        with charge(self):
            noisy = self._noisy(self.true_counts(self._values or self._data()))
            self.released = {k: int(v) for k, v in zip(self.entry_names(), noisy)}
        return dict(self.released)

    def exact_posterior(self) -> _ExactPosterior:
        """The exact posterior given the released counts (releases them first if needed)."""
        released = self.release_statistics()
        if self._posterior_cache is None:
            noisy = {k: np.full(p["prior"].shape, np.nan) for k, p in self.net.params.items()}
            for (name, cell, col), v in zip(self.entries, released.values()):
                noisy[name][cell, col] = v
            self._posterior_cache = _ExactPosterior(self.net, self.blocks, noisy, self.noise_scale, self.n)
        return self._posterior_cache

    def sample(self, draws: int = 1000, *, random_seed: Any = None, chains: int | None = None, **mcmc: Any) -> az.InferenceData:
        """Release the noisy counts (charging ``epsilon`` at the first call only), then make
        ``draws`` iid draws from the exact posterior given them.

        Parameters
        ----------
        draws : int
            Posterior draws (post-processing: any number, free).
        random_seed : int or Generator, optional
            Seeds the draws given the released counts only (OpenDP's noise cannot be seeded).
        chains : int, optional
            Layout of the draws as ``(chain, draw)``; must divide ``draws``.

        Returns
        -------
        az.InferenceData
            A ``posterior`` group and ``attrs["pymc_dp"]`` (public facts: the noisy counts, their
            noise and sensitivity, the law used, the ledger).
        """
        if mcmc:
            raise TypeError(
                f"NoisyCounts.sample draws iid from the exact posterior (no MCMC): {sorted(mcmc)} do not apply. "
                "Pass draws=, chains= and random_seed= only."
            )
        if isinstance(draws, bool) or not isinstance(draws, numbers.Integral) or draws < 1:
            raise ValueError(f"draws={draws!r} must be an integer >= 1")
        rng = exact_rng(random_seed)
        chains = check_chains(int(draws), chains)
        charged_now = self.released is None
        post = self.exact_posterior()
        self.draws = int(draws)
        posterior = draws_dataset(self.model, post.draw(int(draws), rng), chains)
        release = {"chains": chains, "draws_per_chain": int(draws) // chains, "charged": charged_now,
                   "ledger": ledger_state(self.ledger, self.dataset_id)}
        # the counts were charged when released; these draws are post-processing
        return publish(self, {"posterior": posterior}, {**self._public(), "release": release})

    def _public(self) -> dict:
        law = ("exact: the latent true counts are summed over (Dirichlet-multinomial given the class counts, "
               "the parameters integrated out), then Beta / Dirichlet draws given the counts; iid draws, no MCMC")
        return {
            **self._common_public(),
            "rows": self.n,
            "sensitivity": {"l1": self.sensitivity, "derivation": self.derivation},
            "noise": {
                "distribution": "discrete Laplace on integer counts",
                "sampler": "OpenDP make_laplace(vector_domain(atom_domain(T=int)), l1_distance(T=int))",
                "scale": self.noise_scale,
            },
            "released": {"statistics": dict(self.released or {})},
            "law": {"network": law},
        }

    # ------------------------------------------------------------------ audit protocol
    def audit_runs(self, data, runs, rng):
        """``runs`` noisy count vectors on ``data`` (the release before post-processing)."""
        return self._noisy(self.true_counts(data), int(runs))

    def audit_log_ratio(self, x, y):
        cx, cy, b = self.true_counts(x).astype(float), self.true_counts(y).astype(float), self.noise_scale

        return laplace_log_ratio(cx, cy, b)

    def audit_score(self, x, y):
        return float(np.sum(np.abs(self.true_counts(x) - self.true_counts(y))))

    def __repr__(self):
        return (f"<NoisyCounts ({self.epsilon:g}, 0)-DP, unit={describe_unit(self.unit)['kind']}, "
                f"{len(self.entries)} noisy counts, exact posterior>")
