"""``grpo score``: JSONL in/out, bad lines skipped with their numbers, in-process and gRPC."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from grpo.cli_score import app, parse_line, score_file
from grpo.errors import InvalidArgumentError, NotFoundError
from grpo.services.server import ServerSettings, create_server
from grpo.verifiers.math.service import SERVICE as MATH_SERVICE
from grpo.verifiers.math.verifier import MathConfig
from grpo.verifiers.sdk import PoolSettings

LINES = [
    json.dumps({"id": "right", "response": r"so \boxed{\frac{1}{2}}", "gold": "0.5"}),
    "{not json",
    json.dumps({"id": 7, "response": "7+8=15,4+3+1=8:85", "gold": 85}),
    json.dumps({"response": "no gold here"}),
    "",
    json.dumps({"id": "none", "response": "I give up", "gold": "3"}),
    json.dumps({"id": "wrong", "response": "#### 1,001", "gold": "1000"}),
]


def _write_input(tmp_path: Path) -> Path:
    path = tmp_path / "in.jsonl"
    path.write_bytes(("\n".join(LINES) + "\n").encode() + b"\xff\xfe{}\n")
    return path


def _check_output(path: Path) -> None:
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    assert [(r["id"], r["status"], r["reward"]) for r in rows] == [
        ("right", "ok", 1.0),
        ("7", "ok", 1.0),
        ("none", "no_answer", 0.0),
        ("wrong", "ok", 0.0),
    ]
    assert rows[0]["extracted"] == r"\frac{1}{2}"
    assert rows[1]["extracted"] == "85"


def test_score_math_in_process_skips_bad_lines(tmp_path: Path) -> None:
    out = tmp_path / "out.jsonl"
    summary = score_file("math", _write_input(tmp_path), out, workers=1)
    _check_output(out)
    assert [n for n, _ in summary.bad_lines] == [2, 4, 8]
    assert "missing field 'gold'" in summary.bad_lines[1][1]
    assert "UTF-8" in summary.bad_lines[2][1]
    assert summary.statuses == {"ok": 3, "no_answer": 1}
    assert summary.reward_mean == pytest.approx(2 / 4)  # no_answer is a verdict of 0
    assert summary.scored == 4 and summary.items_per_s > 0
    latencies = sorted(json.loads(line)["latency_s"] for line in out.read_text().splitlines())
    assert summary.latency_p99_s == pytest.approx(latencies[-1], abs=1e-6)  # p99 of 4 = max


def test_missing_output_folder_fails_before_scoring(tmp_path: Path) -> None:
    with pytest.raises(NotFoundError, match="output folder"):
        score_file("math", _write_input(tmp_path), tmp_path / "nope" / "out.jsonl", workers=1)


def test_score_math_over_grpc_matches_in_process(tmp_path: Path) -> None:
    settings = MATH_SERVICE.settings_cls(
        server=ServerSettings(port=0, metrics_port=-1),
        verifier=MathConfig(pool=PoolSettings(workers=1, timeout_s=20)),
    )
    parts = MATH_SERVICE.build(settings)
    server = create_server(parts.bindings, settings.server)
    server.start()
    try:
        out = tmp_path / "remote.jsonl"
        summary = score_file(
            "math", _write_input(tmp_path), out, endpoint=f"127.0.0.1:{server.port}", batch_size=2
        )
    finally:
        server.stop(0)
        assert parts.close is not None
        parts.close()
    _check_output(out)
    assert [n for n, _ in summary.bad_lines] == [2, 4, 8]


def test_cli_steps_prints_summary_table(tmp_path: Path) -> None:
    src = tmp_path / "steps.jsonl"
    src.write_text(json.dumps({"id": "a", "response": "1+1=2, 2+2=5"}) + "\n")
    out = tmp_path / "out.jsonl"
    result = CliRunner().invoke(
        app, ["steps", "--input", str(src), "--output", str(out), "--workers", "1"]
    )
    assert result.exit_code == 0, result.output
    assert "latency p99" in result.output and "items/s" in result.output
    row = json.loads(out.read_text())
    assert row["reward"] == 0.5
    assert [(s["start"], s["end"], s["status"]) for s in row["steps"]] == [
        (0, 5, "valid"),
        (7, 12, "invalid"),
    ]


def test_parse_code_line_formats() -> None:
    humaneval = parse_line(
        "code",
        1,
        json.dumps({"response": "x", "tests": "def check(c): pass", "entry_point": "f"}).encode(),
    )
    assert humaneval is not None and humaneval.task.code_tests.entry_point == "f"
    mbpp = parse_line(
        "code", 2, json.dumps({"response": "x", "test_list": ["assert f(1) == 1"]}).encode()
    )
    assert mbpp is not None and list(mbpp.task.code_tests.test_list) == ["assert f(1) == 1"]
    io = parse_line(
        "code",
        3,
        json.dumps(
            {"response": "x", "io_pairs": [["1\n", "2\n"], {"stdin": "", "expected_stdout": "0"}]}
        ).encode(),
    )
    assert io is not None and [p.expected_stdout for p in io.task.code_tests.io_pairs] == [
        "2\n",
        "0",
    ]
    with pytest.raises(InvalidArgumentError, match="io_pairs"):
        parse_line("code", 4, json.dumps({"response": "x", "io_pairs": [[1]]}).encode())
    with pytest.raises(InvalidArgumentError, match="test_list"):
        parse_line("code", 5, json.dumps({"response": "x"}).encode())


@pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap is not installed")
def test_score_code_in_process(tmp_path: Path) -> None:
    src = tmp_path / "code.jsonl"
    rows = [
        {
            "id": "ok",
            "response": "print(int(input()) * 2)",
            "io_pairs": [["2\n", "4"], ["5\n", "10"]],
        },
        {"id": "bad", "response": "print(1)", "io_pairs": [["2\n", "4"]]},
    ]
    src.write_text("".join(json.dumps(r) + "\n" for r in rows))
    out = tmp_path / "out.jsonl"
    score_file("code", src, out, workers=1)
    got = [json.loads(line) for line in out.read_text().splitlines()]
    assert [(r["id"], r["reward"]) for r in got] == [("ok", 1.0), ("bad", 0.0)]
    assert [t["status"] for t in got[0]["tests"]] == ["passed", "passed"]
