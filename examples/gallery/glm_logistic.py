"""GLM: Logistic Regression (pymc-examples: myst_nbs/generalized_linear_models/GLM-logistic.myst.md@065ef2ad985012a15d0bcb7f4a8e43e3906fe0f0), written as the gallery writes it.

The notebook fits ``bmb.Model("income ~ age + age2 + educ + hours", data, family="bernoulli")``;
this is the raw-PyMC model bambi builds (Bernoulli, logit link, bambi's default priors, ``p``
kept as a Deterministic). Private: the covariate matrix ``X`` (age/10, (age/10)^2, years of
education, weekly hours) and the outcome ``y`` (income > 50K). Domains: the census survey covers
adults aged 17-90 (age/10 in [1.7, 9.0]; its square in [2.89, 81], declared from 2.889 because
1.7**2 rounds below 2.89), education-num is coded 1-16 and hours per week 1-99 on the
questionnaire; income is a 0/1 flag. Generated ages, education codes and hours are rounded to
integers and clipped into those public ranges.
"""

from __future__ import annotations

import numpy as np
import pymc as pm

import pymc_dp

TITLE = "GLM: Logistic Regression"
SOURCE = "pymc-devs/pymc-examples: myst_nbs/generalized_linear_models/GLM-logistic.myst.md"

#: rows of adult.data (the gallery uses all of them)
N_GALLERY = 32_561

#: bambi's default prior scales. bambi computes them from the data's means and standard
#: deviations; computed from the private data they would leak, so they are fixed public
#: constants here: the values bambi's ``PriorScaler`` gives on the gallery-sized generated
#: data (``make_data(seed=0)``), rounded. slope_sd = 2.5 / std(x_j);
#: icpt_sd = sqrt(2.5^2 + sum_j slope_sd_j^2 * mean(x_j)^2).
X_MEAN = np.array([3.853, 16.64, 10.07, 40.07])
X_STD = np.array([1.340, 12.60, 2.578, 12.33])
SLOPE_SD = 2.5 / X_STD
ICPT_SD = float(np.sqrt(2.5**2 + np.sum(SLOPE_SD**2 * X_MEAN**2)))

# education-num 1..16 with the adult-census frequencies (preschool .. doctorate)
_EDUC_P = np.array(
    [0.002, 0.005, 0.010, 0.020, 0.016, 0.029, 0.036, 0.013, 0.322, 0.224, 0.042, 0.033, 0.164, 0.053, 0.018, 0.013]
)


def make_data(n: int | None = None, seed: int = 0) -> dict[str, np.ndarray]:
    """The columns of the notebook's ``data`` frame: ``age`` (age/10), ``age2``, ``educ``,
    ``hours`` and ``income`` (0/1, about 24% ones)."""
    n = N_GALLERY if n is None else int(n)
    rng = np.random.default_rng(seed)
    age_years = np.clip(np.round(17 + rng.gamma(2.5, 8.6, n)), 17, 90)  # public rule: 17..90
    educ = rng.choice(np.arange(1, 17), size=n, p=_EDUC_P / _EDUC_P.sum()).astype(np.int64)
    full_time = rng.random(n) < 0.47
    hours = np.where(full_time, 40, np.round(rng.normal(40, 17, n)))
    hours = np.clip(hours, 1, 99).astype(np.int64)  # public rule: 1..99 hours per week
    age = age_years / 10.0
    age2 = np.square(age)
    eta = -10.3 + 1.9 * age - 0.19 * age2 + 0.33 * educ + 0.035 * hours
    income = (rng.random(n) < 1.0 / (1.0 + np.exp(-eta))).astype(np.int64)
    return {"age": age, "age2": age2, "educ": educ, "hours": hours, "income": income}


def build(data: dict | None = None) -> pm.Model:
    """bambi's ``income ~ age + age2 + educ + hours`` (family="bernoulli") in raw PyMC."""
    data = make_data() if data is None else data
    X = np.column_stack([data["age"], data["age2"], data["educ"], data["hours"]]).astype(float)
    y = np.asarray(data["income"])
    slope_sd, icpt_sd = SLOPE_SD, ICPT_SD
    with pm.Model(coords={"__obs__": np.arange(len(y))}) as model:
        Xd = pm.Data("X", X)
        yd = pm.Data("y", y, dims="__obs__")
        Intercept = pm.Normal("Intercept", mu=0, sigma=icpt_sd)
        age = pm.Normal("age", mu=0, sigma=slope_sd[0])
        age2 = pm.Normal("age2", mu=0, sigma=slope_sd[1])
        educ = pm.Normal("educ", mu=0, sigma=slope_sd[2])
        hours = pm.Normal("hours", mu=0, sigma=slope_sd[3])
        eta = Intercept + age * Xd[:, 0] + age2 * Xd[:, 1] + educ * Xd[:, 2] + hours * Xd[:, 3]
        p = pm.Deterministic("p", pm.math.invlogit(eta), dims="__obs__")
        pm.Bernoulli("income", p=p, observed=yd, dims="__obs__")
    return model


DOMAINS = {
    "X": pymc_dp.Box(lo=[1.7, 2.889, 1.0, 1.0], hi=[9.0, 81.0, 16.0, 99.0]),
    "y": pymc_dp.Binary(),
}
PUBLIC: tuple[str, ...] = ()
