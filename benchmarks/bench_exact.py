"""Exact conjugate sampling against NUTS on the same truncated model: effective samples per second.

Naive Bayes (``naive_bayes()`` of bench_overhead.py: 16 binary features, n = 1000) is made
private with one budget. In one run, on the same truncated model ``PrivateModel.model``:

(a) exact, through the public API: ``PrivateModel.sample(method="exact")`` (the conjugate plan is
    built once and cached by the PrivateModel; the release is built each time), and the plan
    alone: ``conjugate_plan`` (timed separately) then ``plan.sample`` of chains x draws iid draws;
(b) NUTS, through the public API: ``PrivateModel.sample(method="mcmc")``, chains x (tune +
    draws), cores=1, after one warm-up call so that compilation is cached.

No ledger is used (``ledger=None``): the benchmark measures sampling, not bookkeeping.

Effective sample size is ArviZ's bulk ESS (``az.ess``), the minimum over every scalar parameter.
ESS/s of the exact sampler is reported against the sampling time alone and against plan
construction + sampling; the speed-up is exact ESS/s over NUTS ESS/s (goal >= 100).

    python benchmarks/bench_exact.py [--n 1000] [--features 16] [--draws 1000] [--tune 1000]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
import warnings
from pathlib import Path

import arviz as az
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_overhead import naive_bayes  # noqa: E402

import pymc_dp  # noqa: E402
from pymc_dp.exact import conjugate_plan  # noqa: E402


def min_bulk_ess(posterior: dict[str, np.ndarray], chains: int) -> float:
    """Minimum bulk ESS over all scalar parameters; arrays are (chains * draws, *shape)."""
    data = {k: v.reshape(chains, -1, *v.shape[1:]) for k, v in posterior.items()}
    ess = az.ess(az.from_dict(posterior=data), method="bulk")
    return float(min(float(ess[k].min()) for k in ess.data_vars))


def main():
    warnings.filterwarnings("ignore")
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=1000, help="records")
    parser.add_argument("--features", type=int, default=16, help="binary features")
    parser.add_argument("--chains", type=int, default=2)
    parser.add_argument("--draws", type=int, default=1000, help="draws per chain (NUTS); the exact sampler draws chains x draws")
    parser.add_argument("--tune", type=int, default=1000)
    parser.add_argument("--epsilon-per-draw", type=float, default=20.0, help="privacy budget of one draw")
    parser.add_argument("--repeats", type=int, default=5, help="repeats of the exact path (median reported)")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()

    total = args.chains * args.draws
    model, data = naive_bayes(n=args.n, m=args.features)
    pmod = pymc_dp.make_private(model, epsilon=args.epsilon_per_draw * total, draws=total, data=data, ledger=None)
    print(f"naive Bayes, n={args.n}, {args.features} features, epsilon per draw {args.epsilon_per_draw:g}")
    for f in pmod.certificate.factors:
        print(f"  {f.name}: {', '.join(f.truncation)}")

    # (a) exact ---------------------------------------------------------------------------
    t_plan, t_sample, ess_exact = [], [], []
    for r in range(args.repeats):
        t0 = time.perf_counter()
        plan = conjugate_plan(pmod.model, pmod._constraints, pmod.domains)
        t1 = time.perf_counter()
        draws = plan.sample(total, np.random.default_rng(args.seed + r))
        t2 = time.perf_counter()
        t_plan.append(t1 - t0)
        t_sample.append(t2 - t1)
        ess_exact.append(min_bulk_ess(draws, args.chains))
    tp, ts = statistics.median(t_plan), statistics.median(t_sample)
    ess_a = statistics.median(ess_exact)

    def released_ess(idata) -> float:
        post = {k: np.asarray(idata.posterior[k].values) for k in plan.variables}
        return min_bulk_ess({k: v.reshape(-1, *v.shape[2:]) for k, v in post.items()}, args.chains)

    pmod.sample(method="exact", chains=args.chains, random_seed=args.seed)  # builds and caches the plan
    t_api, ess_api = [], []
    for r in range(args.repeats):
        t0 = time.perf_counter()
        idata = pmod.sample(method="exact", chains=args.chains, random_seed=args.seed + r)
        t_api.append(time.perf_counter() - t0)
        ess_api.append(released_ess(idata))
    ta, ess_c = statistics.median(t_api), statistics.median(ess_api)

    # (b) NUTS ----------------------------------------------------------------------------
    def nuts(seed):
        return pmod.sample(
            method="mcmc", tune=args.tune, chains=args.chains, cores=1, random_seed=seed, progressbar=False
        )

    nuts(args.seed)  # warm-up: compilation cached
    t0 = time.perf_counter()
    idata = nuts(args.seed + 1)
    t_nuts = time.perf_counter() - t0
    ess_b = released_ess(idata)

    rate_a, rate_a_total, rate_b = ess_a / ts, ess_a / (tp + ts), ess_b / t_nuts
    rate_api = ess_c / ta
    rows = [
        ('sample(method="exact")', ta, ess_c, rate_api),
        ("  plan.sample alone", ts, ess_a, rate_a),
        ("  plan + plan.sample", tp + ts, ess_a, rate_a_total),
        ('sample(method="mcmc")', t_nuts, ess_b, rate_b),
    ]
    print(f"\n{total} draws ({args.chains} x {args.draws}; NUTS also {args.chains} x {args.tune} tune)")
    print(f"exact plan construction: {tp * 1e3:.1f} ms (median of {args.repeats})")
    print(f"{'method':<24} {'time [s]':>10} {'min bulk ESS':>13} {'ESS/s':>12}")
    for name, t, ess, rate in rows:
        print(f"{name:<24} {t:>10.4f} {ess:>13.0f} {rate:>12.0f}")
    print(
        f"\nESS/s ratio, exact over NUTS (goal >= 100): {rate_api / rate_b:.0f}x through PrivateModel.sample, "
        f"{rate_a / rate_b:.0f}x plan.sample alone, {rate_a_total / rate_b:.0f}x plan construction included"
    )


if __name__ == "__main__":
    main()
