"""Calibration of PASS-GLM's noise-aware posterior (``pymc_dp.mechanisms.pass_glm``).

For each family and epsilon, ``--datasets`` datasets are simulated with the coefficients drawn
from the model's prior (a public seed per dataset): ``--n`` records, two covariates in the box
``[-1, 1]^2``, each ``2 Beta(a, b) - 1`` with ``a, b ~ Uniform(1, 3)`` drawn per dataset (skewed
and flat shapes: the mechanism's latent model of the covariates is Normal, the data are not).

* logistic: ``alpha, beta_j ~ N(0, 1)``, ``y ~ Bernoulli(invlogit(alpha + x beta))``, outcome
  ``Binary()``;
* poisson: ``alpha ~ N(1, 0.5)``, ``beta_j ~ N(0, 0.5)``, ``y ~ Poisson(exp(alpha + x beta))``,
  outcome ``Integers(0, 40)`` (a dataset with a count above 40 is drawn again).

Each dataset is released once (``ledger=None``: synthetic data) and sampled with ``pm.sample``
(one chain, ``--tune`` tuning steps, ``--draws`` draws); the 90% equal-tailed interval of every
coefficient is checked against the true value. An exactly calibrated posterior covers the truth
in 90% of datasets when the truth is drawn from the prior; the issue asks 85-95% over >= 200
datasets per epsilon.

Run: ``PYTHONPATH=. python benchmarks/calibration_pass_glm.py [--datasets 200] [--families logistic poisson]
[--epsilons 0.5 1 5] [--out benchmarks/results]``. Each dataset is appended to
``calibration_pass_glm.jsonl`` as it finishes (``--resume`` skips those done; ``--budget-seconds`` stops starting new datasets after that long),
and the summary is written to ``calibration_pass_glm.{json,md}``. Parts run in parallel with
their own ``--out`` merge by concatenating their ``.jsonl`` files into one folder and running
``--resume --budget-seconds 0`` there. Measured: 16 s (epsilon 0.5, 1) and 30 s (epsilon 5)
per logistic dataset on 2 cores shared with a load of about 12.
"""

from __future__ import annotations

import argparse
import json
import math
import time
import warnings
from pathlib import Path

import numpy as np
import pymc as pm
from scipy.special import expit

import pymc_dp
from pymc_dp.mechanisms.pass_glm import pass_glm

EPSILONS = (0.5, 1.0, 5.0)
LEVEL = 0.9
POISSON_TOP = 40


def simulate(family: str, rng: np.random.Generator, n: int):
    """A dataset from the prior predictive, and the model that reads it."""
    while True:
        a, b = rng.uniform(1, 3, 2), rng.uniform(1, 3, 2)
        X = 2.0 * rng.beta(a, b, size=(n, 2)) - 1.0
        if family == "logistic":
            alpha, beta = rng.normal(0, 1), rng.normal(0, 1, 2)
            y = rng.binomial(1, expit(alpha + X @ beta))
            break
        alpha, beta = rng.normal(1, 0.5), rng.normal(0, 0.5, 2)
        y = rng.poisson(np.exp(alpha + X @ beta))
        if y.max() <= POISSON_TOP:
            break
    with pm.Model() as model:
        Xd, yd = pm.Data("X", X), pm.Data("y", y)
        if family == "logistic":
            al, be = pm.Normal("alpha", 0, 1), pm.Normal("beta", 0, 1, shape=2)
            pm.Bernoulli("lik", logit_p=al + Xd @ be, observed=yd)
            ydom = pymc_dp.Binary()
        else:
            al, be = pm.Normal("alpha", 1, 0.5), pm.Normal("beta", 0, 0.5, shape=2)
            pm.Poisson("lik", mu=pm.math.exp(al + Xd @ be), observed=yd)
            ydom = pymc_dp.Integers(0, POISSON_TOP)
    return model, {"X": pymc_dp.Box(-1, 1), "y": ydom}, np.concatenate([[alpha], beta])


def one(family: str, epsilon: float, index: int, n: int, draws: int, tune: int, approximation: str) -> dict:
    seed = [20171204, int(round(epsilon * 100)), index, 0 if family == "logistic" else 1]
    rng = np.random.default_rng(seed)
    model, domains, truth = simulate(family, rng, n)
    start = time.perf_counter()
    mech = pass_glm(model, epsilon=epsilon, data=domains, ledger=None, approximation=approximation)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        idata = mech.sample(draws, chains=1, tune=tune, random_seed=index)
    post = idata.posterior
    samples = np.column_stack([post["alpha"].values.reshape(-1), post["beta"].values.reshape(-1, 2)])
    lo, hi = np.quantile(samples, [(1 - LEVEL) / 2, (1 + LEVEL) / 2], axis=0)
    return {
        "family": family, "epsilon": epsilon, "index": index, "n": n, "truth": truth.tolist(),
        "lo": lo.tolist(), "hi": hi.tolist(), "mean": samples.mean(axis=0).tolist(),
        "covered": ((lo <= truth) & (truth <= hi)).tolist(),
        "divergences": int(idata.sample_stats["diverging"].values.sum()),
        "seconds": time.perf_counter() - start,
    }


def summarise(rows: list[dict]) -> dict:
    out = {}
    for key in sorted({(r["family"], r["epsilon"]) for r in rows}):
        sub = [r for r in rows if (r["family"], r["epsilon"]) == key]
        cov = np.array([r["covered"] for r in sub], float)
        k = cov.size
        share = float(cov.mean())
        out[f"{key[0]} eps={key[1]:g}"] = {
            "family": key[0], "epsilon": key[1], "datasets": len(sub), "intervals": int(k),
            "coverage": share, "standard_error": math.sqrt(share * (1 - share) / k),
            "coverage_by_coefficient": cov.mean(axis=0).tolist(),
            "median_width": np.median(np.array([r["hi"] for r in sub]) - np.array([r["lo"] for r in sub]), axis=0).tolist(),
            "divergent_datasets": sum(r["divergences"] > 0 for r in sub),
            "seconds_per_dataset": float(np.mean([r["seconds"] for r in sub])),
        }
    return out


def write(summary: dict, args, out: Path) -> None:
    (out / "calibration_pass_glm.json").write_text(json.dumps({"settings": vars(args) | {"out": str(args.out)}, "cells": summary}, indent=1))
    lines = [
        "# PASS-GLM calibration: coverage of 90% intervals of the true coefficients",
        "",
        f"`benchmarks/calibration_pass_glm.py`: n = {args.n} records, 2 covariates (skewed Beta shapes on [-1, 1]), "
        f"coefficients from the prior; `approximation={args.approximation!r}`; one chain, {args.tune} tuning steps, "
        f"{args.draws} draws per dataset. Each cell pools the 3 coefficients (alpha, beta_0, beta_1) of its datasets; "
        "the target is 85-95% (the issue asks >= 200 datasets per epsilon; the count run is stated).",
        "",
        "| family | epsilon | datasets | coverage | s.e. | alpha / beta_0 / beta_1 | median width (alpha / beta_0 / beta_1) | datasets with divergences | s per dataset |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for cell in summary.values():
        by = " / ".join(f"{v:.2f}" for v in cell["coverage_by_coefficient"])
        width = " / ".join(f"{v:.2f}" for v in cell["median_width"])
        lines.append(f"| {cell['family']} | {cell['epsilon']:g} | {cell['datasets']} | {cell['coverage']:.3f} | "
                     f"{cell['standard_error']:.3f} | {by} | {width} | {cell['divergent_datasets']} | {cell['seconds_per_dataset']:.1f} |")
    if args.note:
        lines += ["", args.note]
    (out / "calibration_pass_glm.md").write_text("\n".join(lines) + "\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--datasets", type=int, default=200)
    parser.add_argument("--families", nargs="+", default=["logistic"], choices=["logistic", "poisson"])
    parser.add_argument("--epsilons", nargs="+", type=float, default=list(EPSILONS))
    parser.add_argument("--n", type=int, default=300)
    parser.add_argument("--draws", type=int, default=300)
    parser.add_argument("--tune", type=int, default=300)
    parser.add_argument("--approximation", default="adaptive", choices=["adaptive", "fixed"])
    parser.add_argument("--budget-seconds", type=float, default=float("inf"), help="stop starting datasets after this long")
    parser.add_argument("--resume", action="store_true")
    parser.add_argument("--note", default="", help="a paragraph appended to the Markdown table (how the run was made)")
    parser.add_argument("--out", type=Path, default=Path("benchmarks/results"))
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    log = args.out / "calibration_pass_glm.jsonl"
    rows = [json.loads(line) for line in log.read_text().splitlines()] if args.resume and log.exists() else []
    if not args.resume and log.exists():
        log.unlink()
    done = {(r["family"], r["epsilon"], r["index"]) for r in rows}
    start = time.perf_counter()
    # interleave the cells so that a run stopped by its budget has every cell at about the same count
    for index in range(args.datasets):
        for family in args.families:
            for epsilon in args.epsilons:
                if (family, epsilon, index) in done:
                    continue
                if time.perf_counter() - start > args.budget_seconds:
                    break
                row = one(family, epsilon, index, args.n, args.draws, args.tune, args.approximation)
                rows.append(row)
                with log.open("a") as fh:
                    fh.write(json.dumps(row) + "\n")
                print(f"{family} eps={epsilon:g} #{index}: covered {row['covered']} in {row['seconds']:.1f} s", flush=True)
    write(summarise(rows), args, args.out)
    print((args.out / "calibration_pass_glm.md").read_text())


if __name__ == "__main__":
    main()
