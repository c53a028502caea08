"""Chat templates: the prompt text a chat model reads, and the token that ends its turn.

A run renders each task's prompt once, when its tasks are built
(``grpo.services.tasks.run_tasks``, ``data.chat``), with the policy tokenizer's own chat
template (Hugging Face ``apply_chat_template``: an optional system turn, the prompt as the user
turn, the generation prompt added). The rendered text is ``Task.prompt``, so the rollout
workers, the learner (which trains on the rollouts' prompt token ids) and the held-out
evaluation all see the same text; nothing applies a template later.

A template ends the assistant's turn with a token of its own (ChatML's ``<|im_end|>``), which
is not always the tokenizer's EOS (a base model's ``<|endoftext|>``): :func:`end_of_turn_ids`
finds it by rendering a short conversation, and the generation backends stop at it besides
EOS. The supervised warm start ends each target as the template ends an assistant turn
(:func:`assistant_turn_suffix`), so the model learns to stop where generation stops.

:data:`CHATML_TEMPLATE` is the template ``grpo model init --tokenizer bpe`` saves (Qwen's
turn markers, no default system message, no tools).
"""

from __future__ import annotations

from typing import Any

from grpo.errors import FailedPreconditionError

__all__ = [
    "CHATML_TEMPLATE",
    "END_OF_TURN",
    "START_OF_TURN",
    "assistant_turn_suffix",
    "end_of_turn_ids",
    "has_chat_template",
    "render_prompt",
]

START_OF_TURN = "<|im_start|>"
END_OF_TURN = "<|im_end|>"

CHATML_TEMPLATE = (
    "{%- for message in messages %}"
    "{{- '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>\\n' }}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}"
)
"""A ChatML chat template (Jinja) with Qwen's turn markers: per message
``<|im_start|>ROLE\\nTEXT<|im_end|>\\n``, then ``<|im_start|>assistant\\n`` when a
generation prompt is asked for."""

_SENTINEL = "\u2063grpo-end-of-turn-probe\u2063"


def has_chat_template(tokenizer: Any) -> bool:
    """True when ``tokenizer`` (a Hugging Face tokenizer) carries a chat template."""
    return bool(getattr(tokenizer, "chat_template", None))


def render_prompt(tokenizer: Any, prompt: str, *, system: str | None = None) -> str:
    """The text of a one-turn conversation ready for the model's answer.

    Args:
        tokenizer: a Hugging Face tokenizer with a chat template.
        prompt: the user turn's text (the task's plain prompt).
        system: the system turn's text, or None for none.

    Returns:
        ``apply_chat_template([system?, user], add_generation_prompt=True)`` as text.

    Raises:
        FailedPreconditionError: the tokenizer has no chat template.
    """
    if not has_chat_template(tokenizer):
        raise FailedPreconditionError(
            "the tokenizer has no chat template: use data.chat.template: none (the plain "
            "prompt), or a model whose tokenizer_config.json has a chat_template"
        )
    messages = [{"role": "system", "content": system}] if system is not None else []
    messages.append({"role": "user", "content": prompt})
    text = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    return str(text)


def assistant_turn_suffix(tokenizer: Any) -> str:
    """The text the chat template puts after an assistant message's content: how it ends an
    assistant turn (``<|im_end|>\\n`` for ChatML/Qwen, ``<|eot_id|>`` for Llama 3).

    Renders the full conversation ``[user "x", assistant SENTINEL]`` with
    ``apply_chat_template`` (no generation prompt) and returns what follows the sentinel, so
    a supervised target (``grpo.learner.sft``) ends exactly as the template renders the turn.

    Args:
        tokenizer: a Hugging Face tokenizer with a chat template.

    Returns:
        The suffix text (possibly empty: a template that closes a turn with nothing).

    Raises:
        FailedPreconditionError: the tokenizer has no chat template, or its template does not
            render the assistant message's content verbatim.
    """
    if not has_chat_template(tokenizer):
        raise FailedPreconditionError(
            "the tokenizer has no chat template: SFT targets end with its EOS instead"
        )
    messages = [{"role": "user", "content": "x"}, {"role": "assistant", "content": _SENTINEL}]
    text = str(tokenizer.apply_chat_template(messages, tokenize=False))
    _, found, after = text.partition(_SENTINEL)
    if not found:
        raise FailedPreconditionError(
            "the chat template does not render an assistant message's content verbatim: the "
            "end of an assistant turn cannot be read from it"
        )
    return after


def end_of_turn_ids(tokenizer: Any) -> set[int]:
    """The special token(s) that close an assistant turn in the tokenizer's chat template.

    Renders ``[user "x", assistant SENTINEL]`` and takes the first special (added) token after
    the sentinel: ``<|im_end|>`` for ChatML/Qwen, ``<|eot_id|>`` for Llama 3. Empty when the
    tokenizer has no template, the template cannot render that conversation, or it ends a
    turn with plain text (then only EOS stops generation).

    Args:
        tokenizer: a Hugging Face tokenizer.

    Returns:
        A set of zero or one token id.
    """
    if not has_chat_template(tokenizer):
        return set()
    messages = [{"role": "user", "content": "x"}, {"role": "assistant", "content": _SENTINEL}]
    try:
        text = str(tokenizer.apply_chat_template(messages, tokenize=False))
    except Exception:  # a template that refuses the probe: no end-of-turn token known
        return set()
    _, found, after = text.partition(_SENTINEL)
    if not found:
        return set()
    special = set(tokenizer.all_special_ids) | set(getattr(tokenizer, "added_tokens_decoder", {}))
    for token in tokenizer(after, add_special_tokens=False)["input_ids"]:
        if token in special:
            return {int(token)}
    return set()
