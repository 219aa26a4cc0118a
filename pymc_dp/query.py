"""Answer queries from a released sample set (PSAQR, JMLR 2017 Alg. 2).

A release is a fixed set of N posterior draws (BAPS, JMLR Alg. 1). Every query is then answered
from those draws alone: :func:`answer` reads only ``idata.posterior`` (and the public
``attrs["pymc_dp"]``), never the data, so it is post-processing and costs **no further privacy
budget**, however many queries are asked and however they are chosen (also adaptively, from
earlier answers). It works the same on a release loaded back from NetCDF.

Two kinds of query:

* **a decision** -- :class:`Decision` ``(actions, utility)`` with ``utility(action, draw)`` in
  ``[0, 1]``: the answer is the action with the largest mean utility over the draws
  (Alg. 2: ``r in argmax_r sum_{theta in Theta_hat} u_theta(q, r)``);
* **a function of one draw** -- ``f(draw)``, ``draw`` a dict of variable name -> value: the
  answer is the mean of ``f`` over the draws, or ``reduce(values)`` for any other statistic.

The accuracy bound (JMLR Lemma 11, corrected for the number of actions)
-----------------------------------------------------------------------
Let ``u(a) = E_{theta ~ xi(. | x)} u_theta(a)`` be an action's expected utility under the
distribution the draws come from (the *truncated* posterior of the release), ``a*`` an action
maximising it, and ``a_hat`` the action PSAQR returns from N **iid** draws, for a finite set of
``K >= 2`` actions and utilities in ``[0, 1]``. Then, for every ``0 < delta < 1``,

    P[ u(a*) - u(a_hat) <= 2 sqrt(ln(K / delta) / (2 N)) ] >= 1 - delta.

Proof: if ``u(a_hat) < u(a*) - t`` then ``u_hat(a_hat) >= u_hat(a*)``, so either
``u_hat(a*) <= u(a*) - t/2`` or ``u_hat(a) >= u(a) + t/2`` for some ``a != a*``: K one-sided
Hoeffding events of probability ``<= exp(-N t^2 / 2)`` each. For ``K = 2`` this is exactly the
``2 sqrt(ln(2/delta) / (2N))`` of JMLR Lemma 11 (docs/theory/report_bounds.md#lemma-11). The paper's proof applies
Hoeffding's inequality "for all r" without a union bound, which holds for one action but not for
the maximum over many: with ``K > 2`` actions the ``ln(2/delta)`` form is not justified, and
this module reports the ``ln(K/delta)`` form. With ``K = 1`` the gap is 0. In addition, with
probability ``1 - delta`` *every* action's mean over the draws is within
``sqrt(ln(2K/delta) / (2N))`` of its expected utility (two-sided Hoeffding, union bound):
:attr:`Answer.radius`.

What the bound does **not** cover:

* **MCMC draws.** Hoeffding's inequality needs independent draws. Releases made by MCMC
  (``release.method == "mcmc"``) are autocorrelated and only approximately from the posterior:
  no bound is reported for them (``bound is None``) unless you pass ``iid=True`` and take the
  responsibility. Exact releases are iid draws of the truncated posterior.
* **The truncation.** "Optimal" means optimal under the truncated posterior the draws come from;
  the loss from truncating the prior (JMLR Thm 17's ``1 - xi(Theta_L)`` term) is not included.
* **Many queries at once.** The statement holds for each query with probability ``1 - delta``;
  for T queries to hold simultaneously, use ``delta / T`` for each (union bound).
* **Unbounded functions.** For a function query no bound is given unless you declare the
  function's range, ``value_range=(lo, hi)``: then (Hoeffding, two-sided) the mean over the
  draws is within ``(hi - lo) sqrt(ln(2/delta) / (2N))`` of the function's posterior mean with
  probability ``1 - delta``, for each component separately. Other statistics (``reduce=``, e.g.
  quantiles) get no bound.
* **Infinite action sets** (e.g. a continuous estimate): no bound; discretise the actions.
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Sequence

import numpy as np

__all__ = ["Decision", "Answer", "answer", "released_draws", "decision_bound", "hoeffding_radius"]


@dataclass(frozen=True)
class Decision:
    """An expected-utility query: choose one of ``actions``.

    Parameters
    ----------
    actions : sequence
        A finite set of candidate responses (any Python objects). Ties in mean utility go to
        the first action in this order (a public rule).
    utility : callable
        ``utility(action, draw) -> float`` in ``[0, 1]``, where ``draw`` is a dict of variable
        name -> value of one released draw. With ``vectorized=True``, ``utility(action, draws)``
        gets every draw at once (each value with a leading axis of length N) and returns N
        utilities.
    vectorized : bool
        See ``utility``.
    """

    actions: Sequence[Any]
    utility: Callable[[Any, Mapping[str, Any]], Any]
    vectorized: bool = False


@dataclass(frozen=True)
class Answer:
    """The answer to one query, with what can be said about its accuracy.

    Attributes
    ----------
    value : Any
        The answer: the chosen action (decision), or the statistic of the function's values.
    kind : {"decision", "function"}
    draws : int
        N, the number of released draws used (all of them).
    delta : float
        The failure probability of :attr:`bound`.
    bound : float or None
        Decision: with probability ``1 - delta``, ``value``'s expected utility is within
        ``bound`` of the best action's (``2 sqrt(ln(K/delta)/(2N))``, see the module docstring).
        Function: with probability ``1 - delta`` the mean is within ``bound`` of the posterior
        mean of ``f`` (only with ``value_range``). None when no bound holds.
    radius : float or None
        Decision: with probability ``1 - delta``, every action's mean is within ``radius`` of
        its expected utility (``sqrt(ln(2K/delta)/(2N))``).
    actions : tuple
        The actions, in the order given (decision only).
    means : numpy.ndarray or None
        The mean utility of each action over the draws (decision only).
    values : numpy.ndarray or None
        The function's value at each draw, shape ``(N, ...)`` (function only).
    iid : bool or None
        Whether the draws are iid posterior draws (exact release), False for MCMC, None unknown.
    statement : str
        What the bound says, in words.
    caveats : tuple of str
    """

    value: Any
    kind: str
    draws: int
    delta: float
    bound: float | None
    statement: str
    radius: float | None = None
    actions: tuple = ()
    means: np.ndarray | None = field(default=None, repr=False)
    values: np.ndarray | None = field(default=None, repr=False)
    iid: bool | None = None
    caveats: tuple[str, ...] = ()

    @property
    def best_index(self) -> int | None:
        """The index of the chosen action in :attr:`actions` (decision only)."""
        return None if self.means is None else int(np.argmax(self.means))

    def __str__(self) -> str:
        lines = [f"PSAQR answer ({self.kind}, N = {self.draws}): {self.value!r}"]
        if self.means is not None:
            for a, m in zip(self.actions, self.means):
                lines.append(f"  {a!r}: mean utility {m:.6g}")
        lines.append(f"  {self.statement}")
        lines.extend(f"  caveat: {c}" for c in self.caveats)
        return "\n".join(lines)


# --------------------------------------------------------------------------- bounds
def _check_delta(delta) -> float:
    if isinstance(delta, bool) or not isinstance(delta, numbers.Real) or not (0.0 < float(delta) < 1.0):
        raise ValueError(f"delta={delta!r} must be a number in (0, 1): the failure probability of the bound.")
    return float(delta)


def decision_bound(n_draws: int, n_actions: int, delta: float) -> float:
    """``2 sqrt(ln(K / delta) / (2 N))``: the gap to the best of K actions, w.p. ``1 - delta``.

    JMLR Lemma 11 with the union bound over ``K`` actions (module docstring); ``K = 2`` gives
    the paper's ``2 sqrt(ln(2/delta) / (2N))``, ``K = 1`` gives 0.
    """
    delta = _check_delta(delta)
    n, k = int(n_draws), int(n_actions)
    if n < 1 or k < 1:
        raise ValueError(f"need N >= 1 draws and K >= 1 actions, got N={n_draws!r}, K={n_actions!r}")
    if k == 1:
        return 0.0
    return 2.0 * math.sqrt(math.log(k / delta) / (2.0 * n))


def hoeffding_radius(n_draws: int, delta: float, width: float = 1.0, n_means: int = 1) -> float:
    """``width sqrt(ln(2 M / delta) / (2 N))``: two-sided Hoeffding for M means of N iid values in
    an interval of length ``width``, holding for all M at once with probability ``1 - delta``."""
    delta = _check_delta(delta)
    return float(width) * math.sqrt(math.log(2.0 * int(n_means) / delta) / (2.0 * int(n_draws)))


# --------------------------------------------------------------------------- draws
def _posterior(idata):
    posterior = getattr(idata, "posterior", None)
    if posterior is None:
        import xarray as xr

        if isinstance(idata, xr.Dataset):
            return idata
        raise TypeError(
            f"expected a released az.InferenceData (with a posterior group) or an xarray Dataset, got {type(idata).__name__}"
        )
    return posterior


def released_draws(idata) -> dict[str, np.ndarray]:
    """The released draws as ``{variable: array of shape (N, ...)}`` (chains concatenated)."""
    post = _posterior(idata)
    out = {}
    for name, da in post.data_vars.items():
        if "chain" in da.dims and "draw" in da.dims:
            da = da.transpose("chain", "draw", ...)
            v = np.asarray(da.values)
            out[str(name)] = v.reshape((v.shape[0] * v.shape[1],) + v.shape[2:])
        elif "draw" in da.dims:
            out[str(name)] = np.asarray(da.transpose("draw", ...).values)
        else:
            raise ValueError(f"posterior variable {name!r} has no 'draw' dimension: not a set of draws.")
    if not out:
        raise ValueError("the posterior has no variables: there are no draws to answer from.")
    sizes = {len(v) for v in out.values()}
    if len(sizes) != 1:  # pragma: no cover - xarray aligns chain/draw
        raise ValueError(f"posterior variables have different numbers of draws: {sizes}")
    return out


def _release_info(idata) -> dict | None:
    """The release record (:func:`pymc_dp.record.read`), or None where there is none or it is unreadable:
    the answer then says that it cannot state the release's guarantee."""
    from pymc_dp.record import read

    post = _posterior(idata)
    try:
        return read(idata if hasattr(idata, "groups") else post, required=False)
    except ValueError:
        return None


def _iid(info: dict | None, iid: bool | None) -> tuple[bool | None, list[str]]:
    caveats = []
    method = ((info or {}).get("release") or {}).get("method")
    if iid is not None:
        if method == "mcmc" and iid:
            caveats.append(
                "iid=True was given for an MCMC release: the bound treats autocorrelated, approximate "
                "draws as iid posterior draws, which they are not."
            )
        return bool(iid), caveats
    if method == "exact":
        return True, caveats
    if method == "mcmc":
        caveats.append(
            "MCMC release: the draws are autocorrelated and approximate, so Hoeffding's inequality "
            "does not apply and no accuracy bound is given (pass iid=True to compute it anyway)."
        )
        return False, caveats
    caveats.append(
        "the draws carry no pymc_dp release record: the bound assumes they are iid draws of the "
        "posterior, which cannot be checked here."
    )
    return None, caveats


def _one_draw(draws: Mapping[str, np.ndarray], i: int) -> dict[str, Any]:
    return {k: (v[i].item() if v.ndim == 1 else v[i]) for k, v in draws.items()}


# --------------------------------------------------------------------------- answer
def answer(
    idata,
    query,
    *,
    delta: float = 0.05,
    reduce: Callable[[np.ndarray], Any] | None = None,
    value_range: tuple[float, float] | None = None,
    vectorized: bool = False,
    iid: bool | None = None,
) -> Answer:
    """Answer ``query`` from the released draws (PSAQR, JMLR Alg. 2), at no privacy cost.

    Only the posterior draws (and the public release record) are read, never data: this is
    post-processing of the release, so any number of queries, chosen in any way, costs nothing
    beyond the release's own ``(epsilon, delta)``. Works on releases loaded with
    ``az.from_netcdf``. See the module docstring for exactly what the bound says.

    Parameters
    ----------
    idata : az.InferenceData
        A release of :meth:`PrivateModel.sample` (any InferenceData with a ``posterior`` group works;
        without a pymc_dp release record the draws are assumed iid, with a caveat).
    query : Decision or callable
        ``Decision(actions, utility)``: the action with the largest mean utility over the draws
        (utilities must be in ``[0, 1]``; a value outside raises ``ValueError`` naming the
        action). A callable ``f(draw) -> value`` (``draw``: dict of variable -> value of one
        draw): the mean of ``f`` over the draws, or ``reduce`` of its values.
    delta : float
        Failure probability of the accuracy bound (not a privacy parameter).
    reduce : callable, optional
        Function queries: ``reduce(values)`` on the array of shape ``(N, ...)`` of the
        function's values, instead of the mean; no bound is given then.
    value_range : (lo, hi), optional
        Function queries: the declared range of ``f``; gives the Hoeffding bound
        ``(hi - lo) sqrt(ln(2/delta)/(2N))`` on the mean (every value is checked to lie in it).
    vectorized : bool
        Function queries: ``f(draws)`` gets all draws at once (leading axis N) and returns N values.
        (For decisions, set ``Decision(..., vectorized=True)``.)
    iid : bool, optional
        Override whether the draws are treated as iid: by default exact releases are, MCMC
        releases are not (no bound), unrecorded draws are assumed to be (with a caveat).

    Returns
    -------
    Answer
        ``.value`` is the answer; ``.bound``, ``.statement`` and ``.caveats`` say how accurate it is.

    Examples
    --------
    >>> res = pymc_dp.answer(idata, pymc_dp.query.Decision([0.3, 0.5, 0.7], lambda a, d: float(d["p"] > a)))
    >>> res.value, res.bound          # the chosen threshold, its Lemma 11 gap
    >>> pymc_dp.answer(idata, lambda d: d["p"], value_range=(0, 1)).value   # posterior mean of p
    """
    delta = _check_delta(delta)
    draws = released_draws(idata)
    n = len(next(iter(draws.values())))
    is_iid, caveats = _iid(_release_info(idata), iid)
    bound_ok = is_iid is not False
    if isinstance(query, Decision):
        if reduce is not None or value_range is not None or vectorized:
            raise TypeError(
                "reduce=, value_range= and vectorized= are for function queries; a Decision takes "
                "vectorized= in its constructor and is answered by maximising the mean utility."
            )
        return _decide(query, draws, n, delta, is_iid, bound_ok, caveats)
    if not callable(query):
        raise TypeError(
            f"query must be a pymc_dp.query.Decision or a callable of one draw, got {type(query).__name__}"
        )
    return _evaluate(query, draws, n, delta, reduce, value_range, vectorized, is_iid, bound_ok, caveats)


def _decide(query: Decision, draws, n, delta, is_iid, bound_ok, caveats) -> Answer:
    actions = tuple(query.actions)
    if not actions:
        raise ValueError("Decision has no actions: give a finite, non-empty set of candidate responses.")
    k = len(actions)
    table = np.empty((k, n))
    for j, action in enumerate(actions):
        if query.vectorized:
            row = np.asarray(query.utility(action, draws), dtype=float)
            if row.shape != (n,):
                raise ValueError(
                    f"vectorized utility for action {action!r} returned shape {row.shape}; expected ({n},), "
                    "one utility per draw."
                )
        else:
            row = np.empty(n)
            for i in range(n):
                u = np.asarray(query.utility(action, _one_draw(draws, i)), dtype=float)
                if u.size != 1:
                    raise ValueError(f"utility for action {action!r} returned {u.size} values at draw {i}; expected one.")
                row[i] = u.reshape(())
        bad = ~((row >= 0.0) & (row <= 1.0))  # also NaN
        if np.any(bad):
            i = int(np.argmax(bad))
            raise ValueError(
                f"utility for action {action!r} is {row[i]!r} at draw {i}: utilities must lie in [0, 1] "
                "(Lemma 11's bound needs it). Rescale the utility, e.g. (u - lo) / (hi - lo) for known lo, hi."
            )
        table[j] = row
    means = table.mean(axis=1)
    best = int(np.argmax(means))  # first maximiser: a public tie-break
    if bound_ok:
        bound = decision_bound(n, k, delta)
        radius = hoeffding_radius(n, delta, 1.0, k)
        statement = (
            f"with probability >= {1 - delta:.6g}, the chosen action's expected utility under the "
            f"distribution of the draws is within {bound:.4g} of the best of the {k} actions "
            f"(2 sqrt(ln(K/delta)/(2N)), JMLR Lemma 11 with a union bound over K = {k} actions, N = {n} iid draws); "
            f"every action's mean is within {radius:.4g} of its expected utility"
        )
    else:
        bound = radius = None
        statement = "no accuracy bound: the draws are not iid posterior draws"
    return Answer(
        value=actions[best],
        kind="decision",
        draws=n,
        delta=delta,
        bound=bound,
        radius=radius,
        statement=statement,
        actions=actions,
        means=means,
        iid=is_iid,
        caveats=tuple(caveats),
    )


def _evaluate(f, draws, n, delta, reduce, value_range, vectorized, is_iid, bound_ok, caveats) -> Answer:
    if vectorized:
        values = np.asarray(f(draws))
        if values.ndim == 0 or values.shape[0] != n:
            raise ValueError(f"vectorized query returned shape {values.shape}; expected a leading axis of N = {n}.")
    else:
        values = np.asarray([np.asarray(f(_one_draw(draws, i))) for i in range(n)])
    if value_range is not None:
        lo, hi = (float(v) for v in value_range)
        if not (math.isfinite(lo) and math.isfinite(hi) and lo < hi):
            raise ValueError(f"value_range={value_range!r} must be finite (lo, hi) with lo < hi.")
        num = values.astype(float)
        bad = ~((num >= lo) & (num <= hi))
        if np.any(bad):
            i = np.unravel_index(int(np.argmax(bad)), bad.shape)
            raise ValueError(
                f"the query's value {num[i]!r} at draw {i[0]} is outside the declared value_range "
                f"[{lo:g}, {hi:g}]: the bound would not hold."
            )
    if reduce is None:
        value = values.astype(float).mean(axis=0)
        value = value.item() if np.ndim(value) == 0 else value
        if value_range is None:
            bound, statement = None, "no accuracy bound: declare value_range=(lo, hi) for a bounded function"
        elif not bound_ok:
            bound, statement = None, "no accuracy bound: the draws are not iid posterior draws"
        else:
            bound = hoeffding_radius(n, delta, hi - lo, 1)
            statement = (
                f"with probability >= {1 - delta:.6g}, the mean over the draws is within {bound:.4g} of "
                f"the posterior mean of the function (Hoeffding, range [{lo:g}, {hi:g}], N = {n} iid draws; "
                "each component separately)"
            )
    else:
        value = reduce(values)
        bound, statement = None, "no accuracy bound for a custom statistic (reduce=)"
    return Answer(
        value=value,
        kind="function",
        draws=n,
        delta=delta,
        bound=bound,
        statement=statement,
        values=values,
        iid=is_iid,
        caveats=tuple(caveats),
    )
