"""``grpo model init | arith-data | sft`` through the real CLI app."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from grpo.cli import app


def test_model_init_data_and_sft(tmp_path: Path) -> None:
    runner = CliRunner()
    model, data = tmp_path / "m", tmp_path / "d.jsonl"
    out = runner.invoke(app, ["model", "init", str(model), "--hidden", "32", "--layers", "1"])
    assert out.exit_code == 0, out.output
    assert "M parameters" in out.output and (model / "tokenizer.json").is_file()
    out = runner.invoke(app, ["model", "arith-data", str(data), "--n", "40", "--ops", "+-"])
    assert out.exit_code == 0, out.output
    rows = [json.loads(line) for line in data.read_text().splitlines()]
    assert len(rows) == 40 and {"prompt", "completion"} == set(rows[0])
    assert {r["prompt"].strip("0123456789=") for r in rows} == {"+", "-"}
    args = ["model", "sft", str(model), "--data", str(data), "--steps", "2", "--eval-arith", "4"]
    out = runner.invoke(app, args)
    assert out.exit_code == 0, out.output
    assert "SFT: 2 steps" in out.output and "greedy accuracy on 4 held-out tasks" in out.output
