"""The admissible prior: where data the mechanism accepts come from (``split="fit"``).

The truncation's search (:mod:`pymc_dp.boxes`, :mod:`pymc_dp.split`) chooses among regions that
all meet the budget. By default it keeps the most *prior mass*. A wide prior puts most of its
mass where no dataset inside the declared domains can come from: a negative binomial intercept of
14 is a mean of 10⁶ counts, but the counts are declared to lie in ``{0..100}``; a residual scale
``sigma >= 10`` on an outcome declared to lie in ``[-2, 6]``. Keeping that mass keeps nothing a
release can use.

``split="fit"`` aims at the **admissible prior** instead: the prior conditioned on a dataset
simulated from the prior predictive lying inside the declared domains,

    p_adm(theta)  ∝  p(theta) · P(every record inside its domain | theta, x),

with the covariates ``x`` of the simulated dataset drawn uniformly from their own domains. The
probability is exact per record from the observed family's CDF, ``F(hi) - F(lo^-)``, and the
records are independent given ``theta`` and ``x``. Everything here reads the priors, the
declared domains and the data's *shapes* only: never a data value. It spends no budget, and it
changes only which certified region is released, never a certificate (every region is
certified by its own rule, whatever chose it).

Draws of ``p_adm`` are importance-resampled from many public prior draws (weights above; the
effective sample size is reported). The search then maximises the admissible prior's
mass of the region, **smoothed** by a Gaussian kernel of Silverman's bandwidth in each RV's
unconstrained space (log for a scale), in log space:

    U(R) = log E_adm [ prod_v,elements P(R_v contains theta_v + h_v Z) ],   Z ~ N(0, 1).

Where regions are wide it is the share of admissible draws kept; where every certified region
is narrow against the admissible spread (a regression at epsilon_0 = 1), it is the sum of the
log-widths weighted by the admissible density at their centres, so the budget is shared among
the parameters as prior mass shares it, but around where admissible data put them. The kernel
makes it finite for every box of positive width: regions that keep no draw still rank.
Derivation and proof obligations: ``docs/theory/truncation.md#fit``.

Layering: below the solvers that use it (:mod:`pymc_dp.boxes` ranks boxes by
:func:`fit_utility`, :mod:`pymc_dp.split` ranks splits by :func:`fit_utility_of_constraints`); it
imports only the constraints, the region context (public prior draws) and :mod:`pymc_dp.masses`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import singledispatch

import numpy as np

from pymc_dp.constraints import constraints_box
from pymc_dp.domains import Ball, Box, Domain, Integers, Interval
from pymc_dp.masses import log_diff_pt
from pymc_dp.region_context import prior_draws

__all__ = ["AdmissiblePrior", "admissible_prior", "fit_utility", "simulate_domain"]

#: draws kept after resampling (the search's reference sample)
REFERENCE_DRAWS = 4000
#: public prior draws the weights are computed on: many where the prior is drawn in one
#: vectorised call, fewer where PyMC draws a hierarchy ancestrally (one call per draw)
CANDIDATES_DIRECT = 100_000
CANDIDATES_ANCESTRAL = 8_000
#: values per chunk of the batched CDF (draws x records): bounds the memory of one call
_CHUNK_VALUES = 4_000_000
#: below this effective sample size the certificate says the reference is thin
THIN_ESS = 50.0


class ReferenceUnavailable(Exception):
    """A domain or family the admissible prior cannot simulate or condition on."""


# --------------------------------------------------------------------------- public covariates
@singledispatch
def simulate_domain(domain: Domain, shape: tuple, rng: np.random.Generator) -> np.ndarray:
    """Public values of a container's shape drawn uniformly from its domain (no data read)."""
    raise ReferenceUnavailable(f"no public simulation for the domain {domain}")


@simulate_domain.register
def _(domain: Interval, shape, rng):
    lo, hi = np.broadcast_arrays(domain.lo, domain.hi)
    if not (np.all(np.isfinite(lo)) and np.all(np.isfinite(hi))):
        raise ReferenceUnavailable(f"the domain {domain} is unbounded")
    return rng.uniform(0.0, 1.0, shape) * (hi - lo) + lo


@simulate_domain.register
def _(domain: Integers, shape, rng):
    return rng.integers(int(domain.lo), int(domain.hi) + 1, size=shape)


@simulate_domain.register
def _(domain: Box, shape, rng):
    lo, hi = np.asarray(domain.lo, float), np.asarray(domain.hi, float)
    return rng.uniform(0.0, 1.0, shape) * (hi - lo) + lo


@simulate_domain.register
def _(domain: Ball, shape, rng):
    d = shape[-1]
    u = rng.normal(size=shape)
    u /= np.linalg.norm(u, axis=-1, keepdims=True)
    r = float(domain.radius) * rng.uniform(size=shape[:-1] + (1,)) ** (1.0 / d)
    return u * r


# --------------------------------------------------------------------------- the weights
def _inside_logprob_graph(factor, domain: Domain):
    """``sum over records of log P(record inside domain | parameters)`` for one factor, as a
    graph of the model's free RVs and data containers (PyMC's logcdf of the observed RV)."""
    import pymc as pm
    import pytensor.tensor as pt

    rv = factor.rv
    if isinstance(domain, Integers):
        lo, hi = float(domain.lo) - 1.0, float(domain.hi)
    elif isinstance(domain, Interval):
        lo, hi = np.asarray(domain.lo, float), np.asarray(domain.hi, float)
    else:
        raise ReferenceUnavailable(f"the domain {domain} is not an interval of values")
    dtype = rv.dtype if rv.dtype.startswith("float") else "float64"
    try:
        log_hi = pm.logcdf(rv, pt.as_tensor(hi).astype(dtype))
        log_lo = pm.logcdf(rv, pt.as_tensor(lo).astype(dtype))
    except Exception as err:
        raise ReferenceUnavailable(f"{factor.family} has no CDF in PyMC") from err
    per_value = pt.switch(pt.isinf(pt.as_tensor(lo)) & pt.lt(pt.as_tensor(lo), 0), log_hi, log_diff_pt(log_hi, log_lo))
    return pt.sum(per_value)


def _vectorised_prior(model, draws: int, seed: int) -> dict[str, np.ndarray] | None:
    """``draws`` prior draws of every free RV in one compiled call (each RV's size gets a batch
    dimension), or None when an RV's parameters read another free RV (a hierarchy)."""
    from pymc.distributions.shape_utils import change_dist_size
    from pymc.pytensorf import compile as compile_pymc
    from pytensor.graph.traversal import ancestors

    free = list(model.free_RVs)
    outs = []
    for rv in free:
        if any(a in set(free) - {rv} for a in ancestors(rv.owner.inputs)):
            return None
        try:
            outs.append(change_dist_size(rv, (draws,), expand=True))
        except Exception:  # an RV whose size cannot be changed
            return None
    values = compile_pymc([], outs, random_seed=seed)()
    return {rv.name: np.asarray(v) for rv, v in zip(free, values)}


@dataclass(frozen=True)
class AdmissiblePrior:
    """Public draws of the admissible prior and how they were made.

    Attributes
    ----------
    draws : dict of str to ndarray
        ``REFERENCE_DRAWS`` equally weighted draws of every free RV (first axis: draws).
    spreads : dict of str to ndarray
        Per element, half the distance between the 15.9% and 84.1% quantiles of ``draws``.
    candidates : int
        Public prior draws the importance weights were computed on.
    ess : float
        Their effective sample size, ``(sum w)^2 / sum w^2``.
    conditioned : tuple of str
        Factors whose domain conditions the prior.
    not_conditioned : dict of str to str
        Factors that do not (no CDF, or an outcome domain that is not an interval), and why.
    """

    draws: Mapping[str, np.ndarray]
    spreads: Mapping[str, np.ndarray]
    candidates: int
    ess: float
    conditioned: tuple[str, ...]
    not_conditioned: Mapping[str, str] = field(default_factory=dict)
    #: free RV -> the space distances are measured in: "log", "logit" (its PyMC value
    #: transform's unconstrained space) or "identity"
    scales: Mapping[str, str] = field(default_factory=dict)

    @property
    def thin(self) -> bool:
        return self.ess < THIN_ESS

    def describe(self) -> str:
        text = (
            f"fit: largest kernel-smoothed mass under {len(next(iter(self.draws.values()), ()))} "
            f"draws of the prior conditioned on a simulated dataset inside the declared domains "
            f"(importance-resampled from {self.candidates} public prior draws, effective sample size "
            f"{self.ess:.0f}; covariates drawn uniformly from their domains)"
        )
        if self.not_conditioned:
            text += "; not conditioned: " + "; ".join(f"{k} ({v})" for k, v in self.not_conditioned.items())
        if self.thin:
            text += "; the reference is thin (few effective draws): prefer split='optimised' or a narrower prior"
        return text


def admissible_prior(
    model,
    factors: Sequence,
    domains: Mapping[str, Domain],
    *,
    seed: int,
    candidates: int | None = None,
    keep: int = REFERENCE_DRAWS,
) -> AdmissiblePrior:
    """Draws of the admissible prior of ``model`` (module docstring); public, seeded.

    Parameters
    ----------
    model : pm.Model
        The user's model; it is not changed, and its data values are never read (every private
        container is replaced by public values drawn from its domain).
    factors : sequence of Factor
        The private likelihood factors.
    domains : mapping of str to Domain
        The declared domains of the private containers.
    seed : int
        Public seed of the prior draws, covariates and resampling.
    candidates : int, optional
        Prior draws to weight (default: ``CANDIDATES_DIRECT`` when every prior is drawn in one
        vectorised call, else ``CANDIDATES_ANCESTRAL``).
    keep : int
        Draws kept after resampling.
    """
    import pytensor
    import pytensor.tensor as pt
    from pytensor.graph.replace import graph_replace, vectorize_graph

    rng = np.random.default_rng(seed)
    theta = _vectorised_prior(model, int(candidates or CANDIDATES_DIRECT), seed)
    if theta is None:
        candidates = candidates or CANDIDATES_ANCESTRAL
        theta = prior_draws(model, int(candidates), seed)
    candidates = len(next(iter(theta.values())))
    free = {rv.name: rv for rv in model.free_RVs}
    # public stand-ins of every private container: same shape and dtype, values from the domain
    public = {}
    for var in model.data_vars:
        if var.name in domains:
            value = np.asarray(var.get_value())
            try:
                sim = simulate_domain(domains[var.name], value.shape, rng)
            except ReferenceUnavailable:
                sim = None
            if sim is not None:
                public[var] = pt.constant(np.asarray(sim).astype(value.dtype))

    log_w = np.zeros(int(candidates))
    conditioned, skipped = [], {}
    for f in factors:
        domain = domains.get(f.observed_container) if f.observed_container else None
        try:
            if domain is None:
                raise ReferenceUnavailable("its observed value is public")
            expr = _inside_logprob_graph(f, domain)
            data_in = [v for v in model.data_vars if v.name in domains and v not in public]
            if data_in and _reads_any(expr, data_in):
                raise ReferenceUnavailable("a container it reads has no public simulation")
            expr = graph_replace(expr, public, strict=False)
            names = [n for n, rv in free.items() if _reads_any(expr, [rv])]
            batched = {free[n]: pt.tensor(dtype=free[n].dtype, shape=(None,) + tuple(theta[n].shape[1:])) for n in names}
            fn = pytensor.function(list(batched.values()), vectorize_graph(expr, replace=batched), on_unused_input="ignore")
        except ReferenceUnavailable as why:
            skipped[f.name] = str(why)
            continue
        chunk = max(1, _CHUNK_VALUES // _size(f))
        out = np.empty(int(candidates))
        try:
            for start in range(0, int(candidates), chunk):
                stop = min(start + chunk, int(candidates))
                args = [np.asarray(theta[n][start:stop], dtype=free[n].dtype) for n in names]
                out[start:stop] = np.asarray(fn(*args), float).reshape(-1) if names else float(fn())
        except Exception as err:  # a CDF PyMC builds but cannot evaluate over a batch of draws
            skipped[f.name] = f"its CDF could not be evaluated over prior draws ({type(err).__name__})"
            continue
        log_w += np.where(np.isnan(out), -np.inf, out)
        conditioned.append(f.name)

    top = np.max(log_w)
    if not np.isfinite(top):  # pragma: no cover - no prior draw can produce admissible data
        raise ReferenceUnavailable("no public prior draw produces a dataset inside the declared domains")
    w = np.exp(log_w - top)
    w /= w.sum()
    ess = float(1.0 / np.sum(w**2))
    # systematic resampling: every draw kept about keep * w times
    positions = (rng.uniform() + np.arange(keep)) / keep
    index = np.minimum(np.searchsorted(np.cumsum(w), positions), len(w) - 1)
    draws = {n: np.asarray(v)[index] for n, v in theta.items()}
    spreads, scales = {}, {}
    for n, v in draws.items():
        scales[n] = _SCALES.get(type(model.rvs_to_transforms.get(free[n])).__name__, "identity")
        flat = _to_scale(np.asarray(v, float).reshape(len(v), -1), scales[n])
        q = np.quantile(flat, [0.158655, 0.841345], axis=0)
        scale = np.maximum(0.5 * (q[1] - q[0]), 1e-9 * (1.0 + np.abs(np.median(flat, axis=0))))
        spreads[n] = scale
    return AdmissiblePrior(draws, spreads, int(candidates), ess, tuple(conditioned), skipped, scales)


#: value transforms whose space the distance is measured in: PyMC's unconstrained space, where
#: a posterior is closest to Gaussian (a scale's distance is a ratio: sigma >= 4 against 0.5 is
#: as far as sigma <= 0.0625)
_SCALES = {"LogTransform": "log", "LogOddsTransform": "logit"}


def _to_scale(x, scale: str):
    x = np.asarray(x, float)
    with np.errstate(divide="ignore", invalid="ignore"):
        if scale == "log":
            return np.log(x)
        if scale == "logit":
            return np.log(x) - np.log1p(-x)
    return x


def _size(factor) -> int:
    shape = factor.observed.type.shape
    if all(s is not None for s in shape):
        return int(np.prod(shape)) if shape else 1
    return int(np.prod(factor.observed.shape.eval()))  # the shape only: public


def _reads_any(expr, variables) -> bool:
    from pytensor.graph.traversal import ancestors

    wanted = set(variables)
    return any(a in wanted for a in ancestors([expr]))


# --------------------------------------------------------------------------- the objective
def fit_utility(box: Mapping[str, tuple[np.ndarray, np.ndarray]], reference: AdmissiblePrior) -> float:
    """``U(box)``: the log of the admissible prior's mass of ``box``, smoothed by a Gaussian kernel.

    Per draw ``s`` and element, ``P(lo <= theta_s + h Z <= hi)`` with ``Z`` standard normal,
    in the RV's unconstrained space (log for a scale, logit for a probability: PyMC's value
    transforms), ``h`` Silverman's bandwidth ``1.06 s_v n^(-1/5)`` (``s_v`` the element's
    admissible spread, ``n`` the reference's effective sample size); the product over elements
    and RVs, averaged over the draws (in log space). Larger is better, like a log mass; it is
    never ``-inf`` for a box of positive width, so boxes that keep no draw still rank.
    """
    from scipy.special import logsumexp

    n_eff = max(min(reference.ess, len(next(iter(reference.draws.values())))), 2.0)
    per_draw = 0.0
    for name, (lo, hi) in box.items():
        scale = reference.scales.get(name, "identity")
        v = _to_scale(np.asarray(reference.draws[name], float).reshape(len(reference.draws[name]), -1), scale)
        lo_a = np.broadcast_to(_to_scale(np.asarray(lo, float).reshape(-1) if np.ndim(lo) else lo, scale), v.shape[1:])
        hi_a = np.broadcast_to(_to_scale(np.asarray(hi, float).reshape(-1) if np.ndim(hi) else hi, scale), v.shape[1:])
        h = 1.06 * np.asarray(reference.spreads[name], float) * n_eff ** -0.2
        per_draw = per_draw + np.sum(_log_gauss_mass((lo_a - v) / h, (hi_a - v) / h), axis=1)
    if np.isscalar(per_draw):
        return 0.0
    return float(logsumexp(per_draw) - np.log(len(per_draw)))


def _log_gauss_mass(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``log(Phi(b) - Phi(a))`` for ``a <= b``, accurate in both tails (-inf where ``a == b``)."""
    from scipy.special import log_ndtr

    flip = a > 0  # Phi(b) - Phi(a) = Phi(-a) - Phi(-b): keep both arguments in the lower tail
    lo, hi = np.where(flip, -b, a), np.where(flip, -a, b)
    l_lo, l_hi = log_ndtr(lo), log_ndtr(hi)
    with np.errstate(divide="ignore", invalid="ignore"):
        out = l_hi + np.log1p(-np.exp(np.minimum(l_lo - l_hi, 0.0)))
    return np.where(hi > lo, out, -np.inf)


def fit_utility_of_constraints(constraints, reference: AdmissiblePrior, ctx) -> float:
    """:func:`fit_utility` of the region the constraints define: its box where it is one; else
    the log of the share of reference draws inside (unsmoothed; -inf when none is)."""
    if not constraints:
        return 0.0
    box = constraints_box(constraints, ctx)
    if box is not None:
        return fit_utility(box, reference)
    inside = np.ones(len(next(iter(reference.draws.values()))), bool)
    for c in constraints:
        inside &= c.contains(reference.draws)
    share = float(np.mean(inside))
    return float(np.log(share)) if share > 0 else -np.inf
