"""pymc_dp.audits.numerical: the numerical audit (quadrature of the model's own logp, at most two free
scalars) passes for every other family, regressions and the attribute and user units, agrees with
the exact audit where both apply, and catches a wrong rule."""

from __future__ import annotations

import pytest
from pytensor.tensor.random.basic import LaplaceRV

import pymc_dp
from pymc_dp.audits import audit
from tests.audits.helpers import CONJUGATE, NUMERICAL, logistic1, private, scalar, within_claim, wrong_rule


@pytest.mark.parametrize("name", ["Bernoulli", "Poisson", "Normal"])
def test_exact_and_numerical_audits_agree(name):
    """Two independent computations of the same suprema: closed form (exact plan) and quadrature
    of the model's own logp on a grid."""
    build, eps = CONJUGATE[name]
    pmod = private(build(), eps)
    ex = audit(pmod, method="exact", max_bases=15, random_seed=3)
    nu = audit(pmod, method="numerical", max_bases=15, random_seed=3)
    assert nu.verdict == "pass" and nu.error < 1e-4
    assert nu.pairs == ex.pairs
    assert nu.measured == pytest.approx(ex.measured, abs=10 * nu.error + 1e-6)


@pytest.mark.parametrize("name", list(NUMERICAL))
def test_numerical_audit_passes(name):
    build, eps = NUMERICAL[name]
    pmod = private(build(), eps)
    assert pmod.conjugate_plan is None
    res = audit(pmod, max_bases=8)
    assert res.method == "numerical" and res.verdict == "pass", str(res)
    assert within_claim(res) and res.error < 1e-2
    assert res.measured > 0.3 * res.claimed


@pytest.mark.parametrize(
    "build, eps, unit",
    [(logistic1, 2.0, "attribute"), (logistic1, 4.0, pymc_dp.Users(max_rows=2)), (lambda: scalar("Laplace"), 12.0, pymc_dp.Users(max_rows=2))],
    ids=["logistic-attribute", "logistic-user", "Laplace-user"],
)
def test_numerical_audit_attribute_and_user_units(build, eps, unit):
    res = audit(private(build(), eps, unit=unit), max_bases=6)
    assert res.verdict == "pass" and within_claim(res), str(res)
    assert res.measured > 0.3 * res.claimed


def test_wrong_laplace_rule_is_caught_by_the_numerical_audit(lipschitz_only):
    with wrong_rule(LaplaceRV, 0.5):
        pmod = private(scalar("Laplace"), 3.0)  # infeasible with the true rule (its minimum is 4)
    res = audit(pmod, max_bases=12)
    assert res.method == "numerical" and res.verdict == "fail", str(res)
    assert res.measured - res.error > 1.2 * res.claimed
