"""A privacy-utility sweep: releases at several epsilons, each one charged to the ledger.

It spends budget on the data, so it lives apart from the plots, which only draw what it
returns (:func:`pymc_dp.plots.plot_privacy_utility`). Run it on public or synthetic data.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Sequence

import numpy as np

__all__ = ["PrivacyUtilityResult", "privacy_utility_sweep"]


@dataclass(frozen=True)
class PrivacyUtilityResult:
    """The numbers behind :func:`plot_privacy_utility`.

    Attributes
    ----------
    epsilons : numpy.ndarray
        The requested epsilons, in the order given.
    certified : numpy.ndarray
        Each private model's certified epsilon (what each of its releases spends).
    deltas : numpy.ndarray
        Each private model's delta.
    utilities : numpy.ndarray
        ``utility(idata)`` of each release, shape ``(len(epsilons), repeats)``.
    total_epsilon, total_delta : float
        What the sweep spent on the data: ``repeats * sum(certified)`` and
        ``repeats * sum(deltas)`` (releases compose at least basically: the sweep as a whole
        is ``(total_epsilon, total_delta)``-DP).
    releases : int
        Number of releases made.
    """

    epsilons: np.ndarray
    certified: np.ndarray
    deltas: np.ndarray
    utilities: np.ndarray
    total_epsilon: float
    total_delta: float
    releases: int
    mean: np.ndarray = field(init=False)
    std: np.ndarray = field(init=False)

    def __post_init__(self):
        object.__setattr__(self, "mean", self.utilities.mean(axis=1))
        object.__setattr__(self, "std", self.utilities.std(axis=1, ddof=1) if self.utilities.shape[1] > 1 else np.zeros(len(self.utilities)))


def privacy_utility_sweep(
    build_private,
    epsilons: Sequence[float],
    utility: Callable[[Any], float],
    *,
    repeats: int = 1,
    private_kwargs: Mapping[str, Any] | None = None,
    sample_kwargs: Mapping[str, Any] | None = None,
    random_seed: int | None = None,
) -> PrivacyUtilityResult:
    """Release at each epsilon and measure a utility of the released draws: **every release
    spends budget** (see :func:`pymc_dp.plots.plot_privacy_utility`, which draws the result, for
    the warning and the parameters). Returns a :class:`PrivacyUtilityResult`."""
    import pymc as pm

    from pymc_dp.core import PrivateModel, make_private

    eps = np.asarray([float(e) for e in epsilons], dtype=float)
    if eps.size == 0 or not np.all(np.isfinite(eps)) or np.any(eps <= 0):
        raise ValueError(f"epsilons={epsilons!r} must be a non-empty sequence of finite numbers > 0.")
    if isinstance(repeats, bool) or int(repeats) != repeats or repeats < 1:
        raise ValueError(f"repeats={repeats!r} must be an integer >= 1.")
    repeats = int(repeats)
    private_kwargs = dict(private_kwargs or {})
    sample_kwargs = dict(sample_kwargs or {})
    if "random_seed" in sample_kwargs:
        raise TypeError("pass random_seed= to plot_privacy_utility, not in sample_kwargs: each release needs its own seed.")
    if "epsilon" in private_kwargs:
        raise TypeError("private_kwargs must not contain epsilon: it is swept.")

    if isinstance(build_private, pm.Model):
        model = build_private

        def build(e):
            return make_private(model, epsilon=e, **private_kwargs)

    elif callable(build_private):

        def build(e):
            return build_private(e, **private_kwargs)

    else:
        raise TypeError(f"build_private must be a callable epsilon -> PrivateModel or a pm.Model, got {type(build_private).__name__}.")

    # every private model first (certifying spends nothing), so the planned total is known and
    # stated before the first release
    pmods = []
    for e in eps:
        pmod = build(float(e))
        if not isinstance(pmod, PrivateModel):
            raise TypeError(f"build_private({e!r}) returned {type(pmod).__name__}, not a PrivateModel.")
        pmods.append(pmod)
    certified = np.array([p.certificate.epsilon for p in pmods])
    deltas = np.array([p.certificate.delta for p in pmods])
    total_eps = float(repeats * math.fsum(certified))
    total_delta = float(repeats * math.fsum(deltas))
    warnings.warn(
        f"plot_privacy_utility makes {len(pmods) * repeats} releases on the private model's data and "
        f"spends epsilon = {total_eps:.6g}, delta = {total_delta:.3g} in total (the sum over the sweep). "
        "Run it on public or synthetic data, and never let the utility read the private data.",
        UserWarning,
        stacklevel=3,
    )
    seeds = (
        [None] * (len(pmods) * repeats)
        if random_seed is None
        else [int(s.generate_state(1)[0]) for s in np.random.SeedSequence(random_seed).spawn(len(pmods) * repeats)]
    )
    utilities = np.empty((len(pmods), repeats))
    for i, pmod in enumerate(pmods):
        for r in range(repeats):
            idata = pmod.sample(random_seed=seeds[i * repeats + r], **sample_kwargs)
            u = float(utility(idata))
            if not math.isfinite(u):
                raise ValueError(f"utility returned {u!r} at epsilon={eps[i]!r}: it must be a finite number.")
            utilities[i, r] = u
    return PrivacyUtilityResult(
        epsilons=eps,
        certified=certified,
        deltas=deltas,
        utilities=utilities,
        total_epsilon=total_eps,
        total_delta=total_delta,
        releases=len(pmods) * repeats,
    )
