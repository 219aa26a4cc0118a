"""Per-family Lipschitz rules, registered by RV Op (see :mod:`pymc_dp.rules.base`)."""

from pymc_dp.rules import categorical, censored, continuous, count, discrete, mixture, timeseries  # noqa: F401  (registers the rules)  # noqa: F401
from pymc_dp.rules.base import (
    Bounds,
    Nested,
    RuleInfo,
    element_lipschitz,
    log_density_range,
    register_lipschitz,
    register_rule,
    rule_info,
)
from pymc_dp.rules.namespaces import NP, PT
from pymc_dp.rules.region import (
    BranchAndBound,
    NestedRegion,
    RegionSpec,
    Span,
    Window,
    region_lipschitz,
    region_spec,
    register_region,
)

__all__ = [
    "Bounds",
    "Nested",
    "RuleInfo",
    "log_density_range",
    "element_lipschitz",
    "register_rule",
    "register_lipschitz",
    "rule_info",
    "NP",
    "PT",
    "Span",
    "Window",
    "NestedRegion",
    "RegionSpec",
    "BranchAndBound",
    "region_lipschitz",
    "region_spec",
    "register_region",
]
