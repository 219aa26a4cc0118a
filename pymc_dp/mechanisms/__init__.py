"""Mechanisms of the seed papers beside posterior sampling (docs/mechanisms.md).

* :func:`laplace_updates` -- Laplace noise on a discrete Bayes network's posterior updates
  (AAAI 2016, Alg. 1);
* :func:`fourier_updates` -- Laplace noise on the Fourier coefficients of its contingency table
  (AAAI 2016, Alg. 2): consistent marginals;
* :func:`private_map` -- the exponential mechanism with the truncated prior as base measure
  (AAAI 2016, Alg. 3): a tempered truncated posterior draw;
* :func:`localized_posterior` -- localize, then sample: one tempered draw on a wide public box
  locates the posterior, the draws come from a box around it (docs/theory/localized.md;
  ``make_private(..., path="localized")``);
* :func:`stochastic_posterior` -- untruncated posterior draws, (epsilon, delta)-DP by the corrected
  stochastic-Lipschitz theorem (docs/theory/stochastic_lipschitz.md);
* :func:`metric_posterior` -- metric DP (ALT Def. 2) for continuous records: ``P(B|x) <=
  exp(eps sum|x_i - x'_i|) P(B|x')`` (docs/theory/metric_dp.md);
* :func:`noisy_statistics` -- Laplace-noised sufficient statistics released once, and the
  posterior given them with the noise in the model (Bernstein & Sheldon 2018); for a discrete
  network with Beta / Dirichlet priors (naive Bayes) the noisy counts and the exact posterior
  given them (:class:`NoisyCounts`).

The noise mechanisms implement :class:`~pymc_dp.mechanisms.base.Mechanism` (release with a
ledger charge, and the audit protocol used by :func:`pymc_dp.audit`).
"""

from pymc_dp.mechanisms.auto import PathChoice, choose_path
from pymc_dp.mechanisms.base import Mechanism
from pymc_dp.mechanisms.censored_statistics import CensoredNormalStatistics  # registers the censored Normal's statistics
from pymc_dp.mechanisms.counts import NoisyCounts
from pymc_dp.mechanisms.localized import LocalizedPosterior, localized_posterior
from pymc_dp.mechanisms.map import PrivateMAP, private_map
from pymc_dp.mechanisms.metric import MetricPosterior, metric_posterior
from pymc_dp.mechanisms.paths import Recommendation, noisy_statistics, recommend
from pymc_dp.mechanisms.preview import UtilityPreview, preview
from pymc_dp.mechanisms.statistics import NoisyStatistics
from pymc_dp.mechanisms.stochastic import StochasticPosterior, stochastic_posterior
from pymc_dp.mechanisms.updates import (
    FourierUpdates,
    LaplaceUpdates,
    fourier_updates,
    laplace_updates,
)

__all__ = [
    "FourierUpdates",
    "LaplaceUpdates",
    "Mechanism",
    "CensoredNormalStatistics",
    "PathChoice",
    "choose_path",
    "NoisyCounts",
    "NoisyStatistics",
    "Recommendation",
    "UtilityPreview",
    "preview",
    "recommend",
    "PrivateMAP",
    "LocalizedPosterior",
    "localized_posterior",
    "MetricPosterior",
    "metric_posterior",
    "StochasticPosterior",
    "stochastic_posterior",
    "fourier_updates",
    "laplace_updates",
    "noisy_statistics",
    "private_map",
]
