"""Issue 33 item 4: the noisy-statistics path on a 10-feature linear regression, before and after
the exact joint bound of the released vector (``docs/theory/joint_sensitivity.md``).

Data: scikit-learn's bundled diabetes data (442 patients, offline), **all 10 features**, mapped
onto ``[-1, 1]`` by the public bounds of ``compare_diffprivlib.py`` (features ``[-0.2, 0.2]``,
target ``[0, 400]``; clipped, read from no data), a fixed 70/30 split. Model: ``intercept ~
N(0, 1)``, ``w ~ N(0, 1)`` (10), ``sigma ~ HalfNormal(1)``, ``y ~ N(intercept + X w, sigma)``,
domains ``Box(-1, 1)`` and ``Interval(-1, 1)``: 77 released statistics.

Per total epsilon in {1, 2, 5}, ``REPEATS`` releases of ``pymc_dp.noisy_statistics`` each:

* **before**: the joint bound of the interval branch and bound over pairs of records alone (the
  code before this change: K = 69 of d = 77);
* **after**: the exact reduction (K = 44.2).

Paired (``PAIRED=1``, the default): per repeat, both variants add ``scale_j e_j`` with the *same*
seeded standard Laplace draws ``e`` (NumPy, a benchmark on public data, nothing published), so
the difference in MSE is the joint bound's alone; ``PAIRED=0`` releases through OpenDP.

The point estimate is the noise-aware posterior mean (1 chain, ``DRAWS`` draws after ``TUNE``);
the metric is the test MSE on the ``[-1, 1]`` target scale, beside the non-private least-squares
fit and the constant 0 (the target's public midpoint). Nothing is charged (``ledger=None``).

Run from the repository root::

    python benchmarks/linear_joint_bound.py    # writes results/linear_joint_bound.{json,md}
    python benchmarks/linear_joint_bound.py --standardized   # results/linear_joint_bound_standardized.json

``--standardized``: ``pymc_dp.standardize`` on every column (the outcome included) with a fifth
of the total epsilon in {2, 5}, then the release on the standardised data, with standardize's
released sums observed in the noise-aware model ("used", this change) or not ("ignored").
"""

from __future__ import annotations

import json
import logging
import os
import sys
import time
import warnings

import numpy as np

sys.path.insert(0, os.path.abspath(os.path.join(os.path.dirname(__file__), "..")))

import pymc as pm  # noqa: E402

import pymc_dp  # noqa: E402
from pymc_dp.mechanisms import sensitivity  # noqa: E402

EPSILONS = (1.0, 2.0, 5.0)
REPEATS = int(os.environ.get("REPEATS", 2))
#: "before" and "after" share one standard Laplace draw per repeat (NumPy, seeded) instead of two
#: independent OpenDP draws: the difference is then the joint bound's alone
PAIRED = os.environ.get("PAIRED", "1") == "1"
DRAWS, TUNE = 300, 300
OUT = os.path.join(os.path.dirname(__file__), "results", "linear_joint_bound")


def _to_unit(x, lo, hi):
    return np.clip(2.0 * (np.asarray(x, float) - lo) / (hi - lo) - 1.0, -1.0, 1.0)


def diabetes():
    from sklearn.datasets import load_diabetes

    data = load_diabetes()
    X, y = _to_unit(data.data, -0.2, 0.2), _to_unit(data.target, 0.0, 400.0)
    order = np.random.default_rng(0).permutation(len(y))
    cut = int(0.7 * len(y))
    return X[order[:cut]], y[order[:cut]], X[order[cut:]], y[order[cut:]]


def model(X, y):
    with pm.Model() as m:
        Xd, yd = pm.Data("X", X), pm.Data("y", y)
        a = pm.Normal("intercept", 0.0, 1.0)
        w = pm.Normal("w", 0.0, 1.0, shape=X.shape[1])
        pm.Normal("obs", mu=a + Xd @ w, sigma=pm.HalfNormal("sigma", 1.0), observed=yd)
    return m, {"X": pymc_dp.Box(-1.0, 1.0), "y": pymc_dp.Interval(-1.0, 1.0)}


def _pair_search_only(terms, spans, weights, lo, hi, radius, tol, max_rounds, max_boxes):
    """The joint bound as it was before the exact reduction (the pair search alone)."""
    return sensitivity._pair_search(terms, spans, weights, lo, hi, radius, tol, max_rounds, max_boxes)


def release(m, domains, eps, variant, Xte, yte, seed, standard=None):
    """One release; with ``standard`` (a vector of standard Laplace draws, one per statistic) the
    noise is ``scale_j * standard_j`` instead of OpenDP's, so that "before" and "after" see the
    same draw (a paired comparison; a benchmark on public data, nothing is published)."""
    exact = sensitivity._branch_and_bound
    sensitivity._JOINT_CACHE.clear()
    if variant == "before":
        sensitivity._branch_and_bound = _pair_search_only
    try:
        mech = pymc_dp.noisy_statistics(m, epsilon=eps, data=domains, ledger=None)
    finally:
        sensitivity._branch_and_bound = exact
        sensitivity._JOINT_CACHE.clear()
    if standard is not None:
        true = mech._true_statistics(mech._values)
        names = [s.name for _, s in mech.statistics]
        mech.released = {k: float(true[k] + mech.noise_scales[k] * e) for k, e in zip(names, standard)}
    t = time.time()
    idata = mech.sample(DRAWS, tune=TUNE, chains=1, random_seed=seed)
    post = idata.posterior
    a = float(post["intercept"].mean())
    w = post["w"].mean(("chain", "draw")).values
    sig = post["sigma"].values.ravel()
    return {"epsilon": eps, "variant": variant, "K": mech.joint["K"], "mse": float(np.mean((a + Xte @ w - yte) ** 2)),
            "intercept": a, "sigma_mean": float(sig.mean()), "sigma_q05": float(np.quantile(sig, 0.05)),
            "seconds": time.time() - t}


def standardized_release(X, y, eps, Xte, yte, seed):
    """``standardize`` (a fifth of the total epsilon, every column, the outcome included) then
    ``noisy_statistics`` (the rest), released once; the noise-aware posterior with standardize's
    released sums observed ("used") and without ("ignored": the code before this change), on the
    same two releases (paired). MSE on the ``[-1, 1]`` target scale."""
    from pymc_dp.mechanisms.regression import NoisyRegression

    domains = {"X": pymc_dp.Box(-1.0, 1.0), "y": pymc_dp.Interval(-1.0, 1.0)}
    std = pymc_dp.standardize({"X": X, "y": y}, data=domains, epsilon=0.2 * eps, ledger=None)
    m, _ = model(std.values["X"], std.values["y"])
    mech = pymc_dp.noisy_statistics(m, epsilon=0.8 * eps, data=std.data, ledger=None)
    out = []
    for variant in ("ignored", "used"):
        observe = NoisyRegression._observe_preprocessing
        if variant == "ignored":
            NoisyRegression._observe_preprocessing = lambda self, *args: ""
        t = time.time()
        try:
            idata = mech.sample(DRAWS, tune=TUNE, chains=1, random_seed=seed)
        finally:
            NoisyRegression._observe_preprocessing = observe
        post = idata.posterior
        a = float(post["intercept"].mean())
        w = post["w"].mean(("chain", "draw")).values
        pred = std.center["y"][0] + std.scale["y"][0] * (a + ((Xte - std.center["X"]) / std.scale["X"]) @ w)
        out.append({"epsilon": eps, "variant": variant, "mse": float(np.mean((pred - yte) ** 2)),
                    "centre_error": float(std.center["y"][0] - y.mean()), "seconds": time.time() - t})
    return out


def main_standardized():
    logging.getLogger("pymc").setLevel(logging.ERROR)
    warnings.filterwarnings("ignore")
    X, y, Xte, yte = diabetes()
    rows, start = [], time.time()
    for eps in (2.0, 5.0):
        for r in range(REPEATS):
            for row in standardized_release(X, y, eps, Xte, yte, seed=100 * r + int(eps)):
                rows.append({**row, "repeat": r})
                print(json.dumps(rows[-1]), flush=True)
    with open(OUT + "_standardized.json", "w") as fh:
        json.dump({"rows": rows, "repeats": REPEATS, "wall_seconds": time.time() - start}, fh, indent=1)


def main():
    logging.getLogger("pymc").setLevel(logging.ERROR)
    warnings.filterwarnings("ignore")
    X, y, Xte, yte = diabetes()
    m, domains = model(X, y)
    Z = np.column_stack([np.ones(len(y)), X])
    coef = np.linalg.lstsq(Z, y, rcond=None)[0]
    ref = {"ols_mse": float(np.mean((coef[0] + Xte @ coef[1:] - yte) ** 2)), "zero_mse": float(np.mean(yte**2)),
           "ols_resid_sd": float(np.std(y - Z @ coef))}
    rows, start = [], time.time()
    for eps in EPSILONS:
        for r in range(REPEATS):
            standard = np.random.default_rng(1000 * r + int(eps)).laplace(0.0, 1.0, 77) if PAIRED else None
            for variant in ("before", "after"):
                rows.append({**release(m, domains, eps, variant, Xte, yte, seed=100 * r + int(eps), standard=standard),
                             "repeat": r, "paired": PAIRED})
                print(json.dumps(rows[-1]), flush=True)
    out = {"reference": ref, "rows": rows, "repeats": REPEATS, "draws": DRAWS, "tune": TUNE,
           "wall_seconds": time.time() - start}
    with open(OUT + ".json", "w") as fh:
        json.dump(out, fh, indent=1)
    lines = ["# Noisy statistics on a 10-feature linear regression: joint bound before / after (issue 33 item 4)", "",
             f"Diabetes, all 10 features, n = {len(y)} train / {len(yte)} test, target on [-1, 1]. {REPEATS} releases "
             f"per cell (1 chain, {DRAWS} draws after {TUNE}); wall time {out['wall_seconds'] / 60:.1f} min on 2 shared cores.",
             f"Non-private least squares: test MSE {ref['ols_mse']:.4f} (residual sd {ref['ols_resid_sd']:.3f}); "
             f"predicting 0: {ref['zero_mse']:.4f}.", "",
             "| total ε | K before | K after | test MSE before (mean, each) | test MSE after (mean, each) | σ mean after |",
             "|---|---|---|---|---|---|"]
    for eps in EPSILONS:
        b = [r for r in rows if r["epsilon"] == eps and r["variant"] == "before"]
        a = [r for r in rows if r["epsilon"] == eps and r["variant"] == "after"]

        def fmt(rs):
            each = ", ".join("%.3f" % r["mse"] for r in rs)
            return f"{np.mean([r['mse'] for r in rs]):.4f} ({each})"
        lines.append(f"| {eps:g} | {b[0]['K']:.1f} | {a[0]['K']:.1f} | {fmt(b)} | {fmt(a)} | "
                     f"{np.mean([r['sigma_mean'] for r in a]):.3f} |")
    with open(OUT + ".md", "w") as fh:
        fh.write("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main_standardized() if "--standardized" in sys.argv else main()
