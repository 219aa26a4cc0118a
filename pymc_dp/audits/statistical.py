"""The statistical audit: many runs of the mechanism on one pair of neighbours, an event chosen on half of them, a Clopper-Pearson lower bound on epsilon from the other half."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
from scipy import special as sc

from pymc_dp.audits.result import AuditError, Witness, frozen_copy
from pymc_dp.sampling import rhat_by_variable


# =========================================================================== Clopper-Pearson
def clopper_pearson(k, n, alpha):
    """One-sided Clopper-Pearson bounds ``(lower, upper)`` on a binomial proportion from ``k``
    successes in ``n`` trials, each at level ``1 - alpha``: ``P(p >= lower) >= 1 - alpha`` and
    ``P(p <= upper) >= 1 - alpha``. Vectorised over ``k`` and ``n``."""
    k, n = np.broadcast_arrays(np.asarray(k, dtype=float), np.asarray(n, dtype=float))
    with np.errstate(invalid="ignore", divide="ignore"):
        lower = np.where(k > 0, sc.betaincinv(np.maximum(k, 1.0), n - k + 1.0, alpha), 0.0)
        upper = np.where(k < n, sc.betainccinv(k + 1.0, np.maximum(n - k, 1.0), alpha), 1.0)
    if lower.ndim == 0:
        return float(lower), float(upper)
    return lower, upper


def _log_cp_ratio(k1, n1, k2, n2, alpha, delta=0.0):
    """Lower bound on epsilon from ``P1 <= e^eps P2 + delta`` with counts ``k1 / n1`` and ``k2 / n2``:
    ``ln((p1_lower - delta) / p2_upper)``, each Clopper-Pearson bound at level ``1 - alpha`` (so
    jointly at ``1 - 2 alpha``). Vectorised."""
    lo, _ = clopper_pearson(k1, n1, alpha)
    _, hi = clopper_pearson(k2, n2, alpha)
    lo = np.asarray(lo) - delta
    with np.errstate(divide="ignore", invalid="ignore"):
        out = np.where(lo > 0, np.log(np.maximum(lo, 1e-300)) - np.log(hi), -np.inf)
    return float(out) if np.ndim(out) == 0 else out


# =========================================================================== statistical audit
class _Mechanism:
    """Runs of the release mechanism on a pair of datasets, and the log-ratio of their densities
    where a density is known (the NP-optimal statistic)."""

    def __init__(self, pmod, x, y, kind, gm=None, mcmc_kwargs=None):
        self.kind = kind
        self.log_ratio = None
        plan = pmod.conjugate_plan
        if plan is not None:
            px, py = plan.with_data(x), plan.with_data(y)

            def log_ratio(d):
                with np.errstate(invalid="ignore"):
                    return px.log_density(d) - py.log_density(d)

            self.log_ratio = log_ratio
        elif gm is not None:
            self.log_ratio = gm.log_ratio_function(x, y)
        if kind == "exact":
            self.draw_x = lambda n, rng: px.sample(n, rng)
            self.draw_y = lambda n, rng: py.sample(n, rng)
        elif kind == "grid":
            self.draw_x, self.draw_y = gm.samplers(x, y)
        elif kind == "chain":
            self.chains = _ChainRuns(pmod, x, y, mcmc_kwargs)
            self.draw_x, self.draw_y = self.chains.samplers()
            self.log_ratio = _ChainRuns.log_ratio
        else:
            self.draw_x = self._mcmc(pmod, x, mcmc_kwargs)
            self.draw_y = self._mcmc(pmod, y, mcmc_kwargs)

    @staticmethod
    def _mcmc(pmod, data, mcmc_kwargs):
        other = pmod.with_data(data)
        other._ledger_arg = None  # an audit spends nothing: this copy records nothing
        kwargs = {"progressbar": False, "compute_convergence_checks": False, **(mcmc_kwargs or {})}

        def draw(n, rng):
            out = {}
            for _ in range(n):
                idata = other.sample(method="mcmc", random_seed=int(rng.integers(2**31 - 1)), **kwargs)
                for name in idata.posterior.data_vars:
                    out.setdefault(name, []).append(np.asarray(idata.posterior[name].values)[0, 0])
            return {k: np.stack(v) for k, v in out.items()}

        return draw

    def statistics(self, draws: dict) -> dict[str, np.ndarray]:
        """Scalar statistics of released draws: the log-ratio (when known) and every coordinate."""
        out = {}
        if self.log_ratio is not None:
            out["log-ratio"] = np.asarray(self.log_ratio(draws), float)
        for name, v in draws.items():
            if name.startswith("__"):
                continue
            v = np.asarray(v, float)
            flat = v.reshape(len(v), -1)
            for j in range(flat.shape[1]):
                out[name if flat.shape[1] == 1 else f"{name}[{j}]"] = flat[:, j]
        return out


class _ChainRuns:
    """Draws from the truncated posterior by long MCMC chains, thinned, one set per dataset.

    One released draw is one draw from the truncated posterior; an audit of the certificate
    needs many independent ones. Where the posterior has no exact sampler and no grid (more than
    two free scalar parameters), ``pm.sample`` on the truncated model of each dataset gives them:
    ``chains`` chains (default 2) after ``tune`` warm-up steps, every ``thin``-th draw kept
    (default 4), so a run costs a few NUTS steps and no compilation. What this tests is the
    rule, the lift and the truncation (the claim about the truncated posterior), not the mixing
    of a sampler over ``tune`` steps: that is ``sampler="mcmc"``. The statistic the test may
    choose includes the log-likelihood ratio ``log p(x|theta) - log p(y|theta)`` at each draw
    (the normalisers cancel in a threshold event), evaluated by :func:`pymc.compute_log_likelihood`
    on both datasets' models.
    """

    def __init__(self, pmod, x, y, mcmc_kwargs=None):
        self.kwargs = dict(mcmc_kwargs or {})
        self.models = {"x": pmod.with_data(x), "y": pmod.with_data(y)}
        self.initvals = dict(pmod.certification.initvals)
        # only what a release holds: Deterministics that read private data are never released
        self.released = set(pmod.certification.released_names)
        #: dataset key -> how well its chains mixed: worst rank-normalised R-hat of a released
        #: coordinate (and its name), and the fraction of divergent transitions
        self.mixing: dict[str, dict] = {}

    def samplers(self):
        return self._sampler("x", "y"), self._sampler("y", "x")

    def _sampler(self, own, other):
        def draw(n, rng):
            import pymc as pm

            from pymc_dp.sampling import without_short_trace_warning

            kw = dict(self.kwargs)
            # several chains, a long warm-up and small steps: a hierarchical funnel that traps
            # one of two short chains reads as a privacy loss to the test (seen on radon)
            chains = int(kw.pop("chains", 4))
            thin = int(kw.pop("thin", 4))
            tune = int(kw.pop("tune", 1000))
            kw.setdefault("target_accept", 0.95)
            kw.setdefault("cores", 1)
            kw.setdefault("init", "adapt_diag")
            per_chain = -(-n // chains) * thin
            model = self.models[own].model
            with without_short_trace_warning():
                idata = pm.sample(
                    draws=per_chain, tune=tune, chains=chains, model=model, initvals=self.initvals,
                    random_seed=int(rng.integers(2**31 - 1)), progressbar=False,
                    compute_convergence_checks=False, return_inferencedata=True, **kw,
                )
            self.mixing[own] = _mixing(idata, self.released)
            post = idata.posterior.isel(draw=slice(thin - 1, None, thin))
            out = {}
            for name in post.data_vars:
                if name not in self.released:
                    continue
                v = np.asarray(post[name].values)
                out[name] = v.reshape(-1, *v.shape[2:])[:n]
            lik = {}
            for key in (own, other):
                ll = pm.compute_log_likelihood(
                    idata.copy(), model=self.models[key].model, extend_inferencedata=False, progressbar=False
                )
                ll = ll.isel(draw=slice(thin - 1, None, thin))
                tot = sum(np.asarray(v.values).reshape(v.shape[0] * v.shape[1], -1).sum(axis=1) for v in ll.data_vars.values())
                lik[key] = tot[:n]
            # log p(x|theta) - log p(y|theta), whichever dataset the chain ran on
            out["__log_ratio__"] = lik["x"] - lik["y"]
            return out

        return draw

    @staticmethod
    def log_ratio(draws):
        return np.asarray(draws["__log_ratio__"], float)


#: chains whose worst R-hat or divergent fraction exceeds these did not sample the truncated
#: posterior: a difference between their event frequencies is not evidence of a privacy loss
RHAT_MAX = 1.05


DIVERGENT_MAX = 0.01


def _mixing(idata, released) -> dict:
    """Worst rank-normalised R-hat over the released coordinates (Vehtari et al. 2021, as
    :func:`arviz.rhat` computes it), and the fraction of divergent transitions."""
    worst, where = 1.0, None
    for n, r in rhat_by_variable(idata.posterior, [n for n in idata.posterior.data_vars if n in released]).items():
        if r > worst:
            worst, where = r, n
    div = idata.sample_stats["diverging"] if "diverging" in getattr(idata, "sample_stats", {}) else None
    divergent = float(np.mean(div.values)) if div is not None else 0.0
    return {"rhat": worst, "worst": where, "divergent": divergent,
            "mixed": worst <= RHAT_MAX and divergent <= DIVERGENT_MAX}


def _events(sx: np.ndarray, sy: np.ndarray, max_thresholds=256):
    """Counts of the threshold events ``{s <= t}`` and ``{s > t}`` under both datasets, for
    thresholds at quantiles of the pooled values: arrays ``t, kx_le, ky_le`` (``{s > t}`` is the
    complement)."""
    pooled = np.concatenate([sx, sy])
    pooled = pooled[np.isfinite(pooled)]
    if pooled.size == 0:
        return None
    ts = np.unique(np.quantile(pooled, np.linspace(0.0, 1.0, max_thresholds)))
    xs, ys = np.sort(np.where(np.isnan(sx), np.inf, sx)), np.sort(np.where(np.isnan(sy), np.inf, sy))
    return ts, np.searchsorted(xs, ts, side="right"), np.searchsorted(ys, ts, side="right")


def _best_event(sx, sy, alpha, delta=0.0):
    """Over thresholds, sides (``<=``, ``>``) and directions (``x`` or ``y`` in the numerator), the
    event with the largest Clopper-Pearson lower bound on the log-ratio of its probabilities.
    Returns ``(bound, estimate, threshold, side, numerator)`` and, per threshold, the best bound
    and its estimate."""
    ev = _events(sx, sy)
    if ev is None:
        return None, {}
    ts, kx, ky = ev
    nx, ny = len(sx), len(sy)
    rows = []  # (side, numerator, k1, n1, k2, n2)
    for side, ax, ay in (("<=", kx, ky), (">", nx - kx, ny - ky)):
        rows.append((side, "x", ax, nx, ay, ny))
        rows.append((side, "y", ay, ny, ax, nx))
    lbs = np.stack([_log_cp_ratio(k1, n1, k2, n2, alpha, delta) for _, _, k1, n1, k2, n2 in rows])
    with np.errstate(divide="ignore", invalid="ignore"):  # 0/0 events: nan, set to -inf below
        ests = np.stack([np.log(k1 / n1) - np.log(k2 / n2) for _, _, k1, n1, k2, n2 in rows])
    ests = np.where(np.isnan(ests), -np.inf, ests)
    r, j = np.unravel_index(int(np.argmax(lbs)), lbs.shape)
    side, num = rows[r][0], rows[r][1]
    best = (float(lbs[r, j]), float(ests[r, j]), float(ts[j]), side, num)
    top = np.argmax(lbs, axis=0)
    curve = {float(t): (float(lbs[top[i], i]), float(ests[top[i], i])) for i, t in enumerate(ts)}
    return best, curve


def _predicted_bound(gx, gy, n_test, alpha, thresholds=128):
    """The lower bound a test of ``n_test`` runs per dataset would give with the log-ratio
    statistic, predicted from pilot draws. ``P_y(g > t)`` is estimated from the draws of x by
    importance weighting (``E_x[1{g > t} e^-g]``) and ``P_x(g <= t)`` from those of y, which is
    far less noisy than counting rare events."""
    gx = gx[np.isfinite(gx)]
    gy = gy[np.isfinite(gy)]
    if gx.size == 0 or gy.size == 0:
        return -math.inf
    ts = np.unique(np.quantile(np.concatenate([gx, gy]), np.linspace(0, 1, thresholds)))
    above = gx[None, :] > ts[:, None]
    px = above.mean(axis=1)
    py = np.mean(np.where(above, np.exp(-gx)[None, :], 0.0), axis=1)
    below = gy[None, :] <= ts[:, None]
    qy = below.mean(axis=1)
    qx = np.mean(np.where(below, np.exp(gy)[None, :], 0.0), axis=1)
    best = -math.inf
    for num, den in ((px, py), (qy, qx)):
        k1 = np.round(num * n_test)
        k2 = np.round(np.minimum(den, 1.0) * n_test)
        best = max(best, float(np.max(_log_cp_ratio(k1, n_test, k2, n_test, alpha))))
    return best


def choose_pair(pmod, candidates, *, sampler, gm, runs, alpha, rng, pilot=2000, limit=256):
    """Among the search's candidate pairs, the one whose predicted lower bound is largest.

    The supremum of the log-ratio is often reached where neither posterior has mass (it is then
    undetectable by sampling); a pilot of ``pilot`` draws per dataset predicts, for each pair, the
    bound a test with ``runs / 2`` runs would give with the log-ratio statistic.
    """
    pilot_kind = "exact" if pmod.conjugate_plan is not None else "grid"
    if pilot_kind == "grid":
        limit = min(limit, 32)  # a grid per candidate
    best = None
    for cand in candidates[:limit]:
        label, x, change, y = cand
        mech = _Mechanism(pmod, x, y, pilot_kind, gm)
        gx = mech.log_ratio(mech.draw_x(pilot, rng))
        gy = mech.log_ratio(mech.draw_y(pilot, rng))
        value = _predicted_bound(gx, gy, max(runs // 2, 1), alpha)
        if best is None or value > best[0]:
            best = (value, cand)
    return best


def audit_statistical(pmod, pair, *, runs, confidence, rng, sampler, release, gm, mcmc_kwargs):
    """The statistical audit of one pair: run the mechanism ``runs`` times on each dataset and test.

    Parameters
    ----------
    pmod : PrivateModel or TemperedView
    pair : tuple
        ``(label, x, change, y)``.
    runs : int
        Releases per dataset (half choose the event, half bound epsilon).
    confidence : float
        Of the Clopper-Pearson lower bound.
    rng : numpy.random.Generator
    sampler : str
        ``"exact"``, ``"grid"`` or ``"chain"``: how one release is drawn.
    release : str
        ``"draw"`` (one posterior draw) or ``"release"`` (the mean of a whole release).
    gm : GridModel or None
        For the grid sampler.
    mcmc_kwargs : dict or None
        For the chain sampler.

    Returns
    -------
    dict
        :func:`statistical_test`'s result; for the chain sampler also the visited range of the
        log-ratio and the chains' mixing.
    """
    label, x, change, y = pair
    mech = _Mechanism(pmod, x, y, sampler, gm, mcmc_kwargs)
    per = 1 if release == "draw" else pmod.draws
    # one draw is pure eps0-DP; a whole release is (eps, delta)-DP: P_x(E) <= e^eps P_y(E) + delta
    delta = 0.0 if release == "draw" else float(pmod.certificate.delta)

    def collect(draw):
        st = mech.statistics(draw(runs * per, rng))
        if per > 1:
            st = {k: v.reshape(runs, per).mean(axis=1) for k, v in st.items()}
        return st

    st_x, st_y = collect(mech.draw_x), collect(mech.draw_y)
    res = statistical_test(st_x, st_y, pair, runs=runs, confidence=confidence, delta=delta)
    if sampler == "chain" and per == 1:
        res.update(_visited_range(st_x["log-ratio"], st_y["log-ratio"]))
        res["mixing"] = dict(mech.chains.mixing)
    return res


def _visited_range(gx: np.ndarray, gy: np.ndarray) -> dict:
    """The range of ``g = log p(x|theta) - log p(y|theta)`` over the parameter points both
    datasets' chains visited.

    Every visited point lies in the truncation region, and the certificate bounds the
    oscillation ``sup g - inf g`` over that region by the per-draw epsilon (``docs/theory/
    oscillation.md``), so a range above the claim refutes the certificate with parameter points
    as the witness, however well or badly the chains mixed."""
    g = np.concatenate([np.asarray(gx, float), np.asarray(gy, float)])
    g = g[np.isfinite(g)]
    if g.size == 0:
        return {}
    return {"oscillation": float(g.max() - g.min()), "g_max": float(g.max()), "g_min": float(g.min()), "visited": int(g.size)}


def statistical_test(st_x: dict, st_y: dict, pair, *, runs: int, confidence: float, delta: float) -> dict:
    """Choose a statistic and event on the first half of the runs, bound epsilon from below on
    the second half (Clopper-Pearson); ``st_x``, ``st_y``: statistic name -> values per run."""
    label, x, change, y = pair
    alpha = (1.0 - confidence) / 2.0  # one for each of the two Clopper-Pearson bounds
    half = runs // 2
    choice = None
    for name in st_x:  # choose the statistic, threshold, side and direction on the first half
        found, _ = _best_event(st_x[name][:half], st_y[name][:half], alpha, delta)
        if found is not None and (choice is None or found[0] > choice[0]):
            choice = (found[0], name, *found[2:])
    if choice is None:
        raise AuditError("no usable statistic: every released value is non-finite")
    _, name, t, side, num = choice
    tx, ty = st_x[name][half:], st_y[name][half:]
    with np.errstate(invalid="ignore"):
        kx = int(np.sum(tx <= t if side == "<=" else tx > t))
        ky = int(np.sum(ty <= t if side == "<=" else ty > t))
    n2 = len(tx)
    k1, k2 = (kx, ky) if num == "x" else (ky, kx)
    lower = _log_cp_ratio(k1, n2, k2, n2, alpha, delta)
    est = math.log(k1 / n2) - math.log(k2 / n2) if k1 > 0 and k2 > 0 else (math.inf if k1 > 0 else -math.inf)
    power = _log_cp_ratio(n2, n2, 0, n2, alpha, delta)
    _, pts = _best_event(tx, ty, alpha, delta)
    ts = np.array(sorted(pts))
    curve = {
        "statistic": name,
        "threshold": ts,
        "lower": np.array([pts[t][0] for t in ts]),
        "estimate": np.clip(np.array([pts[t][1] for t in ts]), -50, 50),
    }
    event = {
        "statistic": name, "threshold": t, "side": side, "numerator": num,
        "count_numerator": k1, "count_denominator": k2, "test_runs": n2,
    }
    witness = Witness(frozen_copy(x), frozen_copy(y), change, float(est), None, event, label)
    return {"measured": float(lower), "estimate": float(est), "power": float(power), "witness": witness,
            "curve": curve, "pairs": 1}


def chain_verdict(verdict, measured, res, claimed, slack, notes):
    """The chain sampler's verdict: the event test where the chains mixed, and always the range of
    the log-likelihood ratio over the visited points (:func:`_visited_range`).

    Where the chains did not mix (R-hat or divergences above :data:`RHAT_MAX`,
    :data:`DIVERGENT_MAX`), their event frequencies are not draws of the truncated posterior: a
    difference between the two datasets' frequencies may be the sampler's, not the mechanism's
    (a centred hierarchical funnel traps chains for hundreds of steps). The event test is then
    set aside and the verdict rests on the range, which needs no mixing: every visited point is
    in the truncation region. ``measured`` is then that range, a lower bound on the oscillation
    the certificate bounds. Returns ``(verdict, measured, measured_by)``."""
    osc = res["oscillation"]
    span = f"{osc:.4g} over {res['visited']} visited parameter points"
    if osc > claimed + slack:
        notes.append(
            f"the log-likelihood ratio ranges over {span} (from {res['g_min']:.4g} to {res['g_max']:.4g}): "
            "above the claimed bound on its oscillation, whatever the chains' mixing"
        )
        res["witness"] = dataclasses.replace(
            res["witness"], log_ratio=float(osc),
            event={"statistic": "range of log p(x|theta) - log p(y|theta) over visited points",
                   "max": res["g_max"], "min": res["g_min"], "visited": res["visited"]},
        )
        return "fail", osc, "range"
    bad = {k: m for k, m in res.get("mixing", {}).items() if not m["mixed"]}
    if not bad:
        notes.append(f"the log-likelihood ratio ranges over {span}, within the claim")
        return verdict, measured, "event"
    why = "; ".join(
        f"dataset {k}: worst R-hat {m['rhat']:.3g} ({m['worst']}), {100 * m['divergent']:.2g}% divergent transitions"
        for k, m in bad.items()
    )
    notes.append(
        f"the chains did not mix ({why}): the event test (lower bound {measured:.4g}) is set aside, since "
        f"a difference between non-mixing chains is not evidence of a privacy loss; the verdict rests on "
        f"the range of the log-likelihood ratio, {span}, within the claim"
    )
    return "pass", osc, "range"


# =========================================================================== mechanisms
def statistical_verdict(measured: float, power: float, claimed: float, runs: int, notes: list) -> str:
    """"fail" when the lower bound exceeds the claim; "inconclusive" when no outcome of these runs
    could have exceeded it (a pass would say nothing); else "pass"."""
    if measured > claimed:
        return "fail"
    if power <= claimed:
        notes.append(f"{runs} runs can certify at most epsilon {power:.3g} <= the claim: more runs are needed")
        return "inconclusive"
    return "pass"
