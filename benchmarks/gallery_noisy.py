"""The gallery's linear regression on the noisy-statistics path, against the non-private posterior.

Total epsilon = 10 for one release of ``Z'Z, Z'y, y'y`` (``pymc_dp.noisy_statistics``, which
``pymc_dp.recommend`` recommends for this model); the noise-aware posterior is post-processing.
For each of ``--releases`` independent releases (OpenDP noise, unseeded) on the same data
(``examples/gallery/glm_linear.py``, n = 300), every parameter's distance from the non-private
posterior mean in non-private posterior sds, and the noise-aware sd over the non-private sd.
Reference: 2 chains x 1000 NUTS draws of the user's model on the same data.

Run: ``PYTHONPATH=. python benchmarks/gallery_noisy.py [--releases 10] [--n 300]`` (at another ``--n``
the results are ``results/gallery_noisy_n<n>.*``; the notebook's own size is 200:
``--n 200 --only "two stages, refine=0.6"`` runs the recommended setting alone, about 11 minutes)
``--weight-yy 3`` (default) adds a second setting in which the outcome's sum of squares gets a share
3 of the budget (``weights=``), against equal shares (about 90 s per release on one core); writes
``results/gallery_noisy.{json,md}`` (at n = 300).
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np
import pymc as pm

import pymc_dp
from examples.gallery import glm_linear

NAMES = ("Intercept", "slope", "sigma")
#: the released statistic that carries sigma (the outcome centred at its domain's midpoint)
YY = "sum((y_obs-2)^2)"
SAMPLE = {"draws": 1000, "tune": 1000, "chains": 2, "progressbar": False}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--releases", type=int, default=10)
    ap.add_argument("--n", type=int, default=300)
    ap.add_argument("--epsilon", type=float, default=10.0)
    ap.add_argument("--weight-yy", type=float, default=3.0,
                    help="the share of the budget of the outcome's sum of squares in the second setting (1: one setting)")
    ap.add_argument("--refine", type=float, default=0.6,
                    help="a setting released in two stages, this share of epsilon on the residuals (0: none)")
    ap.add_argument("--only", default=None, help="run only the setting with this label; keep the others from the json")
    ap.add_argument("--out", default=str(Path(__file__).parent / "results"))
    args = ap.parse_args(argv)
    data = glm_linear.make_data(args.n)
    with glm_linear.build(data):
        ref = pm.sample(random_seed=0, **SAMPLE).posterior
    mean = {k: float(ref[k].mean()) for k in NAMES}
    sd = {k: float(ref[k].std()) for k in NAMES}
    settings = {"equal shares": {}}
    if args.weight_yy != 1.0:  # a share of the budget for the outcome's sum of squares (sigma's statistic)
        settings[f"sum(y^2) share {args.weight_yy:g}"] = {"weights": {YY: args.weight_yy}}
    if args.refine:  # two stages: the second on the residuals about the first stage's fit
        settings[f"two stages, refine={args.refine:g}"] = {"refine": args.refine}
    results = {}
    out = Path(args.out)
    # the notebook's own size is n = 200; the gallery table's, 300 (its results keep the plain name)
    stem = "gallery_noisy" if args.n == 300 else f"gallery_noisy_n{args.n}"
    if args.only is not None:
        if (out / f"{stem}.json").exists():
            results = json.loads((out / f"{stem}.json").read_text())["settings"]
        settings = {args.only: settings[args.only]}
    for label, options in settings.items():
        rows = []
        for r in range(args.releases):
            t0 = time.perf_counter()
            mech = pymc_dp.noisy_statistics(glm_linear.build(data), epsilon=args.epsilon, data=glm_linear.DOMAINS,
                                            ledger=None, **options)
            post = mech.sample(random_seed=r, **SAMPLE).posterior
            rows.append({"sds_apart": {k: abs(float(post[k].mean()) - mean[k]) / sd[k] for k in NAMES},
                         "signed": {k: (float(post[k].mean()) - mean[k]) / sd[k] for k in NAMES},
                         "sd_ratio": {k: float(post[k].std()) / sd[k] for k in NAMES},
                         "divergences": int(mech.last_release.sample_stats.diverging.sum()),
                         "seconds": time.perf_counter() - t0})
            print(label, r, {k: round(v, 2) for k, v in rows[-1]["signed"].items()}, flush=True)
        results[label] = {"options": options, "noise_scales": dict(mech.noise_scales), "K": mech.joint["K"], "releases": rows}
    out.mkdir(parents=True, exist_ok=True)
    meta = {"n": args.n, "epsilon": args.epsilon, "releases": args.releases, "sample": SAMPLE,
            "reference_mean": mean, "reference_sd": sd, "pymc_dp": pymc_dp.__version__}
    (out / f"{stem}.json").write_text(json.dumps({"meta": meta, "settings": results}, indent=1))
    lines = ["# The gallery's linear regression on the noisy-statistics path", "",
             f"Written by `benchmarks/gallery_noisy.py`: n = {args.n}, total epsilon = {args.epsilon:g} (one release), "
             f"{args.releases} independent releases on the same data per setting. Distance of the noise-aware "
             "posterior mean from the non-private posterior mean, in non-private posterior sds: median and largest "
             "over the releases; and the noise-aware sd over the non-private sd (median). Settings: the budget's "
             "shares among the released statistics (`weights=`; public, chosen before the run), and the release in two "
             "stages (`refine=`: the second on the residuals about the first stage's fit).", "",
             "| setting | parameter | sds apart, median | sds apart, largest | releases within 2 sds | sd / non-private sd |",
             "|---|---|---|---|---|---|"]
    for label, res in results.items():
        rows = res["releases"]
        for k in NAMES:
            gaps = np.array([row["sds_apart"][k] for row in rows])
            ratio = np.median([row["sd_ratio"][k] for row in rows])
            lines.append(f"| {label} | {k} | {np.median(gaps):.2f} | {gaps.max():.2f} | {int(np.sum(gaps <= 2))} of "
                         f"{len(gaps)} | {ratio:.2f} |")
        within = sum(all(row["sds_apart"][k] <= 2 for k in NAMES) for row in rows)
        lines.append(f"| {label} | every parameter | | | {within} of {len(rows)} | |")
    lines.append("")
    (out / f"{stem}.md").write_text("\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
