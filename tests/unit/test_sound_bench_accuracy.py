"""Smoke test of bench/bench_accuracy.py at tiny effort: it runs and its tables are well formed
(no figure is asserted: benchmarks are scripts, not tests)."""

from __future__ import annotations

from bench import bench_accuracy
from tests.unit.test_bench_smoke import assert_well_formed


def test_accuracy_bench_tables():
    effort = bench_accuracy.Effort(sizes=(20,), datasets=1, draws=1, small=(5,), small_trials=2)
    tables = bench_accuracy.run(effort=effort)
    assert_well_formed(tables)
    box = tables[0]
    assert "noisy CDF (shipped)" in box.columns and box.rows[0][0] == "20"
    assert [row[0] for row in tables[-1].rows] == ["count", "mean", "median"]
