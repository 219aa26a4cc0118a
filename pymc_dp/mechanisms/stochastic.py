"""Stochastic-Lipschitz mode: untruncated posterior draws with an (epsilon, delta) guarantee.

ALT 2014 Thm 2(ii) / JMLR 2017 Thm 8(2), Cor. 9, corrected (docs/theory/stochastic_lipschitz.md):
the prior is **not** truncated; the truncation region ``G = Theta_L`` that the truncated mode
would certify at a per-draw ``eps0`` serves only in the proof. One draw is
``(eps0 + ln 1/(1 - eta*), eta*)``-DP (:func:`pymc_dp.stochastic.stochastic_guarantee`), where
``eta*`` is the largest **posterior** mass outside ``G`` over every dataset of the public size in
the declared domains -- not the prior mass of the non-Lipschitz set, which bounds nothing.
N draws compose by the optimal composition of (eps, delta)-DP mechanisms
(:func:`pymc_dp.stochastic.compose_approximate`); ``eps0`` is chosen, from public information
only, to minimise the release's delta at the requested epsilon.

``eta*`` is computed exactly only where the supremum over datasets is exact: one scalar free RV
with a conjugate prior (Beta, Normal, Gamma) and one private container read by one factor, so
that the posterior depends on the data through ``s = sum(x)`` only; then

* Beta / Gamma posteriors (Bernoulli, Binomial, Poisson records, integer domains): every
  ``s`` in ``[n lo, n hi]`` is reached and enumerated;
* Normal posteriors (known noise, interval domain): the posterior sd is data-free and the mean
  affine in the data, and the mass outside an interval is quasi-convex in the mean (the mass
  inside is a log-concave function of it), so the supremum is at the two extreme datasets.

Where ``eta*`` is computed this way every posterior a dataset can give is enumerated too, so the
release also computes the **exact privacy profile** of one draw, ``delta_d(eps_d)`` = the largest
hockey-stick divergence over every pair of posteriors two neighbouring datasets give
(:func:`pymc_dp.stochastic.neighbour_pairs`), and claims whichever of the two certificates gives
the smaller delta (the report says which, with the other beside it).

Anything else raises NotImplementedError naming the gap: no computable bound on the posterior
mass of the non-Lipschitz set over all datasets (the seeds' Thm 8(2) bound needs the ratio of
maximum to marginal likelihood, unbounded in general).
"""

from __future__ import annotations

import math
from typing import Any, Mapping, Sequence

import numpy as np

from pymc_dp import stochastic as sl
from pymc_dp.certification import certify, check_budget
from pymc_dp.domains import Domain, Integers, Interval
from pymc_dp.exact import conjugate_plan
from pymc_dp.exceptions import BudgetExceededError, NotConjugateError, PathNotImplementedError
from pymc_dp.ledger import Ledger
from pymc_dp.mechanisms.base import Mechanism, build_model
from pymc_dp.mechanisms.plan_release import release_plan_draws
from pymc_dp.private_data import PrivateData
from pymc_dp.release import check_ledger
from pymc_dp.units import describe_unit
from pymc_dp.version import software_versions

__all__ = ["StochasticPosterior", "stochastic_posterior", "MECHANISM"]

MECHANISM = "posterior sampling, stochastic-Lipschitz (untruncated prior)"

_GAP = ("the stochastic-Lipschitz mode needs sup over all datasets of the posterior mass outside Theta_L "
        "(docs/theory/stochastic_lipschitz.md); pymc_dp computes it exactly only for one scalar conjugate "
        "parameter (Beta, Normal, Gamma prior) and one private container read by one factor; for other models "
        "use the truncated mode (pymc_dp.make_private). ")

_FIXED = {"Beta": None, "Normal": "sigma", "Gamma": "rate"}


def _dataset(domain, n: int, s: float, shape) -> np.ndarray:
    """A dataset of n records (public shape) with sum ``s``: records at lo, filled up to hi in order."""
    lo, hi = float(domain.lo), float(domain.hi)
    x = np.full(n, lo)
    rest = s - n * lo
    for i in range(n):
        step = min(hi - lo, rest)
        x[i] += step
        rest -= step
    return x.reshape(shape)


class StochasticPosterior(Mechanism):
    """Exact untruncated conjugate posterior draws, (epsilon, delta)-DP by the corrected
    stochastic-Lipschitz theorem; build with :func:`stochastic_posterior`."""

    name = MECHANISM
    algorithm = ("iid draws of the untruncated conjugate posterior; one draw is (eps_d, delta_d)-DP with delta_d its "
                 "exact privacy profile over every neighbouring pair, or by the theorem (eps0 + ln 1/(1-eta*), eta*)-DP, "
                 "eta* = sup over datasets of the posterior mass outside the truncated mode's region Theta_L")

    def __init__(self, model, *, epsilon: float, delta: float, draws: int, data: Mapping[str, Domain],
                 public: Sequence[str] = (), ledger: Ledger | None | str = "default", grid: int = 24):
        self.model = build_model(model)
        check_budget(epsilon, delta, draws, "record", None)
        if delta <= 0:
            raise BudgetExceededError("the stochastic-Lipschitz mode is (epsilon, delta)-DP with delta > 0: pass delta=...")
        self._ledger_arg = check_ledger(ledger)
        self.last_release = None
        self.draws, self.unit = int(draws), "record"
        self.epsilon_requested, self.delta_requested = float(epsilon), float(delta)
        base = certify(self.model, epsilon=float(epsilon), draws=1, data=data, public=public)
        self.domains, self.public = dict(base.domains), tuple(base.public)
        self.reads = tuple(sorted({c for f in base.factors for c in f.reads}))
        try:
            self.plan = conjugate_plan(self.model, (), self.domains)
        except NotConjugateError as err:
            raise PathNotImplementedError(_GAP + f"Here: {err}") from err
        self._check_structure(base)
        self.private_data = PrivateData.from_model(self.model, self.domains, self.unit)
        self.dataset_id = self.private_data.fingerprint
        path = self._path()
        theorem = None
        for eps0 in np.geomspace(float(epsilon) / (8 * self.draws), 2 * float(epsilon), int(grid)):
            cand = self._candidate(float(eps0), path, data, public)
            if cand is not None and (theorem is None or cand["delta_total"] < theorem["delta_total"]):
                theorem = cand
        self.theorem = theorem
        exact = self._exact_candidate(path, int(grid))
        best = min((c for c in (theorem, exact) if c is not None), key=lambda c: c["delta_total"], default=None)
        if best is None or best["delta_total"] > delta:
            got = "no region" if best is None else f"delta = {best['delta_total']:.4g} at best"
            raise BudgetExceededError(
                f"the stochastic-Lipschitz mode cannot give ({epsilon:g}, {delta:g})-DP for {draws} draws: {got}. "
                "Neither the exact privacy profile of the untruncated posterior nor the theorem's bound (the "
                "posterior mass outside Theta_L over the worst dataset, eta*) is small enough; raise epsilon or "
                "delta, or use the truncated mode (make_private)."
            )
        self.guarantee = best
        self.epsilon, self.delta = float(epsilon), float(best["delta_total"])
        self.epsilon_per_draw, self.delta_per_draw = best["epsilon_per_draw"], best["delta_per_draw"]

    # ------------------------------------------------------------------ certification
    def _check_structure(self, base) -> None:
        parts = self.plan.parts
        if len(parts) != 1 or tuple(parts[0].shape) != () or parts[0].family not in _FIXED:
            raise PathNotImplementedError(_GAP + f"Here: free RVs {list(self.plan.variables)}.")
        if len(self.reads) != 1 or len(base.factors) != 1:
            raise PathNotImplementedError(_GAP + f"Here: private containers {list(self.reads)}, factors "
                                      f"{[f.name for f in base.factors]}.")
        dom = self.domains[self.reads[0]]
        ok = isinstance(dom, Interval) if parts[0].family == "Normal" else isinstance(dom, Integers)
        if not ok:
            raise PathNotImplementedError(_GAP + f"Here: a {parts[0].family} posterior with data[{self.reads[0]!r}] = {dom}.")
        self.var, self.family = parts[0].name, parts[0].family

    def _posterior(self, x: np.ndarray) -> dict:
        return self.plan.with_data({self.reads[0]: x}).posteriors()[self.var]

    def _path(self) -> list[dict]:
        """Every posterior a dataset of the public size can give (Beta, Gamma), or the two
        extreme ones (Normal); checked to depend on the data through the sum only."""
        name = self.reads[0]
        shape = np.shape(self.private_data.values[name])
        n, dom = int(np.prod(shape)), self.domains[name]
        lo, hi = n * float(dom.lo), n * float(dom.hi)
        sums = [lo, hi] if self.family == "Normal" else list(np.arange(round(lo), round(hi) + 1))
        if len(sums) > 200_000:
            raise PathNotImplementedError(_GAP + f"Here: {len(sums)} values of the sufficient statistic.")
        ends = [self._posterior(_dataset(dom, n, s, shape)) for s in (lo, hi)]
        mid = 0.5 * (lo + hi) if self.family == "Normal" else float(round(0.5 * (lo + hi)))
        a = self._posterior(_dataset(dom, n, mid, shape))
        b = self._posterior(_dataset(dom, n, mid, shape)[::-1].copy() if len(shape) == 1 else _dataset(dom, n, mid, shape))
        moving = "mu" if self.family == "Normal" else "alpha"
        if not np.allclose(a[moving], b[moving], rtol=1e-12):
            raise PathNotImplementedError(_GAP + "Here: the posterior depends on more than the sum of the records.")
        t = (mid - lo) / (hi - lo)
        if not np.allclose(a[moving], (1 - t) * ends[0][moving] + t * ends[1][moving], rtol=1e-9):
            raise PathNotImplementedError(_GAP + "Here: the posterior is not affine in the sum of the records.")
        fixed = [k for k in ("beta", "sigma", "rate") if k in a]
        if self.family == "Beta":
            total = ends[0]["alpha"] + ends[0]["beta"]
            return [{"alpha": ends[0]["alpha"] + (s - lo), "beta": total - ends[0]["alpha"] - (s - lo)} for s in sums]
        for k in fixed:
            if not np.allclose(ends[0][k], ends[1][k], rtol=1e-12):
                raise PathNotImplementedError(_GAP + f"Here: the posterior's {k} depends on the data.")
        if self.family == "Gamma":
            return [{"alpha": ends[0]["alpha"] + (s - lo), "rate": ends[0]["rate"]} for s in sums]
        return ends

    def _candidate(self, eps0: float, path, data, public) -> dict | None:
        """The guarantee when the proof uses the region the truncated mode certifies at ``eps0``."""
        try:
            cert = certify(self.model, epsilon=eps0, draws=1, data=data, public=public)
        except BudgetExceededError:
            return None
        cons = [c for c in cert.constraints if getattr(c, "var", None) == self.var]
        if len(cons) != 1 or len(cert.constraints) != 1 or not hasattr(cons[0], "lower"):
            raise PathNotImplementedError(_GAP + f"Here: the region is {cert.constraints}.")
        lower = -math.inf if cons[0].lower is None else float(cons[0].lower)
        upper = math.inf if cons[0].upper is None else float(cons[0].upper)
        eta = max(float(np.max(sl.outside_mass(self.family, p, lower, upper))) for p in path)
        eta = min(1.0, eta * (1 + 1e-9) + 1e-15)  # float safety: never below the computed mass
        e_d, d_d = sl.stochastic_guarantee(cert.certificate.epsilon_per_draw, eta)
        total = sl.compose_approximate(e_d, d_d, self.draws, self.epsilon_requested)
        return {"certificate": "theorem", "eps0": float(cert.certificate.epsilon_per_draw), "region": [lower, upper], "eta_star": eta,
                "epsilon_per_draw": e_d, "delta_per_draw": d_d, "delta_total": total,
                "prior_mass_outside": float(np.max(sl.outside_mass(self.family, _prior(self.plan), lower, upper)))}

    def _exact_candidate(self, path, grid: int) -> dict | None:
        """The exact privacy profile: for each per-draw ``eps_d`` on a public grid, ``delta_d`` =
        the largest hockey-stick divergence over every pair of posteriors neighbouring datasets
        give (:func:`pymc_dp.stochastic.neighbour_pairs`, :func:`~pymc_dp.stochastic.exact_profile`),
        composed over the draws like the theorem's pair; the ``eps_d`` with the least total delta.
        None where the pairs are too many to enumerate (the theorem's bound is then the only one)."""
        name = self.reads[0]
        dom = self.domains[name]
        n = int(np.prod(np.shape(self.private_data.values[name])))
        span = float(dom.hi) - float(dom.lo)
        if self.family != "Normal" and len(path) * span > 2_000_000:
            return None
        pairs = sl.neighbour_pairs(self.family, path, n, span)
        eps, N = self.epsilon_requested, self.draws
        best = None
        for e_d in np.unique(np.r_[np.geomspace(eps / (8 * N), eps, grid), eps / N]):
            d_d = min(1.0, sl.exact_profile(self.family, pairs, float(e_d)) * (1 + 1e-9) + 1e-15)  # round up
            total = sl.compose_approximate(float(e_d), d_d, N, eps)
            if best is None or total < best["delta_total"]:
                best = {"certificate": "exact profile", "epsilon_per_draw": float(e_d), "delta_per_draw": d_d,
                        "delta_total": total, "pairs": int(np.size(next(iter(pairs[0].values()))))}
        return best

    # ------------------------------------------------------------------ release
    def _public(self) -> dict:
        g, t = self.guarantee, self.theorem
        composition = (f"{self.draws} draws: optimal composition of (eps, delta)-DP mechanisms, "
                       "delta = 1 - (1 - delta_d)^N (1 - delta_pure(epsilon))")
        if g["certificate"] == "exact profile":
            theorem = {} if t is None else {
                "theorem's bound (not used: larger)": f"({t['epsilon_per_draw']:.6g}, {t['delta_per_draw']:.6g}) per draw, "
                f"delta {t['delta_total']:.6g} for the release; eta* = {t['eta_star']:.6g} outside Theta_L of {self.var} "
                f"= {t['region']}, truncated-mode eps0 {t['eps0']:.6g}"}
            how = {"neighbouring pairs of posteriors enumerated": g["pairs"], **theorem,
                   "derivation": ("one draw: delta_d = the largest exact hockey-stick divergence H_{e^eps_d} over every "
                                  "pair of posteriors two neighbouring datasets give (the posterior depends on the data "
                                  "through their sum only; docs/theory/stochastic_lipschitz.md, 'The exact profile'); "
                                  + composition)}
            certificate = "the exact privacy profile"
        else:
            how = {"truncated-mode eps0 of the region": g["eps0"],
                   f"region Theta_L of {self.var} (used in the proof only)": g["region"],
                   "eta* = sup over datasets of the posterior mass outside Theta_L": g["eta_star"],
                   "prior mass outside Theta_L (not a bound on delta)": g["prior_mass_outside"],
                   "derivation": ("one draw: xi(A|x) <= e^eps0/(1-eta*) xi(A|y) + eta* "
                                  "(docs/theory/stochastic_lipschitz.md); " + composition)}
            certificate = "the theorem's bound"
        return self._public_common({
            "mode": f"stochastic-Lipschitz (no truncation); certificate: {certificate}",
            "epsilon per draw": g["epsilon_per_draw"], "delta per draw": g["delta_per_draw"], **how,
        })

    def _public_common(self, guarantee: dict) -> dict:
        return {
            "mechanism": self.name, "algorithm": self.algorithm, "epsilon": self.epsilon, "delta": self.delta,
            "draws": self.draws, "unit": describe_unit(self.unit)["kind"], "rows_per_unit": 1,
            "domains": {k: d.to_dict() for k, d in self.domains.items()}, "public": list(self.public),
            "guarantee": guarantee,
            "seed": "random_seed seeds the exact posterior draws: keep it secret.",
            "versions": software_versions(),
        }

    def sample(self, draws: int | None = None, *, random_seed: Any = None, chains: int | None = None):
        """Charge ``(epsilon, delta)``, then release the draws of the untruncated posterior."""
        return release_plan_draws(self, draws, random_seed, chains, delta=self.delta, public=self._public,
                                  note={"epsilon_per_draw": self.epsilon_per_draw, "delta_per_draw": self.delta_per_draw})

    # ------------------------------------------------------------------ audits
    def audit_runs(self, data, runs, rng):
        return np.asarray(self.plan.with_data(data).sample(int(runs), rng)[self.var], float).reshape(int(runs), -1)

    def audit_log_ratio(self, x, y):
        px, py = self.plan.with_data(x), self.plan.with_data(y)
        return lambda o: px.log_density({self.var: np.ravel(o)}) - py.log_density({self.var: np.ravel(o)})

    def audit_profile(self, x, y, epsilon: float) -> float:
        """Exact hockey-stick divergence of one draw on ``x`` against one on ``y`` at ``e^epsilon``
        (:func:`pymc_dp.stochastic.hockey_stick`); for :func:`pymc_dp.audit`."""
        px = self.plan.with_data(x).posteriors()[self.var]
        py = self.plan.with_data(y).posteriors()[self.var]
        return sl.hockey_stick(self.family, px, py, epsilon)

    def __repr__(self):
        return (f"<StochasticPosterior ({self.epsilon:g}, {self.delta:.3g})-DP, {self.draws} draws; per draw "
                f"({self.epsilon_per_draw:.4g}, {self.delta_per_draw:.3g})>")


def _prior(plan) -> dict:
    """The prior's parameters in the posterior's naming (for the prior mass, reported only)."""
    d = plan.describe()["variables"][plan.variables[0]]
    p = d["prior_parameters"]
    if d["prior"] == "Beta":
        return {"alpha": p["alpha"], "beta": p["beta"]}
    if d["prior"] == "Normal":
        return {"mu": p["mu"], "sigma": p["sigma"]}
    return {"alpha": p.get("alpha"), "rate": p.get("beta", p.get("rate"))}


def stochastic_posterior(model, *, epsilon: float, delta: float, draws: int, data: Mapping[str, Domain],
                         public: Sequence[str] = (), ledger: Ledger | None | str = "default") -> StochasticPosterior:
    """Posterior sampling **without** truncating the prior, ``(epsilon, delta)``-DP by the
    stochastic-Lipschitz theorem as corrected in docs/theory/stochastic_lipschitz.md.

    Same keywords as :func:`pymc_dp.make_private` (unit: one record). Raises
    :class:`~pymc_dp.BudgetExceededError` when no region gives the requested delta, and
    NotImplementedError for models whose worst-case posterior mass outside Theta_L pymc_dp cannot
    compute exactly (see the module docstring)."""
    return StochasticPosterior(model, epsilon=epsilon, delta=delta, draws=draws, data=data, public=public, ledger=ledger)
