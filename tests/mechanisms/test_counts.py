"""Noisy counts of a discrete network and the exact posterior given them (pymc_dp.mechanisms.counts).

Checked against exact computations: the posterior means against a brute-force sum over every
dataset of a tiny network (each dataset weighted by its prior predictive probability and the
noise density of the released counts, the counts computed here by hand); the draws against
those means; the sensitivity against the worst record change found by enumeration; the
release (charged once, only public facts); the statistical audit, which also catches a halved
noise scale; Dask input; the refusals.
"""

from __future__ import annotations

import itertools
import json

import numpy as np
import pymc as pm
import pytest
from scipy import integrate, special

import pymc_dp
from pymc_dp import NoisyCounts
from pymc_dp.mechanisms.counts import _compositions
from pymc_dp.mechanisms.noise import discrete_laplace
from pymc_dp.private_data import PrivateData
from tests.models import chain_net, coin, dirichlet_categorical, naive_bayes
from tests.typed_refusals import assert_typed_refusal


def tiny_naive_bayes(n=3, m=2, classes=2, seed=0):
    """A naive Bayes with Beta(2, 3) features; a Bernoulli class (Beta(1.5, 1)) or a Categorical
    one (Dirichlet(1, 2, 1.5))."""
    rng = np.random.default_rng(seed)
    y = rng.integers(0, classes, n)
    X = rng.integers(0, 2, (n, m))
    with pm.Model() as model:
        Xd, yd = pm.Data("X", X), pm.Data("y", y)
        if classes == 2:
            pi = pm.Beta("pi", 1.5, 1.0)
            pm.Bernoulli("cls", p=pi, observed=yd)
        else:
            pi = pm.Dirichlet("pi", a=np.array([1.0, 2.0, 1.5])[:classes])
            pm.Categorical("cls", p=pi, observed=yd)
        theta = pm.Beta("theta", 2.0, 3.0, shape=(classes, m))
        pm.Bernoulli("feat", p=theta[yd], observed=Xd)
    domains = {"X": pymc_dp.Binary(), "y": pymc_dp.Integers(0, classes - 1)}
    return model, domains


def _log_beta(a, b):
    return special.gammaln(a) + special.gammaln(b) - special.gammaln(a + b)


def brute_force_means(n, m, classes, z, b, names):
    """Posterior means of pi and theta given released counts ``z`` (name -> value), by summing
    over every dataset: weight = prior predictive probability x prod exp(-|z - count| / b)."""
    a_pi = np.array([1.5, 1.0]) if classes == 2 else np.array([1.0, 2.0, 1.5])[:classes]
    logw, pi_mean, th_mean = [], [], []
    for y in itertools.product(range(classes), repeat=n):
        y = np.array(y)
        Nc = np.bincount(y, minlength=classes)
        for flat in itertools.product((0, 1), repeat=n * m):
            X = np.array(flat).reshape(n, m)
            ones = np.array([[X[y == c, j].sum() for j in range(m)] for c in range(classes)])
            zeros = Nc[:, None] - ones
            counts = {}
            if classes == 2:
                counts["count pi ones"] = Nc[1]
            else:
                counts.update({f"count pi category {k}": Nc[k] for k in range(classes)})
            for c in range(classes):
                for j in range(m):
                    counts[f"count theta[{c}, {j}] ones"] = ones[c, j]
                    counts[f"count theta[{c}, {j}] zeros"] = zeros[c, j]
            assert set(counts) == set(names)
            lw = -sum(abs(z[k] - counts[k]) for k in names) / b
            # prior predictive of the ordered dataset: Dirichlet / Beta integrals
            if classes == 2:
                lw += _log_beta(a_pi[0] + Nc[1], a_pi[1] + Nc[0]) - _log_beta(a_pi[0], a_pi[1])
                pi_mean.append((a_pi[0] + Nc[1]) / (a_pi.sum() + n))
            else:
                lw += (special.gammaln(a_pi + Nc).sum() - special.gammaln(a_pi.sum() + n)
                       - special.gammaln(a_pi).sum() + special.gammaln(a_pi.sum()))
                pi_mean.append((a_pi + Nc) / (a_pi.sum() + n))
            lw += np.sum(_log_beta(2.0 + ones, 3.0 + zeros) - _log_beta(2.0, 3.0))
            logw.append(lw)
            th_mean.append((2.0 + ones) / (5.0 + Nc[:, None]))
    w = np.exp(np.array(logw) - special.logsumexp(logw))
    pi = np.tensordot(w, np.array(pi_mean), axes=1)
    return pi, np.tensordot(w, np.array(th_mean), axes=1)


def _as_released(mech, seed):
    """Plausible noisy counts (as if released: the posterior is a function of public numbers)."""
    rng = np.random.default_rng(seed)
    return {k: int(v) for k, v in zip(mech.entry_names(), rng.integers(-2, 5, len(mech.entries)))}


# --------------------------------------------------------------------------- the exact posterior
@pytest.mark.parametrize("classes", [2, 3])
def test_exact_posterior_means_match_a_brute_force_sum_over_datasets(classes):
    n, m = 3, 2
    model, domains = tiny_naive_bayes(n=n, m=m, classes=classes)
    mech = pymc_dp.noisy_statistics(model, epsilon=2.0, data=domains, ledger=None)
    assert isinstance(mech, NoisyCounts)
    mech.released = _as_released(mech, seed=classes)
    means = mech.exact_posterior().means()
    pi, theta = brute_force_means(n, m, classes, mech.released, mech.noise_scale, mech.entry_names())
    got_pi = means["pi"][0, 0] if classes == 2 else means["pi"][0]  # Beta: column 0 is P(1)
    np.testing.assert_allclose(got_pi, pi, rtol=1e-10)
    np.testing.assert_allclose(means["theta"][:, 0].reshape(classes, m), theta, rtol=1e-10)


def test_draws_follow_the_exact_posterior():
    model, domains = tiny_naive_bayes(n=3, m=2)
    mech = pymc_dp.noisy_statistics(model, epsilon=2.0, data=domains, ledger=None)
    mech.released = _as_released(mech, seed=7)
    means = mech.exact_posterior().means()
    post = mech.sample(20_000, random_seed=3).posterior
    for name, want in (("pi", means["pi"][:, 0].reshape(())), ("theta", means["theta"][:, 0].reshape(2, 2))):
        draws = post[name].values.reshape(20_000, *np.shape(want))
        se = draws.std(axis=0) / np.sqrt(len(draws))
        assert np.all(np.abs(draws.mean(axis=0) - want) < 5 * se), name
    # the same seed, the same draws (post-processing is reproducible)
    again = mech.sample(20_000, random_seed=3).posterior
    np.testing.assert_array_equal(post["theta"].values, again["theta"].values)


def test_beta_bernoulli_posterior_is_the_quadrature_posterior():
    """p | z for a coin: sum_k Binomial(k | n, p) exp(-|z - k| / b) Beta(1, 1), by quadrature."""
    model, domains = coin(n=12)
    mech = pymc_dp.noisy_statistics(model, epsilon=0.5, data=domains, ledger=None)
    assert isinstance(mech, NoisyCounts) and mech.entry_names() == ["count p ones"]
    mech.released = {"count p ones": 4}
    k = np.arange(13)

    def lik(t):
        return np.sum(special.comb(12, k) * t**k * (1 - t) ** (12 - k) * np.exp(-np.abs(4 - k) / mech.noise_scale))

    mass = integrate.quad(lik, 0, 1, epsabs=0, epsrel=1e-12)[0]
    mean = integrate.quad(lambda t: t * lik(t), 0, 1, epsabs=0, epsrel=1e-12)[0] / mass
    assert mech.exact_posterior().means()["p"][0, 0] == pytest.approx(mean, rel=1e-9)


def test_compositions_enumerate_every_vector_once():
    for total, parts in [(0, 3), (4, 1), (5, 2), (6, 3), (4, 4)]:
        comp = _compositions(total, parts)
        assert np.all(comp.sum(axis=1) == total) and np.all(comp >= 0)
        assert len({tuple(r) for r in comp}) == len(comp) == special.comb(total + parts - 1, parts - 1, exact=True)


# --------------------------------------------------------------------------- privacy map
@pytest.mark.parametrize("classes", [2, 3])
def test_sensitivity_is_attained_by_neighbours(classes):
    """The L1 change of the released counts, maximised over every change of one record."""
    n, m = 3, 2
    model, domains = tiny_naive_bayes(n=n, m=m, classes=classes)
    mech = pymc_dp.noisy_statistics(model, epsilon=1.0, data=domains, ledger=None)
    # a Bernoulli class releases its ones alone (1); each feature moves between cells (2)
    assert mech.sensitivity == (1 + 2 * m if classes == 2 else 2 + 2 * m)
    base = {k: np.asarray(model[k].get_value()).copy() for k in ("X", "y")}
    worst = 0
    for y0, y1 in itertools.product(range(classes), repeat=2):
        for x0, x1 in itertools.product(itertools.product((0, 1), repeat=m), repeat=2):
            a = {k: v.copy() for k, v in base.items()}
            b = {k: v.copy() for k, v in base.items()}
            a["y"][0], b["y"][0], a["X"][0], b["X"][0] = y0, y1, x0, x1
            worst = max(worst, int(np.abs(mech.true_counts(a) - mech.true_counts(b)).sum()))
    assert worst == mech.sensitivity
    users = pymc_dp.noisy_statistics(model, epsilon=1.0, data=domains, unit=pymc_dp.Users(max_rows=2), ledger=None)
    assert users.sensitivity == 2 * mech.sensitivity
    attribute = pymc_dp.noisy_statistics(model, epsilon=1.0, data=domains, unit="attribute", ledger=None)
    # the class container is read by every node (observation or parent); X by the features only
    assert attribute.sensitivity == mech.sensitivity


# --------------------------------------------------------------------------- release
def test_release_charges_once_and_holds_only_public_facts(tmp_path):
    ledger = pymc_dp.Ledger(tmp_path / "ledger.db", epsilon=1.0)
    model, domains = naive_bayes(n=40, m=3)
    before = str(model.free_RVs), str(model.observed_RVs), str(model.data_vars)
    mech = pymc_dp.noisy_statistics(model, epsilon=0.6, data=domains, ledger=ledger)
    idata = mech.sample(400, random_seed=1)
    assert mech.spent().epsilon == pytest.approx(0.6)
    again = mech.sample(100, random_seed=2)  # post-processing: free
    assert mech.spent().epsilon == pytest.approx(0.6)
    assert (str(model.free_RVs), str(model.observed_RVs), str(model.data_vars)) == before
    assert set(idata.groups()) == {"posterior"} and set(idata.posterior.data_vars) == {"pi", "theta"}
    assert idata.posterior["theta"].shape == (4, 100, 2, 3)
    attrs = json.loads(idata.attrs["pymc_dp"])
    assert attrs["release"]["charged"] is True and json.loads(again.attrs["pymc_dp"])["release"]["charged"] is False
    assert attrs["released"]["statistics"] == mech.released and attrs["rows"] == 40
    assert set(attrs["released"]) == {"statistics"}  # the noisy counts only, never the true ones
    report = str(pymc_dp.report(idata))
    assert "noisy sufficient statistics" in report and "count theta[1, 2] ones" in report
    with pytest.raises(pymc_dp.BudgetExceededError):
        pymc_dp.noisy_statistics(naive_bayes(n=40, m=3)[0], epsilon=0.6, data=domains, ledger=ledger).sample(10)


def test_noise_aware_posterior_beats_pseudo_counts_on_average():
    """At epsilon = 1 on 50 records, the exact posterior's mean is closer to the data's
    frequencies than the Laplace-updates posterior (noisy counts as pseudo-counts), on average
    over releases -- the same counts, the same noise scale up to one node."""
    model, domains = naive_bayes(n=50, m=4, seed=2)
    X, y = (np.asarray(model[k].get_value()) for k in ("X", "y"))
    truth = np.array([[X[y == c, j].mean() for j in range(4)] for c in range(2)])
    err_aware, err_pseudo = [], []
    for _ in range(40):
        aware = pymc_dp.noisy_statistics(model, epsilon=1.0, data=domains, ledger=None)
        err_aware.append(np.abs(aware.exact_posterior().means()["theta"][:, 0].reshape(2, 4) - truth).mean())
        pseudo = pymc_dp.laplace_updates(model, epsilon=1.0, data=domains, draws=400, ledger=None)
        err_pseudo.append(np.abs(pseudo.sample(random_seed=0).posterior["theta"].mean(("chain", "draw")).values - truth).mean())
    assert np.mean(err_aware) < np.mean(err_pseudo)


class HalvedCounts(NoisyCounts):
    """A broken release: half the noise it claims."""

    def _noisy(self, counts, runs=None):
        reps = counts if runs is None else np.broadcast_to(counts, (runs, counts.size))
        return discrete_laplace(reps.astype(np.int64), self.noise_scale / 2)


def test_statistical_audit_passes_and_catches_halved_noise():
    model, domains = coin(n=10)
    res = pymc_dp.audit(pymc_dp.noisy_statistics(model, epsilon=1.0, data=domains, ledger=None),
                        runs=100_000, confidence=0.999, random_seed=1)
    assert res.verdict == "pass", str(res)
    assert 0.7 < res.measured <= 1.0
    res = pymc_dp.audit(HalvedCounts(model, epsilon=1.0, data=domains, ledger=None), runs=100_000, confidence=0.999, random_seed=2)
    assert res.verdict == "fail", str(res)
    assert res.measured > 1.5


@pytest.mark.extended
def test_statistical_audit_passes_naive_bayes():
    model, domains = tiny_naive_bayes(n=4, m=2)
    mech = pymc_dp.noisy_statistics(model, epsilon=1.0, data=domains, ledger=None)
    res = pymc_dp.audit(mech, runs=100_000, confidence=0.999, random_seed=4)
    assert res.verdict == "pass", str(res)
    assert 0.5 < res.measured <= 1.0


def test_dask_array_is_counted_block_by_block():
    da = pytest.importorskip("dask.array")
    big = np.random.default_rng(2).binomial(1, 0.4, size=25_000)
    stand_in, domains = coin(n=3)
    mech = pymc_dp.noisy_statistics(stand_in, epsilon=1.0, data=domains, values={"x": da.from_array(big, chunks=4_000)}, ledger=None)
    assert isinstance(mech, NoisyCounts) and mech.n == 25_000
    assert mech.true_counts(mech._values).tolist() == [int(big.sum())]
    numpy_mech = pymc_dp.noisy_statistics(stand_in, epsilon=1.0, data=domains, values={"x": big}, ledger=None)
    assert numpy_mech.true_counts(numpy_mech._values).tolist() == [int(big.sum())]
    assert mech.dataset_id == numpy_mech.dataset_id
    post = mech.sample(200, random_seed=0).posterior["p"]
    assert abs(float(post.mean()) - big.mean()) < 0.01
    bad = big.copy()
    bad[-1] = 2
    with pytest.raises(pymc_dp.DomainError, match="'x'"):
        pymc_dp.noisy_statistics(stand_in, epsilon=1.0, data=domains, values={"x": da.from_array(bad, chunks=4_000)}, ledger=None)


# --------------------------------------------------------------------------- routing and refusals
def test_routing_and_refusals():
    model, domains = dirichlet_categorical()
    assert isinstance(pymc_dp.noisy_statistics(model, epsilon=1.0, data=domains, ledger=None), NoisyCounts)
    model, domains = chain_net()
    with pytest.raises(NotImplementedError, match="'B'.*deeper than one level"):
        pymc_dp.noisy_statistics(model, epsilon=1.0, data=domains, ledger=None)
    rec = pymc_dp.recommend(naive_bayes(n=100, m=2)[0], epsilon=1.0, data=naive_bayes()[1])
    assert rec.path == "noisy_statistics" and "naive Bayes" in rec.reason
    assert set(rec.variance_inflation) == set(pymc_dp.noisy_statistics(naive_bayes(n=100, m=2)[0], epsilon=1.0, data=naive_bayes()[1], ledger=None).entry_names())
    rec = pymc_dp.recommend(chain_net()[0], epsilon=1.0, data=chain_net()[1])
    assert rec.path == "make_private" and "deeper" in rec.reason
    with pytest.raises(ValueError, match="draws"):
        pymc_dp.noisy_statistics(coin()[0], epsilon=1.0, data=coin()[1], ledger=None).sample(0)
    with pytest.raises(TypeError, match="no MCMC.*tune"):
        pymc_dp.noisy_statistics(coin()[0], epsilon=1.0, data=coin()[1], ledger=None).sample(10, tune=100)


def test_a_network_the_exact_posterior_does_not_implement_is_a_typed_refusal_and_charges_nothing(tmp_path):
    """Called directly, noisy_statistics on a network deeper than one level refuses with a
    PathNotImplementedError (a PrivacyError and a NotImplementedError) naming the variable."""
    ledger = pymc_dp.Ledger(tmp_path / "ledger.sqlite", epsilon=10.0)
    model, domains = chain_net()
    dataset = PrivateData.from_model(model, domains, "record").fingerprint
    assert_typed_refusal(lambda: pymc_dp.noisy_statistics(model, epsilon=1.0, data=domains, ledger=ledger),
                         kind=pymc_dp.PathNotImplementedError, match="'B'.*deeper than one level.*laplace_updates",
                         ledger=ledger, dataset=dataset)
