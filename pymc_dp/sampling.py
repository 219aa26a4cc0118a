"""MCMC on the rewritten (truncated) model through :func:`pymc.sample`.

Only the ``posterior`` group of what ``pm.sample`` returns is read; everything else it returns
(sample stats, observed and constant data, warm-up, timings) is dropped here and never reaches a
release (DESIGN.md section 7).
"""

from __future__ import annotations

from typing import Any, Mapping

import pymc as pm
import xarray as xr

__all__ = ["run_mcmc"]


def run_mcmc(
    model: pm.Model,
    *,
    draws_per_chain: int,
    chains: int,
    tune: int,
    initvals: Mapping[str, Any],
    **kwargs: Any,
) -> xr.Dataset:
    """Sample ``model`` with ``pm.sample`` and return its posterior group only.

    Parameters
    ----------
    model : pm.Model
        The rewritten model (its prior is restricted to Theta_L).
    draws_per_chain : int
        Draws kept per chain, before any thinning by the caller.
    chains, tune : int
        As in :func:`pymc.sample`.
    initvals : mapping
        Starting values inside Theta_L.
    **kwargs
        Passed to :func:`pymc.sample` (``nuts_sampler``, ``cores``, ``random_seed``, ...).
    """
    kwargs.setdefault("compute_convergence_checks", False)
    kwargs.setdefault("progressbar", False)
    idata = pm.sample(
        draws=draws_per_chain,
        tune=tune,
        chains=chains,
        model=model,
        initvals=dict(initvals),
        return_inferencedata=True,
        **kwargs,
    )
    return idata.posterior
