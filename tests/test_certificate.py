"""The certificate as a public value: its dictionary and JSON, the per-draw Delta, its text."""

from __future__ import annotations

import json

import numpy as np
import pymc as pm
import pytest

import pymc_dp


@pytest.fixture(scope="module")
def certificate():
    rng = np.random.default_rng(0)
    with pm.Model() as model:
        yd = pm.Data("y", rng.binomial(1, 0.3, 50))
        pm.Bernoulli("obs", p=pm.Beta("p", 1, 1), observed=yd)
    return pymc_dp.make_private(model, epsilon=2.0, draws=4, data={"y": pymc_dp.Binary()}, ledger=None).certificate


def test_dictionary_is_json_and_complete(certificate):
    d = json.loads(certificate.to_json())
    assert d == json.loads(json.dumps(certificate.to_dict(), sort_keys=True))
    assert d["draws"] == 4 and d["epsilon"] <= 2.0 * (1 + 1e-12) and d["delta"] == 0.0
    assert d["domains"] == {"y": {"type": "Binary"}} and d["unit"] == "record"
    (factor,) = d["factors"]
    assert factor["name"] == "obs" and factor["reads"] == ["y"] and factor["truncation"]


def test_Delta_per_draw_and_its_deprecated_name(certificate):
    assert certificate.Delta_per_draw == certificate.epsilon_per_draw / 2
    # one factor reads the record: its constant is the whole per-draw Delta
    assert certificate.factors[0].lipschitz == pytest.approx(certificate.Delta_per_draw, rel=1e-9)
    with pytest.warns(DeprecationWarning, match="Delta_per_draw"):
        assert certificate.delta_per_draw == certificate.Delta_per_draw


def test_text_states_the_guarantee(certificate):
    text = str(certificate)
    assert "epsilon per draw" in text and f"Delta = {certificate.Delta_per_draw:.6g}" in text
    assert "obs" in text
