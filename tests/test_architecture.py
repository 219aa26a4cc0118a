"""The package's shape: layers that import only downward, no cycle, no private names across modules,
modules of a readable size, and no citation of a document outside the repository.

These checks read the source (``ast``), not the running package, so they count every import
statement, including the ones inside functions: a lazy import that dodges a cycle is still a
cycle in the design. When a check fails, fix the design (move the shared name down to a module
both sides may import, give it a public name), not the table below -- unless the table is what
is wrong (a new module needs its layer).
"""

from __future__ import annotations

import ast
import fnmatch
import subprocess
from collections import defaultdict
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "pymc_dp"

#: The layers, bottom first. A module may import modules of its own layer or of a lower one, never
#: of a higher one; within a layer the imports must not form a cycle. Patterns name modules
#: relative to ``pymc_dp`` (``""`` is the package itself); ``x.*`` is every module of subpackage x.
LAYERS: list[tuple[str, tuple[str, ...]]] = [
    ("leaves", ("exceptions", "version", "seeds")),
    ("values and records", ("domains", "units", "accounting", "stochastic", "metric", "certificate", "record", "chunks", "fingerprint")),
    ("ledger, noise, sampler plumbing", ("ledger", "sampling", "mechanisms.noise", "mechanisms.sensitivity", "mechanisms.logistic_bounds",
                                         "report_layout")),
    ("per-distribution rules", ("predictor", "intervals", "rules", "rules.*")),
    ("the factor graph", ("graph_checks", "factors", "constraints", "lift")),
    ("regions and truncation", ("region_context", "masses", "potential", "scalar", "location", "reference",
                                "oscillation", "boxes", "truncate", "split", "rewrite", "contamination",
                                "contamination_estimate", "exact", "exact.*")),
    ("certification, data, release, report", ("preprocess", "private_data", "release", "privacy_report",
                                               "certification", "refutation", "refutation_records")),
    ("posterior sampling", ("core", "mechanisms.base", "mechanisms.bayesnet")),
    ("mechanisms", ("mechanisms.updates", "mechanisms.counts", "mechanisms.statistics", "mechanisms.censored_statistics", "mechanisms.histogram", "mechanisms.table", "mechanisms.regression",
                    "mechanisms.refined", "mechanisms.logistic", "mechanisms.pass_glm", "mechanisms.map", "mechanisms.localized", "mechanisms.plan_release", "mechanisms.stochastic", "mechanisms.metric")),
    ("choosing, auditing, looking", ("mechanisms", "mechanisms.paths", "mechanisms.auto", "mechanisms.preview", "sweep", "plots", "query", "audits",
                                     "audits.*")),
    ("the public face", ("", "auditing", "demo")),
]

#: Modules allowed over MAX_LINES: catalogues of same-shaped items (one rule per distribution,
#: registered by singledispatch, each with its derivation), which read best whole.
CATALOGUES = {"rules/mixture.py", "rules/categorical.py", "rules/timeseries.py"}
MAX_LINES = 800

#: ``obj._name`` across modules that remain, with the reason (empty: none).
PRIVATE_ATTRIBUTE_ALLOWED: dict[tuple[str, str], str] = {}


def _modules() -> dict[str, Path]:
    out = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = list(path.relative_to(PACKAGE).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


MODULES = _modules()


def _absolute(module: str, path: Path, node: ast.ImportFrom) -> str:
    if not node.level:
        return node.module or ""
    package = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
    base = package[: len(package) - node.level + 1] if node.level > 1 else package
    return ".".join(["pymc_dp", *[p for p in base if p], *([node.module] if node.module else [])])


def _imports(module: str, path: Path) -> list[tuple[str, list[str]]]:
    """(imported module, names) of every import statement of our own package, anywhere in the file."""
    out = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            target = _absolute(module, path, node)
            if target == "pymc_dp" or target.startswith("pymc_dp."):
                out.append((target, [a.name for a in node.names]))
        elif isinstance(node, ast.Import):
            out.extend((a.name, []) for a in node.names if a.name == "pymc_dp" or a.name.startswith("pymc_dp."))
    return out


def _edges() -> dict[str, set[str]]:
    """Module -> modules it imports (``from pymc_dp import ledger`` imports ``ledger``)."""
    edges = defaultdict(set)
    for module, path in MODULES.items():
        for target, names in _imports(module, path):
            rel = target.removeprefix("pymc_dp").removeprefix(".")
            subs = [f"{rel}.{n}".lstrip(".") for n in names if f"{rel}.{n}".lstrip(".") in MODULES]
            if subs:
                edges[module].update(subs)
            if len(subs) < len(names) or not names:
                edges[module].add(rel)
    return {m: {t for t in ts if t != m} for m, ts in edges.items()}


def _layer(module: str) -> int:
    for i, (_, patterns) in enumerate(LAYERS):
        if any(fnmatch.fnmatchcase(module, p) for p in patterns):
            return i
    raise AssertionError(f"pymc_dp.{module} has no layer: add it to LAYERS in tests/test_architecture.py")


def test_every_module_has_a_layer():
    for module in MODULES:
        _layer(module)


def test_imports_go_down_only():
    upward = []
    for module, targets in _edges().items():
        for target in targets:
            if target in MODULES and _layer(target) > _layer(module):
                upward.append(f"pymc_dp.{module} ({LAYERS[_layer(module)][0]}) imports pymc_dp.{target} "
                              f"({LAYERS[_layer(target)][0]})")
    assert not upward, "upward imports:\n" + "\n".join(sorted(upward))


def test_import_graph_has_no_cycle():
    edges = _edges()
    index, low, stack, on_stack, cycles = {}, {}, [], set(), []

    def visit(v):  # Tarjan's strongly connected components
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in edges.get(v, ()):
            if w not in MODULES:
                continue
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    for v in MODULES:
        if v not in index:
            visit(v)
    assert not cycles, f"import cycles: {cycles}"


def _defined_names(tree: ast.AST) -> set[str]:
    """Names a module defines: functions, classes, assigned names and attributes it sets."""
    own = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            own.add(node.name)
        elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
            own.add(node.attr)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            own.add(node.id)
        elif isinstance(node, ast.arg):
            own.add(node.arg)
        elif isinstance(node, ast.Call) and getattr(node.func, "attr", getattr(node.func, "id", None)) in (
            "__setattr__", "setattr", "getattr", "hasattr"
        ):  # object.__setattr__(self, "_x", v) in a frozen class sets its own attribute
            own.update(a.value for a in node.args if isinstance(a, ast.Constant) and isinstance(a.value, str))
    return own


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def test_no_module_imports_another_modules_private_names():
    found = []
    for module, path in MODULES.items():
        for target, names in _imports(module, path):
            rel = target.removeprefix("pymc_dp").removeprefix(".")
            if any(_private(part) for part in rel.split(".") if part):
                found.append(f"pymc_dp.{module} imports the private module {target}")
            found.extend(f"pymc_dp.{module} imports {target}.{n}" for n in names if _private(n))
    assert not found, "private names imported across modules:\n" + "\n".join(sorted(found))


def test_no_module_reads_another_modules_private_attributes():
    found = []
    for module, path in MODULES.items():
        tree = ast.parse(path.read_text())
        own = _defined_names(tree)
        for node in ast.walk(tree):
            if not (isinstance(node, ast.Attribute) and _private(node.attr)):
                continue
            if isinstance(node.value, ast.Name) and node.value.id in ("self", "cls"):
                continue
            if node.attr in own or (module, node.attr) in PRIVATE_ATTRIBUTE_ALLOWED:
                continue
            found.append(f"pymc_dp.{module}:{node.lineno} reads .{node.attr}")
    assert not found, "private attributes of other modules' objects:\n" + "\n".join(sorted(found))


def test_modules_are_of_a_readable_size():
    long = []
    for path in PACKAGE.rglob("*.py"):
        rel = path.relative_to(PACKAGE).as_posix()
        lines = len(path.read_text().splitlines())
        if lines > MAX_LINES and rel not in CATALOGUES:
            long.append(f"pymc_dp/{rel}: {lines} lines")
    assert not long, f"modules over {MAX_LINES} lines (split them by job):\n" + "\n".join(sorted(long))


def test_catalogues_say_so():
    for rel in CATALOGUES:
        doc = ast.get_docstring(ast.parse((PACKAGE / rel).read_text())) or ""
        assert "catalogue" in doc.lower(), f"pymc_dp/{rel} is allowed over {MAX_LINES} lines as a catalogue: its docstring must say so"


def test_no_citation_points_outside_the_repository():
    outside = "DESIGN" + ".md"  # the mathematics lives in docs/theory/, cited by path and anchor
    try:
        tracked = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout.split()
    except (OSError, subprocess.CalledProcessError):
        pytest.skip("not a git checkout")
    hits = []
    for rel in tracked:
        path = ROOT / rel
        if path.suffix not in {".py", ".md", ".ipynb", ".toml", ".txt", ".rst", ".cfg", ".yml", ".yaml"} or not path.is_file():
            continue
        if outside in path.read_text(errors="ignore"):
            hits.append(rel)
    assert not hits, f"files citing {outside}, which is not in the repository: {hits}"


def test_ruff_is_clean_under_the_configured_rules():
    """``ruff check`` with ``pyproject.toml``'s rules (complexity is a separate warning run)."""
    import shutil

    ruff = shutil.which("ruff")
    if ruff is None:
        pytest.skip("ruff is not installed (it is in the test extra)")
    done = subprocess.run([ruff, "check", "--no-cache", "."], cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
