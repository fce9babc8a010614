"""JSON log lines (`KJ_LOG_FORMAT=json`): one object per line, for a log collector.

Each line has `time` (UTC, ISO 8601), `level`, `logger` and `message`; `request_id` when it
was logged while a request was handled (`web.request_id`), and `exception` with the traceback
when there was one. Only the message is written, never a request's headers.
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime
from typing import Any

import orjson

from web.request_id import current_request_id


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, Any] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        request_id = current_request_id.get()
        if request_id is not None:
            line["request_id"] = request_id
        if record.exc_info:
            line["exception"] = self.formatException(record.exc_info)
        elif record.exc_text:
            line["exception"] = record.exc_text
        if record.stack_info:
            line["stack"] = self.formatStack(record.stack_info)
        return orjson.dumps(line, default=str).decode()


def json_logging(loglevel: str) -> dict[str, Any]:
    """A `logging.config.dictConfig` of JSON lines on stdout, at `loglevel`, for the root."""
    level = loglevel.upper()
    return {
        "version": 1,
        "disable_existing_loggers": False,
        "formatters": {"json": {"()": JsonFormatter}},
        "handlers": {
            "default": {
                "class": "logging.StreamHandler",
                "formatter": "json",
                "stream": "ext://sys.stdout",
                "level": level,
            }
        },
        "root": {"level": level, "handlers": ["default"]},
    }
