"""``grpo score``: every input line gets an output line, bad ones with their reason; in
process and over gRPC; any verifier (Describe checked); TLS; stdin; the exit code counts."""

from __future__ import annotations

import json
import shutil
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from grpo.cli_score import (
    EXIT_UNSCORED,
    EXIT_USAGE,
    ScoreJob,
    app,
    record_path,
    score_file,
)
from grpo.errors import (
    EndpointCheckError,
    FailedPreconditionError,
    InvalidArgumentError,
    NotFoundError,
    UsageError,
)
from grpo.services.evaluation.inputs import FieldMap
from grpo.services.runtime.server import create_server
from grpo.verifiers.example import SERVICE as EXAMPLE_SERVICE
from grpo.verifiers.math.service import SERVICE as MATH_SERVICE
from grpo.verifiers.steps.service import SERVICE as STEPS_SERVICE

# line -> (id, status, reward) expected in the output; the bad lines of every kind
LINES: list[tuple[bytes, tuple[str, str, float | None]]] = [
    (json.dumps({"id": "right", "response": r"so \boxed{\frac{1}{2}}", "gold": "0.5"}).encode(),
     ("right", "ok", 1.0)),
    (b"{not json", ("line-2", "invalid_input", None)),
    (json.dumps({"id": 7, "response": "7+8=15,4+3+1=8:85", "gold": 85}).encode(),
     ("7", "ok", 1.0)),
    (json.dumps({"id": "nogold", "response": "no gold here"}).encode(),
     ("nogold", "invalid_input", None)),
    (b"", ("", "", None)),  # blank: not an item
    (json.dumps({"id": "none", "response": "I give up", "gold": "3"}).encode(),
     ("none", "no_answer", 0.0)),
    (json.dumps({"id": "wrong", "response": "#### 1,001", "gold": "1000"}).encode(),
     ("wrong", "ok", 0.0)),
    (b"\xff\xfe{}", ("line-8", "invalid_input", None)),
    (b'{"id": "surrogate", "response": "x \\ud800", "gold": "1"}',
     ("surrogate", "invalid_input", None)),
    (b"[1, 2]", ("line-10", "invalid_input", None)),
    (json.dumps({"id": "typed", "response": ["a"], "gold": "1"}).encode(),
     ("typed", "invalid_input", None)),
    (json.dumps({"id": "right", "response": "1", "gold": "1"}).encode(),
     ("line-12", "invalid_input", None)),
]  # fmt: skip
REASONS = {
    2: "invalid JSON",
    4: "missing field 'gold'",
    8: "not valid UTF-8",
    9: "lone surrogate",
    10: "expected a JSON object",
    11: "field 'response' must be a string, got array [\"a\"]",
    12: "duplicate id 'right' (first on line 1)",
}


def _write_input(tmp_path: Path) -> Path:
    path = tmp_path / "in.jsonl"
    path.write_bytes(b"".join(raw + b"\n" for raw, _ in LINES))
    return path


def _rows(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def _check_output(path: Path) -> None:
    rows = _rows(path)
    expected = [
        (n, *want) for n, (_, want) in enumerate(LINES, start=1) if want[0]
    ]  # blank line 5 has no row
    assert [(r["line"], r["id"], r["status"], r["reward"]) for r in rows] == expected
    by_line = {r["line"]: r for r in rows}
    for line, reason in REASONS.items():
        assert reason in by_line[line]["detail"], (line, by_line[line]["detail"])
    assert by_line[1]["extracted"] == r"\frac{1}{2}" and by_line[3]["extracted"] == "85"


@pytest.fixture
def serve_verifier() -> Iterator[Callable[..., str]]:
    """``serve_verifier(spec, **settings) -> "127.0.0.1:PORT"``: a verifier service served
    in this process on a free loopback port, stopped after the test."""
    started: list[tuple[Any, Any]] = []

    def start(spec: Any, **settings: Any) -> str:
        server_settings = {"port": 0, "metrics_port": -1, **settings.pop("server", {})}
        parsed = spec.settings_cls.model_validate({"server": server_settings, **settings})
        parts = spec.build(parsed)
        server = create_server(parts.bindings, parsed.server)
        server.start()
        started.append((server, parts))
        return f"127.0.0.1:{server.port}"

    yield start
    for server, parts in started:
        server.stop(0)
        parts.close()


def test_score_math_in_process_every_line_gets_a_row(tmp_path: Path) -> None:
    out = tmp_path / "out.jsonl"
    run = score_file(ScoreJob("math", _write_input(tmp_path), out, workers=1))
    _check_output(out)
    s = run.summary
    assert (s.rows, s.verdicts, s.refused, s.missing) == (11, 4, 7, 0)
    assert s.statuses == {"ok": 3, "no_answer": 1, "invalid_input": 7}
    assert s.reward_mean == pytest.approx(2 / 4)  # no_answer is a verdict of 0
    assert run.unscored == 7 and run.scored_now == 11 and run.resumed == 0
    latencies = sorted(r["latency_s"] for r in _rows(out) if "latency_s" in r)
    assert s.latency_p99_s == pytest.approx(latencies[-1], abs=1e-6)  # p99 of 4 = max


def test_score_math_over_grpc_matches_in_process(tmp_path: Path, serve_verifier: Any) -> None:
    address = serve_verifier(MATH_SERVICE, verifier={"pool": {"workers": 1}})
    out = tmp_path / "remote.jsonl"
    run = score_file(ScoreJob("math", _write_input(tmp_path), out, endpoint=address, batch_size=2))
    _check_output(out)
    assert run.verifier.name == "math" and run.unscored == 7


def test_exit_code_counts_lines_without_a_score(tmp_path: Path) -> None:
    out = tmp_path / "out.jsonl"
    result = CliRunner().invoke(
        app, ["math", "-i", str(_write_input(tmp_path)), "-o", str(out), "--workers", "1"]
    )
    assert result.exit_code == EXIT_UNSCORED, result.output
    assert "7 line(s) got no reward" in result.output and "exit code 3" in result.output
    # the summary label is the shared verdict rule (grpo.services.runtime.score_status)
    assert "reward mean over verdicts (no_answer, ok, parse_error" in result.output


def test_output_guards(tmp_path: Path) -> None:
    src = _write_input(tmp_path)
    with pytest.raises(InvalidArgumentError, match="is the input file"):
        score_file(ScoreJob("math", src, tmp_path / "." / "in.jsonl", workers=1))
    with pytest.raises(NotFoundError, match="output folder"):
        score_file(ScoreJob("math", src, tmp_path / "nope" / "out.jsonl", workers=1))
    out = tmp_path / "out.jsonl"
    score_file(ScoreJob("math", src, out, workers=1))
    rows = out.read_text().splitlines(keepends=True)
    out.write_text(rows[0])  # a run cut short after its first row
    with pytest.raises(InvalidArgumentError, match="--resume"):
        score_file(ScoreJob("math", src, out, workers=1))
    assert src.read_bytes().startswith(LINES[0][0])  # the input is untouched
    run = score_file(ScoreJob("math", src, out, workers=1, resume=True))
    assert run.resumed == 1 and run.scored_now == 10 and run.summary.rows == 11
    again = [{k: v for k, v in r.items() if k != "latency_s"} for r in _rows(out)]
    assert again == [{k: v for k, v in json.loads(r).items() if k != "latency_s"} for r in rows]


def test_steps_via_cli_and_stdin(tmp_path: Path) -> None:
    out = tmp_path / "out.jsonl"
    line = json.dumps({"key": "a", "text": "1+1=2, 2+2=5"}) + "\n"
    result = CliRunner().invoke(
        app,
        ["steps", "-i", "-", "-o", str(out), "--workers", "1",
         "--field", "id=key", "--field", "response=text"],
        input=line,
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    assert "latency p99" in result.output and "items/s" in result.output
    (row,) = _rows(out)
    assert row["id"] == "a" and row["reward"] == 0.5
    assert [(s["start"], s["end"], s["status"]) for s in row["steps"]] == [
        (0, 5, "valid"),
        (7, 12, "invalid"),
    ]


def test_mismatched_verifier_is_refused_naming_what_it_serves(
    tmp_path: Path, serve_verifier: Any
) -> None:
    src = _write_input(tmp_path)
    steps = serve_verifier(STEPS_SERVICE, verifier={"pool": {"workers": 1}})
    with pytest.raises(FailedPreconditionError, match=r"'math-steps'.*is not an outcome verifier"):
        score_file(ScoreJob("math", src, tmp_path / "a.jsonl", endpoint=steps))
    exact = serve_verifier(EXAMPLE_SERVICE)
    with pytest.raises(FailedPreconditionError, match=r"'exact-match'.*task types: exact"):
        score_file(ScoreJob("math", src, tmp_path / "b.jsonl", endpoint=exact))
    result = CliRunner().invoke(
        app, ["math", "-i", str(src), "-o", str(tmp_path / "c.jsonl"), "--endpoint", exact]
    )
    assert result.exit_code == EXIT_USAGE  # refused by the check before any work, as grpo run
    assert "grpo score custom --task-type" in result.output
    assert not (tmp_path / "c.jsonl").exists()


def test_custom_verifier_over_grpc_with_field_map(tmp_path: Path, serve_verifier: Any) -> None:
    """The shipped example verifier (task type 'exact'); a task it refuses is invalid_input."""
    src = tmp_path / "in.jsonl"
    rows = [
        {"qid": "a", "answer": "Paris", "out": "it is\nparis"},
        {"qid": "b", "answer": "Rome", "out": "Milan"},
        {"qid": "c", "out": "no gold"},  # the verifier requires gold_answer
    ]
    src.write_text("".join(json.dumps(r) + "\n" for r in rows))
    address = serve_verifier(EXAMPLE_SERVICE)
    out = tmp_path / "out.jsonl"
    run = score_file(ScoreJob(
        "custom", src, out, task_type="exact", endpoint=address, batch_size=8,
        fields=FieldMap.parse(["id=qid", "gold=answer", "response=out"]),
    ))  # fmt: skip
    got = [(r["id"], r["status"], r["reward"]) for r in _rows(out)]
    assert got == [("a", "ok", 1.0), ("b", "ok", 0.0), ("c", "invalid_input", None)]
    assert "gold_answer is required" in _rows(out)[2]["detail"]
    assert run.verifier.name == "exact-match" and run.unscored == 1
    with pytest.raises(FailedPreconditionError, match="does not accept task type 'math'"):
        score_file(
            ScoreJob("custom", src, tmp_path / "x.jsonl", task_type="math", endpoint=address)
        )


def test_oversized_item_is_sent_alone_then_refused_too_large(
    tmp_path: Path, serve_verifier: Any
) -> None:
    """Batches split by bytes: small items share requests, a 300 kB item goes alone and the
    server (200 kB message limit) refuses it: status too_large; the others are scored."""
    address = serve_verifier(EXAMPLE_SERVICE, server={"max_message_bytes": 200_000})
    src = tmp_path / "in.jsonl"
    rows = [{"id": f"s{i}", "response": "x" * 40_000, "gold": "x"} for i in range(6)]
    rows.insert(3, {"id": "huge", "response": "y" * 300_000, "gold": "y"})
    src.write_text("".join(json.dumps(r) + "\n" for r in rows))
    out = tmp_path / "out.jsonl"
    run = score_file(
        ScoreJob("custom", src, out, task_type="exact", endpoint=address, max_request_bytes=100_000)
    )
    got = {r["id"]: r for r in _rows(out)}
    assert got["huge"]["status"] == "too_large" and got["huge"]["reward"] is None
    assert "300" in got["huge"]["detail"] and "bytes" in got["huge"]["detail"]
    assert all(got[f"s{i}"]["status"] == "ok" for i in range(6))
    assert run.unscored == 1


def test_tls_endpoint(
    tmp_path: Path, localhost_cert: tuple[Path, Path], serve_verifier: Any
) -> None:
    key, cert = localhost_cert
    address = serve_verifier(
        EXAMPLE_SERVICE, server={"tls_cert_file": str(cert), "tls_key_file": str(key)}
    )
    src = tmp_path / "in.jsonl"
    src.write_text(json.dumps({"id": "a", "response": "Yes", "gold": "yes"}) + "\n")
    out = tmp_path / "out.jsonl"
    port = address.rsplit(":", 1)[1]
    score_file(
        ScoreJob("custom", src, out, task_type="exact", endpoint=f"localhost:{port}", tls_ca=cert)
    )
    assert _rows(out)[0]["reward"] == 1.0
    # plaintext to a TLS server: refused by the check before any work, nothing written
    with pytest.raises(EndpointCheckError, match=r"Describe failed \(UNAVAILABLE\)"):
        score_file(ScoreJob(
            "custom", src, tmp_path / "plain.jsonl", task_type="exact",
            endpoint=f"localhost:{port}", max_attempts=1, deadline_s=3.0,
        ))  # fmt: skip
    assert not (tmp_path / "plain.jsonl").exists()


@pytest.mark.skipif(
    shutil.which("bwrap") is None or sys.platform != "linux", reason="needs bubblewrap"
)
def test_score_code_in_process(tmp_path: Path) -> None:
    src = tmp_path / "code.jsonl"
    rows = [
        {"id": "ok", "response": "print(int(input()) * 2)",
         "io_pairs": [["2\n", "4"], ["5\n", "10"]]},
        {"id": "bad", "response": "print(1)", "io_pairs": [["2\n", "4"]]},
        {"id": "notests", "response": "print(1)"},
        {"id": "badpairs", "response": "x", "io_pairs": [[1]]},
    ]  # fmt: skip
    src.write_text("".join(json.dumps(r) + "\n" for r in rows))
    out = tmp_path / "out.jsonl"
    score_file(ScoreJob("code", src, out, workers=1))
    got = _rows(out)
    assert [(r["id"], r["reward"]) for r in got] == [
        ("ok", 1.0), ("bad", 0.0), ("notests", None), ("badpairs", None)
    ]  # fmt: skip
    assert [t["status"] for t in got[0]["tests"]] == ["passed", "passed"]
    assert "code items need" in got[2]["detail"] and "io_pairs[0]" in got[3]["detail"]


@pytest.mark.skipif(
    shutil.which("bwrap") is None or sys.platform != "linux", reason="needs bubblewrap"
)
def test_score_code_output_comparison_from_the_input(tmp_path: Path) -> None:
    """``output_compare`` / ``float_tolerance`` of an io_pairs line reach the verifier."""
    src = tmp_path / "code.jsonl"
    third = {"response": "print(2/3)", "io_pairs": [["", "0.666667"]]}
    rows = [
        {"id": "judges", **third},
        {"id": "exact", **third, "output_compare": "exact"},
        {"id": "loose", "response": "print(0.67)", "io_pairs": [["", "0.666667"]],
         "float_tolerance": 0.01},
        {"id": "strict", "response": "print(0.67)", "io_pairs": [["", "0.666667"]]},
        {"id": "bad", **third, "output_compare": "fuzzy"},
    ]  # fmt: skip
    src.write_text("".join(json.dumps(r) + "\n" for r in rows))
    out = tmp_path / "out.jsonl"
    score_file(ScoreJob("code", src, out, workers=1))
    got = {r["id"]: r for r in _rows(out)}
    assert {k: (r["status"], r["reward"]) for k, r in got.items()} == {
        "judges": ("ok", 1.0), "exact": ("ok", 0.0), "loose": ("ok", 1.0),
        "strict": ("ok", 0.0), "bad": ("invalid_input", None),
    }  # fmt: skip
    assert "field 'output_compare' must be one of" in got["bad"]["detail"]


def _invoke(*args: str) -> Any:
    return CliRunner().invoke(app, ["math", *args, "--workers", "1"], env={"COLUMNS": "300"})


@pytest.mark.parametrize(
    ("case", "option", "message"),
    [
        ("missing", "--input", "input file not found: {src}"),
        ("directory", "--input", "is a directory, not a JSONL file"),
        ("unreadable", "--input", "cannot be read: Permission denied"),
        ("field", "--field", "'gold' is not NAME=KEY"),
        ("unknown-field", "--field", "unknown field(s) answer"),
        ("exists", "--output", "already holds results: pass --resume"),
        ("both", "'--resume' / '--overwrite'", "exclude each other"),
        ("is-input", "--output", "is the input file"),
        ("service-module", "--service", "'nosuchmod:SERVICE': No module named 'nosuchmod'"),
        ("service-name", "--service", "'nosuch': unknown service 'nosuch'"),
        ("service-attr", "--service", "module grpo.verifiers.example has no attribute 'NOPE'"),
    ],
)
def test_a_bad_invocation_exits_2_naming_the_option_and_writes_nothing(
    case: str, option: str, message: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A usage error is typer's exit 2 with the option named, never 101 or a traceback, and
    neither the output nor its run record is created or touched (a missing input with a new
    output used to crash with UnboundLocalError and leave an empty output)."""
    src, out = _write_input(tmp_path), tmp_path / "out.jsonl"
    args = ["-i", str(src), "-o", str(out)]
    if case == "missing":
        src = tmp_path / "nope.jsonl"
        args[1] = str(src)
    elif case == "directory":
        args[1] = str(tmp_path)
    elif case == "unreadable":  # root reads a mode-000 file: refuse the read itself
        real = Path.read_bytes

        def refuse(self: Path) -> bytes:
            if self == src:
                raise PermissionError(13, "Permission denied", str(self))
            return real(self)

        monkeypatch.setattr(Path, "read_bytes", refuse)
    elif case == "field":
        args += ["--field", "gold"]
    elif case == "unknown-field":
        args += ["--field", "answer=gold"]
    elif case in ("exists", "both"):
        out.write_text('{"line": 1, "id": "right", "status": "ok", "reward": 1.0}\n')
        args += ["--resume", "--overwrite"] if case == "both" else []
    elif case == "is-input":
        args[3] = str(src)
    elif case.startswith("service-"):  # was a traceback (exit 1) or exit 101
        names = {"module": "nosuchmod:SERVICE", "name": "nosuch"}
        args += ["--service", names.get(case[8:], "grpo.verifiers.example:NOPE")]
    before = out.read_bytes() if out.exists() else None
    result = _invoke(*args)
    assert result.exit_code == EXIT_USAGE, result.output
    text = " ".join(result.output.split())
    quoted = option if option.startswith("'") else f"'{option}'"
    assert f"Invalid value for {quoted}: " in text, text
    assert message.format(src=src) in text, text
    assert "Traceback" not in text and "error:" not in text
    assert (out.read_bytes() if out.exists() else None) == before
    assert not record_path(out).exists()
    if src.is_file():
        assert src.open("rb").read().startswith(LINES[0][0])  # the input is untouched


def test_grpo_verifier_environment_reaches_the_in_process_verifier(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """GRPO_VERIFIER__* variables feed the in-process verifier as they feed grpo serve's
    (one loader); the value is in the run record, so a resume under another one is refused;
    a bad value is a usage error that writes nothing."""
    src, out = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    src.write_text(json.dumps({"id": "a", "response": "x" * 150 + r" \boxed{1}", "gold": "1"}))
    monkeypatch.setenv("GRPO_VERIFIER__MAX_RESPONSE_CHARS", "100")
    score_file(ScoreJob("math", src, out, workers=1))
    (row,) = _rows(out)
    assert (row["status"], row["detail"]) == (
        "parse_error", "response has 160 characters, more than max_response_chars=100"
    )  # fmt: skip
    record = json.loads(record_path(out).read_text())
    assert record["identity"]["verifier"]["config"]["max_response_chars"] == "100"
    monkeypatch.delenv("GRPO_VERIFIER__MAX_RESPONSE_CHARS")
    with pytest.raises(InvalidArgumentError, match=r"verifier\.config\.max_response_chars"):
        score_file(ScoreJob("math", src, out, workers=1, resume=True))
    monkeypatch.setenv("GRPO_VERIFIER__REL_TOL", "abc")
    with pytest.raises(UsageError, match=r"verifier\.rel_tol.*from environment GRPO_"):
        score_file(ScoreJob("math", src, tmp_path / "bad.jsonl", workers=1))
    assert not (tmp_path / "bad.jsonl").exists()
    assert not record_path(tmp_path / "bad.jsonl").exists()
    result = _invoke("-i", str(src), "-o", str(tmp_path / "bad.jsonl"))
    assert result.exit_code == EXIT_USAGE and "rel_tol" in result.output, result.output


def test_workers_flag_over_environment_over_default(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """--workers > GRPO_VERIFIER__POOL__WORKERS > the pool's default: the flag's default (2)
    hid the variable; a bad value is refused naming the variable, under the flag too."""
    from grpo.services.runtime import config as config_module

    src = tmp_path / "in.jsonl"
    src.write_text(json.dumps({"id": "a", "response": r"\boxed{1}", "gold": "1"}) + "\n")
    loaded: list[Any] = []
    real_load = config_module.load_settings

    def spy(*args: Any, **kwargs: Any) -> Any:
        loaded.append(real_load(*args, **kwargs))
        return loaded[-1]

    monkeypatch.setattr(config_module, "load_settings", spy)

    def pool_workers(*flags: str, name: str) -> int:
        out = tmp_path / f"{name}.jsonl"
        args = ["math", "-i", str(src), "-o", str(out), *flags]
        result = CliRunner().invoke(app, args, env={"COLUMNS": "300"})
        assert result.exit_code == 0, result.output
        assert _rows(out)[0]["reward"] == 1.0
        return int(loaded[-1].verifier.pool.workers)  # what the in-process verifier ran with

    assert pool_workers(name="default") == 2  # PoolSettings' default
    monkeypatch.setenv("GRPO_VERIFIER__POOL__WORKERS", "1")
    assert pool_workers(name="env") == 1
    assert pool_workers("--workers", "3", name="flag") == 3
    monkeypatch.setenv("GRPO_VERIFIER__POOL__WORKERS", "abc")
    for flags in ([], ["--workers", "1"]):
        out = tmp_path / "bad.jsonl"
        args = ["math", "-i", str(src), "-o", str(out), *flags]
        result = CliRunner().invoke(app, args, env={"COLUMNS": "300"})
        assert result.exit_code == EXIT_USAGE, result.output
        text = " ".join(result.output.replace("│", " ").split())
        assert "verifier.pool.workers" in text and "GRPO_VERIFIER__POOL__WORKERS" in text, text
        assert not out.exists()


def test_help_names_every_status_resume_scores_again() -> None:
    """--help says what --resume rescores (too_large too), unbroken at 80 columns, and the exit
    codes."""
    result = CliRunner().invoke(app, ["math", "--help"], env={"COLUMNS": "80"})
    assert result.exit_code == 0
    text = " ".join(result.output.replace("│", " ").split())
    assert "(undecided, internal, too_large)" in text, text
    assert "2 for a bad invocation" in text and "3 when some lines got no reward" in text


def test_check_verifier_prints_a_wrong_answers_zero_reward(serve_verifier: Any) -> None:
    """grpo check-verifier's JSON line has ``reward`` for every verdict: a wrong answer's 0.0
    was left out (proto3 omits zero fields), so ``line["reward"]`` failed exactly then."""
    from grpo.cli import app as grpo_app

    address = serve_verifier(MATH_SERVICE, verifier={"pool": {"workers": 1}})
    said = {}
    for response in (r"so \boxed{72}", r"so \boxed{71}"):
        args = ["check-verifier", "--address", address, "--task-type", "math",
                "--response", response, "--gold", "72"]  # fmt: skip
        result = CliRunner().invoke(grpo_app, args)
        assert result.exit_code == 0, result.output
        said[response[-3:-1]] = json.loads(result.output.strip().splitlines()[-1])
    assert said["72"]["reward"] == 1.0 and said["72"]["status"] == "ok"
    assert said["71"]["reward"] == 0.0 and said["71"]["status"] == "ok"


def test_check_verifier_writes_grpo_scores_keys_and_a_missing_gold_is_a_usage_error(
    serve_verifier: Any, tmp_path: Path
) -> None:
    """check-verifier's JSON line has the keys of a grpo score row (extracted, latency_s:
    not camelCase extractedAnswer, latencyS), reward always there; a missing --gold, which
    the verifier refuses with INVALID_ARGUMENT, is a usage error (exit 2, one line naming
    --gold), not exit 1."""
    from grpo.cli import app as grpo_app

    address = serve_verifier(MATH_SERVICE, verifier={"pool": {"workers": 1}})
    base = ["check-verifier", "--address", address, "--task-type", "math"]
    result = CliRunner().invoke(grpo_app, [*base, "--response", r"so \boxed{7}", "--gold", "7"])
    assert result.exit_code == 0, result.output
    line = json.loads(result.output.strip().splitlines()[-1])
    src, out = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    src.write_text(json.dumps({"id": "a", "response": r"so \boxed{7}", "gold": "7"}) + "\n")
    score_file(ScoreJob("math", src, out, endpoint=address, workers=1))
    (row,) = _rows(out)
    assert set(line) - {"address"} == set(row) - {"line", "id"}, (line, row)
    assert (line["extracted"], line["reward"], line["status"]) == ("7", 1.0, "ok")
    assert "extractedAnswer" not in line and "latencyS" not in line
    result = CliRunner().invoke(grpo_app, [*base, "--response", r"so \boxed{7}"])
    said = [x for x in result.output.splitlines() if x.strip()]
    assert result.exit_code == 2, said
    assert len(said) == 1 and said[0].startswith(f"error: verifier {address} refused"), said
    assert "gold_answer is required" in said[0] and "give --gold" in said[0], said
