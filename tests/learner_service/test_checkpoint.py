"""Checkpoint round trip: model, optimizer, LR schedule, RNG and consumed ids come back exactly."""

from __future__ import annotations

import copy
import json
import os
import random
from pathlib import Path

import pytest
import torch
from transformers import AutoModelForCausalLM

from grpo.errors import InvalidArgumentError, NotFoundError
from grpo.integrity import INDEX_FILE
from grpo.learner.checkpoint import (
    CheckpointState,
    latest_checkpoint,
    load_checkpoint,
    save_checkpoint,
)


def _train_a_bit(model: torch.nn.Module, opt: torch.optim.Optimizer, sched) -> None:
    ids = torch.randint(3, 90, (2, 10))
    for _ in range(2):
        loss = model(input_ids=ids, labels=ids).loss
        loss.backward()
        opt.step()
        sched.step()
        opt.zero_grad()


def _parts(model_dir: Path):
    model = AutoModelForCausalLM.from_pretrained(model_dir)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: min(1.0, (s + 1) / 10))
    return model, opt, sched


def test_round_trip_restores_everything(tiny_model_dir: Path, tmp_path: Path) -> None:
    model, opt, sched = _parts(tiny_model_dir)
    _train_a_bit(model, opt, sched)
    consumed = [f"g{i}" for i in range(7)]
    state = CheckpointState(
        step=2,
        policy_version=5,
        consumed_group_ids=consumed,
        resolved_config={"algo": {"std": "population"}},
        extra={"generated_tokens": 123},
    )
    random.seed(11)
    torch.manual_seed(12)
    path = save_checkpoint(tmp_path, model=model, optimizer=opt, scheduler=sched, state=state)
    assert path == tmp_path / "step-00000002" and latest_checkpoint(tmp_path) == path
    expected_rng = (random.random(), torch.rand(3))

    saved_params = {k: v.clone() for k, v in model.state_dict().items()}
    saved_opt = copy.deepcopy(opt.state_dict())
    # Continue training so that everything differs, then restore into fresh objects.
    _train_a_bit(model, opt, sched)
    model2, opt2, sched2 = _parts(tiny_model_dir)
    got = load_checkpoint(path, model=model2, optimizer=opt2, scheduler=sched2)

    assert got == state
    for name, value in model2.state_dict().items():
        assert torch.equal(value, saved_params[name]), name
    for pid, st in saved_opt["state"].items():
        for key, value in st.items():
            assert torch.equal(opt2.state_dict()["state"][pid][key], value), (pid, key)
    assert sched2.last_epoch == 2 and sched2.get_last_lr() == pytest.approx([3e-4])
    # The RNG streams continue exactly where they were at save time.
    assert random.random() == expected_rng[0]
    assert torch.equal(torch.rand(3), expected_rng[1])


def test_keep_last_and_atomic_leftovers(tiny_model_dir: Path, tmp_path: Path) -> None:
    model, opt, sched = _parts(tiny_model_dir)
    # A crash mid-save leaves a temp folder; it is ignored and removed by the next save.
    (tmp_path / ".tmp-step-00000009-1").mkdir(parents=True)
    assert latest_checkpoint(tmp_path) is None
    for step in (1, 2, 3, 4):
        save_checkpoint(
            tmp_path,
            model=model,
            optimizer=opt,
            scheduler=sched,
            state=CheckpointState(step=step, policy_version=step),
            keep_last=2,
        )
    assert sorted(os.listdir(tmp_path)) == ["DIGESTS.index.json", "step-00000003", "step-00000004"]
    assert latest_checkpoint(tmp_path) == tmp_path / "step-00000004"
    with pytest.raises(InvalidArgumentError, match="already exists"):
        save_checkpoint(
            tmp_path,
            model=model,
            optimizer=opt,
            scheduler=sched,
            state=CheckpointState(step=4, policy_version=4),
        )
    with pytest.raises(NotFoundError, match="not a complete checkpoint"):
        load_checkpoint(tmp_path / "missing", model=model)


def _flip_middle_byte(path: Path) -> None:
    """Alter one byte in the middle of ``path`` without changing its size (damage at rest)."""
    raw = bytearray(path.read_bytes())
    raw[len(raw) // 2] ^= 0xFF
    path.write_bytes(bytes(raw))


def test_damaged_checkpoints_are_moved_aside_for_the_newest_intact(
    tiny_model_dir: Path, tmp_path: Path
) -> None:
    """Each checkpoint carries the digests of its files; the newest one truncated and the
    next altered in place (same size) are both moved aside with why, and the third is the one
    to load; a checkpoint written before digests existed is trusted."""
    from grpo.integrity import DIGESTS_FILE
    from grpo.learner.checkpoint import DAMAGED_PREFIX, intact_checkpoint

    model, opt, sched = _parts(tiny_model_dir)
    paths = [
        save_checkpoint(tmp_path, model=model, optimizer=opt, scheduler=sched,
                        state=CheckpointState(step=s, policy_version=s), keep_last=5)
        for s in (2, 4, 6)
    ]  # fmt: skip
    assert all((p / DIGESTS_FILE).is_file() for p in paths)
    assert intact_checkpoint(tmp_path) == (paths[-1], [])
    weights = paths[-1] / "model" / "model.safetensors"
    with weights.open("r+b") as fh:  # a full disk's truncated write
        fh.truncate(weights.stat().st_size // 3)
    _flip_middle_byte(paths[1] / "optimizer.pt")
    path, skipped = intact_checkpoint(tmp_path)
    assert path == paths[0]
    assert [moved.name.split("-")[:3] for moved, _ in skipped] == [
        ["damaged", "step", "00000006"], ["damaged", "step", "00000004"],
    ]  # fmt: skip
    assert "model/model.safetensors has" in skipped[0][1] and "truncated" in skipped[0][1]
    assert "optimizer.pt differs from the SHA-256" in skipped[1][1]
    assert all(moved.name.startswith(DAMAGED_PREFIX) for moved, _ in skipped)
    assert (skipped[0][0] / "DAMAGED.txt").read_text().strip() == skipped[0][1]
    assert latest_checkpoint(tmp_path) == paths[0]  # never loaded nor overwritten again
    got = load_checkpoint(path, model=model, optimizer=opt, scheduler=sched)
    assert got.step == 2
    # Step 4 again: the damaged step-00000004 is out of the way.
    again = save_checkpoint(tmp_path, model=model, optimizer=opt, scheduler=sched,
                            state=CheckpointState(step=4, policy_version=4))  # fmt: skip
    assert intact_checkpoint(tmp_path) == (again, [])
    (again / DIGESTS_FILE).unlink()  # as written before digests existed (and their index)
    (tmp_path / INDEX_FILE).unlink()
    assert intact_checkpoint(tmp_path) == (again, [])


@pytest.mark.parametrize("damage", ["manifest deleted", "manifest emptied", "meta.json deleted"])
def test_a_checkpoint_whose_manifest_or_meta_went_is_damaged_not_trusted(
    damage: str, tiny_model_dir: Path, tmp_path: Path
) -> None:
    """The parent's index vouches for each checkpoint's DIGESTS.json: deleting it (which
    passed the folder off as one from before digests, loaded unchecked) or emptying its list
    makes the folder damaged, and so does a missing meta.json (such a folder used to be passed
    over silently, and the learner crash-looped on "already exists" at that step)."""
    from grpo.integrity import DIGESTS_FILE
    from grpo.learner.checkpoint import intact_checkpoint

    model, opt, sched = _parts(tiny_model_dir)
    paths = [
        save_checkpoint(tmp_path, model=model, optimizer=opt, scheduler=sched,
                        state=CheckpointState(step=s, policy_version=s), keep_last=5)
        for s in (2, 4)
    ]  # fmt: skip
    newest = paths[-1]
    if damage == "meta.json deleted":
        (newest / "meta.json").unlink()
    else:
        manifest = newest / DIGESTS_FILE
        if damage == "manifest deleted":
            manifest.unlink()
        else:
            manifest.write_text(json.dumps({"algorithm": "sha256", "files": {}}))
        _flip_middle_byte(newest / "optimizer.pt")
    path, skipped = intact_checkpoint(tmp_path)
    assert path == paths[0]
    assert len(skipped) == 1 and skipped[0][0].name.startswith("damaged-step-00000004")
    want = {"manifest deleted": "DIGESTS.json is missing", "manifest emptied": "edited since",
            "meta.json deleted": "meta.json is missing"}[damage]  # fmt: skip
    assert want in skipped[0][1], skipped[0][1]


@pytest.mark.parametrize("also", ["", "meta.json"])
def test_a_manifest_and_its_index_entry_both_deleted_in_a_run_that_writes_digests(
    also: str, tiny_model_dir: Path, tmp_path: Path
) -> None:
    """In a run whose run.json records that it writes digests (``grpo run`` does at start), a
    checkpoint whose DIGESTS.json and index entry were both deleted (and a byte altered) is
    damaged: moved aside with one line naming run.json, the newest intact one used. The same
    folder outside such a run is one from before digests, trusted as before."""
    from grpo.integrity import DIGESTS_FILE, RUN_RECORD_FILE, RUN_RECORD_KEY
    from grpo.learner.checkpoint import intact_checkpoint

    root = tmp_path / "checkpoints"
    model, opt, sched = _parts(tiny_model_dir)
    paths = [
        save_checkpoint(root, model=model, optimizer=opt, scheduler=sched,
                        state=CheckpointState(step=s, policy_version=s), keep_last=5)
        for s in (2, 4)
    ]  # fmt: skip
    newest = paths[-1]
    (newest / DIGESTS_FILE).unlink()
    if also:
        (newest / also).unlink()
    index = json.loads((root / INDEX_FILE).read_text())
    del index["manifests"][newest.name]
    (root / INDEX_FILE).write_text(json.dumps(index))
    _flip_middle_byte(newest / "optimizer.pt")
    if not also:  # no run record: a checkpoint from before digests, as before
        assert intact_checkpoint(root) == (newest, [])
    (tmp_path / RUN_RECORD_FILE).write_text(json.dumps({"run_id": "r", RUN_RECORD_KEY: True}))
    path, skipped = intact_checkpoint(root)
    assert path == paths[0]
    assert len(skipped) == 1 and skipped[0][0].name.startswith("damaged-step-00000004")
    assert "DIGESTS.json is missing, though its run records in run.json" in skipped[0][1]
