"""``make_private(..., path=...)``: the noisy-statistics path and ``path="auto"`` (pymc_dp/mechanisms/auto.py)."""

from __future__ import annotations

import json

import numpy as np
import pymc as pm
import pytest

import pymc_dp
from pymc_dp.mechanisms import auto
from pymc_dp.mechanisms.auto import LOCALIZED_FROM_EPSILON, PathChoice
from pymc_dp.mechanisms.localized import LocalizedPosterior
from pymc_dp.mechanisms.statistics import NoisyStatistics

DOMAIN = {"y": pymc_dp.Interval(-5, 5)}
PUBLIC_X = ("x",)


def normal_mean(n=40, seed=0):
    y = np.random.default_rng(seed).normal(1.0, 1.0, n).clip(-5, 5)
    with pm.Model() as m:
        yd = pm.Data("y", y)
        pm.Normal("obs", pm.Normal("mu", 0, 3), 1.0, observed=yd)
    return m


def student_location(n=40, seed=0):
    """A robust regression on a public covariate: no sufficient statistics, and no noisy histogram
    (its law differs per record); iid Student-t records would get one (test_histogram_paths)."""
    x = np.linspace(-1.0, 1.0, n)
    y = (1.0 + 0.5 * x + np.random.default_rng(seed).normal(0.0, 1.0, n)).clip(-5, 5)
    with pm.Model() as m:
        xd, yd = pm.Data("x", x), pm.Data("y", y)
        pm.StudentT("obs", nu=3, mu=pm.Normal("mu", 0, 3) + pm.Normal("slope", 0, 1) * xd, sigma=1.0, observed=yd)
    return m


def student_two_factors(n=40, seed=0):
    """The robust regression beside iid Student-t records of a second private container, sharing
    the location: no sufficient statistics, no noisy histogram (two containers) and no noisy table
    (two factors read private data); the robust regression alone gets a table (test_table.py)."""
    x = np.linspace(-1.0, 1.0, n)
    rng = np.random.default_rng(seed)
    y = (1.0 + 0.5 * x + rng.normal(0.0, 1.0, n)).clip(-5, 5)
    with pm.Model() as m:
        xd, yd, zd = pm.Data("x", x), pm.Data("y", y), pm.Data("z", rng.normal(1.0, 1.0, n).clip(-5, 5))
        mu = pm.Normal("mu", 0, 3)
        pm.StudentT("obs", nu=3, mu=mu + pm.Normal("slope", 0, 1) * xd, sigma=1.0, observed=yd)
        pm.StudentT("obs_z", nu=3, mu=mu, sigma=1.0, observed=zd)
    return m


TWO = {"y": pymc_dp.Interval(-5, 5), "z": pymc_dp.Interval(-5, 5)}
#: the table's refusal of student_two_factors
NOT_A_TABLE = "a table is released for exactly one observed RV"


def student_iid(n=40, seed=0):
    y = np.random.default_rng(seed).normal(1.0, 1.0, n).clip(-5, 5)
    with pm.Model() as m:
        yd = pm.Data("y", y)
        pm.StudentT("obs", nu=3, mu=pm.Normal("mu", 0, 3), sigma=1.0, observed=yd)
    return m


def test_auto_takes_noisy_statistics_where_they_apply_and_every_record_says_so(tmp_path):
    ledger = pymc_dp.Ledger(tmp_path / "ledger.sqlite")
    mech = pymc_dp.make_private(normal_mean(), epsilon=2.0, draws=10, data=DOMAIN, ledger=ledger, path="auto")
    assert isinstance(mech, NoisyStatistics)
    assert isinstance(mech.path_choice, PathChoice) and mech.path_choice.path == "noisy_statistics"
    assert "iid observation" in mech.path_choice.reason and mech.path_choice.considered == ()
    idata = mech.sample(50, chains=1, tune=50, random_seed=1)
    record = json.loads(idata.attrs["pymc_dp"])
    assert record["release"]["path"] == mech.path_choice.to_dict()
    text = str(pymc_dp.report(idata))
    assert "Release path" in text and "noisy_statistics" in text
    (row,) = ledger.releases()
    assert row["description"]["path"] == "noisy_statistics"


def test_auto_samples_the_posterior_below_the_localizing_budget_and_says_why():
    pmod = pymc_dp.make_private(student_two_factors(), epsilon=1.0, draws=1, data=TWO, public=PUBLIC_X, ledger=None, path="auto")
    assert isinstance(pmod, pymc_dp.PrivateModel) and pmod.path_choice.path == "posterior"
    passed = dict(pmod.path_choice.considered)
    assert NOT_A_TABLE in passed["noisy_statistics"] and f"< {LOCALIZED_FROM_EPSILON:g}" in passed["localized"]
    before = str(pymc_dp.report(pmod))  # before any release the report already states the choice
    assert "Release path" in before and "not localized" in before
    idata = pmod.sample(chains=1, tune=100, random_seed=2)
    assert json.loads(idata.attrs["pymc_dp"])["release"]["path"]["chosen"] == "posterior"


def test_auto_localizes_from_the_localizing_budget_on():
    mech = pymc_dp.make_private(student_two_factors(), epsilon=LOCALIZED_FROM_EPSILON, draws=1, data=TWO, public=PUBLIC_X,
                                ledger=None, path="auto")
    assert isinstance(mech, LocalizedPosterior) and mech.path_choice.path == "localized"
    assert [p for p, _ in mech.path_choice.considered] == ["noisy_statistics"]


def test_a_path_the_user_names_carries_no_choice():
    pmod = pymc_dp.make_private(student_location(), epsilon=1.0, draws=1, data=DOMAIN, public=PUBLIC_X, ledger=None)
    assert pmod.path_choice is None
    assert "Release path" not in str(pymc_dp.report(pmod))


def test_the_noisy_statistics_path_from_make_private_and_the_decorator():
    mech = pymc_dp.make_private(normal_mean(), epsilon=1.0, draws=1, data=DOMAIN, ledger=None, path="noisy_statistics")
    assert isinstance(mech, NoisyStatistics) and mech.path_choice is None

    @pymc_dp.private(epsilon=1.0, draws=1, data=DOMAIN, ledger=None, path="noisy_statistics")
    def build():
        return normal_mean()

    assert isinstance(build(), NoisyStatistics)
    with pytest.raises(pymc_dp.UnsupportedFactorError, match=NOT_A_TABLE):
        pymc_dp.make_private(student_two_factors(), epsilon=1.0, draws=1, data=TWO, public=PUBLIC_X, ledger=None,
                             path="noisy_statistics")


@pytest.mark.parametrize("path", ["auto", "noisy_statistics"])
def test_posterior_sampling_options_and_a_missing_budget_are_refused(path):
    with pytest.raises(pymc_dp.PrivacyError, match="bounds= and split="):
        pymc_dp.make_private(normal_mean(), epsilon=1.0, draws=1, data=DOMAIN, ledger=None, path=path,
                             bounds={"mu": (-1, 1)})
    with pytest.raises(pymc_dp.PrivacyError, match="bounds= and split="):
        pymc_dp.make_private(normal_mean(), epsilon=1.0, draws=1, data=DOMAIN, ledger=None, path=path, split="equal")
    with pytest.raises(pymc_dp.PrivacyError, match="needs epsilon"):
        pymc_dp.make_private(normal_mean(), draws=1, data=DOMAIN, ledger=None, path=path)


def test_data_outside_its_domain_is_refused_to_the_user_not_written_into_a_reason():
    """A refusal about the private values must reach the user; were it swallowed into a passed-over
    path's reason, the release record would publish a fact about the data."""
    model = normal_mean()
    model.set_data("y", np.r_[np.zeros(39), 7.0])
    with pytest.raises(pymc_dp.DomainError, match="'y'"):
        pymc_dp.make_private(model, epsilon=5.0, draws=1, data=DOMAIN, ledger=None, path="auto")


def test_a_refuted_certificate_is_raised_never_passed_over(monkeypatch):
    def refuted(model, *, path, **keywords):
        if path == "localized":
            raise pymc_dp.exceptions.CertificateRefutedError("injected: a counterexample to factor 'obs'")
        return pymc_dp.make_private(model, path=path, **keywords)

    monkeypatch.setattr(auto, "make_private", refuted)
    with pytest.raises(pymc_dp.exceptions.CertificateRefutedError, match="injected"):
        pymc_dp.make_private(student_two_factors(), epsilon=5.0, draws=1, data=TWO, public=PUBLIC_X, ledger=None, path="auto")


def test_an_unknown_path_names_every_path():
    with pytest.raises(pymc_dp.PrivacyError, match="not a release path") as err:
        pymc_dp.make_private(normal_mean(), epsilon=1.0, draws=1, data=DOMAIN, ledger=None, path="bogus")
    for name in ("posterior", "localized", "noisy_statistics", "auto"):
        assert repr(name) in str(err.value)


def test_auto_takes_a_noisy_histogram_for_iid_records_without_sufficient_statistics():
    """iid Student-t records: no exponential family, but one law for every record with a cdf in
    PyMC: the noisy histogram (pymc_dp/mechanisms/histogram.py), chosen from public facts."""
    from pymc_dp.mechanisms.histogram import NoisyHistogram

    mech = pymc_dp.make_private(student_iid(), epsilon=2.0, draws=1, data=DOMAIN, ledger=None, path="auto")
    assert isinstance(mech, NoisyHistogram) and mech.path_choice.path == "noisy_statistics"
    assert "histogram" in mech.path_choice.reason
    assert isinstance(pymc_dp.make_private(student_iid(), epsilon=2.0, draws=1, data=DOMAIN, ledger=None,
                                           path="noisy_statistics"), NoisyHistogram)
    with pytest.raises(pymc_dp.UnsupportedFactorError, match="histogram does not apply either.*Nor a noisy table"):
        pymc_dp.noisy_statistics(student_two_factors(), epsilon=1.0, data=TWO, public=PUBLIC_X, ledger=None)
    # the robust regression alone: its law differs between records, so a noisy table of record cells
    table = pymc_dp.make_private(student_location(), epsilon=2.0, draws=1, data=DOMAIN, public=PUBLIC_X, ledger=None, path="auto")
    assert isinstance(table, pymc_dp.NoisyTable) and "table of" in table.path_choice.reason
