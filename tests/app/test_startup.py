"""A cold start in seconds (issue 20.4): what `import app` loads, the boot warm-up, and what
`make run` installs. Times are measured by bench/bench_startup.py, never asserted here."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from callbacks.server import warmup

ROOT = Path(__file__).resolve().parents[2]
HEAVY = ("scipy.stats", "scipy.optimize", "scipy.spatial", "scipy.special", "duckdb",
         "sklearn", "pyspark", "jax", "opendp", "mbi")
"""Modules the app uses on some paths only: loaded where used, not by `import app`."""
OPTIONAL = ("pyspark", "jax", "mbi", "opendp", "scikit-learn", "pytest", "ruff")


def test_importing_the_app_loads_no_heavy_optional_module():
    code = ("import json, sys; import app; "
            f"print(json.dumps([m for m in {list(HEAVY)!r} if m in sys.modules]))")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                         text=True, check=True)
    assert json.loads(out.stdout.strip().splitlines()[-1]) == []


def test_the_warm_up_loads_what_the_first_figure_needs():
    code = ("import json, sys; from callbacks.server import warmup; warmup.warm_engine(); "
            "warmup.warm_figures(); "
            "from dp_engine.sound.releases import quantile_bank as qb; "
            "print(json.dumps(['scipy.special' in sys.modules, 'plotly.graph_objects' in "
            "sys.modules, sorted(c for c, _ in qb._banks)]))")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                         text=True, check=True)
    special, plotly, banks = json.loads(out.stdout.strip().splitlines()[-1])
    assert special and plotly
    # every grid a box plot can be planned on (candidates_for on the 1001-point grid)
    assert banks == [12, 22, 27, 42, 52, 102, 127, 202, 252, 502, 1002]


class _Runner:
    def __init__(self, fail: bool = False) -> None:
        self.calls, self.fail = [], fail

    def warm(self, fn) -> None:
        self.calls.append(fn)
        if self.fail:
            raise RuntimeError("no child today")


class _Services:
    def __init__(self, runner) -> None:
        self.runner = runner


def test_the_warm_up_starts_a_runner_child_and_never_raises(caplog):
    ok = _Runner()
    warmup.start(_Services(ok)).join(timeout=120)
    assert ok.calls == [warmup.warm_job]
    broken = _Runner(fail=True)
    warmup.warm(_Services(broken))                 # logged, not raised
    assert len(broken.calls) == 1
    assert "Warm-up failed" in caplog.text
    warmup.warm(_Services(None))                   # no runner given: fine


def test_the_runtime_dependencies_leave_the_test_and_studio_extras_out():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    runtime = " ".join(project["dependencies"]).lower()
    assert not [name for name in OPTIONAL if name in runtime]
    assert "jax" not in " ".join(project["optional-dependencies"]["postgres"])


@pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")
@pytest.mark.parametrize(("target", "extra"), [("run", '-e "."'), ("test", '-e ".[test]"')])
def test_make_run_installs_the_runtime_and_make_test_the_test_extras(tmp_path, target, extra):
    """`make -n` on a fresh copy (no .venv): the commands each target would run."""
    for name in ("Makefile", "pyproject.toml"):
        shutil.copy(ROOT / name, tmp_path / name)
    out = subprocess.run(["make", "-n", target], cwd=tmp_path, capture_output=True, text=True,
                         check=True).stdout
    installs = [line for line in out.splitlines() if "pip install" in line and " -e " in line]
    assert installs and all(extra in line for line in installs), out
    if target == "run":
        assert "[test]" not in out and "npm" not in out, out
