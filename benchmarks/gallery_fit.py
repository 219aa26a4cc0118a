"""The gallery with ``split="fit"`` beside the default ``split="optimised"`` (issue 12, item 3).

For each model of ``examples/gallery`` that certifies at total epsilon = 10 over 10 draws, both
splits are certified on the same data; 10 draws are released from each (one chain, the same
seed) and compared with the non-private posterior (4 chains x 1000 NUTS draws): for every
scalar free parameter, ``|released mean - posterior mean| / posterior sd``, median and largest.
The fit split aims at the admissible prior (``pymc_dp/reference.py``); the table says how many
effective draws that reference had. Writes ``results/gallery_fit.{json,md}``.

Run: ``PYTHONPATH=. python benchmarks/gallery_fit.py [model ...]`` (about an hour on one core;
``--from LOG ...`` writes the results from the rows of earlier runs).
"""

from __future__ import annotations

import json
import os
import re
import sys
import time
import warnings

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
sys.path.insert(0, os.path.dirname(__file__))

from gallery_report import REFERENCE_HOW, flat_params, latest_rows, reference_posterior, run_cases, sds_apart  # noqa: E402

import pymc_dp  # noqa: E402
from examples.gallery.try_all import cases  # noqa: E402

EPSILON, DRAWS = 10.0, 10
OUT = os.path.join(os.path.dirname(__file__), "results", "gallery_fit")


def run_case(label, mod, builder, n) -> dict:
    model = builder(mod.make_data(n=n))
    free = [rv.name for rv in model.free_RVs]
    row = {"model": label, "n": n}
    reference = None
    for split in ("optimised", "fit"):
        t = time.perf_counter()
        try:
            pmod = pymc_dp.make_private(model, epsilon=EPSILON, draws=DRAWS, data=mod.DOMAINS, public=mod.PUBLIC,
                                        split=split, ledger=None)
        except pymc_dp.PrivacyError as exc:
            row[split] = {"refused": f"{type(exc).__name__}: {str(exc)[:160]}"}
            continue
        cert = pmod.certificate
        entry = {"certify_seconds": round(time.perf_counter() - t, 1),
                 "truncation": [x for f in cert.factors for x in f.truncation],
                 "prior_mass_kept": cert.prior_mass_kept}
        if split == "fit":
            m = re.search(r"effective sample size (\d+)", cert.split_objective)
            entry["reference_ess"] = int(m.group(1)) if m else None
        if reference is None:
            reference, row["reference"] = reference_posterior(model, free)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            released = pmod.sample(chains=1, random_seed=1, progressbar=False)
        names = [k for k in free if k in released.posterior]
        entry["sds_apart"] = sds_apart(flat_params(released.posterior, names), reference)
        row[split] = entry
    return row


def markdown(rows) -> str:
    lines = ["| model | n | sds apart, optimised (median / max) | sds apart, fit (median / max) | fit reference ESS | prior mass kept, optimised / fit | reference R-hat |",
             "|---|---|---|---|---|---|---|"]

    def cell(e, key):
        if "refused" in e:
            return "refused"
        a = e["sds_apart"]
        return f"{a[0]:.3g} / {a[1]:.3g}"

    for r in rows:
        o, f = r.get("optimised", {}), r.get("fit", {})
        if "refused" in o and "refused" in f:
            continue
        mass = " / ".join(f"{e['prior_mass_kept']:.3g}" if "prior_mass_kept" in e else "—" for e in (o, f))
        ref = r.get("reference")
        rhat = "—" if not ref else f"{ref['rhat']:.3f}" + REFERENCE_HOW[ref["how"]] + ("" if ref["converged"] else ": not converged, no distance")
        lines.append(f"| {r['model']} | {r['n'] or 919} | {cell(o, 'o')} | {cell(f, 'f')} | {f.get('reference_ess', '—')} | {mass} | {rhat} |")
    return "\n".join(lines)


def write(rows) -> None:
    with open(OUT + ".json", "w") as fh:
        json.dump(rows, fh, indent=1, default=str)
    with open(OUT + ".md", "w") as fh:
        fh.write("# The gallery: split='fit' beside split='optimised'\n\nWritten by `benchmarks/gallery_fit.py`: total epsilon = 10 over 10 draws, "
                 "distance of the released mean from the non-private posterior mean in posterior sds, over the scalar free parameters.\n\n"
                 + markdown(rows) + "\n")


def main(argv):
    """``gallery_fit.py [model ...]``: run (every model: write the results); ``gallery_fit.py
    --from LOG ...``: write the results from the JSON rows earlier runs printed (a run cut short
    by a time limit, then the models it did not reach; a model run again replaces its row)."""
    if argv[:1] == ["--from"]:
        latest = latest_rows(argv[1:])
        rows = [latest[label] for label, *_ in cases() if label in latest]
        write(rows)
        print(markdown(rows))
        return
    chosen = set(argv)
    rows = run_cases(run_case, chosen)
    print(markdown(rows))
    if not chosen:
        write(rows)


if __name__ == "__main__":
    main(sys.argv[1:])
