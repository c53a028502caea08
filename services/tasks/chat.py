"""Prompts through the policy tokenizer's chat template, for the task sets of a run
(``run_tasks.render_chat``, ``data.chat``) and of ``grpo eval`` (``--chat-template``,
``--system``): one rule for both, rendered once per task (``grpo.chat.render_prompt``).

``template`` ``auto`` renders when the tokenizer has a chat template and keeps the plain
prompt when it has none (a system message then is an error: it has nowhere to go);
``none`` always keeps the plain prompt.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from pathlib import Path

from grpo.errors import FailedPreconditionError
from grpo.v1 import common_pb2

__all__ = ["chat_renderer", "rendered"]

log = logging.getLogger(__name__)


def chat_renderer(
    model: str | Path | None, *, template: str, system: str | None, system_name: str
) -> Callable[[str], str] | None:
    """The function that turns a plain prompt into the text the policy reads, or None when
    the prompts stay plain.

    Args:
        model: the policy's folder or hub id, whose tokenizer has the template; None = no
            tokenizer known here (a fresh tiny character model, a remote generation service).
        template: ``auto`` or ``none``.
        system: the system message, or None.
        system_name: how messages name the system setting (``data.chat.system``, ``--system``).

    Raises:
        FailedPreconditionError: ``system`` is set but there is no chat template to put it in
            (the message names the model).
        NotFoundError / OSError: the tokenizer cannot be loaded.
    """
    if template == "none":
        return None
    if model is None:
        if system is not None:
            raise FailedPreconditionError(
                f"{system_name} needs a chat template, and no model path names the policy's "
                "tokenizer (a fresh tiny model's character tokenizer has none): give a model "
                "with one, or drop the system message"
            )
        return None
    local = Path(model).is_absolute() or str(model).startswith(".")
    if local and not Path(model).exists():
        # A pod that builds the tasks without the policy's files (the chart's run driver: the
        # initial model lives on the learner's claim) cannot read the template.
        if system is not None:
            raise FailedPreconditionError(
                f"{system_name} needs the chat template of {model}, which this process cannot "
                "read: mount the model here, or use a hub id"
            )
        log.warning(
            "the policy's tokenizer at %s is not readable from this process: plain prompts "
            "(data.chat.template auto); mount the model here to render its chat template",
            model,
        )
        return None
    from grpo.chat import has_chat_template, render_prompt
    from grpo.model import load_tokenizer

    tokenizer = load_tokenizer(model)
    if not has_chat_template(tokenizer):
        if system is not None:
            raise FailedPreconditionError(
                f"{system_name} needs a chat template, and the tokenizer of {model} has none: "
                "drop the system message, or use a model whose tokenizer_config.json has one"
            )
        log.info("the tokenizer of %s has no chat template: plain prompts", model)
        return None

    def render(prompt: str) -> str:
        return render_prompt(tokenizer, prompt, system=system)

    return render


def rendered(
    tasks: Sequence[common_pb2.Task], render: Callable[[str], str]
) -> list[common_pb2.Task]:
    """Copies of ``tasks`` whose ``prompt`` is ``render(prompt)``."""
    out = []
    for task in tasks:
        copy = common_pb2.Task()
        copy.CopyFrom(task)
        copy.prompt = render(task.prompt)
        out.append(copy)
    return out
