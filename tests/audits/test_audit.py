"""pymc_dp.audit as a whole: the choice of method and its refusals, and that an audit spends nothing
from the ledger."""

from __future__ import annotations

import numpy as np
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


def test_a_seeded_mechanism_audit_is_reproducible():
    """The mechanism's OpenDP noise is drawn from a generator derived from random_seed (inside
    pymc_dp.mechanisms.noise.audit_noise): the same seed gives the same audit, bit for bit."""
    from pymc_dp.mechanisms.noise import audit_noise_generator

    model, domains = models.coin(n=10)
    mech = pymc_dp.noisy_statistics(model, epsilon=1.0, data=domains, ledger=None)
    seen = []
    runs = mech.audit_runs
    mech.audit_runs = lambda data, n, rng: seen.append(runs(data, n, rng)) or seen[-1]  # records each run's outputs
    a, b, c = (audit(mech, runs=4000, confidence=0.999, random_seed=s, max_pairs=200) for s in (7, 7, 8))
    assert len(seen) == 6  # x and y per audit
    np.testing.assert_array_equal(seen[0], seen[2])
    np.testing.assert_array_equal(seen[1], seen[3])
    assert not np.array_equal(seen[0], seen[4])
    assert a.measured == b.measured and a.estimate == b.estimate and a.witness.event == b.witness.event
    assert a.curve["lower"].tolist() == b.curve["lower"].tolist()
    assert (a.measured, a.witness.event) != (c.measured, c.witness.event)
    assert audit_noise_generator() is None  # the audit's context ended with it
    # outside an audit the same calls draw OpenDP's noise, which never repeats
    x = {"x": np.zeros(10, int)}
    assert not np.array_equal(runs(x, 1000, np.random.default_rng(0)), runs(x, 1000, np.random.default_rng(0)))


def test_noise_generator_is_a_stream_of_its_own():
    from pymc_dp.audits import noise_generator

    assert noise_generator(None) is None
    one, again = noise_generator(3).random(4), noise_generator(3).random(4)
    np.testing.assert_array_equal(one, again)
    assert not np.array_equal(one, np.random.default_rng(3).random(4))  # not the search's stream
    assert not np.array_equal(one, noise_generator(4).random(4))
