"""The docs say what the code does (issue 22): every environment setting is listed in the
README, no doc points at a file the repository does not have, and the accounting numbers the
docs state are the code's constants."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from dp_engine.sound import CALIBRATION_PILOT_EPSILON, CALIBRATION_SIZE_EPSILON, DEFAULT_CEILINGS
from services import config
from services.identity.roles import Role
from services.ledger.policy import DEFAULT_DATASET_CAP, DEFAULT_LIMITS

ROOT = Path(__file__).resolve().parents[2]
PRODUCT = ["app.py", "services", "callbacks", "layouts", "dp_engine"]
READERS = {"text", "flag", "number", "path", "choice"}
"""``services.config._Env``'s typed reads: their first argument is a variable's name."""


def _product_files() -> list[Path]:
    out = []
    for part in PRODUCT:
        path = ROOT / part
        out += [path] if path.is_file() else sorted(path.rglob("*.py"))
    return out


def _variables_read() -> dict[str, str]:
    """Every environment variable the product reads by a literal name -> where."""
    found: dict[str, str] = {}
    for path in _product_files():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if not isinstance(node, ast.Call) or not node.args:
                continue
            name = node.args[0]
            if not (isinstance(name, ast.Constant) and isinstance(name.value, str)):
                continue
            func = ast.unparse(node.func)
            if func in ("os.environ.get", "os.getenv") or (
                    path.name == "config.py" and isinstance(node.func, ast.Attribute)
                    and node.func.attr in READERS):
                found.setdefault(name.value, f"{path.relative_to(ROOT)}:{node.lineno}")
    return found


def _readme_settings() -> set[str]:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    table = text.split("## Configuration", 1)[1].split("\n## ", 1)[0]
    return {m for row in table.splitlines() if row.startswith("| `")
            for m in re.findall(r"`([A-Z][A-Z0-9_]+)`", row.split(" | ")[0])}


def test_every_environment_setting_is_listed_in_the_readme():
    read = _variables_read()
    assert {"COHORT_BUDGETS", "DATABASE_URL", "COHORT_LOG_FORMAT"} <= set(read)
    listed = _readme_settings()
    assert {n: w for n, w in read.items() if n not in listed} == {}
    assert [n for n in config.SETTINGS if n not in listed] == []
    assert [n for n in read if n not in config.SETTINGS] == []   # preflight knows them all


def test_no_doc_points_at_a_file_the_repository_does_not_have():
    texts = [p for p in ROOT.rglob("*") if p.suffix in (".md", ".py") and not {
        ".venv", ".git", "tests"} & set(p.relative_to(ROOT).parts)]
    missing = []
    for path in texts:
        for ref in set(re.findall(r"\b([A-Za-z0-9_/.-]+\.md)\b",
                                  path.read_text(encoding="utf-8", errors="replace"))):
            if not list(ROOT.rglob(Path(ref).name)):
                missing.append(f"{path.relative_to(ROOT)}: {ref}")
    assert missing == []


def _g(x: float) -> str:
    return f"{x:g}"


def test_the_accounting_numbers_are_the_codes():
    doc = " ".join((ROOT / "docs" / "accounting.md").read_text(encoding="utf-8").split())
    readme = " ".join((ROOT / "README.md").read_text(encoding="utf-8").split())
    size, pilot = _g(CALIBRATION_SIZE_EPSILON), _g(CALIBRATION_PILOT_EPSILON)
    collab, third = (_g(DEFAULT_LIMITS[r]) for r in (Role.COLLABORATOR, Role.THIRD_PARTY))
    cap = _g(DEFAULT_DATASET_CAP)
    assert f"the DP number of records (ε {size})" in doc
    assert f"every numeric column (ε {pilot} each)" in doc
    assert f"a **grouping's DP sizes** (ε {size})" in doc
    assert f"| collaborator budget (shared) | **{collab}** |" in doc
    assert f"| third-party budget (shared) | **{third}** |" in doc
    assert f"| dataset cap | **{cap}** |" in doc
    assert f"| per-view ceiling | {' / '.join(_g(DEFAULT_CEILINGS[t]) for t in (0, 1, 2))} |" \
        in doc
    assert f"collaborator {collab}, third party {third}, owner unlimited" in readme
    assert f"the DP number of records (ε {size})" in readme
    assert f"DP pilot of each numeric column (ε {pilot} each" in readme
    assert f"a grouping's DP sizes (ε {size})" in readme
    assert f"a cap (default {cap})" in readme
