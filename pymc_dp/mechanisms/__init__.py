"""Mechanisms of the seed papers that add noise instead of truncating priors (DESIGN.md section 9).

* :func:`laplace_updates` -- Laplace noise on a discrete Bayes network's posterior updates
  (AAAI 2016, Alg. 1);
* :func:`fourier_updates` -- Laplace noise on the Fourier coefficients of its contingency table
  (AAAI 2016, Alg. 2): consistent marginals.

Every mechanism implements :class:`~pymc_dp.mechanisms.base.Mechanism` (release with a ledger
charge, and the audit protocol used by :func:`pymc_dp.audit`).
"""

from pymc_dp.mechanisms.base import Mechanism
from pymc_dp.mechanisms.updates import FourierUpdates, LaplaceUpdates, fourier_updates, laplace_updates

__all__ = ["Mechanism", "LaplaceUpdates", "FourierUpdates", "laplace_updates", "fourier_updates"]
