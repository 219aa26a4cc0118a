"""Deprecated location of the audits: they live in :mod:`pymc_dp.audits` (one module per job).

``from pymc_dp.auditing import audit`` keeps working; new code imports from ``pymc_dp`` or
``pymc_dp.audits``.
"""

from pymc_dp.audits import AuditError, AuditResult, Witness, audit, clopper_pearson

__all__ = ["audit", "AuditResult", "Witness", "AuditError", "clopper_pearson"]
