"""``pymc_dp.certify``: certification as a public, frozen result (pymc_dp/certification.py)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pymc as pm
import pytest

import pymc_dp
from pymc_dp.certification import Certification


def _model(y):
    with pm.Model() as model:
        yd = pm.Data("y", y)
        p = pm.Beta("p", 1.0, 1.0)
        pm.Deterministic("odds", p / (1 - p))
        pm.Bernoulli("obs", p, observed=yd)
    return model


def test_certify_returns_the_frozen_result_make_private_holds(tmp_path, monkeypatch):
    monkeypatch.setenv("PYMC_DP_LEDGER", str(tmp_path / "never.sqlite"))
    y = np.array([0, 1, 1, 0, 1, 1])
    model = _model(y)
    cert = pymc_dp.certify(model, epsilon=1.0, draws=2, data={"y": pymc_dp.Binary()})
    assert isinstance(cert, Certification)
    with pytest.raises(dataclasses.FrozenInstanceError):
        cert.draws = 3
    assert not (tmp_path / "never.sqlite").exists()  # certifying charges nothing, opens no ledger

    pmod = pymc_dp.make_private(model, epsilon=1.0, draws=2, data={"y": pymc_dp.Binary()}, ledger=None)
    assert pmod.certification.certificate == cert.certificate
    assert pmod.certificate is pmod.certification.certificate
    assert pmod.model is pmod.certification.truncated_model
    assert cert.user_model is model and cert.truncated_model is not model
    assert [f.name for f in cert.factors] == ["obs"]
    assert set(cert.regions) == {"obs"}
    assert [c.var for c in cert.constraints] == ["p"]
    assert cert.released_names == ("p", "odds")
    assert cert.conjugate_plan is not None and cert.plan_refusal is None
    assert set(cert.initvals) <= {"p"}
    # the certificate depends on the data's shape, not on its values
    other = pymc_dp.certify(_model(1 - y), epsilon=1.0, draws=2, data={"y": pymc_dp.Binary()})
    assert other.certificate == cert.certificate


def test_with_data_keeps_the_certification():
    pmod = pymc_dp.make_private(_model(np.array([0, 1, 1, 0])), epsilon=1.0, draws=1,
                                data={"y": pymc_dp.Binary()}, ledger=None)
    other = pmod.with_data({"y": np.array([1, 1, 1, 1])})
    assert other.certification is pmod.certification
    assert other.dataset_id != pmod.dataset_id


@pytest.mark.parametrize(
    "kwargs, error, match",
    [
        ({"epsilon": -1.0}, pymc_dp.BudgetExceededError, "epsilon=-1.0"),
        ({"split": "best"}, pymc_dp.PrivacyError, "split='best'"),
        ({"data": {"z": pymc_dp.Binary()}}, pymc_dp.DomainError, "'z'"),
    ],
)
def test_certify_refuses_as_make_private_does(kwargs, error, match):
    args = {"epsilon": 1.0, "draws": 1, "data": {"y": pymc_dp.Binary()}, **kwargs}
    with pytest.raises(error, match=match):
        pymc_dp.certify(_model(np.array([0, 1])), **args)
    with pytest.raises(error, match=match):
        pymc_dp.make_private(_model(np.array([0, 1])), ledger=None, **args)


# ------------------------------------------------------------------ fail closed (issue 32)
@pytest.mark.parametrize("certified", [float("nan"), 0.51, float("inf")])
def test_check_claims_refuses_a_bound_that_does_not_fit_its_share(certified):
    from types import SimpleNamespace

    from pymc_dp.certification import check_claims

    region = SimpleNamespace(certified_lipschitz=certified)
    with pytest.raises(pymc_dp.PrivacyError, match="internal check failed for factor 'obs'"):
        check_claims({"obs": region}, {"obs": 0.5}, {"obs": ("y",)}, "record", 1.0)


@pytest.mark.parametrize("share", [float("nan"), 0.6])
def test_check_claims_refuses_shares_above_the_budget(share):
    from types import SimpleNamespace

    from pymc_dp.certification import check_claims

    region = SimpleNamespace(certified_lipschitz=None)
    with pytest.raises(pymc_dp.PrivacyError, match="internal check failed"):
        check_claims({"obs": region}, {"obs": share}, {"obs": ("y",)}, "record", 1.0)
    check_claims({"obs": region}, {"obs": 0.5}, {"obs": ("y",)}, "record", 1.0)  # 2 x 0.5 fits 1


def test_a_region_that_leaves_a_parameter_one_point_is_refused():
    """FOUND.md #7 (campaign seeds 1000137, 1000271): the budget search left a continuous
    parameter a region of width 0, certified with prior mass 0; there is no posterior on it to
    draw from. (``bounds=`` refuses such bounds already; the solvers' regions are checked here.)"""
    import types

    import pytensor.tensor as pt

    from pymc_dp.certification import check_regions_have_width
    from pymc_dp.constraints import IntervalConstraint

    ctx = types.SimpleNamespace(free={"w": pt.dvector("w"), "k": pt.lvector("k")}, shapes={"w": (2,), "k": (2,)},
                                support=lambda name: (-np.inf, np.inf))
    check_regions_have_width([IntervalConstraint("w", np.array([-1.0, 0.4]), np.array([1.0, 0.5]))], ctx)
    check_regions_have_width([IntervalConstraint("k", np.array([1.0, 2.0]), np.array([1.0, 2.0]))], ctx)  # discrete
    with pytest.raises(pymc_dp.BudgetExceededError, match=r"'w' the single point .* \(element \(1,\)\)"):
        check_regions_have_width([IntervalConstraint("w", np.array([-1.0, 0.5]), np.array([1.0, 0.5]))], ctx)


def test_campaign_seed_1000271_is_refused_not_certified_with_no_mass():
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from tests.fuzz.grammar import generate

    generated = generate(1000271, "campaign")
    with pytest.raises(pymc_dp.BudgetExceededError, match="'alpha_mu' the single point"):
        pymc_dp.certify(generated.model, **generated.certify_kwargs())
