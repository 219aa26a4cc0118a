"""Whole-model refusals: private data read where no factor rule can bound it.

Before the likelihood factors are read (:func:`pymc_dp.factors.find_factors`), the model's graph
is checked as a whole: a prior, a ``pm.Potential`` or a factor's parameter that reads private
data other than through a supported factor is refused, with a message that names the variable
(:func:`check_graph`). :func:`observed_private` lists the observed RVs whose observed value is
private data, which PyMC substitutes wherever such an RV appears inside another variable. This
module sits just above :mod:`pymc_dp.factors` (it imports ``private_ancestors`` from there and
the package's exceptions); nothing in the factor analysis imports it.
"""

from __future__ import annotations

from pytensor.graph.traversal import ancestors

from pymc_dp.exceptions import UnsupportedFactorError
from pymc_dp.factors import private_ancestors

__all__ = ["check_graph", "observed_private"]


def observed_private(model, private_vars) -> dict:
    """Observed RVs whose observed value reads private data, with the containers it reads.

    Wherever such an RV appears inside another variable, PyMC evaluates it as its observed
    value -- the private data -- but its graph does not show that dependence (with an
    explicit ``shape=``, not even through its size), so ancestor checks must look for it.
    """
    out = {}
    for rv in model.observed_RVs:
        found = private_ancestors(model.rvs_to_values[rv], private_vars)
        if found:
            out[rv] = found
    return out


def check_graph(model, private_vars) -> None:
    """Refuse what no factor rule can bound: a prior, a Potential or a factor's parameter that
    reads private data other than through a supported factor (the message names the variable)."""
    private = private_vars
    observed = observed_private(model, private_vars)

    def through_observed(var, what):
        names = sorted(o.name for o in ancestors([var]) if o in observed and o is not var)
        if names:
            data = sorted({c for o in ancestors([var]) if o in observed and o is not var for c in observed[o]})
            raise UnsupportedFactorError(
                f"{what} reads the observed RV(s) {names}, which PyMC evaluates as their "
                f"observed values: the private data {data}. pymc_dp cannot see or bound that "
                "dependence; use the pm.Data container itself where a supported form allows "
                "it (e.g. theta[yd], not theta[y]), or remove the dependence."
            )

    for rv in model.free_RVs:
        found = private_ancestors(rv, private)
        if found:
            raise UnsupportedFactorError(
                f"free RV {rv.name!r} has a prior that reads the private data {found}: every record "
                "then moves the prior itself (a Gaussian-process latent whose covariance is computed "
                "from all rows of X is the common case), so no per-record constant bounds what one "
                "record changes, and pymc_dp cannot certify it. A prior must read only parameters and "
                "public data: compute the GP on public inputs (or a public grid), or model the private "
                "covariates through a likelihood factor."
            )
        through_observed(rv, f"free RV {rv.name!r}")
    for pot in model.potentials:
        found = private_ancestors(pot, private)
        if found:
            raise UnsupportedFactorError(
                f"Potential {pot.name!r} reads private data {found}; pymc_dp cannot bound an "
                "arbitrary potential. Write that term as an observed distribution."
            )
        through_observed(pot, f"Potential {pot.name!r}")
    for rv in model.observed_RVs:
        op = rv.owner.op
        params = op.dist_params(rv.owner) if hasattr(op, "dist_params") else rv.owner.inputs[2:]
        for param in params:
            through_observed(param, f"factor {rv.name!r}")
