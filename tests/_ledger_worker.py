"""Subprocess helper for tests/test_ledger.py and tests/test_fingerprint.py (not a test module).

Usage: ``python _ledger_worker.py MODE PATH [JSON-ARGS]``. It imports ``pymc_dp.ledger`` from
the repository that holds this file, *without* running ``pymc_dp/__init__.py`` (which imports
PyMC, ~4 s a process): the tests start dozens of these processes. Protocol: one line per event
on stdout, flushed at once, so that the parent sees every acknowledged step even after a SIGKILL.
"""

from __future__ import annotations

import contextlib
import json
import pathlib
import sys
import time
import types

ROOT = pathlib.Path(__file__).resolve().parents[1]


def _import():
    if "pymc_dp" not in sys.modules:
        # a bare package object: submodules load from ROOT/pymc_dp, __init__.py is skipped
        pkg = types.ModuleType("pymc_dp")
        pkg.__path__ = [str(ROOT / "pymc_dp")]
        sys.modules["pymc_dp"] = pkg
    from pymc_dp import exceptions, ledger

    return ledger, exceptions


def say(*parts) -> None:
    # one write() of a short line: atomic on a pipe, so a SIGKILL cannot tear it
    sys.stdout.write(" ".join(map(str, parts)) + "\n")
    sys.stdout.flush()


def main() -> int:
    mode, path = sys.argv[1], sys.argv[2]
    args = json.loads(sys.argv[3]) if len(sys.argv) > 3 else {}
    ledger, exceptions = _import()
    ds = args.get("dataset", "ds")

    if mode == "hold":
        # reserve, then "sample" forever: the parent kills us
        lg = ledger.Ledger(path, epsilon=args.get("total"))
        r = lg.reserve(ds, args["epsilon"], 0.0, description={"mode": "hold"})
        say("reserved", r.id)
        time.sleep(600)
        return 0

    if mode == "stall":
        # stop inside the commit's write transaction, after the UPDATE, before COMMIT
        class Stalling(ledger.Ledger):
            @contextlib.contextmanager
            def _transaction(self, what, *, create=False):
                with super()._transaction(what, create=create) as conn:
                    yield conn
                    if what == "commit a spend":
                        say("in-transaction")
                        time.sleep(600)

        lg = Stalling(path, epsilon=args.get("total"))
        r = lg.reserve(ds, args["epsilon"], 0.0)
        say("reserved", r.id)
        lg.commit(r)
        return 0

    if mode == "cycle":
        # reserve / commit (or mark failed) as fast as possible until killed
        lg = ledger.Ledger(path)
        say("ready")
        i = 0
        while True:
            i += 1
            r = lg.reserve(ds, 0.001 * (1 + i % 7), 1e-9 * (i % 3), description={"i": i})
            say("R", r.id)
            if i % 4 == 0:
                lg.mark_failed(r, "simulated failure")
                say("F", r.id)
            else:
                lg.commit(r)
                say("C", r.id)

    if mode == "race":
        # wait for the parent's "go", then spend until refused
        lg = ledger.Ledger(path, epsilon=args["total"])
        if args.get("stall_s"):
            # widen the window between the budget check and the insert (reserve calls _now()
            # in between): without a real lock, concurrent reservations would then overspend
            real_now = ledger._now

            def slow_now():
                time.sleep(args["stall_s"])
                return real_now()

            ledger._now = slow_now
        say("ready")
        sys.stdin.readline()
        ok = 0
        while True:
            try:
                with lg.spend(ds, args["epsilon"], 0.0):
                    pass
            except exceptions.BudgetExceededError:
                break
            ok += 1
        say(json.dumps({"ok": ok}))
        return 0

    if mode == "open":
        # open (and optionally reserve); report a LedgerError instead of raising it
        try:
            lg = ledger.Ledger(path, epsilon=args.get("total"))
            if args.get("reserve"):
                lg.reserve(ds, 0.1, 0.0)
        except exceptions.LedgerError as exc:
            say("LedgerError", str(exc).replace("\n", " "))
            return 0
        say("ok")
        return 0

    if mode == "fingerprint":
        import numpy as np

        data = {
            "y": np.array([0, 1, 1, 0, 1], dtype=np.int64),
            "X": np.arange(15, dtype=np.float64).reshape(5, 3) / 7.0,
        }
        domains = {"y": {"type": "Binary"}, "X": {"type": "Box", "lo": [-1.0], "hi": [3.0]}}
        say(ledger.fingerprint(data, domains, "record"))
        return 0

    raise SystemExit(f"unknown mode {mode!r}")


if __name__ == "__main__":
    sys.exit(main())
