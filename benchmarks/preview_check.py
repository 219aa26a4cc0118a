"""Does ``pymc_dp.preview`` predict the measured distance? (issue 33 item 5: within a factor 2.)

For each gallery model in ``--models`` at its notebook's n (``make_data(seed=0)``), each total
epsilon in ``--epsilons`` and each path in ``--paths``:

* *measured*: ``--releases R`` releases on the gallery data, exactly as
  ``benchmarks/gallery_utility.py`` makes them (``one_release``: ``make_private(..., ledger=None)``
  then ``sample(random_seed=100 + r, chains=1)``; distance against ``gallery_report``'s reference
  posterior); the cell's median over releases of each release's median distance;
* *preview*: ``pymc_dp.preview(model, epsilon, draws, data=DOMAINS, public=PUBLIC, path,
  datasets=K, random_seed=0)`` (public: simulated data of the model's shapes); its median distance.
  One ``cache`` per model and rule, so the simulated datasets and their non-private fits are
  shared by the epsilons and paths (they depend on neither).

``--rule`` chooses the preview's selection of simulated datasets: ``filled`` (today's default:
prior-predictive draws kept when at most 1% of their records leave the declared domains and their
records' sd is at least 1/32 of the domain's width, up to 2**24 simulated records tried),
``domains`` (the same without the sd condition: ``fill=0``) or ``fewest`` (the rule before: 64 draws, the ``K`` with the fewest
records outside, reproduced by ``candidates=64, tolerance=0, fill=0``). One JSON line per cell-part is
appended to ``<out>.jsonl``; ``<out>.md`` tabulates measured, preview and measured / preview.

Run from the repository root::

    PYTHONPATH=. python benchmarks/preview_check.py --models glm_linear --epsilons 1 3 10 \\
        --paths posterior --releases 10 --datasets 16 --rule filled
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import warnings
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from gallery_utility import RELEASE_SEED, builders, one_release, reference_summary  # noqa: E402

import pymc_dp  # noqa: E402

OUT = ROOT / "benchmarks" / "results" / "preview_check"
RULES = {"filled": {}, "domains": {"fill": 0.0}, "fewest": {"candidates": 64, "tolerance": 0.0, "fill": 0.0}}


def read(jsonl: Path) -> list[dict]:
    return [json.loads(x) for x in jsonl.read_text().splitlines() if x.strip()] if jsonl.exists() else []


def run(args) -> None:
    out = Path(args.out).with_suffix(".jsonl")
    lines = read(out)
    done_rel = {(r["model"], r["epsilon"], r["path"], r["release"]) for r in lines if r["kind"] == "release"}
    done_pv = {(r["model"], r["epsilon"], r["path"], r["rule"], r["datasets"]) for r in lines if r["kind"] == "preview"}
    table = builders()

    def emit(row):
        with out.open("a") as sink:
            sink.write(json.dumps(row, default=float) + "\n")
        print(json.dumps(row, default=float)[:300], flush=True)

    for label in args.models:
        mod, builder = table[label]
        model = builder(mod.make_data(seed=0))
        free = [rv.name for rv in model.free_RVs]
        ref = None
        cache: dict = {}
        for eps in args.epsilons:
            for path in args.paths:
                for r in range(args.releases):
                    if (label, eps, path, r) in done_rel:
                        continue
                    if ref is None:
                        ref = next((x for x in lines if x["kind"] == "reference" and x["model"] == label), None)
                        if ref is None:
                            ref = {"kind": "reference", "model": label, **reference_summary(model)}
                            emit(ref)
                    row = one_release(mod, model, free, eps, args.draws, path, RELEASE_SEED + r, ref)
                    emit({"kind": "release", "model": label, "epsilon": eps, "path": path, "release": r,
                          **{k: row.get(k) for k in ("median", "largest", "refused", "chosen_path")}})
                if (label, eps, path, args.rule, args.datasets) in done_pv:
                    continue
                t = time.perf_counter()
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    try:
                        pv = pymc_dp.preview(model, epsilon=eps, draws=args.draws, data=mod.DOMAINS, public=mod.PUBLIC,
                                             path=path, datasets=args.datasets, random_seed=0, cache=cache,
                                             **RULES[args.rule])
                    except pymc_dp.PrivacyError as exc:
                        emit({"kind": "preview", "model": label, "epsilon": eps, "path": path, "rule": args.rule,
                              "datasets": args.datasets, "refused": str(exc)[:200]})
                        continue
                emit({"kind": "preview", "model": label, "epsilon": eps, "path": path, "rule": args.rule,
                      "datasets": args.datasets, "median": pv.median_distance, "largest": pv.largest_distance,
                      "chosen": pv.chosen, "per_dataset": list(pv.releases),
                      "seconds": round(time.perf_counter() - t, 1)})


def table(jsonl: Path) -> str:
    lines = read(jsonl)
    cells: dict = {}
    for r in lines:
        if r["kind"] == "release" and r.get("median") is not None:
            cells.setdefault((r["model"], r["epsilon"], r["path"]), {"m": []})["m"].append(r["median"])
    for r in lines:
        if r["kind"] == "preview":
            cells.setdefault((r["model"], r["epsilon"], r["path"]), {"m": []})[(r["rule"], r["datasets"])] = r
    rules = sorted({(r["rule"], r["datasets"]) for r in lines if r["kind"] == "preview"})
    head = "| model | ε | path | measured median (releases; IQR of release medians) | " + " | ".join(
        f"preview `{a}` ({k} sets): median; measured ÷ preview" for a, k in rules) + " |"
    out = ["# Preview vs measured (benchmarks/preview_check.py)", "",
           "Each gallery model at its notebook's n (data seed 0), pure DP, 1 draw per release. *Measured*: the median over "
           "releases (seeds 100 + r) of each release's median distance (|released - non-private mean| / non-private sd) on "
           "the gallery data, as benchmarks/gallery_utility.py measures it. *Preview*: pymc_dp.preview's median distance on "
           "K simulated datasets (public; random_seed 0) under a selection rule: `filled` (the default: prior-predictive "
           "draws with <= 1% of records outside the declared domains and records' sd >= 1/32 of the domain's width), "
           "`domains` (the same without the sd condition), `fewest` (the rule before: 64 draws, the K with the fewest "
           "records outside, clipped). The issue asks measured ÷ preview within [0.5, 2] on every cell.", "", head, "|---|---:|---|---|" + "---|" * len(rules)]
    for (model, eps, path), c in sorted(cells.items()):
        m = c["m"]
        meas = f"{np.median(m):.3g} ({len(m)}; {np.quantile(m, 0.25):.3g}–{np.quantile(m, 0.75):.3g})" if m else "—"
        cols = []
        for rule in rules:
            pv = c.get(rule)
            if pv is None:
                cols.append("—")
            elif "median" not in pv:
                cols.append("refused")
            else:
                ratio = f"{np.median(m) / pv['median']:.2f}" if m and pv["median"] > 0 else "—"
                cols.append(f"{pv['median']:.3g}; {ratio}")
        out.append(f"| {model} | {eps:g} | {path} | {meas} | " + " | ".join(cols) + " |")
    return "\n".join(out) + "\n"


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", nargs="+", default=["glm_linear"])
    parser.add_argument("--epsilons", nargs="+", type=float, default=[1.0, 3.0, 10.0])
    parser.add_argument("--paths", nargs="+", default=["posterior"])
    parser.add_argument("--releases", type=int, default=10)
    parser.add_argument("--datasets", type=int, default=8)
    parser.add_argument("--draws", type=int, default=1)
    parser.add_argument("--rule", choices=sorted(RULES), default="filled")
    parser.add_argument("--out", default=str(OUT))
    args = parser.parse_args(argv)
    run(args)
    text = table(Path(args.out).with_suffix(".jsonl"))
    Path(args.out).with_suffix(".md").write_text(text)
    print(text)


if __name__ == "__main__":
    main()
