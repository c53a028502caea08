"""The bench-vs-trl report's arithmetic: interpolation at a mark and the per-seed/median table."""

from __future__ import annotations

import math

from bench.bench_vs_trl import interpolate, table


def test_interpolate_between_points_and_none_outside() -> None:
    pts = [(0.0, 0.30), (100.0, 0.50), (200.0, 0.40)]
    assert interpolate(pts, 50.0) == 0.40
    assert math.isclose(interpolate(pts, 150.0) or 0.0, 0.45)
    assert interpolate(pts, 200.0) == 0.40
    assert interpolate(pts, 200.5) is None
    assert interpolate(pts, -1.0) is None
    assert interpolate([], 1.0) is None


def _arm(curve: list[tuple[int, float, float]]) -> dict[str, object]:
    return {
        "curve": [{"tokens": t, "cpu_s": c, "accuracy": a} for t, c, a in curve],
        "tokens": curve[-1][0],
        "cpu_s_exact": curve[-1][1] + 5,
        "wall_s": 10.0,
        "load": {"mean": 3.0},
    }


def test_table_rows_and_median() -> None:
    results = {
        str(seed): {
            "sft": 0.3,
            "a": _arm([(0, 10.0, 0.3), (200_000, 110.0, 0.3 + 0.1 * (seed + 1))]),
        }
        for seed in range(3)
    }
    text = table(results, ["a"], [60.0])
    rows = text.splitlines()
    assert len(rows) == 2 + 3 + 1
    # seed 1: 100 k tokens is halfway from 30% to 50%; 60 CPU s is halfway too.
    assert "| a | 1 | 30.0 | 40.0 | 50.0 | — | 40.0 | 50.0 (200 k) |" in rows[3]
    assert rows[-1].startswith("| **a median** | | | 40.0 | 50.0 | — | 40.0 | 50.0 |")


def test_merge_takes_seeds_and_arms_from_every_folder(tmp_path) -> None:
    import json

    import pytest

    from bench.bench_vs_trl import merge_results

    arm = _arm([(0, 10.0, 0.3), (200_000, 110.0, 0.5)])
    first, second, third = (tmp_path / n for n in ("first", "second", "third"))
    for folder, results in (
        (first, {"0": {"sft": 0.3, "ours": arm, "trl": arm}, "1": {"sft": 0.2, "ours": arm}}),
        (second, {"0": {"sft": 0.3, "new": {**arm, "wall_s": 1.0}}, "1": {"new": arm}}),
        (third, {"1": {"trl": arm}}),
    ):
        folder.mkdir()
        (folder / "results.json").write_text(json.dumps(results))
    merged, names = merge_results([first, second, third])
    assert names == ["ours", "trl", "new"]
    assert merged["0"]["new"]["wall_s"] == 1.0 and merged["1"]["sft"] == 0.2
    with pytest.raises(SystemExit, match=r"\('1', 'trl'\)"):
        merge_results([first, second])
