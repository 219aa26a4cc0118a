"""The release driver: reserve on the ledger, draw, lay out, write the release record.

Every release of every mechanism goes through :func:`release` (or, for a mechanism whose
privacy cost was charged once when its statistics were released and whose draws are
post-processing, through :func:`publish` alone):

1. :func:`reservation` reserves ``(epsilon, delta)`` on the mechanism's ledger under its
   dataset's fingerprint *before* the private data are read; a request that does not fit raises
   :class:`~pymc_dp.BudgetExceededError` and nothing runs. A release that fails after it started
   stays charged (:meth:`pymc_dp.Ledger.spend` says why).
2. the mechanism's draw function runs and returns the groups to release (``posterior``, and
   ``sample_stats`` where they are public);
3. :func:`publish` builds the ``az.InferenceData`` from those groups only, writes the typed,
   versioned release record (:func:`pymc_dp.record.attach`) and keeps it as the mechanism's
   ``last_release``.

The driver knows no mechanism: what is drawn and what the record says are the caller's.
"""

from __future__ import annotations

import contextlib
from typing import Any, Callable, ContextManager, Mapping

import arviz as az
import numpy as np
import pymc as pm
import xarray as xr

from pymc_dp.exceptions import PrivacyError
from pymc_dp.ledger import Ledger
from pymc_dp.record import attach

__all__ = ["check_budgeted_draws", "check_ledger", "draws_dataset", "ledger_state", "path_choice", "publish", "release", "reservation"]


def check_ledger(ledger):
    """The ``ledger=`` argument of a mechanism, checked: ``"default"`` (a ledger in the user's
    data directory, opened at the first release), a :class:`~pymc_dp.ledger.Ledger`, or ``None``
    (no ledger: nothing is recorded). Anything else raises :class:`~pymc_dp.PrivacyError`."""
    if ledger is None or isinstance(ledger, Ledger) or (isinstance(ledger, str) and ledger == "default"):
        return ledger
    raise PrivacyError(
        f"ledger={ledger!r} is not a budget ledger; pass pymc_dp.Ledger(path, epsilon=..., delta=...), "
        "'default' (the default ledger in your data directory) or None (record nothing)."
    )


def check_budgeted_draws(draws, budgeted: int) -> int:
    """The ``draws=`` of ``sample()`` for a mechanism whose number of draws is part of its budget
    (posterior sampling, private MAP, noise on posterior updates): ``None`` or that number.

    Every mechanism's ``sample`` takes ``draws`` first; where each draw costs budget, the number
    is fixed when the mechanism is built (it is in the certificate), so another one is refused
    with a :class:`TypeError` that says where to set it."""
    if draws is None or (not isinstance(draws, bool) and draws == budgeted):
        return int(budgeted)
    raise TypeError(
        f"sample(draws={draws!r}): 'draws' is part of the privacy budget and this release's certificate is for "
        f"{budgeted} draws; set it when you build the release (private(..., draws=...), make_private(..., draws=...))."
    )


def draws_dataset(model: pm.Model, values: Mapping[str, np.ndarray], chains: int) -> xr.Dataset:
    """Draws (name -> array with the draws on the first axis) laid out as ``(chain, draw, ...)``
    with the dims and coords PyMC gives the same variables: the model's, else ``<name>_dim_<i>``."""
    draws = len(next(iter(values.values())))
    per_chain = draws // chains
    data_vars, coords = {}, {"chain": np.arange(chains), "draw": np.arange(per_chain)}
    for name, v in values.items():
        dims = tuple(model.named_vars_to_dims.get(name, ())) or tuple(f"{name}_dim_{i}" for i in range(v.ndim - 1))
        data_vars[name] = (("chain", "draw", *dims), v.reshape((chains, per_chain) + v.shape[1:]))
        for i, dim in enumerate(dims):
            labels = model.coords.get(dim)
            coords[dim] = np.asarray(labels) if labels is not None else np.arange(v.shape[1 + i])
    return xr.Dataset(data_vars, coords=coords)


def ledger_state(ledger, dataset_id: str) -> dict | None:
    """What a release says of the ledger after it was charged (pending counts), or None."""
    if ledger is None:
        return None
    spend = ledger.spent(dataset_id)
    return {
        "spent_epsilon": spend.epsilon,
        "spent_delta": spend.delta,
        "releases": spend.releases + spend.pending + spend.failed,
        "total_epsilon": ledger.epsilon,
        "total_delta": ledger.delta,
    }


def reservation(source, epsilon: float, delta: float, note: Mapping[str, Any]) -> ContextManager:
    """The ledger charge of one release of ``source`` (its ``ledger`` and ``dataset_id``): a
    context that reserves before its body runs and commits after; a failed body stays counted.
    A source without a ledger charges nothing."""
    ledger = source.ledger
    if ledger is None:
        return contextlib.nullcontext()
    choice = path_choice(source)
    note = dict(note) if choice is None else {**note, "path": choice["chosen"]}
    return ledger.spend(source.dataset_id, epsilon, delta, description=note)


def path_choice(source) -> dict | None:
    """How ``make_private(..., path="auto")`` chose ``source``'s path (its ``path_choice``, public),
    as JSON; None when the user named the path."""
    choice = getattr(source, "path_choice", None)
    return None if choice is None else choice.to_dict()


def publish(source, groups: Mapping[str, xr.Dataset], record: Mapping[str, Any], *, allow_nan: bool = False) -> az.InferenceData:
    """The ``az.InferenceData`` of ``groups`` with ``record`` attached; kept as
    ``source.last_release``."""
    idata = az.InferenceData(**dict(groups))
    choice = path_choice(source)
    if choice is not None:  # the chosen path and why: public facts, in the release section
        record = {**record, "release": {**record.get("release", {}), "path": choice}}
    attach(idata, record, allow_nan=allow_nan)
    source.last_release = idata
    return idata


def release(
    source,
    draw: Callable[[], Mapping[str, xr.Dataset]],
    *,
    epsilon: float,
    delta: float,
    note: Mapping[str, Any],
    record: Callable[[dict | None], Mapping[str, Any]],
    allow_nan: bool = False,
) -> az.InferenceData:
    """One charged release of ``source``.

    Parameters
    ----------
    source
        The mechanism: ``ledger``, ``dataset_id`` and a settable ``last_release``.
    draw : callable
        Runs the mechanism on the private data; returns the groups to release.
    epsilon, delta : float
        What the release costs.
    note : mapping
        Public facts for the ledger's row.
    record : callable
        The release record, given the ledger's state after the charge (None without a ledger).
    allow_nan : bool
        Whether the record may hold NaN (a certificate's undefined fields).
    """
    with reservation(source, epsilon, delta, note):
        groups = draw()
        return publish(source, groups, record(ledger_state(source.ledger, source.dataset_id)), allow_nan=allow_nan)
