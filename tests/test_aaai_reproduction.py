"""The AAAI 2016 reproduction script (benchmarks/aaai_reproduction.py) at tiny size."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"
sys.path.insert(0, str(BENCHMARKS))

import aaai_reproduction as aaai  # noqa: E402

TINY = dataclasses.replace(
    aaai.SIZES["tiny"], nb_records=300, nb_repeats=4, nb_epsilons=(1.0, 2048.0), lr_precisions=(1.0, 256.0)
)


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("aaai")
    return aaai.run(config=TINY, out=out, seed=0, progress=False), out


def test_output_structure(tiny_run):
    result, out = tiny_run
    for name in ("figure1_naive_bayes.png", "figure2_linear_regression.png", "summary.json", "summary.md"):
        assert (out / name).stat().st_size > 0, name
    saved = json.loads((out / "summary.json").read_text())
    assert set(saved) == {"summary", "raw", "meta"}
    nb = result["raw"]["naive_bayes"]
    assert nb["epsilons"] == list(TINY.nb_epsilons)
    assert len(nb["non_private"]) == TINY.nb_repeats
    expected = {"posterior_sampling_1"} | {m for m, ok in aaai.mechanisms_available().items() if ok}
    assert set(nb["accuracy"]) == expected
    for values in nb["accuracy"].values():
        arr = np.asarray(values)
        assert arr.shape == (len(TINY.nb_epsilons), TINY.nb_repeats)
        assert np.all((arr >= 0) & (arr <= 1))
    lr = result["raw"]["linear_regression"]
    assert np.asarray(lr["mse"]["posterior_sampling"]).shape == (len(TINY.lr_precisions), TINY.lr_repeats)
    claims = result["summary"]["claims"]
    assert set(claims) == set(aaai.PAPER_CLAIMS)
    for claim in claims.values():
        assert claim["holds"] in (True, False, None)
        assert claim["paper"]
    assert "Paper vs measured" in (out / "summary.md").read_text()


def test_non_private_accuracy_well_above_chance(tiny_run):
    result, _ = tiny_run
    acc = np.asarray(result["raw"]["naive_bayes"]["non_private"])
    chance = result["raw"]["naive_bayes"]["chance"]
    assert acc.mean() > chance + 0.15, (acc, chance)
    # with a near-unlimited budget the posterior sampler's one draw classifies far above chance too
    ps = np.asarray(result["raw"]["naive_bayes"]["accuracy"]["posterior_sampling_1"])
    assert ps[-1].mean() > chance + 0.1


def test_derived_truncation_is_the_papers_ball(tiny_run):
    result, _ = tiny_run
    for row in result["raw"]["linear_regression"]["per_precision"]:
        assert row["derived_radius"] == pytest.approx(row["paper_radius"], rel=1e-3)
        assert row["epsilon_per_draw"] == pytest.approx(aaai.paper_epsilon_per_draw(row["b"]), rel=1e-6)


def test_predictive_proba_matches_brute_force():
    rng = np.random.default_rng(0)
    pi, theta, X = rng.uniform(0.1, 0.9, 5), rng.uniform(0.1, 0.9, (5, 2, 3)), rng.integers(0, 2, (4, 3))
    joint = np.array(
        [[[(pi[s] if c else 1 - pi[s]) * np.prod(theta[s, c] ** x * (1 - theta[s, c]) ** (1 - x)) for c in (0, 1)]
          for x in X] for s in range(5)]
    ).mean(axis=0)
    np.testing.assert_allclose(aaai.predictive_proba(pi, theta, X), joint[:, 1] / joint.sum(axis=1))


def test_threshold_is_computed():
    assert aaai._threshold([1, 2, 4, 8], np.array([True, False, True, True])) == 4
    assert aaai._threshold([1, 2, 4], np.array([True, True, True])) == 1
    assert aaai._threshold([1, 2, 4], np.array([True, True, False])) is None


@pytest.mark.extended
def test_reduced_size_runs(tmp_path):
    """The command line at --size reduced (about 1-2 minutes on 2 cores)."""
    subprocess.run(
        [sys.executable, str(BENCHMARKS / "aaai_reproduction.py"), "--size", "reduced", "--out", str(tmp_path)],
        check=True, capture_output=True, timeout=600,
        env={**__import__("os").environ, "PYTHONPATH": str(BENCHMARKS.parent)},
    )
    summary = json.loads((tmp_path / "summary.json").read_text())["summary"]
    assert summary["naive_bayes"]["accuracy"]["non_private"]["mean"] > 0.7
