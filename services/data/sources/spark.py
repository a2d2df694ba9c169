"""Spark SQL source: a catalog table or a Parquet path, on local[*], a cluster or Spark Connect.

``master``: ``local[*]`` (tests, one machine), ``spark://host:7077`` / ``yarn`` (a cluster) or
``sc://host:15002`` (Spark Connect; needs ``pyspark[connect]``). Statements are the same
SQLAlchemy plan as DuckDB and PostgreSQL, compiled for Spark (backtick identifiers, named
parameters bound by ``spark.sql(..., args=...)``). Rows reach this process only through
``read_rows`` (capped, sampled with a seed).
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Mapping, Sequence

from services.data.errors import DatasetError
from services.data.sources.base import ROW_CAP, RowSample
from services.data.sources.dialects import SparkDialect, compile_sql
from services.data.sources.labels import StorageKind
from services.data.sources.sql import SqlPlan, SqlSource, sql_table, typed_rows

_sessions: dict[str, object] = {}
_lock = threading.Lock()
_views = itertools.count()
TEST_CONF = {  # small and quiet: the defaults are tuned for clusters
    "spark.sql.shuffle.partitions": "4",
    "spark.ui.enabled": "false",
    "spark.sql.session.timeZone": "UTC",
}


def spark_session(master: str = "local[*]", conf: Mapping[str, str] | None = None):
    """One SparkSession per master URL and process (Spark allows one context per JVM)."""
    from pyspark.sql import SparkSession

    with _lock:
        if master not in _sessions:
            builder = SparkSession.builder.appName("private-cohort-explorer")
            builder = builder.remote(master) if master.startswith("sc://") \
                else builder.master(master)
            for key, value in {**TEST_CONF, **dict(conf or {})}.items():
                builder = builder.config(key, value)
            _sessions[master] = builder.getOrCreate()
        return _sessions[master]


def spark_kind(data_type) -> StorageKind:
    """StorageKind of a Spark SQL data type."""
    name = type(data_type).__name__
    if name == "BooleanType":
        return StorageKind.BOOL
    if name in ("ByteType", "ShortType", "IntegerType", "LongType"):
        return StorageKind.INT
    if name in ("FloatType", "DoubleType", "DecimalType"):
        return StorageKind.FLOAT
    if name in ("StringType", "VarcharType", "CharType"):
        return StorageKind.TEXT
    return StorageKind.OTHER


class SparkSource(SqlSource):
    """Aggregates computed by Spark SQL over a catalog ``table`` or a Parquet ``path``."""

    backend = "Spark SQL"

    def __init__(self, *, table: str | None = None, path: str | None = None,
                 master: str = "local[*]", conf: Mapping[str, str] | None = None) -> None:
        if (table is None) == (path is None):
            raise DatasetError("A Spark source needs exactly one of a table name or a path.")
        self.spark = spark_session(master, conf)
        try:
            if path is not None:
                frame = self.spark.read.parquet(str(path))
                view = f"cohort_source_{next(_views)}"
                frame.createOrReplaceTempView(view)
                name, db = view, None
            else:
                frame = self.spark.table(table)
                db, _, name = str(table).rpartition(".")
                db = db or None
        except Exception as exc:  # pyspark raises its own AnalysisException family
            raise DatasetError(
                f"Spark could not read '{table or path}' ({type(exc).__name__}); check the "
                "table name or path and the cluster URL."
            ) from exc
        self._frame = frame
        self._kinds = {f.name: spark_kind(f.dataType) for f in frame.schema.fields}
        self._plan = SqlPlan(sql_table(name, self._kinds, db), self._kinds)
        self._dialect = SparkDialect()

    def aggregate_many(self, queries):
        """Several aggregates as concurrent Spark jobs (each job's fixed cost overlaps)."""
        from concurrent.futures import ThreadPoolExecutor

        queries = list(queries)
        with ThreadPoolExecutor(max_workers=min(4, max(1, len(queries)))) as pool:
            return list(pool.map(self.aggregate, queries))

    def _fetch(self, stmt) -> list:
        sql, params = compile_sql(stmt, self._dialect)
        return [tuple(r) for r in self.spark.sql(sql, args=params).collect()]

    def read_rows(self, columns: Sequence[str], *, cap: int = ROW_CAP,
                  seed: int = 0) -> RowSample:
        self.check_columns(columns)
        frame = self._frame.select(*[self._frame[c] for c in columns])
        total = frame.count()
        sampled = total > cap
        if sampled:
            frame = frame.sample(fraction=min(1.0, 1.1 * cap / total), seed=int(seed))
        return RowSample(typed_rows(frame.limit(cap).toPandas(), self._kinds), sampled, cap)
