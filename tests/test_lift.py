"""Lifting per-factor constants through the DAG (docs/theory/lift.md), checked by enumeration."""

import itertools

import numpy as np
import pytest

import pymc_dp
from pymc_dp.lift import lift, split_budget
from tests import models


def test_lift_units():
    L = {"a": 0.1, "b": 0.2, "c": 0.3}
    reads = {"a": ("A",), "b": ("A", "B"), "c": ("B", "C")}
    assert lift(L, reads, "record") == pytest.approx(0.6)
    assert lift(L, reads, "attribute") == pytest.approx(0.5)  # B: b + c


@pytest.mark.parametrize("unit", ["record", "attribute"])
def test_split_lifts_back_to_delta(unit):
    reads = {"a": ("A",), "b": ("A", "B"), "c": ("B", "C"), "d": ("C",)}
    shares = split_budget(0.7, reads, unit)
    assert lift(shares, reads, unit) == pytest.approx(0.7)


def chain_net(seed=0, n=30):
    return models.chain_net(n=n, seed=seed)[0]


def _record_loglik(rec, params):
    a, b, c = rec
    pA, pB, pC = params
    bern = lambda x, p: np.log(p if x else 1 - p)  # noqa: E731
    return bern(a, pA) + bern(b, pB[a]) + bern(c, pC[b])


@pytest.mark.parametrize("unit", ["record", "attribute"])
def test_three_node_chain(unit):
    dom = {k: pymc_dp.Binary() for k in "ABC"}
    cert = pymc_dp.make_private(chain_net(), epsilon=1.2, draws=1, data=dom, unit=unit).certificate
    L = {f.name: f.lipschitz for f in cert.factors}
    reads = {f.name: set(f.reads) for f in cert.factors}
    assert reads == {"a": {"A"}, "b": {"A", "B"}, "c": {"B", "C"}}
    if unit == "record":
        assert cert.epsilon_per_draw == pytest.approx(2 * sum(L.values()))
    else:
        per = {k: sum(L[j] for j in L if k in reads[j]) for k in "ABC"}
        assert cert.epsilon_per_draw == pytest.approx(2 * max(per.values()))

    # brute force: every record pair (record unit) or pair differing in one coordinate (attribute
    # unit), every corner of the truncated parameter box. One draw's privacy loss is the
    # oscillation of g = loglik(r) - loglik(s) over the region (docs/theory/oscillation.md): a factor
    # certified by its oscillation may have sup |g| above its Delta, never sup g - inf g above
    # 2 Delta. g is a sum of terms monotone in one coordinate each, so its extremes are at corners.
    box = {}
    for f in cert.factors:
        (c,) = f.constraints
        box[c["var"]] = (c["lower"], c["upper"])
    corners = list(
        itertools.product(
            box["pA"],
            itertools.product(*[box["pB"]] * 2),
            itertools.product(*[box["pC"]] * 2),
        )
    )
    records = list(itertools.product((0, 1), repeat=3))
    worst = 0.0
    for r, s in itertools.product(records, records):
        if unit == "attribute" and sum(x != y for x, y in zip(r, s)) > 1:
            continue
        g = [_record_loglik(r, params) - _record_loglik(s, params) for params in corners]
        worst = max(worst, max(g) - min(g))
    assert worst <= cert.epsilon_per_draw * (1 + 1e-12)
    if unit == "record":
        assert worst == pytest.approx(cert.epsilon_per_draw, rel=1e-6)  # the lift is tight
