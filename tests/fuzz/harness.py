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
import re
import signal
import threading
import time
import traceback
import warnings
from dataclasses import asdict, dataclass, field
from typing import Any

import pymc_dp
from pymc_dp.exceptions import PrivacyError
from tests.fuzz.grammar import GeneratedModel, generate, region_bounds

#: statuses, in the order the reports list them
STATUSES = ("certified", "refused", "refuted", "crashed", "timeout")
#: how a model is certified: at its drawn budget, or with ``epsilon=None`` and ``bounds=region_bounds(...)``
MODES = ("budget", "bounds")
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
            result.status = "timeout"
            result.reason = f"timeout at {result.stage}"
            result.message = str(exc)
            result.problems.append(f"timeout at {result.stage} ({exc})")
        except Exception as exc:  # noqa: BLE001  (classifying every exception is the point)
            _refused(result, exc, names, result.stage)
    result.seconds = round(time.perf_counter() - start, 3)
    result.cpu_seconds = round(time.process_time() - cpu_start, 3)
    return result


def run_one(seed: int, *, profile: str = "campaign", timeout_s: float = DEFAULT_TIMEOUT_S, effort: str = "thorough",
            fp_errors: bool = True, mode: str = "budget") -> FuzzResult:
    """Generate the model of ``seed`` (``generate(seed, profile)``) and :func:`check_model` it in
    ``mode`` (:data:`MODES`); a failure to *generate* is a bug of the grammar and is reported as a
    crash at stage ``"generate"``."""
    if mode not in MODES:
        raise ValueError(f"mode={mode!r}: one of {MODES}")
    try:
        generated = generate(seed, profile)
    except Exception as exc:  # noqa: BLE001
        result = FuzzResult(seed=seed, status="crashed", stage="generate", message=_crash_text(exc),
                            reason=f"grammar: {type(exc).__name__}", mode=mode)
        result.problems.append(f"the grammar could not build seed {seed}: {exc!r}"[:300])
        return result
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
