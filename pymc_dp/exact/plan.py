"""The plan: :class:`ConjugatePlan` draws every free RV of a truncated conjugate model exactly, says publicly how, and (for audits) evaluates the truncated posterior on other data.

The planner that builds it from a model is :mod:`pymc_dp.exact.planner`; what it holds per free
RV and factor, and the conjugate update, are in :mod:`pymc_dp.exact.conjugate`.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any, Mapping, Sequence

import numpy as np
from scipy import special as sc

from pymc_dp.exact.conjugate import SUPPORT, ConjugateVariable, conjugate_posterior
from pymc_dp.exact.samplers import truncated_beta, truncated_gamma, truncated_normal
from pymc_dp.exact.special import log_beta_mass, log_gamma_mass, log_normal_mass

#: family -> the exact algorithm :meth:`ConjugatePlan.describe` names
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


def _json_value(x: np.ndarray):
    """A number for a constant array, else a nested list (for :meth:`ConjugatePlan.describe`)."""
    x = np.asarray(x, dtype=float)
    if x.size and np.all(x == x.flat[0]):
        return float(x.flat[0])
    return x.tolist()


class ConjugatePlan:
    """Exact, independent draws from a truncated conjugate posterior.

    Build it with :func:`~pymc_dp.exact.planner.conjugate_plan`. :meth:`describe` says, publicly,
    what is sampled and how; :meth:`sample` draws.

    Parameters
    ----------
    variables : sequence of ConjugateVariable
        The planned variables, posteriors computed.
    planner : optional
        The planner that built them, whose ``refresh(plan, data)`` :meth:`with_data` calls; None
        for a plan that cannot be re-evaluated.
    beta : float
        The power of the private likelihood the posteriors were computed with.

    Attributes
    ----------
    variables : tuple of str
        Every free RV of the model, in model order.
    """

    def __init__(self, variables: Sequence[ConjugateVariable], planner=None, beta: float = 1.0):
        self._vars = list(variables)
        self.variables = tuple(v.name for v in self._vars)
        self._planner = planner  # the planner that built it: what with_data re-evaluates
        self._log_norm = None
        #: the power of the likelihood (1: the posterior; see :meth:`tempered`)
        self.beta = float(beta)

    @property
    def parts(self) -> tuple[ConjugateVariable, ...]:
        """The planned variables, one per free RV in model order: family, prior, factors,
        truncation and posterior (:class:`~pymc_dp.exact.conjugate.ConjugateVariable`).
        **Their posteriors and observed values read the private data.**"""
        return tuple(self._vars)

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
                lo_s, hi_s = SUPPORT[v.family]
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
        beta = float(beta)
        if not (math.isfinite(beta) and beta > 0):
            raise ValueError(f"beta={beta!r} must be finite and > 0")
        if self._planner is None:
            raise RuntimeError("this plan was not built by conjugate_plan(): it cannot be tempered")
        power = self.beta * beta
        variables = [dataclasses.replace(v, factors=list(v.factors), posterior={}, samplers={}) for v in self._vars]
        for v in variables:
            conjugate_posterior(v, samplers=False, beta=power)
        return ConjugatePlan(variables, self._planner, power)

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

