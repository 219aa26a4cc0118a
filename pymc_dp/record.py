"""The release record: the public facts of one release, as JSON in ``attrs["pymc_dp"]``.

Every release (posterior sampling, private MAP, Laplace / Fourier updates, noisy statistics,
noisy counts) writes its record with :func:`attach`, and the report, the plots and the query
engine read it with :func:`read`. One writer and one reader: the record carries a schema tag
(``SCHEMA``), it is written to the ``InferenceData``'s attrs and to the posterior's (so that a
posterior saved on its own keeps it), and two copies that differ are refused as an edited release.

The record holds only public facts (certificate or mechanism description, release layout,
ledger counts); the private data, the dataset's fingerprint and the random seed's state never
enter it (``docs/theory/release.md``).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

__all__ = ["SCHEMA", "attach", "read"]

#: the record's schema tag; a reader refuses a record of another major version
SCHEMA = "pymc_dp.release/1"


def attach(idata, payload: Mapping[str, Any], *, allow_nan: bool = False) -> str:
    """Write ``payload`` (plus the schema tag) as the release record of ``idata``.

    Sets ``idata.attrs["pymc_dp"]`` and ``idata.posterior.attrs["pymc_dp"]`` to the same JSON
    string (sorted keys; NaN and infinities refused) and returns it. The posterior keeps no
    attribute of the sampler run except ArviZ's ``created_at`` and ``arviz_version``.
    """
    text = json.dumps({**payload, "schema": SCHEMA}, sort_keys=True, allow_nan=allow_nan)
    idata.attrs["pymc_dp"] = text
    post = idata.posterior
    post.attrs = {**{k: v for k, v in post.attrs.items() if k in ("created_at", "arviz_version")}, "pymc_dp": text}
    return text


def _copies(obj) -> list[str]:
    found = []
    attrs = getattr(obj, "attrs", None)
    groups = obj.groups() if hasattr(obj, "groups") else ()
    sources = [attrs if isinstance(attrs, Mapping) else {}]
    if "posterior" in groups:
        sources.append(obj.posterior.attrs)
    for source in sources:
        raw = source.get("pymc_dp")
        if raw is not None:
            found.append(raw.decode() if isinstance(raw, bytes) else raw)
    return found


def read(obj, *, required: bool = True) -> dict | None:
    """The release record of ``obj`` as a dict.

    ``obj``: a released ``InferenceData``, its posterior ``Dataset``, the record's JSON string, or
    the record as a dict. A record written before the schema tag existed is read as version 1.

    Raises
    ------
    ValueError
        ``obj`` has no record (unless ``required=False``: then None), its two copies differ (an
        edited release), it is not JSON, or its schema is another version.
    """
    if isinstance(obj, str):
        found = [obj]
    elif isinstance(obj, Mapping) and not hasattr(obj, "attrs"):  # InferenceData is a Mapping too
        found = [dict(obj)]
    else:
        found = _copies(obj)
    if not found:
        if not required:
            return None
        raise ValueError(
            "this object has no pymc_dp metadata (attrs['pymc_dp']): it is not a release of pymc_dp, "
            "or its attributes were dropped."
        )
    texts = {json.dumps(f, sort_keys=True) if isinstance(f, Mapping) else f for f in found}
    if len(texts) > 1:
        raise ValueError(
            "this InferenceData carries two different pymc_dp records (in attrs and in the posterior's "
            "attrs): it was edited; use an unmodified release."
        )
    first = found[0]
    try:
        record = dict(first) if isinstance(first, Mapping) else json.loads(first)
    except (TypeError, ValueError) as err:
        raise ValueError(f"attrs['pymc_dp'] is not JSON ({err}).") from None
    if not isinstance(record, dict):
        raise ValueError("attrs['pymc_dp'] is not a JSON object.")
    schema = record.get("schema", SCHEMA)
    if not (isinstance(schema, str) and schema.split("/")[0] == SCHEMA.split("/")[0]
            and schema.split("/")[-1].split(".")[0] == SCHEMA.split("/")[-1].split(".")[0]):
        raise ValueError(f"attrs['pymc_dp'] has schema {schema!r}; this pymc_dp reads {SCHEMA!r}.")
    return record
