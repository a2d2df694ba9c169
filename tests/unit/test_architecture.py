"""The layers of docs/architecture.md, checked on the source (issue 22).

Every project module is parsed (``ast``, nothing is imported) and its imports are held to its
layer: the web layer (``layouts/``, ``callbacks/``, ``app.py``) reaches data through the
services only, never through a SQL driver; the application core (``services/``, ``dp_engine/``)
never imports a web framework or the web layer; the engine (``dp_engine/``) imports only numpy,
pandas, scipy and the standard library; nothing outside the ledger reads its tables (publishing
and the studio ask ``services.session`` or the ledger's methods). Module-level imports between
project modules form no circle (imports under ``if TYPE_CHECKING:`` run never and do not count;
imports inside functions are checked for their layer, not for circles)."""

from __future__ import annotations

import ast
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("dp_engine", "services", "layouts", "callbacks")
WEB = ("layouts", "callbacks", "app")
CORE = ("services", "dp_engine")
SQL = {"sqlalchemy", "psycopg", "psycopg2", "psycopg_pool", "duckdb", "sqlite3", "pyspark"}
WEB_FRAMEWORKS = {"dash", "dash_bootstrap_components", "plotly", "flask", "flask_login",
                  "flask_compress", "werkzeug"}
CORE_ALLOWED = {"werkzeug.security"}
"""Password hashing (``services/identity/users.py``): a library function, not the web."""
ENGINE_ALLOWED = {"numpy", "pandas", "scipy", "dp_engine"}
LEDGER_INSIDE = ("services.ledger.models", "services.ledger.door", "services.ledger.sql",
                 "services.ledger.chain")
"""The ledger's tables and its door's internals: outside ``services/ledger/`` only the
schema check (``services.ops.preflight``) and the door's request type (``Ask``) are used."""
LEDGER_ALLOWED = {("services.ops.preflight", "services.ledger.models"),
                  ("services.views.releases", "services.ledger.door")}
ENTRY_POINTS = {("services.cli", "app")}
"""The command line's ``serve`` starts the web app: it imports ``app`` inside that command
only (the user commands never load the web layer)."""


@dataclass(frozen=True)
class Import:
    """One import statement's target: the module, the names taken from it, where it is."""

    module: str
    names: tuple[str, ...]
    line: int
    top_level: bool


def project_modules(root: Path = ROOT) -> dict[str, Path]:
    """Dotted name -> file of every module of the product (tests and bench excluded)."""
    found = {"app": root / "app.py"}
    for package in PACKAGES:
        for path in sorted((root / package).rglob("*.py")):
            parts = path.relative_to(root).with_suffix("").parts
            name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
            found[name] = path
    return found


def imports_of(name: str, path: Path) -> list[Import]:
    """Every import of a module, marked top-level (run when the module is imported) or not."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    out: list[Import] = []

    def absolute(node: ast.ImportFrom) -> str:
        if not node.level:
            return node.module or ""
        base = package[:len(package) - (node.level - 1)]
        return ".".join(base + ([node.module] if node.module else []))

    def visit(nodes: list[ast.stmt], top: bool) -> None:
        for node in nodes:
            if isinstance(node, ast.Import):
                out.extend(Import(a.name, (), node.lineno, top) for a in node.names)
            elif isinstance(node, ast.ImportFrom):
                out.append(Import(absolute(node), tuple(a.name for a in node.names),
                                  node.lineno, top))
            elif isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
                visit(node.body, False)
                visit(node.orelse, top)
            elif isinstance(node, ast.If | ast.Try | ast.With):
                for block in ("body", "orelse", "finalbody"):
                    visit(getattr(node, block, []), top)
                for handler in getattr(node, "handlers", []):
                    visit(handler.body, top)
            else:
                for child in ast.iter_child_nodes(node):
                    if isinstance(child, ast.stmt):
                        visit([child], False)

    visit(tree.body, True)
    return out


MODULES = project_modules()
IMPORTS = {name: imports_of(name, path) for name, path in MODULES.items()}


def _layer_breaches(modules: dict[str, list[Import]]) -> list[str]:
    found = []
    for name, imports in modules.items():
        layer = name.split(".")[0]
        for imp in imports:
            root = imp.module.split(".")[0]
            where = f"{name}:{imp.line} imports {imp.module}"
            if layer in WEB and root in SQL:
                found.append(f"{where} (the web layer asks the services, never SQL)")
            if layer in CORE and root in WEB_FRAMEWORKS and not any(
                    imp.module == a or imp.module.startswith(a + ".") for a in CORE_ALLOWED):
                found.append(f"{where} (the core has no web framework)")
            if layer in CORE and root in WEB and not (
                    (name, imp.module) in ENTRY_POINTS and not imp.top_level):
                found.append(f"{where} (the core never imports the web layer)")
            if not name.startswith("services.ledger") and imp.module in LEDGER_INSIDE \
                    and (name, imp.module) not in LEDGER_ALLOWED:
                found.append(f"{where} (ask the session or the ledger's methods, not its "
                             "tables)")
            if layer == "dp_engine" and root not in ENGINE_ALLOWED \
                    and root not in sys.stdlib_module_names:
                found.append(f"{where} (the engine is numpy, pandas, scipy and stdlib)")
    return found


def _graph(modules: dict[str, list[Import]], known: set[str]) -> dict[str, set[str]]:
    """Module -> project modules it imports at its top level (``from p import m`` of a
    submodule ``p.m`` counts as importing ``p.m``)."""
    graph: dict[str, set[str]] = {}
    for name, imports in modules.items():
        deps: set[str] = set()
        for imp in (i for i in imports if i.top_level):
            subs = [f"{imp.module}.{n}" for n in imp.names if f"{imp.module}.{n}" in known]
            deps.update(subs)
            if len(subs) < len(imp.names) or not imp.names:
                target = imp.module
                while target and target not in known:
                    target = target.rpartition(".")[0]
                if target:
                    deps.add(target)
        graph[name] = deps - {name}
    return graph


def _circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    circles: list[list[str]] = []
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                part = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    part.append(member)
                    if member == node:
                        break
                if len(part) > 1:
                    circles.append(sorted(part))
    return circles


def test_each_layer_imports_only_what_it_may():
    assert _layer_breaches(IMPORTS) == []


def test_no_import_circle_among_project_modules():
    assert _circles(_graph(IMPORTS, set(MODULES))) == []


def test_the_checks_see_every_kind_of_breach(tmp_path):
    """A web module with SQL, a core module with Dash (even inside a function), an engine
    module with requests and a two-module circle are each caught."""
    files = {
        "callbacks/page.py": "import sqlalchemy\n",
        "services/thing.py": "def f():\n    from dash import html\n",
        "dp_engine/x.py": "from . import y\nimport requests\n",
        "dp_engine/y.py": "from dp_engine.x import f\n",
        "dp_engine/z.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                          "    from dp_engine.x import f\n",
        "services/publish/x.py": "from services.ledger.models import releases\n",
        "app.py": "",
    }
    for rel, text in files.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)
    mods = project_modules(tmp_path)
    imports = {n: imports_of(n, p) for n, p in mods.items()}
    breaches = "\n".join(_layer_breaches(imports))
    assert "callbacks.page:1 imports sqlalchemy" in breaches
    assert "services.thing:2 imports dash" in breaches
    assert "dp_engine.x:2 imports requests" in breaches
    assert "services.publish.x:1 imports services.ledger.models" in breaches
    assert _circles(_graph(imports, set(mods))) == [["dp_engine.x", "dp_engine.y"]]


@pytest.mark.parametrize("name", ["services.session", "services.ledger.door", "dp_engine.sound"])
def test_known_modules_are_scanned(name):
    assert name in MODULES and IMPORTS[name]
