"""pymc_dp.audit as a whole: the choice of method and its refusals, and that an audit spends nothing
from the ledger."""

from __future__ import annotations

import pytest

import pymc_dp
from pymc_dp.audits import AuditError, audit
from tests import models
from tests.audits.helpers import private, scalar


def test_audit_spends_nothing_from_the_ledger(tmp_path):
    ledger = pymc_dp.Ledger(tmp_path / "ledger.sqlite", epsilon=1.5)
    model, domains = models.coin(n=20)
    pmod = pymc_dp.make_private(model, epsilon=1.0, draws=1, data=domains, ledger=ledger)
    audit(pmod)
    audit(pmod, method="statistical", runs=2000)
    audit(pmod, method="numerical", max_bases=4)
    spent = ledger.spent(pmod.dataset_id)
    assert spent.releases == 0 and spent.pending == 0 and spent.epsilon == 0.0
    pmod.sample(random_seed=1)  # a real release is still charged: one fits the total, two do not
    assert ledger.spent(pmod.dataset_id).epsilon == pytest.approx(1.0)


def test_method_choice_and_refusals():
    assert audit(private(models.coin(n=10), 1.0), max_bases=4).method == "exact"
    assert audit(private(scalar("Laplace"), 6.0), max_bases=4).method == "numerical"
    lap = private(scalar("Laplace"), 6.0)
    with pytest.raises(AuditError, match="conjugate"):
        audit(lap, method="exact")
    with pytest.raises(AuditError, match="conjugate"):
        audit(lap, method="statistical", sampler="exact")
    big = private(models.logistic(n=30, d=3), 4.0)
    with pytest.raises(AuditError, match="at most 2"):
        audit(big, method="numerical")
    with pytest.raises(AuditError, match="statistical"):
        audit(lap, release="full")
    with pytest.raises(AuditError):
        audit(lap, method="bogus")
