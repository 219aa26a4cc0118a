"""Private preprocessing: centring and scaling of private columns by DP estimates, charged to the
same ledger as the release that uses them.

A PyMC user standardises covariates by hand (``(x - x.mean()) / x.std()``) before building a
model, so that weakly informative priors mean something. On private data the mean and the
standard deviation are themselves statistics of the data; computing them exactly leaks.
:func:`standardize` estimates them with OpenDP's Laplace noise, from sensitivities that follow
from the declared domains, and returns

* the standardised values (private: they go into the model's ``pm.Data`` containers),
* the standardised *domains* (public: the declared bounds mapped by the released centre and
  scale), each carrying a record of what was estimated and with what epsilon,
* the released centres and scales (public), to map coefficients back to the original units.

When ``make_private`` or ``noisy_statistics`` is given those domains, it checks that the model's
containers hold the standardised values, charges its release to the ledger under the *original*
dataset's name (so the preprocessing and the release draw on one budget), and the certificate
and the report state what was estimated and with what epsilon.

Privacy (derivation: ``docs/theory/preprocessing.md``)
------------------------------------------------------
For a column with domain ``[lo, hi]`` (width ``w``, midpoint ``c``) and ``u = (x - c) / (w/2)``
in ``[-1, 1]``, the released statistics are ``S1 = sum u / 2`` and, when scaling,
``S2 = sum u**2``. One record changes ``u`` to ``v``: ``|dS1| + |dS2| = |u - v| (1/2 + |u + v|)``,
whose supremum over ``[-1, 1]^2`` is ``1.5625`` (at ``u = 1, v = -1/4``); without scaling it is
``1``. A record changes every standardised column of every container, so the L1 sensitivity of
the whole vector is the sum over columns (times the rows one unit can change). Laplace noise of
scale ``K / epsilon`` on the vector is epsilon-DP (OpenDP's map is checked). The estimates are
post-processing, the standardisation ``(x - m) / s`` is a per-record map once ``m, s`` are
public, and the release that reads the standardised data composes with this one sequentially
(adaptive composition: its guarantee holds for every value of ``m, s``).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from pymc_dp.domains import Box, Domain, Interval
from pymc_dp.exceptions import DomainError, PrivacyError
from pymc_dp.lift import rows_per_unit
from pymc_dp.units import as_unit, check_unit, describe_unit

__all__ = ["Standardization", "standardize", "dataset_id", "COLUMN_SENSITIVITY"]

#: sup over u, v in [-1, 1] of |u - v| / 2 + |u^2 - v^2|: one column's L1 sensitivity (centre and scale)
COLUMN_SENSITIVITY = 1.5625
#: the least released scale, as a fraction of the domain's half-width (a noisy variance can be <= 0)
MIN_SCALE_FRACTION = 1e-2
#: a column's noisy variance (of ``u`` in [-1, 1]) within this many noise standard deviations of 0
#: is noise: the column is scaled by its declared half-width (public) instead of the estimate
NOISE_SDS = 2.0


@dataclasses.dataclass(frozen=True)
class Standardization:
    """One release of private centres and scales (public), and the standardised data (private).

    Attributes
    ----------
    values : dict of str to ndarray
        Every container passed in, the standardised ones as ``(x - center) / scale``. These are
        **private data**: put them in the model's ``pm.Data`` containers, never release them.
    data : dict of str to Domain
        The domains to declare in ``make_private`` / ``noisy_statistics``: the declared ones,
        mapped by the released centre and scale where standardised. Public.
    center, scale : dict of str to ndarray
        The released estimates per standardised container (one entry per column). Public.
    epsilon : float
        What this release cost (charged to the ledger when one was given).
    sensitivity : float
        The L1 sensitivity ``K`` of the released vector of normalised statistics.
    unit : str or Users
        The privacy unit.
    unscaled : dict of str to tuple of int
        Per container, the columns whose noisy variance was not told from noise (within
        ``NOISE_SDS`` noise standard deviations of 0): scaled by half their declared range (a
        public scale) instead of the estimate. Public.
    released : dict of str to dict
        Per standardised container, what was released before post-processing (public): the
        noisy ``sum u / 2`` and (when scaling) ``sum u**2`` per column, ``u = (x - mid) / half``,
        with ``mid`` and ``half`` the declared midpoint and half-width. A noise-aware model
        reads them as further noisy observations of the same data (``NoisyRegression`` does for
        the outcome's and the covariates' centres and spreads), instead of only shifting by the
        estimates.
    noise_scale : float
        The Laplace scale of every entry of ``released`` (``sensitivity / epsilon``).
    rows : int
        The number of records the statistics sum over.
    """

    values: dict
    data: dict
    center: dict
    scale: dict
    epsilon: float
    sensitivity: float
    unit: Any
    # the ledger's names of the original and of the standardised dataset: never released
    _source_id: str = dataclasses.field(repr=False)
    _standardized_id: str = dataclasses.field(repr=False)
    unscaled: dict = dataclasses.field(default_factory=dict)
    released: dict = dataclasses.field(default_factory=dict)
    noise_scale: float = math.nan
    rows: int = 0

    def __repr__(self) -> str:  # never print the private values
        cols = ", ".join(self.center)
        return f"Standardization(columns=[{cols}], epsilon={self.epsilon:g}, unit={describe_unit(self.unit)['kind']!r})"

    def public(self) -> dict[str, Any]:
        """What this release made public: estimates, epsilon, sensitivity, mechanism."""
        return {
            "mechanism": "standardize (Laplace, OpenDP)",
            "epsilon": self.epsilon,
            "sensitivity": self.sensitivity,
            "unit": describe_unit(self.unit)["kind"],
            "center": {k: np.asarray(v).tolist() for k, v in self.center.items()},
            "scale": {k: np.asarray(v).tolist() for k, v in self.scale.items()},
            "unscaled": {k: list(v) for k, v in self.unscaled.items()},
            "released": {k: {f: np.asarray(a).tolist() for f, a in v.items()} for k, v in self.released.items()},
            "noise_scale": self.noise_scale,
            "rows": self.rows,
        }


@dataclasses.dataclass(frozen=True)
class Estimated:
    """What a standardised domain records of its origin (attached to the domain; public parts only
    appear in ``Domain.to_dict``)."""

    release: Standardization = dataclasses.field(repr=False)
    center: tuple
    scale: tuple

    def to_dict(self) -> dict[str, Any]:
        return {"center": list(self.center), "scale": list(self.scale), "epsilon": self.release.epsilon,
                "mechanism": "standardize (Laplace, OpenDP)"}


def _columns(name: str, values: np.ndarray, domain: Domain) -> tuple[np.ndarray, np.ndarray]:
    """Per-column lower and upper bounds of a container that can be standardised."""
    if isinstance(domain, Interval):
        if values.ndim != 1:
            raise DomainError(
                f"standardize: {name!r} has shape {values.shape} with an elementwise Interval domain; "
                "declare a Box(lo, hi) (one row per record) to standardise a matrix column by column."
            )
        return np.array([domain.lo]), np.array([domain.hi])
    if isinstance(domain, Box):
        if values.ndim != 2:
            raise DomainError(f"standardize: {name!r} has shape {values.shape}; a Box domain needs a 2-d matrix (records x features).")
        k = values.shape[1]
        return np.broadcast_to(domain.lo, (k,)).astype(float), np.broadcast_to(domain.hi, (k,)).astype(float)
    raise DomainError(
        f"standardize: {name!r} has domain {domain}; only continuous Interval and Box domains can be "
        "centred and scaled (a Ball would become an ellipsoid; counts and labels are not standardised)."
    )


def _as_pm_data(value) -> np.ndarray:
    """``value`` with the dtype ``pm.Data`` gives it (PyMC's ``convert_data``), so that the ledger's
    fingerprint of these arrays equals that of the model's containers holding them."""
    from pymc.pytensorf import convert_data

    return np.asarray(convert_data(np.asarray(value)))


def normalized_statistics(values: Mapping[str, np.ndarray], bounds: Mapping[str, tuple], scale: bool) -> np.ndarray:
    """The released vector before noise: per container, per column, ``sum u / 2`` and (when
    scaling) ``sum u**2``, with ``u = (x - mid) / half_width`` in ``[-1, 1]``.

    One record moves each column's pair by at most ``COLUMN_SENSITIVITY`` in L1 (1 without
    scaling): see the module docstring."""
    out = []
    for name, arr in values.items():
        lo, hi = bounds[name]
        arr = np.asarray(arr, float)
        u = (arr.reshape(arr.shape[0], -1) - 0.5 * (lo + hi)) / (0.5 * (hi - lo))
        out.append(u.sum(axis=0) / 2.0)
        if scale:
            out.append((u**2).sum(axis=0))
    return np.concatenate(out)


def standardize(
    values: Mapping[str, Any],
    data: Mapping[str, Domain],
    *,
    epsilon: float,
    columns: Sequence[str] | None = None,
    scale: bool = True,
    unit: Any = "record",
    ledger: Any = "default",
) -> Standardization:
    """Centre (and scale) private columns by differentially private estimates.

    Parameters
    ----------
    values : mapping of str to array_like
        **Every** private container of the dataset (the ledger keeps one budget per dataset), by
        the name of its ``pm.Data`` container. Records on the first axis.
    data : mapping of str to Domain
        The declared domain of every container in ``values``.
    epsilon : float
        The budget of this release (> 0). It is charged to ``ledger`` now, and the certificate of
        the release that uses the result states it.
    columns : sequence of str, optional
        The containers to standardise (default: every one with an Interval or Box domain).
    scale : bool, default True
        Also divide by a private standard deviation; ``False`` centres only (half the noise).
    unit : {"record", "attribute"} or Users
        The privacy unit; the release that uses the result must declare the same.
    ledger : Ledger, "default" or None
        Where this release is charged; ``None`` charges nothing (synthetic data only).

    Returns
    -------
    Standardization

    Raises
    ------
    DomainError
        A container has no domain, lies outside it, or cannot be standardised.
    BudgetExceededError
        The ledger refuses the charge; nothing is released.

    Examples
    --------
    >>> std = pymc_dp.standardize({"x": x, "y": y}, data={"x": pymc_dp.Interval(0, 10),
    ...                           "y": pymc_dp.Interval(-5, 5)}, epsilon=0.2)  # doctest: +SKIP
    >>> with pm.Model() as model:                                              # doctest: +SKIP
    ...     xd, yd = pm.Data("x", std.values["x"]), pm.Data("y", std.values["y"])
    ...     ...
    >>> private = pymc_dp.make_private(model, epsilon=1.0, data=std.data)      # doctest: +SKIP
    """
    from pymc_dp.fingerprint import fingerprint
    from pymc_dp.mechanisms.noise import continuous_laplace
    from pymc_dp.release import check_ledger

    if not (isinstance(epsilon, (int, float, np.floating)) and math.isfinite(epsilon) and epsilon > 0):
        raise PrivacyError(f"standardize: epsilon={epsilon!r} must be a finite number > 0.")
    check_unit(unit)
    if not isinstance(values, Mapping) or not isinstance(data, Mapping):
        raise DomainError("standardize: values and data must map container names to arrays and to domains.")
    missing = sorted(set(values) - set(data))
    if missing:
        raise DomainError(f"standardize: no domain is declared for {missing}; declare one in data= for every container.")
    extra = sorted(set(data) - set(values))
    if extra:
        raise DomainError(f"standardize: domains are declared for {extra} but no values are given; pass every private container.")
    arrays = {}
    for name, dom in data.items():
        if not isinstance(dom, Domain):
            raise DomainError(f"standardize: the domain of {name!r} must be a pymc_dp domain, got {dom!r}.")
        if getattr(dom, "preprocessing", None) is not None:
            raise DomainError(f"standardize: {name!r} is already standardised; pass the original values and domains.")
        if getattr(dom, "unbounded", False):
            raise DomainError(f"standardize: the domain {dom} of {name!r} is unbounded; the sensitivity needs finite bounds.")
        # as pm.Data will hold it (integers become int32 there): the fingerprints must match the model's
        arr = _as_pm_data(values[name])
        dom.validate(name, arr)
        arrays[name] = arr
    chosen = [n for n in data if isinstance(data[n], (Interval, Box))] if columns is None else list(columns)
    if isinstance(columns, str):
        chosen = [columns]
    for name in chosen:
        if name not in data:
            raise DomainError(f"standardize: {name!r} is not one of the containers {sorted(data)}.")
    if not chosen:
        raise DomainError("standardize: no container with an Interval or Box domain to standardise.")
    n = {arrays[name].shape[0] for name in chosen}
    if len(n) != 1:
        raise DomainError(f"standardize: the containers {chosen} have different numbers of records {sorted(n)}.")
    (n,) = n

    bounds = {name: _columns(name, arrays[name], data[name]) for name in chosen}
    stats = normalized_statistics({name: arrays[name] for name in chosen}, bounds, scale)
    per_column = COLUMN_SENSITIVITY if scale else 1.0
    if unit == "attribute":  # one entry of one column changes
        sensitivity = per_column
    else:  # a record changes its row of every standardised column; a user, up to m records
        sensitivity = per_column * sum(bounds[name][0].size for name in chosen) * rows_per_unit(unit)

    source_id = fingerprint(arrays, {k: d.to_dict() for k, d in data.items()}, describe_unit(unit))
    ledger = check_ledger(ledger)
    if ledger == "default":
        from pymc_dp.ledger import Ledger

        ledger = Ledger()
    note = {"mechanism": "standardize", "columns": chosen, "scale": bool(scale), "unit": describe_unit(unit)}
    import contextlib

    charge = contextlib.nullcontext() if ledger is None else ledger.spend(source_id, float(epsilon), 0.0, description=note)
    with charge:
        noisy = continuous_laplace(stats, sensitivity / epsilon, sensitivity=sensitivity, epsilon=epsilon)

    center, spread, new_values, new_data, unscaled, released = {}, {}, dict(arrays), dict(data), {}, {}
    at = 0
    for name in chosen:
        lo, hi = bounds[name]
        k, mid, half = lo.size, 0.5 * (lo + hi), 0.5 * (hi - lo)
        released[name] = {"sum_u_half": noisy[at:at + k].copy(), "mid": mid.copy(), "half": half.copy()}
        mean_u = np.clip(2.0 * noisy[at:at + k] / n, -1.0, 1.0)
        at += k
        m = mid + half * mean_u
        if scale:
            released[name]["sum_u2"] = noisy[at:at + k].copy()
            var_u = noisy[at:at + k] / n - mean_u**2
            at += k
            s = half * np.sqrt(np.clip(var_u, MIN_SCALE_FRACTION**2, 1.0))
            # public rule: sum u^2 carries Laplace noise of scale b = K / epsilon, so var_u has
            # noise sd sqrt(2) b / n; a variance within NOISE_SDS of them is not told from 0
            noise = np.sqrt(2.0) * (sensitivity / epsilon) / n
            as_noise = var_u <= NOISE_SDS * noise
            s = np.where(as_noise, half, s)
            unscaled[name] = tuple(int(j) for j in np.nonzero(as_noise)[0])
        else:
            s = np.ones(k)
        center[name], spread[name] = m, s
        x = arrays[name].astype(float)  # float64, which pm.Data keeps (floatX)
        if isinstance(data[name], Interval):
            new_values[name] = _as_pm_data((x - m[0]) / s[0])
            # the same float operations as the values: x <= hi implies the image <= the image of hi
            new_data[name] = ((lo[0] - m[0]) / s[0], (hi[0] - m[0]) / s[0])
        else:
            new_values[name] = _as_pm_data((x - m) / s)
            new_data[name] = ((lo - m) / s, (hi - m) / s)
    unscaled = {name: cols for name, cols in unscaled.items() if cols}
    if unscaled:
        import warnings

        warnings.warn(
            "standardize: the noisy variance of "
            + "; ".join(f"{name!r} column(s) {list(cols)}" for name, cols in unscaled.items())
            + f" is within {NOISE_SDS:g} noise standard deviations of 0 at epsilon = {epsilon:g} over {n} rows "
            "(not told from noise), so those columns are scaled by half their declared range (public) instead; "
            "Standardization.unscaled lists them. Spend more epsilon on standardize, or standardize fewer columns.",
            UserWarning, stacklevel=2,
        )
    release_fields = dict(values=new_values, center=center, scale=spread, epsilon=float(epsilon),
                          sensitivity=float(sensitivity), unit=as_unit(unit), _source_id=source_id,
                          unscaled=unscaled, released=released, noise_scale=float(sensitivity / epsilon), rows=int(n))
    # the domains need the release (for the ledger) and the release needs the domains' fingerprint
    draft = Standardization(data={}, _standardized_id="", **release_fields)
    domains = dict(data)
    for name in chosen:
        lo_new, hi_new = new_data[name]
        est = Estimated(draft, tuple(np.asarray(center[name]).tolist()), tuple(np.asarray(spread[name]).tolist()))
        domains[name] = (Interval(lo_new, hi_new, preprocessing=est) if isinstance(data[name], Interval)
                         else Box(lo_new, hi_new, preprocessing=est))
    standardized_id = fingerprint(new_values, {k: d.to_dict() for k, d in domains.items()}, describe_unit(unit))
    object.__setattr__(draft, "data", domains)
    object.__setattr__(draft, "_standardized_id", standardized_id)
    return draft


def dataset_id(values: Mapping[str, Any], domains: Mapping[str, Domain], unit: Any) -> str:
    """The ledger's name of the dataset a release reads.

    The fingerprint of ``values`` (``pymc_dp.ledger.fingerprint``), except where the domains come
    from :func:`standardize`: then the containers must hold exactly the standardised values, and
    the name is the *original* dataset's, so that the preprocessing and the release are charged
    to one budget. Never released.

    Raises
    ------
    DomainError
        The domains come from two preprocessing releases, or the containers do not hold the values
        the preprocessing returned, or the unit differs from the preprocessing's.
    """
    from pymc_dp.fingerprint import fingerprint

    plain = fingerprint(values, {k: d.to_dict() for k, d in domains.items()}, describe_unit(unit))
    releases = {id(d.preprocessing.release): d.preprocessing.release for d in domains.values()
                if getattr(d, "preprocessing", None) is not None}
    if not releases:
        return plain
    if len(releases) > 1:
        raise DomainError("the domains come from two pymc_dp.standardize releases; standardise every column in one call.")
    (release,) = releases.values()
    if describe_unit(unit) != describe_unit(release.unit):
        raise DomainError(
            f"the data were standardised with unit={describe_unit(release.unit)['kind']!r} but this release declares "
            f"unit={describe_unit(unit)['kind']!r}; use the same privacy unit for both."
        )
    if plain != release._standardized_id:
        raise DomainError(
            "the private containers do not hold the values pymc_dp.standardize returned for these domains "
            f"(containers {sorted(values)}; standardised {sorted(release.values)}): put std.values[name] in "
            "pm.Data(name, ...) for every container passed to standardize, unchanged, and declare std.data."
        )
    return release._source_id


def preprocessing_of(domains: Mapping[str, Domain]) -> dict[str, Any] | None:
    """The public record of the preprocessing behind ``domains`` (None when there is none)."""
    for d in domains.values():
        est = getattr(d, "preprocessing", None)
        if est is not None:
            return est.release.public()
    return None
