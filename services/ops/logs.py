"""Log lines with time, level and logger, for the app and for gunicorn (master and workers).

``logging_dict`` is the ``logging.config.dictConfig`` dictionary both use: under gunicorn it is
``logconfig_dict`` in ``docs/deploy/gunicorn.conf.py`` (access lines included); ``make run`` and
``cohort-explorer serve`` apply it with ``configure``. INFO and above go to standard error, one
line per record (``COHORT_LOG_FORMAT=json``: one JSON object per line).
"""

from __future__ import annotations

import json
import logging
import logging.config
import os
from datetime import UTC, datetime
from typing import Any

TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s [%(process)d] %(message)s"
DATE_FORMAT = "%Y-%m-%dT%H:%M:%S%z"


class JsonFormatter(logging.Formatter):
    """One JSON object per record: time (UTC, ISO 8601), level, logger, pid, message."""

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname, "logger": record.name, "pid": record.process,
            "message": record.getMessage(),
        }
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        return json.dumps(entry, ensure_ascii=False)


def logging_dict(log_format: str | None = None) -> dict[str, Any]:
    """The dictConfig for ``log_format``: "json", or text for anything else (None: the
    ``COHORT_LOG_FORMAT`` variable, which the start-up checks validate)."""
    if log_format is None:
        log_format = os.environ.get("COHORT_LOG_FORMAT", "").strip().lower()
    formatter = ({"()": f"{__name__}.JsonFormatter"} if log_format == "json"
                 else {"format": TEXT_FORMAT, "datefmt": DATE_FORMAT})
    return {
        "version": 1,
        "disable_existing_loggers": False,
        "formatters": {"cohort": formatter},
        "handlers": {"stderr": {"class": "logging.StreamHandler", "formatter": "cohort",
                                "stream": "ext://sys.stderr"}},
        "root": {"level": "INFO", "handlers": ["stderr"]},
        "loggers": {
            "gunicorn.error": {"level": "INFO", "handlers": [], "propagate": True},
            "gunicorn.access": {"level": "INFO", "handlers": [], "propagate": True},
        },
    }


def configure(log_format: str | None = None) -> None:
    """Apply ``logging_dict`` to this process (the development server and the CLI's serve)."""
    logging.config.dictConfig(logging_dict(log_format))
