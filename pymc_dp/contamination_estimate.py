"""The paper's Algorithm 1 on simulated data: an *estimate* of a random-DP quantile, never a guarantee.

Hu, Aslett, Dai, Pollock and Roberts (arXiv 2403.07772) estimate the epsilon of one posterior draw
of a Huber-contaminated model by simulating datasets i.i.d. from the model at a true parameter
``theta*`` and bounding, for each, the privacy loss of one record (their Prop. 1 and Alg. 1,
reconstructed in ``docs/theory/contamination.md``). With ``r(x; theta) = f_{theta,p}(x) /
f_{theta*,p}(x)``, ``A = [theta* - eta, theta* + eta]`` and ``xi`` the exact grid posterior of the
location (variant ``fixed``, steps 3-6):

3. ``eta`` = the smallest radius whose posterior mass outside ``A`` is at most ``delta``;
4. ``S1 = sup_x sup_A ln r(x; .)``, ``S2 = sup_x' sup_A -ln r(x'; .)`` (closed form in theta:
   ``f_{theta,p}(x)`` is unimodal in theta, so the sups sit at the clipped point and the far end);
5. ``S3 = sup_x' ln E_xi[r(x'; theta) / r(x_n; theta)]``, ``x_n`` the last simulated record;
6. ``eps(x) = S1 + S2 + S3``; the estimate is the ``quantile`` of ``eps`` over ``n_datasets``.

What it is not: a differential-privacy guarantee. It holds (if at all) with probability
``1 - gamma`` over datasets drawn from the model at ``theta*``; the worst case over datasets in
the same domain is 18-24 at the paper's settings, and infinite on an unbounded domain. The result
(:class:`EpsilonEstimate`) is labelled so, and every budget entry point refuses it
(:class:`~pymc_dp.exceptions.EstimateNotBudgetError`). It never reads the model's data
containers: it simulates.

Layering: beside :mod:`pymc_dp.contamination`, which re-exports :func:`estimate_epsilon`; it reads
the contaminated factor from the graph (not the spec), so that it imports nothing of that module.
"""

from __future__ import annotations

import html
import math
import numbers
from dataclasses import dataclass, field
from typing import Any, ClassVar, Mapping

import numpy as np
import pymc as pm
import pytensor
import pytensor.tensor as pt
from pymc.distributions.mixture import MixtureRV
from pytensor.compile.sharedvalue import SharedVariable
from pytensor.graph.basic import Constant
from pytensor.graph.traversal import ancestors
from pytensor.tensor.elemwise import DimShuffle, Elemwise
from pytensor.tensor.random.basic import NormalRV
from pytensor.tensor.random.op import RandomVariable
from pytensor.tensor.random.type import RandomType

from pymc_dp.domains import Interval
from pymc_dp.exceptions import EstimateNotImplementedError
from pymc_dp.rules import rule_info
from pymc_dp.rules.contamination import CONTAMINANTS, Contaminant, contaminant_of

__all__ = ["EpsilonEstimate", "EstimatedEpsilon", "estimate_epsilon", "STATUS", "ASSUMPTION"]

STATUS = "estimated, model-conditional, not DP"
ASSUMPTION = "data i.i.d. from the model at theta_star"
VARIANTS = ("fixed",)
_LOG_SQRT_2PI = 0.5 * math.log(2.0 * math.pi)


class EstimatedEpsilon(float):
    """A float that remembers it is an *estimate*: refused as a budget like its :class:`EpsilonEstimate`."""

    not_a_dp_guarantee: ClassVar[bool] = True

    def __repr__(self) -> str:
        return f"EstimatedEpsilon({float(self)!r}, {STATUS!r})"


@dataclass(frozen=True)
class EpsilonEstimate:
    """Algorithm 1's estimate: the ``quantile`` of the per-dataset epsilon over simulated datasets.

    **Not a differential-privacy guarantee**: ``status`` says so, and ``make_private``,
    ``noisy_statistics`` and ``Ledger.spend`` refuse it (and its ``epsilon``) as a budget.
    """

    epsilon: EstimatedEpsilon
    delta: float
    gamma: float
    values: tuple[float, ...]
    etas: tuple[float, ...]
    settings: Mapping[str, Any] = field(default_factory=dict)
    status: str = STATUS
    assumption: str = ASSUMPTION

    #: every budget entry point refuses objects with this flag (:func:`pymc_dp.exceptions.refuse_estimate`)
    not_a_dp_guarantee: ClassVar[bool] = True

    def __str__(self) -> str:
        s = self.settings
        return (f"NOT A DP GUARANTEE -- epsilon ~ {float(self.epsilon):.4g} ({self.status}); delta = {self.delta:g}, "
                f"gamma = {self.gamma:g}: the {1 - self.gamma:g}-quantile over {len(self.values)} datasets simulated "
                f"with n = {s.get('n')} at theta_star = {s.get('theta_star')} (Algorithm 1, variant "
                f"{s.get('variant')!r}). Assumes {self.assumption}; the worst case over datasets is far larger "
                "(infinite on an unbounded domain). Never spend it from a budget.")

    def _repr_html_(self) -> str:
        return ("<div><p><strong style='color:#b00'>NOT A DP GUARANTEE</strong> &mdash; "
                f"{html.escape(self.status)}</p><p>{html.escape(str(self))}</p></div>")

    def to_dict(self) -> dict[str, Any]:
        return {"epsilon": float(self.epsilon), "delta": self.delta, "gamma": self.gamma, "status": self.status,
                "assumption": self.assumption, "settings": dict(self.settings), "n_datasets": len(self.values)}


# --------------------------------------------------------------------------- reading the model
def _strip(var):
    """``var`` without casts and broadcasting dims (DimShuffle, unary Elemwise casts)."""
    while var.owner is not None and (isinstance(var.owner.op, DimShuffle) or (
            isinstance(var.owner.op, Elemwise) and type(var.owner.op.scalar_op).__name__ == "Cast")):
        var = var.owner.inputs[0]
    return var


def _public_array(var, what: str) -> np.ndarray:
    bad = [v for v in ancestors([var]) if (v.owner is None and not isinstance(v, Constant)
                                            and not isinstance(v.type, RandomType)) or isinstance(v, SharedVariable)]
    if bad:
        raise EstimateNotImplementedError(f"estimate_epsilon: {what} must be a public number (it reads {bad}); a free or "
                                          "data-dependent scale is not supported: give it as a number in the model.")
    return np.asarray(var.eval(), float)


def _public_number(var, what: str) -> float:
    value = _public_array(var, what)
    if value.size == 0 or not np.all(value == value.reshape(-1)[0]):
        raise EstimateNotImplementedError(f"estimate_epsilon: {what} must be one number, got {value!r}: give one number "
                                          "for every element.")
    return float(value.reshape(-1)[0])


def _read_model(model: pm.Model) -> tuple[float, float, Contaminant, str, Any]:
    """``(p, sigma, g, location name, prior log-density on a vector)``, or NotImplementedError.

    Read from the graph (the factor ``pymc_dp.contaminate`` builds: ``Mixture(w=[1 - p, p],
    [Normal(mu, sigma), g])``), never from a data container: only constants are evaluated."""
    if not isinstance(model, pm.Model):
        raise EstimateNotImplementedError(f"estimate_epsilon: expected a model returned by pymc_dp.contaminate, got "
                                          f"{type(model).__name__}: build it with pymc_dp.contaminate(model, p=...).")
    if len(model.observed_RVs) != 1:
        raise EstimateNotImplementedError(f"estimate_epsilon: one contaminated factor only (the 1-d location model); the "
                                          f"model has {[rv.name for rv in model.observed_RVs]}: contaminate one factor of a "
                                          "one-factor model.")
    obs = model.observed_RVs[0]
    name = obs.name
    if not isinstance(obs.owner.op, MixtureRV):
        raise EstimateNotImplementedError(f"estimate_epsilon: factor {name!r} is not contaminated (build the model with "
                                          "pymc_dp.contaminate); Algorithm 1 is defined for the contaminated likelihood.")
    weights, *comps = obs.owner.op.dist_params(obs.owner)
    if len(comps) != 2 or not all(c.owner is not None and isinstance(c.owner.op, RandomVariable) for c in comps):
        raise EstimateNotImplementedError(f"estimate_epsilon: factor {name!r} must mix two components (Normal, g): build "
                                          "it with pymc_dp.contaminate.")
    w = _public_array(weights, f"factor {name!r}'s mixture weights").reshape(-1, 2)
    if not (np.all(w == w[0]) and math.isclose(w[0].sum(), 1.0, rel_tol=1e-12) and 0.0 < w[0, 1] < 1.0):
        raise EstimateNotImplementedError(f"estimate_epsilon: factor {name!r}'s weights must be one constant [1 - p, p]: "
                                          "build it with pymc_dp.contaminate(model, p=...).")
    p = float(w[0, 1])
    normal, gvar = comps
    info = rule_info(gvar.owner.op)
    if not isinstance(normal.owner.op, NormalRV) or info is None or info.family not in CONTAMINANTS:
        raise EstimateNotImplementedError(f"estimate_epsilon: factor {name!r} must be (1 - p) Normal(mu, sigma) + p g with g "
                                          f"one of {list(CONTAMINANTS)}.")
    g = contaminant_of(info.family, {pn: _public_number(v, f"g's {pn}")
                                     for pn, v in zip(info.param_names, gvar.owner.op.dist_params(gvar.owner))})
    if len(model.free_RVs) != 1 or model.potentials or model.deterministics:
        raise EstimateNotImplementedError(f"estimate_epsilon: one free location only (the 1-d location model); the model "
                                          f"has free RVs {[rv.name for rv in model.free_RVs]}, potentials or deterministics; "
                                          "remove all but the location.")
    loc = model.free_RVs[0]
    mu_param, sigma_param = normal.owner.op.dist_params(normal.owner)
    if _strip(mu_param) is not loc:
        raise EstimateNotImplementedError(f"estimate_epsilon: factor {name!r}'s Normal location must be the free RV "
                                          f"{loc.name!r} itself (no transformation or regression).")
    sigma = _public_number(sigma_param, f"factor {name!r}'s Normal sigma")
    params = loc.owner.op.dist_params(loc.owner)
    if any(isinstance(v, SharedVariable) or (v.owner is None and not isinstance(v, Constant)
                                             and not isinstance(v.type, RandomType)) for v in ancestors(params)):
        raise EstimateNotImplementedError(f"estimate_epsilon: the prior of {loc.name!r} must have public numeric "
                                          "parameters: give them as numbers.")
    if loc.type.ndim != 0:
        raise EstimateNotImplementedError(f"estimate_epsilon: {loc.name!r} must be a scalar location (drop shape=).")
    value = pt.dvector("theta")
    logp = pm.logp(loc, value)  # the prior alone: no observed factor, no container in its graph
    prior = pytensor.function([value], logp, mode="FAST_COMPILE")
    return p, sigma, g, loc.name, prior


# --------------------------------------------------------------------------- the algorithm
def _simulate(rng, n, theta, sigma, p, g: Contaminant, lo, hi) -> np.ndarray:
    """n records i.i.d. from ``(1 - p) N(theta, sigma) + p g``, each component truncated to [lo, hi]."""
    out = np.empty(n)
    todo = np.arange(n)
    contaminated = rng.random(n) < p
    for _ in range(1000):
        k = todo.size
        if not k:
            return out
        if g.family == "StudentT":
            z = rng.standard_t(g.nu, k)
        elif g.family == "Cauchy":
            z = rng.standard_cauchy(k)
        elif g.family == "Laplace":
            z = rng.laplace(0.0, 1.0, k)
        else:
            z = rng.standard_normal(k)
        draw = np.where(contaminated[todo], g.loc + g.scale * z, theta + sigma * rng.standard_normal(k))
        ok = (draw >= lo) & (draw <= hi)
        out[todo[ok]] = draw[ok]
        todo = todo[~ok]
    raise EstimateNotImplementedError("estimate_epsilon: domain= holds too little of the model's mass at theta_star to "
                                      "simulate from: widen domain=, or move theta_star inside it.")


class _Lik:
    """``ln f_{theta,p}(x)`` of the contaminated Normal location model (broadcast)."""

    def __init__(self, p, sigma, g: Contaminant):
        self.a0 = math.log1p(-p) - _LOG_SQRT_2PI - math.log(sigma)
        self.lp, self.sigma, self.g = math.log(p), sigma, g

    def __call__(self, theta, x, logg=None):
        logg = self.lp + self.g.logpdf(x) if logg is None else logg
        z = (np.asarray(x) - np.asarray(theta)) / self.sigma
        return np.logaddexp(self.a0 - 0.5 * z * z, logg)


def _refined_max(fn, xs) -> float:
    """``max fn`` on the grid ``xs``, then on a fine grid about the argmax (fn smooth)."""
    v = fn(xs)
    k = int(np.argmax(v))
    step = xs[1] - xs[0]
    fine = np.clip(xs[k] + step * np.linspace(-1.0, 1.0, 81), xs[0], xs[-1])
    return float(max(v[k], np.max(fn(fine))))


def _one_dataset(x, lik: _Lik, prior, theta_star, delta, grid, xs) -> tuple[float, float]:
    """``(eps_hat, eta)`` of Algorithm 1 ``fixed`` on the exact grid posterior for one dataset."""
    n = x.size
    s = lik.sigma / math.sqrt(n)
    centre = float(np.median(x))  # simulated data: reading them leaks nothing
    half = 12.0 * s * 1.5 + abs(centre - theta_star)
    thetas = np.linspace(theta_star - half, theta_star + half, grid)
    logpost = np.asarray(prior(thetas), float)
    logg = lik.lp + lik.g.logpdf(x)
    for i in range(0, n, 2000):
        logpost = logpost + lik(thetas[None, :], x[i:i + 2000, None], logg[i:i + 2000, None]).sum(axis=0)
    w = np.exp(logpost - np.max(logpost))
    w /= w.sum()
    # step 3: eta = smallest radius with posterior mass outside [theta* - eta, theta* + eta] <= delta
    d = np.abs(thetas - theta_star)
    order = np.argsort(d)
    outside = 1.0 - np.cumsum(w[order])
    k = int(np.argmax(outside <= delta))
    eta = float(d[order][k])
    lo, hi = theta_star - eta, theta_star + eta
    # step 4: sups of ln r over A in closed form (f_{theta,p}(x) unimodal in theta, peak at theta = x)
    star = lambda u: lik(theta_star, u)  # noqa: E731
    s1 = _refined_max(lambda u: lik(np.clip(u, lo, hi), u) - star(u), xs)
    s2 = _refined_max(lambda u: star(u) - np.minimum(lik(lo, u), lik(hi, u)), xs)
    # step 5: sup_x' ln E_xi[r(x'; theta) / r(x_n; theta)]
    keep = w > 1e-18 * w.max()
    th, lw = thetas[keep], np.log(w[keep])
    xn = x[-1]
    base = lw - lik(th, xn) + float(lik(theta_star, xn))

    def s3_fn(u):
        u = np.asarray(u)[:, None]
        return np.logaddexp.reduce(base[None, :] + lik(th[None, :], u), axis=1) - star(u[:, 0])

    s3 = _refined_max(s3_fn, xs)
    return s1 + s2 + s3, eta


def estimate_epsilon(model: pm.Model, *, theta_star: Mapping[str, float] | float, n: int, delta: float = 1e-3,
                     n_datasets: int = 100, quantile: float = 0.95, variant: str = "fixed", grid: int = 1201,
                     domain: Interval | tuple[float, float] | None = None,
                     random_seed: int | None = None) -> EpsilonEstimate:
    """The paper's Algorithm 1 on datasets simulated from the contaminated model at ``theta_star``.

    Parameters
    ----------
    model : pm.Model
        A model returned by :func:`pymc_dp.contaminate`: one free location ``mu`` (any prior with
        public numeric parameters, read from the model) and one factor ``(1 - p) Normal(mu, sigma)
        + p g``, ``sigma`` a public number. Its data containers are never read.
    theta_star : dict or float
        The public "true" location (``{"mu": 0.0}``): a guess, or an estimate spent from a budget
        elsewhere -- never the non-private MAP of the private data, which would leak.
    n : int
        The dataset size to simulate.
    delta : float
        Algorithm 1's fixed delta (posterior mass allowed outside the ball ``A``).
    n_datasets, quantile : int, float
        Datasets simulated, and the quantile of the per-dataset epsilon reported
        (``gamma = 1 - quantile``).
    variant : str
        ``"fixed"`` (steps 1-6, ``x_n`` the last simulated record); ``"free"`` and ``"joint"`` are
        not implemented.
    grid : int
        Points of the exact grid posterior of the location (12 posterior sds either side).
    domain : Interval or (lo, hi), optional
        The data domain: the simulated records are truncated to it and the sups over a record are
        taken on it (default: the real line).
    random_seed : int, optional
        Seed of the simulation.

    Returns
    -------
    EpsilonEstimate
        Labelled ``"estimated, model-conditional, not DP"``; refused as a budget everywhere.

    Raises
    ------
    EstimateNotImplementedError
        (a ``PrivacyError`` and a ``NotImplementedError``) A model outside the 1-d contaminated
        Normal location model (what is missing is named), or a variant other than ``"fixed"``.
    """
    if variant not in VARIANTS:
        raise EstimateNotImplementedError(f"estimate_epsilon: variant={variant!r} is not implemented; use {list(VARIANTS)} "
                                          "('free' and 'joint' of docs/theory/contamination.md are not written yet).")
    p, sigma, g, name, prior = _read_model(model)
    if isinstance(theta_star, Mapping):
        if set(theta_star) != {name}:
            raise EstimateNotImplementedError(f"estimate_epsilon: theta_star must give the location {name!r} only, got "
                                              f"{sorted(theta_star)}.")
        theta_star = theta_star[name]
    theta_star = float(theta_star)
    if not (isinstance(n, numbers.Integral) and n >= 2 and isinstance(n_datasets, numbers.Integral)
            and n_datasets >= 1 and 0.0 < quantile < 1.0 and 0.0 < delta < 1.0 and math.isfinite(theta_star)):
        raise ValueError(f"estimate_epsilon: need n >= 2, n_datasets >= 1, 0 < quantile < 1, 0 < delta < 1 and a finite "
                         f"theta_star; got n={n!r}, n_datasets={n_datasets!r}, quantile={quantile!r}, "
                         f"delta={delta!r}, theta_star={theta_star!r}.")
    if domain is None:
        lo, hi = -math.inf, math.inf
    elif isinstance(domain, Interval):
        lo, hi = float(domain.lo), float(domain.hi)
    else:
        lo, hi = map(float, domain)
    lik = _Lik(p, sigma, g)
    reach = 40.0 * sigma + abs(g.loc - theta_star)  # beyond, r(x; theta) = 1 to double precision for heavy g
    xs = np.linspace(max(lo, theta_star - reach), min(hi, theta_star + reach), 4001)
    rng = np.random.default_rng(random_seed)
    values, etas = [], []
    for _ in range(int(n_datasets)):
        x = _simulate(rng, int(n), theta_star, sigma, p, g, lo, hi)
        eps, eta = _one_dataset(x, lik, prior, theta_star, float(delta), int(grid), xs)
        values.append(eps)
        etas.append(eta)
    settings = {"n": int(n), "p": p, "sigma": sigma, "g": g.describe(), "location": name, "theta_star": theta_star,
                "n_datasets": int(n_datasets), "quantile": float(quantile), "variant": variant, "grid": int(grid),
                "domain": (lo, hi), "random_seed": random_seed, "posterior": "exact grid"}
    return EpsilonEstimate(epsilon=EstimatedEpsilon(np.quantile(values, quantile)), delta=float(delta),
                           gamma=1.0 - float(quantile), values=tuple(values), etas=tuple(etas), settings=settings)
