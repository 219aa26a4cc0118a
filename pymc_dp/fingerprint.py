"""The fingerprint of a private dataset: a deterministic name for its values, domains and unit.

The ledger keeps one budget per fingerprint (:mod:`pymc_dp.ledger`); the release record never
holds it (it is a membership oracle). Arrays are hashed chunk by chunk, and a Dask array or
dataframe block by block, with the same result as the computed array.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any

import numpy as np

from pymc_dp.chunks import is_dask
from pymc_dp.exceptions import PrivacyError

__all__ = ["canonical_json", "fingerprint"]


def _json_default(obj: Any) -> Any:
    # numpy scalars/arrays and pymc_dp domains inside descriptions and domain mappings
    if hasattr(obj, "to_dict"):
        return obj.to_dict()
    if isinstance(obj, np.ndarray):
        return obj.tolist()
    if isinstance(obj, np.generic):
        return obj.item()
    if isinstance(obj, (set, frozenset)):
        return sorted(obj)
    raise TypeError(f"{type(obj).__name__} is not JSON serialisable")


def canonical_json(obj: Any) -> str:
    """Compact JSON with sorted keys (NumPy values and domains converted, NaN refused): the bytes
    that are hashed, and that the ledger stores as a release's description."""
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), default=_json_default, allow_nan=False)


def fingerprint(data: Mapping[str, np.ndarray], domains: Mapping[str, Mapping], unit: str) -> str:
    """A deterministic name for a private dataset, its domains and its privacy unit.

    The SHA-256 (hex) of, in this order and each length-prefixed: a version tag; for every
    container in sorted name order, its name, its dtype (little-endian form, so the byte order
    of the machine does not matter), its shape and its C-contiguous bytes; then the canonical
    JSON (sorted keys) of ``domains`` and of ``unit``. The same inputs give the same hash in
    every process and on every machine; one changed value, shape, dtype, domain or unit gives
    another. The ledger keeps one budget per fingerprint.

    .. warning::
       This hash is a **membership oracle**: anyone who knows every record but one can hash
       each candidate for the missing record and compare. It is stored only in the local
       ledger and must never be released (not in a certificate, a report, a log or an
       ``InferenceData``). The same holds for any prefix of it.

    Parameters
    ----------
    data : mapping of str to array_like
        The private containers. Object arrays are refused (their bytes are pointers).
    domains : mapping of str to mapping
        Each container's declared domain as a JSON-able mapping (``Domain.to_dict()``; a
        :class:`~pymc_dp.domains.Domain` itself is accepted and converted).
    unit : str
        The privacy unit (``"record"``, ``"attribute"``, ...); any JSON-able value is accepted.

    Returns
    -------
    str
        64 hexadecimal characters.

    Raises
    ------
    PrivacyError
        A container name is not a string, an array has object dtype, or the domains or unit
        are not JSON-serialisable.
    """
    h = hashlib.sha256()

    def put(b: bytes) -> None:
        # length prefix: no two different sequences of fields hash the same byte stream
        h.update(len(b).to_bytes(8, "little"))
        h.update(b)

    put(b"pymc_dp.fingerprint.v1")
    names = list(data)
    for name in names:
        if not isinstance(name, str):
            raise PrivacyError(f"fingerprint: container names must be strings, got {name!r}.")
    put(str(len(names)).encode())
    for name in sorted(names):
        if is_dask(data[name]):  # larger than memory: the same bytes, streamed block by block
            _put_dask(h, put, name, data[name])
            continue
        a = np.asarray(data[name])
        if a.dtype.hasobject:
            raise PrivacyError(
                f"fingerprint: container {name!r} has object dtype; convert it to a numeric or "
                "fixed-width dtype first."
            )
        a = np.ascontiguousarray(a.astype(a.dtype.newbyteorder("<"), copy=False))
        put(name.encode("utf-8"))
        put(a.dtype.str.encode("ascii") if a.dtype.names is None else repr(a.dtype.descr).encode())
        put(canonical_json(list(a.shape)).encode())
        put(a.tobytes(order="C"))
    try:
        put(canonical_json({str(k): v for k, v in domains.items()}).encode("utf-8"))
        put(canonical_json(unit).encode("utf-8"))
    except (TypeError, ValueError) as exc:
        raise PrivacyError(f"fingerprint: domains and unit must be JSON-serialisable ({exc}).") from exc
    return h.hexdigest()


def _put_dask(h, put, name: str, values) -> None:
    """The fields :func:`fingerprint` hashes for an array, from a Dask array (or dataframe)
    read one block of rows at a time: the hash equals that of the computed array."""
    import dask.array as da

    arr = values.to_dask_array(lengths=True) if hasattr(values, "to_dask_array") else da.asarray(values)
    if arr.dtype.hasobject:
        raise PrivacyError(f"fingerprint: container {name!r} has object dtype; convert it to a numeric dtype first.")
    if any(np.isnan(s) for s in arr.shape):
        raise PrivacyError(f"fingerprint: container {name!r} has unknown chunk sizes; compute them first.")
    arr = arr.rechunk({i: -1 for i in range(1, arr.ndim)})  # whole rows per block: C order is block order
    dtype = arr.dtype.newbyteorder("<")
    put(name.encode("utf-8"))
    put(dtype.str.encode("ascii") if dtype.names is None else repr(dtype.descr).encode())
    put(canonical_json([int(s) for s in arr.shape]).encode())
    h.update(int(arr.size * dtype.itemsize).to_bytes(8, "little"))
    for block in arr.blocks:
        h.update(np.ascontiguousarray(np.asarray(block.compute()).astype(dtype, copy=False)).tobytes(order="C"))


# --------------------------------------------------------------------------------------------
# Value objects
