"""pymc_dp: differentially private posterior sampling for PyMC models.

Sampling from a Bayesian posterior is itself differentially private when every likelihood
factor is Lipschitz in one record on the support of the prior (Dimitrakakis et al. 2014, 2017;
Zhang et al. 2016). pymc_dp certifies each factor with an exact rule, lifts the constants through
the model's DAG, truncates the priors to the region where the loss fits the budget, samples,
and releases privacy-accounted draws as ArviZ ``InferenceData``.
"""

from pymc_dp import plots  # noqa: E402  (pymc_dp.plots.plot_*; matplotlib is imported when a plot is drawn)
from pymc_dp.audits import AuditError, AuditResult, audit
from pymc_dp.certificate import Certificate, FactorCertificate
from pymc_dp.certification import Certification, certify
from pymc_dp.contamination import ContaminationSpec, contaminate, contamination_of
from pymc_dp.core import PrivateModel, make_private, private
from pymc_dp.domains import Ball, Binary, Box, Domain, Integers, Interval
from pymc_dp.exceptions import (
    BudgetExceededError,
    CertificateRefutedError,
    DomainError,
    EstimateNotImplementedError,
    LedgerError,
    NotConjugateError,
    PathNotImplementedError,
    PrivacyError,
    RegionNotImplementedError,
    StuckChainError,
    UnsupportedFactorError,
)
from pymc_dp.ledger import Ledger, Spend, default_ledger_path
from pymc_dp.mechanisms import (
    FourierUpdates,
    LaplaceUpdates,
    LocalizedPosterior,
    Mechanism,
    MetricPosterior,
    NoisyCounts,
    NoisyStatistics,
    PathChoice,
    PrivateMAP,
    Recommendation,
    StochasticPosterior,
    UtilityPreview,
    fourier_updates,
    laplace_updates,
    localized_posterior,
    metric_posterior,
    noisy_statistics,
    preview,
    private_map,
    recommend,
    stochastic_posterior,
)
from pymc_dp.mechanisms.histogram import NoisyHistogram, noisy_histogram
from pymc_dp.mechanisms.table import NoisyTable, noisy_table
from pymc_dp.preprocess import Standardization, standardize
from pymc_dp.privacy_report import PrivacyReport, report
from pymc_dp.query import Answer, Decision, answer
from pymc_dp.units import Attribute, Record, Users
from pymc_dp.version import __version__  # noqa: F401

__all__ = [
    "private",
    "contaminate",
    "contamination_of",
    "ContaminationSpec",
    "standardize",
    "Standardization",
    "laplace_updates",
    "fourier_updates",
    "LaplaceUpdates",
    "FourierUpdates",
    "Mechanism",
    "private_map",
    "PrivateMAP",
    "localized_posterior",
    "LocalizedPosterior",
    "metric_posterior",
    "MetricPosterior",
    "stochastic_posterior",
    "StochasticPosterior",
    "noisy_statistics",
    "noisy_histogram",
    "NoisyHistogram",
    "noisy_table",
    "NoisyTable",
    "NoisyCounts",
    "NoisyStatistics",
    "recommend",
    "Recommendation",
    "preview",
    "UtilityPreview",
    "PathChoice",
    "report",
    "PrivacyReport",
    "answer",
    "audit",
    "AuditResult",
    "AuditError",
    "Decision",
    "Answer",
    "plots",
    "make_private",
    "PrivateModel",
    "certify",
    "Certification",
    "Record",
    "Attribute",
    "Certificate",
    "FactorCertificate",
    "Domain",
    "Interval",
    "Binary",
    "Integers",
    "Ball",
    "Box",
    "Users",
    "Ledger",
    "Spend",
    "default_ledger_path",
    "PathNotImplementedError",
    "RegionNotImplementedError",
    "EstimateNotImplementedError",
    "PrivacyError",
    "DomainError",
    "UnsupportedFactorError",
    "BudgetExceededError",
    "LedgerError",
    "NotConjugateError",
    "StuckChainError",
    "CertificateRefutedError",
]
