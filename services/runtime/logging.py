"""Structured logging for every service: one JSON object per line on stderr.

``configure_logging(level, json=True)`` installs a single stderr handler on the root logger.
Each record carries ``ts`` (ISO-8601 UTC), ``level``, ``logger``, ``msg``, the exception
traceback when there is one, and any ``extra={...}`` fields the caller passed, so a log
shipper can index them (e.g. ``log.info("group closed", extra={"group_id": gid})``).
"""

from __future__ import annotations

import json as jsonlib
import logging
import sys
from datetime import UTC, datetime
from typing import Any

__all__ = ["JsonFormatter", "configure_logging"]

_HANDLER_NAME = "grpo-stderr"

# Attributes every LogRecord has; anything else on a record came from ``extra=``.
_RECORD_FIELDS = frozenset(vars(logging.LogRecord("", 0, "", 0, "", None, None))) | {
    "message",
    "asctime",
    "taskName",
}


class JsonFormatter(logging.Formatter):
    """Format a record as one JSON line with its ``extra`` fields at the top level."""

    def format(self, record: logging.LogRecord) -> str:
        """Return the JSON text of ``record`` (non-JSON extras are converted with ``str``)."""
        payload: dict[str, Any] = {
            "ts": datetime.fromtimestamp(record.created, tz=UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "msg": record.getMessage(),
        }
        for key, value in vars(record).items():
            if key not in _RECORD_FIELDS and not key.startswith("_"):
                payload[key] = value
        if record.exc_info:
            payload["exc"] = self.formatException(record.exc_info)
        return jsonlib.dumps(payload, default=str)


def configure_logging(level: str | int = "INFO", json: bool = True) -> None:
    """Route all logging to stderr, as JSON lines (``json=True``) or plain text.

    Replaces the handler a previous call installed (calling it twice does not duplicate lines)
    and leaves handlers installed by others (e.g. pytest's capture) in place.

    Raises:
        ValueError: ``level`` is not a known logging level name.
    """
    handler = logging.StreamHandler(sys.stderr)
    if json:
        handler.setFormatter(JsonFormatter())
    else:
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    handler.set_name(_HANDLER_NAME)
    root = logging.getLogger()
    for old in list(root.handlers):
        if old.get_name() == _HANDLER_NAME:
            root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(level.upper() if isinstance(level, str) else level)
