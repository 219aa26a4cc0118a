"""pymc_dp.chunks: private values validated and summed chunk by chunk (``CHUNK_ROWS`` rows at a time),
and a Dask array block by block, with the same results as the whole array."""

from __future__ import annotations

import numpy as np
import pytest

import pymc_dp.chunks
from pymc_dp.chunks import check_values, is_dask, summed
from pymc_dp.domains import Interval
from pymc_dp.exceptions import DomainError

N = 10


def _values(bad_row=None):
    x = np.linspace(0.05, 0.95, N)
    if bad_row is not None:
        x[bad_row] = 2.0  # outside Interval(0, 1)
    return x


def _moments(a):
    a = np.asarray(a)
    return np.array([len(a), a.sum(), (a**2).sum()])


@pytest.fixture
def small_chunks(monkeypatch):
    monkeypatch.setattr(pymc_dp.chunks, "CHUNK_ROWS", 4)


def test_check_values_validates_every_chunk_and_returns_the_row_count(small_chunks, monkeypatch):
    seen = []
    validate = Interval.validate

    def spy(self, name, values):
        seen.append(len(values))
        return validate(self, name, values)

    monkeypatch.setattr(Interval, "validate", spy)
    assert check_values("x", _values(), Interval(0, 1)) == N
    assert seen == [4, 4, 2]  # chunk by chunk, never the whole array at once
    seen.clear()
    with pytest.raises(DomainError, match="'x'"):
        check_values("x", _values(bad_row=N - 1), Interval(0, 1))  # in the last chunk
    assert seen == [4, 4, 2]


def test_summed_over_chunks_is_the_sum_over_the_array(small_chunks):
    calls = []

    def summarise(a):
        calls.append(len(a))
        return _moments(a)

    x = _values()
    np.testing.assert_allclose(summed(x, summarise), _moments(x), rtol=1e-12)
    assert calls == [4, 4, 2]
    x2 = np.stack([x, 1 - x], axis=1)  # rows of a matrix: chunks of whole rows
    np.testing.assert_allclose(summed(x2, lambda a: a.sum(axis=0)), x2.sum(axis=0), rtol=1e-12)


def test_a_dask_array_gives_what_numpy_gives(small_chunks):
    da = pytest.importorskip("dask.array")
    x = _values()
    lazy = da.from_array(x, chunks=3)
    assert is_dask(lazy) and not is_dask(x)
    assert check_values("x", lazy, Interval(0, 1)) == check_values("x", x, Interval(0, 1)) == N
    np.testing.assert_allclose(summed(lazy, _moments), summed(x, _moments), rtol=1e-12)
    bad = _values(bad_row=N - 1)
    for values in (bad, da.from_array(bad, chunks=3)):
        with pytest.raises(DomainError, match="'x'"):
            check_values("x", values, Interval(0, 1))
