"""The private data of a release as one value: validated values, their domains, the unit, and the
ledger's fingerprint.

Every mechanism reads its private containers' values from the model, checks them against the
declared domains, and charges the ledger under one fingerprint of values, domains and unit
(:func:`pymc_dp.preprocess.dataset_id`, which also recognises standardised values). A
:class:`PrivateData` does the three once; :meth:`PrivateData.with_values` gives the same
containers other values of the same shapes (the audits' neighbouring datasets), validated the
same way.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Any, Mapping

import numpy as np

from pymc_dp.domains import Domain
from pymc_dp.exceptions import DomainError
from pymc_dp.units import Unit, as_unit

__all__ = ["PrivateData"]


@dataclass(frozen=True)
class PrivateData:
    """Validated private values (container -> array), their domains and the privacy unit.

    The values are private: a ``PrivateData`` is never released, and its :attr:`fingerprint`
    names the dataset in the ledger only.
    """

    values: Mapping[str, np.ndarray]
    domains: Mapping[str, Domain]
    unit: Unit

    @classmethod
    def from_model(cls, model, domains: Mapping[str, Domain], unit: Any) -> "PrivateData":
        """The values of ``model``'s private ``pm.Data`` containers (those with a domain),
        each validated against its domain."""
        values = {}
        for v in model.data_vars:
            if v.name in domains:
                arr = np.asarray(v.get_value())
                domains[v.name].validate(v.name, arr)
                values[v.name] = arr
        return cls(values, dict(domains), as_unit(unit))

    @cached_property
    def fingerprint(self) -> str:
        """The ledger's name for this dataset: a hash of the values, domains and unit (never
        released)."""
        from pymc_dp.preprocess import dataset_id

        return dataset_id(self.values, self.domains, self.unit)

    def with_values(self, data: Mapping[str, Any], *, context: str = "with_data") -> "PrivateData":
        """The same containers with some values replaced: each new value must lie in its domain
        and have the current shape; it takes the current dtype."""
        if not isinstance(data, Mapping):
            raise DomainError(f"{context} needs a dict mapping private container names to new values.")
        values = dict(self.values)
        for name, value in data.items():
            if name not in self.values:
                raise DomainError(
                    f"{context}: {name!r} is not a private container of this model (it has {sorted(self.values)})."
                )
            arr = np.asarray(value)
            self.domains[name].validate(name, arr)
            current = self.values[name]
            if arr.shape != current.shape:
                raise DomainError(
                    f"{context}: {name!r} has shape {arr.shape}, but the private model was certified for "
                    f"shape {current.shape}; the truncation may depend on shapes, so make a new "
                    "private model for data of another shape."
                )
            values[name] = arr.astype(current.dtype)
        return PrivateData(values, self.domains, self.unit)
