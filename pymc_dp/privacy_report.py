"""The privacy report: what a release guarantees, for the user and their data-protection officer.

:func:`report` builds a :class:`PrivacyReport` from a released ``az.InferenceData`` alone (its
``attrs["pymc_dp"]`` and its posterior draws) or from a :class:`~pymc_dp.PrivateModel` (its
certificate, plus its last release when it has one). The report holds one JSON-safe dict and
renders it as plain text (``str``), Markdown (:meth:`PrivacyReport.to_markdown`) and
self-contained HTML (:meth:`PrivacyReport.to_html`, ``_repr_html_`` for Jupyter).

Every number in a report is derived from public metadata only: the certificate, the release's
public facts, and the released draws. Never from the private data, the ledger's dataset
fingerprint, the random seed or unreleased draws (docs/theory/release.md).

The interpretive bounds (JMLR 2017 = Dimitrakakis et al., *Differential Privacy for Bayesian
Inference through Posterior Sampling*; docs/theory/report_bounds.md) are small functions here:
:func:`kl_robustness_bound` (Thm 7), :func:`distinguishability_threshold` (Thm 13),
:func:`utility_sampling_term` (Lemma 11) and :func:`prior_mass_term` (Thm 17). In the paper,
``L`` is the constant of its Assumption 1 (``|ln p_theta(x) - ln p_theta(y)| <= L rho(x, y)`` on
the prior's support); in pymc_dp that is ``Delta = eps0 / 2``, the certified per-unit change of
the whole log-likelihood on the truncated region, and ``rho`` counts privacy units.
"""

from __future__ import annotations

import html
import json
import logging
import math
import re
import warnings
from collections.abc import Mapping
from typing import Any

import numpy as np

__all__ = [
    "SCHEMA",
    "PrivacyReport",
    "distinguishability_threshold",
    "kl_robustness_bound",
    "lifted_delta",
    "prior_mass_term",
    "report",
    "utility_sampling_term",
]

#: identifies the layout of :meth:`PrivacyReport.to_dict`
SCHEMA = "pymc_dp.report/1"

#: confidence level of the distinguishability and utility statements, unless told otherwise
DEFAULT_CONFIDENCE = 0.95

#: at most this many rows of the diagnostics table (the rest are counted, not listed)
DEFAULT_MAX_DIAGNOSTIC_ROWS = 30

#: a prior mass kept below this gets a warning: the truncation then dominates the posterior
SMALL_PRIOR_MASS = 1e-3

_REL_TOL = 1e-9


# =========================================================================== bounds
def kl_robustness_bound(Delta_per_draw: float, rho: float = 1.0) -> float:
    """KL robustness of the posterior (JMLR 2017 Thm 7.1; ALT 2014 Thm 1; docs/theory/report_bounds.md#kl).

    ``D(xi(.|x) || xi(.|y)) <= 2 Delta rho(x, y)``.

    Derivation (the paper's proof): with ``phi(x) = int p_theta(x) dxi(theta)`` the marginal
    likelihood, ``ln dxi(theta|x)/dxi(theta|y) = ln p_theta(x)/p_theta(y) + ln phi(y)/phi(x)``.
    Under Assumption 1 (``|ln p_theta(x) - ln p_theta(y)| <= Delta rho(x, y)`` for every theta in
    the prior's support, which the truncation to Theta_L guarantees with ``Delta = eps0 / 2``)
    the first term is at most ``Delta rho`` for every theta, and so is the second, because
    ``phi(y) <= exp(Delta rho) phi(x)``. Integrating against ``xi(.|x)`` gives the bound. The
    paper and docs/theory/report_bounds.md agree on the constant 2. It holds for exact posterior draws.

    Parameters
    ----------
    Delta_per_draw : float
        ``Delta``, the per-unit change of the log-likelihood on the truncated prior's support.
    rho : float
        The distance between the datasets, in privacy units (1: neighbours).
    """
    Delta_per_draw, rho = float(Delta_per_draw), float(rho)
    if not (Delta_per_draw >= 0 and rho >= 0):
        raise ValueError("Delta_per_draw and rho must be >= 0")
    return 2.0 * Delta_per_draw * rho


def distinguishability_threshold(Delta_per_draw: float, draws: int, confidence_delta: float = 0.05) -> float:
    """How far apart datasets must be before N draws let an adversary tell them apart
    (JMLR 2017 Thm 13 under Assumption 1; docs/theory/report_bounds.md#distinguishability).

    An adversary who sees the N released draws and forms their empirical distribution can
    separate the posteriors of ``x`` and ``y`` with confidence ``1 - delta`` only when

    ``rho(x, y) >= 3 ln(1/delta) / (4 Delta N)``.

    Derivation (the paper's proof of Thm 13): by data processing and Pinsker's inequality, on
    any finite partition S of the parameter space ``||xi_S(.|x) - xi_S(.|y)||_1^2 <=
    2 D(xi(.|x) || xi(.|y)) <= 4 Delta rho`` (Thm 7). On a partition of at most
    ``log2 sqrt(1/delta)`` cells the empirical measure of N draws is within
    ``sqrt(3 ln(1/delta) / N)`` of the truth in l1 with probability ``1 - delta`` (Lemma 12,
    after Weissman et al. 2003). Separating the two posteriors needs their distance to exceed that
    error: ``4 Delta rho >= 3 ln(1/delta) / N``. The paper words the theorem "can distinguish
    ... if", but the proof gives a *necessary* condition; docs/theory/report_bounds.md's "only when" is used here.
    The statement is about this adversary (empirical distribution on a small partition);
    differential privacy (epsilon) is the guarantee against every adversary.

    Parameters
    ----------
    Delta_per_draw : float
        ``Delta`` (the paper's ``L``).
    draws : int
        N, the number of released draws (the paper's ``n`` in Thm 13).
    confidence_delta : float
        The adversary's error probability ``delta`` (not the ``delta`` of ``(eps, delta)``-DP).

    Returns
    -------
    float
        The threshold on ``rho`` in privacy units (``inf`` when ``Delta == 0``).
    """
    Delta_per_draw, n, dc = float(Delta_per_draw), int(draws), float(confidence_delta)
    if not 0.0 < dc < 1.0:
        raise ValueError(f"confidence_delta={confidence_delta!r} must be in (0, 1)")
    if n < 1 or Delta_per_draw < 0:
        raise ValueError("draws must be >= 1 and Delta_per_draw >= 0")
    if Delta_per_draw == 0.0:
        return math.inf
    return 3.0 * math.log(1.0 / dc) / (4.0 * Delta_per_draw * n)


def utility_sampling_term(draws: int, confidence_delta: float = 0.05, responses: int = 1) -> float:
    """The sampling error of answering queries from N draws (JMLR 2017 Lemma 11, Alg. 2 PSAQR).

    With utilities ``u_theta(q, r)`` in ``[0, 1]``, the answer that maximises the average
    utility over the N released draws is within

    ``2 sqrt(ln(2 responses / delta) / (2 N))``

    of the best answer under the (truncated, private) posterior, with probability ``1 - delta``.

    Derivation (the paper's proof): Hoeffding's inequality for the average of N independent
    draws of a ``[0, 1]`` variable gives ``|u_hat(q, r) - u(q, r)| < sqrt(ln(2/delta) / (2N))``
    with probability ``1 - delta`` for one pair ``(q, r)``; the chosen answer maximises ``u_hat``,
    so it loses at most twice that. The paper states the deviation "for all r, q"; made
    rigorous for a query with a finite set of ``responses`` candidate answers, a union bound
    replaces ``delta`` by ``delta / responses``. ``responses=1`` gives docs/theory/report_bounds.md's form
    ``2 sqrt(ln(2/delta) / (2N))`` (exact for two complementary answers, whose averages move
    together). It assumes independent draws (exact sampling), and it measures the distance to
    the private posterior's answer; the cost of the truncation itself is :func:`prior_mass_term`.
    """
    n, dc, k = int(draws), float(confidence_delta), int(responses)
    if n < 1 or k < 1 or not 0.0 < dc < 1.0:
        raise ValueError("draws >= 1, responses >= 1 and 0 < confidence_delta < 1 are required")
    return 2.0 * math.sqrt(math.log(2.0 * k / dc) / (2.0 * n))


def prior_mass_term(prior_mass_kept: float) -> float:
    """The truncation's utility term of JMLR 2017 Thm 17: ``1 - xi*(Theta_L)``.

    Thm 17 (b): using the prior ``xi`` = the user's prior ``xi*`` restricted to Theta_L, the loss
    in ``xi*``-expected utility is ``O([1 - xi*(Theta_L)] + sqrt(ln(1/delta) / N))`` with
    probability ``1 - delta``. In its proof ``||xi - xi*||_1 = 2 [1 - xi*(Theta_L)]`` (the restricted
    prior against the original one). The paper gives the order only, not a constant: the report
    shows the term, not a bound with a constant. ``xi*(Theta_L)`` is the certificate's
    ``prior_mass_kept`` (public: computed from the prior, never from the data).
    """
    mass = float(prior_mass_kept)
    if not 0.0 <= mass <= 1.0 + _REL_TOL:
        raise ValueError(f"prior_mass_kept={prior_mass_kept!r} must be in [0, 1]")
    return max(0.0, 1.0 - mass)


def lifted_delta(factors: list[Mapping[str, Any]], unit: str, rows_per_unit: int = 1) -> float:
    """``Delta`` of one draw from the certificate's per-factor constants (docs/theory/lift.md).

    ``record``: ``sum_j L_j``; ``attribute``: ``max_k sum_{j reads k} L_j``; ``user`` (at most
    ``m`` rows): ``m sum_j L_j``. A consistency check: it must not exceed ``eps0 / 2``.
    """
    total = {}
    for f in factors:
        for k in f["reads"]:
            total[k] = total.get(k, 0.0) + float(f["lipschitz"])
    record = math.fsum(float(f["lipschitz"]) for f in factors if f["reads"])
    if unit == "attribute":
        return max(total.values(), default=0.0)
    if unit == "record":
        return record
    if unit == "user":
        return int(rows_per_unit) * record
    raise ValueError(f"unknown unit {unit!r}")


# =========================================================================== the value object
class PrivacyReport:
    """An immutable privacy report: one JSON-safe dict, rendered as text, Markdown and HTML.

    Build it with :func:`report`. Two reports are equal when their contents are.

    Methods
    -------
    to_dict, to_json, from_json
        The content (a fresh copy each time) and its JSON form.
    __str__, to_markdown, to_html, _repr_html_
        Plain text, Markdown, self-contained HTML (no external CSS, scripts or network).
    """

    __slots__ = ("_json",)

    def __init__(self, content: Mapping[str, Any]):
        if not isinstance(content, Mapping) or content.get("schema") != SCHEMA:
            raise ValueError(f"not a pymc_dp privacy report (expected schema {SCHEMA!r})")
        try:
            text = json.dumps(content, sort_keys=True, allow_nan=False)
        except (TypeError, ValueError) as err:
            raise ValueError(f"a privacy report must be JSON-safe: {err}") from None
        object.__setattr__(self, "_json", text)

    def __setattr__(self, name, value):
        raise AttributeError("PrivacyReport is immutable")

    # ------------------------------------------------------------------ data
    def to_dict(self) -> dict[str, Any]:
        """The report's content (a copy: changing it changes nothing here)."""
        return json.loads(self._json)

    def to_json(self, indent: int | None = None) -> str:
        """The content as JSON (keys sorted; no NaN or infinity)."""
        return self._json if indent is None else json.dumps(json.loads(self._json), sort_keys=True, indent=indent)

    @classmethod
    def from_json(cls, text: str) -> PrivacyReport:
        """The report whose :meth:`to_json` is ``text``."""
        return cls(json.loads(text))

    def __eq__(self, other):
        if not isinstance(other, PrivacyReport):
            return NotImplemented
        return self._json == other._json

    def __hash__(self):
        return hash(self._json)

    def __getitem__(self, key: str):
        """A top-level section of the content, e.g. ``r["budget"]["epsilon"]``."""
        return self.to_dict()[key]

    # ------------------------------------------------------------------ renderings
    def __repr__(self):
        c = json.loads(self._json)
        b = c["budget"]
        return (
            f"<PrivacyReport ({b['epsilon']:.6g}, {b['delta']:.3g})-DP, {b['draws']} draws, "
            f"{c['status']}>"
        )

    def __str__(self) -> str:
        return _render_text(_sections(self.to_dict()))

    def to_text(self) -> str:
        """Plain text (the same as ``str(report)``)."""
        return str(self)

    def to_markdown(self) -> str:
        """GitHub-flavoured Markdown (headings, tables)."""
        return _render_markdown(_sections(self.to_dict()))

    def to_html(self, full_document: bool = False) -> str:
        """Self-contained HTML: a ``<div>`` with its own scoped ``<style>``; with
        ``full_document=True``, a complete page to save and open in a browser."""
        body = _render_html(_sections(self.to_dict()))
        if not full_document:
            return body
        return (
            "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            "<title>pymc_dp privacy report</title></head><body>\n" + body + "\n</body></html>\n"
        )

    def _repr_html_(self) -> str:
        return self.to_html()


# =========================================================================== building
def report(
    obj: Any,
    *,
    confidence: float = DEFAULT_CONFIDENCE,
    max_diagnostic_rows: int = DEFAULT_MAX_DIAGNOSTIC_ROWS,
) -> PrivacyReport:
    """The privacy report of a release or of a private model.

    Parameters
    ----------
    obj : az.InferenceData, PrivateModel, Mechanism or PrivacyReport
        A release made by :meth:`PrivateModel.sample` or by a mechanism of
        :mod:`pymc_dp.mechanisms` (a mechanism object reports its last release) (read: ``attrs["pymc_dp"]`` and the
        ``posterior`` group only, so a release saved with ``to_netcdf`` and read back with
        ``az.from_netcdf`` gives the same report), or a :class:`~pymc_dp.PrivateModel`: its
        certificate, and its last release when it remembers one (attribute ``last_release``);
        before any release the report says what a release would guarantee and has no diagnostics.
    confidence : float
        The confidence level ``1 - delta`` of the distinguishability and utility statements.
    max_diagnostic_rows : int
        At most this many scalar parameters in the diagnostics table.
    """
    import arviz as az

    if isinstance(obj, PrivacyReport):
        return obj
    confidence = float(confidence)
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence={confidence!r} must be in (0, 1)")
    if isinstance(obj, az.InferenceData):
        return _from_release(obj, confidence, int(max_diagnostic_rows))
    if hasattr(obj, "_privacy_report"):  # other mechanisms (pymc_dp.mechanisms) report themselves
        return obj._privacy_report(confidence, int(max_diagnostic_rows))
    from pymc_dp.core import PrivateModel
    from pymc_dp.mechanisms.base import Mechanism

    if isinstance(obj, Mechanism):
        last = getattr(obj, "last_release", None)
        if last is None:
            raise ValueError(
                f"{type(obj).__name__} has not released anything yet: its report describes a release; "
                "call .sample() first (or report the released InferenceData)."
            )
        return _from_release(last, confidence, int(max_diagnostic_rows))
    if isinstance(obj, PrivateModel):
        cert = _normalise(obj.certificate.to_dict())
        last = getattr(obj, "last_release", None)
        if last is not None:
            payload = _payload(last)
            released_cert = {k: v for k, v in payload.items() if k not in ("release", "schema")}
            if released_cert != cert:
                raise ValueError(
                    "the private model's last release carries another certificate than the model's "
                    "own; report the release itself: pymc_dp.report(idata)."
                )
            return _from_release(last, confidence, int(max_diagnostic_rows))
        return PrivacyReport(_content(cert, None, None, confidence, int(max_diagnostic_rows)))
    raise TypeError(
        f"pymc_dp.report needs a released az.InferenceData or a PrivateModel, got {type(obj).__name__}"
    )


def _normalise(d: Mapping) -> dict:
    """The JSON form of a dict (tuples become lists, as in a release's attrs)."""
    return json.loads(json.dumps(d, sort_keys=True))


def _payload(idata) -> dict:
    """``attrs["pymc_dp"]`` of a release (the InferenceData's, and the posterior's copy)."""
    from pymc_dp.record import read

    payload = read(idata)
    if "release" not in payload or "epsilon" not in payload:
        raise ValueError("attrs['pymc_dp'] is not a pymc_dp release (no 'release' section).")
    return payload


def _from_release(idata, confidence: float, max_rows: int) -> PrivacyReport:
    payload = _payload(idata)
    if "mechanism" in payload:  # a noise mechanism of pymc_dp.mechanisms (laplace_updates, ...)
        if "posterior" not in idata.groups():
            raise ValueError("this InferenceData has no posterior group: there are no released draws to report.")
        return PrivacyReport(_mechanism_content(payload, idata.posterior, max_rows))
    release = payload["release"]
    cert = {k: v for k, v in payload.items() if k not in ("release", "schema")}
    if "posterior" not in idata.groups():
        raise ValueError("this InferenceData has no posterior group: there are no released draws to report.")
    return PrivacyReport(_content(cert, release, idata.posterior, confidence, max_rows))


_UNIT_TEXT = {
    "record": "one record: neighbouring datasets differ in one row of every private container (replace-one)",
    "attribute": "one attribute: neighbouring datasets differ in one container's value in one row",
    "user": "one user: neighbouring datasets differ in every row of one user (at most {m} rows; the grouping is public)",
}


def _domain_text(d: Mapping) -> str:
    text = _declared_domain_text(d)
    est = d.get("standardized")
    if est:  # the bounds are declared bounds mapped by private estimates (pymc_dp.standardize)
        text += (f"; standardised as (x - center) / scale with center = {[_g(v, 4) for v in est['center']]}, "
                 f"scale = {[_g(v, 4) for v in est['scale']]}, estimated by {est['mechanism']} at epsilon = "
                 f"{_g(est['epsilon'])} (a separate release, charged to the ledger on the same dataset)")
    return text


def _declared_domain_text(d: Mapping) -> str:
    kind = d.get("type")
    if kind == "Binary":
        return "{0, 1}"
    if kind == "Integers":
        return f"integers {{{d['lo']}, ..., {d['hi']}}}"
    if kind == "Interval":
        return f"[{_g(d['lo'])}, {_g(d['hi'])}]"
    if kind == "Ball":
        return f"each row x has ||x||_2 <= {_g(d['radius'])}"
    if kind == "Box":
        lo, hi = d["lo"], d["hi"]
        if len(lo) == 1:
            return f"each row x has {_g(lo[0])} <= x_i <= {_g(hi[0])}"
        return f"each row x has lo <= x <= hi, lo = {[_g(v) for v in lo]}, hi = {[_g(v) for v in hi]}"
    return json.dumps(d, sort_keys=True)


def _preprocessing(domains: Mapping) -> dict | None:
    """The private standardisation behind the domains (``pymc_dp.standardize``), or None."""
    est = [(k, d["standardized"]) for k, d in sorted(domains.items()) if isinstance(d, Mapping) and d.get("standardized")]
    if not est:
        return None
    return {"containers": [k for k, _ in est], "epsilon": float(est[0][1]["epsilon"]), "mechanism": est[0][1]["mechanism"]}


def _preprocessing_alert(pre: dict | None, epsilon: float) -> list:
    if not pre:
        return []
    return [("warning", (
        f"The private containers {', '.join(pre['containers'])} were standardised by a separate release "
        f"({pre['mechanism']}, epsilon = {_f(pre['epsilon'], 6)}), charged to the ledger on the same dataset. "
        f"Preprocessing and this release together: epsilon = {_f(pre['epsilon'] + epsilon, 6)} (sequential composition)."))]


def _g(x, digits: int = 6) -> str:
    return f"{float(x):.{digits}g}"


def _finite_or_none(x) -> float | None:
    try:
        x = float(x)
    except (TypeError, ValueError):
        return None
    return x if math.isfinite(x) else None


def _truncation_text(c: Mapping) -> str:
    """One constraint of the certificate, for a person."""
    if c.get("kind") == "interval":
        lo, hi = c.get("lower"), c.get("upper")
        if lo is not None and hi is not None:
            return f"{c['var']} in [{_g(lo)}, {_g(hi)}]"
        if lo is not None:
            return f"{c['var']} >= {_g(lo)}"
        if hi is not None:
            return f"{c['var']} <= {_g(hi)}"
        return f"{c['var']} unrestricted"
    if c.get("kind") == "norm_ball":
        if c.get("norm") == "l2":
            return f"||{c['var']}||_2 <= {_g(c['radius'])} (Euclidean norm of the weight vector)"
        return f"sum_i m_i |{c['var']}_i| <= {_g(c['radius'])} (weighted l1 norm, m = {[_g(w, 4) for w in c['weights']]})"
    if c.get("kind") == "potential":
        return (
            f"L_{c['factor']}({', '.join(c['vars'])}) <= {_g(c['bound'])} "
            "(enforced by an indicator potential)"
        )
    return json.dumps(c, sort_keys=True)


def _plan_truncation_text(t: Mapping | None) -> str:
    if t is None:
        return "none"
    if t.get("kind") == "interval":
        lo = "-inf" if t.get("lower") is None else _g(t["lower"])
        hi = "inf" if t.get("upper") is None else _g(t["upper"])
        return f"[{lo}, {hi}]"
    if t.get("kind") == "ratio":
        return "; ".join(
            f"max/min of classes {g['classes']} <= exp({_g(g['bound'])})" for g in t.get("groups", [])
        ) or "ratio"
    return json.dumps(t, sort_keys=True)


def _content(
    cert: dict, release: dict | None, posterior, confidence: float, max_rows: int, mechanism: dict | None = None
) -> dict:
    """The report's content from the certificate, the release's public facts and the released draws.

    ``mechanism``: the public facts of a mechanism other than posterior sampling (a release
    carries them in its ``release`` section, which takes precedence). For the exponential
    mechanism (private MAP) the factors' constants lift to its sensitivity ``Delta_u`` and the
    tempered log-likelihood changes by ``beta Delta_u = eps0 / 2``: ``Delta`` below.
    """
    if release is not None and release.get("mechanism"):
        mechanism = {k: release[k] for k in ("mechanism", "beta", "sensitivity") if k in release}
    eps0 = float(cert["epsilon_per_draw"])
    Delta = eps0 / 2.0
    # the per-unit change of the log-likelihood the truncation guarantees (the factors lift to it)
    truncation_Delta = float(mechanism["sensitivity"]) if mechanism and "sensitivity" in mechanism else Delta
    n = int(cert["draws"])
    dc = 1.0 - confidence
    unit = cert["unit"]
    m = int(cert.get("rows_per_unit", 1))
    factors = cert["factors"]
    lifted = lifted_delta(factors, unit, m)
    released = release is not None
    method = release["method"] if released else None
    planned = cert.get("sampler", "mcmc")
    mcmc = method == "mcmc" if released else planned == "mcmc"
    mass = float(cert["prior_mass_kept"])

    warnings_: list[dict] = []
    caveats: list[str] = []
    for c in list(cert.get("caveats", [])) + ([release["caveat"]] if released and release.get("caveat") else []):
        if c not in caveats:
            caveats.append(c)
    if mcmc:
        warnings_.append({
            "kind": "mcmc",
            "text": ("This release used MCMC. " if released else "sample() will use MCMC (no exact sampler). ")
            + "The privacy theorems are for exact posterior draws: MCMC draws are approximate, so "
            "the guarantee below is exact only in the limit of a converged chain.",
        })
    if lifted > truncation_Delta * (1.0 + _REL_TOL) + 1e-300:
        warnings_.append({
            "kind": "inconsistent",
            "text": f"inconsistent certificate: the factors' constants lift to Delta = {lifted:.6g} > "
            + ("eps0/2 = " if mechanism is None else "the mechanism's sensitivity Delta_u = ")
            + f"{truncation_Delta:.6g}. Do not rely on this release; report it as a bug.",
        })
    if mass < SMALL_PRIOR_MASS:
        warnings_.append({
            "kind": "prior_mass",
            "text": f"the truncation keeps only {mass:.3g} of the prior mass: the truncated prior, not the "
            "data, dominates the posterior (JMLR Thm 17's term 1 - xi(Theta_L) is about 1). "
            "Raise epsilon, lower draws, or compare split='equal'.",
        })

    budget = {
        "epsilon": float(cert["epsilon"]),
        "delta": float(cert["delta"]),
        "draws": n,
        "epsilon_per_draw": eps0,
        "Delta": Delta,
        "composition": cert["composition"],
        "epsilon_basic": _finite_or_none(cert.get("epsilon_basic")),
        "epsilon_optimal": _finite_or_none(cert.get("epsilon_optimal")),
        "mode": cert.get("mode", "budget"),
    }
    content: dict[str, Any] = {
        "schema": SCHEMA,
        "status": "released" if released else "not released",
        "budget": budget,
        "preprocessing": _preprocessing(cert.get("domains", {})),
        "unit": {
            "kind": unit,
            "rows_per_unit": m,
            "description": _UNIT_TEXT.get(unit, unit).format(m=m),
        },
        "domains": [
            {"container": k, "domain": v, "description": _domain_text(v)} for k, v in sorted(cert["domains"].items())
        ],
        "public_containers": sorted(cert.get("public", [])),
        "factors": [
            {
                "name": f["name"],
                "family": f["family"],
                "reads": list(f["reads"]),
                "lipschitz": float(f["lipschitz"]),
                "truncation": [_truncation_text(c) for c in f.get("constraints", [])] or list(f.get("truncation", [])),
                "solver": f.get("solver"),
                "equal_share": _finite_or_none(f.get("equal_share")),
                "min_lipschitz": _finite_or_none(f.get("min_lipschitz")),
            }
            for f in factors
        ],
        "split": {
            "method": cert.get("split"),
            "objective": cert.get("split_objective", "prior mass"),
            "prior_mass_kept": mass,
            "prior_mass_method": cert.get("prior_mass_method"),
            "equal_split_prior_mass": _finite_or_none(cert.get("equal_split_prior_mass")),
            "lifted_Delta": lifted,
            "truncation_Delta": truncation_Delta,
        },
        "bounds": {
            "confidence": confidence,
            "kl_robustness": {
                "value": kl_robustness_bound(Delta, 1.0),
                "rho": 1.0,
                "formula": "D(xi(.|x) || xi(.|y)) <= 2 Delta rho(x, y)",
                "reference": "JMLR 2017 Thm 7.1",
            },
            "distinguishability": {
                "value": distinguishability_threshold(Delta, n, dc),
                "confidence_delta": dc,
                "formula": "rho(x, y) >= 3 ln(1/delta) / (4 Delta N)",
                "reference": "JMLR 2017 Thm 13",
            },
            "utility_sampling": {
                "value": utility_sampling_term(n, dc),
                "confidence_delta": dc,
                "formula": "2 sqrt(ln(2/delta) / (2N))",
                "reference": "JMLR 2017 Lemma 11",
            },
            "utility_prior_mass": {
                "value": prior_mass_term(mass),
                "prior_mass_kept": mass,
                "formula": "1 - xi(Theta_L)",
                "reference": "JMLR 2017 Thm 17",
            },
            "assumes_exact_draws": True,
        },
        "sampling": _sampling(cert, release),
        "ledger": _ledger(release),
        "diagnostics": _diagnostics(posterior, release, max_rows) if released else None,
        "caveats": caveats,
        "warnings": warnings_,
        "versions": dict(sorted(cert.get("versions", {}).items())),
    }
    if mechanism is not None:
        content["mechanism"] = {
            "name": mechanism.get("mechanism"),
            "beta": _finite_or_none(mechanism.get("beta")),
            "sensitivity": _finite_or_none(mechanism.get("sensitivity")),
        }
    if released:
        total = content["diagnostics"]["draws_total"]
        if total != n:
            warnings_.append({
                "kind": "draws_mismatch",
                "text": f"the posterior holds {total} draws, but the certificate is for {n}: this InferenceData "
                "was subset or extended after the release. The guarantee is for the certified release.",
            })
    return content


def _sampling(cert: dict, release: dict | None) -> dict:
    out = {
        "planned": cert.get("sampler", "mcmc"),
        "exact_unavailable": cert.get("exact_unavailable"),
        "method": None,
        "sampler": None,
        "chains": None,
        "draws_per_chain": None,
        "tune": None,
        "thin": None,
        "caveat": None,
        "plan": [],
    }
    if release is None:
        return out
    out.update(
        method=release.get("method"),
        sampler=release.get("sampler"),
        chains=release.get("chains"),
        draws_per_chain=release.get("draws_per_chain"),
        tune=release.get("tune"),
        thin=release.get("thin"),
        caveat=release.get("caveat"),
    )
    plan = (release.get("plan") or {}).get("variables") or {}
    out["plan"] = [
        {
            "variable": name,
            "prior": v.get("prior"),
            "shape": list(v.get("shape", [])),
            "factors": [lk.get("factor") for lk in v.get("likelihood", [])],
            "truncation": _plan_truncation_text(v.get("truncation")),
            "posterior": v.get("posterior"),
            "algorithm": v.get("algorithm"),
        }
        for name, v in sorted(plan.items())
    ]
    return out


def _ledger(release: dict | None) -> dict | None:
    if release is None:
        return None
    led = release.get("ledger")
    if not led:
        return {"recorded": False}
    total_e, total_d = _finite_or_none(led.get("total_epsilon")), _finite_or_none(led.get("total_delta"))
    spent_e, spent_d = float(led["spent_epsilon"]), float(led["spent_delta"])
    return {
        "recorded": True,
        "spent_epsilon": spent_e,
        "spent_delta": spent_d,
        "releases": int(led.get("releases", 0)),
        "total_epsilon": total_e,
        "total_delta": total_d,
        "remaining_epsilon": None if total_e is None else max(0.0, total_e - spent_e),
        "remaining_delta": None if total_d is None else max(0.0, total_d - spent_d),
    }


_DIAG_COLUMNS = ("mean", "sd", "hdi_3%", "hdi_97%", "ess_bulk", "ess_tail", "r_hat")


def _diagnostics(posterior, release: dict, max_rows: int) -> dict:
    """Summary statistics and convergence diagnostics of the *released* draws only."""
    import arviz as az

    chains = int(posterior.sizes.get("chain", 1))
    per_chain = int(posterior.sizes.get("draw", 0))
    out = {
        "computed_from": "released draws only",
        "chains": chains,
        "draws_per_chain": per_chain,
        "draws_total": chains * per_chain,
        "variables": {name: [int(s) for s in posterior[name].shape[2:]] for name in sorted(posterior.data_vars)},
        "columns": list(_DIAG_COLUMNS),
        "rows": [],
        "rows_omitted": 0,
        "arviz": az.__version__,
        "note": None,
    }
    if not posterior.data_vars:
        out["note"] = "the release holds no variables"
        return out
    # ArviZ warns (warnings and its logger) about short chains; the report's note says it once
    az_log = getattr(az, "_log", None) or logging.getLogger("arviz")  # ArviZ 0.23: an unregistered Logger
    level = az_log.level
    az_log.setLevel(logging.ERROR)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            table = az.summary(posterior, kind="all", hdi_prob=0.94, round_to="none")
    except Exception as err:  # noqa: BLE001 - the report must render whatever the draws are
        out["note"] = f"ArviZ could not summarise the released draws ({type(err).__name__})"
        return out
    finally:
        az_log.setLevel(level)
    rows = []
    for label, row in table.iterrows():
        rows.append([str(label)] + [_finite_or_none(row.get(c)) for c in _DIAG_COLUMNS])
    out["rows"] = rows[: max(0, max_rows)]
    out["rows_omitted"] = max(0, len(rows) - len(out["rows"]))
    if chains * per_chain < 100:
        out["note"] = (
            f"only {chains * per_chain} released draws: ESS and R-hat estimates are rough"
            + ("; R-hat needs at least 2 chains" if chains < 2 else "")
        )
    elif chains < 2:
        out["note"] = "R-hat needs at least 2 chains"
    if release.get("method") == "exact":
        out["note"] = (out["note"] + "; " if out["note"] else "") + (
            "exact draws are independent: ESS and R-hat only check the sampler"
        )
    return out


# =========================================================================== rendering
# A report renders from one list of sections, so the three formats say the same things.
# Section: {"title", "lead": str | None, "alerts": [(level, text)], "paragraphs": [str], "kv": [(key, value)],
#           "tables": [{"caption", "headers", "rows"}]}


def _f(x, digits: int = 4) -> str:
    if x is None:
        return "n/a"
    if isinstance(x, bool):
        return "yes" if x else "no"
    if isinstance(x, (int, np.integer)):
        return str(int(x))
    x = float(x)
    if math.isinf(x):
        return "inf"
    return f"{x:.{digits}g}"


def _section(title, *, lead=None, alerts=(), paragraphs=(), kv=(), tables=()):
    return {"title": title, "lead": lead, "alerts": list(alerts), "paragraphs": list(paragraphs), "kv": list(kv),
            "tables": list(tables)}


def _mechanism_content(p: dict, posterior, max_rows: int) -> dict:
    """A noise mechanism's release: only what its attrs say (no posterior-sampling bounds)."""
    release = p.get("release", {})
    content = {
        "schema": SCHEMA,
        "kind": "mechanism",
        "status": "released",
        "mechanism": p["mechanism"],
        "algorithm": p.get("algorithm"),
        "budget": {"epsilon": float(p["epsilon"]), "delta": float(p.get("delta", 0.0)), "draws": int(p["draws"])},
        "unit": {"kind": p["unit"], "rows_per_unit": int(p.get("rows_per_unit", 1)),
                 "text": _UNIT_TEXT.get(p["unit"], p["unit"]).format(m=p.get("rows_per_unit", 1))},
        "domains": {k: _domain_text(v) for k, v in p.get("domains", {}).items()},
        "preprocessing": _preprocessing(p.get("domains", {})),
        "public": list(p.get("public", [])),
        "network": p.get("network", []),
        "sensitivity": p.get("sensitivity", {}),
        "noise": p.get("noise", {}),
        "truncation": p.get("truncation"),
        "nonnegativity": p.get("nonnegativity"),
        "released": {k: v for k, v in p.get("released", {}).items() if k in ("non_negative", "negative_cells_clipped", "statistics")},
        "law": p.get("law") or {},
        "seed": p.get("seed"),
        "ledger": _ledger(release),
        "diagnostics": _diagnostics(posterior, {"method": "exact"}, max_rows),
        "versions": dict(sorted(p.get("versions", {}).items())),
    }
    total = content["diagnostics"]["draws_total"]
    content["warnings"] = [] if total == content["budget"]["draws"] else [
        {"kind": "draws_mismatch", "text": f"the posterior holds {total} draws, but the release made {content['budget']['draws']}."}
    ]
    return content


def _mechanism_sections(c: dict) -> list[dict]:
    b, u = c["budget"], c["unit"]
    out = []
    what = "noisy sufficient statistics" if c["released"].get("statistics") is not None else "noisy posterior parameters"
    head = (f"({_f(b['epsilon'], 6)}, {_f(b['delta'], 3) if b['delta'] else 0})-differential privacy for one release of {what} "
            f"({c['mechanism']}); the {b['draws']} posterior draws are post-processing.")
    alerts = [("warning", w["text"]) for w in c["warnings"]] + _preprocessing_alert(c.get("preprocessing"), b["epsilon"])
    out.append(_section("Summary", lead=head, alerts=alerts, paragraphs=[f"Mechanism: {c['algorithm']}."]))
    kv = [("epsilon", _f(b["epsilon"], 6)), ("delta", _f(b["delta"], 3) if b["delta"] else "0"), ("privacy unit", u["text"])]
    kv += [(f"domain of {k}", v) for k, v in c["domains"].items()]
    if c["public"]:
        kv.append(("public containers", ", ".join(c["public"])))
    out.append(_section("Budget and unit", kv=kv))
    sens, noise = c["sensitivity"], c["noise"]
    kv = [("L1 sensitivity", _f(sens.get("l1"), 6))]
    if sens.get("l2") is not None:
        kv.append(("L2 sensitivity (Gaussian noise)", _f(sens["l2"], 6)))
    kv.append(("derivation", sens.get("derivation", "n/a")))
    if "paper_bound" in sens:
        kv.append(("paper's bound (AAAI Cor. 2)", _f(sens["paper_bound"], 6)))
    scale = noise.get("scale")
    kv += [("noise", noise.get("distribution", "n/a")), ("sampler", noise.get("sampler", "n/a"))]
    if isinstance(scale, dict):  # one scale per released statistic
        kv += [(f"noise scale of {k}", _f(v, 6)) for k, v in scale.items()]
    else:
        kv.append(("noise scale b = sensitivity / epsilon", _f(scale, 6)))
    out.append(_section("Sensitivity and noise", kv=kv))
    stats = c["released"].get("statistics")
    if stats is not None:
        kv = [(f"released {k}", _f(v, 6)) for k, v in stats.items()]
        kv += [(f"law given the parameters ({k})", v) for k, v in c["law"].items()]
        out.append(_section("Released statistics and the noise-aware model", kv=kv, paragraphs=[
            "The posterior is conditioned on the noisy statistics with the noise in the model: exact given "
            "what was released, and any number of draws is post-processing."]))
    rows = [[n["factor"], str(n["element"]), n["observes"], ", ".join(n["parents"]) or "-", n["parameter"]] for n in c["network"]]
    if rows:
        out.append(_section("Network", tables=[{"caption": "Nodes of one record", "headers": ["factor", "element", "observes", "parents", "parameter"], "rows": rows}]))
    nn = c["nonnegativity"]
    if nn is not None:
        rel = c["released"]
        kv = [("t", _f(nn["t"])), ("shift added to the zero coefficient", _f(nn["shift"], 6)),
              ("guaranteed P(non-negative)", _f(nn["guaranteed"], 6)), ("guarantee", nn["guarantee"]),
              ("paper's claim 1 - e^-t", _f(nn["paper_claim"], 6) + " (" + nn["paper_claim_note"] + ")"),
              ("this release non-negative (stealthy)", _f(bool(rel.get("non_negative"))))]
        if not rel.get("non_negative"):
            kv.append(("negative cells clipped to 0", str(rel.get("negative_cells_clipped"))))
        out.append(_section("Non-negativity", kv=kv))
    if c["truncation"]:
        out.append(_section("Truncation", paragraphs=[c["truncation"].get("note", "")]))
    if c["ledger"] is not None:
        lg = c["ledger"]
        out.append(_section("Budget ledger", kv=[(k.replace("_", " "), _f(v, 6)) for k, v in lg.items() if not isinstance(v, (dict, list))]))
    d = c["diagnostics"]
    paragraphs = [f"Computed from the {d['draws_total']} released draws only, with ArviZ {d['arviz']} (post-processing)."]
    if d["note"]:
        paragraphs.append("Note: " + d["note"] + ".")
    rows = [[r[0]] + [_f(v) for v in r[1:]] for r in d["rows"]]
    out.append(_section("Diagnostics of the released draws", paragraphs=paragraphs,
                        tables=[{"caption": "Released draws", "headers": ["parameter"] + d["columns"], "rows": rows}] if rows else []))
    out.append(_section("Caveats", paragraphs=[c["seed"] or "",
               "The domains and the privacy unit must come from how the data were collected, never from the data."]))
    out.append(_section("Versions", kv=[(k, str(v)) for k, v in c["versions"].items()]))
    return out


def _sections(c: dict) -> list[dict]:
    if c.get("kind") == "mechanism":
        return _mechanism_sections(c)
    b, u, s, sp, bd = c["budget"], c["unit"], c["sampling"], c["split"], c["bounds"]
    released = c["status"] == "released"
    n = b["draws"]
    conf = bd["confidence"]
    mcmc = (s["method"] == "mcmc") if released else (s["planned"] == "mcmc")
    out = []

    # --- headline
    unit_short = {"record": "one record", "attribute": "one attribute", "user": f"one user (<= {u['rows_per_unit']} rows)"}.get(
        u["kind"], u["kind"]
    )
    mech = c.get("mechanism")
    head = (
        f"({_f(b['epsilon'], 6)}, {_f(b['delta'], 3)})-differential privacy for the release of N = {n} "
        + ("posterior draw(s)" if mech is None else f"draw(s) of the {mech['name']} mechanism")
        + f"; privacy unit: {unit_short}."
    )
    if released:
        how = "the exact sampler (iid draws of the truncated posterior)" if s["method"] == "exact" else f"MCMC, sampler {s['sampler']}"
        status = f"Status: released: {n} draws, sampled with {how}."
    else:
        status = (
            "Status: certified, NOT released yet: this is what a release of sample() would guarantee; "
            f"sample() will use the {'exact' if s['planned'] == 'exact' else 'MCMC'} sampler by default."
        )
    alerts = [("danger" if w["kind"] in ("mcmc", "inconsistent") else "warning", w["text"]) for w in c["warnings"]]
    alerts += _preprocessing_alert(c.get("preprocessing"), b["epsilon"])
    out.append(_section("Summary", lead=head, alerts=alerts, paragraphs=[status]))

    # --- budget
    comp = b["composition"]
    kv = [
        ("epsilon (whole release)", _f(b["epsilon"], 6)),
        ("delta", _f(b["delta"], 3)),
        ("draws N", str(n)),
        ("epsilon per draw (eps0 = 2 Delta)", _f(b["epsilon_per_draw"], 6)),
        ("Delta (per-unit change of the log-likelihood)", _f(b["Delta"], 6)),
        (
            "composition used",
            "optimal (Kairouz-Oh-Viswanath, exact for N pure-DP draws)" if comp == "optimal" else "basic (N x eps0)",
        ),
        ("basic composition N x eps0", _f(b["epsilon_basic"], 6)),
    ]
    if b["epsilon_optimal"] is not None:
        kv.append(("optimal composition at this delta", _f(b["epsilon_optimal"], 6)))
    paragraphs = [
        ("One exact posterior draw is 2 Delta-DP (JMLR 2017 Thm 8); N draws compose. Both valid composition "
        "bounds are computed and the smaller is used.")
    ]
    if mech is not None:
        kv += [
            ("mechanism", str(mech["name"])),
            ("sensitivity Delta_u (the truncation's; the L_j lift to it)", _f(mech["sensitivity"], 6)),
            ("likelihood power beta = eps0 / (2 Delta_u)", _f(mech["beta"], 6)),
        ]
        paragraphs.append(
            "Each draw is from the truncated prior times the private likelihood to the power beta: the "
            "exponential mechanism with the log-likelihood as utility (AAAI 2016 Alg. 3, Cor. 4). It is "
            "eps0-DP, and posterior sampling is its case beta = 1. Delta = beta Delta_u is the per-unit "
            "change of the tempered log-likelihood, the Delta of the bounds below."
        )
    out.append(_section("Budget", paragraphs=paragraphs, kv=kv))

    # --- ledger
    led = c["ledger"]
    if led is None:
        out.append(_section("Budget ledger", paragraphs=["No release yet: nothing has been charged."]))
    elif not led["recorded"]:
        out.append(
            _section(
                "Budget ledger",
                alerts=[("note", ("This release was not recorded in a budget ledger (ledger=None): "
                         "its spend is not counted anywhere."))],
            )
        )
    else:
        kv = [
            ("spent on this dataset (epsilon)", _f(led["spent_epsilon"], 6)),
            ("spent on this dataset (delta)", _f(led["spent_delta"], 3)),
            ("releases recorded", str(led["releases"])),
            ("total budget (epsilon, delta)",
             "no total (recording only)" if led["total_epsilon"] is None
             else f"{_f(led['total_epsilon'], 6)}, {_f(led['total_delta'], 3)}"),
        ]
        if led["remaining_epsilon"] is not None:
            kv.append(("remaining (epsilon, delta)", f"{_f(led['remaining_epsilon'], 6)}, {_f(led['remaining_delta'], 3)}"))
        out.append(
            _section(
                "Budget ledger",
                alerts=[("warning", ("Every call of sample() is a new release and spends again: re-running a "
                         "notebook cell spends the budget again."))],
                paragraphs=[("Cumulative spend on this dataset at the time of this release, this release included "
                            "(sums over the releases recorded in the ledger).")],
                kv=kv,
            )
        )

    # --- unit and domains
    rows = [[d["container"], d["description"]] for d in c["domains"]]
    kv = [("privacy unit", u["description"])]
    kv.append(("public containers", ", ".join(c["public_containers"]) or "none"))
    out.append(
        _section(
            "Privacy unit and data domains",
            kv=kv,
            tables=[{"caption": "Declared domain of each private container (public knowledge, not read from the data)",
                     "headers": ["container", "domain of one record"], "rows": rows}],
        )
    )

    # --- factors
    rows = [
        [f["name"], f["family"], ", ".join(f["reads"]), _f(f["lipschitz"], 6), "; ".join(f["truncation"]) or "none",
         f["solver"] or "", _f(f["equal_share"], 6)]
        for f in c["factors"]
    ]
    split_text = {"optimised": "optimised (the split that keeps the most prior mass)", "equal": "equal shares",
                  "none": "none (explicit bounds)",
                  "fit": f"fit, public: {sp.get('objective')}"}.get(sp["method"], str(sp["method"]))
    kv = [
        ("split of Delta across factors", split_text),
        ("Delta lifted from the factors' L_j",
         f"{_f(sp['lifted_Delta'], 6)} (must be <= "
         + (f"Delta = {_f(b['Delta'], 6)})" if mech is None else f"Delta_u = {_f(sp['truncation_Delta'], 6)})")),
        ("prior mass kept xi(Theta_L)", f"{_f(sp['prior_mass_kept'])} ({sp['prior_mass_method']})"),
        ("prior mass an equal split keeps", _f(sp["equal_split_prior_mass"])),
    ]
    out.append(
        _section(
            "Likelihood factors and truncation",
            paragraphs=[
                ("L_j: the most one unit can change factor j's log-likelihood on the truncated prior's support. "
                "The priors are truncated to the region Theta_L where that holds; no noise is added.")
            ],
            kv=kv,
            tables=[{"caption": "Per-factor certificate",
                     "headers": ["factor", "family", "reads", "L_j", "truncation", "solver", "equal share"],
                     "rows": rows}],
        )
    )

    # --- sampling
    alerts, kv, tables, paragraphs = [], [], [], []
    if released:
        if s["method"] == "mcmc":
            alerts.append(("danger", "MCMC caveat: " + (s["caveat"] or "MCMC draws are approximate posterior draws.")))
            kv += [("method", "MCMC"), ("sampler", str(s["sampler"])), ("chains", _f(s["chains"])),
                   ("draws per chain (released)", _f(s["draws_per_chain"])), ("warm-up per chain (never released)", _f(s["tune"])),
                   ("thinning (public rule)", f"every {_f(s['thin'])} draw(s)")]
            if s["exact_unavailable"]:
                kv.append(("why not exact", s["exact_unavailable"]))
        else:
            kv += [("method", "exact: iid draws of the truncated conjugate posterior (the guarantee is exact)"),
                   ("chains (layout only)", _f(s["chains"])), ("draws per chain", _f(s["draws_per_chain"]))]
            tables.append({
                "caption": "Exact sampler, per variable",
                "headers": ["variable", "prior", "shape", "factors", "truncation", "posterior", "algorithm"],
                "rows": [[p["variable"], p["prior"], "x".join(map(str, p["shape"])) or "scalar", ", ".join(p["factors"]),
                          p["truncation"], p["posterior"], p["algorithm"]] for p in s["plan"]],
            })
    else:
        if s["planned"] == "mcmc":
            alerts.append(("danger", "MCMC caveat: sample() will use MCMC; " + (
                c["caveats"][0] if c["caveats"] else "MCMC draws are approximate posterior draws.")))
            kv.append(("default method", "MCMC"))
            if s["exact_unavailable"]:
                kv.append(("why not exact", s["exact_unavailable"]))
        else:
            kv.append(("default method", "exact (iid draws of the truncated conjugate posterior)"))
        paragraphs.append("Not released yet: the sampler's settings are reported with the release.")
    out.append(_section("Sampling", alerts=alerts, paragraphs=paragraphs, kv=kv, tables=tables))

    # --- bounds
    kl, di, ut, pm_ = bd["kl_robustness"], bd["distinguishability"], bd["utility_sampling"], bd["utility_prior_mass"]
    T = di["value"]
    pct = f"{100 * conf:.4g}%"
    if T >= 1:
        dist_text = (
            f"An adversary who estimates the posterior from the N = {n} released draws cannot tell, with "
            f"{pct} confidence, two datasets apart that differ in fewer than {_f(T)} units (so not a change of one "
            "unit)."
        )
    else:
        dist_text = (
            f"The threshold is {_f(T)} < 1 unit: this bound does not rule out that an adversary with the N = {n} draws "
            f"tells apart, with {pct} confidence, datasets that differ in one unit. The differential-privacy guarantee "
            "(epsilon) still holds; it is the guarantee against every adversary."
        )
    rows = [
        ["KL robustness (per unit change)", _f(kl["value"]), kl["formula"] + ", rho = 1, Delta = eps0/2", kl["reference"],
         "How far one unit can move the whole posterior, as a KL divergence (nats)."],
        ["distinguishability threshold", _f(T) + " units", di["formula"] + f", delta = {_f(di['confidence_delta'])}",
         di["reference"], dist_text],
        ["utility: sampling error", _f(ut["value"]), ut["formula"] + f", delta = {_f(ut['confidence_delta'])}",
         ut["reference"],
         (f"With {pct} confidence, an answer chosen from the N draws is within this of the best answer under the "
         "private posterior (utilities in [0, 1], one query).")],
        ["utility: truncation term", _f(pm_["value"]), pm_["formula"] + f", xi(Theta_L) = {_f(pm_['prior_mass_kept'])}",
         pm_["reference"],
         ("Prior mass the truncation removed: the order of the utility lost against the unprivatised prior "
         "(the paper gives no constant).")],
    ]
    alerts = []
    if mcmc:
        alerts.append(("danger", "These bounds assume exact posterior draws; with MCMC they hold only approximately."))
    out.append(
        _section(
            "What the guarantee means",
            alerts=alerts,
            paragraphs=["Interpretations of Delta = eps0/2 from Dimitrakakis et al., JMLR 2017; rho counts privacy units."],
            tables=[{"caption": "Bounds", "headers": ["quantity", "value", "formula", "reference", "meaning"], "rows": rows}],
        )
    )

    # --- diagnostics
    d = c["diagnostics"]
    if d is None:
        out.append(_section(
            "Diagnostics of the released draws",
            paragraphs=["No release yet: there are no diagnostics. Diagnostics are computed from released draws only."],
        ))
    else:
        paragraphs = [
            (f"Computed from the {d['draws_total']} released draws only ({d['chains']} chain(s) x {d['draws_per_chain']}), "
            f"with ArviZ {d['arviz']}; post-processing of the release, no privacy cost. Warm-up draws and sampler "
            "statistics are never released, so they are not shown.")
        ]
        if d["note"]:
            paragraphs.append("Note: " + d["note"] + ".")
        rows = [[r[0]] + [_f(v) for v in r[1:]] for r in d["rows"]]
        if d["rows_omitted"]:
            paragraphs.append(f"{d['rows_omitted']} more parameter(s) not listed.")
        out.append(_section(
            "Diagnostics of the released draws",
            paragraphs=paragraphs,
            tables=[{"caption": "Released draws", "headers": ["parameter"] + d["columns"], "rows": rows}] if rows else [],
        ))

    # --- caveats and versions
    paragraphs = list(c["caveats"]) + [
        "Keep the random seed secret: with it, the draws can be recomputed for candidate datasets.",
        "The domains and the privacy unit must come from how the data were collected, never from the data.",
    ]
    out.append(_section("Caveats", paragraphs=paragraphs))
    out.append(_section("Versions", kv=[(k, str(v)) for k, v in c["versions"].items()]))
    return out


# --------------------------------------------------------------------------- text
def _render_text(sections: list[dict]) -> str:
    lines = ["pymc_dp privacy report", "=" * 22]
    for s in sections:
        lines += ["", s["title"], "-" * len(s["title"])]
        if s["lead"]:
            lines.append(s["lead"])
        for level, text in s["alerts"]:
            lines.append({"danger": "WARNING: ", "warning": "Warning: "}.get(level, "Note: ") + text)
        lines += s["paragraphs"]
        if s["kv"]:
            width = min(max(len(k) for k, _ in s["kv"]), 48)
            lines += [f"  {k:<{width}}  {v}" for k, v in s["kv"]]
        for t in s["tables"]:
            lines.append(f"  {t['caption']}:")
            lines += ["    " + line for line in _text_table(t["headers"], t["rows"])]
    return "\n".join(lines) + "\n"


def _text_table(headers, rows, max_cell: int = 60) -> list[str]:
    cells = [[str(h) for h in headers]] + [[str(v) for v in r] for r in rows]
    # long cells (algorithms, meanings) would make the table unreadable: wrap them onto their own lines
    narrow = [i for i in range(len(headers)) if all(len(r[i]) <= max_cell for r in cells)]
    widths = {i: max(len(r[i]) for r in cells) for i in narrow}
    out = []
    for j, r in enumerate(cells):
        out.append("  ".join(f"{r[i]:<{widths[i]}}" for i in narrow).rstrip())
        for i in range(len(headers)):
            if i not in narrow and j > 0:
                out.append(f"    {headers[i]}: {r[i]}")
        if j == 0:
            out.append("  ".join("-" * widths[i] for i in narrow))
    return out


# --------------------------------------------------------------------------- Markdown
def _md(text: str) -> str:
    return str(text).replace("\\", "\\\\").replace("|", "\\|").replace("\n", " ")


def _render_markdown(sections: list[dict]) -> str:
    lines = ["# pymc_dp privacy report"]
    for s in sections:
        lines += ["", f"## {s['title']}", ""]
        if s["lead"]:
            lines += [f"**{_md(s['lead'])}**", ""]
        for level, text in s["alerts"]:
            lines.append(f"> **{ {'danger': 'WARNING', 'warning': 'Warning'}.get(level, 'Note') }:** {_md(text)}")
            lines.append("")
        for p in s["paragraphs"]:
            lines += [_md(p), ""]
        if s["kv"]:
            lines += ["| | |", "|---|---|"] + [f"| {_md(k)} | {_md(v)} |" for k, v in s["kv"]] + [""]
        for t in s["tables"]:
            lines += [f"*{_md(t['caption'])}*", ""]
            lines.append("| " + " | ".join(_md(h) for h in t["headers"]) + " |")
            lines.append("|" + "---|" * len(t["headers"]))
            lines += ["| " + " | ".join(_md(v) for v in r) + " |" for r in t["rows"]]
            lines.append("")
    return "\n".join(lines).rstrip() + "\n"


# --------------------------------------------------------------------------- HTML
_CSS = """
.pymc-dp-report{font-family:system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;font-size:13px;line-height:1.4;color:#1b1b1b;max-width:1100px}
.pymc-dp-report h2{font-size:17px;margin:6px 0 8px}
.pymc-dp-report h3{font-size:14px;margin:14px 0 4px;border-bottom:1px solid #ddd;padding-bottom:2px}
.pymc-dp-report p{margin:4px 0}
.pymc-dp-report table{border-collapse:collapse;margin:4px 0 8px;font-size:12px}
.pymc-dp-report th,.pymc-dp-report td{border:1px solid #d0d0d0;padding:2px 6px;text-align:left;vertical-align:top}
.pymc-dp-report th{background:#f2f2f2}
.pymc-dp-report td.num{text-align:right;font-variant-numeric:tabular-nums}
.pymc-dp-report table.kv th{font-weight:normal;background:#fafafa}
.pymc-dp-report .caption{font-style:italic;color:#555;margin-top:6px}
.pymc-dp-report .alert{padding:4px 8px;margin:4px 0;border-left:4px solid}
.pymc-dp-report .alert.warning{background:#fff8e1;border-color:#f0b400}
.pymc-dp-report .alert.danger{background:#fdecea;border-color:#d93025;font-weight:600}
.pymc-dp-report .alert.note{background:#eef4fb;border-color:#5b8dd6}
.pymc-dp-report p.lead{font-size:14px;font-weight:600}
"""


_NUMBER = re.compile(r"^[-+]?(\d[\d.]*(e[-+]?\d+)?|inf|n/a)( units)?$")


def _is_num(text) -> bool:
    return bool(_NUMBER.match(str(text)))


def _render_html(sections: list[dict]) -> str:
    e = html.escape
    parts = ['<div class="pymc-dp-report">', f"<style>{_CSS}</style>", "<h2>pymc_dp privacy report</h2>"]
    for s in sections:
        parts.append(f"<h3>{e(s['title'])}</h3>")
        if s["lead"]:
            parts.append(f'<p class="lead">{e(s["lead"])}</p>')
        for level, text in s["alerts"]:
            parts.append(f'<div class="alert {e(level)}">{e(text)}</div>')
        parts += [f"<p>{e(p)}</p>" for p in s["paragraphs"]]
        if s["kv"]:
            parts.append('<table class="kv"><tbody>')
            parts += [f"<tr><th>{e(k)}</th><td>{e(v)}</td></tr>" for k, v in s["kv"]]
            parts.append("</tbody></table>")
        for t in s["tables"]:
            parts.append(f'<div class="caption">{e(t["caption"])}</div><table><thead><tr>')
            parts += [f"<th>{e(h)}</th>" for h in t["headers"]]
            parts.append("</tr></thead><tbody>")
            for r in t["rows"]:
                cells = "".join(
                    f'<td class="num">{e(str(v))}</td>' if _is_num(v) else f"<td>{e(str(v))}</td>" for v in r
                )
                parts.append(f"<tr>{cells}</tr>")
            parts.append("</tbody></table>")
    parts.append("</div>")
    return "\n".join(parts)
