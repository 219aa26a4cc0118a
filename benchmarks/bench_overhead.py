"""Overhead of pymc_dp's release path against plain ``pm.sample`` on the same truncated model.

Both sides sample ``PrivateModel.model`` (the rewritten, truncated model) with the same
settings, in one run, alternating, after one warm-up call each so that compilation is cached;
the ratio is ``PrivateModel.sample(method="mcmc")`` time over ``pm.sample`` time (goal <= 1.05,
nothing excluded: the private side includes the budget ledger's reserve and commit (a SQLite file
in a temporary directory, ``synchronous=FULL``), thinning and building the released InferenceData).
The exact sampler is compared with NUTS in ``bench_exact.py``.

    python benchmarks/bench_overhead.py [--repeats 5] [--draws 1000] [--tune 1000]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np
import pymc as pm

import pymc_dp


def naive_bayes(n=1000, m=16, seed=0):
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 2, n)
    theta = rng.uniform(0.2, 0.8, (2, m))
    X = (rng.random((n, m)) < theta[y]).astype(int)
    with pm.Model() as model:
        Xd = pm.Data("X", X)
        yd = pm.Data("y", y)
        pi = pm.Beta("pi", 1, 1)
        pm.Bernoulli("cls", p=pi, observed=yd)
        th = pm.Beta("theta", 1, 1, shape=(2, m))
        pm.Bernoulli("feat", p=th[yd], observed=Xd)
    return model, {"X": pymc_dp.Binary(), "y": pymc_dp.Binary()}


def logistic(n=1000, d=5, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    X /= np.maximum(1.0, np.linalg.norm(X, axis=1, keepdims=True))
    y = (rng.random(n) < 1 / (1 + np.exp(-X @ np.linspace(-1, 1, d)))).astype(int)
    with pm.Model() as model:
        Xd = pm.Data("X", X)
        yd = pm.Data("y", y)
        w = pm.Normal("w", 0, 2, shape=d)
        b = pm.Normal("b", 0, 1)
        pm.Bernoulli("obs", logit_p=Xd @ w + b, observed=yd)
    return model, {"X": pymc_dp.Ball(1.0), "y": pymc_dp.Binary()}


def main():
    warnings.filterwarnings("ignore")
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--draws", type=int, default=1000)
    parser.add_argument("--tune", type=int, default=1000)
    args = parser.parse_args()
    chains = 2
    print(f"{'model':<12} {'plain pm.sample [s]':>20} {'PrivateModel.sample [s]':>24} {'ratio':>7}")
    tmp = tempfile.mkdtemp(prefix="pymc_dp_bench_")
    for name, build in (("naive_bayes", naive_bayes), ("logistic", logistic)):
        model, data = build()
        ledger = pymc_dp.Ledger(Path(tmp) / f"{name}.sqlite")
        pmod = pymc_dp.make_private(model, epsilon=20.0 * args.draws, draws=args.draws, data=data, ledger=ledger)
        common = dict(tune=args.tune, chains=chains, cores=1, progressbar=False, random_seed=1)

        def plain():
            pm.sample(
                draws=args.draws // chains, model=pmod.model, initvals=dict(pmod._initvals),
                compute_convergence_checks=False, **common,
            )

        def private():
            pmod.sample(method="mcmc", **common)

        plain(), private()  # compile both once
        t_plain, t_private = [], []
        for _ in range(args.repeats):
            t0 = time.perf_counter()
            plain()
            t_plain.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            private()
            t_private.append(time.perf_counter() - t0)
        a, b = statistics.median(t_plain), statistics.median(t_private)
        print(f"{name:<12} {a:>20.3f} {b:>24.3f} {b / a:>7.3f}")


if __name__ == "__main__":
    main()
