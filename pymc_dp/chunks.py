"""Private values in chunks of rows: validation against a domain and sums, for NumPy and Dask.

The noisy-statistics and noisy-counts mechanisms read private data only through these
functions, so that data larger than memory (a Dask array or dataframe) go through the same path
block by block, and an in-memory array is summed ``CHUNK_ROWS`` rows at a time. A leaf module
(domains and exceptions only).
"""

from __future__ import annotations

import math
from typing import Callable

import numpy as np

from pymc_dp.domains import Domain
from pymc_dp.exceptions import DomainError

__all__ = ["CHUNK_ROWS", "check_values", "is_dask", "summed"]

#: rows per chunk when the statistics of an in-memory array are summed
CHUNK_ROWS = 1 << 20


def is_dask(values) -> bool:
    """Whether ``values`` is a Dask array or dataframe (read block by block, never loaded whole)."""
    return type(values).__module__.split(".")[0] == "dask"


def check_values(name: str, values, domain: Domain) -> int:
    """Validate against the domain (chunk by chunk) and return the number of rows."""
    if is_dask(values):
        import dask.array as da

        arr = values.to_dask_array(lengths=True) if hasattr(values, "to_dask_array") else da.asarray(values)
        if any(math.isnan(s) for s in arr.shape):
            raise DomainError(f"{name!r}: the number of rows must be known (compute the chunk sizes first).")
        import dask

        ok = all(dask.compute(*[dask.delayed(_all_in)(block, domain) for block in arr.blocks.ravel()]))
        if not ok:
            raise DomainError(
                f"Private data {name!r} has a value outside its declared domain {domain}. Clip or filter "
                "the data with a public rule, or declare a domain that covers every possible record."
            )
        return int(arr.shape[0])
    arr = np.asarray(values)
    for start in range(0, max(arr.shape[0], 1), CHUNK_ROWS):
        domain.validate(name, arr[start : start + CHUNK_ROWS] if arr.ndim else arr)
    return int(arr.shape[0])


def _all_in(block, domain: Domain) -> bool:
    try:
        domain.validate("block", np.asarray(block))
    except DomainError:
        return False
    return True


def summed(values, summarise: Callable[[np.ndarray], np.ndarray]) -> np.ndarray:
    """``summarise`` added up over chunks of rows (Dask: over its blocks, lazily)."""
    if is_dask(values):
        import dask
        import dask.array as da

        arr = values.to_dask_array(lengths=True) if hasattr(values, "to_dask_array") else da.asarray(values)
        parts = [dask.delayed(summarise)(block) for block in arr.blocks.ravel()]
        return np.sum(dask.compute(*parts), axis=0)
    arr = np.asarray(values)
    total = None
    for start in range(0, max(arr.shape[0], 1), CHUNK_ROWS):
        part = summarise(arr[start : start + CHUNK_ROWS])
        total = part if total is None else total + part
    return total
