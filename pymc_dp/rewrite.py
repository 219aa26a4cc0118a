"""Rewrite a PyMC model so that its prior is restricted to Theta_L.

As PyMC's own model transforms do (``do``, ``observe``, ``change_value_transforms``), the model
is turned into a ``FunctionGraph`` (:func:`pymc.model.fgraph.fgraph_from_model`), nodes are
replaced, and a *new* model is built; the user's model is never mutated.

* :class:`~pymc_dp.truncate.IntervalConstraint` -- the free RV's value transform becomes an
  ``Interval(lower, upper)`` transform. The sampler then only visits the interval, and the
  posterior is the original posterior restricted to it (the prior is restricted jointly, not
  renormalised per conditional).
* :class:`~pymc_dp.truncate.NormBallConstraint` -- a polar reparametrisation
  (docs/theory/truncation.md#norm-balls): ``w = rho * u`` with ``u = z / ||z||`` (``z`` standard
  Normal for l2, standard Laplace for l1, whose normalisation has the cone measure),
  ``rho = B * sigmoid(t)`` with ``t`` flat, and a
  ``Potential`` carrying the prior density of ``w``, the polar Jacobian ``(d - 1) ln rho`` and
  ``ln |d rho / d t|``. A hard wall on ``||w||`` makes NUTS diverge; this samples cleanly.
* :class:`~pymc_dp.truncate.PotentialConstraint` -- a ``Potential`` that is 0 inside and -inf
  outside, built from the factor's own Lipschitz expression.
"""

from __future__ import annotations

import contextlib
import math

import numpy as np
import pymc as pm
import pytensor.tensor as pt
from pymc.distributions.transforms import Interval
from pymc.logprob.transforms import Transform
from pymc.model.fgraph import (
    ModelFreeRV,
    fgraph_from_model,
    model_deterministic,
    model_free_rv,
    model_from_fgraph,
    model_potential,
)
from pymc.pytensorf import toposort_replace
from pytensor.graph.basic import clone_get_equiv
from pytensor.graph.traversal import ancestors

from pymc_dp.constraints import NormBallConstraint, PotentialConstraint, box_of
from pymc_dp.exceptions import RegionNotImplementedError, UnsupportedFactorError

__all__ = ["rewrite_model", "rebuild_model", "without_initvals", "AUX_SUFFIXES"]

#: names of the auxiliary variables the polar reparametrisation adds (never released)
AUX_SUFFIXES = ("__dp_direction", "__dp_radius", "__dp_polar")


def rebuild_model(fgraph) -> pm.Model:
    """``model_from_fgraph(fgraph, mutate_fgraph=True)``, with every Deterministic under its own name.

    PyMC 5.28 rebuilds a ``pm.Deterministic`` that wraps another Deterministic (``b =
    pm.Deterministic("b", a)``, or a transpose that is a no-op) as the *same* variable as the
    inner one: both names then point to one variable whose ``name`` is the inner one's, and
    ``pm.sample`` returns one of them (reproduces in plain PyMC). Each name that shares its
    variable gets a distinct copy (a ``ViewOp``: same values), so that every Deterministic of the
    user's model is sampled and released under its name.
    """
    from pytensor.compile.ops import ViewOp

    model = model_from_fgraph(fgraph, mutate_fgraph=True)
    dets = {id(d): d for d in model.deterministics}
    names_of: dict[int, list[str]] = {}
    for name, var in model.named_vars.items():
        if id(var) in dets:
            names_of.setdefault(id(var), []).append(name)
    fixed = []
    for key, names in names_of.items():
        var = dets[key]
        keep = var.name if var.name in names else names[0]
        var.name = keep
        fixed.append(var)
        for name in names:
            if name == keep:
                continue
            copy = ViewOp()(var)
            copy.name = name
            model.named_vars[name] = copy
            fixed.append(copy)
    if len(fixed) != len(model.deterministics) or any(a is not b for a, b in zip(fixed, model.deterministics)):
        # model.deterministics is a PyMC treelist without slice assignment
        while len(model.deterministics):
            model.deterministics.pop()
        model.deterministics.extend(fixed)
    return model


@contextlib.contextmanager
def without_initvals(model):
    """``fgraph_from_model`` refuses user initvals; lift them for the conversion and put them back."""
    saved = dict(model.rvs_to_initial_values)
    try:
        for rv in saved:
            model.rvs_to_initial_values[rv] = None
        yield saved
    finally:
        model.rvs_to_initial_values.update(saved)


def rewrite_model(model, constraints, ctx, factor_lipschitz: dict) -> tuple[pm.Model, dict]:
    """A new model whose free RVs satisfy ``constraints``, and initial values inside them.

    Parameters
    ----------
    model : pm.Model
        The user's model (read only).
    constraints : list
        Constraints from :mod:`pymc_dp.truncate`.
    ctx : RegionContext
        Supports and prior draws of the free RVs.
    factor_lipschitz : dict
        Factor name -> its per-record Lipschitz expression in ``model``'s variables (for
        potentials).
    """
    with without_initvals(model) as user_initvals:
        fgraph, memo = fgraph_from_model(model)
    nodes = {
        node.outputs[0].name: node for node in fgraph.apply_nodes if isinstance(node.op, ModelFreeRV)
    }
    intervals: dict[str, tuple] = {}
    balls: dict[str, NormBallConstraint] = {}
    potentials: list[PotentialConstraint] = []
    for c in constraints:
        shape = ctx.shapes.get(getattr(c, "var", None), ())
        support = ctx.support(c.var) if hasattr(c, "var") else (-math.inf, math.inf)
        if math.isnan(support[0]):  # an ordered vector: its elements are real
            support = (-math.inf, math.inf)
        box = box_of(c, shape, support)  # registered per constraint kind (pymc_dp/constraints.py)
        if box is not None:
            lo0, hi0 = intervals.get(c.var, (np.full(shape, support[0]), np.full(shape, support[1])))
            intervals[c.var] = (np.maximum(lo0, box[0]), np.minimum(hi0, box[1]))
        elif isinstance(c, NormBallConstraint):
            prev = balls.get(c.var)
            if prev is not None and prev.weights != c.weights:
                raise RegionNotImplementedError(
                    f"two different norm balls on {c.var!r}; pymc_dp cannot intersect them yet. Give {c.var!r} one "
                    "norm-ball bound (bounds=), or truncate it to a box instead."
                )
            if prev is None or c.radius < prev.radius:
                balls[c.var] = c
        else:
            potentials.append(c)
    both = set(intervals) & set(balls)
    if both:
        raise RegionNotImplementedError(
            f"{sorted(both)} would need both an interval and a norm ball, which pymc_dp cannot carry in one "
            "transform yet; bound each of them by one kind only (bounds=: a box, or a norm ball).")

    replacements = []
    initvals: dict[str, np.ndarray] = {}
    extra_outputs = []
    for name, (lo, hi) in intervals.items():
        node = nodes[name]
        rv, value, *dims = node.inputs
        new_value = rv.type()
        new_value.name = f"{name}_interval__"
        lower, upper = _interval_end(lo), _interval_end(hi)
        if lower is None and upper is None:  # the whole support: nothing to truncate
            continue
        mixed = any(end is not None and not np.all(np.isfinite(end)) for end in (lower, upper))
        if mixed:  # elements differ in which ends are finite: one branch per element
            transform = _MixedInterval(lo, hi)
        elif np.ndim(lower) or np.ndim(upper):  # per-element bounds: PyMC takes them through bounds_fn
            lower_c = None if lower is None else pt.constant(np.asarray(lower, dtype="float64"))
            upper_c = None if upper is None else pt.constant(np.asarray(upper, dtype="float64"))
            transform = Interval(bounds_fn=lambda *_, lo_=lower_c, hi_=upper_c: (lo_, hi_))
        else:
            transform = Interval(lower=lower, upper=upper)
        ndim_supp = int(getattr(rv.owner.op, "ndim_supp", 0) or 0)
        if mixed:
            transform.ndim_supp = ndim_supp
        elif ndim_supp:  # a multivariate RV (a packed LKJ Cholesky factor): one Jacobian per draw
            transform = _SupportInterval(transform, ndim_supp)
        if type(model.rvs_to_transforms.get(model[name])).__name__ == "Ordered":
            lo_f, hi_f = np.broadcast_to(lo, ctx.shapes[name]).reshape(-1), np.broadcast_to(hi, ctx.shapes[name]).reshape(-1)
            if np.all(hi_f[:-1] <= lo_f[1:]):
                # disjoint increasing boxes: every point of their product is ordered, so the
                # elementwise interval alone has the ordered prior's support restricted to them
                start = _interval_initval(lo, hi, ctx.draws[name])
                initvals[name] = _strictly_increasing(start, lo, hi)
            elif np.all(lo_f == lo_f[0]) and np.all(hi_f == hi_f[0]):
                # one interval for every element: an increasing elementwise map keeps the order
                from pymc.distributions.transforms import ordered
                from pymc.logprob.transforms import ChainedTransform

                transform = ChainedTransform([transform, ordered])
                start = _interval_initval(lo, hi, ctx.draws[name])
                initvals[name] = _strictly_increasing(start, lo, hi)
            else:
                raise RegionNotImplementedError(
                    f"{name!r} is an ordered vector whose elementwise truncation boxes overlap and differ; "
                    f"pymc_dp cannot keep both the order and the boxes in one transform. Give {name!r} one interval "
                    "for every element (bounds=), or boxes that do not overlap."
                )
        else:
            initvals[name] = _interval_initval(lo, hi, ctx.draws[name])
        new_value.name = f"{name}_{transform.name}__"  # as PyMC names value variables
        replacements.append((node.outputs[0], model_free_rv(rv, new_value, transform, *dims)))

    for name, ball in balls.items():
        node = nodes[name]
        rv, value, *dims = node.inputs
        d = int(np.prod(ctx.shapes[name]))
        if ball.weights is None:
            z_rv = pm.Normal.dist(0.0, 1.0, size=d)
        else:
            z_rv = pm.Laplace.dist(0.0, 1.0, size=d)
        t_rv = pm.Flat.dist(shape=(1,))
        z_val, t_val = z_rv.type(), t_rv.type()
        z_name, t_name = name + AUX_SUFFIXES[0], name + AUX_SUFFIXES[1]
        z_val.name, t_val.name = z_name, t_name
        z = model_free_rv(z_rv, z_val, None)
        t = model_free_rv(t_rv, t_val, None)
        z.name, t.name = z_name, t_name
        radius = float(ball.radius)
        rho = radius * pt.sigmoid(t)
        # ||z|| through a dot product, not sum(square(z)): with the latter, PyTensor 2.38.3's
        # FusionOptimizer plans the gradient's fused loops in an order that breaks its own
        # blockers and logs an ERROR traceback (pymc-devs/pytensor#2145, fixed upstream after
        # the 2.38 series that PyMC 5.28 allows); the dot product keeps the norm out of the
        # elementwise subgraphs, and the values are the same
        if ball.weights is None:
            v = z * (rho / pt.sqrt(pt.dot(z, z)))
        else:
            m = pt.as_tensor_variable(np.asarray(ball.weights, dtype="float64"))
            v = (z / m) * (rho / pt.dot(pt.abs(z), pt.ones_like(z)))
        w_expr = v if tuple(ctx.shapes[name]) == (d,) else pt.reshape(v, ctx.shapes[name])
        if w_expr.dtype != rv.dtype:
            w_expr = w_expr.astype(rv.dtype)
        w_det = model_deterministic(w_expr, *dims)
        w_det.name = name
        # prior density of w, polar Jacobian (d-1) ln rho, and ln |d rho / d t|
        log_jac = pt.sum((d - 1) * pt.log(rho) + math.log(radius) - pt.softplus(-t) - pt.softplus(t))
        pot = model_potential(pm.logp(rv, w_expr).sum() + log_jac)
        pot.name = name + AUX_SUFFIXES[2]
        replacements.append((node.outputs[0], w_det))
        extra_outputs.append(pot)
        # start at half the radius, in a public direction
        initvals[z_name] = np.ones(d) / math.sqrt(d)
        initvals[t_name] = np.zeros(1)

    if replacements:
        toposort_replace(fgraph, tuple(replacements))
    # the indicators are mapped after the replacements: a free RV that also has an interval or a
    # norm ball is read as its new node (the replaced one, re-entering with the potential, would
    # register the RV's name a second time)
    replaced = dict(replacements)
    in_fgraph = {k: replaced.get(v, v) for k, v in memo.items()}
    for c in potentials:
        mapped = _into_fgraph(factor_lipschitz[c.factor], in_fgraph, _graph_inputs_and_rvs(model), c.factor)
        inside = pt.le(mapped, np.float64(c.bound))
        pot = model_potential(pt.switch(inside, pt.constant(0.0, dtype="float64"), pt.constant(-np.inf, dtype="float64")))
        pot.name = f"{c.factor}__dp_theta_L"
        extra_outputs.append(pot)
    for out in extra_outputs:
        fgraph.add_output(out)
    new_model = rebuild_model(fgraph)

    if potentials:
        start = _start_inside(constraints, ctx)
        for name, value in start.items():
            if name not in balls:
                initvals.setdefault(name, value)
    for rv, value in user_initvals.items():
        if value is not None and rv.name not in balls:
            initvals.setdefault(rv.name, np.asarray(value))
    return new_model, initvals


def _into_fgraph(expr, memo: dict, model_vars: set, factor: str):
    """``expr``, written in the user's model variables, rewritten in the fgraph's copies of them.

    The walk from ``expr`` stops at the model variables it reaches (a free RV's or a
    Deterministic's own graph is the fgraph's already), each of which becomes the fgraph's node
    (``memo``); the operations between them and ``expr`` are cloned onto those nodes. Neither
    ``clone_replace`` (a cloned ``ModelFreeRV`` would register its RV's name a second time) nor
    ``graph_replace``: PyTensor 2.38's ``graph_replace`` raises ``ValueError: i-N is not a part
    of graph`` when one key (a ``pm.Deterministic``, a free RV with a hyperprior) depends on
    another key and on a variable that is no key and that ``expr`` reaches only through the
    first: ``truncated_graph_inputs`` walks above the first key and makes that variable an input
    of a ``FunctionGraph`` that stops at the key. A constant's Lipschitz graph reaches the model's
    variables that way when it reads a Deterministic whose value does not enter it, as in
    ``pt.zeros_like(det)`` (``second(det, 0)``: ``det``'s shape only), with ``det`` built from a
    parameter the graph also reads directly and from a data container it reads nowhere else.
    """
    equiv = {k: _unwrap_named(v) for k, v in memo.items() if k in model_vars}
    try:
        return clone_get_equiv([v for v in model_vars], [expr], copy_inputs=False, copy_orphans=False,
                               memo=equiv)[expr]
    except Exception as err:  # a graph the rewrite cannot carry: refused, never a raw PyTensor error
        reads = sorted(v.name for v in ancestors([expr], blockers=list(model_vars)) if v in model_vars and v.name)
        raise UnsupportedFactorError(
            f"factor {factor!r}: its truncation needs a pm.Potential indicator of its constant, and pymc_dp could "
            f"not rewrite that constant's graph (which reads {', '.join(reads) or 'no model variable'}) into the "
            f"new model ({type(err).__name__}: {err}). Write the model without pm.Deterministic wrappers around "
            "the expressions this factor reads, or give explicit truncation bounds=."
        ) from err


def _unwrap_named(var):
    """The fgraph's copy of a ``pm.Data`` container, not its ``ModelNamed`` wrapper.

    The rest of the fgraph reads the copied shared variable directly; a Potential that read the
    wrapper would register the container's name a second time in ``model_from_fgraph``.
    """
    if var.owner is not None and type(var.owner.op).__name__ == "ModelNamed":
        return var.owner.inputs[0]
    return var


def _graph_inputs_and_rvs(model):
    out = set(model.free_RVs) | set(model.data_vars) | set(model.deterministics) | set(model.observed_RVs)
    return out


def _strictly_increasing(start: np.ndarray, lo, hi) -> np.ndarray:
    """An ordered start inside the box: sorted, and spread where elements coincide."""
    x = np.sort(np.asarray(start, dtype=float).reshape(-1))
    lo = np.broadcast_to(np.asarray(lo, float), x.shape)
    hi = np.broadcast_to(np.asarray(hi, float), x.shape)
    for i in range(1, len(x)):
        if x[i] <= x[i - 1]:
            gap = (hi[i] - x[i - 1]) if math.isfinite(hi[i]) else 1.0
            x[i] = x[i - 1] + 1e-3 * max(gap, 1e-9)
    return x.reshape(np.shape(start))


class _SupportInterval(Interval):
    """An elementwise interval transform on a multivariate RV (``ndim_supp`` > 0).

    PyMC's ``Interval`` is univariate: its log-Jacobian has one term per element, which PyMC
    refuses to add to a multivariate RV's logp (one term per draw). The map is elementwise, so its
    Jacobian matrix is diagonal and the log-determinant over a draw is the sum of the elementwise
    terms over the support's axes; that is all this class changes. The box must lie inside the
    RV's support (a Cholesky factor's diagonal positive), which the solver guarantees."""

    def __init__(self, base: Interval, ndim_supp: int):
        super().__init__(bounds_fn=base.args_fn)
        self.ndim_supp = ndim_supp

    def log_jac_det(self, value, *inputs):
        per_element = super().log_jac_det(value, *inputs)
        return pt.sum(per_element, axis=tuple(range(-self.ndim_supp, 0)))


def _interval_end(end):
    """A transform's bound: None when every element is unbounded on that side, else the values
    (a float when they are all equal); elements without a bound on that side are +-inf."""
    end = np.asarray(end, dtype=float)
    if not np.any(np.isfinite(end)):
        return None
    return float(end.reshape(-1)[0]) if np.all(np.isfinite(end)) and np.ptp(end) == 0 else end


class _MixedInterval(Transform):
    """An elementwise transform for a box whose elements differ in which ends are finite.

    PyMC's ``Interval`` needs every element bounded on a side it bounds (``-inf`` in ``lower``
    makes its log-odds map NaN). Per element, with ``a``/``b`` the lower/upper end:

    ======================  =============================  ===============  =====================
    ends                    backward ``x(y)``              forward          ``log|dx/dy|``
    ======================  =============================  ===============  =====================
    both finite             ``a + (b - a) sigmoid(y)``     ``logit``        ``log(b-a) + log sigmoid(y) + log sigmoid(-y)``
    ``a`` only              ``a + exp(y)``                 ``log(x - a)``   ``y``
    ``b`` only              ``b - exp(y)``                 ``log(b - x)``   ``y``
    neither                 ``y``                          ``x``            ``0``
    ======================  =============================  ===============  =====================

    Each branch is a bijection from the reals onto its element's interval, so the product map is
    one onto the box, and its Jacobian is diagonal: the log-determinant is the elementwise sum
    PyMC adds. The ends that a branch does not use are replaced by 0 / 1 so that the branches a
    ``switch`` discards stay finite (their gradients are multiplied by 0, and ``0 * nan`` is nan).
    """

    name = "interval"

    def __init__(self, lower: np.ndarray, upper: np.ndarray, ndim_supp: int = 0):
        self.ndim_supp = ndim_supp  # a multivariate RV: one log-Jacobian per draw (see _SupportInterval)
        lower, upper = np.broadcast_arrays(np.asarray(lower, float), np.asarray(upper, float))
        has_lo, has_hi = np.isfinite(lower), np.isfinite(upper)
        self._both = pt.constant(has_lo & has_hi)
        self._lo_only = pt.constant(has_lo & ~has_hi)
        self._hi_only = pt.constant(~has_lo & has_hi)
        self._free = pt.constant(~has_lo & ~has_hi)
        self._lo = pt.constant(np.where(has_lo, lower, 0.0))
        self._hi = pt.constant(np.where(has_hi, upper, 0.0))
        self._width = pt.constant(np.where(has_lo & has_hi, upper - lower, 1.0))

    def backward(self, value, *inputs):
        return pt.switch(
            self._both, self._lo + self._width * pt.sigmoid(value),
            pt.switch(self._lo_only, self._lo + pt.exp(value),
                      pt.switch(self._hi_only, self._hi - pt.exp(value), value)))

    def forward(self, value, *inputs):
        # the branches a switch discards may take the log of a negative number; their values
        # are not used (forward is only evaluated at points inside the box)
        from_lo = pt.log(pt.switch(self._free | self._hi_only, 1.0, value - self._lo))
        to_hi = pt.log(pt.switch(self._free | self._lo_only, 1.0, self._hi - value))
        return pt.switch(self._both, from_lo - to_hi,
                         pt.switch(self._lo_only, from_lo, pt.switch(self._hi_only, to_hi, value)))

    def log_jac_det(self, value, *inputs):
        both = pt.log(self._width) - 2 * pt.softplus(-pt.abs(value)) - pt.abs(value)
        per_element = pt.switch(self._both, both, pt.switch(self._free, 0.0, value))
        if self.ndim_supp:
            return pt.sum(per_element, axis=tuple(range(-self.ndim_supp, 0)))
        return per_element


def _interval_initval(lo, hi, draws: np.ndarray) -> np.ndarray:
    """A start inside ``[lo, hi]`` where the prior puts mass: per element, the median of the
    public prior draws that fall inside, else the midpoint, else a point near the finite end."""
    draws = np.asarray(draws, dtype=float)
    shape = draws.shape[1:]
    lo = np.broadcast_to(np.asarray(lo, dtype=float), shape)
    hi = np.broadcast_to(np.asarray(hi, dtype=float), shape)
    flat = draws.reshape(len(draws), -1)
    out = np.empty(flat.shape[1])
    for j, (a, b) in enumerate(zip(lo.reshape(-1), hi.reshape(-1))):
        col = flat[:, j]
        inside = col[(col > a) & (col < b)]
        if inside.size:
            value = float(np.median(inside))
        elif math.isfinite(a) and math.isfinite(b):
            value = 0.5 * (a + b)
        else:
            spread = float(np.subtract(*np.quantile(col, [0.75, 0.25]))) or 1.0
            value = a + spread if math.isfinite(a) else (b - spread if math.isfinite(b) else float(np.median(col)))
        out[j] = value
    if np.all(np.isfinite(lo)) and np.all(np.isfinite(hi)):
        out = np.clip(out, lo.reshape(-1) + 1e-9 * (hi - lo).reshape(-1), hi.reshape(-1) - 1e-9 * (hi - lo).reshape(-1))
    out = out.reshape(shape)
    # ordered vectors: keep the start ordered
    return out


def _start_inside(constraints, ctx) -> dict[str, np.ndarray]:
    """The first public prior draw that satisfies every constraint; failing that, a prior draw
    with the variables of each potential replaced by the point its solver found inside the
    region (also public: found from the prior and the rule alone)."""
    n = len(next(iter(ctx.draws.values())))
    ok = np.ones(n, bool)
    for c in constraints:
        ok &= c.contains({k: v[:n] for k, v in ctx.draws.items()})
    idx = np.nonzero(ok)[0]
    if len(idx):
        i = int(idx[0])
        return {k: v[i] for k, v in ctx.draws.items()}
    for i in range(min(n, 100)):
        point = {k: v[i] for k, v in ctx.draws.items()}
        for c in constraints:
            if isinstance(c, PotentialConstraint) and c.start is not None:
                point.update(c.start)
        candidate = {k: np.asarray(v)[None] for k, v in point.items()}
        if all(bool(np.all(c.contains(candidate))) for c in constraints):
            return point
    return {}
