"""The one JSONL reader (``grpo.services.runtime.jsonl``) and its two users: the run's
``data.jsonl`` task file (strict: the first bad line stops the run) and ``grpo score``/``grpo
eval`` lines (lenient: each bad line is an ``InvalidLine``)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from grpo.errors import InvalidArgumentError, NotFoundError
from grpo.services.evaluation.inputs import FieldMap, InputSpec, InvalidLine, read_lines
from grpo.services.runtime.jsonl import UTF8_BOM, decode_line, read_objects
from grpo.services.settings.data import DatasetSourceConfig
from grpo.services.tasks.user_dataset import load_dataset_tasks

BAD_LINES = [
    (b"\xff{}\n", "not valid UTF-8 (byte 0)"),
    (b'{"a": 1,}\n', "invalid JSON: Expecting property name enclosed in double quotes (column 9)"),
    (b"[1, 2]\n", "expected a JSON object, got list"),
    (b'"text"\n', "expected a JSON object, got str"),
]


def test_decode_line_objects_blank_lines_and_the_bom() -> None:
    assert decode_line(b'{"a": 1}\r\n', 3) == {"a": 1}
    assert decode_line(b" \t\r\n", 2) is None and decode_line(b"", 7) is None
    assert decode_line(UTF8_BOM + b'{"a": 1}\n', 1) == {"a": 1}
    assert decode_line(UTF8_BOM + b"\n", 1) is None
    # A BOM is a file's first bytes, not a line's: on a later line it is a bad line.
    with pytest.raises(InvalidArgumentError, match="invalid JSON"):
        decode_line(UTF8_BOM + b'{"a": 1}\n', 2)


@pytest.mark.parametrize(("raw", "reason"), BAD_LINES)
def test_decode_line_names_what_is_wrong(raw: bytes, reason: str) -> None:
    with pytest.raises(InvalidArgumentError) as info:
        decode_line(raw, 4)
    assert str(info.value) == reason


def test_read_objects_counts_every_line_and_names_the_bad_one(tmp_path: Path) -> None:
    path = tmp_path / "rows.jsonl"
    path.write_bytes(UTF8_BOM + b'{"n": 1}\n\n   \n{"n": 4}\r\n{"n": 5}')  # no final newline
    assert list(read_objects(path)) == [(1, {"n": 1}), (4, {"n": 4}), (5, {"n": 5})]
    for raw, reason in BAD_LINES:
        path.write_bytes(b'{"n": 1}\n\n' + raw + b'{"n": 4}\n')
        with pytest.raises(InvalidArgumentError) as info:
            list(read_objects(path, what="data.jsonl"))
        assert str(info.value) == f"{path}:3: {reason}"
    with pytest.raises(NotFoundError, match=r"data\.jsonl file .*missing\.jsonl does not exist"):
        list(read_objects(tmp_path / "missing.jsonl", what="data.jsonl"))


def test_the_run_task_file_reads_a_bom_and_names_a_bad_line(tmp_path: Path) -> None:
    path = tmp_path / "tasks.jsonl"
    rows = [{"prompt": "1+1=", "gold": 2}, {"prompt": "2+2=", "gold": 4}]
    path.write_bytes(UTF8_BOM + b"\n".join(json.dumps(r).encode() for r in rows) + b"\n")
    source = DatasetSourceConfig(path=str(path), gold_field="gold", task_type="arith")
    tasks = load_dataset_tasks(source, "jsonl")
    assert [(t.id, t.prompt, t.gold_answer) for t in tasks] == [
        ("tasks-1", "1+1=", "2"),
        ("tasks-2", "2+2=", "4"),
    ]
    path.write_bytes(b'{"prompt": "1+1=", "gold": 2}\n\n{"prompt": "2+2=", "gold": 4\n')
    with pytest.raises(InvalidArgumentError, match=rf"^{path}:3: invalid JSON: "):
        load_dataset_tasks(source, "jsonl")


def test_score_lines_read_a_bom_and_report_bad_lines_with_the_same_reasons() -> None:
    spec = InputSpec(task_type="math", require_gold=True)
    lines = [UTF8_BOM + json.dumps({"id": "a", "response": "2", "gold": "2"}).encode() + b"\n"]
    lines += [b"\n"] + [raw for raw, _ in BAD_LINES]
    first, *bad = read_lines(lines, spec, FieldMap())
    assert not isinstance(first, InvalidLine) and (first.line, first.id) == (1, "a")
    assert [(b.line, b.reason) for b in bad if isinstance(b, InvalidLine)] == [
        (3 + i, reason) for i, (_, reason) in enumerate(BAD_LINES)
    ]
