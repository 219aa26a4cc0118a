"""An independent refutation check of every certificate (docs/theory/refutation.md).

A certificate claims, per private likelihood factor ``j``, a constant ``L_j``: with ``bound =
"lipschitz"``, one record changes the factor's log-likelihood by at most ``L_j`` at every
parameter point of the truncated prior's support ``Theta_L``; with ``bound = "oscillation"``, the
change ``g(theta) = log f(x | theta) - log f(x' | theta)`` oscillates over ``Theta_L`` by at most
``2 L_j``. Those constants come from region rules, interval arithmetic and solvers. This module
searches for a counterexample with none of them: it compiles PyMC's own ``logp`` of the user's
factor, with the private ``pm.Data`` containers replaced by inputs, and evaluates it at public
parameter points of ``Theta_L`` (prior draws inside it or projected onto it, box corners and
faces, a few projected gradient-ascent steps on the change) and at public records of the declared
domains (their corners and random points). Everything it reads is public: the model, the
constraints, the domains, the public prior draws; never a private data value.

A measured change above the claim raises :class:`~pymc_dp.exceptions.CertificateRefutedError`
(a bug in pymc_dp); finding none proves nothing (a supremum may be attained away from every probed
point). ``refute(certification, effort="thorough")`` re-checks an issued certification with a
larger budget (the model fuzzer's call).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

import numpy as np
import pymc as pm
import pytensor
import pytensor.scalar as ps
import pytensor.tensor as pt
from pymc.distributions.distribution import SymbolicRandomVariable
from pymc.logprob.utils import ParameterValueError
from pytensor.compile.mode import Mode
from pytensor.graph.replace import clone_replace, vectorize_graph
from pytensor.graph.rewriting.basic import in2out, node_rewriter
from pytensor.graph.traversal import ancestors, graph_inputs, io_toposort
from pytensor.link.vm import VMLinker
from pytensor.tensor.basic import Alloc
from pytensor.tensor.elemwise import Elemwise
from pytensor.tensor.random.op import RandomVariable

from pymc_dp.constraints import box_of
from pymc_dp.exceptions import CertificateRefutedError
from pymc_dp.refutation_records import candidate_rows, corner_combos

__all__ = ["RefutationReport", "FactorRefutation", "refute", "refute_claims", "EFFORTS", "REFUTATION_SEED"]

#: public seed of the probe points and records (data-independent)
REFUTATION_SEED = 20240601



@node_rewriter([Elemwise])
def _binary_variadic(fgraph, node):
    """``a * b * c`` as ``(a * b) * c`` (and sums alike): NumPy has binary ufuncs only, so the Python
    linker evaluates a variadic product element by element in Python (thousands of times slower)."""
    scalar_op = node.op.scalar_op
    if not isinstance(scalar_op, (ps.Mul, ps.Add)) or len(node.inputs) <= 2:
        return None
    combine = pt.mul if isinstance(scalar_op, ps.Mul) else pt.add
    out = node.inputs[0]
    for x in node.inputs[1:]:
        out = combine(out, x)
    return [pt.cast(out, node.outputs[0].dtype)]


def _shapes_off_points(graph, thetas):
    """``graph`` with what makes vectorising over the points slow written otherwise, same values.

    Vectorising a node that reads a shape of the batched graph (``Shape``, ``Alloc``) folds that
    shape by importing the whole batched graph, a tenth of a second per node. A shape of a
    value that reads ``thetas`` (or of a random variable: a mixture's components, whose shapes
    only its logp reads) is replaced by the shape inferred once (when it reads no point),
    and ``alloc(v, *shape)`` of such a ``v`` by ``v + zeros(shape)``, which vectorises as any sum.
    The graph is rebuilt node by node in topological order, so that a replacement's own inputs
    are the rewritten ones (a logp ending in an ``Alloc`` keeps no ``Shape`` of the points)."""
    from pytensor.graph.fg import FunctionGraph
    from pytensor.tensor.rewriting.shape import ShapeFeature
    from pytensor.tensor.shape import Shape

    nodes = io_toposort(list(graph_inputs([graph])), [graph])
    reads = set(thetas)  # the variables that read a point (one pass, in topological order)
    for node in nodes:
        if any(x in reads for x in node.inputs):
            reads.update(node.outputs)
    shape_feature, memo = None, {}
    for node in nodes:
        inputs = [memo.get(x, x) for x in node.inputs]
        x = node.inputs[0] if node.inputs else None
        drawn = x is not None and x.owner is not None and isinstance(x.owner.op, RandomVariable)
        new = None
        if isinstance(node.op, Shape) and (drawn or x in reads) and None not in x.type.shape:
            new = pt.as_tensor_variable(np.array(x.type.shape, dtype="int64"))  # static: no inference
        elif isinstance(node.op, Shape) and (drawn or x in reads):  # a mixture reads its components' shapes
            if shape_feature is None:
                shape_feature = ShapeFeature()
                FunctionGraph(outputs=[graph], features=[shape_feature], clone=False)
            dims = shape_feature.shape_of.get(x)
            if dims and not any(d in reads or set(ancestors([d])) & reads for d in dims):
                new = pt.stack([pt.cast(d, "int64") for d in dims])
        elif isinstance(node.op, Alloc):
            value, *shape = inputs
            if node.inputs[0] in reads and not any(d in reads for d in node.inputs[1:]):
                zeros = pt.alloc(np.zeros((), dtype=node.outputs[0].dtype), *shape)
                new = pt.cast(value + zeros, node.outputs[0].dtype)
        if new is not None:
            memo[node.outputs[0]] = new
        elif any(a is not b for a, b in zip(inputs, node.inputs)):
            memo.update(zip(node.outputs, node.clone_with_new_inputs(inputs, strict=False).outputs))
    return memo.get(graph, graph)


#: the cheapest mode that works: no rewrites but the one above, Python thunks (no C compilation)
MODE = Mode(linker=VMLinker(c_thunks=False, use_cloop=False), optimizer=in2out(_binary_variadic))

#: a measured change refutes a claim ``L`` when it exceeds ``L (1 + RTOL) + ATOL`` plus the
#: rounding of the two log-densities it is the difference of
RTOL, ATOL = 1e-6, 1e-9


@dataclass(frozen=True)
class Effort:
    """How hard to look: parameter points, records per container, gradient-ascent steps."""

    draws: int  # prior draws inside the region or projected onto it
    corners: int  # box corners and faces
    records: int  # candidate rows per private container
    max_records: int  # record tuples (combinations of the containers' rows)
    ascent: int  # projected gradient steps from the worst point found
    coords: int  # at most this many parameter elements differenced per step (chosen at random)
    rows: int  # rows changed when the factor is not elementwise in rows


EFFORTS = {
    "standard": Effort(draws=16, corners=8, records=6, max_records=12, ascent=3, coords=16, rows=1),
    "thorough": Effort(draws=256, corners=128, records=24, max_records=96, ascent=25, coords=64, rows=3),
}


@dataclass(frozen=True)
class FactorRefutation:
    """What the check measured on one factor (numpydoc attributes as field comments)."""

    name: str  # the factor (observed RV)
    bound: str  # the claim's kind: "lipschitz" (the change) or "oscillation" (half its oscillation)
    claimed: float  # the certificate's L_j
    measured: float  # the largest change, or half oscillation, found
    points: int  # parameter points evaluated (the ascent's included)
    record_pairs: int  # neighbouring record pairs compared at each point
    elementwise: bool  # the log-density was found elementwise in rows (else whole sums were compared)

    @property
    def ratio(self) -> float:
        """``measured / claimed`` (0 when both are 0)."""
        if self.claimed > 0:
            return self.measured / self.claimed
        return 0.0 if self.measured <= ATOL else math.inf


@dataclass(frozen=True)
class RefutationReport:
    """The refutation check's result: nothing refuted (else it raised)."""

    factors: tuple[FactorRefutation, ...]  # the factors checked
    skipped: tuple[tuple[str, str], ...]  # factors not checked, with the reason
    effort: str  # "standard" or "thorough"
    seed: int  # the public seed of the probes
    seconds: float  # wall time of the check, compilation included

    @property
    def worst_ratio(self) -> float:
        """The largest ``measured / claimed`` over the factors checked (0 if none)."""
        return max((f.ratio for f in self.factors), default=0.0)

    def summary(self) -> str:
        """One sentence for the certificate."""
        parts = [f"{f.name}: {f.points} parameter points x {f.record_pairs} record pairs, "
                 f"largest measured/claimed {f.ratio:.3g}" for f in self.factors]
        skipped = "".join(f"; {name} not checked ({why})" for name, why in self.skipped)
        return (f"independent refutation check ({self.effort}, PyMC's logp of the model, not the rules): "
                f"{'; '.join(parts) or 'no factor checked'}{skipped}; found no counterexample (this proves "
                "nothing; it catches rules and interval arithmetic that under-bound, docs/theory/refutation.md)")


def refute(certification: Any, *, effort: str = "standard", seed: int = REFUTATION_SEED) -> RefutationReport:
    """Search for a counterexample to an issued certification's per-factor claims.

    Parameters
    ----------
    certification : Certification
        The result of :func:`pymc_dp.certify` (its public fields are read).
    effort : {"standard", "thorough"}
        The search budget (``"thorough"``: more points, records and ascent steps).
    seed : int
        Public seed of the probes.

    Returns
    -------
    RefutationReport

    Raises
    ------
    CertificateRefutedError
        A measured change exceeds a claimed constant: a bug in pymc_dp.
    """
    claims = {f.name: (f.lipschitz, f.bound) for f in certification.certificate.factors}
    return refute_claims(certification.user_model, certification.factors, claims, certification.constraints,
                         certification.domains, certification.unit, certification.context, effort=effort, seed=seed)


def refute_claims(
    model: pm.Model,
    factors: Sequence[Any],
    claims: Mapping[str, tuple[float, str]],
    constraints: Sequence[Any],
    domains: Mapping[str, Any],
    unit: Any,
    ctx: Any,
    *,
    effort: str = "standard",
    seed: int = REFUTATION_SEED,
) -> RefutationReport:
    """The check on a certification's parts (what :class:`~pymc_dp.certification.Certification` holds).

    Parameters
    ----------
    model : pm.Model
        The user's model.
    factors : sequence of Factor
        The private factors.
    claims : mapping of str to (float, str)
        Per factor, its claimed constant ``L_j`` and its kind (``"lipschitz"`` or ``"oscillation"``).
    constraints : sequence
        Every constraint of the truncation: ``Theta_L`` is their intersection with the support.
    domains : mapping of str to Domain
        The private containers' declared domains.
    unit : Unit or str
        The privacy unit: ``"attribute"`` changes one container's row, any other unit one record.
    ctx : RegionContext
        Its public prior draws, shapes and supports are read.
    effort, seed
        As :func:`refute`.

    Returns
    -------
    RefutationReport

    Raises
    ------
    CertificateRefutedError
        A measured change exceeds a claimed constant.
    """
    if effort not in EFFORTS:
        raise ValueError(f"effort={effort!r}: use one of {list(EFFORTS)}")
    t0 = time.perf_counter()
    budget = EFFORTS[effort]
    rng = np.random.default_rng(seed)
    region = _Region(constraints, ctx)
    checked, skipped = [], []
    for factor in factors:
        claimed, bound = claims[factor.name]
        probe = _FactorProbe.build(model, factor, domains, ctx.shapes)
        points = [] if isinstance(probe, str) else region.points(probe.theta_names, budget, rng)
        result = probe if isinstance(probe, str) else (
            probe.check(float(claimed), bound, points, region, budget, rng, bool(unit == "attribute")) if points
            else "no public parameter point of the region was found")
        if isinstance(result, str):  # said in the report, never passed silently
            skipped.append((factor.name, result))
        else:
            checked.append(result)
    return RefutationReport(tuple(checked), tuple(skipped), effort, int(seed), time.perf_counter() - t0)


# --------------------------------------------------------------------------- the region
class _Region:
    """``Theta_L``: the constraints' boxes (finite ends only), the other constraints as tests, the
    supports and the public prior draws."""

    def __init__(self, constraints, ctx):
        self.ctx = ctx
        self.box: dict[str, tuple[np.ndarray, np.ndarray]] = {}
        self.tests = []
        for c in constraints:
            shape = ctx.shapes.get(getattr(c, "var", None), ())
            found = box_of(c, shape, (-math.inf, math.inf)) if hasattr(c, "var") else None
            if found is None:
                self.tests.append(c)  # a norm ball or a potential: tested, projected where possible
                continue
            lo, hi = (np.broadcast_to(np.asarray(v, float), shape) for v in found)
            prev = self.box.get(c.var, (np.full(shape, -math.inf), np.full(shape, math.inf)))
            self.box[c.var] = (np.maximum(prev[0], lo), np.minimum(prev[1], hi))

    def support(self, name):
        lo, hi = self.ctx.support(name)
        return (-math.inf, math.inf) if math.isnan(lo) else (lo, hi)

    def project(self, pts: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        """Clip onto the boxes, scale into norm balls, and step off the support's ends."""
        out = {}
        for name, v in pts.items():
            v = np.array(v, dtype=float)
            if name in self.box:
                lo, hi = self.box[name]
                v = np.clip(v, lo, hi)
            out[name] = v
        for c in self.tests:
            if hasattr(c, "radius") and c.var in out:
                norm = c.norm(out[c.var])
                scale = np.where(norm > c.radius, c.radius / np.where(norm > 0, norm, 1.0), 1.0)
                out[c.var] = out[c.var] * scale.reshape((-1,) + (1,) * (out[c.var].ndim - 1))
        for name, v in out.items():
            lo_s, hi_s = self.support(name)
            # the support is open at a finite end (a log or logit transform): probe just inside it
            with np.errstate(invalid="ignore", over="ignore"):
                if math.isfinite(lo_s):
                    v = np.maximum(v, lo_s + 1e-9 * max(1.0, abs(lo_s)))
                if math.isfinite(hi_s):
                    v = np.minimum(v, hi_s - 1e-9 * max(1.0, abs(hi_s)))
            rv = self.ctx.free[name]
            out[name] = np.round(v).astype(rv.dtype) if rv.dtype.startswith("int") else v
        return out

    def inside(self, pts: dict[str, np.ndarray]) -> np.ndarray:
        n = len(next(iter(pts.values())))
        ok = np.ones(n, bool)
        for name, (lo, hi) in self.box.items():
            if name in pts:
                v = pts[name].reshape(n, -1)
                ok &= np.all((v >= lo.reshape(-1)) & (v <= hi.reshape(-1)), axis=1)
        for c in self.tests:
            needs = [getattr(c, "var", None)] if hasattr(c, "var") else list(getattr(c, "vars", ()))
            if all(v in pts for v in needs):
                with np.errstate(all="ignore"):
                    ok &= np.asarray(c.contains(pts), bool)
        return ok

    def points(self, names: Sequence[str], budget: Effort, rng) -> list[dict[str, np.ndarray]]:
        """Public points of the region: prior draws inside it, draws projected onto it, box corners and
        faces. Every free RV of the model is given (potentials may read others)."""
        draws = self.ctx.draws
        if not draws:
            return [{}]
        total = len(next(iter(draws.values())))
        idx = rng.permutation(total)[: max(4 * (budget.draws + budget.corners), 64)]
        base = {k: np.asarray(v)[idx] for k, v in draws.items()}
        inside = self.inside(base)
        chosen = {k: v[inside][: budget.draws // 2] for k, v in base.items()}
        projected = self.project({k: v[: budget.draws] for k, v in base.items()})
        corners = {k: v[budget.draws: budget.draws + budget.corners].astype(float) for k, v in base.items()}
        for j in range(len(next(iter(corners.values())))):
            mode = j % 3  # 0: a random corner; 1: all lower ends, 2: all upper ends, each with a random face
            for name in names:
                if name not in self.box:
                    continue
                lo, hi = self.box[name]
                pick = rng.random(lo.shape) < 0.5 if mode == 0 else np.full(lo.shape, mode == 1)
                end = np.where(pick, lo, hi)
                use = np.isfinite(end) & (rng.random(lo.shape) < (0.9 if mode == 0 else 1.0))
                corners[name][j] = np.where(use, end, corners[name][j])
        corners = self.project(corners)
        pts = [chosen, projected, corners]
        for c in self.tests:  # a potential's public start point, the other RVs at a prior draw
            start = getattr(c, "start", None)
            if start:
                one = {k: v[:1].copy() for k, v in base.items()}
                for k, v in start.items():
                    if k in one:
                        one[k][0] = v
                pts.append(one)
        merged = {k: np.concatenate([p[k] for p in pts]) for k in base}
        keep = self.inside(merged)
        merged = {k: v[keep] for k, v in merged.items()}
        n = len(next(iter(merged.values())))
        return [{k: v[i] for k, v in merged.items()} for i in range(n)]


# --------------------------------------------------------------------------- one factor
@dataclass
class _FactorProbe:
    """PyMC's logp of one factor, compiled once: a batch of parameter points and the private
    containers are its inputs; it returns each point's per-row log-densities."""

    factor: Any
    fn: Any
    theta_names: list[str]
    grad_names: list[str]  # the continuous free RVs: the ascent's coordinates
    containers: list[str]
    shapes: dict[str, tuple]  # the containers' shapes and dtypes: public (their values are never read)
    data_dtypes: dict[str, str]
    domains: Mapping[str, Any]
    dtypes: dict[str, str]
    batched: bool  # False: the graph did not vectorise over points, one point per call
    rng: Any = None

    @classmethod
    def build(cls, model, factor, domains, shapes) -> _FactorProbe | str:
        """The probe, or the reason the factor cannot be checked."""
        containers = {v: v.name for v in model.data_vars if v.name in factor.reads}
        unknown = [n for n in containers.values() if n not in domains]
        if unknown:
            return f"containers {unknown} have no domain"
        holders = {v: v.type() for v in containers}
        free = {r.name: r for r in model.free_RVs}
        # static shapes (public: the prior draws'), so that shapes fold to constants, never read a point
        thetas = {name: pt.tensor(dtype=r.dtype, shape=tuple(int(d) for d in shapes[name]), name=name)
                  if name in shapes else r.type() for name, r in free.items()}
        # the inputs go into the factor's own graph before PyMC derives its logp (which may clone
        # the graph, e.g. a Censored one's inner distribution); another factor's observed RV in
        # this one's parameters is its observed value
        obs = {o: model.rvs_to_values[o] for o in model.observed_RVs if o is not factor.rv}
        rv, value = clone_replace([factor.rv, model.rvs_to_values[factor.rv]], replace=obs) if obs else (
            factor.rv, model.rvs_to_values[factor.rv])
        rv, value = clone_replace([rv, value], replace={**holders, **{free[n]: t for n, t in thetas.items()}})
        logp = pm.logp(rv, value, warn_rvs=False)
        logp = _shapes_off_points(logp, list(thetas.values()))
        anc = set(ancestors([logp]))
        if any(v.owner is not None and isinstance(v.owner.op, (RandomVariable, SymbolicRandomVariable)) for v in anc):
            return "its logp graph still holds a random variable after the free RVs were replaced"
        used = [n for n, t in thetas.items() if t in anc]
        batch = {n: pt.tensor(dtype=free[n].dtype, shape=(None, *thetas[n].type.shape), name=n) for n in used}
        try:  # one call evaluates every point
            vlp, batched = vectorize_graph(logp, replace={thetas[n]: batch[n] for n in used}), True
        except Exception:  # noqa: BLE001  (an Op without a vectorised form: one point per call)
            vlp, batched = clone_replace(logp, replace={thetas[n]: batch[n][0] for n in used})[None], False
        rows = vlp.sum(axis=tuple(range(2, vlp.ndim))) if vlp.ndim > 2 else (vlp if vlp.ndim == 2 else vlp[:, None])
        grad_names = [n for n in used if free[n].dtype.startswith("float")]  # the ascent's coordinates
        inputs = [batch[n] for n in used] + [holders[v] for v in containers]
        fn = pytensor.function(inputs, rows, mode=MODE, on_unused_input="ignore")
        shapes = {v.name: tuple(v.type.shape) if v.owner is None and not hasattr(v, "get_value")
                  else np.shape(v.get_value(borrow=True)) for v in containers}
        return cls(factor, fn, used, grad_names, list(containers.values()), shapes,
                   {v.name: v.dtype for v in containers}, domains, {n: free[n].dtype for n in used}, batched)

    # ------------------------------------------------------------------ evaluation
    def rows_of(self, name) -> int:
        shape = self.shapes[name]
        return shape[0] if shape else 1

    def fill(self, record: dict[str, np.ndarray], base: dict[str, np.ndarray] | None = None,
             row: int | None = None) -> dict[str, np.ndarray]:
        """Containers holding ``record`` in every row, or ``base`` with ``record`` in ``row``."""
        out = {}
        for name in self.containers:
            shape, dtype = self.shapes[name], self.data_dtypes[name]
            if base is None or not shape:
                out[name] = np.broadcast_to(np.asarray(record[name], dtype), shape).copy() if shape else np.asarray(
                    record[name], dtype)
            else:
                out[name] = base[name].copy()
                out[name][row] = record[name]
        return out

    def call(self, thetas: list[dict], data: dict) -> list[np.ndarray]:
        """``[(points, rows) log-densities]`` of the points on the containers ``data``."""
        if not self.batched and len(thetas) > 1:
            return [np.concatenate([self.call([t], data)[0] for t in thetas])]
        args = [np.stack([np.asarray(t[n], dtype=self.dtypes[n]) for t in thetas]) for n in self.theta_names]
        args += [data[n] for n in self.containers]
        with np.errstate(all="ignore"):  # a NaN or infinite log-density is judged, not warned about
            return [np.asarray(self.fn(*args), dtype=float)]

    def valid(self, points: list[dict], data: dict) -> list[dict]:
        """The points where PyMC's logp accepts the parameters (others lie outside the model's
        support, e.g. unordered cutpoints drawn without their transform: not in ``Theta_L``).
        A refused batch is halved until the refused points are found: few calls for few of them."""
        if not points:
            return []
        try:
            self.call(points, data)
            return points
        except ParameterValueError:
            if len(points) == 1:
                return []
        half = len(points) // 2
        return self.valid(points[:half], data) + self.valid(points[half:], data)

    # ------------------------------------------------------------------ the search
    def records(self, budget: Effort, rng, attribute: bool) -> tuple[list[dict], list[list[int]]] | str:
        """Candidate records and the groups within which any two are neighbours."""
        cands = {}
        for name in self.containers:
            rows = candidate_rows(self.domains[name], self.shapes[name][1:], budget.records, rng)
            if rows is None:
                return f"the domain {self.domains[name]} of {name!r} is not one this check knows"
            cands[name] = rows
        sizes = [len(cands[n]) for n in self.containers]
        records, groups = [], []
        if not attribute or len(self.containers) == 1:
            total = int(np.prod(sizes))
            combos = (np.array(np.unravel_index(np.arange(total), sizes)).T if total <= budget.max_records
                      else corner_combos(sizes, budget.max_records, rng))
            records = [{n: cands[n][i] for n, i in zip(self.containers, c)} for c in combos]
            groups = [list(range(len(records)))]
        else:  # one container's row changes, the others' rows fixed
            for name in self.containers:
                for k in range(2):  # the others at their upper ends (row 1, as corner_combos), then at random
                    fixed = {n: cands[n][min(1, len(cands[n]) - 1) if k == 0 else rng.integers(len(cands[n]))]
                             for n in self.containers}
                    start = len(records)
                    records.extend({**fixed, name: row} for row in cands[name])
                    groups.append(list(range(start, len(records))))
        return records, groups

    def elementwise(self, theta, records) -> bool:
        """Whether a change of one row changes only that row's terms (checked at two rows)."""
        n_rows = {self.rows_of(n) for n in self.containers}
        if len(n_rows) != 1 or any(not self.shapes[n] for n in self.containers):
            return False
        n = n_rows.pop()
        base = self.fill(records[0])
        ref = self.call([theta], base)[0][0]
        if ref.shape != (n,):
            return False
        for row in {0, n // 2}:
            changed = self.call([theta], self.fill(records[-1], base, row))[0][0]
            others = np.delete(np.arange(n), row)
            same = (changed[others] == ref[others]) | (np.isnan(changed[others]) & np.isnan(ref[others]))
            if not np.all(same):
                return False
        return True

    def check(self, claimed, bound, points, region, budget, rng, attribute) -> FactorRefutation | str:
        """Evaluate the factor on every point and record, ascend from the worst, judge; or why not."""
        found = self.records(budget, rng, attribute)
        if isinstance(found, str):
            return found
        records, groups = found
        points[:] = self.valid(points, self.fill(records[0]))
        if not points:
            return "PyMC's logp rejects every probed parameter point as outside the model's support"
        elementwise = self.elementwise(points[0], records)
        rows = None if elementwise else self._probe_rows(budget, rng)
        base = None if elementwise else self._random_base(records, rng)
        if elementwise:  # (points, records, rows): each row's terms
            table = np.stack([self.call(points, self.fill(rec))[0] for rec in records], axis=1)
        else:  # (points, records, changed rows): the factor's whole sum
            table = np.stack([np.stack([self.call(points, self.fill(rec, base, r))[0].sum(axis=1) for r in rows], axis=1)
                              for rec in records], axis=1)
        measured, where = _worst(table, groups, bound)
        evaluated = len(points)
        self.rng = rng
        if budget.ascent and self.grad_names and where is not None and not math.isnan(measured):
            extra, steps = self._ascend(table, where, points, records, base, rows, elementwise, region, budget)
            evaluated += steps
            if not extra[0] <= measured:
                measured, where = extra
        pairs = sum(len(g) * (len(g) - 1) // 2 for g in groups)
        self._judge(claimed, bound, measured, where, records, points, table, rows)
        return FactorRefutation(self.factor.name, bound, claimed, float(measured), evaluated, pairs, elementwise)

    def _random_base(self, records, rng) -> dict[str, np.ndarray]:
        """Containers whose rows hold random candidate records: any values the domain allows."""
        base = {}
        for name in self.containers:
            shape, dtype = self.shapes[name], self.data_dtypes[name]
            pick = rng.integers(len(records), size=shape[0] if shape else 1)
            stacked = np.stack([records[int(k)][name] for k in pick])
            base[name] = (stacked if shape else stacked[0]).astype(dtype).reshape(shape)
        return base

    def _probe_rows(self, budget, rng) -> list[int]:
        n = self.rows_of(self.containers[0])
        return sorted({0, n - 1, *rng.integers(0, n, budget.rows).tolist()})

    def _ascend(self, table, where, points, records, base, rows, elementwise, region, budget):
        """Projected gradient steps on the worst pair's change, from the worst point(s) found.

        The gradient is PyMC's logp differenced centrally along each continuous element (one
        batched call per record), and each step tries several lengths at once: cheaper than a
        symbolic gradient's graph, and the same direction up to ``O(h^2)``."""
        kind, a, b, row, p_hi, p_lo = where
        row_index = row if elementwise else rows[row]
        da = self.fill(records[a]) if elementwise else self.fill(records[a], base, row_index)
        db = self.fill(records[b]) if elementwise else self.fill(records[b], base, row_index)

        def change(thetas):  # g at each point (NaN where PyMC's logp refuses the parameters)
            kept = self.valid(thetas, da)
            if not kept:
                return np.full(len(thetas), np.nan), kept
            ra, rb = self.call(kept, da)[0], self.call(kept, db)[0]
            with np.errstate(invalid="ignore"):
                return (ra[:, row_index] - rb[:, row_index]) if elementwise else (ra.sum(1) - rb.sum(1)), kept

        def scale_of(name, value):  # a step relative to the box's width, else to the value
            scale = np.abs(value) + 1.0
            if name in region.box:
                width = region.box[name][1] - region.box[name][0]
                scale = np.where(np.isfinite(width), width, scale)
            return scale

        def moved(theta, steps):  # projected points theta + step, those inside the region
            trial = [{**theta, **{n: np.asarray(theta[n], float) + s[n] for n in s}} for s in steps]
            stacked = {k: np.stack([np.asarray(t[k]) for t in trial]) for k in theta}
            stacked = region.project(stacked)
            ok = region.inside(stacked)
            return [{k: v[i] for k, v in stacked.items()} for i in range(len(trial)) if ok[i]]

        best, evaluated = {}, 0
        for p, sign in ([(p_hi, 1.0)] if kind == "lipschitz" else [(p_hi, 1.0), (p_lo, -1.0)]):
            theta = dict(points[p])
            g = float(table[p, a, row] - table[p, b, row])
            if kind == "lipschitz":
                sign = 1.0 if g >= 0 else -1.0
            for _ in range(budget.ascent):
                if not math.isfinite(g):
                    break
                # central differences along at most ``budget.coords`` random elements
                coords = [(n, i) for n in self.grad_names for i in range(int(np.size(theta[n])))]
                if len(coords) > budget.coords:
                    pick = np.sort(self.rng.choice(len(coords), budget.coords, replace=False))
                    coords = [coords[int(i)] for i in pick]
                steps = []
                for n, i in coords:
                    value = np.asarray(theta[n], float)
                    h = np.zeros(value.shape)
                    h.reshape(-1)[i] = 1e-5 * np.broadcast_to(scale_of(n, value), value.shape).reshape(-1)[i]
                    steps += [{n: h}, {n: -h}]
                probes = [{**theta, **{n: np.asarray(theta[n], float) + s[n] for n in s}} for s in steps]
                try:
                    values, kept = change(probes)
                except ParameterValueError:
                    break
                evaluated += len(probes)
                if len(kept) != len(probes):
                    break  # an element at the support's edge: no central difference
                grad = {n: np.zeros(np.shape(theta[n])) for n in self.grad_names}
                for k, (n, i) in enumerate(coords):
                    hi_, lo_ = probes[2 * k][n].reshape(-1)[i], probes[2 * k + 1][n].reshape(-1)[i]
                    with np.errstate(all="ignore"):  # inf - inf or a zero step: NaN, which stops the ascent
                        grad[n].reshape(-1)[i] = (values[2 * k] - values[2 * k + 1]) / (hi_ - lo_) if hi_ != lo_ else np.nan
                if not all(np.all(np.isfinite(v)) for v in grad.values()):
                    break
                with np.errstate(all="ignore"):
                    direction = {n: sign * scale_of(n, np.asarray(theta[n], float)) * v / (np.sqrt(np.sum(v**2)) or 1.0)
                                 for n, v in grad.items()}
                candidates = moved(theta, [{n: alpha * d for n, d in direction.items()}
                                           for alpha in (1.0, 0.3, 0.1, 0.03, 0.01, 0.003)])
                if not candidates:
                    break
                values, kept = change(candidates)
                evaluated += len(candidates)
                if not kept:  # PyMC's logp refuses every step's parameters: nothing to compare (seed 188)
                    break
                scored = np.where(np.isnan(values), np.inf, sign * values)  # NaN: the worst there is
                k = int(np.argmax(scored))
                if not (scored[k] > sign * g):
                    break
                theta, g = kept[k], float(values[k])
            points.append(theta)
            best[sign] = (g, len(points) - 1)
        if kind == "lipschitz":
            g, index = next(iter(best.values()))
            return (abs(g), ("lipschitz", a, b, row, index, None)), evaluated
        (g_hi, i_hi), (g_lo, i_lo) = best[1.0], best[-1.0]
        with np.errstate(invalid="ignore"):
            hi = max(g_hi, table[p_hi, a, row] - table[p_hi, b, row])
            lo = min(g_lo, table[p_lo, a, row] - table[p_lo, b, row])
        if math.isnan(g_hi) or math.isnan(g_lo):  # fail closed
            hi = math.nan
        return (0.5 * (hi - lo), ("oscillation", a, b, row, i_hi, i_lo)), evaluated

    def _judge(self, claimed, bound, measured, where, records, points, table, rows):
        """Raise on a counterexample: a change above the claim, or NaN (fail closed)."""
        if where is None:
            return
        kind, a, b, row, p_hi, p_lo = where
        pair = table[:, [a, b], row]  # the size of the log-densities the change is a difference of
        scale = float(np.max(np.abs(pair[np.isfinite(pair)]), initial=0.0))
        limit = claimed * (1 + RTOL) + ATOL + 64 * np.finfo(float).eps * 2 * scale * (2 if bound == "oscillation" else 1)
        if measured <= limit:
            return
        row = row if rows is None else rows[row]
        theta = {k: _short(v) for k, v in points[p_hi].items() if k in self.theta_names}
        other = "" if p_lo is None else (
            f" and the parameter point {{{', '.join(f'{k}={_short(v)}' for k, v in points[p_lo].items() if k in self.theta_names)}}}")
        what = ("one record's change of the log-likelihood" if bound == "lipschitz"
                else "half the oscillation over the region of one record's change of the log-likelihood")
        raise CertificateRefutedError(
            f"certificate refuted: factor {self.factor.name!r} ({self.factor.family}) claims {what} at most "
            f"L = {claimed:.6g}, but PyMC's logp of the model measures {measured:.6g} at the parameter point "
            f"{{{', '.join(f'{k}={v}' for k, v in theta.items())}}}{other}, row {row}, between the records "
            f"{_record_text(records[a])} and {_record_text(records[b])}. Inside certify this refusal means nothing was "
            "certified or charged; on a certificate already issued (refute(cert)), stop releasing under it. This is "
            "a bug in pymc_dp (its rules or interval arithmetic under-bound this factor); please report it with "
            "the model.",
            factor=self.factor.name, point=theta, records=(records[a], records[b]), claimed=claimed, measured=measured)


def _worst(table: np.ndarray, groups: list[list[int]], bound: str):
    """The largest change (or half oscillation) in a (points, records, rows) table, with where.

    NaN anywhere in a compared pair is returned as NaN (a counterexample: fail closed), and so is
    an infinite change. A record whose log-density in a row is ``-inf`` at every point is outside
    the model's support there (a count above that row's public number of trials): no dataset
    holding it has a posterior, so it is no neighbour there, and is left out of that row."""
    impossible = np.all(table == -np.inf, axis=0)  # (records, rows)
    best, where = -math.inf, None
    for group in groups:
        sub = table[:, group, :]
        out = impossible[group, :][None]  # (1, records, rows)
        if bound == "lipschitz":
            with np.errstate(invalid="ignore"):
                spread = np.max(np.where(out, -np.inf, sub), axis=1) - np.min(np.where(out, np.inf, sub), axis=1)
            nan = np.isnan(spread)
            flat = np.where(nan, math.inf, spread)
            p, r = np.unravel_index(int(np.argmax(flat)), flat.shape)
            value = math.nan if nan[p, r] else float(spread[p, r])
            if value > best or math.isnan(value):
                col = np.where(out[0, :, r], np.nan, sub[p, :, r])
                a, b = group[int(np.nanargmax(col))], group[int(np.nanargmin(col))]
                if math.isnan(value):
                    a, b = group[int(np.argmax(np.isnan(sub[p, :, r]) & ~out[0, :, r]))], group[0]
                best, where = value, ("lipschitz", a, b, int(r), int(p), None)
                if math.isnan(value):
                    return best, where
        else:
            for i, a in enumerate(group):
                with np.errstate(invalid="ignore"):
                    g = sub[:, i: i + 1, :] - sub  # (points, records, rows)
                    osc = 0.5 * (np.max(g, axis=0) - np.min(g, axis=0))
                osc = np.where(out[0] | out[0, i: i + 1, :], -np.inf, osc)  # pairs with an impossible record
                nan = np.isnan(osc)
                flat = np.where(nan, math.inf, osc)
                k, r = np.unravel_index(int(np.argmax(flat)), flat.shape)
                value = math.nan if nan[k, r] else float(osc[k, r])
                if value > best or math.isnan(value):
                    col = np.nan_to_num(g[:, k, r], nan=math.inf)
                    best, where = value, ("oscillation", a, group[int(k)], int(r), int(np.argmax(col)),
                                          int(np.argmin(np.nan_to_num(g[:, k, r], nan=-math.inf))))
                    if math.isnan(value):
                        return best, where
    return best, where


def _short(v) -> Any:
    a = np.asarray(v)
    if a.size == 1:
        return float(a.reshape(-1)[0]) if a.dtype.kind == "f" else a.reshape(-1)[0].item()
    flat = [round(float(x), 6) for x in a.reshape(-1)[:8]]
    return flat + (["..."] if a.size > 8 else [])


def _record_text(record: dict) -> str:
    return "{" + ", ".join(f"{k}={_short(v)}" for k, v in record.items()) + "}"
