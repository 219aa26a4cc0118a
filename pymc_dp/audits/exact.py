"""The exact audit: closed-form log-ratio of two conjugate truncated posteriors, its extremes found in closed form per block."""

from __future__ import annotations

import hashlib
import math

import numpy as np
from scipy import special as sc

from pymc_dp.audits.neighbours import DataSpace, array_key
from pymc_dp.audits.result import AuditError, Witness, frozen_copy


# =========================================================================== exact audit
def _block_extremes(fam: str, px: dict, py: dict, nx, ny, idx):
    """Max and min over the truncation of ``g = ln xi_x - ln xi_y`` for changed elements ``idx``
    of one variable; returns (max values, argmax, min values, argmin) per element."""
    lo, hi = px["lower"], px["upper"]
    C = nx[idx] - ny[idx]
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        if fam == "Beta":
            dA = px["alpha"][idx] - py["alpha"][idx]
            dB = px["beta"][idx] - py["beta"][idx]

            def g(t):
                return sc.xlogy(dA, t) + sc.xlog1py(dB, -t) - C

            def at(t):  # limits at the support ends 0 and 1
                v = g(t)
                if t == 0.0:
                    v = np.where(dA > 0, -np.inf, np.where(dA < 0, np.inf, -C))
                elif t == 1.0:
                    v = np.where(dB > 0, -np.inf, np.where(dB < 0, np.inf, -C))
                return v

            denom = dA + dB
            tstar = np.where(denom != 0, dA / np.where(denom != 0, denom, 1.0), np.nan)
        elif fam == "Gamma":
            dA = px["alpha"][idx] - py["alpha"][idx]
            dR = px["rate"][idx] - py["rate"][idx]

            def g(t):
                return sc.xlogy(dA, t) - dR * t - C

            def at(t):
                if t == 0.0:
                    return np.where(dA > 0, -np.inf, np.where(dA < 0, np.inf, -C))
                if t == math.inf:
                    return np.where(dR > 0, -np.inf, np.where(dR < 0, np.inf, np.where(dA > 0, np.inf, np.where(dA < 0, -np.inf, -C))))
                return g(t)

            tstar = np.where(dR != 0, dA / np.where(dR != 0, dR, 1.0), np.nan)
        else:  # Normal: g = q t^2 + b t + c
            mx, sx = px["mu"][idx], px["sigma"][idx]
            my, sy = py["mu"][idx], py["sigma"][idx]
            q = 0.5 / sy**2 - 0.5 / sx**2
            b = mx / sx**2 - my / sy**2
            c0 = 0.5 * my**2 / sy**2 - 0.5 * mx**2 / sx**2

            def g(t):
                return q * t * t + b * t + c0 - C

            def at(t):
                if math.isinf(t):
                    s = 1.0 if t > 0 else -1.0
                    lead = np.where(q != 0, np.sign(q) * np.inf, s * np.sign(b) * np.inf)
                    return np.where((q == 0) & (b == 0), c0 - C, lead)
                return g(t)

            tstar = np.where(q != 0, -b / (2 * np.where(q != 0, q, 1.0)), np.nan)
        inside = np.isfinite(tstar) & (tstar > lo) & (tstar < hi)
        if math.isfinite(lo) and math.isfinite(hi):
            mid = 0.5 * (lo + hi)
        elif math.isfinite(lo):
            mid = lo + 1.0
        elif math.isfinite(hi):
            mid = hi - 1.0
        else:
            mid = 0.0
        at_lo, at_hi = np.broadcast_to(at(lo), C.shape), np.broadcast_to(at(hi), C.shape)
        at_star = np.where(inside, g(np.where(inside, tstar, mid)), at_lo)
        cand_t = [np.full(C.shape, lo), np.full(C.shape, hi), np.where(inside, tstar, lo)]
    vals = np.stack([at_lo, at_hi, at_star])
    ts = np.stack(cand_t)
    imax = np.argmax(np.where(np.isnan(vals), -np.inf, vals), axis=0)
    imin = np.argmin(np.where(np.isnan(vals), np.inf, vals), axis=0)
    cols = np.arange(C.size)
    return vals[imax, cols], ts[imax, cols], vals[imin, cols], ts[imin, cols]


def _dirichlet_extremes(px, py, nx, ny, rows):
    """Dirichlet rows: ``g = sum_k d_k ln p_k - C`` over ``{max_S p / min_S p <= c}``."""
    mx, mn, amax, amin = [], [], [], []
    for r in rows:
        d = px["alpha"][r] - py["alpha"][r]
        C = nx[r] - ny[r]
        log_c = px["log_c"][r]
        if not np.any(d):
            top = low = -C
        elif not math.isfinite(log_c):
            top, low = math.inf, -math.inf
        else:
            cl = list(px["classes"][r])
            outside = np.delete(d, cl)
            if np.any(outside != 0) or abs(float(np.sum(d))) > 1e-9:
                # the counts of the row change in total: not produced by the exact plan's regions
                raise AuditError("a Dirichlet row whose total count changes between neighbours is not supported")
            D = float(np.sum(d[d > 0]))
            top, low = D * log_c - C, -D * log_c - C
        mx.append(top)
        mn.append(low)
        amax.append(_dirichlet_point(d, px, r, +1))
        amin.append(_dirichlet_point(d, px, r, -1))
    return np.array(mx), amax, np.array(mn), amin


def _dirichlet_point(d, px, r, sign):
    """A point of the ratio region where ``sum d_k ln p_k`` is extreme (two levels)."""
    k = len(d)
    log_c = px["log_c"][r]
    if not math.isfinite(log_c):
        return None
    u = np.zeros(k)
    cl = list(px["classes"][r])
    u[cl] = np.where(sign * d[cl] > 0, log_c, 0.0)
    p = np.exp(u - np.max(u))
    return (p / p.sum()).round(6).tolist()


def _exact_pair(plan_x, plan_y, post_x, post_y, norm_x, norm_y):
    """The exact ``sup_theta |ln xi(theta|x) - ln xi(theta|y)|`` and where it is reached."""
    top, low = 0.0, 0.0
    at_top, at_low = {}, {}
    contrib = {}
    for name, px in post_x.items():
        py = post_y[name]
        nx, ny = norm_x[name], norm_y[name]
        fam = px["family"]
        if fam == "Dirichlet":
            rows = np.flatnonzero(np.any(px["alpha"] != py["alpha"], axis=1) | (nx != ny))
            if rows.size == 0:
                continue
            mx, amax, mn, amin = _dirichlet_extremes(px, py, nx, ny, rows)
            for j, r in enumerate(rows):
                at_top[f"{name}[{r}]"] = amax[j]
                at_low[f"{name}[{r}]"] = amin[j]
                contrib[(name, int(r))] = (mx[j], mn[j])
        else:
            keys = [k for k in px if k not in ("family", "shape", "lower", "upper")]
            changed = np.zeros(px[keys[0]].shape, bool)
            for k in keys:
                changed |= px[k] != py[k]
            changed |= nx != ny
            idx = np.flatnonzero(changed)
            if idx.size == 0:
                continue
            mx, tmax, mn, tmin = _block_extremes(fam, px, py, nx, ny, idx)
            shape = px["shape"]
            for j, e in enumerate(idx):
                label = name if shape == () else f"{name}{[int(i) for i in np.unravel_index(e, shape)]}"
                at_top[label] = float(tmax[j])
                at_low[label] = float(tmin[j])
                contrib[(name, int(e))] = (mx[j], mn[j])
        top += float(np.sum(mx))
        low += float(np.sum(mn))
    if top >= -low:
        return top, top, at_top, contrib, +1
    return -low, low, at_low, contrib, -1


def _exact_curve(post_x, post_y, norm_x, norm_y, contrib, sign, theta):
    """The log-ratio along the element that contributes most, the others at the worst point."""
    if not contrib:
        return {}
    key = max(contrib, key=lambda k: abs(contrib[k][0] - contrib[k][1]))
    name, e = key
    px, py = post_x[name], post_y[name]
    if px["family"] == "Dirichlet":
        return {}
    others = sum((v[0] if sign > 0 else v[1]) for k, v in contrib.items() if k != key)
    lo, hi = px["lower"], px["upper"]
    if not (math.isfinite(lo) and math.isfinite(hi)):
        span = abs(theta) + 1.0 if math.isfinite(theta) else 10.0
        lo = lo if math.isfinite(lo) else theta - 5 * span
        hi = hi if math.isfinite(hi) else theta + 5 * span
    t = np.linspace(lo, hi, 801)[1:-1] if px["family"] in ("Beta", "Gamma") and lo <= 0 else np.linspace(lo, hi, 801)
    nx, ny = norm_x[name][e], norm_y[name][e]
    with np.errstate(divide="ignore", invalid="ignore"):
        if px["family"] == "Beta":
            gx = sc.xlogy(px["alpha"][e] - 1, t) + sc.xlog1py(px["beta"][e] - 1, -t) - nx
            gy = sc.xlogy(py["alpha"][e] - 1, t) + sc.xlog1py(py["beta"][e] - 1, -t) - ny
        elif px["family"] == "Gamma":
            gx = sc.xlogy(px["alpha"][e] - 1, t) - px["rate"][e] * t - nx
            gy = sc.xlogy(py["alpha"][e] - 1, t) - py["rate"][e] * t - ny
        else:
            gx = -0.5 * ((t - px["mu"][e]) / px["sigma"][e]) ** 2 - nx
            gy = -0.5 * ((t - py["mu"][e]) / py["sigma"][e]) ** 2 - ny
    shape = px["shape"]
    label = name if shape == () else f"{name}{[int(i) for i in np.unravel_index(e, shape)]}"
    return {"x": t, "y": gx - gy + others, "label": label, "density_x": np.exp(gx), "density_y": np.exp(gy)}


def audit_exact(pmod, space: DataSpace, pairs) -> dict:
    """The exact audit: the supremum over theta of the log-ratio of truncated posteriors, per pair.

    Parameters
    ----------
    pmod : PrivateModel or TemperedView
        A model with a conjugate plan.
    space : DataSpace
        The neighbouring datasets.
    pairs : iterable of tuple
        ``(label, x, change, y)``, from :func:`~pymc_dp.audits.neighbours.pairs_from_search` or
        :func:`~pymc_dp.audits.neighbours.given_pairs`.

    Returns
    -------
    dict
        ``measured`` (the largest supremum found), ``pairs`` (how many were tried), ``witness``,
        ``curve``, ``error`` (0: exact to rounding) and ``candidates`` (the worst pair of every
        base, worst first: the pairs a statistical audit may try).

    Raises
    ------
    AuditError
        The model has no conjugate plan, or there is no pair.
    """
    plan = pmod.conjugate_plan
    if plan is None:
        raise AuditError(f"method='exact' needs a conjugate model: {pmod.exact_unavailable}")
    best = None
    count = 0
    cache = {}

    def posterior(data):
        key = hashlib.blake2b(b"".join(array_key(data[c]) for c in space.names), digest_size=16).digest()
        if key not in cache:
            if len(cache) > 4096:
                cache.clear()
            p = plan.with_data(data)
            cache[key] = (p, p.posteriors(), p.log_normalisers())
        return cache[key]

    per_base = {}  # the worst pair of every base dataset: candidates for a statistical audit
    for label, x, change, y in pairs:
        px = posterior(x)
        py = posterior(y)
        value, signed, theta, contrib, sign = _exact_pair(px[0], py[0], px[1], py[1], px[2], py[2])
        count += 1
        if best is None or value > best[0]:
            best = (value, signed, theta, contrib, sign, label, x, y, change, px, py)
        if id(x) not in per_base or value > per_base[id(x)][0]:
            per_base[id(x)] = (value, label, x, change, y)
    if best is None:
        raise AuditError("the search found no neighbouring pair (is every container's domain a single value?)")
    value, signed, theta, contrib, sign, label, x, y, change, px, py = best
    curve = _exact_curve(px[1], py[1], px[2], py[2], contrib, sign, next(iter(theta.values()), 0.0) if theta else 0.0)
    witness = Witness(frozen_copy(x), frozen_copy(y), change, float(signed), theta, None, label)
    top = sorted(per_base.values(), key=lambda t: -t[0])
    return {"measured": float(value), "pairs": count, "witness": witness, "curve": curve, "error": 0.0,
            "candidates": [(lab, xx, ch, yy) for _, lab, xx, ch, yy in top]}


# =========================================================================== numerical audit
class TemperedView:
    """A :class:`~pymc_dp.PrivateMAP` as the posterior-sampling audit sees it.

    The mechanism's output density is ``xi_L(theta) p_theta(x)^beta``: the core's truncated
    posterior with the private factors' log-likelihood scaled by ``beta``. The exact audit reads
    the tempered conjugate plan, the numerical audit scales the private rows by
    :attr:`likelihood_power`, the MCMC runs are the mechanism's own releases, and the claim is
    the mechanism's certificate (``epsilon_per_draw`` per output).
    """

    def __init__(self, mech):
        core = mech.private_model
        self.mechanism = mech
        self.certificate = mech.certificate
        self.conjugate_plan = mech.conjugate_plan
        self.exact_unavailable = core.exact_unavailable
        self.unit, self.domains, self.factors = core.unit, core.domains, core.factors
        self.model = core.model
        #: the core's certification: the user model and the truncation the certificate claims
        self.certification = core.certification
        #: the power of the private likelihood in the audited density
        self.likelihood_power = float(mech.beta)
        self.draws = mech.draws

    def with_data(self, data):
        return self.mechanism.with_data(data)  # records nothing in any ledger
