"""Registry options for large files and warehouse tables, read from the app's config."""

from __future__ import annotations

from typing import Any

from services.data.sources.duckdb_source import DuckDBSettings
from services.data.sources.large import read_warehouse_file


def large_dataset_options(config: Any) -> dict[str, Any]:
    """``DatasetRegistry`` keyword arguments from an AppConfig (COHORT_LARGE_FILE_MB, ...)."""
    warehouse = read_warehouse_file(config.warehouse_file) if config.warehouse_file else []
    return {"large_file_bytes": config.large_file_bytes, "warehouse": warehouse,
            "duckdb_settings": DuckDBSettings(memory_limit=config.duckdb_memory)}
