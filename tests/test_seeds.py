"""pymc_dp.seeds: the exact samplers' generator (exact_rng) and the check of a seed for pm.sample
(check_mcmc_seed), both before the ledger is charged."""

from __future__ import annotations

import numpy as np
import pytest

from pymc_dp.seeds import check_mcmc_seed, exact_rng

#: seeds NumPy refuses: negative, not an integer, a sequence with a negative entry
BAD_SEEDS = [-1, 1.5, "seven", [1, -2]]


def _numpy_refusal(seed) -> type[Exception]:
    """The exception ``np.random.SeedSequence`` raises for ``seed``."""
    with pytest.raises((TypeError, ValueError)) as info:
        np.random.SeedSequence(seed)
    return type(info.value)


def test_exact_rng_passes_a_generator_through():
    g = np.random.default_rng(3)
    assert exact_rng(g) is g
    state = g.bit_generator.state
    exact_rng(g)  # used as it is: not re-seeded, nothing drawn
    assert g.bit_generator.state == state


def test_exact_rng_seeds_reproducibly_from_an_int():
    a, b = exact_rng(7), exact_rng(7)
    assert isinstance(a, np.random.Generator) and a is not b
    np.testing.assert_array_equal(a.random(5), b.random(5))
    np.testing.assert_array_equal(exact_rng(7).random(5), np.random.default_rng(7).random(5))
    assert not np.array_equal(exact_rng(7).random(5), exact_rng(8).random(5))
    np.testing.assert_array_equal(exact_rng([1, 2]).random(3), np.random.default_rng([1, 2]).random(3))


@pytest.mark.parametrize("seed", BAD_SEEDS, ids=repr)
def test_exact_rng_refuses_a_bad_seed_naming_it(seed):
    with pytest.raises(_numpy_refusal(seed)) as info:
        exact_rng(seed)
    message = str(info.value)
    assert f"random_seed={seed!r}" in message and "is not a seed" in message and "numpy Generator" in message


@pytest.mark.parametrize("seed", BAD_SEEDS, ids=repr)
def test_check_mcmc_seed_refuses_what_seed_sequence_refuses(seed):
    with pytest.raises(_numpy_refusal(seed), match="is not a seed") as info:
        check_mcmc_seed(seed)
    assert f"random_seed={seed!r}" in str(info.value)


@pytest.mark.parametrize(
    "seed",
    [None, 0, 12345, 2**63, [1, 2, 3], np.int64(4), np.random.default_rng(0), np.random.RandomState(0)],
    ids=["None", "0", "12345", "2**63", "list", "np.int64", "Generator", "RandomState"],
)
def test_check_mcmc_seed_accepts_none_ints_and_generators(seed):
    state = seed.bit_generator.state if isinstance(seed, np.random.Generator) else None
    assert check_mcmc_seed(seed) is None
    if state is not None:  # nothing drawn from the generator
        assert seed.bit_generator.state == state
