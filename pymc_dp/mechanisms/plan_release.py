"""The release of exact draws from a conjugate plan, shared by the mechanisms whose draw function
is ``plan.sample`` (stochastic-Lipschitz and metric-DP posteriors): one place that checks the
draws and chains, seeds the exact sampler, lays the draws out and hands them to the one release
driver (:func:`pymc_dp.release.release`)."""

from __future__ import annotations

from typing import Any, Callable, Mapping

import numpy as np

from pymc_dp.mechanisms.updates import check_chains
from pymc_dp.release import check_budgeted_draws, draws_dataset
from pymc_dp.release import release as release_draws
from pymc_dp.seeds import exact_rng
from pymc_dp.units import describe_unit
from pymc_dp.version import software_versions

__all__ = ["release_plan_draws"]


def release_plan_draws(mech, draws: int | None, random_seed: Any, chains: int | None, *, delta: float,
                       note: Mapping[str, Any], public: Callable[[], dict]):
    """Charge ``(mech.epsilon, delta)`` and release ``mech.draws`` exact draws of ``mech.var``
    from ``mech.plan``, recorded with ``public()`` (the mechanism's public record).

    ``note`` adds to the ledger's description of the charge (the mechanism's name, the draws,
    the unit and the version are always there)."""
    check_budgeted_draws(draws, mech.draws)
    rng = exact_rng(random_seed)
    chains = check_chains(mech.draws, chains)
    _ = mech.ledger  # open the default ledger before anything is drawn
    described = {"mechanism": mech.name, "draws": mech.draws, "unit": describe_unit(mech.unit), **note,
                 "pymc_dp": software_versions()["pymc_dp"]}

    def draw():
        values = mech.plan.sample(mech.draws, rng)
        return {"posterior": draws_dataset(mech.model, {mech.var: np.asarray(values[mech.var])}, chains)}

    def record(ledger_now):
        return {**public(), "release": {"chains": chains, "draws_per_chain": mech.draws // chains,
                                                    "method": "exact", "ledger": ledger_now}}

    return release_draws(mech, draw, epsilon=mech.epsilon, delta=delta, note=described, record=record)
