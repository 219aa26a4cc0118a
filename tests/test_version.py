"""pymc_dp.version: the package's version (one source, the one pyproject.toml declares) and the
versions of the libraries a certificate states."""

from __future__ import annotations

import importlib
import tomllib
from importlib.metadata import version
from pathlib import Path

import pymc_dp
import pymc_dp.version

ROOT = Path(__file__).resolve().parents[1]


def test_one_version_everywhere():
    declared = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    assert pymc_dp.__version__ == pymc_dp.version.__version__ == declared


def test_software_versions_are_the_installed_ones():
    versions = pymc_dp.version.software_versions()
    assert set(versions) == {"pymc_dp", "pymc", "pytensor", "arviz", "numpy"}
    assert versions["pymc_dp"] == pymc_dp.__version__
    for name in ("pymc", "pytensor", "arviz", "numpy"):
        assert versions[name] == importlib.import_module(name).__version__ == version(name), name
