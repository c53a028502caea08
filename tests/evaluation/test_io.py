"""The pure parts of evaluation I/O: batching by count and size, the results file, the reader."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from grpo.errors import InvalidArgumentError
from grpo.services.evaluation.batching import plan_batches
from grpo.services.evaluation.inputs import FieldMap, InputSpec, InvalidLine, read_lines
from grpo.services.evaluation.results import ResultsFile


def test_batches_split_by_count_and_by_bytes() -> None:
    assert plan_batches([1] * 5, max_items=2, max_bytes=100) == [[0, 1], [2, 3], [4]]
    assert plan_batches([40, 40, 40, 10], max_items=10, max_bytes=100) == [[0, 1], [2, 3]]
    # an item over the byte limit goes alone, its neighbours keep batching
    assert plan_batches([10, 500, 10, 10], max_items=10, max_bytes=100) == [[0], [1], [2, 3]]
    assert plan_batches([], max_items=1, max_bytes=1) == []
    with pytest.raises(InvalidArgumentError, match="max_items"):
        plan_batches([1], max_items=0, max_bytes=1)


def test_results_file_resume_drops_a_cut_last_line(tmp_path: Path) -> None:
    path = tmp_path / "out.jsonl"
    with ResultsFile(path, key=lambda r: r["id"]) as results:
        results.append([{"id": "b", "line": 2}, {"id": "a", "line": 1}])
    with path.open("ab") as fh:
        fh.write(b'{"id": "c", "li')  # killed mid-write
    with pytest.raises(InvalidArgumentError, match="--resume"):
        ResultsFile(path, key=lambda r: r["id"])
    resumed = ResultsFile(path, key=lambda r: r["id"], resume=True)
    assert resumed.done == {"a", "b"} and resumed.dropped_partial
    resumed.append([{"id": "c", "line": 3}])
    resumed.sort(lambda r: r["line"])
    assert [r["id"] for r in resumed.rows()] == ["a", "b", "c"]
    resumed.close()
    path.write_text('{"id": "a"}\nnot json\n{"id": "b"}\n')
    with pytest.raises(InvalidArgumentError, match="line 2 is not JSON"):
        ResultsFile(path, key=lambda r: r["id"], resume=True)
    with pytest.raises(InvalidArgumentError, match="is the input file"):
        ResultsFile(path, key=lambda r: r["id"], overwrite=True, inputs=[tmp_path / "out.jsonl"])


def test_reader_field_map_metadata_and_bad_lines() -> None:
    spec = InputSpec(task_type="math", require_response=False, require_prompt=True,
                     require_gold=True, extra_metadata=True)  # fmt: skip
    fields = FieldMap.parse(["prompt=problem", "gold=meta.answer", "id=uid"])
    lines = [
        json.dumps({"uid": 1, "problem": "1+1?", "meta": {"answer": 2}, "level": 3}).encode(),
        json.dumps({"uid": 2, "problem": "2+2?", "meta": {}}).encode(),
        json.dumps({"uid": 1, "problem": "3+3?", "meta": {"answer": 6}}).encode(),
    ]
    first, missing, duplicate = list(read_lines(lines, spec, fields))
    assert not isinstance(first, InvalidLine)
    assert (first.id, first.task.prompt, first.task.gold_answer) == ("1", "1+1?", "2")
    assert dict(first.task.metadata) == {"level": "3"}  # mapped keys are not metadata
    assert isinstance(missing, InvalidLine) and "missing field 'meta.answer'" in missing.reason
    assert isinstance(duplicate, InvalidLine) and "duplicate id '1'" in duplicate.reason
    with pytest.raises(InvalidArgumentError, match=r"unknown field.*valid: id, response"):
        FieldMap.parse(["answer=gold"])
    with pytest.raises(InvalidArgumentError, match="NAME=KEY"):
        FieldMap.parse(["gold"])
