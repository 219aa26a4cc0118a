"""Reading a PyMC model as a discrete Bayes net: variables, nodes, gather tables, and the counts
(posterior updates) against a hand count on a small naive Bayes dataset."""

from __future__ import annotations

import numpy as np
import pymc as pm
import pytest

import pymc_dp
from pymc_dp.exceptions import UnsupportedFactorError
from pymc_dp.mechanisms.bayesnet import read_bayesnet
from tests.mechanisms.test_counts import tiny_naive_bayes


def naive_bayes(n=12, m=3, seed=0, k=2):
    """test_counts' naive Bayes (its builder), with its private values."""
    model, domains = tiny_naive_bayes(n=n, m=m, classes=k, seed=seed)
    return model, domains, np.asarray(model["X"].get_value()), np.asarray(model["y"].get_value())


@pytest.mark.parametrize("k", [2, 3])
def test_structure_of_naive_bayes(k):
    model, domains, X, y = naive_bayes(k=k)
    net = read_bayesnet(model, domains)
    assert [v.label for v in net.variables] == ["X[0]", "X[1]", "X[2]", "y"]  # containers in model order
    assert net.rows == 12 and set(net.params) == {"pi", "theta"}
    assert net.params["theta"]["family"] == "Beta" and net.params["theta"]["cells"] == k * 3
    assert net.params["pi"]["family"] == ("Beta" if k == 2 else "Dirichlet")
    # one class node without parents, three feature nodes whose parent is the class
    assert [(node.factor, node.parents) for node in net.nodes] == [("cls", ()), ("feat", (3,)), ("feat", (3,)), ("feat", (3,))]
    assert net.nodes_per_param() == {"pi": 1, "theta": 3}
    assert all(net.reads("y", node) for node in net.nodes)


@pytest.mark.parametrize("k", [2, 3])
def test_counts_equal_a_hand_count(k):
    model, domains, X, y = naive_bayes(k=k, seed=3)
    net = read_bayesnet(model, domains)
    counts = net.counts({"X": X, "y": y})
    theta = counts["theta"].reshape(k, 3, 2)  # (class, feature, [ones, zeros])
    for c in range(k):
        for j in range(3):
            assert theta[c, j, 0] == np.sum((y == c) & (X[:, j] == 1))
            assert theta[c, j, 1] == np.sum((y == c) & (X[:, j] == 0))
    pi = counts["pi"]
    if k == 2:  # Beta: [ones, zeros]
        assert pi.tolist() == [[int(np.sum(y == 1)), int(np.sum(y == 0))]]
    else:
        assert pi.tolist() == [[int(np.sum(y == c)) for c in range(k)]]
    assert net.flat_counts({"X": X, "y": y}).sum() == 12 * 4  # one count per node and record


def test_a_continuous_factor_is_not_a_network():
    with pm.Model() as model:
        yd = pm.Data("y", np.zeros(5))
        pm.Normal("obs", pm.Normal("mu"), 1.0, observed=yd)
    with pytest.raises((UnsupportedFactorError, pymc_dp.DomainError)):
        read_bayesnet(model, {"y": pymc_dp.Interval(-1, 1)})
