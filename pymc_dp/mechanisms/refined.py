"""A regression's noisy statistics released in two stages: the second on residuals about the first.

The one-stage release (:class:`~pymc_dp.mechanisms.regression.NoisyRegression`) pays for the
*declared* range of the outcome. Where the covariates explain much of the outcome, that range
is mostly signal: in the gallery's ``y = 1 + 2 x + N(0, 0.5²)`` on ``[-2, 6]`` the outcome's square
has span 16 while the residuals' spread is 0.5, and the noise on ``yᵀy`` and ``Zᵀy`` is what
``sigma`` is read from (``RSS = yᵀy - (Zᵀy)ᵀ(ZᵀZ)⁻¹Zᵀy``).

The refined release spends ``epsilon₁ = (1 - refine) epsilon`` on the one-stage statistics, and
``epsilon₂ = refine epsilon`` on the statistics of the **clipped residual** about the first
stage's fit,

    r_i = clip(y_i - z_iᵀ b, -B, B),        released: Zᵀr, rᵀr,

where ``b`` and ``B`` are public functions of the first stage's *noisy* statistics
(:func:`first_stage_fit`): ``b`` the least-squares fit, and ``B = k sigma_up`` with ``sigma_up``
an upper estimate of the residual scale (the fit's ``RSS`` plus ``c`` standard deviations of
its noise, by the delta method on the public noise scales). ``rᵀr`` has span ``B²`` instead
of the outcome's, and ``Zᵀr`` barely moves ``RSS`` (its coefficient is ``w - b``, near 0).

Privacy proof
-------------
1. Stage one is the one-stage release at ``epsilon₁`` (its own proof).
2. Given stage one's output, ``b`` and ``B`` are fixed (post-processing) and ``(z, r)`` ranges
   over the covariates' box times ``[-B, B]`` whatever the record (the clip). The statistic
   ``sum z_j r`` has span ``span(z_j) x B`` (corner products), ``sum r`` span ``2B`` and
   ``sum r²`` span ``B²`` (:func:`stage_two_spans`); a certified ``K₂`` bounds
   ``sum_j |change_j| / span_j`` over one record's change
   (:func:`~pymc_dp.mechanisms.sensitivity.joint_bound`). ``K₂`` does not depend on ``B``: every
   term and every span scales with ``B`` (or ``B²``), so it is computed once at ``B = 1``.
   Laplace scales ``span_j K₂ m / epsilon₂`` (``m`` rows per unit) make stage two
   ``epsilon₂``-DP for every value of stage one's output.
3. Adaptive sequential composition: the pair is ``epsilon₁ + epsilon₂ = epsilon``-DP. The
   noise-aware posterior is post-processing.

Model. The noise-aware posterior observes stage two around the *same* latent statistics as stage
one: ``Zᵀr = Zᵀy - ZᵀZ b`` and ``rᵀr = yᵀy - 2 bᵀZᵀy + bᵀZᵀZ b``, which hold when no residual
is clipped. With ``k = 3`` and the upper estimate of the scale, a Normal residual is clipped with
probability below ``3e-3`` (``6e-5`` at the estimate's typical 4 sigma); the release states
``b``, ``B`` and the rule, and the model ignores the clip (a slight misspecification).
"""

from __future__ import annotations

import itertools
from typing import Any, Mapping

import numpy as np
import pymc as pm
import pytensor.tensor as pt

from pymc_dp.exceptions import PrivacyError
from pymc_dp.mechanisms.noise import continuous_laplace
from pymc_dp.mechanisms.regression import NoisyRegression, regression_design
from pymc_dp.mechanisms.statistics import observe_noisy
from pymc_dp.units import describe_unit

__all__ = ["RefinedRegression", "first_stage_fit", "stage_two_spans", "stage_two_values", "BAND_SDS", "UPPER_SDS"]

#: the band's half-width in residual sds: B = BAND_SDS x sigma_up
BAND_SDS = 3.0
#: sigma_up: the fit's RSS plus UPPER_SDS standard deviations of its noise (delta method)
UPPER_SDS = 2.0


def _design_moments(reg, stage_one: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, list]:
    """``(ZᵀZ, Zᵀy, yᵀy)`` read from rows of released stage-one vectors ``(R, d1)`` (release
    order of :func:`~pymc_dp.mechanisms.regression.read_regression`), the intercept's column
    first, and for every released statistic the ``(kind, index)`` it fills (for the gradient)."""
    F = len(reg.features)
    off = int(reg.intercept)
    D = F + off
    R = stage_one.shape[0]
    S = np.zeros((R, D, D))
    Zy = np.zeros((R, D))
    yy = np.zeros(R)
    where = []
    at = 0
    if reg.intercept:
        S[:, 0, 0] = n
        for j in range(F):
            S[:, 0, 1 + j] = S[:, 1 + j, 0] = stage_one[:, at]
            where.append(("S", (0, 1 + j)))
            at += 1
    for j, k in itertools.combinations_with_replacement(range(F), 2):
        S[:, off + j, off + k] = S[:, off + k, off + j] = stage_one[:, at]
        where.append(("S", (off + j, off + k)))
        at += 1
    for j in range(F):
        Zy[:, off + j] = stage_one[:, at]
        where.append(("Zy", off + j))
        at += 1
    if reg.intercept:
        Zy[:, 0] = stage_one[:, at]
        where.append(("Zy", 0))
        at += 1
    yy[:] = stage_one[:, at]
    where.append(("yy", None))
    return S, Zy, yy, where


def first_stage_fit(reg, stage_one: np.ndarray, scales: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    """The public fit ``b`` (``(R, D)``, centred coordinates, intercept first) and band half-width
    ``B`` (``(R,)``) from rows of stage-one *noisy* statistics. Deterministic: the audit
    recomputes it from the output.

    ``ZᵀZ`` is made positive definite (eigenvalues floored at ``1e-8 n`` times the largest
    coordinate range squared); ``b = (ZᵀZ)⁻¹Zᵀy``; ``RSS = yᵀy - bᵀZᵀy``; its noise's standard
    deviation by the delta method, ``sqrt(2 sum_j (dRSS/dT_j b_j)²)`` with ``dRSS/dyᵀy = 1``,
    ``dRSS/dZᵀy = -2 b``, ``dRSS/d(ZᵀZ)_jk = b_j b_k`` (twice off the diagonal). The band is

        B = BAND_SDS sqrt((max(RSS, 0) + UPPER_SDS sd) / (n - D)) + UPPER_SDS sum_j reach_j sd(b_j),

    at least ``1e-3 x`` the outcome's span: the residual scale's upper estimate (never
    below what the noise alone allows: a noisy ``RSS`` below 0 says nothing about ``sigma``),
    plus how far the fit's own error ``zᵀ(w - b)`` can move a residual (``reach_j`` the largest
    ``|z_j|``, 1 for the intercept; ``sd(b)`` by the delta method, ``db = (ZᵀZ)⁻¹(dZᵀy - d(ZᵀZ) b)``).
    Without the second term a first stage that misses the slope clips the residuals that the
    slope's error moves (1% of releases clipped three records or more on the gallery's data).

    Where that band reaches the outcome's own reach about its centre (``max |y|``), the first
    stage has not located the fit and residuals about ``b`` are no narrower than the outcome:
    then ``b = 0`` and ``B = max |y|``, so ``r = y`` is never clipped and stage two is a second
    release of ``Zᵀy`` and ``yᵀy`` (the noise-aware model stays exact). On the diabetes
    comparison (3 covariates, 309 records, epsilon 10) every first stage fell back: the band was
    the outcome's whole span, and one noisy ``ZᵀZ`` in three, nearly singular, had put ``b`` at
    10⁵, which the model then observed residuals about. Only utility depends on these choices,
    never privacy.
    """
    stage_one = np.atleast_2d(np.asarray(stage_one, float))
    S, Zy, yy, where = _design_moments(reg, stage_one, n)
    D = S.shape[1]
    widths = [f.hi - f.lo for f in reg.features] + [1.0]
    scales = np.asarray(scales, float)
    vals, vecs = np.linalg.eigh(S)
    vals = np.maximum(vals, 1e-8 * n * max(widths) ** 2)
    S_pd = np.einsum("rij,rj,rkj->rik", vecs, vals, vecs)
    b = np.linalg.solve(S_pd, Zy[..., None])[..., 0]
    rss = yy - np.einsum("ri,ri->r", b, Zy)
    grad = []
    for kind, idx in where:
        if kind == "S":
            j, k = idx
            grad.append(b[:, j] * b[:, k] * (1.0 if j == k else 2.0))
        elif kind == "Zy":
            grad.append(-2.0 * b[:, idx])
        else:
            grad.append(np.ones(len(rss)))
    grad = np.stack(grad, axis=1)
    sd = np.sqrt(2.0 * np.sum((grad * scales) ** 2, axis=1))
    # the fit's error: db = S^-1 (dZy - dS b), one column per released statistic
    inv = np.linalg.inv(S_pd)
    cols = []
    for kind, idx in where:
        if kind == "S":
            j, k = idx
            e = np.zeros((len(b), D))
            e[:, j] += b[:, k]
            if j != k:
                e[:, k] += b[:, j]
            cols.append(-np.einsum("rij,rj->ri", inv, e))
        elif kind == "Zy":
            cols.append(inv[:, :, idx])
        else:
            cols.append(np.zeros((len(b), D)))
    db = np.stack(cols, axis=2) * scales[None, None, :]  # (R, D, statistics)
    sd_b = np.sqrt(2.0 * np.sum(db**2, axis=2))
    reach = np.array(([1.0] if reg.intercept else [])
                     + [f.ball if f.ball is not None else max(abs(f.lo), abs(f.hi)) for f in reg.features])
    span = reg.y_range[1] - reg.y_range[0]
    band = (BAND_SDS * np.sqrt((np.maximum(rss, 0.0) + UPPER_SDS * sd) / max(n - D, 1))
            + UPPER_SDS * sd_b @ reach)
    band = np.maximum(band, 1e-3 * span)
    y_reach = max(abs(reg.y_range[0]), abs(reg.y_range[1]))
    lost = band >= y_reach  # the first stage did not locate the fit: r = y, unclipped
    return np.where(lost[:, None], 0.0, b), np.where(lost, y_reach, band)


def stage_two_spans(reg, band: float) -> list[tuple[str, float, tuple]]:
    """``(name, span, term)`` of the stage-two statistics for a band ``[-B, B]``: ``sum z_j r``
    (the range of the corner products of ``[lo_j, hi_j] x [-B, B]``, ``2 B max(|lo_j|, |hi_j|)``;
    ``2 B R`` for a coordinate of a Ball of radius ``R``), ``sum r`` (``2 B``, with an intercept)
    and ``sum r²`` (``B²``). Every span is attained.
    Coordinates of the record: the features, then ``r`` at index ``F``."""
    F = len(reg.features)
    out = []
    for j, f in enumerate(reg.features):
        reach = f.ball if f.ball is not None else max(abs(f.lo), abs(f.hi))
        out.append((f"sum({f.label}*r)", 2.0 * band * reach, (j, F)))
    if reg.intercept:
        out.append(("sum(r)", 2.0 * band, (F,)))
    out.append(("sum(r^2)", band * band, (F, F)))
    return out


def stage_two_values(reg, arrays: Mapping[str, np.ndarray], b: np.ndarray, band: np.ndarray) -> np.ndarray:
    """The stage-two statistics' true values on ``arrays``, one row per fit: ``b`` is ``(R, D)``
    (centred coordinates, intercept first) and ``band`` ``(R,)``; returns ``(R, d2)`` in the
    order of :func:`stage_two_spans`."""
    x = regression_design(reg.features, arrays)
    y = np.asarray(arrays[reg.y], float) - reg.y_center
    Z = np.concatenate([np.ones((len(y), 1)), x], axis=1) if reg.intercept else x
    b, band = np.atleast_2d(np.asarray(b, float)), np.atleast_1d(np.asarray(band, float))
    r = np.clip(y[None, :] - b @ Z.T, -band[:, None], band[:, None])
    cols = [r @ x]
    if reg.intercept:
        cols.append(r.sum(axis=1)[:, None])
    cols.append(np.sum(r * r, axis=1)[:, None])
    return np.concatenate(cols, axis=1)


class RefinedRegression(NoisyRegression):
    """A regression's noisy statistics in two stages (:mod:`pymc_dp.mechanisms.refined`):
    ``(1 - refine) epsilon`` on ``ZᵀZ, Zᵀy, yᵀy``, then ``refine epsilon`` on ``Zᵀr, rᵀr`` for
    the residual ``r`` about the first stage's fit, clipped to a band the first stage sets.
    Built by :func:`pymc_dp.noisy_statistics` with ``refine=``; the same ``sample``, ledger,
    report and ``pymc_dp.audit`` as the one-stage release."""

    algorithm = ("noise-aware inference on Laplace-noised sufficient statistics of a linear regression "
                 "(Bernstein & Sheldon 2019), released in two stages: the second on clipped residuals "
                 "about the first stage's fit")
    #: a dense mass matrix: the second stage pins ``w + sigma L⁻ᵀu`` and leaves ``w`` and ``u``
    #: strongly correlated, which a diagonal adaptation under-explores (calibration 0.84 over 65
    #: datasets with it, 0.895 over 200 with the dense one; docs/mechanisms.md). ``init=`` overrides it.
    default_init = "jitter+adapt_full"

    def __init__(self, model, *, refine: float, **kwargs):
        if isinstance(refine, bool) or not isinstance(refine, (int, float)) or not (0.0 < refine < 1.0):
            raise PrivacyError(f"refine={refine!r} must be a number in (0, 1): the share of epsilon for the second stage.")
        if kwargs.get("delta", 0.0):
            raise NotImplementedError(
                "refine= with delta > 0 is not implemented: the second stage's Gaussian calibration needs its own L2 "
                "bound over the band; use delta=0 (Laplace) or the one-stage release."
            )
        unit = kwargs.get("unit", "record")
        if describe_unit(unit)["kind"] == "attribute":
            raise NotImplementedError(
                "refine= with unit='attribute' is not implemented: the residual reads the outcome and every covariate, "
                "so one container's change moves every second-stage statistic; use unit='record' or a Users unit."
            )
        self.refine = float(refine)
        super().__init__(model, **kwargs)
        self.stage_two = None  # after the release: the public fit, band and noise scales

    # ------------------------------------------------------------------ calibration
    def _calibrate(self):
        from pymc_dp.mechanisms.sensitivity import joint_bound

        stats, sens, scales, derivation = super()._calibrate()  # at the whole epsilon
        eps1, eps2 = (1.0 - self.refine) * self.epsilon, self.refine * self.epsilon
        scales = {k: v * self.epsilon / eps1 for k, v in scales.items()}  # Laplace: scale ~ 1 / epsilon
        K = self.joint["K"]
        continuous_laplace(np.zeros(0), K / eps1, sensitivity=K, epsilon=eps1)  # OpenDP's map at epsilon_1
        reg = self.regression
        unit_spans = stage_two_spans(reg, 1.0)
        lo = [f.lo for f in reg.features] + [-1.0]
        hi = [f.hi for f in reg.features] + [1.0]
        balls: dict = {}
        for j, f in enumerate(reg.features):
            if f.ball is not None:
                balls.setdefault(f.ball, []).append(j)
        K2, attained2 = joint_bound([t for *_, t in unit_spans], [s for _, s, _ in unit_spans], lo, hi, radius=balls)
        continuous_laplace(np.zeros(0), K2 / eps2, sensitivity=K2, epsilon=eps2)  # OpenDP's map at epsilon_2
        self.joint_two = {"K": K2, "attained": attained2, "d": len(unit_spans)}
        derivation = derivation.replace("give epsilon", f"give epsilon_1 = {eps1:.6g} (stage one)") + (
            f". Stage two, given stage one's output: r = clip(y - z'b, -B, B) with the public fit b and band B of stage "
            f"one, statistics {', '.join(n for n, *_ in unit_spans)} with spans (at B = 1) "
            f"{', '.join(f'{s:g}' for _, s, _ in unit_spans)} (x B, x B^2 for sum(r^2); x {self.rows_per_unit} rows per unit); jointly sum_j |change_j| / span_j <= K_2 = {K2:.6g} "
            f"(certified, the same for every B: terms and spans scale alike; a change attains {attained2:.6g}), so "
            f"Laplace scales span_j K_2 / epsilon_2 give epsilon_2 = {eps2:.6g}; the pair composes to "
            f"epsilon = {self.epsilon:g}"
        )
        return stats, sens, scales, derivation

    def stage_two_scales(self, band: float) -> dict[str, float]:
        """The second stage's Laplace scales for a band half-width ``B`` (public)."""
        eps2 = self.refine * self.epsilon
        return {name: span * self.rows_per_unit * self.joint_two["K"] / eps2
                for name, span, _ in stage_two_spans(self.regression, band)}

    def _scales_of(self, band: np.ndarray) -> np.ndarray:
        """``(R, d2)``: the second stage's scales for each band (they scale as ``B`` and ``B²``)."""
        unit = np.array(list(self.stage_two_scales(1.0).values()))
        square = np.array([t == (len(self.regression.features),) * 2 for *_, t in stage_two_spans(self.regression, 1.0)])
        band = np.asarray(band, float)[:, None]
        return unit[None, :] * np.where(square[None, :], band**2, band)

    def _stage_one_scales(self) -> np.ndarray:
        return np.array([self.noise_scales[n] for n, *_ in self.regression.stats])

    # ------------------------------------------------------------------ the private step
    def _arrays(self, values: Mapping[str, Any]) -> dict[str, np.ndarray]:
        reg = self.regression
        return {c: np.asarray(values[c]) for c in [reg.y] + sorted({f.container for f in reg.features})}

    def release_statistics(self) -> dict[str, float]:
        """Charge ``epsilon`` and release both stages (once; later calls return them)."""
        if self.released is not None:
            return dict(self.released)
        from pymc_dp.mechanisms.base import charge

        reg = self.regression
        names = [n for n, *_ in reg.stats]
        with charge(self):
            noisy = self._noisy(self._true_statistics(self._values))
            one = {k: float(v[0]) for k, v in noisy.items()}
            b, band = self.fit(np.array([[one[k] for k in names]]))
            b, band = b[0], float(band[0])
            scales = self.stage_two_scales(band)
            true = stage_two_values(reg, self._arrays(self._values), b, band)[0]
            two = {k: float(continuous_laplace(np.array([v]), scales[k])[0]) for k, v in zip(scales, true)}
        self.stage_two = {"fit": b.tolist(), "band": band, "scales": scales}
        self.released = {**one, **two}
        return dict(self.released)

    # ------------------------------------------------------------------ noise-aware model
    def _observe_more(self, prefix: str, S, Szy, Syy) -> None:
        """Stage two observed around the same latent statistics: ``Zᵀr = Zᵀy - ZᵀZ b`` and
        ``rᵀr = yᵀy - 2 bᵀZᵀy + bᵀZᵀZ b`` (no residual clipped)."""
        reg = self.regression
        b = np.asarray(self.stage_two["fit"], float)
        Zr = Szy - pt.sum(S * b[None, :], axis=1)  # no BLAS ops: see regression._matvec
        rr = Syy - 2.0 * pt.sum(b * Szy) + pt.sum(S * np.outer(b, b))
        off = int(reg.intercept)
        latent = [Zr[off + j] for j in range(len(reg.features))] + ([Zr[0]] if reg.intercept else []) + [rr]
        scales = self.stage_two["scales"]
        released = pm.Data(f"{prefix}released_two", np.array([self.released[k] for k in scales]))
        observe_noisy(f"{prefix}noisy_two", pt.stack(latent), np.array(list(scales.values())), released, self.noise)

    def noise_aware_model(self) -> pm.Model:
        model = super().noise_aware_model()
        reg = self.regression
        self.laws[reg.factor] += (
            f"; stage two: Z'r = Z'y - Z'Z b and r'r = y'y - 2 b'Z'y + b'Z'Z b for the public fit b and band "
            f"B = {self.stage_two['band']:.6g} of stage one (the clip is ignored: a residual beyond B is rare)"
        )
        return model

    def _public(self) -> dict:
        out = super()._public()
        eps1, eps2 = (1.0 - self.refine) * self.epsilon, self.refine * self.epsilon
        out["refine"] = {
            "share": self.refine, "epsilon_stage_one": eps1, "epsilon_stage_two": eps2,
            "band_rule": f"B = {BAND_SDS:g} sqrt(max(RSS + {UPPER_SDS:g} sd(RSS noise), 0) / (n - D)) from stage one's "
                         "noisy statistics (delta method on the public scales), plus the fit's error; where it reaches max |y|, b = 0 and B = max |y| (r = y)",
            "K_stage_two": self.joint_two["K"],
            **({} if self.stage_two is None else {"fit (centred coordinates, intercept first)": self.stage_two["fit"],
                                                   "band": self.stage_two["band"]}),
        }
        if self.stage_two is not None:
            out["noise"]["scale"] = {**out["noise"]["scale"], **self.stage_two["scales"]}
        return out

    # ------------------------------------------------------------------ audit protocol
    def fit(self, outputs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The public fit and band (:func:`first_stage_fit`) of rows of outputs (stage one's
        statistics first): post-processing of stage one, recomputed by the audit."""
        d1 = len(self.regression.stats)
        return first_stage_fit(self.regression, np.atleast_2d(outputs)[:, :d1], self._stage_one_scales(), self.rows[self.regression.y])

    def audit_runs(self, data, runs, rng):
        """``runs`` outputs of both stages on ``data``: stage one's vector, then stage two's
        (OpenDP's unit Laplace noise times each run's scales: the release's law)."""
        one = super().audit_runs(data, runs, rng)
        b, band = self.fit(one)
        true = stage_two_values(self.regression, self._arrays(data), b, band)
        noise = continuous_laplace(np.zeros(true.shape), 1.0)
        return np.concatenate([one, true + noise * self._scales_of(band)], axis=1)

    def audit_log_ratio(self, x, y):
        """The exact log-density ratio of both stages' output: stage one's Laplace ratio plus,
        given the fit and band stage one's output sets, stage two's."""
        first = super().audit_log_ratio(x, y)
        d1 = len(self.regression.stats)
        ax, ay = self._arrays(x), self._arrays(y)

        def log_ratio(z):
            z = np.atleast_2d(np.asarray(z, float))
            b, band = self.fit(z)
            tx = stage_two_values(self.regression, ax, b, band)
            ty = stage_two_values(self.regression, ay, b, band)
            two = z[:, d1:]
            second = np.sum((np.abs(two - ty) - np.abs(two - tx)) / self._scales_of(band), axis=1)
            return np.asarray(first(z[:, :d1]), float) + second

        return log_ratio

    def audit_score(self, x, y):
        """Stage one's score plus stage two's at the fit of ``x``'s noise-free statistics."""
        reg = self.regression
        b, band = self.fit(self._stat_vector(x)[None, :])
        tx = stage_two_values(reg, self._arrays(x), b, band)
        ty = stage_two_values(reg, self._arrays(y), b, band)
        return float(super().audit_score(x, y) + np.sum(np.abs(tx - ty) / self._scales_of(band)))

    def __repr__(self):
        return (f"<RefinedRegression {self.epsilon:g}-DP in two stages ({1 - self.refine:g} / {self.refine:g}), "
                f"unit={describe_unit(self.unit)['kind']}>")
