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

import json
import logging
import math
import warnings
from collections.abc import Mapping
from typing import Any

from pymc_dp.certificate import mass_text
from pymc_dp.report_layout import render_html, render_markdown, render_text, sections

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
        return render_text(sections(self.to_dict()))

    def to_text(self) -> str:
        """Plain text (the same as ``str(report)``)."""
        return str(self)

    def to_markdown(self) -> str:
        """GitHub-flavoured Markdown (headings, tables)."""
        return render_markdown(sections(self.to_dict()))

    def to_html(self, full_document: bool = False) -> str:
        """Self-contained HTML: a ``<div>`` with its own scoped ``<style>``; with
        ``full_document=True``, a complete page to save and open in a browser."""
        body = render_html(sections(self.to_dict()))
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
        :mod:`pymc_dp.mechanisms` (read: ``attrs["pymc_dp"]`` and the ``posterior`` group only, so
        a release saved with ``to_netcdf`` and read back with ``az.from_netcdf`` gives the same
        report), or an object that reports itself through its ``report(confidence=...,
        max_diagnostic_rows=...)`` method: a :class:`~pymc_dp.PrivateModel` (its certificate,
        and its last release when it remembers one; before any release the report says what a
        release would guarantee and has no diagnostics) or a mechanism (its last release).
    confidence : float
        The confidence level ``1 - delta`` of the distinguishability and utility statements.
    max_diagnostic_rows : int
        At most this many scalar parameters in the diagnostics table.
    """
    import arviz as az

    if isinstance(obj, PrivacyReport):
        return obj
    if isinstance(obj, az.InferenceData):
        return report_release(obj, confidence=confidence, max_diagnostic_rows=max_diagnostic_rows)
    method = getattr(obj, "report", None)
    if callable(method):  # the report protocol: PrivateModel and every mechanism
        return method(confidence=confidence, max_diagnostic_rows=max_diagnostic_rows)
    raise TypeError(
        f"pymc_dp.report needs a released az.InferenceData or a PrivateModel, got {type(obj).__name__}"
    )


def _check_confidence(confidence) -> float:
    confidence = float(confidence)
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence={confidence!r} must be in (0, 1)")
    return confidence


def normalised(d: Mapping) -> dict:
    """The JSON form of a dict (tuples become lists, as in a release's attrs)."""
    return json.loads(json.dumps(d, sort_keys=True))


def release_payload(idata) -> dict:
    """The release record of a release (:func:`pymc_dp.record.read`), checked to be one."""
    from pymc_dp.record import read

    payload = read(idata)
    if "release" not in payload or "epsilon" not in payload:
        raise ValueError("attrs['pymc_dp'] is not a pymc_dp release (no 'release' section).")
    return payload


def report_release(
    idata, *, confidence: float = DEFAULT_CONFIDENCE, max_diagnostic_rows: int = DEFAULT_MAX_DIAGNOSTIC_ROWS
) -> PrivacyReport:
    """The report of a released ``InferenceData``: its release record and its posterior draws."""
    confidence, max_rows = _check_confidence(confidence), int(max_diagnostic_rows)
    payload = release_payload(idata)
    if "posterior" not in idata.groups():
        raise ValueError("this InferenceData has no posterior group: there are no released draws to report.")
    if "mechanism" in payload:  # a noise mechanism of pymc_dp.mechanisms (laplace_updates, ...)
        return PrivacyReport(_mechanism_content(payload, idata.posterior, max_rows))
    release = payload["release"]
    cert = {k: v for k, v in payload.items() if k not in ("release", "schema")}
    return PrivacyReport(_content(cert, release, idata.posterior, confidence, max_rows))


def report_certificate(
    certificate: Mapping,
    *,
    confidence: float = DEFAULT_CONFIDENCE,
    max_diagnostic_rows: int = DEFAULT_MAX_DIAGNOSTIC_ROWS,
    mechanism: Mapping | None = None,
    path: Mapping | None = None,
) -> PrivacyReport:
    """The report of a certificate before any release (``certificate``: its ``to_dict()``): what
    a release would guarantee, without diagnostics. ``mechanism``: the public facts of a mechanism
    other than posterior sampling (private MAP: ``mechanism``, ``beta``, ``sensitivity``).
    ``path``: how ``path="auto"`` chose this release (``PathChoice.to_dict()``), if it did."""
    confidence = _check_confidence(confidence)
    content = _content(normalised(certificate), None, None, confidence, int(max_diagnostic_rows),
                       mechanism=dict(mechanism) if mechanism else None)
    content["path"] = normalised(path) if path else None
    return PrivacyReport(content)


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
            "text": f"the truncation keeps only {mass_text(mass, cert.get('prior_mass_method'), 3)} of the prior mass: the truncated prior, not the "
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
        "amplification": cert.get("amplification"),
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
        # what the independent refutation check probed (docs/theory/refutation.md); None: not run
        "refutation": cert.get("refutation"),
        "warnings": warnings_,
        "versions": dict(sorted(cert.get("versions", {}).items())),
        # how path="auto" chose this release and why (public); None: the user named the path
        "path": (release or {}).get("path"),
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
        "guarantee": p.get("guarantee") or {},
        "seed": p.get("seed"),
        "ledger": _ledger(release),
        "diagnostics": _diagnostics(posterior, {"method": "exact"}, max_rows),
        "versions": dict(sorted(p.get("versions", {}).items())),
        "path": release.get("path"),
    }
    total = content["diagnostics"]["draws_total"]
    content["warnings"] = [] if total == content["budget"]["draws"] else [
        {"kind": "draws_mismatch", "text": f"the posterior holds {total} draws, but the release made {content['budget']['draws']}."}
    ]
    return content
