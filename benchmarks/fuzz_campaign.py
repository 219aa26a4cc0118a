"""The fuzzer's long campaign: certify thousands of generated models and count what happened.

    nice -n 10 python benchmarks/fuzz_campaign.py --models 10000 --seed 1000000 \\
        --out benchmarks/results/fuzz_campaign.md

Each model ``generate(seed)`` (``tests/fuzz/grammar.py``, profile ``campaign``) is certified and,
where a certificate is issued, checked by ``pymc_dp.refutation.refute(cert, effort="thorough")``
(``tests/fuzz/harness.py``). Results are appended, one JSON line per model, to ``<out>.jsonl`` as
they finish, so that a killed campaign loses at most the models in flight; a re-run with the same
arguments skips the seeds already there (resumable). Every ``--every`` models, and at the end,
the counts are rewritten to ``<out>`` (markdown) and ``<out>.json``: generated / certified /
refused by reason / refuted / crashed / timed out, per family, and every model that broke the
contract (seed, recipe, message). At most 2 worker processes (the machine is shared).

``--mode bounds`` certifies every model with ``epsilon=None`` and the public box
``tests.fuzz.grammar.region_bounds(generated)`` (``run_one(..., mode="bounds")``: the oscillation
rules and the box path that only bounds mode reaches); give it its own ``--out``, e.g.

    nice -n 10 python benchmarks/fuzz_campaign.py --models 2000 --seed 1000000 --mode bounds \\
        --out benchmarks/results/fuzz_campaign_bounds.md

The default (``--mode budget``) is the campaign as before: same command, same files.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import sys
import time
from collections import Counter, defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from tests.fuzz.harness import DEFAULT_TIMEOUT_S, MODES, STATUSES, run_one  # noqa: E402

MAX_WORKERS = 2


def _work(task: tuple[int, str, float, str]) -> dict:
    seed, profile, timeout_s, mode = task
    return run_one(seed, profile=profile, timeout_s=timeout_s, mode=mode).to_dict()


def load_done(jsonl: Path) -> dict[int, dict]:
    """Results already on disk, by seed (a torn last line from a kill is skipped)."""
    done: dict[int, dict] = {}
    if jsonl.exists():
        for line in jsonl.read_text().splitlines():
            try:
                row = json.loads(line)
            except json.JSONDecodeError:
                continue
            done[int(row["seed"])] = row
    return done


def summarise(rows: list[dict], *, requested: int, first_seed: int, profile: str, command: str, elapsed_s: float) -> dict:
    """The counts the report states, from the result rows."""
    counts = Counter(r["status"] for r in rows)
    reasons = Counter(r["reason"] for r in rows if r["status"] == "refused")
    families: dict[str, Counter] = defaultdict(Counter)
    for r in rows:
        families[r["family"] or "?"][r["status"]] += 1
    seconds = sorted(r["seconds"] for r in rows)
    certified = [r for r in rows if r["status"] == "certified"]
    ratios = [r["worst_ratio"] for r in certified if r.get("worst_ratio") is not None]
    problems = sorted((r for r in rows if r["problems"] and r["status"] != "timeout"), key=lambda r: r["seed"])
    return {
        "command": command,
        "profile": profile,
        "first_seed": first_seed,
        "requested": requested,
        "generated": len(rows),
        "counts": {s: counts.get(s, 0) for s in STATUSES},
        "refused_by_reason": dict(reasons.most_common()),
        "refutation": {
            "certified_and_checked": len(ratios),
            "certified_with_a_factor_not_checked": sum("not checked" in r["refutation"] for r in certified),
            "certified_not_checked_at_all": sum(r.get("worst_ratio") is None for r in certified),
            "largest_measured_over_claimed": max(ratios, default=None),
        },
        "by_family": {f: {s: c.get(s, 0) for s in STATUSES} for f, c in sorted(families.items())},
        "seconds": {
            "median": seconds[len(seconds) // 2] if seconds else None,
            "p90": seconds[int(0.9 * (len(seconds) - 1))] if seconds else None,
            "total_model_seconds": round(sum(seconds), 1),
            "wall_this_run": round(elapsed_s, 1),
        },
        "problems": problems,
        "timeouts": sorted(r["seed"] for r in rows if r["status"] == "timeout"),
    }


def write_report(summary: dict, out: Path) -> None:
    """``out`` (markdown) and ``out.with_suffix('.json')``."""
    out.with_suffix(".json").write_text(json.dumps(summary, indent=1) + "\n")
    c = summary["counts"]
    lines = [
        "# Fuzz campaign: generated models through `pymc_dp.certify` and the thorough refutation check",
        "",
        f"Command: `{summary['command']}`",
        "",
        f"**{summary['generated']} of {summary['requested']} models run** (seeds {summary['first_seed']} to "
        f"{summary['first_seed'] + summary['requested'] - 1}, profile `{summary['profile']}`; "
        "`tests/fuzz/grammar.py` rebuilds any of them from its seed). "
        + ("The campaign is complete." if summary["generated"] >= summary["requested"] else
           "The campaign is **not complete**; re-run the command to resume it (done seeds are skipped)."),
        "",
        "| generated | certified | refused | refuted | crashed | timed out |",
        "|---:|---:|---:|---:|---:|---:|",
        f"| {summary['generated']} | {c['certified']} | {c['refused']} | {c['refuted']} | {c['crashed']} | {c['timeout']} |",
        "",
        "*refuted*: a counterexample to a certificate's claimed bound (inside `certify` or by the thorough check "
        "afterwards); *crashed*: an exception that is not a `pymc_dp.PrivacyError`; *timed out*: over the "
        "per-model limit (certify and check together).",
        "",
        f"Per model: median {summary['seconds']['median']} s, 90th percentile {summary['seconds']['p90']} s; "
        f"{summary['seconds']['total_model_seconds']} model-seconds in all.",
        "",
        "Thorough refutation check on the certificates: {certified_and_checked} checked, largest measured/claimed "
        "{largest_measured_over_claimed}; {certified_with_a_factor_not_checked} with a factor the check skipped, "
        "{certified_not_checked_at_all} not checked at all.".format(**summary["refutation"]),
        "",
        "## Refused, by reason",
        "",
        "| count | reason (names as `<var>`, numbers as `#`) |",
        "|---:|---|",
        *[f"| {n} | {reason.replace('|', '/')} |" for reason, n in summary["refused_by_reason"].items()],
        "",
        "## By family",
        "",
        "| family | " + " | ".join(STATUSES) + " |",
        "|---|" + "---:|" * len(STATUSES),
        *[f"| {f} | " + " | ".join(str(row[s]) for s in STATUSES) + " |" for f, row in summary["by_family"].items()],
        "",
        "## Models that broke the contract",
        "",
    ]
    if not summary["problems"]:
        lines.append("None.")
    for r in summary["problems"]:
        where = f"{r['status']} at {r['stage']}" if r["stage"] else r["status"]
        lines += [f"- seed {r['seed']} ({where}): {'; '.join(r['problems'])[:400]}",
                  f"  - recipe: {r['recipe']}", ""]
    if summary["timeouts"]:
        lines += ["", f"Timed out: seeds {', '.join(map(str, summary['timeouts'][:200]))}"
                  + (" …" if len(summary["timeouts"]) > 200 else "")]
    out.write_text("\n".join(lines) + "\n")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", type=int, default=10000)
    parser.add_argument("--seed", type=int, default=1_000_000, help="first seed; the models are seeds seed .. seed + models - 1")
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "fuzz_campaign.md")
    parser.add_argument("--workers", type=int, default=MAX_WORKERS)
    parser.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT_S, help="seconds per model")
    parser.add_argument("--profile", default="campaign", choices=("campaign", "ci", "wide_scale", "paths", "iid", "table"))
    parser.add_argument("--mode", default="budget", choices=MODES,
                        help="budget: certify at the drawn epsilon; bounds: epsilon=None and bounds=region_bounds(model)")
    parser.add_argument("--every", type=int, default=25, help="rewrite the report every this many models")
    parser.add_argument("--retry", nargs="*", default=(), choices=STATUSES,
                        help="run again the seeds whose stored status is one of these (e.g. crashed after a fix landed)")
    args = parser.parse_args(argv)
    workers = max(1, min(args.workers, MAX_WORKERS))
    command = " ".join(["python benchmarks/fuzz_campaign.py", f"--models {args.models}", f"--seed {args.seed}",
                        f"--out {args.out.relative_to(ROOT) if args.out.is_absolute() and args.out.is_relative_to(ROOT) else args.out}",
                        f"--timeout {args.timeout:g}", f"--profile {args.profile}"]
                       + ([f"--mode {args.mode}"] if args.mode != "budget" else []))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    jsonl = args.out.with_suffix(".jsonl")
    stored = load_done(jsonl)
    other = sorted({row.get("mode", "budget") for row in stored.values()} - {args.mode})
    if other:  # rows without "mode" predate it: budget mode
        parser.error(f"{jsonl} holds results of mode {other}, not {args.mode!r}: give this mode its own --out")
    done = {seed: row for seed, row in stored.items() if row["status"] not in args.retry}
    seeds = range(args.seed, args.seed + args.models)
    pending = [s for s in seeds if s not in done]
    start = time.perf_counter()

    def report():
        rows = [done[s] for s in seeds if s in done]
        write_report(summarise(rows, requested=args.models, first_seed=args.seed, profile=args.profile,
                               command=command, elapsed_s=time.perf_counter() - start), args.out)

    print(f"{len(done)} done, {len(pending)} to run on {workers} worker(s)", flush=True)
    if args.retry:  # the file keeps one row per seed: drop the rows that run again
        jsonl.write_text("".join(json.dumps(row) + "\n" for row in done.values()))
    with jsonl.open("a") as sink, mp.get_context("spawn").Pool(workers, maxtasksperchild=40) as pool:
        tasks = [(s, args.profile, args.timeout, args.mode) for s in pending]
        for i, row in enumerate(pool.imap_unordered(_work, tasks), 1):
            done[int(row["seed"])] = row
            sink.write(json.dumps(row) + "\n")
            sink.flush()
            if row["problems"] and row["status"] != "timeout":
                print(f"seed {row['seed']}: {row['status']}: {row['problems'][0][:200]}", flush=True)
            if i % args.every == 0:
                report()
                print(f"{len(done)} of {args.models}", flush=True)
    report()
    return 0


if __name__ == "__main__":
    sys.exit(main())
