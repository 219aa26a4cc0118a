"""Plots of a private model's guarantee, its truncation, and its privacy-utility trade-off.

Every function is named ``plot_*``, takes ``ax=None`` (draw on a new figure) and returns the
matplotlib Axes it drew on, as ArviZ's plots do. Nothing here reads private data, except
:func:`plot_privacy_utility`, which *makes releases* (and spends budget, see there):

* :func:`plot_epsilon_vs_draws` -- total epsilon against the number of released draws N, basic
  and optimal composition of the per-draw ``eps0``; needs only the certificate;
* :func:`plot_factor_contributions` -- each factor's share ``L_j`` of the per-draw loss
  ``Delta``, chosen split beside the equal split; needs only the certificate;
* :func:`plot_truncation` -- the prior against the truncated prior of each truncated parameter;
  needs the :class:`~pymc_dp.PrivateModel` (the prior is not in a release's attributes);
* :func:`plot_privacy_utility` -- sweeps epsilon, releases, and plots a utility of each release.

The first two accept a :class:`~pymc_dp.PrivateModel`, a :class:`~pymc_dp.Certificate`, a
released ``az.InferenceData`` (its ``attrs["pymc_dp"]``), that JSON string, or its parsed dict.

matplotlib is imported when a plot is drawn, not when ``pymc_dp`` is imported.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from pymc_dp import accounting
from pymc_dp.exceptions import RegionNotImplementedError

__all__ = [
    "plot_epsilon_vs_draws",
    "plot_factor_contributions",
    "plot_truncation",
    "plot_privacy_utility",
    "PrivacyUtilityResult",
    "epsilon_curves",
]

#: the delta of the optimal-composition curve when neither the caller nor the certificate gives one
DEFAULT_CURVE_DELTA = 1e-6


def _plt():
    import matplotlib.pyplot as plt

    return plt


def _get_ax(ax):
    if ax is None:
        _, ax = _plt().subplots()
    return ax


# --------------------------------------------------------------------------- certificate access
def certificate_dict(obj) -> dict:
    """The certificate (and release record, when there is one) of ``obj`` as a dict.

    ``obj``: a PrivateModel, a Certificate, a released InferenceData (or its posterior
    Dataset), the JSON string of ``attrs["pymc_dp"]``, or a dict.
    """
    from pymc_dp.certificate import Certificate
    from pymc_dp.core import PrivateModel

    if isinstance(obj, PrivateModel):
        return obj.certificate.to_dict()
    if isinstance(obj, Certificate):
        return obj.to_dict()
    from pymc_dp.record import read

    found = read(obj, required=False)
    if found is None:
        raise TypeError(
            f"cannot read a pymc_dp certificate from {type(obj).__name__}: pass a PrivateModel, a "
            "Certificate, or an InferenceData released by PrivateModel.sample (attrs['pymc_dp'])."
        )
    return found


# --------------------------------------------------------------------------- epsilon vs draws
def epsilon_curves(epsilon_per_draw: float, draws: Sequence[int], delta: float) -> dict[str, np.ndarray]:
    """Total epsilon of N draws of an ``eps0``-DP mechanism for each N in ``draws``.

    Returns ``{"draws", "basic", "optimal"}``: ``N eps0`` and the exact optimal composition at
    ``delta`` (:func:`pymc_dp.accounting.compose`; ``optimal`` equals ``basic`` when
    ``delta == 0``). The numbers behind :func:`plot_epsilon_vs_draws`.
    """
    ns = np.asarray(sorted({int(n) for n in draws}), dtype=int)
    basic, optimal = [], []
    for n in ns:
        c = accounting.compose(epsilon_per_draw, int(n), delta)
        basic.append(c.epsilon_basic)
        optimal.append(c.epsilon_basic if c.epsilon_optimal is None else c.epsilon_optimal)
    return {"draws": ns, "basic": np.asarray(basic), "optimal": np.asarray(optimal)}


def plot_epsilon_vs_draws(
    obj_or_eps0,
    *,
    delta: float | None = None,
    max_draws: int | None = None,
    n_points: int = 60,
    logx: bool = True,
    ax=None,
):
    """Total epsilon against the number of released draws N, basic vs optimal composition.

    Each exact posterior draw of the private model is ``eps0``-DP (the certificate's
    ``epsilon_per_draw``, fixed by the truncation); releasing N of them costs ``N eps0``
    (basic composition) or, at a ``delta > 0``, the exact optimal composition of N pure-DP
    mechanisms (docs/theory/guarantee.md#composition). The release's own N and epsilon are marked.

    Parameters
    ----------
    obj_or_eps0 : PrivateModel, Certificate, InferenceData, dict, str or float
        Where to read ``eps0`` (and the release's N and delta), or ``eps0`` itself.
    delta : float, optional
        The delta of the optimal curve. Default: the certificate's delta when it is > 0, else
        :data:`DEFAULT_CURVE_DELTA` (1e-6, shown in the legend). ``0`` draws the basic curve only.
    max_draws : int, optional
        The largest N shown; default ``max(100, 10 N_release)``.
    n_points : int
        Number of (log-spaced, integer) values of N on each curve.
    logx : bool
        Log-scaled N axis.
    ax : matplotlib Axes, optional

    Returns
    -------
    matplotlib Axes
        Lines labelled ``"basic"`` and ``"optimal (delta=...)"`` (absent when delta is 0), a
        vertical line labelled ``"release: N=..."`` and the release's point (when known).
    """
    if isinstance(obj_or_eps0, (int, float, np.floating, np.integer)) and not isinstance(obj_or_eps0, bool):
        eps0, released, cert_delta, released_eps = float(obj_or_eps0), None, 0.0, None
    else:
        cert = certificate_dict(obj_or_eps0)
        eps0, released = float(cert["epsilon_per_draw"]), int(cert["draws"])
        cert_delta, released_eps = float(cert.get("delta") or 0.0), float(cert["epsilon"])
    if not (math.isfinite(eps0) and eps0 > 0):
        raise ValueError(f"the per-draw epsilon must be finite and > 0, got {eps0!r}")
    if delta is None:
        delta = cert_delta if cert_delta > 0 else DEFAULT_CURVE_DELTA
    delta = float(delta)
    if not 0.0 <= delta < 1.0:
        raise ValueError(f"delta={delta!r} must be in [0, 1)")
    if max_draws is None:
        max_draws = max(100, 10 * (released or 1))
    max_draws = int(max_draws)
    if max_draws < 1:
        raise ValueError(f"max_draws={max_draws!r} must be >= 1")
    grid = np.unique(np.round(np.geomspace(1, max_draws, max(2, int(n_points)))).astype(int))
    if released is not None and released <= max_draws:
        grid = np.union1d(grid, [released])
    curves = epsilon_curves(eps0, grid, delta)
    ax = _get_ax(ax)
    ax.plot(curves["draws"], curves["basic"], label="basic", color="C0")
    if delta > 0:
        ax.plot(curves["draws"], curves["optimal"], label=f"optimal (delta={delta:g})", color="C1")
    if released is not None:
        ax.axvline(released, color="0.4", linestyle=":", label=f"release: N={released}")
        if released_eps is not None:
            ax.plot(
                [released], [released_eps], marker="o", linestyle="none", color="k",
                label=f"released: epsilon={released_eps:.4g}",
            )
    if logx:
        ax.set_xscale("log")
    ax.set_xlabel("number of released draws N")
    ax.set_ylabel("total epsilon")
    ax.set_title(f"epsilon of N draws, {eps0:.4g} per draw")
    ax.legend(fontsize="small")
    return ax


# --------------------------------------------------------------------------- factor contributions
def plot_factor_contributions(obj, *, ax=None):
    """Each factor's per-record constant ``L_j`` and its share of the per-draw loss ``Delta``.

    The chosen split (the certificate's ``lipschitz``, e.g. the optimised split that keeps the
    most prior mass) is drawn beside the equal split (``equal_share``; missing where the equal
    split is infeasible). How the shares make ``Delta`` depends on the privacy unit:

    * ``record``: ``Delta = sum_j L_j``; one pair of bars per factor, labelled with the
      factor's percentage of ``Delta``;
    * ``users`` (at most m rows per user): ``Delta = m sum_j L_j``; as record, the bars are the
      per-record shares, and the title and the dashed line carry ``Delta / m``;
    * ``attribute``: ``Delta = max_k sum_{j reads k} L_j``; one pair of stacked bars per private
      container k, each segment a factor that reads k; the dashed line is ``Delta``.

    Parameters
    ----------
    obj : PrivateModel, Certificate, InferenceData, dict or str
        Only the certificate is read.
    ax : matplotlib Axes, optional

    Returns
    -------
    matplotlib Axes
        Bars in two containers labelled ``"chosen split (...)"`` and ``"equal split"`` (record
        and user units; in the attribute unit, one container per factor and split), and a
        dashed horizontal line at the budget the bars add up to.
    """
    cert = certificate_dict(obj)
    factors = cert["factors"]
    if not factors:
        raise ValueError("the certificate has no private factors: nothing to plot.")
    unit, m = cert["unit"], int(cert.get("rows_per_unit") or 1)
    delta_draw = float(cert["epsilon_per_draw"]) / 2.0
    split = cert.get("split", "chosen")
    names = [f["name"] for f in factors]
    chosen = np.array([float(f["lipschitz"]) for f in factors])
    equal = np.array([np.nan if f.get("equal_share") is None else float(f["equal_share"]) for f in factors])
    ax = _get_ax(ax)
    width = 0.38
    if unit == "attribute":
        containers = sorted({k for f in factors for k in f["reads"]})
        x = np.arange(len(containers))
        for which, values, offset, hatch in (("chosen", chosen, -width / 2, None), ("equal", equal, width / 2, "//")):
            if which == "equal" and np.all(np.isnan(values)):
                continue
            bottom = np.zeros(len(containers))
            for j, f in enumerate(factors):
                heights = np.array([values[j] if k in f["reads"] else 0.0 for k in containers])
                heights = np.nan_to_num(heights)
                ax.bar(
                    x + offset, heights, width, bottom=bottom, color=f"C{j % 10}", hatch=hatch,
                    edgecolor="k", linewidth=0.5,
                    label=f"{f['name']} ({split} split)" if which == "chosen" else f"{f['name']} (equal split)",
                )
                bottom += heights
        ax.axhline(delta_draw, color="k", linestyle="--", label=f"Delta = {delta_draw:.4g}")
        ax.set_xticks(x, containers)
        ax.set_xlabel("private container (attribute unit: Delta = max_k sum_{j reads k} L_j)")
        ax.set_title(f"per-container loss: left {split} split, right (hatched) equal split")
    else:
        budget = delta_draw / m
        x = np.arange(len(factors))
        bars = ax.bar(x - width / 2, chosen, width, label=f"chosen split ({split})", color="C0")
        if not np.all(np.isnan(equal)):
            ax.bar(x + width / 2, np.nan_to_num(equal), width, label="equal split", color="C1", alpha=0.7)
        labels = [f"{100 * v / budget:.0f}%" if budget > 0 else "" for v in chosen]
        ax.bar_label(bars, labels=labels, fontsize="small")
        ax.axhline(budget, color="k", linestyle="--", label=f"sum of shares = {budget:.4g}")
        ax.set_xticks(x, names)
        ax.set_xlabel("likelihood factor")
        if m > 1:
            ax.set_title(f"{unit} unit: Delta = m x sum_j L_j = {m} x {budget:.4g} = {delta_draw:.4g} (m = {m} rows per user)")
        else:
            ax.set_title(f"{unit} unit: Delta = sum_j L_j = {delta_draw:.4g}")
    ax.set_ylabel("per-record constant L_j")
    top = ax.get_ylim()[1]
    ax.set_ylim(0.0, 1.45 * top)  # room for the legend above the bars and the budget line
    ax.legend(fontsize="small", loc="upper left", ncols=2)
    return ax


# --------------------------------------------------------------------------- truncation
@dataclass
class _Panel:
    title: str
    xlabel: str
    x: np.ndarray  # prior curve
    prior: np.ndarray
    tx: np.ndarray  # truncated prior curve (zero outside the region)
    truncated: np.ndarray
    bounds: list
    mass: float | None
    mass_note: str
    vars: tuple


def _stairs(edges: np.ndarray, heights: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """A histogram as a step line: x at both ends of each bin."""
    return np.repeat(edges, 2)[1:-1], np.repeat(heights, 2)


def _edges(lo: float, hi: float, bins: int, breaks: Sequence[float]) -> np.ndarray:
    """About ``bins`` bins on ``[lo, hi]`` with every break (a bound) on an edge, so that no bin
    straddles a bound."""
    points = sorted({lo, hi, *(b for b in breaks if lo < b < hi)})
    width = (hi - lo) / bins
    pieces = [np.linspace(a, b, max(1, math.ceil((b - a) / width - 1e-9)) + 1) for a, b in itertools.pairwise(points)]
    return np.unique(np.concatenate(pieces))


def _hist_panel(values, inside, lo_display, hi_display, bins, region):
    """Empirical prior and truncated prior densities from prior draws (public).

    ``region = (lo, hi)`` (None: unbounded) is the kept range of the plotted statistic: its
    bounds are bin edges and the truncated curve is drawn on it only.
    """
    values = np.asarray(values, float)
    lo, hi = region
    edges = _edges(lo_display, hi_display, bins, [b for b in (lo, hi) if b is not None])
    width = np.diff(edges)
    counts, _ = np.histogram(values, edges)
    prior = counts / (len(values) * width)
    n_in = int(np.sum(inside))
    centers = 0.5 * (edges[:-1] + edges[1:])
    keep = np.ones(len(centers), bool)
    if lo is not None:
        keep &= centers >= lo
    if hi is not None:
        keep &= centers <= hi
    if n_in and np.any(keep):
        tcounts, _ = np.histogram(values[inside], edges)
        first, last = np.nonzero(keep)[0][[0, -1]]
        t_edges = edges[first : last + 2]
        truncated = tcounts[first : last + 1] / (n_in * width[first : last + 1])
        tx, t = _stairs(t_edges, truncated)
    else:
        tx, t = np.array([]), np.array([])
    x, p = _stairs(edges, prior)
    return x, p, tx, t, n_in


def _root_univariate(pmod, name):
    from pymc_dp.region_context import is_root

    ctx = pmod.certification.context
    rv = ctx.free[name]
    try:
        return rv if rv.owner.op.ndim_supp == 0 and is_root(rv, ctx) else None
    except Exception:  # pragma: no cover - unusual RV
        return None


def _interval_panel(pmod, name, lo, hi, bins) -> _Panel:
    import pymc as pm
    import pytensor

    ctx = pmod.certification.context
    draws = np.asarray(ctx.draws[name], float)
    flat = draws.reshape(len(draws), -1)
    support = ctx.support(name)
    if not all(map(math.isfinite, support)) and any(map(math.isnan, support)):
        support = (-math.inf, math.inf)  # a support the context cannot read: do not clip the display
    q_lo, q_hi = np.quantile(flat, [0.002, 0.998])
    d_lo = min(q_lo, lo) if lo is not None else q_lo
    d_hi = max(q_hi, hi) if hi is not None else q_hi
    if hi is None and lo is not None and d_hi <= lo:
        d_hi = lo + max(1.0, abs(lo))
    pad = 0.05 * (d_hi - d_lo)
    d_lo, d_hi = max(d_lo - pad, support[0]), min(d_hi + pad, support[1])
    bounds = [b for b in (lo, hi) if b is not None]
    t_lo = lo if lo is not None else d_lo
    t_hi = hi if hi is not None else d_hi
    title = f"{name} in [{'-inf' if lo is None else f'{lo:.4g}'}, {'inf' if hi is None else f'{hi:.4g}'}]"
    rv = _root_univariate(pmod, name)
    if rv is not None:
        try:
            value = rv.type()
            fn = pytensor.function([value], pm.logp(rv, value))
            shape = ctx.shapes[name]

            def density(t):
                return np.exp(np.asarray(fn(np.full(shape, t, dtype=rv.dtype)), float)).reshape(-1)

            eps = 1e-12 * max(1.0, abs(d_hi - d_lo))
            a, b = max(t_lo, d_lo + eps), min(t_hi, d_hi - eps)
            tx = np.linspace(a, b, 300)
            x = np.union1d(np.linspace(d_lo + eps, d_hi - eps, 400), tx)  # dense on the kept interval
            dens = {float(t): density(t) for t in x}
            prior = np.array([dens[float(t)].mean() for t in x])
            # in log space from the CDF below the median and the survival function above it: a
            # difference of CDFs rounds a far upper tail to 0 (tests/fuzz/FOUND.md #7)
            from pymc_dp.masses import interval_log_mass

            lo_open = lo if lo is not None and lo > support[0] else None
            hi_open = hi if hi is not None and hi < support[1] else None
            masses = np.exp(np.asarray(interval_log_mass(rv, name, lo_open, hi_open, shape, ctx), float)).reshape(-1)
            masses = np.clip(masses, 0.0, 1.0)
            if np.all(masses > 0) and np.all(np.isfinite(prior)):
                truncated = np.array([np.mean(dens[float(t)] / masses) for t in tx])
                k = masses.size
                note = f"prior mass kept {float(np.prod(masses)):.3g} (exact" + (f"; {k} elements, averaged)" if k > 1 else ")")
                return _Panel(title, name, x, prior, tx, truncated, bounds, float(np.prod(masses)), note, (name,))
        except Exception:  # any failure of the exact density: fall back to the prior draws
            pass
    inside = np.all((flat >= (lo if lo is not None else -np.inf)) & (flat <= (hi if hi is not None else np.inf)), axis=1)
    # pool the elements: the marginal of a random element; inside = the whole vector inside
    pooled = flat.reshape(-1)
    pooled_in = np.repeat(inside, flat.shape[1])
    x, p, tx, t, n_in = _hist_panel(pooled, pooled_in, d_lo, d_hi, bins, (lo, hi))
    mass = n_in / len(flat)
    note = f"prior mass kept ~{mass:.3g} ({n_in} of {len(flat)} prior draws)"
    return _Panel(title, name, x, p, tx, t, bounds, mass, note, (name,))


def _chi_prior(pmod, name):
    """(scale, d) when the prior of ``name`` is Normal(0, s) iid (||w||_2 / s ~ chi(d)), else None."""
    ctx = pmod.certification.context
    rv = _root_univariate(pmod, name)
    if rv is None or type(rv.owner.op).__name__ != "NormalRV":
        return None
    try:
        mu, sigma = (np.asarray(p.eval(), float) for p in rv.owner.op.dist_params(rv.owner))
    except Exception:  # pragma: no cover
        return None
    shape = ctx.shapes[name]
    sig = np.broadcast_to(sigma, shape)
    if np.any(mu != 0) or np.ptp(sig) > 0:
        return None
    return float(sig.reshape(-1)[0]), int(np.prod(shape))


def _ball_panel(pmod, c, bins) -> _Panel:
    from scipy import stats

    ctx = pmod.certification.context
    norms = c.norm(np.asarray(ctx.draws[c.var], float))
    norm_name = f"||{c.var}||_2" if c.weights is None else f"sum_i m_i |{c.var}_i|"
    d_hi = max(float(np.quantile(norms, 0.998)), c.radius) * 1.05
    title = f"{norm_name} <= {c.radius:.4g}"
    chi = _chi_prior(pmod, c.var) if c.weights is None else None
    if chi is not None:
        s, d = chi
        mass = float(stats.chi2.cdf((c.radius / s) ** 2, d))
        if mass > 0:
            tx = np.linspace(0.0, c.radius, 300)
            x = np.union1d(np.linspace(0.0, d_hi, 400), tx)
            prior = stats.chi.pdf(x / s, d) / s
            truncated = stats.chi.pdf(tx / s, d) / s / mass
            note = f"prior mass kept {mass:.3g} (exact: ||{c.var}|| / {s:g} ~ chi({d}))"
            return _Panel(title, norm_name, x, prior, tx, truncated, [c.radius], mass, note, (c.var,))
    inside = norms <= c.radius
    x, p, tx, t, n_in = _hist_panel(norms, inside, 0.0, d_hi, bins, (None, c.radius))
    mass = n_in / len(norms)
    note = f"prior mass kept ~{mass:.3g} ({n_in} of {len(norms)} prior draws)"
    return _Panel(title, norm_name, x, p, tx, t, [c.radius], mass, note, (c.var,))


def _potential_panel(pmod, c, bins) -> _Panel:
    ctx = pmod.certification.context
    stat = np.asarray(c.evaluate(ctx.draws), float)
    finite = stat[np.isfinite(stat)]
    d_lo = min(0.0, float(np.min(finite))) if finite.size else 0.0
    d_hi = max(float(np.quantile(finite, 0.99)) if finite.size else 1.0, 1.5 * c.bound)
    inside = c.contains(ctx.draws)
    name = f"L_{c.factor}({', '.join(c.vars)})"
    x, p, tx, t, n_in = _hist_panel(np.where(np.isfinite(stat), stat, np.inf), inside, d_lo, d_hi, bins, (None, c.bound))
    mass = n_in / len(stat)
    note = f"prior mass kept ~{mass:.3g} ({n_in} of {len(stat)} prior draws)"
    return _Panel(f"{name} <= {c.bound:.4g} (potential)", name, x, p, tx, t, [c.bound], mass, note, tuple(c.vars))


def _element_panels(pmod, c, bins) -> list[_Panel]:
    """One panel per element of an elementwise interval (per-element bounds, e.g. ordered
    cutpoints in disjoint boxes): the element's prior draws and the kept range (public)."""
    draws = np.asarray(pmod.certification.context.draws[c.var], float)
    flat = draws.reshape(len(draws), -1)
    panels = []
    for i, (lo, hi) in enumerate(zip(c.lower, c.upper)):
        lo, hi = float(lo), float(hi)
        v = flat[:, i]
        finite = v[np.isfinite(v)]
        q_lo, q_hi = np.quantile(finite, [0.002, 0.998]) if finite.size else (lo, hi)
        d_lo, d_hi = min(q_lo, lo), max(q_hi, hi)
        pad = 0.05 * (d_hi - d_lo) or 1.0
        inside = (v >= lo) & (v <= hi)
        x, p, tx, t, n_in = _hist_panel(v, inside, d_lo - pad, d_hi + pad, bins, (lo, hi))
        mass = n_in / len(v)
        note = f"prior mass kept ~{mass:.3g} ({n_in} of {len(v)} prior draws)"
        name = f"{c.var}[{i}]"
        panels.append(_Panel(f"{name} in [{lo:.4g}, {hi:.4g}]", name, x, p, tx, t, [lo, hi], mass, note, (c.var,)))
    return panels


def _truncation_panels(pmod, var_names, bins) -> list[_Panel]:
    from pymc_dp.constraints import ElementIntervalConstraint, IntervalConstraint, NormBallConstraint, PotentialConstraint

    intervals: dict[str, list] = {}
    elementwise, others = [], []
    for c in pmod.certification.constraints:
        if isinstance(c, IntervalConstraint):
            intervals.setdefault(c.var, []).append(c)
        elif isinstance(c, ElementIntervalConstraint):
            elementwise.append(c)
        elif isinstance(c, (NormBallConstraint, PotentialConstraint)):
            others.append(c)
        else:  # a new kind of constraint must say how it is drawn, not vanish from the figure
            raise RegionNotImplementedError(
                f"plot_truncation cannot draw a {type(c).__name__} ({c.describe()}) of the model's truncation region "
                "yet; read that constraint from the privacy report (pymc_dp.report) instead.")
    panels = []
    for c in elementwise:
        panels.extend(_element_panels(pmod, c, bins))
    for name, cons in intervals.items():
        # several factors may constrain one RV: the truncation is the intersection
        lo = max([float(c.lower) for c in cons if c.lower is not None], default=None)
        hi = min([float(c.upper) for c in cons if c.upper is not None], default=None)
        panels.append(_interval_panel(pmod, name, lo, hi, bins))
    for c in others:
        if isinstance(c, NormBallConstraint):
            panels.append(_ball_panel(pmod, c, bins))
        else:
            panels.append(_potential_panel(pmod, c, bins))
    if var_names is not None:
        wanted = {var_names} if isinstance(var_names, str) else set(var_names)
        unknown = wanted - {v for p in panels for v in p.vars}
        if unknown:
            raise ValueError(
                f"var_names {sorted(unknown)} are not truncated parameters; the truncated ones are "
                f"{sorted({v for p in panels for v in p.vars})}."
            )
        panels = [p for p in panels if wanted & set(p.vars)]
    return panels


#: plot_truncation zooms (an inset) on a kept region narrower than this fraction of the panel
ZOOM_BELOW = 0.1


def _draw_panel(a, p: _Panel, legend: bool) -> None:
    a.plot(p.x, p.prior, color="C0", label="prior")
    if p.tx.size:
        a.plot(p.tx, p.truncated, color="C1", label="truncated prior")
        a.fill_between(p.tx, p.truncated, color="C1", alpha=0.3)
    for i, b in enumerate(p.bounds):
        a.axvline(b, color="k", linestyle="--", linewidth=1, label="bound" if i == 0 else "_bound")
    if legend:
        a.legend(fontsize="x-small", loc="best")


def plot_truncation(private_model, var_names=None, *, bins: int = 60, ax=None):
    """The prior against the truncated prior of each truncated parameter.

    Needs the :class:`~pymc_dp.PrivateModel`: the prior is public, but it is not in a release's
    attributes (only the truncation bounds are). Every curve comes from the prior alone -- its
    own density, or the public prior draws ``private_model.certification.context.draws`` (the draws the
    truncation and the prior mass were computed from) -- never from data.

    One panel per constraint:

    * an interval on a free RV (``lo <= v <= hi``, each element): the prior density and the
      truncated prior density ``prior / mass`` on ``[lo, hi]``, exactly from the RV's own logp
      and CDF when it is a univariate root RV (averaged over its elements when they differ),
      else histograms of the prior draws (elements pooled; the truncated one keeps the draws
      whose every element is inside);
    * a norm ball ``||w|| <= r``: the prior density of ``||w||`` (exact chi for an isotropic
      Normal(0, s) prior, else a histogram of the prior draws' norms) and its truncation at ``r``;
    * a potential ``L_j(theta) <= bound``: the constrained statistic ``L_j`` over the prior draws
      and the part of it kept.

    Bounds are vertical dashed lines; each panel's legend gives the prior mass kept.

    Parameters
    ----------
    private_model : PrivateModel
    var_names : str or list of str, optional
        Only the panels of these free RVs (default: every truncated parameter).
    bins : int
        Histogram bins (empirical panels only).
    ax : matplotlib Axes or array of Axes, optional
        One Axes per panel.

    Returns
    -------
    matplotlib Axes, or numpy.ndarray of Axes
        One Axes when there is one panel, else an array (as ArviZ does). Each has lines
        labelled ``"prior"`` and ``"truncated prior"`` and one ``"bound"`` line per finite bound.
    """
    from pymc_dp.core import PrivateModel

    if not isinstance(private_model, PrivateModel):
        raise TypeError(
            f"plot_truncation needs the PrivateModel (the prior is not stored in a release or a "
            f"certificate), got {type(private_model).__name__}."
        )
    panels = _truncation_panels(private_model, var_names, int(bins))
    if not panels:
        raise ValueError("the private model truncates no parameter: nothing to plot.")
    n = len(panels)
    if ax is None:
        cols = min(n, 3)
        rows = math.ceil(n / cols)
        _, axes = _plt().subplots(rows, cols, figsize=(4.8 * cols, 3.8 * rows), squeeze=False, layout="constrained")
        for extra in axes.ravel()[n:]:
            extra.remove()
        axes = axes.ravel()[:n]
    else:
        axes = np.atleast_1d(np.asarray(ax, dtype=object)).ravel()
        if len(axes) < n:
            raise ValueError(f"plot_truncation draws {n} panels but got {len(axes)} Axes.")
        axes = axes[:n]
    for a, p in zip(axes, panels):
        _draw_panel(a, p, legend=True)
        a.set_title(f"{p.title}\n{p.mass_note}", fontsize="small")
        a.set_xlabel(p.xlabel)
        a.set_ylabel("density")
        if p.tx.size and p.x.size:
            kept = float(np.max(p.tx) - np.min(p.tx))
            shown = float(np.max(p.x) - np.min(p.x))
            if shown > 0 and kept < ZOOM_BELOW * shown:
                # a narrow region: zoom on it in an inset (prior and truncated prior side by side)
                inset = a.inset_axes([0.58, 0.5, 0.38, 0.38])
                _draw_panel(inset, p, legend=False)
                pad = max(kept, 1e-300)
                inset.set_xlim(float(np.min(p.tx)) - 0.5 * pad, float(np.max(p.tx)) + 0.5 * pad)
                inset.set_yscale("log")
                inset.set_title("zoom (log density)", fontsize="x-small")
                inset.tick_params(labelsize="xx-small")
    return axes[0] if n == 1 else axes


# --------------------------------------------------------------------------- privacy-utility
from pymc_dp.sweep import PrivacyUtilityResult  # noqa: E402  (re-exported: its home is pymc_dp.sweep)


def plot_privacy_utility(
    build_private,
    epsilons: Sequence[float],
    utility: Callable[[Any], float],
    *,
    repeats: int = 1,
    private_kwargs: Mapping[str, Any] | None = None,
    sample_kwargs: Mapping[str, Any] | None = None,
    random_seed: int | None = None,
    logx: bool = True,
    ax=None,
):
    """Sweep epsilon: release at each epsilon, and plot a utility of the released draws.

    .. warning::
       **Every release in the sweep spends privacy budget on the data.** For each epsilon and
       each repeat this calls :meth:`PrivateModel.sample`, a real release charged to the
       private model's ledger; the sweep as a whole costs the **sum** of the releases'
       epsilons (and deltas): ``repeats * sum(certified epsilons)``, reported as
       ``result.total_epsilon`` and by the ledger. A ledger with a total refuses the sweep
       part-way once it is spent (:class:`~pymc_dp.BudgetExceededError`). A ``UserWarning``
       states the planned total before anything is released.

       **Run it on public or synthetic data** of the same shape and domains (e.g. data
       simulated from the model's prior), choose epsilon from that, then release once on the
       private data. The plot is only as private as the utility: ``utility`` must not read the
       private data (no accuracy on the private training set); if it does, the sweep's
       output is not differentially private at all.

    Parameters
    ----------
    build_private : callable or pm.Model
        ``build_private(epsilon, **private_kwargs) -> PrivateModel`` (e.g.
        ``lambda e: pymc_dp.make_private(model, epsilon=e, draws=..., data=...)``), or a
        ``pm.Model``, made private at each epsilon with
        ``make_private(model, epsilon=epsilon, **private_kwargs)`` (``private_kwargs`` must then
        give at least ``draws`` and ``data``).
    epsilons : sequence of float
        The total epsilons of one release to try.
    utility : callable
        ``utility(idata) -> float``: a utility of one released ``InferenceData`` (e.g. accuracy
        on public held-out data, or ``pymc_dp.answer`` of a decision query).
    repeats : int
        Releases per epsilon (the utility is random through the draws): ``repeats`` times the
        spend.
    private_kwargs : dict, optional
        Keywords for ``build_private`` / ``make_private`` (``draws``, ``data``, ``delta``,
        ``ledger``, ...).
    sample_kwargs : dict, optional
        Keywords for :meth:`PrivateModel.sample` (not ``random_seed``: use ``random_seed``).
    random_seed : int, optional
        Seeds every release (independent streams spawned from it). Keep it secret, as any
        release seed.
    logx : bool
        Log-scaled epsilon axis.
    ax : matplotlib Axes, optional

    Returns
    -------
    (matplotlib Axes, PrivacyUtilityResult)
        The Axes has a line labelled ``"mean utility"`` over the sorted epsilons (with error bars
        of one standard deviation when ``repeats > 1``) and one point per release; the title
        gives the total spent.
    """
    from pymc_dp.sweep import privacy_utility_sweep

    result = privacy_utility_sweep(
        build_private, epsilons, utility, repeats=repeats, private_kwargs=private_kwargs,
        sample_kwargs=sample_kwargs, random_seed=random_seed,
    )
    eps, utilities, repeats = result.epsilons, result.utilities, result.utilities.shape[1]
    total_eps, total_delta = result.total_epsilon, result.total_delta
    ax = _get_ax(ax)
    order = np.argsort(eps)
    ax.scatter(np.repeat(eps, repeats), utilities.reshape(-1), s=12, alpha=0.5, color="C0", label="one release")
    if repeats > 1:
        ax.errorbar(
            eps[order], result.mean[order], yerr=result.std[order], color="C1", marker="o",
            capsize=3, label="mean utility",
        )
    else:
        ax.plot(eps[order], result.mean[order], color="C1", marker="o", label="mean utility")
    if logx:
        ax.set_xscale("log")
    ax.set_xlabel("epsilon of one release")
    ax.set_ylabel("utility of the released draws")
    ax.set_title(
        f"{result.releases} releases: spent epsilon = {total_eps:.4g}, delta = {total_delta:.3g} in total",
        fontsize="medium",
    )
    ax.legend(fontsize="small")
    return ax, result
