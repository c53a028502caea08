"""``grpo run``'s live display: its held-out accuracy column follows the driver's record."""

from __future__ import annotations

from typing import Any

from grpo.local.run import _show
from grpo.services.driver.driver import Progress


class _Monitor:
    def __init__(self, rows: list[dict[str, Any]]) -> None:
        self.rows = rows
        self.progress = Progress()
        self.polled: list[float] = []

    def recorded_evals(self) -> list[dict[str, Any]]:
        return self.rows

    def poll(self) -> Progress:
        self.polled.append(self.progress.heldout_accuracy)  # what the table is drawn with
        return self.progress

    def warn_if_no_signal(self, stats: Any) -> bool:
        return False


def _row(label: str, accuracy: float) -> dict[str, Any]:
    return {"label": label, "accuracy": accuracy, "correct": int(accuracy * 500), "total": 500}


def test_the_accuracy_column_shows_the_final_evaluation_once_it_is_recorded() -> None:
    said: list[str] = []
    monitor = _Monitor([_row("sft", 0.318), _row("step 20", 0.796)])
    shown: set[str] = set()
    _show(monitor, shown, said.append)  # type: ignore[arg-type]
    assert monitor.polled == [0.796]
    monitor.rows.append(_row("final", 0.844))
    _show(monitor, shown, said.append)  # type: ignore[arg-type]
    assert monitor.polled == [0.796, 0.844]
    assert said[-1] == "held-out accuracy (final): 0.844 (422/500)"
    assert len(said) == 3  # each evaluation logged once
