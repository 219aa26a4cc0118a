"""Try pymc_dp on every gallery model: build at a small size, certify, print one line each.

Run from the repository root: ``python -m examples.gallery.try_all`` (or
``python examples/gallery/try_all.py``). Nothing is sampled and nothing is charged
(``ledger=None``); each line says whether ``make_private`` certified the model (epsilon per draw,
the solver of each factor, the prior mass kept) or which typed error refused it, and how long it
took.
"""

from __future__ import annotations

import os
import sys
import time
import traceback
import warnings

if __package__ in (None, ""):  # run as a script: make ``examples.gallery`` importable
    sys.path.insert(0, os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..")))

import pymc_dp  # noqa: E402
from examples.gallery import MODELS  # noqa: E402

EPSILON = 10.0
DRAWS = 10

#: rows per model: n ~ 300, the AR series 500, radon at its full 919 rows (85 counties)
SIZES = {"ar": 500, "radon": None}
DEFAULT_N = 300


def cases():
    """(label, module, builder, n): every module's ``build`` and the extra builders."""
    for name, mod in MODELS.items():
        n = SIZES.get(name, DEFAULT_N)
        yield name, mod, mod.build, n
        if name == "radon":
            yield "radon.varying_intercept_slope", mod, mod.build_varying_intercept_slope, n
            yield "radon.covariation_intercept_slope", mod, mod.build_covariation_intercept_slope, n
        if name == "ordinal":
            yield "ordinal.probit", mod, mod.build_probit, n


def _describe(pmod) -> str:
    cert = pmod.certificate
    solvers = ", ".join(f"{f.name}[{f.family}]: {f.solver} (L={f.lipschitz:.3g})" for f in cert.factors)
    return (
        f"certified  eps/draw={cert.epsilon_per_draw:.4g}  prior_mass_kept={cert.prior_mass_kept:.4g} "
        f"({cert.prior_mass_method})  sampler={cert.sampler}  factors: {solvers}"
    )


def main(verbose: bool = False) -> None:
    warnings.filterwarnings("ignore")
    print(f"pymc_dp {pymc_dp.__version__}: make_private(epsilon={EPSILON}, draws={DRAWS}, ledger=None)")
    total = time.perf_counter()
    for label, mod, builder, n in cases():
        data = mod.make_data(n)
        model = builder(data)
        rows = max(len(v.get_value()) for v in model.data_vars)
        t0 = time.perf_counter()
        try:
            pmod = pymc_dp.make_private(
                model, epsilon=EPSILON, draws=DRAWS, data=mod.DOMAINS, public=mod.PUBLIC, ledger=None
            )
            line = _describe(pmod)
        except Exception as err:  # noqa: BLE001  (a refusal or a crash is a finding either way)
            msg = " ".join(str(err).split())
            kind = "refused" if isinstance(err, pymc_dp.PrivacyError) else "CRASHED"
            line = f"{kind}  {type(err).__name__}: {msg}"
            if verbose and kind == "CRASHED":
                traceback.print_exc()
        dt = time.perf_counter() - t0
        print(f"{label:<36} n={rows:<5} {dt:7.1f}s  {line}", flush=True)
        if line.startswith("certified"):
            for f in pmod.certificate.factors:
                trunc = "; ".join(f.truncation)
                print(f"{'':<44}{f.name} truncation: {trunc[:400]}{' ...' if len(trunc) > 400 else ''}", flush=True)
    print(f"total {time.perf_counter() - total:.1f}s")


if __name__ == "__main__":
    main(verbose="-v" in sys.argv)
