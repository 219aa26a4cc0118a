"""The privacy certificate: everything public about a private model, JSON-safe."""

from __future__ import annotations

import json
import math
import re
from dataclasses import asdict, dataclass, field
from typing import Any

__all__ = ["FactorCertificate", "Certificate", "mass_text"]


@dataclass(frozen=True)
class FactorCertificate:
    """One likelihood factor that reads private data.

    Attributes
    ----------
    name : str
        The observed RV.
    family : str
        Its distribution family.
    reads : tuple of str
        The private containers it reads.
    lipschitz : float
        The factor's part ``L_j`` of ``Delta`` that the truncation guarantees. With ``bound =
        "lipschitz"``: on the truncated prior's support, one record changes this factor's
        log-likelihood by at most ``L_j``. With ``bound = "oscillation"``: ``L_j`` is half the
        oscillation (sup minus inf over the support) of that change, which is what one draw's
        privacy loss depends on (docs/theory/oscillation.md); it may be smaller than the change.
    truncation : tuple of str
        The constraints applied to the free RVs it reads.
    solver : str
        How the truncation was found (interval, location-scale, affine, potential, bounds).
    """

    name: str
    family: str
    reads: tuple[str, ...]
    lipschitz: float
    truncation: tuple[str, ...]
    solver: str
    constraints: tuple[dict, ...] = field(default=(), repr=False)
    #: the factor's share under the equal split (None when that split is infeasible)
    equal_share: float | None = None
    #: the smallest constant the factor's solver can reach (0 when any share is feasible)
    min_lipschitz: float | None = None
    #: None when the predictor's range over one record is exact; else why it is a sound bound
    #: that may be loose (terms that read the same container added as intervals), which
    #: ``pymc_dp.audit`` measures
    loose_bound: str | None = None
    #: what certifies ``lipschitz``: "lipschitz" (the sup of the change over the region) or
    #: "oscillation" (half the oscillation of the change over the region)
    bound: str = "lipschitz"

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["reads"] = list(self.reads)
        d["truncation"] = list(self.truncation)
        d["constraints"] = [dict(c) for c in self.constraints]
        return d


def mass_text(mass: float, method: str | None = None, digits: int = 4) -> str:
    """A prior mass as text, ``f"{mass:.4g}"``; a mass below a float's range (0.0 or subnormal)
    whose ``method`` states its log (``"exact; log of the mass -921.03"``, :mod:`pymc_dp.masses`)
    from that log (``"1e-400"``): a positive mass is never printed as 0 (FOUND.md #7)."""
    found = re.search(r"log of the mass (-?[0-9.]+(?:e[+-]?[0-9]+)?)", method or "")
    if found is None:
        return f"{float(mass):.{digits}g}"
    log10 = float(found.group(1)) / math.log(10.0)
    exponent = math.floor(log10)
    mantissa = float(f"{10.0 ** (log10 - exponent):.{digits}g}")
    if mantissa >= 10.0:  # rounded up to the next power of ten
        mantissa, exponent = mantissa / 10.0, exponent + 1
    return f"{mantissa:.{digits}g}e{exponent:+04d}"


@dataclass(frozen=True)
class Certificate:
    """The privacy guarantee of releasing ``draws`` posterior draws of a private model."""

    epsilon: float
    delta: float
    draws: int
    epsilon_per_draw: float
    unit: str
    prior_mass_kept: float
    prior_mass_method: str
    factors: tuple[FactorCertificate, ...]
    domains: dict[str, dict]
    public: tuple[str, ...]
    composition: str
    mode: str
    versions: dict[str, str]
    caveats: tuple[str, ...] = ()
    epsilon_basic: float | None = None
    epsilon_optimal: float | None = None
    rows_per_unit: int = 1
    #: how Delta was split across factors: "optimised" (most prior mass kept), "equal", or
    #: "fit" (closest to the admissible prior, pymc_dp/reference.py)
    split: str = "equal"
    #: what the search maximised: "prior mass", or the fit objective with its reference
    split_objective: str = "prior mass"
    #: the prior mass the equal split would keep (None when it is infeasible)
    equal_split_prior_mass: float | None = None
    #: what ``sample(method="auto")`` uses: "exact" (iid truncated conjugate draws) or "mcmc"
    sampler: str = "mcmc"
    #: why there is no exact sampler (structure only, no data), None when there is one
    exact_unavailable: str | None = None
    #: run-time contamination: {"p", "container", "g", "epsilon_contaminated"} (the release's epsilon on
    #: the contaminated data; ``epsilon`` is then the amplified loss for the original data), else None
    amplification: dict | None = None
    #: what the independent refutation check (pymc_dp/refutation.py) probed and measured; it found
    #: no counterexample, or nothing would have been certified (None: a certificate made otherwise)
    refutation: str | None = None

    @property
    def Delta_per_draw(self) -> float:
        """``Delta``: the largest change of the log-likelihood that one unit makes (``eps0 / 2``)."""
        return self.epsilon_per_draw / 2.0

    @property
    def delta_per_draw(self) -> float:
        """Deprecated name of :attr:`Delta_per_draw` (``delta`` is DP's delta everywhere else)."""
        import warnings

        warnings.warn("Certificate.delta_per_draw is Delta_per_draw (the per-draw bound Delta, not DP's delta)",
                      DeprecationWarning, stacklevel=2)
        return self.Delta_per_draw

    def to_dict(self) -> dict[str, Any]:
        return {
            "epsilon": self.epsilon,
            "delta": self.delta,
            "draws": self.draws,
            "epsilon_per_draw": self.epsilon_per_draw,
            "unit": self.unit,
            "prior_mass_kept": self.prior_mass_kept,
            "prior_mass_method": self.prior_mass_method,
            "factors": [f.to_dict() for f in self.factors],
            "domains": self.domains,
            "public": list(self.public),
            "composition": self.composition,
            "epsilon_basic": self.epsilon_basic,
            "epsilon_optimal": self.epsilon_optimal,
            "rows_per_unit": self.rows_per_unit,
            "split": self.split,
            "split_objective": self.split_objective,
            "equal_split_prior_mass": self.equal_split_prior_mass,
            "sampler": self.sampler,
            "exact_unavailable": self.exact_unavailable,
            "mode": self.mode,
            "versions": dict(self.versions),
            "caveats": list(self.caveats),
            **({} if self.amplification is None else {"amplification": dict(self.amplification)}),
            **({} if self.refutation is None else {"refutation": self.refutation}),
        }

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), sort_keys=True)

    def __str__(self) -> str:
        unit = self.unit if self.rows_per_unit == 1 else f"{self.unit} (at most {self.rows_per_unit} rows each)"
        lines = [
            f"pymc_dp certificate: ({self.epsilon:.6g}, {self.delta:.3g})-DP for {self.draws} "
            f"posterior draw(s), unit={unit}, {self.composition} composition",
            f"  epsilon per draw = {self.epsilon_per_draw:.6g} (= 2 x Delta, Delta = {self.Delta_per_draw:.6g})",
            f"  prior mass kept  = {mass_text(self.prior_mass_kept, self.prior_mass_method)} ({self.prior_mass_method}); "
            + ("truncation given by bounds=" if self.mode == "bounds" else f"{self.split} split of Delta")
            + (
                f" (an equal split keeps {self.equal_split_prior_mass:.4g})"
                if self.split == "optimised" and self.equal_split_prior_mass is not None
                else ""
            ),
            *([f"  region chosen by {self.split_objective}"] if self.split == "fit" else []),
            "  factors:",
        ]
        if self.epsilon_optimal is not None:
            lines.insert(
                2,
                f"  composition: optimal {self.epsilon_optimal:.6g}, basic {self.epsilon_basic:.6g} "
                f"(the smaller is used)",
            )
        for f in self.factors:
            lines.append(
                f"    {f.name:<12} {f.family:<12} reads {', '.join(f.reads):<16} L = {f.lipschitz:.6g}"
                + (" (half the oscillation over the region)" if f.bound == "oscillation" else "")
            )
            for t in f.truncation:
                lines.append(f"      truncation: {t}")
            if f.loose_bound:
                lines.append(f"      bound: sound, may be loose ({f.loose_bound})")
        lines.append(
            "  sampler: exact (iid draws of the truncated conjugate posterior)"
            if self.sampler == "exact"
            else "  sampler: MCMC (no exact sampler for this model)"
        )
        if self.refutation is not None:
            lines.append(f"  checked: {self.refutation}")
        for c in self.caveats:
            lines.append(f"  caveat: {c}")
        return "\n".join(lines)
