"""pymc_dp.fingerprint: the dataset's fingerprint (deterministic across processes, changed by every
input, Dask arrays hashed block by block as the computed array) and the canonical JSON it hashes."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

from pymc_dp.exceptions import PrivacyError
from pymc_dp.fingerprint import canonical_json, fingerprint
from tests.test_ledger import ROOT, WORKER, _env


def _fp_inputs():
    data = {
        "y": np.array([0, 1, 1, 0, 1], dtype=np.int64),
        "X": np.arange(15, dtype=np.float64).reshape(5, 3) / 7.0,
    }
    domains = {"y": {"type": "Binary"}, "X": {"type": "Box", "lo": [-1.0], "hi": [3.0]}}
    return data, domains


def test_fingerprint_is_deterministic_across_processes():
    data, domains = _fp_inputs()
    here = fingerprint(data, domains, "record")
    assert len(here) == 64 and int(here, 16) >= 0
    out = subprocess.run(
        [sys.executable, str(WORKER), "fingerprint", "-"], capture_output=True, text=True,
        env=_env(), cwd=str(ROOT), timeout=60, check=True,
    )
    assert out.stdout.strip() == here
    # container order, memory layout and byte order do not matter
    swapped = {"X": np.asfortranarray(data["X"]), "y": data["y"].astype(">i8")}
    assert fingerprint(swapped, dict(reversed(list(domains.items()))), "record") == here


def test_fingerprint_changes_with_every_input():
    data, domains = _fp_inputs()
    base = fingerprint(data, domains, "record")
    y1 = data["y"].copy()
    y1[3] = 1
    X1 = data["X"].copy()
    X1[4, 2] = np.nextafter(X1[4, 2], 10)  # one ulp
    variants = [
        fingerprint({**data, "y": y1}, domains, "record"),
        fingerprint({**data, "X": X1}, domains, "record"),
        fingerprint(data, {**domains, "X": {"type": "Box", "lo": [-1.0], "hi": [4.0]}}, "record"),
        fingerprint(data, domains, "attribute"),
        fingerprint({**data, "y": data["y"].astype(np.int32)}, domains, "record"),
        fingerprint({**data, "X": data["X"].reshape(3, 5)}, domains, "record"),
        fingerprint({"y": data["y"], "Z": data["X"]}, domains, "record"),
    ]
    assert base not in variants
    assert len(set(variants)) == len(variants)


def test_fingerprint_accepts_domain_objects_and_refuses_object_arrays():
    from pymc_dp.domains import Binary, Interval

    x = np.array([0.0, 1.0])
    assert fingerprint({"x": x}, {"x": Interval(0, 1)}, "record") == fingerprint(
        {"x": x}, {"x": Interval(0, 1).to_dict()}, "record"
    )
    assert fingerprint({"x": x}, {"x": Binary()}, "record") != fingerprint(
        {"x": x}, {"x": Interval(0, 1)}, "record"
    )
    with pytest.raises(PrivacyError, match="object dtype"):
        fingerprint({"x": np.array([1, "a"], dtype=object)}, {}, "record")


def test_fingerprint_of_a_dask_array_is_that_of_the_computed_array():
    da = pytest.importorskip("dask.array")
    data, domains = _fp_inputs()
    here = fingerprint(data, domains, "record")
    lazy = {"y": da.from_array(data["y"], chunks=2), "X": da.from_array(data["X"], chunks=(2, 2))}
    assert fingerprint(lazy, domains, "record") == here
    lazy["X"] = lazy["X"] + 1.0
    assert fingerprint(lazy, domains, "record") != here


def test_canonical_json_sorts_keys_converts_numpy_and_refuses_nan():
    text = canonical_json({"b": np.float64(0.5), "a": {"z": np.arange(3), "y": np.int32(7)}, "c": [np.bool_(True)]})
    assert text == '{"a":{"y":7,"z":[0,1,2]},"b":0.5,"c":[true]}'
    assert json.loads(text) == {"a": {"y": 7, "z": [0, 1, 2]}, "b": 0.5, "c": [True]}
    # insertion order does not matter: the same bytes
    assert canonical_json({"y": 1, "x": 2}) == canonical_json({"x": 2, "y": 1}) == '{"x":2,"y":1}'
    with pytest.raises(ValueError):
        canonical_json({"a": float("nan")})
    with pytest.raises(ValueError):
        canonical_json({"a": np.array([1.0, np.nan])})
    with pytest.raises(TypeError, match="object"):
        canonical_json({"a": object()})
