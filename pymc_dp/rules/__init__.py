"""Per-family Lipschitz rules, registered by RV Op (see :mod:`pymc_dp.rules.base`)."""

from pymc_dp.rules import continuous, discrete  # noqa: F401  (registers the rules)
from pymc_dp.rules._xp import NP, PT
from pymc_dp.rules.base import Bounds, RuleInfo, log_density_range, register_rule, rule_info

__all__ = ["Bounds", "RuleInfo", "log_density_range", "register_rule", "rule_info", "NP", "PT"]
