"""Cost of the refutation check (issue 32, item 2) against compiling the model's logp and gradient.

Every gallery model that certifies (total epsilon 10 over 10 draws, ``examples/gallery`` at the
gallery table's sizes) is certified once; then, side by side in the same process, the standard
refutation check (:func:`pymc_dp.refutation.refute`: its compilation included, nothing cached
between calls) is timed against PyMC's ``model.logp_dlogp_function()`` on a freshly built copy of
the model (what every NUTS run compiles first). The goal is a ratio <= 0.2.

    PYTHONPATH=. python benchmarks/bench_refutation.py                    # every gallery model, 3 reps
    PYTHONPATH=. python benchmarks/bench_refutation.py glm_logistic radon --reps 2
    PYTHONPATH=. python benchmarks/bench_refutation.py --thorough         # the fuzzer's budget, for information

Prints per model the median refutation time, the median compile time, their ratio, the probes and
the largest measured/claimed ratio; ``--json PATH`` writes the same rows.
"""

from __future__ import annotations

import argparse
import json
import logging
import statistics
import time
import warnings


def measure(label: str, reps: int, effort: str) -> dict:
    import pymc_dp
    from examples.gallery.try_all import DRAWS, EPSILON, cases
    from pymc_dp.refutation import refute

    for name, mod, builder, n in cases():
        if name != label:
            continue
        data = mod.make_data(n) if n else mod.make_data()
        try:
            cert = pymc_dp.certify(builder(data), epsilon=EPSILON, draws=DRAWS, data=mod.DOMAINS,
                                   public=getattr(mod, "PUBLIC", ()))
        except pymc_dp.PrivacyError as err:
            return {"model": label, "certified": False, "refused": f"{type(err).__name__}"}
        refute_s, compile_s = [], []
        for _ in range(reps):
            t0 = time.perf_counter()
            report = refute(cert, effort=effort)
            refute_s.append(time.perf_counter() - t0)
            fresh = builder(data)
            t0 = time.perf_counter()
            fresh.logp_dlogp_function(ravel_inputs=True)
            compile_s.append(time.perf_counter() - t0)
        ratios = [r / c for r, c in zip(refute_s, compile_s)]
        return {
            "model": label, "certified": True, "refute_s": statistics.median(refute_s),
            "compile_s": statistics.median(compile_s), "ratio": statistics.median(ratios), "ratio_max": max(ratios),
            "factors": [{"name": f.name, "bound": f.bound, "points": f.points, "record_pairs": f.record_pairs,
                         "elementwise": f.elementwise, "measured_over_claimed": f.ratio} for f in report.factors],
            "skipped": [list(s) for s in report.skipped],
        }
    raise SystemExit(f"no gallery model {label!r}")


def main(argv=None) -> None:
    from examples.gallery.try_all import cases

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("models", nargs="*", help="gallery models (default: all)")
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--thorough", action="store_true", help="time effort='thorough' instead")
    parser.add_argument("--json", default=None, help="write the rows to this file")
    args = parser.parse_args(argv)
    warnings.filterwarnings("ignore")
    logging.getLogger("pymc").setLevel(logging.ERROR)
    labels = args.models or [c[0] for c in cases()]
    rows = []
    print(f"{'model':<36} {'refute s':>9} {'compile s':>10} {'ratio':>7}  probes (points x record pairs, measured/claimed)")
    for label in labels:
        row = measure(label, args.reps, "thorough" if args.thorough else "standard")
        rows.append(row)
        if not row["certified"]:
            print(f"{label:<36} refused ({row['refused']}): nothing to check", flush=True)
            continue
        probes = "; ".join(f"{f['name']}: {f['points']} x {f['record_pairs']}, {f['measured_over_claimed']:.3g}"
                           for f in row["factors"])
        skipped = "".join(f"; {n} skipped ({why})" for n, why in row["skipped"])
        print(f"{label:<36} {row['refute_s']:9.3f} {row['compile_s']:10.3f} {row['ratio']:7.3f}  {probes}{skipped}",
              flush=True)
    done = [r["ratio"] for r in rows if r["certified"]]
    if done:
        print(f"largest median ratio {max(done):.3f} (goal <= 0.2)")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(rows, fh, indent=1)


if __name__ == "__main__":
    main()
