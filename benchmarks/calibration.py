"""Calibration of the noise-aware posterior, against the naive use of the same noisy statistics.

For each model and epsilon, ``--datasets`` datasets are generated with parameters drawn from
the model's prior (a public seed); each is released once with ``pymc_dp.noisy_statistics``
(no ledger: synthetic data), and the 90% equal-tailed credible interval of every parameter
is checked against the true value. An exact posterior covers the truth in 90% of datasets
when the truth is drawn from the prior; the naive use -- the released counts plugged in as if
they were the true counts (clipped to be non-negative), which is what Laplace on posterior
updates does -- shows what ignoring the noise costs.

Models: Beta-Bernoulli (20 coin flips, Beta(1, 1)) and naive Bayes (a binary class and
binary features, 4 of them, 100 records, Beta(1, 1) priors), both on the exact noisy-counts path;
linear regression with an unknown scale (1000 records, two covariates uniform on [-1, 1],
``alpha, beta ~ N(0, 0.3)``, ``sigma ~ HalfNormal(0.3)``, outcome domain [-3, 3]; a dataset with an
outcome outside it is drawn again, which happens for a few percent of draws with a large
``sigma``), on the regression path with ``pm.sample``
(one chain, 400 tuning steps and 400 draws). Its naive use plugs the noisy ``Z'Z, Z'y, y'y`` into
the Normal likelihood as if exact (``Z'Z`` clipped to be positive semi-definite, ``y'y`` raised to
the least value they allow). ``linear_regression_refined``: the same datasets' law released in
two stages (``refine=0.6``: 40% of epsilon on ``Z'Z, Z'y, y'y``, 60% on the residuals about the
first stage's fit, clipped to its band); its naive column plugs in the first stage only.

Run: ``PYTHONPATH=. python benchmarks/calibration.py [--datasets 200] [--out benchmarks/results]``;
``--models`` / ``--epsilons`` / ``--part NAME`` run a part (written as ``calibration_NAME.json``),
and ``--merge`` joins the parts in ``--out`` into ``calibration.json`` and ``calibration.md``;
``--resume`` goes on from a stopped run's checkpoint (every 5 datasets).
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np
import pymc as pm

import pymc_dp

EPSILONS = (0.5, 1.0, 5.0)
LEVEL = 0.9
DRAWS = 2000


def beta_bernoulli(rng, n=20):
    p = rng.beta(1.0, 1.0)
    x = rng.binomial(1, p, n)
    with pm.Model() as model:
        xd = pm.Data("x", x)
        pm.Bernoulli("obs", p=pm.Beta("p", 1.0, 1.0), observed=xd)
    return model, {"x": pymc_dp.Binary()}, {"p": np.array(p)}


def naive_bayes(rng, n=100, m=4):
    pi = rng.beta(1.0, 1.0)
    theta = rng.beta(1.0, 1.0, size=(2, m))
    y = rng.binomial(1, pi, n)
    X = (rng.random((n, m)) < theta[y]).astype(int)
    with pm.Model() as model:
        Xd, yd = pm.Data("X", X), pm.Data("y", y)
        pm.Bernoulli("cls", p=pm.Beta("pi", 1.0, 1.0), observed=yd)
        th = pm.Beta("theta", 1.0, 1.0, shape=(2, m))
        pm.Bernoulli("feat", p=th[yd], observed=Xd)
    return model, {"X": pymc_dp.Binary(), "y": pymc_dp.Binary()}, {"pi": np.array(pi), "theta": theta}


def linear_regression(rng, n=1000):
    # a dataset with an outcome outside the domain [-3, 3] is drawn again (parameters and data):
    # the event reads only the data, so p(theta | data) is unchanged on the datasets kept; the
    # noise-aware model's law of the data given theta ignores the conditioning, which matters only
    # in proportion to P(an outcome leaves [-3, 3] | theta) where the posterior has mass
    while True:
        alpha, beta, sigma = rng.normal(0, 0.3), rng.normal(0, 0.3, 2), abs(rng.normal(0, 0.3))
        X = rng.uniform(-1, 1, (n, 2))
        y = alpha + X @ beta + rng.normal(0, sigma, n)
        if np.all(np.abs(y) <= 3):
            break
    with pm.Model() as model:
        Xd, yd = pm.Data("X", X), pm.Data("y", y)
        a = pm.Normal("alpha", 0, 0.3)
        b = pm.Normal("beta", 0, 0.3, shape=2)
        s = pm.HalfNormal("sigma", 0.3)
        pm.Normal("lik", a + Xd @ b, s, observed=yd)
    return model, {"X": pymc_dp.Box(-1, 1), "y": pymc_dp.Interval(-3, 3)}, {"alpha": np.array(alpha), "beta": beta, "sigma": np.array(sigma)}


MODELS = {"beta_bernoulli": beta_bernoulli, "naive_bayes": naive_bayes, "linear_regression": linear_regression,
          "linear_regression_refined": linear_regression}
#: release options per model: the refined regression is released in two stages (``refine=``)
OPTIONS = {"linear_regression_refined": {"refine": 0.6}}
MCMC = {"draws": 400, "tune": 400, "chains": 1, "progressbar": False}


def naive_linear_draws(mech, seed) -> dict[str, np.ndarray]:
    """The noise-unaware posterior of the regression: the noisy statistics as if exact."""
    import pytensor.tensor as pt

    r, n = mech.released, mech.rows["y"]
    S = np.array([[n, r["sum(X[0])"], r["sum(X[1])"]],
                  [r["sum(X[0])"], r["sum(X[0]^2)"], r["sum(X[0]*X[1])"]],
                  [r["sum(X[1])"], r["sum(X[0]*X[1])"], r["sum(X[1]^2)"]]])
    vals, vecs = np.linalg.eigh(S)
    S = (vecs * np.maximum(vals, 1e-6 * n)) @ vecs.T
    Szy = np.array([r["sum(y)"], r["sum(X[0]*y)"], r["sum(X[1]*y)"]])
    Syy = max(r["sum(y^2)"], float(Szy @ np.linalg.solve(S, Szy)) + 1e-6)
    with pm.Model():
        a = pm.Normal("alpha", 0, 0.3)
        b = pm.Normal("beta", 0, 0.3, shape=2)
        s = pm.HalfNormal("sigma", 0.3)
        w = pt.concatenate([pt.reshape(a, (1,)), b])
        pm.Potential("lik", -n * pt.log(s) - (Syy - 2 * w @ Szy + w @ S @ w) / (2 * s**2))
        idata = pm.sample(**MCMC, random_seed=seed, compute_convergence_checks=False)
    return {k: idata.posterior[k].values.reshape(MCMC["draws"], *idata.posterior[k].shape[2:]) for k in ("alpha", "beta", "sigma")}


def naive_draws(mech, draws: int, rng) -> dict[str, np.ndarray]:
    """The noise-unaware posterior: released counts as if exact (clipped at 0), Beta(a + ones, b + zeros).

    A cell that releases its ones alone has ``n - ones`` zeros (its trials are public)."""
    released = dict(zip(mech.entries, mech.released.values()))
    out = {}
    for name, p in mech.net.params.items():
        a = p["prior"].copy()
        for cell in range(p["cells"]):
            if (name, cell, 0) not in released:
                continue  # no record reaches this cell: the prior
            if (name, cell, 1) in released:  # the whole table: both counts, noisy
                ones, zeros = max(released[(name, cell, 0)], 0), max(released[(name, cell, 1)], 0)
            else:  # the ones alone, of the public n trials
                ones = min(max(released[(name, cell, 0)], 0), mech.n)
                zeros = mech.n - ones
            a[cell] += (ones, zeros)
        out[name] = rng.beta(a[:, 0], a[:, 1], size=(draws, p["cells"])).reshape(draws, *p["shape"])
    return out


def covered(draws: np.ndarray, truth: np.ndarray) -> np.ndarray:
    lo, hi = np.quantile(draws, [(1 - LEVEL) / 2, (1 + LEVEL) / 2], axis=0)
    return (lo <= truth) & (truth <= hi)


def run(datasets: int, seed: int = 0, models=tuple(MODELS), epsilons=EPSILONS, checkpoint=None, resume=None) -> dict:
    """Coverage per model and epsilon; ``checkpoint(results)`` is called every 5 datasets with
    the rows so far (a long run keeps what it measured if it is stopped). ``resume`` (the
    results of a stopped run) supplies the per-dataset outcomes already measured: dataset ``d``
    is seeded by ``(seed, d, epsilon, model)``, so the run goes on at the first one missing."""
    results = {}
    for model_name in models:
        build = MODELS[model_name]
        for eps in epsilons:
            t0 = time.perf_counter()
            done = ((resume or {}).get(model_name, {}).get(str(eps)) or {}).get("per_dataset")
            hits = {k: list(v) for k, v in done["hits"].items()} if done else {"noise_aware": [], "naive": []}
            widths = {k: list(v) for k, v in done["widths"].items()} if done else {"noise_aware": [], "naive": []}
            divergent = list(done.get("divergent", [])) if done else []
            if done:
                print(f"{model_name} eps={eps:g}: resuming after {len(hits['noise_aware'])} datasets", flush=True)
            for d in range(len(hits["noise_aware"]), datasets):
                rng = np.random.default_rng([seed, d, int(eps * 1000), len(model_name)])
                model, domains, truth = build(rng)
                mech = pymc_dp.noisy_statistics(model, epsilon=eps, data=domains, ledger=None, **OPTIONS.get(model_name, {}))
                if model_name.startswith("linear_regression"):
                    draw_seed = int(rng.integers(2**31))
                    idata = mech.sample(random_seed=draw_seed, **MCMC)
                    post = idata.posterior
                    divergent.append(int(idata.sample_stats.diverging.sum()))
                    aware = {k: post[k].values.reshape(MCMC["draws"], *np.shape(v)) for k, v in truth.items()}
                    plain = naive_linear_draws(mech, draw_seed)
                else:
                    post = mech.sample(DRAWS, random_seed=rng, chains=1).posterior
                    aware = {k: post[k].values.reshape(DRAWS, *np.shape(v)) for k, v in truth.items()}
                    plain = naive_draws(mech, DRAWS, rng)
                for label, dr in (("noise_aware", aware), ("naive", plain)):
                    hits[label].append(np.concatenate([covered(dr[k], truth[k]).reshape(-1) for k in truth]))
                    widths[label].append(np.concatenate([np.ptp(np.quantile(dr[k], [0.05, 0.95], axis=0), axis=0).reshape(-1) for k in truth]))
                if checkpoint is not None and (d + 1) % 5 == 0 and d + 1 < datasets:
                    checkpoint({**results, model_name: {**results.get(model_name, {}), str(eps): _row(hits, widths, t0, divergent)}})
            row = _row(hits, widths, t0, divergent)
            results.setdefault(model_name, {})[str(eps)] = row
            print(f"{model_name} eps={eps:g}: noise-aware {row['noise_aware']['coverage']:.3f}, "
                  f"naive {row['naive']['coverage']:.3f} ({row['seconds']:.0f} s)", flush=True)
    return results


def _row(hits, widths, t0, divergent) -> dict:
    """The coverage summary of the datasets so far."""
    row = {}
    for label in hits:
        h = np.asarray(hits[label], float)  # (datasets, parameters)
        row[label] = {
            "coverage": float(h.mean()),
            "coverage_se": float(h.mean(axis=1).std(ddof=1) / np.sqrt(len(h))),
            "coverage_min_parameter": float(h.mean(axis=0).min()),
            "coverage_max_parameter": float(h.mean(axis=0).max()),
            "mean_width": float(np.mean(widths[label])),
        }
    row["parameters"] = int(np.asarray(hits["noise_aware"]).shape[1])
    row["datasets"] = len(hits["noise_aware"])
    row["seconds"] = time.perf_counter() - t0
    if divergent:  # NUTS datasets: how many of them had a divergent transition
        row["datasets_with_divergences"] = int(np.count_nonzero(divergent))
    # the outcome of every dataset, so that a stopped run can be resumed (--resume)
    row["per_dataset"] = {"hits": {k: np.asarray(v, int).tolist() for k, v in hits.items()},
                          "widths": {k: np.asarray(v, float).tolist() for k, v in widths.items()},
                          "divergent": [int(v) for v in divergent]}
    return row


def markdown(results: dict, datasets: int) -> str:
    lines = ["# Calibration of the noise-aware posterior", "",
             "Datasets per model and epsilon as stated, parameters drawn from the prior; coverage of the "
             f"{LEVEL:.0%} equal-tailed credible interval, averaged over datasets and parameters (± SE over "
             "datasets; min-max over parameters in brackets), and the mean interval width. Written by "
             "`benchmarks/calibration.py`.", "",
             "| model | epsilon | datasets | parameters | noise-aware coverage | naive coverage | noise-aware width | naive width |",
             "|---|---|---|---|---|---|---|---|"]
    for model_name, rows in results.items():
        for eps, r in rows.items():
            a, n = r["noise_aware"], r["naive"]
            lines.append(
                f"| {model_name} | {float(eps):g} | {r.get('datasets', datasets)} | {r['parameters']} | {a['coverage']:.3f} ± {a['coverage_se']:.3f} "
                f"[{a['coverage_min_parameter']:.2f}-{a['coverage_max_parameter']:.2f}] | {n['coverage']:.3f} ± "
                f"{n['coverage_se']:.3f} [{n['coverage_min_parameter']:.2f}-{n['coverage_max_parameter']:.2f}] | "
                f"{a['mean_width']:.3f} | {n['mean_width']:.3f} |")
    lines.append("")
    return "\n".join(lines)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--datasets", type=int, default=200)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--models", nargs="*", default=list(MODELS), choices=list(MODELS))
    ap.add_argument("--epsilons", nargs="*", type=float, default=list(EPSILONS))
    ap.add_argument("--part", default=None, help="write calibration_PART.json only (join with --merge)")
    ap.add_argument("--merge", action="store_true", help="join the calibration_*.json parts in --out")
    ap.add_argument("--resume", action="store_true", help="go on from the per-dataset outcomes in the output file")
    ap.add_argument("--out", default=str(Path(__file__).parent / "results"))
    args = ap.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    if args.merge:
        results, meta = {}, None
        for part in sorted(out.glob("calibration_*.json")):
            got = json.loads(part.read_text())
            meta = meta or got["meta"]
            for model_name, rows in got["results"].items():
                results.setdefault(model_name, {}).update(rows)
        order = {m: {e: results[m][e] for e in sorted(results[m], key=float)} for m in MODELS if m in results}
        (out / "calibration.json").write_text(json.dumps({"meta": meta, "results": order}, indent=1))
        (out / "calibration.md").write_text(markdown(order, meta["datasets"]))
        print(markdown(order, meta["datasets"]))
        return
    t0 = time.perf_counter()
    name = f"calibration_{args.part}.json" if args.part else "calibration.json"

    def write(results):
        meta = {"datasets": args.datasets, "seed": args.seed, "epsilons": list(args.epsilons), "level": LEVEL, "draws": DRAWS,
                "mcmc": MCMC, "seconds": time.perf_counter() - t0, "pymc_dp": pymc_dp.__version__}
        (out / name).write_text(json.dumps({"meta": meta, "results": results}, indent=1))

    previous = json.loads((out / name).read_text())["results"] if args.resume and (out / name).exists() else None
    results = run(args.datasets, args.seed, args.models, tuple(args.epsilons), checkpoint=write, resume=previous)
    write(results)
    if not args.part:
        (out / "calibration.md").write_text(markdown(results, args.datasets))
    print(markdown(results, args.datasets))


if __name__ == "__main__":
    main()
