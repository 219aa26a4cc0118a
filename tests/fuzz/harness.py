"""Certify a generated model, check what came out, and classify it.

:func:`run_one` certifies ``generate(seed)`` in one of two modes (:data:`MODES`) and returns a
:class:`FuzzResult` whose ``status`` is one of the list below:

* ``mode="budget"`` (the default): at the epsilon and draws its seed drew
  (``certify(model, epsilon=..., draws=..., ...)``); the certificate must stay within that budget;
* ``mode="bounds"``: at its draws with ``epsilon=None`` and an explicit public truncation box,
  ``bounds=region_bounds(generated)`` (``tests/fuzz/grammar.py``: a box around one prior draw, in
  each RV's unconstrained space); the rules that only bounds mode reaches run there (the
  oscillation over a box for one-parameter families on public designs, the coupled oscillation
  for GLMs on private covariates, the box path of the localized mechanism). There is no budget to
  compare with: the certificate must state a finite epsilon >= 0 that is its draws' composition.
* ``mode="paths"`` (profile ``"paths"`` only, :func:`check_paths_model`): the model is built on the
  release path its seed drew (``make_private(..., path="localized" | "auto" | "noisy_statistics")``)
  and that path's proof obligations are checked, each an independent attempt to refute it: every
  stage certificate through :func:`pymc_dp.refutation.refute` (the localized second stage is the
  object the release sampled, captured), the declared sensitivity of a noise-based release by brute
  force over neighbouring datasets inside the declared domains (:func:`sensitivity_check`: the
  mechanism's own statistics function, domain corners included; ``worst_ratio`` = observed /
  claimed), and the stages' composition against the record and the budget. A shape the path must
  refuse (``generated.must_refuse``) that is accepted is a problem.

The statuses:

* ``"certified"`` -- a certificate was issued, and the refutation check at the larger budget
  (:func:`pymc_dp.refutation.refute` with ``effort="thorough"``) found no counterexample (the
  certificate's own fields are checked against the request too: :func:`certificate_problems`);
* ``"refused"`` -- :func:`pymc_dp.certify` raised a :class:`pymc_dp.PrivacyError` subclass;
* ``"refuted"`` -- a counterexample to a certificate's claimed bound was found, either by the
  check inside ``certify`` (the rule that produced the bound is wrong) or by the thorough check
  run here on an issued certificate (a false certificate);
* ``"crashed"`` -- anything else was raised: a raw ``TypeError`` from the certifier is a bug,
  since every refusal must be typed and name a variable; so is a crash of the refutation check;
* ``"timeout"`` -- certification (or the check) took longer than the harness allows.

``problems`` lists what breaks the contract: a crash, a refutation, a refusal whose message names
no variable of the model, a certificate that breaks its own promises, a timeout. The CI tier asserts it is empty for every seed; the campaign
counts it.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import math
import re
import signal
import threading
import time
import traceback
import warnings
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

import pymc_dp
import pymc_dp.refutation
from pymc_dp.exceptions import PrivacyError
from tests.fuzz.grammar import GeneratedModel, generate, region_bounds

#: statuses, in the order the reports list them
STATUSES = ("certified", "refused", "refuted", "crashed", "timeout")
#: how a model is certified: at its drawn budget, with ``epsilon=None`` and ``bounds=region_bounds(...)``,
#: or (profile "paths" only) built on its drawn release path with that path's proof obligations
#: checked (:func:`check_paths_model`)
MODES = ("budget", "bounds", "paths")
#: CPU seconds one model may take (certify and the thorough check together) before it is a timeout
DEFAULT_TIMEOUT_S = 120.0


class FuzzTimeout(BaseException):
    """Raised by the alarm inside a model's certification; a ``BaseException`` so that no
    ``except Exception`` inside pymc_dp swallows it."""


@dataclass
class FuzzResult:
    """What happened to one generated model.

    Attributes
    ----------
    seed, family, recipe
        Which model (``generate(seed)`` rebuilds it; ``recipe`` is its description).
    status : str
        One of :data:`STATUSES`.
    reason : str
        Exception type and its message normalised (variable names and numbers replaced), so that
        refusals group by cause; empty when certified.
    message : str
        The exception's message (or the traceback's tail for a crash), truncated.
    stage : str
        ``"generate"``, ``"certify"`` or ``"refute"``: where it was raised.
    refutation : str
        What the thorough check said about an issued certificate (``"none found"``, the factors it
        did not check and why, or why it did not run).
    worst_ratio : float or None
        The check's largest measured / claimed change over the factors it checked (a certificate
        is refuted above 1); ``None`` where it did not run.
    problems : list of str
        Breaches of the contract; empty for a healthy outcome.
    seconds : float
        Wall time of certify and the check.
    cpu_seconds : float
        This process's CPU time over the same span (the machine may be shared).
    mode : str
        One of :data:`MODES`: how the model was certified.
    """

    seed: int
    family: str = ""
    recipe: str = ""
    status: str = ""
    reason: str = ""
    message: str = ""
    stage: str = ""
    refutation: str = ""
    worst_ratio: float | None = None
    problems: list[str] = field(default_factory=list)
    seconds: float = 0.0
    cpu_seconds: float = 0.0
    mode: str = "budget"

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def refutation_module():
    """``pymc_dp.refutation`` once it has landed, else ``None``."""
    try:
        from pymc_dp import refutation
    except ImportError:
        return None
    return refutation


def refuted_error_type() -> type[BaseException] | None:
    """``pymc_dp.exceptions.CertificateRefutedError`` once it exists, else ``None``."""
    return getattr(pymc_dp.exceptions, "CertificateRefutedError", None)


def names_a_variable(message: str, names) -> bool:
    """Whether ``message`` cites one of ``names`` as a whole word (``y_data``, not ``y_database``)."""
    return any(re.search(rf"(?<![A-Za-z0-9_]){re.escape(name)}(?![A-Za-z0-9_])", message) for name in names)


def normalise_reason(exc: BaseException, names) -> str:
    """``Type: first sentence`` with the model's names as ``<var>`` and numbers as ``#``, so that
    the same refusal on different models reads the same."""
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    for name in sorted(names, key=len, reverse=True):
        text = re.sub(rf"(?<![A-Za-z0-9_]){re.escape(name)}(?![A-Za-z0-9_])", "<var>", text)
    text = re.sub(r"[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?", "#", text)
    text = re.sub(r"\[[^\]]*\]", "[…]", text)
    first = re.split(r"(?<=[.;:])\s", text, maxsplit=1)[0]
    return f"{type(exc).__name__}: {first[:110]}"


@contextlib.contextmanager
def _alarm(seconds: float):
    """Raise :class:`FuzzTimeout` after ``seconds`` of this process's CPU time (``ITIMER_PROF``:
    a limit that does not depend on how busy the machine is; main thread only, elsewhere none)."""
    if seconds is None or seconds <= 0 or threading.current_thread() is not threading.main_thread():
        yield
        return

    def _raise(signum, frame):
        raise FuzzTimeout(f"over {seconds:g} CPU seconds")

    previous = signal.signal(signal.SIGPROF, _raise)
    signal.setitimer(signal.ITIMER_PROF, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_PROF, 0)
        signal.signal(signal.SIGPROF, previous)


def _crash_text(exc: BaseException) -> str:
    tail = traceback.format_exception(type(exc), exc, exc.__traceback__)[-4:]
    return "".join(tail)[-1500:]


def _refused(result: FuzzResult, exc: BaseException, names, stage: str) -> None:
    result.stage = stage
    result.message = str(exc)[:1500]
    result.reason = normalise_reason(exc, names)
    refuted = refuted_error_type()
    if refuted is not None and isinstance(exc, refuted):
        result.status = "refuted"
        result.problems.append(f"refuted at {stage}: {str(exc)[:300]}")
    elif isinstance(exc, PrivacyError):
        result.status = "refused"
        if not names_a_variable(str(exc), names):
            result.problems.append(f"refusal names no variable of the model: {str(exc)[:300]}")
    else:
        result.status = "crashed"
        result.message = _crash_text(exc)
        result.problems.append(f"raw {type(exc).__name__} at {stage}: {str(exc)[:300]}")


def certificate_problems(certificate, generated: GeneratedModel, mode: str = "budget") -> list[str]:
    """What an issued certificate states that breaks the request or itself, read from its fields
    alone: in budget mode, epsilon above the budget asked for (or NaN) and an epsilon per draw
    whose composition over the draws exceeds it (pure DP: ``draws * epsilon_per_draw``); in bounds
    mode (no budget asked for), an epsilon that is not finite and >= 0 (NaN, infinite, negative),
    and for pure DP an epsilon other than ``draws * epsilon_per_draw`` (1e-9 relative); in both, a
    per-factor constant that is NaN, negative or infinite, a prior mass outside ``(0, 1]`` (0 only
    with its bound stated), a draw count other than the one asked for, and a certificate that does
    not say the refutation check ran.

    Returns
    -------
    list of str
        Empty for a certificate that keeps its own promises.
    """
    if mode not in MODES:
        raise ValueError(f"mode={mode!r}: one of {MODES}")
    out = []
    if mode == "budget":
        budget = generated.epsilon * (1 + 1e-9)
        if not certificate.epsilon <= budget:  # NaN fails too
            out.append(f"certified epsilon {certificate.epsilon} above the budget {generated.epsilon}")
        if certificate.delta == 0 and not certificate.epsilon_per_draw * certificate.draws <= budget:
            out.append(f"{certificate.draws} draws x epsilon per draw {certificate.epsilon_per_draw} exceed the budget {generated.epsilon}")
    else:
        if not 0 <= certificate.epsilon < float("inf"):  # NaN fails too
            out.append(f"certified epsilon {certificate.epsilon} is not a finite number >= 0 (bounds mode)")
        elif certificate.delta == 0:
            composed = certificate.epsilon_per_draw * certificate.draws
            if not abs(composed - certificate.epsilon) <= 1e-9 * max(abs(certificate.epsilon), abs(composed)):
                out.append(f"{certificate.draws} draws x epsilon per draw {certificate.epsilon_per_draw} = {composed} "
                           f"is not the certified epsilon {certificate.epsilon} (bounds mode)")
    if certificate.draws != generated.draws:
        out.append(f"certificate for {certificate.draws} draws, {generated.draws} asked for")
    # a mass of 0 is kept only with its bound stated (FOUND.md #4, decided): a Monte Carlo estimate
    # with no prior draw inside says "mass below 3/n", an exact mass below the smallest float its log
    stated = any(s in certificate.prior_mass_method for s in ("no prior draw inside", "log of the mass"))
    if not (0 < certificate.prior_mass_kept <= 1 + 1e-9 or (certificate.prior_mass_kept == 0 and stated)):
        out.append(f"prior mass kept {certificate.prior_mass_kept} outside (0, 1] ({certificate.prior_mass_method})")
    for factor in certificate.factors:
        if not 0 <= factor.lipschitz < float("inf"):
            out.append(f"factor {factor.name!r} certified with constant {factor.lipschitz}")
    if not certificate.refutation:
        out.append("the certificate does not state that the refutation check ran")
    return out


def certify_arguments(generated: GeneratedModel, mode: str = "budget") -> dict[str, Any]:
    """The keyword arguments of :func:`pymc_dp.certify` for ``generated`` in ``mode``: its own
    (``certify_kwargs()``), with ``epsilon=None`` and ``bounds=region_bounds(generated)`` in bounds mode."""
    if mode not in MODES:
        raise ValueError(f"mode={mode!r}: one of {MODES}")
    kwargs = generated.certify_kwargs()
    if mode == "bounds":
        kwargs.update(epsilon=None, bounds=region_bounds(generated))
    return kwargs


def check_model(generated: GeneratedModel, *, timeout_s: float = DEFAULT_TIMEOUT_S, effort: str = "thorough",
                fp_errors: bool = True, mode: str = "budget") -> FuzzResult:
    """Certify ``generated``, run the thorough refutation check on a certificate, classify.

    Parameters
    ----------
    generated : GeneratedModel
    timeout_s : float
        CPU-time limit for certify and the check together (main thread only).
    effort : str
        The refutation check's budget for issued certificates.
    fp_errors : bool
        Turn NumPy floating-point ``RuntimeWarning``s raised inside ``pymc_dp`` into errors, as the
        test configuration does (a NaN or overflow in the certifier is a crash, not a pass).
    mode : {"budget", "bounds"}
        At the drawn budget, or with ``epsilon=None`` and ``bounds=region_bounds(generated)``
        (module docstring); the box is drawn inside the timed span, a failure to draw it is a crash
        at stage ``"bounds"``.

    Returns
    -------
    FuzzResult
    """
    names = generated.variable_names
    if mode not in MODES:
        raise ValueError(f"mode={mode!r}: one of {MODES}")
    result = FuzzResult(seed=generated.seed, family=generated.family, recipe=generated.description, mode=mode)
    start, cpu_start = time.perf_counter(), time.process_time()
    with warnings.catch_warnings():
        if fp_errors:
            warnings.filterwarnings("error", category=RuntimeWarning, module=r"pymc_dp(\.|$)")
        try:
            with _alarm(timeout_s):
                result.stage = "bounds" if mode == "bounds" else "certify"
                kwargs = certify_arguments(generated, mode)
                result.stage = "certify"
                certification = pymc_dp.certify(generated.model, **kwargs)
                result.problems += certificate_problems(certification.certificate, generated, mode)
                result.stage = "refute"
                module = refutation_module()
                if module is None:
                    result.refutation = "not run: pymc_dp.refutation has not landed"
                else:
                    report = module.refute(certification, effort=effort)
                    result.worst_ratio = round(float(report.worst_ratio), 4)
                    skipped = "".join(f"; {name} not checked ({why})" for name, why in report.skipped)
                    result.refutation = f"none found{skipped}"
                result.status = "certified"
                result.stage = ""
        except FuzzTimeout as exc:
            _timed_out(result, exc)
        except Exception as exc:  # noqa: BLE001  (classifying every exception is the point)
            _refused(result, exc, names, result.stage)
    return _timed(result, start, cpu_start)


def _timed_out(result: FuzzResult, exc: Exception) -> None:
    """Record a model that ran past its limit, at the stage it had reached."""
    result.status = "timeout"
    result.reason = f"timeout at {result.stage}"
    result.message = str(exc)
    result.problems.append(f"timeout at {result.stage} ({exc})")


def _timed(result: FuzzResult, start: float, cpu_start: float) -> FuzzResult:
    """Stamp the wall and CPU seconds since ``start`` / ``cpu_start`` on the result."""
    result.seconds = round(time.perf_counter() - start, 3)
    result.cpu_seconds = round(time.process_time() - cpu_start, 3)
    return result


#: the profiles whose models ask for a release path (checked in mode "paths")
PATHS_PROFILES = ("paths", "iid", "table")


def run_one(seed: int, *, profile: str = "campaign", timeout_s: float = DEFAULT_TIMEOUT_S, effort: str = "thorough",
            fp_errors: bool = True, mode: str = "budget") -> FuzzResult:
    """Generate the model of ``seed`` (``generate(seed, profile)``) and :func:`check_model` it in
    ``mode`` (:data:`MODES`); a failure to *generate* is a bug of the grammar and is reported as a
    crash at stage ``"generate"``."""
    if mode not in MODES:
        raise ValueError(f"mode={mode!r}: one of {MODES}")
    paths_profile = profile in PATHS_PROFILES
    if paths_profile != (mode == "paths") and not (paths_profile and mode == "budget"):
        raise ValueError(f"mode={mode!r} with profile={profile!r}: profiles {PATHS_PROFILES} are checked in mode 'paths' "
                         "only (their default 'budget' is read as 'paths'), and mode 'paths' needs one of them")
    if paths_profile:
        mode = "paths"
    try:
        generated = generate(seed, profile)
    except Exception as exc:  # noqa: BLE001
        result = FuzzResult(seed=seed, status="crashed", stage="generate", message=_crash_text(exc),
                            reason=f"grammar: {type(exc).__name__}", mode=mode)
        result.problems.append(f"the grammar could not build seed {seed}: {exc!r}"[:300])
        return result
    if mode == "paths":
        return check_paths_model(generated, timeout_s=timeout_s, effort=effort, fp_errors=fp_errors)
    return check_model(generated, timeout_s=timeout_s, effort=effort, fp_errors=fp_errors, mode=mode)


def tally(results) -> dict[str, Any]:
    """Counts by status, refusals by normalised reason, and the results with problems."""
    counts = {status: 0 for status in STATUSES}
    reasons: dict[str, int] = {}
    for r in results:
        counts[r.status] = counts.get(r.status, 0) + 1
        if r.status == "refused":
            reasons[r.reason] = reasons.get(r.reason, 0) + 1
    return {
        "generated": sum(counts.values()),
        "counts": counts,
        "refused_by_reason": dict(sorted(reasons.items(), key=lambda kv: -kv[1])),
        "problems": [r.to_dict() for r in results if r.problems],
    }


# ---------------------------------------------------------------------------- mode "paths"
#: relative slack of a measured change over its claim (float rounding of the sums), as the brief's
#: ``observed > claimed * (1 + 1e-9)``
PATHS_RTOL = 1e-9
#: candidate records per neighbour search (domain corners first, then random points)
CANDIDATES = 40
#: rows replaced in turn (each a separate search)
ROWS_TRIED = 2
#: public iterates / fits at which a multi-stage release's later statistics are checked
STAGE_RUNS = 3
#: the draws of a release that samples (localized): tune steps and chains
RELEASE_TUNE, RELEASE_CHAINS = 50, 1


def _domain_rows(domain, row_shape: tuple, rng: np.random.Generator, count: int) -> list[np.ndarray]:
    """Candidate rows of ``domain`` (a record's value of one container, shape ``row_shape``):
    corners first (every corner up to 4 elements, each end of each element beyond), then
    random points. Independent of :mod:`pymc_dp.refutation`'s own candidates."""
    d = int(np.prod(row_shape)) if row_shape else 1
    rows: list[np.ndarray] = []
    if isinstance(domain, pymc_dp.Ball):
        r = float(domain.radius)
        for j in range(d):
            for sign in (1.0, -1.0):
                e = np.zeros(d)
                e[j] = sign * r
                rows.append(e)
        for signs in itertools.islice(itertools.product((1.0, -1.0), repeat=d), 16):
            rows.append(r * np.array(signs) / math.sqrt(d))
        rows.append(np.zeros(d))
        while len(rows) < count:
            v = rng.normal(size=d)
            v = r * v / np.linalg.norm(v) * (1.0 if rng.random() < 0.5 else rng.random() ** (1.0 / d))
            rows.append(v)
    else:
        if isinstance(domain, pymc_dp.Box):
            lo = np.broadcast_to(np.asarray(domain.lo, float), (d,))
            hi = np.broadcast_to(np.asarray(domain.hi, float), (d,))
        else:  # Interval, Integers, Binary: every element in [lo, hi]
            lo, hi = np.full(d, float(domain.lo)), np.full(d, float(domain.hi))
        integer = isinstance(domain, pymc_dp.Integers)
        if d <= 4:
            rows += [np.where(np.array(c), hi, lo) for c in itertools.product((False, True), repeat=d)]
        else:
            rows += [lo.copy(), hi.copy()]
        rows.append(np.round((lo + hi) / 2.0) if integer else (lo + hi) / 2.0)
        while len(rows) < count:
            rows.append(rng.integers(lo.astype(int), hi.astype(int) + 1) if integer else rng.uniform(lo, hi))
    return [np.asarray(v, float).reshape(row_shape) for v in rows[:max(count, 1)]]


def _neighbour_sets(values: dict, domains: dict, unit, rng: np.random.Generator):
    """Groups of datasets any two of which are neighbours under ``unit``: per row tried (per
    container for ``"attribute"``, per pair of rows for a ``Users`` unit of 2 rows), the data with
    that row replaced by each candidate record (the original data among them). Yields lists of
    dicts ``container -> array``."""
    names = sorted(domains)
    n = len(next(iter(values.values())))
    kind = unit if isinstance(unit, str) else "users"
    m = 1 if isinstance(unit, str) else int(unit.max_rows)
    for _ in range(ROWS_TRIED):
        rows = rng.choice(n, size=min(m, n), replace=False)
        changed = [[c] for c in names] if kind == "attribute" else [names]
        for group in changed:
            cands = {c: _domain_rows(domains[c], np.shape(values[c])[1:], rng, CANDIDATES) for c in group}
            datasets = [values]
            for k in range(CANDIDATES):
                data = {c: np.array(v, dtype=float, copy=True) for c, v in values.items()}
                for c in group:
                    for r in rows:
                        # corners line up (k-th corner of each container) for the first few, then mix
                        pick = k if k < 8 else int(rng.integers(len(cands[c])))
                        data[c][r] = cands[c][pick % len(cands[c])]
                datasets.append(data)
            yield datasets


def _stages_of(mech, rng: np.random.Generator) -> list[dict]:
    """The released statistics of a noise-based mechanism as stages, each a dict: ``label``;
    ``values(data) -> (R, d)``, the mechanism's own statistics function at public choices fixed
    here (R of them); ``scales`` ``(R, d)``, its noise scales there; ``segments``, a list of
    ``(label, column slice, claimed epsilon share)``; and, for a one-vector Laplace release, the
    declared sensitivity (``sensitivity`` per statistic, ``weights``, ``K``) whose weighted L1
    bound is checked too."""
    from pymc_dp.mechanisms.histogram import NoisyHistogram
    from pymc_dp.mechanisms.logistic import NoisyLogistic, score_information
    from pymc_dp.mechanisms.noise import continuous_laplace
    from pymc_dp.mechanisms.refined import RefinedRegression, stage_two_values
    from pymc_dp.mechanisms.table import NoisyTable

    if isinstance(mech, (NoisyHistogram, NoisyTable)):  # one count vector, L1 sensitivity declared, one scale
        k = mech.bins if isinstance(mech, NoisyHistogram) else mech.cells
        return [{"label": "noisy histogram" if isinstance(mech, NoisyHistogram) else "noisy table", "values": lambda data: mech.true_counts(data)[None, :].astype(float),
                 "scales": np.full((1, k), mech.noise_scale), "segments": [("counts", slice(0, k), mech.epsilon)],
                 "sensitivity": np.ones(k), "weights": np.ones(k), "K": float(mech.sensitivity), "K2": None,
                 "noise": "laplace"}]
    names = [s.name for _, s in getattr(mech, "statistics", ())]
    if isinstance(mech, NoisyLogistic):
        Z, y = mech._data(mech._values)
        # public iterates as a release meets them: the stages walked on the data with OpenDP's noise
        _, states = mech._walk(STAGE_RUNS, lambda c, V, info: score_information(Z, y, c, V, info),
                               lambda s: continuous_laplace(np.zeros(s.shape), 1.0) * s)
        labels = mech.output_names()
        segments = []
        for t, (a, b) in enumerate(mech.stages):
            for what, share in (("information", b), ("score", a)):
                cols = [i for i, name in enumerate(labels) if name.startswith(f"stage {t}: {what}[")]
                if cols:
                    segments.append((f"stage {t} {what}", slice(cols[0], cols[-1] + 1), share * mech.epsilon))
        return [{"label": "private Newton steps", "values": lambda data: mech._values_at(data, states),
                 "scales": mech._scales_of(states), "segments": segments}]
    one = np.array([mech.noise_scales[k] for k in names], float)[None, :]
    declared = {"sensitivity": np.array([mech.sensitivity[k] for k in names], float),
                "weights": np.array([mech.weights[k] for k in names], float), "K": float(mech.joint["K"]),
                "K2": mech.joint.get("l2"), "noise": mech.noise}
    if not isinstance(mech, RefinedRegression):
        return [{"label": type(mech).__name__, "values": lambda data: mech._stat_vector(data)[None, :], "scales": one,
                 "segments": [("statistics", slice(0, len(names)), mech.epsilon)], **declared}]
    eps1, eps2 = (1.0 - mech.refine) * mech.epsilon, mech.refine * mech.epsilon
    d1 = len(names)
    b, band = mech.fit(mech.audit_runs(mech._values, STAGE_RUNS, rng)[:, :d1])
    two = stage_two_values(mech.regression, mech._arrays(mech._values), b, band)
    return [
        {"label": "refined regression", "values": lambda data: mech._stat_vector(data)[None, :], "scales": one,
         "segments": [("stage one", slice(0, d1), eps1)], **declared},
        {"label": "refined regression", "values": lambda data: stage_two_values(mech.regression, mech._arrays(data), b, band),
         "scales": mech._scales_of(band), "segments": [("stage two", slice(0, two.shape[1]), eps2)]},
    ]


def sensitivity_check(mech, unit, rng: np.random.Generator) -> tuple[float, list[str]]:
    """Brute force over neighbouring datasets inside the declared domains: the largest observed
    privacy loss of each stage segment (``sum |change_j| / b_j``, Laplace) over its claimed
    epsilon share and, where a vector's sensitivity is declared, the largest weighted L1 change
    ``sum_j w_j |change_j| / Delta_j`` over the claimed ``K`` (L2 over ``K2`` for Gaussian noise).
    Returns ``(worst ratio, problems)``: a ratio above ``1 + PATHS_RTOL`` is a refutation."""
    stages = _stages_of(mech, rng)
    worst, problems = 0.0, []
    for datasets in _neighbour_sets(mech._values, mech.domains, unit, rng):
        for stage in stages:
            vals = np.stack([np.atleast_2d(stage["values"](d)) for d in datasets])  # (k, R, d)
            diff = np.abs(vals[:, None] - vals[None, :])  # (k, k, R, d)
            for label, cols, share in stage["segments"]:
                if stage.get("noise", "laplace") == "gaussian":
                    continue  # the Gaussian claim is the L2 one below
                loss = float(np.max(np.sum(diff[..., cols] / stage["scales"][None, None, :, cols], axis=-1)))
                ratio = loss / share if share > 0 else (0.0 if loss == 0 else math.inf)
                worst = max(worst, ratio)
                if ratio > 1 + PATHS_RTOL:
                    problems.append(f"refuted: {stage['label']} {label}: a neighbour's privacy loss {loss:.6g} > its claimed "
                                    f"epsilon {share:.6g} (ratio {ratio:.6g})")
            if "K" in stage:
                norm = diff[..., 0, :] * stage["weights"] / stage["sensitivity"]
                l1 = float(np.max(np.sum(norm, axis=-1)))
                claim, what = stage["K"], "weighted L1"
                if stage["noise"] == "gaussian":
                    l1, claim, what = float(np.max(np.sqrt(np.sum(norm**2, axis=-1)))), float(stage["K2"]), "L2"
                ratio = l1 / claim if claim > 0 else (0.0 if l1 == 0 else math.inf)
                worst = max(worst, ratio)
                if ratio > 1 + PATHS_RTOL:
                    problems.append(f"refuted: {stage['label']}: a neighbour's {what} change of the statistics over their "
                                    f"declared sensitivities {l1:.6g} > the claimed bound {claim:.6g}")
    return worst, sorted(set(problems))


def _close(a: float, b: float) -> bool:
    return abs(a - b) <= 1e-9 * max(abs(a), abs(b), 1e-300)


def composition_problems(mech, generated: GeneratedModel, record: dict) -> list[str]:
    """The total epsilon a noise-based release's record states must be the composition of its
    stages (one stage: itself) and at most the budget asked for."""
    out = []
    total = float(record["epsilon"])
    if not total <= generated.epsilon * (1 + 1e-9):
        out.append(f"the release states epsilon {total} above the budget {generated.epsilon}")
    if "refine" in record:
        parts = [record["refine"]["epsilon_stage_one"], record["refine"]["epsilon_stage_two"]]
    elif "newton" in record:
        parts = [st["epsilon_score"] + st["epsilon_information"] for st in record["newton"]["stages"]]
    else:
        parts = [mech.epsilon]
    if not _close(sum(parts), total):
        out.append(f"the stages' epsilons {parts} compose to {sum(parts)}, not the stated {total}")
    return out


@contextlib.contextmanager
def _spy_samples(found: list):
    """Record every ``PrivateModel`` / ``PrivateMAP`` whose ``sample`` is called (outermost calls
    only), so that the object a two-stage release sampled its second stage from is checked itself."""
    from pymc_dp.core import PrivateModel
    from pymc_dp.mechanisms.map import PrivateMAP

    depth = [0]
    originals = {cls: cls.sample for cls in (PrivateModel, PrivateMAP)}

    def wrap(original):
        def sample(self, *args, **kwargs):
            if depth[0] == 0:
                found.append(self)
            depth[0] += 1
            try:
                return original(self, *args, **kwargs)
            finally:
                depth[0] -= 1
        return sample

    for cls, original in originals.items():
        cls.sample = wrap(original)
    try:
        yield
    finally:
        for cls, original in originals.items():
            cls.sample = original


def _certification_of(stage):
    """The :class:`~pymc_dp.certification.Certification` behind a sampled stage."""
    return stage.certification if hasattr(stage, "certification") else stage.private_model.certification


def _refute_into(result: FuzzResult, certification, label: str, effort: str) -> None:
    report = pymc_dp.refutation.refute(certification, effort=effort)
    ratio = round(float(report.worst_ratio), 4)
    result.worst_ratio = ratio if result.worst_ratio is None else max(result.worst_ratio, ratio)
    skipped = "".join(f"; {name} not checked ({why})" for name, why in report.skipped)
    result.refutation += f"{label}: none found{skipped}. "


def _check_localized(result: FuzzResult, mech, generated: GeneratedModel, effort: str) -> None:
    from pymc_dp import accounting

    cert = mech.certificate
    composed = mech.epsilon_locate + accounting.compose(mech.epsilon_per_draw, mech.draws, mech.delta).epsilon
    if not _close(cert.epsilon, composed):
        result.problems.append(f"localized: certificate epsilon {cert.epsilon} is not epsilon_1 {mech.epsilon_locate} + the "
                               f"draws' composition = {composed}")
    if not cert.epsilon <= generated.epsilon * (1 + 1e-9):
        result.problems.append(f"localized: certificate epsilon {cert.epsilon} above the budget {generated.epsilon}")
    if not mech.locate.certificate.epsilon <= mech.epsilon_locate * (1 + 1e-9):
        result.problems.append(f"localized: stage 1 certified {mech.locate.certificate.epsilon} > its share {mech.epsilon_locate}")
    result.stage = "refute"
    _refute_into(result, _certification_of(mech.locate), "stage 1", effort)
    result.stage = "release"
    found: list = []
    with _spy_samples(found):
        idata = mech.sample(random_seed=abs(generated.seed), chains=RELEASE_CHAINS, tune=RELEASE_TUNE)
    if len(found) < 2:
        result.problems.append(f"localized: {len(found)} stage(s) sampled, two expected")
        return
    stage2 = found[-1]
    record = json.loads(idata.attrs["pymc_dp"])
    facts = record["release"]
    if not stage2.certificate.epsilon <= facts["epsilon_sample"] * (1 + 1e-9):
        result.problems.append(f"localized: stage 2 certified {stage2.certificate.epsilon} > its share {facts['epsilon_sample']}")
    if not _close(facts["epsilon_locate"] + facts["epsilon_sample"], float(record["epsilon"])):
        result.problems.append(f"localized: the record's stages {facts['epsilon_locate']} + {facts['epsilon_sample']} do not "
                               f"compose to its epsilon {record['epsilon']}")
    if not float(record["epsilon"]) <= generated.epsilon * (1 + 1e-9):
        result.problems.append(f"localized: the release states epsilon {record['epsilon']} above the budget {generated.epsilon}")
    result.stage = "refute"
    _refute_into(result, _certification_of(stage2), f"stage 2 ({type(stage2).__name__}, beta_2 {facts['beta_sample']:.3g})", effort)


def _check_noise(result: FuzzResult, mech, generated: GeneratedModel) -> None:
    from pymc_dp.mechanisms.counts import NoisyCounts

    if isinstance(mech, NoisyCounts):
        result.refutation += "sensitivity not checked (noisy counts: not a GLM shape this profile draws). "
        return
    result.stage = "sensitivity"
    ratio, problems = sensitivity_check(mech, generated.unit, np.random.default_rng([abs(generated.seed), 7]))
    result.worst_ratio = round(ratio, 6) if result.worst_ratio is None else max(result.worst_ratio, round(ratio, 6))
    result.refutation += f"sensitivity: worst observed / claimed {ratio:.4g}. "
    result.problems += problems
    if problems:
        result.status = "refuted"
    result.stage = "release"
    (mech.release_statistics if hasattr(mech, "release_statistics") else mech.release_counts)()
    noise_aware = mech.noise_aware_model()  # the posterior's model is built (its sampling is post-processing, not run here)
    from pymc_dp.mechanisms.table import NoisyTable

    if isinstance(mech, NoisyTable):  # its law is rebuilt at the cells: it must be finite where sampling starts
        logps = noise_aware.point_logps()
        if not all(np.isfinite(v) for v in logps.values()):
            result.problems.append(f"the noisy table's noise-aware model is not finite at its initial point: {logps}")
    result.problems += composition_problems(mech, generated, mech._public())


def check_paths_model(generated: GeneratedModel, *, timeout_s: float = DEFAULT_TIMEOUT_S, effort: str = "thorough",
                      fp_errors: bool = True) -> FuzzResult:
    """Build ``generated`` on its drawn path (``pymc_dp.make_private(..., path=generated.path,
    ledger=None)``) and check the chosen mechanism's proof obligations, each an independent
    attempt to refute it:

    * posterior sampling (``auto``'s fallback): :func:`certificate_problems` and the thorough
      :func:`pymc_dp.refutation.refute` of its certification;
    * localized: its certificate is ``epsilon_1`` + the draws' composition and within the budget;
      the first stage's certification is refuted as above; one release (``tune`` 50, one chain)
      is made, the object its second stage sampled is captured and its certification refuted,
      its epsilon within ``epsilon_2``, and the record's two stages compose to its epsilon;
    * noise-based (noisy statistics, NoisyRegression, PASS-GLM, refined regression, private
      Newton steps): :func:`sensitivity_check` (the mechanism's own statistics function on
      neighbouring datasets inside the declared domains, corners included) and
      :func:`composition_problems` on the release record after the statistics are released;
    * a refusal must be a typed :class:`pymc_dp.PrivacyError` naming a variable (else crashed /
      a problem), and a shape in ``generated.must_refuse`` must be refused.

    Returns a :class:`FuzzResult` in mode ``"paths"`` (``refutation`` says what was checked).
    """
    from pymc_dp.core import PrivateModel
    from pymc_dp.mechanisms.localized import LocalizedPosterior

    names = generated.variable_names
    result = FuzzResult(seed=generated.seed, family=generated.family, recipe=generated.description, mode="paths")
    start, cpu_start = time.perf_counter(), time.process_time()
    with warnings.catch_warnings():
        if fp_errors:
            warnings.filterwarnings("error", category=RuntimeWarning, module=r"pymc_dp(\.|$)")
        try:
            with _alarm(timeout_s):
                result.stage = "make_private"
                mech = pymc_dp.make_private(generated.model, epsilon=generated.epsilon, draws=generated.draws,
                                            data=dict(generated.data), unit=generated.unit, public=list(generated.public),
                                            ledger=None, path=generated.path)
                choice = getattr(mech, "path_choice", None)
                result.refutation = f"path {choice.path if choice else generated.path} ({type(mech).__name__}). "
                if generated.must_refuse:
                    result.problems.append(f"path {generated.path!r} accepted a shape it must refuse ({generated.must_refuse})")
                if isinstance(mech, LocalizedPosterior):
                    _check_localized(result, mech, generated, effort)
                elif isinstance(mech, PrivateModel):
                    result.problems += certificate_problems(mech.certificate, generated, "budget")
                    result.stage = "refute"
                    _refute_into(result, mech.certification, "posterior", effort)
                else:
                    _check_noise(result, mech, generated)
                if result.status != "refuted":
                    result.status = "certified"
                result.stage = ""
        except FuzzTimeout as exc:
            _timed_out(result, exc)
        except Exception as exc:  # noqa: BLE001  (classifying every exception is the point)
            _refused(result, exc, names, result.stage)
    return _timed(result, start, cpu_start)
