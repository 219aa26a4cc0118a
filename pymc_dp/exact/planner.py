"""The conjugacy planner: which free RVs of a truncated model have an exact sampler.

:func:`conjugate_plan` reads the rewritten model's structure (priors, likelihood factors, the
truncation the certificate claims), refuses with :class:`~pymc_dp.exceptions.NotConjugateError`
anything that breaks conjugacy (decided from public information only), evaluates the gather map
of every factor, and returns the :class:`~pymc_dp.exact.plan.ConjugatePlan` that draws.
"""

from __future__ import annotations

import dataclasses
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

from pymc_dp.constraints import IntervalConstraint, NormBallConstraint, PotentialConstraint
from pymc_dp.domains import Integers
from pymc_dp.exact.conjugate import SUPPORT, ConjugateFactor, ConjugateVariable, conjugate_posterior, refuse
from pymc_dp.exact.plan import ConjugatePlan
from pymc_dp.exceptions import DomainError

#: prior Op -> conjugate family
_PRIORS = {BetaRV: "Beta", GammaRV: "Gamma", ExponentialRV: "Gamma", NormalRV: "Normal", DirichletRV: "Dirichlet"}


#: prior Op -> the names of its parameters, in the Op's order
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


#: prior family -> the likelihoods it is conjugate to (for refusal messages)
_CONJUGATE_TO = {
    "Beta": "Bernoulli(p) or Binomial(n, p)",
    "Gamma": "Poisson(mu) or Exponential(lam)",
    "Normal": "Normal(mu, sigma) with a known sigma",
    "Dirichlet": "Categorical(p)",
}


#: prior family -> the value transforms PyMC gives it by default (others are refused)
_DEFAULT_TRANSFORMS = {
    "Beta": {"LogOddsTransform"},
    "Gamma": {"LogTransform"},
    "Normal": set(),
    "Dirichlet": {"SimplexTransform"},
}


_PUBLIC_SEED = 20240917  # fixed, public: the random values that verify a gather


def _copy_variable(v: ConjugateVariable) -> ConjugateVariable:
    """The structure of a variable (shape, prior, truncation), without factors or posterior."""
    return dataclasses.replace(v, factors=[], posterior={}, samplers={})


def _copy_factor(f: ConjugateFactor) -> ConjugateFactor:
    """A factor's structure (family, parameters, graphs), without its evaluated values."""
    return dataclasses.replace(f, index=None, observed=None, others={})


def _py_function(inputs, outputs):
    """Evaluate a small graph without compiling C or rewriting it (about a millisecond)."""
    return pytensor.function(
        list(inputs), list(outputs), mode=Mode(linker="py", optimizer=None), on_unused_input="ignore"
    )


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
    """Reads one model's structure once; :meth:`build` plans it, :meth:`refresh` re-plans other data."""

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
            conjugate_posterior(var)
        return ConjugatePlan([variables[rv.name] for rv in self.free], self)

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
        for v in plan.parts:
            variables[v.name] = _copy_variable(v)
        for v in plan.parts:
            for f in v.factors:
                nf = _copy_factor(f)
                variables[v.name].factors.append(nf)
                factors.append(nf)
        if factors:
            self._evaluate_on(variables, factors, values)
        for var in variables.values():
            conjugate_posterior(var, samplers=False)
        return ConjugatePlan([variables[v.name] for v in plan.parts], self)

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
                refuse(
                    f"{c.var!r} is truncated to a norm ball ({c.describe()}), the truncation of a "
                    "regression's weights: its truncated posterior is not a conjugate family."
                )
            elif isinstance(c, IntervalConstraint):
                intervals.setdefault(c.var, []).append(c)
            elif isinstance(c, PotentialConstraint):
                ratios.setdefault(c.factor, []).append(c)
            else:
                refuse(f"the constraint {c!r} is of a kind the exact samplers do not know.")
        return intervals, ratios

    def _potentials(self, ratios):
        for pot in self.model.potentials:
            name = pot.name or "<unnamed>"
            if name.endswith("__dp_theta_L") and name[: -len("__dp_theta_L")] in ratios:
                continue
            if any(name.endswith(s) for s in ("__dp_polar", "__dp_direction", "__dp_radius")):
                refuse(f"the model holds the norm-ball reparametrisation term {name!r}: not conjugate.")
            refuse(
                f"the model has a pm.Potential {name!r}: an arbitrary potential multiplies the "
                "posterior by a factor no conjugate family absorbs."
            )

    def _prior(self, rv) -> ConjugateVariable:
        op = rv.owner.op
        family = _PRIORS.get(type(op))
        if family is None:
            refuse(
                f"free RV {rv.name!r} has a {type(op).__name__.removesuffix('RV')} prior; exact "
                "sampling supports Beta, Gamma, Exponential, Normal and Dirichlet priors."
            )
        if not str(rv.dtype).startswith("float"):
            refuse(f"free RV {rv.name!r} has dtype {rv.dtype}.")
        params = op.dist_params(rv.owner)
        anc = set(ancestors(params))
        others = [r.name for r in self.free if r in anc and r is not rv]
        if others:
            refuse(
                f"the prior of {rv.name!r} depends on free RV(s) {others}: a hierarchical prior is "
                "not conjugate here (every free RV must be a root with constant prior parameters)."
            )
        data = sorted(d.name for d in self.data if d in anc)
        if data:
            refuse(f"the prior of {rv.name!r} reads data {data}; its parameters must be constants.")
        transform = self.model.rvs_to_transforms.get(rv)
        tname = None if transform is None else type(transform).__name__
        if tname is not None and tname not in _DEFAULT_TRANSFORMS[family] and not (
            family != "Dirichlet" and tname in ("Interval", "IntervalTransform")
        ):
            refuse(f"free RV {rv.name!r} has the value transform {tname}, which the exact samplers do not know.")
        prior_op = "Exponential" if type(op) is ExponentialRV else family
        return ConjugateVariable(rv.name, family, prior_op, (), str(rv.dtype), {}, rv=rv, transform=transform)

    def _factors(self, variables) -> list[ConjugateFactor]:
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
                refuse(
                    f"factor {obs.name!r} ({fam_name}) reads several free RVs {names}; a conjugate "
                    "update needs each factor to read exactly one."
                )
            rv = reads[0][1]
            var = variables[rv.name]
            if spec is None:
                refuse(
                    f"factor {obs.name!r} is a {fam_name} likelihood of free RV {rv.name!r}; "
                    f"a {var.family} prior is conjugate to {_CONJUGATE_TO[var.family]} only."
                )
            family, pnames, prior_family, conj, link = spec
            if prior_family != var.family:
                refuse(
                    f"factor {obs.name!r} ({family}) reads free RV {rv.name!r}, whose prior is "
                    f"{var.family}: a {var.family} prior is conjugate to {_CONJUGATE_TO[var.family]} "
                    f"only, and a {family} likelihood needs a {prior_family} prior."
                )
            bad = sorted({pnames[j] for j, _ in reads if j != conj})
            if bad:
                refuse(
                    f"factor {obs.name!r} ({family}) reads free RV {rv.name!r} in its parameter(s) "
                    f"{bad}; only {pnames[conj]!r} may be a free RV (e.g. a Normal needs a known "
                    "sigma), the others must be constants or data."
                )
            reads_private = bool(set(ancestors([value, *params])) & self.private)
            f = ConjugateFactor(obs.name, family, pnames, conj, link, rv.name, op, params, value, reads_private)
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
                refuse(f"the prior parameters of {rv.name!r} do not broadcast to its shape {var.shape}.")
            for key, val in var.prior.items():
                if not np.all(np.isfinite(val)) or (key != "mu" and np.any(val <= 0)):
                    refuse(f"the prior of {rv.name!r} has an invalid parameter {key}.")
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

    def _gather(self, f: ConjugateFactor, var: ConjugateVariable, by_tag, by_recip, by_rand, rand):
        """Map every element of the conjugate parameter to the element of the free RV it reads."""
        size = var.size
        what = f"{'1 / ' if f.link == 'reciprocal' else ''}{var.name}[...]"

        def fail(detail):
            refuse(
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
    def _interval(self, var: ConjugateVariable, cons):
        if var.family == "Dirichlet":
            if cons:
                refuse(f"Dirichlet {var.name!r} has an interval truncation {cons[0].describe()}.")
            return
        lo, hi = SUPPORT[var.family]
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
            refuse(f"the truncation of {var.name!r} is empty ([{lo}, {hi}]).")
        var.lower, var.upper = lo, hi

    def _ratios(self, variables, ratios):
        by_factor = {f.name: f for v in variables.values() for f in v.factors}
        per_row: dict[str, dict[int, list]] = {}
        for fname, cons in ratios.items():
            f = by_factor.get(fname)
            names = sorted({n for c in cons for n in c.vars})
            if f is None or f.family != "Categorical" or len(names) != 1 or names[0] != f.rv_name:
                refuse(
                    f"the truncation of {names} for factor {fname!r} is a general potential "
                    f"({cons[0].describe()}); only the max/min ratio region of a Categorical factor "
                    "of a Dirichlet prior has an exact sampler."
                )
            var = variables[f.rv_name]
            classes = self._classes(f, var)
            if set(ancestors(f.params)) & self.private:
                refuse(
                    f"the truncation of Dirichlet {var.name!r} for factor {fname!r} couples its rows "
                    "(p reads private data, e.g. p = P[y] with a private label y)."
                )
            obs = f.observed
            rows = np.broadcast_to(f.index, obs.shape)
            rec = rows.reshape(1, 1) if rows.ndim == 0 else rows.reshape(rows.shape[0], -1)
            if np.any(rec != rec[:, :1]):
                refuse(
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
                    refuse(
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
            refuse(f"factor {f.name!r}: the classes its observations may take are not one Integers domain.")
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
            refuse(f"the truncation of {var.name!r} for factor {c.factor!r} could not be evaluated ({err}).")
        if theirs.shape != mine.shape or not np.allclose(theirs, mine, rtol=1e-9, atol=1e-12):
            refuse(
                f"the truncation of Dirichlet {var.name!r} for factor {c.factor!r} is not the "
                "max/min ratio region the exact sampler handles."
            )
