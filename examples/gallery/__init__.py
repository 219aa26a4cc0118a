"""Twelve models from the PyMC example gallery, written as the gallery writes them.

Each module keeps the notebook's parametrisation, priors, variable names, Deterministics and
coords/dims, moves the observed data (and the covariates, unless the gallery passes them as
public plain arrays) into ``pm.Data``, and generates gallery-shaped data offline. Each exposes
``TITLE``, ``SOURCE``, ``make_data(n=None, seed=0)``, ``build(data=None)``, ``DOMAINS`` (the
public domains of the private containers) and ``PUBLIC`` (the public containers), so that::

    from examples.gallery import MODELS
    mod = MODELS["radon"]
    pymc_dp.make_private(mod.build(mod.make_data()), epsilon=..., draws=...,
                         data=mod.DOMAINS, public=mod.PUBLIC)

tries pymc_dp on models as people write them. ``try_all.py`` does that for every model.
"""

from examples.gallery import (
    ar,
    censored,
    discrete_choice,
    gaussian_mixture,
    glm_linear,
    glm_logistic,
    glm_negative_binomial,
    glm_poisson,
    glm_robust,
    ordinal,
    radon,
    rat_tumours,
)

MODELS = {
    "glm_logistic": glm_logistic,
    "glm_linear": glm_linear,
    "glm_robust": glm_robust,
    "glm_poisson": glm_poisson,
    "glm_negative_binomial": glm_negative_binomial,
    "radon": radon,
    "ordinal": ordinal,
    "discrete_choice": discrete_choice,
    "gaussian_mixture": gaussian_mixture,
    "ar": ar,
    "censored": censored,
    "rat_tumours": rat_tumours,
}

__all__ = ["MODELS", *MODELS]
