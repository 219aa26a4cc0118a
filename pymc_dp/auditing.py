"""Privacy audits: measure the privacy loss of a private model's release and compare it with the claim.

``audit(private_model)`` looks for neighbouring datasets whose released distributions differ by
more than the certificate allows. One exact posterior draw is claimed ``eps0 = 2 Delta``-DP
(docs/theory/guarantee.md): for every pair of neighbours ``x, y`` (differing in one privacy unit) and
every parameter value ``theta``,

.. math::  |\\ln \\xi(\\theta | x) - \\ln \\xi(\\theta | y)| \\le \\varepsilon_0 ,

where ``xi`` is the truncated posterior the mechanism samples. Three methods measure the left side:

``"exact"`` (conjugate models, through the exact sampler's plan)
    The truncated posterior factorises into conjugate blocks (Beta, Gamma, Normal per element,
    Dirichlet per row) with closed-form log densities and log-space normalisers
    (:meth:`pymc_dp.exact.ConjugatePlan.log_density`). The log-ratio is a sum over blocks of
    functions whose extremes on the truncation are found in closed form (ends and stationary
    points; the Dirichlet ratio region exactly), so the supremum over theta for one pair is exact
    to rounding error.
``"numerical"`` (any family, models with at most two free scalar parameters)
    The truncated posterior density from the model's own log-probability (PyMC ``logp``),
    normalised by quadrature on an adaptive grid over the truncation region; the supremum of the
    log-ratio is taken over the grid (a lower bound on the true supremum), and the quadrature
    error of the normalisers is estimated and reported.
``"statistical"`` (any model)
    Runs the release mechanism many times on one pair of neighbours, picks an event (a threshold
    on a released statistic) on one half of the runs, and gives a one-sided Clopper-Pearson lower
    bound on epsilon from the other half.

The exact and numerical methods *search* neighbouring datasets within the declared domains
(record changes over the domain's values, structured base datasets, the user's data); a search
is a lower bound on the worst case: ``"fail"`` (with a witness pair) is definitive, ``"pass"``
means nothing above the claim was found.

An audit reads the private data (unless ``include_data=False``) and the posterior; its output
is **not** differentially private, and it spends nothing from the budget ledger.
"""

from __future__ import annotations

import dataclasses
import hashlib
import itertools
import json
import math
import time
import warnings
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

import numpy as np
from scipy import special as sc

from pymc_dp.domains import Ball, Box, Integers, Interval
from pymc_dp.exceptions import PrivacyError
from pymc_dp.units import Users, describe_unit

__all__ = ["audit", "AuditResult", "Witness", "AuditError", "clopper_pearson"]

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
def _freeze(data: Mapping[str, Any] | None):
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


# =========================================================================== Clopper-Pearson
def clopper_pearson(k, n, alpha):
    """One-sided Clopper-Pearson bounds ``(lower, upper)`` on a binomial proportion from ``k``
    successes in ``n`` trials, each at level ``1 - alpha``: ``P(p >= lower) >= 1 - alpha`` and
    ``P(p <= upper) >= 1 - alpha``. Vectorised over ``k`` and ``n``."""
    k, n = np.broadcast_arrays(np.asarray(k, dtype=float), np.asarray(n, dtype=float))
    with np.errstate(invalid="ignore", divide="ignore"):
        lower = np.where(k > 0, sc.betaincinv(np.maximum(k, 1.0), n - k + 1.0, alpha), 0.0)
        upper = np.where(k < n, sc.betainccinv(k + 1.0, np.maximum(n - k, 1.0), alpha), 1.0)
    if lower.ndim == 0:
        return float(lower), float(upper)
    return lower, upper


def _log_cp_ratio(k1, n1, k2, n2, alpha, delta=0.0):
    """Lower bound on epsilon from ``P1 <= e^eps P2 + delta`` with counts ``k1 / n1`` and ``k2 / n2``:
    ``ln((p1_lower - delta) / p2_upper)``, each Clopper-Pearson bound at level ``1 - alpha`` (so
    jointly at ``1 - 2 alpha``). Vectorised."""
    lo, _ = clopper_pearson(k1, n1, alpha)
    _, hi = clopper_pearson(k2, n2, alpha)
    lo = np.asarray(lo) - delta
    with np.errstate(divide="ignore", invalid="ignore"):
        out = np.where(lo > 0, np.log(np.maximum(lo, 1e-300)) - np.log(hi), -np.inf)
    return float(out) if np.ndim(out) == 0 else out


# =========================================================================== the data space
def _scalar_values(domain, levels: int) -> np.ndarray:
    if isinstance(domain, Integers):
        if domain.hi - domain.lo + 1 <= max(levels, 12):
            return np.arange(domain.lo, domain.hi + 1)
        return np.unique(np.round(np.linspace(domain.lo, domain.hi, levels)).astype(np.int64))
    if isinstance(domain, Interval):
        return np.linspace(domain.lo, domain.hi, levels)
    raise AuditError(f"no candidate values for the domain {domain}")  # pragma: no cover


def _unit_vectors(rng, k, d):
    u = rng.normal(size=(k, d))
    return u / np.linalg.norm(u, axis=1, keepdims=True)


def _row_candidates(domain, row_shape, levels, rng, cap=64) -> list[np.ndarray]:
    """Candidate values of one row of a container (shape ``row_shape``) inside its domain."""
    if isinstance(domain, Ball):
        d = int(row_shape[-1])
        r = domain.radius
        eye = np.eye(d)
        cands = [np.zeros(d), *(r * eye), *(-r * eye), r * np.ones(d) / math.sqrt(d), -r * np.ones(d) / math.sqrt(d)]
        cands += list(r * _unit_vectors(rng, 4, d)) + list(0.5 * r * _unit_vectors(rng, 2, d))
        return [np.asarray(c, float).reshape(row_shape) for c in cands]
    if isinstance(domain, Box):
        d = int(row_shape[-1])
        lo = np.broadcast_to(domain.lo, (d,)).astype(float)
        hi = np.broadcast_to(domain.hi, (d,)).astype(float)
        if 2**d <= 16:
            corners = [np.where(np.array(bits, bool), hi, lo) for bits in itertools.product((0, 1), repeat=d)]
        else:
            corners = [lo, hi] + [np.where(rng.random(d) < 0.5, hi, lo) for _ in range(8)]
        cands = corners + [0.5 * (lo + hi)] + [lo + (hi - lo) * rng.random(d) for _ in range(2)]
        return [np.asarray(c, float).reshape(row_shape) for c in cands]
    vals = _scalar_values(domain, levels)
    size = int(np.prod(row_shape, dtype=int))
    if size == 1:
        return [np.full(row_shape, v) for v in vals]
    if len(vals) ** size <= cap:
        return [np.array(c).reshape(row_shape) for c in itertools.product(vals, repeat=size)]
    cands = [np.full(row_shape, v) for v in vals]
    cands += [rng.choice(vals, size=size).reshape(row_shape) for _ in range(max(cap - len(vals), 0))]
    return cands


def _random_rows(domain, shape, rng) -> np.ndarray:
    """A dataset of ``shape`` with rows uniform in the domain (continuous or discrete)."""
    if isinstance(domain, Ball):
        d = shape[-1]
        u = _unit_vectors(rng, int(np.prod(shape[:-1])), d)
        rad = domain.radius * rng.random(len(u)) ** (1.0 / d)
        return (u * rad[:, None]).reshape(shape)
    if isinstance(domain, Box):
        lo, hi = np.broadcast_to(domain.lo, shape[-1:]), np.broadcast_to(domain.hi, shape[-1:])
        return lo + (hi - lo) * rng.random(shape)
    if isinstance(domain, Integers):
        return rng.integers(domain.lo, domain.hi + 1, size=shape)
    return domain.lo + (domain.hi - domain.lo) * rng.random(shape)


def _key(arr) -> bytes:
    return np.ascontiguousarray(arr).tobytes()


class _DataSpace:
    """Neighbouring datasets for a private model: base datasets and their unit changes."""

    def __init__(self, model, domains, unit, reads, *, include_data, levels, max_bases, groups, n_random, rng):
        """``model``: the model holding the private containers; ``domains``: every private
        container's domain; ``unit``: the privacy unit; ``reads``: the containers the release
        depends on (the only ones changed)."""
        self.unit = unit
        self.rng = rng
        self.levels = levels
        self.groups = groups
        read = sorted(set(reads))
        self.names = read
        self.domains = {c: domains[c] for c in read}
        self.current = {v.name: np.array(v.get_value()) for v in model.data_vars if v.name in self.domains}
        self.dtypes = {k: v.dtype for k, v in self.current.items()}
        self.n = {k: int(v.shape[0]) for k, v in self.current.items()}
        self.row_shape = {k: v.shape[1:] for k, v in self.current.items()}
        common = set(self.n.values())
        self.rows = next(iter(common)) if len(common) == 1 else None
        # public per-row data: rows with the same private values may differ through them
        self.public_rows = {
            v.name: np.asarray(v.get_value())
            for v in model.data_vars
            if v.name not in domains and self.rows is not None and np.ndim(v.get_value()) >= 1
            and np.shape(v.get_value())[0] == self.rows
        }
        self.container_cands = {
            c: _row_candidates(self.domains[c], self.row_shape[c], levels, rng) for c in self.names
        }
        self.record_cands = self._records()
        self.include_data = include_data
        self.max_bases = max_bases
        self.n_random = n_random

    # ------------------------------------------------------------------ records
    def _records(self, cap=128) -> list[dict]:
        lists = [self.container_cands[c] for c in self.names]
        total = int(np.prod([len(x) for x in lists]))
        if total <= cap:
            combos = list(itertools.product(*[range(len(x)) for x in lists]))
        else:
            longest = max(len(x) for x in lists)
            combos = [tuple(i % len(x) for x in lists) for i in range(longest)]
            combos += [tuple(int(self.rng.integers(len(x))) for x in lists) for _ in range(cap - longest)]
        out, seen = [], set()
        for combo in combos:
            rec = {c: lists[j][i] for j, (c, i) in enumerate(zip(self.names, combo))}
            key = b"".join(_key(np.asarray(rec[c], float)) for c in self.names)
            if key not in seen:
                seen.add(key)
                out.append(rec)
        return out

    def _cast(self, data: dict) -> dict:
        return {c: np.asarray(v).astype(self.dtypes[c]) for c, v in data.items()}

    # ------------------------------------------------------------------ base datasets
    def bases(self) -> list[tuple[str, dict]]:
        out = []
        if self.include_data:
            out.append(("data", {c: v.copy() for c, v in self.current.items()}))
        consts = []
        for r in self.record_cands:
            consts.append(("constant", self._cast({c: np.broadcast_to(r[c], self.current[c].shape).copy() for c in self.names})))
        mixtures = []
        recs = self.record_cands
        if len(recs) >= 2:
            if len(recs) <= 6:
                pairs = list(itertools.combinations(range(len(recs)), 2))
            else:
                pairs = {tuple(sorted(self.rng.choice(len(recs), 2, replace=False))) for _ in range(16)}
                pairs = sorted(pairs)
            for i, j in pairs:
                for k in self._k_grid():
                    data = {}
                    for c in self.names:
                        n_c = self.n[c]
                        kc = int(round(k * n_c / max(self.rows or n_c, 1)))
                        arr = np.broadcast_to(recs[j][c], self.current[c].shape).copy()
                        arr[:kc] = recs[i][c]
                        data[c] = arr
                    mixtures.append((f"mixture k={k}", self._cast(data)))
        randoms = []
        for _ in range(self.n_random):
            idx = self.rng.integers(len(recs), size=max(self.n.values()))
            randoms.append(("random records", self._cast({c: np.stack([recs[i][c] for i in idx[: self.n[c]]]) for c in self.names})))
            randoms.append(("random", self._cast({c: _random_rows(self.domains[c], self.current[c].shape, self.rng) for c in self.names})))
        rest = mixtures + randoms
        budget = max(self.max_bases - len(out), 0)
        if len(consts) + len(rest) > budget:
            # half of the budget to constant datasets (at least), the rest to mixtures and random ones
            n_const = min(len(consts), max(budget // 2, budget - len(rest)))
            consts = [consts[i] for i in np.sort(self.rng.choice(len(consts), size=n_const, replace=False))]
            keep = np.sort(self.rng.choice(len(rest), size=min(len(rest), budget - n_const), replace=False))
            rest = [rest[i] for i in keep]
        return out + consts + rest

    def changes_per_base(self) -> int:
        """About how many neighbours :meth:`changes` gives per base dataset."""
        if self.unit == "attribute":
            per_row = sum(len(v) for v in self.container_cands.values())
        else:
            per_row = len(self.record_cands)
        return max(1, per_row * 2 * self.groups)

    def _k_grid(self) -> list[int]:
        n = self.rows or max(self.n.values())
        if n - 1 <= 400:
            return list(range(1, n))
        ks = set(range(1, 9)) | set(range(n - 8, n)) | set(np.round(np.linspace(1, n - 1, 48)).astype(int).tolist())
        return sorted(ks)

    # ------------------------------------------------------------------ neighbours
    def _row_groups(self, data: dict, containers: Sequence[str]) -> list[np.ndarray]:
        """Rows grouped by content (the containers' values, and the public per-row data)."""
        n = self.n[containers[0]]
        cols = [np.asarray(data[c], float).reshape(n, -1) for c in containers]
        if self.rows is not None and n == self.rows:
            cols += [np.asarray(v, float).reshape(n, -1) for v in self.public_rows.values()]
        table = np.concatenate(cols, axis=1)
        _, inverse = np.unique(table, axis=0, return_inverse=True)
        inverse = np.asarray(inverse).reshape(-1)
        order = np.argsort(inverse, kind="stable")
        bounds = np.flatnonzero(np.diff(inverse[order])) + 1
        return np.split(order, bounds)

    def _representative_rows(self, data: dict, containers: Sequence[str]) -> list[int]:
        """The first and last row of up to ``groups`` groups of identical rows."""
        groups = self._row_groups(data, containers)
        if len(groups) > self.groups:
            pick = self.rng.choice(len(groups), size=self.groups, replace=False)
            groups = [groups[i] for i in sorted(pick)]
        rows = set()
        for g in groups:
            rows.add(int(g[0]))
            rows.add(int(g[-1]))
        return sorted(rows)

    def user_groups(self, data: dict) -> list[np.ndarray]:
        unit: Users = self.unit
        n = self.rows
        if unit.ids is not None:
            ids = np.asarray(unit.ids)
            _, inverse = np.unique(ids, return_inverse=True)
            inverse = np.asarray(inverse).reshape(-1)
            order = np.argsort(inverse, kind="stable")
            groups = np.split(order, np.flatnonzero(np.diff(inverse[order])) + 1)
            keyed = {}
            for g in groups:
                k = b"".join(sorted(b"".join(_key(data[c][i]) for c in self.names) for i in g))
                keyed.setdefault((len(g), k), g)
            groups = list(keyed.values())
            if len(groups) > self.groups:
                pick = self.rng.choice(len(groups), size=self.groups, replace=False)
                groups = [groups[i] for i in sorted(pick)]
            return groups
        m = min(unit.max_rows, n)
        groups = []
        for same in self._row_groups(data, self.names)[: self.groups]:
            for g in (same[:m], same[-m:]):
                g = list(g)
                if len(g) < m:
                    taken = set(g)
                    g = sorted(g + [j for j in range(n) if j not in taken][: m - len(g)])
                groups.append(np.array(g))
        groups += [np.arange(m), np.arange(n - m, n)]
        keyed = {tuple(int(i) for i in g): g for g in groups}
        return list(keyed.values())

    def changes(self, data: dict):
        """Yield ``(change, new_values)``: ``new_values`` maps container -> (rows, values)."""
        unit = self.unit
        if isinstance(unit, Users):
            for g in self.user_groups(data):
                for r in self.record_cands:
                    if all(np.array_equal(data[c][i], r[c]) for c in self.names for i in g):
                        continue
                    yield (
                        {"unit": "user", "rows": g.tolist(), "containers": list(self.names),
                         "from": {c: data[c][g].tolist() for c in self.names}, "to": {c: np.asarray(r[c]).tolist() for c in self.names}},
                        {c: (g, r[c]) for c in self.names},
                    )
        elif unit == "record":
            for i in self._representative_rows(data, self.names):
                for r in self.record_cands:
                    if all(np.array_equal(data[c][i], r[c]) for c in self.names):
                        continue
                    yield (
                        {"unit": "record", "rows": [i], "containers": list(self.names),
                         "from": {c: data[c][i].tolist() for c in self.names}, "to": {c: np.asarray(r[c]).tolist() for c in self.names}},
                        {c: (np.array([i]), r[c]) for c in self.names},
                    )
        else:
            for c in self.names:
                for i in self._representative_rows(data, [c]):
                    for v in self.container_cands[c]:
                        if np.array_equal(data[c][i], v):
                            continue
                        yield (
                            {"unit": "attribute", "rows": [i], "containers": [c],
                             "from": {c: data[c][i].tolist()}, "to": {c: np.asarray(v).tolist()}},
                            {c: (np.array([i]), v)},
                        )

    def apply(self, data: dict, new: dict) -> dict:
        out = dict(data)
        for c, (rows, value) in new.items():
            arr = data[c].copy()
            arr[rows] = np.asarray(value).astype(self.dtypes[c])
            out[c] = arr
        return out

    def validate(self, data: Mapping[str, Any]) -> dict:
        out = {}
        for c in self.names:
            if c not in data:
                raise AuditError(f"a given dataset lacks the private container {c!r}")
            arr = np.asarray(data[c])
            if arr.shape != self.current[c].shape:
                raise AuditError(f"a given dataset's {c!r} has shape {arr.shape}, the model's has {self.current[c].shape}")
            self.domains[c].validate(c, arr)
            out[c] = arr.astype(self.dtypes[c])
        return out

    def describe_pair(self, x: dict, y: dict) -> dict:
        """The change between two given datasets (checked to be neighbours under the unit)."""
        rows = sorted({int(i) for c in self.names for i in np.flatnonzero(
            np.any((x[c] != y[c]).reshape(self.n[c], -1), axis=1))})
        containers = [c for c in self.names if np.any(x[c] != y[c])]
        unit = describe_unit(self.unit)
        if unit["kind"] == "attribute" and len(containers) > 1:
            raise AuditError(f"the given datasets differ in {containers}: not attribute neighbours")
        if len(rows) > unit["max_rows"]:
            raise AuditError(f"the given datasets differ in {len(rows)} rows: not neighbours for unit {unit}")
        if isinstance(self.unit, Users) and self.unit.ids is not None and rows:
            if len({self.unit.ids[i] for i in rows}) > 1:
                raise AuditError("the given datasets differ in the rows of several users")
        return {
            "unit": unit["kind"], "rows": rows, "containers": containers,
            "from": {c: x[c][rows].tolist() for c in containers}, "to": {c: y[c][rows].tolist() for c in containers},
        }


# =========================================================================== exact audit
def _block_extremes(fam: str, px: dict, py: dict, nx, ny, idx):
    """Max and min over the truncation of ``g = ln xi_x - ln xi_y`` for changed elements ``idx``
    of one variable; returns (max values, argmax, min values, argmin) per element."""
    lo, hi = px["lower"], px["upper"]
    C = nx[idx] - ny[idx]
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        if fam == "Beta":
            dA = px["alpha"][idx] - py["alpha"][idx]
            dB = px["beta"][idx] - py["beta"][idx]

            def g(t):
                return sc.xlogy(dA, t) + sc.xlog1py(dB, -t) - C

            def at(t):  # limits at the support ends 0 and 1
                v = g(t)
                if t == 0.0:
                    v = np.where(dA > 0, -np.inf, np.where(dA < 0, np.inf, -C))
                elif t == 1.0:
                    v = np.where(dB > 0, -np.inf, np.where(dB < 0, np.inf, -C))
                return v

            denom = dA + dB
            tstar = np.where(denom != 0, dA / np.where(denom != 0, denom, 1.0), np.nan)
        elif fam == "Gamma":
            dA = px["alpha"][idx] - py["alpha"][idx]
            dR = px["rate"][idx] - py["rate"][idx]

            def g(t):
                return sc.xlogy(dA, t) - dR * t - C

            def at(t):
                if t == 0.0:
                    return np.where(dA > 0, -np.inf, np.where(dA < 0, np.inf, -C))
                if t == math.inf:
                    return np.where(dR > 0, -np.inf, np.where(dR < 0, np.inf, np.where(dA > 0, np.inf, np.where(dA < 0, -np.inf, -C))))
                return g(t)

            tstar = np.where(dR != 0, dA / np.where(dR != 0, dR, 1.0), np.nan)
        else:  # Normal: g = q t^2 + b t + c
            mx, sx = px["mu"][idx], px["sigma"][idx]
            my, sy = py["mu"][idx], py["sigma"][idx]
            q = 0.5 / sy**2 - 0.5 / sx**2
            b = mx / sx**2 - my / sy**2
            c0 = 0.5 * my**2 / sy**2 - 0.5 * mx**2 / sx**2

            def g(t):
                return q * t * t + b * t + c0 - C

            def at(t):
                if math.isinf(t):
                    s = 1.0 if t > 0 else -1.0
                    lead = np.where(q != 0, np.sign(q) * np.inf, s * np.sign(b) * np.inf)
                    return np.where((q == 0) & (b == 0), c0 - C, lead)
                return g(t)

            tstar = np.where(q != 0, -b / (2 * np.where(q != 0, q, 1.0)), np.nan)
        inside = np.isfinite(tstar) & (tstar > lo) & (tstar < hi)
        if math.isfinite(lo) and math.isfinite(hi):
            mid = 0.5 * (lo + hi)
        elif math.isfinite(lo):
            mid = lo + 1.0
        elif math.isfinite(hi):
            mid = hi - 1.0
        else:
            mid = 0.0
        at_lo, at_hi = np.broadcast_to(at(lo), C.shape), np.broadcast_to(at(hi), C.shape)
        at_star = np.where(inside, g(np.where(inside, tstar, mid)), at_lo)
        cand_t = [np.full(C.shape, lo), np.full(C.shape, hi), np.where(inside, tstar, lo)]
    vals = np.stack([at_lo, at_hi, at_star])
    ts = np.stack(cand_t)
    imax = np.argmax(np.where(np.isnan(vals), -np.inf, vals), axis=0)
    imin = np.argmin(np.where(np.isnan(vals), np.inf, vals), axis=0)
    cols = np.arange(C.size)
    return vals[imax, cols], ts[imax, cols], vals[imin, cols], ts[imin, cols]


def _dirichlet_extremes(px, py, nx, ny, rows):
    """Dirichlet rows: ``g = sum_k d_k ln p_k - C`` over ``{max_S p / min_S p <= c}``."""
    mx, mn, amax, amin = [], [], [], []
    for r in rows:
        d = px["alpha"][r] - py["alpha"][r]
        C = nx[r] - ny[r]
        log_c = px["log_c"][r]
        if not np.any(d):
            top = low = -C
        elif not math.isfinite(log_c):
            top, low = math.inf, -math.inf
        else:
            cl = list(px["classes"][r])
            outside = np.delete(d, cl)
            if np.any(outside != 0) or abs(float(np.sum(d))) > 1e-9:
                # the counts of the row change in total: not produced by the exact plan's regions
                raise AuditError("a Dirichlet row whose total count changes between neighbours is not supported")
            D = float(np.sum(d[d > 0]))
            top, low = D * log_c - C, -D * log_c - C
        mx.append(top)
        mn.append(low)
        amax.append(_dirichlet_point(d, px, r, +1))
        amin.append(_dirichlet_point(d, px, r, -1))
    return np.array(mx), amax, np.array(mn), amin


def _dirichlet_point(d, px, r, sign):
    """A point of the ratio region where ``sum d_k ln p_k`` is extreme (two levels)."""
    k = len(d)
    log_c = px["log_c"][r]
    if not math.isfinite(log_c):
        return None
    u = np.zeros(k)
    cl = list(px["classes"][r])
    u[cl] = np.where(sign * d[cl] > 0, log_c, 0.0)
    p = np.exp(u - np.max(u))
    return (p / p.sum()).round(6).tolist()


def _exact_pair(plan_x, plan_y, post_x, post_y, norm_x, norm_y):
    """The exact ``sup_theta |ln xi(theta|x) - ln xi(theta|y)|`` and where it is reached."""
    top, low = 0.0, 0.0
    at_top, at_low = {}, {}
    contrib = {}
    for name, px in post_x.items():
        py = post_y[name]
        nx, ny = norm_x[name], norm_y[name]
        fam = px["family"]
        if fam == "Dirichlet":
            rows = np.flatnonzero(np.any(px["alpha"] != py["alpha"], axis=1) | (nx != ny))
            if rows.size == 0:
                continue
            mx, amax, mn, amin = _dirichlet_extremes(px, py, nx, ny, rows)
            for j, r in enumerate(rows):
                at_top[f"{name}[{r}]"] = amax[j]
                at_low[f"{name}[{r}]"] = amin[j]
                contrib[(name, int(r))] = (mx[j], mn[j])
        else:
            keys = [k for k in px if k not in ("family", "shape", "lower", "upper")]
            changed = np.zeros(px[keys[0]].shape, bool)
            for k in keys:
                changed |= px[k] != py[k]
            changed |= nx != ny
            idx = np.flatnonzero(changed)
            if idx.size == 0:
                continue
            mx, tmax, mn, tmin = _block_extremes(fam, px, py, nx, ny, idx)
            shape = px["shape"]
            for j, e in enumerate(idx):
                label = name if shape == () else f"{name}{[int(i) for i in np.unravel_index(e, shape)]}"
                at_top[label] = float(tmax[j])
                at_low[label] = float(tmin[j])
                contrib[(name, int(e))] = (mx[j], mn[j])
        top += float(np.sum(mx))
        low += float(np.sum(mn))
    if top >= -low:
        return top, top, at_top, contrib, +1
    return -low, low, at_low, contrib, -1


def _exact_curve(post_x, post_y, norm_x, norm_y, contrib, sign, theta):
    """The log-ratio along the element that contributes most, the others at the worst point."""
    if not contrib:
        return {}
    key = max(contrib, key=lambda k: abs(contrib[k][0] - contrib[k][1]))
    name, e = key
    px, py = post_x[name], post_y[name]
    if px["family"] == "Dirichlet":
        return {}
    others = sum((v[0] if sign > 0 else v[1]) for k, v in contrib.items() if k != key)
    lo, hi = px["lower"], px["upper"]
    if not (math.isfinite(lo) and math.isfinite(hi)):
        span = abs(theta) + 1.0 if math.isfinite(theta) else 10.0
        lo = lo if math.isfinite(lo) else theta - 5 * span
        hi = hi if math.isfinite(hi) else theta + 5 * span
    t = np.linspace(lo, hi, 801)[1:-1] if px["family"] in ("Beta", "Gamma") and lo <= 0 else np.linspace(lo, hi, 801)
    nx, ny = norm_x[name][e], norm_y[name][e]
    with np.errstate(divide="ignore", invalid="ignore"):
        if px["family"] == "Beta":
            gx = sc.xlogy(px["alpha"][e] - 1, t) + sc.xlog1py(px["beta"][e] - 1, -t) - nx
            gy = sc.xlogy(py["alpha"][e] - 1, t) + sc.xlog1py(py["beta"][e] - 1, -t) - ny
        elif px["family"] == "Gamma":
            gx = sc.xlogy(px["alpha"][e] - 1, t) - px["rate"][e] * t - nx
            gy = sc.xlogy(py["alpha"][e] - 1, t) - py["rate"][e] * t - ny
        else:
            gx = -0.5 * ((t - px["mu"][e]) / px["sigma"][e]) ** 2 - nx
            gy = -0.5 * ((t - py["mu"][e]) / py["sigma"][e]) ** 2 - ny
    shape = px["shape"]
    label = name if shape == () else f"{name}{[int(i) for i in np.unravel_index(e, shape)]}"
    return {"x": t, "y": gx - gy + others, "label": label, "density_x": np.exp(gx), "density_y": np.exp(gy)}


def _audit_exact(pmod, space: _DataSpace, pairs) -> dict:
    plan = pmod.conjugate_plan
    if plan is None:
        raise AuditError(f"method='exact' needs a conjugate model: {pmod.exact_unavailable}")
    best = None
    count = 0
    cache = {}

    def posterior(data):
        key = hashlib.blake2b(b"".join(_key(data[c]) for c in space.names), digest_size=16).digest()
        if key not in cache:
            if len(cache) > 4096:
                cache.clear()
            p = plan.with_data(data)
            cache[key] = (p, p.posteriors(), p.log_normalisers())
        return cache[key]

    per_base = {}  # the worst pair of every base dataset: candidates for a statistical audit
    for label, x, change, y in pairs:
        px = posterior(x)
        py = posterior(y)
        value, signed, theta, contrib, sign = _exact_pair(px[0], py[0], px[1], py[1], px[2], py[2])
        count += 1
        if best is None or value > best[0]:
            best = (value, signed, theta, contrib, sign, label, x, y, change, px, py)
        if id(x) not in per_base or value > per_base[id(x)][0]:
            per_base[id(x)] = (value, label, x, change, y)
    if best is None:
        raise AuditError("the search found no neighbouring pair (is every container's domain a single value?)")
    value, signed, theta, contrib, sign, label, x, y, change, px, py = best
    curve = _exact_curve(px[1], py[1], px[2], py[2], contrib, sign, next(iter(theta.values()), 0.0) if theta else 0.0)
    witness = Witness(_freeze(x), _freeze(y), change, float(signed), theta, None, label)
    top = sorted(per_base.values(), key=lambda t: -t[0])
    return {"measured": float(value), "pairs": count, "witness": witness, "curve": curve, "error": 0.0,
            "candidates": [(lab, xx, ch, yy) for _, lab, xx, ch, yy in top]}


# =========================================================================== numerical audit
class _TemperedView:
    """A :class:`~pymc_dp.PrivateMAP` as the posterior-sampling audit sees it.

    The mechanism's output density is ``xi_L(theta) p_theta(x)^beta``: the core's truncated
    posterior with the private factors' log-likelihood scaled by ``beta``. The exact audit reads
    the tempered conjugate plan, the numerical audit scales the private rows by
    :attr:`likelihood_power`, the MCMC runs are the mechanism's own releases, and the claim is
    the mechanism's certificate (``epsilon_per_draw`` per output).
    """

    def __init__(self, mech):
        core = mech.private_model
        self.mechanism = mech
        self.certificate = mech.certificate
        self.conjugate_plan = mech.conjugate_plan
        self.exact_unavailable = core.exact_unavailable
        self.unit, self.domains, self.factors = core.unit, core.domains, core.factors
        self.model = core.model
        #: the core's certification: the user model and the truncation the certificate claims
        self.certification = core.certification
        #: the power of the private likelihood in the audited density
        self.likelihood_power = float(mech.beta)
        self.draws = mech.draws

    def with_data(self, data):
        return self.mechanism.with_data(data)  # records nothing in any ledger


class _GridModel:
    """The truncated posterior of a model with at most two free scalar parameters, on grids.

    Densities come from the *user's* model (natural parameters, no value transforms): its prior,
    its public factors and potentials, and its private factors' log-likelihood row by row; the
    region is the certificate's truncation (its constraints, evaluated pointwise).
    """

    MAX_DIM = 2

    def __init__(self, pmod, space: _DataSpace, *, dense: int | None = None, wide: int | None = None):
        import pytensor
        import pytensor.tensor as pt
        from pymc.model.transform.conditioning import remove_value_transforms
        from pytensor.graph.replace import clone_replace, vectorize_graph

        user = pmod.certification.user_model
        self.pmod = pmod
        self.space = space
        free = list(user.free_RVs)
        sizes = {}
        for rv in free:
            shape = tuple(int(s) for s in rv.shape.eval())
            if not str(rv.dtype).startswith("float"):
                raise AuditError(f"method='numerical' needs continuous parameters; {rv.name!r} is {rv.dtype}")
            sizes[rv.name] = shape
        dim = sum(int(np.prod(s, dtype=int)) for s in sizes.values())
        if dim > self.MAX_DIM or dim == 0:
            raise AuditError(
                f"method='numerical' needs at most {self.MAX_DIM} free scalar parameters; this model has {dim} "
                f"({', '.join(f'{k}{list(v)}' for k, v in sizes.items())}). Use method='statistical'."
            )
        self.dim = dim
        self.shapes = sizes
        self.coords = [(name, idx) for name, s in sizes.items() for idx in (np.ndindex(*s) if s else [()])]
        self.supports = [self._support(user, name) for name, _ in self.coords]
        plain = remove_value_transforms(user)
        values = {rv.name: plain.rvs_to_values[rv] for rv in plain.free_RVs}
        private = {f.name for f in pmod.factors}
        priv_obs = [rv for rv in plain.observed_RVs if rv.name in private]
        pub_obs = [rv for rv in plain.observed_RVs if rv.name not in private]
        self.factor_names = [rv.name for rv in priv_obs]
        self.reads = {f.name: set(f.reads) for f in pmod.factors}
        terms = plain.logp(vars=list(plain.free_RVs) + pub_obs, jacobian=False, sum=False)
        base = pt.add(*[pt.sum(t) for t in terms]) if terms else pt.constant(0.0)
        for pot in plain.potentials:
            base = base + pt.sum(pot)
        rows = []
        for rv, lp in zip(priv_obs, plain.logp(vars=priv_obs, jacobian=False, sum=False)):
            if lp.ndim == 0:
                raise AuditError(f"factor {rv.name!r} has a scalar observed value: no rows")
            row = lp.sum(axis=tuple(range(1, lp.ndim))) if lp.ndim > 1 else lp
            # a private MAP's output density raises the private likelihood to the power beta
            rows.append(getattr(pmod, "likelihood_power", 1.0) * row)
        data_vars = [v for v in plain.data_vars if v.name in space.names]
        self.data_names = [v.name for v in data_vars]
        # public containers aligned with the rows are inputs too, so that a few rows can be
        # evaluated alone (verified against a full evaluation before it is relied on)
        row_public = [v for v in plain.data_vars if v.name in space.public_rows]
        self.row_public = {v.name: np.asarray(v.get_value()) for v in row_public}
        self.subset_ok = space.rows is not None
        self._subset_checked = False
        data_vars = data_vars + row_public
        inputs = {v: v.type() for v in data_vars}
        outs = clone_replace([base, *rows], replace=inputs)
        names = list(sizes)
        batched = {values[n]: pt.tensor(f"{n}_grid", dtype="float64", shape=(None, *sizes[n])) for n in names}
        vout = vectorize_graph(outs, replace=batched)
        self.names = names
        self._fn = pytensor.function(
            [batched[values[n]] for n in names] + [inputs[v] for v in data_vars], vout, on_unused_input="ignore"
        )
        self.constraints = list(pmod.certification.constraints)
        self.dense = dense or (4001 if dim == 1 else 161)
        self.wide = wide or (240 if dim == 1 else 61)
        self._region_cache = {}

    @staticmethod
    def _support(model, name):
        rv = model[name]
        t = model.rvs_to_transforms.get(rv)
        tn = type(t).__name__ if t is not None else None
        if tn == "LogOddsTransform":
            return (0.0, 1.0, True, True)
        if tn == "LogTransform":
            return (0.0, math.inf, True, True)
        if tn in ("IntervalTransform", "Interval"):
            a, b = t.args_fn(*rv.owner.inputs)
            lo = -math.inf if a is None else float(np.max(np.asarray(a.eval() if hasattr(a, "eval") else a)))
            hi = math.inf if b is None else float(np.min(np.asarray(b.eval() if hasattr(b, "eval") else b)))
            return (lo, hi, True, True)
        if t is None:
            return (-math.inf, math.inf, True, True)
        raise AuditError(f"method='numerical': {name!r} has the value transform {tn}, which it does not know")

    def _bounds(self, j):
        """The region of coordinate j from the interval constraints and its support:
        ``(lo, hi, lo_open, hi_open)``."""
        name, idx = self.coords[j]
        lo, hi, lo_open, hi_open = self.supports[j]
        size = int(np.prod(self.shapes[name], dtype=int))
        for c in self.constraints:
            if getattr(c, "var", None) != name:
                continue
            if type(c).__name__ == "IntervalConstraint":
                if c.lower is not None and c.lower >= lo:
                    lo, lo_open = float(c.lower), False
                if c.upper is not None and c.upper <= hi:
                    hi, hi_open = float(c.upper), False
            elif type(c).__name__ == "NormBallConstraint" and size == 1:
                wgt = 1.0 if c.weights is None else float(c.weights[0])
                r = c.radius / wgt
                if -r >= lo:
                    lo, lo_open = -r, False
                if r <= hi:
                    hi, hi_open = r, False
        return lo, hi, lo_open, hi_open

    # ------------------------------------------------------------------ grids
    def _wide_axis(self, j, n):
        lo, hi, lo_open, hi_open = self._bounds(j)
        pts = []
        if math.isfinite(lo) and math.isfinite(hi):
            pts.append(np.linspace(lo, hi, n))
            span = hi - lo
            if lo_open:
                pts.append(lo + span * np.logspace(-14, -2, max(n // 8, 6)))
            if hi_open:
                pts.append(hi - span * np.logspace(-14, -2, max(n // 8, 6)))
        elif math.isfinite(lo):
            scale = max(1.0, abs(lo))
            pts.append(lo + scale * np.logspace(-12, 8, n))
        elif math.isfinite(hi):
            scale = max(1.0, abs(hi))
            pts.append(hi - scale * np.logspace(-12, 8, n))
        else:
            half = np.logspace(-6, 8, n // 2)
            pts += [-half, half, np.linspace(-10, 10, n // 4)]
        x = np.unique(np.concatenate(pts))
        if lo_open:
            x = x[x > lo]
        if hi_open:
            x = x[x < hi]
        return x[(x >= lo) & (x <= hi)]

    def _points(self, axes):
        mesh = np.meshgrid(*axes, indexing="ij")
        flat = [m.reshape(-1) for m in mesh]
        vals = {}
        for name in self.names:
            shape = self.shapes[name]
            arr = np.empty((len(flat[0]), *shape))
            for j, (nm, idx) in enumerate(self.coords):
                if nm == name:
                    arr[(slice(None), *idx)] = flat[j]
            vals[name] = arr
        return vals

    def _region(self, axes, vals):
        key = tuple(_key(a) for a in axes)
        if key in self._region_cache:
            return self._region_cache[key]
        ok = np.ones(len(next(iter(vals.values()))), bool)
        for c in self.constraints:
            ok &= np.asarray(c.contains(vals), bool)
        if len(self._region_cache) > 64:
            self._region_cache.clear()
        self._region_cache[key] = ok
        return ok

    def _call(self, vals, args, n, chunk_cells=4_000_000):
        g = len(next(iter(vals.values())))
        step = max(1, chunk_cells // max(n, 1))
        outs = None
        for s in range(0, g, step):
            part = [vals[nm][s : s + step] for nm in self.names]
            res = self._fn(*part, *args)
            outs = [[r] for r in res] if outs is None else [o + [r] for o, r in zip(outs, res)]
        return [np.concatenate(o, axis=0) for o in outs]

    def evaluate(self, vals, data: dict):
        """``(base (G,), {factor: rows (G, n_j)})`` at the grid points for dataset ``data``."""
        args = [data[c] for c in self.data_names if c not in self.row_public] + list(self.row_public.values())
        n = max(np.asarray(v).shape[0] for v in data.values())
        res = self._call(vals, args, n)
        return res[0], dict(zip(self.factor_names, res[1:]))

    def evaluate_rows(self, vals, data: dict, rows: np.ndarray | None) -> dict:
        """``{factor: (G, len(rows))}``: the row log-likelihoods of ``rows`` only, evaluated on
        those rows alone where that is verified to agree with a full evaluation (``rows=None``:
        every row)."""
        if rows is None:
            return self.evaluate(vals, data)[1]
        if self.subset_ok:
            args = [data[c][rows] for c in self.data_names if c not in self.row_public]
            args += [v[rows] for v in self.row_public.values()]
            try:
                res = self._call(vals, args, len(rows))
                out = dict(zip(self.factor_names, res[1:]))
            except Exception:
                self.subset_ok = False
            else:
                if self._subset_checked:
                    return out
                full = self.evaluate(vals, data)[1]
                same = all(
                    np.allclose(out[f], full[f][:, rows], rtol=1e-10, atol=1e-10, equal_nan=True) for f in self.factor_names
                )
                self._subset_checked = True
                if same:
                    return out
                self.subset_ok = False
        full = self.evaluate(vals, data)[1]
        return {f: v[:, rows] for f, v in full.items()}

    def grid(self, data):
        """An adaptive grid for dataset ``data``: the wide grid (the whole region) and a dense
        grid over the bulk of the posterior; returns ``(axes, vals, log_weights, inside)``."""
        wide = [self._wide_axis(j, self.wide) for j in range(self.dim)]
        vals = self._points(wide)
        inside = self._region(wide, vals)
        base, rows = self.evaluate(vals, data)
        lp = base + sum(r.sum(axis=1) for r in rows.values())
        lp = np.where(inside & np.isfinite(lp), lp, -np.inf)
        if not np.any(np.isfinite(lp)):
            raise AuditError("the truncated posterior is zero on the whole audit grid (an empty region?)")
        top = np.max(lp)
        keep = (lp >= top - 45.0).reshape([len(a) for a in wide])
        axes = []
        for j in range(self.dim):
            other = tuple(k for k in range(self.dim) if k != j)
            on = np.any(keep, axis=other) if other else keep
            ids = np.flatnonzero(on)
            a = wide[j][max(ids[0] - 1, 0)]
            b = wide[j][min(ids[-1] + 1, len(wide[j]) - 1)]
            dense = np.linspace(a, b, self.dense)
            axes.append(np.unique(np.concatenate([wide[j], dense])))
        vals = self._points(axes)
        inside = self._region(axes, vals)
        logw = sum(np.meshgrid(*[np.log(_trapezoid_weights(a)) for a in axes], indexing="ij")).reshape(-1)
        half = [_every_other(a) for a in axes]
        mask_half = np.zeros([len(a) for a in axes], bool)
        mask_half[np.ix_(*half)] = True
        logw_half = np.full(mask_half.shape, -np.inf)
        logw_half[np.ix_(*half)] = sum(np.meshgrid(*[np.log(_trapezoid_weights(a[h])) for a, h in zip(axes, half)], indexing="ij"))
        return axes, vals, logw, logw_half.reshape(-1), inside


    # ------------------------------------------------------------------ pairs (statistical audits)
    def _pair(self, x, y):
        """One grid (built for x) for both datasets: log densities and log normalisers."""
        key = (tuple(_key(x[c]) for c in sorted(x)), tuple(_key(y[c]) for c in sorted(y)))
        if getattr(self, "_pair_key", None) != key:
            axes, vals, logw, _, inside = self.grid(x)
            base, rx = self.evaluate(vals, x)
            _, ry = self.evaluate(vals, y)
            lpx = np.where(inside, base + sum(r.sum(axis=1) for r in rx.values()), -np.inf)
            lpy = np.where(inside, base + sum(r.sum(axis=1) for r in ry.values()), -np.inf)
            self._pair_key = key
            self._pair_val = (vals, logw, lpx, lpy, _logsumexp(lpx + logw), _logsumexp(lpy + logw))
        return self._pair_val

    def samplers(self, x, y):
        """Draws from both datasets' truncated posteriors discretised on one grid (each grid point
        with probability density x quadrature weight); the draws carry their grid index."""
        vals, logw, lpx, lpy, lzx, lzy = self._pair(x, y)

        def make(lp, lz):
            prob = np.exp(lp + logw - lz)
            cum = np.cumsum(prob / prob.sum())

            def draw(n, rng):
                i = np.minimum(np.searchsorted(cum, rng.random(n), side="right"), len(cum) - 1)
                return {**{nm: vals[nm][i] for nm in self.names}, "__index": i}

            return draw

        return make(lpx, lzx), make(lpy, lzy)

    def log_ratio_function(self, x, y):
        """``theta -> ln xi(theta|x) - ln xi(theta|y)`` (normalisers from the grid of x)."""
        vals, logw, lpx, lpy, lzx, lzy = self._pair(x, y)
        at_grid = lpx - lpy - (lzx - lzy)

        def log_ratio(draws):
            if "__index" in draws:
                return at_grid[draws["__index"]]
            pts = {nm: np.asarray(draws[nm], float) for nm in self.names}
            ok = np.ones(len(pts[self.names[0]]), bool)
            for c in self.constraints:
                ok &= np.asarray(c.contains(pts), bool)
            _, rx = self.evaluate(pts, x)
            _, ry = self.evaluate(pts, y)
            dl = sum(rx[f].sum(axis=1) - ry[f].sum(axis=1) for f in self.factor_names)
            return np.where(ok, dl - (lzx - lzy), np.nan)

        return log_ratio


def _trapezoid_weights(x):
    w = np.zeros(len(x))
    if len(x) == 1:
        return np.ones(1)
    d = np.diff(x)
    w[:-1] += 0.5 * d
    w[1:] += 0.5 * d
    return w


def _every_other(x):
    idx = np.arange(0, len(x), 2)
    if idx[-1] != len(x) - 1:
        idx = np.r_[idx, len(x) - 1]
    return idx


def _logsumexp(a):
    m = np.max(a)
    if not np.isfinite(m):
        return m
    return float(m + np.log(np.sum(np.exp(a - m))))


class _Identity(dict):
    def __getitem__(self, key):
        return key


def _substituted_rows(gm, space, x, vals, new, rows, cache):
    """Row log-likelihoods (of ``rows`` only) of ``x`` with each changed container set, in every
    row, to its new row value: row ``i`` of the result is row ``i`` of the neighbour that changes
    row ``i`` (factors read one row at a time; checked once per audit)."""
    key = tuple((c, _key(np.asarray(v))) for c, (_, v) in sorted(new.items()))
    if key not in cache:
        data = dict(x)
        for c, (_, v) in new.items():
            data[c] = np.broadcast_to(np.asarray(v).astype(space.dtypes[c]), x[c].shape).copy()
        cache[key] = gm.evaluate_rows(vals, data, rows)
    return cache[key]


def _audit_numerical(pmod, space: _DataSpace, bases, given_pairs, gm=None) -> dict:
    gm = gm or _GridModel(pmod, space)
    best = None
    count = 0
    worst_err = 0.0
    if given_pairs is not None:
        items = [(label, x, [(change, None, y)]) for label, x, change, y in given_pairs]
    else:
        items = [(label, x, None) for label, x in bases]
    checked_locality = False
    per_base = {}
    for label, x, changes in items:
        axes, vals, logw, logw_half, inside = gm.grid(x)
        base, rows_x = gm.evaluate(vals, x)
        lp_x = np.where(inside, base + sum(r.sum(axis=1) for r in rows_x.values()), -np.inf)
        lz_x, lz_x_half = _logsumexp(lp_x + logw), _logsumexp(lp_x + logw_half)
        cache = {}
        pending = changes if changes is not None else [(ch, new, None) for ch, new in space.changes(x)]
        if space.rows is not None:  # evaluate the touched rows only
            touched = sorted({int(i) for _, new, _ in pending if new is not None for rws, _ in new.values() for i in np.atleast_1d(rws)})
            pos = {r: j for j, r in enumerate(touched)}
            rows_arr = np.array(touched, dtype=int)
            rows_x_t = {f: v[:, rows_arr] for f, v in rows_x.items()}
        else:  # containers of different lengths (attribute unit): whole evaluations
            rows_arr, rows_x_t = None, rows_x
            pos = _Identity()
        for change, new, y in pending:
            if y is not None:  # a given pair: evaluate y directly
                rows_y = gm.evaluate(vals, y)[1]
                dl = sum(rows_x[f].sum(axis=1) - rows_y[f].sum(axis=1) for f in gm.factor_names)
            else:
                rows_s = _substituted_rows(gm, space, x, vals, new, rows_arr, cache)
                containers = set(new)
                cols = [pos[int(i)] for i in np.unique(np.concatenate([np.atleast_1d(new[c][0]) for c in containers]))]
                dl = np.zeros(len(base))
                for f in gm.factor_names:
                    if gm.reads[f] & containers:
                        dl = dl + rows_x_t[f][:, cols].sum(axis=1) - rows_s[f][:, cols].sum(axis=1)
                if not checked_locality:
                    rows_y = gm.evaluate(vals, space.apply(x, new))[1]
                    direct = sum(rows_x[f].sum(axis=1) - rows_y[f].sum(axis=1) for f in gm.factor_names)
                    ok = np.isfinite(direct) & np.isfinite(dl) & inside
                    if not np.allclose(direct[ok], dl[ok], rtol=1e-8, atol=1e-8):
                        raise AuditError(
                            "a private factor reads several rows at once: the numerical audit needs row-local factors"
                        )
                    checked_locality = True
            lp_y = np.where(inside, lp_x - dl, -np.inf)
            C = lz_x - _logsumexp(lp_y + logw)
            err = abs(C - (lz_x_half - _logsumexp(lp_y + logw_half)))
            g = np.where(inside, dl - C, np.nan)
            with np.errstate(invalid="ignore"):
                absg = np.where(np.isfinite(g), np.abs(g), np.where(np.isnan(g), -1.0, np.inf))
            j = int(np.argmax(absg))
            value = float(absg[j])
            count += 1
            if id(x) not in per_base or value > per_base[id(x)][0]:
                per_base[id(x)] = (value, label, x, change, new, y)
            if best is None or value > best[0]:
                worst_err = err
                best = (value, float(g[j]), {nm: vals[nm][j].tolist() for nm in gm.names}, label, x,
                        y if y is not None else space.apply(x, new), change, axes, g, j, (lp_x, lp_y))
    if best is None:
        raise AuditError("the search found no neighbouring pair")
    value, signed, theta, label, x, y, change, axes, g, j, dens = best
    witness = Witness(_freeze(x), _freeze(y), change, signed, theta, None, label)
    notes = (
        f"quadrature: trapezoid on an adaptive grid ({' x '.join(str(len(a)) for a in axes)} points); error of the "
        f"worst pair's log-normaliser difference estimated by halving the grid: {worst_err:.2g}",
    )
    cands = [
        (lab, xx, ch, yy if yy is not None else space.apply(xx, nw))
        for _, lab, xx, ch, nw, yy in sorted(per_base.values(), key=lambda t: -t[0])
    ]
    return {"measured": value, "pairs": count, "witness": witness, "curve": _numerical_curve(gm, axes, g, j, dens),
            "error": float(worst_err), "notes": notes, "candidates": cands}


def _numerical_curve(gm, axes, g, j, dens=None):
    """The log-ratio along the grid line through the worst point (the axis where it varies most)."""
    shape = [len(a) for a in axes]
    g = g.reshape(shape)
    if gm.dim == 1:
        line, x, k = g, axes[0], 0
    else:
        i0, i1 = np.unravel_index(j, shape)
        lines = [g[:, i1], g[i0, :]]
        k = int(np.nanmax(np.abs(lines[1])) > np.nanmax(np.abs(lines[0])))
        line, x = lines[k], axes[k]
    name, idx = gm.coords[k]
    ok = np.isfinite(line)
    out = {"x": x[ok], "y": line[ok], "label": f"{name}{list(idx) if idx else ''}"}
    if dens is not None:
        lines = []
        for lp in dens:
            lp = lp.reshape(shape)
            if gm.dim == 1:
                seg = lp
            else:
                i0, i1 = np.unravel_index(j, shape)
                seg = lp[:, i1] if k == 0 else lp[i0, :]
            seg = seg[ok]
            lines.append(np.exp(seg - np.max(seg)) if np.any(np.isfinite(seg)) else np.zeros_like(seg))
        out["density_x"], out["density_y"] = lines
    return out


# =========================================================================== statistical audit
class _Mechanism:
    """Runs of the release mechanism on a pair of datasets, and the log-ratio of their densities
    where a density is known (the NP-optimal statistic)."""

    def __init__(self, pmod, x, y, kind, gm=None, mcmc_kwargs=None):
        self.kind = kind
        self.log_ratio = None
        plan = pmod.conjugate_plan
        if plan is not None:
            px, py = plan.with_data(x), plan.with_data(y)

            def log_ratio(d):
                with np.errstate(invalid="ignore"):
                    return px.log_density(d) - py.log_density(d)

            self.log_ratio = log_ratio
        elif gm is not None:
            self.log_ratio = gm.log_ratio_function(x, y)
        if kind == "exact":
            self.draw_x = lambda n, rng: px.sample(n, rng)
            self.draw_y = lambda n, rng: py.sample(n, rng)
        elif kind == "grid":
            self.draw_x, self.draw_y = gm.samplers(x, y)
        elif kind == "chain":
            self.chains = _ChainRuns(pmod, x, y, mcmc_kwargs)
            self.draw_x, self.draw_y = self.chains.samplers()
            self.log_ratio = _ChainRuns.log_ratio
        else:
            self.draw_x = self._mcmc(pmod, x, mcmc_kwargs)
            self.draw_y = self._mcmc(pmod, y, mcmc_kwargs)

    @staticmethod
    def _mcmc(pmod, data, mcmc_kwargs):
        other = pmod.with_data(data)
        other._ledger_arg = None  # an audit spends nothing: this copy records nothing
        kwargs = {"progressbar": False, "compute_convergence_checks": False, **(mcmc_kwargs or {})}

        def draw(n, rng):
            out = {}
            for _ in range(n):
                idata = other.sample(method="mcmc", random_seed=int(rng.integers(2**31 - 1)), **kwargs)
                for name in idata.posterior.data_vars:
                    out.setdefault(name, []).append(np.asarray(idata.posterior[name].values)[0, 0])
            return {k: np.stack(v) for k, v in out.items()}

        return draw

    def statistics(self, draws: dict) -> dict[str, np.ndarray]:
        """Scalar statistics of released draws: the log-ratio (when known) and every coordinate."""
        out = {}
        if self.log_ratio is not None:
            out["log-ratio"] = np.asarray(self.log_ratio(draws), float)
        for name, v in draws.items():
            if name.startswith("__"):
                continue
            v = np.asarray(v, float)
            flat = v.reshape(len(v), -1)
            for j in range(flat.shape[1]):
                out[name if flat.shape[1] == 1 else f"{name}[{j}]"] = flat[:, j]
        return out


class _ChainRuns:
    """Draws from the truncated posterior by long MCMC chains, thinned, one set per dataset.

    One released draw is one draw from the truncated posterior; an audit of the certificate
    needs many independent ones. Where the posterior has no exact sampler and no grid (more than
    two free scalar parameters), ``pm.sample`` on the truncated model of each dataset gives them:
    ``chains`` chains (default 2) after ``tune`` warm-up steps, every ``thin``-th draw kept
    (default 4), so a run costs a few NUTS steps and no compilation. What this tests is the
    rule, the lift and the truncation (the claim about the truncated posterior), not the mixing
    of a sampler over ``tune`` steps: that is ``sampler="mcmc"``. The statistic the test may
    choose includes the log-likelihood ratio ``log p(x|theta) - log p(y|theta)`` at each draw
    (the normalisers cancel in a threshold event), evaluated by :func:`pymc.compute_log_likelihood`
    on both datasets' models.
    """

    def __init__(self, pmod, x, y, mcmc_kwargs=None):
        self.kwargs = dict(mcmc_kwargs or {})
        self.models = {"x": pmod.with_data(x), "y": pmod.with_data(y)}
        self.initvals = dict(pmod.certification.initvals)
        # only what a release holds: Deterministics that read private data are never released
        self.released = set(pmod.certification.released_names)
        #: dataset key -> how well its chains mixed: worst rank-normalised R-hat of a released
        #: coordinate (and its name), and the fraction of divergent transitions
        self.mixing: dict[str, dict] = {}

    def samplers(self):
        return self._sampler("x", "y"), self._sampler("y", "x")

    def _sampler(self, own, other):
        def draw(n, rng):
            import pymc as pm

            from pymc_dp.sampling import _without_short_trace_warning

            kw = dict(self.kwargs)
            # several chains, a long warm-up and small steps: a hierarchical funnel that traps
            # one of two short chains reads as a privacy loss to the test (seen on radon)
            chains = int(kw.pop("chains", 4))
            thin = int(kw.pop("thin", 4))
            tune = int(kw.pop("tune", 1000))
            kw.setdefault("target_accept", 0.95)
            kw.setdefault("cores", 1)
            kw.setdefault("init", "adapt_diag")
            per_chain = -(-n // chains) * thin
            model = self.models[own].model
            with _without_short_trace_warning():
                idata = pm.sample(
                    draws=per_chain, tune=tune, chains=chains, model=model, initvals=self.initvals,
                    random_seed=int(rng.integers(2**31 - 1)), progressbar=False,
                    compute_convergence_checks=False, return_inferencedata=True, **kw,
                )
            self.mixing[own] = _mixing(idata, self.released)
            post = idata.posterior.isel(draw=slice(thin - 1, None, thin))
            out = {}
            for name in post.data_vars:
                if name not in self.released:
                    continue
                v = np.asarray(post[name].values)
                out[name] = v.reshape(-1, *v.shape[2:])[:n]
            lik = {}
            for key in (own, other):
                ll = pm.compute_log_likelihood(
                    idata.copy(), model=self.models[key].model, extend_inferencedata=False, progressbar=False
                )
                ll = ll.isel(draw=slice(thin - 1, None, thin))
                tot = sum(np.asarray(v.values).reshape(v.shape[0] * v.shape[1], -1).sum(axis=1) for v in ll.data_vars.values())
                lik[key] = tot[:n]
            # log p(x|theta) - log p(y|theta), whichever dataset the chain ran on
            out["__log_ratio__"] = lik["x"] - lik["y"]
            return out

        return draw

    @staticmethod
    def log_ratio(draws):
        return np.asarray(draws["__log_ratio__"], float)


#: chains whose worst R-hat or divergent fraction exceeds these did not sample the truncated
#: posterior: a difference between their event frequencies is not evidence of a privacy loss
RHAT_MAX = 1.05
DIVERGENT_MAX = 0.01


def _mixing(idata, released) -> dict:
    """Worst rank-normalised R-hat over the released coordinates (Vehtari et al. 2021, as
    :func:`arviz.rhat` computes it), and the fraction of divergent transitions."""
    import arviz as az

    names = [n for n in idata.posterior.data_vars if n in released]
    worst, where = 1.0, None
    if names and idata.posterior.sizes["chain"] > 1:
        with warnings.catch_warnings(), np.errstate(all="ignore"):
            warnings.simplefilter("ignore", RuntimeWarning)  # a constant coordinate: R-hat is NaN, skipped
            rhat = az.rhat(idata.posterior[names])
        for n in names:
            v = np.asarray(rhat[n].values, float)
            if v.size and np.any(np.isfinite(v)) and np.nanmax(v) > worst:
                worst, where = float(np.nanmax(v)), n
    div = idata.sample_stats["diverging"] if "diverging" in getattr(idata, "sample_stats", {}) else None
    divergent = float(np.mean(div.values)) if div is not None else 0.0
    return {"rhat": worst, "worst": where, "divergent": divergent,
            "mixed": worst <= RHAT_MAX and divergent <= DIVERGENT_MAX}


def _events(sx: np.ndarray, sy: np.ndarray, max_thresholds=256):
    """Counts of the threshold events ``{s <= t}`` and ``{s > t}`` under both datasets, for
    thresholds at quantiles of the pooled values: arrays ``t, kx_le, ky_le`` (``{s > t}`` is the
    complement)."""
    pooled = np.concatenate([sx, sy])
    pooled = pooled[np.isfinite(pooled)]
    if pooled.size == 0:
        return None
    ts = np.unique(np.quantile(pooled, np.linspace(0.0, 1.0, max_thresholds)))
    xs, ys = np.sort(np.where(np.isnan(sx), np.inf, sx)), np.sort(np.where(np.isnan(sy), np.inf, sy))
    return ts, np.searchsorted(xs, ts, side="right"), np.searchsorted(ys, ts, side="right")


def _best_event(sx, sy, alpha, delta=0.0):
    """Over thresholds, sides (``<=``, ``>``) and directions (``x`` or ``y`` in the numerator), the
    event with the largest Clopper-Pearson lower bound on the log-ratio of its probabilities.
    Returns ``(bound, estimate, threshold, side, numerator)`` and, per threshold, the best bound
    and its estimate."""
    ev = _events(sx, sy)
    if ev is None:
        return None, {}
    ts, kx, ky = ev
    nx, ny = len(sx), len(sy)
    rows = []  # (side, numerator, k1, n1, k2, n2)
    for side, ax, ay in (("<=", kx, ky), (">", nx - kx, ny - ky)):
        rows.append((side, "x", ax, nx, ay, ny))
        rows.append((side, "y", ay, ny, ax, nx))
    lbs = np.stack([_log_cp_ratio(k1, n1, k2, n2, alpha, delta) for _, _, k1, n1, k2, n2 in rows])
    with np.errstate(divide="ignore"):
        ests = np.stack([np.log(k1 / n1) - np.log(k2 / n2) for _, _, k1, n1, k2, n2 in rows])
    ests = np.where(np.isnan(ests), -np.inf, ests)
    r, j = np.unravel_index(int(np.argmax(lbs)), lbs.shape)
    side, num = rows[r][0], rows[r][1]
    best = (float(lbs[r, j]), float(ests[r, j]), float(ts[j]), side, num)
    top = np.argmax(lbs, axis=0)
    curve = {float(t): (float(lbs[top[i], i]), float(ests[top[i], i])) for i, t in enumerate(ts)}
    return best, curve


def _predicted_bound(gx, gy, n_test, alpha, thresholds=128):
    """The lower bound a test of ``n_test`` runs per dataset would give with the log-ratio
    statistic, predicted from pilot draws. ``P_y(g > t)`` is estimated from the draws of x by
    importance weighting (``E_x[1{g > t} e^-g]``) and ``P_x(g <= t)`` from those of y, which is
    far less noisy than counting rare events."""
    gx = gx[np.isfinite(gx)]
    gy = gy[np.isfinite(gy)]
    if gx.size == 0 or gy.size == 0:
        return -math.inf
    ts = np.unique(np.quantile(np.concatenate([gx, gy]), np.linspace(0, 1, thresholds)))
    above = gx[None, :] > ts[:, None]
    px = above.mean(axis=1)
    py = np.mean(np.where(above, np.exp(-gx)[None, :], 0.0), axis=1)
    below = gy[None, :] <= ts[:, None]
    qy = below.mean(axis=1)
    qx = np.mean(np.where(below, np.exp(gy)[None, :], 0.0), axis=1)
    best = -math.inf
    for num, den in ((px, py), (qy, qx)):
        k1 = np.round(num * n_test)
        k2 = np.round(np.minimum(den, 1.0) * n_test)
        best = max(best, float(np.max(_log_cp_ratio(k1, n_test, k2, n_test, alpha))))
    return best


def _choose_pair(pmod, candidates, *, sampler, gm, runs, alpha, rng, pilot=2000, limit=256):
    """Among the search's candidate pairs, the one whose predicted lower bound is largest.

    The supremum of the log-ratio is often reached where neither posterior has mass (it is then
    undetectable by sampling); a pilot of ``pilot`` draws per dataset predicts, for each pair, the
    bound a test with ``runs / 2`` runs would give with the log-ratio statistic.
    """
    pilot_kind = "exact" if pmod.conjugate_plan is not None else "grid"
    if pilot_kind == "grid":
        limit = min(limit, 32)  # a grid per candidate
    best = None
    for cand in candidates[:limit]:
        label, x, change, y = cand
        mech = _Mechanism(pmod, x, y, pilot_kind, gm)
        gx = mech.log_ratio(mech.draw_x(pilot, rng))
        gy = mech.log_ratio(mech.draw_y(pilot, rng))
        value = _predicted_bound(gx, gy, max(runs // 2, 1), alpha)
        if best is None or value > best[0]:
            best = (value, cand)
    return best


def _audit_statistical(pmod, pair, *, runs, confidence, rng, sampler, release, gm, mcmc_kwargs):
    label, x, change, y = pair
    mech = _Mechanism(pmod, x, y, sampler, gm, mcmc_kwargs)
    per = 1 if release == "draw" else pmod.draws
    # one draw is pure eps0-DP; a whole release is (eps, delta)-DP: P_x(E) <= e^eps P_y(E) + delta
    delta = 0.0 if release == "draw" else float(pmod.certificate.delta)

    def collect(draw):
        st = mech.statistics(draw(runs * per, rng))
        if per > 1:
            st = {k: v.reshape(runs, per).mean(axis=1) for k, v in st.items()}
        return st

    st_x, st_y = collect(mech.draw_x), collect(mech.draw_y)
    res = _statistical_test(st_x, st_y, pair, runs=runs, confidence=confidence, delta=delta)
    if sampler == "chain" and per == 1:
        res.update(_visited_range(st_x["log-ratio"], st_y["log-ratio"]))
        res["mixing"] = dict(mech.chains.mixing)
    return res


def _visited_range(gx: np.ndarray, gy: np.ndarray) -> dict:
    """The range of ``g = log p(x|theta) - log p(y|theta)`` over the parameter points both
    datasets' chains visited.

    Every visited point lies in the truncation region, and the certificate bounds the
    oscillation ``sup g - inf g`` over that region by the per-draw epsilon (``docs/theory/
    oscillation.md``), so a range above the claim refutes the certificate with parameter points
    as the witness, however well or badly the chains mixed."""
    g = np.concatenate([np.asarray(gx, float), np.asarray(gy, float)])
    g = g[np.isfinite(g)]
    if g.size == 0:
        return {}
    return {"oscillation": float(g.max() - g.min()), "g_max": float(g.max()), "g_min": float(g.min()), "visited": int(g.size)}


def _statistical_test(st_x: dict, st_y: dict, pair, *, runs: int, confidence: float, delta: float) -> dict:
    """Choose a statistic and event on the first half of the runs, bound epsilon from below on
    the second half (Clopper-Pearson); ``st_x``, ``st_y``: statistic name -> values per run."""
    label, x, change, y = pair
    alpha = (1.0 - confidence) / 2.0  # one for each of the two Clopper-Pearson bounds
    half = runs // 2
    choice = None
    for name in st_x:  # choose the statistic, threshold, side and direction on the first half
        found, _ = _best_event(st_x[name][:half], st_y[name][:half], alpha, delta)
        if found is not None and (choice is None or found[0] > choice[0]):
            choice = (found[0], name, *found[2:])
    if choice is None:
        raise AuditError("no usable statistic: every released value is non-finite")
    _, name, t, side, num = choice
    tx, ty = st_x[name][half:], st_y[name][half:]
    with np.errstate(invalid="ignore"):
        kx = int(np.sum(tx <= t if side == "<=" else tx > t))
        ky = int(np.sum(ty <= t if side == "<=" else ty > t))
    n2 = len(tx)
    k1, k2 = (kx, ky) if num == "x" else (ky, kx)
    lower = _log_cp_ratio(k1, n2, k2, n2, alpha, delta)
    est = math.log(k1 / n2) - math.log(k2 / n2) if k1 > 0 and k2 > 0 else (math.inf if k1 > 0 else -math.inf)
    power = _log_cp_ratio(n2, n2, 0, n2, alpha, delta)
    _, pts = _best_event(tx, ty, alpha, delta)
    ts = np.array(sorted(pts))
    curve = {
        "statistic": name,
        "threshold": ts,
        "lower": np.array([pts[t][0] for t in ts]),
        "estimate": np.clip(np.array([pts[t][1] for t in ts]), -50, 50),
    }
    event = {
        "statistic": name, "threshold": t, "side": side, "numerator": num,
        "count_numerator": k1, "count_denominator": k2, "test_runs": n2,
    }
    witness = Witness(_freeze(x), _freeze(y), change, float(est), None, event, label)
    return {"measured": float(lower), "estimate": float(est), "power": float(power), "witness": witness,
            "curve": curve, "pairs": 1}


# =========================================================================== entry point
def _pairs_from_search(space: _DataSpace, bases):
    for label, x in bases:
        for change, new in space.changes(x):
            yield label, x, change, space.apply(x, new)


def _given_pairs(space: _DataSpace, pairs):
    out = []
    for p in pairs:
        if not (isinstance(p, (tuple, list)) and len(p) == 2):
            raise AuditError("pairs= must be a sequence of (x, y) dataset pairs, each a dict of container -> array")
        x, y = space.validate(p[0]), space.validate(p[1])
        out.append(("given", x, space.describe_pair(x, y), y))
    return out


def _heuristic_pair(space: _DataSpace):
    """Without a density to search with: all rows at one extreme record, one unit at another."""
    recs = space.record_cands
    x = space._cast({c: np.broadcast_to(recs[0][c], space.current[c].shape).copy() for c in space.names})
    change, new = next(iter(space.changes(x)))
    best = None
    for ch, nw in space.changes(x):
        dist = sum(float(np.sum(np.abs(np.asarray(v, float) - x[c][rows].astype(float)))) for c, (rows, v) in nw.items())
        if best is None or dist > best[0]:
            best = (dist, ch, nw)
    _, change, new = best
    return ("constant", x, change, space.apply(x, new))


def audit(
    private_model,
    *,
    method: str = "auto",
    pairs: Sequence[tuple[Mapping[str, Any], Mapping[str, Any]]] | None = None,
    include_data: bool = True,
    confidence: float = 0.95,
    runs: int | None = None,
    sampler: str = "auto",
    release: str = "draw",
    random_seed: int | None = 0,
    max_bases: int = 400,
    max_pairs: int = 50_000,
    groups: int = 4,
    levels: int = 9,
    random_bases: int = 4,
    tolerance: float = 1e-6,
    mcmc_kwargs: Mapping[str, Any] | None = None,
) -> AuditResult:
    """Audit a private model's privacy claim; see :mod:`pymc_dp.auditing` and ``docs/audits.md``.

    Parameters
    ----------
    private_model : PrivateModel or Mechanism
        What to audit: its certificate's per-draw epsilon, unit, domains and truncation. A
        :class:`~pymc_dp.mechanisms.base.Mechanism` (e.g. :func:`pymc_dp.laplace_updates`) is
        audited statistically: its release's epsilon against runs of its noise on the pair of
        neighbours the search finds most distinguishable (:meth:`Mechanism.audit_score`), with
        its exact output log-ratio (:meth:`Mechanism.audit_log_ratio`) as the statistic.
    method : {"auto", "exact", "numerical", "statistical"}
        ``"auto"``: exact when the model has an exact (conjugate) sampler, else numerical when it
        has at most two free scalar parameters, else statistical.
    pairs : sequence of (x, y), optional
        Neighbouring datasets (dicts of private container -> array) to audit instead of the
        search; the statistical method uses the first. By default the exact and numerical methods
        search, and the statistical one runs on the worst pair a search finds (or, when no search
        is possible, on a heuristic pair of extreme datasets).
    include_data : bool
        Whether the search includes the private data as a base dataset. With False the audit
        reads only public information and synthetic datasets.
    confidence : float
        Statistical: the confidence of the Clopper-Pearson lower bound.
    runs : int, optional
        Statistical: runs of the mechanism per dataset (default 100_000 with an exact or grid
        sampler, 40 with MCMC).
    sampler : {"auto", "exact", "grid", "chain", "mcmc"}
        Statistical: how the mechanism is run. ``"exact"``: the exact conjugate sampler (what
        ``sample()`` releases); ``"grid"``: draws from the numerical posterior of the truncated
        model on the audit grid (tests the rule and the truncation, not a sampler); ``"chain"``
        (the default where there is neither an exact sampler nor a grid): thinned draws of long
        MCMC chains on the truncated posterior of each dataset (tests the rule, the lift and the
        truncation); ``"mcmc"``: ``sample(method="mcmc")`` itself, one released draw per run.
    release : {"draw", "full"}
        Statistical: audit one draw against the per-draw epsilon (default), or a statistic (the
        mean) of a whole release of ``draws`` draws against the release's total epsilon.
    random_seed : int, optional
        Seeds the search's random datasets and the statistical runs.
    max_bases, max_pairs, groups, levels, random_bases : int
        Search size: base datasets (fewer when they would give more than about ``max_pairs``
        neighbouring pairs); groups of identical rows (or users) changed per base dataset (the
        first and last row of each group); values per interval domain; random base datasets of
        each kind.
    tolerance : float
        Relative slack on the claim for exact and numerical verdicts (the truncation itself is
        solved to a relative 1e-9).
    mcmc_kwargs : dict, optional
        Passed to ``sample(method="mcmc")`` for the MCMC sampler (e.g. ``tune``, ``chains``), or
        to ``pm.sample`` for the chain sampler (``tune``, ``chains``, ``thin`` too).

    Returns
    -------
    AuditResult
    """
    t0 = time.perf_counter()
    if method not in METHODS:
        raise AuditError(f"method={method!r}; use one of {list(METHODS)}")
    if release not in ("draw", "full"):
        raise AuditError(f"release={release!r}; use 'draw' or 'full'")
    if not 0.0 < confidence < 1.0:
        raise AuditError(f"confidence={confidence!r} must be in (0, 1)")
    from pymc_dp.mechanisms.base import Mechanism
    from pymc_dp.mechanisms.map import PrivateMAP

    if isinstance(private_model, PrivateMAP):
        # the exponential mechanism is a tempered truncated posterior: every posterior-sampling
        # audit applies, with the private log-likelihood scaled by beta
        private_model = _TemperedView(private_model)
    if isinstance(private_model, Mechanism):
        return _audit_mechanism(
            private_model, method=method, pairs=pairs, include_data=include_data, confidence=confidence,
            runs=runs, release=release, random_seed=random_seed, max_bases=max_bases, max_pairs=max_pairs,
            groups=groups, levels=levels, random_bases=random_bases, t0=t0,
        )
    cert = private_model.certificate
    rng = np.random.default_rng(random_seed)
    space = _DataSpace(
        private_model.model, private_model.domains, private_model.unit,
        [c for f in private_model.factors for c in f.reads], include_data=include_data, levels=levels, max_bases=max_bases,
        groups=groups, n_random=random_bases, rng=rng,
    )
    space.max_bases = min(max_bases, max(8, max_pairs // space.changes_per_base()))
    reads_private = include_data or pairs is not None

    gm = None
    has_plan = private_model.conjugate_plan is not None
    if method == "auto":
        if has_plan:
            method = "exact"
        else:
            try:
                gm = _GridModel(private_model, space)
                method = "numerical"
            except AuditError:
                method = "statistical"
    if method != "statistical" and release != "draw":
        raise AuditError("release='full' is for the statistical method; exact and numerical audits measure one draw")
    given = _given_pairs(space, pairs) if pairs is not None else None
    claimed = cert.epsilon_per_draw if release == "draw" else cert.epsilon
    notes = []
    res: dict = {}
    bases = None
    if method == "exact":
        bases = space.bases() if given is None else []
        res = _audit_exact(private_model, space, given if given is not None else _pairs_from_search(space, bases))
    elif method == "numerical":
        gm = gm or _GridModel(private_model, space)
        bases = space.bases() if given is None else []
        res = _audit_numerical(private_model, space, bases, given, gm)
        notes += list(res.get("notes", ()))
    else:
        if sampler == "auto":
            if has_plan:
                sampler = "exact"
            else:
                try:
                    gm = gm or _GridModel(private_model, space)
                    sampler = "grid"
                except AuditError:
                    sampler = "chain"
        if sampler not in ("exact", "grid", "chain", "mcmc"):
            raise AuditError(f"sampler={sampler!r}; use 'auto', 'exact', 'grid', 'chain' or 'mcmc'")
        if sampler == "exact" and not has_plan:
            raise AuditError(f"sampler='exact' needs a conjugate model: {private_model.exact_unavailable}")
        if sampler == "grid":
            gm = gm or _GridModel(private_model, space)
        runs = int(runs if runs is not None else {"mcmc": 40, "chain": 4000}.get(sampler, 100_000))
        if runs < 4:
            raise AuditError("runs must be at least 4 (half choose the event, half test it)")
        alpha = (1.0 - confidence) / 2.0
        if given is not None:
            pair = given[0]
        elif has_plan or gm is not None:
            # candidates: the worst pair of every base dataset of a search; the pair is the one a
            # pilot predicts to give the largest lower bound (the supremum of the log-ratio is
            # often reached where neither posterior has mass, where no sampling can see it)
            b = space.bases()
            if has_plan:
                found = _audit_exact(private_model, space, _pairs_from_search(space, b))
            else:
                found = _audit_numerical(private_model, space, b[: min(max_bases, 64)], None, gm)
            chosen = _choose_pair(private_model, found["candidates"], sampler=sampler, gm=gm, runs=runs, alpha=alpha, rng=rng)
            pair = chosen[1]
            notes.append(
                f"pair: of the worst pairs of {len(found['candidates'])} base datasets ({'exact' if has_plan else 'numerical'} "
                f"search, largest log-ratio {found['measured']:.4g}), the one a pilot run predicts to be most "
                f"detectable (predicted lower bound {chosen[0]:.3g})"
            )
        else:
            pair = _heuristic_pair(space)
            notes.append("pair: heuristic (all rows at one extreme record, one unit changed to the farthest record)")
        res = _audit_statistical(
            private_model, pair, runs=runs, confidence=confidence, rng=rng, sampler=sampler,
            release=release, gm=gm, mcmc_kwargs=mcmc_kwargs,
        )
        if sampler == "mcmc":
            notes.append("MCMC runs: the audit measures the MCMC release itself, approximation error included")
        if sampler == "chain":
            notes.append("chain sampler: thinned long MCMC chains on the truncated posterior; tests the rule, the lift and the truncation, not a sampler's mixing")
        if sampler == "grid":
            notes.append("grid sampler: draws from the numerical truncated posterior; tests the rule and the truncation, not a sampler")

    measured = res["measured"]
    error = float(res.get("error", 0.0))
    slack = tolerance * claimed + 1e-12
    if method == "statistical":
        verdict = _statistical_verdict(measured, res["power"], claimed, runs, notes)
        measured_by = "event"
        if "oscillation" in res:
            verdict, measured, measured_by = _chain_verdict(verdict, measured, res, claimed, slack, notes)
    else:
        measured_by = "search"
        if measured - error > claimed + slack:
            verdict = "fail"
        elif measured + error <= claimed + slack:
            verdict = "pass"
        else:
            verdict = "inconclusive"
            notes.append("the numerical error is larger than the distance to the claim")
    return AuditResult(
        method=method,
        verdict=verdict,
        claimed=float(claimed),
        epsilon_per_draw=float(cert.epsilon_per_draw),
        epsilon_total=float(cert.epsilon),
        delta=float(cert.delta),
        draws=int(cert.draws),
        release=release,
        unit=describe_unit(private_model.unit),
        measured=float(measured),
        estimate=res.get("estimate"),
        error=error,
        tolerance=float(tolerance),
        confidence=float(confidence) if method == "statistical" else None,
        power=res.get("power"),
        pairs=int(res.get("pairs", 0)),
        bases=len(given) if given is not None else (len(bases) if bases is not None else 0),
        runs=runs if method == "statistical" else None,
        sampler=sampler if method == "statistical" else None,
        witness=res.get("witness"),
        reads_private_data=bool(reads_private),
        seconds=float(time.perf_counter() - t0),
        notes=tuple(notes),
        curve=res.get("curve", {}),
        measured_by=measured_by,
    )


def _chain_verdict(verdict, measured, res, claimed, slack, notes):
    """The chain sampler's verdict: the event test where the chains mixed, and always the range of
    the log-likelihood ratio over the visited points (:func:`_visited_range`).

    Where the chains did not mix (R-hat or divergences above :data:`RHAT_MAX`,
    :data:`DIVERGENT_MAX`), their event frequencies are not draws of the truncated posterior: a
    difference between the two datasets' frequencies may be the sampler's, not the mechanism's
    (a centred hierarchical funnel traps chains for hundreds of steps). The event test is then
    set aside and the verdict rests on the range, which needs no mixing: every visited point is
    in the truncation region. ``measured`` is then that range, a lower bound on the oscillation
    the certificate bounds. Returns ``(verdict, measured, measured_by)``."""
    osc = res["oscillation"]
    span = f"{osc:.4g} over {res['visited']} visited parameter points"
    if osc > claimed + slack:
        notes.append(
            f"the log-likelihood ratio ranges over {span} (from {res['g_min']:.4g} to {res['g_max']:.4g}): "
            "above the claimed bound on its oscillation, whatever the chains' mixing"
        )
        res["witness"] = dataclasses.replace(
            res["witness"], log_ratio=float(osc),
            event={"statistic": "range of log p(x|theta) - log p(y|theta) over visited points",
                   "max": res["g_max"], "min": res["g_min"], "visited": res["visited"]},
        )
        return "fail", osc, "range"
    bad = {k: m for k, m in res.get("mixing", {}).items() if not m["mixed"]}
    if not bad:
        notes.append(f"the log-likelihood ratio ranges over {span}, within the claim")
        return verdict, measured, "event"
    why = "; ".join(
        f"dataset {k}: worst R-hat {m['rhat']:.3g} ({m['worst']}), {100 * m['divergent']:.2g}% divergent transitions"
        for k, m in bad.items()
    )
    notes.append(
        f"the chains did not mix ({why}): the event test (lower bound {measured:.4g}) is set aside, since "
        f"a difference between non-mixing chains is not evidence of a privacy loss; the verdict rests on "
        f"the range of the log-likelihood ratio, {span}, within the claim"
    )
    return "pass", osc, "range"


# =========================================================================== mechanisms
def _statistical_verdict(measured: float, power: float, claimed: float, runs: int, notes: list) -> str:
    """"fail" when the lower bound exceeds the claim; "inconclusive" when no outcome of these runs
    could have exceeded it (a pass would say nothing); else "pass"."""
    if measured > claimed:
        return "fail"
    if power <= claimed:
        notes.append(f"{runs} runs can certify at most epsilon {power:.3g} <= the claim: more runs are needed")
        return "inconclusive"
    return "pass"


def _audit_mechanism(mech, *, method, pairs, include_data, confidence, runs, release, random_seed, max_bases,
                     max_pairs, groups, levels, random_bases, t0) -> AuditResult:
    """Statistical audit of a :class:`~pymc_dp.mechanisms.base.Mechanism` (one release)."""
    if method not in ("auto", "statistical"):
        raise AuditError(f"method={method!r}: a noise mechanism ({mech.name}) is audited with method='statistical'")
    if release != "draw":
        raise AuditError("release='full' is for posterior sampling; a mechanism's release is audited as one output")
    rng = np.random.default_rng(random_seed)
    space = _DataSpace(mech.model, mech.domains, mech.unit, mech.reads, include_data=include_data, levels=levels,
                       max_bases=max_bases, groups=groups, n_random=random_bases, rng=rng)
    space.max_bases = min(max_bases, max(8, max_pairs // space.changes_per_base()))
    notes = []
    searched = 0
    bases = []
    if pairs is not None:
        pair = _given_pairs(space, pairs)[0]
    else:
        bases = space.bases()
        best = None
        for cand in _pairs_from_search(space, bases):
            score = mech.audit_score(cand[1], cand[3])
            if score is None:
                break
            searched += 1
            if best is None or score > best[0]:
                best = (score, cand)
            if searched >= max_pairs:
                break
        if best is None:
            pair = _heuristic_pair(space)
            notes.append("pair: heuristic (all rows at one extreme record, one unit changed to the farthest record)")
        else:
            pair = best[1]
            notes.append(f"pair: the most distinguishable of {searched} neighbouring pairs (score {best[0]:.4g})")
    runs = int(runs if runs is not None else 100_000)
    if runs < 4:
        raise AuditError("runs must be at least 4 (half choose the event, half test it)")
    _, x, _, y = pair
    ox, oy = np.asarray(mech.audit_runs(x, runs, rng), float), np.asarray(mech.audit_runs(y, runs, rng), float)
    ox, oy = ox.reshape(runs, -1), oy.reshape(runs, -1)
    st_x, st_y = {}, {}
    lr = mech.audit_log_ratio(x, y)
    if lr is not None:
        st_x["log-ratio"], st_y["log-ratio"] = np.asarray(lr(ox), float), np.asarray(lr(oy), float)
    else:
        for j in range(min(ox.shape[1], 64)):
            st_x[f"output[{j}]"], st_y[f"output[{j}]"] = ox[:, j], oy[:, j]
    # a Gaussian release is (epsilon, delta)-DP: P_x(E) <= e^eps P_y(E) + delta
    res = _statistical_test(st_x, st_y, pair, runs=runs, confidence=confidence, delta=float(getattr(mech, "delta", 0.0)))
    claimed = float(mech.epsilon)
    verdict = _statistical_verdict(res["measured"], res["power"], claimed, runs, notes)
    notes.append(f"mechanism {mech.name}: one release's noisy output (before post-processing) is audited")
    return AuditResult(
        method="statistical", verdict=verdict, claimed=claimed, epsilon_per_draw=claimed, epsilon_total=claimed,
        delta=float(mech.delta), draws=1, release="draw", unit=describe_unit(mech.unit),
        measured=float(res["measured"]), estimate=res.get("estimate"), error=0.0, tolerance=0.0,
        confidence=float(confidence), power=res.get("power"), pairs=max(searched, 1), bases=len(bases),
        runs=runs, sampler=mech.name, witness=res.get("witness"),
        reads_private_data=bool(include_data or pairs is not None), seconds=float(time.perf_counter() - t0),
        notes=tuple(notes), curve=res.get("curve", {}), measured_by="event",
    )
