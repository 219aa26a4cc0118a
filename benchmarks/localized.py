"""Localize, then sample, beside posterior sampling, against the non-private posterior (issue 33).

For each model and total epsilon, ``--releases`` releases of ``--draws`` draw(s) from each path,
on the same data:

* ``posterior``: ``pymc_dp.make_private`` (one region chosen from public facts);
* ``localized``: ``pymc_dp.make_private(..., path="localized")``.

Distance: for every scalar parameter, ``|released mean - posterior mean| / posterior sd`` (the
non-private posterior: 2 chains x 1000 NUTS draws); per release its median and largest over the
parameters; a release is *within 2 sds* when its largest is. Reported per cell: the share within
2 sds, the median over releases of the median and of the largest distance, and wall times (min /
median / max over the releases: certify and release together), side by side with their ratio.

Run: ``PYTHONPATH=. python benchmarks/localized.py [--releases 4] [--models logistic_public ...]``;
writes ``benchmarks/results/localized.{json,md}`` (rows are appended to the JSON as they finish;
a re-run skips the cells already there).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import warnings
from pathlib import Path

import numpy as np
import pymc as pm
import pytensor.tensor as pt

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import pymc_dp  # noqa: E402

OUT = ROOT / "benchmarks" / "results" / "localized"


def logistic_public(seed=0):
    """Logistic regression, public 5-column design (n = 2000), private binary outcome."""
    rng = np.random.default_rng(seed)
    n, k = 2000, 5
    X = rng.normal(size=(n, k)).clip(-3, 3)
    w = np.array([1.0, -0.5, 0.8, 0.0, 0.3])
    y = (rng.random(n) < 1 / (1 + np.exp(-(0.5 + X @ w)))).astype(int)
    with pm.Model() as m:
        Xd, yd = pm.Data("X", X), pm.Data("y", y)
        wv = pm.Normal("w", 0, 1, shape=k)
        b = pm.Normal("b", 0, 1)
        pm.Bernoulli("obs", logit_p=b + pt.dot(Xd, wv), observed=yd)
    return m, {"y": pymc_dp.Binary()}, ["X"]


def poisson_public(seed=0):
    """Poisson regression, public 3-column design (n = 1000), private counts in {0..30}."""
    rng = np.random.default_rng(seed)
    n = 1000
    X = rng.uniform(-1, 1, size=(n, 3))
    y = np.minimum(rng.poisson(np.exp(1.0 + X @ np.array([0.5, -0.3, 0.2]))), 30)
    with pm.Model() as m:
        Xd, yd = pm.Data("X", X), pm.Data("y", y)
        wv = pm.Normal("w", 0, 1, shape=3)
        b = pm.Normal("b", 0, 2)
        pm.Poisson("obs", mu=pm.math.exp(b + pt.dot(Xd, wv)), observed=yd)
    return m, {"y": pymc_dp.Integers(0, 30)}, ["X"]


def linear_gallery(seed=0):
    """The gallery's linear regression (n = 200): covariate and outcome private."""
    from examples.gallery import glm_linear as mod

    return mod.build(mod.make_data(seed=seed)), mod.DOMAINS, list(mod.PUBLIC)


MODELS = {"logistic_public": logistic_public, "poisson_public": poisson_public, "linear_gallery": linear_gallery}


def reference(model):
    with warnings.catch_warnings(), model:
        warnings.simplefilter("ignore")
        idata = pm.sample(1000, tune=1000, chains=2, random_seed=7, progressbar=False, compute_convergence_checks=False)
    flat = {}
    for rv in model.free_RVs:
        x = idata.posterior[rv.name].values
        x = x.reshape(x.shape[0] * x.shape[1], -1)
        flat[rv.name] = (x.mean(0), x.std(0))
    return flat


def distance(idata, ref) -> np.ndarray:
    out = []
    for name, (mu, sd) in ref.items():
        x = idata.posterior[name].values
        x = x.reshape(x.shape[0] * x.shape[1], -1)
        out.append(np.abs(x.mean(0) - mu) / sd)
    return np.concatenate(out)


def one_release(model, domains, public, epsilon, draws, path, seed):
    t = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        mech = pymc_dp.make_private(model, epsilon=epsilon, draws=draws, data=domains, public=public,
                                    ledger=None, path=path)
        idata = mech.sample(random_seed=seed, chains=1, progressbar=False)
    return idata, time.perf_counter() - t


def run(models, epsilons, releases, draws) -> list[dict]:
    OUT.parent.mkdir(parents=True, exist_ok=True)
    jsonl = OUT.with_suffix(".jsonl")
    done = set()
    if jsonl.exists():
        for line in jsonl.read_text().splitlines():
            row = json.loads(line)
            done.add((row["model"], row["epsilon"], row["path"], row["release"]))
    with jsonl.open("a") as sink:
        for name in models:
            model, domains, public = MODELS[name]()
            ref = None
            for eps in epsilons:
                for path in ("posterior", "localized"):
                    for r in range(releases):
                        if (name, eps, path, r) in done:
                            continue
                        ref = ref or reference(model)
                        row = {"model": name, "epsilon": eps, "path": path, "release": r, "draws": draws}
                        try:
                            idata, seconds = one_release(model, domains, public, eps, draws, path, 100 + r)
                            d = distance(idata, ref)
                            row.update(median=float(np.median(d)), largest=float(d.max()), seconds=seconds)
                        except pymc_dp.PrivacyError as err:
                            row.update(refused=f"{type(err).__name__}: {str(err)[:200]}")
                        sink.write(json.dumps(row) + "\n")
                        sink.flush()
                        print(row, flush=True)
    return [json.loads(line) for line in jsonl.read_text().splitlines()]


def table(rows) -> str:
    cells: dict = {}
    for r in rows:
        cells.setdefault((r["model"], r["epsilon"]), {}).setdefault(r["path"], []).append(r)
    lines = [
        "| model | epsilon | path | releases | within 2 sds | median distance | largest distance | seconds (min / median / max) |",
        "|---|---:|---|---:|---:|---:|---:|---|",
    ]
    for (model, eps), by_path in sorted(cells.items()):
        for path in ("posterior", "localized"):
            rs = by_path.get(path, [])
            ok = [r for r in rs if "largest" in r]
            if not rs:
                continue
            if not ok:
                lines.append(f"| {model} | {eps:g} | {path} | {len(rs)} | refused | | | |")
                continue
            within = sum(r["largest"] <= 2 for r in ok)
            secs = sorted(r["seconds"] for r in ok)
            lines.append(
                f"| {model} | {eps:g} | {path} | {len(ok)} | {within}/{len(ok)} | "
                f"{np.median([r['median'] for r in ok]):.2f} | {np.median([r['largest'] for r in ok]):.2f} | "
                f"{secs[0]:.1f} / {np.median(secs):.1f} / {secs[-1]:.1f} |"
            )
    return "\n".join(lines)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", nargs="*", default=list(MODELS), choices=list(MODELS))
    parser.add_argument("--epsilons", nargs="*", type=float, default=[1.0, 3.0, 10.0])
    parser.add_argument("--releases", type=int, default=4)
    parser.add_argument("--draws", type=int, default=1)
    args = parser.parse_args(argv)
    rows = run(args.models, args.epsilons, args.releases, args.draws)
    text = "\n".join([
        "# Localize, then sample, beside posterior sampling",
        "",
        f"`PYTHONPATH=. python benchmarks/localized.py --releases {args.releases} --draws {args.draws}` "
        f"({os.cpu_count()} cores, shared with other work). Distances in non-private posterior sds "
        "(2 chains x 1000 NUTS draws); one release = certify + sample, each path on the same data and seeds.",
        "",
        table(rows),
        "",
    ])
    OUT.with_suffix(".md").write_text(text)
    OUT.with_suffix(".json").write_text(json.dumps(rows, indent=1) + "\n")
    print(text)


if __name__ == "__main__":
    main()
