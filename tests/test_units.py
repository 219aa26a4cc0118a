"""Privacy units: the user unit lifts to m x the record constant, and the claim holds exactly."""

import numpy as np
import pymc as pm
import pytest

import pymc_dp
from pymc_dp import PrivacyError, Users
from pymc_dp.lift import lift, split_budget
from tests.test_privacy_claim import _log_trunc_beta


def coin(n, seed=0):
    rng = np.random.default_rng(seed)
    with pm.Model() as model:
        xd = pm.Data("x", rng.integers(0, 2, n))
        p = pm.Beta("p", 1, 1)
        pm.Bernoulli("obs", p=p, observed=xd)
    return model


def test_users_from_ids_and_cap():
    assert Users(["a", "b", "a", "c", "a"]).max_rows == 3
    assert Users(np.arange(10)).max_rows == 1
    assert Users(max_rows=4).max_rows == 4
    assert Users(max_rows=4).to_dict() == {"kind": "user", "max_rows": 4}
    assert "ids" not in Users(["a", "a"]).to_dict()  # the grouping is not part of the metadata


@pytest.mark.parametrize(
    "build, match",
    [
        (lambda: Users(), "exactly one"),
        (lambda: Users([1, 2], max_rows=2), "exactly one"),
        (lambda: Users(max_rows=0), "max_rows"),
        (lambda: Users(max_rows=2.5), "max_rows"),
        (lambda: Users(np.zeros((2, 2))), "ids"),
        (lambda: Users([1.0, np.nan]), "ids"),
    ],
)
def test_bad_users_refused(build, match):
    with pytest.raises(PrivacyError, match=match):
        build()


def test_ids_must_cover_every_row():
    with pytest.raises(PrivacyError, match="Users"):
        pymc_dp.make_private(coin(10), epsilon=1.0, draws=1, data={"x": pymc_dp.Binary()}, unit=Users(np.arange(9)))


def test_user_lift_and_split():
    L = {"a": 0.1, "b": 0.2}
    reads = {"a": ("A",), "b": ("A", "B")}
    assert lift(L, reads, Users(max_rows=3)) == pytest.approx(0.9)
    shares = split_budget(0.9, reads, Users(max_rows=3))
    assert lift(shares, reads, Users(max_rows=3)) == pytest.approx(0.9)


def test_user_unit_truncates_like_a_record_with_one_mth_of_the_budget():
    users = pymc_dp.make_private(coin(30), epsilon=3.0, draws=1, data={"x": pymc_dp.Binary()}, unit=Users(max_rows=3))
    record = pymc_dp.make_private(coin(30), epsilon=1.0, draws=1, data={"x": pymc_dp.Binary()})
    assert users.certificate.unit == "user" and users.certificate.rows_per_unit == 3
    assert users.certificate.epsilon_per_draw == pytest.approx(3.0)
    assert users.certificate.factors[0].constraints == record.certificate.factors[0].constraints
    assert "at most 3 rows" in str(users.certificate)


@pytest.mark.parametrize("n, m, eps", [(12, 3, 1.5), (40, 4, 2.0)])
def test_user_claim_never_below_truth(n, m, eps):
    """Exact audit: neighbours differ in all m rows of one user (k and k + j ones, j <= m)."""
    pmod = pymc_dp.make_private(coin(n), epsilon=eps, draws=1, data={"x": pymc_dp.Binary()}, unit=Users(max_rows=m))
    (c,) = pmod.certificate.factors[0].constraints
    lo, hi = c["lower"], c["upper"]
    theta = np.linspace(lo, hi, 2001)
    worst = 0.0
    for k in range(n + 1):
        base = _log_trunc_beta(theta, 1 + k, 1 + n - k, lo, hi)
        for j in range(1, m + 1):
            if k + j <= n:
                other = _log_trunc_beta(theta, 1 + k + j, 1 + n - k - j, lo, hi)
                worst = max(worst, float(np.max(np.abs(base - other))))
    claimed = pmod.certificate.epsilon_per_draw
    assert worst <= claimed + 1e-9
    assert worst >= 0.5 * claimed  # a real change: the claim is not vacuous


# --------------------------------------------------------------------------- units as objects
def test_units_are_objects_with_one_interface():
    from pymc_dp.units import ATTRIBUTE, RECORD, as_unit

    reads = {"a": ("x",), "b": ("x", "y"), "c": ("y",), "public": ()}
    L = {"a": 1.0, "b": 2.0, "c": 0.5}
    user = pymc_dp.Users(max_rows=3)
    assert as_unit("record") is RECORD and as_unit("attribute") is ATTRIBUTE and as_unit(user) is user
    assert isinstance(RECORD, pymc_dp.Record) and isinstance(ATTRIBUTE, pymc_dp.Attribute)
    assert (RECORD.lift(L, reads), ATTRIBUTE.lift(L, reads), user.lift(L, reads)) == (3.5, 3.0, 10.5)
    assert (RECORD.max_rows, ATTRIBUTE.max_rows, user.max_rows) == (1, 1, 3)
    assert RECORD.base is RECORD and ATTRIBUTE.base is ATTRIBUTE and user.base is RECORD
    for unit in (RECORD, ATTRIBUTE, user):  # the equal split lifts back to Delta exactly
        shares = unit.equal_split(1.0, reads)
        assert set(shares) == {"a", "b", "c"}
        assert unit.lift(shares, reads) == pytest.approx(1.0)


def test_a_unit_equals_its_name_and_keeps_the_ledger_fingerprint():
    from pymc_dp.units import RECORD, as_unit, describe_unit

    assert RECORD == "record" and "record" == RECORD and RECORD != "attribute"
    assert RECORD in ("record", "attribute") and {RECORD: 1}["record"] == 1
    assert describe_unit(RECORD) == describe_unit("record") == {"kind": "record", "max_rows": 1}
    assert str(pymc_dp.Attribute()) == "attribute" and pymc_dp.Attribute() == pymc_dp.Attribute()
    with pytest.raises(pymc_dp.PrivacyError, match="'row'"):
        as_unit("row")


def test_the_audit_neighbours_are_registered_per_unit():
    """Each unit says which neighbours an audit tries: a record changes every container in one row,
    an attribute one container in one row, a user a group of rows; an unregistered unit is refused."""
    from pymc_dp.audits.neighbours import unit_changes
    from pymc_dp.audits.result import AuditError
    from pymc_dp.units import Unit

    pmod = pymc_dp.make_private(coin(6), epsilon=1.0, draws=1, data={"x": pymc_dp.Binary()}, ledger=None)
    from pymc_dp.audits.neighbours import DataSpace

    for unit, kind, max_rows in [("record", "record", 1), ("attribute", "attribute", 1), (Users(max_rows=2), "user", 2)]:
        space = DataSpace(pmod.model, pmod.domains, unit, ["x"], include_data=True, levels=3, max_bases=4,
                           groups=2, n_random=0, rng=np.random.default_rng(0))
        changes = list(unit_changes(pymc_dp.units.as_unit(unit), space, {"x": np.zeros(6, dtype=int)}))
        assert changes and all(c["unit"] == kind and len(c["rows"]) <= max_rows for c, _ in changes)

    class Household(Unit):
        kind = "household"

    with pytest.raises(AuditError, match="household"):
        list(unit_changes(Household(), None, {}))
