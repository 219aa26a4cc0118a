"""What an audit returns: :class:`AuditResult` (verdict, measured and claimed epsilon, witness pair, curves) and its exceptions."""

from __future__ import annotations

import dataclasses
import json
import math
from dataclasses import dataclass, field
from typing import Any, Mapping

import numpy as np

from pymc_dp.exceptions import PrivacyError

METHODS = ("auto", "exact", "numerical", "statistical")


VERDICTS = ("pass", "fail", "inconclusive")


NOT_A_RELEASE = (
    "This audit read the private data: its numbers and witness datasets are NOT a differentially "
    "private release. Keep them with the data owner."
)


PUBLIC_ONLY = (
    "This audit used only public information (the model, the domains, synthetic datasets); it read "
    "no private data."
)


class AuditError(PrivacyError):
    """The requested audit cannot be run on this model (and why)."""


# =========================================================================== result objects
def frozen_copy(data: Mapping[str, Any] | None):
    """Read-only copies of a dataset's arrays (what a :class:`Witness` holds).

    Parameters
    ----------
    data : mapping of str to array_like, or None
        Container name -> values.

    Returns
    -------
    dict of str to ndarray, or None
        Copies with the write flag cleared; None for None.
    """
    if data is None:
        return None
    out = {}
    for k, v in data.items():
        a = np.array(v, copy=True)
        a.setflags(write=False)
        out[k] = a
    return out


def _jsonable(x):
    if isinstance(x, Mapping):
        return {str(k): _jsonable(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_jsonable(v) for v in x]
    if isinstance(x, np.ndarray):
        return _jsonable(x.tolist())
    if isinstance(x, (np.floating, float)):
        x = float(x)
        return x if math.isfinite(x) else str(x)
    if isinstance(x, (np.integer,)):
        return int(x)
    if isinstance(x, np.bool_):
        return bool(x)
    return x


@dataclass(frozen=True)
class Witness:
    """The worst pair of neighbouring datasets an audit found, and where their releases differ most.

    Attributes
    ----------
    x, y : dict of str to ndarray
        The two datasets (every private container), differing in one privacy unit.
    change : dict
        What differs: ``unit``, ``rows``, ``containers``, and the old and new values.
    log_ratio : float
        Exact / numerical: ``ln xi(theta | x) - ln xi(theta | y)`` at ``theta`` (its absolute
        value is the measured loss). Statistical: the point estimate ``ln(P_x(E) / P_y(E))``.
    theta : dict, optional
        Exact / numerical: the parameter values where the log-ratio is largest (for the exact
        method, the elements whose posterior differs between x and y).
    event : dict, optional
        Statistical: the event ``E`` (statistic, threshold, side) and its counts.
    base : str
        How the dataset ``x`` was made (``"data"``, ``"constant"``, ``"mixture k=..."``,
        ``"random"``, ``"given"``).
    """

    x: Mapping[str, np.ndarray]
    y: Mapping[str, np.ndarray]
    change: Mapping[str, Any]
    log_ratio: float
    theta: Mapping[str, Any] | None = None
    event: Mapping[str, Any] | None = None
    base: str = ""

    def to_dict(self) -> dict:
        return _jsonable(
            {
                "x": dict(self.x),
                "y": dict(self.y),
                "change": dict(self.change),
                "log_ratio": self.log_ratio,
                "theta": None if self.theta is None else dict(self.theta),
                "event": None if self.event is None else dict(self.event),
                "base": self.base,
            }
        )


@dataclass(frozen=True)
class AuditResult:
    """What an audit measured, against what the certificate claims.

    Attributes
    ----------
    method : {"exact", "numerical", "statistical"}
    verdict : {"pass", "fail", "inconclusive"}
        ``"fail"``: a pair of neighbours (and a theta or an event) whose loss exceeds the claim
        beyond the audit's numerical error or confidence: the witness. ``"pass"``: nothing above
        the claim was found (a search and a statistical test are lower bounds, never proofs).
        ``"inconclusive"``: the audit cannot decide (numerical error larger than the margin, or
        a statistical test whose largest possible bound does not reach the claim).
    claimed : float
        The audited claim: epsilon of one draw (``release="draw"``, the default) or of the whole
        release of ``draws`` draws (``release="full"``, statistical only).
    epsilon_per_draw, epsilon_total : float
        The certificate's per-draw epsilon and the release's total epsilon (with ``delta``).
    measured : float
        Exact / numerical: the largest ``|ln xi(theta|x) - ln xi(theta|y)|`` found.
        Statistical: the Clopper-Pearson lower bound on epsilon at ``confidence``.
    estimate : float or None
        Statistical: the point estimate of the chosen event's log-ratio.
    error : float
        Exact: 0 (closed form, rounding only). Numerical: the estimated quadrature error of
        ``measured``. Statistical: 0 (the uncertainty is in ``confidence``).
    power : float or None
        Statistical: the largest lower bound these runs could give (every run separated);
        ``verdict`` is "inconclusive" when it does not exceed the claim.
    measured_by : {"search", "event", "range"}
        What ``measured`` is: exact / numerical, the search's largest log-ratio; statistical, the
        Clopper-Pearson bound of the chosen event, or (chain sampler, when the range refutes the
        claim or the chains did not mix) the range of the log-likelihood ratio over the parameter
        points the chains visited, a lower bound on the oscillation the certificate bounds.
    pairs, bases, runs : int
        Neighbouring pairs evaluated, base datasets searched, mechanism runs per dataset.
    witness : Witness or None
        The worst pair found.
    reads_private_data : bool
        Whether the audit read the private data (then its output is not a DP release).
    """

    method: str
    verdict: str
    claimed: float
    epsilon_per_draw: float
    epsilon_total: float
    delta: float
    draws: int
    release: str
    unit: Mapping[str, Any]
    measured: float
    estimate: float | None
    error: float
    tolerance: float
    confidence: float | None
    power: float | None
    pairs: int
    bases: int
    runs: int | None
    sampler: str | None
    witness: Witness | None
    reads_private_data: bool
    seconds: float
    notes: tuple[str, ...] = ()
    curve: Mapping[str, Any] = field(default_factory=dict, repr=False)
    measured_by: str = "search"

    @property
    def ratio(self) -> float:
        """``measured / claimed``: above 1 is a violation; close to 1, a tight claim."""
        return self.measured / self.claimed if self.claimed > 0 else math.inf

    @property
    def passed(self) -> bool:
        return self.verdict == "pass"

    def to_dict(self) -> dict:
        """A JSON-safe dict (the witness datasets included: keep it private)."""
        d = {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.name not in ("witness", "curve")}
        d["witness"] = None if self.witness is None else self.witness.to_dict()
        d["ratio"] = self.ratio
        d["not_a_release"] = self.reads_private_data
        return _jsonable(d)

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), sort_keys=True)

    def __str__(self) -> str:
        unit = self.unit.get("kind", "?")
        if self.unit.get("max_rows", 1) > 1:
            unit += f" (at most {self.unit['max_rows']} rows)"
        what = "epsilon per draw" if self.release == "draw" else f"epsilon of the {self.draws}-draw release"
        lines = [
            f"pymc_dp privacy audit ({self.method}): {self.verdict.upper()}",
            f"  claimed  {what} = {self.claimed:.6g}  (unit={unit})",
        ]
        if self.method == "statistical" and self.measured_by == "range":
            lines.append(
                f"  measured range of the log-likelihood ratio over visited points = {self.measured:.6g} "
                f"(a lower bound on the oscillation the certificate bounds by the claim)"
            )
        elif self.method == "statistical":
            lines.append(
                f"  measured lower bound = {self.measured:.6g} at {self.confidence:.3g} confidence "
                f"(point estimate {self.estimate:.6g}; these runs can certify at most {self.power:.4g})"
            )
            lines.append(f"  runs = {self.runs} per dataset ({self.sampler} sampler), half to choose the event, half to test it")
        else:
            err = f" +- {self.error:.2g}" if self.method == "numerical" else ""
            lines.append(f"  measured sup |log-ratio| = {self.measured:.6g}{err}  ({self.ratio:.3f} x claim)")
            lines.append(f"  searched {self.pairs} neighbouring pairs from {self.bases} base datasets (a search: a lower bound)")
        w = self.witness
        if w is not None:
            ch = w.change
            lines.append(
                f"  worst pair: base {w.base or '?'}; {ch.get('unit')} change at rows {ch.get('rows')} of "
                f"{ch.get('containers')}: {ch.get('from')} -> {ch.get('to')}"
            )
            if w.theta:
                lines.append(f"    at theta = {_short(w.theta)}: log-ratio {w.log_ratio:.6g}")
            if w.event:
                lines.append(f"    event {_short(w.event)}")
        for n in self.notes:
            lines.append(f"  note: {n}")
        lines.append("  " + (NOT_A_RELEASE if self.reads_private_data else PUBLIC_ONLY))
        lines.append("  The audit spent nothing from the budget ledger.")
        return "\n".join(lines)

    def plot(self, ax=None):
        """Plot what was measured; returns the matplotlib Axes.

        Exact / numerical: the log-ratio of the worst pair's truncated posteriors along one
        parameter (the others at the worst point), with the claim as horizontal lines.
        Statistical: the lower confidence bound and the estimate of epsilon for each threshold of
        the chosen statistic on the test half, with the claim.
        """
        import matplotlib.pyplot as plt

        if ax is None:
            _, ax = plt.subplots(figsize=(6, 3.5))
        c = self.curve or {}
        if self.method == "statistical":
            if "threshold" in c:
                ax.plot(c["threshold"], c["estimate"], color="0.6", lw=1, label="estimate")
                ax.plot(c["threshold"], c["lower"], color="C0", lw=1.5, label=f"lower bound ({self.confidence:.3g})")
            ax.set_xlabel(f"threshold on {c.get('statistic', 'statistic')}")
            ax.set_ylabel("epsilon")
        elif "x" in c:
            ax.plot(c["x"], c["y"], color="C0", lw=1.5, label="ln xi(theta|x) - ln xi(theta|y)")
            ax.axhline(-self.claimed, color="C3", ls="--", lw=1)
            ax.set_xlabel(c.get("label", "theta"))
            ax.set_ylabel("log-ratio")
            if "density_x" in c:  # where the two posteriors put their mass (right axis)
                twin = ax.twinx()
                twin.fill_between(c["x"], c["density_x"], color="C1", alpha=0.25, lw=0, label="posterior | x")
                twin.fill_between(c["x"], c["density_y"], color="C2", alpha=0.25, lw=0, label="posterior | y")
                twin.set_ylabel("density")
                twin.set_ylim(bottom=0)
                twin.legend(loc="lower right", fontsize="small")
                ax.set_zorder(twin.get_zorder() + 1)  # the log-ratio in front of the densities
                ax.patch.set_visible(False)
        ax.axhline(self.claimed, color="C3", ls="--", lw=1, label=f"claim {self.claimed:.3g}")
        ax.set_title(f"{self.method} audit: {self.verdict} (measured {self.measured:.3g})")
        ax.legend(loc="best", fontsize="small")
        return ax


def _short(d, limit=6) -> str:
    items = list(d.items())
    parts = []
    for k, v in items[:limit]:
        if isinstance(v, float):
            parts.append(f"{k}={v:.4g}")
        else:
            parts.append(f"{k}={v}")
    return "{" + ", ".join(parts) + (", ..." if len(items) > limit else "") + "}"
