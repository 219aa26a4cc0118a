"""One check shared by the tests of typed ``NotImplementedError`` refusals (standard 2).

A mechanism called directly (not through ``make_private(..., path=...)``) that does not implement
an option must raise a :class:`pymc_dp.PrivacyError` that is also a ``NotImplementedError`` (so
``except pymc_dp.PrivacyError`` and every existing ``except NotImplementedError`` catch it), with a
message naming the variable, and must charge nothing to the ledger it was given.
"""

from __future__ import annotations

from typing import Callable

import pytest

import pymc_dp


def assert_typed_refusal(call: Callable[[], object], *, kind: type, match: str,
                         ledger: pymc_dp.Ledger | None = None, dataset: str | None = None) -> BaseException:
    """Run ``call``; it must raise ``kind`` (a PrivacyError and a NotImplementedError) matching
    ``match``, and leave ``ledger`` (when given) without a row, ``dataset``'s spent total at 0."""
    assert issubclass(kind, pymc_dp.PrivacyError) and issubclass(kind, NotImplementedError), kind
    with pytest.raises(pymc_dp.PrivacyError, match=match) as info:
        call()
    err = info.value
    assert isinstance(err, kind), f"{type(err).__name__} is not a {kind.__name__}: {err}"
    assert isinstance(err, NotImplementedError)
    if ledger is not None:
        assert ledger.releases() == []
        if dataset is not None:
            spent = ledger.spent(dataset)
            assert spent.epsilon == 0.0 and spent.delta == 0.0
    return err
