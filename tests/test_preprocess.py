"""Private standardisation (pymc_dp.standardize): its sensitivity by brute force, an exact audit that
catches a halved noise scale, and one budget with the release that reads the standardised data."""

from __future__ import annotations

import itertools

import numpy as np
import pymc as pm
import pytest

import pymc_dp
import pymc_dp.preprocess as preprocess
from pymc_dp.exceptions import BudgetExceededError, DomainError


def _worst_change(data, domains, grid_points=9, scale=True):
    """Brute force: the largest L1 change of the normalised statistics when record 0 is replaced by
    any point of a grid of its domain (every container's row at once)."""
    names = list(data)
    bounds = {k: preprocess._columns(k, np.asarray(data[k]), domains[k]) for k in names}
    base = preprocess.normalized_statistics(data, bounds, scale)
    axes = []
    for k in names:
        lo, hi = bounds[k]
        for j in range(lo.size):
            axes.append((k, j, np.linspace(lo[j], hi[j], grid_points)))
    worst = 0.0
    for point in itertools.product(*(a[2] for a in axes)):
        changed = {k: np.array(v, float, copy=True) for k, v in data.items()}
        for (k, j, _), value in zip(axes, point):
            if changed[k].ndim == 1:
                changed[k][0] = value
            else:
                changed[k][0, j] = value
        worst = max(worst, np.abs(preprocess.normalized_statistics(changed, bounds, scale) - base).sum())
    return worst


def test_column_sensitivity_is_the_supremum():
    u = np.linspace(-1, 1, 2001)
    U, V = np.meshgrid(u, u)
    value = np.abs(U - V) / 2 + np.abs(U**2 - V**2)
    assert value.max() <= preprocess.COLUMN_SENSITIVITY + 1e-12
    assert value.max() >= preprocess.COLUMN_SENSITIVITY - 1e-6  # attained at (1, -1/4)


@pytest.mark.parametrize("scale", [True, False])
def test_sensitivity_bounds_every_neighbour_and_is_attained(scale):
    rng = np.random.default_rng(1)
    data = {"x": rng.uniform([0, -2], [8, 6], (6, 2)), "y": rng.uniform(-4, 4, 6)}
    domains = {"x": pymc_dp.Box([0, -2], [8, 6]), "y": pymc_dp.Interval(-4, 4)}
    # a record at the domain's corner: the worst replacement is on the grid (u = 1 -> v = -1/4)
    data["x"][0] = [8, 6]
    data["y"][0] = 4
    std = pymc_dp.standardize(data, data=domains, epsilon=1.0, scale=scale, ledger=None)
    worst = _worst_change(data, domains, grid_points=9, scale=scale)
    assert worst <= std.sensitivity * (1 + 1e-12)
    assert worst >= 0.999 * std.sensitivity


def test_exact_audit_passes_and_catches_a_halved_noise_scale(monkeypatch):
    """The Laplace mechanism's privacy loss is ``max ||T(x) - T(x')||_1 / b`` exactly; T's worst
    change is found by brute force, independently of COLUMN_SENSITIVITY."""
    scales = []
    from pymc_dp.mechanisms import noise

    real = noise.continuous_laplace

    def recording(values, scale, **kw):
        scales.append(scale)
        return real(values, scale, **kw)

    monkeypatch.setattr(noise, "continuous_laplace", recording)
    rng = np.random.default_rng(2)
    data = {"y": np.r_[10.0, rng.uniform(0, 10, 7)]}
    domains = {"y": pymc_dp.Interval(0, 10)}
    worst = _worst_change(data, domains, grid_points=17)
    eps = 0.7

    def audit() -> float:
        """The exact privacy loss of the release just made, from its noise scale."""
        pymc_dp.standardize(data, data=domains, epsilon=eps, ledger=None)
        return worst / scales[-1]

    assert eps * 0.99 <= audit() <= eps * (1 + 1e-9)
    monkeypatch.setattr(preprocess, "COLUMN_SENSITIVITY", preprocess.COLUMN_SENSITIVITY / 2)
    assert audit() > 1.9 * eps  # a halved noise scale is caught


def _normal_mean(values):
    with pm.Model() as model:
        y = pm.Data("y", values)
        pm.Normal("obs", pm.Normal("mu", 0, 1), 1.0, observed=y)
    return model


def test_one_budget_for_preprocessing_and_release(tmp_path):
    rng = np.random.default_rng(3)
    y = np.clip(rng.normal(40, 5, 400), 0, 100)
    ledger = pymc_dp.Ledger(tmp_path / "l.sqlite", epsilon=2.0)
    std = pymc_dp.standardize({"y": y}, data={"y": pymc_dp.Interval(0, 100)}, epsilon=0.5, ledger=ledger)
    assert abs(std.center["y"][0] - y.mean()) < 5 and std.scale["y"][0] > 0
    assert std.values["y"] is not y and np.allclose(std.values["y"], (y - std.center["y"][0]) / std.scale["y"][0])
    std.data["y"].validate("y", std.values["y"])

    private = pymc_dp.make_private(_normal_mean(std.values["y"]), epsilon=1.0, draws=1, data=std.data, ledger=ledger)
    assert private.dataset_id == std._source_id  # charged to the original dataset's budget
    assert private.certificate.domains["y"]["standardized"]["epsilon"] == 0.5
    idata = private.sample(random_seed=1)
    assert ledger.spent(std._source_id).epsilon == pytest.approx(1.5)
    text = pymc_dp.report(idata).to_markdown()
    assert "standardised" in text and "epsilon = 1.5" in text
    # the leftover 0.5 cannot pay for another release of epsilon 1: refused, nothing changes
    with pytest.raises(BudgetExceededError):
        private.sample(random_seed=2)
    assert ledger.spent(std._source_id).epsilon == pytest.approx(1.5)
    # released objects hold no fingerprint
    assert std._source_id not in repr(std) and std._source_id not in str(idata.attrs)


def test_refuses_containers_that_do_not_hold_the_standardised_values(tmp_path):
    rng = np.random.default_rng(4)
    y = rng.uniform(0, 100, 200)
    std = pymc_dp.standardize({"y": y}, data={"y": pymc_dp.Interval(0, 100)}, epsilon=0.5, ledger=None)
    with pytest.raises(DomainError, match="standardize returned"):
        shifted = np.clip(std.values["y"] + 0.01, std.data["y"].lo, std.data["y"].hi)
        pymc_dp.make_private(_normal_mean(shifted), epsilon=1.0, draws=1, data=std.data, ledger=None)
    with pytest.raises(DomainError, match="unit"):
        pymc_dp.make_private(_normal_mean(std.values["y"]), epsilon=1.0, draws=1, data=std.data, ledger=None, unit="attribute")


def test_refusals_name_the_container():
    y = np.linspace(0, 1, 10)
    with pytest.raises(DomainError, match="'k'.*Interval and Box"):
        pymc_dp.standardize({"y": y, "k": np.zeros(10, int)}, data={"y": pymc_dp.Interval(0, 1), "k": pymc_dp.Binary()},
                            epsilon=1.0, columns=["k"], ledger=None)
    with pytest.raises(DomainError, match="no domain"):
        pymc_dp.standardize({"y": y, "z": y}, data={"y": pymc_dp.Interval(0, 1)}, epsilon=1.0, ledger=None)
    with pytest.raises(DomainError, match="'y'"):
        pymc_dp.standardize({"y": y + 2}, data={"y": pymc_dp.Interval(0, 1)}, epsilon=1.0, ledger=None)
    with pytest.raises(DomainError, match="Box"):
        pymc_dp.standardize({"X": np.zeros((10, 2))}, data={"X": pymc_dp.Interval(0, 1)}, epsilon=1.0, ledger=None)


def test_noisy_regression_on_standardised_data_shares_the_budget():
    rng = np.random.default_rng(5)
    n = 300
    X = rng.uniform(2, 4, (n, 2))
    y = np.clip(1 + X @ [0.5, -0.3] + rng.normal(0, 0.3, n), 0, 4)
    domains = {"X": pymc_dp.Box(0, 5), "y": pymc_dp.Interval(0, 4)}

    def build(Xv, yv):
        with pm.Model() as model:
            Xd, yd = pm.Data("X", Xv), pm.Data("y", yv)
            a = pm.Normal("alpha", 0, 1)
            b = pm.Normal("beta", 0, 1, shape=2)
            pm.Normal("lik", a + Xd @ b, pm.HalfNormal("sigma", 1), observed=yd)
        return model

    std = pymc_dp.standardize({"X": X, "y": y}, data=domains, epsilon=0.5, ledger=None)
    raw = pymc_dp.noisy_statistics(build(X, y), epsilon=1.0, data=domains, ledger=None)
    scaled = pymc_dp.noisy_statistics(build(std.values["X"], std.values["y"]), epsilon=1.0, data=std.data, ledger=None)
    assert type(scaled).__name__ == "NoisyRegression"
    assert scaled.dataset_id == std._source_id == raw.dataset_id  # one dataset, one budget
    assert "standardized" in scaled.domains["X"].to_dict()


def test_sensitivity_follows_the_unit():
    rng = np.random.default_rng(6)
    data = {"X": rng.uniform(0, 1, (30, 2)), "y": rng.uniform(0, 1, 30)}
    domains = {"X": pymc_dp.Box(0, 1), "y": pymc_dp.Interval(0, 1)}
    record = pymc_dp.standardize(data, data=domains, epsilon=1.0, ledger=None)
    users = pymc_dp.standardize(data, data=domains, epsilon=1.0, ledger=None, unit=pymc_dp.Users(max_rows=3))
    attribute = pymc_dp.standardize(data, data=domains, epsilon=1.0, ledger=None, unit="attribute")
    centre_only = pymc_dp.standardize(data, data=domains, epsilon=1.0, ledger=None, scale=False)
    assert record.sensitivity == pytest.approx(3 * preprocess.COLUMN_SENSITIVITY)  # three columns
    assert users.sensitivity == pytest.approx(3 * record.sensitivity)
    assert attribute.sensitivity == pytest.approx(preprocess.COLUMN_SENSITIVITY)
    assert centre_only.sensitivity == pytest.approx(3.0) and np.all(centre_only.scale["X"] == 1.0)


def test_integer_containers_match_what_pm_data_holds():
    """pm.Data stores integer arrays as int32: the ledger's names must not depend on the caller's dtype."""
    rng = np.random.default_rng(7)
    x = rng.uniform(0, 10, 60)
    y = (rng.random(60) < 1 / (1 + np.exp(-(x - 5)))).astype(np.int64)
    domains = {"x": pymc_dp.Interval(0, 10), "y": pymc_dp.Binary()}
    std = pymc_dp.standardize({"x": x, "y": y}, data=domains, epsilon=0.5, columns=["x"], ledger=None)
    with pm.Model() as model:
        xd, yd = pm.Data("x", std.values["x"]), pm.Data("y", y)
        pm.Bernoulli("obs", logit_p=pm.Normal("a", 0, 1) + pm.Normal("b", 0, 1) * xd, observed=yd)
    private = pymc_dp.make_private(model, epsilon=2.0, draws=1, data=std.data, ledger=None)
    assert private.dataset_id == std._source_id
    with pm.Model() as raw:
        xd, yd = pm.Data("x", x), pm.Data("y", y)
        pm.Bernoulli("obs", logit_p=pm.Normal("a", 0, 1) + pm.Normal("b", 0, 1) * xd, observed=yd)
    # the same data without standardisation: the same budget
    assert pymc_dp.make_private(raw, epsilon=2.0, draws=1, data=domains, ledger=None).dataset_id == std._source_id


def test_a_scale_not_told_from_noise_is_left_at_the_declared_range_and_said():
    """Issue 33: epsilon 1 over 30 columns and 400 rows floored many scales at 1% of the range
    without a word, pinning their weights near 0. A variance within NOISE_SDS noise sds of 0 (public:
    the Laplace scale, n and the noisy value) now leaves the column scaled by half its declared
    range, the release lists it, and a warning names it; with ample epsilon no column is."""
    rng = np.random.default_rng(0)
    n, d = 400, 30
    X = rng.uniform(-1, 1, size=(n, d)) * rng.uniform(0.05, 1.0, size=d)  # small spreads in some columns
    domains = {"X": pymc_dp.Box(-np.ones(d), np.ones(d))}
    with pytest.warns(UserWarning, match=r"standardize: the noisy variance of 'X' column\(s\)"):
        std = pymc_dp.standardize({"X": X}, data=domains, epsilon=1.0, ledger=None)
    cols = std.unscaled["X"]
    assert len(cols) > 0
    np.testing.assert_array_equal(std.scale["X"][list(cols)], 1.0)  # half the declared range [-1, 1]
    assert np.all(std.scale["X"] >= preprocess.MIN_SCALE_FRACTION)
    assert std.public()["unscaled"] == {"X": list(cols)}
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)
        ample = pymc_dp.standardize({"X": X}, data=domains, epsilon=2000.0, ledger=None)
    assert ample.unscaled == {}


def test_the_released_sums_are_kept_public_and_give_the_centres():
    """Issue 33: the release keeps what it published before post-processing (the noisy sums, their
    Laplace scale, the rows), so a noise-aware model can read them; the centres follow from them."""
    rng = np.random.default_rng(11)
    x, y = rng.uniform(0, 10, (200, 2)), rng.uniform(-5, 5, 200)
    std = pymc_dp.standardize({"x": x, "y": y}, data={"x": pymc_dp.Box(0, 10), "y": pymc_dp.Interval(-5, 5)},
                              epsilon=2.0, ledger=None)
    assert std.rows == 200 and std.noise_scale == pytest.approx(std.sensitivity / 2.0)
    for name in ("x", "y"):
        part = std.released[name]
        mean_u = np.clip(2 * part["sum_u_half"] / 200, -1, 1)
        np.testing.assert_allclose(std.center[name], part["mid"] + part["half"] * mean_u)
        assert part["sum_u2"].shape == part["sum_u_half"].shape
    public = std.public()
    assert set(public["released"]) == {"x", "y"} and public["rows"] == 200
