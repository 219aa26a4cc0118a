"""Domains: construction refusals, membership (with the container named), public dictionaries,
and the standardised domains' public record."""

from __future__ import annotations

import numpy as np
import pytest

import pymc_dp
from pymc_dp.domains import Ball, Binary, Box, Integers, Interval
from pymc_dp.exceptions import DomainError


@pytest.mark.parametrize("build,match", [
    (lambda: Interval(1, 1), "lo < hi"),
    (lambda: Interval(0, np.nan), "NaN"),  # an infinite end is accepted (contamination), refused later
    (lambda: Interval("a", 1), "not a number"),
    (lambda: Integers(0.5, 3), "integer bounds"),
    (lambda: Integers(3, 1), "lo <= hi"),
    (lambda: Ball(0), "radius > 0"),
    (lambda: Box([0, 1], [1, 1]), "lo < hi"),
    (lambda: Box(0, np.nan), "finite"),
    (lambda: Box([[0]], [[1]]), "1-d"),
])
def test_bad_domains_are_refused(build, match):
    with pytest.raises(DomainError, match=match):
        build()


@pytest.mark.parametrize("domain,inside,outside", [
    (Interval(-1, 2), np.array([-1.0, 0.5, 2.0]), np.array([0.0, 2.0001])),
    (Integers(0, 3), np.array([0, 3, 2]), np.array([1, 1.5])),
    (Binary(), np.array([0, 1, 1]), np.array([0, 2])),
    (Ball(1.0), np.array([[0.6, 0.8], [0.0, -1.0]]), np.array([[0.6, 0.81]])),
    (Box([0, -1], [1, 1]), np.array([[0.0, -1.0], [1.0, 1.0]]), np.array([[0.5, 1.5]])),
])
def test_membership_names_the_container(domain, inside, outside):
    domain.validate("c", inside)
    with pytest.raises(DomainError, match="'c'.*outside its declared domain"):
        domain.validate("c", outside)


def test_non_numeric_nan_and_shape_are_refused():
    with pytest.raises(DomainError, match="dtype"):
        Interval(0, 1).validate("c", np.array(["a"]))
    with pytest.raises(DomainError, match="NaN"):
        Interval(0, 1).validate("c", np.array([0.5, np.nan]))
    with pytest.raises(DomainError, match="at least 2"):
        Box(0, 1).validate("c", np.array([0.5, 0.5]))
    with pytest.raises(DomainError, match="'c'.*3 feature bounds"):
        Box([0, 0, 0], [1, 1, 1]).validate("c", np.zeros((4, 2)))


def test_dictionaries_and_equality():
    assert Interval(0, 1).to_dict() == {"type": "Interval", "lo": 0.0, "hi": 1.0}
    assert Binary().to_dict() == {"type": "Binary"} and str(Binary()) == "Binary()"
    assert Box(0, 1) == Box([0.0], [1.0]) and hash(Box(0, 1)) == hash(Box([0.0], [1.0]))
    assert Box([0, 1], [1, 2]) != Box([0, 1], [1, 3])
    assert np.array_equal(Box([-2, 0], [1, 3]).abs_max, [2, 3])
    assert Interval(-1, 3).center == 1 and Interval(-1, 3).half_width == 2


def test_a_standardised_domain_records_its_estimates_and_compares_by_bounds():
    y = np.linspace(0, 10, 50)
    std = pymc_dp.standardize({"y": y}, data={"y": Interval(0, 10)}, epsilon=1.0, ledger=None)
    d = std.data["y"]
    public = d.to_dict()["standardized"]
    assert public["epsilon"] == 1.0 and public["center"] == list(std.center["y"]) and public["scale"] == list(std.scale["y"])
    assert d == Interval(d.lo, d.hi)  # the record is metadata: bounds decide equality
    assert "standardized" not in Interval(d.lo, d.hi).to_dict()
