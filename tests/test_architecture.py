"""The package's shape: an acyclic import graph, layers that follow the data flow, no private names across
modules, and every module importable on its own."""

from __future__ import annotations

import pytest
import ast
import functools
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PKG = ROOT / "mcacct"

# The data flow, bottom to top, room by room: a module may import only from its own layer or below (module-level
# imports). core (validate, precision, platform, rates) is the floor; kernels, the batch samplers, the strategies, the
# statistics (exact accumulators and confidence bounds) and the PLD accountant (with its individual and DPIS users)
# depend on nothing but the floor -> schemes (mcacct.schemes.registry included) -> engine -> interop (jax-privacy's
# batch selection to schemes and problems) -> evr and composition (Monte Carlo estimates with PLDs) -> jobs and the
# front door's get_noise_multiplier -> report -> cli.
LAYERS = [
    ("mcacct.core", 0),
    ("mcacct.kernels", 1), ("mcacct.training", 1), ("mcacct.strategies", 1), ("mcacct.statistics", 1),
    ("mcacct.pld", 1), ("mcacct.individual", 1), ("mcacct.dpis", 1),
    ("mcacct.schemes", 2),
    ("mcacct.engine", 3),
    ("mcacct.interop", 4),
    ("mcacct.evr", 5), ("mcacct.composition", 5),
    ("mcacct.jobs", 6), ("mcacct.noise_multiplier", 6),
    ("mcacct.report", 7),
    ("mcacct.cli", 8), ("mcacct.__main__", 8),
]
#: the root holds only the package's front door
FRONT_DOOR = {"mcacct", "mcacct.__main__", "mcacct.noise_multiplier"}


def _layer(mod: str) -> int:
    for prefix, layer in LAYERS:  # most specific first where it matters (pld.composition before pld)
        if mod == prefix or mod.startswith(prefix + "."):
            return layer
    raise AssertionError(f"module {mod} has no layer: add its package to LAYERS")


def _modules() -> dict[str, Path]:
    out = {}
    for path in PKG.rglob("*.py"):
        parts = path.relative_to(ROOT).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


MODULES = _modules()


def _resolve(module: str, names: list[str]) -> set[str]:
    """The mcacct modules an ``from module import names`` statement loads (submodules named in ``names``)."""
    deps = {module} if module in MODULES else set()
    for n in names:
        if f"{module}.{n}" in MODULES:
            deps.add(f"{module}.{n}")
            deps.discard(module) if module == "mcacct" else None
    return deps


@functools.lru_cache(maxsize=None)
def _tree(path: Path) -> ast.Module:
    """The module's syntax tree, parsed once per run (the tests below read it many times; none changes it)."""
    return ast.parse(path.read_text())


def _imports(path: Path, top_level_only: bool) -> set[str]:
    tree = _tree(path)
    nodes = tree.body if top_level_only else list(ast.walk(tree))
    deps: set[str] = set()
    for node in nodes:
        if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "mcacct":
            deps |= _resolve(node.module, [a.name for a in node.names])
        elif isinstance(node, ast.Import):
            deps |= {a.name for a in node.names if a.name.startswith("mcacct.") and a.name in MODULES}
    # the root package's __init__ re-exports the public API; every import passes through it
    deps.discard("mcacct")
    return deps


@functools.lru_cache(maxsize=None)
def _graph(top_level_only: bool) -> dict[str, set[str]]:
    """The import graph (computed once per run and shared by the tests, which only read it)."""
    return {m: {d for d in _imports(p, top_level_only) if d != m} for m, p in MODULES.items() if m != "mcacct"}


def _cycles(graph: dict[str, set[str]]) -> list[set[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index, low, stack, on, out, counter = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = set()
            while True:
                w = stack.pop()
                on.discard(w)
                comp.add(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(comp)

    sys.setrecursionlimit(10_000)
    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def test_import_graph_has_no_cycle_even_through_deferred_imports():
    assert _cycles(_graph(top_level_only=True)) == []
    assert _cycles(_graph(top_level_only=False)) == []


def test_layers_follow_the_data_flow():
    bad = [(m, d) for m, deps in _graph(top_level_only=True).items() for d in deps if _layer(d) > _layer(m)]
    assert bad == [], "imports against the data flow: " + ", ".join(f"{m} -> {d}" for m, d in bad)


def test_kernels_import_no_scheme_and_the_validator_imports_nothing():
    for m, deps in _graph(top_level_only=False).items():
        if m.startswith("mcacct.kernels"):
            assert all(d.startswith(("mcacct.kernels", "mcacct.core")) for d in deps), (m, deps)
    assert _graph(top_level_only=False)["mcacct.core.validate"] == set()
    assert _graph(top_level_only=False)["mcacct.core.precision"] == set()  # jax only: every layer may use it
    assert _graph(top_level_only=False)["mcacct.core.platform"] == set()   # jax only: every layer may use it


def _room(mod: str) -> str:
    """A module's room: its first package below mcacct (a root module is a room of its own)."""
    return ".".join(mod.split(".")[:2])


def test_rooms_have_no_cycle_and_the_root_is_the_front_door():
    """Rooms (``mcacct.<room>``) import each other along the data flow only: no cycle between rooms, even through
    deferred imports; the root holds the front door alone (the package, ``__main__``, get_noise_multiplier)."""
    rooms: dict[str, set[str]] = {}
    for m, deps in _graph(top_level_only=False).items():
        rooms.setdefault(_room(m), set()).update(_room(d) for d in deps if _room(d) != _room(m))
    assert _cycles(rooms) == [], _cycles(rooms)
    root = {m for m, p in MODULES.items() if p.parent == PKG}
    assert root == FRONT_DOOR, sorted(root - FRONT_DOOR)


def test_no_private_name_is_used_across_modules():
    """``from mcacct.x import _name`` and ``module._name`` on an imported mcacct module are refused."""
    bad = []
    for m, path in MODULES.items():
        tree = _tree(path)
        aliases = {}
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("mcacct"):
                for a in node.names:
                    if a.name.startswith("_"):
                        bad.append(f"{m}: from {node.module} import {a.name}")
                    if f"{node.module}.{a.name}" in MODULES or node.module == "mcacct":
                        aliases[a.asname or a.name] = f"{node.module}.{a.name}"
            elif isinstance(node, ast.Import):
                for a in node.names:
                    if a.name.startswith("mcacct"):
                        aliases[a.asname or a.name.split(".")[0]] = a.name
        for node in ast.walk(tree):
            if (isinstance(node, ast.Attribute) and node.attr.startswith("_") and not node.attr.startswith("__")
                    and isinstance(node.value, ast.Name) and node.value.id in aliases):
                bad.append(f"{m}: {node.value.id}.{node.attr}")
    assert bad == [], bad


def test_modules_are_small_or_homogeneous():
    """About 400 lines per module; the exceptions are lists of one class per mechanism or per sampler."""
    allowed = {"mcacct.pld.specs"}
    long = {m: len(p.read_text().splitlines()) for m, p in MODULES.items()}
    big = {m: n for m, n in long.items() if n > 450 and m not in allowed}
    assert big == {}, big


@pytest.mark.slow
def test_every_module_imports_in_isolation():
    """Each mcacct module imported first, in a fresh interpreter state for mcacct, in a subprocess.

    Importing ``mcacct.x.y`` first runs the package's ``__init__`` first (Python imports the parents of a module
    before it), and finds ``mcacct.x.y`` loaded if that ``__init__`` loaded it: for every module that a fresh
    ``import mcacct`` loads, importing it first executes exactly a fresh ``import mcacct``, statement for statement.
    One fresh ``import mcacct`` therefore decides all of those (about 75 of the ~110 modules; each fresh import
    re-executes the whole package, ~0.3-0.5 s), and the modules it does not load are each imported first in a
    fresh state of their own. Where ``import mcacct`` fails, every module is imported on its own, as before."""
    code = """
import importlib, sys, traceback
names = sys.argv[1:]
bad = []

def fresh():
    for k in [k for k in sys.modules if k == "mcacct" or k.startswith("mcacct.")]:
        del sys.modules[k]

fresh()
try:
    importlib.import_module("mcacct")
    covered = {k for k in sys.modules if k == "mcacct" or k.startswith("mcacct.")}
except Exception:
    covered = set()
for name in names:
    if name in covered:
        continue
    fresh()
    try:
        importlib.import_module(name)
    except Exception:
        bad.append(name + ": " + traceback.format_exc(limit=3))
print(len(names))
print("\\n".join(bad))
"""
    names = sorted(MODULES)
    r = subprocess.run([sys.executable, "-c", code, *names], capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert r.returncode == 0, r.stderr[-2000:]
    count, *bad = r.stdout.split("\n", 1)
    assert int(count) == len(names) >= 40
    assert not "".join(bad).strip(), "".join(bad)


def _concrete_scheme_names() -> set[str]:
    """Class names defined in mcacct/schemes/ (the concrete schemes and their helpers)."""
    names = set()
    for m, path in MODULES.items():
        if m.startswith("mcacct.schemes."):
            names |= {n.name for n in _tree(path).body if isinstance(n, ast.ClassDef)}
    return names - {"AccountedScheme", "Draws", "LossErrorParams", "SchemeInfo"}


def _scheme_attribute_names() -> set[str]:
    """Every field and public member of the classes defined in mcacct/schemes/ (fields, methods, properties), except
    the entries' data types (:mod:`mcacct.schemes.entry`, :mod:`mcacct.schemes.flags`), which describe how a scheme
    is offered, and the mechanism's records (:mod:`mcacct.schemes.mechanism`: the engine's kernel options and the
    functions a scheme gives), which are no scheme."""
    names = set()
    for m, path in MODULES.items():
        if not m.startswith("mcacct.schemes.") or m in ("mcacct.schemes.entry", "mcacct.schemes.flags",
                                                                    "mcacct.schemes.mechanism"):
            continue
        for cls in (n for n in _tree(path).body if isinstance(n, ast.ClassDef)):
            for node in cls.body:
                if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
                    names.add(node.target.id)
                elif isinstance(node, (ast.FunctionDef, ast.Assign)):
                    names |= {node.name} if isinstance(node, ast.FunctionDef) else {
                        tg.id for tg in node.targets if isinstance(tg, ast.Name)}
    return {n for n in names if not n.startswith("_")}


def test_nothing_outside_schemes_guesses_a_scheme():
    """Outside mcacct/schemes/ nothing guesses what a scheme is: no ``getattr`` with a default and no ``hasattr`` of
    a scheme's field or member (every consumer reads the contract, e.g. ``scheme.summary()``), and no
    ``isinstance``/``issubclass`` on a concrete scheme class. The cli, report, interop and the front door
    included."""
    concrete, attrs = _concrete_scheme_names(), _scheme_attribute_names()
    bad = []
    for m, path in MODULES.items():
        if m.startswith("mcacct.schemes"):
            continue
        for node in ast.walk(_tree(path)):
            if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)):
                continue
            args = node.args
            named = args[1].value if len(args) >= 2 and isinstance(args[1], ast.Constant) else None
            if node.func.id == "getattr" and len(args) + len(node.keywords) >= 3 and named in attrs:
                bad.append(f"{m}:{node.lineno}: getattr(..., {named!r}, default)")
            if node.func.id == "hasattr" and named in attrs:
                bad.append(f"{m}:{node.lineno}: hasattr(..., {named!r})")
            if node.func.id in ("isinstance", "issubclass") and len(args) == 2:
                kinds = args[1].elts if isinstance(args[1], ast.Tuple) else [args[1]]
                hit = {k.id if isinstance(k, ast.Name) else getattr(k, "attr", None) for k in kinds} & concrete
                if hit:
                    bad.append(f"{m}:{node.lineno}: {node.func.id} on {sorted(hit)}")
    assert bad == [], bad


def test_engine_evr_and_jobs_read_only_the_scheme_contract():
    """No ``getattr`` with a default and no ``isinstance`` on a concrete scheme in engine/, evr/ and jobs/: they
    read the contract of :mod:`mcacct.schemes.base`, never guess a scheme's properties."""
    concrete = _concrete_scheme_names()
    bad = []
    for m, path in MODULES.items():
        if not m.startswith(("mcacct.engine", "mcacct.evr", "mcacct.jobs")):
            continue
        for node in ast.walk(_tree(path)):
            if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)):
                continue
            if node.func.id == "getattr" and len(node.args) + len(node.keywords) >= 3:
                bad.append(f"{m}:{node.lineno}: getattr with a default")
            if node.func.id in ("isinstance", "issubclass") and len(node.args) == 2:
                kinds = node.args[1].elts if isinstance(node.args[1], ast.Tuple) else [node.args[1]]
                named = {k.id if isinstance(k, ast.Name) else getattr(k, "attr", None) for k in kinds}
                if named & concrete:
                    bad.append(f"{m}:{node.lineno}: {node.func.id} on {sorted(named & concrete)}")
    assert bad == [], bad


def test_sources_and_docs_hold_no_control_characters():
    """No carriage return, form feed, vertical tab, bell, backspace or NUL in a tracked source or doc: they come from
    editing scripts that wrote ``\\r`` or ``\\f`` into a non-raw string (a docstring's ``\\rceil`` had become a carriage
    return, found at stop 75) and are invisible in most views."""
    bad = {b"\r": "CR", b"\x0c": "FF", b"\x0b": "VT", b"\x07": "BEL", b"\x08": "BS", b"\x00": "NUL"}
    files = [p for pattern in ("mcacct/**/*.py", "tests/**/*.py", "benchmarks/**/*.py", "docs/**/*.md", "*.md")
             for p in ROOT.glob(pattern)]
    found = [f"{p.relative_to(ROOT)}: {name}" for p in files for ch, name in bad.items() if ch in p.read_bytes()]
    assert not found, found
