"""The release record: one writer and one reader, a schema tag, two copies that must agree."""

from __future__ import annotations

import json

import arviz as az
import numpy as np
import pytest
import xarray as xr

from pymc_dp import record


def _idata():
    post = xr.Dataset({"p": (("chain", "draw"), np.zeros((1, 3)))}, attrs={"created_at": "now", "sampler_seed": 7})
    return az.InferenceData(posterior=post)


def test_attach_writes_both_copies_with_the_schema_and_drops_run_attributes():
    idata = _idata()
    text = record.attach(idata, {"epsilon": 1.0, "release": {"chains": 1}})
    assert idata.attrs["pymc_dp"] == idata.posterior.attrs["pymc_dp"] == text
    assert json.loads(text)["schema"] == record.SCHEMA
    assert set(idata.posterior.attrs) == {"created_at", "pymc_dp"}  # no sampler state travels
    assert record.read(idata) == record.read(idata.posterior) == record.read(text) == json.loads(text)
    with pytest.raises(ValueError):
        record.attach(_idata(), {"epsilon": float("nan")})  # not JSON


def test_read_refuses_missing_edited_and_foreign_records():
    assert record.read(_idata(), required=False) is None
    with pytest.raises(ValueError, match="no pymc_dp metadata"):
        record.read(_idata())
    idata = _idata()
    record.attach(idata, {"epsilon": 1.0})
    idata.attrs["pymc_dp"] = json.dumps({"epsilon": 0.1, "schema": record.SCHEMA})
    with pytest.raises(ValueError, match="two different"):
        record.read(idata)
    with pytest.raises(ValueError, match="schema"):
        record.read(json.dumps({"schema": "pymc_dp.release/2"}))
    with pytest.raises(ValueError, match="not JSON"):
        record.read("{")
    # a record written before the schema tag is read as version 1
    assert record.read(json.dumps({"epsilon": 2.0})) == {"epsilon": 2.0}
