"""Every data source returns the same aggregates bit for bit, and so the same releases.

For each view (numeric and categorical histograms, mean, variance, quantile candidates, group
sizes and the DP count), grouped and ungrouped, with missing values, on the sample cohort and
a generated 1e5-row cohort: in-memory (the numpy reference), DuckDB (Parquet), PostgreSQL
(TEST_DATABASE_URL, own schema) and Spark (local) agree exactly; so does DuckDB reading the
compact tables a load builds (``duckdb_loaded``) or a first request builds
(``duckdb_precomputed``). A hand-made table adds the
edge cases: rounding ties, values on bin edges and beyond the bounds, NaN next to NULL,
declared missing codes, labels outside the public list and a catch-all level.
"""

from __future__ import annotations

import os
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import sqlalchemy as sa

from dp_engine import sound
from dp_engine.schema import ColumnKind, ColumnSpec, Schema
from dp_engine.sound.releases import release_counts, release_moments, release_quantiles
from services.data.csv_loader import load_csv
from services.data.registry import SAMPLE_CSV, SAMPLE_SCHEMA, read_schema_file
from services.data.sources.duckdb_source import DuckDBSource
from services.data.sources.large import precompute_views
from services.data.sources.memory import PandasSource
from services.data.sources.query import AggregateQuery, ColumnRules
from tests.app.parquet_support import frame_to_parquet

ROOT = Path(__file__).resolve().parents[2]
PG_URL = os.environ.get("TEST_DATABASE_URL")
PG_SCHEMA = "w1_sources_equivalence"
BACKENDS = ("duckdb", "duckdb_precomputed", "duckdb_loaded", "postgres", "spark")


def _need(what: str, reason: str) -> None:
    """Skip locally; under CI a missing service is a failure, never a silent skip."""
    if os.environ.get("CI"):
        pytest.fail(f"CI=true but {what} is unavailable: {reason}")
    pytest.skip(reason)


# ------------------------------------------------------------------------------ data


def _cohort(rows: int) -> tuple[pd.DataFrame, Schema]:
    schema = read_schema_file(SAMPLE_SCHEMA)
    if rows == 920:
        content = SAMPLE_CSV.read_bytes()
    else:
        sys.path.insert(0, str(ROOT / "sample_data"))
        import generate

        content = generate.to_csv_bytes(generate.generate(7, rows))
    frame, schema, _ = load_csv(content, filename="cohort.csv", schema=schema, max_bytes=1 << 40)
    # A declared missing code in a numeric column: 999 must never be clamped into a bound.
    frame["Score_999"] = frame["PIRADS score"].astype("Float64").fillna(999.0).astype(float)
    frame.loc[frame.index % 97 == 0, "Score_999"] = np.nan
    return frame, schema


def _edge_case_frame() -> tuple[pd.DataFrame, Schema]:
    """Ties for half-even rounding, edges, out-of-bounds, NaN vs NULL, codes, odd labels."""
    step = 2.0 ** -20  # the lattice step of bounds [0, 8] (half range 4 = 2^2, 22 bits)
    ties = [4.0 + k * step / 2 for k in (-5, -3, -1, 1, 3, 5)]
    x = [*ties, 0.0, 1.0, 2.0, 7.999, 8.0, -3.0, 11.0, 1e300, -1e300, 999.0, np.nan, 2.5, 6.0]
    n = len(x)
    rng = np.random.default_rng(3)
    frame = pd.DataFrame({
        "x": np.asarray(x, dtype=float),
        "k": pd.array(rng.integers(0, 6, n), dtype="Int64"),
        "flag": pd.array(rng.random(n) < 0.5, dtype="boolean"),
        "t": pd.Series(rng.choice(["a", "b", "c", "zz", "NA_NA"], n), dtype="str"),
        "g": pd.Series(rng.choice(["u", "v", "w"], n), dtype="str"),
    })
    frame.loc[3, "k"] = pd.NA
    frame.loc[4, "flag"] = pd.NA
    frame.loc[5, "t"] = None
    schema = Schema("edge", (
        ColumnSpec("x", ColumnKind.NUMERIC, lower=0, upper=8, bin_width=1.0,
                   categories=None),
        ColumnSpec("k", ColumnKind.ORDINAL, lower=0, upper=5, categories=(1, 2, 3, 4)),
        ColumnSpec("flag", ColumnKind.BOOLEAN, categories=(False, True)),
        ColumnSpec("t", ColumnKind.CATEGORICAL, categories=("a", "b", "c", "other")),
        ColumnSpec("g", ColumnKind.CATEGORICAL, categories=("u", "v")),
    ))
    return frame, schema


def _sample_queries(schema: Schema) -> list[AggregateQuery]:
    q = AggregateQuery
    codes = (("Score_999", ColumnRules(missing_codes=("999",))),)
    score = replace(q.moments(schema, "PIRADS score", squares=True), column="Score_999",
                    rules=codes)
    out = []
    for group in (None, "Therapy"):
        out += [
            q.histogram(schema, "Age", group),                  # numeric bins
            q.histogram(schema, "Prostatitis", group),          # text categories
            q.histogram(schema, "PIRADS score", group),         # ordinal categories
            q.moments(schema, "Age", group),                     # mean
            q.moments(schema, "Gleason score", group, squares=True),  # variance
            q.candidates(schema, "Age", group),                  # quantiles
            q.count(schema, group, require=("Age",)),            # group sizes / DP count
            replace(score, group=group, group_keys=() if group is None else
                    q.count(schema, group).group_keys),
        ]
    out.append(q.histogram(schema, "PCA_no_PIRADS_defined", "BPH"))  # booleans both ways
    return out


def _edge_queries(schema: Schema) -> list[AggregateQuery]:
    q = AggregateQuery
    codes = (("x", ColumnRules(missing_codes=("999",))),
             ("t", ColumnRules(missing_codes=("NA_NA",), other_level="other")))
    out = [q.histogram(schema, "k", "flag"), q.histogram(schema, "flag", "g")]
    for group in (None, "t"):
        for base in (q.histogram(schema, "x", group), q.histogram(schema, "t", group),
                     q.moments(schema, "x", group, squares=True),
                     q.candidates(schema, "x", group, n_candidates=17),
                     q.count(schema, group, require=("x",))):
            out += [base, replace(base, rules=codes)]
    return out


# ------------------------------------------------------------------------------ backends


def _postgres(frame: pd.DataFrame, table: str):
    from services.data.sources.postgres import PostgresSource

    if not PG_URL:
        _need("PostgreSQL", "TEST_DATABASE_URL is not set")
    engine = sa.create_engine(PG_URL)
    with engine.begin() as conn:
        conn.execute(sa.schema.CreateSchema(PG_SCHEMA, if_not_exists=True))
    frame.to_sql(table, engine, schema=PG_SCHEMA, index=False, if_exists="replace",
                 method=_copy_rows)
    tbl = sa.table(table, *[sa.column(c) for c in frame.columns], schema=PG_SCHEMA)
    with engine.begin() as conn:  # pandas writes NaN as NULL: make every other one a real NaN
        for name in (c for c in frame.columns if frame[c].dtype == np.float64):
            conn.execute(sa.update(tbl).where(tbl.c[name].is_(None), tbl.c.row_id % 2 == 0)
                         .values({name: float("nan")}))
    engine.dispose()
    return PostgresSource(PG_URL, table, schema=PG_SCHEMA)


def _copy_rows(table, conn, keys, data_iter) -> None:
    """pandas ``to_sql`` method: PostgreSQL COPY (far faster than INSERTs for 1e5 rows)."""
    from psycopg import sql

    target = sql.Identifier(*([table.schema] if table.schema else []), table.name)
    stmt = sql.SQL("COPY {} ({}) FROM STDIN").format(
        target, sql.SQL(", ").join(sql.Identifier(k) for k in keys))
    with conn.connection.cursor() as cur, cur.copy(stmt) as copy:
        for row in data_iter:
            copy.write_row(row)


def _spark(parquet: Path):
    try:
        from services.data.sources.spark import SparkSource
        return SparkSource(path=str(parquet), master="local[2]",
                           conf={"spark.sql.shuffle.partitions": "1",
                                 "spark.sql.adaptive.enabled": "false"})
    except ImportError as exc:
        _need("pyspark", f"pyspark is not installed ({exc})")


@pytest.fixture(scope="module")
def postgres_cleanup():
    yield
    if PG_URL:
        engine = sa.create_engine(PG_URL)
        with engine.begin() as conn:
            conn.execute(sa.schema.DropSchema(PG_SCHEMA, cascade=True, if_exists=True))
        engine.dispose()


DATASETS = {"sample": lambda: _cohort(920), "generated_1e5": lambda: _cohort(100_000),
            "edge_cases": _edge_case_frame}


@pytest.fixture(scope="module", params=list(DATASETS))
def dataset(request, tmp_path_factory, postgres_cleanup):
    frame, schema = DATASETS[request.param]()
    frame["row_id"] = np.arange(len(frame))
    queries = (_edge_queries if request.param == "edge_cases" else _sample_queries)(schema)
    parquet = frame_to_parquet(frame, tmp_path_factory.mktemp("pq") / "data.parquet")
    factories = {"duckdb": lambda: DuckDBSource(parquet),
                 "duckdb_precomputed": lambda: DuckDBSource(
                     parquet, precompute_dir=parquet.parent / "precomputed"),
                 "duckdb_loaded": lambda: _loaded(parquet, schema),
                 "postgres": lambda: _postgres(frame, request.param),
                 "spark": lambda: _spark(parquet)}
    memory = PandasSource(frame)
    opened = {"memory": memory}
    answers = {"memory": [memory.aggregate(q) for q in queries]}
    yield request.param, queries, factories, answers, opened
    for src in opened.values():
        src.close()


def _loaded(parquet: Path, schema: Schema) -> DuckDBSource:
    """DuckDB with the schema's compact tables built at load (issue 20), as a large file's."""
    source = DuckDBSource(parquet, precompute_dir=parquet.parent / "loaded")
    assert precompute_views(source, schema).built > 0
    return source


def _opened(dataset, backend: str):
    """The backend's source, opened once per dataset."""
    *_, factories, _, opened = dataset
    if backend not in opened:
        opened[backend] = factories[backend]()
    return opened[backend]


def _answers(dataset, backend: str) -> list:
    """The backend's aggregates of every query, computed once (one statement)."""
    _, queries, _, answers, _ = dataset
    if backend not in answers:
        answers[backend] = _opened(dataset, backend).aggregate_many(queries)
    return answers[backend]


def _same(a, b) -> None:
    assert type(a) is type(b)
    for name, va in vars(a).items():
        vb = getattr(b, name)
        if va is None:
            assert vb is None, name
        else:
            np.testing.assert_array_equal(np.asarray(vb), np.asarray(va), err_msg=name)
            assert np.asarray(vb).dtype == np.asarray(va).dtype, name


@pytest.mark.parametrize("backend", BACKENDS)
def test_aggregates_identical_to_the_numpy_reference(dataset, backend):
    name, queries, *_ = dataset
    expected, got = _answers(dataset, "memory"), _answers(dataset, backend)
    assert len(got) == len(queries)
    for want, have in zip(expected, got, strict=True):
        assert np.sum(getattr(want, "counts", getattr(want, "count", 0))) > 0
        _same(have, want)


@pytest.mark.parametrize("backend", BACKENDS)
def test_row_count_is_the_tables_row_count(dataset, backend):
    """What the registry lists for a warehouse table instead of reading its rows."""
    assert _opened(dataset, backend).row_count() == _opened(dataset, "memory").row_count() > 0


# ------------------------------------------------------------------------------ releases


def _release(agg, query: AggregateQuery, eps: float, seed: int):
    """The engine's release from these aggregates (dp_engine.sound.releases)."""
    rng = np.random.default_rng(seed)
    keys = list(query.group_keys) if query.group else None
    if hasattr(agg, "s1"):
        return release_moments(agg, eps, rng=rng, group_keys=keys)
    if hasattr(agg, "n_candidates"):
        return release_quantiles(agg, eps, qs=(0.5,), rng=rng, group_keys=keys,
                                 n_candidates=agg.n_candidates)
    return release_counts(agg, eps, rng=rng, group_keys=keys)


def test_release_from_aggregates_is_the_engines_release():
    frame, schema = _cohort(920)
    memory = PandasSource(frame)
    keep = frame[["Age", "Therapy"]].dropna()
    keys = list(AggregateQuery.count(schema, "Therapy").group_keys)
    q = AggregateQuery.moments(schema, "Age", "Therapy", squares=True)
    mine = _release(memory.aggregate(q), q, 0.7, 11)
    theirs = sound.grouped_variance(keep["Age"].to_numpy(), keep["Therapy"].to_numpy(), keys,
                                    20, 100, 0.7, rng=np.random.default_rng(11))
    np.testing.assert_array_equal(mine.value, theirs.value)
    q = AggregateQuery.histogram(schema, "Age")
    mine = _release(memory.aggregate(q), q, 0.3, 5)
    theirs = sound.histogram(frame["Age"].dropna().to_numpy(), schema.column("Age").bin_edges(),
                             0.3, rng=np.random.default_rng(5))
    np.testing.assert_array_equal(np.ravel(mine.value), theirs.value)
    q = AggregateQuery.candidates(schema, "Age", n_candidates=101)
    mine = _release(memory.aggregate(q), q, 1.0, 2)
    theirs = sound.quantiles(frame["Age"].dropna().to_numpy(), 20, 100, 1.0, qs=(0.5,),
                             n_candidates=101, rng=np.random.default_rng(2))
    assert float(np.ravel(mine.value)[0]) == float(np.ravel(theirs.value)[0])


@pytest.mark.parametrize("backend", BACKENDS)
def test_same_seed_same_release(dataset, backend):
    _, queries, *_ = dataset
    pairs = zip(queries, _answers(dataset, "memory"), _answers(dataset, backend), strict=True)
    for i, (query, want, have) in enumerate(pairs):
        ours = _release(have, query, 0.5, 100 + i)
        ref = _release(want, query, 0.5, 100 + i)
        np.testing.assert_array_equal(np.asarray(ours.value), np.asarray(ref.value))
        assert ours.to_dict() == ref.to_dict()
