"""Random seeds: the generator of the exact samplers, and the check of a seed for ``pm.sample``.

A leaf module: every mechanism that draws reads its seed through it, before the ledger is charged.
"""

from __future__ import annotations

import numpy as np

__all__ = ["check_mcmc_seed", "exact_rng"]


def _bad_seed(random_seed, err: Exception) -> Exception:
    return type(err)(
        f"random_seed={random_seed!r} is not a seed ({err}); give an integer >= 0, a sequence of "
        "them, or a numpy Generator."
    )


def exact_rng(random_seed) -> np.random.Generator:
    """The exact samplers' generator for ``random_seed`` (a Generator is used as it is)."""
    if isinstance(random_seed, np.random.Generator):
        return random_seed
    try:
        return np.random.default_rng(random_seed)
    except (TypeError, ValueError) as err:
        raise _bad_seed(random_seed, err) from None


def check_mcmc_seed(random_seed) -> None:
    """Refuse what pm.sample would refuse as a seed, without drawing from a generator."""
    if random_seed is None or isinstance(random_seed, (np.random.Generator, np.random.RandomState)):
        return
    try:
        np.random.SeedSequence(random_seed)
    except (TypeError, ValueError) as err:
        raise _bad_seed(random_seed, err) from None
