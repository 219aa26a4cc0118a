"""The gallery's logistic regression at total epsilon 10, released by the path pymc_dp recommends.

The model is ``examples/gallery/glm_logistic`` (bambi's ``income ~ age + age2 + educ + hours`` on
the census data, its priors and domains) at the notebook's own size, ``n = 32,561``
(``make_data()``'s default). :func:`pymc_dp.recommend` proposes private Newton steps there
(:class:`pymc_dp.mechanisms.logistic.NoisyLogistic`); this measures, in posterior sds of the
non-private posterior:

* **walks** (NumPy, no MCMC, 400 releases per size): how far the last Newton iterate of the
  default plan lands from the non-private posterior's mode, at ``n`` = 3,000, 10,000, 20,000
  and 32,561 (the Laplace approximation of ``benchmarks/logistic_feasibility.py`` as the
  reference): where ``recommend``'s threshold ``n epsilon >= 2e5`` comes from;
* **releases** (``RELEASES`` full releases at n = 32,561): the noise-aware posterior's mean
  against the non-private posterior (``pm.sample`` from the MAP with a dense mass matrix, 4 x 1000
  draws, used only with R-hat < 1.01), every coefficient; and the released posterior's sd against
  the non-private one.

* **coverage** (``--coverage``, NumPy, 400 walks at n = 32,561, seeded NumPy Laplace noise in
  place of OpenDP's): how often the 90% band of the error that the noise-aware law models (the
  last score's noise through the last step) holds the last iterate's actual error, per
  coefficient; with every other output exact (the law's own check), and with the information's
  noise along the last step added (what modelling it would buy).

Run from the repository root::

    python benchmarks/gallery_logistic.py     # about 15 minutes on 2 cores; results/gallery_logistic.{json,md}
    python benchmarks/gallery_logistic.py --coverage   # about a minute; results/gallery_logistic_coverage.md
"""

from __future__ import annotations

import json
import os
import sys
import time
import warnings

import numpy as np
import pymc as pm

sys.path.insert(0, os.path.abspath(os.path.join(os.path.dirname(__file__), "..")))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import logistic_feasibility as lf  # noqa: E402

import pymc_dp  # noqa: E402
from examples.gallery import glm_logistic as gallery  # noqa: E402
from pymc_dp.mechanisms.logistic import _floored_eigh, score_information  # noqa: E402
from pymc_dp.mechanisms.noise import continuous_laplace  # noqa: E402
from pymc_dp.sampling import rhat_by_variable  # noqa: E402

EPSILON = 10.0
WALKS = 400
RELEASES = 20
NAMES = ["Intercept", "age", "age2", "educ", "hours"]
OUT = os.path.join(os.path.dirname(__file__), "results", "gallery_logistic")


def walks(n: int) -> dict:
    """``WALKS`` runs of the default plan on the gallery data of size ``n``: the last iterate's
    distance from the posterior mode, in the Laplace approximation's sds."""
    pr = lf.problem(n)
    mech = pymc_dp.noisy_statistics(gallery.build(gallery.make_data(n=n)), epsilon=EPSILON, data=gallery.DOMAINS, ledger=None)
    Z, y = mech._data(mech._values)
    _, states = mech._walk(WALKS, lambda c, V, info: score_information(Z, y, c, V, info),
                           lambda s: continuous_laplace(np.zeros(s.shape), 1.0) * s)
    D = np.abs(states[-1]["c"] @ pr["Ainv"].T - pr["b_map"]) / pr["sd_b"]
    return {"n": n, "n_epsilon": n * EPSILON, "median_largest": round(float(np.median(D.max(axis=1))), 3),
            "p90_largest": round(float(np.quantile(D.max(axis=1), 0.9)), 3),
            "all_within_2": round(float(np.mean((D < 2).all(axis=1))), 3),
            "median_by_parameter": dict(zip(NAMES, np.round(np.median(D, axis=0), 3).tolist()))}


def reference(model) -> tuple[dict, dict]:
    """The non-private posterior: from the MAP with a dense mass matrix (uncentred covariates)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        start = pm.find_MAP(model=model, progressbar=False)
        idata = pm.sample(model=model, draws=1000, chains=4, random_seed=0, progressbar=False, init="adapt_full",
                          initvals={k: start[k] for k in NAMES}, compute_convergence_checks=False)
    rhat = max(rhat_by_variable(idata.posterior, NAMES).values())
    post = {k: np.asarray(idata.posterior[k].values).ravel() for k in NAMES}
    return post, {"rhat": round(float(rhat), 4), "converged": bool(rhat < 1.01)}


def releases(model, ref) -> list[dict]:
    rows = []
    for r in range(RELEASES):
        rec = pymc_dp.recommend(model, epsilon=EPSILON, data=gallery.DOMAINS)
        assert rec.path == "noisy_statistics", rec.reason
        t0 = time.perf_counter()
        mech = pymc_dp.noisy_statistics(model, epsilon=EPSILON, data=gallery.DOMAINS, ledger=None, **rec.options)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            idata = mech.sample(1000, chains=2, random_seed=100 + r)
        post = idata.posterior
        gaps = {k: float(abs(post[k].mean() - ref[k].mean()) / ref[k].std()) for k in NAMES}
        widths = {k: float(post[k].std() / ref[k].std()) for k in NAMES}
        rhat = max(rhat_by_variable(post, NAMES).values())
        rows.append({"gaps": gaps, "largest": max(gaps.values()), "sd_ratio": widths, "rhat": float(rhat),
                     "seconds": time.perf_counter() - t0})
        print(json.dumps({"release": r, **rows[-1]}), flush=True)
    return rows


def markdown(result) -> str:
    lines = [f"# The gallery's logistic regression at total epsilon {EPSILON:g}: private Newton steps", "",
             "Written by `benchmarks/gallery_logistic.py` (its docstring gives the protocol).", "",
             f"## Walks: the last Newton iterate ({WALKS} releases per size, Laplace-approximation reference)", "",
             "| n | n ε | median of the largest distance (sds) | 90% quantile | releases with all five within 2 |",
             "|---|---|---|---|---|"]
    for w in result["walks"]:
        lines.append(f"| {w['n']} | {w['n_epsilon']:.3g} | {w['median_largest']:.2f} | {w['p90_largest']:.2f} | {w['all_within_2']:.3f} |")
    ref = result["reference"]
    lines += ["", f"## Releases at n = {gallery.N_GALLERY} (the recommended path, {RELEASES} releases)", "",
              f"Non-private reference: `pm.sample` from the MAP, dense mass matrix, 4 x 1000 draws, R-hat {ref['rhat']}"
              + ("" if ref["converged"] else " (NOT converged: no distance is meaningful)") + ".", "",
              "| release | " + " | ".join(NAMES) + " | largest | released sd / reference sd (median) | R-hat | seconds |",
              "|---|" + "---|" * len(NAMES) + "---|---|---|---|"]
    for i, row in enumerate(result["releases"]):
        lines.append(f"| {i} | " + " | ".join(f"{row['gaps'][k]:.2f}" for k in NAMES)
                     + f" | {row['largest']:.2f} | {np.median(list(row['sd_ratio'].values())):.2f} | {row['rhat']:.3f} | {row['seconds']:.0f} |")
    largest = [row["largest"] for row in result["releases"]]
    lines += ["", f"All five coefficients within 2 sds in {sum(x < 2 for x in largest)} of {len(largest)} releases "
              f"(median largest {np.median(largest):.2f}, worst {max(largest):.2f})."]
    return "\n".join(lines) + "\n"


def coverage(exact_but_last: bool, with_information: bool, seed: int = 5) -> list[float]:
    """Per coefficient, the share of ``WALKS`` walks at the notebook's size whose last iterate's
    error lies in the 90% band of the modelled error (see the module docstring)."""
    pr = lf.problem(gallery.N_GALLERY)
    mech = pymc_dp.noisy_statistics(gallery.build(gallery.make_data()), epsilon=EPSILON, data=gallery.DOMAINS, ledger=None)
    Z, y = mech._data(mech._values)
    rng = np.random.default_rng(seed)
    calls = iter(range(10**6))
    last_call = sum(1 + (b > 0) for _, b in mech.stages) - 1

    def noise(scales):
        keep = not exact_but_last or next(calls) == last_call
        return rng.laplace(size=scales.shape) * scales if keep else np.zeros(scales.shape)

    _, states = mech._walk(WALKS, lambda c, V, info: score_information(Z, y, c, V, info), noise)
    last, end = states[-2], states[-1]
    info_stage = max(t for t, (_, b) in enumerate(mech.stages) if b > 0)
    iu = np.triu_indices(len(NAMES))
    hits = []
    for r in range(WALKS):
        val, vec = _floored_eigh(last["information"][r] + mech.prior_precision)
        step = (vec / val) @ vec.T
        modelled = (rng.laplace(size=(4000, len(NAMES))) * last["score_scales"][r]) @ last["score_basis"][r].T
        if with_information:
            W = np.zeros((4000, len(NAMES), len(NAMES)))
            W[:, iu[0], iu[1]] = rng.laplace(size=(4000, len(iu[0]))) * states[info_stage]["information_scales"][r]
            W[:, iu[1], iu[0]] = W[:, iu[0], iu[1]]
            V = states[info_stage]["information_basis"][r]
            modelled = modelled - np.einsum("dj,njk,ek,e->nd", V, W, V, end["c"][r] - last["c"][r])
        lo, hi = np.quantile((modelled @ step) @ pr["Ainv"].T, [0.05, 0.95], axis=0)
        error = end["c"][r] @ pr["Ainv"].T - pr["b_map"]
        hits.append((error >= lo) & (error <= hi))
    return np.round(np.mean(hits, axis=0), 3).tolist()


def coverage_report() -> str:
    rows = [("every output noisy, the law as built", False, False),
            ("only the last score noisy (the law's own check)", True, False),
            ("every output noisy, plus the information's noise along the last step", False, True)]
    lines = [f"# Coverage of the modelled error's 90% band ({WALKS} walks at n = {gallery.N_GALLERY}, total epsilon {EPSILON:g})", "",
             "Written by `benchmarks/gallery_logistic.py --coverage` (its docstring gives the protocol). 0.90 is exact.", "",
             "| walks | " + " | ".join(NAMES) + " |", "|---|" + "---|" * len(NAMES)]
    for label, exact, info in rows:
        lines.append(f"| {label} | " + " | ".join(f"{v:.3f}" for v in coverage(exact, info)) + " |")
        print(lines[-1], flush=True)
    return "\n".join(lines) + "\n"


def main() -> None:
    if "--coverage" in sys.argv[1:]:
        os.makedirs(os.path.dirname(OUT), exist_ok=True)
        with open(OUT + "_coverage.md", "w") as fh:
            fh.write(coverage_report())
        return
    t0 = time.perf_counter()
    result = {"epsilon": EPSILON, "walks": [walks(n) for n in (3_000, 10_000, 20_000, gallery.N_GALLERY)]}
    for w in result["walks"]:
        print(json.dumps(w), flush=True)
    model = gallery.build(gallery.make_data())
    ref, info = reference(model)
    result["reference"] = {**info, "mean": {k: float(v.mean()) for k, v in ref.items()}, "sd": {k: float(v.std()) for k, v in ref.items()}}
    print(json.dumps(result["reference"]), flush=True)
    result["releases"] = releases(model, ref)
    result["seconds"] = time.perf_counter() - t0
    os.makedirs(os.path.dirname(OUT), exist_ok=True)
    with open(OUT + ".json", "w") as fh:
        json.dump(result, fh, indent=1)
    with open(OUT + ".md", "w") as fh:
        fh.write(markdown(result))
    print(markdown(result))


if __name__ == "__main__":
    main()
