"""Exact samplers for truncated conjugate models.

The DP theorem of docs/theory/guarantee.md (one posterior draw is ``2 Delta``-DP) is a statement about
*exact* posterior draws. When the truncated model is conjugate, the posterior of every free RV is
a known family restricted to Theta_L, and this module draws from it exactly and independently,
with no Markov chain at all (docs/theory/truncation.md#exact-samplers):

=====================  =============================================  ============================
prior                  likelihood factors (the conjugate parameter)   posterior on Theta_L
=====================  =============================================  ============================
Beta(a, b)             Bernoulli(p), Binomial(n, p)                   Beta, truncated to [lo, hi]
Gamma(a, rate b),      Poisson(mu), Exponential(lam) (PyMC's          Gamma, truncated to [lo, hi]
Exponential(rate b)    parameter is scale = 1/lam)
Normal(m, s)           Normal(mu, sigma), sigma known                 Normal, truncated to [lo, hi]
Dirichlet(a)           Categorical(p)                                 Dirichlet restricted to
                                                                      {max_S p / min_S p <= c}
=====================  =============================================  ============================

The conjugate parameter may be any *gather* of one free RV (``theta[y]`` with ``y`` a private
label, public indices, broadcasting, casts): :func:`conjugate_plan` maps every observed element
to the element of the free RV it reads by evaluating the parameter with the free RV replaced by
an integer tag array, and verifies the gather by evaluating it again on random values.

Samplers (all exact; no MCMC anywhere):

* truncated Beta / Gamma / Normal -- inverse CDF, *two-sided*: the interval is split at the
  median, the part below it is sampled with the CDF and its inverse, the part above with the
  survival function and its inverse (``betainccinv``, ``gammainccinv``), so that an interval far in
  either tail keeps full relative precision (docs/theory/pitfalls.md#tail-precision: otherwise every draw rounds to
  the bound). The Normal works in log space throughout (``log_ndtr`` / ``ndtri_exp``). Where the
  tail mass of a Beta or Gamma piece underflows (below 1e-280), the piece is sampled by exact
  rejection from the tangent of the log-density at its near end, in the coordinate where the
  log-density is concave for every parameter value (``logit x`` for the Beta, ``log x`` for the
  Gamma); in that regime the acceptance is above 0.999.
* truncated Dirichlet -- exact rejection on the minimum, see :class:`TruncatedDirichlet`.

Which of two exact algorithms runs may depend on the data; the law of the output does not. No
data-dependent switch to an approximate sampler exists.

The package's jobs live in one module each: :mod:`~pymc_dp.exact.special` (special functions,
accurate in both tails), :mod:`~pymc_dp.exact.samplers` (truncated samplers),
:mod:`~pymc_dp.exact.conjugate` (what a plan holds per free RV and factor; the conjugate update),
:mod:`~pymc_dp.exact.plan` (:class:`ConjugatePlan`: draws, its public description, densities for
audits) and :mod:`~pymc_dp.exact.planner` (:func:`conjugate_plan`: reads a model and refuses what
is not conjugate); this package re-exports their public names.
"""

from pymc_dp.exact.plan import ConjugatePlan
from pymc_dp.exact.planner import conjugate_plan
from pymc_dp.exact.samplers import (
    TruncatedDirichlet,
    log_dirichlet_ratio_mass,
    truncated_beta,
    truncated_gamma,
    truncated_normal,
)
from pymc_dp.exact.special import (
    log_beta_cdf,
    log_beta_mass,
    log_beta_sf,
    log_gamma_cdf,
    log_gamma_mass,
    log_gamma_sf,
    log_normal_mass,
)

__all__ = [
    "ConjugatePlan",
    "conjugate_plan",
    "truncated_beta",
    "truncated_gamma",
    "truncated_normal",
    "TruncatedDirichlet",
    "log_gamma_mass",
    "log_gamma_cdf",
    "log_gamma_sf",
    "log_beta_cdf",
    "log_beta_sf",
    "log_beta_mass",
    "log_normal_mass",
    "log_dirichlet_ratio_mass",
]
