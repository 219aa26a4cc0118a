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


# ------------------------------------------------------------------ releases saved by an earlier pymc_dp
FIXTURES = sorted((__import__("pathlib").Path(__file__).parent / "data").glob("release_*.nc"))


def test_there_are_saved_release_fixtures():
    assert {f.name.split("_", 2)[2] for f in FIXTURES} >= {"posterior_sampling.nc", "laplace_updates.nc"}


@pytest.mark.parametrize("path", FIXTURES, ids=lambda p: p.name)
def test_a_release_saved_by_an_earlier_version_is_still_read(path):
    """A NetCDF file written by ``idata.to_netcdf`` with the schema of its name
    (``tests/data/make_release_fixtures.py``): its record reads, and the report, the query
    engine and the plots' certificate reader accept it."""
    import pymc_dp
    from pymc_dp.plots import certificate_dict
    from pymc_dp.query import answer

    idata = az.from_netcdf(path)
    rec = record.read(idata)
    assert rec["schema"].startswith("pymc_dp.release/")
    assert rec["epsilon"] > 0 and rec["release"]
    text = pymc_dp.report(idata).to_text()
    assert f"{rec['epsilon']:g}" in text or f"{rec['epsilon']:.4g}" in text
    mean_p = answer(idata, lambda draw: draw["p"])
    assert 0.0 < mean_p.value < 1.0
    assert np.isclose(mean_p.value, float(idata.posterior["p"].mean()))
    if "mechanism" not in rec:  # posterior sampling: the plots read its certificate
        assert certificate_dict(idata)["epsilon"] == rec["epsilon"]
