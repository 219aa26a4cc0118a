"""pymc_dp.plots: the artists drawn, and the numbers behind them (Agg backend)."""

from __future__ import annotations

import json
import math

import matplotlib
import matplotlib.pyplot as plt
import numpy as np
import pytest
from matplotlib.axes import Axes
from scipy import integrate, stats

import pymc_dp
from pymc_dp import accounting, plots
from pymc_dp.query import answer  # to be exported as pymc_dp.answer
from pymc_dp.truncate import IntervalConstraint, NormBallConstraint, PotentialConstraint
from tests import models

matplotlib.use("Agg")  # no display: every figure is drawn off-screen


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    plt.close("all")


@pytest.fixture(scope="module")
def nb():
    """Naive Bayes (exact sampler), optimal composition: a private model and its release."""
    model, domains = models.naive_bayes(n=60, m=3)
    pmod = pymc_dp.make_private(model, epsilon=2.0, delta=1e-6, draws=20, data=domains, ledger=None)
    return pmod, pmod.sample(random_seed=1)


@pytest.fixture(scope="module")
def linear():
    model, domains = models.linear(n=40)
    return pymc_dp.make_private(model, epsilon=20.0, draws=20, data=domains, ledger=None)


def lines_by_label(ax):
    return {line.get_label(): line for line in ax.get_lines()}


def vlines_at(ax, label_prefix=""):
    """x of the vertical lines (axvline) whose label starts with label_prefix."""
    out = []
    for line in ax.get_lines():
        x = np.asarray(line.get_xdata(), float)
        if len(x) == 2 and x[0] == x[1] and line.get_label().startswith(label_prefix):
            out.append(float(x[0]))
    return out


# --------------------------------------------------------------------------- epsilon vs draws
def test_epsilon_vs_draws_curves_are_the_accountant(nb):
    pmod, idata = nb
    cert = pmod.certificate
    ax = plots.plot_epsilon_vs_draws(idata)
    assert isinstance(ax, Axes) and ax.get_xscale() == "log"
    lines = lines_by_label(ax)
    basic, optimal = lines["basic"], lines["optimal (delta=1e-06)"]
    ns = np.asarray(basic.get_xdata())
    assert ns[0] == 1 and ns[-1] == 200 and 20 in ns  # 10 x the release's N, and N itself
    eps0 = cert.epsilon_per_draw
    for i in range(0, len(ns), 7):
        c = accounting.compose(eps0, int(ns[i]), 1e-6)
        assert basic.get_ydata()[i] == pytest.approx(c.epsilon_basic, rel=1e-12)
        assert optimal.get_ydata()[i] == pytest.approx(c.epsilon_optimal, rel=1e-12)
    assert np.all(np.asarray(optimal.get_ydata()) <= np.asarray(basic.get_ydata()) + 1e-12)
    # the release: N marked, and its point is the certified epsilon on the optimal curve
    assert vlines_at(ax, "release") == [20.0]
    point = lines[f"released: epsilon={cert.epsilon:.4g}"]
    assert list(point.get_xdata()) == [20] and point.get_ydata()[0] == pytest.approx(cert.epsilon)
    assert optimal.get_ydata()[list(ns).index(20)] == pytest.approx(cert.epsilon, rel=1e-9)


def test_epsilon_vs_draws_reads_every_source_alike(nb):
    pmod, idata = nb

    def curve(obj):
        ax = plots.plot_epsilon_vs_draws(obj, max_draws=50)
        return np.asarray(lines_by_label(ax)["basic"].get_ydata())

    reference = curve(idata)
    for obj in (pmod, pmod.certificate, idata.attrs["pymc_dp"], json.loads(idata.attrs["pymc_dp"]), idata.posterior):
        np.testing.assert_array_equal(curve(obj), reference)
    with pytest.raises(TypeError, match="certificate"):
        plots.plot_epsilon_vs_draws(object())


def test_epsilon_vs_draws_from_a_number_and_with_delta_zero():
    _, ax = plt.subplots()
    out = plots.plot_epsilon_vs_draws(0.5, delta=0.0, max_draws=30, logx=False, ax=ax)
    assert out is ax and ax.get_xscale() == "linear"
    lines = lines_by_label(ax)
    assert set(lines) == {"basic"}  # no optimal curve at delta = 0, no release marked
    np.testing.assert_allclose(lines["basic"].get_ydata(), 0.5 * np.asarray(lines["basic"].get_xdata()))
    assert vlines_at(ax) == []
    ax2 = plots.plot_epsilon_vs_draws(0.1, max_draws=100)
    opt = lines_by_label(ax2)["optimal (delta=1e-06)"]  # the default delta of the curve
    x = list(opt.get_xdata())
    assert opt.get_ydata()[x.index(100)] == pytest.approx(4.7746, abs=1e-4)  # docs/theory/guarantee.md
    with pytest.raises(ValueError):
        plots.plot_epsilon_vs_draws(0.0)


# --------------------------------------------------------------------------- factor contributions
def _bars(ax, label):
    for cont in ax.containers:
        if cont.get_label() == label:
            return [p.get_height() for p in cont.patches]
    raise KeyError(label)


def test_factor_contributions_record_unit(nb):
    pmod, idata = nb
    cert = pmod.certificate
    ax = plots.plot_factor_contributions(idata)
    assert len(ax.patches) == 2 * len(cert.factors)
    np.testing.assert_allclose(_bars(ax, "chosen split (optimised)"), [f.lipschitz for f in cert.factors])
    np.testing.assert_allclose(_bars(ax, "equal split"), [f.equal_share for f in cert.factors])
    assert [t.get_text() for t in ax.get_xticklabels()] == [f.name for f in cert.factors]
    budget = [ln for ln in ax.get_lines() if ln.get_label().startswith("sum of shares")]
    assert len(budget) == 1 and budget[0].get_ydata()[0] == pytest.approx(cert.Delta_per_draw)
    # the chosen shares fill Delta; the percentages say how
    assert sum(f.lipschitz for f in cert.factors) == pytest.approx(cert.Delta_per_draw, rel=1e-9)
    pct = [float(t.get_text().rstrip("%")) for t in ax.texts]
    assert len(pct) == len(cert.factors) and sum(pct) == pytest.approx(100, abs=1)
    assert "Delta = sum_j L_j" in ax.get_title()


def test_factor_contributions_attribute_unit_stacks_per_container():
    model, domains = models.naive_bayes(n=60, m=3)
    pmod = pymc_dp.make_private(model, epsilon=2.0, draws=5, data=domains, unit="attribute", ledger=None)
    cert = pmod.certificate
    ax = plots.plot_factor_contributions(pmod.certificate)
    assert [t.get_text() for t in ax.get_xticklabels()] == ["X", "y"]
    assert len(ax.containers) == 2 * len(cert.factors)  # factor x (chosen, equal)
    assert len(ax.patches) == 2 * 2 * len(cert.factors)  # ... x containers
    chosen = np.sum([_bars(ax, f"{f.name} (optimised split)") for f in cert.factors], axis=0)
    expected = [sum(f.lipschitz for f in cert.factors if k in f.reads) for k in ("X", "y")]
    np.testing.assert_allclose(chosen, expected)
    assert max(chosen) == pytest.approx(cert.Delta_per_draw, rel=1e-9)  # Delta = max_k Delta_k
    equal = np.sum([_bars(ax, f"{f.name} (equal split)") for f in cert.factors], axis=0)
    assert max(equal) == pytest.approx(cert.Delta_per_draw, rel=1e-9)
    assert any(ln.get_label() == f"Delta = {cert.Delta_per_draw:.4g}" for ln in ax.get_lines())


def test_factor_contributions_user_unit_notes_m():
    model, domains = models.coin(n=30)
    pmod = pymc_dp.make_private(model, epsilon=2.0, draws=4, data=domains, unit=pymc_dp.Users(max_rows=3), ledger=None)
    cert = pmod.certificate
    ax = plots.plot_factor_contributions(pmod)
    assert "m = 3" in ax.get_title() and "m x sum_j L_j" in ax.get_title()
    (share,) = _bars(ax, f"chosen split ({cert.split})")
    assert share == pytest.approx(cert.Delta_per_draw / 3, rel=1e-9)
    budget = [ln for ln in ax.get_lines() if ln.get_label().startswith("sum of shares")]
    assert budget[0].get_ydata()[0] == pytest.approx(cert.Delta_per_draw / 3)


# --------------------------------------------------------------------------- truncation
def _truncated(ax):
    ln = lines_by_label(ax)["truncated prior"]
    return np.asarray(ln.get_xdata(), float), np.asarray(ln.get_ydata(), float)


def test_truncation_intervals_are_the_prior_renormalised(nb):
    pmod, _ = nb
    axes = plots.plot_truncation(pmod)
    assert isinstance(axes, np.ndarray) and len(axes) == 2
    bounds = {c.var: c for c in pmod.certification.constraints}
    for ax, name in zip(axes, ("pi", "theta")):
        c = bounds[name]
        assert ax.get_title().startswith(f"{name} in [")
        assert {"prior", "truncated prior", "bound"} <= set(lines_by_label(ax))
        assert sorted(vlines_at(ax, "bound") + vlines_at(ax, "_bound")) == pytest.approx([c.lower, c.upper])
        x, y = _truncated(ax)
        assert x.min() == pytest.approx(c.lower) and x.max() == pytest.approx(c.upper)
        # Beta(1, 1) prior: density 1, truncated density 1 / (upper - lower)
        np.testing.assert_allclose(lines_by_label(ax)["prior"].get_ydata(), 1.0, rtol=1e-9)
        np.testing.assert_allclose(y, 1.0 / (c.upper - c.lower), rtol=1e-6)
        assert integrate.trapezoid(y, x) == pytest.approx(1.0, rel=1e-6)
        assert len(ax.child_axes) == 1  # the kept interval is narrow: zoomed in an inset
    # the prior mass kept, exact: (upper - lower) for pi, (upper - lower)^6 for the 2 x 3 table theta
    assert f"prior mass kept {bounds['pi'].upper - bounds['pi'].lower:.3g} (exact)" in axes[0].get_title()
    theta = bounds["theta"]
    assert f"prior mass kept {(theta.upper - theta.lower) ** 6:.3g} (exact; 6 elements" in axes[1].get_title()
    assert pmod.certificate.prior_mass_kept == pytest.approx(
        (bounds["pi"].upper - bounds["pi"].lower) * (theta.upper - theta.lower) ** 6, rel=1e-6
    )


def test_truncation_of_regression_ball_scale_and_intercept(linear):
    ball = next(c for c in linear.certification.constraints if isinstance(c, NormBallConstraint))
    sigma = next(c for c in linear.certification.constraints if isinstance(c, IntervalConstraint) and c.var == "sigma")
    axes = plots.plot_truncation(linear)
    titles = [a.get_title() for a in axes]
    assert len(axes) == 3 and any(t.startswith("b in") for t in titles)
    ax_w = next(a for a, t in zip(axes, titles) if t.startswith("||w||_2"))
    # prior of ||w|| for w ~ Normal(0, 1) in 3 dimensions: chi(3); truncated at the radius
    x, y = _truncated(ax_w)
    assert x.max() == pytest.approx(ball.radius)
    mass = stats.chi2.cdf(ball.radius**2, 3)
    np.testing.assert_allclose(y, stats.chi.pdf(x, 3) / mass, rtol=1e-9)
    assert integrate.trapezoid(y, x) == pytest.approx(1.0, rel=1e-3)
    px = np.asarray(lines_by_label(ax_w)["prior"].get_xdata())
    np.testing.assert_allclose(lines_by_label(ax_w)["prior"].get_ydata(), stats.chi.pdf(px, 3), rtol=1e-9)
    assert vlines_at(ax_w, "bound") == [pytest.approx(ball.radius)]
    # sigma >= s*: one bound, the HalfNormal(1) prior renormalised above it
    ax_s = next(a for a, t in zip(axes, titles) if t.startswith("sigma in"))
    assert vlines_at(ax_s, "bound") == [pytest.approx(sigma.lower)]
    x, y = _truncated(ax_s)
    assert x.min() == pytest.approx(sigma.lower)
    np.testing.assert_allclose(y, stats.halfnorm.pdf(x) / stats.halfnorm.sf(sigma.lower), rtol=1e-6)
    # var_names picks panels
    only = plots.plot_truncation(linear, var_names="w")
    assert isinstance(only, Axes) and only.get_title().startswith("||w||_2")
    with pytest.raises(ValueError, match="not truncated parameters"):
        plots.plot_truncation(linear, var_names=["nope"])


def test_truncation_of_a_potential_plots_the_constrained_statistic():
    model, domains = models.two_param_coin()
    pmod = pymc_dp.make_private(model, epsilon=4.0, draws=4, data=domains, ledger=None)
    (c,) = pmod.certification.constraints
    assert isinstance(c, PotentialConstraint)
    _, ax = plt.subplots()
    out = plots.plot_truncation(pmod, ax=ax)
    assert out is ax and "(potential)" in ax.get_title()
    assert vlines_at(ax, "bound") == [pytest.approx(c.bound)]
    stat = c.evaluate(pmod.certification.context.draws)
    kept = np.mean(c.contains(pmod.certification.context.draws))
    assert f"~{kept:.3g}" in ax.get_title()
    x, y = _truncated(ax)
    assert x.max() == pytest.approx(c.bound)  # the bound is a bin edge: nothing kept beyond it
    # the truncated histogram is a density of the kept prior draws: it integrates to 1
    edges, heights = x[::2], y[::2]
    assert np.sum(heights * np.diff(np.append(edges, x[-1]))) == pytest.approx(1.0, rel=1e-9)
    # and the prior histogram is that of L over all prior draws
    px, py = (np.asarray(v, float) for v in (lines_by_label(ax)["prior"].get_xdata(), lines_by_label(ax)["prior"].get_ydata()))
    e = np.append(px[::2], px[-1])
    counts, _ = np.histogram(stat, e)
    np.testing.assert_allclose(py[::2], counts / (len(stat) * np.diff(e)))


def test_truncation_of_elementwise_intervals_draws_one_panel_per_element():
    """Ordered cutpoints get disjoint per-element boxes (ElementIntervalConstraint): every
    element has its panel, its bounds as lines and its kept prior mass in the title."""
    import pymc as pm

    rng = np.random.default_rng(0)
    with pm.Model() as model:
        yd = pm.Data("rating", rng.integers(0, 4, 30))
        cut = pm.Normal("cutpoints", mu=np.linspace(0, 4, 3), sigma=1.0, transform=pm.distributions.transforms.ordered)
        pm.OrderedLogistic("y", cutpoints=cut, eta=0.0, observed=yd)
    pmod = pymc_dp.make_private(model, epsilon=20.0, draws=4, data={"rating": pymc_dp.Integers(0, 3)}, ledger=None)
    (c,) = [c for c in pmod.certification.constraints if c.var == "cutpoints"]
    assert type(c).__name__ == "ElementIntervalConstraint"
    _, axs = plt.subplots(1, 3)
    out = plots.plot_truncation(pmod, ax=axs)
    flat = pmod.certification.context.draws["cutpoints"].reshape(-1, 3)
    for i, ax in enumerate(out):
        assert ax.get_title().startswith(f"cutpoints[{i}] in ")
        assert sorted(vlines_at(ax, "bound") + vlines_at(ax, "_bound")) == pytest.approx([c.lower[i], c.upper[i]])
        kept = np.mean((flat[:, i] >= c.lower[i]) & (flat[:, i] <= c.upper[i]))
        assert f"~{kept:.3g}" in ax.get_title()


def test_truncation_needs_the_private_model(nb):
    pmod, idata = nb
    for obj in (idata, pmod.certificate):
        with pytest.raises(TypeError, match="needs the PrivateModel"):
            plots.plot_truncation(obj)
    _, axs = plt.subplots(1, 3)
    out = plots.plot_truncation(pmod, ax=axs)
    assert list(out) == list(axs[:2])
    with pytest.raises(ValueError, match="2 panels"):
        plots.plot_truncation(pmod, ax=axs[0])


# --------------------------------------------------------------------------- privacy-utility
def _coin_builder(ledger):
    model, domains = models.coin(n=40)

    def build(epsilon):
        return pymc_dp.make_private(model, epsilon=epsilon, draws=4, data=domains, ledger=ledger)

    return build


def test_privacy_utility_spends_exactly_the_sweep_through_the_ledger(tmp_path):
    ledger = pymc_dp.Ledger(tmp_path / "sweep.sqlite")
    build = _coin_builder(ledger)
    epsilons = [2.0, 0.5, 1.0]

    def utility(idata):  # a post-processing of the draws only
        return answer(idata, lambda d: d["p"]).value

    with pytest.warns(UserWarning, match=r"spends epsilon = 7\b.*public or synthetic"):
        ax, res = plots.plot_privacy_utility(build, epsilons, utility, repeats=2, random_seed=0)
    dataset = build(1.0).dataset_id
    spent = ledger.spent(dataset)
    assert spent.releases == 6 and spent.pending == 0
    assert spent.epsilon == pytest.approx(2 * sum(epsilons), rel=1e-9)
    assert res.total_epsilon == pytest.approx(spent.epsilon, rel=1e-12) and res.total_delta == 0.0
    assert res.releases == 6 and res.utilities.shape == (3, 2)
    np.testing.assert_allclose(res.certified, epsilons, rtol=1e-9)
    np.testing.assert_allclose(res.mean, res.utilities.mean(axis=1))
    # artists: one point per release, the mean line over sorted epsilons with error bars
    (points,) = ax.collections[:1]
    assert len(points.get_offsets()) == 6
    mean_line = lines_by_label(ax)
    assert "mean utility" in [c.get_label() for c in ax.containers] or "mean utility" in mean_line
    assert ax.get_xscale() == "log" and "spent epsilon = 7" in ax.get_title()
    # the same seed gives the same utilities; the ledger then holds both sweeps
    with pytest.warns(UserWarning):
        _, again = plots.plot_privacy_utility(build, epsilons, utility, repeats=2, random_seed=0)
    np.testing.assert_array_equal(again.utilities, res.utilities)
    assert ledger.spent(dataset).epsilon == pytest.approx(4 * sum(epsilons), rel=1e-9)


def test_privacy_utility_from_a_model_and_a_ledger_total(tmp_path):
    model, domains = models.coin(n=40)
    ledger = pymc_dp.Ledger(tmp_path / "total.sqlite", epsilon=2.5)
    kwargs = dict(draws=4, data=domains, ledger=ledger)
    with pytest.warns(UserWarning), pytest.raises(pymc_dp.BudgetExceededError):
        plots.plot_privacy_utility(model, [1.0, 1.0, 1.0], lambda idata: 0.5, private_kwargs=kwargs)
    dataset = pymc_dp.make_private(model, epsilon=1.0, **kwargs).dataset_id
    assert ledger.spent(dataset).epsilon == pytest.approx(2.0)  # two releases fit, the third is refused
    with pytest.raises(TypeError, match="random_seed"):
        plots.plot_privacy_utility(model, [1.0], lambda i: 0.5, private_kwargs=kwargs, sample_kwargs={"random_seed": 1})
    with pytest.raises(ValueError, match="epsilons"):
        plots.plot_privacy_utility(model, [], lambda i: 0.5, private_kwargs=kwargs)
    assert math.isclose(ledger.spent(dataset).epsilon, 2.0)  # refusals spend nothing


def test_truncation_of_a_far_upper_tail_states_its_exact_mass():
    """A kept interval far in the prior's upper tail (intercept in [4.34, 5.57] under N(0, 0.5),
    tests/fuzz/FOUND.md #7): a difference of CDFs rounds its mass to 0 and the panel fell back to
    counting prior draws (none inside); from the survival function it is exact and positive."""
    import pymc as pm
    from scipy import stats

    rng = np.random.default_rng(0)
    with pm.Model() as model:
        y = pm.Data("y", rng.uniform(0, 1, 20))
        b = pm.Normal("b", 0, 0.5)
        pm.Normal("obs", mu=b, sigma=1.0, observed=y)
    pmod = pymc_dp.make_private(model, draws=1, bounds={"b": (4.33846, 5.56508)}, data={"y": pymc_dp.Interval(0, 1)},
                                ledger=None)
    (ax,) = np.atleast_1d(plots.plot_truncation(pmod))
    exact = stats.norm(0, 0.5).sf(4.33846) - stats.norm(0, 0.5).sf(5.56508)
    assert f"prior mass kept {exact:.3g} (exact" in ax.get_title()


def test_truncation_refuses_a_constraint_it_cannot_draw_with_a_typed_error(nb):
    """A kind of constraint plot_truncation does not know is a RegionNotImplementedError (a
    PrivacyError and a NotImplementedError) naming the constraint, never a missing panel."""
    import copy
    import types

    from tests.typed_refusals import assert_typed_refusal

    class Halfspace:  # a constraint kind no panel is written for
        var = "p"

        def describe(self):
            return "p . u <= 1"

    pmod = copy.copy(nb[0])
    pmod.certification = types.SimpleNamespace(constraints=(*nb[0].certification.constraints, Halfspace()))
    assert_typed_refusal(lambda: plots.plot_truncation(pmod), kind=pymc_dp.RegionNotImplementedError,
                         match=r"cannot draw a Halfspace \(p \. u <= 1\).*pymc_dp.report")
