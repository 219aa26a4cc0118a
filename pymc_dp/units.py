"""Privacy units: what two neighbouring datasets differ in (docs/theory/lift.md).

* ``"record"`` -- one row of every private container (replace-one);
* ``"attribute"`` -- one container's value in one row;
* :class:`Users` -- every row of one user, where a user owns at most ``m`` rows and the
  grouping of rows into users is public.

Datasets are compared by replacement, so the number of rows is the same in neighbours and is
public; the per-draw loss of a user is at most ``m`` times that of a record, because each of
the user's rows moves the log-likelihood by at most the record constant.
"""

from __future__ import annotations

import numbers
from typing import Any

import numpy as np

from pymc_dp.exceptions import PrivacyError

__all__ = ["Users", "UNITS", "describe_unit", "check_unit"]

#: the unit names accepted as strings
UNITS = ("record", "attribute")


class Users:
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
    if isinstance(unit, Users):
        return
    if not isinstance(unit, str) or unit not in UNITS:
        raise PrivacyError(
            f"unit={unit!r} is not a privacy unit; use 'record', 'attribute' or pymc_dp.Users(ids) / "
            "pymc_dp.Users(max_rows=m)."
        )


def describe_unit(unit: Any) -> dict:
    """The unit as public, JSON-safe metadata."""
    if isinstance(unit, Users):
        return unit.to_dict()
    return {"kind": unit, "max_rows": 1}
