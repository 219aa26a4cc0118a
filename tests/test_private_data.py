"""PrivateData (pymc_dp/private_data.py): validated values, their domains, the unit, the fingerprint."""

from __future__ import annotations

import numpy as np
import pymc as pm
import pytest

import pymc_dp
from pymc_dp.preprocess import dataset_id
from pymc_dp.private_data import PrivateData


def _model(y):
    with pm.Model() as model:
        yd = pm.Data("y", y)
        pm.Bernoulli("obs", pm.Beta("p", 1.0, 1.0), observed=yd)
    return model


DOMAINS = {"y": pymc_dp.Binary()}


def test_from_model_validates_and_fingerprints_as_every_mechanism_did():
    y = np.array([0, 1, 1, 0])
    data = PrivateData.from_model(_model(y), DOMAINS, "record")
    np.testing.assert_array_equal(data.values["y"], y)
    assert data.unit == "record"
    assert data.fingerprint == dataset_id({"y": _model(y)["y"].get_value()}, DOMAINS, "record")
    assert data.fingerprint != PrivateData.from_model(_model(1 - y), DOMAINS, "record").fingerprint
    assert data.fingerprint != PrivateData.from_model(_model(y), DOMAINS, "attribute").fingerprint
    with pytest.raises(pymc_dp.DomainError, match="'y'"):
        PrivateData.from_model(_model(np.array([0, 2])), DOMAINS, "record")


def test_with_values_checks_names_domains_and_shapes_and_keeps_the_dtype():
    data = PrivateData.from_model(_model(np.array([0, 1, 1, 0])), DOMAINS, "record")
    other = data.with_values({"y": [1.0, 1.0, 1.0, 1.0]})
    assert other.values["y"].dtype == data.values["y"].dtype and other.fingerprint != data.fingerprint
    for bad, match in [({"z": [1]}, "'z' is not a private container"), ({"y": [0, 3, 1, 0]}, "outside its declared"),
                       ({"y": [0, 1]}, "shape"), ([0, 1], "needs a dict")]:
        with pytest.raises(pymc_dp.DomainError, match=match):
            data.with_values(bad)


def test_a_private_model_holds_one_and_with_data_derives_the_next():
    pmod = pymc_dp.make_private(_model(np.array([0, 1, 1, 0])), epsilon=1.0, draws=1, data=DOMAINS, ledger=None)
    assert pmod.dataset_id == pmod.private_data.fingerprint
    other = pmod.with_data({"y": np.array([1, 1, 1, 1])})
    assert other.dataset_id == other.private_data.fingerprint != pmod.dataset_id
    np.testing.assert_array_equal(other.private_data.values["y"], [1, 1, 1, 1])
