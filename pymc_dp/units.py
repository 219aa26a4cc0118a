"""Privacy units: what two neighbouring datasets differ in (docs/theory/lift.md).

* :class:`Record` (``"record"``) -- one row of every private container (replace-one);
* :class:`Attribute` (``"attribute"``) -- one container's value in one row;
* :class:`Users` -- every row of one user, where a user owns at most ``m`` rows and the
  grouping of rows into users is public.

Every unit is an object with one small interface -- ``kind``, ``max_rows`` (the rows one unit
changes), ``base`` (the unit a user reduces to), :meth:`Unit.lift` (per-draw ``Delta`` from the
factors' constants) and :meth:`Unit.equal_split` (its inverse with equal shares) -- so code
below the API asks the unit rather than testing strings. Strings are accepted at the API edge
(:func:`as_unit`); a unit object compares equal to its name, so ``unit == "record"`` still holds.

Datasets are compared by replacement, so the number of rows is the same in neighbours and is
public; the per-draw loss of a user is at most ``m`` times that of a record, because each of
the user's rows moves the log-likelihood by at most the record constant.
"""

from __future__ import annotations

import numbers
from typing import Any, Mapping, Sequence

import numpy as np

from pymc_dp.exceptions import PrivacyError

__all__ = ["Unit", "Record", "Attribute", "Users", "UNITS", "as_unit", "describe_unit", "check_unit"]

#: the unit names accepted as strings
UNITS = ("record", "attribute")


class Unit:
    """A privacy unit (docs/theory/lift.md): how many rows it changes and how constants lift."""

    kind: str = ""
    max_rows: int = 1

    @property
    def base(self) -> "Unit":
        """The unit whose lift this one scales: itself for a record or an attribute, a record
        for a user (a user is ``m`` records)."""
        return self

    def lift(self, lipschitz: Mapping[str, float], reads: Mapping[str, Sequence[str]]) -> float:
        """Per-draw ``Delta`` from the factors' constants ``L_j`` (factors reading private data)."""
        raise NotImplementedError

    def equal_split(self, Delta: float, reads: Mapping[str, Sequence[str]]) -> dict[str, float]:
        """Shares ``L_j`` that :meth:`lift` maps back to ``Delta``, equal where they can be."""
        raise NotImplementedError

    def to_dict(self) -> dict:
        """Public, JSON-safe metadata of the unit (part of the ledger's fingerprint)."""
        return {"kind": self.kind, "max_rows": self.max_rows}

    def __str__(self) -> str:
        return self.kind


class _Named(Unit):
    """A unit with a name (``"record"``, ``"attribute"``): equal to its name as a string."""

    def __eq__(self, other):
        if isinstance(other, str):
            return other == self.kind
        return type(other) is type(self)

    def __hash__(self):
        return hash(self.kind)

    def __repr__(self) -> str:
        return f"pymc_dp.{type(self).__name__}()"


class Record(_Named):
    """One row of every private container (replace-one): ``Delta = sum_j L_j``."""

    kind = "record"

    def lift(self, lipschitz, reads) -> float:
        return float(sum(lipschitz[j] for j in lipschitz if reads[j]))

    def equal_split(self, Delta, reads) -> dict[str, float]:
        private = [j for j in reads if reads[j]]
        return {j: Delta / len(private) for j in private}


class Attribute(_Named):
    """One container's value in one row: ``Delta = max_k sum_{j reads k} L_j``."""

    kind = "attribute"

    def lift(self, lipschitz, reads) -> float:
        containers = sorted({k for j in lipschitz for k in reads[j]})
        return float(max((sum(lipschitz[j] for j in lipschitz if k in reads[j]) for k in containers), default=0.0))

    def equal_split(self, Delta, reads) -> dict[str, float]:
        """Factor ``j`` gets ``Delta / max_{k in reads_j} n_k``, ``n_k`` the factors reading ``k``:
        then ``sum_{j reads k} L_j <= Delta`` for every ``k``, with equality at the busiest."""
        count: dict = {}
        private = [j for j in reads if reads[j]]
        for j in private:
            for k in reads[j]:
                count[k] = count.get(k, 0) + 1
        return {j: Delta / max(count[k] for k in reads[j]) for j in private}


RECORD = Record()
ATTRIBUTE = Attribute()


class Users(Unit):
    """Privacy unit: all rows of one user.

    Parameters
    ----------
    ids : array-like, optional
        A public user id for every row of the private data (same length as the containers'
        first axis). ``m`` is then the largest number of rows any user has.
    max_rows : int, optional
        ``m`` itself, when the ids are not at hand but a public cap on rows per user is
        (e.g. a collection protocol that takes at most 5 visits per patient).

    Give exactly one of the two. ``Delta`` of a user is ``m`` times the record ``Delta``.

    Examples
    --------
    >>> pymc_dp.Users(["ann", "ann", "bob"]).max_rows
    2
    >>> pymc_dp.Users(max_rows=5).max_rows
    5
    """

    kind = "user"

    def __init__(self, ids: Any = None, *, max_rows: int | None = None):
        if (ids is None) == (max_rows is None):
            raise PrivacyError("unit=Users(...) needs exactly one of ids (a public id per row) or max_rows=m.")
        if ids is not None:
            arr = np.asarray(ids)
            if arr.ndim != 1 or arr.size == 0:
                raise PrivacyError(f"unit=Users(ids): ids must be a non-empty 1-d array of user ids, got shape {arr.shape}.")
            if arr.dtype.kind == "f" and not np.all(np.isfinite(arr)):
                raise PrivacyError("unit=Users(ids): ids hold NaN or infinite values; give every row a user id.")
            _, counts = np.unique(arr, return_counts=True)
            self.ids: np.ndarray | None = arr.copy()
            self.ids.setflags(write=False)
            self.max_rows = int(counts.max())
        else:
            if isinstance(max_rows, bool) or not isinstance(max_rows, numbers.Integral) or max_rows < 1:
                raise PrivacyError(f"unit=Users(max_rows={max_rows!r}): max_rows must be an integer >= 1.")
            self.ids = None
            self.max_rows = int(max_rows)

    def check_rows(self, n_rows: int) -> None:
        """Refuse ids whose length is not the number of rows of the private data."""
        if self.ids is not None and len(self.ids) != n_rows:
            raise PrivacyError(
                f"unit=Users(ids) has {len(self.ids)} ids, but the private data have {n_rows} rows; "
                "give one public user id per row."
            )

    @property
    def base(self) -> Unit:
        return RECORD

    def lift(self, lipschitz, reads) -> float:
        return self.max_rows * RECORD.lift(lipschitz, reads)

    def equal_split(self, Delta, reads) -> dict[str, float]:
        return RECORD.equal_split(Delta / self.max_rows, reads)

    def to_dict(self) -> dict:
        # the ids themselves are not metadata of the guarantee: only m is
        return {"kind": "user", "max_rows": self.max_rows}

    def __eq__(self, other):
        return (
            isinstance(other, Users)
            and self.max_rows == other.max_rows
            and (self.ids is None) == (other.ids is None)
            and (self.ids is None or np.array_equal(self.ids, other.ids))
        )

    def __hash__(self):
        return hash(("Users", self.max_rows))

    def __repr__(self):
        return f"Users(max_rows={self.max_rows})" if self.ids is None else f"Users(<{len(self.ids)} ids>, max_rows={self.max_rows})"


def check_unit(unit: Any) -> None:
    """Raise a :class:`PrivacyError` naming ``unit`` unless it is a known privacy unit."""
    if isinstance(unit, Unit):
        return
    if not isinstance(unit, str) or unit not in UNITS:
        raise PrivacyError(
            f"unit={unit!r} is not a privacy unit; use 'record', 'attribute' or pymc_dp.Users(ids) / "
            "pymc_dp.Users(max_rows=m)."
        )


def as_unit(unit: Any) -> Unit:
    """The unit object of ``unit`` (a name or a unit); a :class:`PrivacyError` naming it otherwise."""
    check_unit(unit)
    if isinstance(unit, Unit):
        return unit
    return RECORD if unit == "record" else ATTRIBUTE


def describe_unit(unit: Any) -> dict:
    """The unit as public, JSON-safe metadata."""
    return as_unit(unit).to_dict()
