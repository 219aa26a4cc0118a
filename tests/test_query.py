"""PSAQR (JMLR Alg. 2): answers from the released draws, and the Lemma 11 bound."""

from __future__ import annotations

import json
import math

import arviz as az
import numpy as np
import pytest

import pymc_dp
from pymc_dp import query
from pymc_dp.query import Decision, answer, decision_bound, hoeffding_radius
from tests import models


def constructed(values, chains=2, release=None, **more):
    """An InferenceData of given draws; ``release`` adds a pymc_dp release record."""
    values = np.asarray(values, float)
    post = {"p": values.reshape((chains, -1) + values.shape[1:])}
    post.update({k: np.asarray(v).reshape((chains, -1) + np.shape(v)[1:]) for k, v in more.items()})
    idata = az.from_dict(posterior=post)
    if release is not None:
        idata.attrs["pymc_dp"] = json.dumps({"draws": len(values), "release": {"method": release}})
    return idata


@pytest.fixture(scope="module")
def coin_release():
    model, domains = models.coin(n=40)
    pmod = pymc_dp.make_private(model, epsilon=4.0, draws=40, data=domains, ledger=None)
    return pmod.sample(random_seed=3)


# --------------------------------------------------------------------------- decisions
def test_decision_picks_the_largest_mean_utility():
    p = np.linspace(0.05, 0.95, 40)
    idata = constructed(p, release="exact")
    thresholds = [0.2, 0.5, 0.8]
    # utility of guessing "p is about t": 1 - |p - t|
    res = answer(idata, Decision(thresholds, lambda t, d: 1 - abs(d["p"] - t)))
    expected = np.array([np.mean(1 - np.abs(p - t)) for t in thresholds])
    np.testing.assert_allclose(res.means, expected)
    assert res.value == 0.5 and res.best_index == 1
    assert res.kind == "decision" and res.draws == 40 and res.actions == (0.2, 0.5, 0.8)
    assert res.iid is True and res.caveats == ()
    assert res.bound == pytest.approx(2 * math.sqrt(math.log(3 / 0.05) / (2 * 40)))
    assert res.radius == pytest.approx(math.sqrt(math.log(2 * 3 / 0.05) / (2 * 40)))
    assert "0.5" in str(res)


def test_ties_go_to_the_first_action_and_one_action_has_no_gap():
    idata = constructed(np.full(10, 0.5), release="exact")
    res = answer(idata, Decision(["b", "a", "c"], lambda a, d: 0.5))
    assert res.value == "b"
    assert answer(idata, Decision(["only"], lambda a, d: d["p"])).bound == 0.0


def test_bound_formula_is_lemma_11_for_two_actions_and_union_bounded_beyond():
    for n in (1, 10, 1000):
        for delta in (0.01, 0.05, 0.5):
            paper = 2 * math.sqrt(math.log(2 / delta) / (2 * n))  # JMLR Lemma 11 / docs/theory/report_bounds.md
            assert decision_bound(n, 2, delta) == pytest.approx(paper, rel=1e-15)
            assert decision_bound(n, 7, delta) == pytest.approx(2 * math.sqrt(math.log(7 / delta) / (2 * n)))
            assert decision_bound(n, 7, delta) > paper
    assert decision_bound(10, 1, 0.05) == 0.0
    assert hoeffding_radius(100, 0.05, width=3.0) == pytest.approx(3 * math.sqrt(math.log(40) / 200))
    with pytest.raises(ValueError, match="delta"):
        decision_bound(10, 2, 0.0)
    with pytest.raises(ValueError, match="delta"):
        answer(constructed(np.ones(4)), lambda d: d["p"], delta=1.0)


def test_vectorized_decision_equals_draw_by_draw():
    rng = np.random.default_rng(0)
    p = rng.random(60)
    w = rng.normal(size=(60, 3))
    idata = constructed(p, release="exact", w=w)
    actions = [0, 1, 2]

    def one(a, d):
        return float(d["w"][a] > 0) * d["p"]

    def many(a, d):
        return (d["w"][:, a] > 0) * d["p"]

    r1 = answer(idata, Decision(actions, one))
    r2 = answer(idata, Decision(actions, many, vectorized=True))
    np.testing.assert_allclose(r1.means, r2.means)
    np.testing.assert_allclose(r1.means, [np.mean((w[:, a] > 0) * p) for a in actions])
    assert r1.value == r2.value


@pytest.mark.parametrize("bad", [1.5, -0.1, float("nan")])
def test_utility_outside_unit_interval_is_refused_naming_the_action(bad):
    idata = constructed(np.linspace(0, 1, 10))
    with pytest.raises(ValueError, match=r"'loud'.*\[0, 1\]"):
        answer(idata, Decision(["quiet", "loud"], lambda a, d: 0.5 if a == "quiet" else bad))


def test_bad_queries_are_refused():
    idata = constructed(np.linspace(0, 1, 10))
    with pytest.raises(ValueError, match="no actions"):
        answer(idata, Decision([], lambda a, d: 0.5))
    with pytest.raises(TypeError, match="Decision or a callable"):
        answer(idata, "p")
    with pytest.raises(TypeError, match="function queries"):
        answer(idata, Decision([1], lambda a, d: 0.5), reduce=np.median)
    with pytest.raises(ValueError, match=r"shape \(3,\)"):
        answer(idata, Decision([1], lambda a, d: np.zeros(3), vectorized=True))
    with pytest.raises(TypeError, match="InferenceData"):
        answer(np.ones(3), lambda d: 1.0)


# --------------------------------------------------------------------------- functions of a draw
def test_function_query_mean_reduce_and_range_bound():
    p = np.linspace(0.0, 1.0, 21)
    idata = constructed(p, chains=1, release="exact", w=np.stack([p, 1 - p], axis=1))
    res = answer(idata, lambda d: d["p"] ** 2)
    assert res.value == pytest.approx(np.mean(p**2))
    assert res.bound is None and "value_range" in res.statement  # unbounded: no bound
    np.testing.assert_allclose(res.values, p**2)
    ranged = answer(idata, lambda d: d["p"] ** 2, value_range=(0, 1), delta=0.1)
    assert ranged.bound == pytest.approx(math.sqrt(math.log(2 / 0.1) / (2 * 21)))
    assert answer(idata, lambda d: 4 * d["p"], value_range=(0, 4), delta=0.1).bound == pytest.approx(4 * ranged.bound)
    med = answer(idata, lambda d: d["p"], reduce=np.median)
    assert med.value == pytest.approx(0.5) and med.bound is None
    vec = answer(idata, lambda d: d["w"])  # vector-valued: componentwise mean
    np.testing.assert_allclose(vec.value, [0.5, 0.5])
    fast = answer(idata, lambda d: d["p"] ** 2, vectorized=True)
    assert fast.value == pytest.approx(res.value)
    with pytest.raises(ValueError, match="outside the declared value_range"):
        answer(idata, lambda d: 2 * d["p"], value_range=(0, 1))


# --------------------------------------------------------------------------- provenance
def test_mcmc_releases_get_no_bound_unless_iid_is_asserted():
    idata = constructed(np.linspace(0, 1, 10), release="mcmc")
    dec = Decision([0, 1], lambda a, d: d["p"] if a else 1 - d["p"])
    res = answer(idata, dec)
    assert res.iid is False and res.bound is None and res.radius is None
    assert any("MCMC" in c for c in res.caveats)
    assert res.value in (0, 1)  # the answer itself is still given
    forced = answer(idata, dec, iid=True)
    assert forced.bound == pytest.approx(decision_bound(10, 2, 0.05))
    assert any("iid=True" in c for c in forced.caveats)
    assert answer(idata, lambda d: d["p"], value_range=(0, 1)).bound is None
    # draws without a release record: assumed iid, said so
    plain = answer(constructed(np.linspace(0, 1, 10)), dec)
    assert plain.iid is None and plain.bound is not None and any("no pymc_dp release record" in c for c in plain.caveats)


def test_answers_from_a_release_loaded_from_netcdf_cost_nothing(coin_release, tmp_path):
    path = tmp_path / "release.nc"
    coin_release.to_netcdf(path)
    loaded = az.from_netcdf(path)
    dec = Decision([0.25, 0.5, 0.75], lambda t, d: 1 - abs(d["p"] - t))
    before = answer(coin_release, dec)
    after = answer(loaded, dec)  # no model, no data: only the file
    np.testing.assert_allclose(after.means, before.means)
    assert after.value == before.value and after.iid is True and after.draws == 40
    assert after.bound == pytest.approx(decision_bound(40, 3, 0.05))
    p = coin_release.posterior["p"].values.reshape(-1)
    assert answer(loaded, lambda d: d["p"]).value == pytest.approx(p.mean())


def test_answering_spends_nothing(tmp_path):
    ledger = pymc_dp.Ledger(tmp_path / "l.sqlite")
    model, domains = models.coin(n=20)
    pmod = pymc_dp.make_private(model, epsilon=2.0, draws=10, data=domains, ledger=ledger)
    idata = pmod.sample(random_seed=0)
    spent = pmod.spent()
    for t in np.linspace(0.1, 0.9, 25):  # many queries, chosen adaptively or not
        answer(idata, Decision([t, 1 - t], lambda a, d: 1 - abs(d["p"] - a)))
    assert pmod.spent() == spent and spent.releases == 1


def test_released_draws_are_chain_major():
    values = np.arange(12.0)
    draws = query.released_draws(constructed(values, chains=3))
    np.testing.assert_array_equal(draws["p"], values)


# --------------------------------------------------------------------------- the guarantee, simulated
def _bernoulli_release(rng, mu, n):
    """A release whose draws are theta = (u_1..u_K) with independent u_k ~ Bernoulli(mu_k): the
    utility of action k at a draw is u_k, so action k's expected utility is exactly mu_k."""
    u = (rng.random((n, len(mu))) < mu).astype(float)
    return az.from_dict(posterior={"u": u[None]})


def test_lemma_11_guarantee_holds_in_simulation_and_a_smaller_bound_would_not():
    rng = np.random.default_rng(11)
    n, delta, reps = 50, 0.1, 300
    k = 20
    # one best action, ten close to it, nine just beyond the bound
    bound = decision_bound(n, k, delta)
    mu = np.array([0.5] + [0.38] * 10 + [0.5 - bound - 0.01] * 9)
    dec = Decision(list(range(k)), lambda a, d: d["u"][:, a], vectorized=True)
    gaps = []
    for _ in range(reps):
        res = answer(_bernoulli_release(rng, mu, n), dec, delta=delta)
        assert res.bound == pytest.approx(bound)
        gaps.append(mu.max() - mu[res.value])
    gaps = np.array(gaps)
    assert np.mean(gaps > bound) <= delta  # the guarantee: fails with probability <= delta
    # the test has teeth: a bound four times smaller fails far more often than delta
    assert np.mean(gaps > bound / 4) > 3 * delta


def test_function_bound_holds_in_simulation():
    rng = np.random.default_rng(5)
    n, delta, reps, true_mean = 30, 0.2, 400, 0.3
    misses = 0
    for _ in range(reps):
        idata = az.from_dict(posterior={"x": (rng.random((1, n)) < true_mean).astype(float)})
        res = answer(idata, lambda d: d["x"], value_range=(0, 1), delta=delta, vectorized=True)
        misses += abs(res.value - true_mean) > res.bound
    assert misses / reps <= delta
