"""The conjugacy planner: which free RVs of a truncated model have an exact sampler, and the :class:`ConjugatePlan` that draws them."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

import numpy as np
import pytensor
from pytensor.compile.mode import Mode
from pytensor.graph.replace import clone_replace
from pytensor.graph.traversal import ancestors
from pytensor.tensor.random.basic import (
    BernoulliRV,
    BetaRV,
    BinomialRV,
    CategoricalRV,
    DirichletRV,
    ExponentialRV,
    GammaRV,
    NormalRV,
    PoissonRV,
)
from scipy import special as sc

from pymc_dp.domains import Integers
from pymc_dp.exact.samplers import TruncatedDirichlet, truncated_beta, truncated_gamma, truncated_normal
from pymc_dp.exact.special import log_beta_mass, log_gamma_mass, log_normal_mass
from pymc_dp.exceptions import DomainError, NotConjugateError
from pymc_dp.truncate import IntervalConstraint, NormBallConstraint, PotentialConstraint

# =========================================================================== the plan
#: prior Op -> conjugate family
_PRIORS = {BetaRV: "Beta", GammaRV: "Gamma", ExponentialRV: "Gamma", NormalRV: "Normal", DirichletRV: "Dirichlet"}


_PRIOR_PARAM_NAMES = {
    BetaRV: ("alpha", "beta"),
    GammaRV: ("alpha", "scale"),
    ExponentialRV: ("scale",),
    NormalRV: ("mu", "sigma"),
    DirichletRV: ("a",),
}


#: likelihood Op -> (family name, parameter names, conjugate prior family, conjugate parameter, link)
_LIKELIHOODS = {
    BernoulliRV: ("Bernoulli", ("p",), "Beta", 0, "identity"),
    BinomialRV: ("Binomial", ("n", "p"), "Beta", 1, "identity"),
    PoissonRV: ("Poisson", ("mu",), "Gamma", 0, "identity"),
    ExponentialRV: ("Exponential", ("scale",), "Gamma", 0, "reciprocal"),
    NormalRV: ("Normal", ("mu", "sigma"), "Normal", 0, "identity"),
    CategoricalRV: ("Categorical", ("p",), "Dirichlet", 0, "identity"),
}


_CONJUGATE_TO = {
    "Beta": "Bernoulli(p) or Binomial(n, p)",
    "Gamma": "Poisson(mu) or Exponential(lam)",
    "Normal": "Normal(mu, sigma) with a known sigma",
    "Dirichlet": "Categorical(p)",
}


_DEFAULT_TRANSFORMS = {
    "Beta": {"LogOddsTransform"},
    "Gamma": {"LogTransform"},
    "Normal": set(),
    "Dirichlet": {"SimplexTransform"},
}


_SUPPORT = {"Beta": (0.0, 1.0), "Gamma": (0.0, math.inf), "Normal": (-math.inf, math.inf)}


_ALGORITHMS = {
    "Beta": "inverse CDF of the truncated Beta posterior, split at the median (betaincinv below it, "
    "betainccinv above it); exact tangent-envelope rejection in logit space where a tail mass underflows",
    "Gamma": "inverse CDF of the truncated Gamma posterior, split at the median (gammaincinv below it, "
    "gammainccinv above it); exact tangent-envelope rejection in log space where a tail mass underflows",
    "Normal": "inverse CDF of the truncated Normal posterior in log space (log_ndtr, ndtri_exp), "
    "split at the mean",
    "Dirichlet": "g_k ~ Gamma(a_k, 1), p = g / sum(g), conditioned on max_S g <= c min_S g: the minimum "
    "(index, value) by exact rejection from an adaptive piecewise envelope, the other g_k in S by "
    "inverse CDF truncated to [m, c m]",
}


_HINT = 'There is no exact sampler for this model: sample it with method="mcmc".'


_PUBLIC_SEED = 20240917  # fixed, public: the random values that verify a gather


def _copy_variable(v: "_Variable") -> "_Variable":
    """The structure of a variable (shape, prior, truncation), without factors or posterior."""
    import dataclasses

    return dataclasses.replace(v, factors=[], posterior={}, samplers={})


def _copy_factor(f: "_Factor") -> "_Factor":
    import dataclasses

    return dataclasses.replace(f, index=None, observed=None, others={})


def _refuse(message: str):
    raise NotConjugateError(f"{message} {_HINT}")


def _py_function(inputs, outputs):
    """Evaluate a small graph without compiling C or rewriting it (about a millisecond)."""
    return pytensor.function(
        list(inputs), list(outputs), mode=Mode(linker="py", optimizer=None), on_unused_input="ignore"
    )


def _json_value(x: np.ndarray):
    x = np.asarray(x, dtype=float)
    if x.size and np.all(x == x.flat[0]):
        return float(x.flat[0])
    return x.tolist()


@dataclass
class _Factor:
    name: str
    family: str
    param_names: tuple[str, ...]
    conj_index: int
    link: str
    rv_name: str
    rv_op: Any
    params: list
    value: Any
    private: bool
    #: filled in after evaluation
    index: np.ndarray | None = None  # element of the free RV (or row, for Categorical) per observation
    observed: np.ndarray | None = None
    others: dict = field(default_factory=dict)


@dataclass
class _Variable:
    name: str
    family: str
    prior_op: str
    shape: tuple[int, ...]
    dtype: str
    prior: dict  # prior parameter name -> array broadcast to shape
    factors: list = field(default_factory=list)
    lower: float = -math.inf
    upper: float = math.inf
    ratio: list = field(default_factory=list)  # Dirichlet: [(rows, classes, bound)]
    posterior: dict = field(default_factory=dict)
    samplers: dict = field(default_factory=dict)  # Dirichlet: row -> TruncatedDirichlet
    rv: Any = None
    transform: Any = None

    @property
    def size(self) -> int:
        return int(np.prod(self.shape, dtype=int))


class ConjugatePlan:
    """Exact, independent draws from a truncated conjugate posterior.

    Build it with :func:`conjugate_plan`. :meth:`describe` says, publicly, what is sampled and
    how; :meth:`sample` draws.

    Attributes
    ----------
    variables : tuple of str
        Every free RV of the model, in model order.
    """

    def __init__(self, variables: Sequence[_Variable]):
        self._vars = list(variables)
        self.variables = tuple(v.name for v in self._vars)
        self._planner = None  # set by conjugate_plan: what with_data re-evaluates
        self._log_norm = None
        #: the power of the likelihood (1: the posterior; see :meth:`tempered`)
        self.beta = 1.0

    def describe(self) -> dict:
        """Public description: families, factors, truncation, algorithm; no statistic of the data."""
        out = {}
        for v in self._vars:
            if v.family == "Dirichlet":
                truncation = (
                    {
                        "kind": "ratio",
                        "region": "max_{k in classes} p_k / min_{k in classes} p_k <= exp(bound)",
                        "groups": [
                            {"rows": [int(r) for r in rows], "classes": [int(k) for k in classes], "bound": float(b)}
                            for rows, classes, b in v.ratio
                        ],
                    }
                    if v.ratio
                    else None
                )
            else:
                lo_s, hi_s = _SUPPORT[v.family]
                lower = None if v.lower <= lo_s else float(v.lower)
                upper = None if v.upper >= hi_s else float(v.upper)
                truncation = None if lower is None and upper is None else {"kind": "interval", "lower": lower, "upper": upper}
            out[v.name] = {
                "prior": v.family if v.prior_op == v.family else f"{v.prior_op} (as {v.family})",
                "prior_parameters": {k: _json_value(x) for k, x in v.prior.items()},
                "shape": [int(s) for s in v.shape],
                "likelihood": [
                    {
                        "factor": f.name,
                        "family": f.family,
                        "parameter": f.param_names[f.conj_index],
                        "reads_private_data": bool(f.private),
                    }
                    for f in v.factors
                ],
                "truncation": truncation,
                "posterior": f"{v.family}" + ("" if truncation is None else " restricted to the truncation"),
                "algorithm": _ALGORITHMS[v.family],
            }
        if self.beta != 1.0:
            for v in out.values():
                v["posterior"] += f" (likelihood tempered: power {self.beta:.6g})"
            return {"method": "exact", "likelihood_power": float(self.beta), "variables": out}
        return {"method": "exact", "variables": out}

    def sample(self, draws: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
        """``draws`` independent exact posterior draws of every free RV.

        Returns a dict: name -> array of shape ``(draws, *rv_shape)`` and the RV's dtype. The same
        generator state gives the same arrays.
        """
        draws = int(draws)
        if draws < 1:
            raise ValueError(f"draws={draws} must be >= 1")
        if not isinstance(rng, np.random.Generator):
            raise TypeError("rng must be a numpy.random.Generator")
        out = {}
        for v in self._vars:
            post = v.posterior
            if v.family == "Beta":
                x = truncated_beta(post["alpha"], post["beta"], v.lower, v.upper, rng, draws)
            elif v.family == "Gamma":
                x = truncated_gamma(post["shape"], post["rate"], v.lower, v.upper, rng, draws)
            elif v.family == "Normal":
                x = truncated_normal(post["mu"], post["sigma"], v.lower, v.upper, rng, draws)
            else:
                k = v.shape[-1]
                rows = post["alpha"].reshape(-1, k)
                x = np.empty((draws, rows.shape[0], k))
                for r in range(rows.shape[0]):
                    x[:, r, :] = v.samplers[r].sample(draws, rng)
            out[v.name] = np.asarray(x, dtype=v.dtype).reshape((draws, *v.shape))
        return out

    # ------------------------------------------------------------------ audits
    # Everything below reads the posterior, i.e. the private data: it is for the data owner's
    # own audits (pymc_dp.audit), never for a release.
    def with_data(self, data: Mapping[str, Any]) -> "ConjugatePlan":
        """The same exact sampler (model, truncation) for other values of the private data.

        Parameters
        ----------
        data : dict of str to array_like
            New values of some or all private containers, of their current shapes and inside
            their domains; the others keep their values.

        Returns
        -------
        ConjugatePlan
            A new plan; this one is unchanged. Truncated Dirichlet envelopes are built at the
            first :meth:`sample`, so a plan used only for :meth:`log_density` stays cheap
            (about a millisecond for small models).
        """
        if self._planner is None:
            raise RuntimeError("this plan was not built by conjugate_plan(): it cannot be re-evaluated")
        out = self._planner.refresh(self, data)
        return out if self.beta == 1.0 else out.tempered(self.beta)

    def tempered(self, beta: float) -> "ConjugatePlan":
        """The same plan with the private likelihood raised to the power ``beta``.

        The density sampled is ``prior x (likelihood of the factors that read private data)^beta
        x (likelihood of the other factors)``, restricted to the same truncation; ``beta = 1`` is
        the posterior. For a conjugate model it is in the same family, with the sufficient
        statistics of the private factors multiplied by ``beta`` (Beta: successes and failures;
        Gamma: the shape and rate increments; Normal: the precision and precision-weighted sum;
        Dirichlet: the counts).
        This is the exponential mechanism with the log-likelihood as utility and the truncated
        prior as base measure (:mod:`pymc_dp.mechanisms.map`).

        Parameters
        ----------
        beta : float
            The power, finite and > 0. Relative to this plan's likelihood (plans are built with
            power 1), so ``plan.tempered(a).tempered(b)`` has power ``a * b``.

        Returns
        -------
        ConjugatePlan
            A new plan; this one is unchanged. :meth:`with_data` keeps the power.
        """
        import dataclasses

        beta = float(beta)
        if not (math.isfinite(beta) and beta > 0):
            raise ValueError(f"beta={beta!r} must be finite and > 0")
        if self._planner is None:
            raise RuntimeError("this plan was not built by conjugate_plan(): it cannot be tempered")
        power = self.beta * beta
        variables = [dataclasses.replace(v, factors=list(v.factors), posterior={}, samplers={}) for v in self._vars]
        for v in variables:
            _Planner._posterior(self._planner, v, samplers=False, beta=power)
        out = ConjugatePlan(variables)
        out._planner = self._planner
        out.beta = power
        return out

    def posteriors(self) -> dict[str, dict]:
        """The truncated posterior of every free RV, as numbers. **Reads the private data.**

        Per variable: ``family``, ``shape``, and

        * Beta: ``alpha``, ``beta``; Gamma: ``alpha`` (shape), ``rate``; Normal: ``mu``,
          ``sigma`` -- flat arrays with one entry per element -- and the interval ``lower``,
          ``upper`` shared by every element;
        * Dirichlet: ``alpha`` of shape ``(rows, K)``, and per row the ``classes`` S and
          ``log_c`` of the region ``max_S p / min_S p <= e^log_c`` (``inf``: no truncation).
        """
        out = {}
        for v in self._vars:
            post = {k: np.array(x, dtype=float) for k, x in v.posterior.items()}
            entry = {"family": v.family, "shape": tuple(v.shape)}
            if v.family == "Beta":
                entry.update(alpha=post["alpha"], beta=post["beta"])
            elif v.family == "Gamma":
                entry.update(alpha=post["shape"], rate=post["rate"])
            elif v.family == "Normal":
                entry.update(mu=post["mu"], sigma=post["sigma"])
            else:
                rows = post["alpha"].shape[0]
                entry.update(
                    alpha=post["alpha"],
                    classes=tuple(tuple(int(k) for k in v.samplers[r].classes) for r in range(rows)),
                    log_c=np.array(
                        [math.inf if v.samplers[r].free else v.samplers[r].log_c for r in range(rows)]
                    ),
                )
            if v.family != "Dirichlet":
                entry.update(lower=float(v.lower), upper=float(v.upper))
            out[v.name] = entry
        return out

    def log_normalisers(self) -> dict[str, np.ndarray]:
        """Per variable, the log normalising constant of each element's (or Dirichlet row's)
        truncated posterior density: the log of the untruncated normaliser plus the log of
        the posterior mass of the truncation, in log space throughout (:func:`log_beta_mass`,
        :func:`log_gamma_mass`, :func:`log_normal_mass`, :func:`log_dirichlet_ratio_mass`)."""
        if self._log_norm is None:
            out = {}
            for v in self._vars:
                post = v.posterior
                if v.family == "Beta":
                    a, b = post["alpha"], post["beta"]
                    out[v.name] = sc.betaln(a, b) + log_beta_mass(a, b, v.lower, v.upper)
                elif v.family == "Gamma":
                    a, r = post["shape"], post["rate"]
                    mass = log_gamma_mass(a, v.lower * r, v.upper * r if math.isfinite(v.upper) else math.inf)
                    out[v.name] = sc.gammaln(a) - a * np.log(r) + mass
                elif v.family == "Normal":
                    m, sd = post["mu"], post["sigma"]
                    out[v.name] = np.log(sd) + 0.5 * math.log(2 * math.pi) + log_normal_mass(m, sd, v.lower, v.upper)
                else:
                    alpha = post["alpha"]
                    out[v.name] = np.array(
                        [
                            float(np.sum(sc.gammaln(alpha[r])) - sc.gammaln(np.sum(alpha[r])))
                            + v.samplers[r].log_region_mass()
                            for r in range(alpha.shape[0])
                        ]
                    )
            self._log_norm = out
        return {k: v.copy() for k, v in self._log_norm.items()}

    def log_density(self, values: Mapping[str, np.ndarray]) -> np.ndarray:
        """Log density of the truncated posterior at points ``values`` (name -> array of shape
        ``(G, *rv_shape)``): shape ``(G,)``, ``-inf`` outside the truncation. The density is with
        respect to Lebesgue measure on each element (on the first K-1 coordinates of a
        Dirichlet row). **Reads the private data.**"""
        norms = self.log_normalisers()
        total = None
        for v in self._vars:
            x = np.asarray(values[v.name], dtype=float)
            g = x.shape[0]
            post = v.posterior
            with np.errstate(divide="ignore", invalid="ignore"):
                if v.family == "Dirichlet":
                    k = v.shape[-1]
                    p = x.reshape(g, -1, k)
                    lp = np.log(p)
                    kern = np.sum((post["alpha"][None] - 1.0) * lp, axis=2) - norms[v.name][None]
                    inside = np.ones(p.shape[:2], bool)
                    for r in range(p.shape[1]):
                        smp = v.samplers[r]
                        if not smp.free:
                            cl = smp.classes
                            ratio = np.max(lp[:, r, cl], axis=1) - np.min(lp[:, r, cl], axis=1)
                            inside[:, r] = ratio <= smp.log_c * (1 + 1e-12)
                    inside &= np.all(p > 0, axis=2) & (np.abs(p.sum(axis=2) - 1.0) < 1e-9)
                else:
                    t = x.reshape(g, -1)
                    if v.family == "Beta":
                        kern = sc.xlogy(post["alpha"] - 1.0, t) + sc.xlog1py(post["beta"] - 1.0, -t)
                    elif v.family == "Gamma":
                        kern = sc.xlogy(post["shape"] - 1.0, t) - post["rate"] * t
                    else:
                        kern = -0.5 * np.square((t - post["mu"]) / post["sigma"])
                    kern = kern - norms[v.name][None]
                    inside = (t >= v.lower) & (t <= v.upper)
                val = np.sum(np.where(inside, kern, -np.inf), axis=1)
            total = val if total is None else total + val
        return total

    def __repr__(self):
        return f"<ConjugatePlan {', '.join(self.variables)}>"


def conjugate_plan(model, constraints: Sequence, domains: Mapping[str, Any]) -> ConjugatePlan:
    """An exact sampler for the truncated posterior of ``model``, or :class:`NotConjugateError`.

    Parameters
    ----------
    model : pm.Model
        The rewritten (truncated) model, ``PrivateModel.model``.
    constraints : sequence
        ``Certification.constraints``: the truncation the certificate claims.
    domains : mapping
        ``PrivateModel.domains``: private container name -> Domain.

    Raises
    ------
    NotConjugateError
        Naming the variable (or factor, or potential) that breaks conjugacy, and why. Decided
        from public information only (the model's structure, priors, public indices, the
        truncation), so falling back to MCMC on it reveals nothing about the private data.
    DomainError
        Observed values outside the support of their likelihood (e.g. a Binomial count above n):
        the posterior is undefined. This one depends on the data: do not fall back on it.
    """
    return _Planner(model, constraints, domains).build()


class _Planner:
    def __init__(self, model, constraints, domains):
        self.model = model
        self.constraints = tuple(constraints)
        self.domains = dict(domains)
        self.free = list(model.free_RVs)
        self.free_set = set(self.free)
        self.data = set(model.data_vars)
        self.private = {v for v in model.data_vars if v.name in self.domains}

    # ------------------------------------------------------------------ structure
    def build(self) -> ConjugatePlan:
        intervals, ratios = self._constraints()
        self._potentials(ratios)
        variables = {rv.name: self._prior(rv) for rv in self.free}
        factors = self._factors(variables)
        self._evaluate(variables, factors)
        for name, var in variables.items():
            self._interval(var, intervals.get(name, []))
        self._ratios(variables, ratios)
        for var in variables.values():
            self._posterior(var)
        plan = ConjugatePlan([variables[rv.name] for rv in self.free])
        plan._planner = self
        return plan

    # ------------------------------------------------------------------ other data (audits)
    def refresh(self, plan: ConjugatePlan, data: Mapping[str, Any]) -> ConjugatePlan:
        """``plan`` re-evaluated on other private data: same structure and truncation, the
        observed values, gather maps and posteriors recomputed (see ConjugatePlan.with_data)."""
        by_name = {d.name: d for d in self.private}
        values = {}
        for name, value in data.items():
            if name not in by_name:
                raise DomainError(f"with_data: {name!r} is not a private container of this model ({sorted(by_name)}).")
            arr = np.asarray(value)
            current = np.asarray(by_name[name].get_value())
            if arr.shape != current.shape:
                raise DomainError(f"with_data: {name!r} has shape {arr.shape}, the model's has {current.shape}.")
            self.domains[name].validate(name, arr)
            values[name] = arr.astype(current.dtype)
        variables, factors = {}, []
        for v in plan._vars:
            variables[v.name] = _copy_variable(v)
        for v in plan._vars:
            for f in v.factors:
                nf = _copy_factor(f)
                variables[v.name].factors.append(nf)
                factors.append(nf)
        if factors:
            self._evaluate_on(variables, factors, values)
        for var in variables.values():
            self._posterior(var, samplers=False)
        out = ConjugatePlan([variables[v.name] for v in plan._vars])
        out._planner = self
        return out

    def _evaluate_on(self, variables, factors, values):
        """As the factor half of :meth:`_evaluate`, with the private containers as inputs."""
        key = tuple(f.name for f in factors)
        cached = getattr(self, "_refresh_fns", {}).get(key)
        private = sorted(self.private, key=lambda d: d.name)
        if cached is None:
            holders = {rv: rv.type() for rv in self.free}
            inputs = {d: d.type() for d in private}
            outs = []
            for f in factors:
                outs += list(f.params) + [f.value]
            replaced = clone_replace(outs, replace={**holders, **inputs})
            # compiled (not the Python linker of _py_function): it runs once per dataset of a search
            cached = pytensor.function(
                [holders[rv] for rv in self.free] + [inputs[d] for d in private], replaced, on_unused_input="ignore"
            )
            self._refresh_fns = {**getattr(self, "_refresh_fns", {}), key: cached}
        fn = cached
        data = [values[d.name] if d.name in values else np.asarray(d.get_value()) for d in private]
        self._probe(self.free, variables, factors, fn, data)

    def _probe(self, free, variables, factors, fn, data):
        """Evaluate the factors' parameters with every free RV set to three public probes (its
        element indices, their reciprocals ``1 / (tag + 1)`` for reciprocal links, and uniform
        values from a public seed), and record per factor which element of its conjugate RV each
        observation reads (:meth:`_gather`), its observed values and its other parameters."""
        rng = np.random.default_rng(_PUBLIC_SEED)
        tags, recips, rand = [], [], []
        for rv in free:
            shape = variables[rv.name].shape
            t = np.arange(int(np.prod(shape, dtype=int)), dtype=rv.dtype).reshape(shape)
            tags.append(t)
            recips.append((t + 1.0).astype(rv.dtype))  # a reciprocal link maps it to 1 / (tag + 1)
            rand.append(rng.uniform(0.25, 0.75, shape).astype(rv.dtype))
        by_tag, by_recip, by_rand = fn(*tags, *data), fn(*recips, *data), fn(*rand, *data)
        pos = 0
        rand_of = {rv.name: r for rv, r in zip(free, rand)}
        for f in factors:
            n_out = len(f.params) + 1
            t_out, r_out, v_out = (x[pos : pos + n_out] for x in (by_tag, by_recip, by_rand))
            pos += n_out
            var = variables[f.rv_name]
            self._gather(f, var, np.asarray(t_out[f.conj_index]), np.asarray(r_out[f.conj_index]),
                         np.asarray(v_out[f.conj_index]), rand_of[f.rv_name])
            f.observed = np.asarray(v_out[-1])
            # parameters other than the conjugate one read no free RV: any evaluation is theirs
            f.others = {f.param_names[j]: np.asarray(v_out[j]) for j in range(len(f.params)) if j != f.conj_index}

    def _constraints(self):
        intervals, ratios = {}, {}
        for c in self.constraints:
            if isinstance(c, NormBallConstraint):
                _refuse(
                    f"{c.var!r} is truncated to a norm ball ({c.describe()}), the truncation of a "
                    "regression's weights: its truncated posterior is not a conjugate family."
                )
            elif isinstance(c, IntervalConstraint):
                intervals.setdefault(c.var, []).append(c)
            elif isinstance(c, PotentialConstraint):
                ratios.setdefault(c.factor, []).append(c)
            else:
                _refuse(f"the constraint {c!r} is of a kind the exact samplers do not know.")
        return intervals, ratios

    def _potentials(self, ratios):
        for pot in self.model.potentials:
            name = pot.name or "<unnamed>"
            if name.endswith("__dp_theta_L") and name[: -len("__dp_theta_L")] in ratios:
                continue
            if any(name.endswith(s) for s in ("__dp_polar", "__dp_direction", "__dp_radius")):
                _refuse(f"the model holds the norm-ball reparametrisation term {name!r}: not conjugate.")
            _refuse(
                f"the model has a pm.Potential {name!r}: an arbitrary potential multiplies the "
                "posterior by a factor no conjugate family absorbs."
            )

    def _prior(self, rv) -> _Variable:
        op = rv.owner.op
        family = _PRIORS.get(type(op))
        if family is None:
            _refuse(
                f"free RV {rv.name!r} has a {type(op).__name__.removesuffix('RV')} prior; exact "
                "sampling supports Beta, Gamma, Exponential, Normal and Dirichlet priors."
            )
        if not str(rv.dtype).startswith("float"):
            _refuse(f"free RV {rv.name!r} has dtype {rv.dtype}.")
        params = op.dist_params(rv.owner)
        anc = set(ancestors(params))
        others = [r.name for r in self.free if r in anc and r is not rv]
        if others:
            _refuse(
                f"the prior of {rv.name!r} depends on free RV(s) {others}: a hierarchical prior is "
                "not conjugate here (every free RV must be a root with constant prior parameters)."
            )
        data = sorted(d.name for d in self.data if d in anc)
        if data:
            _refuse(f"the prior of {rv.name!r} reads data {data}; its parameters must be constants.")
        transform = self.model.rvs_to_transforms.get(rv)
        tname = None if transform is None else type(transform).__name__
        if tname is not None and tname not in _DEFAULT_TRANSFORMS[family] and not (
            family != "Dirichlet" and tname in ("Interval", "IntervalTransform")
        ):
            _refuse(f"free RV {rv.name!r} has the value transform {tname}, which the exact samplers do not know.")
        prior_op = "Exponential" if type(op) is ExponentialRV else family
        return _Variable(rv.name, family, prior_op, (), str(rv.dtype), {}, rv=rv, transform=transform)

    def _factors(self, variables) -> list[_Factor]:
        factors = []
        for obs in self.model.observed_RVs:
            op = obs.owner.op
            params = list(op.dist_params(obs.owner))
            reads = []
            for j, p in enumerate(params):
                anc = set(ancestors([p]))
                for rv in self.free:
                    if rv in anc:
                        reads.append((j, rv))
            value = self.model.rvs_to_values[obs]
            if not reads:
                continue  # reads no free RV: a constant factor of the posterior
            names = sorted({rv.name for _, rv in reads})
            spec = _LIKELIHOODS.get(type(op))
            fam_name = spec[0] if spec else type(op).__name__.removesuffix("RV")
            if len(names) > 1:
                _refuse(
                    f"factor {obs.name!r} ({fam_name}) reads several free RVs {names}; a conjugate "
                    "update needs each factor to read exactly one."
                )
            rv = reads[0][1]
            var = variables[rv.name]
            if spec is None:
                _refuse(
                    f"factor {obs.name!r} is a {fam_name} likelihood of free RV {rv.name!r}; "
                    f"a {var.family} prior is conjugate to {_CONJUGATE_TO[var.family]} only."
                )
            family, pnames, prior_family, conj, link = spec
            if prior_family != var.family:
                _refuse(
                    f"factor {obs.name!r} ({family}) reads free RV {rv.name!r}, whose prior is "
                    f"{var.family}: a {var.family} prior is conjugate to {_CONJUGATE_TO[var.family]} "
                    f"only, and a {family} likelihood needs a {prior_family} prior."
                )
            bad = sorted({pnames[j] for j, _ in reads if j != conj})
            if bad:
                _refuse(
                    f"factor {obs.name!r} ({family}) reads free RV {rv.name!r} in its parameter(s) "
                    f"{bad}; only {pnames[conj]!r} may be a free RV (e.g. a Normal needs a known "
                    "sigma), the others must be constants or data."
                )
            reads_private = bool(set(ancestors([value, *params])) & self.private)
            f = _Factor(obs.name, family, pnames, conj, link, rv.name, op, params, value, reads_private)
            var.factors.append(f)
            factors.append(f)
        return factors

    # ------------------------------------------------------------------ evaluation
    def _evaluate(self, variables, factors):
        """Evaluate shapes, prior parameters, observed values and the gather maps."""
        free = self.free
        consts = []
        for rv in free:
            consts.append(rv.shape)
            consts += list(rv.owner.op.dist_params(rv.owner))
        fn0 = _py_function([], consts)
        vals = iter(fn0())
        for rv in free:
            var = variables[rv.name]
            var.shape = tuple(int(s) for s in next(vals))
            names = _PRIOR_PARAM_NAMES[type(rv.owner.op)]
            raw = {n: np.asarray(next(vals), dtype=float) for n in names}
            try:
                var.prior = self._prior_params(rv, var, raw)
            except ValueError:
                _refuse(f"the prior parameters of {rv.name!r} do not broadcast to its shape {var.shape}.")
            for key, val in var.prior.items():
                if not np.all(np.isfinite(val)) or (key != "mu" and np.any(val <= 0)):
                    _refuse(f"the prior of {rv.name!r} has an invalid parameter {key}.")
        if not factors:
            return
        holders = {rv: rv.type() for rv in free}
        outs = []
        for f in factors:
            outs += list(f.params) + [f.value]
        replaced = clone_replace(outs, replace=holders)
        fn = _py_function([holders[rv] for rv in free], replaced)
        self._probe(free, variables, factors, fn, [])

    @staticmethod
    def _prior_params(rv, var, raw):
        op = type(rv.owner.op)
        shape = var.shape
        if op is BetaRV:
            return {"alpha": np.broadcast_to(raw["alpha"], shape), "beta": np.broadcast_to(raw["beta"], shape)}
        if op is GammaRV:
            return {"alpha": np.broadcast_to(raw["alpha"], shape), "rate": np.broadcast_to(1.0 / raw["scale"], shape)}
        if op is ExponentialRV:
            return {"alpha": np.ones(shape), "rate": np.broadcast_to(1.0 / raw["scale"], shape)}
        if op is NormalRV:
            return {"mu": np.broadcast_to(raw["mu"], shape), "sigma": np.broadcast_to(raw["sigma"], shape)}
        return {"a": np.broadcast_to(raw["a"], shape)}

    def _gather(self, f: _Factor, var: _Variable, by_tag, by_recip, by_rand, rand):
        """Map every element of the conjugate parameter to the element of the free RV it reads."""
        size = var.size
        what = f"{'1 / ' if f.link == 'reciprocal' else ''}{var.name}[...]"

        def fail(detail):
            _refuse(
                f"factor {f.name!r} ({f.family}): its parameter {f.param_names[f.conj_index]!r} is not "
                f"a pure gather {what} of free RV {var.name!r} ({detail}); conjugacy needs the "
                "parameter to be the free RV itself, indexed, broadcast or cast, with no link "
                "function or arithmetic (e.g. use p=theta, not logit_p=theta)."
            )

        raw = by_tag if f.link == "identity" else 1.0 / by_recip - 1.0
        with np.errstate(invalid="ignore"):
            idx = np.rint(raw)
        if not (np.all(np.isfinite(raw)) and np.all(np.abs(raw - idx) <= 1e-6) and np.all((idx >= 0) & (idx < size))):
            fail("its value is not an element of the free RV")
        idx = idx.astype(np.int64)
        expected = rand.reshape(-1)[idx]
        if f.link == "reciprocal":
            expected = 1.0 / expected
        if by_rand.shape != idx.shape or not np.array_equal(by_rand, expected.astype(by_rand.dtype)):
            fail("its value on random inputs differs from the gathered inputs")
        if f.family == "Categorical":
            k = var.shape[-1]
            if idx.ndim == 0 or idx.shape[-1] != k or np.any(idx - idx[..., :1] != np.arange(k)) or np.any(idx[..., 0] % k):
                fail("the class axis of p is not the class axis of the Dirichlet")
            idx = idx[..., 0] // k  # the row of the Dirichlet
        f.index = idx

    # ------------------------------------------------------------------ truncation
    def _interval(self, var: _Variable, cons):
        if var.family == "Dirichlet":
            if cons:
                _refuse(f"Dirichlet {var.name!r} has an interval truncation {cons[0].describe()}.")
            return
        lo, hi = _SUPPORT[var.family]
        for c in cons:
            if c.lower is not None:
                lo = max(lo, float(c.lower))
            if c.upper is not None:
                hi = min(hi, float(c.upper))
        t = var.transform
        if t is not None and type(t).__name__ in ("Interval", "IntervalTransform"):
            t_lo, t_hi = (self._value(b) for b in t.args_fn(*var.rv.owner.inputs))
            if t_lo is not None:
                lo = max(lo, float(np.max(t_lo)))
            if t_hi is not None:
                hi = min(hi, float(np.min(t_hi)))
        if not lo < hi:
            _refuse(f"the truncation of {var.name!r} is empty ([{lo}, {hi}]).")
        var.lower, var.upper = lo, hi

    def _ratios(self, variables, ratios):
        by_factor = {f.name: f for v in variables.values() for f in v.factors}
        per_row: dict[str, dict[int, list]] = {}
        for fname, cons in ratios.items():
            f = by_factor.get(fname)
            names = sorted({n for c in cons for n in c.vars})
            if f is None or f.family != "Categorical" or len(names) != 1 or names[0] != f.rv_name:
                _refuse(
                    f"the truncation of {names} for factor {fname!r} is a general potential "
                    f"({cons[0].describe()}); only the max/min ratio region of a Categorical factor "
                    "of a Dirichlet prior has an exact sampler."
                )
            var = variables[f.rv_name]
            classes = self._classes(f, var)
            if set(ancestors(f.params)) & self.private:
                _refuse(
                    f"the truncation of Dirichlet {var.name!r} for factor {fname!r} couples its rows "
                    "(p reads private data, e.g. p = P[y] with a private label y)."
                )
            obs = f.observed
            rows = np.broadcast_to(f.index, obs.shape)
            rec = rows.reshape(1, 1) if rows.ndim == 0 else rows.reshape(rows.shape[0], -1)
            if np.any(rec != rec[:, :1]):
                _refuse(
                    f"factor {fname!r}: one record of its observations reads several rows of "
                    f"Dirichlet {var.name!r}, so its truncation couples them."
                )
            mult = rec.shape[1]
            used = np.unique(rec[:, 0])
            for c in cons:
                self._verify_ratio(c, var, classes, used, mult)
                for r in used:
                    per_row.setdefault(var.name, {}).setdefault(int(r), []).append((classes, float(c.bound) / mult))
        for name, rows in per_row.items():
            var = variables[name]
            groups: dict[tuple, list] = {}
            for r, lst in sorted(rows.items()):
                classes = {cl for cl, _ in lst}
                if len(classes) > 1:
                    _refuse(
                        f"Dirichlet {name!r} (row {r}) is truncated by factors over different class "
                        f"sets {sorted(classes)}; their intersection has no exact sampler."
                    )
                bound = min(b for _, b in lst)
                groups.setdefault((lst[0][0], bound), []).append(r)
            var.ratio = [(tuple(rows_), cl, b) for (cl, b), rows_ in groups.items()]

    @staticmethod
    def _value(b):
        """A bound of an Interval transform as an array (None stays None)."""
        if b is None:
            return None
        if isinstance(b, (int, float, np.ndarray, np.number)):
            return np.asarray(b, dtype=float)
        return np.asarray(_py_function([], [b])()[0], dtype=float)

    def _classes(self, f, var):
        """The classes S the observed private labels may take: their Integers domain, within 0..K-1."""
        k = var.shape[-1]
        containers = [d for d in ancestors([f.value]) if d in self.private]
        doms = {self.domains[d.name] for d in containers}
        if len(doms) != 1 or not isinstance(next(iter(doms)), Integers):
            _refuse(f"factor {f.name!r}: the classes its observations may take are not one Integers domain.")
        dom = next(iter(doms))
        return tuple(range(max(dom.lo, 0), min(dom.hi, k - 1) + 1))

    @staticmethod
    def _verify_ratio(c, var, classes, used, mult):
        """Check the region read here against the certificate's own evaluation of the constraint."""
        k = var.shape[-1]
        rng = np.random.default_rng(_PUBLIC_SEED)
        n = 16
        p = rng.dirichlet(np.ones(k), size=(n, var.size // k))
        cl = list(classes)
        ratio = np.log(p[:, :, cl].max(axis=2)) - np.log(p[:, :, cl].min(axis=2))
        mine = mult * ratio[:, used].max(axis=1)
        try:
            theirs = np.asarray(c.evaluate({var.name: p.reshape((n, *var.shape))}), dtype=float)
        except Exception as err:  # pragma: no cover - depends on the certificate's internals
            _refuse(f"the truncation of {var.name!r} for factor {c.factor!r} could not be evaluated ({err}).")
        if theirs.shape != mine.shape or not np.allclose(theirs, mine, rtol=1e-9, atol=1e-12):
            _refuse(
                f"the truncation of Dirichlet {var.name!r} for factor {c.factor!r} is not the "
                "max/min ratio region the exact sampler handles."
            )

    # ------------------------------------------------------------------ posterior
    def _posterior(self, var: _Variable, samplers: bool = True, beta: float = 1.0):
        """Prior x (private likelihood)^beta x (public likelihood): the sufficient statistics of
        the factors that read private data enter times ``beta`` (1: the posterior)."""
        size = var.size
        if var.family == "Beta":
            succ, fail = np.zeros(size), np.zeros(size)
            for f in var.factors:
                x, idx = self._obs(f, var)
                n = np.broadcast_to(f.others["n"], f.observed.shape).reshape(-1) if f.family == "Binomial" else 1.0
                if np.any((x < 0) | (x > n)) or np.any(x != np.floor(x)):
                    self._outside(f)
                w = beta if f.private else 1.0
                np.add.at(succ, idx, w * x)
                np.add.at(fail, idx, w * (n - x))
            post = {"alpha": var.prior["alpha"].reshape(-1) + succ, "beta": var.prior["beta"].reshape(-1) + fail}
        elif var.family == "Gamma":
            shape_, rate = np.zeros(size), np.zeros(size)
            for f in var.factors:
                x, idx = self._obs(f, var)
                if np.any(x < 0) or (f.family == "Poisson" and np.any(x != np.floor(x))):
                    self._outside(f)
                w = beta if f.private else 1.0
                if f.family == "Poisson":
                    np.add.at(shape_, idx, w * x)
                    np.add.at(rate, idx, w)
                else:
                    np.add.at(shape_, idx, w)
                    np.add.at(rate, idx, w * x)
            post = {"shape": var.prior["alpha"].reshape(-1) + shape_, "rate": var.prior["rate"].reshape(-1) + rate}
        elif var.family == "Normal":
            prec, lin = np.zeros(size), np.zeros(size)
            for f in var.factors:
                x, idx = self._obs(f, var)
                sigma = np.broadcast_to(f.others["sigma"], f.observed.shape).reshape(-1).astype(float)
                if np.any(~np.isfinite(x)) or np.any(~(sigma > 0)):
                    self._outside(f)
                w = beta if f.private else 1.0
                np.add.at(prec, idx, w / sigma**2)
                np.add.at(lin, idx, w * x / sigma**2)
            p0 = 1.0 / var.prior["sigma"].reshape(-1) ** 2
            total = p0 + prec
            mu = (var.prior["mu"].reshape(-1) * p0 + lin) / total
            post = {"mu": mu, "sigma": 1.0 / np.sqrt(total)}
        else:
            k = var.shape[-1]
            counts = np.zeros((size // k, k))
            for f in var.factors:
                x, rows = self._obs(f, var)
                if np.any((x < 0) | (x >= k)) or np.any(x != np.floor(x)):
                    self._outside(f)
                np.add.at(counts, (rows, x.astype(np.int64)), beta if f.private else 1.0)
            alpha = var.prior["a"].reshape(-1, k) + counts
            post = {"alpha": alpha}
            bounds = {r: (cl, b) for rows, cl, b in var.ratio for r in rows}
            for r in range(alpha.shape[0]):
                cl, b = bounds.get(r, ((), math.inf))
                var.samplers[r] = TruncatedDirichlet(alpha[r], cl, b, build=samplers)
        for key, val in post.items():
            if not np.all(np.isfinite(val)) or (key != "mu" and np.any(val <= 0)):  # pragma: no cover
                raise DomainError(f"the posterior of {var.name!r} is not a proper {var.family} distribution.")
        var.posterior = post

    @staticmethod
    def _obs(f: _Factor, var: _Variable):
        x = np.asarray(f.observed, dtype=float)
        try:
            idx = np.broadcast_to(f.index, x.shape)
        except ValueError:
            _refuse(f"factor {f.name!r}: its parameter does not broadcast to its observed shape {x.shape}.")
        return x.reshape(-1), np.ascontiguousarray(idx).reshape(-1)

    @staticmethod
    def _outside(f: _Factor):
        # a DomainError, not NotConjugateError: this depends on the data, so method="auto" must not
        # fall back to MCMC on it (the choice of sampler would then reveal it)
        raise DomainError(
            f"factor {f.name!r}: some observed values lie outside the support of its {f.family} "
            "distribution, so the posterior is not defined (check the data, or for a Binomial that "
            "the declared domain does not exceed n)."
        )
