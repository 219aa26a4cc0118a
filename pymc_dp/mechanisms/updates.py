"""Laplace noise on the posterior updates of a discrete Bayes network (AAAI 2016, Sec. 3).

Two mechanisms release noisy *counts* (the sufficient statistics of Beta/Dirichlet posteriors)
instead of posterior draws; the released draws are then post-processing:

* :class:`LaplaceUpdates` (Alg. 1): discrete Laplace noise on every count, truncated to its range;
* :class:`FourierUpdates` (Alg. 2): Laplace noise on the Fourier coefficients of the records'
  contingency table over the downward closure of the families, from which every family's
  marginal -- and so every count -- is read off consistently.

Build them with :func:`laplace_updates` and :func:`fourier_updates`.

Seeding: the noise comes from OpenDP's samplers (OS CSPRNG) and cannot be seeded. ``random_seed``
seeds only the posterior draws made from the released (noisy) parameters, which is
post-processing; two releases never have the same noise.
"""

from __future__ import annotations

import itertools
import math
import numbers
from typing import Any, Callable, Mapping, Sequence

import arviz as az
import numpy as np
import pymc as pm
import xarray as xr
from scipy import special as sc

from pymc_dp.certification import check_budget as _check_budget
from pymc_dp.certification import check_containers
from pymc_dp.domains import Domain
from pymc_dp.exceptions import PrivacyError, UnsupportedFactorError
from pymc_dp.ledger import Ledger
from pymc_dp.mechanisms.base import Mechanism, build_model
from pymc_dp.mechanisms.bayesnet import BayesNet, read_bayesnet
from pymc_dp.mechanisms.noise import (
    continuous_laplace,
    discrete_laplace,
    laplace_log_ratio,
    opendp_version,
)
from pymc_dp.private_data import PrivateData
from pymc_dp.release import check_budgeted_draws, check_ledger, draws_dataset
from pymc_dp.release import release as release_draws
from pymc_dp.seeds import exact_rng
from pymc_dp.units import Users, as_unit, describe_unit
from pymc_dp.version import software_versions

__all__ = ["FourierUpdates", "LaplaceUpdates", "fourier_updates", "laplace_updates"]

SEED_NOTE = (
    "random_seed seeds only the posterior draws made from the released parameters (post-processing); "
    "the Laplace noise comes from OpenDP's samplers (OS CSPRNG) and cannot be seeded."
)

#: |I| up to which the Fourier sensitivity is maximised exactly over all record changes
EXACT_FOURIER_VARIABLES = 22


def check_chains(draws: int, chains: int | None) -> int:
    """The number of chains the draws are laid out in: ``chains`` checked to divide ``draws``, or
    (``None``) the largest of 1..4 that does."""
    if chains is None:
        return max(c for c in range(1, 5) if draws % c == 0)
    if isinstance(chains, bool) or not isinstance(chains, numbers.Integral) or chains < 1 or draws % int(chains):
        raise ValueError(f"chains={chains!r} must be an integer >= 1 that divides draws={draws}")
    return int(chains)


class PosteriorUpdates(Mechanism):
    """What both mechanisms share: checks, ledger, posterior draws and the release."""

    name = ""
    algorithm = ""

    def __init__(
        self,
        model,
        *,
        epsilon: float,
        data: Mapping[str, Domain],
        draws: int = 1000,
        unit: str | Users = "record",
        public: Sequence[str] = (),
        ledger: Ledger | None | str = "default",
    ):
        model = build_model(model)
        _check_budget(epsilon, 0.0, draws, unit, None)
        self._ledger_arg = check_ledger(ledger)
        self.model = model
        self.epsilon = float(epsilon)
        self.delta = 0.0
        self.draws = int(draws)
        self.unit = as_unit(unit)
        self.domains, self.public = check_containers(model, data, public)
        self.net: BayesNet = read_bayesnet(model, self.domains)
        self.reads = tuple(self.net.containers)
        if isinstance(unit, Users):
            unit.check_rows(self.net.rows)
        self.rows_per_unit = describe_unit(unit)["max_rows"]
        self.last_release: az.InferenceData | None = None
        self.private_data = PrivateData.from_model(model, self.domains, unit)
        #: the ledger's name of the dataset (as PrivateModel's: the same data share one budget)
        self.dataset_id = self.private_data.fingerprint

    def _data(self) -> dict[str, np.ndarray]:
        """The private data. Read only inside a charged release (or by an audit)."""
        return {v.name: np.asarray(v.get_value()) for v in self.model.data_vars if v.name in self.net.containers}

    # ------------------------------------------------------------------ to implement
    def _noisy_parameters(self, data) -> tuple[dict[str, np.ndarray], dict]:  # pragma: no cover - abstract
        raise NotImplementedError

    def _public(self) -> dict:  # pragma: no cover - abstract
        raise NotImplementedError

    # ------------------------------------------------------------------ release
    def sample(self, draws: int | None = None, *, random_seed: Any = None, chains: int | None = None) -> az.InferenceData:
        """Charge ``epsilon`` to the ledger, then release ``draws`` posterior draws.

        The budget is charged *before* the private data are read (an overspending release raises
        :class:`~pymc_dp.BudgetExceededError` and nothing is released). The noisy posterior
        parameters are one ``epsilon``-DP release; the draws from them are post-processing.

        Parameters
        ----------
        draws : int, optional
            ``None`` or the number set when the mechanism was built (part of the budget).
        random_seed : int, optional
            Seeds the posterior draws given the released parameters only (the OpenDP noise cannot
            be seeded): the same seed never reproduces a release.
        chains : int, optional
            Layout of the draws as ``(chain, draw)``; must divide ``draws``.

        Returns
        -------
        az.InferenceData
            Only a ``posterior`` group, and ``attrs["pymc_dp"]``: JSON of public facts (mechanism,
            epsilon, unit, domains, sensitivity and its derivation, noise scale, the released
            noisy parameters, versions).
        """
        check_budgeted_draws(draws, self.draws)
        rng = exact_rng(random_seed)
        chains = check_chains(self.draws, chains)
        _ = self.ledger  # opened (or refused with LedgerError) before anything runs
        note = {"mechanism": self.name, "draws": self.draws, "unit": describe_unit(self.unit),
                "pymc_dp": software_versions()["pymc_dp"]}
        released: dict = {}

        def draw():
            params, noisy = self._noisy_parameters(self._data())
            released.update(noisy)
            return {"posterior": self._posterior(params, chains, rng)}

        def record(ledger_now):
            release = {"chains": chains, "draws_per_chain": self.draws // chains, "ledger": ledger_now}
            return {**self._public(), "released": released, "release": release}

        return release_draws(self, draw, epsilon=self.epsilon, delta=0.0, note=note, record=record)

    def _posterior(self, params: dict[str, np.ndarray], chains: int, rng: np.random.Generator) -> xr.Dataset:
        """Posterior draws given released parameters (post-processing, seed-deterministic)."""
        return draws_dataset(self.model, draw_posterior(self.net, params, self.draws, rng), chains)

    def _common_public(self) -> dict:
        return {
            "mechanism": self.name,
            "algorithm": self.algorithm,
            "epsilon": self.epsilon,
            "delta": 0.0,
            "draws": self.draws,
            "unit": describe_unit(self.unit)["kind"],
            "rows_per_unit": self.rows_per_unit,
            "domains": {k: d.to_dict() for k, d in self.domains.items()},
            "public": list(self.public),
            "network": self.net.describe(),
            "seed": SEED_NOTE,
            "versions": {**software_versions(), "opendp": opendp_version()},
        }

    def __repr__(self):
        return f"<{type(self).__name__} ({self.epsilon:g}, 0)-DP, unit={describe_unit(self.unit)['kind']}, {self.draws} draws>"


def draw_posterior(net: BayesNet, params: Mapping[str, np.ndarray], draws: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    """``draws`` iid draws of every Beta/Dirichlet given released parameters ``(cells, K)``
    (Beta: columns alpha, beta). Deterministic given the generator's state."""
    out = {}
    for name, p in net.params.items():
        a = np.asarray(params[name], float)
        if p["family"] == "Beta":
            x = rng.beta(a[:, 0], a[:, 1], size=(draws, p["cells"]))
        else:
            x = np.stack([rng.dirichlet(a[r], size=draws) for r in range(p["cells"])], axis=1)
        out[name] = x.reshape((draws, *p["shape"]))
    return out


def _params_json(net: BayesNet, params: Mapping[str, np.ndarray]) -> dict:
    out = {}
    for name, p in net.params.items():
        a = np.asarray(params[name], float)
        if p["family"] == "Beta":
            out[name] = {"family": "Beta", "shape": list(p["shape"]), "alpha": a[:, 0].tolist(), "beta": a[:, 1].tolist()}
        else:
            out[name] = {"family": "Dirichlet", "shape": list(p["shape"]), "a": a.tolist()}
    return out


# =========================================================================== Alg. 1
class LaplaceUpdates(PosteriorUpdates):
    """Laplace mechanism on posterior updates (AAAI 2016, Alg. 1).

    Releases ``Z = clip(Δω + Lap(Δ/ε), 0, u)``, ``Δω`` the vector of every count (per node,
    parent configuration and value), and the posterior ``Beta(α + Z¹, β + Z²)`` (Dirichlet:
    ``a + Z``) from which ``draws`` draws are made.

    Privacy map (Lemma 1, Corollary 1). Under replace-one neighbours a record's observation of a
    node updates exactly one cell of that node's counts; changing the record moves it to another
    cell: one count ``-1``, one ``+1``, L1 change ``<= 2`` per node, ``0`` for a node whose cell
    cannot move (its value and its gather are constant on the domain). Hence

    * ``unit="record"``: ``Δ = 2 · |I|``, ``|I|`` the nodes of one record that can move
      (the paper's ``2|I|``; attained by changing every variable of a record, as the tests check
      by enumeration);
    * ``unit="attribute"``: one container's value in one row changes the nodes that read it (as
      observation or parent): ``Δ = 2 · max_c |{nodes reading c}|``;
    * ``unit=Users(max_rows=m)``: ``m`` records change: ``Δ = 2 m |I|`` (triangle inequality).

    The counts are integers, so OpenDP's discrete Laplace with scale ``b = Δ/ε`` is ``ε``-DP
    (OpenDP's own privacy map is checked). Clipping to ``[0, u]`` (``u = n`` times the nodes of a
    record that can update the cell; ``n`` is public under replacement) and the posterior
    draws are post-processing.
    """

    name = "laplace_updates"
    algorithm = "AAAI 2016 Alg. 1: Laplace mechanism on posterior updates"

    def __init__(self, model, **kwargs):
        super().__init__(model, **kwargs)
        self.sensitivity, self.derivation = self._sensitivity()
        self.noise_scale = self.sensitivity / self.epsilon
        # a cell counts at most one observation per record of each node whose gather can reach it
        reach = {name: np.zeros(p["cells"], dtype=np.int64) for name, p in self.net.params.items()}
        for nd in self.net.nodes:
            reach[nd.param][sorted(set(nd.table))] += 1
        self.upper = {name: self.net.rows * r for name, r in reach.items()}
        discrete_laplace(np.zeros(0, np.int64), self.noise_scale, sensitivity=self.sensitivity, epsilon=self.epsilon)

    def _sensitivity(self) -> tuple[float, str]:
        net = self.net
        movable = [nd for nd in net.nodes if net.movable(nd)]
        kind = describe_unit(self.unit)["kind"]
        if kind == "attribute":
            per = {c: sum(net.reads(c, nd) for nd in movable) for c in net.containers}
            c = max(per, key=per.get)
            return 2.0 * per[c], (
                f"unit=attribute: one container's value in one row; container {c!r} is read by {per[c]} "
                f"node(s) of a record, each moving one count by -1 and one by +1: Delta = 2 x {per[c]}"
            )
        m = self.rows_per_unit
        text = (
            f"a record is observed by |I| = {len(movable)} node(s); changing it moves each node's "
            f"count from one cell to another (-1, +1): Delta = 2|I| = {2 * len(movable)} (AAAI Lemma 1)"
        )
        if m > 1:
            text += f"; a user changes at most {m} records: Delta = {m} x {2 * len(movable)}"
        return 2.0 * len(movable) * m, text

    def _noisy(self, counts: np.ndarray, runs: int | None = None) -> np.ndarray:
        reps = counts if runs is None else np.broadcast_to(counts, (runs, counts.size))
        return discrete_laplace(reps.astype(np.int64), self.noise_scale, sensitivity=self.sensitivity, epsilon=self.epsilon)

    def _noisy_parameters(self, data):
        counts = self.net.counts(data)
        flat = np.concatenate([counts[k].reshape(-1) for k in self.net.params])
        noisy = self._noisy(flat)
        params, pos = {}, 0
        for name, p in self.net.params.items():
            size = p["cells"] * p["K"]
            z = np.clip(noisy[pos : pos + size].reshape(p["cells"], p["K"]), 0, self.upper[name][:, None])
            pos += size
            params[name] = p["prior"] + z
        return params, {"posterior_parameters": _params_json(self.net, params)}

    def _public(self) -> dict:
        return {
            **self._common_public(),
            "sensitivity": {"l1": self.sensitivity, "derivation": self.derivation},
            "noise": {
                "distribution": "discrete Laplace on integer counts",
                "sampler": "OpenDP make_laplace(vector_domain(atom_domain(T=int)), l1_distance(T=int))",
                "scale": self.noise_scale,
            },
            "truncation": {"lower": 0, "upper": {k: v.tolist() for k, v in self.upper.items()},
                           "note": "noisy counts clipped to [0, u], u = n x the nodes of a record that can update the cell (post-processing)"},
        }

    # ------------------------------------------------------------------ audit
    def audit_runs(self, data, runs, rng):
        """Noisy counts before clipping (the clipping is post-processing), ``(runs, cells)``."""
        return self._noisy(self.net.flat_counts(data), int(runs))

    def audit_log_ratio(self, x, y):
        cx, cy, b = self.net.flat_counts(x).astype(float), self.net.flat_counts(y).astype(float), self.noise_scale

        return laplace_log_ratio(cx, cy, b)

    def audit_score(self, x, y):
        return float(np.sum(np.abs(self.net.flat_counts(x) - self.net.flat_counts(y))))


# =========================================================================== Alg. 2
class FourierUpdates(PosteriorUpdates):
    """Laplace mechanism in the Fourier domain (AAAI 2016, Alg. 2; Barak et al. 2007).

    With the ``|I|`` binary variables of a record and the contingency table ``h`` of the
    records, the basis ``f^γ(x) = 2^{-|I|/2} (-1)^{<γ, x>}`` and ``N_I`` the downward closure of
    the families (node and parents), the mechanism releases
    ``z_γ = <f^γ, h> + Lap(b)`` for ``γ ∈ N_I``, adds ``c = 2 t |N_I| b`` to ``z_∅`` and reads
    each family ``S``'s marginal as ``C_S(a) = 2^{|I|/2-|S|} Σ_{γ⊆S} z_γ (-1)^{<γ,a>}``; the
    marginals agree wherever families overlap. Negative cells are clipped to 0 for the posterior
    (and the release says it is then not "stealthy").

    Privacy map. Changing one record from ``x`` to ``x'`` changes the table by ``-1`` and ``+1``
    in two cells, so ``<f^γ, h>`` changes by ``2^{-|I|/2}((-1)^{<γ,x'>} - (-1)^{<γ,x>})``: by
    ``2 · 2^{-|I|/2}`` when ``<γ, x ⊕ x'>`` is odd, else 0. Hence the L1 sensitivity is
    ``Δ = 2 · 2^{-|I|/2} · max_d |{γ ∈ N_I : |γ ∩ d| odd}|`` over the changes ``d = x ⊕ x'``
    the unit allows (all ``d`` for a record, ``d`` within one container for an attribute;
    times ``m`` for a user of ``m`` rows). It is computed exactly by enumeration (up to
    ``|I| = 22``; above, the bound ``|N_I| - 1``: ``γ = ∅`` never changes). The paper's
    Corollary 2 uses ``2|N_I| 2^{-|I|/2}``, a valid but looser bound (``calibration="paper"``).
    Noise: OpenDP's floating-point-safe Laplace with ``b = Δ/ε``, ``ε``-DP.

    Non-negativity. A marginal cell is ``2^{|I|/2-|S|}`` times (true count ``· 2^{|S|-|I|/2}``
    ``+ c + Σ_{γ⊆S} ±X_γ``), so no cell is negative when ``Σ_{γ∈N_I} |X_γ| <= c``; that sum is
    Gamma(``|N_I|``, b), so ``P(non-negative) >= 1 - Q(|N_I|, c/b) = 1 - Q(|N_I|, 2t|N_I|)``
    (regularised upper incomplete gamma), released as ``nonnegativity.guaranteed``. The
    paper's Corollary 3 states ``1 - e^{-t}``; this argument implies it only for ``t`` large
    enough (roughly ``t >= 0.5``; for smaller ``t`` the paper gives no proof and we have none,
    see docs/mechanisms.md), so the release reports both and guarantees only the former.
    """

    name = "fourier_updates"
    algorithm = "AAAI 2016 Alg. 2: Laplace mechanism in the Fourier domain"

    def __init__(self, model, *, t: float = 3.0, calibration: str = "exact", **kwargs):
        super().__init__(model, **kwargs)
        if isinstance(t, bool) or not isinstance(t, numbers.Real) or not math.isfinite(t) or t < 0:
            raise PrivacyError(f"t={t!r} must be a finite number >= 0 (the non-negativity margin of Alg. 2).")
        if calibration not in ("exact", "paper"):
            raise PrivacyError(f"calibration={calibration!r}; use 'exact' (tight sensitivity) or 'paper' (Corollary 2).")
        net = self.net
        for v in net.variables:
            if v.values != (0, 1):
                raise UnsupportedFactorError(
                    f"fourier_updates needs binary variables; {v.label!r} takes the values {list(v.values)}. "
                    "Declare it pymc_dp.Binary(), or use pymc_dp.laplace_updates (any finite domain)."
                )
        for nd in net.nodes:
            if net.params[nd.param]["family"] != "Beta":
                raise UnsupportedFactorError(
                    f"fourier_updates needs Bernoulli factors with Beta priors; factor {nd.factor!r} is "
                    f"Categorical (Dirichlet {nd.param!r}). Use pymc_dp.laplace_updates."
                )
        self.t = float(t)
        self.calibration = calibration
        self.k = len(net.variables)
        self.families = [tuple(sorted({nd.variable, *nd.parents})) for nd in net.nodes]
        closure = set()
        for fam in self.families:
            for r in range(len(fam) + 1):
                closure.update(frozenset(c) for c in itertools.combinations(fam, r))
        self.closure = sorted(closure, key=lambda g: (len(g), sorted(g)))
        self._index = {g: i for i, g in enumerate(self.closure)}
        self._G = np.zeros((len(self.closure), self.k), dtype=np.int64)
        for i, g in enumerate(self.closure):
            self._G[i, list(g)] = 1
        self.sensitivity, self.derivation, self.paper_sensitivity = self._sensitivity()
        self.noise_scale = self.sensitivity / self.epsilon
        self.shift = 2.0 * self.t * len(self.closure) * self.noise_scale
        continuous_laplace(np.zeros(0), self.noise_scale, sensitivity=self.sensitivity, epsilon=self.epsilon)

    def _max_odd(self, support: Sequence[int]) -> tuple[int, bool]:
        """``max_d |{γ ∈ N_I: |γ ∩ d| odd}|`` over non-zero ``d`` supported on ``support``."""
        support = list(support)
        if len(support) > EXACT_FOURIER_VARIABLES:
            return len(self.closure) - 1, False
        G = self._G[:, support]
        best = 0
        total = 2 ** len(support)
        for start in range(1, total, 1 << 16):
            ds = np.arange(start, min(total, start + (1 << 16)), dtype=np.int64)
            bits = (ds[:, None] >> np.arange(len(support))) & 1
            odd = ((bits @ G.T) % 2).sum(axis=1)
            best = max(best, int(odd.max()))
        return best, True

    def _sensitivity(self) -> tuple[float, str, float]:
        size, k = len(self.closure), self.k
        unit = describe_unit(self.unit)
        scale = 2.0 * 2.0 ** (-k / 2)
        paper = 2.0 * size * 2.0 ** (-k / 2) * unit["max_rows"]
        if unit["kind"] == "attribute":
            best, exact, where = 0, True, None
            for c in self.net.containers:
                cols = [i for i, v in enumerate(self.net.variables) if v.container == c]
                odd, ex = self._max_odd(cols)
                exact &= ex
                if odd > best:
                    best, where = odd, c
            head = f"unit=attribute: d within one container (worst {where!r})"
        else:
            best, exact = self._max_odd(range(k))
            head = "unit=record: any change d = x xor x' of a record"
        m = unit["max_rows"]
        if self.calibration == "paper":
            return paper, (
                f"AAAI Corollary 2: Delta = 2|N_I| 2^(-|I|/2) = 2 x {size} x 2^(-{k}/2)"
                + (f", times m = {m} rows of a user" if m > 1 else "")
            ), paper
        how = "maximised exactly over all d" if exact else "bounded by |N_I| - 1 (gamma = {} never changes)"
        text = (
            f"{head}: coefficient gamma changes by 2 x 2^(-|I|/2) iff |gamma & d| is odd; "
            f"max_d #odd = {best} of |N_I| = {size} ({how}); Delta = 2 x {best} x 2^(-{k}/2)"
            + (f" x m = {m} rows of a user" if m > 1 else "")
        )
        return scale * best * m, text, paper

    # ------------------------------------------------------------------ transform
    def coefficients(self, data: Mapping[str, np.ndarray]) -> np.ndarray:
        """``<f^γ, h>`` for ``γ`` in :attr:`closure`, without materialising ``h``. **Reads data.**"""
        rec = self.net.records(data)
        parity = (rec @ self._G.T) % 2
        return 2.0 ** (-self.k / 2) * (len(rec) - 2.0 * parity.sum(axis=0))

    def marginal(self, z: np.ndarray, family: Sequence[int]) -> np.ndarray:
        """The marginal table of ``family`` (variable indices) from coefficients ``z`` (last axis:
        :attr:`closure`; leading axes are runs): shape ``z.shape[:-1] + (2,) * |S|``, indexed by
        the values of the family's variables in order."""
        fam = list(family)
        s = len(fam)
        cells = np.array(list(itertools.product((0, 1), repeat=s)), dtype=np.int64).reshape(-1, s)
        z = np.asarray(z, float)
        out = np.zeros(z.shape[:-1] + (len(cells),))
        for r in range(s + 1):
            for sub in itertools.combinations(range(s), r):
                g = frozenset(fam[i] for i in sub)
                sign = (-1.0) ** cells[:, list(sub)].sum(axis=1) if sub else np.ones(len(cells))
                out += z[..., self._index[g], None] * sign
        return (2.0 ** (self.k / 2 - s) * out).reshape(z.shape[:-1] + (2,) * s)

    def parameters_from(self, z: np.ndarray) -> tuple[dict[str, np.ndarray], int]:
        """Posterior parameters from (shifted) coefficients, and the number of negative cells."""
        net = self.net
        params = {name: p["prior"].copy() for name, p in net.params.items()}
        negative = 0
        for nd, fam in zip(net.nodes, self.families):
            table = self.marginal(z, fam)
            negative += int(np.sum(table < 0))
            pos = {v: i for i, v in enumerate(fam)}
            for j, conf in enumerate(itertools.product((0, 1), repeat=len(nd.parents))):
                cell = nd.table[j]
                for x in (0, 1):
                    key = [0] * len(fam)
                    key[pos[nd.variable]] = x
                    for p, v in zip(nd.parents, conf):
                        key[pos[p]] = v
                    params[nd.param][cell, 1 - x] += max(float(table[tuple(key)]), 0.0)
        return params, negative

    def _noisy(self, coef: np.ndarray, runs: int | None = None) -> np.ndarray:
        reps = coef if runs is None else np.broadcast_to(coef, (runs, coef.size))
        return continuous_laplace(reps, self.noise_scale, sensitivity=self.sensitivity, epsilon=self.epsilon)

    def _noisy_parameters(self, data):
        z = self._noisy(self.coefficients(data))
        z[self._index[frozenset()]] += self.shift
        params, negative = self.parameters_from(z)
        released = {
            "fourier_coefficients": [
                {"gamma": [self.net.variables[i].label for i in sorted(g)], "value": float(v)} for g, v in zip(self.closure, z)
            ],
            "posterior_parameters": _params_json(self.net, params),
            "non_negative": negative == 0,
            "negative_cells_clipped": negative,
        }
        return params, released

    def nonnegativity(self) -> dict:
        size = len(self.closure)
        ratio = self.shift / self.noise_scale
        return {
            "t": self.t,
            "shift": self.shift,
            "guaranteed": float(1.0 - sc.gammaincc(size, ratio)) if ratio > 0 else 0.0,
            "guarantee": "P(no negative marginal cell) >= 1 - Q(|N_I|, c/b) (sum of |N_I| Laplace magnitudes <= c)",
            "paper_claim": float(1.0 - math.exp(-self.t)),
            "paper_claim_note": "AAAI Corollary 3 (1 - e^-t); not implied by the union bound for small t (about t < 0.5); not used as the guarantee",
        }

    def _public(self) -> dict:
        k, size = self.k, len(self.closure)
        return {
            **self._common_public(),
            "sensitivity": {"l1": self.sensitivity, "derivation": self.derivation, "paper_bound": self.paper_sensitivity,
                            "calibration": self.calibration},
            "noise": {
                "distribution": "Laplace on Fourier coefficients",
                "sampler": "OpenDP make_laplace(vector_domain(atom_domain(T=float, nan=False)), l1_distance(T=float))",
                "scale": self.noise_scale,
            },
            "fourier": {
                "variables": [v.label for v in self.net.variables],
                "families": [[self.net.variables[i].label for i in fam] for fam in self.families],
                "closure_size": size,
                "I": k,
                "paper_shift_formula": "4 t |N_I|^2 / (eps 2^(|I|/2)) = 2 t |N_I| b at the paper's calibration",
            },
            "nonnegativity": self.nonnegativity(),
            "t": self.t,
        }

    # ------------------------------------------------------------------ audit
    def audit_runs(self, data, runs, rng):
        """Noisy coefficients without the public shift, ``(runs, |N_I|)``."""
        return self._noisy(self.coefficients(data), int(runs))

    def audit_log_ratio(self, x, y):
        cx, cy, b = self.coefficients(x), self.coefficients(y), self.noise_scale

        return laplace_log_ratio(cx, cy, b)

    def audit_score(self, x, y):
        return float(np.sum(np.abs(self.coefficients(x) - self.coefficients(y))))


# =========================================================================== public functions
def laplace_updates(
    model: pm.Model | Callable[[], pm.Model],
    *,
    epsilon: float,
    data: Mapping[str, Domain],
    draws: int = 1000,
    unit: str | Users = "record",
    public: Sequence[str] = (),
    ledger: Ledger | None | str = "default",
) -> LaplaceUpdates:
    """The Laplace mechanism on posterior updates (AAAI 2016, Alg. 1) of a discrete Bayes network.

    Parameters
    ----------
    model : pm.Model or callable
        A model of Bernoulli/Categorical observations of private ``pm.Data`` containers with
        Beta/Dirichlet priors, possibly gathered by other private containers
        (``p=theta[yd]``); or a zero-argument function returning one.
    epsilon : float
        The budget of one release (delta is 0).
    data : dict of str to Domain
        Each private container's finite domain (``Binary()`` or ``Integers(lo, hi)``).
    draws : int
        Posterior draws released (post-processing of the noisy parameters: free).
    unit : {"record", "attribute"} or Users
        Neighbouring datasets differ in one row, one container's value in one row, or one user's
        rows (``Users(max_rows=m)`` multiplies the sensitivity by ``m``).
    public : sequence of str
        ``pm.Data`` containers that are not private.
    ledger : Ledger, "default" or None
        As in :func:`pymc_dp.make_private`; :meth:`LaplaceUpdates.sample` charges ``epsilon``.

    Returns
    -------
    LaplaceUpdates
        Call ``.sample(random_seed=...)`` to release.
    """
    return LaplaceUpdates(model, epsilon=epsilon, data=data, draws=draws, unit=unit, public=public, ledger=ledger)


def fourier_updates(
    model: pm.Model | Callable[[], pm.Model],
    *,
    epsilon: float,
    data: Mapping[str, Domain],
    draws: int = 1000,
    unit: str | Users = "record",
    t: float = 3.0,
    calibration: str = "exact",
    public: Sequence[str] = (),
    ledger: Ledger | None | str = "default",
) -> FourierUpdates:
    """The Laplace mechanism in the Fourier domain (AAAI 2016, Alg. 2): consistent noisy marginals.

    Parameters are those of :func:`laplace_updates` (binary variables and Bernoulli factors
    only), and

    t : float
        Non-negativity margin: ``c = 2 t |N_I| b`` is added to the zero coefficient (the paper's
        ``4t|N_I|^2 / (eps 2^{|I|/2})`` at its calibration).
    calibration : {"exact", "paper"}
        ``"exact"``: the tight sensitivity (see :class:`FourierUpdates`); ``"paper"``:
        Corollary 2's ``2|N_I| 2^{-|I|/2}``.
    """
    return FourierUpdates(model, epsilon=epsilon, data=data, draws=draws, unit=unit, t=t, calibration=calibration,
                          public=public, ledger=ledger)
