"""What the truncation's solvers read from the model: the region context and its primitives.

:class:`RegionContext` holds the model's free RVs, the declared domains and public prior draws
(:func:`prior_draws`), and caches what does not depend on a factor's share. Next to it live the
small model queries every solver and the prior-mass code share: which free RV an expression
is (:func:`plain_free_rv`), the constant parameters of an RV's prior (:func:`constant_params`),
whether an RV is a root of the prior (:func:`is_root`), the observed value's shape
(:func:`observed_shape`) and the evaluation of a constant expression (:func:`numeric`). This is
the bottom of the truncation's layers (constraints, then this context, then prior masses and
the solvers, then the driver :mod:`pymc_dp.truncate`): it imports only
:mod:`pymc_dp.factors` and :mod:`pymc_dp.predictor` from the package, never a solver.
"""

from __future__ import annotations

import math
from typing import Any, Callable

import numpy as np
import pytensor
import pytensor.tensor as pt
from pytensor.compile.mode import Mode
from pytensor.graph.basic import Constant
from pytensor.graph.replace import clone_replace
from pytensor.graph.traversal import ancestors
from pytensor.tensor.elemwise import DimShuffle

from pymc_dp.factors import Factor, strip_casts, strip_expand_dims
from pymc_dp.predictor import strip_identity

__all__ = [
    "RegionContext",
    "EVAL_MODE",
    "prior_draws",
    "constant_params",
    "plain_free_rv",
    "observed_shape",
    "is_root",
    "is_exchangeable",
    "numeric",
]


# --------------------------------------------------------------------------- prior draws
def prior_draws(model, draws: int, seed: int) -> dict[str, np.ndarray]:
    """``draws`` public draws of the model's free RVs from their prior, by name.

    When every free RV is a PyTensor ``RandomVariable`` whose parameters are constants (no free
    RV parent), each is drawn directly by its Op's NumPy sampler in one vectorised call per RV;
    otherwise PyMC's ``pm.draw`` samples the joint prior ancestrally (one compiled call per draw,
    seconds for thousands of draws of many RVs). Both depend on the seed, the prior and the
    shapes only."""
    import pymc as pm
    from pytensor.tensor.random.op import RandomVariable

    rvs = list(model.free_RVs)
    if not rvs:
        return {}
    direct = []
    for rv in rvs:
        op = rv.owner.op
        params = constant_params(rv) if isinstance(op, RandomVariable) else None
        if params is None:
            direct = None
            break
        direct.append((rv, op, params))
    if direct is not None:
        rng = np.random.default_rng(seed)
        out = {}
        try:
            for rv, op, params in direct:
                shape = tuple(int(v) for v in _shape_of_rv(rv))
                batch = shape[: len(shape) - op.ndim_supp]  # a sampler's size excludes the support
                value = np.asarray(op.rng_fn(rng, *params, size=(draws,) + batch))
                if value.shape != (draws,) + shape:
                    raise ValueError("shape")
                out[rv.name] = value
            return out
        except Exception:  # an Op whose sampler wants other arguments: the general path
            pass
    values = pm.draw(rvs, draws=draws, random_seed=seed)
    return {rv.name: np.asarray(v) for rv, v in zip(rvs, values)}


def _shape_of_rv(rv) -> tuple:
    shape = tuple(rv.type.shape)
    if all(s is not None for s in shape):
        return shape
    return tuple(pytensor.function([], rv.shape, mode="FAST_COMPILE")())


# --------------------------------------------------------------------------- context
class RegionContext:
    """What the solvers need from the model: free RVs, their supports and prior draws.

    The context also caches what does not depend on a factor's share: the factor's Lipschitz
    graph, compiled functions, the values of ``t -> L_j(v = t)`` on the solvers' grids, the
    prior's compiled CDFs. A budget-split optimiser calls :func:`solve_factor` and
    :func:`prior_mass` many times on one context; the cache makes every call after the first
    one cheap. Results are bit-for-bit those of an uncached context (``cache=False``, which
    recomputes everything on every call, as the code did before the cache): compiled
    functions are reused, never changed, and what the uncached code evaluates with
    ``expr.eval()`` (constant folding, i.e. the Ops' Python implementations after the
    ``fast_run`` rewrites) is evaluated by a function compiled once in :data:`EVAL_MODE`, the
    same rewrites and the same Python implementations on symbolic inputs.
    """

    def __init__(self, model, domains, prior_draws: dict[str, np.ndarray], *, cache: bool = True):
        self.model = model
        self.domains = domains
        self.free = {rv.name: rv for rv in model.free_RVs}
        self.draws = prior_draws
        self.shapes = {k: v.shape[1:] for k, v in prior_draws.items()}
        self.cache = cache
        #: the admissible prior the search aims at (``split="fit"``, :mod:`pymc_dp.reference`);
        #: None: the search keeps prior mass
        self.reference = None
        self._cache: dict = {}
        self._pinned: dict[int, Any] = {}  # keeps keyed objects alive: their ids stay unique

    # ------------------------------------------------------------------ cache
    def cached(self, key: tuple, build: Callable[[], Any]) -> Any:
        """``build()``, computed once per ``key`` (every call when ``cache`` is False).

        Objects in ``key`` are keyed by identity through :meth:`key`.
        """
        if not self.cache:
            return build()
        try:
            return self._cache[key]
        except KeyError:
            value = self._cache[key] = build()
            return value

    def key(self, obj, *tags) -> tuple:
        """A cache key for ``obj`` (by identity: factors and graphs are not hashable by value)."""
        if self.cache:
            self._pinned[id(obj)] = obj
        return (id(obj), *tags)

    def lipschitz(self, factor: Factor):
        """``factor.lipschitz(domains)``, one graph per factor."""
        return self.cached(self.key(factor, "L"), lambda: factor.lipschitz(self.domains))

    # ------------------------------------------------------------------ model queries
    def free_rvs_of(self, expr) -> list[str]:
        """The free RVs ``expr`` reads directly: the walk stops at free RVs, so a hierarchical
        prior's hyperparameters (``p ~ Beta(a, 1)``) are not counted as read by ``expr``."""

        def build():
            anc = set(ancestors([expr], blockers=list(self.free.values())))
            return [name for name, rv in self.free.items() if rv in anc]

        return list(self.cached(self.key(expr, "free_rvs"), build))

    def support(self, name: str) -> tuple[float, float]:
        """The support of a scalar free RV, read from its value transform."""
        return self.cached(("support", name), lambda: self._support(name))

    def _support(self, name: str) -> tuple[float, float]:
        rv = self.free[name]
        transform = self.model.rvs_to_transforms.get(rv)
        tname = type(transform).__name__ if transform is not None else None
        if tname == "LogOddsTransform":
            return 0.0, 1.0
        if tname == "LogTransform":
            return 0.0, math.inf
        if tname == "IntervalTransform" or tname == "Interval":
            a, b = transform.args_fn(*rv.owner.inputs)
            lo = -math.inf if a is None else float(np.max(pt.as_tensor_variable(a).eval()))
            hi = math.inf if b is None else float(np.min(pt.as_tensor_variable(b).eval()))
            return lo, hi
        if transform is None and rv.dtype.startswith("float"):
            return -math.inf, math.inf
        return math.nan, math.nan  # unsupported (simplex, ordered, discrete, ...)

    def compile_in(self, expr, names: list[str]) -> Callable:
        """Compile ``expr`` as a function of the values of free RVs ``names`` (cached)."""

        def build():
            holders = {n: self.free[n].type() for n in names}
            replaced = clone_replace(expr, replace={self.free[n]: holders[n] for n in names})
            return pytensor.function([holders[n] for n in names], replaced, on_unused_input="ignore")

        return self.cached(self.key(expr, "compile", tuple(names)), build)

    def numeric(self, expr) -> np.ndarray:
        """:func:`numeric` of an expression of constants and shared data (cached)."""
        return self.cached(self.key(expr, "numeric"), lambda: numeric(expr))


#: how cached functions replace ``expr.eval()`` bit for bit (see :class:`RegionContext`)
EVAL_MODE = Mode(linker="py", optimizer="fast_run")


def numeric(expr) -> np.ndarray:
    """The value of an expression of constants and shared data, as a float array.

    Parameters
    ----------
    expr : TensorVariable
        A graph that reads no free RV (public constants, ``pm.Data`` shapes, rule constants).

    Returns
    -------
    ndarray
        ``expr.eval()`` as ``float``.
    """
    return np.asarray(expr.eval(), dtype=float)


def is_exchangeable(rv) -> bool:
    """Whether every element of ``rv`` has the same prior: a scalar-support RV whose parameters
    are broadcast scalars (``theta ~ Beta(a, b)`` per lab, ``alpha ~ N(mu_a, sigma_a)`` per county).

    Parameters
    ----------
    rv : TensorVariable
        A free RV.

    Returns
    -------
    bool
    """
    op = rv.owner.op
    if getattr(op, "ndim_supp", 0) != 0:
        return False
    try:
        params = op.dist_params(rv.owner)
    except Exception:  # pragma: no cover - symbolic RVs
        return False
    return all(all(b for b in p.type.broadcastable) for p in params)


def is_root(rv, ctx: RegionContext) -> bool:
    """Whether ``rv``'s prior reads no other free RV of the model (a root of the prior).

    Parameters
    ----------
    rv : TensorVariable
        A free RV of ``ctx.model``.
    ctx : RegionContext
        The context; the answer is cached per RV name.

    Returns
    -------
    bool
    """

    def build():
        others = {r for r in ctx.free.values() if r is not rv}
        return not (set(ancestors(rv.owner.inputs)) & others)

    return ctx.cached(("is_root", rv.name), build)


def constant_params(rv) -> list[np.ndarray] | None:
    """The values of ``rv``'s distribution parameters when all are constants (None otherwise).

    Parameters
    ----------
    rv : TensorVariable
        An RV whose Op has ``dist_params`` (a PyTensor ``RandomVariable``).

    Returns
    -------
    list of ndarray or None
        The parameters as float arrays, in the Op's order, seen through identities and
        broadcasting; None when one of them is not a constant.
    """
    out = []
    for p in rv.owner.op.dist_params(rv.owner):
        p = strip_identity(p)
        while p.owner is not None and isinstance(p.owner.op, DimShuffle) and p.owner.op.is_expand_dims:
            p = strip_identity(p.owner.inputs[0])
        if not isinstance(p, Constant):
            return None
        out.append(np.asarray(p.data, dtype=float))
    return out


def plain_free_rv(expr, ctx: RegionContext) -> str | None:
    """The name of the free RV ``expr`` is (up to casts and broadcasting), else None.

    Parameters
    ----------
    expr : TensorVariable
        A parameter's expression.
    ctx : RegionContext
        The context whose free RVs are looked for.

    Returns
    -------
    str or None
    """
    e = expr
    for _ in range(4):
        e = strip_expand_dims(strip_casts(e))
    for name, rv in ctx.free.items():
        if e is rv:
            return name
    return None


def observed_shape(factor: Factor, ctx: RegionContext) -> tuple[int, ...]:
    """The observed value's shape: the container's (shapes are public), else computed.

    Parameters
    ----------
    factor : Factor
        A likelihood factor.
    ctx : RegionContext
        The context (evaluates the shape when no container holds the value).

    Returns
    -------
    tuple of int
    """
    obs = strip_identity(factor.observed)
    if hasattr(obs, "get_value"):
        return tuple(int(v) for v in np.shape(obs.get_value()))
    return tuple(int(v) for v in ctx.numeric(factor.observed.shape))
