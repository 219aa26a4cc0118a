"""The privacy report: content, renderings, round trips, and the JMLR 2017 bounds it quotes."""

from __future__ import annotations

import html.parser
import json
import math
import os
import shutil
import subprocess
from typing import ClassVar

import arviz as az
import numpy as np
import pytest
from scipy import integrate, special, stats

import pymc_dp
from pymc_dp import accounting, lift
from pymc_dp.privacy_report import (
    SCHEMA,
    PrivacyReport,
    distinguishability_threshold,
    kl_robustness_bound,
    lifted_delta,
    prior_mass_term,
    report,
    utility_sampling_term,
)
from tests import models


def _private(build, ledger=None, **kw):
    model, domains = build()
    return pymc_dp.make_private(model, data=domains, ledger=ledger, **kw)


# --------------------------------------------------------------------------- fixtures
@pytest.fixture(scope="module")
def coin():
    """Beta(1, 1)-Bernoulli, n = 30, (2, 1e-6)-DP for 10 draws: exact sampler."""
    return _private(models.coin, epsilon=2.0, delta=1e-6, draws=10)


@pytest.fixture(scope="module")
def coin_release(coin):
    return coin.sample(random_seed=1)


@pytest.fixture(scope="module")
def coin_mcmc_release():
    """The one MCMC release of this file: the coin, sampled with NUTS although it has an exact sampler."""
    pmod = _private(models.coin, epsilon=2.0, draws=10)
    return pmod.sample(method="mcmc", tune=100, chains=2, cores=1, progressbar=False, random_seed=2)


@pytest.fixture(scope="module")
def naive_bayes():
    return _private(models.naive_bayes, epsilon=2.0, delta=1e-6, draws=10)


# --------------------------------------------------------------------------- exact Beta-Bernoulli
def _truncated_beta(a, b, lo, hi):
    """log-density of Beta(a, b) restricted to [lo, hi] (exact normaliser from the incomplete beta)."""
    log_z = special.betaln(a, b) + math.log(special.betainc(a, b, hi) - special.betainc(a, b, lo))
    return lambda p: (a - 1) * np.log(p) + (b - 1) * np.log1p(-p) - log_z


def _neighbour_posteriors(n, lo, hi, alpha=1.0, beta=1.0):
    """For every pair of worst-case neighbours (one record flipped 1 -> 0): the two truncated
    posteriors' log-densities, in both orders."""
    for k in range(1, n + 1):  # x has k ones, y has k - 1
        fx = _truncated_beta(alpha + k, beta + n - k, lo, hi)
        fy = _truncated_beta(alpha + k - 1, beta + n - k + 1, lo, hi)
        yield fx, fy
        yield fy, fx


def _kl(f, g, lo, hi):
    return integrate.quad(lambda p: math.exp(f(p)) * (f(p) - g(p)), lo, hi, epsabs=1e-13, epsrel=1e-10, limit=200)[0]


def _l1(f, g, lo, hi):
    return integrate.quad(lambda p: abs(math.exp(f(p)) - math.exp(g(p))), lo, hi, epsabs=1e-13, limit=200)[0]


def _coin_interval(pmod):
    (factor,) = pmod.certificate.factors
    (c,) = factor.constraints
    return factor.lipschitz, c["lower"], c["upper"]


@pytest.mark.parametrize("epsilon, delta, draws", [(2.0, 1e-6, 10), (2.0, 0.0, 1), (8.0, 0.0, 2)])
def test_kl_bound_holds_for_exact_truncated_posteriors(epsilon, delta, draws):
    """JMLR Thm 7.1 on Beta-Bernoulli: the exact KL between the truncated posteriors of every pair
    of worst-case neighbours (numerical integration) is at most the report's 2 Delta."""
    n = 30
    pmod = _private(lambda: models.coin(n=n), epsilon=epsilon, delta=delta, draws=draws)
    r = report(pmod).to_dict()
    bound = r["bounds"]["kl_robustness"]["value"]
    eps0 = pmod.certificate.epsilon_per_draw
    assert bound == pytest.approx(eps0, rel=1e-12) == pytest.approx(2 * r["budget"]["Delta"])
    L, lo, hi = _coin_interval(pmod)
    # the truncation of a Bernoulli factor: a logit width of 2L (the oscillation), placed by the
    # search at the uniform prior's most massive position, p in [sigmoid(-L), sigmoid(L)]
    assert special.logit(hi) - special.logit(lo) == pytest.approx(2 * L, rel=1e-9)
    assert lo == pytest.approx(special.expit(-L), rel=1e-6) and hi == pytest.approx(special.expit(L), rel=1e-6)
    grid = np.linspace(lo, hi, 2001)
    kls, ratios = [], []
    for f, g in _neighbour_posteriors(n, lo, hi):
        kls.append(_kl(f, g, lo, hi))
        ratios.append(np.max(np.abs(f(grid) - g(grid))))
    assert min(kls) > 0
    assert max(kls) <= bound
    # the per-draw DP claim behind it (Thm 8): the log-ratio of the posteriors stays within 2 Delta
    assert max(ratios) <= eps0 * (1 + 1e-9)
    assert max(ratios) > 0.5 * eps0  # and the constant is not loose: the worst pair nearly reaches it


def test_distinguishability_against_exact_l1_distance(coin):
    """JMLR Thm 13: the exact l1 distance of neighbouring truncated posteriors is within Pinsker's
    sqrt(4 Delta); when the threshold exceeds one unit, it is below the adversary's estimation
    error sqrt(3 ln(1/delta) / N) from N draws (Lemma 12), which is the theorem's argument."""
    r = report(coin).to_dict()
    d = r["bounds"]["distinguishability"]
    Delta, N, dc = r["budget"]["Delta"], r["budget"]["draws"], d["confidence_delta"]
    T = d["value"]
    assert T == pytest.approx(3 * math.log(1 / dc) / (4 * Delta * N), rel=1e-12)
    assert T > 1  # (2, 1e-6) over 10 draws: a change of one record is below the threshold
    # at the threshold, the posteriors' largest l1 distance equals the adversary's error
    assert math.sqrt(4 * Delta * T) == pytest.approx(math.sqrt(3 * math.log(1 / dc) / N), rel=1e-12)
    _, lo, hi = _coin_interval(coin)
    l1 = max(_l1(f, g, lo, hi) for f, g in _neighbour_posteriors(30, lo, hi))
    assert 0 < l1 <= math.sqrt(4 * Delta)
    assert l1 < math.sqrt(3 * math.log(1 / dc) / N)


def test_utility_term_against_exact_binomial_probabilities():
    """JMLR Lemma 11 checked exactly: a query with two complementary answers, utilities in {0, 1}
    with mean p under the posterior. The answer chosen from N draws loses more than the report's
    2 sqrt(ln(2/delta)/(2N)) with probability at most delta (binomial tails, no simulation);
    half the term is not enough."""
    for N in (10, 40, 100):
        for dc in (0.05, 0.2):
            term = utility_sampling_term(N, dc)
            ps = np.linspace(0.5, 1.0, 501)

            def p_regret_above(t, ps=ps, N=N):
                # choosing the wrong answer (sample mean < 1/2) costs 2p - 1 > t
                worst = 0.0
                for p in ps[2 * ps - 1 > t]:
                    wrong = stats.binom.cdf(math.ceil(N / 2) - 1, N, p)  # mean < 1/2
                    worst = max(worst, wrong)
                return worst

            assert p_regret_above(term) <= dc
            if N == 100 and dc == 0.05:
                assert p_regret_above(term / 2) > dc


def test_bound_functions():
    assert kl_robustness_bound(0.25) == 0.5
    assert kl_robustness_bound(0.25, rho=3) == 1.5
    assert distinguishability_threshold(0.1, 10, 0.05) == pytest.approx(3 * math.log(20) / 4)
    assert distinguishability_threshold(0.0, 10) == math.inf
    assert distinguishability_threshold(0.1, 20) == pytest.approx(distinguishability_threshold(0.1, 10) / 2)
    assert utility_sampling_term(50, 0.05) == pytest.approx(2 * math.sqrt(math.log(40) / 100))
    assert utility_sampling_term(50, 0.05, responses=4) == pytest.approx(utility_sampling_term(50, 0.05 / 4))
    assert prior_mass_term(0.3) == pytest.approx(0.7)
    assert prior_mass_term(1.0) == 0.0
    for bad in (lambda: distinguishability_threshold(0.1, 10, 1.0), lambda: utility_sampling_term(0, 0.05),
                lambda: prior_mass_term(1.5), lambda: kl_robustness_bound(-1.0)):
        with pytest.raises(ValueError):
            bad()


def test_lifted_delta_matches_lift():
    rng = np.random.default_rng(0)
    for _ in range(50):
        names = [f"f{i}" for i in range(rng.integers(1, 5))]
        reads = {j: sorted(set(rng.choice(list("abc"), rng.integers(1, 3)))) for j in names}
        L = {j: float(rng.uniform(0, 1)) for j in names}
        factors = [{"name": j, "reads": reads[j], "lipschitz": L[j]} for j in names]
        for unit in ("record", "attribute"):
            assert lifted_delta(factors, unit) == pytest.approx(lift.lift(L, reads, unit))
        assert lifted_delta(factors, "user", 3) == pytest.approx(lift.lift(L, reads, pymc_dp.Users(max_rows=3)))


# --------------------------------------------------------------------------- content
def test_content_beta_bernoulli(coin, coin_release):
    r = report(coin_release)
    c = r.to_dict()
    cert = coin.certificate
    assert c["schema"] == SCHEMA and c["status"] == "released"
    b = c["budget"]
    comp = accounting.compose(cert.epsilon_per_draw, 10, 1e-6)
    assert b["epsilon"] == cert.epsilon == pytest.approx(2.0)
    assert (b["delta"], b["draws"], b["composition"]) == (1e-6, 10, "optimal")
    assert b["epsilon_per_draw"] == cert.epsilon_per_draw and b["Delta"] == cert.epsilon_per_draw / 2
    assert b["epsilon_basic"] == pytest.approx(comp.epsilon_basic) == pytest.approx(10 * cert.epsilon_per_draw)
    assert b["epsilon_optimal"] == pytest.approx(comp.epsilon_optimal)
    assert b["epsilon_optimal"] < b["epsilon_basic"]
    assert c["unit"]["kind"] == "record" and "one row of every private container" in c["unit"]["description"]
    assert c["domains"] == [{"container": "x", "domain": {"type": "Binary"}, "description": "{0, 1}"}]
    assert c["public_containers"] == []
    (f,) = c["factors"]
    L, lo, hi = _coin_interval(coin)
    assert (f["name"], f["family"], f["reads"], f["solver"]) == ("obs", "Bernoulli", ["x"], "interval")
    assert f["lipschitz"] == L == pytest.approx(b["Delta"])  # one factor takes all of Delta
    assert f["truncation"] == [f"p in [{special.expit(-L):.6g}, {special.expit(L):.6g}]"]
    assert f["equal_share"] == pytest.approx(L)
    # prior mass kept: Beta(1, 1) mass of [sigmoid(-L), sigmoid(L)]
    assert c["split"]["prior_mass_kept"] == pytest.approx(hi - lo, rel=1e-9)
    assert c["split"]["lifted_Delta"] == pytest.approx(b["Delta"])
    bd = c["bounds"]
    assert bd["confidence"] == 0.95
    assert bd["kl_robustness"]["value"] == pytest.approx(cert.epsilon_per_draw)
    assert bd["distinguishability"]["value"] == pytest.approx(3 * math.log(20) / (4 * b["Delta"] * 10))
    assert bd["utility_sampling"]["value"] == pytest.approx(2 * math.sqrt(math.log(40) / 20))
    assert bd["utility_prior_mass"]["value"] == pytest.approx(1 - (hi - lo))
    for key, ref in [("kl_robustness", "Thm 7"), ("distinguishability", "Thm 13"),
                     ("utility_sampling", "Lemma 11"), ("utility_prior_mass", "Thm 17")]:
        assert ref in bd[key]["reference"]
    s = c["sampling"]
    assert (s["planned"], s["method"], s["sampler"], s["caveat"]) == ("exact", "exact", "exact conjugate", None)
    (plan,) = s["plan"]
    assert plan["variable"] == "p" and plan["truncation"] == f"[{lo:.6g}, {hi:.6g}]" and "inverse CDF" in plan["algorithm"]
    assert c["ledger"] == {"recorded": False}
    assert c["versions"]["pymc_dp"] == pymc_dp.__version__ and set(c["versions"]) >= {"pymc", "arviz", "numpy"}
    assert [w["kind"] for w in c["warnings"]] == []
    assert c["caveats"] == []
    # the confidence level is a parameter of the report
    r90 = report(coin_release, confidence=0.9).to_dict()
    assert r90["bounds"]["distinguishability"]["value"] == pytest.approx(3 * math.log(10) / (4 * b["Delta"] * 10))
    assert r90 != c


def test_content_naive_bayes_factor_table_and_split(naive_bayes):
    c = report(naive_bayes).to_dict()
    assert c["status"] == "not released" and c["diagnostics"] is None and c["ledger"] is None
    by = {f["name"]: f for f in c["factors"]}
    assert by["cls"]["reads"] == ["y"] and sorted(by["feat"]["reads"]) == ["X", "y"]
    cert = naive_bayes.certificate
    assert c["split"]["method"] == "optimised"
    assert c["split"]["equal_split_prior_mass"] == cert.equal_split_prior_mass
    assert c["split"]["prior_mass_kept"] >= c["split"]["equal_split_prior_mass"]
    # record unit: the factors' constants add up to Delta
    assert by["cls"]["lipschitz"] + by["feat"]["lipschitz"] == pytest.approx(c["budget"]["Delta"], rel=1e-9)
    assert c["split"]["lifted_Delta"] == pytest.approx(c["budget"]["Delta"], rel=1e-9)
    # a record is one class label and a row of m = 16 binary features: L_cls = |logit pi|,
    # L_feat = 16 |logit theta| (each feature of the row moves the log-likelihood by |logit theta|)
    for f in cert.factors:
        assert by[f.name]["equal_share"] == pytest.approx(f.equal_share)
        per_entry = f.lipschitz / (16 if f.name == "feat" else 1)
        lo, hi = special.expit(-per_entry), special.expit(per_entry)
        var = "theta" if f.name == "feat" else "pi"
        # the oscillation search places the width at the symmetric prior's mode to about 1e-6
        (line,) = by[f.name]["truncation"]
        name, ends = line.split(" in ")
        got = [float(v) for v in ends.strip("[]").split(",")]
        assert name == var and got == pytest.approx([lo, hi], abs=2e-6)
    # the prior mass kept is tiny here: the report says so
    assert [w["kind"] for w in c["warnings"]] == ["prior_mass"]
    assert "prior mass" in str(report(naive_bayes))


def test_report_before_release_says_so():
    # its own private model: the module's `coin` fixture may already have released
    r = report(_private(models.coin, epsilon=2.0, delta=1e-6, draws=10))
    c = r.to_dict()
    assert c["status"] == "not released" and c["diagnostics"] is None
    assert c["sampling"]["method"] is None and c["sampling"]["planned"] == "exact"
    text = str(r)
    assert "NOT released yet" in text
    assert "No release yet: there are no diagnostics" in text
    assert "Released draws" not in text and "MCMC caveat" not in text


def test_reports_before_sampling_do_not_depend_on_the_data():
    """Two datasets of the same shape: identical reports (and no fingerprint in them)."""
    a = _private(lambda: models.naive_bayes(seed=0), epsilon=2.0, delta=1e-6, draws=10)
    b = _private(lambda: models.naive_bayes(seed=1), epsilon=2.0, delta=1e-6, draws=10)
    assert a.dataset_id != b.dataset_id
    ra, rb = report(a), report(b)
    assert ra == rb and ra.to_json() == rb.to_json() and str(ra) == str(rb) and ra.to_html() == rb.to_html()
    assert a.dataset_id not in ra.to_json()


def test_no_private_data_fingerprint_or_seed_in_a_release_report(coin, coin_release):
    r = report(coin_release)
    text = r.to_json() + str(r) + r.to_markdown() + r.to_html()
    assert coin.dataset_id not in text
    keys = set()

    def walk(x):
        if isinstance(x, dict):
            keys.update(x)
            for v in x.values():
                walk(v)
        elif isinstance(x, list):
            for v in x:
                walk(v)

    walk(r.to_dict())
    assert not {k for k in keys if "seed" in k or "fingerprint" in k or "dataset" in k}
    # another dataset of the same shape, same seed: only the released draws' diagnostics differ
    other = coin.with_data({"x": 1 - np.asarray(coin.model["x"].get_value())})
    ro = report(other.sample(random_seed=1)).to_dict()
    mine = r.to_dict()
    assert ro["diagnostics"] != mine["diagnostics"]
    ro.pop("diagnostics"), mine.pop("diagnostics")
    assert ro == mine


def test_report_reads_only_the_posterior_and_its_attrs(coin_release):
    """Built from the idata alone: a fresh InferenceData with only the posterior (whose attrs carry
    the certificate) gives the same report; a release without pymc_dp attrs is refused."""
    bare = az.InferenceData(posterior=coin_release.posterior.copy(deep=True))
    assert "pymc_dp" not in bare.attrs
    assert report(bare) == report(coin_release)
    stripped = coin_release.posterior.copy()
    stripped.attrs = {}
    with pytest.raises(ValueError, match="no pymc_dp metadata"):
        report(az.InferenceData(posterior=stripped))
    edited = az.InferenceData(posterior=coin_release.posterior.copy())
    payload = json.loads(coin_release.attrs["pymc_dp"])
    payload["epsilon"] = 0.01
    edited.attrs["pymc_dp"] = json.dumps(payload)
    with pytest.raises(ValueError, match="two different"):
        report(edited)
    with pytest.raises(TypeError):
        report({"epsilon": 1})


def test_diagnostics_are_of_the_released_draws(coin_release):
    d = report(coin_release).to_dict()["diagnostics"]
    assert d["computed_from"] == "released draws only"
    assert (d["chains"], d["draws_per_chain"], d["draws_total"]) == (2, 5, 10)
    (row,) = d["rows"]
    draws = coin_release.posterior["p"].values
    assert row[0] == "p"
    assert row[1] == pytest.approx(draws.mean(), rel=1e-12)
    assert row[2] == pytest.approx(draws.std(ddof=1), rel=1e-12)
    ess = float(az.ess(coin_release.posterior)["p"])
    assert row[d["columns"].index("ess_bulk") + 1] == pytest.approx(ess)
    text = str(report(coin_release))
    assert "Computed from the 10 released draws only" in text
    # a subset of the release is flagged: the guarantee is for the certified release
    subset = az.InferenceData(posterior=coin_release.posterior.isel(draw=slice(0, 3)))
    c = report(subset).to_dict()
    assert c["diagnostics"]["draws_total"] == 6
    assert [w["kind"] for w in c["warnings"]] == ["draws_mismatch"]


def test_diagnostics_table_is_capped(naive_bayes):
    idata = naive_bayes.sample(random_seed=0)
    d = report(idata, max_diagnostic_rows=5).to_dict()["diagnostics"]
    assert len(d["rows"]) == 5 and d["rows_omitted"] == 1 + 32 - 5
    assert d["variables"] == {"pi": [], "theta": [2, 16]}
    assert "28 more parameter(s) not listed" in str(report(idata, max_diagnostic_rows=5))


# --------------------------------------------------------------------------- value object
def test_json_round_trip_equality_and_immutability(coin_release):
    r = report(coin_release)
    again = PrivacyReport.from_json(r.to_json())
    assert again == r and hash(again) == hash(r) and str(again) == str(r)
    assert PrivacyReport.from_json(r.to_json(indent=2)) == r
    assert json.loads(r.to_json()) == r.to_dict()
    d = r.to_dict()
    d["budget"]["epsilon"] = 99.0  # a copy
    assert r["budget"]["epsilon"] == pytest.approx(2.0)
    assert PrivacyReport(d) != r
    with pytest.raises(AttributeError):
        r.foo = 1
    with pytest.raises(ValueError, match="JSON-safe"):
        PrivacyReport({**r.to_dict(), "x": float("nan")})
    with pytest.raises(ValueError, match="schema"):
        PrivacyReport({"budget": {}})
    assert report(r) is r
    assert "2" in repr(r) and "released" in repr(r)


def test_netcdf_round_trip(coin_release, tmp_path):
    path = tmp_path / "release.nc"
    coin_release.to_netcdf(str(path))
    back = az.from_netcdf(str(path))
    assert report(back) == report(coin_release)
    assert report(back).to_html() == report(coin_release).to_html()


def test_report_of_the_model_after_release_equals_report_of_the_release():
    pmod = _private(models.coin, epsilon=2.0, delta=1e-6, draws=10)
    before = report(pmod)
    idata = pmod.sample(random_seed=5)
    after = report(pmod)
    assert after == report(idata) and after != before
    assert after["status"] == "released"
    # everything that does not come from the release is the same before and after
    b, a = before.to_dict(), after.to_dict()
    for key in ("budget", "unit", "domains", "factors", "split", "bounds", "versions"):
        assert a[key] == b[key]
    # a release that carries another certificate is not passed off as this model's
    other = _private(models.coin, epsilon=3.0, draws=10)
    object.__setattr__(other, "last_release", idata)
    with pytest.raises(ValueError, match="another certificate"):
        report(other)


# --------------------------------------------------------------------------- exact vs MCMC
def _caveat_shown(r: PrivacyReport) -> list[bool]:
    return ["MCMC caveat" in r.to_markdown(), "MCMC caveat" in str(r), "MCMC caveat" in r.to_html(),
            "approximate posterior draws" in r.to_json()]


def test_mcmc_caveat_appears_exactly_for_mcmc(coin_release, coin_mcmc_release):
    exact, mcmc = report(coin_release), report(coin_mcmc_release)
    assert _caveat_shown(exact) == [False] * 4
    assert _caveat_shown(mcmc) == [True] * 4
    c = mcmc.to_dict()
    assert c["sampling"]["method"] == "mcmc" and c["sampling"]["planned"] == "exact"
    assert (c["sampling"]["tune"], c["sampling"]["thin"], c["sampling"]["sampler"]) == (100, 1, "pymc")
    assert c["warnings"][0]["kind"] == "mcmc"
    assert "WARNING: This release used MCMC" in str(mcmc)
    assert 'class="alert danger"' in mcmc.to_html() and 'class="alert danger"' not in exact.to_html()
    assert "assume exact posterior draws" in str(mcmc)
    assert c["diagnostics"]["draws_total"] == 10


def test_mcmc_model_before_release_warns():
    pmod = _private(lambda: models.logistic(n=40, d=2), epsilon=4.0, draws=20)
    r = report(pmod)
    assert _caveat_shown(r) == [True] * 4
    c = r.to_dict()
    assert c["sampling"]["planned"] == "mcmc" and "norm ball" in c["sampling"]["exact_unavailable"]
    (f,) = c["factors"]
    assert f["reads"] == ["X", "y"] and f["solver"] == "affine"
    assert any(t.startswith("||w||_2 <= ") for t in f["truncation"])
    assert c["domains"][0]["description"] == "each row x has ||x||_2 <= 1"


# --------------------------------------------------------------------------- ledger
def test_ledger_section_shows_cumulative_spend_and_warns(tmp_path):
    ledger = pymc_dp.Ledger(tmp_path / "l.sqlite", epsilon=5.0)
    pmod = _private(models.coin, epsilon=1.0, draws=4, ledger=ledger)
    pmod.sample(random_seed=1)
    second = report(pmod.sample(random_seed=2)).to_dict()["ledger"]
    assert second["recorded"] is True and second["releases"] == 2
    assert second["spent_epsilon"] == pytest.approx(2.0) and second["total_epsilon"] == 5.0
    assert second["remaining_epsilon"] == pytest.approx(3.0)
    text = str(report(pmod.sample(random_seed=3)))
    assert "spends the budget again" in text and "remaining (epsilon, delta)" in text
    # a ledger with no total: recording only
    free = _private(models.coin, epsilon=1.0, draws=4, ledger=pymc_dp.Ledger(tmp_path / "m.sqlite"))
    led = report(free.sample(random_seed=1)).to_dict()["ledger"]
    assert led["total_epsilon"] is None and led["remaining_epsilon"] is None
    assert "no total (recording only)" in str(report(free.sample(random_seed=1)))


def test_no_ledger_is_said(coin_release):
    assert "not recorded in a budget ledger" in str(report(coin_release))


# --------------------------------------------------------------------------- renderings
class _Checker(html.parser.HTMLParser):
    """Well-formedness: every non-void element closed in order; no scripts, links or remote URLs."""

    VOID: ClassVar[set[str]] = {"meta", "br", "hr", "img", "input", "link", "col", "area", "base", "source", "wbr"}

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.stack, self.errors, self.text, self.tags = [], [], [], []

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)
        if tag in ("script", "link", "iframe", "img", "object", "embed"):
            self.errors.append(f"<{tag}> in a self-contained report")
        for _, value in attrs:
            if value and ("http:" in value or "https:" in value or "//" in value):
                self.errors.append(f"remote URL {value!r}")
        if tag not in self.VOID:
            self.stack.append(tag)

    def handle_endtag(self, tag):
        if not self.stack or self.stack[-1] != tag:
            self.errors.append(f"</{tag}> closes {self.stack[-1:] or 'nothing'}")
        else:
            self.stack.pop()

    def handle_data(self, data):
        self.text.append(data)


def _check_html(markup: str) -> _Checker:
    checker = _Checker()
    checker.feed(markup)
    checker.close()
    assert checker.errors == [] and checker.stack == []
    return checker


def test_html_is_well_formed_self_contained_and_complete(coin_release, coin_mcmc_release, naive_bayes):
    for r in (report(coin_release), report(coin_mcmc_release), report(naive_bayes)):
        checker = _check_html(r._repr_html_())
        text = " ".join(checker.text)
        c = r.to_dict()
        assert f"{c['budget']['epsilon']:.6g}" in text and f"{c['budget']['epsilon_per_draw']:.6g}" in text
        assert f"{c['bounds']['distinguishability']['value']:.4g}" in text
        for f in c["factors"]:
            assert f["name"] in text and f"{f['lipschitz']:.6g}" in text
        assert "url(" not in r.to_html() and "@import" not in r.to_html()
        full = r.to_html(full_document=True)
        assert full.startswith("<!DOCTYPE html>")
        _check_html(full.split("\n", 1)[1])
    # the checker itself catches a broken document
    with pytest.raises(AssertionError):
        _check_html("<div><table></div>")


def test_html_escapes_everything(coin_release):
    d = report(coin_release).to_dict()
    d["factors"][0]["name"] = "<script>alert(1)</script>"
    d["domains"][0]["container"] = "a&b<i>"
    markup = PrivacyReport(d).to_html()
    assert "<script>" not in markup and "&lt;script&gt;" in markup and "a&amp;b&lt;i&gt;" in markup
    _check_html(markup)


def test_markdown_and_text(coin_release):
    r = report(coin_release)
    md = r.to_markdown()
    assert md.startswith("# pymc_dp privacy report")
    for title in ("Summary", "Budget", "Budget ledger", "Privacy unit and data domains",
                  "Likelihood factors and truncation", "Sampling", "What the guarantee means",
                  "Diagnostics of the released draws", "Caveats", "Versions"):
        assert f"\n## {title}\n" in md and f"\n{title}\n" in str(r)
    # every table row has as many cells as its header (escaped pipes do not split cells)
    lines = md.splitlines()
    for i, line in enumerate(lines):
        if line.startswith("|---"):
            cols = lines[i - 1].count(" | ") + 1
            j = i + 1
            while j < len(lines) and lines[j].startswith("|"):
                assert lines[j].replace("\\|", "").count(" | ") + 1 == cols, lines[j]
                j += 1
    c = r.to_dict()
    for out in (md, str(r)):
        assert "optimal" in out and f"{c['budget']['epsilon_basic']:.6g}" in out
        assert f"{c['bounds']['kl_robustness']['value']:.4g}" in out
        assert f"{c['bounds']['utility_sampling']['value']:.4g}" in out
        assert f"{c['split']['prior_mass_kept']:.4g}" in out
        assert "p in [" in out and "{0, 1}" in out
        assert f"pymc_dp | {pymc_dp.__version__}" in out or f"pymc_dp   {pymc_dp.__version__}" in out
    assert r.to_text() == str(r)


# --------------------------------------------------------------------------- headless browser
@pytest.mark.extended
@pytest.mark.skipif(shutil.which("chromium") is None, reason="Debian chromium is not installed")
def test_html_renders_in_headless_chromium(coin_release, coin_mcmc_release, tmp_path):
    for name, idata in (("exact", coin_release), ("mcmc", coin_mcmc_release)):
        r = report(idata)
        page = tmp_path / f"{name}.html"
        page.write_text(r.to_html(full_document=True), encoding="utf-8")
        profile = tmp_path / f"profile-{name}"
        cmd = [
            "chromium", "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
            "--disable-background-networking", "--disable-component-update", "--disable-sync",
            f"--user-data-dir={profile}", "--enable-logging=stderr", "--v=0", "--dump-dom", page.as_uri(),
        ]
        done = subprocess.run(cmd, check=False, capture_output=True, text=True, timeout=120, env={**os.environ, "LANG": "C.UTF-8"})
        assert done.returncode == 0, done.stderr[-2000:]
        dom = done.stdout
        assert 'class="pymc-dp-report"' in dom and "</table>" in dom
        c = r.to_dict()
        for number in (f"{c['budget']['epsilon']:.6g}", f"{c['budget']['epsilon_per_draw']:.6g}",
                       f"{c['bounds']['distinguishability']['value']:.4g}", f"{c['factors'][0]['lipschitz']:.6g}"):
            assert number in dom
        assert ("MCMC caveat" in dom) == (name == "mcmc")
        console = [line for line in done.stderr.splitlines() if "CONSOLE" in line or "Uncaught" in line]
        assert console == []


def test_a_single_draw_release_renders():
    r = report(_private(models.coin, epsilon=1.0, draws=1).sample(random_seed=0))
    d = r["diagnostics"]
    assert d["draws_total"] == 1 and d["rows"][0][0] == "p" and d["rows"][0][-1] is None  # no R-hat
    assert "R-hat needs at least 2 chains" in str(r) and "n/a" in str(r)
    _check_html(r.to_html())
    assert r["bounds"]["distinguishability"]["value"] == pytest.approx(3 * math.log(20) / (4 * 0.5))
