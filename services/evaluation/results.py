"""An append-only JSONL results file that survives interruption and can be resumed.

Every result is one JSON line, written and flushed as soon as it is known, so a Ctrl-C, a
SIGTERM, a crash or a lost verifier keeps every finished result. Opening the file again with
``resume=True`` reads the keys already there (``grpo score``: the item id; ``grpo eval``: the
problem id and sample index) so that the caller skips them: no result is computed twice and
none is missing. A last line cut short by a kill (no final newline) is dropped and recomputed.

Rows that are not final (``keep`` says no: a status that is no verdict, such as
``undecided``) are not skipped but handed back in :attr:`ResultsFile.retry`: the caller
computes them again and appends the new row with the same key, which **supersedes** the old
one. The old row stays in the file until then (an interrupted retry loses nothing), and
:meth:`ResultsFile.rows` and :meth:`ResultsFile.sort` keep only the last row of each key.
When a run is complete, :meth:`ResultsFile.sort` rewrites the file in input order (atomically:
a temporary file renamed over it), so a finished file reads in input order, one row per key,
and an unfinished one carries the input position in each line.

Refusals that protect results: the output may not be the input file; an existing non-empty
output is neither overwritten nor appended to unless ``resume`` or ``overwrite`` says so; and
with a ``record_path``, a resume must be of the same run (``provenance.RunRecord``: same input,
model, settings and verifier), checked by :meth:`ResultsFile.claim` before the first row.
"""

from __future__ import annotations

import itertools
import json
import os
import tempfile
from collections.abc import Callable, Hashable, Iterable, Iterator
from pathlib import Path
from typing import IO, Any

from grpo.errors import InvalidArgumentError, NotFoundError, UsageError
from grpo.services.evaluation.provenance import RunRecord

__all__ = ["ResultsFile", "same_file"]

Row = dict[str, Any]


def same_file(a: Path, b: Path) -> bool:
    """True when ``a`` and ``b`` name the same file (resolved paths, hard links included)."""
    try:
        return a.resolve() == b.resolve() or (a.exists() and b.exists() and a.samefile(b))
    except OSError:
        return False


class ResultsFile:
    """Append-only JSONL results with resume (see the module docstring).

    Args:
        path: the output file.
        key: row -> its key (what ``--resume`` skips), e.g. ``lambda r: r["id"]``.
        resume: keep the rows already in ``path`` and report their keys in :attr:`done`.
        overwrite: start ``path`` afresh even when it holds results.
        inputs: paths the output must differ from (the input file).
        keep: row -> True when it is final and is kept on resume; a row it refuses is put in
            :attr:`retry` to be computed again (default: every row is final).
        record_path: where the run record lives (``provenance``); when set, :meth:`claim`
            must be called before the first :meth:`append`.
        option: the command-line option that names ``path`` (``--output``), for the
            messages of the refusals that are usage errors.

    Attributes:
        done: keys of the final rows already in the file when it was opened (skip them).
        retry: key -> the last row of each key that ``keep`` refused (compute these again).
        resumed_rows: how many final rows were kept.
        dropped_partial: True when a cut-off last line was removed on opening.

    Raises:
        UsageError: ``path`` is one of ``inputs``; it holds results and neither ``resume``
            nor ``overwrite`` is set; or both are (``option`` names the option at fault).
        InvalidArgumentError: a line of it (not the last) is not JSON.
        NotFoundError: the folder of ``path`` does not exist.
        OSError: the file cannot be read or written.
    """

    def __init__(
        self,
        path: Path,
        *,
        key: Callable[[Row], Hashable],
        resume: bool = False,
        overwrite: bool = False,
        inputs: Iterable[Path] = (),
        keep: Callable[[Row], bool] | None = None,
        record_path: Path | None = None,
        option: str | None = None,
    ) -> None:
        self.path = path
        self._key = key
        self._keep = keep
        self.record_path = record_path
        self._claimed = record_path is None
        for source in inputs:
            if same_file(path, source):
                raise UsageError(
                    f"the output {path} is the input file: choose another output path "
                    "(writing it would destroy the input)",
                    option=option,
                )
        if not path.parent.is_dir():
            raise NotFoundError(f"output folder {path.parent} does not exist")
        if resume and overwrite:
            raise UsageError(
                "--resume and --overwrite exclude each other: --resume continues the output, "
                "--overwrite starts it over; pass one",
                option="--resume / --overwrite",
            )
        self.done: set[Hashable] = set()
        self.retry: dict[Hashable, Row] = {}
        self.resumed_rows = 0
        self.dropped_partial = False
        has_results = path.is_file() and path.stat().st_size > 0
        if has_results and not (resume or overwrite):
            raise UsageError(
                f"the output {path} already holds results: pass --resume to continue it, or "
                "--overwrite to start over",
                option=option,
            )
        self._resuming = resume and has_results
        if self._resuming:
            self._load_existing()
        mode = "ab" if resume else "wb"
        self._fh: IO[bytes] | None = path.open(mode)

    def claim(self, record: RunRecord) -> None:
        """Tie the file to the run ``record``: on resume, check it against the record the
        earlier run wrote; else write it. Call it once, before the first :meth:`append`.

        Raises:
            InvalidArgumentError: no ``record_path`` was given; or, on resume, the earlier
                run's record is missing (an older grpo), unreadable, or differs (the message
                names the fields; ``provenance.RunRecord.check_resume``).
            OSError: the record cannot be written.
        """
        if self.record_path is None:
            raise InvalidArgumentError(f"results file {self.path} was opened without a record")
        if self._resuming:
            record.check_resume(self.record_path, self.path)
        else:
            record.write(self.record_path)
        self._claimed = True

    def _load_existing(self) -> None:
        with self.path.open("rb+") as fh:
            data = fh.read()
            end = len(data)
            if data and not data.endswith(b"\n"):
                end = data.rfind(b"\n") + 1  # the cut-off last line: recompute it
                fh.truncate(end)
                self.dropped_partial = True
        for line_no, raw in enumerate(data[:end].splitlines(), start=1):
            if not raw.strip():
                continue
            try:
                row = json.loads(raw)
            except ValueError:
                raise InvalidArgumentError(
                    f"{self.path} line {line_no} is not JSON: not a results file of this "
                    "command; choose another output or --overwrite"
                ) from None
            try:
                key = self._key(row)
            except (KeyError, TypeError, ValueError):
                raise InvalidArgumentError(
                    f"{self.path} line {line_no} lacks the fields of a results row: not a "
                    "results file of this command; choose another output or --overwrite"
                ) from None
            self.done.discard(key)  # a later row of a key supersedes the earlier one
            self.retry.pop(key, None)
            if self._keep is None or self._keep(row):
                self.done.add(key)
            else:
                self.retry[key] = row
        self.resumed_rows = len(self.done)

    def append(self, rows: Iterable[Row]) -> int:
        """Write ``rows`` (one JSON line each) and flush them to the OS; returns how many.

        Raises:
            OSError: the write failed. InvalidArgumentError: the file is closed.
        """
        if self._fh is None:
            raise InvalidArgumentError(f"results file {self.path} is closed")
        if not self._claimed:
            raise InvalidArgumentError(f"results file {self.path}: claim() the run first")
        data = b"".join(json.dumps(row, ensure_ascii=False).encode("utf-8") + b"\n" for row in rows)
        if data:
            self._fh.write(data)
            self._fh.flush()
        return data.count(b"\n")

    def close(self) -> None:
        """Flush, fsync and close the file (idempotent)."""
        if self._fh is not None:
            self._fh.flush()
            os.fsync(self._fh.fileno())
            self._fh.close()
            self._fh = None

    def __enter__(self) -> ResultsFile:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _latest(self, order: Callable[[Row], Any] | None = None) -> list[tuple[Any, int, int]]:
        """``(order(row), offset, length)`` of the last row of each key, in file order."""
        if self._fh is not None:
            self._fh.flush()
        latest: dict[Hashable, tuple[Any, int, int]] = {}
        with self.path.open("rb") as fh:
            offset = 0
            for raw in fh:
                if raw.strip():
                    row = json.loads(raw)
                    key = self._key(row)
                    latest.pop(key, None)  # re-inserted last: file order of the last row
                    latest[key] = (order(row) if order else None, offset, len(raw))
                offset += len(raw)
        return list(latest.values())

    def rows(self) -> Iterator[Row]:
        """The last row of each key (a retried row supersedes the earlier one), in file order
        (flushes pending writes first)."""
        index = self._latest()
        with self.path.open("rb") as fh:
            for _, start, length in index:
                fh.seek(start)
                yield json.loads(fh.read(length))

    def sort(self, order: Callable[[Row], Any]) -> None:
        """Rewrite the file with the last row of each key, sorted by ``order`` (atomic rename;
        a no-op when already sorted with one row per key). Only whole-file offsets are held in
        memory, not the rows.

        Raises:
            OSError: the rewrite failed (the original file is then unchanged).
        """
        index = self._latest(order)
        with self.path.open("rb") as fh:
            lines = sum(1 for raw in fh if raw.strip())
        keys = [k for k, _, _ in index]
        if lines == len(index) and all(a <= b for a, b in itertools.pairwise(keys)):
            return
        index.sort(key=lambda entry: entry[0])
        reopen = self._fh is not None
        self.close()
        fd, tmp = tempfile.mkstemp(dir=self.path.parent, prefix=f".{self.path.name}.")
        try:
            with os.fdopen(fd, "wb") as out, self.path.open("rb") as src:
                for _, start, length in index:
                    src.seek(start)
                    out.write(src.read(length))
                out.flush()
                os.fsync(out.fileno())
            os.replace(tmp, self.path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
        if reopen:
            self._fh = self.path.open("ab")
