"""Certification latency against the cost of compiling the model (issue 11, item 7).

A model of J independent Bernoulli factors (J containers of 50 records, one Beta(1, 1) rate each)
is certified by ``pymc_dp.make_private`` and, side by side in the same process, compiled by PyMC
(``model.logp_dlogp_function()``: the log-density and its gradient, what every NUTS run
compiles first). Each repetition builds a fresh model, so neither side reuses the other's
graphs; PyTensor's on-disk cache of C modules is warm for both after the first repetition
(the first is reported separately as "cold").

    python benchmarks/bench_certify.py            # J = 100, 3 repetitions
    python benchmarks/bench_certify.py --J 30 100 --reps 5
    PYTHONPATH=. python benchmarks/bench_certify.py --gallery rat_tumours radon   # gallery models (n = 300, radon 919)

Prints min / median / max of both times and of their ratio (the goal: ratio <= 0.1). With
``--gallery``, the models of ``examples/gallery`` at the gallery table's sizes, certified at total
epsilon 10 over 10 draws, each rebuilt for every repetition.
"""

from __future__ import annotations

import argparse
import logging
import statistics
import time
import warnings

import numpy as np


def build(J: int, seed: int):
    import pymc as pm

    rng = np.random.default_rng(seed)
    with pm.Model() as model:
        for j in range(J):
            xd = pm.Data(f"x{j}", rng.integers(0, 2, 50))
            p = pm.Beta(f"p{j}", 1, 1)
            pm.Bernoulli(f"obs{j}", p=p, observed=xd)
    return model


def once(J: int, seed: int) -> tuple[float, float]:
    import pymc_dp

    model = build(J, seed)
    domains = {f"x{j}": pymc_dp.Binary() for j in range(J)}
    t0 = time.perf_counter()
    pymc_dp.make_private(model, epsilon=float(J), draws=1, data=domains, ledger=None)
    certify = time.perf_counter() - t0
    t0 = time.perf_counter()
    model.logp_dlogp_function(ravel_inputs=True)
    compile_ = time.perf_counter() - t0
    return certify, compile_


def once_gallery(label: str) -> tuple[float, float]:
    """Certify the gallery model ``label`` (total epsilon 10, 10 draws) and compile its logp+grad."""
    import pymc_dp
    from examples.gallery.try_all import cases

    for name, mod, builder, n in cases():
        if name == label:
            model = builder(mod.make_data(n) if n else mod.make_data())
            t0 = time.perf_counter()
            pymc_dp.make_private(model, epsilon=10.0, draws=10, data=mod.DOMAINS, public=getattr(mod, "PUBLIC", ()),
                                 ledger=None)
            certify = time.perf_counter() - t0
            t0 = time.perf_counter()
            model.logp_dlogp_function(ravel_inputs=True)
            return certify, time.perf_counter() - t0
    raise SystemExit(f"no gallery model {label!r}")


def summary(values: list[float]) -> str:
    return f"min {min(values):7.2f}  median {statistics.median(values):7.2f}  max {max(values):7.2f}"


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--J", type=int, nargs="+", default=[100], help="numbers of factors")
    parser.add_argument("--reps", type=int, default=3, help="warm repetitions per J")
    parser.add_argument("--gallery", nargs="+", default=None, help="gallery models to certify instead")
    args = parser.parse_args(argv)
    warnings.filterwarnings("ignore")
    logging.getLogger("pymc").setLevel(logging.ERROR)
    cases = ([(label, lambda seed, label=label: once_gallery(label)) for label in args.gallery] if args.gallery
             else [(f"J = {J}", lambda seed, J=J: once(J, seed)) for J in args.J])
    for what, run in cases:
        cold = run(0)
        print(f"{what}: cold (first) run: certify {cold[0]:.2f} s, compile logp+grad {cold[1]:.2f} s, "
              f"ratio {cold[0] / cold[1]:.3f}")
        runs = [run(r + 1) for r in range(args.reps)]
        cert = [c for c, _ in runs]
        comp = [k for _, k in runs]
        ratio = [c / k for c, k in runs]
        print(f"{what}: {args.reps} warm runs")
        print(f"  certify (s)            {summary(cert)}")
        print(f"  compile logp+grad (s)  {summary(comp)}")
        print(f"  ratio certify/compile  {summary(ratio)}   (goal <= 0.1)")


if __name__ == "__main__":
    main()
