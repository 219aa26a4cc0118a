"""The persistent privacy-budget ledger: one SQLite row per release.

A :class:`Ledger` records, for each dataset, every ``(epsilon, delta)`` that a release has
spent on it, and refuses a release that would take the dataset over its total budget. Like
:mod:`pymc_dp.accounting` it knows nothing about mechanisms: it sees amounts and a public JSON
description, nothing else. A dataset is named by a string, normally its :func:`fingerprint`.

Guarantees
----------
1. **No overspending.** For a ledger opened with a total ``(epsilon, delta)``, the sum of every
   amount charged to one dataset never exceeds the total (up to a relative ``1e-12``, see
   ``_RELATIVE_SLACK``), however many threads or processes spend at once. The check and the
   insertion of the new row happen in one ``BEGIN IMMEDIATE`` transaction, which takes
   SQLite's write lock before reading, so no two writers can both see the same "spent so far".
2. **No lost spend.** A spend is reserved (a ``pending`` row, committed to disk) *before* the
   mechanism runs and counts from that moment. A process killed at any instant, even by
   ``SIGKILL``, leaves every row ``pending`` (still counted) or ``committed``/``failed``
   (counted too): nothing it may have released is ever uncounted. A release that raised is
   marked ``failed`` and stays counted (see :meth:`Ledger.spend`).
3. **No silent reset.** A file that is not a pymc_dp ledger, is corrupted, or has a newer
   schema is refused with :class:`~pymc_dp.exceptions.LedgerError` and left untouched; a ledger
   that disappears after it was opened is not recreated behind the caller's back. (The one file
   that is initialised in place is one SQLite reads as an empty database, with no table at all:
   what an interrupted creation leaves, with nothing ever charged to it.) Rows cannot be
   deleted and their amounts cannot be changed through SQL (triggers), which guards against
   accidents, not against someone who owns the file.

What they rest on
-----------------
- **Basic composition**: releases of ``(eps_i, delta_i)``-DP mechanisms on one dataset are
  ``(sum eps_i, sum delta_i)``-DP, for any sequence of mechanisms, adaptively chosen or not.
  Tighter composition (advanced, RDP, PLD) needs to know the mechanisms; the ledger does not.
- **SQLite's transactions**: atomic commit with a rollback journal and ``synchronous=FULL``
  (see ``_connect``), and POSIX advisory file locks. Both need a local filesystem: network
  filesystems (NFS, SMB) often break the locks, and then concurrent writers can overspend.
- **The file itself**: whoever can delete or replace the file can reset the budget. The ledger
  protects the data owner against mistakes and crashes of honest code, not against themselves.
- **The dataset names**: the ledger sums per name. Two names for the same data (e.g. a changed
  dtype) are two budgets; :func:`fingerprint` is deterministic so that the same data and
  domains always get the same name.

The totals are an argument of :class:`Ledger`, not stored in the file: a process that opens the
same file with a larger total may spend more. Choosing the total is the data owner's decision.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import json
import math
import os
import pathlib
import sqlite3
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import platformdirs

from pymc_dp.exceptions import BudgetExceededError, LedgerError, PrivacyError, refuse_estimate
from pymc_dp.fingerprint import canonical_json, fingerprint

__all__ = [
    "ENV_VAR",
    "SCHEMA_VERSION",
    "Ledger",
    "Reservation",
    "Spend",
    "default_ledger_path",
    "fingerprint",
]

#: Environment variable that overrides the default ledger location.
ENV_VAR = "PYMC_DP_LEDGER"

#: Version of the on-disk schema. A file with a newer version is refused, never downgraded.
SCHEMA_VERSION = 1

#: ``PRAGMA application_id`` of a pymc_dp ledger (ASCII "PMDP"): marks the file as ours.
_APPLICATION_ID = 0x504D4450

# Relative slack of the budget check: spent + requested <= total * (1 + slack).
# The amounts are doubles computed upstream (a total divided by N draws, a composition bound
# inverted by bisection), each a few ulps (~1e-16) off; summing even thousands of them with
# math.fsum stays far below 1e-12 relative, so a split of the total into equal shares never
# fails on rounding. A privacy loss larger by a factor 1 + 1e-12 is immeasurable (e^(1e-12 eps)),
# and far below the numerical error of the epsilons themselves, while any real overspend
# (e.g. 1e-9 relative) is refused. A zero delta total gets zero slack: pure DP stays pure.
_RELATIVE_SLACK = 1e-12

#: Seconds a writer waits for another process's lock before LedgerError (reserve is fast:
#: a lock is held for milliseconds, so 30 s only runs out when something is wrong).
DEFAULT_TIMEOUT = 30.0

_STATUSES = ("pending", "committed", "failed")

_SCHEMA = f"""
CREATE TABLE meta (
    key   TEXT PRIMARY KEY,
    value TEXT NOT NULL
);
CREATE TABLE releases (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    dataset     TEXT    NOT NULL,
    epsilon     REAL    NOT NULL CHECK (epsilon >= 0),
    delta       REAL    NOT NULL CHECK (delta >= 0 AND delta < 1),
    status      TEXT    NOT NULL CHECK (status IN ('pending', 'committed', 'failed')),
    created     TEXT    NOT NULL,
    updated     TEXT    NOT NULL,
    pid         INTEGER NOT NULL,
    description TEXT,
    reason      TEXT
);
CREATE INDEX releases_dataset ON releases (dataset);
-- Append-only: a deleted row or a lowered amount would give budget back.
CREATE TRIGGER releases_no_delete BEFORE DELETE ON releases
BEGIN
    SELECT RAISE(ABORT, 'pymc_dp ledger rows cannot be deleted');
END;
CREATE TRIGGER releases_no_rewrite BEFORE UPDATE OF id, dataset, epsilon, delta, created ON releases
BEGIN
    SELECT RAISE(ABORT, 'pymc_dp ledger amounts cannot be changed');
END;
CREATE TRIGGER releases_pending_only BEFORE UPDATE OF status ON releases
WHEN OLD.status != 'pending'
BEGIN
    SELECT RAISE(ABORT, 'only a pending pymc_dp ledger row can change status');
END;
INSERT INTO meta (key, value) VALUES ('application', 'pymc_dp');
INSERT INTO meta (key, value) VALUES ('schema_version', '{SCHEMA_VERSION}');
"""


class _Rollback(Exception):
    """Leave a ``Ledger._transaction`` without committing."""


def _statements(script: str) -> list[str]:
    # executescript() would COMMIT first; split instead (complete_statement knows trigger bodies)
    out, buf = [], ""
    for line in script.splitlines(keepends=True):
        buf += line
        if sqlite3.complete_statement(buf):
            out.append(buf.strip())
            buf = ""
    return out


# --------------------------------------------------------------------------------------------
# Locations and names


def default_ledger_path() -> pathlib.Path:
    """Where a :class:`Ledger` lives when no path is given.

    Returns
    -------
    pathlib.Path
        ``$PYMC_DP_LEDGER`` if that variable is set and not empty (``~`` expanded), else
        ``ledger.sqlite`` in the user's data directory for ``pymc_dp``
        (``platformdirs.user_data_path("pymc_dp")``, e.g. ``~/.local/share/pymc_dp`` on Linux).
    """
    env = os.environ.get(ENV_VAR)
    if env:
        return pathlib.Path(env).expanduser()
    return platformdirs.user_data_path("pymc_dp") / "ledger.sqlite"


@dataclass(frozen=True)
class Spend:
    """What one dataset has spent: every row counts, whatever its status.

    Attributes
    ----------
    epsilon, delta : float
        ``math.fsum`` of the amounts of all rows (committed, pending and failed).
    releases : int
        Committed rows: releases that completed.
    pending : int
        Reserved rows not yet committed: a release in progress, or one whose process died.
    failed : int
        Rows of releases that raised after reserving (counted all the same).
    """

    epsilon: float
    delta: float
    releases: int
    pending: int
    failed: int = 0


@dataclass(frozen=True)
class Reservation:
    """A pending spend: the row ``id`` of the ledger, already counted against ``dataset``."""

    id: int
    dataset: str
    epsilon: float
    delta: float


# --------------------------------------------------------------------------------------------
# Validation and formatting


def _number(name: str, value: Any) -> float:
    refuse_estimate(name, value)
    if isinstance(value, (bool, str, bytes)):
        raise PrivacyError(f"{name} must be a number, got {value!r}.")
    try:
        x = float(value)
    except (TypeError, ValueError):
        raise PrivacyError(f"{name} must be a number, got {value!r}.") from None
    if not math.isfinite(x):
        raise PrivacyError(f"{name} must be finite, got {value!r}.")
    return x


def _check_delta(name: str, value: Any) -> float:
    d = _number(name, value)
    if not 0.0 <= d < 1.0:
        raise PrivacyError(f"{name} must lie in [0, 1), got {value!r}.")
    return d


def _fmt(x: float) -> str:
    return "inf" if math.isinf(x) else f"{x:.12g}"


def _pair(eps: float, delta: float) -> str:
    return f"(epsilon={_fmt(eps)}, delta={_fmt(delta)})"


def _short(dataset: str) -> str:
    # enough to tell a user's datasets apart; see fingerprint(): never release even this
    return dataset if len(dataset) <= 8 else dataset[:8] + "..."


def _now() -> str:
    return _dt.datetime.now(_dt.UTC).isoformat(timespec="microseconds")


def _fits(spent: list[float], requested: float, total: float) -> bool:
    return math.fsum([*spent, requested]) <= total * (1.0 + _RELATIVE_SLACK)


# --------------------------------------------------------------------------------------------
# The ledger


class Ledger:
    """A persistent, crash-safe and process-safe privacy-budget ledger (SQLite).

    Each release on a dataset is one row: :meth:`reserve` inserts it as ``pending`` (counted
    from then on) if the dataset's total still allows it, :meth:`commit` marks it
    ``committed`` once the release is done, :meth:`mark_failed` marks it ``failed`` (still
    counted). :meth:`spend` does the three as a context manager. See the module docstring for
    the guarantees and what they rest on.

    The object holds no connection: every operation opens its own, so a ``Ledger`` can be
    pickled, sent to worker processes, used after ``fork`` and shared between threads.

    Parameters
    ----------
    path : str or os.PathLike, optional
        The SQLite file; :func:`default_ledger_path` if omitted. Created with its parent
        directories (mode ``0o700``/``0o600``: the file holds fingerprints) if it does not
        exist.
    epsilon : float, optional
        The total epsilon each dataset may spend, finite and > 0. ``None``: no total; the
        ledger records every release and never refuses (``delta`` must then be ``None``).
    delta : float, optional
        The total delta per dataset, in ``[0, 1)``. ``None`` with an ``epsilon``: 0, a pure-DP
        budget that refuses every release with ``delta > 0``.
    timeout : float, default 30
        Seconds to wait for another process's write lock before giving up with
        :class:`LedgerError`.

    Attributes
    ----------
    path : pathlib.Path
        The absolute path of the file.
    epsilon, delta : float or None
        The totals per dataset (``None``: no total).
    timeout : float
        The lock timeout in seconds.

    Raises
    ------
    PrivacyError
        A bad ``epsilon``, ``delta`` or ``timeout``.
    LedgerError
        The location cannot be created or written, the file is not a pymc_dp ledger (not
        SQLite, another schema, a newer ``schema_version``) or is corrupted, or it stayed
        locked for longer than ``timeout``. The file is never reset or recreated.
    """

    def __init__(
        self,
        path: str | os.PathLike | None = None,
        *,
        epsilon: float | None = None,
        delta: float | None = None,
        timeout: float = DEFAULT_TIMEOUT,
    ):
        if epsilon is None:
            if delta is not None:
                raise PrivacyError(
                    f"delta={delta!r} was given without epsilon: a ledger with no total epsilon has "
                    "no total at all. Give both, or neither to only record releases."
                )
        else:
            epsilon = _number("epsilon", epsilon)
            if not epsilon > 0:
                raise PrivacyError(f"epsilon (the total budget) must be > 0, got {epsilon!r}.")
            delta = 0.0 if delta is None else _check_delta("delta", delta)
        timeout = _number("timeout", timeout)
        if timeout < 0:
            raise PrivacyError(f"timeout must be >= 0 seconds, got {timeout!r}.")
        raw = default_ledger_path() if path is None else pathlib.Path(os.fspath(path))
        self.path: pathlib.Path = pathlib.Path(os.path.abspath(raw.expanduser()))
        self.epsilon: float | None = epsilon
        self.delta: float | None = delta
        self.timeout: float = timeout
        self._open()

    def __repr__(self) -> str:
        if self.epsilon is None:
            total = "no total"
        else:
            total = f"epsilon={_fmt(self.epsilon)}, delta={_fmt(self.delta)}"
        return f"Ledger({str(self.path)!r}, {total})"

    # ---- connections ------------------------------------------------------------------------

    def _fail(self, what: str, exc: BaseException) -> LedgerError:
        """Translate an sqlite3/OS error into a LedgerError that names the path and a remedy."""
        name = getattr(exc, "sqlite_errorname", "") or ""
        text = str(exc)
        if name.startswith(("SQLITE_BUSY", "SQLITE_LOCKED")) or "locked" in text:
            advice = (
                f"another connection (another process?) held its lock for more than "
                f"{self.timeout:g} s. Wait for it (a release being recorded?) and retry, or open "
                "the Ledger with a larger timeout."
            )
        elif name.startswith("SQLITE_READONLY") or "readonly" in text or "read-only" in text:
            advice = (
                "the file (or its directory, where SQLite writes its journal) is read-only. Make "
                f"both writable, or choose another location with ${ENV_VAR} or Ledger(path=...)."
            )
        elif name in ("SQLITE_NOTADB", "SQLITE_CORRUPT") or "not a database" in text or "malformed" in text:
            advice = (
                "it is not a pymc_dp ledger or it is corrupted. pymc_dp will not reset it, since "
                "that would reset the privacy budget: restore it from a backup, or point "
                f"${ENV_VAR} / Ledger(path=...) elsewhere only if no release was ever charged to it."
            )
        elif name.startswith("SQLITE_CANTOPEN") or isinstance(exc, OSError):
            advice = (
                "the location cannot be created or opened. Check that its directory exists (or can "
                f"be created) and is writable, or choose another location with ${ENV_VAR} or "
                "Ledger(path=...)."
            )
        elif name.startswith(("SQLITE_FULL", "SQLITE_IOERR")):
            advice = "the disk is full or failing. Free space or move the ledger, then retry."
        else:
            advice = "check the file and its directory, then retry."
        return LedgerError(f"Budget ledger {str(self.path)!r}: cannot {what} ({text}); {advice}")

    def _connect(self, *, create: bool = False) -> sqlite3.Connection:
        # After the ledger exists, open it with mode=rw: a file deleted or moved behind our back
        # raises instead of being silently recreated empty (which would reset every budget).
        mode = "rwc" if create else "rw"
        uri = f"{self.path.as_uri()}?mode={mode}"
        # isolation_level=None: we issue BEGIN IMMEDIATE / COMMIT ourselves.
        # timeout: SQLite's busy handler, so concurrent writers wait instead of failing.
        conn = sqlite3.connect(uri, uri=True, timeout=self.timeout, isolation_level=None)
        try:
            # Journal: SQLite's default rollback journal (DELETE), not WAL. Either survives
            # SIGKILL at any instant (an interrupted transaction is rolled back by the next
            # opener from the hot journal), but the rollback journal needs no shared-memory file,
            # works where WAL does not (some network/virtual filesystems), keeps the ledger one
            # file at rest, and WAL's faster concurrent reads are irrelevant at two writes per
            # release. synchronous=FULL fsyncs the journal and the database at every commit, so a
            # committed reservation also survives an OS crash or power loss, not only a killed
            # process. (journal_mode is not set: WAL, if someone chose it, is as safe.)
            conn.execute("PRAGMA synchronous=FULL")
            conn.execute("PRAGMA trusted_schema=OFF")
        except BaseException:
            conn.close()
            raise
        return conn

    @contextlib.contextmanager
    def _transaction(self, what: str, *, create: bool = False) -> Iterator[sqlite3.Connection]:
        """One ``BEGIN IMMEDIATE`` transaction on a fresh connection: commit, or roll back."""
        try:
            conn = self._connect(create=create)
        except sqlite3.Error as exc:
            raise self._fail(what, exc) from exc
        try:
            try:
                # IMMEDIATE takes the write lock before the first read: two processes cannot both
                # read the same "spent so far" and both insert.
                conn.execute("BEGIN IMMEDIATE")
                yield conn
                conn.execute("COMMIT")
            except BaseException:
                if conn.in_transaction:
                    with contextlib.suppress(sqlite3.Error):
                        conn.execute("ROLLBACK")
                raise
        except sqlite3.Error as exc:
            raise self._fail(what, exc) from exc
        finally:
            conn.close()

    @contextlib.contextmanager
    def _reading(self, what: str) -> Iterator[sqlite3.Connection]:
        try:
            conn = self._connect()
        except sqlite3.Error as exc:
            raise self._fail(what, exc) from exc
        try:
            yield conn
        except sqlite3.Error as exc:
            raise self._fail(what, exc) from exc
        finally:
            conn.close()

    def _open(self) -> None:
        try:
            # 0o700: the ledger holds fingerprints, which are membership oracles
            self.path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
            if not self.path.exists():
                with contextlib.suppress(FileExistsError):  # another process won the race
                    os.close(os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
        except OSError as exc:
            raise self._fail("create the ledger", exc) from exc
        try:
            with self._transaction("open the ledger", create=True) as conn:
                tables = {
                    r[0]
                    for r in conn.execute(
                        "SELECT name FROM sqlite_master WHERE type IN ('table', 'view')"
                    )
                }
                if not tables:
                    # An empty database: a new ledger, or one whose creation was interrupted
                    # before its schema was committed (nothing can have been charged to it).
                    # Checked under the write lock, so concurrent openers create it once.
                    conn.execute(f"PRAGMA application_id={_APPLICATION_ID}")
                    for stmt in _statements(_SCHEMA):
                        conn.execute(stmt)
                    return
                self._check_schema(conn, tables)
                # A write, rolled back: a read-only file or directory fails here, when the
                # Ledger is opened, not at the first reserve. The file's content is unchanged.
                # (An UPDATE that changes nothing is skipped by SQLite: insert a row instead.)
                conn.execute("INSERT OR REPLACE INTO meta (key, value) VALUES ('open-probe', '')")
                raise _Rollback
        except _Rollback:
            pass

    def _check_schema(self, conn: sqlite3.Connection, tables: set[str]) -> None:
        def refuse(why: str) -> LedgerError:
            return LedgerError(
                f"Budget ledger {str(self.path)!r}: {why}, so it is not a pymc_dp ledger this version "
                "can use. pymc_dp will not reset or modify it: point "
                f"${ENV_VAR} / Ledger(path=...) to another file, or upgrade pymc_dp if a newer "
                "version wrote it."
            )

        (app_id,) = conn.execute("PRAGMA application_id").fetchone()
        if app_id != _APPLICATION_ID or not {"meta", "releases"} <= tables:
            raise refuse("the file is an SQLite database with another schema")
        row = conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
        try:
            version = int(row[0])
        except (TypeError, ValueError):
            raise refuse("its schema_version is missing or unreadable") from None
        if version > SCHEMA_VERSION:
            raise refuse(f"its schema_version is {version}, newer than this pymc_dp's {SCHEMA_VERSION}")
        if version < SCHEMA_VERSION:  # no older schema has ever existed
            raise refuse(f"its schema_version {version} is unknown")
        cols = {r[1] for r in conn.execute("PRAGMA table_info(releases)")}
        needed = {"id", "dataset", "epsilon", "delta", "status", "created", "updated", "pid",
                  "description", "reason"}
        if not needed <= cols:
            raise refuse(f"its releases table lacks {sorted(needed - cols)}")

    # ---- spending ---------------------------------------------------------------------------

    def reserve(
        self, dataset: str, epsilon: float, delta: float, *, description: Mapping | None = None
    ) -> Reservation:
        """Charge ``(epsilon, delta)`` to ``dataset`` as a pending release, if the total allows.

        In one ``BEGIN IMMEDIATE`` transaction: sum what the dataset has spent (committed,
        pending and failed rows alike), check that the sum plus the request fits the total, and
        insert a ``pending`` row. The row is on disk before this returns, so the mechanism may
        run afterwards: whatever happens to this process, the spend is counted.

        Parameters
        ----------
        dataset : str
            The dataset's name, normally its :func:`fingerprint`.
        epsilon : float
            Finite, >= 0.
        delta : float
            In ``[0, 1)``.
        description : mapping, optional
            Public, JSON-serialisable metadata of the release (e.g. a certificate's ``to_dict()``),
            stored with the row.

        Returns
        -------
        Reservation

        Raises
        ------
        BudgetExceededError
            The request does not fit the dataset's remaining budget; nothing was written.
        PrivacyError
            A bad argument, or a description that is not JSON-serialisable.
        LedgerError
            The ledger cannot be read or written.
        """
        from pymc_dp.mechanisms.noise import audit_noise_generator

        if audit_noise_generator() is not None:  # a release's noise must come from OpenDP, never a seeded rng
            raise PrivacyError(
                f"dataset {dataset!r}: a release cannot be charged inside pymc_dp.audit's seeded noise "
                "(mechanisms.noise.audit_noise): its noise would come from a seeded numpy generator. Release "
                "outside the audit.")
        if not isinstance(dataset, str) or not dataset:
            raise PrivacyError(f"dataset must be a non-empty string (a fingerprint), got {dataset!r}.")
        eps = _number("epsilon", epsilon)
        if eps < 0:
            raise PrivacyError(f"epsilon must be >= 0, got {epsilon!r}.")
        dlt = _check_delta("delta", delta)
        if description is None:
            desc = None
        else:
            try:
                desc = canonical_json(dict(description))
            except (TypeError, ValueError) as exc:
                raise PrivacyError(f"description must be a JSON-serialisable mapping ({exc}).") from exc

        with self._transaction("reserve a spend") as conn:
            rows = conn.execute(
                "SELECT epsilon, delta, status FROM releases WHERE dataset = ?", (dataset,)
            ).fetchall()
            if self.epsilon is not None:
                eps_spent = [r[0] for r in rows]
                dlt_spent = [r[1] for r in rows]
                if not (_fits(eps_spent, eps, self.epsilon) and _fits(dlt_spent, dlt, self.delta)):
                    # raised inside the transaction: it rolls back, the file is not modified
                    raise BudgetExceededError(self._exceeded(dataset, eps, dlt, rows))
            now = _now()
            cur = conn.execute(
                "INSERT INTO releases (dataset, epsilon, delta, status, created, updated, pid, "
                "description) VALUES (?, ?, ?, 'pending', ?, ?, ?, ?)",
                (dataset, eps, dlt, now, now, os.getpid(), desc),
            )
            rid = cur.lastrowid
        return Reservation(id=int(rid), dataset=dataset, epsilon=eps, delta=dlt)

    def _exceeded(self, dataset: str, eps: float, dlt: float, rows: list) -> str:
        eps_spent = math.fsum(r[0] for r in rows)
        dlt_spent = math.fsum(r[1] for r in rows)
        counts = {s: sum(1 for r in rows if r[2] == s) for s in _STATUSES}
        rem = (max(0.0, self.epsilon - eps_spent), max(0.0, self.delta - dlt_spent))
        pure = " (a pure-DP budget: delta must be 0)" if self.delta == 0.0 and dlt > 0 else ""
        return (
            f"Privacy budget exceeded for dataset {_short(dataset)}: this release needs "
            f"{_pair(eps, dlt)}, but {_pair(eps_spent, dlt_spent)} has already been spent "
            f"({counts['committed']} committed, {counts['pending']} pending, {counts['failed']} "
            f"failed) out of a total of {_pair(self.epsilon, self.delta)}{pure}, so only "
            f"{_pair(*rem)} remains. Lower epsilon (or the number of draws), or, if the data "
            f"owner allows it, open the Ledger with a larger total. Ledger: {str(self.path)!r}."
        )

    def _finish(self, reservation: Reservation, status: str, reason: str | None) -> None:
        if not isinstance(reservation, Reservation):
            raise PrivacyError(f"expected a Reservation, got {reservation!r}.")
        what = "commit a spend" if status == "committed" else "mark a spend failed"
        with self._transaction(what) as conn:
            row = conn.execute(
                "SELECT dataset, epsilon, delta, status FROM releases WHERE id = ?", (reservation.id,)
            ).fetchone()
            if row is None or (row[0], row[1], row[2]) != (
                reservation.dataset, reservation.epsilon, reservation.delta
            ):
                raise LedgerError(
                    f"Budget ledger {str(self.path)!r}: reservation {reservation.id} is not in this "
                    "ledger (was it made by a Ledger on another file?). Use the Ledger that reserved it."
                )
            if row[3] != "pending":
                raise LedgerError(
                    f"Budget ledger {str(self.path)!r}: reservation {reservation.id} is already "
                    f"{row[3]}; a reservation is committed or marked failed once."
                )
            conn.execute(
                "UPDATE releases SET status = ?, updated = ?, reason = ? WHERE id = ?",
                (status, _now(), reason, reservation.id),
            )

    def commit(self, reservation: Reservation) -> None:
        """Mark a pending reservation ``committed``: the release completed.

        Raises
        ------
        LedgerError
            The reservation is not a pending row of this ledger, or the ledger cannot be written.
        """
        self._finish(reservation, "committed", None)

    def mark_failed(self, reservation: Reservation, reason: str) -> None:
        """Mark a pending reservation ``failed``. It stays counted (see :meth:`spend`).

        Parameters
        ----------
        reservation : Reservation
        reason : str
            Why, for the local record (e.g. the exception). Stored only in the local ledger.

        Raises
        ------
        LedgerError
            The reservation is not a pending row of this ledger, or the ledger cannot be written.
        """
        self._finish(reservation, "failed", str(reason))

    @contextlib.contextmanager
    def spend(
        self, dataset: str, epsilon: float, delta: float, *, description: Mapping | None = None
    ) -> Iterator[Reservation]:
        """Reserve, run the body, then commit; mark the spend failed if the body raises.

        On *any* exception, ``KeyboardInterrupt`` included, the row is marked ``failed`` and
        the exception re-raised. A failed spend **stays counted**: by the time the body raises
        the mechanism has already run on the private data, and whether, when and with which
        message it raised can depend on them, so refunding it would let failures leak for free.
        Charging is the conservative choice. (If marking it failed is itself impossible, the
        row stays ``pending``, which is counted too, and the original exception propagates with
        a note.)

        Parameters
        ----------
        dataset, epsilon, delta, description
            As for :meth:`reserve`.

        Yields
        ------
        Reservation

        Raises
        ------
        BudgetExceededError
            Before the body runs, if the request does not fit.

        Examples
        --------
        >>> with ledger.spend(fp, 1.0, 0.0, description=cert.to_dict()):  # doctest: +SKIP
        ...     draws = sample()
        """
        reservation = self.reserve(dataset, epsilon, delta, description=description)
        try:
            yield reservation
        except BaseException as exc:
            try:
                self.mark_failed(reservation, f"{type(exc).__name__}: {exc}")
            except LedgerError as err:
                exc.add_note(f"pymc_dp: the spend stays pending (and counted): {err}")
            raise
        self.commit(reservation)

    # ---- reading ----------------------------------------------------------------------------

    def spent(self, dataset: str) -> Spend:
        """What ``dataset`` has spent: all rows, committed, pending and failed."""
        with self._reading("read the ledger") as conn:
            rows = conn.execute(
                "SELECT epsilon, delta, status FROM releases WHERE dataset = ?", (dataset,)
            ).fetchall()
        return Spend(
            epsilon=math.fsum(r[0] for r in rows),
            delta=math.fsum(r[1] for r in rows),
            releases=sum(1 for r in rows if r[2] == "committed"),
            pending=sum(1 for r in rows if r[2] == "pending"),
            failed=sum(1 for r in rows if r[2] == "failed"),
        )

    def remaining(self, dataset: str) -> tuple[float, float]:
        """``(epsilon, delta)`` left to ``dataset`` (never negative); ``(inf, inf)`` with no total."""
        if self.epsilon is None:
            return (math.inf, math.inf)
        s = self.spent(dataset)
        return (max(0.0, self.epsilon - s.epsilon), max(0.0, self.delta - s.delta))

    def releases(self, dataset: str | None = None) -> list[dict]:
        """The rows, oldest first, as dicts (``description`` parsed from JSON).

        Keys: ``id, dataset, epsilon, delta, status, created, updated, pid, description,
        reason``. ``dataset`` is the fingerprint: do not release these rows as they are.
        """
        cols = ("id", "dataset", "epsilon", "delta", "status", "created", "updated", "pid",
                "description", "reason")
        sql = f"SELECT {', '.join(cols)} FROM releases"
        args: tuple = ()
        if dataset is not None:
            sql += " WHERE dataset = ?"
            args = (dataset,)
        with self._reading("read the ledger") as conn:
            rows = conn.execute(sql + " ORDER BY id", args).fetchall()
        out = []
        for r in rows:
            d = dict(zip(cols, r))
            if d["description"] is not None:
                d["description"] = json.loads(d["description"])
            out.append(d)
        return out
