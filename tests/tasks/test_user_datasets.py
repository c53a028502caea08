"""A user's dataset (``data.source``: jsonl, parquet, hf) mapped onto tasks, and the prompts
rendered once through the policy tokenizer's chat template (``data.chat``)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from grpo.errors import FailedPreconditionError, InvalidArgumentError, NotFoundError
from grpo.services.settings.run import RunConfig
from grpo.services.tasks.run_tasks import load_run_tasks

ROWS = [
    {"question": f"What is {i} + {i}?", "solution": f"{i} + {i} = {2 * i}\n#### {2 * i:,}",
     "qid": f"q{i}"}
    for i in range(600, 610)
]  # fmt: skip
MAPPING = {"prompt_field": "question", "gold_field": "solution", "gold_pattern": r"####\s*(.+)",
           "id_field": "qid"}  # fmt: skip


def _config(source: str, path: Path | str, **data: Any) -> RunConfig:
    dataset = {**MAPPING, "path": str(path), **data.pop("dataset", {})}
    return RunConfig.model_validate(
        {"data": {"source": source, "dataset": dataset, "heldout_size": 2, **data}}
    )


def _parquet(path: Path, rows: list[dict[str, Any]]) -> Path:
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(pa.Table.from_pylist(rows), path)
    return path


def _hf(folder: Path, splits: dict[str, list[dict[str, Any]]]) -> Path:
    import datasets

    datasets.DatasetDict(
        {name: datasets.Dataset.from_list(rows) for name, rows in splits.items()}
    ).save_to_disk(str(folder))
    return folder


def test_parquet_rows_become_tasks_with_the_gold_pattern(tmp_path: Path) -> None:
    tasks = load_run_tasks(_config("parquet", _parquet(tmp_path / "t.parquet", ROWS)))
    assert [t.id for t in tasks.train] == [f"q{i}" for i in range(600, 608)]
    assert [t.id for t in tasks.heldout] == ["q608", "q609"]
    first = tasks.train[0]
    # the worked solution's "#### 1,200": the group, commas between digits dropped
    assert (first.prompt, first.gold_answer, first.type) == ("What is 600 + 600?", "1200", "math")


def test_a_saved_hf_dataset_by_split_with_its_heldout_split(tmp_path: Path) -> None:
    folder = _hf(tmp_path / "ds", {"train": ROWS[:8], "test": ROWS[8:]})
    tasks = load_run_tasks(_config("hf", folder, dataset={"heldout_split": "test"}))
    assert [t.id for t in tasks.heldout] == ["q608", "q609"] and len(tasks.train) == 8
    no_ids = {**MAPPING, "id_field": None}
    plain = load_run_tasks(_config("hf", folder, dataset=no_ids, heldout_size=0))
    assert plain.train[0].id == "ds-train-1" and plain.train[0].gold_answer == "1200"
    with pytest.raises(NotFoundError, match=r"has no split 'dev'; its splits: train, test"):
        load_run_tasks(_config("hf", folder, dataset={"split": "dev"}))
    with pytest.raises(NotFoundError, match="cannot load the dataset 'nobody/no-such-set'"):
        load_run_tasks(_config("hf", "nobody/no-such-set"))  # no hub here: a clear error


@pytest.mark.parametrize("source", ["jsonl", "parquet", "hf"])
def test_a_missing_field_names_the_setting_and_the_fields_present(
    tmp_path: Path, source: str
) -> None:
    rows = [{k: v for k, v in r.items() if k != "solution"} for r in ROWS]
    if source == "jsonl":
        path: Path = tmp_path / "t.jsonl"
        path.write_text("".join(json.dumps(r) + "\n" for r in rows))
        where = r"t\.jsonl:1"
    elif source == "parquet":
        path, where = _parquet(tmp_path / "t.parquet", rows), r"t\.parquet"
    else:
        path, where = _hf(tmp_path / "ds", {"train": rows}), r"ds \[train\]"
    with pytest.raises(
        InvalidArgumentError,
        match=rf"{where}: no field 'solution' \(data\.dataset\.gold_field\); its fields: "
        r"qid, question$",
    ):
        load_run_tasks(_config(source, path))


def test_a_gold_the_pattern_does_not_match_is_named(tmp_path: Path) -> None:
    rows = [*ROWS[:3], {**ROWS[3], "solution": "no final line"}]
    with pytest.raises(
        InvalidArgumentError, match=r"t\.parquet row 4: data\.dataset\.gold_pattern"
    ):
        load_run_tasks(_config("parquet", _parquet(tmp_path / "t.parquet", rows)))
    with pytest.raises(ValueError, match="needs exactly one group"):
        _config("parquet", tmp_path / "t.parquet", dataset={"gold_pattern": "####"})


def test_prompts_are_rendered_once_with_the_chat_template(
    tmp_path: Path, bpe_chat_model: Path
) -> None:
    path = _parquet(tmp_path / "t.parquet", ROWS)
    chat = {"template": "auto", "system": "Be brief."}
    config = RunConfig.model_validate(
        {"data": {"source": "parquet", "dataset": {**MAPPING, "path": str(path)},
                  "heldout_size": 2, "chat": chat},
         "model": {"path": str(bpe_chat_model)}}
    )  # fmt: skip
    tasks = load_run_tasks(config)
    expected = (
        "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nWhat is 600 + 600?"
        "<|im_end|>\n<|im_start|>assistant\n"
    )
    assert tasks.train[0].prompt == expected
    assert all(t.prompt.endswith("<|im_start|>assistant\n") for t in tasks.heldout)
    plain = config.model_copy(
        update={"data": config.data.model_copy(update={"chat": type(config.data.chat)()})}
    )
    assert load_run_tasks(plain).train[0].prompt.startswith("<|im_start|>user\nWhat is 600")
    none = RunConfig.model_validate(
        {"data": {"source": "parquet", "dataset": {**MAPPING, "path": str(path)},
                  "heldout_size": 2, "chat": {"template": "none"}},
         "model": {"path": str(bpe_chat_model)}}
    )  # fmt: skip
    assert load_run_tasks(none).train[0].prompt == "What is 600 + 600?"


def test_a_system_message_without_a_template_is_refused(tmp_path: Path) -> None:
    config = RunConfig.model_validate(
        {"data": {"source": "arith", "train_size": 4, "heldout_size": 2,
                  "chat": {"system": "Be brief."}}}
    )  # fmt: skip
    with pytest.raises(FailedPreconditionError, match=r"data\.chat\.system needs a chat template"):
        load_run_tasks(config)
    with pytest.raises(ValueError, match=r"data\.chat\.system needs a chat template"):
        RunConfig.model_validate({"data": {"chat": {"template": "none", "system": "x"}}})
    # the tiny character model has no template: plain prompts, no error
    assert load_run_tasks(RunConfig.model_validate({"data": {"train_size": 4}})).train[0].prompt


def test_a_policy_folder_this_process_cannot_read_keeps_plain_prompts_unless_a_system_message(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The chart's run driver builds the tasks without the policy's files (the initial model is
    on the learner's claim): ``auto`` then keeps the plain prompts and says why; a system
    message, which needs the template, is refused."""
    from grpo.errors import FailedPreconditionError
    from grpo.services.tasks.chat import chat_renderer

    missing = tmp_path / "not-mounted"
    with caplog.at_level("WARNING"):
        assert chat_renderer(missing, template="auto", system=None, system_name="s") is None
    assert "not readable from this process" in caplog.text
    with pytest.raises(FailedPreconditionError, match="cannot read"):
        chat_renderer(missing, template="auto", system="be brief", system_name="data.chat.system")
