"""Privacy audits: measure the privacy loss of a private model's release and compare it with the claim.

``audit(private_model)`` looks for neighbouring datasets whose released distributions differ by
more than the certificate allows. One exact posterior draw is claimed ``eps0 = 2 Delta``-DP
(docs/theory/guarantee.md): for every pair of neighbours ``x, y`` (differing in one privacy unit) and
every parameter value ``theta``,

.. math::  |\\ln \\xi(\\theta | x) - \\ln \\xi(\\theta | y)| \\le \\varepsilon_0 ,

where ``xi`` is the truncated posterior the mechanism samples. Three methods measure the left side:

``"exact"`` (conjugate models, through the exact sampler's plan)
    The truncated posterior factorises into conjugate blocks (Beta, Gamma, Normal per element,
    Dirichlet per row) with closed-form log densities and log-space normalisers
    (:meth:`pymc_dp.exact.ConjugatePlan.log_density`). The log-ratio is a sum over blocks of
    functions whose extremes on the truncation are found in closed form (ends and stationary
    points; the Dirichlet ratio region exactly), so the supremum over theta for one pair is exact
    to rounding error.
``"numerical"`` (any family, models with at most two free scalar parameters)
    The truncated posterior density from the model's own log-probability (PyMC ``logp``),
    normalised by quadrature on an adaptive grid over the truncation region; the supremum of the
    log-ratio is taken over the grid (a lower bound on the true supremum), and the quadrature
    error of the normalisers is estimated and reported.
``"statistical"`` (any model)
    Runs the release mechanism many times on one pair of neighbours, picks an event (a threshold
    on a released statistic) on one half of the runs, and gives a one-sided Clopper-Pearson lower
    bound on epsilon from the other half.

The exact and numerical methods *search* neighbouring datasets within the declared domains
(record changes over the domain's values, structured base datasets, the user's data); a search
is a lower bound on the worst case: ``"fail"`` (with a witness pair) is definitive, ``"pass"``
means nothing above the claim was found.

An audit reads the private data (unless ``include_data=False``) and the posterior; its output
is **not** differentially private, and it spends nothing from the budget ledger.

The jobs live in one module each: :mod:`~pymc_dp.audits.neighbours`, :mod:`~pymc_dp.audits.exact`,
:mod:`~pymc_dp.audits.numerical`, :mod:`~pymc_dp.audits.statistical`, :mod:`~pymc_dp.audits.result`;
this module is the driver.
"""

from __future__ import annotations

import functools
import inspect
import time
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from pymc_dp.audits.exact import TemperedView, audit_exact
from pymc_dp.audits.neighbours import DataSpace, given_pairs, heuristic_pair, pairs_from_search
from pymc_dp.audits.numerical import GridModel, audit_numerical
from pymc_dp.audits.result import METHODS, AuditError, AuditResult, Witness
from pymc_dp.audits.statistical import (
    audit_statistical,
    chain_verdict,
    choose_pair,
    clopper_pearson,
    statistical_test,
    statistical_verdict,
)
from pymc_dp.mechanisms.noise import audit_noise
from pymc_dp.units import describe_unit

__all__ = ["audit", "AuditResult", "Witness", "AuditError", "clopper_pearson", "noise_generator"]


def noise_generator(random_seed) -> np.random.Generator | None:
    """The generator an audit with ``random_seed`` draws the mechanisms' noise from, or ``None``.

    A stream of its own, derived from ``random_seed`` (the first child of its
    :class:`numpy.random.SeedSequence`), independent of the stream ``default_rng(random_seed)``
    that seeds the search and the runs. ``None`` (no seed): ``None``, OpenDP's own samplers."""
    if random_seed is None:
        return None
    if isinstance(random_seed, np.random.Generator):
        return random_seed.spawn(1)[0]
    seq = random_seed if isinstance(random_seed, np.random.SeedSequence) else np.random.SeedSequence(random_seed)
    return np.random.default_rng(seq.spawn(1)[0])


def _seeded_noise(fn: Callable[..., AuditResult]) -> Callable[..., AuditResult]:
    """Run ``fn`` (an audit taking ``random_seed``) inside :func:`~pymc_dp.mechanisms.noise.audit_noise`
    with :func:`noise_generator` of its seed, so that its OpenDP noise is seeded too."""
    default = inspect.signature(fn).parameters["random_seed"].default

    @functools.wraps(fn)
    def wrapper(private_model, **kwargs):
        rng = noise_generator(kwargs.get("random_seed", default))
        if rng is None:
            return fn(private_model, **kwargs)
        with audit_noise(rng):
            return fn(private_model, **kwargs)

    return wrapper


@_seeded_noise
def audit(
    private_model,
    *,
    method: str = "auto",
    pairs: Sequence[tuple[Mapping[str, Any], Mapping[str, Any]]] | None = None,
    include_data: bool = True,
    confidence: float = 0.95,
    runs: int | None = None,
    sampler: str = "auto",
    release: str = "draw",
    random_seed: int | None = 0,
    max_bases: int = 400,
    max_pairs: int = 50_000,
    groups: int = 4,
    levels: int = 9,
    random_bases: int = 4,
    tolerance: float = 1e-6,
    mcmc_kwargs: Mapping[str, Any] | None = None,
) -> AuditResult:
    """Audit a private model's privacy claim; see :mod:`pymc_dp.audits` and ``docs/audits.md``.

    Parameters
    ----------
    private_model : PrivateModel or Mechanism
        What to audit: its certificate's per-draw epsilon, unit, domains and truncation. A
        :class:`~pymc_dp.mechanisms.base.Mechanism` (e.g. :func:`pymc_dp.laplace_updates`) is
        audited statistically: its release's epsilon against runs of its noise on the pair of
        neighbours the search finds most distinguishable (:meth:`Mechanism.audit_score`), with
        its exact output log-ratio (:meth:`Mechanism.audit_log_ratio`) as the statistic.
    method : {"auto", "exact", "numerical", "statistical"}
        ``"auto"``: exact when the model has an exact (conjugate) sampler, else numerical when it
        has at most two free scalar parameters, else statistical.
    pairs : sequence of (x, y), optional
        Neighbouring datasets (dicts of private container -> array) to audit instead of the
        search; the statistical method uses the first. By default the exact and numerical methods
        search, and the statistical one runs on the worst pair a search finds (or, when no search
        is possible, on a heuristic pair of extreme datasets).
    include_data : bool
        Whether the search includes the private data as a base dataset. With False the audit
        reads only public information and synthetic datasets.
    confidence : float
        Statistical: the confidence of the Clopper-Pearson lower bound.
    runs : int, optional
        Statistical: runs of the mechanism per dataset (default 100_000 with an exact or grid
        sampler, 40 with MCMC).
    sampler : {"auto", "exact", "grid", "chain", "mcmc"}
        Statistical: how the mechanism is run. ``"exact"``: the exact conjugate sampler (what
        ``sample()`` releases); ``"grid"``: draws from the numerical posterior of the truncated
        model on the audit grid (tests the rule and the truncation, not a sampler); ``"chain"``
        (the default where there is neither an exact sampler nor a grid): thinned draws of long
        MCMC chains on the truncated posterior of each dataset (tests the rule, the lift and the
        truncation); ``"mcmc"``: ``sample(method="mcmc")`` itself, one released draw per run.
    release : {"draw", "full"}
        Statistical: audit one draw against the per-draw epsilon (default), or a statistic (the
        mean) of a whole release of ``draws`` draws against the release's total epsilon.
    random_seed : int, optional
        Seeds the search's random datasets and the statistical runs, and the noise of a
        mechanism whose release draws OpenDP's noise (noisy statistics, Laplace updates, ...):
        the audit runs inside :func:`pymc_dp.mechanisms.noise.audit_noise` with a generator
        derived from the seed (:func:`noise_generator`), which draws the same distributions with
        the same scales as OpenDP's samplers (their privacy maps still checked). An audit with a
        seed is reproducible bit for bit. ``None``: fresh entropy for the search and runs, and
        OpenDP's own (unseedable) samplers for the noise, as a release draws it; the verdict then
        varies from run to run, and on a mechanism whose claim is attained it reads "fail" with
        probability about ``(1 - confidence) / 2``.
    max_bases, max_pairs, groups, levels, random_bases : int
        Search size: base datasets (fewer when they would give more than about ``max_pairs``
        neighbouring pairs); groups of identical rows (or users) changed per base dataset (the
        first and last row of each group); values per interval domain; random base datasets of
        each kind.
    tolerance : float
        Relative slack on the claim for exact and numerical verdicts (the truncation itself is
        solved to a relative 1e-9).
    mcmc_kwargs : dict, optional
        Passed to ``sample(method="mcmc")`` for the MCMC sampler (e.g. ``tune``, ``chains``), or
        to ``pm.sample`` for the chain sampler (``tune``, ``chains``, ``thin`` too).

    Returns
    -------
    AuditResult
    """
    t0 = time.perf_counter()
    if method not in METHODS:
        raise AuditError(f"method={method!r}; use one of {list(METHODS)}")
    if release not in ("draw", "full"):
        raise AuditError(f"release={release!r}; use 'draw' or 'full'")
    if not 0.0 < confidence < 1.0:
        raise AuditError(f"confidence={confidence!r} must be in (0, 1)")
    from pymc_dp.mechanisms.base import Mechanism
    from pymc_dp.mechanisms.map import PrivateMAP

    if isinstance(private_model, PrivateMAP):
        # the exponential mechanism is a tempered truncated posterior: every posterior-sampling
        # audit applies, with the private log-likelihood scaled by beta
        private_model = TemperedView(private_model)
    if callable(getattr(private_model, "audit_metric", None)) and method in ("auto", "exact"):
        from pymc_dp.audits.hockey import audit_metric  # metric DP: the log-ratio per unit of distance

        return audit_metric(private_model, pairs=pairs, tolerance=tolerance, levels=levels)
    if callable(getattr(private_model, "audit_profile", None)) and method in ("auto", "exact"):
        # an (epsilon, delta) claim of one untruncated conjugate draw: exact hockey-stick divergences
        from pymc_dp.audits.hockey import audit_hockey

        return audit_hockey(private_model, pairs=pairs, include_data=include_data, tolerance=tolerance, levels=levels)
    if isinstance(private_model, Mechanism):
        return _audit_mechanism(
            private_model, method=method, pairs=pairs, include_data=include_data, confidence=confidence,
            runs=runs, release=release, random_seed=random_seed, max_bases=max_bases, max_pairs=max_pairs,
            groups=groups, levels=levels, random_bases=random_bases, t0=t0,
        )
    cert = private_model.certificate
    rng = np.random.default_rng(random_seed)
    space = DataSpace(
        private_model.model, private_model.domains, private_model.unit,
        [c for f in private_model.factors for c in f.reads], include_data=include_data, levels=levels, max_bases=max_bases,
        groups=groups, n_random=random_bases, rng=rng,
    )
    space.max_bases = min(max_bases, max(8, max_pairs // space.changes_per_base()))
    reads_private = include_data or pairs is not None

    gm = None
    has_plan = private_model.conjugate_plan is not None
    if method == "auto":
        if has_plan:
            method = "exact"
        else:
            try:
                gm = GridModel(private_model, space)
                method = "numerical"
            except AuditError:
                method = "statistical"
    if method != "statistical" and release != "draw":
        raise AuditError("release='full' is for the statistical method; exact and numerical audits measure one draw")
    given = given_pairs(space, pairs) if pairs is not None else None
    claimed = cert.epsilon_per_draw if release == "draw" else cert.epsilon
    notes = []
    res: dict = {}
    bases = None
    if method == "exact":
        bases = space.bases() if given is None else []
        res = audit_exact(private_model, space, given if given is not None else pairs_from_search(space, bases))
    elif method == "numerical":
        gm = gm or GridModel(private_model, space)
        bases = space.bases() if given is None else []
        res = audit_numerical(private_model, space, bases, given, gm)
        notes += list(res.get("notes", ()))
    else:
        if sampler == "auto":
            if has_plan:
                sampler = "exact"
            else:
                try:
                    gm = gm or GridModel(private_model, space)
                    sampler = "grid"
                except AuditError:
                    sampler = "chain"
        if sampler not in ("exact", "grid", "chain", "mcmc"):
            raise AuditError(f"sampler={sampler!r}; use 'auto', 'exact', 'grid', 'chain' or 'mcmc'")
        if sampler == "exact" and not has_plan:
            raise AuditError(f"sampler='exact' needs a conjugate model: {private_model.exact_unavailable}")
        if sampler == "grid":
            gm = gm or GridModel(private_model, space)
        runs = int(runs if runs is not None else {"mcmc": 40, "chain": 4000}.get(sampler, 100_000))
        if runs < 4:
            raise AuditError("runs must be at least 4 (half choose the event, half test it)")
        alpha = (1.0 - confidence) / 2.0
        if given is not None:
            pair = given[0]
        elif has_plan or gm is not None:
            # candidates: the worst pair of every base dataset of a search; the pair is the one a
            # pilot predicts to give the largest lower bound (the supremum of the log-ratio is
            # often reached where neither posterior has mass, where no sampling can see it)
            b = space.bases()
            if has_plan:
                found = audit_exact(private_model, space, pairs_from_search(space, b))
            else:
                found = audit_numerical(private_model, space, b[: min(max_bases, 64)], None, gm)
            chosen = choose_pair(private_model, found["candidates"], sampler=sampler, gm=gm, runs=runs, alpha=alpha, rng=rng)
            pair = chosen[1]
            notes.append(
                f"pair: of the worst pairs of {len(found['candidates'])} base datasets ({'exact' if has_plan else 'numerical'} "
                f"search, largest log-ratio {found['measured']:.4g}), the one a pilot run predicts to be most "
                f"detectable (predicted lower bound {chosen[0]:.3g})"
            )
        else:
            pair = heuristic_pair(space)
            notes.append("pair: heuristic (all rows at one extreme record, one unit changed to the farthest record)")
        res = audit_statistical(
            private_model, pair, runs=runs, confidence=confidence, rng=rng, sampler=sampler,
            release=release, gm=gm, mcmc_kwargs=mcmc_kwargs,
        )
        if sampler == "mcmc":
            notes.append("MCMC runs: the audit measures the MCMC release itself, approximation error included")
        if sampler == "chain":
            notes.append("chain sampler: thinned long MCMC chains on the truncated posterior; tests the rule, the lift and the truncation, not a sampler's mixing")
        if sampler == "grid":
            notes.append("grid sampler: draws from the numerical truncated posterior; tests the rule and the truncation, not a sampler")

    measured = res["measured"]
    error = float(res.get("error", 0.0))
    slack = tolerance * claimed + 1e-12
    if method == "statistical":
        verdict = statistical_verdict(measured, res["power"], claimed, runs, notes)
        measured_by = "event"
        if "oscillation" in res:
            verdict, measured, measured_by = chain_verdict(verdict, measured, res, claimed, slack, notes)
    else:
        measured_by = "search"
        if measured - error > claimed + slack:
            verdict = "fail"
        elif measured + error <= claimed + slack:
            verdict = "pass"
        else:
            verdict = "inconclusive"
            notes.append("the numerical error is larger than the distance to the claim")
    return AuditResult(
        method=method,
        verdict=verdict,
        claimed=float(claimed),
        epsilon_per_draw=float(cert.epsilon_per_draw),
        epsilon_total=float(cert.epsilon),
        delta=float(cert.delta),
        draws=int(cert.draws),
        release=release,
        unit=describe_unit(private_model.unit),
        measured=float(measured),
        estimate=res.get("estimate"),
        error=error,
        tolerance=float(tolerance),
        confidence=float(confidence) if method == "statistical" else None,
        power=res.get("power"),
        pairs=int(res.get("pairs", 0)),
        bases=len(given) if given is not None else (len(bases) if bases is not None else 0),
        runs=runs if method == "statistical" else None,
        sampler=sampler if method == "statistical" else None,
        witness=res.get("witness"),
        reads_private_data=bool(reads_private),
        seconds=float(time.perf_counter() - t0),
        notes=tuple(notes),
        curve=res.get("curve", {}),
        measured_by=measured_by,
    )


def _audit_mechanism(mech, *, method, pairs, include_data, confidence, runs, release, random_seed, max_bases,
                     max_pairs, groups, levels, random_bases, t0) -> AuditResult:
    """Statistical audit of a :class:`~pymc_dp.mechanisms.base.Mechanism` (one release)."""
    if method not in ("auto", "statistical"):
        raise AuditError(f"method={method!r}: a noise mechanism ({mech.name}) is audited with method='statistical'")
    if release != "draw":
        raise AuditError("release='full' is for posterior sampling; a mechanism's release is audited as one output")
    rng = np.random.default_rng(random_seed)
    space = DataSpace(mech.model, mech.domains, mech.unit, mech.reads, include_data=include_data, levels=levels,
                       max_bases=max_bases, groups=groups, n_random=random_bases, rng=rng)
    space.max_bases = min(max_bases, max(8, max_pairs // space.changes_per_base()))
    notes = []
    searched = 0
    bases = []
    if pairs is not None:
        pair = given_pairs(space, pairs)[0]
    else:
        bases = space.bases()
        best = None
        for cand in pairs_from_search(space, bases):
            score = mech.audit_score(cand[1], cand[3])
            if score is None:
                break
            searched += 1
            if best is None or score > best[0]:
                best = (score, cand)
            if searched >= max_pairs:
                break
        if best is None:
            pair = heuristic_pair(space)
            notes.append("pair: heuristic (all rows at one extreme record, one unit changed to the farthest record)")
        else:
            pair = best[1]
            notes.append(f"pair: the most distinguishable of {searched} neighbouring pairs (score {best[0]:.4g})")
    runs = int(runs if runs is not None else 100_000)
    if runs < 4:
        raise AuditError("runs must be at least 4 (half choose the event, half test it)")
    _, x, _, y = pair
    ox, oy = np.asarray(mech.audit_runs(x, runs, rng), float), np.asarray(mech.audit_runs(y, runs, rng), float)
    ox, oy = ox.reshape(runs, -1), oy.reshape(runs, -1)
    st_x, st_y = {}, {}
    lr = mech.audit_log_ratio(x, y)
    if lr is not None:
        st_x["log-ratio"], st_y["log-ratio"] = np.asarray(lr(ox), float), np.asarray(lr(oy), float)
    else:
        for j in range(min(ox.shape[1], 64)):
            st_x[f"output[{j}]"], st_y[f"output[{j}]"] = ox[:, j], oy[:, j]
    # a Gaussian release is (epsilon, delta)-DP: P_x(E) <= e^eps P_y(E) + delta
    res = statistical_test(st_x, st_y, pair, runs=runs, confidence=confidence, delta=float(getattr(mech, "delta", 0.0)))
    claimed = float(mech.epsilon)
    verdict = statistical_verdict(res["measured"], res["power"], claimed, runs, notes)
    notes.append(f"mechanism {mech.name}: one release's noisy output (before post-processing) is audited")
    return AuditResult(
        method="statistical", verdict=verdict, claimed=claimed, epsilon_per_draw=claimed, epsilon_total=claimed,
        delta=float(mech.delta), draws=1, release="draw", unit=describe_unit(mech.unit),
        measured=float(res["measured"]), estimate=res.get("estimate"), error=0.0, tolerance=0.0,
        confidence=float(confidence), power=res.get("power"), pairs=max(searched, 1), bases=len(bases),
        runs=runs, sampler=mech.name, witness=res.get("witness"),
        reads_private_data=bool(include_data or pairs is not None), seconds=float(time.perf_counter() - t0),
        notes=tuple(notes), curve=res.get("curve", {}), measured_by="event",
    )
