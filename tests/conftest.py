"""Test-wide settings.

Every release records its spend in a budget ledger, by default in the user's data directory.
Tests must never touch a developer's real ledger: the whole session points the default ledger at
a temporary file (``PYMC_DP_LEDGER``), and tests that exercise the ledger pass their own paths.
"""

import pytest


@pytest.fixture(scope="session", autouse=True)
def _private_default_ledger(tmp_path_factory):
    mp = pytest.MonkeyPatch()
    mp.setenv("PYMC_DP_LEDGER", str(tmp_path_factory.mktemp("ledger") / "default.sqlite"))
    yield
    mp.undo()


@pytest.fixture
def lipschitz_only(monkeypatch):
    """Certify by the per-record constant alone (no oscillation regions): for the tests of the
    machinery that factors without a closed-form oscillation (regressions, indexed parameters)
    rely on -- proved floors, minimum shares, infeasible splits -- written on the small scalar
    models whose floors are known in closed form (a Poisson count: 2.86 on {0..10})."""
    from pymc_dp.oscillation import OscillationModel

    monkeypatch.setattr(OscillationModel, "build", classmethod(lambda cls, factor, ctx: None))

