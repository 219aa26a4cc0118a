"""Useful releases for every gallery model at its notebook's own n (issue 33, acceptance table).

For every model of ``examples/gallery`` at the size of its notebook (``mod.make_data()``'s
defaults, data seed 0: linear 200, robust 103, Poisson and negative binomial 4,000, radon 919,
ordinal 500, discrete choice 900, mixture 500, AR 5,000, censored 500, rat tumours 71 groups,
logistic 32,561), total epsilon in ``--epsilons`` (default 1, 3, 10), pure DP (delta = 0),
``--releases R`` releases (default 20) of ``--draws D`` draws (default 1) from each of two paths,
on the same data and with the same seeds:

* ``posterior``: ``pymc_dp.make_private(model, epsilon=..., draws=D, data=mod.DOMAINS,
  public=mod.PUBLIC, ledger=None)`` (posterior sampling on one region chosen from public facts);
* ``localized``: the same with ``path="localized"`` (localize, then sample);
* ``auto``: the same with ``path="auto"`` (the path chosen from public facts; the table names it;
  a noisy-statistics release draws 1000 post-processing draws, and its distance is their mean's).

With ``--preview K``, each cell also gets ``pymc_dp.preview`` on K simulated datasets (public;
nothing read from the data but its shapes): its median distance beside the measured one, and
their ratio (issue 33 asks the preview within a factor 2 of the measured median on every cell).

One release = certify (``make_private``, timed as *certify*) + ``sample(random_seed=100 + r,
chains=1, progressbar=False)`` (timed as *sample*; for ``localized`` this includes both stages
and stage 2's certificate, which is chosen from stage 1's released location). A refusal
(``pymc_dp.PrivacyError``, at certify or at sample) is recorded with its type and the first 200
characters of its message.

The non-private posterior, one per model: ``gallery_report.reference_posterior`` (NUTS, 4 chains
x 1000 draws, random_seed 0, with its fallbacks where R-hat >= 1.01; no distance is measured
against a reference that does not converge). Its mean and sd per parameter are stored in the
results file (a ``"kind": "reference"`` line), so that a resumed run measures against the same
reference.

Main parameters: *all scalar elements of every free random variable*, flattened as
``gallery_report.flat_params`` gives them (a vector RV ``beta`` of length 3 is ``beta[0]``,
``beta[1]``, ``beta[2]``), in the constrained space the model states them in; a parameter whose
reference sd is 0 is left out (as ``gallery_report.gaps_by_parameter`` does).

Per release: for every parameter, ``|released mean - posterior mean| / posterior sd`` (the
released mean over the release's D draws; ``gallery_report.sds_apart``'s formula); the release's
median and largest over the parameters. Per cell (model, epsilon, path):

* *within 2 sds*: the share of the cell's completed releases whose largest distance is <= 2;
* *median / max distance*: the median over the releases of the per-release median, and the
  median over the releases of the per-release largest;
* *coverage*: whether the released 90% central interval holds the non-private posterior mean.
  With D = 1 there is no interval in one release: the interval is that of the cell's R released
  draws pooled (5% and 95% quantiles, ``numpy.quantile``'s linear rule), per parameter, and the
  coverage is the share of parameters whose pooled interval holds the non-private mean (not
  defined with fewer than 2 releases). With D > 1: the 90% central interval of each release's own
  D draws, and the coverage is the share of (release, parameter) pairs whose interval holds it;
* wall time: certify and sample seconds, min / median / max over the cell's releases.

The private data are read only by ``pymc_dp`` and by the reference posterior (the script reads
the data's shapes: n). Seeds: data ``make_data(seed=0)``; reference ``random_seed=0``; release r
of every cell ``random_seed=100 + r``.

Resumable: one JSON line per release is appended to ``<out>.jsonl`` as it finishes; a re-run
skips every (model, epsilon, path, release) already there (a release that crashed with an error
other than a refusal is recorded but run again). ``<out>.md`` (a table per epsilon, the two paths
side by side with the ratio localized / posterior of their median distances) and ``<out>.json``
are written from every line of ``<out>.jsonl`` at the end of each run.

Run from the repository root::

    PYTHONPATH=. python benchmarks/gallery_utility.py                       # the full table (hours)
    PYTHONPATH=. python benchmarks/gallery_utility.py --models glm_linear rat_tumours \\
        --epsilons 10 --releases 1 --out benchmarks/results/gallery_utility_smoke --smoke
"""

from __future__ import annotations

import argparse
import datetime
import json
import logging
import math
import os
import platform
import shlex
import sys
import time
import traceback
import warnings
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from gallery_report import REFERENCE_HOW, flat_params, gaps_by_parameter, reference_posterior  # noqa: E402

import pymc_dp  # noqa: E402
from examples.gallery import MODELS  # noqa: E402
from examples.gallery.try_all import cases  # noqa: E402  (label, module, builder, n): the variants too

OUT = ROOT / "benchmarks" / "results" / "gallery_utility"
PATHS = ("posterior", "localized", "auto")
EPSILONS = (1.0, 3.0, 10.0)
DATA_SEED, RELEASE_SEED = 0, 100
#: the released interval whose coverage of the non-private mean is reported
LEVEL = 0.90
QUANTILES = ((1 - LEVEL) / 2, 1 - (1 - LEVEL) / 2)


def builders() -> dict:
    """label -> (module, builder): the 12 models (``build``) and the variants ``try_all`` names
    (``radon.varying_intercept_slope``, ...), each at its notebook's n (``try_all``'s n ignored)."""
    return {label: (mod, builder) for label, mod, builder, _ in cases()}


# ---------------------------------------------------------------------- reference
def reference_summary(model) -> dict:
    """The non-private posterior (``gallery_report.reference_posterior``) as mean and sd per
    parameter, with how it was drawn and how long it took."""
    free = [rv.name for rv in model.free_RVs]
    t = time.perf_counter()
    flat, info = reference_posterior(model, free)
    info = {**info, "seconds": round(time.perf_counter() - t, 1)}
    params = None if flat is None else {k: [float(np.mean(v)), float(np.std(v))] for k, v in flat.items()}
    return {"params": params, **info}


#: non-private posteriors another benchmark already drew on the same model and data (the census
#: regression at n = 32,561: PyMC's default start never converges there, and the gallery-wide
#: fallbacks take hours; ``benchmarks/gallery_logistic.py`` samples it from the MAP with a dense
#: mass matrix, 4 x 1000 draws, seed 0, R-hat 1.005)
KNOWN_REFERENCES = {"glm_logistic": ROOT / "benchmarks" / "results" / "gallery_logistic.json"}


def known_reference(label: str) -> dict | None:
    """The stored reference of ``label`` as :func:`reference_summary` states one, or None."""
    path = KNOWN_REFERENCES.get(label)
    if path is None or not path.exists():
        return None
    ref = json.loads(path.read_text())["reference"]
    if not ref.get("converged"):
        return None
    params = {k: [float(ref["mean"][k]), float(ref["sd"][k])] for k in ref["mean"]}
    return {"params": params, "rhat": ref["rhat"], "converged": True, "seconds": None,
            "how": f"pm.sample from the MAP, dense mass matrix, 4 x 1000 draws (stored by {path.name})"}


def pseudo_reference(params: dict) -> dict:
    """Two points ``mean +- sd`` per parameter: their mean and (population) sd are the
    reference's, so ``gallery_report.gaps_by_parameter`` measures against the stored summary."""
    return {k: np.array([m - s, m + s]) for k, (m, s) in params.items()}


# ---------------------------------------------------------------------- one release
def release_facts(idata, path: str) -> dict:
    """A few public facts of the release record (the region chosen, the first stage)."""
    try:
        record = json.loads(idata.attrs["pymc_dp"])
    except (KeyError, TypeError, ValueError):
        return {}
    out = {k: record.get(k) for k in ("epsilon", "epsilon_per_draw", "prior_mass_kept") if k in record}
    rel = record.get("release") or {}
    if rel.get("path"):
        out["chosen_path"] = rel["path"]["chosen"]
    if path == "localized" or out.get("chosen_path") == "localized":
        out.update({k: rel.get(k) for k in ("first_stage", "beta_locate", "beta_sample", "fallback") if k in rel})
        rule = rel.get("width_rule") or {}
        if "c" in rule:
            out["width_c"] = rule["c"]
    return out


def one_release(mod, model, free, epsilon, draws, path, seed, ref) -> dict:
    row: dict = {}
    keywords = {} if path == "posterior" else {"path": path}
    t = time.perf_counter()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            pmod = pymc_dp.make_private(model, epsilon=epsilon, draws=draws, data=mod.DOMAINS, public=mod.PUBLIC,
                                        ledger=None, **keywords)
    except pymc_dp.PrivacyError as exc:
        return {"refused": f"{type(exc).__name__}: {str(exc)[:200]}", "refused_at": "certify",
                "certify_seconds": round(time.perf_counter() - t, 2)}
    row["certify_seconds"] = round(time.perf_counter() - t, 2)
    t = time.perf_counter()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            idata = pmod.sample(random_seed=seed, chains=1, progressbar=False)
    except pymc_dp.PrivacyError as exc:
        row.update(refused=f"{type(exc).__name__}: {str(exc)[:200]}", refused_at="sample",
                   sample_seconds=round(time.perf_counter() - t, 2))
        return row
    row["sample_seconds"] = round(time.perf_counter() - t, 2)
    row.update(release_facts(idata, path))
    released = int(idata.posterior.sizes["chain"] * idata.posterior.sizes["draw"])
    row["draws_released"] = released  # a noisy-statistics release draws any number (post-processing)
    names = [k for k in free if k in idata.posterior]
    if len(names) < len(free):
        row["missing"] = [k for k in free if k not in names]
    flat = flat_params(idata.posterior, names)
    if ref["params"] is None:
        row["no_distance"] = "the non-private posterior did not converge"
        return row
    gaps = gaps_by_parameter(flat, pseudo_reference(ref["params"]))
    if not gaps:
        row["no_distance"] = "no parameter in common with the reference"
        return row
    values = list(gaps.values())
    row.update(median=float(np.median(values)), largest=float(np.max(values)))
    # signed, in reference sds: the released mean; with D > 1 the release's own 90% interval
    row["z"] = {k: round(float((np.mean(flat[k]) - ref["params"][k][0]) / ref["params"][k][1]), 5) for k in gaps}
    if released > 1:
        row["z_interval"] = {k: [round(float((q - ref["params"][k][0]) / ref["params"][k][1]), 5)
                                 for q in np.quantile(flat[k], QUANTILES)] for k in gaps}
    return row


# ---------------------------------------------------------------------- the run
def read_lines(jsonl: Path) -> list[dict]:
    if not jsonl.exists():
        return []
    return [json.loads(line) for line in jsonl.read_text().splitlines() if line.strip()]


def preview_row(mod, model, epsilon, draws, path, datasets, cache=None) -> dict:
    """``pymc_dp.preview`` of the cell (public: simulated data of the model's shapes), or its refusal.
    ``cache``: one dict per model, so its cells share the simulated datasets and their non-private fits."""
    t = time.perf_counter()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            pv = pymc_dp.preview(model, epsilon=epsilon, draws=draws, data=mod.DOMAINS, public=mod.PUBLIC, path=path,
                                 datasets=datasets, random_seed=0, cache=cache)
    except pymc_dp.PrivacyError as exc:
        return {"refused": f"{type(exc).__name__}: {str(exc)[:200]}", "seconds": round(time.perf_counter() - t, 1)}
    return {"datasets": datasets, "chosen": pv.chosen, "median": pv.median_distance, "largest": pv.largest_distance,
            "within_2": pv.within_2_sds, "seconds": round(pv.seconds, 1)}


def run(models, epsilons, releases, draws, out: Path, paths=PATHS, preview: int = 0) -> None:
    logging.getLogger("pymc").setLevel(logging.ERROR)
    out.parent.mkdir(parents=True, exist_ok=True)
    jsonl = out.with_suffix(".jsonl")
    lines = read_lines(jsonl)
    refs = {r["model"]: r for r in lines if r.get("kind") == "reference"}
    done = {(r["model"], r["epsilon"], r["path"], r["release"], r["draws"])
            for r in lines if r.get("kind") == "release" and "crashed" not in r}
    previewed = {(r["model"], r["epsilon"], r["path"], r["draws"]) for r in lines if r.get("kind") == "preview"}
    table = builders()
    with jsonl.open("a") as sink:
        def emit(row):
            sink.write(json.dumps(row, default=str) + "\n")
            sink.flush()
            short = {k: v for k, v in row.items() if k not in ("z", "z_interval", "params")}
            print(json.dumps(short, default=str), flush=True)

        for label in models:
            todo = [(eps, path, r) for eps in epsilons for path in paths for r in range(releases)
                    if (label, eps, path, r, draws) not in done]
            unpreviewed = preview and any((label, e, p, draws) not in previewed for e in epsilons for p in paths)
            if not todo and not unpreviewed:
                continue
            mod, builder = table[label]
            model = builder(mod.make_data(seed=DATA_SEED))
            n = max(int(np.shape(v.get_value())[0]) for v in model.data_vars if np.ndim(v.get_value()) > 0)
            free = [rv.name for rv in model.free_RVs]
            if label not in refs:
                stored = known_reference(label)
                refs[label] = {"kind": "reference", "model": label, "n": n, **(stored or reference_summary(model))}
                emit(refs[label])
            cache: dict = {}  # the preview's simulated datasets and fits, shared by the model's cells
            for eps in epsilons if preview else ():
                for path in paths:
                    if (label, eps, path, draws) not in previewed:
                        emit({"kind": "preview", "model": label, "n": n, "epsilon": eps, "path": path, "draws": draws,
                              **preview_row(mod, model, eps, draws, path, preview, cache)})
                        previewed.add((label, eps, path, draws))
            for eps, path, r in todo:
                row = {"kind": "release", "model": label, "n": n, "epsilon": eps, "path": path, "release": r,
                       "draws": draws, "seed": RELEASE_SEED + r}
                try:
                    row.update(one_release(mod, model, free, eps, draws, path, RELEASE_SEED + r, refs[label]))
                except Exception as exc:  # noqa: BLE001  (not a refusal: recorded, run again next time)
                    row["crashed"] = f"{type(exc).__name__}: {str(exc)[:200]}"
                    traceback.print_exc()
                emit(row)


# ---------------------------------------------------------------------- the table
def exact_draws_ceiling(parameters: int, draws: int) -> float:
    """The share of releases *within 2 sds* that ``draws`` exact draws of the non-private posterior
    would reach, in the normal approximation: the mean of D independent exact draws lies
    ``N(0, 1/D)`` posterior sds from the posterior mean, so every one of ``p`` parameters is within 2
    with probability ``erf(sqrt(2 D))^p`` (independent parameters; correlated ones do a little
    better). No path that releases D posterior-like draws can beat it -- 0.954^p for one draw:
    0.87 for 3 parameters, 0.63 for 10 -- whatever its privacy; a noise-aware release is measured
    by the mean of its 1000 post-processing draws, which this does not bound."""
    return float(math.erf(math.sqrt(2.0 * draws)) ** parameters)


def cell_summary(rows: list[dict], draws: int, ref_params: dict | None) -> dict:
    """The cell's numbers from its release rows (the last row of each release)."""
    ok = [r for r in rows if "median" in r]
    refused = [r for r in rows if "refused" in r]
    s: dict = {"releases": len(rows), "measured": len(ok), "refused": len(refused),
               "crashed": sum("crashed" in r for r in rows)}
    if refused:
        s["refusal"] = refused[0]["refused"]
    timed = [r for r in rows if "sample_seconds" in r]
    for key in ("certify_seconds", "sample_seconds"):
        xs = sorted(r[key] for r in (timed if key == "sample_seconds" else rows) if key in r)
        if xs:
            s[key] = [xs[0], float(np.median(xs)), xs[-1]]
    if not ok:
        return s
    s["within_2"] = sum(r["largest"] <= 2 for r in ok) / len(ok)
    s["median_distance"] = float(np.median([r["median"] for r in ok]))
    s["max_distance"] = float(np.median([r["largest"] for r in ok]))
    s["worst_distance"] = float(max(r["largest"] for r in ok))
    if not any("z_interval" in r for r in ok):  # one draw per release: pool the cell's draws
        if len(ok) >= 2:
            keys = sorted(set.intersection(*(set(r["z"]) for r in ok)))
            held = []
            for k in keys:
                lo, hi = np.quantile([r["z"][k] for r in ok], QUANTILES)
                held.append(lo <= 0 <= hi)
            s["coverage"] = float(np.mean(held)) if held else None
            s["coverage_how"] = f"pooled {len(ok)} draws, {len(keys)} parameters"
    else:
        held = [lo <= 0 <= hi for r in ok for lo, hi in r.get("z_interval", {}).values()]
        s["coverage"] = float(np.mean(held)) if held else None
        s["coverage_how"] = f"{len(ok)} releases x parameters"
    return s


def summarise(lines: list[dict]) -> dict:
    latest: dict = {}
    for r in lines:
        if r.get("kind") == "release":
            latest[(r["model"], r["epsilon"], r["path"], r["draws"], r["release"])] = r
    refs = {r["model"]: r for r in lines if r.get("kind") == "reference"}
    previews = {(r["model"], r["epsilon"], r["path"], r["draws"]): r for r in lines if r.get("kind") == "preview"}
    cells: dict = {}
    for (model, eps, path, draws, _), r in latest.items():
        cells.setdefault((model, eps, draws), {}).setdefault(path, []).append(r)
    out = []
    order = list(builders())
    for (model, eps, draws), by_path in sorted(cells.items(), key=lambda kv: (kv[0][1], kv[0][2], order.index(kv[0][0]))):
        ref = refs.get(model, {})
        n = next(iter(by_path.values()))[0]["n"]
        entry = {"model": model, "n": n, "epsilon": eps, "draws": draws,
                 "reference": {k: ref.get(k) for k in ("rhat", "how", "converged", "seconds")},
                 "parameters": len(ref.get("params") or {})}
        if entry["parameters"]:
            entry["exact_draws_ceiling"] = exact_draws_ceiling(entry["parameters"], draws)
        base = None
        for path in PATHS:
            if path in by_path:
                cell = entry[path] = cell_summary(by_path[path], draws, ref.get("params"))
                chosen = sorted({r["chosen_path"] for r in by_path[path] if r.get("chosen_path")})
                if chosen:
                    cell["chosen"] = chosen
                pv = previews.get((model, eps, path, draws))
                if pv is not None:
                    cell["preview"] = pv
                    if "median" in pv and cell.get("median_distance") and pv["median"] > 0:
                        cell["measured_over_preview"] = cell["median_distance"] / pv["median"]
                if path == "posterior":
                    base = cell.get("median_distance")
                elif base and "median_distance" in cell:
                    cell["over_posterior"] = cell["median_distance"] / base
        out.append(entry)
    return {"cells": out}


def _f(x, digits=3):
    return "—" if x is None else f"{x:.{digits}g}"


def _secs(s, key):
    v = s.get(key)
    return "—" if not v else f"{v[0]:.1f} / {v[1]:.1f} / {v[2]:.1f}"


def _path_cells(s: dict | None) -> list[str]:
    if not s:
        return ["not run"] + [""] * 7
    pv = s.get("preview")
    if pv is None:
        preview = "—"
    elif "median" in pv:
        ratio = s.get("measured_over_preview")
        preview = f"{_f(pv['median'])} ({pv['datasets']} sets" + ("" if ratio is None else f"; measured ÷ preview {ratio:.2f}") + ")"
    else:
        preview = "refused"
    chosen = "/".join(s.get("chosen", [])) or ""
    if not s.get("measured"):
        why = "refused" if s.get("refused") else ("crashed" if s.get("crashed") else "no distance")
        if s.get("refusal"):
            why += ": " + s["refusal"].split(". ")[0][:90].replace("|", "/")
        return [f"{s['releases']}", why, "", "", "", _secs(s, "certify_seconds"), _secs(s, "sample_seconds"), preview]
    rel = f"{s['measured']}" + (f" (+{s['refused']} refused)" if s.get("refused") else "") + \
          (f" (+{s['crashed']} crashed)" if s.get("crashed") else "") + (f" → {chosen}" if chosen else "")
    within = f"{round(s['within_2'] * s['measured'])}/{s['measured']}"
    cov = "n/a (1 release)" if s.get("coverage") is None else f"{s['coverage']:.2f}"
    return [rel, within, f"{_f(s['median_distance'])} / {_f(s['max_distance'])}", _f(s.get("over_posterior")), cov,
            _secs(s, "certify_seconds"), _secs(s, "sample_seconds"), preview]


def markdown(summary: dict, header: list[str]) -> str:
    lines = list(header)
    by_eps: dict = {}
    for c in summary["cells"]:
        by_eps.setdefault((c["epsilon"], c["draws"]), []).append(c)
    cols = ["releases (→ path chosen)", "within 2 sds", "median / max distance", "median ÷ posterior's", "coverage",
            "certify s (min / med / max)", "sample s (min / med / max)", "preview: median distance"]
    for (eps, draws), cells in sorted(by_eps.items()):
        lines += ["", f"## Total ε = {eps:g} (pure DP), {draws} draw(s) per release", "",
                  "| model | n | path | " + " | ".join(cols) + " | parameters: exact draws' ceiling | reference R-hat |",
                  "|---|---:|---|" + "---|" * len(cols) + "---|---|"]
        for c in cells:
            ref = c["reference"]
            rhat = "—" if ref.get("rhat") is None else (f"{ref['rhat']:.3f}" + REFERENCE_HOW.get(ref["how"], f", {ref['how']}")
                                                         + ("" if ref["converged"] else ": not converged, no distance"))
            for path in PATHS:
                if path in c:
                    ceiling = (f"{c['parameters']}: {c['exact_draws_ceiling']:.2f}" if "exact_draws_ceiling" in c else "—")
                    lines.append(f"| {c['model']} | {c['n']:,} | {path} | " + " | ".join(_path_cells(c[path]))
                                 + f" | {ceiling} | {rhat} |")
    return "\n".join(lines) + "\n"


def main(argv=None):
    labels = list(builders())
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", nargs="+", default=list(MODELS), choices=labels, metavar="MODEL",
                        help=f"gallery models (default the 12: {' '.join(MODELS)}; variants: "
                             f"{' '.join(x for x in labels if x not in MODELS)})")
    parser.add_argument("--epsilons", nargs="+", type=float, default=list(EPSILONS))
    parser.add_argument("--releases", type=int, default=20, help="releases per cell (default 20)")
    parser.add_argument("--draws", type=int, default=1, help="draws per release (default 1)")
    parser.add_argument("--out", default=str(OUT), help="results path without suffix (default benchmarks/results/gallery_utility)")
    parser.add_argument("--smoke", action="store_true", help="say in the table's header that this is a smoke run")
    parser.add_argument("--paths", nargs="+", default=list(PATHS), choices=PATHS, help="release paths (default all three)")
    parser.add_argument("--preview", type=int, default=0, metavar="K",
                        help="also run pymc_dp.preview on K simulated datasets per cell (default 0: none)")
    args = parser.parse_args(argv)
    out = Path(args.out)
    if out.suffix in (".md", ".json", ".jsonl"):
        out = out.with_suffix("")
    command = "PYTHONPATH=. python benchmarks/gallery_utility.py " + " ".join(shlex.quote(a) for a in (sys.argv[1:] if argv is None else argv))
    date = datetime.datetime.now().astimezone().isoformat(timespec="seconds")
    started = time.perf_counter()
    run(args.models, args.epsilons, args.releases, args.draws, out, paths=tuple(args.paths), preview=args.preview)
    seconds = time.perf_counter() - started
    with out.with_suffix(".jsonl").open("a") as sink:  # the invocation, for the header of a resumed table
        sink.write(json.dumps({"kind": "run", "command": command.strip(), "date": date, "seconds": round(seconds, 1),
                               "cores": os.cpu_count()}) + "\n")
    lines = read_lines(out.with_suffix(".jsonl"))
    runs = [r for r in lines if r.get("kind") == "run"]
    summary = summarise(lines)
    recorded = sum(r.get("certify_seconds", 0) + r.get("sample_seconds", 0) for r in lines if r.get("kind") == "release")
    refs = sum((r.get("seconds") or 0) for r in lines if r.get("kind") == "reference")
    meta = {
        "command": command.strip(),
        "date": date,
        "runs": runs,
        "machine": f"{platform.machine()}, {os.cpu_count()} cores (shared with other work), {platform.system()} {platform.release()}",
        "python": platform.python_version(),
        "pymc_dp": getattr(pymc_dp, "__version__", "?"),
        "this_run_seconds": round(seconds, 1),
        "recorded_release_seconds": round(recorded, 1),
        "recorded_reference_seconds": round(refs, 1),
        "seeds": {"data": DATA_SEED, "reference": 0, "release": f"{RELEASE_SEED} + release index"},
        "smoke": bool(args.smoke),
    }
    header = [
        "# Gallery utility: posterior sampling beside localize-then-sample and path='auto'" + (" (SMOKE RUN)" if args.smoke else ""),
        "",
    ]
    if args.smoke:
        header += ["**This is a smoke run** (validation of the script only: a few models, one epsilon, "
                   "very few releases); it is not the issue 33 table.", ""]
    header += [
        f"Written by `benchmarks/gallery_utility.py` (issue 33) from `{out.with_suffix('.jsonl').name}`; "
        f"machine: {meta['machine']}; Python {meta['python']}, pymc_dp {meta['pymc_dp']}. Run time: "
        f"{sum(r['seconds'] for r in runs):.0f} s wall over {len(runs)} invocation(s) (below); the releases "
        f"in the file {recorded:.0f} s (certify + sample, summed) and the reference posteriors {refs:.0f} s.",
        "",
        *(f"* `{r['command']}` ({r['date']}, {r['seconds']:.0f} s, {r.get('cores', '?')} cores)" for r in runs),
        "",
        "Each model at its notebook's n (`make_data()` defaults, data seed 0); pure DP (δ = 0); `ledger=None`. "
        "Path *posterior*: `make_private(model, epsilon, draws, data=DOMAINS, public=PUBLIC)`; paths *localized* and *auto*: "
        "the same with `path=\"localized\"` / `path=\"auto\"` (→ the path auto chose; a noisy-statistics release "
        "draws 1000 post-processing draws, and its distance is that of their mean). *Preview*: `pymc_dp.preview` of the "
        "same cell on K simulated datasets (public; its median distance, and measured ÷ preview). One release = certify + `sample(random_seed=100 + r, chains=1)`; "
        "certify s is `make_private`'s wall time, sample s is `sample()`'s (for localized: both stages, with stage 2's certificate).",
        "",
        "Distance: for every main parameter (every scalar element of every free random variable, as "
        "`gallery_report.flat_params` flattens them), |released mean − non-private posterior mean| / non-private "
        "posterior sd; the non-private posterior is `gallery_report.reference_posterior` (NUTS, 4 chains × 1000 draws, "
        "seed 0). *Within 2 sds*: releases whose largest distance over the parameters is ≤ 2. *Median / max distance*: "
        "median over the releases of each release's median, and of each release's largest distance. "
        + "*Coverage* of the non-private mean by a released central 90% interval (5% and 95% quantiles, numpy's linear "
        "rule): with 1 draw per release, per parameter the interval of the cell's released draws pooled over its releases, "
        "and the share of parameters whose interval holds the non-private mean (undefined with 1 release); with more draws, "
        "the interval of each release's own draws, and the share of (release, parameter) pairs whose interval holds it. "
        + "Seconds: min / median / max over the cell's releases. *Exact draws' ceiling*: the share within 2 sds that "
        "releasing D exact draws of the non-private posterior itself would reach (normal approximation, "
        "`erf(sqrt(2 D))^p` for p parameters; `exact_draws_ceiling`): no sampling path at D draws per release can beat it, "
        "whatever its privacy (0.87 at p = 3, 0.63 at p = 10 with one draw); a noise-aware release's mean is over its "
        "post-processing draws, which this does not bound.",
    ]
    text = markdown(summary, header)
    out.with_suffix(".md").write_text(text)
    out.with_suffix(".json").write_text(json.dumps({**meta, **summary}, indent=1, default=str) + "\n")
    print(text)


if __name__ == "__main__":
    main()
