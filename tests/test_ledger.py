"""The persistent privacy-budget ledger: accounting, refusals, crashes, concurrency, corruption."""

from __future__ import annotations

import json
import math
import os
import pickle
import random
import shutil
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import platformdirs
import pytest

from pymc_dp.exceptions import BudgetExceededError, LedgerError, PrivacyError
from pymc_dp.ledger import Ledger, Reservation, Spend, default_ledger_path

ROOT = Path(__file__).resolve().parents[1]
WORKER = Path(__file__).resolve().parent / "_ledger_worker.py"
DS = "0123456789abcdef" * 4  # a fingerprint-shaped dataset id
OTHER = "f" * 64


# ---- helpers ---------------------------------------------------------------------------------


def _env() -> dict:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    return env


def _start(mode: str, path, **args) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, str(WORKER), mode, str(path), json.dumps(args)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=_env(),
        cwd=str(ROOT),
    )


def _expect(proc: subprocess.Popen, prefix: str, timeout: float = 30.0) -> str:
    """Read the worker's next line; fail with its stderr if it is not ``prefix...``."""
    box: list[str] = []
    t = threading.Thread(target=lambda: box.append(proc.stdout.readline()), daemon=True)
    t.start()
    t.join(timeout)
    line = box[0] if box else ""
    if not line.startswith(prefix):
        proc.kill()
        proc.wait()
        pytest.fail(f"worker said {line!r}, expected {prefix!r}; stderr:\n{proc.stderr.read()}")
    return line.strip()


def _kill(proc: subprocess.Popen) -> None:
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)
    assert proc.returncode == -signal.SIGKILL


def _integrity(path) -> str:
    conn = sqlite3.connect(path)
    try:
        return conn.execute("PRAGMA integrity_check").fetchone()[0]
    finally:
        conn.close()


def _raw_rows(path) -> list[tuple]:
    conn = sqlite3.connect(path)
    try:
        return conn.execute("SELECT id, dataset, epsilon, delta, status FROM releases ORDER BY id").fetchall()
    finally:
        conn.close()


@pytest.fixture
def path(tmp_path):
    return tmp_path / "ledger.sqlite"


# ---- 1. spend and remaining ------------------------------------------------------------------


def test_spend_remaining_per_dataset(path):
    lg = Ledger(path, epsilon=2.0, delta=1e-5)
    assert lg.spent(DS) == Spend(0.0, 0.0, 0, 0, 0)
    assert lg.remaining(DS) == (2.0, 1e-5)

    r = lg.reserve(DS, 0.5, 1e-6)
    assert isinstance(r, Reservation) and (r.dataset, r.epsilon, r.delta) == (DS, 0.5, 1e-6)
    assert lg.spent(DS) == Spend(0.5, 1e-6, 0, 1, 0)  # pending counts at once
    lg.commit(r)
    lg.commit(lg.reserve(DS, 0.25, 0.0))
    assert lg.spent(DS) == Spend(0.75, 1e-6, 2, 0, 0)
    assert lg.remaining(DS) == pytest.approx((1.25, 9e-6), rel=1e-12)

    # another dataset has its own budget
    assert lg.spent(OTHER) == Spend(0.0, 0.0, 0, 0, 0)
    lg.commit(lg.reserve(OTHER, 2.0, 0.0))
    assert lg.remaining(OTHER) == (0.0, 1e-5)
    assert lg.spent(DS).epsilon == 0.75

    # a second Ledger on the same file sees the same history; opening does not modify the file
    before = path.read_bytes()
    assert Ledger(path, epsilon=2.0, delta=1e-5).spent(DS) == lg.spent(DS)
    assert path.read_bytes() == before


def test_no_total_never_refuses_and_counts(path):
    lg = Ledger(path)
    assert (lg.epsilon, lg.delta) == (None, None)
    for _ in range(3):
        lg.commit(lg.reserve(DS, 1e6, 0.5))
    s = lg.spent(DS)
    assert (s.epsilon, s.delta, s.releases) == (3e6, 1.5, 3)
    assert lg.remaining(DS) == (math.inf, math.inf)


def test_releases_rows(path):
    lg = Ledger(path, epsilon=10.0)
    lg.commit(lg.reserve(DS, 1.0, 0.0, description={"draws": np.int64(5), "unit": "record"}))
    r2 = lg.reserve(OTHER, 2.0, 0.0)
    lg.mark_failed(lg.reserve(DS, 3.0, 0.0), "boom")
    rows = lg.releases()
    assert [r["epsilon"] for r in rows] == [1.0, 2.0, 3.0]  # oldest first
    assert [r["status"] for r in rows] == ["committed", "pending", "failed"]
    assert rows[0]["description"] == {"draws": 5, "unit": "record"}
    assert rows[1]["description"] is None and rows[1]["id"] == r2.id
    assert rows[2]["reason"] == "boom" and rows[2]["pid"] == os.getpid()
    assert set(rows[0]) == {"id", "dataset", "epsilon", "delta", "status", "created", "updated", "pid",
                            "description", "reason"}
    assert [r["epsilon"] for r in lg.releases(DS)] == [1.0, 3.0]


# ---- 2. exhaustion ---------------------------------------------------------------------------


def test_exhaustion_message_and_file_unchanged(path):
    lg = Ledger(path, epsilon=1.0, delta=1e-6)
    lg.commit(lg.reserve(DS, 0.7, 0.0))
    before = path.read_bytes()
    rows = _raw_rows(path)
    with pytest.raises(BudgetExceededError) as info:
        lg.reserve(DS, 0.5, 0.0)
    msg = str(info.value)
    assert "epsilon=0.5," in msg  # requested
    assert "epsilon=0.7," in msg  # spent
    assert "epsilon=0.3," in msg  # remaining
    assert "epsilon=1," in msg  # total
    assert DS[:8] in msg and DS not in msg  # a prefix, not the fingerprint
    assert "larger total" in msg and "Lower epsilon" in msg
    assert path.read_bytes() == before
    assert _raw_rows(path) == rows
    assert not Path(str(path) + "-journal").exists()
    # delta is a budget too
    with pytest.raises(BudgetExceededError, match="delta=2e-06"):
        lg.reserve(DS, 0.1, 2e-6)
    assert _raw_rows(path) == rows


def test_pure_dp_budget_refuses_any_delta(path):
    lg = Ledger(path, epsilon=1.0)
    assert lg.delta == 0.0
    with pytest.raises(BudgetExceededError, match="pure-DP"):
        lg.reserve(DS, 0.1, 1e-300)
    lg.commit(lg.reserve(DS, 0.1, 0.0))
    assert lg.spent(DS).releases == 1


# ---- 3. tolerance ----------------------------------------------------------------------------


def test_tolerance_ten_tenths_fit_one(path):
    lg = Ledger(path, epsilon=1.0)
    for _ in range(10):
        lg.commit(lg.reserve(DS, 0.1, 0.0))
    assert lg.spent(DS).epsilon == 1.0
    with pytest.raises(BudgetExceededError):
        lg.reserve(DS, 0.1, 0.0)
    with pytest.raises(BudgetExceededError):
        lg.reserve(DS, 1e-9, 0.0)
    assert lg.spent(DS).releases == 10


def test_tolerance_rounding_fits_but_real_overspend_does_not(path):
    # 0.1 + 0.2 > 0.3 in binary floating point (0.30000000000000004): the slack lets a total
    # split into these shares be spent exactly; a 1e-9 relative overspend is still refused.
    lg = Ledger(path, epsilon=0.3)
    lg.commit(lg.reserve(DS, 0.1, 0.0))
    lg.commit(lg.reserve(DS, 0.2, 0.0))
    assert lg.spent(DS).releases == 2
    with pytest.raises(BudgetExceededError):
        Ledger(path.with_name("b.sqlite"), epsilon=1.0).reserve(DS, 1.0 + 1e-9, 0.0)
    lg2 = Ledger(path.with_name("c.sqlite"), epsilon=1.0)
    lg2.reserve(DS, 1.0, 0.0)  # the total itself fits


# ---- 4. spend() ------------------------------------------------------------------------------


def test_spend_commits_on_success(path):
    lg = Ledger(path, epsilon=1.0)
    with lg.spend(DS, 0.4, 0.0, description={"k": 1}) as r:
        assert lg.releases()[0]["status"] == "pending"
    assert lg.releases()[0]["status"] == "committed" and lg.releases()[0]["id"] == r.id
    assert lg.spent(DS) == Spend(0.4, 0.0, 1, 0, 0)


@pytest.mark.parametrize("exc", [RuntimeError("sampler blew up"), KeyboardInterrupt()])
def test_spend_marks_failed_and_still_counts(path, exc):
    lg = Ledger(path, epsilon=1.0)
    with pytest.raises(type(exc)), lg.spend(DS, 0.4, 0.0):
        raise exc
    (row,) = lg.releases()
    assert row["status"] == "failed" and type(exc).__name__ in row["reason"]
    assert lg.spent(DS) == Spend(0.4, 0.0, 0, 0, 1)
    assert lg.remaining(DS) == pytest.approx((0.6, 0.0))
    with pytest.raises(BudgetExceededError, match="1 failed"):  # reserve counts it too
        lg.reserve(DS, 0.7, 0.0)


def test_spend_refused_before_body_runs(path):
    lg = Ledger(path, epsilon=1.0)
    ran = []
    with pytest.raises(BudgetExceededError), lg.spend(DS, 1.5, 0.0):
        ran.append(1)
    assert ran == [] and lg.releases() == []


def test_reservation_transitions_are_checked(path):
    lg = Ledger(path, epsilon=1.0)
    r = lg.reserve(DS, 0.1, 0.0)
    lg.commit(r)
    with pytest.raises(LedgerError, match="already committed"):
        lg.commit(r)
    with pytest.raises(LedgerError, match="already committed"):
        lg.mark_failed(r, "late")
    with pytest.raises(LedgerError, match="not in this ledger"):
        lg.commit(Reservation(id=999, dataset=DS, epsilon=0.1, delta=0.0))
    with pytest.raises(LedgerError, match="not in this ledger"):  # same id, other amount
        lg.commit(Reservation(id=r.id, dataset=DS, epsilon=0.0, delta=0.0))
    # the rows themselves are append-only, even through raw SQL
    conn = sqlite3.connect(path)
    for sql in ("DELETE FROM releases", "UPDATE releases SET epsilon = 0",
                "UPDATE releases SET status = 'pending'"):
        with pytest.raises(sqlite3.DatabaseError):
            conn.execute(sql)
    conn.rollback()
    conn.close()
    assert lg.spent(DS) == Spend(0.1, 0.0, 1, 0, 0)


# ---- construction, validation, pickling --------------------------------------------------------


@pytest.mark.parametrize(
    "kwargs, name",
    [
        ({"epsilon": 0.0}, "epsilon"),
        ({"epsilon": -1.0}, "epsilon"),
        ({"epsilon": math.inf}, "epsilon"),
        ({"epsilon": math.nan}, "epsilon"),
        ({"epsilon": "1"}, "epsilon"),
        ({"epsilon": True}, "epsilon"),
        ({"epsilon": "lots"}, "epsilon"),
        ({"epsilon": 1.0, "delta": 1.0}, "delta"),
        ({"epsilon": 1.0, "delta": -1e-9}, "delta"),
        ({"epsilon": 1.0, "delta": math.nan}, "delta"),
        ({"delta": 1e-6}, "delta"),
        ({"epsilon": 1.0, "timeout": -1}, "timeout"),
    ],
)
def test_bad_totals(path, kwargs, name):
    with pytest.raises(PrivacyError, match=name) as info:
        Ledger(path, **kwargs)
    assert not isinstance(info.value, LedgerError)
    assert not path.exists()  # validated before anything is created


@pytest.mark.parametrize(
    "args, name",
    [(("", 0.1, 0.0), "dataset"), ((DS, -0.1, 0.0), "epsilon"), ((DS, math.inf, 0.0), "epsilon"),
     ((DS, 0.1, 1.0), "delta"), ((DS, 0.1, -1.0), "delta")],
)
def test_bad_reservations(path, args, name):
    lg = Ledger(path)
    with pytest.raises(PrivacyError, match=name):
        lg.reserve(*args)
    with pytest.raises(PrivacyError, match="description"):
        lg.reserve(DS, 0.1, 0.0, description={"f": object()})
    assert lg.releases() == []


def test_repr_and_pickle(path):
    lg = Ledger(path, epsilon=3.0, delta=1e-6)
    assert repr(lg) == f"Ledger({str(path)!r}, epsilon=3, delta=1e-06)"
    assert "no total" in repr(Ledger(path))
    lg.commit(lg.reserve(DS, 1.0, 0.0))
    clone = pickle.loads(pickle.dumps(lg))
    assert (clone.path, clone.epsilon, clone.delta) == (lg.path, 3.0, 1e-6)
    assert clone.spent(DS) == lg.spent(DS)


def test_ledger_deleted_after_open_is_not_recreated(path):
    lg = Ledger(path, epsilon=1.0)
    lg.commit(lg.reserve(DS, 0.9, 0.0))
    path.unlink()
    with pytest.raises(LedgerError, match=str(path)):
        lg.reserve(DS, 0.9, 0.0)
    with pytest.raises(LedgerError):
        lg.spent(DS)
    assert not path.exists()


# ---- 5. SIGKILL ------------------------------------------------------------------------------


def test_sigkill_while_sampling_leaves_pending_and_counted(path):
    Ledger(path, epsilon=1.0)
    proc = _start("hold", path, dataset=DS, epsilon=0.3, total=1.0)
    rid = int(_expect(proc, "reserved").split()[1])
    _kill(proc)

    lg = Ledger(path, epsilon=1.0)
    assert _integrity(path) == "ok"
    (row,) = lg.releases(DS)
    assert (row["id"], row["status"], row["pid"], row["epsilon"]) == (rid, "pending", proc.pid, 0.3)
    assert row["description"] == {"mode": "hold"}
    assert lg.spent(DS) == Spend(0.3, 0.0, 0, 1, 0)
    assert lg.remaining(DS) == pytest.approx((0.7, 0.0))
    with pytest.raises(BudgetExceededError, match="1 pending"):  # reserve counts it too
        lg.reserve(DS, 0.8, 0.0)


def test_sigkill_inside_commit_transaction_rolls_back_to_pending(path):
    proc = _start("stall", path, dataset=DS, epsilon=0.3, total=1.0)
    _expect(proc, "reserved")
    _expect(proc, "in-transaction")  # holding the write lock, UPDATE not committed
    _kill(proc)
    # the interrupted transaction left a hot journal (a journal_mode of OFF or MEMORY would not,
    # and could leave a half-written file); the next opener rolls it back
    assert Path(f"{path}-journal").exists() or Path(f"{path}-wal").exists()

    lg = Ledger(path, epsilon=1.0, timeout=5)  # the dead process's lock is gone
    assert _integrity(path) == "ok"
    assert [r["status"] for r in lg.releases()] == ["pending"]
    assert lg.spent(DS) == Spend(0.3, 0.0, 0, 1, 0)
    lg.commit(lg.reserve(DS, 0.7, 0.0))  # the ledger is writable again
    assert lg.remaining(DS) == (0.0, 0.0)


def _kill_loop(path, iterations: int, seed: int) -> None:
    rng = random.Random(seed)
    Ledger(path)
    acknowledged: dict[int, str] = {}
    for _ in range(iterations):
        proc = _start("cycle", path, dataset=DS)
        _expect(proc, "ready")
        first = _expect(proc, "R ")  # it is cycling: the kill lands mid-cycle, not at start-up
        time.sleep(rng.uniform(0.0, 0.05))
        _kill(proc)
        for line in [first + "\n", *proc.stdout.read().splitlines(keepends=True)]:
            assert line.endswith("\n"), f"torn line {line!r}"
            tag, rid = line.split()
            acknowledged[int(rid)] = tag
        assert _integrity(path) == "ok"

    lg = Ledger(path)
    rows = lg.releases(DS)
    status = {r["id"]: r["status"] for r in rows}
    # every acknowledged step is on disk; a reserve is never lost
    for rid, tag in acknowledged.items():
        assert status[rid] == {"R": "pending", "C": "committed", "F": "failed"}[tag] or (
            tag == "R" and status[rid] in ("committed", "failed")  # killed before it printed
        )
    s = lg.spent(DS)
    assert s.epsilon == math.fsum(r["epsilon"] for r in rows)
    assert s.delta == math.fsum(r["delta"] for r in rows)
    assert s.releases + s.pending + s.failed == len(rows)
    assert s.pending <= iterations  # at most one interrupted reservation per killed worker
    assert {r["status"] for r in rows} <= {"pending", "committed", "failed"}


def test_sigkill_at_random_moments_keeps_ledger_consistent(path):
    _kill_loop(path, iterations=20, seed=0)


@pytest.mark.extended
def test_sigkill_at_random_moments_many(path):
    _kill_loop(path, iterations=200, seed=1)


# ---- 6. concurrency --------------------------------------------------------------------------


def test_concurrent_processes_never_overspend(path):
    Ledger(path, epsilon=1.0)
    procs = [_start("race", path, dataset=DS, epsilon=0.1, total=1.0, stall_s=0.005) for _ in range(6)]
    for p in procs:
        _expect(p, "ready")
    for p in procs:  # release them together
        p.stdin.write("go\n")
        p.stdin.flush()
    oks = [json.loads(_expect(p, "{", timeout=120))["ok"] for p in procs]
    for p in procs:
        assert p.wait(timeout=30) == 0, p.stderr.read()

    assert sum(oks) == 10
    lg = Ledger(path, epsilon=1.0)
    s = lg.spent(DS)
    assert s.epsilon <= 1.0 and s == Spend(1.0, 0.0, 10, 0, 0)
    assert _integrity(path) == "ok"


def test_concurrent_threads_never_overspend(path):
    lg = Ledger(path, epsilon=1.0)
    oks = []

    def spend_until_refused():
        n = 0
        while True:
            try:
                with lg.spend(DS, 0.05, 0.0):
                    pass
            except BudgetExceededError:
                oks.append(n)
                return
            n += 1

    threads = [threading.Thread(target=spend_until_refused) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert len(oks) == 6 and sum(oks) == 20
    assert lg.spent(DS) == Spend(1.0, 0.0, 20, 0, 0)


# ---- 7. corrupted files, unwritable locations, locks -----------------------------------------


def test_random_bytes_file_is_refused_and_untouched(path):
    junk = np.random.default_rng(0).bytes(8192)
    path.write_bytes(junk)
    with pytest.raises(LedgerError, match="not a pymc_dp ledger or it is corrupted") as info:
        Ledger(path, epsilon=1.0)
    assert str(path) in str(info.value)
    assert path.read_bytes() == junk


def test_corrupted_sqlite_ledger_is_refused_and_untouched(path):
    lg = Ledger(path, epsilon=1.0)
    for _ in range(6):  # a few pages of rows
        lg.reserve(DS, 0.01, 0.0, description={"pad": "x" * 2000})
    assert path.stat().st_size > 8192
    data = bytearray(path.read_bytes())
    data[4096:] = np.random.default_rng(1).bytes(len(data) - 4096)  # keep the header page
    path.write_bytes(bytes(data))
    with pytest.raises(LedgerError):
        Ledger(path, epsilon=1.0).spent(DS)
    assert path.read_bytes() == bytes(data)


def test_other_schema_is_refused_and_untouched(path):
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE releases (x INTEGER)")
    conn.execute("INSERT INTO releases VALUES (1)")
    conn.commit()
    conn.close()
    before = path.read_bytes()
    with pytest.raises(LedgerError, match="another schema"):
        Ledger(path, epsilon=1.0)
    assert path.read_bytes() == before


def test_newer_schema_version_is_refused(path):
    Ledger(path, epsilon=1.0)
    conn = sqlite3.connect(path)
    conn.execute("UPDATE meta SET value = '99' WHERE key = 'schema_version'")
    conn.commit()
    conn.close()
    before = path.read_bytes()
    with pytest.raises(LedgerError, match="newer"):
        Ledger(path, epsilon=1.0)
    assert path.read_bytes() == before


def test_empty_file_becomes_a_ledger(path):
    # what an interrupted creation leaves behind: nothing can have been charged to it
    path.touch()
    lg = Ledger(path, epsilon=1.0)
    lg.commit(lg.reserve(DS, 0.5, 0.0))
    assert Ledger(path, epsilon=1.0).spent(DS).epsilon == 0.5


def test_path_under_a_regular_file_is_refused(tmp_path):
    blocker = tmp_path / "not_a_dir"
    blocker.write_text("x")
    with pytest.raises(LedgerError, match="cannot be created or opened") as info:
        Ledger(blocker / "sub" / "ledger.sqlite", epsilon=1.0)
    assert str(blocker) in str(info.value)
    with pytest.raises(LedgerError):
        Ledger(blocker / "ledger.sqlite")
    assert blocker.read_text() == "x"


def test_path_that_is_a_directory_is_refused(tmp_path):
    with pytest.raises(LedgerError, match=str(tmp_path)):
        Ledger(tmp_path, epsilon=1.0)


def test_creates_parent_directories_privately(tmp_path):
    p = tmp_path / "a" / "b" / "ledger.sqlite"
    Ledger(p)
    assert p.is_file()
    assert p.stat().st_mode & 0o077 == 0  # fingerprints are membership oracles
    assert p.parent.stat().st_mode & 0o077 == 0


def _without_dac_override() -> list[str] | None:
    """A command prefix under which file permissions apply (root ignores them), or None."""
    if not hasattr(os, "geteuid") or os.geteuid() != 0:
        return []
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        return None
    drop = "-dac_override,-dac_read_search"
    return [setpriv, f"--bounding-set={drop}", f"--inh-caps={drop}"]


def _open_in_worker(prefix: list[str], path, **args) -> str:
    out = subprocess.run(
        [*prefix, sys.executable, str(WORKER), "open", str(path), json.dumps(args)],
        capture_output=True, text=True, env=_env(), cwd=str(ROOT), timeout=60, check=False,
    )
    assert out.returncode == 0, out.stderr
    return out.stdout.strip()


def test_read_only_locations_are_refused(tmp_path):
    prefix = _without_dac_override()
    if prefix is None:
        pytest.skip("running as root without setpriv: permissions cannot be enforced")
    ro = tmp_path / "ro"
    ro.mkdir()
    p = tmp_path / "ledger.sqlite"
    Ledger(p)
    try:
        ro.chmod(0o500)  # a read-only directory
        assert _open_in_worker(prefix, ro / "ledger.sqlite").startswith("LedgerError")
        assert not (ro / "ledger.sqlite").exists()
        p.chmod(0o400)  # a read-only file
        msg = _open_in_worker(prefix, p, total=1.0)
        assert msg.startswith("LedgerError") and "read-only" in msg and str(p) in msg
        p.chmod(0o600)
        tmp_path.chmod(0o500)  # a writable file in a read-only directory: no room for a journal
        msg = _open_in_worker(prefix, p, total=1.0)
        assert msg.startswith("LedgerError") and "read-only" in msg
    finally:
        ro.chmod(0o700)
        p.chmod(0o600)
        tmp_path.chmod(0o700)
    assert _open_in_worker(prefix, p, total=1.0, reserve=True) == "ok"  # writable again


def test_locked_longer_than_timeout(path):
    lg = Ledger(path, epsilon=1.0, timeout=0.2)
    blocker = sqlite3.connect(path, isolation_level=None)
    blocker.execute("BEGIN EXCLUSIVE")
    try:
        t0 = time.monotonic()
        with pytest.raises(LedgerError, match="more than 0.2 s") as info:
            lg.reserve(DS, 0.1, 0.0)
        assert time.monotonic() - t0 >= 0.15  # it waited
        assert str(path) in str(info.value)
        assert not isinstance(info.value.__cause__, LedgerError)
        with pytest.raises(LedgerError, match="locked"):
            Ledger(path, timeout=0.1)
    finally:
        blocker.execute("ROLLBACK")
        blocker.close()
    lg.commit(lg.reserve(DS, 0.1, 0.0))
    assert lg.spent(DS).releases == 1


# ---- 8. default path -------------------------------------------------------------------------


def test_default_ledger_path_honours_env(monkeypatch, tmp_path):
    target = tmp_path / "env" / "my.sqlite"
    monkeypatch.setenv("PYMC_DP_LEDGER", str(target))
    assert default_ledger_path() == target
    lg = Ledger()
    assert lg.path == target and target.is_file()

    monkeypatch.setenv("PYMC_DP_LEDGER", "~/x.sqlite")
    assert default_ledger_path() == Path.home() / "x.sqlite"

    monkeypatch.delenv("PYMC_DP_LEDGER")
    assert default_ledger_path() == platformdirs.user_data_path("pymc_dp") / "ledger.sqlite"


def test_nothing_is_charged_inside_an_audit_s_seeded_noise(tmp_path):
    """Inside ``mechanisms.noise.audit_noise`` every noise function draws from a seeded numpy
    generator: a release there would publish seedable noise. The ledger refuses to charge it, and
    writes nothing; outside the block the same charge goes through."""
    import numpy as np

    from pymc_dp.exceptions import PrivacyError
    from pymc_dp.ledger import Ledger
    from pymc_dp.mechanisms.noise import audit_noise

    ledger = Ledger(tmp_path / "l.sqlite", epsilon=5.0)
    with audit_noise(np.random.default_rng(0)):
        with pytest.raises(PrivacyError, match="seeded noise"):
            ledger.reserve("ds", 1.0, 0.0)
    assert ledger.releases("ds") == []
    ledger.commit(ledger.reserve("ds", 1.0, 0.0))
    assert len(ledger.releases("ds")) == 1
