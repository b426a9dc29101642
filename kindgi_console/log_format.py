"""`KINDGI_LOG_FORMAT=json`: every log record as one JSON object a line.

Apart from `kindgi_console.logs` because the logging configuration imports it while Django
starts, before any model can be imported.
"""

from __future__ import annotations

import json
import logging
from datetime import UTC, datetime
from typing import Any

#: What a record carries beyond the message, in its `kindgi` extra, as JSON fields.
FIELDS = "kindgi"


class JsonLines(logging.Formatter):
    """One JSON object per record: time, level, logger, message, the record's `kindgi`
    fields, and the exception's traceback when there is one."""

    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, Any] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        line.update(getattr(record, FIELDS, None) or {})
        if record.exc_info:
            line["exception"] = self.formatException(record.exc_info)
        return json.dumps(line, default=str)
