"""Catalogue of same-shaped rules (range, Lipschitz constant, region, floor) registered by singledispatch on the RV Op.

Rules for mixtures: ``pm.Mixture`` / ``pm.NormalMixture``, zero-inflated and hurdle families.

PyMC builds all of them as one ``SymbolicRandomVariable`` whose ``dist_params`` are the weights
and the components:

* ``pm.Mixture(w, [comp_0, comp_1, ...])`` -- a ``MixtureRV`` with a *list* of components;
* ``pm.Mixture(w, comp)`` and ``pm.NormalMixture(w, mu, sigma)`` -- a ``MixtureRV`` with ONE
  batched component whose last axis indexes the ``K`` components;
* ``pm.ZeroInflatedPoisson / NegativeBinomial / Binomial(psi, ...)`` -- a ``MixtureRV`` with
  weights ``(1 - psi, psi)`` and components ``(DiracDelta(0), base)``: ``psi`` is the weight of
  the *base* (PyMC's convention: ``P(0) = (1 - psi) + psi f(0)``, ``P(y) = psi f(y)``, y > 0);
* ``pm.HurdlePoisson / NegativeBinomial(psi, ...)`` -- a ``_HurdleRV`` with weights
  ``(1 - psi, psi)`` and components ``(DiracDelta(0), Truncated(base, lower=1))``:
  ``P(0) = 1 - psi``, ``P(y) = psi f(y) / (1 - f(0))`` for y >= 1;
* ``pm.HurdleGamma / LogNormal(psi, ...)`` -- a ``_HurdleRV`` whose positive part is the base
  density itself (no truncation): ``P(0) = 1 - psi`` (an atom), ``p(y) = psi f(y)`` (a density).

What each rule receives (``params``, in ``dist_params`` order): ``Bounds.point(w)`` for the
weights (they may not read private data), then one :class:`~pymc_dp.rules.base.Nested` per
component with the component's own parameters as ``Bounds`` -- a component's location may be a
record-reading window (a mixture of regressions). For a hurdle, the positive component is given
as its *base* (``Nested(PoissonRV, (mu,))``; a ``Nested`` of the ``TruncatedRV`` Op is unwrapped
to its ``base_rv_op``): the truncation at ``lower=1`` is what ``_HurdleRV`` always builds.
:func:`mixture_components` finds the components (and unwraps the truncation) in a PyMC node.

Rules (derivations in each function's docstring and in ``docs/rules/mixture.md``):

* general mixture -- a *bound*, not exact: the mediant inequality gives
  ``L_mix <= max_k L_k`` whatever the weights, tightened per ``theta`` by the weighted range
  bound :func:`mixture_range` (never looser). Over a region the bound is the largest component's
  region constant, which is the exact sup when the region leaves the weights free (at the
  vertex ``w = e_k`` the mixture *is* component ``k``).
* zero-inflated -- exact, composed from the base's registered rule on sub-domains.
* hurdle -- Poisson and NegativeBinomial by their own zero-truncated rules (exact with windows in
  ``ln mu``; the NB for domains starting at 0 or 1); other discrete bases composed from the
  registry (exact for point parameters, a sound bound for windows); continuous hurdles composed
  from the base's density rule, exact (an atom and a density: nothing cancels, see
  :func:`hurdle_continuous_range`).

Regions: :func:`mixture_region` (the largest component's region constant; zero-inflated:
:func:`_atom_base_region`) and :func:`hurdle_region`.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np
import scipy.special as sp
from pymc.distributions.distribution import DiracDeltaRV
from pymc.distributions.mixture import MixtureRV, _BaseMixtureRV, _HurdleRV
from pymc.distributions.truncated import TruncatedRV
from pytensor.tensor.random.basic import NegBinomialRV, PoissonRV

from pymc_dp.domains import Domain, Integers, Interval
from pymc_dp.exceptions import DomainError, UnsupportedFactorError
from pymc_dp.rules.base import (
    Bounds,
    Nested,
    element_lipschitz,
    log_density_range,
    register_lipschitz,
    register_rule,
    rule_info,
)
from pymc_dp.rules.namespaces import NP
from pymc_dp.rules.region import (
    NestedRegion,
    NoRegionRule,
    RegionSpec,
    Span,
    Window,
    region_lipschitz,
    register_region,
)

__all__ = [
    "MixtureComponent",
    "mixture_components",
    "mixture_range",
    "mixture_lipschitz",
    "mediant_lipschitz",
    "zero_inflated_range",
    "hurdle_range",
    "hurdle_poisson_range",
    "hurdle_discrete_range",
    "hurdle_negative_binomial_range",
    "hurdle_continuous_range",
    "mixture_region",
    "hurdle_region",
    "CONTINUOUS_PIECES",
    "DISCRETE_ENUMERATE",
]

#: a list-form mixture may have at most this many components (the rule's ``param_names``)
MAX_COMPONENTS = 32
#: sub-intervals of a continuous domain in the weighted range bound (:func:`mixture_range`)
CONTINUOUS_PIECES = 32
#: integer domains with at most this many values are enumerated value by value (exact for
#: point parameters); larger ones are cut into this many blocks
DISCRETE_ENUMERATE = 64


# --------------------------------------------------------------------------- recogniser


@dataclass(frozen=True)
class MixtureComponent:
    """One component of a PyMC mixture node.

    ``op`` is the component's RV Op (for a hurdle's ``Truncated`` positive part: the *base*
    Op), ``params`` its ``dist_params`` (PyTensor variables, the user's own), ``batched`` is
    True for the single batched component of ``pm.NormalMixture`` / ``pm.Mixture(w, comp)``
    (its parameters' last axis indexes the K components), and ``truncation`` holds the
    ``(lower, upper)`` variables of a ``Truncated`` component (None otherwise).
    """

    op: Any
    params: tuple
    batched: bool = False
    truncation: tuple | None = None


def mixture_components(node) -> tuple[Any, list[MixtureComponent]]:
    """``(weights, components)`` of a ``MixtureRV`` or ``_HurdleRV`` node.

    Handles the list form (one component per entry), the batched form (one component whose last
    axis indexes the components: ``pm.NormalMixture``), and the hurdle's ``Truncated`` positive
    part (unwrapped to its base, with ``truncation=(lower, upper)``; PyMC always truncates a
    discrete hurdle base at ``lower=1``, and anything else is refused).

    Raises
    ------
    UnsupportedFactorError
        For a node that is not a mixture, a component that is not a distribution, more than
        :data:`MAX_COMPONENTS` components, or a multivariate component.
    """
    op = node.op
    if not isinstance(op, _BaseMixtureRV):
        raise UnsupportedFactorError(f"{type(op).__name__} is not a PyMC mixture")
    weights, *components = op.dist_params(node)
    if len(components) > MAX_COMPONENTS:
        raise UnsupportedFactorError(
            f"a mixture of {len(components)} listed components: at most {MAX_COMPONENTS} are "
            "supported; write the components as one batched distribution (last axis = component)"
        )
    out = []
    for comp in components:
        if comp.owner is None:
            raise UnsupportedFactorError("a mixture component is not a distribution")
        cop = comp.owner.op
        if getattr(cop, "ndim_supp", 0) != 0:
            raise UnsupportedFactorError(
                "mixtures of multivariate components are not supported (only scalar components)"
            )
        if isinstance(cop, TruncatedRV):
            if not isinstance(op, _HurdleRV):
                # its log-density carries the truncation's normaliser: not the base's rule
                raise UnsupportedFactorError(
                    f"a mixture component pm.Truncated({type(cop.base_rv_op).__name__.removesuffix('RV')}) "
                    "has no Lipschitz rule"
                )
            *rv_inputs, lower, upper = comp.owner.inputs
            base_node = cop.base_rv_op.make_node(*rv_inputs)
            lo_c, hi_c = _constant(lower), _constant(upper)
            if lo_c is None or hi_c is None or np.any(lo_c != 1) or np.any(np.isfinite(hi_c)):
                raise UnsupportedFactorError(
                    "a hurdle whose positive part is not truncated at lower=1 (PyMC's HurdleX)"
                )
            out.append(
                MixtureComponent(
                    cop.base_rv_op,
                    tuple(cop.base_rv_op.dist_params(base_node)),
                    False,
                    (lower, upper),
                )
            )
        else:
            out.append(MixtureComponent(cop, tuple(cop.dist_params(comp.owner)), len(components) == 1))
    return weights, out


# --------------------------------------------------------------------------- helpers


def _constant(var):
    """The value of a constant PyTensor variable (or a NumPy value), else None."""
    from pytensor.graph.basic import Constant, Variable

    if not isinstance(var, Variable):
        return np.asarray(var)
    if isinstance(var, Constant):
        return np.asarray(var.data)
    try:
        from pytensor.tensor.basic import get_underlying_scalar_constant_value

        return np.asarray(get_underlying_scalar_constant_value(var))
    except Exception:
        return None


def _name(op) -> str:
    info = rule_info(op)
    if info is not None:
        return info.family
    return type(op).__name__.removesuffix("RV")


def _base_op(op):
    """A ``Truncated`` component is given by its base (see the module docstring)."""
    return getattr(op, "base_rv_op", op) if isinstance(op, TruncatedRV) else op


def _has_range_rule(op) -> bool:
    return log_density_range.dispatch(type(op)) is not log_density_range.dispatch(object)


def _has_lipschitz_rule(op) -> bool:
    return _has_range_rule(op) or (
        element_lipschitz.dispatch(type(op)) is not element_lipschitz.dispatch(object)
    )


def _support_kind(op) -> str | None:
    """``"discrete"`` or ``"continuous"`` from the Op's output dtype (None when unknown)."""
    op = _base_op(op)
    dtype = getattr(op, "dtype", None)
    if dtype is None:
        return None
    dtype = str(dtype)
    if dtype.startswith(("int", "uint", "bool")):
        return "discrete"
    return "continuous"


def _log1mexp(x, xp):
    """``ln(1 - e^x)`` for ``x <= 0``, accurate at both ends (Maechler's switch at ``-ln 2``)."""
    return xp.where(x > -np.log(2.0), xp.log(-xp.expm1(x)), xp.log1p(-xp.exp(x)))


def _min_all(values, xp):
    out = values[0]
    for v in values[1:]:
        out = xp.minimum(out, v)
    return out


def _max_all(values, xp):
    out = values[0]
    for v in values[1:]:
        out = xp.maximum(out, v)
    return out


def _lse_list(values, xp):
    """``ln sum_k e^{v_k}`` over a list, safe when every entry is ``-inf``."""
    m = _max_all(values, xp)
    m_safe = xp.where(m > -np.inf, m, 0.0)
    s = None
    for v in values:
        e = xp.exp(v - m_safe)
        s = e if s is None else s + e
    return m_safe + xp.log(s)


def _weights(w: Bounds, xp):
    if not isinstance(w, Bounds) or not w.is_point:
        raise UnsupportedFactorError(
            "the weights of a mixture cannot read private data (a weight that depends on the "
            "record, e.g. softmax(X @ B), has no rule: the mediant bound needs public weights)"
        )
    return xp.asarray(w.lo)


def _components(params, family: str, hurdle: bool = False) -> list[Nested]:
    """The components; a hurdle's ``Truncated`` positive part is read as its base (the
    truncation at ``lower=1`` is the hurdle's own, see the module docstring). In a plain mixture a
    ``Truncated`` component stays one (its normaliser is part of its log-density): refused."""
    comps = list(params[1:])
    if not comps or not all(isinstance(c, Nested) for c in comps):
        raise UnsupportedFactorError(
            f"a {family} factor's parameters must be the weights then one Nested per component"
        )
    if hurdle:
        return [Nested(_base_op(c.op), c.params) for c in comps]
    return comps


def _check_components(comps: list[Nested], family: str) -> None:
    """Refuse components without a rule and components of different support types."""
    missing = [_name(c.op) for c in comps if not _has_lipschitz_rule(c.op)]
    if missing:
        raise UnsupportedFactorError(
            f"the {family} component(s) {', '.join(missing)} have no Lipschitz rule (components: "
            f"{', '.join(_name(c.op) for c in comps)})"
        )
    kinds = {_support_kind(c.op) for c in comps} - {None}
    if len(kinds) > 1:
        raise UnsupportedFactorError(
            f"the {family} components {', '.join(_name(c.op) for c in comps)} mix discrete and "
            "continuous supports: their log-densities are in different units and no bound "
            "compares them"
        )
    for c in comps:
        if getattr(c.op, "ndim_supp", 0) != 0:
            raise UnsupportedFactorError(
                f"the {family} component {_name(c.op)} is multivariate; only scalar components "
                "are supported"
            )


def _component_range(comp: Nested, domain: Domain, xp, family: str):
    try:
        return log_density_range(comp.op, domain, comp.params, xp)
    except UnsupportedFactorError as err:
        raise UnsupportedFactorError(f"{family} component {_name(comp.op)}: {err}") from err


def _atom_structure(comps: list[Nested]):
    """``(i_atom, atom, base)`` when the components are a ``DiracDelta`` and one other, else
    None; a ``DiracDelta`` in any other arrangement is refused."""
    atoms = [i for i, c in enumerate(comps) if isinstance(c.op, DiracDeltaRV)]
    if not atoms:
        return None
    if len(comps) != 2 or len(atoms) != 1:
        raise UnsupportedFactorError(
            "a mixture with a point mass (DiracDelta) component: a point mass has an infinite "
            "constant, so only the zero-inflated form (one DiracDelta and one discrete base: "
            "pm.ZeroInflatedPoisson, ...) is supported"
        )
    i = atoms[0]
    return i, comps[i], comps[1 - i]


def _atom_value(atom: Nested, xp) -> int:
    (c,) = atom.params
    if isinstance(c, Bounds):
        if not c.is_point:
            raise UnsupportedFactorError("the value of a DiracDelta component cannot read private data")
        c = c.lo
    v = np.asarray(c) if xp.name == "numpy" else _constant(c)
    if v is None or np.ndim(v) != 0 or not float(v).is_integer():
        raise UnsupportedFactorError(
            "a zero-inflated component needs a constant integer DiracDelta value (PyMC's is 0)"
        )
    return int(v)


def _domain_pieces(domain: Domain, family: str) -> list[Domain]:
    """A partition of ``domain`` for the weighted range bound (every value in one piece)."""
    if isinstance(domain, Integers):
        lo, hi = domain.lo, domain.hi
        n = hi - lo + 1
        if n <= DISCRETE_ENUMERATE:
            return [Integers(v, v) for v in range(lo, hi + 1)]
        edges = np.linspace(lo, hi + 1, DISCRETE_ENUMERATE + 1).round().astype(int)
        return [Integers(int(a), int(b) - 1) for a, b in zip(edges[:-1], edges[1:]) if b > a]
    if isinstance(domain, Interval):
        edges = np.linspace(domain.lo, domain.hi, CONTINUOUS_PIECES + 1)
        return [Interval(float(a), float(b)) for a, b in zip(edges[:-1], edges[1:])]
    raise DomainError(
        f"a {family} factor needs an elementwise domain (Interval, Integers, Binary) for its "
        f"observed data, got {domain}"
    )


# --------------------------------------------------------------------------- general mixture


def mediant_lipschitz(domain: Domain, w, comps: list[Nested], xp, batched: bool):
    """``max_k L_k``, over the components with a nonzero weight (the mediant bound).

    Derivation. For records ``x = (y, z)`` and ``x' = (y', z')`` and one ``theta``, with
    ``a_k = f_k(y; eta_k(z)) >= 0`` and ``b_k = f_k(y'; eta_k(z')) > 0``,

    .. math:: \\frac{\\sum_k w_k a_k}{\\sum_k w_k b_k} \\le \\max_{k: w_k > 0} \\frac{a_k}{b_k}

    (the mediant inequality: ``sum_k w_k a_k = sum_k w_k b_k (a_k / b_k)`` is a weighted mean of
    the ratios). Taking logarithms, the change of the mixture's log-density is at most the
    largest change of one component's log-density between the same two records, which is at most
    that component's constant ``L_k`` (its range over the domain and its own windows). Nothing is
    assumed of the weights but that they are public and sum to one; a component of weight 0
    drops out of both sums. The bound is attained when the weights sit at a vertex ``w = e_k``.
    """
    if batched:
        (comp,) = comps
        L = element_lipschitz(comp.op, domain, comp.params, xp)
        # the component axis is the last one (PyMC's single batched component)
        return xp.amax(xp.where(w > 0, L, -np.inf), axis=-1)
    values = []
    for k, comp in enumerate(comps):
        L = element_lipschitz(comp.op, domain, comp.params, xp)
        values.append(xp.where(w[..., k] > 0, L, -np.inf))
    return _max_all(values, xp)


def _weighted_piece_range(piece: Domain, lnw, comps, xp, batched, family):
    if batched:
        (comp,) = comps
        lo, hi = _component_range(comp, piece, xp, family)
        return xp.logsumexp(lnw + lo, axis=-1), xp.logsumexp(lnw + hi, axis=-1)
    los, his = [], []
    for k, comp in enumerate(comps):
        lo, hi = _component_range(comp, piece, xp, family)
        los.append(lnw[..., k] + lo)
        his.append(lnw[..., k] + hi)
    return _lse_list(los, xp), _lse_list(his, xp)


@register_rule(MixtureRV, "Mixture", ("w", *(f"comp{i}" for i in range(MAX_COMPONENTS))))
def mixture_range(op, domain, params, xp):
    """Range of a mixture's log-density: exact for zero-inflated mixtures, else a sound range.

    Zero-inflated structure (one ``DiracDelta`` and one base): :func:`zero_inflated_range`.

    General mixture -- the *weighted range bound*. Cut the domain into pieces ``D_j``
    (:func:`_domain_pieces`: every integer of a small integer domain, else
    :data:`CONTINUOUS_PIECES` sub-intervals or :data:`DISCRETE_ENUMERATE` blocks). For y in
    ``D_j`` and every value of the components' windows, ``f_k(y) in [e^{lo_kj}, e^{hi_kj}]``
    with ``(lo_kj, hi_kj)`` component k's registered range over ``D_j``, hence

    .. math:: \\ln \\sum_k w_k e^{lo_{kj}} \\le \\ln p(y) \\le \\ln \\sum_k w_k e^{hi_{kj}},

    and the range is ``[min_j LSE_k(ln w_k + lo_kj), max_j LSE_k(ln w_k + hi_kj)]``. Sound for
    any partition. Exact for an enumerated integer domain with point parameters (each piece is
    one value and ``lo_kj = hi_kj = ln f_k(y)``); with windows it lets each component use its own
    worst predictor value, which one record cannot do for all components at once (a bound). Its
    width never exceeds the mediant bound: with one piece,
    ``sum_k w_k e^{hi_k} / sum_k w_k e^{lo_k} <= max_k e^{hi_k - lo_k}`` (the mediant inequality),
    and a finer partition only narrows the range.
    """
    comps = _components(params, "Mixture")
    structure = _atom_structure(comps)
    w = _weights(params[0], xp)
    with np.errstate(divide="ignore"):
        if structure is not None:
            i_atom, atom, base = structure
            return zero_inflated_range(domain, w, i_atom, atom, base, xp)
        _check_components(comps, "Mixture")
        missing = [_name(c.op) for c in comps if not _has_range_rule(c.op)]
        if missing:
            raise UnsupportedFactorError(
                f"the Mixture component(s) {', '.join(missing)} have a constant but no log-density "
                "range: use element_lipschitz (the mediant bound)"
            )
        batched = len(comps) == 1
        lnw = xp.log(w)
        los, his = [], []
        for piece in _domain_pieces(domain, "Mixture"):
            lo, hi = _weighted_piece_range(piece, lnw, comps, xp, batched, "Mixture")
            los.append(lo)
            his.append(hi)
        return _min_all(los, xp), _max_all(his, xp)


@register_lipschitz(MixtureRV)
def mixture_lipschitz(op, domain, params, xp):
    """``L`` of one element of a ``pm.Mixture`` / ``pm.NormalMixture`` / zero-inflated factor.

    Zero-inflated: ``hi - lo`` of the exact :func:`zero_inflated_range`. Otherwise the smaller of
    the weighted range bound (:func:`mixture_range`, when every component has a range rule) and
    the mediant bound (:func:`mediant_lipschitz`) -- both sound, the first never larger than the
    second up to rounding. A bound, not exact; see ``docs/rules/mixture.md`` for the measured
    looseness.
    """
    comps = _components(params, "Mixture")
    if _atom_structure(comps) is not None:
        lo, hi = mixture_range(op, domain, params, xp)
        return hi - lo
    _check_components(comps, "Mixture")
    w = _weights(params[0], xp)
    batched = len(comps) == 1
    with np.errstate(divide="ignore"):
        med = mediant_lipschitz(domain, w, comps, xp, batched)
        if all(_has_range_rule(c.op) for c in comps):
            lo, hi = mixture_range(op, domain, params, xp)
            return xp.minimum(hi - lo, med)
        return med


# --------------------------------------------------------------------------- zero-inflated


def zero_inflated_range(domain: Domain, w, i_atom: int, atom: Nested, base: Nested, xp):
    """Exact range of a zero-inflated log-pmf (PyMC ``ZeroInflatedPoisson / NegativeBinomial /
    Binomial``): a point mass at ``c`` (``c = 0``) of weight ``w_a = 1 - psi`` and a discrete
    base of weight ``w_b = psi``.

    Derivation. ``P(c) = w_a + w_b f(c)`` and ``P(y) = w_b f(y)`` for ``y != c``. Let
    ``(l_c, h_c)`` be the base's range of ``ln f(c)`` over its windows (its rule on the domain
    ``{c}``) and ``(l_r, h_r)`` its range over the rest of the domain (its rule on
    ``{lo..c-1}`` and ``{c+1..hi}``). ``ln(w_a + w_b e^u)`` increases in ``u``, so over the
    windows ``ln P(c)`` ranges over ``[ln(w_a + w_b e^{l_c}), ln(w_a + w_b e^{h_c})]`` exactly
    (both ends attained where the base's are), and ``ln P(y), y != c`` over
    ``ln w_b + [l_r, h_r]``. The value and the predictor of a record vary independently, so the
    range of the union is attained and ``L = hi - lo`` is exact whenever the base's rule is.
    With ``c`` outside the domain, ``L`` is the base's (``ln w_b`` cancels).
    """
    family = "zero-inflated " + _name(base.op)
    if _support_kind(base.op) != "discrete":
        raise UnsupportedFactorError(
            f"a {family} mixture: a point mass mixed with a continuous density has no common "
            "unit (PyMC's logp adds a probability to a density); only discrete bases are supported"
        )
    if not _has_range_rule(base.op):
        raise UnsupportedFactorError(f"the {family} base has no Lipschitz rule")
    if not isinstance(domain, Integers):
        raise DomainError(
            f"a {family} factor observes counts: declare its data with Integers(lo, hi), not {domain}"
        )
    c = _atom_value(atom, xp)
    ln_wa = xp.log(w[..., i_atom])
    ln_wb = xp.log(w[..., 1 - i_atom])
    los, his = [], []
    if domain.lo <= c <= domain.hi:
        l_c, h_c = _component_range(base, Integers(c, c), xp, family)
        los.append(xp.logaddexp(ln_wa, ln_wb + l_c))
        his.append(xp.logaddexp(ln_wa, ln_wb + h_c))
    for a, b in ((domain.lo, min(domain.hi, c - 1)), (max(domain.lo, c + 1), domain.hi)):
        if a <= b:
            l_r, h_r = _component_range(base, Integers(a, b), xp, family)
            los.append(ln_wb + l_r)
            his.append(ln_wb + h_r)
    return _min_all(los, xp), _max_all(his, xp)


# --------------------------------------------------------------------------- hurdle


def _log_mean_bounds(mu: Bounds, xp):
    """``(t_lo, t_hi)`` with ``t = ln mu`` from a Poisson mean given as ``natural`` or
    ``log-mean`` Bounds."""
    if mu.space == "log-mean":
        return xp.asarray(mu.lo), xp.asarray(mu.hi)
    if mu.space != "natural":
        raise UnsupportedFactorError(f"a hurdle Poisson mean on the {mu.space!r} scale")
    t_lo = xp.log(xp.asarray(mu.lo))
    return t_lo, (t_lo if mu.is_point else xp.log(xp.asarray(mu.hi)))


def _ztp_logpmf(y, t, xp):
    """Zero-truncated Poisson log-pmf ``y t - e^t - ln y! - ln(1 - e^{-e^t})``, y >= 1."""
    mu = xp.exp(t)
    return y * t - mu - xp.gammaln(y + 1.0) - _log1mexp(-mu, xp)


def _ztp_argmax_log_mean(ys: np.ndarray) -> np.ndarray:
    """``t*(y) = ln mu*(y)``, the maximiser over ``t`` of the zero-truncated Poisson log-pmf of
    ``y``: the root of ``m(mu) = mu / (1 - e^{-mu}) = y``, ``mu* = y + W_0(-y e^{-y})``
    (``-inf`` for y = 1, where the log-pmf decreases in ``t``)."""
    ys = np.asarray(ys, dtype=float)
    out = np.full(ys.shape, -np.inf)
    big = ys >= 2
    yb = ys[big]
    mu = yb + np.real(sp.lambertw(-yb * np.exp(-yb), 0))
    out[big] = np.log(mu)
    return out


def hurdle_poisson_range(domain: Integers, ln_w0, ln_w1, mu: Bounds, xp):
    """Exact range of PyMC's ``HurdlePoisson`` log-pmf; ``mu`` a point or a window (natural or
    ``log-mean``).

    Derivation. ``P(0) = w_0 = 1 - psi`` and, for y >= 1, ``ln P(y) = ln w_1 + h(y, t)`` with
    ``t = ln mu`` and the zero-truncated Poisson log-pmf

    .. math:: h(y, t) = y t - e^t - \\ln y! - \\ln(1 - e^{-e^t}).

    ``d h / d t = y - m(mu)`` with ``m(mu) = mu / (1 - e^{-mu})`` the zero-truncated mean,
    increasing from 1 (mu -> 0) to infinity (``m' > 0`` because ``e^mu > 1 + mu``), so ``h`` is
    concave in t for every y. Hence (i) for each y the max over the window is at
    ``clip(t*(y), t_lo, t_hi)``, ``t*(y) = ln(y + W_0(-y e^{-y}))`` (the root of ``m = y``;
    ``-inf`` for y = 1, where ``h`` decreases), enumerated over the domain's y >= 1 (the
    ``t*(y)`` are NumPy constants); (ii) the min over the window is at an end, and for a fixed t,
    ``h`` is concave in y (``-ln y!``), so the min over y is at an end of ``{max(lo,1)..hi}``:
    the minimum is one of the four corners. The zero adds ``ln w_0``. Every value is attained
    (the record's value and predictor vary independently): exact.
    """
    lo_x, hi_x = domain.lo, domain.hi
    t_lo, t_hi = _log_mean_bounds(mu, xp)
    los, his = [], []
    if lo_x <= 0 <= hi_x:
        los.append(ln_w0 + 0.0 * t_lo)
        his.append(ln_w0 + 0.0 * t_lo)
    ya = max(lo_x, 1)
    if ya <= hi_x:
        ys = np.arange(ya, hi_x + 1, dtype=float)
        t_star = _ztp_argmax_log_mean(ys)
        tc = xp.clip(xp.asarray(t_star), xp.asarray(t_lo)[..., None], xp.asarray(t_hi)[..., None])
        top = xp.amax(_ztp_logpmf(xp.asarray(ys), tc, xp), axis=-1)
        corners = [
            _ztp_logpmf(xp.asarray(float(y)), t, xp) for y in (ya, hi_x) for t in (t_lo, t_hi)
        ]
        his.append(ln_w1 + top)
        los.append(ln_w1 + _min_all(corners, xp))
    return _min_all(los, xp), _max_all(his, xp)


def hurdle_discrete_range(domain: Integers, ln_w0, ln_w1, base: Nested, xp):
    """Range of a discrete hurdle log-pmf composed from the base's registered rule: exact for
    point base parameters, a sound bound for windows.

    Derivation. PyMC's hurdle truncates the base at ``lower=1``:
    ``ln P(y) = ln w_1 + ln f(y) - ln(1 - f(0))`` for y >= 1 (``f(0) = F(0)``, the base has no
    mass below 0), ``ln P(0) = ln w_0``. With ``(l_0, h_0)`` the base's range of ``ln f(0)`` (its
    rule on ``{0}``) and ``(l_r, h_r)`` its range over ``{max(lo,1)..hi}``, and
    ``-ln(1 - e^u)`` increasing in u,
    ``ln P(y) in ln w_1 + [l_r - ln(1 - e^{l_0}), h_r - ln(1 - e^{h_0})]``. For point parameters
    ``l_0 = h_0`` is one constant and the range is exact; a window lets the normaliser and the
    pmf take their worst values at different predictor values (a bound; the Poisson has its own
    exact rule, :func:`hurdle_poisson_range`).
    """
    family = "hurdle " + _name(base.op)
    los, his = [], []
    if domain.lo <= 0 <= domain.hi:
        los.append(ln_w0)
        his.append(ln_w0)
    ya = max(domain.lo, 1)
    if ya <= domain.hi:
        l_0, h_0 = _component_range(base, Integers(0, 0), xp, family)
        l_r, h_r = _component_range(base, Integers(ya, domain.hi), xp, family)
        los.append(ln_w1 + l_r - _log1mexp(l_0, xp))
        his.append(ln_w1 + h_r - _log1mexp(h_0, xp))
    return _min_all(los, xp), _max_all(his, xp)


def hurdle_negative_binomial_range(domain: Integers, ln_w0, ln_w1, base: Nested, xp):
    """Exact range of PyMC's ``HurdleNegativeBinomial`` log-pmf with ``mu`` a window (natural
    ``p`` interval or ``log-mean``), for a domain starting at 0 or 1; point parameters and
    domains starting at 2 or above go through :func:`hurdle_discrete_range` (exact at a point,
    a bound for a window).

    Derivation. With ``t = ln mu``, ``h(y, t) = ln NB(y; mu, alpha) - ln(1 - p_0(t))`` for
    y >= 1, ``p_0 = NB(0) = (alpha / (alpha + mu))^alpha``. Differentiating,
    ``d_t h = alpha (y - m(mu)) / (alpha + mu)`` with ``m(mu) = mu / (1 - p_0)`` the mean of the
    zero-truncated NB, which increases with mu (the NB family is MLR-increasing in mu for a fixed
    alpha, truncation keeps the order): ``h(y, .)`` is unimodal in t, decreasing for y = 1
    (``m > 1``), peaking where ``m = y`` otherwise. Hence

    * the minimum is at a corner: t at an end (unimodal), y at an end of ``{max(lo,1)..hi}``
      (the truncated pmf has the NB's shape in y: log-concave for alpha >= 1, decreasing below);
    * the maximum of ``G(y) = max_t h(y, t)``: let ``y_c = ceil(m(mu_lo)) - 1 >= 1``. For
      ``y <= y_c``, ``m(mu_lo) > y`` puts the peak below ``t_lo``, so ``G(y) = h(y, t_lo)``,
      unimodal in y with its top at the NB mode ``floor((alpha - 1)_+ mu_lo / alpha)``. For
      ``y >= y_c`` G does not increase: the best ``t^`` of ``y + 1`` is at most its peak, so
      ``mu^ < y + 1`` (``m(mu) > mu``), and the pmf ratio
      ``NB(y+1)/NB(y) = (y + alpha) mu^ / ((y + 1)(alpha + mu^)) <= 1`` (the truncation
      constant cancels at one t), so ``G(y+1) <= h(y, t^) <= G(y)``. With ``lo <= 1`` the
      maximum is therefore ``h(y, t_lo)`` at the NB mode clipped to ``{1..min(y_c, hi)}``; the
      candidates ``mode + {-1, 0, 1}`` and ``y_c + {-1, 0, 1}`` (clipped to the domain, each
      value ``h(y, t_lo) <= G(y)``) absorb rounding.

    The zero adds ``ln w_0``. Exact. The NB log-pmf is :func:`pymc_dp.rules.count.nb_logpmf`
    (PyMC's, including its switch to the Poisson above alpha = 1e10).
    """
    n, p = base.params
    try:
        from pymc_dp.rules.count import nb_logpmf, nb_window
    except ImportError:  # pragma: no cover - the NegativeBinomial rule's helpers moved
        return hurdle_discrete_range(domain, ln_w0, ln_w1, base, xp)
    if p.is_point or domain.lo >= 2 or not n.is_point:
        return hurdle_discrete_range(domain, ln_w0, ln_w1, base, xp)
    alpha = xp.asarray(n.lo)
    s_lo, s_hi = nb_window(p, alpha, xp)

    def h(y, s):
        return nb_logpmf(y, alpha, s, xp) - _log1mexp(nb_logpmf(0.0, alpha, s, xp), xp)

    los, his = [], []
    if domain.lo <= 0 <= domain.hi:
        los.append(ln_w0 + 0.0 * s_lo)
        his.append(ln_w0 + 0.0 * s_lo)
    ya, hi_x = 1, domain.hi
    if ya <= hi_x:
        corners = [h(xp.asarray(float(y)), s) for y in (ya, hi_x) for s in (s_lo, s_hi)]
        # candidates only steer the search (each is evaluated exactly); cap e^s far above any domain
        e_s = xp.exp(xp.minimum(s_lo, 700.0))
        mu_lo = alpha * e_s
        mode = xp.floor(xp.maximum(alpha - 1.0, 0.0) * e_s)
        m_lo = mu_lo / xp.exp(_log1mexp(nb_logpmf(0.0, alpha, s_lo, xp), xp))
        y_c = -xp.floor(-xp.minimum(m_lo, xp.asarray(1e300))) - 1.0
        tops = [
            h(xp.clip(c + k, float(ya), float(hi_x)), s_lo) for c in (mode, y_c) for k in (-1.0, 0.0, 1.0)
        ]
        his.append(ln_w1 + _max_all(tops, xp))
        los.append(ln_w1 + _min_all(corners, xp))
    return _min_all(los, xp), _max_all(his, xp)


def hurdle_continuous_range(zero: bool, positive: Interval | None, ln_w0, ln_w1, base: Nested, xp):
    """Exact range of a continuous hurdle log-density (``HurdleGamma``, ``HurdleLogNormal``).

    ``zero``: whether the record may be 0; ``positive``: the interval of its positive values (None
    when it is always 0).

    Derivation. PyMC's continuous hurdle uses the base density untruncated:
    ``ln p(0) = ln w_0`` (an atom: a probability) and ``ln p(y) = ln w_1 + ln f(y)`` for y > 0 (a
    density, units 1/y). The range is the union of ``{ln w_0}`` and ``ln w_1 + [l_f, h_f]``,
    ``(l_f, h_f)`` the base's range over the positive values: exact when the base's rule is.
    Nothing cancels between the atom and the density (as for censored likelihoods,
    docs/theory/glm.md#censored): L changes with the unit of y, and it is bounded only when the
    positive values are bounded away from 0 (``ln f(y) -> -inf`` or ``+inf`` as y -> 0 for a
    Gamma of shape != 1 and for every LogNormal), ``psi`` is bounded away from 0 and 1, and the
    base's scale is bounded on both sides (``sigma -> 0``: the density -> inf; ``-> inf``: -> 0).
    Without zeros (``positive`` only) ``ln w_1`` cancels and L is the base's.
    """
    los, his = [], []
    if zero:
        los.append(ln_w0)
        his.append(ln_w0)
    if positive is not None:
        family = "hurdle " + _name(base.op)
        l_f, h_f = _component_range(base, positive, xp, family)
        los.append(ln_w1 + l_f)
        his.append(ln_w1 + h_f)
    return _min_all(los, xp), _max_all(his, xp)


def _continuous_hurdle_parts(domain: Domain, family: str):
    if not isinstance(domain, Interval):
        raise DomainError(f"a {family} factor observes real values: declare Interval(lo, hi), not {domain}")
    if domain.lo < 0:
        raise DomainError(f"{family} data are non-negative but the declared domain starts at {domain.lo:g}")
    if domain.lo == 0:
        raise DomainError(
            f"a {family} factor with zeros in its domain {domain}: its positive values have a "
            "density that is unbounded (or vanishes) near 0, so the constant is infinite unless the "
            "positive values are bounded away from 0. Declare Interval(a, hi) with a > 0 when the "
            "data have no zeros; a domain {0} U [a, hi] is not available yet."
        )
    return False, domain


def _hurdle_parts(params, family):
    comps = _components(params, family, hurdle=True)
    structure = _atom_structure(comps)
    if structure is None:
        raise UnsupportedFactorError(f"a {family} without its point mass at 0")
    i_atom, atom, base = structure
    return i_atom, atom, base


@register_rule(_HurdleRV, "Hurdle", ("w", "zero_dist", "nonzero_dist"))
def hurdle_range(op, domain, params, xp):
    """Exact range of a hurdle log-density (``pm.HurdlePoisson``, ``HurdleNegativeBinomial``,
    ``HurdleGamma``, ``HurdleLogNormal``).

    PyMC's ``_HurdleRV`` logp is ``ln(1 - psi)`` at 0 and ``ln psi + logp(nonzero, y)`` above
    (``psi = w[..., 1]``), with the nonzero part ``Truncated(base, lower=1)`` for counts and the
    base itself for real values. Poisson: :func:`hurdle_poisson_range` (exact with windows);
    other counts: :func:`hurdle_discrete_range` (exact for point parameters); real values:
    :func:`hurdle_continuous_range`.
    """
    i_atom, atom, base = _hurdle_parts(params, "Hurdle")
    family = "hurdle " + _name(base.op)
    if not _has_range_rule(base.op):
        raise UnsupportedFactorError(f"the {family} base has no Lipschitz rule")
    w = _weights(params[0], xp)
    with np.errstate(divide="ignore"):
        ln_w0 = xp.log(w[..., i_atom])
        ln_w1 = xp.log(w[..., 1 - i_atom])
        if _support_kind(base.op) == "discrete":
            if not isinstance(domain, Integers):
                raise DomainError(
                    f"a {family} factor observes counts: declare Integers(lo, hi), not {domain}"
                )
            if domain.lo < 0:
                raise DomainError(f"{family} data are non-negative but the declared domain is {domain}")
            if isinstance(base.op, PoissonRV):
                (mu,) = base.params
                return hurdle_poisson_range(domain, ln_w0, ln_w1, mu, xp)
            if isinstance(base.op, NegBinomialRV):
                return hurdle_negative_binomial_range(domain, ln_w0, ln_w1, base, xp)
            return hurdle_discrete_range(domain, ln_w0, ln_w1, base, xp)
        zero, positive = _continuous_hurdle_parts(domain, family)
        return hurdle_continuous_range(zero, positive, ln_w0, ln_w1, base, xp)


# --------------------------------------------------------------------------- regions


def _region_weights(w) -> tuple[np.ndarray, np.ndarray]:
    if isinstance(w, Span):
        return np.asarray(w.lo, float), np.asarray(w.hi, float)
    if isinstance(w, Bounds) and w.is_point:
        v = np.asarray(w.lo, float)
        return v, v
    raise NoRegionRule("the weights of a mixture cannot read private data (give them as a Span)")


def _slice_last(v, k: int, K: int):
    v = np.asarray(v, float)
    if v.ndim == 0:
        return v
    if v.shape[-1] == K:
        return v[..., k]
    if v.shape[-1] == 1:
        return v[..., 0]
    raise NoRegionRule(f"a batched mixture parameter of shape {v.shape} does not match {K} components")


def _slice_region_param(p, k: int, K: int):
    if isinstance(p, Span):
        return Span(_slice_last(p.lo, k, K), _slice_last(p.hi, k, K))
    if isinstance(p, Window):
        return dataclasses.replace(
            p, o_lo=_slice_last(p.o_lo, k, K), o_hi=_slice_last(p.o_hi, k, K), half=_slice_last(p.half, k, K)
        )
    if isinstance(p, NestedRegion):
        raise NoRegionRule("a batched mixture component with a nested component")
    raise NoRegionRule(f"a mixture component parameter of kind {type(p).__name__}")


def _region_components(params, family, hurdle: bool = False) -> list[NestedRegion]:
    comps = list(params[1:])
    if not comps or not all(isinstance(c, NestedRegion) for c in comps):
        raise NoRegionRule(f"a {family} region needs the weights then one NestedRegion per component")
    if hurdle:
        return [NestedRegion(_base_op(c.op), c.params) for c in comps]
    return comps


def mixture_region(op, domain, params) -> np.ndarray:
    """Region rule of ``MixtureRV``: the sup over a region of a mixture's constant, per element.

    General mixture: ``max_k`` of each component's :func:`region_lipschitz` (its own registered
    region rule), over the components whose weight can be nonzero in the region; a batched
    component (``pm.NormalMixture``) is split along its last axis into its K components.
    Sound by the mediant bound (:func:`mediant_lipschitz`), which holds at every ``theta``
    whatever the weights. Exact when the region lets the weights approach the vertex ``e_k`` of
    the worst component (free weights, e.g. an untruncated Dirichlet), since there the mixture is
    that component; loose when the weights are kept away from the vertices.

    Zero-inflated: :func:`_atom_base_region`.
    """
    w_lo, w_hi = _region_weights(params[0])
    comps = _region_components(params, "Mixture")
    atoms = [i for i, c in enumerate(comps) if isinstance(c.op, DiracDeltaRV)]
    if atoms:
        if len(comps) != 2 or len(atoms) != 1:
            raise NoRegionRule(
                "a mixture with a point mass (DiracDelta) component: only the zero-inflated form "
                "(one DiracDelta and one discrete base) is supported"
            )
        i_atom = atoms[0]
        atom, base = comps[i_atom], comps[1 - i_atom]
        atom_fixed = Nested(atom.op, tuple(_span_point(p) for p in atom.params))
        c = _atom_value(atom_fixed, NP)
        if not (isinstance(domain, Integers) and domain.lo <= c <= domain.hi):
            # without the atom's value in the domain ln psi cancels: the base's own constant
            return _delegate_region(base, domain, "zero-inflated")

        def per_theta(w, base_bounds):
            lo, hi = zero_inflated_range(domain, w, i_atom, atom_fixed, Nested(base.op, base_bounds), NP)
            return np.asarray(hi, float) - np.asarray(lo, float)

        return _atom_base_region(w_lo, w_hi, i_atom, base, per_theta, "zero-inflated " + _name(base.op))
    _check_components([Nested(c.op, ()) for c in comps], "Mixture")
    if len(comps) == 1:
        (comp,) = comps
        K = int(w_hi.shape[-1]) if w_hi.ndim else 1
        split = [
            NestedRegion(comp.op, tuple(_slice_region_param(p, k, K) for p in comp.params))
            for k in range(K)
        ]
        w_hi_k = [w_hi[..., k] if w_hi.ndim else w_hi for k in range(K)]
        comps = split
    else:
        w_hi_k = [w_hi[..., k] for k in range(len(comps))]
    best = None
    for comp, whk in zip(comps, w_hi_k):
        try:
            L = np.asarray(region_lipschitz(comp.op, domain, comp.params), float)
        except NoRegionRule as err:
            raise NoRegionRule(f"Mixture component {_name(comp.op)}: {err}") from err
        L = np.where(np.asarray(whk) > 0, L, -np.inf)
        best = L if best is None else np.maximum(best, L)
    return best


def _span_point(p):
    if isinstance(p, Span):
        if not p.is_point:
            raise NoRegionRule("the value of a DiracDelta component must be fixed")
        return Bounds.point(np.asarray(p.lo, float))
    if isinstance(p, Bounds) and p.is_point:
        return p
    raise NoRegionRule("the value of a DiracDelta component must be fixed")


def _delegate_region(base: NestedRegion, domain, family):
    try:
        return np.asarray(region_lipschitz(base.op, domain, base.params), float)
    except NoRegionRule as err:
        raise NoRegionRule(f"{family} base {_name(base.op)}: {err}") from err


def hurdle_region(op, domain, params) -> np.ndarray:
    """Region rule of ``_HurdleRV``: see :func:`_atom_base_region`.

    A continuous hurdle whose domain excludes 0 (the only kind the current domains allow, see
    :func:`hurdle_continuous_range`) has the base's constant at every ``theta`` (``ln psi``
    cancels): its region rule is the base's own.
    """
    w_lo, w_hi = _region_weights(params[0])
    comps = _region_components(params, "Hurdle", hurdle=True)
    atoms = [i for i, c in enumerate(comps) if isinstance(c.op, DiracDeltaRV)]
    if len(comps) != 2 or len(atoms) != 1:
        raise NoRegionRule("a hurdle region needs its point mass at 0 and its base")
    i_atom = atoms[0]
    atom, base = comps[i_atom], comps[1 - i_atom]
    family = "hurdle " + _name(base.op)
    if _support_kind(base.op) != "discrete":
        _continuous_hurdle_parts(domain, family)  # refuses a domain with zeros
        return _delegate_region(base, domain, family)

    def per_theta(w, base_bounds):
        nested = [Bounds.point(w), None, None]
        nested[1 + i_atom] = Nested(atom.op, ())
        nested[2 - i_atom] = Nested(base.op, base_bounds)
        lo, hi = hurdle_range(op, domain, tuple(nested), NP)
        return np.asarray(hi, float) - np.asarray(lo, float)

    return _atom_base_region(w_lo, w_hi, i_atom, base, per_theta, family)


class _Sliding:
    """One base parameter that moves over the region: a window's offset or a Span, as a
    function of ``u in [0, 1]`` (per element ``lo + u (hi - lo)``)."""

    def __init__(self, index: int, param, op):
        self.index = index
        self.param = param
        self.op = op
        self.log_mean = isinstance(op, PoissonRV) and isinstance(param, Span) and _poisson_log_mean(op)
        if isinstance(param, Window):
            self.lo, self.hi = np.asarray(param.o_lo, float), np.asarray(param.o_hi, float)
        else:
            self.lo, self.hi = np.asarray(param.lo, float), np.asarray(param.hi, float)

    def _bounds(self, a, b):
        p = self.param
        if isinstance(p, Window):
            return Bounds(a - p.half, b + p.half, p.space, p.extra)
        if self.log_mean:
            return Bounds(np.log(a), np.log(b), "log-mean")
        return Bounds(a, b) if not np.array_equal(a, b) else Bounds.point(a)

    def piece(self, u0: float, u1: float) -> Bounds:
        d = self.hi - self.lo
        return self._bounds(self.lo + u0 * d, self.lo + u1 * d)

    def at(self, u: float) -> Bounds:
        v = self.lo + u * (self.hi - self.lo)
        p = self.param
        if isinstance(p, Window):
            return Bounds(v - p.half, v + p.half, p.space, p.extra)
        if self.log_mean:
            lv = np.log(v)
            return Bounds(lv, lv, "log-mean")
        return Bounds.point(v)


def _poisson_log_mean(op) -> bool:
    """Whether the registered Poisson rule needs an interval of ``mu`` on the log-mean scale
    (it may accept only ``log-mean`` windows); probed once."""
    try:
        log_density_range(op, Integers(0, 1), (Bounds(1.0, 2.0),), NP)
        return False
    except UnsupportedFactorError:
        return True


def _atom_base_region(w_lo, w_hi, i_atom, base: NestedRegion, per_theta: Callable, family: str,
                      rel_tol: float = 1e-3, max_pieces: int = 2048) -> np.ndarray:
    """Region rule for a point mass and a base (zero-inflated, discrete hurdle).

    ``per_theta(w, base_bounds)`` is the per-theta rule (NumPy). Claims, each proved in
    ``docs/rules/mixture.md``:

    * **psi: ends.** For fixed base ranges, the constant is the largest of a few *pair terms*
      (top of one record type minus bottom of another), each monotone in ``psi``: zero-inflated
      ``ln(1-psi+psi e^{h_c}) - ln(1-psi+psi e^{l_c})`` (increasing), ``h_r - l_r`` (constant),
      ``ln(1-psi+psi e^{h_c}) - ln psi - l_r`` (decreasing), ``ln psi + h_r -
      ln(1-psi+psi e^{l_c})`` (increasing); hurdle: ``0``, ``h - l``, ``ln(1-psi) - ln psi - l``
      (decreasing), ``ln psi + h - ln(1-psi)`` (increasing). A max of monotone functions peaks
      at an end, so ``psi in {psi_lo, psi_hi}`` (``psi`` from the weights' Span, with
      ``1 - psi`` the atom's weight).
    * **base ranges: monotone.** Every pair term increases with the base's ``hi`` values and
      decreases with its ``lo`` values, so the per-theta rule evaluated with a parameter given
      as an *interval* (a window's hull, or a Span as an interval) is >= the rule at every
      point of it (docs/theory/glm.md#lemma-b). Windows with a fixed offset: the widest window (exact);
      a window that does not slide at a fixed width (``Window.sliding`` False): its hull.
    * **one moving parameter: interval branch and bound.** A window whose offset moves, or a
      Span of a parameter the base accepts as an interval, is searched over ``u in [0, 1]``:
      a piece's bound is the rule at the piece's hull (sound by the monotonicity above), its
      ends are attained values; the worst piece is split until every element's bound is within
      ``rel_tol`` of an attained value. The result is the largest piece bound, sound whatever
      the stopping point. With two or more moving parameters every one takes its hull (sound,
      looser). A Span of a parameter the base does not accept as an interval (a NegativeBinomial
      ``alpha``) is refused.
    """
    psi_lo = np.maximum(w_lo[..., 1 - i_atom], 1.0 - w_hi[..., i_atom])
    psi_hi = np.minimum(w_hi[..., 1 - i_atom], 1.0 - w_lo[..., i_atom])
    psis = [psi_lo] if np.array_equal(psi_lo, psi_hi) else [psi_lo, psi_hi]
    info = rule_info(base.op)
    names = info.param_names if info is not None else tuple(f"p{i}" for i in range(len(base.params)))
    range_params = info.range_params if info is not None else frozenset()
    fixed: list = []
    sliding: list[_Sliding] = []
    for i, (name, p) in enumerate(zip(names, base.params)):
        if isinstance(p, Window):
            if np.array_equal(np.asarray(p.o_lo), np.asarray(p.o_hi)) or not getattr(p, "sliding", True):
                # a fixed offset: the widest window; a window that does not slide at a fixed
                # width (Window.sliding False): only its hull is known to contain it
                fixed.append(p.hull)
            else:
                fixed.append(None)
                sliding.append(_Sliding(i, p, base.op))
        elif isinstance(p, Span):
            if p.is_point:
                fixed.append(Bounds.point(np.asarray(p.lo, float)))
            elif name in range_params or isinstance(base.op, PoissonRV):
                fixed.append(None)
                sliding.append(_Sliding(i, p, base.op))
            else:
                raise NoRegionRule(
                    f"the {family} parameter {name!r} must be fixed over the truncation region "
                    "(no region rule covers it moving)"
                )
        elif isinstance(p, Bounds) and p.is_point:
            fixed.append(p)
        else:
            raise NoRegionRule(f"{family}: parameter {name!r} of kind {type(p).__name__}")

    def weights(psi):
        w = [None, None]
        w[i_atom] = 1.0 - psi
        w[1 - i_atom] = psi
        return np.stack(np.broadcast_arrays(*w), axis=-1)

    def evaluate(bounds: list) -> np.ndarray:
        vals = [np.asarray(per_theta(weights(psi), tuple(bounds)), float) for psi in psis]
        return vals[0] if len(vals) == 1 else np.maximum(*vals)

    if len(sliding) != 1:
        full = list(fixed)
        for s in sliding:
            full[s.index] = s.piece(0.0, 1.0)
        return evaluate(full)
    (s,) = sliding

    def with_param(b):
        full = list(fixed)
        full[s.index] = b
        return full

    cache: dict[float, np.ndarray] = {}

    def F(u):
        if u not in cache:
            cache[u] = evaluate(with_param(s.at(u)))
        return cache[u]

    pieces = [(0.0, 1.0, evaluate(with_param(s.piece(0.0, 1.0))))]
    F(0.0)
    F(1.0)
    for _ in range(max_pieces):
        attained = np.max(np.stack(list(cache.values())), axis=0)
        gaps = [np.max((pb - attained) / np.maximum(np.abs(attained), 1.0)) for _, _, pb in pieces]
        worst = int(np.argmax(gaps))
        if gaps[worst] <= rel_tol:
            break
        u0, u1, _ = pieces.pop(worst)
        mid = 0.5 * (u0 + u1)
        F(mid)
        pieces += [
            (u0, mid, evaluate(with_param(s.piece(u0, mid)))),
            (mid, u1, evaluate(with_param(s.piece(mid, u1)))),
        ]
    return np.max(np.stack([pb for _, _, pb in pieces]), axis=0)


register_region(MixtureRV, RegionSpec(custom=mixture_region))
register_region(_HurdleRV, RegionSpec(custom=hurdle_region))
