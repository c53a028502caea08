"""The ``grpo`` command line (typer).

``grpo serve SERVICE`` runs one service (see ``grpo.services.runtime.registry``). The other commands
live in their own modules and are attached here, so each owner edits only their module:

- Table ``SUBCOMMANDS`` maps a command name to a module ``grpo.cli_<name>``.
- If that module defines a function named like the command (``report`` in
  ``grpo.cli_report``), it becomes a single command: ``grpo report RUN_DIR``.
- Otherwise its module-level ``app: typer.Typer`` is attached as a command group:
  ``grpo score math --input ...``.
- Keep heavy imports (torch, sympy, transformers) inside the command functions: every
  ``grpo`` invocation imports all these modules. A module whose optional dependency is not
  installed is skipped (its command is absent); a missing ``grpo`` module is an error.

To add a command: write ``grpo/cli_<name>.py`` and add ``"<name>": "grpo.cli_<name>"`` to
``SUBCOMMANDS``.
"""

from __future__ import annotations

import importlib
import inspect
import json
import logging
import re
from pathlib import Path
from typing import Annotated

import typer

__all__ = ["SUBCOMMANDS", "app", "main"]

log = logging.getLogger(__name__)

app = typer.Typer(
    name="grpo",
    help="grpo-pipeline: GRPO training with gRPC verifiers and Redis Streams.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

SUBCOMMANDS: dict[str, str] = {
    "score": "grpo.cli_score",
    "eval": "grpo.cli_eval",
    "run": "grpo.cli_run",
    "report": "grpo.cli_report",
    "model": "grpo.cli_model",
    "compare": "grpo.cli_compare",
    "check-verifier": "grpo.cli_check_verifier",
}
"""Command name -> module implementing it (a function of that name, or a typer ``app``)."""


@app.command(no_args_is_help=True)
def serve(
    service: Annotated[
        str,
        typer.Argument(
            help="Service to run: verifier-math, verifier-steps, verifier-code, "
            "verifier-format, verifier-length, generation, rollout-worker, assembler, learner, "
            "driver (or module:ATTRIBUTE of a ServiceSpec)."
        ),
    ],
    config: Annotated[
        Path | None,
        typer.Option("--config", "-c", help="YAML settings file (see docs/configuration.md)."),
    ] = None,
    run_config: Annotated[
        Path | None,
        typer.Option(
            "--run-config",
            help="Derive the settings from this run config (a RunConfig YAML with its namespace "
            "set), as grpo run does; --placement and --config are then laid over them "
            "(grpo.services.settings.services).",
        ),
    ] = None,
    placement: Annotated[
        Path | None,
        typer.Option(
            "--placement",
            help="With --run-config: YAML of what the deployment decides (server, Redis, "
            "paths, addresses); a key the run config decides is refused.",
        ),
    ] = None,
    print_settings: Annotated[
        bool,
        typer.Option(
            "--print-settings",
            help="Print the effective settings as YAML (passwords in URLs masked) and exit.",
        ),
    ] = False,
    port: Annotated[
        int | None, typer.Option("--port", "-p", help="gRPC port (0 = pick a free one).")
    ] = None,
    host: Annotated[str | None, typer.Option(help="Address to bind, e.g. 0.0.0.0.")] = None,
    metrics_port: Annotated[
        int | None,
        typer.Option(help="Prometheus /metrics port (0 = pick a free one, -1 = off)."),
    ] = None,
    port_file: Annotated[
        Path | None,
        typer.Option(help="Write {port, metrics_port, pid} JSON here once serving."),
    ] = None,
    log_level: Annotated[str, typer.Option(help="Logging level.")] = "INFO",
    log_json: Annotated[
        bool, typer.Option("--log-json/--log-text", help="JSON log lines or plain text.")
    ] = True,
) -> None:
    """Run one gRPC service until SIGTERM/SIGINT, then drain and exit 0.

    Settings come from defaults < --config YAML < GRPO_* environment variables < these flags.
    With --run-config: defaults < what the run decides < --placement < the run's block for
    this service < --config < environment < flags (the derivation grpo run uses). The
    settings' SHA-256 is logged at start ("settings_sha256"). Health (grpc.health.v1) and
    reflection are always served, and a Prometheus endpoint unless --metrics-port -1.
    """
    from grpo.errors import GrpoError
    from grpo.services.runtime.config import load_settings, settings_digest, settings_text
    from grpo.services.runtime.logging import configure_logging
    from grpo.services.runtime.registry import load_spec
    from grpo.services.runtime.registry import serve as serve_service

    configure_logging(log_level, json=log_json)
    try:
        spec = load_spec(service)
        flags = {"server.port": port, "server.host": host, "server.metrics_port": metrics_port}
        given = {k: v for k, v in flags.items() if v is not None}
        if run_config is not None:
            from grpo.services.settings.services import load_service_settings

            settings = load_service_settings(
                service,
                spec.settings_cls,
                run_config,
                placement=placement,
                config_files=[config] if config is not None else [],
                overrides=given,
            )
        elif placement is not None:
            raise typer.BadParameter("--placement needs --run-config")
        else:
            settings = load_settings(spec.settings_cls, config, given)
    except (GrpoError, ImportError) as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(code=2) from None
    if print_settings:
        typer.echo(settings_text(settings), nl=False)
        return
    log.info(
        "settings loaded",
        extra={"service": spec.name, "settings_sha256": settings_digest(settings)},
    )
    try:
        serve_service(spec, settings, port_file=port_file)
    except (GrpoError, OSError, RuntimeError) as exc:
        # bind failures (port taken, address not local) surface as RuntimeError from grpc
        typer.echo(f"error: {spec.name}: {exc}", err=True)
        raise typer.Exit(code=1) from None


def _attach(name: str, module_name: str) -> None:
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        missing = exc.name or ""
        if missing == module_name or not missing.startswith("grpo"):
            log.debug("command %s unavailable: %s", name, exc)
            return
        raise
    command = getattr(module, name.replace("-", "_"), None)
    if callable(command):
        app.command(name)(command)
        return
    sub_app = getattr(module, "app", None)
    if isinstance(sub_app, typer.Typer):
        app.add_typer(sub_app, name=name)
        return
    raise TypeError(f"{module_name} defines neither a function {name!r} nor a typer `app`")


_LIST_ITEM = re.compile(r"^(?:[-*•] |\d+[.)] |\$ )")


def reflow(text: str) -> str:
    """``text`` (a docstring) as paragraphs: the single line breaks of each paragraph (blank
    lines between paragraphs) become spaces, so rich wraps the help at the terminal's width
    instead of keeping the docstring's breaks (ragged lines at 80 columns). A line that
    starts a list item (``- ``, ``* ``, ``1. ``, ``$ ``) keeps its break; a paragraph that
    starts with ``\\b`` (click's no-rewrap mark) is kept as it is."""
    paragraphs = []
    for paragraph in inspect.cleandoc(text).split("\n\n"):
        if paragraph.startswith("\b"):
            paragraphs.append(paragraph)
            continue
        lines: list[str] = []
        for line in paragraph.splitlines():
            if lines and not _LIST_ITEM.match(line.strip()):
                lines[-1] = f"{lines[-1]} {line.strip()}"
            else:
                lines.append(line.strip())
        paragraphs.append("\n".join(lines))
    return "\n\n".join(paragraphs)


def _reflow_help(typer_app: typer.Typer) -> None:
    """Reflow (:func:`reflow`) the help of every command and group of ``typer_app``."""
    if isinstance(typer_app.info.help, str):
        typer_app.info.help = reflow(typer_app.info.help)
    for command in typer_app.registered_commands:
        text = command.help or inspect.getdoc(command.callback)
        if text:
            command.help = reflow(text)
    for group in typer_app.registered_groups:
        if isinstance(group.help, str):
            group.help = reflow(group.help)
        if group.typer_instance is not None:
            _reflow_help(group.typer_instance)


for _name, _module in SUBCOMMANDS.items():
    _attach(_name, _module)
_reflow_help(app)


def main() -> None:
    """The ``grpo`` console script: run ``app``; expected failures print one line, not a trace.

    A GrpoError (bad settings, unknown names, missing files the code checks) and the OS and
    parsing errors user input causes (a missing or unreadable file, invalid JSON/UTF-8) exit
    with status 2 and ``error: <message>``; set ``GRPO_DEBUG=1`` to get the traceback instead.
    """
    import os
    import sys

    from grpo.errors import EndpointCheckError, GrpoError

    try:
        app()
    except EndpointCheckError as exc:  # an address that did not answer: as cli_console.fail
        if os.environ.get("GRPO_DEBUG"):
            raise
        typer.echo(f"error: {' '.join(str(exc).split())}", err=True)
        sys.exit(2)
    except (GrpoError, OSError, UnicodeError, json.JSONDecodeError) as exc:
        if os.environ.get("GRPO_DEBUG"):
            raise
        typer.echo(f"error: {type(exc).__name__}: {exc}", err=True)
        sys.exit(2)


if __name__ == "__main__":
    main()
