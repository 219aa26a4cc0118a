"""The general fallback solver: a ``pm.Potential`` indicator of the factor's sublevel set.

Any factor, whatever its parameters read, can be truncated to ``{theta : L_j(theta) <= share}``
by a ``pm.Potential`` that is 0 inside and -inf outside (:func:`solve_potential`). Valid for
every factor, slower for NUTS. The region must not be empty: a public prior draw inside it
shows that it is not; else :func:`search_minimum` looks for a point inside by Nelder-Mead over
the free RVs' unconstrained values, which :mod:`pymc_dp.boxes` also uses to centre a box
whose prior median is infeasible. Layering: imports :mod:`pymc_dp.constraints` and
:mod:`pymc_dp.region_context` only.
"""

from __future__ import annotations

import numpy as np
import pytensor
from scipy import optimize

from pymc_dp.constraints import FactorRegion, Infeasible, PotentialConstraint
from pymc_dp.factors import Factor
from pymc_dp.region_context import RegionContext, numeric

__all__ = ["solve_potential", "search_minimum"]


def solve_potential(factor: Factor, share: float, ctx: RegionContext) -> FactorRegion:
    """Fallback: a ``pm.Potential`` indicator of ``{L_j(theta) <= share}``.

    The region is known to be non-empty when a public prior draw lies in it; otherwise
    :func:`search_minimum` minimises ``L_j`` over the prior's support from the best draws.
    Either way the point found (public: it depends on the prior and the rule only) is kept as a
    starting point for samplers. When nothing below the share is found, the factor is refused
    with the least value found, flagged as *not certified* (a search, not a proof).
    """
    L = ctx.lipschitz(factor)
    names = ctx.free_rvs_of(L)
    fn = ctx.compile_in(L, names)

    def compute(draws):
        n = len(next(iter(draws.values())))
        return np.array([float(fn(*(draws[k][i] for k in names))) for i in range(n)])

    def evaluate(draws):
        if draws is ctx.draws:  # the public prior draws: share-independent, computed once
            return ctx.cached(ctx.key(factor, "potential_on_draws"), lambda: compute(draws))
        return compute(draws)

    values = ctx.cached(
        ctx.key(factor, "potential_values"),
        lambda: compute({k: ctx.draws[k][:2000] for k in names}) if names else np.array([float(numeric(L))]),
    )
    if not names:
        if not float(values[0]) <= share:  # NaN fails closed
            raise Infeasible(factor.name, float(values[0]))
        return FactorRegion(factor, share, [PotentialConstraint(factor.name, share, (), evaluate)], "potential", None)
    inside = np.nonzero(values <= share)[0]
    if len(inside):
        start = {k: ctx.draws[k][int(inside[0])] for k in names}
    else:
        best, point = ctx.cached(ctx.key(factor, "potential_search"), lambda: search_minimum(L, names, values, ctx))
        if not best <= share:  # NaN fails closed
            raise Infeasible(factor.name, float(min(best, np.min(values))), certified=False)
        _, start = ctx.cached(ctx.key(factor, "potential_start", share),
                              lambda: search_minimum(L, names, values, ctx, share=share))
    constraint = PotentialConstraint(factor.name, share, tuple(names), evaluate, start)
    return FactorRegion(factor, share, [constraint], "potential", None)


def search_minimum(L, names, values, ctx: RegionContext, starts: int = 5, share: float | None = None) -> tuple[float, dict]:
    """Least ``L`` found by Nelder-Mead over the free RVs' unconstrained values (PyMC's value
    transforms), from the ``starts`` best prior draws. A heuristic: it finds a point inside the
    region, never proves there is none.

    With ``share``, the point returned is then moved, along the segment towards the prior draw of
    highest prior density, as far as the constant stays within ``share``: a start where the prior
    has mass, not at the edge of the region where the minimiser of the constant often lies.

    Parameters
    ----------
    L : TensorVariable
        The factor's constant, a graph of the free RVs ``names``.
    names : list of str
        The free RVs ``L`` reads.
    values : ndarray
        ``L`` at the first public prior draws of ``ctx`` (the starts are the least of them).
    ctx : RegionContext
        The model, its value transforms and public prior draws.
    starts : int
        Nelder-Mead runs, from that many best draws.
    share : float, optional
        When given and reached, move the point toward the prior's centre (see above).

    Returns
    -------
    (float, dict or None)
        The least constant found and the point (free RV name -> value) where it was found;
        ``(inf, None)`` when no run finished.
    """
    model = ctx.model
    rvs = [ctx.free[k] for k in names]
    value_vars = [model.rvs_to_values[rv] for rv in rvs]
    (L_values,) = model.replace_rvs_by_values([L])
    fn = pytensor.function(value_vars, L_values, on_unused_input="ignore")
    forward, backward = [], []
    for rv, vv in zip(rvs, value_vars):
        transform = model.rvs_to_transforms.get(rv)
        if transform is None:
            forward.append(np.asarray)
            backward.append(np.asarray)
            continue
        x = rv.type()
        forward.append(pytensor.function([x], transform.forward(x, *rv.owner.inputs), on_unused_input="ignore"))
        backward.append(pytensor.function([vv], transform.backward(vv, *rv.owner.inputs), on_unused_input="ignore"))
    templates: list[np.ndarray] = []  # one unconstrained value per variable: the shapes to unpack
    # the search moves in floats; a discrete RV (an integer value variable, no transform) is read
    # at the nearest integer, which its compiled graph and its sampler's start both need
    dtypes = [np.dtype(vv.dtype) for vv in value_vars]

    def unpack(z):
        out, i = [], 0
        for template, dtype in zip(templates, dtypes):
            part = z[i : i + template.size].reshape(template.shape)
            out.append(np.rint(part).astype(dtype) if dtype.kind in "iub" else part.astype(dtype))
            i += template.size
        return out

    def objective(z):
        value = float(fn(*unpack(z)))
        return value if np.isfinite(value) else np.inf

    def pack(i):
        return np.concatenate([np.asarray(fwd(ctx.draws[k][int(i)]), dtype=float).ravel() for fwd, k in zip(forward, names)])

    best_value, best_z = np.inf, None
    for i in np.argsort(values)[:starts]:
        templates = [np.asarray(fwd(ctx.draws[k][int(i)]), dtype=float) for fwd, k in zip(forward, names)]
        z0 = np.concatenate([t.ravel() for t in templates])
        with np.errstate(invalid="ignore"):  # a simplex of +inf values: Nelder-Mead subtracts them
            res = optimize.minimize(
                objective, z0, method="Nelder-Mead", options={"xatol": 1e-10, "fatol": 1e-12, "maxiter": 400 * (len(z0) + 1)}
            )
        if res.fun < best_value:
            best_value, best_z = float(res.fun), np.asarray(res.x, dtype=float)
    if best_z is None:
        return best_value, None
    if share is not None and best_value <= share:
        best_z = _toward_prior(best_z, objective, pack, share, ctx, names, sizes=[t.size for t in templates])
    point = {k: np.asarray(bwd(z)) for k, bwd, z in zip(names, backward, unpack(best_z))}
    return best_value, point


def _toward_prior(z_in, objective, pack, share, ctx: RegionContext, names, sizes=None) -> np.ndarray:
    """A start inside the region where the prior has mass, a margin away from its wall.

    From ``z_in`` (inside the region), each variable in turn (``sizes``: their lengths in the
    unconstrained vector ``z``; two passes) moves towards the centre of the prior (the
    coordinatewise median of the public prior draws, unconstrained) as far as the constant stays
    at most a level strictly inside the share (80% of it, or halfway from ``z_in``'s constant to
    the share): bisection on each variable's segment. Variable by variable, because a joint
    segment can leave the region at once -- the minimiser of a Normal factor's constant has a
    huge scale *and* huge locations, and shrinking the scale first is infeasible, while moving
    the locations first then frees the scale (radon's LKJ model started at ``sigma = 1e80``,
    where NUTS cannot move). A start near the wall would make a sampler's first steps cross it.
    """
    n = len(next(iter(ctx.draws.values())))
    sample = np.stack([pack(i) for i in range(min(n, 400))])
    target = np.median(sample, axis=0)
    if target.shape != z_in.shape:  # pragma: no cover - same variables, same sizes
        return z_in
    if objective(target) <= share * 0.8:
        return target
    z = np.array(z_in, dtype=float)
    level = max(0.8 * share, objective(z) + 0.5 * (share - objective(z)))
    bounds = np.cumsum([0, *(sizes or [len(z)])])
    blocks = [slice(int(a), int(b)) for a, b in zip(bounds[:-1], bounds[1:])] + [slice(0, len(z))]
    for _ in range(2):
        for block in blocks:
            step = np.zeros_like(z)
            step[block] = target[block] - z[block]
            if not np.any(step):
                continue
            if objective(z + step) <= level:
                z = z + step
                continue
            lo, hi = 0.0, 1.0
            for _ in range(30):
                mid = 0.5 * (lo + hi)
                if objective(z + mid * step) <= level:
                    lo = mid
                else:
                    hi = mid
            z = z + lo * step
    return z
