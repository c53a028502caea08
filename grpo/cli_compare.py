"""``grpo compare CONFIG --estimators grpo,rloo,dr_grpo,gae --seeds 3 --budget-tokens N``:
advantage estimators from the same starting policy at the same generated-token budget
(``grpo.experiments.compare``)."""

from __future__ import annotations

import signal
from pathlib import Path
from typing import Annotated

import typer

__all__ = ["compare"]


def compare(
    config: Annotated[Path, typer.Argument(help="Run config YAML, e.g. configs/arith-cpu.yaml.")],
    budget_tokens: Annotated[
        int,
        typer.Option(
            "--budget-tokens",
            help="Generated tokens per run (every sampled token, rejected groups included).",
        ),
    ],
    estimators: Annotated[
        str,
        typer.Option(
            "--estimators", help="Comma-separated arms: grpo, rloo, dr_grpo, gae (PPO critic)."
        ),
    ] = "grpo,rloo,dr_grpo,gae",
    seeds: Annotated[
        int, typer.Option("--seeds", help="Runs per arm (seeds config.seed, config.seed+1, ...).")
    ] = 1,
    out: Annotated[
        Path | None,
        typer.Option("--out", help="Comparison folder (default runs/<timestamp>-compare-<name>)."),
    ] = None,
    wall_clock_s: Annotated[
        float | None,
        typer.Option(
            "--max-wall-clock-s",
            help="Safety bound of each run's training (seconds; default the config's "
            "budget.wall_clock_s). A run it stops fails the budget check.",
        ),
    ] = None,
    kl_prompts: Annotated[
        int,
        typer.Option("--kl-prompts", help="Held-out prompts for KL to the start (0 = skip)."),
    ] = 64,
    resume: Annotated[
        bool,
        typer.Option(
            "--resume",
            help="Reuse the starting policy and the runs already measured in --out.",
        ),
    ] = False,
    overrides: Annotated[
        list[str] | None,
        typer.Option("--set", help="Override a config value for every arm (repeatable)."),
    ] = None,
) -> None:
    """Compare estimators at equal generated tokens: SFT (or model.path) once, then every arm
    and seed as a `grpo run` from that policy until the token budget; reports held-out
    accuracy at equal tokens and at equal time, wall clock, CPU seconds, groups kept and
    rejected, wasted tokens, length by advantage sign, KL to the start and clip fractions
    (compare.md, compare.json, compare.png in --out), and checks the budget was equal.

    Exit status: 0, 1 when the budget was not equal or a run failed, 2 for bad input, 130
    when interrupted (the runs finished so far are reported).
    """
    import logging
    import time

    from rich.console import Console

    from grpo.cli_console import fail
    from grpo.cli_run import _interrupt_once, _parse_overrides, _quiet_transformers
    from grpo.errors import GrpoError
    from grpo.experiments.compare import check_request, parse_estimators, run_comparison
    from grpo.local.preflight import checked_tasks
    from grpo.local.processes import become_subreaper
    from grpo.services.settings.run import load_run_config

    logging.basicConfig(level=logging.WARNING)
    console = Console()
    try:
        arms = parse_estimators(estimators)
        cfg = load_run_config(config, _parse_overrides(overrides or []))
        check_request(
            cfg,
            estimators=arms,
            seeds=seeds,
            budget_tokens=budget_tokens,
            wall_clock_s=wall_clock_s,
            kl_prompts=kl_prompts,
        )
        checked_tasks(cfg)  # its data, verifiers (each endpoint's Describe) and Redis, as grpo run
    except GrpoError as exc:
        fail(str(exc))
    stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime())
    folder = (out or Path("runs") / f"{stamp}-compare-{cfg.name}").resolve()
    _quiet_transformers()
    become_subreaper()
    signal.signal(signal.SIGINT, _interrupt_once)
    signal.signal(signal.SIGTERM, _interrupt_once)
    console.log(f"comparison folder {folder}")
    try:
        report = run_comparison(
            cfg,
            folder,
            estimators=arms,
            seeds=seeds,
            budget_tokens=budget_tokens,
            wall_clock_s=wall_clock_s,
            kl_prompts=kl_prompts,
            resume=resume,
            log_fn=console.log,
        )
    except GrpoError as exc:
        console.print(f"[red]comparison failed:[/red] {exc}")
        raise typer.Exit(code=1 if folder.exists() else 2) from None
    except KeyboardInterrupt:
        console.print(f"[yellow]interrupted[/yellow]; finished runs reported in {folder}")
        raise typer.Exit(code=130) from None
    console.print((folder / "compare.md").read_text(), markup=False, highlight=False)
    console.print(f"table and plot: {folder / 'compare.md'}, {folder / 'compare.png'}")
    if not report["budget_check"]["equal"]:
        raise typer.Exit(code=1)
