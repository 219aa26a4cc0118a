"""The prior mass of a truncation region: what the solvers' searches maximise and what is reported.

Two estimators, both reading the prior and never the data. :func:`prior_mass` of a list of
constraints: exact from the priors' CDFs when every constrained RV is an independent root of the
prior (:func:`exact_log_mass`, summed in log space), else the mass of the box the constraints
describe (:func:`box_mass_estimate`), else the share of public prior draws inside. The box
estimator (:class:`_MassModel`) is exact for root RVs and Rao-Blackwellised over the public
draws of the parents for hierarchical ones; :func:`box_log_masses` evaluates many intervals
of one RV in one compiled call (the oscillation solver's search). Layering: this module
imports :mod:`pymc_dp.constraints` and :mod:`pymc_dp.region_context` only, and every solver
(:mod:`pymc_dp.scalar`, :mod:`pymc_dp.boxes`, :mod:`pymc_dp.oscillation`) and the split
import it.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytensor
import pytensor.tensor as pt
from pytensor.graph.traversal import ancestors
from scipy import stats

from pymc_dp.constraints import IntervalConstraint, NormBallConstraint, PotentialConstraint, constraints_box
from pymc_dp.region_context import EVAL_MODE, RegionContext, constant_params, is_exchangeable, is_root

__all__ = [
    "prior_mass",
    "exact_log_mass",
    "box_log_mass",
    "box_log_masses",
    "box_mass_estimate",
    "log_diff_pt",
]


# --------------------------------------------------------------------------- boxes
class _MassModel:
    """``log P(theta in box)`` under the prior, for boxes over ``names``.

    Root RVs (no free-RV parent): the product of their exact interval masses from PyMC's
    ``logcdf``. An RV whose parents are free RVs: its conditional interval mass, from the
    same ``logcdf`` vectorised over the public prior draws of its parents, averaged (a
    Rao-Blackwellised Monte Carlo estimate: no draw has to fall inside the box). Other RVs:
    the indicator averaged over the prior draws. The estimate is unbiased; the first kind
    is exact.
    """

    def __init__(self, names: list[str], ctx):
        self.ctx = ctx
        self.names = names
        self.kind: dict[str, Any] = {}
        self._batched: dict[str, Any] = {}
        self._element: dict[str, Any] = {}
        free = ctx.free
        for name in names:
            rv = free[name]
            parents = [p for p in free.values() if p is not rv and p in set(ancestors(rv.owner.inputs, blockers=list(free.values())))]
            if getattr(rv.owner.op, "ndim_supp", 0) != 0:
                self.kind[name] = ("indicator", None, [])
            else:  # the CDF is compiled when first needed (a search may need only the batched one)
                self.kind[name] = ("root" if not parents else "child", None, [p.name for p in parents])

    def _function(self, name: str):
        """The kind of ``name``'s mass and its compiled CDF function, compiled on first use; a
        family without a usable CDF falls back to the indicator."""
        kind, fn, parents = self.kind[name]
        if kind == "indicator" or fn is not None:
            return kind, fn, parents
        if kind == "root" and self.ctx.shapes[name] == ():
            batched = self.batched(name)
            if batched is not None:
                fn = lambda lo, hi: batched(np.reshape(lo, 1), np.reshape(hi, 1))  # noqa: E731
                self.kind[name] = (kind, fn, parents)
                return self.kind[name]
        try:
            fn = self._logcdf_fn(self.ctx.free[name], [self.ctx.free[p] for p in parents])
            self.kind[name] = (kind, fn, parents)
        except Exception:
            self.kind[name] = ("indicator", None, [])
        return self.kind[name]

    def _element_function(self, name: str):
        """For a child RV of several elements with one prior for all of them (broadcast scalar
        parameters: ``theta ~ Beta(a, b)`` per lab, ``alpha ~ N(mu_a, sigma_a)`` per county):
        its conditional CDF function for one element, so that an interval shared by every
        element costs one evaluation per prior draw instead of one per element and draw
        (the oscillation solver's search; the same estimate). None where it does not apply.
        Asked only for intervals of several equal elements (:func:`_shared`)."""
        if name not in self._element:
            self._element[name] = None
            rv = self.ctx.free[name]
            if is_exchangeable(rv):
                try:
                    op = rv.owner.op
                    one = op(*[p.squeeze() for p in op.dist_params(rv.owner)], rng=rv.owner.inputs[0])
                    self._element[name] = self._logcdf_fn(one, [self.ctx.free[p] for p in self.kind[name][2]])
                except Exception:  # pragma: no cover - a family whose single-element graph fails
                    self._element[name] = None
        return self._element[name]

    @staticmethod
    def _logcdf_fn(rv, parents):
        """``(lo, hi, *parents) -> log P(lo <= rv <= hi | parents)``, accurate in both tails: from
        the log-CDF below the median, from the log-survival function above it."""
        from pytensor.graph.replace import vectorize_graph

        lo, hi, expr = _interval_logmass_graph(rv)
        if not parents:
            return pytensor.function([lo, hi], expr, on_unused_input="ignore")
        batched = {p: pt.tensor(dtype=p.dtype, shape=(None,) + tuple(p.type.shape)) for p in parents}
        vexpr = vectorize_graph(expr, replace=batched)
        return pytensor.function([lo, hi, *batched.values()], vexpr, on_unused_input="ignore")

    def __call__(self, box: dict) -> float:
        return self.estimate(box)[0]

    def batched(self, name: str):
        """``(lo[K], hi[K]) -> log P(lo[k] <= rv <= hi[k])`` for a scalar root RV, compiled once
        (None when the graph does not vectorise)."""
        if name not in self._batched:
            try:
                self._batched[name] = _batched_logcdf_fn(self.ctx.free[name], self.ctx)
            except Exception:  # pragma: no cover - a family whose logcdf does not vectorise
                self._batched[name] = None
        return self._batched[name]

    def estimate(self, box: dict) -> tuple[float, float | None, str]:
        """``(log mass, relative standard error or None when exact, method)``."""
        total = 0.0
        weights = None
        draws = self.ctx.draws
        for name in self.names:
            kind, fn, parents = self._function(name)
            lo, hi = box[name]
            shape = self.ctx.shapes[name]
            lo_a = np.asarray(lo, float) + np.zeros(shape)
            hi_a = np.asarray(hi, float) + np.zeros(shape)
            if kind == "root":
                total += float(np.sum(np.asarray(fn(lo_a, hi_a), float)))
            elif kind == "child":
                args = [np.asarray(draws[p], float) for p in parents]
                one = self._element_function(name) if _shared(lo_a) and _shared(hi_a) else None
                if one is not None:  # every element's conditional mass is the same: one of them, times their number
                    per_draw = lo_a.size * np.asarray(one(lo_a.flat[0], hi_a.flat[0], *args), float).reshape(len(args[0]))
                else:
                    per_draw = np.asarray(fn(lo_a, hi_a, *args), float).reshape(len(args[0]), -1).sum(axis=1)
                weights = per_draw if weights is None else weights + per_draw
            else:
                v = np.asarray(draws[name], float).reshape(len(draws[name]), -1)
                inside = np.all((v >= np.asarray(lo, float).reshape(-1)) & (v <= np.asarray(hi, float).reshape(-1)), axis=1)
                with np.errstate(divide="ignore"):
                    w = np.log(inside.astype(float))
                weights = w if weights is None else weights + w
        if weights is None:
            return total, None, "exact"
        m = np.max(weights)
        n = len(weights)
        if not np.isfinite(m):
            return -math.inf, None, f"conditional CDFs over {n} prior draws of the hierarchy"
        scaled = np.exp(weights - m)
        mean = float(np.mean(scaled))
        rel_se = float(np.std(scaled) / math.sqrt(n) / mean) if mean > 0 else math.inf
        kinds = {self.kind[name][0] for name in self.names}
        if "child" in kinds:
            how = f"conditional CDFs averaged over {n} public prior draws of the hyperparameters (Rao-Blackwellised Monte Carlo)"
        else:
            how = f"Monte Carlo over {n} public prior draws"
        indicators = sorted(name for name in self.names if self.kind[name][0] == "indicator")
        if indicators:
            how += f"; {', '.join(indicators)} by the share of prior draws inside"
        return total + float(m + math.log(mean)), rel_se, how


def _shared(values: np.ndarray) -> bool:
    """Whether every element of ``values`` is the same number (one interval for all elements)."""
    return values.size > 1 and bool(np.all(values == values.flat[0]))


def _interval_logmass_graph(rv):
    """``(lo, hi, log P(lo <= rv <= hi))`` as a PyTensor graph of two inputs of ``rv``'s type:
    from the log-CDF below the median, from the log-survival function above it."""
    import pymc as pm

    if getattr(rv.owner.op, "ndim_supp", 0) != 0:
        raise ValueError("multivariate")
    lo, hi = rv.type(), rv.type()
    # the ends at +-inf by their limits: PyMC's StudentT logcdf(+inf) is NaN (FOUND.md #7: a box
    # open above reported a prior mass of 0), and a family's graph need not take an infinite value
    top, bottom = pt.isinf(hi) & pt.gt(hi, 0), pt.isinf(lo) & pt.lt(lo, 0)
    finite_hi, finite_lo = pt.switch(pt.isinf(hi), 0.0, hi), pt.switch(pt.isinf(lo), 0.0, lo)
    log_cdf_hi = pt.switch(top, 0.0, pt.switch(pt.isinf(hi), -np.inf, pm.logcdf(rv, finite_hi)))
    log_cdf_lo = pt.switch(bottom, -np.inf, pt.switch(pt.isinf(lo), 0.0, pm.logcdf(rv, finite_lo)))
    below = log_diff_pt(log_cdf_hi, log_cdf_lo)
    try:
        log_sf_lo = pt.switch(bottom, 0.0, pt.switch(pt.isinf(lo), -np.inf, _logsf_graph(rv, finite_lo)))
        log_sf_hi = pt.switch(top, -np.inf, pt.switch(pt.isinf(hi), 0.0, _logsf_graph(rv, finite_hi)))
        above = log_diff_pt(log_sf_lo, log_sf_hi)
        upper = pt.gt(log_cdf_lo, np.log(0.5))
        expr = pt.switch(upper, above, below)
    except Exception:  # no survival function for this family: the CDF form alone
        expr = below
    return lo, hi, expr


#: RV Op name -> the index of the centre in its dist_params, for families symmetric about it
_SYMMETRIC = {"NormalRV": 0, "StudentTRV": 1, "CauchyRV": 0, "LaplaceRV": 0, "LogisticRV": 0}


def _logsf_graph(rv, value):
    """``log P(rv > value)``, accurate far in the upper tail. PyMC 5's ``logccdf`` is
    ``log(1 - exp(logcdf))`` for every family but the Normal, and a ``logcdf`` that rounds to 0
    there (Gamma's ``log(gammainc)``: ``noise_sigma >= 11.07`` under ``Gamma(2, 4)``, campaign seed
    1000192) made a tail of mass ``e^-40`` a mass of 0 (FOUND.md #7). Symmetric families: the CDF
    at the mirror image; the others by their closed forms; else PyMC's."""
    import pymc as pm

    name = type(rv.owner.op).__name__
    params = rv.owner.op.dist_params(rv.owner)
    if name in _SYMMETRIC:
        return pm.logcdf(rv, 2 * params[_SYMMETRIC[name]] - value)
    if name == "GammaRV":  # (shape, scale)
        return pt.log(pt.gammaincc(params[0], pt.maximum(value, 0.0) / params[1]))
    if name == "ExponentialRV":  # (scale,)
        return -pt.maximum(value, 0.0) / params[0]
    if name == "HalfNormalRV":  # (loc, scale): erfc(t), as log(erfcx(t)) - t^2
        t = (pt.maximum(value, params[0]) - params[0]) / (params[1] * np.sqrt(2.0))
        return pt.log(pt.erfcx(t)) - t**2
    if name == "LogNormalRV":  # (mu, sigma) of log(rv): erfc(t) / 2
        t = (pt.log(pt.maximum(value, 0.0)) - params[0]) / (params[1] * np.sqrt(2.0))
        return np.log(0.5) + pt.switch(pt.lt(t, 0.0), pt.log(pt.erfc(t)), pt.log(pt.erfcx(pt.maximum(t, 0.0))) - t**2)
    if name == "HalfCauchyRV":  # PyMC's (beta,): 1 - (2/pi) atan(z) = (2/pi) atan(1/z)
        z = pt.maximum(value, 0.0) / params[-1]
        return np.log(2.0 / np.pi) + pt.log(pt.arctan(1.0 / z))
    if name == "BetaRV":  # (a, b): P(X > x) = P(Y < 1 - x), Y ~ Beta(b, a)
        return pt.log(pt.betainc(params[1], params[0], pt.clip(1.0 - value, 0.0, 1.0)))
    return pm.logccdf(rv, value)


def _batched_logcdf_fn(rv, ctx):
    """The interval log-mass of a scalar root RV over a batch of intervals, compiled once per
    prior in a certification: RVs of the same family with the same constant parameters
    (``b0 ~ N(0, 10)``, ``b1 ~ N(0, 10)``, ...) share one compiled function."""
    from pytensor.graph.replace import vectorize_graph
    from pytensor.tensor.variable import TensorConstant

    def build():
        lo, hi, expr = _interval_logmass_graph(rv)
        los, his = pt.vector(dtype=lo.dtype), pt.vector(dtype=hi.dtype)
        return pytensor.function([los, his], vectorize_graph(expr, replace={lo: los, hi: his}), on_unused_input="ignore")

    op = rv.owner.op
    params = op.dist_params(rv.owner)
    if not all(isinstance(p, TensorConstant) for p in params):
        return build()
    key = (type(op), str(rv.type), tuple((str(p.dtype), p.data.shape, p.data.tobytes()) for p in params))
    return ctx.cached(("batched_interval_logmass", key), build)


def log_diff_pt(log_a, log_b):
    """``log(exp(log_a) - exp(log_b))`` for ``log_a >= log_b`` (PyTensor), -inf when empty.

    Parameters
    ----------
    log_a, log_b : TensorVariable
        Logs of two masses, broadcastable against each other.

    Returns
    -------
    TensorVariable
        The log of their difference; ``-inf`` where ``log_a <= log_b``.
    """
    d = pt.minimum(log_b - log_a, 0.0)
    return pt.switch(pt.gt(log_a, log_b), log_a + pt.log1p(-pt.exp(d)), -np.inf)



def box_log_masses(name: str, lo: np.ndarray, hi: np.ndarray, ctx) -> np.ndarray:
    """``log`` prior masses of the intervals ``[lo[k], hi[k]]`` of the one RV ``name`` (every
    element of it), as :func:`box_log_mass` of each, in one call of the compiled CDF for a root
    RV of scalar shape (the oscillation solver's search)."""
    lo, hi = np.asarray(lo, float).reshape(-1), np.asarray(hi, float).reshape(-1)
    model = ctx.cached(("mass_model", (name,)), lambda: _MassModel([name], ctx))
    kind, _, _ = model._function(name)
    batched = model.batched(name) if kind == "root" and ctx.shapes[name] == () else None
    if batched is None:
        return np.array([model.estimate({name: (a, b)})[0] for a, b in zip(lo, hi)], float)
    return np.asarray(batched(lo, hi), float).reshape(-1)


def box_log_mass(box: dict, ctx) -> float:
    """``log`` prior mass of a box (see :class:`_MassModel`)."""
    return box_mass_estimate(box, ctx)[0]


def box_mass_estimate(box: dict, ctx) -> tuple[float, float | None, str]:
    """``(log mass, relative standard error or None when exact, method)`` of a box."""
    names = sorted(box)
    model = ctx.cached(("mass_model", tuple(names)), lambda: _MassModel(names, ctx))
    return model.estimate(box)


# --------------------------------------------------------------------------- regions
def prior_mass(constraints, ctx: RegionContext) -> tuple[float, str]:
    """Prior probability of the region (exact for independent root RVs, else Monte Carlo)."""
    exact = exact_log_mass(constraints, ctx)
    if exact is not None:
        return math.exp(exact), _with_log("exact", exact)
    box = constraints_box(constraints, ctx)
    if box is not None:
        log_mass, rel_se, how = box_mass_estimate(box, ctx)
        how = _with_log(how, log_mass)
        if rel_se is None:
            return math.exp(log_mass), how
        return math.exp(log_mass), f"{how}; relative standard error {rel_se:.2g}"
    ok = np.ones(len(next(iter(ctx.draws.values()))), bool)
    for c in constraints:
        ok &= c.contains(ctx.draws)
    n = len(ok)
    p = float(ok.mean())
    if p == 0.0:  # no draw inside: say how small the mass is, rather than that it is 0
        return p, f"monte carlo (n={n}): no prior draw inside, mass below {3.0 / n:.2g} (95% upper bound)"
    se = math.sqrt(max(p * (1 - p), 1.0 / n) / n)
    return p, f"monte carlo (n={n}, se={se:.2g})"



#: a log mass below this is stated in the method (``"...; log of the mass -921.03"``): its float
#: is 0 or subnormal, and a certificate must not state a positive mass as 0 (FOUND.md #7)
LOG_MASS_STATED_BELOW = -700.0


def _with_log(how: str, log_mass: float) -> str:
    """``how``, with the log of the mass appended when the mass is below :data:`LOG_MASS_STATED_BELOW`
    (read back by :func:`pymc_dp.certificate.mass_text`)."""
    if math.isfinite(log_mass) and log_mass < LOG_MASS_STATED_BELOW:
        return f"{how}; log of the mass {log_mass:.8g}"
    return how


def _exact_mass(constraints, ctx) -> float | None:
    log_mass = exact_log_mass(constraints, ctx)
    return None if log_mass is None else math.exp(log_mass)


def exact_log_mass(constraints, ctx) -> float | None:
    """``log`` of :func:`_exact_mass`, summed in log space (no underflow with many elements)."""
    pieces = _exact_mass_pieces(constraints, ctx)
    if pieces is None:
        return None
    return float(sum(float(np.sum(log_value)) for log_value in pieces))


def _log1mexp(x: np.ndarray) -> np.ndarray:
    """``log(1 - exp(x))`` for ``x <= 0``, accurate for ``x`` near 0 and very negative."""
    x = np.asarray(x, float)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        return np.where(x > -math.log(2.0), np.log(-np.expm1(x)), np.log1p(-np.exp(x)))


def _log_diff(log_a: np.ndarray, log_b: np.ndarray) -> np.ndarray:
    """``log(exp(log_a) - exp(log_b))`` (NumPy), ``-inf`` where ``log_a <= log_b``."""
    log_a, log_b = np.broadcast_arrays(np.asarray(log_a, float), np.asarray(log_b, float))
    ok = log_a > log_b
    d = np.where(ok, log_b - np.where(ok, log_a, 0.0), -1.0)  # no -inf - -inf where not ok
    return np.where(ok, log_a + _log1mexp(d), -np.inf)


def interval_log_mass(rv, var: str, lo, hi, shape, ctx) -> np.ndarray:
    """``log P(lo <= rv <= hi)`` per element of a root RV (None: that end open): from the CDF
    below the median and from the survival function above it, so that an interval far in the
    upper tail (``intercept in [4.34, 5.57]`` under ``N(0, 0.5)``: both CDFs round to 1) keeps
    its mass (FOUND.md #7: it was stated as exactly 0)."""
    log_cdf_lo = np.full(shape, -np.inf) if lo is None else _logcdf(rv, var, lo, shape, ctx)
    log_cdf_hi = np.zeros(shape) if hi is None else _logcdf(rv, var, hi, shape, ctx)
    below = _log_diff(log_cdf_hi, log_cdf_lo)
    upper = np.asarray(log_cdf_lo, float) > math.log(0.5)
    if not np.any(upper):
        return below
    log_sf_lo = np.zeros(shape) if lo is None else _logsf(rv, var, lo, shape, ctx, log_cdf_lo)
    log_sf_hi = np.full(shape, -np.inf) if hi is None else _logsf(rv, var, hi, shape, ctx, log_cdf_hi)
    return np.where(upper, _log_diff(log_sf_lo, log_sf_hi), below)


#: RV Op name -> its SciPy distribution from the Op's dist_params (PyTensor's parametrisations)
_SCIPY = {
    "NormalRV": lambda mu, sigma: stats.norm(mu, sigma),
    "HalfNormalRV": lambda loc, scale: stats.halfnorm(loc, scale),
    "BetaRV": lambda a, b: stats.beta(a, b),
    "ExponentialRV": lambda scale: stats.expon(scale=scale),
    "GammaRV": lambda shape, scale: stats.gamma(shape, scale=scale),
    "HalfCauchyRV": lambda loc, scale: stats.halfcauchy(loc, scale),
    "CauchyRV": lambda loc, scale: stats.cauchy(loc, scale),
    "StudentTRV": lambda nu, mu, sigma: stats.t(nu, mu, sigma),
    "LogNormalRV": lambda mu, sigma: stats.lognorm(s=sigma, scale=np.exp(mu)),
    "LaplaceRV": lambda mu, b: stats.laplace(mu, b),
    "UniformRV": lambda lo, hi: stats.uniform(lo, hi - lo),
}


def _scipy_dist(rv):
    """SciPy's frozen distribution of a root RV of a common family with constant parameters (its
    log CDF and log survival function: no PyTensor function to compile), else None."""
    make = _SCIPY.get(type(rv.owner.op).__name__)
    params = constant_params(rv) if make is not None else None
    if params is None:
        return None
    try:
        dist = make(*params)
    except Exception:  # pragma: no cover - a parametrisation SciPy refuses: use PyMC's
        return None
    return dist


def _logcdf(rv, name: str, value: float, shape, ctx) -> np.ndarray:
    """``pm.logcdf(rv, np.full(shape, value)).eval()``; with a cache, compiled once per RV.

    Root RVs of common families with constant parameters use SciPy's log CDF instead (both with
    and without a cache, so that the two agree bit for bit): nothing to compile."""
    import pymc as pm

    direct = ctx.cached(("scipy_dist", name), lambda: _scipy_dist(rv))
    if direct is not None:
        return np.broadcast_to(np.asarray(direct.logcdf(np.full(shape, value)), float), shape)
    if not ctx.cache:
        return pm.logcdf(rv, np.full(shape, value)).eval()

    def build():
        v = rv.type()
        return pytensor.function([v], pm.logcdf(rv, v), mode=EVAL_MODE)

    fn = ctx.cached(("logcdf", name), build)
    return fn(np.full(shape, value))


def _logsf(rv, name: str, value: float, shape, ctx, log_cdf: np.ndarray) -> np.ndarray:
    """``log P(rv > value)`` per element: SciPy's ``logsf`` for the families :func:`_logcdf` takes
    from SciPy, else :func:`_logsf_graph` (compiled once per RV), else ``log(1 - CDF)`` from
    ``log_cdf`` (the values of :func:`_logcdf` at ``value``)."""
    direct = ctx.cached(("scipy_dist", name), lambda: _scipy_dist(rv))
    if direct is not None:
        return np.broadcast_to(np.asarray(direct.logsf(np.full(shape, value)), float), shape)

    def build():
        v = rv.type()
        return pytensor.function([v], _logsf_graph(rv, v), mode=EVAL_MODE)

    try:
        return np.broadcast_to(np.asarray(ctx.cached(("logccdf", name), build)(np.full(shape, value)), float), shape)
    except Exception:  # no survival function for this family: 1 - CDF
        return _log1mexp(log_cdf)


def _exact_mass_pieces(constraints, ctx) -> list | None:
    """Per free RV, the log of its prior mass in the region: an array of the independent
    elements' interval log masses, or one log mass; None when not exact."""
    by_var: dict[str, list] = {}
    for c in constraints:
        if isinstance(c, PotentialConstraint):
            return None
        by_var.setdefault(c.var, []).append(c)
    pieces = []
    for var, cons in by_var.items():
        rv = ctx.free[var]
        if not is_root(rv, ctx):
            return None
        if all(isinstance(c, IntervalConstraint) for c in cons):
            lo = max([c.lower for c in cons if c.lower is not None], default=None)
            hi = min([c.upper for c in cons if c.upper is not None], default=None)
            if rv.owner.op.ndim_supp != 0:
                return None
            try:
                pieces.append(np.minimum(interval_log_mass(rv, var, lo, hi, ctx.shapes[var], ctx), 0.0))
            except Exception:
                return None
        elif len(cons) == 1 and isinstance(cons[0], NormBallConstraint) and cons[0].weights is None:
            op_name = type(rv.owner.op).__name__
            if op_name != "NormalRV":
                return None
            mu, sigma = ctx.cached(
                ("dist_params", var), lambda rv=rv: tuple(np.asarray(p.eval(), float) for p in rv.owner.op.dist_params(rv.owner))
            )
            d = int(np.prod(ctx.shapes[var]))
            if np.any(mu != 0) or np.ptp(np.broadcast_to(sigma, ctx.shapes[var])) > 0:
                return None
            s = float(np.broadcast_to(sigma, ctx.shapes[var]).reshape(-1)[0])
            pieces.append(float(stats.chi2.logcdf((cons[0].radius / s) ** 2, d)))
        else:
            return None
    return pieces
