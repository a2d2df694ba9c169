"""Smoke test of the benchmark scripts at tiny n: they run and return well-formed tables.

No timing is asserted here (benchmarks are scripts, never timed tests); only the shape of
what they report and the plumbing they rely on (repeats, tracemalloc, the FAIL summary).
"""

from __future__ import annotations

import numpy as np
import pytest

from bench import bench_callbacks, bench_engine, bench_loading, run_all
from bench.common import FAIL, NA, PASS, BenchConfig, Table, peak_extra_bytes, time_side_by_side

VERDICTS = {PASS, FAIL, NA}


@pytest.fixture(scope="module")
def tiny(tmp_path_factory) -> BenchConfig:
    return BenchConfig(
        sizes=(1_000,),
        stat_n=1_000,
        big_n=1_000,
        repeats=1,
        budget_s=0.01,
        peer_limit_s=5.0,
        peer_max_n=1_000,
        browser=False,
        data_dir=tmp_path_factory.mktemp("bench-data"),
    )


def assert_well_formed(tables: list[Table]) -> None:
    assert tables, "a benchmark returned no table"
    for table in tables:
        assert table.title and table.columns
        assert table.rows, f"{table.title}: no rows"
        for row in table.rows:
            assert len(row) == len(table.columns)
            assert all(isinstance(cell, str) and cell for cell in row)
        for column, *cells in zip(table.columns, *table.rows, strict=True):
            if column.startswith("target"):
                assert set(cells) <= VERDICTS, f"{table.title}: {column} has {cells}"
        text = table.markdown()
        assert text.startswith(f"### {table.title}")
        assert text.count("\n|") == len(table.rows) + 2  # header, separator, rows


def test_engine_bench_rows(tiny):
    tables = bench_engine.run(tiny)
    assert_well_formed(tables)
    titles = " ".join(t.title for t in tables)
    for topic in ("numpy limit", "OpenDP", "ε search", "statistics", "memory"):
        assert topic in titles
    stats = next(t for t in tables if "statistics" in t.title)
    assert [row[0] for row in stats.rows] == list(bench_engine.STATISTICS)


def test_loading_bench_rows_and_generated_file(tiny):
    tables = bench_loading.run(tiny)
    assert_well_formed(tables)
    csv = bench_loading.cohort_csv(tiny.big_n, tiny.data_dir)
    with csv.open() as handle:
        assert sum(1 for _ in handle) == tiny.big_n + 1  # header + rows


def test_callbacks_bench_rows(tiny):
    assert_well_formed(bench_callbacks.run(tiny))


def test_output_spec_parses_single_and_multi_outputs():
    assert bench_callbacks._output_spec("a.children") == {"id": "a", "property": "children"}
    assert bench_callbacks._output_spec("..a.children...b-c.figure..") == [
        {"id": "a", "property": "children"},
        {"id": "b-c", "property": "figure"},
    ]


def test_side_by_side_timing_and_memory_plumbing():
    calls = {"a": 0, "b": 0}

    def bump(name):
        calls[name] += 1

    timings = time_side_by_side({"a": lambda: bump("a"), "b": lambda: bump("b")},
                                repeats=4, budget_s=10.0)
    assert calls == {"a": 5, "b": 5}  # one warm-up + four measured calls each
    assert all(t.repeats == 4 and 0 <= t.min <= t.median for t in timings.values())
    n = 100_000
    assert peak_extra_bytes(lambda: np.ones(n)) >= 8 * n  # numpy reports to tracemalloc


def test_results_summary_lists_failures_and_anonymize_section(tmp_path, monkeypatch):
    table = Table("Demo", ["case", "value", "target ≤ 1×"])
    table.add("fast", "1", PASS)
    table.add("slow", "3", FAIL)
    extra = tmp_path / "RESULTS_anonymize.md"
    extra.write_text("# Anonymize\n\nfigures\n")
    monkeypatch.setattr(run_all, "ANONYMIZE_RESULTS", extra)
    text = run_all.render({"engine": ([table], None)}, quick=True, seconds=1.0)
    assert "- FAIL — Demo — slow: value = 3 (target ≤ 1×)" in text
    assert "fast" not in text.split("## Summary")[1].split("###")[0]
    assert "### Demo" in text and "Machine and versions" in text
    assert "### Anonymize" in text


def test_door_section_is_spliced_into_the_results_once(tmp_path, monkeypatch):
    monkeypatch.setattr(bench_callbacks, "DOOR_RESULTS", tmp_path / "RESULTS_door.md")
    results = tmp_path / "RESULTS.md"
    results.write_text("# Benchmark results\n\n## Engine\n\nx\n\n## Anonymization page (b)\n\ny\n")
    table = Table("before and after", ["cohort", "uncached before", "uncached after"])
    table.add("920", "1 ms", "2 ms")
    for _ in range(2):   # a second run replaces the section instead of adding another
        bench_callbacks.write_door_results([table], "python -m bench.bench_callbacks", results)
    text = results.read_text()
    assert text.splitlines().count(f"## {bench_callbacks.DOOR_TITLE}") == 1
    assert text.index("## Engine") < text.index(bench_callbacks.DOOR_TITLE) \
        < text.index("## Anonymization page")
    assert "| Python |" in text and "| 920 | 1 ms | 2 ms |" in text
    assert (tmp_path / "RESULTS_door.md").read_text() in text


def test_serving_settings_and_sections(tmp_path):
    from bench import bench_serving as bs

    deployed = int(bs.deployed("COHORT_RUNNER_PROCESSES"))
    assert deployed >= 1 and bs.Setting.parse("4:16").processes == deployed
    assert bs.Setting.parse("4:16::0") == bs.Setting(4, 16, None, 0)
    assert bs.Setting.parse("2:8:4:2") == bs.Setting(2, 8, 4, 2)
    with pytest.raises(ValueError, match="processes per worker"):
        bs.Setting.parse("4:4::fast")
    out = tmp_path / "r.md"
    out.write_text("# R\n\n## Cached answers under uncached load\n\nold\n\n## Next\n\nkept\n")
    bs.write_section(out, bs.section("cmd", "/d/v/*.parquet", ["| a |"], 8, 45.0))
    bs.write_section(out, bs.section("cmd", "/d/v/*.parquet", ["| b |"], 8, 45.0, "1e8"))
    text = out.read_text()
    assert "old" not in text and text.count("| a |") == 1 and "## Next\n\nkept" in text
    assert text.count("## Cached answers under uncached load, 1e8 rows") == 1
    assert "1e8-row Parquet" in text and "1e7-row Parquet" in text
    bs.write_section(out, bs.section("cmd", "/d/v/*.parquet", ["| c |"], 8, 45.0))
    text = out.read_text()
    assert "| a |" not in text and "| c |" in text and "| b |" in text
    bs.write_section(out, bs.section("cmd", "/d/v/*.parquet", ["| p |"], 8, 45.0, "1e7", 4.0))
    text = out.read_text()          # a paced run has a section of its own
    assert text.count("## Cached answers under uncached load, one press per session every "
                      "4 s") == 1 and "| c |" in text and "at most every 4 s" in text


# ------------------------------------------------------------------ benchmarks check their data


def test_check_data_names_every_loss():
    from bench.common import DataCheckFailed, check_data

    ok = check_data("t", 10, {"a": 10, "b": 7}, 10, {"a": 10, "b": 7})
    assert "10 rows" in ok and "OK" in ok
    with pytest.raises(DataCheckFailed, match=r"'b' 6 of 7 values"):
        check_data("t", 10, {"a": 10, "b": 7}, 10, {"a": 10, "b": 6})
    with pytest.raises(DataCheckFailed, match=r"9 of 10 rows"):
        check_data("t", 10, {"a": 10}, 9, {"a": 10})


def test_loading_bench_refuses_a_cohort_that_lost_a_value(tiny):
    from bench.common import DataCheckFailed

    path = bench_loading.cohort_csv(tiny.big_n, tiny.data_dir)   # checked: passes
    lines = path.read_text().splitlines()
    header = lines[0].split(",")
    age = header.index("Age")
    row = next(i for i, line in enumerate(lines[1:], 1) if line.split(",")[age])
    cells = lines[row].split(",")
    cells[age] = ""                                             # one Age value lost
    lines[row] = ",".join(cells)
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(DataCheckFailed, match="'Age'"):
        bench_loading.check_cohort(path, tiny.big_n)
    (table,) = bench_loading.run(tiny)
    assert any("not timed" in cell for row in table.rows for cell in row)


def test_warehouse_bench_refuses_to_time_data_that_lost_values(tmp_path, monkeypatch, capsys):
    import duckdb

    from bench import bench_warehouse
    from bench.common import DataCheckFailed

    monkeypatch.setattr(bench_warehouse, "DATA_DIR", tmp_path)
    monkeypatch.setattr(bench_warehouse, "SIZES", {"1e6": 2_500})
    globs = bench_warehouse.prepare(["1e6"])
    assert "data check 1e6" in capsys.readouterr().out
    # the store loses the Age of a tenth of its rows (what the chunk bug did, at scale)
    (part,) = [p for p in tmp_path.glob("parquet/*/*.parquet")]
    con = duckdb.connect()
    con.execute(f"COPY (SELECT * REPLACE (CASE WHEN row_number() OVER () % 10 = 0 THEN NULL "
                f"ELSE \"Age\" END AS \"Age\") FROM read_parquet('{part}')) "
                f"TO '{tmp_path / 'lossy.parquet'}' (FORMAT parquet)")
    con.close()
    (tmp_path / "lossy.parquet").replace(part)
    with pytest.raises(DataCheckFailed, match="'Age'"):
        bench_warehouse.prepare(["1e6"])
    timed = []
    monkeypatch.setattr(bench_warehouse, "time_views", lambda *a, **k: timed.append(a))
    assert bench_warehouse.main(["--sizes", "1e6", "--backends", "duckdb",
                                 "--no-serving"]) == 2
    assert timed == [] and "FAILED, not timed" in capsys.readouterr().out
    assert globs["1e6"].endswith("*.parquet")
