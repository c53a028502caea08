"""``RunConfig.data``: where a run's tasks come from and how their prompts are written.

- ``source``: a shipped set (synthetic arithmetic, GSM8K, MATH-500, HumanEval from the data
  folder) or a user's dataset (``jsonl``, ``parquet``, ``hf``: a folder written by
  ``datasets.Dataset.save_to_disk`` or a hub id where a hub is reachable), read by
  ``grpo.services.tasks.user_dataset`` with the field mapping of ``data.dataset``;
- ``chat``: the prompt rendered once with the policy tokenizer's chat template when the tasks
  are built (``grpo.chat.render_prompt``), so generation, the learner and the held-out
  evaluation all see that text;
- sizes, the seed, repeats, and the prompt curriculum.
"""

from __future__ import annotations

import re
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

__all__ = [
    "USER_SOURCES",
    "ArithConfig",
    "ChatConfig",
    "CurriculumConfig",
    "DataConfig",
    "DatasetSourceConfig",
]

_FROZEN = ConfigDict(frozen=True, extra="forbid")

USER_SOURCES = ("jsonl", "parquet", "hf")
"""The ``data.source`` values read from ``data.dataset`` (a user's dataset)."""


class ArithConfig(BaseModel):
    """Synthetic arithmetic tasks (``grpo.services.tasks.datasets.arith_tasks``)."""

    model_config = _FROZEN

    min_digits: int = Field(default=2, ge=1, description="Fewest digits of an operand.")
    max_digits: int = Field(default=3, ge=1, description="Most digits of an operand.")
    ops: list[Literal["+", "-", "*"]] = Field(default=["+"], description="Operations drawn from.")

    @model_validator(mode="after")
    def _check(self) -> ArithConfig:
        if self.max_digits < self.min_digits:
            raise ValueError("data.arith.max_digits must be >= data.arith.min_digits")
        return self


class DatasetSourceConfig(BaseModel):
    """A user's dataset (``data.source``: jsonl, parquet or hf), mapped onto tasks by field
    names: one task per row."""

    model_config = _FROZEN

    path: str = Field(
        default="",
        description="jsonl: a JSON Lines file; parquet: a Parquet file; hf: a folder written by "
        "datasets' save_to_disk, or a hub id (needs a reachable hub).",
    )
    split: str = Field(
        default="train",
        min_length=1,
        description="hf: the split of the training rows (a saved DatasetDict or a hub id; a "
        "saved single Dataset has none).",
    )
    heldout_path: str | None = Field(
        default=None,
        description="Held-out rows (same kind and mapping); None = heldout_split of path for "
        "hf, else the last data.heldout_size rows of path are held out.",
    )
    heldout_split: str | None = Field(
        default=None,
        description="hf: the split of the held-out rows, e.g. 'test' (None: see heldout_path).",
    )
    prompt_field: str = Field(default="prompt", min_length=1, description="Field of the prompt.")
    gold_field: str = Field(default="answer", min_length=1, description="Field of the gold answer.")
    gold_pattern: str | None = Field(
        default=None,
        description="A regular expression with one group: the gold answer is that group of "
        "the gold field (searched; a row it does not match is an error), e.g. '####\\s*(.+)' "
        "for GSM8K's worked answers. Commas between digits are dropped from the match.",
    )
    task_type: str = Field(
        default="math",
        min_length=1,
        description="Task type (routing key) of every row, unless task_type_field is set.",
    )
    task_type_field: str | None = Field(
        default=None, description="Field holding each row's task type (one type per run)."
    )
    id_field: str | None = Field(
        default=None, description="Field of a unique task id; None = '<file stem>-<row>'."
    )
    prompt_template: str = Field(
        default="{prompt}",
        description="Prompt text around the prompt field, e.g. 'Question: {prompt}\\nAnswer:' "
        "(inside the user turn when data.chat applies a chat template).",
    )

    @model_validator(mode="after")
    def _check(self) -> DatasetSourceConfig:
        if "{prompt}" not in self.prompt_template:
            raise ValueError("data.dataset.prompt_template must contain {prompt}")
        if self.gold_pattern is not None:
            try:
                groups = re.compile(self.gold_pattern).groups
            except re.error as exc:
                raise ValueError(
                    f"data.dataset.gold_pattern is no regular expression: {exc}"
                ) from None
            if groups != 1:
                raise ValueError(
                    f"data.dataset.gold_pattern needs exactly one group (the gold), has {groups}"
                )
        return self


class ChatConfig(BaseModel):
    """How a task's prompt becomes the text the policy reads."""

    model_config = _FROZEN

    template: Literal["auto", "none"] = Field(
        default="auto",
        description="auto: render each prompt once, when the tasks are built, with the policy "
        "tokenizer's chat template (a user turn, the system turn below, the generation prompt "
        "added), and stop generation at the template's end-of-turn token; a tokenizer without "
        "a template (the tiny character model) gets the plain prompt. none: always the plain "
        "prompt.",
    )
    system: str | None = Field(
        default=None,
        description="System message of every prompt (needs a chat template: refused with "
        "template none or a tokenizer without one).",
    )

    @model_validator(mode="after")
    def _check(self) -> ChatConfig:
        if self.system is not None and self.template == "none":
            raise ValueError(
                "data.chat.system needs a chat template: set data.chat.template: auto, or drop "
                "data.chat.system"
            )
        return self


class CurriculumConfig(BaseModel):
    """Prompt selection by recent pass rate (``grpo.services.driver.curriculum``)."""

    model_config = _FROZEN

    enabled: bool = Field(
        default=False,
        description="Feed each prompt with a probability from its difficulty bucket's recent "
        "share of mixed groups (neither all wrong nor all right); skipped prompts come back "
        "in the next pass.",
    )
    bucket_field: str = Field(
        default="difficulty",
        min_length=1,
        description="Task metadata key of the bucket (arith: '3-digit 2-carry'); a task "
        "without it is its own bucket.",
    )
    min_accept: float = Field(
        default=0.1,
        gt=0,
        le=1,
        description="Floor of a bucket's accept probability: every difficulty stays in the "
        "feed and is re-measured.",
    )
    power: float = Field(
        default=2.0,
        gt=0,
        description="Accept probability = (bucket mixed share / best bucket's) ** power.",
    )
    half_life: float = Field(
        default=16.0,
        gt=0,
        description="Closed groups of a bucket after which an observation weighs half.",
    )


class DataConfig(BaseModel):
    """Training prompts and the held-out evaluation set."""

    model_config = _FROZEN

    source: Literal["arith", "gsm8k", "math500", "humaneval", "jsonl", "parquet", "hf"] = Field(
        default="arith",
        description="Task source: synthetic arithmetic, a dataset in the data dir, or a "
        "user's dataset (data.dataset): a JSONL file, a Parquet file, or a Hugging Face "
        "dataset (a save_to_disk folder or a hub id).",
    )
    dataset: DatasetSourceConfig = Field(
        default_factory=DatasetSourceConfig,
        description="The user's dataset and its field mapping (source: jsonl, parquet, hf).",
    )
    chat: ChatConfig = Field(
        default_factory=ChatConfig,
        description="Chat template and system message of the prompts.",
    )
    train_size: int = Field(
        default=0, ge=0, description="Training prompts (0 = every available one; arith needs > 0)."
    )
    heldout_size: int = Field(
        default=200, ge=0, description="Held-out tasks for greedy accuracy, disjoint from training."
    )
    seed: int = Field(default=0, description="Seed of task generation and prompt order.")
    arith: ArithConfig = Field(default_factory=ArithConfig, description="Arithmetic tasks.")
    prompt_repeats: int = Field(
        default=100, ge=1, description="Passes over the training prompts before the feeder stops."
    )
    curriculum: CurriculumConfig = Field(
        default_factory=CurriculumConfig,
        description="Prompt selection by recent pass rate (off by default).",
    )

    @model_validator(mode="after")
    def _check(self) -> DataConfig:
        if self.source == "arith" and self.train_size == 0:
            raise ValueError("data.train_size must be > 0 for data.source=arith")
        if self.source in USER_SOURCES and not self.dataset.path:
            raise ValueError(
                f"data.dataset.path must name the dataset for data.source={self.source}"
            )
        return self
