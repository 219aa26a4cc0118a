"""The exact (epsilon, delta) audit of an untruncated conjugate posterior draw: hockey-stick divergences.

For a mechanism with an ``(epsilon_per_draw, delta_per_draw)`` claim for one draw (the
stochastic-Lipschitz mode, :mod:`pymc_dp.mechanisms.stochastic`), the audit computes for
neighbouring datasets ``x, y`` the exact hockey-stick divergence

.. math:: H_{e^\\varepsilon}(\\xi(\\cdot|x) \\,\\|\\, \\xi(\\cdot|y)) = \\sup_A \\xi(A|x) - e^{\\varepsilon} \\xi(A|y)

at the claimed epsilon (the mechanism's ``audit_profile``: closed form per conjugate family), and
fails when the largest one found exceeds the claimed delta. Neighbours are built record by
record (one record of a base dataset replaced by every value of a grid of the domain), never
through the sufficient statistic the claim used, so the audit does not share that step.
As every search, "pass" means nothing above the claim was found.
"""

from __future__ import annotations

import time

import numpy as np

from pymc_dp.audits.result import AuditError, AuditResult, Witness, frozen_copy
from pymc_dp.units import describe_unit


def _values(domain, levels: int) -> np.ndarray:
    lo, hi = float(domain.lo), float(domain.hi)
    if hasattr(domain, "lo_f"):  # Integers: every value when few
        vals = np.arange(int(lo), int(hi) + 1, dtype=float)
        return vals if len(vals) <= levels else np.unique(np.round(np.linspace(lo, hi, levels)))
    return np.linspace(lo, hi, levels)


def _search_pairs(mech, levels: int, max_bases: int):
    name = mech.reads[0]
    shape = np.shape(mech.private_data.values[name])
    n = int(np.prod(shape))
    vals = _values(mech.domains[name], levels)
    counts = np.unique(np.round(np.linspace(0, n, min(n + 1, max_bases))).astype(int))
    for k in counts:  # k records at each of two values (lo, hi, and every pair of grid values)
        for a in (vals[0], vals[-1]):
            for b in vals:
                base = np.full(n, a)
                base[:k] = b
                for i in {0, n - 1}:
                    for v in vals:
                        if v != base[i]:
                            y = base.copy()
                            y[i] = v
                            yield f"{k} records at {b:g}, the rest at {a:g}; record {i} -> {v:g}", base.reshape(shape), y.reshape(shape)


def audit_hockey(mech, *, pairs=None, include_data: bool = True, tolerance: float = 1e-9, levels: int = 9,
                 max_bases: int = 41) -> AuditResult:
    """Exact (epsilon, delta) audit of one draw of ``mech`` (see the module docstring)."""
    t0 = time.perf_counter()
    eps, claimed = float(mech.epsilon_per_draw), float(mech.delta_per_draw)
    name = mech.reads[0]
    if pairs is not None:
        cands = [("given", {name: np.asarray(x[name], float)}, {name: np.asarray(y[name], float)}) for x, y in pairs]
    else:
        cands = [(lab, {name: x}, {name: y}) for lab, x, y in _search_pairs(mech, levels, max_bases)]
        if include_data:
            x = np.asarray(mech.private_data.values[name], float)
            flat = x.ravel()
            for v in _values(mech.domains[name], levels):
                for i in {0, flat.size - 1}:
                    y = flat.copy()
                    y[i] = v
                    cands.append((f"the data; record {i} -> {v:g}", {name: x}, {name: y.reshape(x.shape)}))
    if not cands:
        raise AuditError("no neighbouring pair to audit")
    best, count = None, 0
    for lab, x, y in cands:
        for a, b in ((x, y), (y, x)):
            h = mech.audit_profile(a, b, eps)
            count += 1
            if best is None or h > best[0]:
                best = (h, lab, a, b)
    measured, lab, x, y = best
    verdict = "fail" if measured > claimed * (1 + tolerance) + 1e-15 else "pass"
    notes = (f"(epsilon, delta) audit: measured and claimed are deltas of one draw at epsilon_per_draw = {eps:.6g} "
             "(the exact hockey-stick divergence of the two posteriors, closed form)",)
    witness = Witness(frozen_copy(x), frozen_copy(y), None, float(measured), {}, None, lab)
    return AuditResult(
        method="exact", verdict=verdict, claimed=claimed, epsilon_per_draw=eps, epsilon_total=float(mech.epsilon),
        delta=float(mech.delta), draws=int(mech.draws), release="draw", unit=describe_unit(mech.unit),
        measured=float(measured), estimate=None, error=0.0, tolerance=float(tolerance), confidence=None, power=None,
        pairs=count, bases=len(cands), runs=None, sampler=None, witness=witness,
        reads_private_data=bool(include_data or pairs is not None), seconds=float(time.perf_counter() - t0),
        notes=notes, measured_by="search",
    )


def audit_metric(mech, *, pairs=None, include_data: bool = True, tolerance: float = 1e-9, levels: int = 9,
                 max_bases: int = 41) -> AuditResult:
    """Exact metric-DP audit of one draw: the largest ``sup_theta |ln xi(theta|x) - ln xi(theta|y)| / rho(x, y)``
    over neighbouring pairs (``mech.audit_metric``: closed form), against ``epsilon_per_draw`` per unit of rho."""
    t0 = time.perf_counter()
    name = mech.reads[0]
    if pairs is not None:
        cands = [("given", {name: np.asarray(x[name], float)}, {name: np.asarray(y[name], float)}) for x, y in pairs]
    else:
        cands = [(lab, {name: x}, {name: y}) for lab, x, y in _search_pairs(mech, levels, max_bases)]
    best, count = None, 0
    for lab, x, y in cands:
        rho = float(np.sum(np.abs(x[name] - y[name])))
        if rho == 0:
            continue
        value = mech.audit_metric(x, y) / rho
        count += 1
        if best is None or value > best[0]:
            best = (value, lab, x, y)
    if best is None:
        raise AuditError("no pair of datasets at positive distance")
    measured, lab, x, y = best
    claimed = float(mech.epsilon_per_draw)
    verdict = "fail" if measured > claimed * (1 + tolerance) + 1e-12 else "pass"
    return AuditResult(
        method="exact", verdict=verdict, claimed=claimed, epsilon_per_draw=claimed, epsilon_total=float(mech.epsilon),
        delta=0.0, draws=int(mech.draws), release="draw", unit=describe_unit(mech.unit), measured=float(measured),
        estimate=None, error=0.0, tolerance=float(tolerance), confidence=None, power=None, pairs=count, bases=len(cands),
        runs=None, sampler=None, witness=Witness(frozen_copy(x), frozen_copy(y), None, float(measured), {}, None, lab),
        reads_private_data=pairs is not None, seconds=float(time.perf_counter() - t0),
        notes=("metric DP audit: measured and claimed are epsilons per unit of rho = sum |x_i - x'_i| for one draw",),
        measured_by="search",
    )
