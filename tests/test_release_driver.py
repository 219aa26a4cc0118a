"""The release driver (pymc_dp/release.py): reserve, draw, lay out, record -- for any mechanism."""

from __future__ import annotations

import numpy as np
import pytest
import xarray as xr

import pymc_dp
from pymc_dp.record import SCHEMA, read
from pymc_dp.release import publish, release


class _Source:
    """The least a mechanism gives the driver: a ledger, a dataset fingerprint, a last release."""

    def __init__(self, ledger):
        self.ledger = ledger
        self.dataset_id = "fingerprint-of-the-data"
        self.last_release = None


def _posterior():
    return xr.Dataset({"theta": (("chain", "draw"), np.zeros((1, 2)))}, coords={"chain": [0], "draw": [0, 1]})


def test_release_charges_then_draws_then_records(tmp_path):
    source = _Source(pymc_dp.Ledger(tmp_path / "l.sqlite", epsilon=3.0))
    order = []

    def draw():
        order.append(("draw", source.ledger.spent(source.dataset_id).pending))
        return {"posterior": _posterior()}

    def record(ledger_now):
        order.append(("record", ledger_now["spent_epsilon"]))
        return {"mechanism": "test", "release": {"ledger": ledger_now}}

    idata = release(source, draw, epsilon=1.0, delta=0.0, note={"mechanism": "test"}, record=record)
    assert order == [("draw", 1), ("record", 1.0)]  # reserved before the draw ran
    assert source.last_release is idata
    assert read(idata)["schema"] == SCHEMA and read(idata)["mechanism"] == "test"
    assert list(idata.groups()) == ["posterior"]
    spent = source.ledger.spent(source.dataset_id)
    assert (spent.epsilon, spent.releases, spent.pending) == (1.0, 1, 0)


def test_an_overspending_release_draws_nothing_and_changes_nothing(tmp_path):
    source = _Source(pymc_dp.Ledger(tmp_path / "l.sqlite", epsilon=1.5))
    release(source, lambda: {"posterior": _posterior()}, epsilon=1.0, delta=0.0, note={}, record=lambda s: {})
    first = source.last_release

    def draw():  # pragma: no cover - must not run
        raise AssertionError("the private data were read")

    with pytest.raises(pymc_dp.BudgetExceededError):
        release(source, draw, epsilon=1.0, delta=0.0, note={}, record=lambda s: {})
    assert source.last_release is first
    assert source.ledger.spent(source.dataset_id).epsilon == 1.0


def test_a_release_that_fails_after_it_started_stays_charged(tmp_path):
    source = _Source(pymc_dp.Ledger(tmp_path / "l.sqlite"))

    def draw():
        raise RuntimeError("the sampler failed on the private data")

    with pytest.raises(RuntimeError):
        release(source, draw, epsilon=0.5, delta=0.0, note={}, record=lambda s: {})
    spent = source.ledger.spent(source.dataset_id)
    assert (spent.epsilon, spent.failed) == (0.5, 1) and source.last_release is None


def test_without_a_ledger_nothing_is_charged_and_the_record_says_so():
    source = _Source(None)
    idata = release(source, lambda: {"posterior": _posterior()}, epsilon=1.0, delta=0.0, note={},
                    record=lambda s: {"release": {"ledger": s}})
    assert read(idata)["release"]["ledger"] is None


def test_publish_keeps_only_the_groups_given():
    source = _Source(None)
    stats = xr.Dataset({"diverging": (("chain", "draw"), np.zeros((1, 2), bool))}, coords={"chain": [0], "draw": [0, 1]})
    idata = publish(source, {"posterior": _posterior(), "sample_stats": stats}, {"mechanism": "post-processing"})
    assert sorted(idata.groups()) == ["posterior", "sample_stats"] and source.last_release is idata


def test_every_mechanism_samples_with_one_signature():
    """``sample(draws=None, *, random_seed=None, ...)`` everywhere: where the draws are part of the
    budget, None or the certified number is accepted and another number is refused before the
    ledger is touched; where they are post-processing, any number."""
    import inspect

    from pymc_dp.core import PrivateModel
    from pymc_dp.mechanisms import NoisyStatistics
    from pymc_dp.mechanisms.base import Mechanism
    from pymc_dp.mechanisms.counts import NoisyCounts
    from pymc_dp.mechanisms.map import PrivateMAP
    from pymc_dp.mechanisms.updates import FourierUpdates, LaplaceUpdates
    from pymc_dp.release import check_budgeted_draws

    for cls in (Mechanism, PrivateModel, PrivateMAP, LaplaceUpdates, FourierUpdates, NoisyStatistics, NoisyCounts):
        params = list(inspect.signature(cls.sample).parameters.values())
        assert params[1].name == "draws" and params[1].kind is inspect.Parameter.POSITIONAL_OR_KEYWORD, cls
        assert "random_seed" in {p.name for p in params if p.kind is inspect.Parameter.KEYWORD_ONLY}, cls
    assert check_budgeted_draws(None, 4) == check_budgeted_draws(4, 4) == 4
    for bad in (3, 5, True, 4.5):
        with pytest.raises(TypeError, match="part of the privacy budget"):
            check_budgeted_draws(bad, 4)
