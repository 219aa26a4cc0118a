"""Composition of N pure-DP posterior draws, checked against exact computations.

* the acceptance values of docs/theory/guarantee.md#composition;
* brute force: the hockey-stick divergence of N-fold randomized response, enumerated outcome by
  outcome (2^N of them), equals :func:`optimal_delta` (the curve is attained);
* validity beyond randomized response: N-fold compositions of other eps0-DP mechanisms,
  enumerated, never need a larger delta than the curve;
* dp-accounting's privacy-loss-distribution accountant, an independent implementation, agrees
  to 1e-3 relative (it is observed to agree to ~1e-9);
* the inverse used for budgets: per-draw eps0 whose composition fits the budget, and no more.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pymc_dp.accounting import PureDPEvent, compose, optimal_delta, optimal_epsilon, per_draw_epsilon


@pytest.mark.parametrize(
    "eps0, draws, delta, expected",
    [(0.1, 100, 1e-6, 4.7746), (0.5, 20, 1e-6, 9.9868), (0.05, 1000, 1e-6, 8.2836)],
)
def test_design_values(eps0, draws, delta, expected):
    guarantee = compose(eps0, draws, delta)
    assert guarantee.epsilon == pytest.approx(expected, abs=1e-4)
    assert guarantee.method == "optimal"
    assert guarantee.epsilon_basic == pytest.approx(eps0 * draws)
    assert optimal_delta(eps0, draws, guarantee.epsilon) <= delta


def _hockey_stick(p: np.ndarray, q: np.ndarray, epsilon: float) -> float:
    """``sup_S P(S) - e^eps Q(S)`` for distributions on a finite set: sum of positive parts."""
    return float(np.sum(np.maximum(0.0, p - math.exp(epsilon) * q)))


def _product(dist: np.ndarray, n: int) -> np.ndarray:
    out = np.ones(1)
    for _ in range(n):
        out = np.outer(out, dist).ravel()
    return out


@pytest.mark.parametrize("eps0, n", [(0.3, 1), (0.3, 6), (1.0, 5), (2.0, 3), (0.05, 8)])
def test_curve_equals_enumerated_randomized_response(eps0, n):
    keep = math.exp(eps0) / (1 + math.exp(eps0))
    p = _product(np.array([keep, 1 - keep]), n)
    q = _product(np.array([1 - keep, keep]), n)
    for epsilon in np.linspace(0.0, n * eps0, 13):
        assert optimal_delta(eps0, n, epsilon) == pytest.approx(_hockey_stick(p, q, epsilon), rel=1e-10, abs=1e-15)


def _three_output_mechanism(eps0: float, c: float):
    """Two neighbouring output distributions of an eps0-DP mechanism that is not randomized
    response: three outputs, one of which (weight ``c``) is equally likely under both."""
    e = math.exp(eps0)
    p = np.array([e, 1.0, c]) / (e + 1.0 + c)
    q = np.array([1.0, e, c]) / (e + 1.0 + c)
    assert np.all(np.abs(np.log(p / q)) <= eps0 + 1e-12)
    return p, q


@pytest.mark.parametrize("eps0, n, c", [(0.4, 4, 0.5), (1.0, 3, 2.0), (0.1, 6, 0.1)])
def test_curve_bounds_other_mechanisms(eps0, n, c):
    p1, q1 = _three_output_mechanism(eps0, c)
    p, q = _product(p1, n), _product(q1, n)
    for epsilon in np.linspace(0.0, n * eps0, 9):
        truth = max(_hockey_stick(p, q, epsilon), _hockey_stick(q, p, epsilon))
        assert truth <= optimal_delta(eps0, n, epsilon) + 1e-15


@pytest.mark.parametrize(
    "eps0, draws, delta",
    [(0.1, 100, 1e-6), (0.5, 20, 1e-6), (0.05, 1000, 1e-6), (1.0, 10, 1e-5), (0.01, 5000, 1e-8)],
)
def test_agrees_with_dp_accounting_pld(eps0, draws, delta):
    pld_module = pytest.importorskip("dp_accounting.pld.privacy_loss_distribution")
    from dp_accounting.pld import common

    pld = pld_module.from_privacy_parameters(
        common.DifferentialPrivacyParameters(eps0, 0.0), value_discretization_interval=1e-4
    ).self_compose(draws)
    theirs = pld.get_epsilon_for_delta(delta)
    ours = compose(eps0, draws, delta).epsilon
    assert ours == pytest.approx(theirs, rel=1e-3)


def test_minimum_of_valid_bounds():
    # delta = 0: only basic composition is valid
    g = compose(0.2, 10, 0.0)
    assert (g.epsilon, g.method, g.epsilon_optimal) == (pytest.approx(2.0), "basic", None)
    # one draw at a tiny delta: the optimal curve barely improves on eps0, never exceeds it
    g = compose(3.0, 1, 1e-12)
    assert g.epsilon <= 3.0 and g.epsilon == min(g.epsilon_basic, g.epsilon_optimal)
    # many draws: optimal is far below basic, and it is what is used
    g = compose(0.05, 1000, 1e-6)
    assert g.epsilon == g.epsilon_optimal < 0.2 * g.epsilon_basic
    assert PureDPEvent(0.05, 1000).compose(1e-6) == g
    assert PureDPEvent(0.05, 1000).basic() == pytest.approx(50.0)


@pytest.mark.parametrize(
    "epsilon, delta, draws",
    [(1.0, 0.0, 10), (4.7746, 1e-6, 100), (10.0, 1e-6, 20), (8.0, 1e-6, 1000), (0.5, 1e-5, 1), (30.0, 1e-9, 7)],
)
def test_per_draw_budget_fits_and_is_tight(epsilon, delta, draws):
    eps0 = per_draw_epsilon(epsilon, delta, draws)
    assert eps0 >= epsilon / draws
    assert compose(eps0, draws, delta).epsilon <= epsilon
    # tight: 1e-6 more per draw overspends (unless delta = 0, where basic is exact)
    assert compose(eps0 * (1 + 1e-6), draws, delta).epsilon > epsilon


def test_per_draw_budget_gains_from_delta():
    # 100 draws at total epsilon 4.7746, delta 1e-6: each draw gets 0.1, not 0.047746
    assert per_draw_epsilon(4.7746, 1e-6, 100) == pytest.approx(0.1, rel=1e-4)


@settings(max_examples=60, deadline=None)
@given(
    eps0=st.floats(1e-3, 5.0),
    draws=st.integers(1, 300),
    log_delta=st.floats(-12, -1),
)
def test_properties(eps0, draws, log_delta):
    delta = 10.0**log_delta
    g = compose(eps0, draws, delta)
    assert 0.0 <= g.epsilon <= g.epsilon_basic * (1 + 1e-12)
    assert optimal_delta(eps0, draws, g.epsilon) <= delta
    # the curve decreases in epsilon and increases in eps0
    assert optimal_delta(eps0, draws, 0.5 * g.epsilon) >= optimal_delta(eps0, draws, g.epsilon)
    assert optimal_epsilon(1.1 * eps0, draws, delta) >= g.epsilon_optimal
    # inverse
    back = per_draw_epsilon(g.epsilon, delta, draws) if g.epsilon > 0 else eps0
    assert compose(back, draws, delta).epsilon <= g.epsilon * (1 + 1e-12) + 1e-300


def test_rejects_bad_arguments():
    with pytest.raises(ValueError, match="delta"):
        compose(0.1, 10, 1.0)
    with pytest.raises(ValueError, match="draws"):
        compose(0.1, 0, 1e-6)
    with pytest.raises(ValueError, match="epsilon"):
        per_draw_epsilon(-1.0, 1e-6, 10)


def test_enumeration_helper_is_sound():
    # the brute force itself: for one draw of randomized response, delta(eps) is known in closed form
    eps0 = 0.7
    keep = math.exp(eps0) / (1 + math.exp(eps0))
    p, q = np.array([keep, 1 - keep]), np.array([1 - keep, keep])
    for eps in (0.0, 0.3, 0.7):
        closed = max(0.0, keep - math.exp(eps) * (1 - keep))
        assert _hockey_stick(p, q, eps) == pytest.approx(closed, abs=1e-15)


def test_certificate_uses_optimal_composition_when_delta_is_positive():
    import pymc as pm

    import pymc_dp

    with pm.Model() as model:
        xd = pm.Data("x", np.zeros(20, dtype=int))
        p = pm.Beta("p", 1, 1)
        pm.Bernoulli("obs", p=p, observed=xd)
    data = {"x": pymc_dp.Binary()}
    cert = pymc_dp.make_private(model, epsilon=4.7746, delta=1e-6, draws=100, data=data).certificate
    assert cert.epsilon_per_draw == pytest.approx(0.1, rel=1e-4)
    assert cert.composition == "optimal"
    assert cert.epsilon <= 4.7746 and cert.epsilon == pytest.approx(4.7746, rel=1e-6)
    assert cert.epsilon_basic == pytest.approx(100 * cert.epsilon_per_draw)
    assert "basic 10" in str(cert)
    pure = pymc_dp.make_private(model, epsilon=4.7746, draws=100, data=data).certificate
    assert pure.composition == "basic" and pure.epsilon_optimal is None
    assert pure.epsilon_per_draw == pytest.approx(0.047746)
