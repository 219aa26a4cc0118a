"""pymc_dp against diffprivlib, side by side at equal total epsilon, on data shipped inside a package.

Issue 12 asks how a release of pymc_dp compares with a peer that PyMC users might choose
instead. The peer is IBM's diffprivlib: ``LogisticRegression`` (objective perturbation,
Chaudhuri et al. 2011) and ``LinearRegression`` (the functional mechanism, Zhang et al. 2012).
The data are scikit-learn's bundled datasets, read offline:

* **logistic**: breast cancer (569 tumours, benign vs malignant). Three features: mean radius,
  mean texture, mean smoothness. Their public bounds are the minimum and maximum that
  scikit-learn's dataset description documents (``DESCR``, "Summary Statistics").
* **linear**: diabetes (442 patients, disease progression after a year). Three features: bmi, bp,
  s5. The public bounds are declared: features in [-0.2, 0.2] (scikit-learn ships them centred
  and scaled; every value lies inside), target in [0, 400].

Preprocessing is counted. Both libraries get the same public map of each column onto [-1, 1],
computed from the public bounds alone. It reads no data, so it costs no epsilon. Nothing is
estimated from the data before the private fit (no centring, no scaling); a release that needed
that would have to spend epsilon on it.

Per total epsilon in {0.5, 1, 2, 5, 10}, on a fixed 70/30 train/test split:

* **non-private**: PyMC posterior mean (4 chains x 1000 draws) and scikit-learn's estimator;
* **pymc_dp**: ``make_private`` with ``draws=1`` (the whole epsilon on one draw) and with
  ``draws=10`` (epsilon / 10 per draw, point estimate the mean of the 10 draws), ``unit="record"``,
  repeated ``REPEATS`` times with fresh draws (certified once per epsilon: the certificate is
  public);
* **pymc_dp, noisy statistics** (linear only; the path ``pymc_dp.recommend`` recommends there):
  ``noisy_statistics`` releases ``Z'Z, Z'y, y'y`` once at the whole epsilon, and the point estimate
  is the noise-aware posterior mean (2 chains x 500 draws, post-processing), repeated ``REPEATS``
  times;
* **pymc_dp, standardised** (logistic only): ``pymc_dp.standardize`` spends ``PRE_SHARE`` of the
  total epsilon (at most 1) on private column means and sds, the model is fitted on the
  standardised features, and ``make_private`` with ``draws=1`` spends the rest; preprocessing is
  counted in the total. The coefficients are mapped back to the unit scale for the ``sds`` metric.
  Repeated ``REPEATS`` times (each repeat estimates afresh, so it certifies afresh);
* **diffprivlib**: the estimator at the same epsilon, repeated ``REPEATS_DPL`` times.

The metrics are test accuracy (logistic) or test RMSE on the target's scale (linear), and the
largest distance of any coefficient from the non-private posterior mean, in posterior sds. Each
is a median over repeats, with the 10%–90% range.

Run from the repository root (``pip install -e ".[bench]"`` first)::

    python benchmarks/compare_diffprivlib.py     # writes results/compare_diffprivlib.{json,md}
    python benchmarks/compare_diffprivlib.py --add-noisy   # only the noisy-statistics column, into the saved results
    python benchmarks/compare_diffprivlib.py --add-standardized   # only the standardised logistic column
    python benchmarks/compare_diffprivlib.py --add-refined   # only the two-stage noisy-statistics column (refine=0.6)

About 15 minutes on 2 cores, and 15 more for the noisy-statistics column. Nothing is charged
(``ledger=None``).
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

EPSILONS = (0.5, 1.0, 2.0, 5.0, 10.0)
REPEATS = 5
REPEATS_DPL = 50
PRE_SHARE = 0.2  # of the total epsilon, spent on private standardisation (at most 1)
OUT = os.path.join(os.path.dirname(__file__), "results", "compare_diffprivlib")
REFERENCE = dict(draws=1000, tune=1000, chains=4, progressbar=False, compute_convergence_checks=False)
RELEASE = dict(tune=500, progressbar=False)


# --------------------------------------------------------------------------- data
def _to_unit(x, lo, hi):
    """The public map of ``[lo, hi]`` onto ``[-1, 1]`` (clipped: a value outside the declared
    bounds is moved onto them, as both libraries require)."""
    lo, hi = np.asarray(lo, float), np.asarray(hi, float)
    return np.clip(2.0 * (np.asarray(x, float) - lo) / (hi - lo) - 1.0, -1.0, 1.0)


def _split(n, seed=0):
    order = np.random.default_rng(seed).permutation(n)
    cut = int(0.7 * n)
    return order[:cut], order[cut:]


def breast_cancer():
    """Features mean radius, mean texture, mean smoothness; bounds from the dataset's DESCR."""
    from sklearn.datasets import load_breast_cancer

    data = load_breast_cancer()
    cols = ["mean radius", "mean texture", "mean smoothness"]
    # scikit-learn's DESCR, "Summary Statistics": radius (mean) 6.981 .. 28.11, texture (mean)
    # 9.71 .. 39.28, smoothness (mean) 0.053 .. 0.163 (public documentation, not the data)
    lo, hi = np.array([6.981, 9.71, 0.053]), np.array([28.11, 39.28, 0.163])
    idx = [list(data.feature_names).index(c) for c in cols]
    X = _to_unit(data.data[:, idx], lo, hi)
    y = (data.target == 0).astype(np.int64)  # 1 = malignant
    return X, y, cols


def diabetes():
    """Features bmi, bp, s5 in the declared public bounds [-0.2, 0.2]; target in [0, 400]."""
    from sklearn.datasets import load_diabetes

    data = load_diabetes()
    cols = ["bmi", "bp", "s5"]
    idx = [list(data.feature_names).index(c) for c in cols]
    X = _to_unit(data.data[:, idx], -0.2, 0.2)
    y = _to_unit(data.target, 0.0, 400.0)
    return X, y, cols


# --------------------------------------------------------------------------- models
def logistic_model(X, y):
    with pm.Model() as model:
        Xd = pm.Data("X", X)
        yd = pm.Data("y", y)
        intercept = pm.Normal("intercept", 0.0, 2.5)
        w = pm.Normal("w", 0.0, 2.5, shape=X.shape[1])
        pm.Bernoulli("obs", logit_p=intercept + Xd @ w, observed=yd)
    return model, {"X": pymc_dp.Box(-1.0, 1.0), "y": pymc_dp.Binary()}


def linear_model(X, y):
    with pm.Model() as model:
        Xd = pm.Data("X", X)
        yd = pm.Data("y", y)
        intercept = pm.Normal("intercept", 0.0, 1.0)
        w = pm.Normal("w", 0.0, 1.0, shape=X.shape[1])
        sigma = pm.HalfNormal("sigma", 1.0)
        pm.Normal("obs", mu=intercept + Xd @ w, sigma=sigma, observed=yd)
    return model, {"X": pymc_dp.Box(-1.0, 1.0), "y": pymc_dp.Interval(-1.0, 1.0)}


def _coefficients(post):
    """(intercept, w...) per draw from an ArviZ posterior."""
    b = np.asarray(post["intercept"].values).reshape(-1, 1)
    w = np.asarray(post["w"].values).reshape(b.shape[0], -1)
    return np.hstack([b, w])


# --------------------------------------------------------------------------- metrics
def _predict(kind, coef, X):
    eta = coef[0] + X @ coef[1:]
    return (eta > 0).astype(int) if kind == "logistic" else eta


def _score(kind, coef, X, y):
    """Test accuracy, or test RMSE on the target's original scale (units of disease progression)."""
    pred = _predict(kind, coef, X)
    if kind == "logistic":
        return float(np.mean(pred == y))
    return float(np.sqrt(np.mean((pred - y) ** 2)) * 200.0)  # [-1, 1] -> [0, 400]: a factor 200


def _sds(coef, ref_mean, ref_sd):
    return float(np.max(np.abs(coef - ref_mean) / ref_sd))


def _summary(values):
    v = np.asarray(values, float)
    return {"median": float(np.median(v)), "p10": float(np.quantile(v, 0.1)), "p90": float(np.quantile(v, 0.9))}


def run(kind):
    from diffprivlib import models as dpl
    from sklearn import linear_model as sk

    X, y, cols = breast_cancer() if kind == "logistic" else diabetes()
    train, test = _split(len(y))
    build = logistic_model if kind == "logistic" else linear_model
    model, domains = build(X[train], y[train])
    with model:
        ref = _coefficients(pm.sample(random_seed=1, **REFERENCE).posterior)
    ref_mean, ref_sd = ref.mean(axis=0), ref.std(axis=0)
    if kind == "logistic":
        skl = sk.LogisticRegression(C=1.0).fit(X[train], y[train])
    else:
        skl = sk.LinearRegression().fit(X[train], y[train])
    skl_coef = np.r_[np.ravel(skl.intercept_), np.ravel(skl.coef_)]
    out = {
        "kind": kind, "features": cols, "n_train": int(len(train)), "n_test": int(len(test)),
        "non_private": {
            "pymc_posterior_mean": {"score": _score(kind, ref_mean, X[test], y[test]), "coef": ref_mean.tolist(),
                                    "sd": ref_sd.tolist()},
            "sklearn": {"score": _score(kind, skl_coef, X[test], y[test]), "sds": _sds(skl_coef, ref_mean, ref_sd)},
            # what a release that ignores the data scores: every coefficient 0 (predict benign; the
            # midpoint 200 of the target's public range)
            "no_data": {"score": _score(kind, np.zeros_like(ref_mean), X[test], y[test]),
                        "sds": _sds(np.zeros_like(ref_mean), ref_mean, ref_sd)},
        },
        "rows": [],
    }
    for eps in EPSILONS:
        row = {"epsilon": eps}
        for draws in (1, 10):
            key = f"pymc_dp_{draws}_draw{'s' if draws > 1 else ''}"
            t0 = time.perf_counter()
            try:
                pmod = pymc_dp.make_private(model, epsilon=eps, draws=draws, data=domains, ledger=None)
            except pymc_dp.PrivacyError as err:
                row[key] = {"refused": str(err).splitlines()[0][:200]}
                continue
            certify = time.perf_counter() - t0
            scores, sds = [], []
            for r in range(REPEATS):
                idata = pmod.sample(random_seed=100 + r, chains=1 if draws == 1 else 2, **RELEASE)
                coef = _coefficients(idata.posterior).mean(axis=0)
                scores.append(_score(kind, coef, X[test], y[test]))
                sds.append(_sds(coef, ref_mean, ref_sd))
            row[key] = {"score": _summary(scores), "sds": _summary(sds), "certify_s": certify,
                        "epsilon_per_draw": pmod.certificate.epsilon_per_draw,
                        "truncation": [t for f in pmod.certificate.factors for t in f.truncation]}
        if kind == "linear":
            row["pymc_dp_noisy_statistics"] = noisy_column(model, domains, eps, X[test], y[test], ref_mean, ref_sd)
        else:
            row["pymc_dp_standardized"] = standardized_column(eps, X[train], y[train], X[test], y[test], ref_mean, ref_sd)
        scores, sds = [], []
        for r in range(REPEATS_DPL):
            if kind == "logistic":
                est = dpl.LogisticRegression(epsilon=eps, data_norm=float(np.sqrt(X.shape[1])), random_state=r)
            else:
                est = dpl.LinearRegression(epsilon=eps, bounds_X=(-1.0, 1.0), bounds_y=(-1.0, 1.0), random_state=r)
            est.fit(X[train], y[train])
            coef = np.r_[np.ravel(est.intercept_), np.ravel(est.coef_)]
            scores.append(_score(kind, coef, X[test], y[test]))
            sds.append(_sds(coef, ref_mean, ref_sd))
        row["diffprivlib"] = {"score": _summary(scores), "sds": _summary(sds)}
        out["rows"].append(row)
        print(kind, eps, {k: v.get("score", v) for k, v in row.items() if k != "epsilon"}, flush=True)
    return out


def noisy_column(model, domains, eps, X_test, y_test, ref_mean, ref_sd, **options) -> dict:
    """The noisy-statistics path at total ``eps``: ``REPEATS`` independent releases
    (``options``: e.g. ``refine=0.6``, the release in two stages)."""
    scores, sds, secs = [], [], []
    for r in range(REPEATS):
        t0 = time.perf_counter()
        mech = pymc_dp.noisy_statistics(model, epsilon=eps, data=domains, ledger=None, **options)
        post = mech.sample(500, chains=2, random_seed=200 + r, **RELEASE).posterior
        coef = _coefficients(post).mean(axis=0)
        scores.append(_score("linear", coef, X_test, y_test))
        sds.append(_sds(coef, ref_mean, ref_sd))
        secs.append(time.perf_counter() - t0)
    return {"score": _summary(scores), "sds": _summary(sds), "seconds": _summary(secs)}


def standardized_column(eps, X_train, y_train, X_test, y_test, ref_mean, ref_sd) -> dict:
    """Private standardisation, then one posterior draw, at total ``eps``."""
    pre = min(1.0, PRE_SHARE * eps)
    scores, sds, secs = [], [], []
    for r in range(REPEATS):
        t0 = time.perf_counter()
        std = pymc_dp.standardize({"X": X_train, "y": y_train}, data={"X": pymc_dp.Box(-1.0, 1.0), "y": pymc_dp.Binary()},
                                  epsilon=pre, columns=["X"], ledger=None)
        model, _ = logistic_model(std.values["X"], y_train)
        try:
            pmod = pymc_dp.make_private(model, epsilon=eps - pre, draws=1, data=std.data, ledger=None)
        except pymc_dp.PrivacyError as err:
            return {"refused": str(err).splitlines()[0][:200]}
        idata = pmod.sample(random_seed=300 + r, chains=1, **RELEASE)
        coef_std = _coefficients(idata.posterior).mean(axis=0)
        m, s = std.center["X"], std.scale["X"]
        scores.append(_score("logistic", coef_std, (X_test - m) / s, y_test))
        w = coef_std[1:] / s  # back to the unit scale: b + w.x = b_std + w_std.(x - m) / s
        coef = np.r_[coef_std[0] - np.sum(w * m), w]
        sds.append(_sds(coef, ref_mean, ref_sd))
        secs.append(time.perf_counter() - t0)
    return {"score": _summary(scores), "sds": _summary(sds), "seconds": _summary(secs), "epsilon_preprocessing": pre}


def add_standardized(results) -> None:
    """Add the standardised column to saved logistic results (the other columns are kept)."""
    for res in results:
        if res["kind"] != "logistic":
            continue
        X, y, _ = breast_cancer()
        train, test = _split(len(y))
        ref_mean = np.asarray(res["non_private"]["pymc_posterior_mean"]["coef"])
        ref_sd = np.asarray(res["non_private"]["pymc_posterior_mean"]["sd"])
        for row in res["rows"]:
            row["pymc_dp_standardized"] = standardized_column(row["epsilon"], X[train], y[train], X[test], y[test], ref_mean, ref_sd)
            print("logistic", row["epsilon"], row["pymc_dp_standardized"].get("score"), flush=True)


def add_noisy(results, key="pymc_dp_noisy_statistics", **options) -> None:
    """Add the noisy-statistics column (``key``; ``options`` for ``noisy_statistics``) to saved
    results (the other columns are kept); where ``options`` are given, also what
    ``pymc_dp.recommend`` proposes at each epsilon."""
    for res in results:
        if res["kind"] != "linear":
            continue
        X, y, _ = diabetes()
        train, test = _split(len(y))
        model, domains = linear_model(X[train], y[train])
        ref_mean = np.asarray(res["non_private"]["pymc_posterior_mean"]["coef"])
        ref_sd = np.asarray(res["non_private"]["pymc_posterior_mean"]["sd"])
        for row in res["rows"]:
            row[key] = noisy_column(model, domains, row["epsilon"], X[test], y[test], ref_mean, ref_sd, **options)
            if options:
                row[key]["recommended"] = pymc_dp.recommend(model, epsilon=row["epsilon"], data=domains).options == options
            print("linear", row["epsilon"], row[key]["score"], flush=True)


def _cell(entry, what):
    if "refused" in entry:
        return "refused"
    s = entry[what]
    fmt = "{:.3f}" if what == "score" else "{:.1f}"
    return f"{fmt.format(s['median'])} ({fmt.format(s['p10'])}–{fmt.format(s['p90'])})"


def markdown(results) -> str:
    lines = ["# pymc_dp vs diffprivlib at equal total epsilon", "",
             "Written by `benchmarks/compare_diffprivlib.py` (its docstring gives the protocol). Median over repeats "
             "(10%–90% in brackets); `sds` = the largest distance of any coefficient from the non-private posterior "
             "mean, in posterior sds.", ""]
    for res in results:
        metric = "test accuracy" if res["kind"] == "logistic" else "test RMSE"
        npv = res["non_private"]
        noisy = any("pymc_dp_noisy_statistics" in row for row in res["rows"])
        refined = any("pymc_dp_two_stages" in row for row in res["rows"])
        standardized = any("pymc_dp_standardized" in row for row in res["rows"])
        lines += [f"## {res['kind']} regression ({', '.join(res['features'])}; n = {res['n_train']} train, "
                  f"{res['n_test']} test)", "",
                  f"Non-private: PyMC posterior mean {metric} {npv['pymc_posterior_mean']['score']:.3f}; "
                  f"scikit-learn {npv['sklearn']['score']:.3f} ({npv['sklearn']['sds']:.1f} sds). A release that "
                  f"ignores the data (every coefficient 0) scores {npv['no_data']['score']:.3f} "
                  f"({npv['no_data']['sds']:.1f} sds).", "",
                  f"| total ε | pymc_dp, 1 draw: {metric} | sds | pymc_dp, 10 draws: {metric} | sds | "
                  + (f"pymc_dp, noisy statistics: {metric} | sds | " if noisy else "")
                  + (f"pymc_dp, noisy statistics in two stages (refine=0.6; * recommended): {metric} | sds | " if refined else "")
                  + (f"pymc_dp, standardised + 1 draw: {metric} | sds | " if standardized else "")
                  + f"diffprivlib: {metric} | sds |",
                  "|---|---|---|---|---|---|---|" + ("---|---|" if noisy else "") + ("---|---|" if refined else "")
                  + ("---|---|" if standardized else "")]
        keys = (("pymc_dp_1_draw", "pymc_dp_10_draws") + (("pymc_dp_noisy_statistics",) if noisy else ())
                + (("pymc_dp_two_stages",) if refined else ())
                + (("pymc_dp_standardized",) if standardized else ()) + ("diffprivlib",))
        for row in res["rows"]:
            cells = []
            for key in keys:
                star = "*" if row[key].get("recommended") else ""
                cells += [_cell(row[key], "score") + star, _cell(row[key], "sds") if "refused" not in row[key] else ""]
            lines.append(f"| {row['epsilon']:g} | " + " | ".join(cells) + " |")
        lines.append("")
    return "\n".join(lines)


def main():
    logging.getLogger("pymc").setLevel(logging.ERROR)
    warnings.filterwarnings("ignore")
    t0 = time.perf_counter()
    if {"--add-noisy", "--add-standardized", "--add-refined"} & set(sys.argv[1:]):
        with open(OUT + ".json") as fh:
            saved = json.load(fh)
        if "--add-noisy" in sys.argv[1:]:
            add_noisy(saved["results"])
        if "--add-standardized" in sys.argv[1:]:
            add_standardized(saved["results"])
        if "--add-refined" in sys.argv[1:]:
            add_noisy(saved["results"], "pymc_dp_two_stages", refine=0.6)
        with open(OUT + ".json", "w") as fh:
            json.dump({**saved, "seconds_noisy_column": time.perf_counter() - t0}, fh, indent=1)
        with open(OUT + ".md", "w") as fh:
            fh.write(markdown(saved["results"]))
        print(markdown(saved["results"]))
        return
    results = [run("logistic"), run("linear")]
    os.makedirs(os.path.dirname(OUT), exist_ok=True)
    with open(OUT + ".json", "w") as fh:
        json.dump({"results": results, "seconds": time.perf_counter() - t0}, fh, indent=1)
    with open(OUT + ".md", "w") as fh:
        fh.write(markdown(results))
    print(markdown(results))


if __name__ == "__main__":
    main()
