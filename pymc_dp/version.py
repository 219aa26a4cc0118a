"""The package's version, and the versions of the libraries a certificate or a release is computed with.

A leaf module (it imports no other module of pymc_dp), so that every stage can state its
versions without importing the package's top.
"""

from __future__ import annotations

__all__ = ["__version__", "software_versions"]

__version__ = "0.1.0"


def software_versions() -> dict[str, str]:
    """The versions a certificate is computed with (public): pymc_dp, PyMC, PyTensor, ArviZ, NumPy."""
    import arviz as az
    import numpy as np
    import pymc as pm
    import pytensor

    return {
        "pymc_dp": __version__,
        "pymc": pm.__version__,
        "pytensor": pytensor.__version__,
        "arviz": az.__version__,
        "numpy": np.__version__,
    }
