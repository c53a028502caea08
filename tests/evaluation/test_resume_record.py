"""``--resume`` continues only the same run: the output's run record (input hash, kind, task
type, field map, verifier) must match, an older output without one is refused, and rows with
no verdict (undecided, internal) are scored again and superseded, never duplicated."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from _moody_verifier import MoodyVerifier

from grpo.cli_score import ScoreJob, record_path, score_file
from grpo.errors import InvalidArgumentError
from grpo.services.evaluation.inputs import FieldMap

HERE = Path(__file__).resolve().parent
MOODY = "_moody_verifier:SERVICE"


def _write(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def _rows(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


@pytest.fixture
def moody() -> Iterator[type[MoodyVerifier]]:
    yield MoodyVerifier
    MoodyVerifier.undecided, MoodyVerifier.broken = set(), set()


def _math_input(tmp_path: Path, name: str = "in.jsonl", gold: str = "2") -> Path:
    rows = [{"id": "a", "response": "#### 2", "gold": gold, "answer": "3"},
            {"id": "b", "response": "#### 5", "gold": "4", "answer": "5"}]  # fmt: skip
    return _write(tmp_path / name, rows)


def test_resume_refuses_another_input_field_map_or_verifier(tmp_path: Path) -> None:
    src, out = _math_input(tmp_path), tmp_path / "out.jsonl"
    score_file(ScoreJob("math", src, out, workers=1))
    record = json.loads(record_path(out).read_text())
    assert record["command"] == "score" and record["about"]["input"] == str(src.resolve())
    assert record["identity"]["verifier"]["name"] == "math"
    before = out.read_bytes()

    other = _math_input(tmp_path, "other.jsonl", gold="7")  # same ids, other content
    with pytest.raises(InvalidArgumentError, match=r"1 field\(s\) differ: input_sha256") as exc:
        score_file(ScoreJob("math", other, out, workers=1, resume=True))
    assert "new output" in str(exc.value) and "--overwrite" in str(exc.value)
    with pytest.raises(InvalidArgumentError, match=r"fields\.gold: recorded null, now \"answer\""):
        score_file(ScoreJob("math", src, out, workers=1, resume=True,
                   fields=FieldMap.parse(["gold=answer"])))  # fmt: skip
    with pytest.raises(
        InvalidArgumentError, match=r"kind: recorded \"math\", now \"steps\""
    ) as exc:
        score_file(ScoreJob("steps", src, out, workers=1, resume=True))
    assert 'verifier.name: recorded "math", now "math-steps"' in str(exc.value)
    assert out.read_bytes() == before  # a refused resume writes nothing

    # the same input moved elsewhere, and another --workers, still resume
    moved = tmp_path / "moved.jsonl"
    moved.write_bytes(src.read_bytes())
    run = score_file(ScoreJob("math", moved, out, workers=2, resume=True))
    assert run.resumed == 2 and run.scored_now == 0


def test_the_default_field_map_spelled_out_is_the_default(tmp_path: Path) -> None:
    """``--field gold=gold`` names the default key: the same run as no --field, recorded as
    such (it used to be refused: fields.gold: recorded null, now "gold")."""
    src, out = _math_input(tmp_path), tmp_path / "out.jsonl"
    score_file(ScoreJob("math", src, out, workers=1, fields=FieldMap.parse(["gold=gold", "id=id"])))
    assert json.loads(record_path(out).read_text())["identity"]["fields"] == {}
    lines = out.read_text().splitlines(keepends=True)
    out.write_text(lines[0])  # cut short after its first row
    run = score_file(ScoreJob("math", src, out, workers=1, resume=True))
    assert (run.resumed, run.scored_now) == (1, 1)
    out.write_text(lines[0])
    run = score_file(ScoreJob("math", src, out, workers=1, resume=True,
                     fields=FieldMap.parse(["gold=gold"])))  # fmt: skip
    assert (run.resumed, run.scored_now) == (1, 1)


def test_resume_refuses_an_output_without_a_record(tmp_path: Path) -> None:
    """An output written before run records existed cannot be checked: refused, clearly."""
    src, out = _math_input(tmp_path), tmp_path / "out.jsonl"
    out.write_text('{"line": 1, "id": "a", "status": "ok", "reward": 1.0}\n')
    with pytest.raises(InvalidArgumentError, match=r"no run record.*older grpo.*--overwrite"):
        score_file(ScoreJob("math", src, out, workers=1, resume=True))
    run = score_file(ScoreJob("math", src, out, workers=1, overwrite=True))
    assert run.summary.rows == 2 and record_path(out).is_file()


def test_resume_scores_undecided_and_internal_rows_again(
    tmp_path: Path, moody: type[MoodyVerifier]
) -> None:
    rows = [{"id": f"q{i}", "response": f"r{i}", "gold": "r0"} for i in range(5)]
    src, out = _write(tmp_path / "in.jsonl", rows), tmp_path / "out.jsonl"
    moody.undecided, moody.broken = {"r1", "r3"}, {"r4"}
    first = score_file(ScoreJob("custom", src, out, service=MOODY, task_type="moody", workers=1))
    assert first.summary.statuses == {"ok": 2, "undecided": 2, "internal": 1}
    assert first.unscored == 3

    moody.undecided, moody.broken = {"r3"}, set()  # r1 and r4 can be decided now
    again = score_file(ScoreJob("custom", src, out, service=MOODY, task_type="moody", workers=1,
                       resume=True))  # fmt: skip
    assert (again.resumed, again.scored_now, again.retried) == (2, 3, 3)
    got = [(r["id"], r["status"], r["reward"]) for r in _rows(out)]
    assert got == [("q0", "ok", 1.0), ("q1", "ok", 0.0), ("q2", "ok", 0.0),
                   ("q3", "undecided", None), ("q4", "ok", 0.0)]  # fmt: skip
    assert again.summary.rows == 5 and again.summary.statuses == {"ok": 4, "undecided": 1}
    assert again.unscored == 1


def test_response_must_be_a_string(tmp_path: Path) -> None:
    rows = [{"id": "n", "response": 5, "gold": "5"}, {"id": "t", "response": True, "gold": "1"},
            {"id": "s", "response": "#### 5", "gold": 5}]  # fmt: skip
    out = tmp_path / "out.jsonl"
    run = score_file(ScoreJob("math", _write(tmp_path / "in.jsonl", rows), out, workers=1))
    by_id = {r["id"]: r for r in _rows(out)}
    assert by_id["n"]["status"] == "invalid_input"
    assert by_id["n"]["detail"] == "field 'response' must be a string, got number 5"
    assert by_id["t"]["detail"] == "field 'response' must be a string, got boolean true"
    assert (by_id["s"]["status"], by_id["s"]["reward"]) == ("ok", 1.0)  # a numeric gold is fine
    assert run.unscored == 2


def test_piped_summary_table_is_not_cut_to_80_columns(tmp_path: Path) -> None:
    src, out = _math_input(tmp_path), tmp_path / "out.jsonl"
    env = {k: v for k, v in os.environ.items() if k != "COLUMNS"}
    env.update(OMP_NUM_THREADS="1", PYTHONPATH=str(HERE))
    done = subprocess.run(
        [sys.executable, "-m", "grpo.cli", "score", "math", "-i", str(src), "-o", str(out),
         "--workers", "1"],
        env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    label = "reward mean over verdicts (no_answer, ok, parse_error, runtime_error, timeout)"
    line = next(x for x in done.stderr.splitlines() if "reward mean" in x)
    assert label in line and "…" not in done.stderr, done.stderr
    assert "items/s (this run)" in done.stderr
