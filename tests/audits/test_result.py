"""pymc_dp.audits.result: what an audit returns (AuditResult: frozen, read-only witness, JSON, text
that says it is not a release, a plot)."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest

from pymc_dp.audits import AuditResult, audit
from tests import models
from tests.audits.helpers import private


@pytest.fixture(scope="module")
def coin_audit():
    pmod = private(models.coin(n=40), 1.0)
    return pmod, audit(pmod)


def test_result_object(coin_audit):
    pmod, res = coin_audit
    assert isinstance(res, AuditResult) and res.passed
    assert res.claimed == pmod.certificate.epsilon_per_draw and res.epsilon_total == pmod.certificate.epsilon
    assert res.ratio == pytest.approx(res.measured / res.claimed)
    with pytest.raises(dataclasses.FrozenInstanceError):
        res.verdict = "fail"
    with pytest.raises(ValueError):
        res.witness.x["x"][0] = 1  # read-only witness arrays
    d = json.loads(res.to_json())
    assert d["verdict"] == "pass" and d["method"] == "exact" and d["not_a_release"] is True
    assert d["witness"]["change"]["unit"] == "record"
    text = str(res)
    assert "PASS" in text and "NOT a differentially private release" in text and "spent nothing" in text


def test_plot(coin_audit):
    matplotlib = pytest.importorskip("matplotlib")
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    _, res = coin_audit
    ax = res.plot()
    assert ax.get_lines() and max(np.max(np.abs(line.get_ydata())) for line in ax.get_lines()) >= res.measured * 0.999
    plt.close("all")
