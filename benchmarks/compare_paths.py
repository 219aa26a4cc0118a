"""The two private paths side by side with the non-private posterior, at the epsilons people use.

For two iid models (Beta-Bernoulli coin, n = 1000; Normal with free mean and scale on
[-5, 5], n = 1000) and total epsilon in {0.1, 1, 10}:

* non-private: ``pm.sample`` on the model (2 chains x 1000 draws);
* ``noisy_statistics`` (noise-aware posterior on Laplace-noised sufficient statistics), repeated
  ``REPEATS`` times (fresh noise each time): how many non-private posterior sds its posterior
  mean lies from the non-private mean (median over repeats), and its posterior sd over the
  non-private sd (the price of the noise, which a calibrated posterior shows);
* ``make_private`` (posterior sampling, 10 draws at epsilon / 10 each): how many sds the mean of
  the released draws lies from the non-private mean, or the refusal.

Run from the repository root::

    python benchmarks/compare_paths.py     # writes results/compare_paths.{json,md}

About 10 minutes on 2 cores. Nothing is charged (``ledger=None``).
"""

from __future__ import annotations

import json
import logging
import os
import sys
import warnings

import numpy as np

sys.path.insert(0, os.path.abspath(os.path.join(os.path.dirname(__file__), "..")))

import pymc as pm  # noqa: E402

import pymc_dp  # noqa: E402

EPSILONS = (0.1, 1.0, 10.0)
REPEATS = 5
N = 1000
OUT = os.path.join(os.path.dirname(__file__), "results", "compare_paths")
SAMPLE = dict(draws=1000, tune=1000, chains=2, progressbar=False, compute_convergence_checks=False)


def coin():
    x = np.random.default_rng(0).binomial(1, 0.3, size=N)
    with pm.Model() as model:
        xd = pm.Data("x", x)
        p = pm.Beta("p", 2.0, 2.0)
        pm.Bernoulli("obs", p=p, observed=xd)
    return model, {"x": pymc_dp.Binary()}, ["p"]


def heights():
    y = np.clip(np.random.default_rng(0).normal(1.0, 2.0, size=N), -5, 5)
    with pm.Model() as model:
        yd = pm.Data("y", y)
        mu = pm.Normal("mu", 0.0, 5.0)
        sigma = pm.HalfNormal("sigma", 5.0)
        pm.Normal("lik", mu, sigma, observed=yd)
    return model, {"y": pymc_dp.Interval(-5.0, 5.0)}, ["mu", "sigma"]


def summary(post, names):
    return {k: (float(post[k].mean()), float(post[k].std())) for k in names}


def main():
    logging.getLogger("pymc").setLevel(logging.ERROR)
    warnings.filterwarnings("ignore")
    rows = []
    for build in (coin, heights):
        model, domains, names = build()
        with model:
            ref = summary(pm.sample(random_seed=1, **SAMPLE).posterior, names)
        for eps in EPSILONS:
            row = {"model": build.__name__, "epsilon": eps, "non_private": ref}
            gaps, ratios = {k: [] for k in names}, {k: [] for k in names}
            for r in range(REPEATS):
                mech = pymc_dp.noisy_statistics(build()[0], epsilon=eps, data=domains, ledger=None)
                # a discrete network gets NoisyCounts: exact iid draws, no MCMC keywords
                kw = SAMPLE if isinstance(mech, pymc_dp.NoisyStatistics) else {"draws": SAMPLE["draws"] * SAMPLE["chains"]}
                got = summary(mech.sample(random_seed=r, **kw).posterior, names)
                for k in names:
                    gaps[k].append(abs(got[k][0] - ref[k][0]) / ref[k][1])
                    ratios[k].append(got[k][1] / ref[k][1])
            row["noisy_statistics"] = {k: {"sds_apart_median": float(np.median(gaps[k])),
                                           "sd_ratio_median": float(np.median(ratios[k]))} for k in names}
            try:
                pmod = pymc_dp.make_private(build()[0], epsilon=eps, draws=10, data=domains, ledger=None)
                post = pmod.sample(random_seed=1).posterior
                row["make_private_10_draws"] = {k: {"sds_apart": abs(float(post[k].mean()) - ref[k][0]) / ref[k][1]} for k in names}
            except pymc_dp.PrivacyError as err:
                row["make_private_10_draws"] = {"refused": f"{type(err).__name__}: {str(err)[:160]}"}
            print(json.dumps(row), flush=True)
            rows.append(row)
    os.makedirs(os.path.dirname(OUT), exist_ok=True)
    with open(OUT + ".json", "w") as fh:
        json.dump(rows, fh, indent=1)
    lines = ["| model | ε | parameter | noisy statistics: sds apart (median of 5) | noisy statistics: sd / non-private sd | make_private, 10 draws: sds apart |",
             "|---|---|---|---|---|---|"]
    for row in rows:
        for k, v in row["noisy_statistics"].items():
            mp = row["make_private_10_draws"]
            mp_text = "refused" if "refused" in mp else f"{mp[k]['sds_apart']:.3g}"
            lines.append(f"| {row['model']} | {row['epsilon']:g} | {k} | {v['sds_apart_median']:.3g} | {v['sd_ratio_median']:.3g} | {mp_text} |")
    with open(OUT + ".md", "w") as fh:
        fh.write("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
