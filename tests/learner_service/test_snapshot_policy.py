"""A published policy folder pinned for an evaluation survives the learner's pruning."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from grpo.errors import NotFoundError
from grpo.services.learner.publish import weights_dir
from grpo.services.runtime.policy import snapshot_policy


def _published(run_dir: Path, version: int) -> Path:
    folder = weights_dir(run_dir, version)
    folder.mkdir(parents=True)
    (folder / "config.json").write_text(f'{{"v": {version}}}')
    (folder / "model.safetensors").write_bytes(bytes(range(256)) * 4)
    return folder


def test_snapshot_keeps_the_files_after_the_version_is_pruned(tmp_path: Path) -> None:
    folder = _published(tmp_path, 6)
    snap = snapshot_policy(folder, tmp_path / "eval" / "final" / "policy")
    assert (snap / "model.safetensors").stat().st_ino == (
        folder / "model.safetensors"
    ).stat().st_ino
    shutil.rmtree(folder)  # what publish_weights(keep=...) does to an old version
    assert (snap / "config.json").read_text() == '{"v": 6}'
    assert (snap / "model.safetensors").read_bytes() == bytes(range(256)) * 4


def test_snapshot_of_a_pruned_or_incomplete_version_is_not_found(tmp_path: Path) -> None:
    dest = tmp_path / "snap"
    with pytest.raises(NotFoundError, match="v3"):
        snapshot_policy(weights_dir(tmp_path, 3), dest)
    partial = _published(tmp_path, 4)
    (partial / "config.json").unlink()  # pruning under way: config.json already gone
    with pytest.raises(NotFoundError, match="v4"):
        snapshot_policy(partial, dest)
    assert not dest.exists()


def test_an_evaluation_of_a_damaged_version_uses_the_newest_intact_one_below(
    tmp_path: Path,
) -> None:
    from grpo.integrity import write_digests
    from grpo.services.driver.driver import _newest_intact_below

    folders = [_published(tmp_path, v) for v in (2, 3, 5)]
    for folder in folders:
        write_digests(folder)
    for folder in folders[1:]:
        (folder / "model.safetensors").write_bytes(bytes(range(256)) * 3)  # truncated
    assert _newest_intact_below(folders[2]) == folders[0]
    assert _newest_intact_below(folders[0]) is None
