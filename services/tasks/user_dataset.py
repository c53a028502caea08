"""A user's dataset as tasks: JSON Lines, Parquet, or a Hugging Face dataset, one task per row,
mapped by the field names of ``data.dataset`` (``DatasetSourceConfig``).

Readers (each yields ``(where, row)``, ``where`` naming the row in messages):

- ``jsonl``: ``grpo.services.runtime.jsonl.read_objects`` (blank lines skipped, a leading
  byte-order mark dropped, a bad line stops the run with ``<file>:<line>:``);
- ``parquet``: ``pyarrow.parquet.read_table`` (``<file> row <n>``, 1-based);
- ``hf``: ``datasets.load_from_disk`` for a folder written by ``save_to_disk`` (a
  ``DatasetDict`` by ``split``, a single ``Dataset`` as it is), else
  ``datasets.load_dataset(path, split=...)`` for a hub id (``HF_HUB_OFFLINE`` makes it fail
  fast; the error says so).

Mapping: the prompt is ``prompt_template`` with ``{prompt}`` replaced by the prompt field; the
gold answer is the gold field as text, or its ``gold_pattern`` group (commas between digits
dropped); the type is ``task_type`` or the row's ``task_type_field``; the id is the
``id_field`` or ``<file stem>-<line>`` (JSONL), ``<file stem>-<row>`` (Parquet),
``<name>-<split>-<row>`` (hf). A field missing from the
dataset is an error naming the fields it has.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from grpo.errors import InvalidArgumentError, NotFoundError
from grpo.services.runtime.jsonl import read_objects
from grpo.services.settings.data import DatasetSourceConfig
from grpo.v1 import common_pb2

__all__ = ["load_dataset_tasks", "read_rows"]

Rows = Iterator[tuple[str, int, dict[str, Any]]]
"""(where, number, row): the row's name in messages, its line (JSONL) or 1-based index."""


def _jsonl_rows(path: Path) -> Rows:
    for number, row in read_objects(path, what="data.dataset"):
        yield f"{path}:{number}", number, row


def _parquet_rows(path: Path) -> tuple[list[str], Rows]:
    import pyarrow.parquet as pq

    if not path.is_file():
        raise NotFoundError(f"data.dataset file {path} does not exist")
    table = pq.read_table(path)
    rows = ((f"{path} row {i}", i, row) for i, row in enumerate(table.to_pylist(), start=1))
    return list(table.column_names), rows


def _hf_dataset(path: str, split: str) -> Any:
    """The split ``split`` of a saved dataset folder or a hub id.

    Raises:
        NotFoundError: the folder holds no such split, or the hub id cannot be loaded.
    """
    import datasets

    if Path(path).is_dir():
        loaded = datasets.load_from_disk(path)
        if isinstance(loaded, datasets.DatasetDict):
            if split not in loaded:
                raise NotFoundError(
                    f"the dataset saved in {path} has no split {split!r}; its splits: "
                    f"{', '.join(loaded)} (data.dataset.split / heldout_split)"
                )
            return loaded[split]
        return loaded
    try:
        return datasets.load_dataset(path, split=split)
    except Exception as exc:  # offline, unknown id, no such split: one message
        raise NotFoundError(
            f"cannot load the dataset {path!r} (split {split!r}) from the hub or its cache: "
            f"{type(exc).__name__}: {exc}"[:600]
            + " (a folder written by save_to_disk needs no hub)"
        ) from None


def read_rows(kind: str, path: str, split: str) -> tuple[list[str] | None, Rows]:
    """The fields (None when rows may differ: JSONL) and the rows of a dataset.

    Args:
        kind: ``jsonl``, ``parquet`` or ``hf``.
        path: the file, folder or hub id.
        split: hf: the split to read.

    Raises:
        NotFoundError: no such file, folder, split or hub dataset.
        InvalidArgumentError: an unknown kind; a JSONL line that is not a JSON object.
    """
    if kind == "jsonl":
        return None, _jsonl_rows(Path(path))
    if kind == "parquet":
        return _parquet_rows(Path(path))
    if kind == "hf":
        dataset = _hf_dataset(path, split)
        name = Path(path).name or path
        rows = ((f"{name}[{split}] row {i}", i, row) for i, row in enumerate(dataset, start=1))
        return list(dataset.column_names), rows
    raise InvalidArgumentError(f"unknown dataset kind {kind!r}; valid: jsonl, parquet, hf")


def _mapped_fields(source: DatasetSourceConfig) -> dict[str, str]:
    """Setting name -> the field it names."""
    named = {"prompt_field": source.prompt_field, "gold_field": source.gold_field}
    if source.task_type_field:
        named["task_type_field"] = source.task_type_field
    if source.id_field:
        named["id_field"] = source.id_field
    return named


def _check_fields(where: str, have: Sequence[str], source: DatasetSourceConfig) -> None:
    """Refuse a mapped field the dataset (or a row) does not have, listing the ones it has."""
    for setting, name in _mapped_fields(source).items():
        if name not in have:
            raise InvalidArgumentError(
                f"{where}: no field {name!r} (data.dataset.{setting}); its fields: "
                f"{', '.join(sorted(have)) or 'none'}"
            )


def _text(where: str, row: dict[str, Any], name: str) -> str:
    value = row[name]
    if value is None:
        raise InvalidArgumentError(f"{where}: field {name!r} is null")
    return value if isinstance(value, str) else str(value)


def _gold(where: str, text: str, source: DatasetSourceConfig) -> str:
    if source.gold_pattern is None:
        return text
    found = re.search(source.gold_pattern, text)
    if found is None:
        raise InvalidArgumentError(
            f"{where}: data.dataset.gold_pattern {source.gold_pattern!r} does not match field "
            f"{source.gold_field!r} ({text[-80:]!r})"
        )
    return re.sub(r"(?<=\d),(?=\d)", "", found.group(1).strip())


def load_dataset_tasks(
    source: DatasetSourceConfig, kind: str, *, heldout: bool = False
) -> list[common_pb2.Task]:
    """The tasks of a user's dataset (module docstring).

    Args:
        source: the dataset and its mapping.
        kind: ``jsonl``, ``parquet`` or ``hf`` (``data.source``).
        heldout: read the held-out rows (``heldout_path`` / ``heldout_split``) instead.

    Returns:
        One task per row, in row order.

    Raises:
        NotFoundError: the file, folder, split or hub dataset cannot be found.
        InvalidArgumentError: a mapped field missing (the message names the setting and lists
            the fields the dataset has), a null field, a gold the pattern does not match, a
            repeated id, a JSONL line that is not an object, or no row at all.
    """
    path = (source.heldout_path or source.path) if heldout else source.path
    split = (source.heldout_split or source.split) if heldout else source.split
    fields, rows = read_rows(kind, path, split)
    if fields is not None:
        _check_fields(f"{path}" + (f" [{split}]" if kind == "hf" else ""), fields, source)
    stem = Path(path).stem if kind != "hf" else f"{Path(path).name or path}-{split}"
    tasks: list[common_pb2.Task] = []
    seen: set[str] = set()
    for where, number, row in rows:
        if fields is None:
            _check_fields(where, list(row), source)
        task_id = _text(where, row, source.id_field) if source.id_field else f"{stem}-{number}"
        if task_id in seen:
            raise InvalidArgumentError(f"{where}: task id {task_id!r} repeats")
        seen.add(task_id)
        kind_of_row = (
            _text(where, row, source.task_type_field)
            if source.task_type_field
            else source.task_type
        )
        prompt = source.prompt_template.replace("{prompt}", _text(where, row, source.prompt_field))
        gold = _gold(where, _text(where, row, source.gold_field), source)
        tasks.append(common_pb2.Task(id=task_id, type=kind_of_row, prompt=prompt, gold_answer=gold))
    if not tasks:
        raise InvalidArgumentError(f"data.dataset {path} holds no row")
    return tasks
