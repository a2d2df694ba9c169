"""Release studio (seed 003): per-record DP copies of a table, their metrics, auto-tune.

Pure (numpy/pandas/scipy). Each technique perturbs every cell of a column on its own: local
DP against replacing a patient (the row count is exact), per-cell ε summed over a record's
columns. See ``techniques`` for each technique's guarantee.
"""

from dp_engine.release.autotune import Tolerances, Try, TuneResult, auto_tune
from dp_engine.release.metrics import ColumnMetrics, TableMetrics, column_metrics, table_metrics
from dp_engine.release.techniques import (
    ColumnChoice,
    RecordCopy,
    Sensitivity,
    Technique,
    check_choices,
    default_technique,
    per_record_copy,
    techniques_for,
)

__all__ = [
    "ColumnChoice", "ColumnMetrics", "RecordCopy", "Sensitivity", "TableMetrics", "Technique",
    "Tolerances", "Try", "TuneResult", "auto_tune", "check_choices", "column_metrics",
    "default_technique", "per_record_copy", "table_metrics", "techniques_for",
]
