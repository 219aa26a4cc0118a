"""Bad inputs: a typed error naming the variable, nothing sampled, every ledger byte unchanged.

Each case sets up a model (and, for the later stages, a private model or a ledger file), then
runs one action that must be refused. For every case the test checks that

* the exception has the expected type and its message names the variable or argument at fault;
* neither ``pm.sample``, ``pymc_dp``'s MCMC runner nor the exact conjugate sampler ran (all
  three are patched to fail);
* every file under the test's directory -- an explicit ``Ledger`` and the default ledger
  (``PYMC_DP_LEDGER``), each already holding a committed release, and any ledger file a case
  planted -- is byte-for-byte what it was, and no file appeared or vanished.

Which inputs raise a :class:`~pymc_dp.PrivacyError` (a ``ValueError``)? Everything about the
privacy contract: the data and their domains, the model's structure (what a factor reads, and
how), the budget (``epsilon``, ``delta``, ``draws``), the unit, the budget split, the ledger,
``method="exact"`` on a model without an exact sampler, and ``with_data``. The keyword
arguments of :meth:`~pymc_dp.PrivateModel.sample` that only steer the sampler (``chains``,
``thin``, ``tune``, ``method``'s spelling, ``nuts_sampler``, ``random_seed``, and the forbidden
``pm.sample`` keywords) are ordinary API misuse and raise what Python and PyMC raise for them
(``TypeError`` for an unexpected keyword, ``ValueError`` for a bad value, ``ImportError`` for a
backend that is not installed): they say nothing about whether the *data* can be made private,
and an ``except PrivacyError`` meant for "this model/data cannot be released" should not swallow
a typo. They too are refused before anything runs and before the ledger is touched.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import numpy as np
import pymc as pm
import pytensor.tensor as pt
import pytest

import pymc_dp
from pymc_dp import (
    BudgetExceededError,
    DomainError,
    LedgerError,
    NotConjugateError,
    PrivacyError,
    UnsupportedFactorError,
    core,
    sampling,
)
from pymc_dp.exact import ConjugatePlan


# --------------------------------------------------------------------------- environment
@dataclass
class Env:
    """What a case may use: a directory, an explicit ledger and the default ledger's path."""

    root: Path
    ledger: pymc_dp.Ledger  # explicit, total epsilon 1.5, 1.0 already spent on another dataset
    default_path: Path  # PYMC_DP_LEDGER: no total, one release already recorded
    monkeypatch: pytest.MonkeyPatch

    def private(self, model, data, **kw):
        kw = {"epsilon": 1.0, "draws": 4, "ledger": self.ledger, **kw}
        return pymc_dp.make_private(model, data=data, **kw)


def _charge(ledger, dataset="someone-else", epsilon=1.0):
    ledger.commit(ledger.reserve(dataset, epsilon, 0.0, description={"note": "an earlier release"}))


def _snapshot(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): (p.read_bytes() if p.is_file() else b"<dir>") for p in sorted(root.rglob("*"))}


def _never(what):
    def fail(*args, **kwargs):  # pragma: no cover - reached only on a bug
        raise AssertionError(f"{what} ran although the input is refused")

    return fail


@pytest.fixture
def env(tmp_path, monkeypatch):
    default = tmp_path / "default" / "ledger.sqlite"
    monkeypatch.setenv("PYMC_DP_LEDGER", str(default))
    _charge(pymc_dp.Ledger())
    explicit = pymc_dp.Ledger(tmp_path / "explicit" / "ledger.sqlite", epsilon=1.5)
    _charge(explicit)
    monkeypatch.setattr(pm, "sample", _never("pm.sample"))
    monkeypatch.setattr(core, "run_mcmc", _never("MCMC"))
    monkeypatch.setattr(ConjugatePlan, "sample", _never("the exact sampler"))
    return Env(tmp_path, explicit, default, monkeypatch)


# --------------------------------------------------------------------------- models
# distinctive names, so that "the message names the variable" cannot pass by accident
def coin(values=(0, 1, 1, 0)):
    with pm.Model() as m:
        xd = pm.Data("votes", np.asarray(values))
        p = pm.Beta("rate", 1, 1)
        pm.Bernoulli("ballot", p=p, observed=xd)
    return m


COIN = {"votes": pymc_dp.Binary()}


def heights(values=(0.2, 0.5, 0.9), mu=None, observed=None):
    """Normal(mean, 1) on ``height`` in [0, 1]; ``mu``/``observed`` rewrite the factor."""
    with pm.Model() as m:
        hd = pm.Data("height", np.asarray(values, dtype=float))
        mean = pm.Normal("mean", 0, 1)
        loc = mean if mu is None else mu(hd, mean)
        pm.Normal("stature", loc, 1.0, observed=hd if observed is None else observed(hd))
    return m


UNIT = {"height": pymc_dp.Interval(0, 1)}


def regression(X=None, d=2, row_domain=None, matrix=False, y_public=False):
    """Logistic regression ``label ~ Bernoulli(logit_p = feats @ w)`` (``matrix``: a (d, 3) W)."""
    X = np.full((4, d), 0.3) if X is None else np.asarray(X, dtype=float)
    with pm.Model() as m:
        Xd = pm.Data("feats", X)
        yd = pm.Data("label", np.array([0, 1, 1, 0])[: X.shape[0]])
        w = pm.Normal("w", 0, 1, shape=(d, 3) if matrix else (d,))
        pm.Bernoulli("outcome", logit_p=(Xd @ w)[:, 1] if matrix else Xd @ w, observed=yd)
    data = {"feats": row_domain or pymc_dp.Ball(1.0)}
    if not y_public:
        data["label"] = pymc_dp.Binary()
    return m, data


def classes(y=(0, 1, 1, 0), index=None, domain=None):
    """Naive-Bayes-like ``feature ~ Bernoulli(table[klass])``; ``index`` rewrites the index."""
    with pm.Model() as m:
        yd = pm.Data("klass", np.asarray(y))
        fd = pm.Data("feature", np.array([1, 0, 1, 1]))
        table = pm.Beta("table", 1, 1, shape=2)
        idx = yd if index is None else index(yd)
        pm.Bernoulli("feat", p=table[idx], observed=fd)
    return m, {"klass": domain or pymc_dp.Binary(), "feature": pymc_dp.Binary()}


def family(dist, values, **params):
    """One likelihood ``obs_fam`` of family ``dist`` on container ``reading``, prior ``par``."""
    with pm.Model() as m:
        xd = pm.Data("reading", np.asarray(values))
        par = pm.HalfNormal("par", 1)
        dist("obs_fam", **{k: (par if v is None else v) for k, v in params.items()}, observed=xd)
    return m


def location_scale():
    with pm.Model() as m:
        yd = pm.Data("height", np.array([0.1, 0.4, 0.8]))
        mu = pm.Normal("mu", 0, 1)
        sigma = pm.HalfNormal("sigma", 1)
        pm.Normal("stature", mu, sigma, observed=yd)
    return m


# --------------------------------------------------------------------------- cases
@dataclass
class Case:
    id: str
    setup: Callable[[Env], Callable[[], Any]]  # returns the action to refuse
    error: type
    names: tuple[str, ...]  # every one must appear in the message


CASES: list[Case] = []


def case(id, error, *names):
    def register(setup):
        CASES.append(Case(id, setup, error, names))
        return setup

    return register


def build(id, error, names, model, data, **kw):
    """A case refused by make_private."""
    names = (names,) if isinstance(names, str) else names

    def setup(env):
        m = model() if callable(model) else model
        return lambda: env.private(m, data, **kw)

    CASES.append(Case(id, setup, error, names))


def _set(model, name, value):
    # pm.Data refuses NaN/inf itself; data swapped in later (set_value) must still be refused
    model[name].set_value(np.asarray(value))
    return model


# ---- data outside its domain, NaN/inf, wrong shapes and dtypes
build("outside-binary", DomainError, "'votes'", lambda: coin([0, 1, 2]), COIN)
build("outside-interval", DomainError, "'height'", lambda: heights([0.2, 1.5]), UNIT)
build("below-interval", DomainError, "'height'", lambda: heights([-1e-9, 0.5]), UNIT)
build("non-integer-in-integers", DomainError, "'reading'",
      lambda: family(pm.Poisson, [1.0, 2.5], mu=None), {"reading": pymc_dp.Integers(0, 5)})
build("nan", DomainError, "'height'", lambda: _set(heights(), "height", [0.1, np.nan, 0.3]), UNIT)
build("inf", DomainError, "'height'", lambda: heights([0.1, np.inf]), UNIT)
build("minus-inf", DomainError, "'height'", lambda: _set(heights(), "height", [0.1, -np.inf, 0.3]), UNIT)
build("zero-dim-data", DomainError, "'height'", lambda: heights(0.5), UNIT)
build("ball-on-1d-container", DomainError, "'height'", heights, {"height": pymc_dp.Ball(1.0)})
build("box-on-1d-container", DomainError, "'height'", heights, {"height": pymc_dp.Box(0, 1)})
build("box-wrong-feature-count", DomainError, "'feats'",
      lambda: regression()[0], {"feats": pymc_dp.Box([0, 0, 0], [1, 1, 1]), "label": pymc_dp.Binary()})
build("row-outside-ball", DomainError, "'feats'",
      lambda: regression(X=[[1.0, 1.0], [0, 0], [0, 0], [0, 0]])[0], regression()[1])
build("row-outside-box", DomainError, "'feats'",
      lambda: regression(X=[[0.5, 1.2], [0, 0], [0, 0], [0, 0]])[0],
      {"feats": pymc_dp.Box(-1, 1), "label": pymc_dp.Binary()})

# ---- missing, extra or malformed domains and containers
build("missing-domain", DomainError, "'votes'", coin, {})
build("extra-domain", DomainError, "'ghost'", coin, {**COIN, "ghost": pymc_dp.Binary()})
build("not-a-domain", DomainError, "'votes'", coin, {"votes": (0, 1)})
build("domain-not-a-mapping", DomainError, "data", coin, [("votes", pymc_dp.Binary())])
build("unknown-public-container", DomainError, "'ghost'", coin, COIN, public=["ghost"])
build("public-and-private", DomainError, "'votes'", coin, COIN, public=["votes"])
build("public-as-a-string-and-private", DomainError, "'votes'", coin, COIN, public="votes")
build("unknown-public-container-as-a-string", DomainError, "'ghost'", coin, COIN, public="ghost")
build("rows-differ", DomainError, ("'klass'", "'feature'"),
      lambda: classes(y=[0, 1, 1])[0], classes()[1])


def _only_deterministic():
    with pm.Model() as m:
        xd = pm.Data("votes", np.array([0, 1]))
        p = pm.Beta("rate", 1, 1)
        pm.Deterministic("echo", xd * p)
    return m


build("no-factor-reads-private-data", PrivacyError, "'votes'", _only_deterministic, COIN)

# ---- unsupported families and forms
build("family-without-rule", UnsupportedFactorError, "'obs_fam'",
      lambda: family(pm.Weibull, [0.2, 0.5], alpha=None, beta=1.0), {"reading": pymc_dp.Interval(0.1, 1)})
build("wald-without-rule", UnsupportedFactorError, "'obs_fam'",
      lambda: family(pm.Wald, [0.2, 0.5], mu=None, lam=1.0), {"reading": pymc_dp.Interval(0.1, 1)})
build("aggregate-mean", UnsupportedFactorError, "'stature'", lambda: heights(mu=lambda x, m: x.mean() + m), UNIT)
build("aggregate-sum", UnsupportedFactorError, "'stature'", lambda: heights(mu=lambda x, m: m * x.sum()), UNIT)
build("aggregate-max", UnsupportedFactorError, "'stature'", lambda: heights(mu=lambda x, m: m + pt.max(x)), UNIT)
build("cumulative-sum", UnsupportedFactorError, "'stature'", lambda: heights(mu=lambda x, m: m + pt.cumsum(x)), UNIT)
build("sort", UnsupportedFactorError, "'stature'", lambda: heights(mu=lambda x, m: m + pt.sort(x)), UNIT)
build("transformed-observation", UnsupportedFactorError, "'stature'",
      lambda: heights(observed=lambda x: pt.log(x + 1)), UNIT)
build("observed-reversed", UnsupportedFactorError, "'stature'", lambda: heights(observed=lambda x: x[::-1]), UNIT)
build("row-domain-on-observed", UnsupportedFactorError, "'height'",
      lambda: heights(np.full((3, 1), 0.5)), {"height": pymc_dp.Ball(1.0)})


def _private_shape():
    with pm.Model() as m:
        hd = pm.Data("height", np.array([0.2, 0.5, 0.9]))
        mean = pm.Normal("mean", 0, 1)
        pm.Normal("per_row", 0, 1, shape=hd.shape[0])
        pm.Normal("stature", mean, 1.0, observed=hd)
    return m


def _private_value_shape():
    with pm.Model() as m:
        kd = pm.Data("count", np.array([2, 3, 1]))
        rate = pm.Beta("rate", 1, 1)
        pm.Normal("sized", 0, 1, shape=pt.cast(kd[0], "int64"))
        pm.Bernoulli("ballot", p=rate, observed=pt.clip(kd, 0, 1))
    return m


def _private_prior():
    with pm.Model() as m:
        xd = pm.Data("votes", np.array([0, 1, 1, 0]))
        p = pm.Beta("rate", 1 + xd.sum(), 1)
        pm.Bernoulli("ballot", p=p, observed=xd)
    return m


def _potential():
    with pm.Model() as m:
        xd = pm.Data("votes", np.array([0, 1, 1, 0]))
        p = pm.Beta("rate", 1, 1)
        pm.Bernoulli("ballot", p=p, observed=xd)
        pm.Potential("nudge", -(xd * p).sum())
    return m


# a shape read from a private container is public (neighbours have the same number of rows;
# the split already depends on the data's shapes): tested to certify below
build("private-value-as-shape", UnsupportedFactorError, "'sized'", _private_value_shape,
      {"count": pymc_dp.Integers(0, 5)})
build("private-data-in-prior", UnsupportedFactorError, "'rate'", _private_prior, COIN)
build("potential-reads-private-data", UnsupportedFactorError, "'nudge'", _potential, COIN)
build("index-computed-from-private-data", UnsupportedFactorError, "'feat'",
      lambda: classes(index=lambda y: 1 - y)[0], classes()[1])
build("index-with-interval-domain", UnsupportedFactorError, ("'feat'", "'klass'"),
      lambda: classes()[0], {"klass": pymc_dp.Interval(0, 1), "feature": pymc_dp.Binary()})
# X @ w with X's entries in an elementwise Interval, and (X @ W)[:, 1] with a weight matrix, were
# refused before linear predictors were read as written; tests/test_factors.py certifies them
build("public-observed-private-parameters", UnsupportedFactorError, "'outcome'",
      lambda: regression()[0], regression(y_public=True)[1], public=["label"])
def _reads_observed_rv(kind):
    """A variable that reads an observed RV: PyMC evaluates it as its data. With an explicit
    shape= the RV's graph has no link to the data at all (not even through its size)."""
    with pm.Model() as m:
        hd = pm.Data("height", np.array([0.2, 0.5, 0.9]))
        mean = pm.Normal("mean", 0, 1)
        stature = pm.Normal("stature", mean, 1.0, observed=hd, shape=3)
        if kind == "prior":
            pm.Normal("shifted", stature.mean(), 1.0)
        else:
            pm.Potential("pull", -((stature.mean() - mean) ** 2))
    return m


def _index_by_observed_rv():
    with pm.Model() as m:
        yd = pm.Data("klass", np.array([0, 1, 1, 0]))
        fd = pm.Data("feature", np.array([1, 0, 1, 1]))
        pi = pm.Beta("pi", 1, 1)
        cls = pm.Bernoulli("cls", p=pi, observed=yd, shape=4)
        table = pm.Beta("table", 1, 1, shape=2)
        pm.Bernoulli("feat", p=table[cls], observed=fd, shape=4)
    return m


build("prior-reads-observed-rv", UnsupportedFactorError, ("'shifted'", "'stature'", "'height'"),
      lambda: _reads_observed_rv("prior"), UNIT, epsilon=40.0)
build("potential-reads-observed-rv", UnsupportedFactorError, ("'pull'", "'stature'", "'height'"),
      lambda: _reads_observed_rv("potential"), UNIT, epsilon=40.0)
build("factor-indexed-by-observed-rv", UnsupportedFactorError, ("'feat'", "'cls'", "'klass'"),
      _index_by_observed_rv, classes()[1], epsilon=40.0)

# the family's support and the declared domain disagree: the factor and the container are named
build("bernoulli-on-interval", DomainError, ("'ballot'", "'votes'"), coin, {"votes": pymc_dp.Interval(0, 1)})
build("bernoulli-on-wider-integers", DomainError, ("'ballot'", "'votes'"), coin, {"votes": pymc_dp.Integers(0, 2)})
build("poisson-below-zero", DomainError, ("'obs_fam'", "'reading'"),
      lambda: family(pm.Poisson, [1, 2], mu=None), {"reading": pymc_dp.Integers(-1, 5)})
build("beta-likelihood-touching-zero", DomainError, ("'obs_fam'", "'reading'"),
      lambda: family(pm.Beta, [0.2, 0.5], alpha=None, beta=2.0), {"reading": pymc_dp.Interval(0, 0.9)})
build("gamma-likelihood-at-zero", DomainError, ("'obs_fam'", "'reading'"),
      lambda: family(pm.Gamma, [0.2, 0.5], alpha=None, beta=1.0), {"reading": pymc_dp.Interval(0, 1)})

# ---- the budget, the unit, the split, the ledger argument
for value in (0.0, -1.0, float("nan"), float("inf"), "1", True, None):
    build(f"epsilon={value!r}", BudgetExceededError, "epsilon=", coin, COIN, epsilon=value)
for value in (1.0, -0.1, float("nan"), "0", True):
    build(f"delta={value!r}", BudgetExceededError, "delta=", coin, COIN, delta=value)
for value in (0, -3, 2.0, "2", True):
    build(f"draws={value!r}", PrivacyError, "draws=", coin, COIN, draws=value)
for value in ("person", "Record", None, 1):
    build(f"unit={value!r}", PrivacyError, "unit=", coin, COIN, unit=value)
build("users-ids-wrong-length", PrivacyError, "unit=Users(ids)", coin, COIN, unit=pymc_dp.Users(["a", "b", "c"]))
build("split-unknown", PrivacyError, "split=", coin, COIN, split="best")
build("ledger-not-a-ledger", PrivacyError, "ledger=", coin, COIN, ledger="/tmp/budget.sqlite")
build("epsilon-and-bounds", PrivacyError, ("epsilon", "bounds"), coin, COIN, bounds={"rate": (0.4, 0.6)})


def _binomial():
    with pm.Model() as m:
        kd = pm.Data("heads", np.array([3, 5, 7]))
        p = pm.Beta("rate", 1, 1)
        pm.Binomial("tosses", n=10, p=p, observed=kd)
    return m


def _binomial_of_two():
    """The probability is a product of two free RVs: no oscillation region (one free RV only), so
    the per-record constant's proved floor ln C(10, 5) decides."""
    with pm.Model() as m:
        kd = pm.Data("heads", np.array([3, 5, 7]))
        p = pm.Beta("rate", 1, 1) * pm.Beta("bias", 5, 1)
        pm.Binomial("tosses", n=10, p=p, observed=kd)
    return m


def _categorical():
    with pm.Model() as m:
        xd = pm.Data("answer", np.array([0, 2, 1]))
        p = pm.Dirichlet("share", a=np.ones(3))
        pm.Categorical("answers", p=p, observed=xd)
    return m


# a domain wider than the family's support: such records have probability 0, and a release
# would fail in the sampler after the ledger charged it
build("domain-above-binomial-n", DomainError, ("'tosses'", "'heads'", "Integers(0, 10)"),
      _binomial, {"heads": pymc_dp.Integers(0, 12)}, epsilon=50.0, draws=1)
build("domain-above-categorical-classes", DomainError, ("'answers'", "'answer'", "Integers(0, 2)"),
      _categorical, {"answer": pymc_dp.Integers(0, 4)})

build("budget-below-the-smallest-constant", BudgetExceededError, ("'tosses'", "epsilon"),
      _binomial_of_two, {"heads": pymc_dp.Integers(0, 10)}, epsilon=0.1, draws=1)


@case("users-max-rows-zero", PrivacyError, "max_rows=")
def _(env):
    return lambda: env.private(coin(), COIN, unit=pymc_dp.Users(max_rows=0))


# ---- sample(): refused before the ledger is touched
def sampling_case(id, error, names, builder="coin", **kw):
    names = (names,) if isinstance(names, str) else names

    def setup(env):
        if builder == "coin":
            pmod = env.private(coin(), COIN)
        else:
            pmod = env.private(location_scale(), UNIT, epsilon=40.0)
        return lambda: pmod.sample(**kw)

    CASES.append(Case(id, setup, error, names))


for key, value in (("draws", 10), ("model", None), ("return_inferencedata", False), ("discard_tuned_samples", False), ("step", object())):
    sampling_case(f"sample-forbids-{key}", TypeError, f"'{key}'", **{key: value})
sampling_case("chains-not-dividing-draws", ValueError, ("chains=3", "draws=4"), chains=3)
sampling_case("chains-zero", ValueError, "chains=", chains=0)
sampling_case("chains-float", ValueError, "chains=", chains=2.0)
sampling_case("thin-zero", ValueError, "thin=", method="mcmc", thin=0)
sampling_case("tune-negative", ValueError, "tune=", method="mcmc", tune=-1)
sampling_case("tune-float", ValueError, "tune=", method="mcmc", tune=2.5)
sampling_case("method-unknown", ValueError, "method=", method="nuts")
sampling_case("exact-without-exact-sampler", NotConjugateError, "'sigma'", builder="location_scale", method="exact")
sampling_case("nuts-sampler-unknown", ValueError, "nuts_sampler=", method="mcmc", nuts_sampler="hmc")
sampling_case("random-seed-string-exact", TypeError, "random_seed=", random_seed="abc")
sampling_case("random-seed-negative-exact", ValueError, "random_seed=", random_seed=-1)
sampling_case("random-seed-string-mcmc", TypeError, "random_seed=", method="mcmc", random_seed="abc")
sampling_case("random-seed-float-mcmc", TypeError, "random_seed=", method="mcmc", random_seed=1.5)


@case("nuts-sampler-not-installed", ImportError, "nuts_sampler='numpyro'", "pymc-dp[jax]")
def _(env):
    pmod = env.private(coin(), COIN)

    def missing(name):
        raise ModuleNotFoundError(f"No module named {name!r}", name=name)

    env.monkeypatch.setattr(sampling, "_import_module", missing)
    return lambda: pmod.sample(method="mcmc", nuts_sampler="numpyro")


# ---- with_data(): other data for the same mechanism
def with_data_case(id, error, names, data):
    names = (names,) if isinstance(names, str) else names

    def setup(env):
        pmod = env.private(coin(), COIN)
        return lambda: pmod.with_data(data)

    CASES.append(Case(id, setup, error, names))


with_data_case("with-data-other-shape", DomainError, ("'votes'", "shape"), {"votes": np.zeros(5, dtype=int)})
with_data_case("with-data-other-ndim", DomainError, ("'votes'", "shape"), {"votes": np.zeros((4, 1), dtype=int)})
with_data_case("with-data-outside-domain", DomainError, "'votes'", {"votes": np.array([0, 1, 3, 0])})
with_data_case("with-data-nan", DomainError, "'votes'", {"votes": np.array([0, 1, np.nan, 0])})
with_data_case("with-data-strings", DomainError, "'votes'", {"votes": np.array(["0", "1", "1", "0"])})
with_data_case("with-data-objects", DomainError, "'votes'", {"votes": np.array([0, 1, 1, 0], dtype=object)})
with_data_case("with-data-unknown-container", DomainError, "'ghost'", {"ghost": np.zeros(4, dtype=int)})
with_data_case("with-data-not-a-mapping", DomainError, "with_data", [0, 1, 1, 0])


@case("with-data-public-container", DomainError, "'pub'")
def _(env):
    with pm.Model() as m:
        xd = pm.Data("votes", np.array([0, 1, 1, 0]))
        pm.Data("pub", np.array([1.0, 2.0]))
        p = pm.Beta("rate", 1, 1)
        pm.Bernoulli("ballot", p=p, observed=xd)
    pmod = env.private(m, COIN, public=["pub"])
    return lambda: pmod.with_data({"pub": np.array([3.0, 4.0])})


# ---- the ledger: exhausted, unwritable, corrupted
@case("budget-exhausted", BudgetExceededError, "epsilon=1", "remains")
def _(env):
    pmod = env.private(coin(), COIN)  # explicit ledger: total 1.5
    _charge(env.ledger, pmod.dataset_id, 1.0)  # an earlier release on these data
    return lambda: pmod.sample(random_seed=1)


@case("budget-exhausted-mcmc", BudgetExceededError, "epsilon=1", "remains")
def _(env):
    pmod = env.private(coin(), COIN)
    _charge(env.ledger, pmod.dataset_id, 1.0)
    return lambda: pmod.sample(method="mcmc", tune=10, random_seed=1)


def _plant(env, name, content: bytes | None, *, as_default: bool):
    """A file (or, with ``content=None``, a regular file with a ledger path *under* it)."""
    path = env.root / name
    if content is None:
        path.write_text("I am a regular file, not a directory")
        path = path / "ledger.sqlite"
    else:
        path.write_bytes(content)
    if as_default:
        env.monkeypatch.setenv("PYMC_DP_LEDGER", str(path))
    return path


def _random_bytes(n=8192):
    return np.random.default_rng(7).bytes(n)


def _foreign_sqlite(path):
    import sqlite3

    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE notes (text TEXT)")
        conn.execute("INSERT INTO notes VALUES ('not a ledger')")
    conn.close()


for where in ("default", "explicit"):

    @case(f"ledger-under-a-regular-file-{where}", LedgerError, "ledger.sqlite", "PYMC_DP_LEDGER")
    def _(env, where=where):
        path = _plant(env, "regular", None, as_default=where == "default")
        if where == "default":
            pmod = env.private(coin(), COIN, ledger="default")
            return lambda: pmod.sample(random_seed=1)
        return lambda: env.private(coin(), COIN, ledger=pymc_dp.Ledger(path))

    @case(f"ledger-random-bytes-{where}", LedgerError, "garbage.sqlite", "corrupted")
    def _(env, where=where):
        path = _plant(env, "garbage.sqlite", _random_bytes(), as_default=where == "default")
        if where == "default":
            pmod = env.private(coin(), COIN, ledger="default")
            return lambda: pmod.sample(random_seed=1)
        return lambda: env.private(coin(), COIN, ledger=pymc_dp.Ledger(path))


@case("ledger-truncated-file", LedgerError, "cut.sqlite")
def _(env):
    whole = env.ledger.path.read_bytes()
    _plant(env, "cut.sqlite", whole[: len(whole) // 2 + 100], as_default=True)
    pmod = env.private(coin(), COIN, ledger="default")
    return lambda: pmod.sample(random_seed=1)


@case("ledger-of-another-application", LedgerError, "other.sqlite", "another schema")
def _(env):
    path = env.root / "other.sqlite"
    _foreign_sqlite(path)
    env.monkeypatch.setenv("PYMC_DP_LEDGER", str(path))
    pmod = env.private(coin(), COIN, ledger="default")
    return lambda: pmod.sample(random_seed=1)


@case("ledger-path-is-a-directory", LedgerError, "a_directory")
def _(env):
    (env.root / "a_directory").mkdir()
    env.monkeypatch.setenv("PYMC_DP_LEDGER", str(env.root / "a_directory"))
    pmod = env.private(coin(), COIN, ledger="default")
    return lambda: pmod.sample(method="mcmc", random_seed=1)


# --------------------------------------------------------------------------- the test
def test_there_are_many_cases():
    assert len(CASES) >= 20
    assert len({c.id for c in CASES}) == len(CASES)


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_refused(case, env):
    action = case.setup(env)
    before = _snapshot(env.root)
    assert len(before) >= 4  # both ledgers and their directories
    with pytest.raises(case.error) as info:
        action()
    err = info.value
    if issubclass(case.error, PrivacyError):
        assert isinstance(err, PrivacyError) and isinstance(err, ValueError)
    message = str(err)
    for name in case.names:
        assert name in message, f"{name!r} not named in: {message}"
    assert _snapshot(env.root) == before, "a ledger file changed, appeared or vanished"


def test_budget_message_states_smallest_epsilon(env, lipschitz_only):
    with pytest.raises(BudgetExceededError) as info:
        env.private(_binomial(), {"heads": pymc_dp.Integers(0, 10)}, epsilon=0.1, draws=1)
    # ln C(10, 5) = 5.529..., per draw 2 x that (the per-record constant's floor)
    assert "11.06" in str(info.value)


def test_a_proved_floor_names_the_oscillation_where_the_family_has_one():
    """A Binomial count whose probability is a product of two free RVs: the per-record constant
    has a proved floor (ln C(10, 5)); the oscillation over a box (a Span of ``a * b``) has none, so
    the refusal may not claim a proved floor: it says that constants down to 0 exist and that no
    region was found. (``bounds=`` shows one exists: a box of half-width 0.05 about 0.5 costs
    eps0 = 5.35, kept mass 0.022; the box search does not find it at epsilon 0.1: a tiny region.)"""
    rng = np.random.default_rng(0)
    with pm.Model() as model:
        k = pm.Data("heads", rng.integers(0, 11, 20))
        a, b = pm.Beta("a", 2, 2), pm.Beta("b", 2, 2)
        pm.Binomial("tosses", n=10, p=a * b, observed=k)
    with pytest.raises(BudgetExceededError) as info:
        pymc_dp.make_private(model, epsilon=0.1, draws=1, data={"heads": pymc_dp.Integers(0, 10)}, ledger=None)
    message = str(info.value)
    assert "'tosses'" in message and "constants down to 0" in message and "raise epsilon" in message
    assert "(proved)" not in message


def test_sample_arguments_are_not_privacy_errors(env):
    """The sampler's own arguments raise TypeError/ValueError/ImportError, not PrivacyError."""
    pmod = env.private(coin(), COIN)
    for kw in (dict(draws=3), dict(chains=3), dict(method="nuts"), dict(tune=-1), dict(random_seed="x")):
        with pytest.raises((TypeError, ValueError)) as info:
            pmod.sample(**kw)
        assert not isinstance(info.value, PrivacyError), kw


# --------------------------------------------------------------------------- known bugs, not fixed here
# Both come from truncate.solve_scalar (outside this suite's files): for a factor that reads one
# vector free RV, it measures L only along the diagonal ``v = t * ones`` and takes the sup over the
# box [lo, hi]^d to be at its "ends" t = lo, t = hi. That holds when each element's constant
# depends on its own element (p, theta[y], ...), not for a non-separable function of the vector.
def _contrast(weights):
    with pm.Model() as m:
        xd = pm.Data("votes", np.array([0, 1, 1, 0]))
        z = pm.Normal("z", 0, 1, shape=len(weights))
        pm.Bernoulli("ballot", p=pm.math.sigmoid(pt.dot(np.asarray(weights, float), z)), observed=xd)
    return m


@pytest.mark.parametrize(
    "weights",
    [
        [1.0, -2.0],  # certified L = |z0 - 2 z1| <= 1 on z in [-1, 1]^2, where it reaches 3
        [1.0, -1.0],  # L = 0 on the diagonal: Interval(None, None), and rewrite crashes with a bare ValueError
    ],
    ids=["weighted-contrast", "zero-sum-contrast"],
)
def test_a_non_separable_function_of_one_vector_rv_is_certified_soundly_or_refused(weights):
    try:
        pmod = pymc_dp.make_private(_contrast(weights), epsilon=2.0, draws=1, data=COIN, ledger=None)
    except PrivacyError:
        return  # refusing is fine
    (factor,) = pmod.certificate.factors
    for c in factor.constraints:
        if c["kind"] != "interval":
            continue  # a potential on the factor's own constant is sound by construction
        lo = -np.inf if c["lower"] is None else c["lower"]
        hi = np.inf if c["upper"] is None else c["upper"]
        corners = np.array([[a, b] for a in (lo, hi) for b in (lo, hi)])
        true_sup = np.max(np.abs(corners @ np.asarray(weights)))  # |logit p|: the Bernoulli constant
        assert true_sup <= factor.lipschitz * (1 + 1e-9), (true_sup, factor.lipschitz)


def test_what_is_not_refused(env):
    """Inputs that look odd but are valid: numpy scalars for the budget, bool data for a
    Binary domain, a single public container given as a string."""
    pmod = env.private(coin(np.array([True, False, True, True])), COIN, ledger=None, epsilon=np.float64(2.0), draws=np.int64(4))
    assert pmod.certificate.epsilon == 2.0 and pmod.draws == 4
    with pm.Model() as m:
        xd = pm.Data("votes", np.array([0, 1, 1, 0]))
        pm.Data("pub", np.array([1.0, 2.0]))
        p = pm.Beta("rate", 1, 1)
        pm.Bernoulli("ballot", p=p, observed=xd)
    assert env.private(m, COIN, public="pub", ledger=None).public == ("pub",)


def test_a_prior_shaped_like_the_data_is_not_a_leak():
    """``shape=hd.shape[0]`` reads the number of rows, which is public (replace-one neighbours);
    a shape computed from private *values* stays refused (private-value-as-shape above)."""
    pmod = pymc_dp.make_private(_private_shape(), epsilon=10.0, draws=1, data=UNIT, ledger=None)
    assert [f.name for f in pmod.certificate.factors] == ["stature"]


def test_a_path_that_does_not_implement_an_option_refuses_with_a_typed_error():
    """FOUND.md #14 (fuzzer profile ``paths``, seeds 52 and 94): ``path="noisy_statistics"`` on a
    logistic regression with ``unit="attribute"`` raised the Newton-steps mechanism's bare
    ``NotImplementedError``. ``make_private`` now raises :class:`PathNotImplementedError`, a
    :class:`PrivacyError` that is still a ``NotImplementedError``, naming the path and the unit."""
    from tests.fuzz.harness import run_one

    for seed in (52, 94):
        result = run_one(seed, profile="paths", timeout_s=600, mode="paths")
        assert result.status == "refused", result.message
        assert "path='noisy_statistics'" in result.message and "unit='attribute'" in result.message
        assert not result.problems, result.problems  # the refusal names the model's containers


def test_path_not_implemented_error_is_both_kinds():
    err = pymc_dp.PathNotImplementedError("path='x': not implemented")
    assert isinstance(err, pymc_dp.PrivacyError) and isinstance(err, NotImplementedError)


def test_a_poisson_regression_refused_by_pass_glm_hears_pass_glm_s_reason():
    """FOUND.md #15 (profile ``paths``, seed 4): a Poisson regression on a covariate declared
    ``Binary()`` was told only that noisy regression statistics need a Normal likelihood; the
    refusal now also carries PASS-GLM's reason (the covariate's domain), which says what to fix --
    and the noisy table's. Seed 4 itself is now served by a noisy table (its covariate's two
    levels are cells), whose released counts the harness checks by brute force."""
    from tests.fuzz.harness import run_one

    x = np.arange(30) % 7
    with pm.Model() as model:
        xd, yd = pm.Data("x_wide", x), pm.Data("y", x % 3)
        pm.Poisson("y_lik", mu=pm.math.exp(pm.Normal("a") + pm.Normal("b") * xd), observed=yd)
    with pytest.raises(pymc_dp.UnsupportedFactorError) as err:
        pymc_dp.noisy_statistics(model, epsilon=1.0, data={"x_wide": pymc_dp.Integers(0, 999), "y": pymc_dp.Integers(0, 5)},
                                 ledger=None)
    message = str(err.value)
    assert "PASS-GLM" in message and "'x_wide'" in message and "Integers(0, 999)" in message and "noisy table" in message
    result = run_one(4, profile="paths", timeout_s=600, mode="paths")
    assert result.status == "certified" and not result.problems, result.message


# --------------------------------------------------------------------------- no bare NotImplementedError
#: the only ``raise NotImplementedError`` left in pymc_dp: abstract methods and internal entry points
#: that no user call reaches. Every refusal of a user's model, option or data raises a typed error
#: of pymc_dp.exceptions that is also a NotImplementedError (PathNotImplementedError,
#: RegionNotImplementedError, EstimateNotImplementedError), so ``except pymc_dp.PrivacyError``
#: catches it whether the mechanism is called directly or through make_private(path=...).
BARE_NOT_IMPLEMENTED_ALLOWED = {
    ("pymc_dp/units.py", "Unit.lift"): "abstract: Record, Attribute and Users override it",
    ("pymc_dp/units.py", "Unit.equal_split"): "abstract: Record, Attribute and Users override it",
    ("pymc_dp/domains.py", "Domain._contains"): "abstract: every Domain subclass overrides it",
    ("pymc_dp/domains.py", "Domain.to_dict"): "abstract: every Domain subclass overrides it",
    ("pymc_dp/exact/samplers.py", "ScalarFamily.cdf"): "abstract interface of the exact samplers' families",
    ("pymc_dp/exact/samplers.py", "ScalarFamily.median"): "abstract interface of the exact samplers' families",
    ("pymc_dp/exact/samplers.py", "ScalarFamily.tail_below"): "abstract interface of the exact samplers' families",
    ("pymc_dp/mechanisms/updates.py", "PosteriorUpdates._noisy_parameters"): "abstract: each updates mechanism overrides it",
    ("pymc_dp/mechanisms/updates.py", "PosteriorUpdates._public"): "abstract: each updates mechanism overrides it",
    ("pymc_dp/mechanisms/map.py", "_TemperedEngine.with_data"): "internal engine; users call PrivateMAP.with_data",
}

#: bare refusals not converted yet, with how many each function may still hold (it may only shrink):
#: these two modules were being edited in another session when the rest were converted.
BARE_NOT_IMPLEMENTED_PENDING = {
    ("pymc_dp/mechanisms/regression.py", "NoisyRegression.__init__"): 1,  # Dask values=: PathNotImplementedError
    ("pymc_dp/mechanisms/regression.py", "NoisyRegression._true_statistics"): 1,  # Dask values=: PathNotImplementedError
    ("pymc_dp/mechanisms/refined.py", "RefinedRegression.__init__"): 2,  # refine= with delta > 0 / unit='attribute'
}


def _bare_not_implemented_sites() -> dict[tuple[str, str], int]:
    """``(path, qualified function) -> count`` of ``raise NotImplementedError`` (bare or called) in pymc_dp."""
    import ast
    from collections import Counter

    package = Path(pymc_dp.__file__).parent
    found: Counter = Counter()

    def visit(node, path, scope):
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                visit(child, path, scope + (child.name,))
                continue
            if isinstance(child, ast.Raise) and child.exc is not None:
                exc = child.exc.func if isinstance(child.exc, ast.Call) else child.exc
                if isinstance(exc, ast.Name) and exc.id == "NotImplementedError":
                    found[(path, ".".join(scope))] += 1
            visit(child, path, scope)

    for file in sorted(package.rglob("*.py")):
        visit(ast.parse(file.read_text()), f"pymc_dp/{file.relative_to(package).as_posix()}", ())
    return dict(found)


def test_no_refusal_is_a_bare_not_implemented_error():
    sites = _bare_not_implemented_sites()
    assert sites, "the scan found no raise at all: it is broken"
    bare = {site: n for site, n in sites.items()
            if site not in BARE_NOT_IMPLEMENTED_ALLOWED and n > BARE_NOT_IMPLEMENTED_PENDING.get(site, 0)}
    assert not bare, (
        f"bare `raise NotImplementedError` in {sorted(bare)}: a refusal must raise a typed error of pymc_dp.exceptions "
        "that is also a NotImplementedError (PathNotImplementedError for a path that does not implement an option, "
        "RegionNotImplementedError, EstimateNotImplementedError, or a new subclass), naming the variable and what to do. "
        "A genuine abstract method goes into BARE_NOT_IMPLEMENTED_ALLOWED with its reason.")
    stale = sorted(site for site in BARE_NOT_IMPLEMENTED_ALLOWED if site not in sites)
    assert not stale, f"allowed sites that no longer raise NotImplementedError: remove {stale} from the allow-list"


def test_the_bare_not_implemented_scan_finds_a_bare_raise(tmp_path, monkeypatch):
    """The guard above can fail: a module with a bare raise outside the allow-list is reported."""
    package = tmp_path / "pymc_dp"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "units.py").write_text("class Unit:\n    def lift(self):\n        raise NotImplementedError\n")
    (package / "mech.py").write_text("def refuse(x):\n    if x:\n        raise NotImplementedError(f'x={x!r}')\n")
    monkeypatch.setattr(pymc_dp, "__file__", str(package / "__init__.py"))
    assert _bare_not_implemented_sites() == {("pymc_dp/units.py", "Unit.lift"): 1, ("pymc_dp/mech.py", "refuse"): 1}
