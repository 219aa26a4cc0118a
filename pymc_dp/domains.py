"""Data domains: the public bounds that every record of a private container lies in.

A domain is public metadata. It is what turns "one record changes" into a bounded change of the
log-likelihood, so it must be declared by the data owner from knowledge of the data-collection
process, never computed from the data (that would leak).

Elementwise domains (:class:`Interval`, :class:`Binary`, :class:`Integers`) constrain every
entry of a container. Row domains (:class:`Ball`, :class:`Box`) constrain each row ``X[i]`` of a
matrix container (the last axis is the feature axis).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from pymc_dp.exceptions import DomainError

__all__ = ["Domain", "Interval", "Binary", "Integers", "Ball", "Box"]


def _finite_float(name: str, value: Any, what: str) -> float:
    try:
        out = float(value)
    except (TypeError, ValueError):
        raise DomainError(f"{what}: {name}={value!r} is not a number.") from None
    if not math.isfinite(out):
        raise DomainError(f"{what}: {name}={value!r} must be finite; pymc_dp needs bounded domains.")
    return out


def _extended_float(name: str, value: Any, what: str) -> float:
    """A number or an infinity (an unbounded end: see :attr:`Interval.unbounded`), never NaN."""
    try:
        out = float(value)
    except (TypeError, ValueError):
        raise DomainError(f"{what}: {name}={value!r} is not a number.") from None
    if math.isnan(out):
        raise DomainError(f"{what}: {name}={value!r} is NaN.")
    return out


def _with_preprocessing(domain, d: dict[str, Any]) -> dict[str, Any]:
    """``d`` and, for a standardised domain, the public record of the estimates behind it."""
    if getattr(domain, "preprocessing", None) is not None:
        d["standardized"] = domain.preprocessing.to_dict()
    return d


#: the metrics an :class:`Interval` may declare (None: none, replace-one DP)
METRICS = (None, "abs")


class Domain:
    """Base class of data domains."""

    #: number of trailing axes that one domain element spans (0: entries, 1: rows of a matrix)
    event_ndim: int = 0

    def validate(self, name: str, values: np.ndarray) -> None:
        """Raise :class:`DomainError` naming ``name`` unless every value lies in the domain."""
        values = np.asarray(values)
        if values.dtype.kind not in "biuf":
            raise DomainError(
                f"Private data {name!r} has dtype {values.dtype}; pymc_dp needs numeric data."
            )
        if values.dtype.kind == "f" and np.any(np.isinf(values)) and not np.any(np.isnan(values)):
            raise DomainError(
                f"Private data {name!r} holds infinite values. If they mark uncensored rows of a "
                "pm.Censored bound (PyMC's upper=np.inf), note that censoring bounds are supported as "
                f"public data only: declare {name!r} public (public=[...]) when the censoring times are "
                "not sensitive. Otherwise clean or impute them (with a public rule) before making the "
                "model private."
            )
        if values.dtype.kind == "f" and not np.all(np.isfinite(values)):
            raise DomainError(
                f"Private data {name!r} holds NaN or infinite values; clean or impute them "
                "(with a public rule) before making the model private."
            )
        if values.ndim < 1 + self.event_ndim:
            raise DomainError(
                f"Private data {name!r} has shape {values.shape}; {self} needs the records on "
                f"the first axis and at least {1 + self.event_ndim} dimension(s)."
            )
        try:
            bad = ~self._contains(values)
        except DomainError as err:  # e.g. a Box with another feature count: name the container
            raise DomainError(f"Private data {name!r} of shape {values.shape}: {err}") from None
        if np.any(bad):
            first = tuple(int(i) for i in np.argwhere(bad)[0])
            raise DomainError(
                f"Private data {name!r} has a value outside its declared domain {self} "
                f"(first at index {first}). Clip or filter the data with a public rule, or "
                "declare a domain that covers every possible record."
            )

    def _contains(self, values: np.ndarray) -> np.ndarray:
        raise NotImplementedError

    def to_dict(self) -> dict[str, Any]:
        raise NotImplementedError


@dataclass(frozen=True)
class Interval(Domain):
    """Every entry lies in the closed interval ``[lo, hi]``.

    ``metric="abs"`` declares the per-record metric ``|x - x'|`` for metric DP
    (:func:`pymc_dp.metric_posterior`, whose loss is ``epsilon * sum_i |x_i - x'_i|``); the
    releases with a replace-one guarantee refuse such a domain, so that a user who asked for
    metric DP does not get another guarantee silently.
    """

    lo: float
    hi: float
    #: set by :func:`pymc_dp.standardize`: the bounds are declared bounds mapped by released estimates
    preprocessing: Any = field(default=None, compare=False, repr=False)
    #: the per-record metric of metric DP: None (replace-one DP) or "abs" (``|x - x'|``)
    metric: str | None = None

    def __post_init__(self):
        if self.metric not in METRICS:
            raise DomainError(f"Interval metric={self.metric!r}: use one of {list(METRICS)} (None: replace-one DP; "
                              "'abs': metric DP under |x - x'|).")
        lo = _extended_float("lo", self.lo, "Interval")
        hi = _extended_float("hi", self.hi, "Interval")
        if not lo < hi:
            raise DomainError(f"Interval needs lo < hi, got lo={lo}, hi={hi}.")
        object.__setattr__(self, "lo", lo)
        object.__setattr__(self, "hi", hi)

    @property
    def unbounded(self) -> bool:
        """Whether an end is infinite: accepted only for a container read by contaminated factors
        alone (:func:`pymc_dp.contaminate`; ``docs/theory/contamination.md``)."""
        return not (math.isfinite(self.lo) and math.isfinite(self.hi))

    @property
    def center(self) -> float:
        return 0.5 * (self.lo + self.hi)

    @property
    def half_width(self) -> float:
        return 0.5 * (self.hi - self.lo)

    def _contains(self, values):
        return (values >= self.lo) & (values <= self.hi)

    def to_dict(self):
        # an infinite end as the string "inf" / "-inf": the dict is JSON (fingerprints, the ledger)
        ends = {k: (v if math.isfinite(v) else str(v)) for k, v in (("lo", self.lo), ("hi", self.hi))}
        metric = {} if self.metric is None else {"metric": self.metric}
        return _with_preprocessing(self, {"type": "Interval", **ends, **metric})

    def __str__(self):
        return f"Interval({self.lo:g}, {self.hi:g}{'' if self.metric is None else f', metric={self.metric!r}'})"


@dataclass(frozen=True)
class Integers(Domain):
    """Every entry is an integer in ``{lo, ..., hi}`` (counts, class labels)."""

    lo: int
    hi: int

    def __post_init__(self):
        for key in ("lo", "hi"):
            v = getattr(self, key)
            if isinstance(v, bool) or not float(_finite_float(key, v, "Integers")).is_integer():
                raise DomainError(f"Integers needs integer bounds, got {key}={v!r}.")
            object.__setattr__(self, key, int(v))
        if not self.lo <= self.hi:
            raise DomainError(f"Integers needs lo <= hi, got lo={self.lo}, hi={self.hi}.")

    @property
    def lo_f(self) -> float:
        return float(self.lo)

    @property
    def hi_f(self) -> float:
        return float(self.hi)

    def _contains(self, values):
        return (values >= self.lo) & (values <= self.hi) & (np.floor(values) == values)

    def to_dict(self):
        return {"type": "Integers", "lo": self.lo, "hi": self.hi}

    def __str__(self):
        return f"Integers({self.lo}, {self.hi})"


class Binary(Integers):
    """Every entry is 0 or 1."""

    def __init__(self):
        super().__init__(0, 1)

    def to_dict(self):
        return {"type": "Binary"}

    def __str__(self):
        return "Binary()"

    def __repr__(self):
        return "Binary()"


@dataclass(frozen=True)
class Ball(Domain):
    """Each row ``X[i]`` (last axis) has Euclidean norm at most ``radius``."""

    radius: float
    event_ndim = 1

    def __post_init__(self):
        r = _finite_float("radius", self.radius, "Ball")
        if not r > 0:
            raise DomainError(f"Ball needs radius > 0, got {r}.")
        object.__setattr__(self, "radius", r)

    def _contains(self, values):
        norms = np.sqrt(np.sum(np.asarray(values, float) ** 2, axis=-1))
        # tolerance: rows normalised to the radius in floating point land a hair outside
        return np.broadcast_to((norms <= self.radius * (1 + 1e-12))[..., None], values.shape)

    def to_dict(self):
        return {"type": "Ball", "radius": self.radius}

    def __str__(self):
        return f"Ball({self.radius:g})"


@dataclass(frozen=True)
class Box(Domain):
    """Each row ``X[i]`` lies in the box ``lo <= X[i] <= hi`` (bounds scalars or per-feature)."""

    lo: Any
    hi: Any
    #: set by :func:`pymc_dp.standardize`: the bounds are declared bounds mapped by released estimates
    preprocessing: Any = field(default=None, compare=False, repr=False)
    event_ndim = 1

    def __post_init__(self):
        lo = np.atleast_1d(np.asarray(self.lo, dtype=float))
        hi = np.atleast_1d(np.asarray(self.hi, dtype=float))
        if lo.ndim != 1 or hi.ndim != 1:
            raise DomainError("Box bounds must be scalars or 1-d per-feature arrays.")
        if not (np.all(np.isfinite(lo)) and np.all(np.isfinite(hi))):
            raise DomainError("Box bounds must be finite; pymc_dp needs bounded domains.")
        lo, hi = np.broadcast_arrays(lo, hi)
        if np.any(lo >= hi):
            raise DomainError(f"Box needs lo < hi in every feature, got lo={lo}, hi={hi}.")
        lo.setflags(write=False)
        hi.setflags(write=False)
        object.__setattr__(self, "lo", lo)
        object.__setattr__(self, "hi", hi)

    @property
    def abs_max(self) -> np.ndarray:
        """Per-feature ``max(|lo|, |hi|)``: the weights of the l1 norm that bounds ``w @ x``."""
        return np.maximum(np.abs(self.lo), np.abs(self.hi))

    def _contains(self, values):
        v = np.asarray(values, float)
        if self.lo.size not in (1, v.shape[-1]):
            raise DomainError(
                f"Box has {self.lo.size} feature bounds but the data have {v.shape[-1]} features."
            )
        return (v >= self.lo) & (v <= self.hi)

    def to_dict(self):
        return _with_preprocessing(self, {"type": "Box", "lo": self.lo.tolist(), "hi": self.hi.tolist()})

    def __str__(self):
        if self.lo.size == 1:
            return f"Box({self.lo[0]:g}, {self.hi[0]:g})"
        return f"Box(lo={self.lo.tolist()}, hi={self.hi.tolist()})"

    def __eq__(self, other):
        return (
            isinstance(other, Box)
            and np.array_equal(self.lo, other.lo)
            and np.array_equal(self.hi, other.hi)
        )

    def __hash__(self):
        return hash((self.lo.tobytes(), self.hi.tobytes()))
