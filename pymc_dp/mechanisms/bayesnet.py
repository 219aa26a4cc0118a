"""Read a PyMC model as a discrete Bayesian network (AAAI 2016, Example 1).

A network here is what the Laplace mechanisms of AAAI 2016 (Alg. 1 and 2) release: every
likelihood factor is a Bernoulli (or Categorical) observation of one private ``pm.Data``
container, whose probability is a Beta (or Dirichlet) free RV, possibly gathered by other
private containers (its parents): ``pm.Bernoulli("feat", p=theta[yd], observed=Xd)``.

A *record* is one row of every private container. Its scalar entries are the network's
*variables* (a container of shape ``(n, m)`` gives ``m`` variables); every scalar observation
in a row is a *node*, with the variables its parameter's gather reads as parents. The model's
structure (which variables index which parameter element) is found by evaluating the model on
synthetic data inside the declared domains -- never on the private data -- and checked on a
public-seeded random dataset.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Mapping

import numpy as np
from pytensor.graph.traversal import ancestors

from pymc_dp.domains import Domain, Integers
from pymc_dp.exceptions import DomainError, NotConjugateError, UnsupportedFactorError

__all__ = ["BayesNet", "Node", "Variable", "read_bayesnet"]

#: at most this many parent configurations per node (the gather table is enumerated)
MAX_CONFIGS = 4096
_PROBE_SEED = 20160212  # public: the random dataset the structure is checked on


@dataclass(frozen=True)
class Variable:
    """One scalar entry of a record: ``container[:, column]`` (flat column index)."""

    container: str
    column: int
    values: tuple[int, ...]

    @property
    def label(self) -> str:
        return self.container if self.column < 0 else f"{self.container}[{self.column}]"


@dataclass(frozen=True)
class Node:
    """One scalar observation per record: factor ``factor``, element ``column`` of a row.

    ``variable`` is the index of the observed variable, ``parents`` those of the variables its
    parameter reads, ``table`` maps each parent configuration (in ``itertools.product`` order
    of the parents' values) to the element (Beta) or row (Dirichlet) of ``param``.
    """

    factor: str
    column: int
    param: str
    variable: int
    parents: tuple[int, ...]
    table: tuple[int, ...]


@dataclass
class BayesNet:
    """The network of a model: variables, nodes and the Beta/Dirichlet parameters."""

    variables: list[Variable]
    nodes: list[Node]
    #: free RV name -> {"family", "shape", "cells", "prior" (cells x K), "K"}
    params: dict
    containers: dict  # container -> (rows, per-row shape)
    rows: int
    domains: dict

    # ------------------------------------------------------------------ data
    def records(self, data: Mapping[str, np.ndarray]) -> np.ndarray:
        """The ``(n, |variables|)`` integer matrix of the records of ``data``."""
        cols = []
        for name, (n, shape) in self.containers.items():
            arr = np.asarray(data[name])
            if arr.shape != (n, *shape):
                raise DomainError(f"{name!r} has shape {arr.shape}, the model's has {(n, *shape)}")
            cols.append(arr.reshape(n, -1).astype(np.int64))
        return np.concatenate(cols, axis=1)

    def node_cells(self, records: np.ndarray, node: Node) -> np.ndarray:
        """The parameter cell (element or row) each record's observation of ``node`` updates."""
        if not node.parents:
            return np.full(len(records), node.table[0], dtype=np.int64)
        code = np.zeros(len(records), dtype=np.int64)
        for p in node.parents:
            vals = np.asarray(self.variables[p].values)
            pos = np.searchsorted(vals, records[:, p])
            code = code * len(vals) + pos
        return np.asarray(node.table, dtype=np.int64)[code]

    def counts(self, data: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        """The posterior updates: per parameter an array ``(cells, K)`` of counts. For a Beta,
        column 0 counts the ones (``Δα``) and column 1 the zeros (``Δβ``); for a Dirichlet,
        column k counts the class k. **Reads the data it is given.**"""
        rec = self.records(data)
        out = {name: np.zeros((p["cells"], p["K"]), dtype=np.int64) for name, p in self.params.items()}
        for node in self.nodes:
            cells = self.node_cells(rec, node)
            x = rec[:, node.variable]
            col = (1 - x) if self.params[node.param]["family"] == "Beta" else x
            np.add.at(out[node.param], (cells, col), 1)
        return out

    def flat_counts(self, data: Mapping[str, np.ndarray]) -> np.ndarray:
        c = self.counts(data)
        return np.concatenate([c[k].reshape(-1) for k in self.params])

    def nodes_per_param(self) -> dict[str, int]:
        out = {k: 0 for k in self.params}
        for node in self.nodes:
            out[node.param] += 1
        return out

    def movable(self, node: Node) -> bool:
        """Whether a change of one record can move ``node``'s observation to another count cell."""
        if len(self.variables[node.variable].values) > 1:
            return True
        return len(set(node.table)) > 1

    def reads(self, container: str, node: Node) -> bool:
        return any(self.variables[v].container == container for v in (node.variable, *node.parents))

    def describe(self) -> list[dict]:
        return [
            {
                "factor": n.factor,
                "element": n.column,
                "observes": self.variables[n.variable].label,
                "parents": [self.variables[p].label for p in n.parents],
                "parameter": n.param,
            }
            for n in self.nodes
        ]


def _values(name: str, dom: Domain) -> tuple[int, ...]:
    if not isinstance(dom, Integers):
        raise DomainError(
            f"the domain of {name!r} is {dom}: a discrete Bayes network needs finite domains; declare "
            f"it pymc_dp.Binary() or pymc_dp.Integers(lo, hi)."
        )
    return tuple(range(dom.lo, dom.hi + 1))


def read_bayesnet(model, domains: Mapping[str, Domain], *, public=()) -> BayesNet:
    """The :class:`BayesNet` of ``model``, or a typed refusal naming the variable.

    Raises
    ------
    UnsupportedFactorError
        A prior is not Beta/Dirichlet, a factor is not Bernoulli/Categorical, an observation is
        not a whole private container, a parameter reads public data, or a gather table is too
        large.
    DomainError
        A container read has no finite (Binary / Integers) domain, or the containers have
        different numbers of rows.
    """
    from pymc_dp.exact import conjugate_plan

    try:
        plan = conjugate_plan(model, (), domains)
    except NotConjugateError as err:
        raise UnsupportedFactorError(
            f"this model is not a discrete Bayes network with Beta/Dirichlet priors: {err} "
            "Use pymc_dp.make_private for other models."
        ) from None
    private = {v: v.name for v in model.data_vars if v.name in domains}
    by_name = {v.name: v for v in model.data_vars}
    factors = [f for v in plan.parts for f in v.factors]
    for f in factors:
        if f.family not in ("Bernoulli", "Categorical"):
            raise UnsupportedFactorError(
                f"factor {f.name!r} is a {f.family} likelihood; the Laplace mechanisms on posterior updates "
                "support Bernoulli and Categorical observations only (one count per record and node). "
                "Use pymc_dp.make_private for this model."
            )
    params: dict = {}
    for var in plan.parts:
        if var.family not in ("Beta", "Dirichlet") or var.prior_op != var.family:
            raise UnsupportedFactorError(
                f"free RV {var.name!r} has a {var.prior_op} prior; the Laplace mechanisms on posterior "
                "updates need Beta or Dirichlet priors (counts are their sufficient statistics). "
                "Use pymc_dp.make_private for this model."
            )
        if var.family == "Beta":
            prior = np.stack([var.prior["alpha"].reshape(-1), var.prior["beta"].reshape(-1)], axis=1)
        else:
            prior = var.prior["a"].reshape(-1, var.shape[-1])
        params[var.name] = {"family": var.family, "shape": tuple(var.shape), "cells": prior.shape[0],
                            "K": prior.shape[1], "prior": np.asarray(prior, float)}
    read_by_factor = {}
    for obs in model.observed_RVs:
        if not any(f.name == obs.name for f in factors):
            found = sorted({private[a] for a in ancestors([model.rvs_to_values[obs], *obs.owner.inputs]) if a in private})
            if found:  # pragma: no cover - the planner refuses such factors first
                raise UnsupportedFactorError(f"factor {obs.name!r} reads private data {found} but no parameter.")
    for f in factors:
        child = sorted({private[a] for a in ancestors([f.value]) if a in private})
        data_in_params = {a.name for a in ancestors(list(f.params)) if a in set(model.data_vars)}
        parents = sorted(d for d in data_in_params if d in domains)
        public_read = sorted(d for d in data_in_params if d not in domains)
        if len(child) != 1:
            raise UnsupportedFactorError(
                f"factor {f.name!r} observes {child or 'no private container'}; each factor must observe "
                "exactly one private pm.Data container (observed=Xd)."
            )
        if public_read:
            raise UnsupportedFactorError(
                f"factor {f.name!r}: its parameter reads public data {public_read}; parents must be private "
                "containers with finite domains (declare them in data=)."
            )
        if child[0] in parents:
            raise UnsupportedFactorError(f"factor {f.name!r} reads its own observation {child[0]!r} in its parameter.")
        read_by_factor[f.name] = (child[0], parents)
    used = sorted({c for ch, ps in read_by_factor.values() for c in (ch, *ps)})
    if not used:
        raise UnsupportedFactorError("no Bernoulli/Categorical factor observes private data: nothing to release.")
    containers, variables, var_index = {}, [], {}
    for name in used:
        shape = tuple(np.shape(by_name[name].get_value()))
        if len(shape) == 0:
            raise DomainError(f"container {name!r} is a scalar; records are rows: give it a first axis of rows.")
        containers[name] = (shape[0], shape[1:])
        vals = _values(name, domains[name])
        size = int(np.prod(shape[1:], dtype=int))
        for j in range(size):
            var_index[(name, j)] = len(variables)
            variables.append(Variable(name, j if shape[1:] else -1, vals))
    rows = {n for n, _ in containers.values()}
    if len(rows) != 1:
        raise DomainError(
            f"the containers {used} have different numbers of rows "
            f"{ {k: v[0] for k, v in containers.items()} }; a record is one row of each."
        )
    n = rows.pop()
    net = BayesNet(variables, [], params, containers, n, {k: domains[k] for k in used})
    # ------------------------------------------------------------------ structure by probing
    base = {c: np.full((n, *shape), variables[var_index[(c, 0)]].values[0]) for c, (_, shape) in containers.items()}

    def evaluate(data):
        other = plan.with_data({c: v for c, v in data.items()})
        return {f.name: (np.asarray(f.index), np.asarray(f.observed)) for v in other.parts for f in v.factors}

    ev0 = evaluate(base)
    node_specs = []
    for f in factors:
        child, parents = read_by_factor[f.name]
        idx, obs = ev0[f.name]
        cshape = (n, *containers[child][1])
        if obs.shape != cshape:
            raise UnsupportedFactorError(
                f"factor {f.name!r} observes {child!r} with shape {obs.shape}, not the whole container "
                f"{cshape}; observe the whole container (observed={child}d), one node per element of a row."
            )
        idx = np.broadcast_to(idx, cshape)
        size = int(np.prod(cshape[1:], dtype=int))
        for j in range(size):
            node_specs.append((f, child, parents, j))
    # which parent variables move which node's cell
    deps: dict[tuple[str, int], set] = {(f.name, j): set() for f, _, _, j in node_specs}
    par_vars = sorted({var_index[(p, q)] for _, _, ps, _ in node_specs for p in ps for q in range(int(np.prod(containers[p][1], dtype=int)))})
    for v in par_vars:
        var = variables[v]
        for value in var.values[1:]:
            data = {c: a.copy() for c, a in base.items()}
            data[var.container].reshape(n, -1)[:, max(var.column, 0)] = value
            ev = evaluate(data)
            for f, child, parents, j in node_specs:
                if var.container not in parents:
                    continue
                a = np.broadcast_to(ev0[f.name][0], (n, *containers[child][1])).reshape(n, -1)[0, j]
                b = np.broadcast_to(ev[f.name][0], (n, *containers[child][1])).reshape(n, -1)[0, j]
                if a != b:
                    deps[(f.name, j)].add(v)
    nodes = []
    for f, child, parents, j in node_specs:
        pv = tuple(sorted(deps[(f.name, j)]))
        configs = list(itertools.product(*[variables[p].values for p in pv]))
        if len(configs) > MAX_CONFIGS:
            raise UnsupportedFactorError(
                f"factor {f.name!r} element {j}: {len(configs)} parent configurations (more than {MAX_CONFIGS})."
            )
        table = []
        for start in range(0, len(configs), n):
            chunk = configs[start : start + n]
            data = {c: a.copy() for c, a in base.items()}
            for r, conf in enumerate(chunk):
                for p, value in zip(pv, conf):
                    var = variables[p]
                    data[var.container].reshape(n, -1)[r, max(var.column, 0)] = value
            idx = np.broadcast_to(evaluate(data)[f.name][0], (n, *containers[child][1])).reshape(n, -1)
            table += [int(idx[r, j]) for r in range(len(chunk))]
        nodes.append(Node(f.name, j, f.rv_name, var_index[(child, j)], pv, tuple(table)))
    net.nodes = nodes
    _check_structure(net, plan)
    return net


def _check_structure(net: BayesNet, plan) -> None:
    """The counts of the network equal the conjugate posterior updates on a public random dataset."""
    rng = np.random.default_rng(_PROBE_SEED)
    data = {}
    for c, (n, shape) in net.containers.items():
        vals = np.asarray(_values(c, net.domains[c]))
        data[c] = rng.choice(vals, size=(n, *shape))
    mine = net.counts(data)
    post = plan.with_data(data).posteriors()
    for name, p in net.params.items():
        if p["family"] == "Beta":
            theirs = np.stack([post[name]["alpha"], post[name]["beta"]], axis=1) - p["prior"]
        else:
            theirs = post[name]["alpha"].reshape(p["cells"], p["K"]) - p["prior"]
        if not np.allclose(mine[name], theirs):
            raise UnsupportedFactorError(
                f"the gather of {name!r} depends on more than the parents found in one record (e.g. on "
                "other rows); the Laplace mechanisms need each record's observation to update one cell."
            )
