"""A seeded generator of small PyMC models written the way users write them.

``generate(seed)`` composes one model from three independent choices, each drawn from a
``numpy.random.Generator`` seeded by ``seed`` alone, so that a failure reproduces from its seed:

* a **design** -- how the linear predictor reads the containers: an intercept alone; a design
  matrix as ``X @ w``, ``pt.dot(X, w)``, ``pm.math.dot`` or column by column
  (``b0 + b1*X[:, 0] + b2*X[:, 1]``); separate column containers with an interaction ``x1*x2``; a
  group index ``alpha[g]`` (alone or beside a matrix). Every container is public or private at
  random, in every position (outcome, matrix, column, group index). The weights' priors are
  Normal, Uniform, a scale mixture ``z * tau * lam``, a regularised horseshoe
  ``z * tau * lambda_tilde`` or, for groups, a centred or non-centred hierarchy ``mu + z * sigma``;
  ``pm.Deterministic`` wraps the predictor or the weights at random;
* a **family** with its link: every family of ``README.md`` "What happens" (Bernoulli ``logit_p`` /
  ``p``, Binomial, Poisson and NegativeBinomial log links, Normal / StudentT / Laplace / Cauchy with
  a fixed or free scale, Exponential / Gamma / LogNormal, Beta, Categorical softmax,
  OrderedLogistic / OrderedProbit, Geometric, BetaBinomial, ``pm.Censored``, mixtures,
  zero-inflated and hurdle counts, a switchpoint) and an outcome domain that is bounded or, now
  and then, half-bounded;
* a **privacy contract**: domains (``Binary``, ``Integers``, ``Interval``, ``Ball``, ``Box``), the
  unit (record, attribute, ``Users(max_rows=m)`` or ``Users(ids)``), epsilon and draws.

Rows are few (20 to 60) and shapes small, so that one certification takes about a second. Each
:class:`GeneratedModel` carries its recipe: the model written out in one line per choice.

The model is certified at its drawn budget (``certify_kwargs()``, budget mode) or, in the
harness's bounds mode, with ``epsilon=None`` and ``bounds=region_bounds(generated)``: a public box
around one prior draw of the free RVs the likelihood reads, drawn from a generator of its own
(``default_rng([seed, REGION_SEED])``), so that ``generate(seed, profile)`` is the same model in
both modes and as before bounds mode existed.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np
import pymc as pm
import pytensor.tensor as pt
from pytensor.graph import ancestors

import pymc_dp

#: the name of every likelihood (one observed RV per generated model)
LIKELIHOOD = "y_lik"
#: the name of the outcome container
OUTCOME = "y_data"


@dataclass
class GeneratedModel:
    """One generated model and the privacy contract it is certified under.

    Attributes
    ----------
    seed : int
        ``generate(seed)`` rebuilds the same model.
    recipe : tuple of str
        The model as written, one choice per line (containers, priors, predictor, likelihood,
        contract).
    model : pm.Model
    data : dict
        Private container name -> declared domain.
    public : tuple of str
        Containers declared public.
    unit : str or pymc_dp.Users
    epsilon, draws
        The budget asked for.
    family : str
        The key of the family builder (for tallies).
    """

    seed: int
    recipe: tuple[str, ...]
    model: pm.Model
    data: dict[str, pymc_dp.Domain]
    public: tuple[str, ...]
    unit: Any
    epsilon: float
    draws: int
    family: str
    #: profile "paths" only: the release path asked of ``pymc_dp.make_private`` ("" elsewhere)
    path: str = ""
    #: profile "paths" only: why this shape must be refused by ``path`` ("" where it may be accepted)
    must_refuse: str = ""

    @property
    def description(self) -> str:
        """The recipe on one line, as FOUND.md and the campaign's report quote it."""
        return "; ".join(self.recipe)

    def certify_kwargs(self) -> dict[str, Any]:
        """The keyword arguments of :func:`pymc_dp.certify` for this model."""
        return dict(epsilon=self.epsilon, draws=self.draws, data=dict(self.data), public=list(self.public), unit=self.unit)

    @property
    def variable_names(self) -> frozenset[str]:
        """Every name a refusal may cite: containers, RVs, Deterministics, Potentials."""
        return frozenset(self.model.named_vars) | frozenset(self.data) | frozenset(self.public)


#: shape choices per profile: "campaign" draws wide designs (20 columns, 5 groups) now and then;
#: "ci" keeps every model small enough that the fixed-seed tier fits its time
PROFILES = {
    "campaign": {"columns": (1, 2, 3, 3, 5, 8, 20), "groups": (2, 3, 5), "classes": (3, 4), "levels": (3, 4, 5)},
    "ci": {"columns": (1, 2, 2, 3), "groups": (2, 3), "classes": (3,), "levels": (3,)},
    # public designs in the units users have (costs, years, incomes: 100s to 1000s), where a
    # linear predictor leaves the floats' comfortable range (FOUND.md #11); a profile of its own
    # so that the other profiles' seeds build the models they always built
    "wide_scale": {"columns": (1, 2, 3), "groups": (2, 3), "classes": (3, 4), "levels": (3, 4),
                   "public_scales": (1.0, 100.0, 1000.0)},
    # GLM-shaped models for the release paths other than posterior sampling (localized, auto,
    # noisy_statistics): built by :func:`generate_paths`, not by the composer above; last in the
    # table, so that the other profiles' seeds (their index in it) build what they always built
    "paths": {"columns": (1, 2, 3, 4)},
    # iid records of one container under one law (no covariates) for the noisy statistics and
    # the noisy histogram, asked through path "noisy_statistics" or "auto": built by
    # :func:`generate_iid`; last, so that the other profiles' seeds build what they always built
    "iid": {},
    # regressions whose records are few kinds of rows (covariates with public cells: yes/no
    # answers, small integer levels, bounded intervals, public inputs) for the noisy table,
    # asked through path "noisy_statistics" or "auto": built by :func:`generate_table`; last, so
    # that the other profiles' seeds build what they always built
    "table": {},
}


@dataclass
class _Composer:
    """Builds one model inside an active ``pm.Model`` context and writes its recipe."""

    rng: np.random.Generator
    n: int
    sizes: dict[str, tuple[int, ...]] = field(default_factory=lambda: PROFILES["campaign"])
    outcome_private: bool = True
    recipe: list[str] = field(default_factory=list)
    data: dict[str, pymc_dp.Domain] = field(default_factory=dict)
    public: list[str] = field(default_factory=list)

    # ------------------------------------------------------------------ small draws
    def coin(self, p: float) -> bool:
        return bool(self.rng.random() < p)

    def pick(self, options):
        return options[int(self.rng.integers(len(options)))]

    def note(self, line: str) -> None:
        self.recipe.append(line)

    # ------------------------------------------------------------------ containers
    def container(self, name: str, private_values: np.ndarray, domain: pymc_dp.Domain, *, private: bool,
                  public_values: np.ndarray | None = None):
        """A ``pm.Data`` container: private (declared ``domain``, values inside it) or public
        (values ``public_values`` if given: public data need not lie in any domain)."""
        values = private_values if private or public_values is None else public_values
        if private:
            self.data[name] = domain
            self.note(f"{name} = pm.Data(shape {values.shape}) private {domain}")
        else:
            self.public.append(name)
            self.note(f"{name} = pm.Data(shape {values.shape}) public")
        return pm.Data(name, values)

    def covariate_private(self, p: float) -> bool:
        """Whether the next covariate container is private: with probability ``p``, and always when
        the outcome is public and no covariate is private yet (a model reads private data)."""
        return self.coin(p) or (not self.outcome_private and not self.data)

    def outcome(self, values: np.ndarray, domain: pymc_dp.Domain):
        """The outcome container, private or public as :func:`generate` drew it."""
        return self.container(OUTCOME, values, domain, private=self.outcome_private)

    # ------------------------------------------------------------------ priors
    def scale(self, name: str, *, fixed_allowed: bool = True):
        """A scale: a fixed constant or a free RV with one of the priors users put on scales."""
        kind = self.pick(("fixed", "HalfNormal", "Exponential", "Uniform", "Gamma", "HalfCauchy", "InverseGamma")
                         if fixed_allowed else ("HalfNormal", "Exponential", "Uniform", "Gamma", "HalfCauchy", "InverseGamma"))
        if kind == "fixed":
            value = float(self.pick((0.5, 1.0, 2.0, 5.0)))
            self.note(f"{name} = {value:g} (fixed)")
            return value
        s = float(self.pick((0.5, 1.0, 2.0)))
        if kind == "HalfNormal":
            self.note(f"{name} ~ HalfNormal({s:g})")
            return pm.HalfNormal(name, s)
        if kind == "Exponential":
            self.note(f"{name} ~ Exponential(lam={1 / s:g})")
            return pm.Exponential(name, lam=1 / s)
        if kind == "Uniform":
            self.note(f"{name} ~ Uniform(0.1, {5 * s:g})")
            return pm.Uniform(name, 0.1, 5 * s)
        if kind == "Gamma":
            self.note(f"{name} ~ Gamma(2, {2 / s:g})")
            return pm.Gamma(name, 2.0, 2.0 / s)
        if kind == "HalfCauchy":
            self.note(f"{name} ~ HalfCauchy({s:g})")
            return pm.HalfCauchy(name, s)
        self.note(f"{name} ~ InverseGamma(3, {2 * s:g})")
        return pm.InverseGamma(name, 3.0, 2.0 * s)

    def location(self, name: str, shape: tuple[int, ...] = ()):
        """A location prior: Normal, StudentT or Uniform."""
        kind = self.pick(("Normal", "Normal", "StudentT", "Uniform"))
        s = float(self.pick((0.5, 1.0, 2.5)))
        shape_text = f", shape={shape}" if shape else ""
        if kind == "Normal":
            self.note(f"{name} ~ Normal(0, {s:g}{shape_text})")
            return pm.Normal(name, 0.0, s, shape=shape)
        if kind == "StudentT":
            self.note(f"{name} ~ StudentT(3, 0, {s:g}{shape_text})")
            return pm.StudentT(name, nu=3.0, mu=0.0, sigma=s, shape=shape)
        self.note(f"{name} ~ Uniform(-{2 * s:g}, {2 * s:g}{shape_text})")
        return pm.Uniform(name, -2 * s, 2 * s, shape=shape)

    def weights(self, name: str, d: int):
        """A weight vector of length ``d``: Normal, Uniform, scale mixture or regularised horseshoe."""
        kind = self.pick(("Normal", "Normal", "Uniform", "scale_mixture", "horseshoe"))
        if kind in ("Normal", "Uniform"):
            return self.location(name, (d,)) if kind == "Normal" else self._uniform_weights(name, d)
        z = pm.Normal(f"{name}_z", 0.0, 1.0, shape=d)
        tau = pm.HalfNormal(f"{name}_tau", 1.0)
        if kind == "scale_mixture":
            lam = pm.HalfNormal(f"{name}_lam", 1.0, shape=d)
            product = z * tau * lam
            self.note(f"{name}_z ~ Normal(0, 1, shape={d}); {name}_tau ~ HalfNormal(1); {name}_lam ~ HalfNormal(1, shape={d}); "
                      f"{name} = {name}_z * {name}_tau * {name}_lam")
        else:
            lam = pm.HalfCauchy(f"{name}_lam", 1.0, shape=d)
            c2 = pm.InverseGamma(f"{name}_c2", 2.0, 2.0)
            lam_tilde = pt.sqrt(c2 * lam**2 / (c2 + tau**2 * lam**2))
            product = z * tau * lam_tilde
            self.note(f"horseshoe: {name}_z ~ Normal(0, 1, shape={d}); {name}_tau ~ HalfNormal(1); {name}_lam ~ HalfCauchy(1, shape={d}); "
                      f"{name}_c2 ~ InverseGamma(2, 2); {name} = {name}_z * {name}_tau * sqrt(c2 lam^2 / (c2 + tau^2 lam^2))")
        if self.coin(0.5):
            self.note(f"{name} wrapped in pm.Deterministic")
            return pm.Deterministic(name, product)
        return product

    def _uniform_weights(self, name: str, d: int):
        a = float(self.pick((1.0, 3.0)))
        self.note(f"{name} ~ Uniform(-{a:g}, {a:g}, shape={d})")
        return pm.Uniform(name, -a, a, shape=d)

    def probability(self, name: str, shape: tuple[int, ...] = ()):
        a, b = self.pick(((1.0, 1.0), (2.0, 2.0), (2.0, 5.0)))
        self.note(f"{name} ~ Beta({a:g}, {b:g}{f', shape={shape}' if shape else ''})")
        return pm.Beta(name, a, b, shape=shape)

    def positive(self, name: str, shape: tuple[int, ...] = ()):
        a, b = self.pick(((2.0, 1.0), (2.0, 0.5), (1.0, 1.0)))
        self.note(f"{name} ~ Gamma({a:g}, {b:g}{f', shape={shape}' if shape else ''})")
        return pm.Gamma(name, a, b, shape=shape)


# ---------------------------------------------------------------------------- designs
class Design:
    """How the linear predictor reads the covariates: ``linear(tag)`` returns a fresh predictor of
    shape ``(n,)`` (new weights each call, containers shared), for families with several."""

    #: whether the design reads covariate containers (a public outcome needs one that is private)
    reads_covariates = False

    def __init__(self, comp: _Composer):
        self.comp = comp

    def linear(self, tag: str = ""):
        raise NotImplementedError

    def intercept(self, tag: str):
        if self.reads_covariates and self.comp.coin(0.15):
            self.comp.note(f"intercept{tag} = 0 (none written)")
            return 0.0
        return self.comp.location(f"intercept{tag}")


class InterceptOnly(Design):
    def linear(self, tag=""):
        b0 = self.comp.location(f"intercept{tag}")
        self.comp.note(f"eta{tag} = intercept{tag}")
        return b0 * pt.ones(self.comp.n)


def _ball_rows(rng, n, d, radius):
    X = rng.normal(size=(n, d))
    return radius * X / np.maximum(1.0, np.linalg.norm(X, axis=1, keepdims=True) * 1.0000001)


def _matrix_domain(comp: _Composer, n: int, d: int):
    """Private values of a design matrix and a domain that holds them."""
    kind = comp.pick(("Ball", "Ball", "Box", "Box_per_feature", "Interval"))
    if kind == "Ball":
        radius = float(comp.pick((1.0, 2.5)))
        return _ball_rows(comp.rng, n, d, radius), pymc_dp.Ball(radius)
    if kind == "Box":
        lo, hi = comp.pick(((-1.0, 1.0), (0.0, 1.0), (-3.0, 3.0)))
        return comp.rng.uniform(lo, hi, (n, d)), pymc_dp.Box(lo, hi)
    if kind == "Box_per_feature":
        lo = -comp.rng.integers(0, 3, d).astype(float)
        hi = lo + comp.rng.integers(1, 4, d)
        return comp.rng.uniform(lo, hi, (n, d)), pymc_dp.Box(lo, hi)
    return comp.rng.uniform(-1, 1, (n, d)), pymc_dp.Interval(-1.0, 1.0)


class Matrix(Design):
    """A design matrix container, read as ``X @ w``, ``pt.dot``, ``pm.math.dot`` or column by column."""

    reads_covariates = True

    def __init__(self, comp: _Composer):
        super().__init__(comp)
        self.d = int(comp.pick(comp.sizes["columns"]))
        values, domain = _matrix_domain(comp, comp.n, self.d)
        scales = comp.sizes.get("public_scales")  # drawn only in profiles that have them
        scale = float(comp.pick(scales)) if scales else 1.0
        self.X = comp.container("X_data", values, domain, private=comp.covariate_private(0.5),
                                public_values=scale * comp.rng.normal(0, 2, (comp.n, self.d)))
        if scale != 1.0 and "X_data" not in comp.data:
            comp.note(f"X_data public, scaled by {scale:g}")
        self.form = comp.pick(("@", "pt.dot", "pm.math.dot", "columns", "column_rvs"))

    def linear(self, tag=""):
        comp = self.comp
        b0 = self.intercept(tag)
        if self.form == "column_rvs":
            k = min(self.d, 3)
            betas = [comp.location(f"beta{j}{tag}") for j in range(k)]
            eta = b0 + sum(betas[j] * self.X[:, j] for j in range(k))
            comp.note(f"eta{tag} = intercept + " + " + ".join(f"beta{j}{tag}*X_data[:, {j}]" for j in range(k)))
            return eta
        w = comp.weights(f"weights{tag}", self.d)
        if self.form == "@":
            xw = self.X @ w
        elif self.form == "pt.dot":
            xw = pt.dot(self.X, w)
        elif self.form == "pm.math.dot":
            xw = pm.math.dot(self.X, w)
        else:
            xw = sum(w[j] * self.X[:, j] for j in range(self.d))
        comp.note(f"eta{tag} = intercept + {self.form}(X_data, weights{tag})")
        return b0 + xw


def _column_domain(comp: _Composer, n: int):
    kind = comp.pick(("Interval", "Interval", "Binary", "Integers", "half_bounded"))
    if kind == "Interval":
        lo, hi = comp.pick(((-1.0, 1.0), (0.0, 1.0), (0.0, 10.0), (-5.0, 2.0)))
        return comp.rng.uniform(lo, hi, n), pymc_dp.Interval(lo, hi)
    if kind == "Binary":
        return comp.rng.integers(0, 2, n), pymc_dp.Binary()
    if kind == "Integers":
        return comp.rng.integers(0, 4, n), pymc_dp.Integers(0, 3)
    return comp.rng.exponential(1.0, n), pymc_dp.Interval(0.0, np.inf)


class Columns(Design):
    """Separate column containers ``x1``, ``x2`` with ``b0 + b1*x1 + b2*x2 (+ b12*x1*x2)``."""

    reads_covariates = True

    def __init__(self, comp: _Composer):
        super().__init__(comp)
        self.k = int(comp.pick((1, 2, 2, 3)))
        self.x = []
        for j in range(self.k):
            values, domain = _column_domain(comp, comp.n)
            self.x.append(comp.container(f"x{j + 1}_data", values, domain, private=comp.covariate_private(0.6),
                                         public_values=comp.rng.normal(0, 3, comp.n)))
        self.interaction = self.k >= 2 and comp.coin(0.4)

    def linear(self, tag=""):
        comp = self.comp
        b0 = self.intercept(tag)
        terms = []
        for j, x in enumerate(self.x):
            terms.append(comp.location(f"beta{j + 1}{tag}") * x)
        text = " + ".join(f"beta{j + 1}{tag}*x{j + 1}_data" for j in range(self.k))
        if self.interaction:
            terms.append(comp.location(f"beta12{tag}") * self.x[0] * self.x[1])
            text += f" + beta12{tag}*x1_data*x2_data"
        comp.note(f"eta{tag} = intercept + {text}")
        return b0 + sum(terms)


class Groups(Design):
    """A group index container ``g`` (public or private) read as ``alpha[g]``, beside an optional
    matrix or column."""

    reads_covariates = True

    def __init__(self, comp: _Composer):
        super().__init__(comp)
        self.K = int(comp.pick(comp.sizes["groups"]))
        g = comp.rng.integers(0, self.K, comp.n)
        g[: self.K] = np.arange(self.K)
        self.g = comp.container("g_data", g, pymc_dp.Integers(0, self.K - 1), private=comp.covariate_private(0.4))
        self.extra = comp.pick((None, "column", "matrix"))
        self.inner: Design | None = None

    def _inner(self) -> Design | None:
        """The matrix or column design beside the groups, built on first use (a family that reads
        ``g_data`` alone, ``theta[g_data]``, creates no container it does not read)."""
        if self.inner is None and self.extra is not None:
            self.inner = Matrix(self.comp) if self.extra == "matrix" else Columns(self.comp)
        return self.inner

    def linear(self, tag=""):
        comp = self.comp
        kind = comp.pick(("Normal", "centred", "non_centred"))
        name = f"alpha{tag}"
        if kind == "Normal":
            alpha = comp.location(name, (self.K,))
        else:
            mu = comp.location(f"{name}_mu")
            sigma = comp.scale(f"{name}_sigma", fixed_allowed=False)
            if kind == "centred":
                alpha = pm.Normal(name, mu, sigma, shape=self.K)
                comp.note(f"{name} ~ Normal({name}_mu, {name}_sigma, shape={self.K})")
            else:
                z = pm.Normal(f"{name}_z", 0.0, 1.0, shape=self.K)
                alpha = mu + z * sigma
                comp.note(f"{name} = {name}_mu + {name}_z * {name}_sigma (non-centred)")
                if comp.coin(0.5):
                    alpha = pm.Deterministic(name, alpha)
                    comp.note(f"{name} wrapped in pm.Deterministic")
        eta = alpha[self.g]
        inner = self._inner()
        comp.note(f"eta{tag} = {name}[g_data]" + (" + eta_in (the design below)" if inner else ""))
        if inner is not None:
            eta = eta + inner.linear(f"{tag}_in")
        return eta


DESIGNS: dict[str, Callable[[_Composer], Design]] = {
    "intercept": InterceptOnly,
    "matrix": Matrix,
    "columns": Columns,
    "groups": Groups,
}


def _predictor(comp: _Composer, design: Design, tag: str = ""):
    eta = design.linear(tag)
    if comp.coin(0.25):
        comp.note(f"eta{tag} wrapped in pm.Deterministic('eta_det{tag}')")
        eta = pm.Deterministic(f"eta_det{tag}", eta)
    return eta


# ---------------------------------------------------------------------------- families
def _interval_outcome(comp: _Composer, lo: float, hi: float, *, half_bounded_p: float = 0.07):
    """Values in ``[lo, hi]`` and the declared domain: ``Interval(lo, hi)``, or half-bounded."""
    values = comp.rng.uniform(lo, hi, comp.n)
    if comp.coin(half_bounded_p):
        return values, pymc_dp.Interval(lo, np.inf)
    return values, pymc_dp.Interval(lo, hi)


def fam_bernoulli(comp, design):
    y = comp.outcome(comp.rng.integers(0, 2, comp.n), pymc_dp.Binary())
    eta = _predictor(comp, design)
    if comp.coin(0.5):
        comp.note(f"{LIKELIHOOD} ~ Bernoulli(logit_p=eta)")
        pm.Bernoulli(LIKELIHOOD, logit_p=eta, observed=y)
    else:
        link = comp.pick(("invlogit", "sigmoid"))
        comp.note(f"{LIKELIHOOD} ~ Bernoulli(p=pm.math.{link}(eta))")
        pm.Bernoulli(LIKELIHOOD, p=getattr(pm.math, link)(eta), observed=y)


def fam_bernoulli_direct(comp, design):
    y = comp.outcome(comp.rng.integers(0, 2, comp.n), pymc_dp.Binary())
    if isinstance(design, Groups):
        p = comp.probability("theta", (design.K,))[design.g]
        comp.note(f"{LIKELIHOOD} ~ Bernoulli(p=theta[g_data])")
    else:
        p = comp.probability("theta")
        comp.note(f"{LIKELIHOOD} ~ Bernoulli(p=theta)")
    pm.Bernoulli(LIKELIHOOD, p=p, observed=y)


def fam_binomial(comp, design):
    trials = int(comp.pick((1, 3, 10)))
    y = comp.outcome(comp.rng.integers(0, trials + 1, comp.n), pymc_dp.Integers(0, trials))
    eta = _predictor(comp, design)
    if comp.coin(0.5):
        comp.note(f"{LIKELIHOOD} ~ Binomial(n={trials}, logit_p=eta)")
        pm.Binomial(LIKELIHOOD, n=trials, logit_p=eta, observed=y)
    else:
        comp.note(f"{LIKELIHOOD} ~ Binomial(n={trials}, p=invlogit(eta))")
        pm.Binomial(LIKELIHOOD, n=trials, p=pm.math.invlogit(eta), observed=y)


def fam_poisson(comp, design):
    hi = int(comp.pick((5, 10, 30)))
    y = comp.outcome(comp.rng.integers(0, hi + 1, comp.n), pymc_dp.Integers(0, hi))
    eta = _predictor(comp, design)
    comp.note(f"{LIKELIHOOD} ~ Poisson(mu=exp(eta))")
    pm.Poisson(LIKELIHOOD, mu=pm.math.exp(eta), observed=y)


def fam_poisson_direct(comp, design):
    hi = int(comp.pick((5, 10, 30)))
    y = comp.outcome(comp.rng.integers(0, hi + 1, comp.n), pymc_dp.Integers(0, hi))
    if isinstance(design, Groups):
        lam = comp.positive("rate", (design.K,))[design.g]
        comp.note(f"{LIKELIHOOD} ~ Poisson(mu=rate[g_data])")
    else:
        lam = comp.positive("rate")
        comp.note(f"{LIKELIHOOD} ~ Poisson(mu=rate)")
    pm.Poisson(LIKELIHOOD, mu=lam, observed=y)


def fam_negative_binomial(comp, design):
    hi = int(comp.pick((5, 20)))
    y = comp.outcome(comp.rng.integers(0, hi + 1, comp.n), pymc_dp.Integers(0, hi))
    eta = _predictor(comp, design)
    alpha = comp.positive("nb_alpha") if comp.coin(0.6) else float(comp.pick((1.0, 5.0)))
    if isinstance(alpha, float):
        comp.note(f"nb_alpha = {alpha:g} (fixed)")
    comp.note(f"{LIKELIHOOD} ~ NegativeBinomial(mu=exp(eta), alpha=nb_alpha)")
    pm.NegativeBinomial(LIKELIHOOD, mu=pm.math.exp(eta), alpha=alpha, observed=y)


def _location_family(name: str, dist, scale_kw: str, **extra):
    def build(comp, design):
        lo, hi = comp.pick(((-1.0, 1.0), (0.0, 10.0), (-5.0, 5.0)))
        values, domain = _interval_outcome(comp, lo, hi)
        y = comp.outcome(values, domain)
        eta = _predictor(comp, design)
        scale = comp.scale("noise_sigma")
        kwargs = dict(extra)
        if name == "StudentT":
            kwargs["nu"] = comp.positive("nu_dof") if comp.coin(0.3) else 4.0
            if isinstance(kwargs["nu"], float):
                comp.note("nu_dof = 4 (fixed)")
        loc_kw = "alpha" if name == "Cauchy" else "mu"
        comp.note(f"{LIKELIHOOD} ~ {name}({loc_kw}=eta, {scale_kw}=noise_sigma{', nu=nu_dof' if 'nu' in kwargs else ''})")
        dist(LIKELIHOOD, **{loc_kw: eta, scale_kw: scale}, **kwargs, observed=y)
    return build


def fam_exponential(comp, design):
    lo = float(comp.pick((0.0, 0.1)))
    values = comp.rng.uniform(max(lo, 1e-3), 10.0, comp.n)
    y = comp.outcome(values, pymc_dp.Interval(lo, np.inf if comp.coin(0.1) else 10.0))
    eta = _predictor(comp, design)
    if comp.coin(0.5):
        comp.note(f"{LIKELIHOOD} ~ Exponential(lam=exp(-eta)) (AFT, log link)")
        pm.Exponential(LIKELIHOOD, lam=pm.math.exp(-eta), observed=y)
    else:
        comp.note(f"{LIKELIHOOD} ~ Exponential(scale=exp(eta)) (AFT, log link)")
        pm.Exponential(LIKELIHOOD, scale=pm.math.exp(eta), observed=y)


def fam_exponential_direct(comp, design):
    lo = float(comp.pick((0.0, 0.1)))
    values = comp.rng.uniform(max(lo, 1e-3), 10.0, comp.n)
    y = comp.outcome(values, pymc_dp.Interval(lo, np.inf if comp.coin(0.1) else 10.0))
    lam = comp.positive("rate")
    comp.note(f"{LIKELIHOOD} ~ Exponential(lam=rate)")
    pm.Exponential(LIKELIHOOD, lam=lam, observed=y)


def fam_gamma(comp, design):
    values, domain = _interval_outcome(comp, 0.1, 10.0)
    y = comp.outcome(values, domain)
    eta = _predictor(comp, design)
    shape = comp.positive("shape_k") if comp.coin(0.4) else float(comp.pick((1.0, 2.0, 5.0)))
    if isinstance(shape, float):
        comp.note(f"shape_k = {shape:g} (fixed)")
    comp.note(f"{LIKELIHOOD} ~ Gamma(alpha=shape_k, beta=shape_k / exp(eta)) (log link)")
    pm.Gamma(LIKELIHOOD, alpha=shape, beta=shape / pm.math.exp(eta), observed=y)


def fam_lognormal(comp, design):
    values, domain = _interval_outcome(comp, 0.1, 20.0)
    y = comp.outcome(values, domain)
    eta = _predictor(comp, design)
    sigma = comp.scale("noise_sigma")
    comp.note(f"{LIKELIHOOD} ~ LogNormal(mu=eta, sigma=noise_sigma)")
    pm.LogNormal(LIKELIHOOD, mu=eta, sigma=sigma, observed=y)


def _unit_interval_outcome(comp):
    values = comp.rng.uniform(0.05, 0.95, comp.n)
    return comp.outcome(values, pymc_dp.Interval(0.05, 0.95) if comp.coin(0.85) else pymc_dp.Interval(0.0, 1.0))


def fam_beta_direct(comp, design):
    y = _unit_interval_outcome(comp)
    a, b = comp.positive("beta_a"), comp.positive("beta_b")
    comp.note(f"{LIKELIHOOD} ~ Beta(alpha=beta_a, beta=beta_b)")
    pm.Beta(LIKELIHOOD, alpha=a, beta=b, observed=y)


def fam_beta(comp, design):
    y = _unit_interval_outcome(comp)
    eta = _predictor(comp, design)
    phi = comp.positive("phi_precision") if comp.coin(0.6) else 10.0
    if isinstance(phi, float):
        comp.note("phi_precision = 10 (fixed)")
    comp.note(f"{LIKELIHOOD} ~ Beta(mu=invlogit(eta), nu=phi_precision) (beta regression)")
    pm.Beta(LIKELIHOOD, mu=pm.math.invlogit(eta), nu=phi, observed=y)


def fam_categorical(comp, design):
    K = int(comp.pick(comp.sizes["classes"]))
    y = comp.outcome(comp.rng.integers(0, K, comp.n), pymc_dp.Integers(0, K - 1))
    us = [_predictor(comp, design, f"_k{k}") for k in range(K - 1)]
    reference = comp.pick(("zeros", "zeros_like"))
    zero = pt.zeros(comp.n) if reference == "zeros" else pt.zeros_like(us[0])
    comp.note(f"{LIKELIHOOD} ~ Categorical(p=softmax(stack(us + [{reference}]).T, axis=1))")
    p = pm.math.softmax(pt.stack(us + [zero]).T, axis=1)
    if comp.coin(0.3):
        p = pm.Deterministic("class_p", p)
        comp.note("class_p wrapped in pm.Deterministic")
    pm.Categorical(LIKELIHOOD, p=p, observed=y)


def fam_categorical_dirichlet(comp, design):
    K = int(comp.pick(comp.sizes["classes"]))
    y = comp.outcome(comp.rng.integers(0, K, comp.n), pymc_dp.Integers(0, K - 1))
    comp.note(f"class_p ~ Dirichlet(ones({K})); {LIKELIHOOD} ~ Categorical(p=class_p)")
    pm.Categorical(LIKELIHOOD, p=pm.Dirichlet("class_p", a=np.ones(K)), observed=y)


def fam_ordered(comp, design):
    K = int(comp.pick(comp.sizes["levels"]))
    y = comp.outcome(comp.rng.integers(0, K, comp.n), pymc_dp.Integers(0, K - 1))
    cut = pm.Normal("cutpoints", mu=np.linspace(-1.5, 1.5, K - 1), sigma=1.0, shape=K - 1,
                    transform=pm.distributions.transforms.ordered, initval=np.linspace(-1.5, 1.5, K - 1))
    comp.note(f"cutpoints ~ Normal(linspace(-1.5, 1.5, {K - 1}), 1, ordered)")
    eta = _predictor(comp, design)
    family = comp.pick(("OrderedLogistic", "OrderedProbit"))
    comp.note(f"{LIKELIHOOD} ~ {family}(eta=eta, cutpoints=cutpoints)")
    getattr(pm, family)(LIKELIHOOD, eta=eta, cutpoints=cut, observed=y)


def fam_geometric(comp, design):
    hi = int(comp.pick((5, 20)))
    y = comp.outcome(comp.rng.integers(1, hi + 1, comp.n), pymc_dp.Integers(1, hi))
    p = pm.math.invlogit(_predictor(comp, design))
    comp.note(f"{LIKELIHOOD} ~ Geometric(p=invlogit(eta))")
    pm.Geometric(LIKELIHOOD, p=p, observed=y)


def fam_geometric_direct(comp, design):
    hi = int(comp.pick((5, 20)))
    y = comp.outcome(comp.rng.integers(1, hi + 1, comp.n), pymc_dp.Integers(1, hi))
    p = comp.probability("theta")
    comp.note(f"{LIKELIHOOD} ~ Geometric(p=theta)")
    pm.Geometric(LIKELIHOOD, p=p, observed=y)


def fam_beta_binomial(comp, design):
    trials = int(comp.pick((3, 10)))
    y = comp.outcome(comp.rng.integers(0, trials + 1, comp.n), pymc_dp.Integers(0, trials))
    a, b = comp.positive("bb_alpha"), comp.positive("bb_beta")
    comp.note(f"{LIKELIHOOD} ~ BetaBinomial(n={trials}, alpha=bb_alpha, beta=bb_beta)")
    pm.BetaBinomial(LIKELIHOOD, n=trials, alpha=a, beta=b, observed=y)


def fam_censored(comp, design):
    lo, hi = comp.pick(((0.0, 10.0), (-3.0, 3.0)))
    values = comp.rng.uniform(lo, hi, comp.n)
    y = comp.outcome(values, pymc_dp.Interval(lo, hi))
    eta = _predictor(comp, design)
    sigma = comp.scale("noise_sigma")
    bounds = comp.pick(("constants", "arrays", "inf_upper", "public_container"))
    if bounds == "constants":
        lower, upper = lo, hi
        text = f"lower={lo:g}, upper={hi:g}"
    elif bounds == "arrays":
        lower, upper = np.full(comp.n, lo), np.full(comp.n, hi)
        text = f"lower=full(n, {lo:g}), upper=full(n, {hi:g})"
    elif bounds == "inf_upper":
        lower = None
        upper = np.where(comp.rng.random(comp.n) < 0.3, values, np.inf)
        text = "upper=where(censored, y, +inf) (PyMC's survival idiom, censoring points inside the domain)"
    else:
        lower = None
        upper = pm.Data("censor_upper", np.where(comp.rng.random(comp.n) < 0.3, hi, np.inf))
        comp.public.append("censor_upper")
        text = "upper=censor_upper (public pm.Data: the domain's top where censored, +inf elsewhere)"
    comp.note(f"{LIKELIHOOD} ~ Censored(Normal.dist(mu=eta, sigma=noise_sigma), {text})")
    pm.Censored(LIKELIHOOD, pm.Normal.dist(mu=eta, sigma=sigma), lower=lower, upper=upper, observed=y)


def fam_normal_mixture(comp, design):
    lo, hi = -5.0, 5.0
    y = comp.outcome(comp.rng.uniform(lo, hi, comp.n), pymc_dp.Interval(lo, hi))
    w = pm.Dirichlet("mix_w", a=np.ones(2))
    mu = pm.Normal("mix_mu", mu=np.array([-1.0, 1.0]), sigma=2.0, shape=2)
    sigma = comp.scale("noise_sigma")
    comp.note(f"mix_w ~ Dirichlet(1, 1); mix_mu ~ Normal([-1, 1], 2); {LIKELIHOOD} ~ NormalMixture(w=mix_w, mu=mix_mu, sigma=noise_sigma)")
    pm.NormalMixture(LIKELIHOOD, w=w, mu=mu, sigma=sigma, observed=y)


def fam_poisson_mixture(comp, design):
    hi = 20
    y = comp.outcome(comp.rng.integers(0, hi + 1, comp.n), pymc_dp.Integers(0, hi))
    w = pm.Dirichlet("mix_w", a=np.ones(2))
    lam = comp.positive("mix_rate", (2,))
    comp.note(f"mix_w ~ Dirichlet(1, 1); {LIKELIHOOD} ~ Mixture(w=mix_w, comp_dists=[Poisson.dist(mix_rate[0]), Poisson.dist(mix_rate[1])])")
    pm.Mixture(LIKELIHOOD, w=w, comp_dists=[pm.Poisson.dist(mu=lam[0]), pm.Poisson.dist(mu=lam[1])], observed=y)


def fam_zero_inflated(comp, design):
    hi = 15
    y = comp.outcome(comp.rng.integers(0, hi + 1, comp.n), pymc_dp.Integers(0, hi))
    psi = comp.probability("psi_zero")
    kind = comp.pick(("ZeroInflatedPoisson", "ZeroInflatedNegativeBinomial", "ZeroInflatedBinomial", "HurdlePoisson"))
    eta = _predictor(comp, design)
    if kind == "ZeroInflatedBinomial":
        comp.note(f"{LIKELIHOOD} ~ ZeroInflatedBinomial(psi=psi_zero, n={hi}, p=invlogit(eta))")
        pm.ZeroInflatedBinomial(LIKELIHOOD, psi=psi, n=hi, p=pm.math.invlogit(eta), observed=y)
    elif kind == "ZeroInflatedNegativeBinomial":
        comp.note(f"{LIKELIHOOD} ~ ZeroInflatedNegativeBinomial(psi=psi_zero, mu=exp(eta), alpha=2)")
        pm.ZeroInflatedNegativeBinomial(LIKELIHOOD, psi=psi, mu=pm.math.exp(eta), alpha=2.0, observed=y)
    else:
        comp.note(f"{LIKELIHOOD} ~ {kind}(psi=psi_zero, mu=exp(eta))")
        getattr(pm, kind)(LIKELIHOOD, psi=psi, mu=pm.math.exp(eta), observed=y)


def fam_switchpoint(comp, design):
    hi = 10
    y = comp.outcome(comp.rng.integers(0, hi + 1, comp.n), pymc_dp.Integers(0, hi))
    years = np.arange(comp.n)
    switchpoint = pm.DiscreteUniform("switchpoint", 0, comp.n - 1)
    early, late = comp.positive("early_rate"), comp.positive("late_rate")
    rate = pm.math.switch(switchpoint >= years, early, late)
    comp.note(f"switchpoint ~ DiscreteUniform(0, {comp.n - 1}); {LIKELIHOOD} ~ Poisson(switch(switchpoint >= years, early_rate, late_rate))")
    pm.Poisson(LIKELIHOOD, mu=rate, observed=y)


#: the designs a family reads: every design for a family with a linear predictor, none (an
#: intercept-only placeholder that creates no container) for one whose parameters are free RVs
ANY_DESIGN = ("intercept", "matrix", "columns", "groups")
NO_DESIGN = ("intercept",)

#: family key -> (builder, weight in the draw, the designs it may be composed with)
FAMILIES: dict[str, tuple[Callable[[_Composer, Design], None], float, tuple[str, ...]]] = {
    "bernoulli": (fam_bernoulli, 3.0, ANY_DESIGN),
    "bernoulli_direct": (fam_bernoulli_direct, 1.0, ("intercept", "groups")),
    "binomial": (fam_binomial, 1.5, ANY_DESIGN),
    "poisson": (fam_poisson, 2.0, ANY_DESIGN),
    "poisson_direct": (fam_poisson_direct, 0.7, ("intercept", "groups")),
    "negative_binomial": (fam_negative_binomial, 1.0, ANY_DESIGN),
    "normal": (_location_family("Normal", pm.Normal, "sigma"), 3.0, ANY_DESIGN),
    "studentt": (_location_family("StudentT", pm.StudentT, "sigma"), 1.0, ANY_DESIGN),
    "laplace": (_location_family("Laplace", pm.Laplace, "b"), 1.0, ANY_DESIGN),
    "cauchy": (_location_family("Cauchy", pm.Cauchy, "beta"), 0.5, ANY_DESIGN),
    "exponential": (fam_exponential, 1.0, ANY_DESIGN),
    "exponential_direct": (fam_exponential_direct, 0.4, NO_DESIGN),
    "gamma": (fam_gamma, 1.0, ANY_DESIGN),
    "lognormal": (fam_lognormal, 0.5, ANY_DESIGN),
    "beta": (fam_beta, 1.0, ANY_DESIGN),
    "beta_direct": (fam_beta_direct, 0.4, NO_DESIGN),
    "categorical": (fam_categorical, 1.2, ANY_DESIGN),
    "categorical_dirichlet": (fam_categorical_dirichlet, 0.4, NO_DESIGN),
    "ordered": (fam_ordered, 1.0, ANY_DESIGN),
    "geometric": (fam_geometric, 0.4, ANY_DESIGN),
    "geometric_direct": (fam_geometric_direct, 0.2, NO_DESIGN),
    "beta_binomial": (fam_beta_binomial, 0.5, NO_DESIGN),
    "censored": (fam_censored, 1.0, ANY_DESIGN),
    "normal_mixture": (fam_normal_mixture, 0.5, NO_DESIGN),
    "poisson_mixture": (fam_poisson_mixture, 0.5, NO_DESIGN),
    "zero_inflated": (fam_zero_inflated, 1.0, ANY_DESIGN),
    "switchpoint": (fam_switchpoint, 0.3, NO_DESIGN),
}

#: design key -> weight in the draw
DESIGN_WEIGHTS = {"intercept": 1.0, "matrix": 3.0, "columns": 2.0, "groups": 2.0}


def _unit(comp: _Composer):
    kind = comp.pick(("record", "record", "record", "attribute", "users_max_rows", "users_ids"))
    if kind in ("record", "attribute"):
        comp.note(f"unit={kind!r}")
        return kind
    if kind == "users_max_rows":
        m = int(comp.pick((1, 2, 3)))
        comp.note(f"unit=Users(max_rows={m})")
        return pymc_dp.Users(max_rows=m)
    ids = comp.rng.integers(0, max(2, comp.n // 2), comp.n)
    unit = pymc_dp.Users(ids)
    comp.note(f"unit=Users(ids) with max_rows={unit.max_rows}")
    return unit


def _weighted_key(rng: np.random.Generator, weights: dict[str, float]) -> str:
    keys = list(weights)
    p = np.array([weights[k] for k in keys], dtype=float)
    return keys[int(rng.choice(len(keys), p=p / p.sum()))]


#: the value transforms that map a box to a box element by element (as ``pymc_dp/mechanisms/localized.py``
#: accepts them); an RV with another one (simplex, ordered, Cholesky, ...) gets no box from :func:`region_bounds`
ELEMENTWISE_TRANSFORMS = ("LogTransform", "IntervalTransform", "Interval", "LogOddsTransform", "LogExpM1")
#: the second part of the seed of :func:`region_bounds`'s own generator (the model's is never touched)
REGION_SEED = 20261128
#: prior draws per RV from which :func:`region_bounds` takes its centre and its spread
REGION_DRAWS = 200


def region_bounds(generated: GeneratedModel, *, widths=(0.01, 0.1, 0.5)) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """A public box around one prior draw, for ``pymc_dp.certify(..., epsilon=None, bounds=...)``.

    Per continuous free RV of ``generated.model`` that the likelihood reads directly (itself or
    through Deterministics, not only through another RV's prior: ``certify`` refuses a box on a
    hyperparameter, whose truncation changes no epsilon) and whose value transform maps elements
    one by one (:data:`ELEMENTWISE_TRANSFORMS`, or none): :data:`REGION_DRAWS` joint prior draws, a
    centre ``c`` = one of them (the same joint draw for every RV) and a half-width ``w`` = (one of
    ``widths``, drawn per RV) x the elementwise sd of the draws, both in the RV's *unconstrained*
    space (``model.rvs_to_transforms``); the box is ``[backward(u - w), backward(u + w)]`` (ends
    sorted elementwise) with ``u = forward(c)``, the pattern of ``LocalizedPosterior.second_box``
    (``pymc_dp/mechanisms/localized.py``). Discrete RVs, hyperparameters and RVs with another
    transform (simplex, ordered, Cholesky) are left out of the dict: ``certify`` bounds what the
    likelihood reads of them by their support, or refuses, naming them.

    Everything is drawn from a generator of its own, ``np.random.default_rng([seed, REGION_SEED])``:
    ``generate(seed, profile)`` builds the same model and recipe whether or not this ran, and the
    same ``generated`` always gets the same box. Nothing here reads a private container.
    """
    model = generated.model
    rng = np.random.default_rng([abs(int(generated.seed)), REGION_SEED])  # abs: a hand-built model's seed -1
    free = list(model.free_RVs)
    read = set(ancestors([model[LIKELIHOOD]], blockers=free)) - {model[LIKELIHOOD]}
    rvs = [rv for rv in free
           if rv in read and not rv.type.dtype.startswith(("int", "uint", "bool"))
           and (model.rvs_to_transforms.get(rv) is None
                or type(model.rvs_to_transforms[rv]).__name__ in ELEMENTWISE_TRANSFORMS)]
    if not rvs:
        return {}
    draws = pm.draw(rvs, draws=REGION_DRAWS, random_seed=int(rng.integers(2**31)))
    pick = int(rng.integers(REGION_DRAWS))  # one joint prior draw: a hierarchy's box is around a coherent point
    box: dict[str, tuple[np.ndarray, np.ndarray]] = {}
    for rv, values in zip(rvs, draws):
        transform = model.rvs_to_transforms.get(rv)
        x = np.asarray(values, dtype=float)
        u = x if transform is None else np.asarray(transform.forward(x, *rv.owner.inputs).eval(), dtype=float)
        u = np.broadcast_to(u, x.shape)
        centre = u[pick]
        half = float(widths[int(rng.integers(len(widths)))]) * np.std(u, axis=0)
        ends = [centre - half, centre + half]
        if transform is not None:
            ends = [np.asarray(transform.backward(e, *rv.owner.inputs).eval(), dtype=float) for e in ends]
        lo, hi = np.minimum(*ends), np.maximum(*ends)
        box[rv.name] = (np.asarray(lo, dtype=float), np.asarray(hi, dtype=float))
    return box


def generate(seed: int, profile: str = "campaign") -> GeneratedModel:
    """The model of ``seed``: same seed and profile, same model, same recipe, same contract.

    Parameters
    ----------
    seed : int
        Any non-negative integer.
    profile : {"campaign", "ci", "wide_scale", "paths", "iid", "table"}
        The shapes drawn (:data:`PROFILES`): ``"ci"`` keeps designs to 3 columns and 3 groups;
        ``"paths"`` draws the GLMs of :func:`generate_paths` and the release path to ask for.

    Returns
    -------
    GeneratedModel
    """
    if profile == "paths":
        return generate_paths(seed)
    if profile == "iid":
        return generate_iid(seed)
    if profile == "table":
        return generate_table(seed)
    rng = np.random.default_rng([20261128, int(seed), list(PROFILES).index(profile)])
    comp = _Composer(rng=rng, n=int(rng.integers(20, 61)), sizes=PROFILES[profile])
    family = _weighted_key(rng, {k: w for k, (_, w, _) in FAMILIES.items()})
    designs = FAMILIES[family][2]
    design_key = _weighted_key(rng, {k: DESIGN_WEIGHTS[k] for k in designs})
    comp.outcome_private = not DESIGNS[design_key].reads_covariates or comp.coin(0.9)
    comp.note(f"seed={seed}; profile={profile}; n={comp.n}; family={family}; design={design_key}")
    with pm.Model() as model:
        design = DESIGNS[design_key](comp)
        FAMILIES[family][0](comp, design)
    unit = _unit(comp)
    epsilon = float(f"{10 ** rng.uniform(np.log10(0.5), np.log10(50.0)):.3g}")
    draws = int(comp.pick((1, 2, 5, 10, 20, 50)))
    comp.note(f"epsilon={epsilon:g}, draws={draws}")
    return GeneratedModel(seed=int(seed), recipe=tuple(comp.recipe), model=model, data=dict(comp.data),
                          public=tuple(comp.public), unit=unit, epsilon=epsilon, draws=draws, family=family)


# ---------------------------------------------------------------------------- profile "paths"
#: the release paths profile "paths" asks ``pymc_dp.make_private`` for, with their weights
PATHS = {"localized": 1.0, "auto": 1.0, "noisy_statistics": 1.0}
#: the budgets profile "paths" draws (the auto path localizes from 3 on)
PATHS_EPSILONS = (0.5, 1.0, 3.0, 10.0)
#: the GLMs profile "paths" draws: Normal linear, Bernoulli logit, Poisson log
PATHS_FAMILIES = ("linear", "logistic", "poisson")
#: the share of profile "paths" models drawn in a shape their path must refuse
REFUSE_SHARE = 0.15
#: path -> the shapes it must refuse (a typed refusal is the only right answer): an outcome
#: declared unbounded (no path can bound a record's change), a discrete free RV or a simplex
#: weight under "localized" (its boxes hold continuous, elementwise-transformed RVs only), a
#: StudentT or probit likelihood under "noisy_statistics" (no sufficient statistics it implements)
REFUSED_SHAPES = {
    "localized": ("unbounded_outcome", "discrete_rv", "simplex_weights"),
    "auto": ("unbounded_outcome",),
    "noisy_statistics": ("unbounded_outcome", "studentt_likelihood", "probit_link"),
}
#: shapes still drawn (so that every seed builds the model it always built) that a path now
#: serves: a Student-t or probit regression gets a noisy table of record cells where its
#: covariates have public cells (pymc_dp/mechanisms/table.py); where they do not, the refusal
#: must still be typed and named, which the harness checks of every refusal
SERVED_SHAPES = frozenset({"studentt_likelihood", "probit_link"})


def _paths_covariates(comp: _Composer, d: int, true_w: np.ndarray):
    """The covariates of a ``paths`` model: one design-matrix container ``X_data`` (``d``
    columns) or ``d`` column containers ``x1_data``.. ``xd_data``, each private (a declared
    domain holding its values) or public at random. Returns the list of (container tensor,
    column index or None) per column and the true linear predictor's covariate part."""
    n = comp.n
    if d > 1 and comp.coin(0.5):
        kind = comp.pick(("Ball", "Box", "Box_per_feature", "Interval"))
        if kind == "Ball":
            radius = float(comp.pick((1.0, 2.0)))
            values, domain = _ball_rows(comp.rng, n, d, radius), pymc_dp.Ball(radius)
        elif kind == "Box":
            lo, hi = comp.pick(((-1.0, 1.0), (0.0, 1.0), (-3.0, 3.0)))
            values, domain = comp.rng.uniform(lo, hi, (n, d)), pymc_dp.Box(lo, hi)
        elif kind == "Box_per_feature":
            lo = -comp.rng.integers(0, 3, d).astype(float)
            hi = lo + comp.rng.integers(1, 4, d)
            values, domain = comp.rng.uniform(lo, hi, (n, d)), pymc_dp.Box(lo, hi)
        else:
            values, domain = comp.rng.uniform(-1, 1, (n, d)), pymc_dp.Interval(-1.0, 1.0)
        private = comp.covariate_private(0.7)
        public_values = comp.rng.normal(0, 1, (n, d))
        X = comp.container("X_data", values, domain, private=private, public_values=public_values)
        used = values if private else public_values
        return [(X, j) for j in range(d)], used @ true_w
    columns, part = [], np.zeros(n)
    for j in range(d):
        kind = comp.pick(("Interval", "Interval", "Binary", "Integers"))
        if kind == "Interval":
            lo, hi = comp.pick(((-1.0, 1.0), (0.0, 1.0), (0.0, 5.0), (-2.0, 2.0)))
            values, domain = comp.rng.uniform(lo, hi, n), pymc_dp.Interval(lo, hi)
        elif kind == "Binary":
            values, domain = comp.rng.integers(0, 2, n).astype(float), pymc_dp.Binary()
        else:
            values, domain = comp.rng.integers(0, 4, n).astype(float), pymc_dp.Integers(0, 3)
        private = comp.covariate_private(0.7)
        public_values = comp.rng.normal(0, 1, n)
        x = comp.container(f"x{j + 1}_data", values, domain, private=private, public_values=public_values)
        columns.append((x, None))
        part = part + (values if private else public_values) * true_w[j]
    return columns, part


def _paths_predictor(comp: _Composer, columns, shape: str):
    """``intercept + sum_j w_j x_j`` over ``columns`` in a form users write (``X @ w``,
    ``pt.dot``, column by column, one RV per column); ``shape`` adds the refused forms."""
    d = len(columns)
    b0 = comp.location("intercept") if not comp.coin(0.1) else 0.0
    if isinstance(b0, float):
        comp.note("intercept = 0 (none written)")
    matrix = columns[0][1] is not None
    if shape == "simplex_weights":
        w = pm.Dirichlet("weights_simplex", a=np.ones(d)) * comp.location("weights_scale")
        comp.note(f"weights = weights_simplex ~ Dirichlet(ones({d})) * weights_scale")
    elif matrix and comp.coin(0.7):
        w = comp.location("weights", (d,)) if comp.coin(0.7) else comp._uniform_weights("weights", d)
    else:
        w = None
    if w is not None and matrix:
        X = columns[0][0]
        form = comp.pick(("@", "pt.dot", "columns"))
        xw = X @ w if form == "@" else pt.dot(X, w) if form == "pt.dot" else sum(w[j] * X[:, j] for j in range(d))
        comp.note(f"eta = intercept + {form}(X_data, weights)")
    else:
        terms = []
        for j, (x, col) in enumerate(columns):
            beta = w[j] if w is not None else comp.location(f"beta{j + 1}")
            terms.append(beta * (x if col is None else x[:, col]))
        xw = sum(terms)
        comp.note("eta = intercept + " + " + ".join(f"beta{j + 1}*{'X_data[:, %d]' % c if c is not None else f'x{j + 1}_data'}"
                                                    for j, (_, c) in enumerate(columns)))
    if shape == "discrete_rv":
        switch = pm.Bernoulli("use_covariates", 0.5)
        comp.note("use_covariates ~ Bernoulli(0.5); eta = intercept + use_covariates * (covariate terms)")
        xw = switch * xw
    return b0 + xw


def generate_paths(seed: int) -> GeneratedModel:
    """The model of ``seed`` in profile ``"paths"``: a GLM that the release paths other than
    posterior sampling accept, and the path to ask for.

    Drawn from ``default_rng([20261128, seed, index of "paths" in PROFILES])``: ``n`` in 20..300;
    a family (:data:`PATHS_FAMILIES`: Normal linear regression with a fixed or free scale,
    Bernoulli with ``logit_p=``, ``invlogit`` or ``sigmoid``, Poisson with ``exp``); 1 to 4
    covariates in one matrix container or in column containers, each private (a random declared
    domain: Ball, Box, Interval, Binary, Integers) or public; the outcome private (a bounded
    domain) or, now and then, public beside a private covariate; Normal / StudentT / Uniform
    priors; the unit (record, attribute or ``Users(max_rows=2)``); ``epsilon`` in
    :data:`PATHS_EPSILONS`; the path (:data:`PATHS`) and, in about :data:`REFUSE_SHARE` of the
    models, a shape that path must refuse (:data:`REFUSED_SHAPES`, stated as ``must_refuse``).
    """
    rng = np.random.default_rng([20261128, int(seed), list(PROFILES).index("paths")])
    comp = _Composer(rng=rng, n=int(rng.integers(20, 301)), sizes=PROFILES["paths"])
    family = comp.pick(PATHS_FAMILIES)
    path = _weighted_key(rng, PATHS)
    shape = comp.pick(REFUSED_SHAPES[path]) if comp.coin(REFUSE_SHARE) else ""
    if shape == "studentt_likelihood":
        family = "linear"
    elif shape == "probit_link":
        family = "logistic"
    elif shape == "unbounded_outcome" and family == "logistic":
        family = "linear"  # a Binary outcome is bounded: the unbounded shape is a linear or count outcome
    d = int(comp.pick(comp.sizes["columns"]))
    comp.outcome_private = comp.coin(0.85)
    comp.note(f"seed={seed}; profile=paths; n={comp.n}; family={family}; path={path}; covariates={d}"
              + (f"; shape: {shape} (a noisy table may serve it)" if shape in SERVED_SHAPES
                 else f"; must refuse: {shape}" if shape else ""))
    true_w = rng.normal(0, 0.5, d)
    true_b0 = float(rng.normal(0, 0.5))
    with pm.Model() as model:
        columns, part = _paths_covariates(comp, d, true_w)
        eta_true = true_b0 + part
        if not comp.data:  # every covariate public: the outcome is private
            comp.outcome_private = True
        if family == "linear":
            lo, hi = comp.pick(((-5.0, 5.0), (0.0, 10.0), (-2.0, 6.0)))
            mid = (lo + hi) / 2.0
            if shape == "unbounded_outcome":
                values = mid + np.abs(eta_true + rng.normal(0, 0.5, comp.n))
                y = comp.outcome(values, pymc_dp.Interval(mid, np.inf))
            else:
                y = comp.outcome(np.clip(mid + eta_true + rng.normal(0, 0.5, comp.n), lo, hi), pymc_dp.Interval(lo, hi))
            eta = _paths_predictor(comp, columns, shape)
            sigma = comp.scale("noise_sigma")
            if shape == "studentt_likelihood":
                comp.note(f"{LIKELIHOOD} ~ StudentT(nu=4, mu=eta, sigma=noise_sigma)")
                pm.StudentT(LIKELIHOOD, nu=4.0, mu=eta, sigma=sigma, observed=y)
            else:
                comp.note(f"{LIKELIHOOD} ~ Normal(mu=eta, sigma=noise_sigma)")
                pm.Normal(LIKELIHOOD, mu=eta, sigma=sigma, observed=y)
        elif family == "logistic":
            y = comp.outcome(rng.binomial(1, 1.0 / (1.0 + np.exp(-eta_true))), pymc_dp.Binary())
            eta = _paths_predictor(comp, columns, shape)
            form = "invprobit" if shape == "probit_link" else comp.pick(("logit_p", "invlogit", "sigmoid"))
            comp.note(f"{LIKELIHOOD} ~ Bernoulli({'logit_p=eta' if form == 'logit_p' else f'p={form}(eta)'})")
            if form == "logit_p":
                pm.Bernoulli(LIKELIHOOD, logit_p=eta, observed=y)
            else:
                pm.Bernoulli(LIKELIHOOD, p=getattr(pm.math, form)(eta), observed=y)
        else:
            M = int(comp.pick((5, 10, 30)))
            counts = np.minimum(rng.poisson(np.exp(np.clip(eta_true, -5, np.log(M)))), M)
            if shape == "unbounded_outcome":
                y = comp.outcome(counts, pymc_dp.Interval(0.0, np.inf))  # Integers must be finite
            else:
                y = comp.outcome(counts, pymc_dp.Integers(0, M))
            eta = _paths_predictor(comp, columns, shape)
            comp.note(f"{LIKELIHOOD} ~ Poisson(mu=exp(eta))")
            pm.Poisson(LIKELIHOOD, mu=pm.math.exp(eta), observed=y)
    kind = comp.pick(("record", "record", "record", "record", "attribute", "users"))
    unit = pymc_dp.Users(max_rows=2) if kind == "users" else kind
    comp.note(f"unit={'Users(max_rows=2)' if kind == 'users' else repr(kind)}")
    epsilon = float(comp.pick(PATHS_EPSILONS))
    draws = 1 if path == "noisy_statistics" else int(comp.pick((1, 2, 5)))
    comp.note(f"epsilon={epsilon:g}, draws={draws}, make_private(..., path={path!r})")
    return GeneratedModel(seed=int(seed), recipe=tuple(comp.recipe), model=model, data=dict(comp.data),
                          public=tuple(comp.public), unit=unit, epsilon=epsilon, draws=draws, family=family,
                          path=path, must_refuse="" if shape in SERVED_SHAPES else shape)


# ---------------------------------------------------------------------------- profile "iid"
#: the laws profile "iid" draws for one container of scalar records: exponential families the
#: noisy statistics serve, and laws with no sufficient statistics (a noisy histogram serves them)
IID_FAMILIES = ("normal", "studentt", "mixture", "censored", "gamma", "lognormal", "poisson", "negbin")
#: the paths profile "iid" asks for, with their weights
IID_PATHS = {"noisy_statistics": 1.0, "auto": 1.0}


def generate_iid(seed: int) -> GeneratedModel:
    """The model of ``seed`` in profile ``"iid"``: one private container of ``n`` (20..300) scalar
    records observed iid by one law (:data:`IID_FAMILIES`) with its parameters shared by every
    record, a bounded declared domain (Interval for continuous laws, Integers for counts), the
    unit (record or ``Users(max_rows=2)``), ``epsilon`` in :data:`PATHS_EPSILONS`, and the path
    (:data:`IID_PATHS`). In about :data:`REFUSE_SHARE` of the models the records' domain is
    declared unbounded above, which every path must refuse (``must_refuse``)."""
    rng = np.random.default_rng([20261128, int(seed), list(PROFILES).index("iid")])
    comp = _Composer(rng=rng, n=int(rng.integers(20, 301)), sizes=PROFILES["iid"])
    family = comp.pick(IID_FAMILIES)
    path = _weighted_key(rng, IID_PATHS)
    shape = "unbounded_outcome" if comp.coin(REFUSE_SHARE) else ""
    comp.note(f"seed={seed}; profile=iid; n={comp.n}; family={family}; path={path}"
              + (f"; must refuse: {shape}" if shape else ""))
    n = comp.n
    with pm.Model() as model:
        if family in ("poisson", "negbin"):
            M = int(comp.pick((5, 20, 60)))
            mean = float(rng.uniform(0.5, M / 3))
            raw = rng.poisson(mean, n) if family == "poisson" else rng.negative_binomial(2, 2 / (2 + mean), n)
            domain = pymc_dp.Interval(0.0, np.inf) if shape else pymc_dp.Integers(0, M)
            x = comp.outcome(np.minimum(raw, M), domain)
            mu = pm.Gamma("mu", 2.0, 2.0 / max(mean, 0.5))
            comp.note(f"mu ~ Gamma(2, {2.0 / max(mean, 0.5):.3g})")
            if family == "poisson":
                comp.note(f"{LIKELIHOOD} ~ Poisson(mu)")
                pm.Poisson(LIKELIHOOD, mu=mu, observed=x)
            else:
                comp.note(f"alpha ~ HalfNormal(5); {LIKELIHOOD} ~ NegativeBinomial(mu, alpha)")
                pm.NegativeBinomial(LIKELIHOOD, mu=mu, alpha=pm.HalfNormal("alpha", 5.0), observed=x)
        else:
            positive = family in ("gamma", "lognormal")
            lo, hi = ((0.0, float(comp.pick((5.0, 20.0)))) if positive
                      else comp.pick(((-5.0, 5.0), (0.0, 10.0), (-10.0, 10.0))))
            centre, width = (lo + hi) / 2.0, (hi - lo)
            if family == "mixture":
                draws = np.where(rng.random(n) < 0.4, rng.normal(lo + width / 4, width / 12, n), rng.normal(hi - width / 4, width / 12, n))
            elif positive:
                draws = rng.gamma(2.0, width / 8, n)
            else:
                draws = centre + rng.normal(0, width / 6, n) * (1.0 if family != "studentt" else rng.standard_t(3, n) / 2)
            domain = pymc_dp.Interval(lo, np.inf) if shape else pymc_dp.Interval(lo, hi)
            x = comp.outcome(np.clip(draws, lo, hi), domain)
            if family == "normal":
                comp.note(f"mu ~ Normal({centre:g}, {width:g}); sigma ~ HalfNormal({width / 4:g}); {LIKELIHOOD} ~ Normal(mu, sigma)")
                pm.Normal(LIKELIHOOD, mu=pm.Normal("mu", centre, width), sigma=pm.HalfNormal("sigma", width / 4), observed=x)
            elif family == "studentt":
                comp.note(f"mu ~ Normal({centre:g}, {width:g}); sigma ~ HalfNormal({width / 4:g}); {LIKELIHOOD} ~ StudentT(3, mu, sigma)")
                pm.StudentT(LIKELIHOOD, nu=3.0, mu=pm.Normal("mu", centre, width), sigma=pm.HalfNormal("sigma", width / 4),
                            observed=x)
            elif family == "mixture":
                comp.note(f"w ~ Dirichlet(1, 1); mu ~ Normal([{lo + width / 4:g}, {hi - width / 4:g}], {width / 4:g}); "
                          f"sigma ~ HalfNormal({width / 8:g}, shape 2); {LIKELIHOOD} ~ NormalMixture(w, mu, sigma)")
                pm.NormalMixture(LIKELIHOOD, w=pm.Dirichlet("w", np.ones(2)),
                                 mu=pm.Normal("mu", np.array([lo + width / 4, hi - width / 4]), width / 4, shape=2),
                                 sigma=pm.HalfNormal("sigma", width / 8, shape=2), observed=x)
            elif family == "censored":
                a, b = lo + width / 5, hi - width / 5
                comp.note(f"mu ~ Normal({centre:g}, {width:g}); sigma ~ HalfNormal({width / 4:g}); "
                          f"{LIKELIHOOD} ~ Censored(Normal(mu, sigma), {a:g}, {b:g})")
                x.set_value(np.clip(np.asarray(x.get_value()), a, b))
                pm.Censored(LIKELIHOOD, pm.Normal.dist(pm.Normal("mu", centre, width), pm.HalfNormal("sigma", width / 4)),
                            lower=a, upper=b, observed=x)
            elif family == "gamma":
                comp.note(f"alpha ~ Gamma(2, 1); beta ~ Gamma(2, 1); {LIKELIHOOD} ~ Gamma(alpha, beta)")
                x.set_value(np.maximum(np.asarray(x.get_value()), width * 1e-3))
                pm.Gamma(LIKELIHOOD, alpha=pm.Gamma("alpha", 2.0, 1.0), beta=pm.Gamma("beta", 2.0, 1.0), observed=x)
            else:
                comp.note(f"mu ~ Normal(0, 2); sigma ~ HalfNormal(1); {LIKELIHOOD} ~ LogNormal(mu, sigma)")
                x.set_value(np.maximum(np.asarray(x.get_value()), width * 1e-3))
                pm.LogNormal(LIKELIHOOD, mu=pm.Normal("mu", 0.0, 2.0), sigma=pm.HalfNormal("sigma", 1.0), observed=x)
    kind = comp.pick(("record", "record", "record", "users"))
    unit = pymc_dp.Users(max_rows=2) if kind == "users" else kind
    comp.note(f"unit={'Users(max_rows=2)' if kind == 'users' else repr(kind)}")
    epsilon = float(comp.pick(PATHS_EPSILONS))
    comp.note(f"epsilon={epsilon:g}, draws=1, make_private(..., path={path!r})")
    return GeneratedModel(seed=int(seed), recipe=tuple(comp.recipe), model=model, data=dict(comp.data),
                          public=tuple(comp.public), unit=unit, epsilon=epsilon, draws=1, family=family,
                          path=path, must_refuse=shape)


# ---------------------------------------------------------------------------- profile "table"
#: the factors profile "table" draws: no exponential family of their own on these covariates
TABLE_FAMILIES = ("negbin", "studentt", "probit", "ordered", "categorical", "poisson")
#: the covariate kinds: private yes/no, private levels 0..L-1, private interval, public pm.Data,
#: a public plain array (as the gallery writes covariates)
TABLE_COVARIATES = ("binary", "levels", "interval", "public", "plain")
#: shapes a table must refuse, drawn in about REFUSE_SHARE of the models
TABLE_REFUSED = ("unbounded_covariate", "per_record_parameter")


def generate_table(seed: int) -> GeneratedModel:
    """The model of ``seed`` in profile ``"table"``: ``n`` (20..200) records whose outcome (private,
    bounded) is observed by one factor (:data:`TABLE_FAMILIES`) on 1-3 covariates
    (:data:`TABLE_COVARIATES`) through a linear predictor, the unit (record or
    ``Users(max_rows=2)``), ``epsilon`` in :data:`PATHS_EPSILONS` and the path (:data:`IID_PATHS`).
    In about :data:`REFUSE_SHARE` of the models a shape the table must refuse
    (:data:`TABLE_REFUSED`): a covariate declared unbounded, or one parameter per record."""
    rng = np.random.default_rng([20261128, int(seed), list(PROFILES).index("table")])
    comp = _Composer(rng=rng, n=int(rng.integers(20, 201)), sizes=PROFILES["table"])
    family = comp.pick(TABLE_FAMILIES)
    path = _weighted_key(rng, IID_PATHS)
    shape = comp.pick(TABLE_REFUSED) if comp.coin(REFUSE_SHARE) else ""
    comp.note(f"seed={seed}; profile=table; n={comp.n}; family={family}; path={path}"
              + (f"; must refuse: {shape}" if shape else ""))
    n = comp.n
    kinds = [comp.pick(TABLE_COVARIATES) for _ in range(int(rng.integers(1, 4)))]
    if family == "categorical" and all(k in ("public", "plain") for k in kinds):
        kinds[0] = "binary"  # a private covariate: binned mode for the Categorical too
    if shape == "unbounded_covariate":
        kinds[0] = "interval"  # declared Interval(0, inf) below
    with pm.Model() as model:
        terms, signal = [], np.zeros(n)
        for j, kind in enumerate(kinds):
            name = f"x{j + 1}_data"
            if kind == "binary":
                x = rng.integers(0, 2, n).astype(float)
                term = comp.container(name, x, pymc_dp.Binary(), private=True)
            elif kind == "levels":
                levels = int(comp.pick((3, 4, 6)))
                x = rng.integers(0, levels, n).astype(float)
                term = comp.container(name, x, pymc_dp.Integers(0, levels - 1), private=True)
            elif kind == "interval":
                x = rng.random(n)
                unbounded = shape == "unbounded_covariate" and j == 0
                domain = pymc_dp.Interval(0.0, np.inf) if unbounded else pymc_dp.Interval(0.0, 1.0)
                term = comp.container(name, x, domain, private=True)
            elif kind == "public":
                x = rng.normal(size=n)
                term = comp.container(name, x, pymc_dp.Interval(-10.0, 10.0), private=False, public_values=x)
            else:
                x = rng.normal(size=n)
                term = x
                comp.note(f"{name} = a plain public array, shape ({n},)")
            beta = pm.Normal(f"beta{j + 1}", 0.0, 1.0)
            comp.note(f"beta{j + 1} ~ Normal(0, 1)")
            terms.append(beta * term)
            signal += 0.5 * x
        eta = pm.Normal("intercept", 0.0, 1.0) + sum(terms)
        comp.note("intercept ~ Normal(0, 1); eta = intercept + sum_j beta_j * x_j")
        if shape == "per_record_parameter":
            eta = eta + pm.Normal("u", 0.0, 0.3, shape=n)
            comp.note(f"u ~ Normal(0, 0.3, shape={n}): one parameter per record; eta += u")
        if family in ("negbin", "poisson"):
            M = int(comp.pick((10, 30)))
            raw = rng.poisson(np.exp(0.5 + signal).clip(0, M))
            y = comp.outcome(np.minimum(raw, M), pymc_dp.Integers(0, M))
            if family == "negbin":
                comp.note(f"{LIKELIHOOD} ~ NegativeBinomial(mu=exp(eta), alpha ~ HalfNormal(5))")
                pm.NegativeBinomial(LIKELIHOOD, mu=pm.math.exp(eta), alpha=pm.HalfNormal("alpha", 5.0), observed=y)
            else:
                comp.note(f"{LIKELIHOOD} ~ Poisson(mu=exp(eta))")
                pm.Poisson(LIKELIHOOD, mu=pm.math.exp(eta), observed=y)
        elif family == "studentt":
            y = comp.outcome(np.clip(signal + rng.standard_t(3, n), -6.0, 6.0), pymc_dp.Interval(-6.0, 6.0))
            comp.note(f"{LIKELIHOOD} ~ StudentT(3, eta, sigma ~ HalfNormal(2))")
            pm.StudentT(LIKELIHOOD, nu=3.0, mu=eta, sigma=pm.HalfNormal("sigma", 2.0), observed=y)
        elif family == "probit":
            y = comp.outcome((rng.random(n) < 0.5).astype(float), pymc_dp.Binary())
            comp.note(f"{LIKELIHOOD} ~ Bernoulli(p=invprobit(eta))")
            pm.Bernoulli(LIKELIHOOD, p=pm.math.invprobit(eta), observed=y)
        else:
            K = int(comp.pick((3, 4)))
            y = comp.outcome(rng.integers(0, K, n).astype(float), pymc_dp.Integers(0, K - 1))
            if family == "ordered":
                comp.note(f"cuts ~ Normal(linspace, 1) ordered ({K - 1}); {LIKELIHOOD} ~ OrderedLogistic(eta, cuts)")
                cuts = pm.Normal("cuts", mu=np.linspace(-1.0, 1.0, K - 1), sigma=1.0,
                                 transform=pm.distributions.transforms.ordered)
                pm.OrderedLogistic(LIKELIHOOD, eta=eta, cutpoints=cuts, observed=y)
            else:
                comp.note(f"alpha ~ Normal(0, 1, shape {K - 1}); {LIKELIHOOD} ~ Categorical(softmax([eta + alpha, 0]))")
                alpha = pm.Normal("alpha", 0.0, 1.0, shape=K - 1)
                util = pt.stack([eta + alpha[k] for k in range(K - 1)] + [pt.zeros_like(eta)]).T
                pm.Categorical(LIKELIHOOD, p=pm.math.softmax(util, axis=1), observed=y)
    kind = comp.pick(("record", "record", "record", "users"))
    unit = pymc_dp.Users(max_rows=2) if kind == "users" else kind
    comp.note(f"unit={'Users(max_rows=2)' if kind == 'users' else repr(kind)}")
    epsilon = float(comp.pick(PATHS_EPSILONS))
    comp.note(f"epsilon={epsilon:g}, draws=1, make_private(..., path={path!r})")
    return GeneratedModel(seed=int(seed), recipe=tuple(comp.recipe), model=model, data=dict(comp.data),
                          public=tuple(comp.public), unit=unit, epsilon=epsilon, draws=1, family=family,
                          path=path, must_refuse=shape)
