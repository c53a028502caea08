"""Settings layering (defaults < YAML < environment < overrides), the registry and the CLI."""

from __future__ import annotations

import json
import logging

import pytest
from pydantic import BaseModel, ConfigDict, Field
from typer.testing import CliRunner

from grpo.cli import app
from grpo.errors import InvalidArgumentError, NotFoundError
from grpo.services.runtime.config import load_settings, settings_reference
from grpo.services.runtime.logging import JsonFormatter
from grpo.services.runtime.registry import SERVICES, ServiceSpec, load_spec
from grpo.services.runtime.server import ServerSettings


class Limits(BaseModel):
    """A nested block."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    batch: int = Field(default=8, ge=1, description="Items per batch.")
    names: list[str] = Field(default_factory=lambda: ["a"], description="Some names.")


class DemoSettings(BaseModel):
    """Settings of a demo service."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    server: ServerSettings = Field(default_factory=ServerSettings, description="gRPC server.")
    limits: Limits = Field(default_factory=Limits, description="Limits.")
    label: str = Field(default="x", description="A label.")


def test_each_layer_overrides_the_one_below(tmp_path):
    cfg = tmp_path / "demo.yaml"
    cfg.write_text("label: from-yaml\nserver:\n  port: 7000\n  grace_s: 3\nlimits:\n  batch: 2\n")
    env = {"GRPO_SERVER__PORT": "7100", "GRPO_LIMITS__NAMES": "[p, q]", "GRPO_UNRELATED": "1"}
    s = load_settings(DemoSettings, cfg, {"server.port": 7200}, environ=env)
    assert s.server.port == 7200  # override beats env beats yaml
    assert s.server.grace_s == 3.0  # yaml
    assert s.limits.batch == 2  # yaml; defaults elsewhere
    assert s.limits.names == ["p", "q"]  # env flow list
    assert s.label == "from-yaml"  # yaml
    assert s.server.max_workers == ServerSettings().max_workers  # default
    assert load_settings(DemoSettings, environ={"grpo_label": "007"}).label == "007"


def test_bad_values_are_reported_with_their_path(tmp_path):
    with pytest.raises(InvalidArgumentError, match=r"server\.port: Input should be less than"):
        load_settings(DemoSettings, environ={"GRPO_SERVER__PORT": "70000"})
    with pytest.raises(InvalidArgumentError, match=r"limits\.batch"):
        load_settings(DemoSettings, overrides={"limits.batch": 0}, environ={})
    bad = tmp_path / "bad.yaml"
    bad.write_text("serverr:\n  port: 1\n")
    with pytest.raises(
        InvalidArgumentError,
        match=r"serverr: unknown key 'serverr' \(valid: server, limits, label\)",
    ):
        load_settings(DemoSettings, bad, environ={})
    bad.write_text("- a list\n")
    with pytest.raises(InvalidArgumentError, match="must hold a mapping"):
        load_settings(DemoSettings, bad, environ={})
    with pytest.raises(NotFoundError, match="does not exist"):
        load_settings(DemoSettings, tmp_path / "nope.yaml", environ={})


def test_each_bad_value_names_the_layer_it_came_from(tmp_path):
    cfg = tmp_path / "demo.yaml"
    cfg.write_text("limits:\n  batch: 0\n")
    with pytest.raises(InvalidArgumentError) as info:
        load_settings(
            DemoSettings,
            cfg,
            {"server.grace_s": -1},
            environ={"GRPO_SERVER__PORT": "70000"},
        )
    text = str(info.value)
    assert f"limits.batch: Input should be greater than or equal to 1 (file {cfg})" in text
    assert "server.grace_s: Input should be greater than or equal to 0 (from override)" in text
    assert "server.port: Input should be less than or equal to 65535 (from environment" in text


def test_settings_reference_documents_every_leaf_field():
    text = settings_reference(DemoSettings, "demo")
    assert "| `server.port` | int | `50051` | `GRPO_SERVER__PORT` | gRPC port; 0 picks" in text
    assert "| `limits.names` |" in text and "Some names." in text


def test_service_spec_requires_a_server_block():
    class NoServer(BaseModel):
        label: str = "x"

    with pytest.raises(InvalidArgumentError, match="needs a field `server: ServerSettings"):
        ServiceSpec("bad", NoServer, lambda s: None)  # type: ignore[arg-type,return-value]
    with pytest.raises(NotFoundError, match="unknown service 'nope'; known: assembler"):
        load_spec("nope")


@pytest.mark.parametrize("name", sorted(SERVICES))
def test_registered_service_settings_load_and_are_documented(name):
    spec = load_spec(name)  # a missing module fails here (never a skip)
    assert spec.settings_cls.model_fields["server"].annotation is ServerSettings
    undocumented = [f for f, info in spec.settings_cls.model_fields.items() if not info.description]
    assert undocumented == [], f"{name}: fields without Field(description=...)"
    required = [f for f, info in spec.settings_cls.model_fields.items() if info.is_required()]
    if required:  # fields without a default must be named when missing
        with pytest.raises(InvalidArgumentError) as err:
            load_settings(spec.settings_cls, overrides={"server.port": 0}, environ={})
        assert all(f"{field}: Field required" in str(err.value) for field in required)
    else:
        settings = load_settings(spec.settings_cls, overrides={"server.port": 0}, environ={})
        assert settings.model_dump()["server"]["port"] == 0


def test_json_log_lines_carry_extra_fields():
    record = logging.LogRecord(
        "grpo.x", logging.INFO, __file__, 1, "group %s closed", ("g1",), None
    )
    record.group_id = "g1"
    line = json.loads(JsonFormatter().format(record))
    assert line["msg"] == "group g1 closed" and line["group_id"] == "g1"
    assert line["level"] == "INFO" and line["logger"] == "grpo.x"


def test_cli_help_and_unknown_service():
    result = CliRunner().invoke(app, ["--help"])
    assert result.exit_code == 0 and "serve" in result.output
    result = CliRunner().invoke(app, ["serve", "nope", "--log-text"])
    assert result.exit_code == 2
    assert "unknown service 'nope'" in result.output


def test_explicit_null_override_and_bad_yaml_are_named(tmp_path):
    class Optional_(BaseModel):
        server: ServerSettings = Field(default_factory=ServerSettings, description="gRPC server.")
        process: str | None = Field(default="steps", description="Process verifier or null.")

    assert load_settings(Optional_, None, {"process": None}, environ={}).process is None
    bad = tmp_path / "bad.yaml"
    bad.write_text("server: [1, 2\n  port: 3\n")
    with pytest.raises(InvalidArgumentError, match=r"bad\.yaml is not valid YAML"):
        load_settings(Optional_, bad, environ={})


def test_configuration_reference_is_current():
    """docs/configuration.md is generated from the settings models: regenerate it with
    `make config-docs` whenever a settings field or its description changes."""
    from pathlib import Path

    from grpo.services.runtime.config import _markdown

    doc = Path(__file__).resolve().parents[2] / "docs" / "configuration.md"
    assert doc.read_text() == _markdown() + "\n", "docs/configuration.md is stale: make config-docs"


def test_an_unknown_nested_variable_is_refused_naming_the_closest_key(
    monkeypatch, tmp_path, caplog
):
    """A nested GRPO_* name into a block of the model that is no setting (a typo) is refused
    as YAML and --set typos are, naming the variable and the closest valid one; names another
    may own (one level: GRPO_BENCH_ROUNDS; another service's block: GRPO_WORKER__NAMESPACE)
    are logged, the process-level names and grpo run's GRPO_RUN_* pass. The same
    loader refuses it for grpo serve and grpo score (exit 2, one line)."""
    with pytest.raises(InvalidArgumentError) as info:
        load_settings(DemoSettings, environ={"GRPO_LIMITS__BATCHES": "3"})
    assert str(info.value) == (
        "environment variable GRPO_LIMITS__BATCHES names no setting of DemoSettings; "
        "did you mean GRPO_LIMITS__BATCH (limits.batch)?"
    )
    with pytest.raises(InvalidArgumentError, match=r"GRPO_SERVER__PORTT .*GRPO_SERVER__PORT "):
        load_settings(DemoSettings, environ={"GRPO_SERVER__PORTT": "1"})
    others = {
        "GRPO_BENCH_ROUNDS": "3",  # one level: maybe another tool's
        "GRPO_WORKER__NAMESPACE": "n",  # another service's block (an environment they share)
        "GRPO_DATA_DIR": "/d",
        "GRPO_RUN_BUDGET__STEPZ": "1",  # grpo run's prefix
    }
    with caplog.at_level("WARNING", logger="grpo.services.runtime.config"):
        assert load_settings(DemoSettings, environ={**others, "PATH": "/bin"}).limits.batch == 8
    warned = sorted(r.getMessage() for r in caplog.records)
    assert len(warned) == 2 and "GRPO_BENCH_ROUNDS" in warned[0], warned
    assert "GRPO_WORKER__NAMESPACE names no setting of DemoSettings; did you" in warned[1]

    monkeypatch.setenv("GRPO_VERIFIER__RELTOL", "0.1")
    for args in (
        ["serve", "verifier-math", "--print-settings", "--log-text"],
        ["score", "math", "-i", str(tmp_path / "in.jsonl"), "-o", str(tmp_path / "o.jsonl")],
    ):
        (tmp_path / "in.jsonl").write_text('{"id": "a", "response": "1", "gold": "1"}\n')
        result = CliRunner().invoke(app, args)
        assert result.exit_code == 2, result.output
        text = " ".join(result.output.replace("│", " ").split())
        said = (
            "GRPO_VERIFIER__RELTOL names no setting of MathServiceSettings; did you mean "
            "GRPO_VERIFIER__REL_TOL (verifier.rel_tol)?"
        )
        assert said in text, text
        assert not (tmp_path / "o.jsonl").exists()


def test_a_bad_variable_is_named_even_under_a_flag():
    """A bad environment value names its variable, and is refused even when an override
    (a CLI flag) hides it."""
    env = {"GRPO_LIMITS__BATCH": "abc"}
    with pytest.raises(InvalidArgumentError, match=r"limits\.batch: .* GRPO_LIMITS__BATCH\)"):
        load_settings(DemoSettings, environ=env)
    with pytest.raises(InvalidArgumentError, match=r"limits\.batch: .*GRPO_LIMITS__BATCH\)"):
        load_settings(DemoSettings, overrides={"limits.batch": 3}, environ=env)
    with pytest.raises(InvalidArgumentError, match=r"GRPO_LIMITS__BATCH\)"):
        load_settings(
            DemoSettings, overrides={"limits": {"batch": 3}}, environ={"GRPO_LIMITS__BATCH": "0"}
        )
    assert load_settings(DemoSettings, None, {"limits.batch": 3}, environ={}).limits.batch == 3
