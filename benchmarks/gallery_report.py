"""The PyMC example gallery through pymc_dp: certificate, cost and utility (the table of docs/gallery.md).

For every model of ``examples/gallery`` (gallery sizes: n = 300 rows, the AR series 500, radon's
919 households) at total epsilon 10 with ``unit="record"``:

* certify with 10 draws (epsilon_0 = 1) and with 1 draw (epsilon_0 = 10): the certified epsilon
  per draw, the truncation, the prior mass kept (and how it was computed), the wall time to
  certify; or the refusal and its reason;
* the non-private posterior (``pm.sample`` on the same model, 4 chains x 1000 draws) and the
  released draws: for every scalar free parameter, how many posterior sds the released mean lies
  from the posterior mean; the table gives the median and the largest over the parameters;
* the statistical audit (chain sampler, 400 runs) of the 10-draw certificate.

Run from the repository root::

    python benchmarks/gallery_report.py            # every model; results/gallery{.json,_table.md}
    python benchmarks/gallery_report.py radon ...  # some models; prints only

It runs for about an hour on 2 cores (most of it MCMC). Nothing is charged (``ledger=None``).
"""

from __future__ import annotations

import json
import logging
import os
import sys
import time
import warnings

import numpy as np

sys.path.insert(0, os.path.abspath(os.path.join(os.path.dirname(__file__), "..")))

import pymc as pm  # noqa: E402

import pymc_dp  # noqa: E402
from examples.gallery.try_all import cases  # noqa: E402  (label, module, builder, n) per model
from pymc_dp.sampling import rhat_by_variable  # noqa: E402

EPSILON = 10.0
RESULTS = os.path.join(os.path.dirname(__file__), "results", "gallery.json")
#: the table docs/gallery.md quotes (its prose reads the numbers; paste a new table there)
TABLE = os.path.join(os.path.dirname(__file__), "results", "gallery_table.md")


def flat_params(dataset, names):
    out = {}
    for name in names:
        v = np.asarray(dataset[name].values, float)
        v = v.reshape(v.shape[0] * v.shape[1], -1)
        for j in range(v.shape[1]):
            out[name if v.shape[1] == 1 else f"{name}[{j}]"] = v[:, j]
    return out


def gaps_by_parameter(released, reference):
    """How many reference sds each released mean lies from the reference mean, by parameter
    (empty when the non-private posterior did not converge: no distance is measured)."""
    if reference is None:
        return {}
    return {key: float(abs(np.mean(released[key]) - np.mean(ref)) / np.std(ref))
            for key, ref in reference.items() if key in released and np.std(ref) > 0}


def sds_apart(released, reference):
    gaps = list(gaps_by_parameter(released, reference).values())
    return (float(np.median(gaps)), float(np.max(gaps))) if gaps else (float("nan"), float("nan"))


def latest_rows(paths) -> dict:
    """The JSON rows printed by earlier runs (``--from LOG ...``), the last row of each model
    winning (a full run, then models run again)."""
    latest = {}
    for path in paths:
        for line in open(path):
            if line.startswith("{"):
                row = json.loads(line)
                latest[row["model"]] = row
    return latest


#: the reference posterior is used only when every parameter's rank-normalised R-hat is below this
RHAT_MAX = 1.01
#: how the table says the reference was drawn (after its R-hat)
REFERENCE_HOW = {"pm.sample": "", "pm.sample, 3000 tuning steps, target_accept 0.95": ", longer tuning",
                 "pm.sample from the MAP, dense mass matrix": ", from the MAP"}


def reference_posterior(model, free):
    """The non-private posterior every distance is measured against, and how it was sampled.

    ``pm.sample`` (4 chains x 1000 draws, PyMC's defaults). Where it does not converge (largest
    rank-normalised R-hat at or above :data:`RHAT_MAX`) it is sampled again with 3000 tuning
    steps and ``target_accept=0.95`` (a hierarchy's funnel), then from the MAP with a dense mass
    matrix (in the logistic regression on uncentred covariates, hours up to 99 and age² up to
    81, chains started by jitter from the prior sit where the likelihood is flat: before
    2026-11-26 the table measured distances against such a reference, R-hat 2.3-3.2). The first
    attempt that converges is the reference. Where none does, the attempt with the smallest
    R-hat is reported, as not converged, and no distance is measured against it.
    """
    def draw(**kwargs):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            idata = pm.sample(model=model, draws=1000, chains=4, random_seed=0, progressbar=False,
                              compute_convergence_checks=False, **kwargs)
        return idata, max(rhat_by_variable(idata.posterior, free).values(), default=float("nan"))

    def from_map():
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            start = pm.find_MAP(model=model, progressbar=False)
        return draw(initvals={name: start[name] for name in free}, init="adapt_full")

    attempts = [("pm.sample", draw),
                ("pm.sample, 3000 tuning steps, target_accept 0.95", lambda: draw(tune=3000, target_accept=0.95)),
                ("pm.sample from the MAP, dense mass matrix", from_map)]
    best = None
    for how, attempt in attempts:
        idata, rhat = attempt()
        if best is None or rhat < best[2]:
            best = (how, idata, rhat)
        if rhat < RHAT_MAX:
            break
    how, idata, rhat = best
    info = {"rhat": round(rhat, 4), "how": how, "converged": rhat < RHAT_MAX}
    return (flat_params(idata.posterior, free) if info["converged"] else None), info


def certify(mod, model, draws):
    t = time.perf_counter()
    try:
        pmod = pymc_dp.make_private(model, epsilon=EPSILON, draws=draws, data=mod.DOMAINS, public=mod.PUBLIC, ledger=None)
        return pmod, None, time.perf_counter() - t
    except pymc_dp.PrivacyError as exc:
        return None, f"{type(exc).__name__}: {exc}", time.perf_counter() - t


def run_case(label, mod, builder, n):
    row = {"model": label, "title": mod.TITLE, "n": n}
    model = builder(mod.make_data(n=n))
    free = [rv.name for rv in model.free_RVs]
    reference = None
    for draws in (10, 1):
        pmod, refused, seconds = certify(mod, model, draws)
        key = f"draws={draws}"
        entry = {"certify_seconds": round(seconds, 2)}
        if refused:
            entry["refused"] = refused
            row[key] = entry
            continue
        cert = pmod.certificate
        entry.update(
            epsilon_per_draw=cert.epsilon_per_draw,
            truncation=[t for f in cert.factors for t in f.truncation],
            solvers=sorted({f.solver for f in cert.factors}),
            prior_mass_kept=cert.prior_mass_kept,
            prior_mass_method=cert.prior_mass_method,
        )
        if reference is None:
            reference, row["reference"] = reference_posterior(model, free)
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                released = pmod.sample(chains=1, random_seed=1, progressbar=False)
            names = [n_ for n_ in free if n_ in released.posterior]
            flat = flat_params(released.posterior, names)
            entry["sds_apart"] = sds_apart(flat, reference)
            entry["sds_apart_by_parameter"] = {k: round(v, 3) for k, v in gaps_by_parameter(flat, reference).items()}
        except pymc_dp.PrivacyError as exc:
            entry["release_refused"] = f"{type(exc).__name__}: {str(exc)[:200]}"
        if draws == 10 and "release_refused" not in entry:
            t = time.perf_counter()
            # a module may give a pair inside its model's support (rat tumours: y <= n)
            pairs = mod.audit_pairs(model) if hasattr(mod, "audit_pairs") else None
            res = pymc_dp.audit(pmod, runs=400, random_seed=0, pairs=pairs)
            entry["audit"] = {"method": res.method, "sampler": res.sampler, "verdict": res.verdict,
                              "measured": res.measured, "claimed": res.claimed,
                              "seconds": round(time.perf_counter() - t, 1)}
        row[key] = entry
    return row


def fmt(x, digits=3):
    return "-" if x is None else f"{x:.{digits}g}"


def markdown(rows) -> str:
    lines = [
        "| model | n | ε/draw (10 draws) | solver | prior mass kept | certify s | sds apart, 10 draws (median / max) | sds apart, 1 draw | audit | reference R-hat |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        a, b = r.get("draws=10", {}), r.get("draws=1", {})
        ref = r.get("reference")
        rhat = "" if not ref else (f"{ref['rhat']:.3f}" + REFERENCE_HOW[ref["how"]]
                                   + ("" if ref["converged"] else ": not converged, no distance"))
        if "refused" in a:
            first = a["refused"].split(". To do")[0]
            lines.append(f"| {r['model']} | {r['n'] or 919} | refused | | | {a['certify_seconds']} | {first[:160]}… | "
                         f"{'certifies (ε₀ = 10): ' + fmt(b.get('sds_apart', [None])[0]) + ' / ' + fmt(b.get('sds_apart', [None, None])[1]) if 'refused' not in b else 'refused'} | | {rhat} |")
            continue
        sa = a.get("sds_apart")
        sb = b.get("sds_apart")
        aud = a.get("audit")
        lines.append(
            f"| {r['model']} | {r['n'] or 919} | {fmt(a['epsilon_per_draw'])} | {', '.join(a['solvers'])} | "
            f"{fmt(a['prior_mass_kept'])} ({a['prior_mass_method'].split(':')[0][:40]}) | {a['certify_seconds']} | "
            f"{(fmt(sa[0]) + ' / ' + fmt(sa[1])) if sa else a.get('release_refused', '')[:60]} | "
            f"{(fmt(sb[0]) + ' / ' + fmt(sb[1])) if sb else b.get('refused', b.get('release_refused', ''))[:60]} | "
            f"{(aud['verdict'] + ' (' + fmt(aud['measured']) + (' > ' if aud['verdict'] == 'fail' else ' ≤ ') + fmt(aud['claimed']) + ')') if aud else ''} | {rhat} |"
        )
    lines.append("")
    lines.append("Truncations (10 draws):")
    lines.append("")
    for r in rows:
        a = r.get("draws=10", {})
        if "truncation" in a:
            lines.append(f"* **{r['model']}**: " + "; ".join(a["truncation"]))
    return "\n".join(lines)


def run_cases(run_case, chosen) -> list[dict]:
    """``run_case(label, module, builder, n)`` for every gallery case (those ``chosen`` when it
    is not empty: labels or their first part), each row timed and printed as JSON when done."""
    logging.getLogger("pymc").setLevel(logging.ERROR)
    rows = []
    for label, mod, builder, n in cases():
        if chosen and label not in chosen and label.split(".")[0] not in chosen:
            continue
        t = time.perf_counter()
        row = run_case(label, mod, builder, n)
        row["seconds"] = round(time.perf_counter() - t, 1)
        rows.append(row)
        print(json.dumps(row, default=str), flush=True)
    return rows


def main(argv):
    """``gallery_report.py [model ...]``: run (every model: write the results);
    ``gallery_report.py --from LOG ...``: write the results from the JSON rows earlier runs
    printed, the last row of each model winning (a full run, then models run again)."""
    if argv[:1] == ["--from"]:
        latest = latest_rows(argv[1:])
        order = [label for label, *_ in cases()]
        write([latest[label] for label in order if label in latest], final=set(order) <= set(latest))
        return
    chosen = set(argv)
    rows = run_cases(run_case, chosen)
    write(rows, final=not chosen)


def write(rows, final: bool) -> None:
    """Print the table; with every model, write results/gallery{.json,_table.md}."""
    table = markdown(rows)
    print(table)
    if final:
        os.makedirs(os.path.dirname(RESULTS), exist_ok=True)
        with open(RESULTS, "w") as fh:
            json.dump(rows, fh, indent=1, default=str)
        with open(TABLE, "w") as fh:
            fh.write(table + "\n")  # pasted into docs/gallery.md under its prose


if __name__ == "__main__":
    main(sys.argv[1:])
