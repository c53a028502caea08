"""The pure parts of evaluation I/O: batching by count and size, the results file, the reader."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from grpo.errors import InvalidArgumentError, UsageError
from grpo.services.evaluation.batching import plan_batches
from grpo.services.evaluation.inputs import (
    OUTPUT_COMPARE_NAMES,
    FieldMap,
    InputSpec,
    InvalidLine,
    ScoreItem,
    read_lines,
)
from grpo.services.evaluation.results import ResultsFile
from grpo.services.evaluation.tasks import load_problems
from grpo.v1 import common_pb2


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
    with pytest.raises(UsageError, match=r"unknown field.*valid: id, response") as exc:
        FieldMap.parse(["answer=gold"])
    assert exc.value.option == "--field"
    with pytest.raises(UsageError, match="NAME=KEY"):
        FieldMap.parse(["gold"])
    assert FieldMap.parse(["gold=gold", "id=uid"]).keys == {"id": "uid"}  # a no-op rename
    assert FieldMap({"gold": "gold"}) == FieldMap()


def test_reader_refuses_an_empty_id_naming_the_field() -> None:
    """``"id": ""`` is a bad line naming the field, not a silent ``line-N``; an absent id is."""
    spec = InputSpec(task_type="math")
    lines = [b'{"id": "", "response": "1"}', b'{"response": "2"}', b'{"qid": "", "response": "3"}']
    empty, absent = read_lines(lines[:2], spec, FieldMap())
    assert isinstance(empty, InvalidLine) and empty.id == "line-1"
    assert "field 'id' is empty" in empty.reason
    assert isinstance(absent, ScoreItem) and absent.id == "line-2"
    (renamed,) = read_lines(lines[2:], spec, FieldMap.parse(["id=qid"]))
    assert isinstance(renamed, InvalidLine) and "field 'qid' is empty" in renamed.reason


def test_an_invalid_line_keeps_the_metadata_it_can_read() -> None:
    """grpo eval --by slices bad lines too: what can be read of their metadata is kept."""
    spec = InputSpec(task_type="math", require_response=False, require_prompt=True,
                     require_gold=True, extra_metadata=True)  # fmt: skip
    lines = [
        json.dumps({"id": "p", "prompt": 5, "gold": "1", "subject": "algebra", "level": 2,
                    "tags": ["x"], "metadata": {"src": "book", "bad": [1]}}).encode(),
        b"{not json",
        json.dumps({"id": "q", "prompt": "1+1", "gold": "2", "subject": "geo"}).encode(),
        json.dumps({"id": "q", "prompt": "1+2", "gold": "3", "subject": "arith"}).encode(),
    ]  # fmt: skip
    bad, unreadable, _, duplicate = read_lines(lines, spec, FieldMap())
    assert isinstance(bad, InvalidLine) and "field 'prompt' must be a string" in bad.reason
    assert dict(bad.metadata) == {"subject": "algebra", "level": "2", "src": "book"}
    assert isinstance(unreadable, InvalidLine) and dict(unreadable.metadata) == {}
    assert isinstance(duplicate, InvalidLine) and dict(duplicate.metadata) == {"subject": "arith"}


def test_every_output_comparison_has_an_input_name() -> None:
    declared = {v for k, v in common_pb2.OutputCompare.items() if k != "OUTPUT_COMPARE_UNSPECIFIED"}
    assert set(OUTPUT_COMPARE_NAMES.values()) == declared
    assert all(
        common_pb2.OutputCompare.Name(v) == f"OUTPUT_COMPARE_{k.upper()}"
        for k, v in OUTPUT_COMPARE_NAMES.items()
    )


CODE_SPEC = InputSpec(task_type="code", require_code_tests=True)
IO = {"response": "print(1)", "io_pairs": [["", "1"]]}


@pytest.mark.parametrize(
    ("extra", "want"),
    [
        ({}, (common_pb2.OUTPUT_COMPARE_UNSPECIFIED, 0.0)),
        ({"output_compare": "exact"}, (common_pb2.OUTPUT_COMPARE_EXACT, 0.0)),
        ({"output_compare": "Lines"}, (common_pb2.OUTPUT_COMPARE_LINES, 0.0)),
        ({"output_compare": "OUTPUT_COMPARE_TOKENS"}, (common_pb2.OUTPUT_COMPARE_TOKENS, 0.0)),
        ({"float_tolerance": 1e-3}, (common_pb2.OUTPUT_COMPARE_UNSPECIFIED, 1e-3)),
        (
            {"output_compare": "tokens_float", "float_tolerance": 0},
            (common_pb2.OUTPUT_COMPARE_TOKENS_FLOAT, 0.0),
        ),
    ],
)
def test_reader_sets_the_output_comparison_of_io_pairs(
    extra: dict[str, object], want: tuple[int, float]
) -> None:
    (item,) = read_lines([json.dumps({**IO, **extra}).encode()], CODE_SPEC, FieldMap())
    assert isinstance(item, ScoreItem), item
    tests = item.task.code_tests
    assert (tests.output_compare, tests.float_tolerance) == want
    assert len(tests.io_pairs) == 1


@pytest.mark.parametrize(
    ("line", "reason"),
    [
        ({**IO, "output_compare": "fuzzy"},
         "field 'output_compare' must be one of exact, lines, tokens, tokens_float, got 'fuzzy'"),
        ({**IO, "output_compare": 1}, "field 'output_compare' must be one of"),
        ({**IO, "output_compare": "unspecified"}, "field 'output_compare' must be one of"),
        ({**IO, "float_tolerance": "1e-3"}, "field 'float_tolerance' must be a number, got str"),
        ({**IO, "float_tolerance": True}, "field 'float_tolerance' must be a number, got bool"),
        ({**IO, "float_tolerance": 1.5}, "float_tolerance=1.5 must be in [0, 1)"),
        ({**IO, "float_tolerance": -1e-3}, "float_tolerance=-0.001 must be in [0, 1)"),
        ({**IO, "output_compare": "exact", "float_tolerance": 1e-3},
         "float_tolerance is set but output_compare is OUTPUT_COMPARE_EXACT"),
        ({"response": "x", "test_list": ["assert f(1) == 1"], "output_compare": "exact"},
         "field 'output_compare' applies to 'io_pairs' tasks only"),
        ({"response": "x", "tests": "def check(c):\n    assert c(1)\n", "entry_point": "f",
          "float_tolerance": 0.1},
         "field 'float_tolerance' applies to 'io_pairs' tasks only"),
        # A task without a single test is the input's fault (invalid_input), not INTERNAL.
        ({"response": "x", "io_pairs": []}, "field 'io_pairs' must be a non-empty list"),
        ({"response": "x", "test_list": []}, "field 'test_list' is empty"),
    ],
)  # fmt: skip
def test_reader_refuses_a_bad_output_comparison(line: dict[str, object], reason: str) -> None:
    (bad,) = read_lines([json.dumps(line).encode()], CODE_SPEC, FieldMap())
    assert isinstance(bad, InvalidLine) and reason in bad.reason, bad


def test_reader_float_tolerance_nan_and_a_renamed_key() -> None:
    (nan,) = read_lines([b'{"response": "x", "io_pairs": [["", "1"]], "float_tolerance": NaN}'],
                        CODE_SPEC, FieldMap())  # fmt: skip
    assert isinstance(nan, InvalidLine) and "float_tolerance=nan must be in [0, 1)" in nan.reason
    fields = FieldMap.parse(["output_compare=judge.mode"])
    line = {**IO, "judge": {"mode": "nope"}}
    (renamed,) = read_lines([json.dumps(line).encode()], CODE_SPEC, fields)
    assert isinstance(renamed, InvalidLine) and "field 'judge.mode'" in renamed.reason


def test_eval_problems_carry_the_output_comparison(tmp_path: Path) -> None:
    """``grpo eval`` reads a JSONL problem set with the same reader: the setting reaches the
    task, a bad value is an invalid line, and the output fields are not metadata."""
    path = tmp_path / "problems.jsonl"
    rows = [
        {"id": "a", "prompt": "double", "io_pairs": [["2", "4"]], "output_compare": "tokens",
         "level": 1},
        {"id": "b", "prompt": "double", "io_pairs": [["2", "4"]], "output_compare": "close"},
    ]  # fmt: skip
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    problems = load_problems(str(path), task_type="code")
    (task,) = problems.tasks
    assert task.code_tests.output_compare == common_pb2.OUTPUT_COMPARE_TOKENS
    assert dict(task.metadata) == {"level": "1"}
    (bad,) = problems.invalid
    assert bad.id == "b" and "field 'output_compare' must be one of" in bad.reason


def test_results_file_retries_rows_that_are_not_final_and_the_new_row_supersedes(
    tmp_path: Path,
) -> None:
    from grpo.services.evaluation.provenance import RunRecord
    from grpo.services.evaluation.scoring import is_final

    path, record = tmp_path / "out.jsonl", tmp_path / "out.jsonl.run.json"
    run = RunRecord("score", identity={"input_sha256": "abc"})
    rows = [
        {"id": "ok", "line": 1, "status": "ok", "reward": 0.0, "latency_s": 0.1},
        {"id": "bad", "line": 2, "status": "invalid_input", "reward": None},
        {"id": "und", "line": 3, "status": "undecided", "reward": None, "latency_s": 0.1},
        {"id": "int", "line": 4, "status": "internal", "reward": None, "latency_s": 0.1},
        {"id": "big", "line": 5, "status": "too_large", "reward": None},
    ]
    with ResultsFile(path, key=lambda r: r["id"], keep=is_final, record_path=record) as results:
        with pytest.raises(InvalidArgumentError, match="claim"):
            results.append(rows)  # no row before the run record
        results.claim(run)
        results.append(rows)
    resumed = ResultsFile(path, key=lambda r: r["id"], resume=True, keep=is_final,
                          record_path=record)  # fmt: skip
    assert resumed.done == {"ok", "bad"} and set(resumed.retry) == {"und", "int", "big"}
    assert resumed.resumed_rows == 2
    resumed.claim(run)
    resumed.append([{"id": "und", "line": 3, "status": "ok", "reward": 1.0, "latency_s": 0.2}])
    assert [(r["id"], r["status"]) for r in resumed.rows()] == [
        ("ok", "ok"), ("bad", "invalid_input"), ("int", "internal"), ("big", "too_large"),
        ("und", "ok"),
    ]  # fmt: skip
    resumed.sort(lambda r: r["line"])
    resumed.close()
    assert [json.loads(x)["status"] for x in path.read_text().splitlines()] == [
        "ok", "invalid_input", "ok", "internal", "too_large",
    ]  # fmt: skip
    with pytest.raises(InvalidArgumentError, match=r'input_sha256: recorded "abc", now "abd"'):
        ResultsFile(path, key=lambda r: r["id"], resume=True, record_path=record).claim(
            RunRecord("score", identity={"input_sha256": "abd"})
        )


def test_verifier_identity_leaves_out_worker_counts_only() -> None:
    from grpo.services.evaluation.provenance import differences, verifier_identity
    from grpo.v1 import verifier_pb2

    def info(workers: int, timeout_s: float) -> verifier_pb2.VerifierDescribeResponse:
        pool = {"workers": workers, "timeout_s": timeout_s}
        return verifier_pb2.VerifierDescribeResponse(
            name="math", version="0.1.0", kind=verifier_pb2.VERIFIER_KIND_OUTCOME,
            task_types=["math"], config={"pool": str(pool), "rel_tol": "1e-06"},
        )  # fmt: skip

    assert verifier_identity(info(1, 5.0)) == verifier_identity(info(4, 5.0))
    assert differences(verifier_identity(info(1, 5.0)), verifier_identity(info(1, 9.0))) == [
        ("config.pool.timeout_s", 5.0, 9.0)
    ]
