"""Test tiers for the whole tree (tests/ and notebooks/): a root conftest, so that they apply
however pytest is invoked (``pytest notebooks/02_naive_bayes.ipynb -m extended`` included).
Fixtures live in ``tests/conftest.py``."""

from pathlib import Path

import pytest

#: The **extended** tier: tests measured at 15 s or more each (``pytest --durations``, 2 cores,
#: 2026-11-25) that repeat a check a faster test already makes on a smaller model, or that
#: reproduce experiments. Outside CI's run (30 minutes on 2 cores); ``python -m pytest -m
#: extended`` runs them. Each entry is a node id or the prefix of a parametrised one.
EXTENDED_TIER = (
    "tests/test_split.py::test_matches_a_brute_force_grid",
    "tests/test_split.py::test_never_worse_than_equal[chain_net",
    "tests/test_split.py::test_never_worse_than_equal[lopsided",
    "tests/test_split.py::test_never_worse_than_equal[naive_bayes-record]",
    "tests/test_split.py::test_split_depends_on_shapes_and_domains_not_on_data[record]",
    "tests/test_split.py::test_regions_bound_each_factor[poisson_bernoulli-record]",
    "tests/test_split.py::test_nothing_to_gain_keeps_the_equal_split",
    "notebooks/02_naive_bayes.ipynb",
    "notebooks/05_mechanisms.ipynb",
    "tests/test_aaai_reproduction.py",
    "tests/test_reproducibility.py::test_exact_release_is_reproducible[poisson_bernoulli]",
    "tests/exact/test_conjugate.py::test_two_factors_share_one_beta_prior",
    "tests/exact/test_plan.py::test_with_data_is_the_plan_built_on_that_data",
    "tests/test_lift.py::test_three_node_chain[attribute]",
    "tests/audits/test_exact.py::test_exact_audit_passes[chain net",
    "tests/audits/test_exact.py::test_exact_audit_passes[Poisson and Bernoulli-record]",
    "tests/audits/test_statistical.py::test_statistical_audit_passes_with_exact_samplers[chain net]",
    "tests/audits/test_neighbours.py::test_attribute_unit_with_containers_of_different_lengths",
    "tests/test_gallery.py::test_certifies_as_written[glm_negative_binomial]",
    "tests/test_gallery.py::test_certifies_as_written[ordinal.probit]",
    "tests/test_gallery.py::test_certifies_as_written[radon.varying_intercept_slope]",
    "tests/test_report.py::test_reports_before_sampling_do_not_depend_on_the_data",
    "tests/test_backends.py::test_release_respects_truncation[nutpie",
    "tests/test_backends.py::test_random_seed_reproduces_per_backend[blackjax]",
    "tests/test_backends.py::test_random_seed_reproduces_per_backend[nutpie]",
    "tests/test_split.py::test_lifts_exactly_to_delta[chain_net",
    "tests/test_split.py::test_strictly_better_where_the_factors_differ[lopsided",
    "tests/test_split.py::test_strictly_better_where_the_factors_differ[naive_bayes-5.0-record",
    "tests/test_split.py::test_small_budget_finds_no_false_minimum",
    "tests/test_reproducibility.py::test_exact_release_is_reproducible[naive_bayes]",
    "tests/test_truncate.py::test_cached_solves_equal_uncached[poisson]",
    "tests/test_gallery.py::test_certifies_as_written[discrete_choice]",
)


#: The **slow** tier: in CI's run, outside the fast loop (``python -m pytest -m "not slow"``, about
#: 2 minutes on 2 cores): every notebook, and the tests listed in ``tests/slow_tier.txt`` (those
#: that took 3 s or more in a ``--durations`` run of the default suite). Node ids or prefixes.
SLOW_TIER = tuple(
    line.strip()
    for line in (Path(__file__).parent / "tests" / "slow_tier.txt").read_text().splitlines()
    if line.strip() and not line.startswith("#")
)


#: Tiers outside the default run: deselected unless the ``-m`` expression names them
#: (``-m extended``, ``-m gallery``, ``-m "extended or gallery"``), so that ``-m "not slow"`` --
#: the fast loop -- does not bring them back by replacing a ``-m`` in ``addopts``.
OUTSIDE_DEFAULT = ("extended", "gallery")


def pytest_collection_modifyitems(config, items):
    expression = config.getoption("markexpr") or ""
    keep, dropped = [], []
    for item in items:
        if item.nodeid.startswith(EXTENDED_TIER):
            item.add_marker(pytest.mark.extended)
        if item.nodeid.startswith(SLOW_TIER) or item.nodeid.startswith("notebooks/"):
            item.add_marker(pytest.mark.slow)
        if any(item.get_closest_marker(t) and t not in expression for t in OUTSIDE_DEFAULT):
            dropped.append(item)
        else:
            keep.append(item)
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = keep
