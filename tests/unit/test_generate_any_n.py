"""The generator makes any n: command line --rows, deterministic per seed, written in blocks."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "sample_data"))
import generate  # noqa: E402


def test_command_line_rows_and_seed(tmp_path):
    out = tmp_path / "c.csv"
    done = subprocess.run([sys.executable, str(ROOT / "sample_data" / "generate.py"), str(out),
                           "--rows", "2500", "--seed", "9"], check=True, capture_output=True,
                          text=True)
    assert "2500 rows" in done.stdout
    frame = pd.read_csv(out, dtype=str, keep_default_na=False)
    assert list(frame.columns) == list(generate.COLUMNS) and len(frame) == 2500
    again = tmp_path / "again.csv"
    generate.write_csv(again, 9, 2500)
    assert again.read_bytes() == out.read_bytes()
    generate.write_csv(again, 10, 2500)
    assert again.read_bytes() != out.read_bytes()


def test_bad_row_count_is_refused(tmp_path):
    done = subprocess.run([sys.executable, str(ROOT / "sample_data" / "generate.py"),
                           str(tmp_path / "x.csv"), "--rows", "-5"], capture_output=True,
                          text=True)
    assert done.returncode != 0 and "--rows" in done.stderr
    assert not (tmp_path / "x.csv").exists()


def test_many_blocks_are_unique_and_deterministic(tmp_path, monkeypatch):
    monkeypatch.setattr(generate, "CHUNK_ROWS", 1_000)  # 3.5 blocks, as 3.5e6 rows would be
    monkeypatch.setattr(generate, "ID_POOL", 900)
    out, again = tmp_path / "a.csv", tmp_path / "b.csv"
    assert generate.write_csv(out, 3, 3_500) == 3_500
    generate.write_csv(again, 3, 3_500)
    assert out.read_bytes() == again.read_bytes()
    frame = pd.read_csv(out, dtype=str, keep_default_na=False)
    assert len(frame) == 3_500 and frame["Anonym_ID"].is_unique
    ages = pd.to_numeric(frame["Age"], errors="coerce").dropna()
    assert 60 < ages.mean() < 72  # every block draws from the cohort's distributions


@pytest.mark.parametrize("n", [0, 1, 901])
def test_edge_sizes(n):
    rows = generate.generate(5, n)
    assert len(rows) == n and all(len(r) == len(generate.COLUMNS) for r in rows)
    assert len({r[0] for r in rows}) == n


def test_the_generator_records_what_it_wrote(tmp_path, monkeypatch):
    """The counts a benchmark checks its data against: rows and values present per column,
    over several blocks, equal to the CSV's own (a missing cell is '', 'n/a' or 'NA')."""
    monkeypatch.setattr(generate, "CHUNK_ROWS", 1_000)
    out = tmp_path / "c.csv"
    generate.write_csv(out, 5, 2_500)
    record = generate.expected_counts(out, 5, 2_500)
    frame = pd.read_csv(out, dtype=str, keep_default_na=False)
    present = {c: int((~frame[c].isin(generate.MISSING_CELLS)).sum()) for c in frame.columns}
    assert record["rows"] == len(frame) == 2_500 and record["present"] == present
    assert 0 < present["Gleason score"] < present["Age"] < 2_500
    generate.counts_path(out).unlink()                  # counted again from the seeded blocks
    assert generate.expected_counts(out, 5, 2_500) == record
    assert generate.counts_path(out).exists()
    assert generate.expected_counts(out, 6, 2_500)["present"] != present   # another seed
