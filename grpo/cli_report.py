"""``grpo report RUN_DIR``: render a run's PNG plots (see ``grpo.report``).

``grpo.cli`` registers :func:`report` as its ``report`` command; ``app`` runs it standalone
(``python -m grpo.cli_report RUN_DIR``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

__all__ = ["app", "report"]


def report(
    run_dir: Annotated[Path, typer.Argument(help="Run directory holding metrics.jsonl.")],
    out_dir: Annotated[
        Path | None, typer.Option("--out-dir", help="Where to write PNGs (default RUN_DIR/report).")
    ] = None,
) -> None:
    """Plot every per-step diagnostic of a run: sampled reward vs greedy accuracy, group
    rewards and outcomes, clip/KL/entropy, lengths, wasted tokens, optimizer, straggler wait,
    slice weights (RUN_DIR/report/*.png)."""
    from grpo.errors import GrpoError
    from grpo.report import render_report

    try:
        written = render_report(run_dir, out_dir)
    except GrpoError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(code=2) from None
    for path in written:
        typer.echo(str(path))


app = typer.Typer(add_completion=False)
app.command()(report)

if __name__ == "__main__":
    app()
