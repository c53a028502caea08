"""JSONL input files (JSON Lines, https://jsonlines.org): one JSON object per line.

The one reader of the users' JSONL files: the run's task file (``data.jsonl``,
``grpo.services.tasks.run_tasks``) and the lines ``grpo score`` / ``grpo eval`` read
(``grpo.services.evaluation.inputs``). What a line is, for both:

- line numbers are 1-based and count every line, blank ones included (as an editor shows them);
- a blank (whitespace-only) line is skipped, never an error;
- a UTF-8 byte-order mark at the start of the file (line 1) is dropped (editors on Windows
  write one; ``json.loads`` refuses it). Elsewhere it is a character like any other;
- a line that is not UTF-8, not JSON, or not a JSON *object* is bad; the reason says which.

Two ways to read: :func:`decode_line` gives one line's object or raises with the reason, for
readers that report bad lines one by one (``grpo score`` writes an ``invalid_input`` row per
line); :func:`read_objects` reads a whole file and stops at the first bad line with an error
naming the file and the line (a training run refuses a bad task file).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from grpo.errors import InvalidArgumentError, NotFoundError

__all__ = ["UTF8_BOM", "decode_line", "read_objects"]

UTF8_BOM = b"\xef\xbb\xbf"
"""The UTF-8 encoding of U+FEFF, dropped from the start of line 1."""


def decode_line(raw: bytes, line_no: int) -> dict[str, Any] | None:
    """The JSON object on one line, or None for a blank line.

    Args:
        raw: the line's bytes; a trailing newline (``\\n`` or ``\\r\\n``) is allowed.
        line_no: its 1-based line number; a byte-order mark is dropped on line 1 only.

    Returns:
        The decoded object (a dict), or None when the line holds only whitespace.

    Raises:
        InvalidArgumentError: the line is not UTF-8 (the message gives the byte offset), not
            JSON (the message gives the parser's reason and the column), or not a JSON object
            (the message gives the JSON type). The message does not repeat the line number:
            callers put it where their format wants it.
    """
    if line_no == 1 and raw.startswith(UTF8_BOM):
        raw = raw[len(UTF8_BOM) :]
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InvalidArgumentError(f"not valid UTF-8 (byte {exc.start})") from None
    if not text.strip():
        return None
    try:
        obj = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InvalidArgumentError(f"invalid JSON: {exc.msg} (column {exc.colno})") from None
    if not isinstance(obj, dict):
        raise InvalidArgumentError(f"expected a JSON object, got {type(obj).__name__}")
    return obj


def read_objects(path: Path, *, what: str = "JSONL") -> Iterator[tuple[int, dict[str, Any]]]:
    """Yield ``(line number, object)`` for every non-blank line of the JSONL file ``path``.

    Args:
        path: the file.
        what: how error messages name the file's role (e.g. ``data.jsonl``).

    Raises:
        NotFoundError: ``path`` is not a file (raised on the first ``next``).
        InvalidArgumentError: the first bad line (see :func:`decode_line`); the message starts
            with ``<path>:<line number>:``.
    """
    if not path.is_file():
        raise NotFoundError(f"{what} file {path} does not exist")
    with path.open("rb") as fh:
        for line_no, raw in enumerate(fh, start=1):
            try:
                obj = decode_line(raw, line_no)
            except InvalidArgumentError as exc:
                raise InvalidArgumentError(f"{path}:{line_no}: {exc}") from None
            if obj is not None:
                yield line_no, obj
