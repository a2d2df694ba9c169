"""Data sources: the aggregates a release needs, computed where the data lives.

Backends: ``PandasSource`` (in memory), ``DuckDBSource`` (Parquet, the embedded default for
large files), ``PostgresSource`` (a warehouse table or view) and ``SparkSource`` (Spark SQL).
``aggregates(dataset, query)`` answers a query for any registry entry.
"""

from services.data.sources.base import ROW_CAP, DataSource, RowSample
from services.data.sources.query import AggregateKind, AggregateQuery, Aggregates, ColumnRules

__all__ = ["ROW_CAP", "AggregateKind", "AggregateQuery", "Aggregates", "ColumnRules",
           "DataSource", "RowSample"]
