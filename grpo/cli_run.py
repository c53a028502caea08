"""``grpo run CONFIG``: the main job on one machine (``grpo.local.run.run_local``:
prepare the policy, start the local cluster, drive the run)."""

from __future__ import annotations

import math
import signal
from pathlib import Path
from typing import Annotated, Any

import typer

from grpo.cli_console import fail

__all__ = ["run"]


def _parse_overrides(items: list[str]) -> dict[str, Any]:
    import yaml

    out: dict[str, Any] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise typer.BadParameter(f"--set expects KEY=VALUE (dotted key), got {item!r}")
        # YAML 1.1 reads on/off/yes/no as booleans; keep them as text (pydantic still turns
        # them into booleans for boolean fields, and "off" stays a valid mode name).
        text = value.strip()
        is_word = text.lower() in {"on", "off", "yes", "no", "y", "n"}
        out[key.strip()] = text if is_word else yaml.safe_load(value)
    return out


def run(
    config: Annotated[
        Path | None, typer.Argument(help="Run config YAML, e.g. configs/arith-cpu.yaml.")
    ] = None,
    resume: Annotated[
        Path | None,
        typer.Option(
            "--resume",
            help="Continue the stopped or killed run in this folder (its config.yaml, Redis "
            "state and learner checkpoint) instead of starting one; no CONFIG then. A run that "
            "ended on its budget is only reported (exit 0) unless --steps/--set raise it.",
        ),
    ] = None,
    run_dir: Annotated[
        Path | None,
        typer.Option("--run-dir", help="Output folder (default runs/<timestamp>-<name>)."),
    ] = None,
    steps: Annotated[
        int | None, typer.Option("--steps", help="Learner steps (overrides budget.steps).")
    ] = None,
    overrides: Annotated[
        list[str] | None,
        typer.Option(
            "--set",
            help="Override a config value: --set learner.trainer.lr=3e-5 (repeatable).",
        ),
    ] = None,
) -> None:
    """Run the whole pipeline: SFT warm start, then GRPO with every service as a process.

    Starts an embedded Redis unless REDIS_URL is set, launches verifiers, assembler, rollout
    worker(s), learner and the run driver (which evaluates, feeds prompts and writes the
    summary) on loopback ports, shows live progress and writes the run directory (config,
    logs, metrics, checkpoints, eval.jsonl, summary.json). A service that dies is
    restarted, and one without progress for supervision.stall_s is killed and restarted
    (liveness); the embedded Redis keeps its state in the run dir, so
    `grpo run --resume RUN_DIR` continues a stopped or killed run, even from a moved folder
    (a new run refuses a folder that already holds one; a resume refuses data that changed
    since the run began). A run that already ended on its budget is not restarted: --resume
    prints its stop reason and steps and exits 0, unless the budget it reached is raised
    (--steps N, --set budget.steps=N / budget.wall_clock_s / budget.generated_tokens), which
    trains it on to the new budget. One run per folder: a folder another `grpo run` holds is refused
    (exit 2, naming its pid). Ctrl-C or SIGTERM stops every process cleanly and exits 130;
    once GRPO has started the summary is written for every ending (failures name the service
    and the cause), and the plots; a run stopped during SFT or the services' start has no
    summary: --resume continues its SFT from the newest checkpoint (written every
    model.sft.checkpoint_every_s, 120 s by default, and on Ctrl-C/SIGTERM), then starts GRPO.
    """
    import logging

    from rich.console import Console

    from grpo.local.policy import builds_model
    from grpo.local.processes import become_subreaper
    from grpo.local.run import default_run_dir, run_local
    from grpo.services.driver.driver import Progress

    logging.basicConfig(level=logging.WARNING)
    console = Console()
    values = _parse_overrides(overrides or [])
    if steps is not None:
        values["budget.steps"] = steps
    if (config is None) == (resume is None):
        which = "not both" if config is not None else "neither was given"
        fail(f"give a CONFIG file or --resume RUN_DIR ({which})")
    # The folder of a resume is claimed before anything in it is read (one in use is named).
    lock = _claim(resume.resolve(), resume=True) if resume is not None else None
    cfg = _checked_config(resume / "config.yaml" if resume else config, values, lock, resume, steps)  # type: ignore[operator,arg-type]
    out = (resume or run_dir or default_run_dir(cfg)).resolve()
    lock = lock or _claim(out, resume=False)
    if builds_model(cfg) and (resume is None or _prepares_policy(cfg, out)):
        _quiet_transformers()  # else nothing here loads a model: transformers stays unimported
    become_subreaper()
    # SIGTERM (kill, a container stop) takes the Ctrl-C path: services and the embedded Redis
    # are stopped. Python's default action would exit at once and orphan the Redis server.
    # Later signals are ignored so they cannot cut the shutdown short (bounded by stop_grace_s).
    signal.signal(signal.SIGINT, _interrupt_once)
    signal.signal(signal.SIGTERM, _interrupt_once)

    total = cfg.budget.steps if steps is None else steps
    summary = _run_live(
        console,
        lambda live: run_local(
            cfg,
            out,
            steps=steps,
            on_progress=lambda p: live.update(_progress_table(p, cfg.name, out, total)),
            log_fn=console.log,
            resume=resume is not None,
            lock=lock,
        ),
        _progress_table(Progress(), cfg.name, out, total),
        out,
    )
    _report(console, summary, out)
    if summary.stop_reason == "interrupted":
        raise typer.Exit(code=130)


def _fmt(x: float, spec: str = ".3f") -> str:
    return "-" if math.isnan(x) else format(x, spec)


def _progress_table(p: Any, name: str, out: Path, total_steps: int) -> Any:
    """The live table of ``grpo run``: one row of ``p`` (a driver ``Progress``)."""
    from rich.table import Table

    s = p.stats
    t = Table(title=f"grpo run {name}  ({out})", show_header=True)
    cols = (
        "step",
        "ver",
        "reward",
        "acc",
        "tok/s",
        "kept",
        "rej ✓/✗/few/und",
        "open",
        "short",
        "s",
    )
    for col in cols:
        t.add_column(col, justify="right")
    t.add_row(
        f"{p.step}/{total_steps}",
        str(p.policy_version),
        _fmt(p.reward),
        _fmt(p.heldout_accuracy),
        f"{p.tokens_per_s:.0f}",
        str(s.groups_accepted),
        f"{s.groups_rejected_all_correct}/{s.groups_rejected_all_wrong}/"
        f"{s.groups_rejected_too_few_valid}/{s.groups_rejected_too_many_undecided}",
        str(s.groups_pending),
        str(s.groups_closed_short),
        f"{p.elapsed_s:.0f}",
    )
    return t


def _run_live(console: Any, start: Any, first_table: Any, out: Path) -> Any:
    """``start(live)`` (the run) under a live progress table; its errors become exit codes:
    2 a refused run dir, 1 a failed run, 130 an interrupt before GRPO started."""
    from rich.live import Live

    from grpo.errors import GrpoError
    from grpo.local.rundir import RunRefusedError

    live = Live(first_table, console=console, refresh_per_second=2, transient=False)
    console.log(f"run dir {out}")
    try:
        live.start()
        return start(live)
    except RunRefusedError as exc:
        _stop_live(live, console)
        fail(str(exc))
    except GrpoError as exc:
        _stop_live(live, console)
        console.print(f"[red]run failed:[/red] {exc}")
        raise typer.Exit(code=1) from None
    except KeyboardInterrupt:
        _stop_live(live, console)
        console.print(
            f"[yellow]interrupted before GRPO started[/yellow] (SFT or service start); "
            f"no summary written; continue with: grpo run --resume {out} (SFT goes on from "
            "its newest checkpoint, a finished SFT is kept)"
        )
        raise typer.Exit(code=130) from None
    finally:
        _stop_live(live, console)


def _stop_live(live: Any, console: Any) -> None:
    """Stop ``live`` once. On a terminal rich ends its last frame by moving the cursor; in a
    non-terminal log (a pipe, a file) the table's bottom border has no line break, so the next
    message would run on after it: write that line break."""
    if not live.is_started:
        return
    live.stop()
    if not console.is_terminal:
        console.line()


def _checked_config(
    path: Path, values: dict[str, Any], lock: Any, resume: Path | None, steps: int | None
) -> Any:
    """The run's config, checked before any work (a new run's folder is not created yet):
    every key of every block (``load_run_config``), the verifiers against their routes and a
    Redis the run names (``grpo.local.preflight.checked_tasks``: each endpoint's Describe,
    each service's task types, Redis' PING). A problem prints one line, releases ``lock`` (a
    resume's) and exits 2. A resume of a run that already ended on its budget, none of it
    raised (``grpo.local.run.ended_run``), prints so, releases ``lock`` and exits 0."""
    from grpo.errors import GrpoError
    from grpo.local.preflight import checked_tasks
    from grpo.local.run import ended_run
    from grpo.services.settings.run import load_run_config

    try:
        cfg = load_run_config(path, values)
        ended = ended_run(cfg, resume.resolve(), steps) if resume is not None else None
        if ended is not None:
            lock.release()
            typer.echo(ended.message(resume.resolve()))  # type: ignore[union-attr]
            raise typer.Exit(0)
        checked_tasks(cfg)  # the verifiers, and a Redis the run names
    except GrpoError as exc:
        if lock is not None:
            lock.release()
        fail(str(exc))
    return cfg


def _claim(out: Path, *, resume: bool) -> Any:
    """The run dir's lock (``grpo.local.rundir.claim_run_dir``), taken before anything is
    read or written there (the folder is created for a new run); exit 2 with one line when
    the path is no folder, another process holds it (naming its pid), or a new run would
    reuse a folder that holds a run."""
    from grpo.local.rundir import RunRefusedError, claim_run_dir

    try:
        return claim_run_dir(out, resume=resume)
    except RunRefusedError as exc:
        fail(str(exc))


def _report(console: Any, summary: Any, out: Path) -> None:
    """The closing lines of ``grpo run``: accuracies, steps, tokens, time, stop reason; the
    accounting (``_accounting_lines``); a learner that went on during the final evaluation;
    the plots; leftover processes."""
    from grpo.errors import GrpoError

    console.print()
    console.print(
        f"SFT accuracy {summary.sft_accuracy:.3f} -> final {summary.final_accuracy:.3f} "
        f"({summary.accuracy_gain_points:+.1f} points) after {summary.steps} steps, "
        f"{summary.accounting.generated_tokens} generated tokens, {summary.wall_clock_s:.0f} s "
        f"(stop: {summary.stop_reason}); summary in {out / 'summary.json'}"
    )
    for line in _accounting_lines(summary):
        console.print(line)
    went_on = (summary.last_published_step or 0) - summary.final_policy_step
    if went_on > 0:
        console.print(
            f"the learner did not pause and went on to step {summary.last_published_step} "
            f"(policy v{summary.last_published_policy_version}) during the final "
            f"evaluation, which scored policy v{summary.final_policy_version}; "
            "checkpoints hold the later steps (the driver's log says why)"
        )
    try:
        from grpo.report import render_report

        plots = render_report(out)
        console.print("plots: " + ", ".join(str(p) for p in plots))
    except (GrpoError, ImportError) as exc:
        console.print(f"[yellow]no plots: {exc}[/yellow]")
    if summary.leftover_processes:
        console.print(f"[red]killed leftover processes {list(summary.leftover_processes)}[/red]")


def _accounting_lines(summary: Any) -> list[str]:
    """The console's accounting after a run, from its ``RunSummary``: groups opened =
    accepted + rejected (by reason) + pending with the identity gap, timed out, closed short
    and the rewards missing (of which undecided, and per reason); the zero-variance groups and
    their tokens beside the tokens never trained on; then, when there were any, restarts,
    stalls and the outage seconds per dependency per service (non-zero ones); then one line
    per verifier address the assembler called (calls, failed calls, items, latency, scores)."""
    acc = summary.accounting
    groups, rewards = acc.groups, acc.rewards
    reasons = ", ".join(
        f"{n} {reason.replace('_', ' ')}" for reason, n in groups.rejected_by_reason.items()
    )
    why = ", ".join(f"{n} {r.replace('_', ' ')}" for r, n in rewards.missing_by_reason.items())
    lines = [
        f"groups opened {groups.opened} = accepted {groups.accepted} + rejected "
        f"{groups.rejected} ({reasons}) + pending {groups.pending} (gap "
        f"{groups.identity_gap}); timed out {groups.timed_out}, closed short "
        f"{groups.closed_short}; rewards missing {rewards.missing} "
        f"(undecided {rewards.undecided}" + (f"; {why})" if why else ")"),
        f"zero-variance groups (all correct or all wrong, kept or not) {groups.zero_variance}: "
        f"{acc.zero_variance_tokens} of {acc.generated_tokens} generated tokens; never "
        f"trained on: {acc.generated_tokens - acc.kept_tokens}",
    ]
    seconds = summary.outages.seconds if summary.outages is not None else {}
    outages = {
        f"{dep} {service}": s for dep, by in seconds.items() for service, s in by.items() if s
    }
    if summary.restarts or outages:
        shown = ", ".join(f"{k} {v:.1f}" for k, v in outages.items()) or "none"
        lines.append(f"restarts {dict(summary.restarts)}; outage seconds: {shown}")
    for stall in summary.stalls:
        done = "restarted" if stall.restarted else "still without progress at the end"
        lines.append(f"stalled: {stall.service} ({stall.seconds:.0f} s without progress; {done})")
    if summary.failure is not None:
        lines.append(
            f"failed: {summary.failure.service or 'the run'}"
            + (f" ({summary.failure.cause})" if summary.failure.cause else "")
            + (f": {summary.failure.last_error}" if summary.failure.last_error else "")
        )
    for address, ep in summary.accounting.verifier_endpoints.items():
        statuses = ", ".join(f"{k.removeprefix('SCORE_STATUS_').lower()} {n}"
                             for k, n in ep.get("statuses", {}).items())  # fmt: skip
        lines.append(
            f"verifier {address}: {ep['calls']} calls ({ep['failed_calls']} failed), "
            f"{ep['items']} items, latency mean {ep['latency_mean_ms']} ms max "
            f"{ep['latency_max_ms']} ms; scores: {statuses or 'none'}"
        )
    return lines


def _interrupt_once(signum: int, frame: object) -> None:
    """First SIGINT/SIGTERM: raise KeyboardInterrupt (the clean stop); ignore any after it."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    raise KeyboardInterrupt(f"signal {signum}")


def _prepares_policy(cfg: Any, out: Path) -> bool:
    """Whether the resume of ``out`` prepares its policy (it stopped before GRPO started:
    ``resume_policy`` is None); False when it is refused (run_local says why)."""
    from grpo.local.run import resume_policy
    from grpo.local.rundir import RunRefusedError

    try:
        return resume_policy(cfg, out) is None
    except RunRefusedError:
        return False


def _quiet_transformers() -> None:
    """Hide transformers' per-call progress bars (model save/load at every check and eval)."""
    try:
        from transformers.utils import logging as hf_logging
    except ImportError:
        return
    hf_logging.disable_progress_bar()
