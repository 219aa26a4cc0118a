"""pymc_dp.audits.neighbours: the neighbouring datasets an audit tries -- the rows of one user, one
attribute of containers of different lengths, rows that differ through public data, the user's
own pairs (checked to be neighbours), and base datasets that read no private data."""

from __future__ import annotations

import numpy as np
import pymc as pm
import pytest

import pymc_dp
from pymc_dp.audits import AuditError, audit
from tests import models
from tests.audits.helpers import private, within_claim


@pytest.mark.parametrize("unit", [pymc_dp.Users(max_rows=3), pymc_dp.Users(np.repeat(np.arange(10), [3, 1, 2, 3, 1, 1, 3, 2, 2, 2]))])
def test_exact_audit_user_unit(unit):
    pmod = private(models.coin(n=20), 3.0, unit=unit)
    res = audit(pmod)
    assert res.verdict == "pass" and within_claim(res), str(res)
    assert res.measured > 0.5 * res.claimed
    w = res.witness
    rows = np.flatnonzero(w.x["x"] != w.y["x"])
    assert 1 <= len(rows) <= 3 and res.unit == {"kind": "user", "max_rows": 3}
    if unit.ids is not None:
        assert len({unit.ids[i] for i in rows}) == 1  # the rows of one user


def test_include_data_false_reads_only_public_information():
    a = private(models.coin(n=40, seed=0), 1.0)
    b = private(models.coin(n=40, seed=1), 1.0)
    ra, rb = audit(a, include_data=False), audit(b, include_data=False)
    assert not ra.reads_private_data and "read no private data" in str(ra)
    assert ra.measured == rb.measured and ra.pairs == rb.pairs  # the data never entered
    assert ra.witness.base != "data"


def test_given_pairs():
    pmod = private(models.coin(n=40), 1.0)
    x = {"x": np.zeros(40, int)}
    y = {"x": np.r_[1, np.zeros(39, int)]}
    res = audit(pmod, pairs=[(x, y)])
    assert res.pairs == 1 and res.witness.base == "given" and res.verdict == "pass"
    assert res.witness.change["rows"] == [0]
    with pytest.raises(AuditError, match="neighbours"):
        audit(pmod, pairs=[(x, {"x": np.r_[1, 1, np.zeros(38, int)]})])
    with pytest.raises(AuditError, match="shape"):
        audit(pmod, pairs=[(x, {"x": np.zeros(39, int)})])


def test_public_per_row_data():
    """Public group indices: rows that differ only through public data are different rows to
    the search, and row subsets are evaluated with their public rows."""
    g = np.arange(20) % 2
    with pm.Model() as model:
        xd = pm.Data("x", np.random.default_rng(0).uniform(-1, 1, 20))
        gd = pm.Data("g", g)
        mu = pm.Normal("mu", 0, 1, shape=2)
        pm.Laplace("obs", mu=mu[gd], b=0.5, observed=xd)
    pmod = pymc_dp.make_private(model, epsilon=6.0, draws=1, data={"x": pymc_dp.Interval(-1, 1)}, public=["g"], ledger=None)
    res = audit(pmod, max_bases=6)
    assert res.method == "numerical" and res.verdict == "pass" and within_claim(res), str(res)
    assert res.measured > 0.3 * res.claimed


def test_attribute_unit_with_containers_of_different_lengths():
    rng = np.random.default_rng(2)
    with pm.Model() as model:
        xd, zd = pm.Data("x", rng.integers(0, 2, 30)), pm.Data("z", rng.integers(0, 2, 12))
        p, q = pm.Beta("p", 1, 1), pm.Beta("q", 2, 2)
        pm.Bernoulli("a", p=p, observed=xd)
        pm.Bernoulli("b", p=q, observed=zd)
    pmod = private((model, {"x": pymc_dp.Binary(), "z": pymc_dp.Binary()}), 2.0, unit="attribute")
    ex = audit(pmod, max_bases=30)
    nu = audit(pmod, method="numerical", max_bases=30)
    assert ex.verdict == nu.verdict == "pass"
    assert nu.measured == pytest.approx(ex.measured, abs=3 * nu.error + 1e-6) and ex.measured > 0.8 * ex.claimed
