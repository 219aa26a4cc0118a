"""Graph matchers for the log-mean parametrisations (Poisson and negative binomial means, an
exponential's scale, a Gamma's scale).

The factor graph (:mod:`pymc_dp.factors`) hands these families' rules ``ln mu`` as a window
(``Bounds(..., space="log-mean")``). Users write the mean in PyMC's own forms, which these
matchers read back:

* :func:`match_nb_mean` -- ``mu`` from PyMC's ``p = alpha / (mu + alpha)`` of
  ``pm.NegativeBinomial(mu=..., alpha=...)`` (``alpha`` a variable, or a number that PyMC copies
  into both places: FOUND.md #3);
* :func:`log_of_indexed` -- ``ln(table[g]) = (ln table)[g]``: a positive parameter vector read
  through a private integer label (``Poisson(mu=rate[g])``, ``rate ~ Gamma``) is a log-mean read as
  ``log_rate[g]``, which :mod:`pymc_dp.predictor` takes as an indexed table (the hull of the rows
  the label's domain allows, exact: FOUND.md #6).

Layering: a rules module; it reads graphs only (:mod:`pymc_dp.predictor`'s ``strip_identity``).
"""

from __future__ import annotations

from typing import Callable

import pytensor.scalar as ps
import pytensor.tensor as pt
from pytensor.graph.basic import Variable, equal_computations
from pytensor.tensor.elemwise import DimShuffle, Elemwise
from pytensor.tensor.subtensor import AdvancedSubtensor, AdvancedSubtensor1

from pymc_dp.predictor import strip_identity

__all__ = ["canonical", "match_nb_mean", "log_of_indexed"]


def canonical(var: Variable) -> Variable:
    """``var`` up to identity operations and broadcasting, so that equal parameters match."""
    var = strip_identity(var)
    while var.owner is not None and isinstance(var.owner.op, DimShuffle) and var.owner.op.is_expand_dims:
        var = strip_identity(var.owner.inputs[0])
    return var


def match_nb_mean(p: Variable, n: Variable) -> Variable | None:
    """``mu`` when ``p`` is PyMC's ``n / (mu + n)`` (its NegativeBinomial(mu, alpha)), else None; ``n``
    matches as the same variable or an equal graph (a fixed ``alpha=2.0`` is three copies of it)."""

    def _same_alpha(a, b) -> bool:
        a, b = canonical(a), canonical(b)
        return a is b or equal_computations([a], [b])

    p = canonical(p)
    node = p.owner
    if node is None or not isinstance(node.op, Elemwise) or not isinstance(node.op.scalar_op, ps.TrueDiv):
        return None
    num, den = node.inputs
    if not _same_alpha(num, n):
        return None
    den = canonical(den)
    if den.owner is None or not isinstance(den.owner.op, Elemwise) or not isinstance(den.owner.op.scalar_op, ps.Add):
        return None
    terms = list(den.owner.inputs)
    for i, t in enumerate(terms):
        if _same_alpha(t, n) and len(terms) == 2:
            return terms[1 - i]
    return None


def log_of_indexed(var: Variable, reads_private: Callable[[Variable], bool]) -> Variable | None:
    """``(ln table)[idx...]`` when ``var`` is ``table[idx...]`` (advanced indexing) with a
    ``table`` that reads no private data, else None.

    ``ln`` commutes with indexing, elementwise and exactly: the log of the selected element is
    the selected element of the log. Whether the index is one a linear predictor accepts (a
    private integer label on the first axis) is :mod:`pymc_dp.predictor`'s to decide, with its
    own refusals. A table that is not positive (a Normal vector as a Poisson mean) has no log
    mean: its log is NaN there, which the region's solvers read as an unbounded constant, as
    PyMC's own log-density is undefined there.
    """
    node = var.owner
    if node is None or not isinstance(node.op, (AdvancedSubtensor, AdvancedSubtensor1)):
        return None
    table, *idx = node.inputs
    if reads_private(table) or not any(reads_private(i) for i in idx):
        return None
    return node.op.make_node(pt.log(table), *idx).outputs[0]
