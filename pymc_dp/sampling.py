"""MCMC on the rewritten (truncated) model: PyMC's NUTS, or numpyro / blackjax / nutpie.

Only the posterior draws of the model's free RVs and Deterministics leave :func:`run_mcmc`, as a
fresh ``xarray.Dataset`` without attributes; everything else a sampler returns (sample stats,
observed and constant data, warm-up draws, timings, library attrs) is dropped here and never
reaches a release (docs/theory/release.md).

Every backend starts inside Theta_L. ``pm.sample`` hands ``initvals`` to PyMC's NUTS and to its
JAX samplers (numpyro, blackjax), but not to nutpie (it warns and starts from the model's default
point, which for a truncated prior can lie outside the interval). nutpie is therefore compiled and
run here directly, with the starting values as its ``initial_points``; the rewritten model itself
carries no initial values, so that PyMC's graph transforms (``fgraph_from_model``, which refuses
initvals; nutpie's ``freeze_dims_and_data`` for its JAX backend) still accept it.
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.metadata
import logging
import sys
import warnings
from typing import Any, Mapping

import numpy as np
import pymc as pm
import xarray as xr

__all__ = ["run_mcmc", "check_backend", "BACKENDS", "pilot_unmoved", "quiet_sampler"]

#: the NUTS implementations run_mcmc accepts, and the modules each needs
BACKENDS: dict[str, tuple[str, ...]] = {
    "pymc": (),
    "numpyro": ("jax", "numpyro"),
    "blackjax": ("jax", "blackjax"),
    "nutpie": ("nutpie",),
}

_EXTRA = {"numpyro": "jax", "blackjax": "jax", "nutpie": "nutpie"}

#: blackjax 1.6 removed ``window_adaptation(progress_bar=...)``; PyMC <= 5.28 (and 6.x) still
#: passes it, and the NUTS kernel then fails with "unexpected keyword argument 'progress_bar'"
#: (pymc-devs/pymc#8367).
_BLACKJAX_BROKEN_FROM = (1, 6)

#: pm.sample keywords that mean nothing to nutpie (pm.sample ignores them there too)
_NUTPIE_IGNORED = {
    "compute_convergence_checks",
    "quiet",
    "init",
    "n_init",
    "jitter_max_retries",
    "keep_warning_stat",
    "idata_kwargs",
    "mp_ctx",
    "blas_cores",
}


_import_module = importlib.import_module  # patched in tests


def check_backend(nuts_sampler: str) -> None:
    """Raise a clear error if ``nuts_sampler`` is unknown or its packages are missing or unusable.

    Raises
    ------
    ValueError
        Unknown sampler name.
    ImportError
        A package the backend needs is not installed (the message says which extra to
        install), or blackjax is too new for PyMC's blackjax path.
    """
    if nuts_sampler not in BACKENDS:
        raise ValueError(f"nuts_sampler={nuts_sampler!r} is not one of {sorted(BACKENDS)}.")
    # PyMC's JAX module first: on import it asks XLA for many host devices (one per chain), which
    # only takes effect before JAX starts its backend -- and importing blackjax starts it
    modules = ("pymc.sampling.jax", *BACKENDS[nuts_sampler]) if _EXTRA.get(nuts_sampler) == "jax" else BACKENDS[nuts_sampler]
    for module in modules:
        try:
            _import_module(module)
        except ImportError as err:
            extra = f'pip install "pymc-dp[{_EXTRA[nuts_sampler]}]"'
            if isinstance(err, ModuleNotFoundError) or sys.modules.get(err.name or "", False) is None:
                missing = (err.name or module).split(".")[0]
                raise ImportError(
                    f"nuts_sampler={nuts_sampler!r} needs the package {missing!r}, which is not "
                    f"installed. Install it with: {extra}"
                ) from err
            raise ImportError(
                f"nuts_sampler={nuts_sampler!r}: {module!r} is installed but fails to import ({err}); "
                f"the installed versions are probably incompatible. Reinstall the tested versions "
                f"with: {extra}"
            ) from err
    if nuts_sampler == "blackjax":
        version = importlib.metadata.version("blackjax")
        if _version_tuple(version) >= _BLACKJAX_BROKEN_FROM:
            raise ImportError(
                f"blackjax {version} is installed, but PyMC {pm.__version__}'s blackjax sampler fails "
                "with blackjax >= 1.6 (it passes the removed window_adaptation(progress_bar=...); "
                'pymc-devs/pymc#8367). Install a compatible version: pip install "blackjax>=1.2,<1.6", '
                'or use nuts_sampler="numpyro".'
            )


def _version_tuple(version: str) -> tuple[int, ...]:
    parts = []
    for piece in version.split(".")[:2]:
        digits = "".join(ch for ch in piece if ch.isdigit())
        parts.append(int(digits) if digits else 0)
    return tuple(parts)


def run_mcmc(
    model: pm.Model,
    *,
    draws_per_chain: int,
    chains: int,
    tune: int,
    initvals: Mapping[str, Any],
    **kwargs: Any,
) -> xr.Dataset:
    """Sample ``model`` and return its posterior draws only.

    Parameters
    ----------
    model : pm.Model
        The rewritten model (its prior is restricted to Theta_L).
    draws_per_chain : int
        Draws kept per chain, before any thinning by the caller.
    chains, tune : int
        As in :func:`pymc.sample`.
    initvals : mapping
        Starting values inside Theta_L, by variable name. Every backend starts from them
        (jittered as each backend does, except where Theta_L is an indicator potential: there
        PyMC's and the JAX samplers' jitter is off by default, since a jittered start can leave
        a tight region, and pm.sample fails after 10 redraws).
    **kwargs
        Passed to :func:`pymc.sample` (``nuts_sampler``, ``cores``, ``random_seed``,
        ``target_accept``, ``nuts_sampler_kwargs``, ...). With ``nuts_sampler="nutpie"`` the
        keywords nutpie understands are mapped onto :func:`nutpie.sample` as
        :func:`pymc.sample` does (``backend`` and ``gradient_backend`` in
        ``nuts_sampler_kwargs`` go to :func:`nutpie.compile_pymc_model`); ``cores`` is passed on.

    Returns
    -------
    xr.Dataset
        ``(chain, draw, ...)`` arrays of the model's free RVs and Deterministics, with their
        coordinates and no attributes. Nothing else of the run.
    """
    nuts_sampler = kwargs.get("nuts_sampler", "pymc")
    check_backend(nuts_sampler)
    if kwargs.pop("var_names", None) is not None:
        warnings.warn(
            "var_names is ignored: every free RV is sampled, and the release decides what is public.",
            UserWarning,
            stacklevel=2,
        )
    if nuts_sampler == "nutpie":
        posterior = _sample_nutpie(
            model, draws=draws_per_chain, tune=tune, chains=chains, initvals=initvals, **kwargs
        )
    else:
        if _has_region_wall(model):
            # The start lies inside Theta_L, but PyMC's (and its JAX samplers') default init
            # jitters it by U(-1, 1) in the transformed space, which can leave a tight region whose
            # indicator potential is then -inf; after 10 redraws pm.sample gives up with
            # SamplingError -- after the ledger charged the release. Start at the point itself.
            if nuts_sampler == "pymc":
                kwargs.setdefault("init", "adapt_diag")
            else:
                kwargs["nuts_sampler_kwargs"] = {"jitter": False, **(kwargs.get("nuts_sampler_kwargs") or {})}
        if nuts_sampler == "blackjax":
            kwargs["nuts_sampler_kwargs"] = _blackjax_chain_method(kwargs.get("nuts_sampler_kwargs"), chains)
        kwargs.setdefault("compute_convergence_checks", False)
        kwargs.setdefault("progressbar", False)
        with without_short_trace_warning():
            idata = pm.sample(
                draws=draws_per_chain,
                tune=tune,
                chains=chains,
                model=model,
                initvals=dict(initvals),
                return_inferencedata=True,
                **kwargs,
            )
        posterior = idata.posterior
    return posterior_only(posterior, model)


def pilot_unmoved(model, initvals: Mapping[str, Any], names, *, tune: int = 300, draws: int = 200) -> list[str]:
    """The free RVs in ``names`` that PyMC's sampler never moves from ``initvals`` on the
    truncated prior alone (``model`` without its observed variables: nothing private is read).

    A public check of the region's mobility, run before a release is charged: behind an
    indicator potential, a step method can be unable to leave its start (a discrete RV's
    Metropolis proposals all cross the wall), and a release of one draw per chain cannot show it
    afterwards. Empty when ``model`` has no indicator potential (boxes and affine regions are
    sampled in transformed coordinates, with no wall to be caught at). One chain with a fixed
    seed: the answer is a function of the public model and start only.

    Parameters
    ----------
    model : pm.Model
        The rewritten (truncated) model.
    initvals : mapping
        The release's public start, inside Theta_L.
    names : sequence of str
        The free RVs to check.
    tune, draws : int
        Length of the pilot chain; every iteration counts, warm-up included.

    Returns
    -------
    list of str
        The names whose pilot draws all equal their start.
    """
    if not _has_region_wall(model) or not names or any(n not in initvals for n in names):
        return []
    from pymc.model.fgraph import ModelFreeRV, ModelPotential, fgraph_from_model, model_from_fgraph
    from pytensor.graph.fg import FunctionGraph

    fgraph, _ = fgraph_from_model(model, inlined_views=True)
    kept = [out for out in fgraph.outputs if out.owner is not None and isinstance(out.owner.op, (ModelFreeRV, ModelPotential))]
    prior = model_from_fgraph(FunctionGraph(outputs=kept, clone=False), mutate_fgraph=True)
    with without_short_trace_warning(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        logger = logging.getLogger("pymc")
        level = logger.level
        logger.setLevel(logging.ERROR)  # the pilot is not the user's run: no sampler chatter
        try:
            idata = pm.sample(draws=draws, tune=tune, chains=1, model=prior, initvals=dict(initvals),
                              init="adapt_diag", random_seed=0, progressbar=False, discard_tuned_samples=False,
                              compute_convergence_checks=False, return_inferencedata=True)
        finally:
            logger.setLevel(level)
    runs = [idata[group] for group in ("warmup_posterior", "posterior") if group in idata]
    return [
        name for name in names
        if all(np.array_equal(np.asarray(run[name].values),
                              np.broadcast_to(np.asarray(initvals[name]), run[name].shape)) for run in runs)
    ]


def rhat_by_variable(posterior: xr.Dataset, names) -> dict[str, float]:
    """The largest rank-normalised R-hat (Vehtari et al. 2021, as :func:`arviz.rhat` computes it)
    of each variable in ``names`` that ``posterior`` holds; a coordinate that is constant (R-hat
    NaN) is skipped, and a variable with no finite R-hat is left out. Empty with one chain."""
    import arviz as az

    names = [n for n in names if n in posterior.data_vars]
    if not names or posterior.sizes.get("chain", 1) < 2:
        return {}
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore", RuntimeWarning)  # a constant coordinate: R-hat is NaN, skipped
        rhat = az.rhat(posterior[names])
    out = {}
    for n in names:
        v = np.asarray(rhat[n].values, float)
        if v.size and np.any(np.isfinite(v)):
            out[n] = float(np.nanmax(v))
    return out


def starts_at_initvals(model, kwargs: Mapping[str, Any]) -> bool:
    """Whether :func:`run_mcmc` with these keywords starts every chain exactly at the initial
    values (no jitter): PyMC's NUTS with ``init="adapt_diag"`` (the default here behind an
    indicator potential) or the JAX samplers with ``jitter=False``."""
    sampler = kwargs.get("nuts_sampler", "pymc")
    if sampler == "pymc":
        return kwargs.get("init", "adapt_diag" if _has_region_wall(model) else "auto") in ("adapt_diag", "adapt_full")
    if sampler in ("numpyro", "blackjax"):
        return _has_region_wall(model) and not (kwargs.get("nuts_sampler_kwargs") or {}).get("jitter", False)
    return False


class _ShortTraceFilter(logging.Filter):
    """Drops PyMC's "Only N samples per chain" warning: a release has as many draws as its
    privacy budget allows (``draws`` in ``private(...)``), which pymc_dp, not the user's call to
    ``sample``, decides; the diagnostics advice does not apply to it."""

    def filter(self, record: logging.LogRecord) -> bool:
        return "samples per chain. Reliable r-hat" not in record.getMessage()


@contextlib.contextmanager
def without_short_trace_warning():
    """Silence the two warnings about short runs for one call, nothing else.

    A context manager: inside it, PyMC's "Only N samples per chain. Reliable r-hat ..." log
    record and ArviZ's "More chains (c) than draws (d)" warning are filtered out. Short runs are
    intended where it is used (a release of 2 draws on 2 chains keeps 1 draw per chain), and
    the arrays are laid out ``(chain, draw)`` by construction, which is what ArviZ's shape
    guess doubts.
    """
    logger = logging.getLogger("pymc.sampling.mcmc")
    flt = _ShortTraceFilter()
    logger.addFilter(flt)
    try:
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message=r"More chains \(\d+\) than draws \(\d+\)", category=UserWarning)
            yield
    finally:
        logger.removeFilter(flt)


#: the suffix of the indicator potentials of Theta_L (pymc_dp.rewrite): 0 inside, -inf outside
_REGION_WALL = "__dp_theta_L"


def _has_region_wall(model) -> bool:
    return any((pot.name or "").endswith(_REGION_WALL) for pot in model.potentials)


def _blackjax_chain_method(sampler_kwargs, chains: int) -> dict:
    """Run blackjax's chains vectorised when JAX has fewer devices than chains.

    PyMC maps blackjax chains over devices (``pmap``) and asks XLA for enough host devices when
    it is imported; if JAX was started before that (importing blackjax or any JAX computation
    does it), there is one CPU device and ``pmap`` over two chains fails ("cannot select an axis
    to squeeze out"). numpyro falls back to sequential chains by itself.
    """
    import jax

    sampler_kwargs = dict(sampler_kwargs or {})
    if "chain_method" not in sampler_kwargs and chains > jax.local_device_count():
        sampler_kwargs["chain_method"] = "vectorized"
    return sampler_kwargs


def _sample_nutpie(model, *, draws, tune, chains, initvals, **kwargs) -> xr.Dataset:
    """``pm.sample(nuts_sampler="nutpie")`` with the starting values actually used."""
    import nutpie
    from pymc.util import _get_seeds_per_chain

    kwargs = dict(kwargs)
    kwargs.pop("nuts_sampler", None)
    random_seed = kwargs.pop("random_seed", None)
    target_accept = kwargs.pop("target_accept", 0.8)
    progressbar = kwargs.pop("progressbar", False)
    cores = kwargs.pop("cores", None)
    sampler_kwargs = dict(kwargs.pop("nuts_sampler_kwargs", None) or {})
    ignored = sorted(set(kwargs) & _NUTPIE_IGNORED)
    unknown = sorted(set(kwargs) - _NUTPIE_IGNORED)
    if unknown:
        raise TypeError(f"nuts_sampler='nutpie' does not take {unknown}; pass nutpie's own options in nuts_sampler_kwargs.")
    if ignored:
        warnings.warn(f"{ignored} mean nothing to nutpie and are ignored.", UserWarning, stacklevel=3)
    compile_kwargs = {k: sampler_kwargs.pop(k) for k in ("backend", "gradient_backend") if k in sampler_kwargs}
    sampler_kwargs.setdefault("save_warmup", False)
    if cores is not None:
        sampler_kwargs.setdefault("cores", int(cores))
    compiled = nutpie.compile_pymc_model(model, initial_points=dict(initvals), **compile_kwargs)
    idata = nutpie.sample(
        compiled,
        draws=draws,
        tune=tune,
        chains=chains,
        target_accept=target_accept,
        # the seed pm.sample(nuts_sampler="nutpie") would pass, for the same random_seed
        seed=_get_seeds_per_chain(random_seed, 1)[0],
        progress_bar=bool(progressbar),
        **sampler_kwargs,
    )
    return idata.posterior


def posterior_only(posterior: xr.Dataset, model: pm.Model) -> xr.Dataset:
    """A fresh Dataset of the model's free RVs and Deterministics: values and coordinates only.

    Transformed values, sampler-specific extras and every attribute (``sampling_time``,
    library versions, ...) are left behind.
    """
    names = [v.name for v in (*model.free_RVs, *model.deterministics)]
    missing = [n for n in names if n not in posterior.data_vars]
    if missing:
        raise RuntimeError(f"the sampler returned no draws of {missing}")
    data_vars = {n: (posterior[n].dims, np.array(posterior[n].values)) for n in names}
    dims = {d for n in names for d in posterior[n].dims}
    coords = {d: np.array(posterior[d].values) for d in dims if d in posterior.coords}
    return xr.Dataset(data_vars, coords=coords)


@contextlib.contextmanager
def quiet_sampler():
    """PyMC's sampler messages (logger ``pymc`` at INFO) held back inside the block: a first
    stage's run, a prior-predictive simulation for advice, and every run of an audit are not
    the user's release."""
    logger = logging.getLogger("pymc")
    level = logger.level
    logger.setLevel(logging.WARNING)
    try:
        yield
    finally:
        logger.setLevel(level)
