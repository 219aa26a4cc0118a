"""What a conjugate plan holds per free RV and per likelihood factor, and the conjugate update.

:class:`ConjugateVariable` (one free RV: its family, prior, truncation and posterior) and
:class:`ConjugateFactor` (one likelihood factor that reads it) are filled in by the planner
(:mod:`pymc_dp.exact.planner`) and read by :class:`~pymc_dp.exact.plan.ConjugatePlan`;
:func:`conjugate_posterior` turns the factors' sufficient statistics into the posterior
parameters, for the posterior itself and for a tempered likelihood.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from pymc_dp.exact.samplers import TruncatedDirichlet
from pymc_dp.exceptions import DomainError, NotConjugateError

#: the support of each scalar conjugate family: the truncation of a variable starts from it
SUPPORT = {"Beta": (0.0, 1.0), "Gamma": (0.0, math.inf), "Normal": (-math.inf, math.inf)}


_HINT = 'There is no exact sampler for this model: sample it with method="mcmc".'


def refuse(message: str):
    """Raise :class:`~pymc_dp.exceptions.NotConjugateError` with ``message`` and the hint to use MCMC.

    Parameters
    ----------
    message : str
        What breaks conjugacy, decided from public information only.

    Raises
    ------
    NotConjugateError
        Always.
    """
    raise NotConjugateError(f"{message} {_HINT}")


@dataclass
class ConjugateFactor:
    """One likelihood factor of a conjugate plan: an observed RV whose conjugate parameter reads one free RV.

    Attributes
    ----------
    name : str
        The observed RV's name.
    family : str
        The likelihood family (``"Bernoulli"``, ``"Binomial"``, ``"Poisson"``, ``"Exponential"``,
        ``"Normal"``, ``"Categorical"``).
    param_names : tuple of str
        The Op's parameter names, in order.
    conj_index : int
        Which of them is the conjugate parameter (the one that reads the free RV).
    link : str
        ``"identity"``, or ``"reciprocal"`` (an Exponential's scale is ``1 / lam``).
    rv_name : str
        The free RV the conjugate parameter reads.
    rv_op : Op
        The observed RV's Op.
    params : list
        The parameter graphs.
    value : TensorVariable
        The observed value graph.
    private : bool
        Whether the factor reads private data (its statistics are the ones a tempered plan scales).
    index, observed, others
        Filled in by evaluation: per observation the element (or, for a Categorical, the row) of
        the free RV it reads, the observed values, and the values of the other parameters.
    """

    name: str
    family: str
    param_names: tuple[str, ...]
    conj_index: int
    link: str
    rv_name: str
    rv_op: Any
    params: list
    value: Any
    private: bool
    #: filled in after evaluation
    index: np.ndarray | None = None  # element of the free RV (or row, for Categorical) per observation
    observed: np.ndarray | None = None
    others: dict = field(default_factory=dict)


@dataclass
class ConjugateVariable:
    """One free RV of a conjugate plan: prior, likelihood factors, truncation and posterior.

    Attributes
    ----------
    name, family, prior_op, shape, dtype : str, str, str, tuple of int, str
        The free RV's name, its conjugate family, the family of its prior as written
        (``"Exponential"`` is planned as a Gamma), its shape and dtype.
    prior : dict
        Prior parameter name -> array broadcast to ``shape``.
    factors : list of ConjugateFactor
        The likelihood factors that read it.
    lower, upper : float
        The interval truncation (Beta, Gamma, Normal).
    ratio : list
        Dirichlet: ``[(rows, classes, bound)]``, the max/min ratio truncation per group of rows.
    posterior : dict
        Posterior parameters (see :func:`conjugate_posterior`); **reads the private data**.
    samplers : dict
        Dirichlet: row -> :class:`~pymc_dp.exact.samplers.TruncatedDirichlet`.
    rv, transform
        The PyMC free RV and its value transform.
    """

    name: str
    family: str
    prior_op: str
    shape: tuple[int, ...]
    dtype: str
    prior: dict  # prior parameter name -> array broadcast to shape
    factors: list = field(default_factory=list)
    lower: float = -math.inf
    upper: float = math.inf
    ratio: list = field(default_factory=list)  # Dirichlet: [(rows, classes, bound)]
    posterior: dict = field(default_factory=dict)
    samplers: dict = field(default_factory=dict)  # Dirichlet: row -> TruncatedDirichlet
    rv: Any = None
    transform: Any = None

    @property
    def size(self) -> int:
        """The number of elements."""
        return int(np.prod(self.shape, dtype=int))


def conjugate_posterior(var: ConjugateVariable, samplers: bool = True, beta: float = 1.0) -> None:
    """Set ``var.posterior`` (and a Dirichlet's ``var.samplers``) from its prior and factors.

    The density is prior x (private likelihood)^beta x (public likelihood): the sufficient
    statistics of the factors that read private data enter times ``beta`` (1: the posterior).

    Parameters
    ----------
    var : ConjugateVariable
        A variable whose factors are evaluated (``index``, ``observed``, ``others`` set).
    samplers : bool
        Whether to build the truncated Dirichlet envelopes now (False: at the first draw).
    beta : float
        The power of the private likelihood.

    Raises
    ------
    DomainError
        Observed values outside the support of their likelihood (the posterior is undefined).
    """
    size = var.size
    if var.family == "Beta":
        succ, fail = np.zeros(size), np.zeros(size)
        for f in var.factors:
            x, idx = _obs(f, var)
            n = np.broadcast_to(f.others["n"], f.observed.shape).reshape(-1) if f.family == "Binomial" else 1.0
            if np.any((x < 0) | (x > n)) or np.any(x != np.floor(x)):
                _outside(f)
            w = beta if f.private else 1.0
            np.add.at(succ, idx, w * x)
            np.add.at(fail, idx, w * (n - x))
        post = {"alpha": var.prior["alpha"].reshape(-1) + succ, "beta": var.prior["beta"].reshape(-1) + fail}
    elif var.family == "Gamma":
        shape_, rate = np.zeros(size), np.zeros(size)
        for f in var.factors:
            x, idx = _obs(f, var)
            if np.any(x < 0) or (f.family == "Poisson" and np.any(x != np.floor(x))):
                _outside(f)
            w = beta if f.private else 1.0
            if f.family == "Poisson":
                np.add.at(shape_, idx, w * x)
                np.add.at(rate, idx, w)
            else:
                np.add.at(shape_, idx, w)
                np.add.at(rate, idx, w * x)
        post = {"shape": var.prior["alpha"].reshape(-1) + shape_, "rate": var.prior["rate"].reshape(-1) + rate}
    elif var.family == "Normal":
        prec, lin = np.zeros(size), np.zeros(size)
        for f in var.factors:
            x, idx = _obs(f, var)
            sigma = np.broadcast_to(f.others["sigma"], f.observed.shape).reshape(-1).astype(float)
            if np.any(~np.isfinite(x)) or np.any(~(sigma > 0)):
                _outside(f)
            w = beta if f.private else 1.0
            np.add.at(prec, idx, w / sigma**2)
            np.add.at(lin, idx, w * x / sigma**2)
        p0 = 1.0 / var.prior["sigma"].reshape(-1) ** 2
        total = p0 + prec
        mu = (var.prior["mu"].reshape(-1) * p0 + lin) / total
        post = {"mu": mu, "sigma": 1.0 / np.sqrt(total)}
    else:
        k = var.shape[-1]
        counts = np.zeros((size // k, k))
        for f in var.factors:
            x, rows = _obs(f, var)
            if np.any((x < 0) | (x >= k)) or np.any(x != np.floor(x)):
                _outside(f)
            np.add.at(counts, (rows, x.astype(np.int64)), beta if f.private else 1.0)
        alpha = var.prior["a"].reshape(-1, k) + counts
        post = {"alpha": alpha}
        bounds = {r: (cl, b) for rows, cl, b in var.ratio for r in rows}
        for r in range(alpha.shape[0]):
            cl, b = bounds.get(r, ((), math.inf))
            var.samplers[r] = TruncatedDirichlet(alpha[r], cl, b, build=samplers)
    for key, val in post.items():
        if not np.all(np.isfinite(val)) or (key != "mu" and np.any(val <= 0)):  # pragma: no cover
            raise DomainError(f"the posterior of {var.name!r} is not a proper {var.family} distribution.")
    var.posterior = post


def _obs(f: ConjugateFactor, var: ConjugateVariable):
    """The factor's observed values and the element of ``var`` each reads, both flat."""
    x = np.asarray(f.observed, dtype=float)
    try:
        idx = np.broadcast_to(f.index, x.shape)
    except ValueError:
        refuse(f"factor {f.name!r}: its parameter does not broadcast to its observed shape {x.shape}.")
    return x.reshape(-1), np.ascontiguousarray(idx).reshape(-1)


def _outside(f: ConjugateFactor):
    # a DomainError, not NotConjugateError: this depends on the data, so method="auto" must not
    # fall back to MCMC on it (the choice of sampler would then reveal it)
    raise DomainError(
        f"factor {f.name!r}: some observed values lie outside the support of its {f.family} "
        "distribution, so the posterior is not defined (check the data, or for a Binomial that "
        "the declared domain does not exceed n)."
    )
