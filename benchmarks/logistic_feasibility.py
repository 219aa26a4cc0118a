"""Can any path pymc_dp has, or one it could build, release the gallery's logistic regression within
2 posterior sds at total epsilon 10? A feasibility study in NumPy (no MCMC), on the gallery's data.

The model is ``examples/gallery/glm_logistic`` (bambi's ``income ~ age + age2 + educ + hours``,
its priors, its domains). For ``n = 300`` (the gallery table's size) and ``n = 32,561`` (the
notebook's), it measures:

* **the reference**: the non-private posterior's Laplace approximation (MAP and the inverse
  Hessian); at ``n = 300`` PyMC's NUTS gives Intercept -8.39 +- 1.55 against -8.05 +- 1.52 here,
  close enough for a feasibility bound;
* **private Newton steps** (the path a noisy-statistics logistic mechanism would take): ``K``
  stages, each releasing the score ``sum z (y - sigma(z'c))`` and the Fisher information
  ``sum sigma'(z'c) z z'`` at the public iterate ``c`` (``c = 0`` first) with Laplace noise, and
  taking one Newton step. The design ``z = (1, x)`` is scaled to ``[-1, 1]`` by the domains
  (public). Per record a score entry moves by less than 2, an information entry by at most 1/4
  (the intercept's and the squares') or 1/2 (the rest): L1 sensitivity ``5 x 2 = 10`` for the
  score and ``6.25`` for the information. A share ``w`` of each stage's budget goes to the
  score, and stage ``s`` spends a share of epsilon (equal shares, or most on the last stage:
  the earlier stages only bring the iterate near). The released estimate is the last iterate;
  its distance from the reference mean, in reference sds, is what a noise-unaware release's
  mean would show (a noise-aware one is centred about the same point and wider). A noisy
  information can be indefinite; its eigenvalues are floored at 1e-3 of the largest, and where
  the noise still dominates the steps diverge (the large numbers at n = 300);
* **the noise floor** of that path: one stage at the exact MAP with all of epsilon, so no
  pilot error is left, only the noise; and its **ideal**: the information exact and free, all of
  epsilon on the score, with the L1 change a pair of records attains (8, not the bound 10);
* **chord steps**: the same stages, where the last ones release the score only and step with
  the last released information (:data:`CHORD_PLANS`);
* **posterior sampling** (:func:`pymc_dp.make_private`) in a box of ``+- t`` reference sds per
  parameter about the *reference mean itself* (an oracle centre no private path has): the
  per-draw epsilon that box costs. Flipping the label of one record at the same covariates gives
  ``g(b) = +- eta(b)``, whose oscillation over the box is ``2 (h_0 + sum_j h_j |x_j|)``; its largest
  value over the domain is a **lower bound** on the oscillation certificate of the box
  (``docs/theory/oscillation.md``; the certificate bounds the loss of one draw, and pymc_dp
  claims no less), and twice it an upper bound (``|d log sigma| <= 1``); also for a box on the
  coefficients of covariates standardised by the data's own mean and sd (an oracle centring).

Run from the repository root::

    python benchmarks/logistic_feasibility.py     # about a minute; results/logistic_feasibility.{json,md}
"""

from __future__ import annotations

import json
import os
import sys

import numpy as np
from scipy.optimize import minimize
from scipy.special import expit

sys.path.insert(0, os.path.abspath(os.path.join(os.path.dirname(__file__), "..")))

from examples.gallery import glm_logistic as gallery  # noqa: E402

EPSILON = 10.0
RELEASES = 200
SCORE_SPAN, INFO_SPAN = 10.0, 6.25  # L1 sensitivities of the score and of the information (see above)
ATTAINED_SCORE_SPAN = 8.0  # the score's L1 change that a pair of records attains (the bound 10 is loose)
OUT = os.path.join(os.path.dirname(__file__), "results", "logistic_feasibility")
NAMES = ["Intercept", "age", "age2", "educ", "hours"]


def information(Z, c):
    """The Fisher information ``sum sigma'(z'c) z z'`` of the logistic likelihood at ``c``."""
    p = expit(Z @ c)
    return Z.T @ (Z * (p * (1 - p))[:, None])


def problem(n: int):
    """Scaled design, outcome, the map ``c = A b`` from the model's coefficients to the scaled
    ones, the prior precision on ``c``, and the reference (MAP, covariance) on ``b``."""
    d = gallery.make_data(n=n)
    X = np.column_stack([d["age"], d["age2"], d["educ"], d["hours"]])
    y = d["income"].astype(float)
    lo, hi = np.asarray(gallery.DOMAINS["X"].lo, float), np.asarray(gallery.DOMAINS["X"].hi, float)
    mid, half = (lo + hi) / 2, (hi - lo) / 2
    Z = np.column_stack([np.ones(n), (X - mid) / half])
    k = Z.shape[1]
    A = np.zeros((k, k))  # eta = b0 + b'x = c0 + c'z with c0 = b0 + b'mid, c_j = b_j half_j
    A[0, 0], A[0, 1:], A[1:, 1:] = 1.0, mid, np.diag(half)
    prior_sd = np.r_[gallery.ICPT_SD, gallery.SLOPE_SD]
    P = np.linalg.inv(A @ np.diag(prior_sd**2) @ A.T)

    def negative_log_posterior(c):
        eta = Z @ c
        return -(y @ eta - np.logaddexp(0.0, eta).sum()) + 0.5 * c @ P @ c

    c_map = minimize(negative_log_posterior, np.zeros(k), method="BFGS", options={"gtol": 1e-8}).x
    H = information(Z, c_map) + P
    Ainv = np.linalg.inv(A)
    cov_b = Ainv @ np.linalg.inv(H) @ Ainv.T
    return dict(Z=Z, y=y, A=A, Ainv=Ainv, P=P, c_map=c_map, b_map=Ainv @ c_map, sd_b=np.sqrt(np.diag(cov_b)), cov_b=cov_b, H_map=H,
                info_eigenvalues=np.linalg.eigvalsh(H - P), X_max=np.max(np.abs(np.vstack([lo, hi])), axis=0),
                X_lo=lo, X_hi=hi, X_mean=X.mean(axis=0), X_sd=X.std(axis=0))


def newton_stage(pr, rng, c, eps, score_share):
    """One private Newton step from the public iterate ``c`` at budget ``eps``."""
    Z, y, P = pr["Z"], pr["y"], pr["P"]
    k = Z.shape[1]
    p = expit(Z @ c)
    score = Z.T @ (y - p) + rng.laplace(0.0, SCORE_SPAN / (score_share * eps), k)
    iu = np.triu_indices(k)
    E = np.zeros((k, k))
    E[iu] = rng.laplace(0.0, INFO_SPAN / ((1 - score_share) * eps), len(iu[0]))
    info = information(Z, c) + E + np.triu(E, 1).T + P
    val, vec = np.linalg.eigh(info)  # a noisy information can be indefinite: floor its eigenvalues
    val = np.maximum(val, 1e-3 * val.max())
    return c + vec @ (vec.T @ (score - P @ c) / val)


def distances(pr, c):
    return np.abs(pr["Ainv"] @ c - pr["b_map"]) / pr["sd_b"]


def newton_path(pr, schedule, score_share, rng):
    """``len(schedule)`` stages from ``c = 0``, stage ``s`` spending ``schedule[s] x EPSILON``."""
    out = []
    for _ in range(RELEASES):
        c = np.zeros(pr["Z"].shape[1])
        for share in schedule:
            c = newton_stage(pr, rng, c, share * EPSILON, score_share)
        out.append(distances(pr, c))
    return np.array(out)


def chord_path(pr, plan, rng):
    """Newton steps that re-use the information: ``plan`` lists ``(score share, information
    share)`` of EPSILON per stage; a stage with information share 0 releases the score only and
    steps with the last released information (a chord step: linear convergence, but each such
    stage spends nothing on the 15 information entries)."""
    Z, y, P = pr["Z"], pr["y"], pr["P"]
    k = Z.shape[1]
    iu = np.triu_indices(k)
    out = []
    for _ in range(RELEASES):
        c, info = np.zeros(k), None
        for score_eps, info_eps in ((a * EPSILON, b * EPSILON) for a, b in plan):
            if info_eps > 0:
                E = np.zeros((k, k))
                E[iu] = rng.laplace(0.0, INFO_SPAN / info_eps, len(iu[0]))
                info = information(Z, c) + E + np.triu(E, 1).T + P
            score = Z.T @ (y - expit(Z @ c)) + rng.laplace(0.0, SCORE_SPAN / score_eps, k)
            val, vec = np.linalg.eigh(info)
            val = np.maximum(val, 1e-3 * val.max())
            c = c + vec @ (vec.T @ (score - P @ c) / val)
        out.append(distances(pr, c))
    return np.array(out)


#: chord plans (score share, information share) per stage: the best of a small search at
#: n = 32,561 (session 8); the information is released where the iterate has moved most
CHORD_PLANS = {
    "5 stages, information at the first three (0.05+0.05, 0.05+0.05, 0.05+0.25), then score only (0.1, 0.45)":
        [(0.05, 0.05), (0.05, 0.05), (0.05, 0.25), (0.1, 0.0), (0.45, 0.0)],
    "4 stages, information at the first three (0.05+0.05, 0.05+0.05, 0.1+0.2), then score only (0.55)":
        [(0.05, 0.05), (0.05, 0.05), (0.1, 0.2), (0.55, 0.0)],
}


#: budget schedules over the stages: equal shares, and the last stage favoured (the earlier ones
#: only need to bring the iterate near enough for one step to be accurate)
SCHEDULES = [tuple([1 / k] * k) for k in (1, 2, 3, 4, 5, 6)] + [(0.1, 0.2, 0.7), (0.1, 0.1, 0.1, 0.7), (0.05, 0.05, 0.1, 0.8)]


def summarise(D):
    return {"median_by_parameter": dict(zip(NAMES, np.round(np.median(D, axis=0), 2).tolist())),
            "median_largest": round(float(np.median(D.max(axis=1))), 2),
            "all_within_2": round(float(np.mean((D < 2).all(axis=1))), 3)}


def box_epsilon(pr, t, standardised=False):
    """Per-draw epsilon of the box ``+- t sd`` about the reference mean (lower bound: label flip;
    upper: twice it). ``standardised``: the box is on the coefficients of the covariates
    standardised by the data's own mean and sd (the most favourable centring, ``z = (x - m) / s``,
    ``eta = c_0 + sum_j c_j z_j``, ``c_j = b_j s_j``, ``c_0 = b_0 + sum_j b_j m_j``)."""
    if not standardised:
        h = t * pr["sd_b"]
        low = 2.0 * (h[0] + np.sum(h[1:] * pr["X_max"]))
    else:
        m, s = pr["X_mean"], pr["X_sd"]
        k = len(m) + 1
        A = np.zeros((k, k))
        A[0, 0], A[0, 1:], A[1:, 1:] = 1.0, m, np.diag(s)
        h = t * np.sqrt(np.diag(A @ pr["cov_b"] @ A.T))
        reach = np.maximum(np.abs(pr["X_lo"] - m), np.abs(pr["X_hi"] - m)) / s
        low = 2.0 * (h[0] + np.sum(h[1:] * reach))
    return {"lower": round(float(low), 2), "upper": round(float(2 * low), 2)}


def run(n: int, rng) -> dict:
    pr = problem(n)
    row = {"n": n, "reference_mean": dict(zip(NAMES, pr["b_map"].round(4).tolist())),
           "reference_sd": dict(zip(NAMES, pr["sd_b"].round(4).tolist())),
           "information_eigenvalues": pr["info_eigenvalues"].round(3).tolist(), "newton": {}}
    for share in (0.5, 0.8):
        for schedule in SCHEDULES:
            label = f"K={len(schedule)}, " + ("equal shares" if len(set(schedule)) == 1 else "shares " + "/".join(f"{x:g}" for x in schedule))
            row["newton"][f"{label}, score share {share}"] = summarise(newton_path(pr, schedule, share, rng))
        floor = []
        for _ in range(RELEASES):
            floor.append(distances(pr, newton_stage(pr, rng, pr["c_map"], EPSILON, share)))
        row["newton"][f"noise floor (one stage at the exact MAP), score share {share}"] = summarise(np.array(floor))
    # the ideal of that path: the information exact and free, all of epsilon on the score at the
    # L1 change a pair of records attains (8, tests/test_logistic_feasibility.py), from the MAP
    H = pr["H_map"]
    ideal = [distances(pr, pr["c_map"] + np.linalg.solve(H, rng.laplace(0.0, ATTAINED_SCORE_SPAN / EPSILON, H.shape[0])))
             for _ in range(RELEASES)]
    row["newton"]["ideal: information exact and free, all of epsilon on the score (L1 change 8), at the MAP"] = summarise(np.array(ideal))
    chord_rng = np.random.default_rng(n)  # its own stream: the rows above are unchanged by these
    for label, plan in CHORD_PLANS.items():
        row["newton"][f"chord: {label}"] = summarise(chord_path(pr, plan, chord_rng))
    row["box_epsilon_per_draw"] = {f"+-{t} sd": box_epsilon(pr, t) for t in (0.5, 1.0, 2.0)}
    row["box_epsilon_per_draw_standardised"] = {f"+-{t} sd": box_epsilon(pr, t, True) for t in (0.5, 1.0, 2.0)}
    return row


def markdown(rows) -> str:
    lines = [f"# The gallery's logistic regression at total epsilon {EPSILON:g}: what private paths can reach", ""]
    for r in rows:
        lines += [f"## n = {r['n']}", "",
                  "Reference (Laplace approximation): " + ", ".join(
                      f"{k} {r['reference_mean'][k]:.4g} ± {r['reference_sd'][k]:.2g}" for k in NAMES) + ".",
                  f"Fisher information eigenvalues (domain-scaled design): {', '.join(f'{v:.3g}' for v in r['information_eigenvalues'])}.",
                  "", f"Private Newton steps ({RELEASES} releases each): distance of the released estimate from the reference mean, in reference sds.", "",
                  "| path | " + " | ".join(NAMES) + " | median of the largest | releases with all within 2 |",
                  "|---|" + "---|" * len(NAMES) + "---|---|"]
        for label, s in r["newton"].items():
            lines.append(f"| {label} | " + " | ".join(f"{s['median_by_parameter'][k]:.2f}" for k in NAMES)
                         + f" | {s['median_largest']:.2f} | {s['all_within_2']:.2f} |")
        lines += ["", "Posterior sampling in a box of ± t reference sds about the reference mean (an oracle centre): per-draw epsilon "
                  "of the oscillation certificate, on the model's coefficients and on those of covariates standardised by the data's "
                  "own mean and sd (an oracle centring).", "",
                  "| box | lower bound | upper bound | standardised: lower bound | upper bound |", "|---|---|---|---|---|"]
        for label, e in r["box_epsilon_per_draw"].items():
            st = r["box_epsilon_per_draw_standardised"][label]
            lines.append(f"| {label} | {e['lower']:.3g} | {e['upper']:.3g} | {st['lower']:.3g} | {st['upper']:.3g} |")
        lines.append("")
    return "\n".join(lines)


def main() -> None:
    rng = np.random.default_rng(20261126)
    rows = [run(n, rng) for n in (300, gallery.N_GALLERY)]
    os.makedirs(os.path.dirname(OUT), exist_ok=True)
    with open(OUT + ".json", "w") as fh:
        json.dump({"epsilon": EPSILON, "releases": RELEASES, "rows": rows}, fh, indent=1)
    table = markdown(rows)
    with open(OUT + ".md", "w") as fh:
        fh.write(table)
    print(table)


if __name__ == "__main__":
    main()
