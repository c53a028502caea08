"""Supervised warm start (SFT) of a causal LM on (prompt, completion) pairs.

``run_sft`` minimises the token-mean cross-entropy of the completion tokens only (prompt tokens
and padding carry no loss); every completion is followed by the tokens that end the model's
turn, so the model learns to stop where generation stops: EOS for plain prompts; with
``chat_template`` (prompts rendered through the tokenizer's chat template,
``grpo.chat.render_prompt``) the text the template puts after an assistant message
(``grpo.chat.assistant_turn_suffix``: ``<|im_end|>\\n`` for ChatML), read from the template
by rendering a full conversation, not hard-coded; EOS follows it only when it holds no
special token (a template that ends turns with plain text gives generation nothing else to
stop at).
AdamW with linear warmup to the peak ``lr``, then cosine decay to 10% starting after warmup when
the number of steps is known (constant after warmup when only a time budget bounds the run); the
schedule is ``grpo.learner.schedule.lr_multiplier``, the trainer's.

Resumable (``checkpoint_dir``): every ``checkpoint_every_s`` seconds, and at a clean interrupt
(Ctrl-C/SIGTERM: ``KeyboardInterrupt``), the state after the last finished step is written as a
learner checkpoint (``grpo.learner.checkpoint.save_checkpoint``: ``step-<8 digits>`` folders,
written to a temp folder, fsynced, renamed, with ``DIGESTS.json`` and the parent's index of
``grpo.integrity``; the newest 2 are kept): the weights, the AdamW state, the torch RNG, and in
``meta.json`` the data position (the shuffling RNG and the examples left of the current pass),
the loss window and history, the checks, the wall-clock spent. The LR schedule is a function of
the step, restored with it. A later ``run_sft`` with the same ``checkpoint_dir`` continues from
the newest intact checkpoint (damaged ones are moved aside) and, on CPU, ends with the very
weights an uninterrupted run ends with (same arithmetic in the same order); its settings
(examples, batch size, lr, schedule, step bound, seed) must match the checkpoint's. A signal
during a step is held until the step ends (the step is never torn), so the interrupt checkpoint
is exact; ``SIGKILL`` loses at most ``checkpoint_every_s`` of training and never leaves a folder
that is trusted (only a ``.tmp-*`` one, removed by the next save).

Evaluation is not here: held-out and dev-set accuracy are scored by the run's outcome verifier
(``grpo.services.driver.heldout.heldout_accuracy`` over ``grpo.services.evaluation``), the
verifier that gives the reward.
"""

from __future__ import annotations

import hashlib
import json
import math
import random
import signal
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from grpo.errors import FailedPreconditionError, InvalidArgumentError
from grpo.learner.checkpoint import (
    CheckpointState,
    intact_checkpoint,
    load_checkpoint,
    save_checkpoint,
)
from grpo.learner.choices import SftScheduleName
from grpo.learner.schedule import lr_multiplier
from grpo.model import load_tokenizer

__all__ = ["SftResult", "run_sft", "turn_end_ids"]


@dataclass
class SftResult:
    """What an SFT run did. Losses are token-mean cross-entropy (nats per completion token);
    ``wall_s`` and ``cpu_s`` are seconds of wall-clock and of this process's CPU time."""

    steps: int
    epochs: float
    final_loss: float
    completion_tokens: int
    wall_s: float
    cpu_s: float
    loss_history: list[tuple[int, float]] = field(default_factory=list)
    checks: list[tuple[int, float]] = field(default_factory=list)
    stopped_by_check: bool = False
    resumed_from: int = 0
    checkpoints: int = 0
    checkpoint_s: float = 0.0


def turn_end_ids(tok: Any, *, chat_template: bool) -> list[int]:
    """Token ids that end every SFT target (module docstring).

    Args:
        tok: the policy's tokenizer.
        chat_template: the prompts are rendered through ``tok``'s chat template.

    Raises:
        FailedPreconditionError: ``chat_template`` and the tokenizer has none (or a template
            that does not render an assistant message verbatim).
    """
    if not chat_template:
        return [tok.eos_token_id]
    from grpo.chat import assistant_turn_suffix

    ids = list(tok(assistant_turn_suffix(tok), add_special_tokens=False)["input_ids"])
    special = set(tok.all_special_ids) | set(getattr(tok, "added_tokens_decoder", {}))
    if not special & set(ids):
        ids.append(tok.eos_token_id)
    return ids


def _encode_examples(
    tok: Any, examples: Sequence[tuple[str, str]], end: Sequence[int]
) -> list[tuple[list[int], int]]:
    """Token ids of prompt + completion + ``end``, and the prompt length, per example."""
    encoded = []
    for i, (prompt, completion) in enumerate(examples):
        if not prompt or not completion:
            raise InvalidArgumentError(f"examples[{i}] has an empty prompt or completion")
        p = tok(prompt, add_special_tokens=False)["input_ids"]
        c = tok(completion, add_special_tokens=False)["input_ids"]
        encoded.append((p + c + list(end), len(p)))
    return encoded


def _collate(
    batch: list[tuple[list[int], int]], pad_id: int
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Right-padded (input_ids, attention_mask, labels), each [B, T]; labels -100 off-target."""
    width = max(len(ids) for ids, _ in batch)
    ids = torch.full((len(batch), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(batch), width), dtype=torch.long)
    labels = torch.full((len(batch), width), -100, dtype=torch.long)
    for i, (seq, plen) in enumerate(batch):
        ids[i, : len(seq)] = torch.tensor(seq)
        mask[i, : len(seq)] = 1
        labels[i, plen : len(seq)] = torch.tensor(seq[plen:])
    return ids, mask, labels


def run_sft(
    model_dir: str | Path,
    examples: Sequence[tuple[str, str]],
    *,
    out_dir: str | Path | None = None,
    steps: int | None = None,
    epochs: float | None = None,
    time_budget_s: float | None = None,
    lr: float = 3e-3,
    batch_size: int = 32,
    warmup_steps: int = 20,
    weight_decay: float = 0.0,
    schedule: SftScheduleName = "cosine",
    seed: int = 0,
    log_every: int = 50,
    on_log: Callable[[int, float], None] | None = None,
    check_every: int = 0,
    check: Callable[[Path, int], tuple[float, bool]] | None = None,
    chat_template: bool = False,
    checkpoint_dir: str | Path | None = None,
    checkpoint_every_s: float = 120.0,
) -> SftResult:
    """Fine-tune the model in ``model_dir`` on (prompt, completion) pairs; save the result.

    The run stops at the first of ``steps``, ``epochs`` (passes over ``examples``) and
    ``time_budget_s`` (seconds of wall-clock); at least one must be given. With ``check``, the
    model is saved to ``out_dir`` every ``check_every`` steps and ``check(out_dir, step)`` returns
    ``(metric, stop)``: the main job stops SFT once a dev-set greedy accuracy reaches its target,
    so the warm start lands in the same accuracy band however fast the machine is.

    Args:
        model_dir: save_pretrained folder (model + tokenizer).
        examples: (prompt, completion) text pairs; each completion is followed by the end of
            the model's turn (EOS, or the chat template's with ``chat_template``).
        out_dir: Where to save the tuned model and tokenizer (default: ``model_dir``, in place).
        steps, epochs, time_budget_s: Stopping rules (see above).
        lr: Peak AdamW learning rate.
        batch_size: Examples per optimizer step.
        warmup_steps: Linear warmup steps.
        weight_decay: AdamW weight decay.
        schedule: After warmup, ``"cosine"`` decays to 10% of ``lr`` over the known number of
            steps (constant when only a time budget bounds the run); ``"constant"`` keeps
            ``lr``.
        seed: Seed of shuffling and dropout.
        log_every: Report the mean loss of the last ``log_every`` steps to ``on_log``.
        on_log: Callback ``(step, mean loss)``.
        check_every: Steps between checks (0 = never).
        check: ``(saved model folder, step) -> (metric, stop)``; the metrics are recorded in
            ``SftResult.checks`` and ``stop=True`` ends the run with that saved model.
        chat_template: the prompts were rendered with the tokenizer's chat template
            (``grpo.chat.render_prompt``): targets end as the template ends an assistant turn
            instead of with EOS (module docstring).
        checkpoint_dir: where resumable checkpoints go (module docstring); when it holds
            one, the run continues from the newest intact one. None: no checkpoints.
        checkpoint_every_s: seconds of training between checkpoints (0 = only at an
            interrupt); a checkpoint of the tiny model costs ~0.1 s.

    Returns:
        ``SftResult`` (steps, epochs done, final mean loss, completion tokens seen, wall_s
        (with the runs it resumed), checks, the step it resumed from, the checkpoints written
        and their seconds).

    Raises:
        InvalidArgumentError: no stopping rule, no examples, an empty prompt/completion, or
            ``check`` without ``check_every > 0``.
        FailedPreconditionError: ``chat_template`` and the tokenizer has no usable template;
            the checkpoint in ``checkpoint_dir`` was written with other settings.
        KeyboardInterrupt: Ctrl-C/SIGTERM, after the checkpoint of the last whole step.
    """
    _check_arguments(steps, epochs, time_budget_s, examples, batch_size, check, check_every)
    cpu_start = time.process_time()
    torch.manual_seed(seed)
    from transformers import AutoModelForCausalLM  # loads sympy: only when training

    tok = load_tokenizer(model_dir)
    model: Any = AutoModelForCausalLM.from_pretrained(str(model_dir), dtype=torch.float32)
    model.train()
    data = _encode_examples(tok, examples, turn_end_ids(tok, chat_template=chat_template))
    max_steps = _max_steps(len(data), batch_size, steps, epochs)
    lr_at = _lr_at(lr, warmup_steps, max_steps, schedule)
    opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=weight_decay)
    target = Path(out_dir) if out_dir is not None else Path(model_dir)
    target.mkdir(parents=True, exist_ok=True)
    settings = _settings(examples, batch_size, lr, warmup_steps, weight_decay, schedule,
                         max_steps, seed, chat_template)  # fmt: skip

    def save() -> None:
        model.eval()
        model.save_pretrained(target)
        tok.save_pretrained(target)
        model.train()

    p = _Progress(_BatchOrder(len(data), batch_size, seed))
    root = Path(checkpoint_dir) if checkpoint_dir is not None else None
    restored = _restore(root, model, opt, settings) if root is not None else None
    spent = p.restore(restored) if restored is not None else 0.0
    resumed_from = p.step
    start = time.perf_counter() - spent  # a time budget counts the runs this one resumes
    saver = _Checkpointer(root, checkpoint_every_s, model, opt, settings, p, start)
    try:
        while not p.stopped:
            checked = p.checks[-1][0] if p.checks else 0
            if check is not None and p.step > checked and p.step % check_every == 0:
                save()
                metric, p.stopped = check(target, p.step)
                p.checks.append((p.step, metric))
                if p.stopped:
                    break
            if p.step >= max_steps:
                break
            if time_budget_s is not None and time.perf_counter() - start >= time_budget_s:
                break
            with _signals_held():  # a step is never torn: an interrupt lands between steps
                logged = _train_step(model, opt, data, p, lr_at(p.step), tok.pad_token_id,
                                     log_every)  # fmt: skip
            if logged and on_log is not None:
                on_log(*p.history[-1])
            saver.maybe()
    except KeyboardInterrupt:
        saver.save()  # the state after the last whole step
        raise
    window, history = p.window, p.history
    final = sum(window) / len(window) if window else (history[-1][1] if history else math.nan)
    if not p.stopped or resumed_from:
        save()
    model.eval()
    return SftResult(
        steps=p.step,
        epochs=p.step * batch_size / len(data),
        final_loss=final,
        completion_tokens=p.tokens,
        wall_s=time.perf_counter() - start,
        cpu_s=time.process_time() - cpu_start,
        loss_history=history,
        checks=p.checks,
        stopped_by_check=p.stopped,
        resumed_from=resumed_from,
        checkpoints=saver.written,
        checkpoint_s=saver.seconds,
    )


@dataclass
class _Progress:
    """The state of an SFT run besides its tensors: what a checkpoint's ``meta.json`` holds
    (``extra["sft"]``) with the step."""

    order: _BatchOrder
    step: int = 0
    tokens: int = 0
    stopped: bool = False
    window: list[float] = field(default_factory=list)
    history: list[tuple[int, float]] = field(default_factory=list)
    checks: list[tuple[int, float]] = field(default_factory=list)

    def meta(self, spent_s: float) -> dict[str, Any]:
        return {
            "order": self.order.state(), "history": self.history, "checks": self.checks,
            "window": self.window, "tokens": self.tokens, "stopped": self.stopped,
            "spent_s": spent_s,
        }  # fmt: skip

    def restore(self, state: CheckpointState) -> float:
        """Take the checkpoint's state; returns the wall-clock seconds spent before it."""
        sft = state.extra["sft"]
        self.step = state.step
        self.order.restore(sft["order"])
        self.history = [(int(s), float(v)) for s, v in sft["history"]]
        self.checks = [(int(s), float(v)) for s, v in sft["checks"]]
        self.window = [float(v) for v in sft["window"]]
        self.tokens, self.stopped = int(sft["tokens"]), bool(sft["stopped"])
        return float(sft["spent_s"])


def _train_step(
    model: Any,
    opt: torch.optim.Optimizer,
    data: list[tuple[list[int], int]],
    p: _Progress,
    lr: float,
    pad_id: int,
    log_every: int,
) -> bool:
    """One optimizer step on the next batch, at learning rate ``lr``; True when it closed a
    ``log_every`` window (its mean is then ``p.history[-1]``)."""
    batch = [data[i] for i in p.order.next()]
    ids, mask, labels = _collate(batch, pad_id)
    for group in opt.param_groups:
        group["lr"] = lr
    loss = model(input_ids=ids, attention_mask=mask, labels=labels).loss
    opt.zero_grad(set_to_none=True)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    opt.step()
    p.step += 1
    p.tokens += int((labels != -100).sum())
    p.window.append(loss.item())
    if p.step % log_every:
        return False
    p.history.append((p.step, sum(p.window) / len(p.window)))
    p.window = []
    return True


class _Checkpointer:
    """Writes SFT checkpoints under ``root`` (none when it is None): ``maybe`` every
    ``every_s`` seconds (0 = never), ``save`` now; a step already saved is not saved again."""

    def __init__(
        self,
        root: Path | None,
        every_s: float,
        model: Any,
        opt: torch.optim.Optimizer,
        settings: dict[str, Any],
        progress: _Progress,
        start: float,
    ) -> None:
        self.root, self.every_s, self.model, self.opt = root, every_s, model, opt
        self.settings, self.progress, self.start = settings, progress, start
        self.saved_step, self.saved_at = progress.step, time.perf_counter()
        self.written, self.seconds = 0, 0.0

    def maybe(self) -> None:
        if self.every_s > 0 and time.perf_counter() - self.saved_at >= self.every_s:
            self.save()

    def save(self) -> None:
        p = self.progress
        if self.root is None or p.step == self.saved_step:
            return
        began = time.perf_counter()
        state = CheckpointState(
            p.step, 0, resolved_config=self.settings, extra={"sft": p.meta(began - self.start)}
        )
        with _signals_held():  # a Ctrl-C here waits until the checkpoint is complete
            save_checkpoint(
                self.root,
                model=self.model,
                optimizer=self.opt,
                scheduler=None,  # the schedule is lr_at(step): the step restores it
                state=state,
                keep_last=2,
            )
        self.saved_step, self.saved_at = p.step, time.perf_counter()
        self.written, self.seconds = self.written + 1, self.seconds + self.saved_at - began


def _settings(
    examples: Sequence[tuple[str, str]],
    batch_size: int,
    lr: float,
    warmup_steps: int,
    weight_decay: float,
    schedule: SftScheduleName,
    max_steps: int,
    seed: int,
    chat_template: bool,
) -> dict[str, Any]:
    """What a checkpoint's training depends on besides its tensors (a resume must match)."""
    digest = hashlib.sha256(json.dumps([list(e) for e in examples]).encode()).hexdigest()
    return {
        "examples_sha256": digest, "batch_size": batch_size, "lr": lr,
        "warmup_steps": warmup_steps, "weight_decay": weight_decay, "schedule": schedule,
        "max_steps": max_steps, "seed": seed, "chat_template": chat_template,
    }  # fmt: skip


def _restore(
    root: Path, model: Any, opt: torch.optim.Optimizer, settings: dict[str, Any]
) -> CheckpointState | None:
    """Load the newest intact SFT checkpoint under ``root`` into ``model`` and ``opt`` (and
    the torch RNG); None when there is none.

    Raises:
        FailedPreconditionError: the checkpoint was written with other settings (examples,
            batch size, lr, schedule, step bound, seed): continuing would not be that SFT.
    """
    path, _damaged = intact_checkpoint(root)
    if path is None:
        return None
    meta = json.loads((path / "meta.json").read_text())
    written = meta["resolved_config"]
    differ = sorted(
        k for k in settings.keys() | written.keys() if settings.get(k) != written.get(k)
    )
    if differ:
        raise FailedPreconditionError(
            f"cannot continue SFT from {path}: it was written with other "
            f"{', '.join(differ)} ({', '.join(f'{k}={written.get(k)!r}' for k in differ)}; "
            f"now {', '.join(f'{k}={settings.get(k)!r}' for k in differ)}); restore those "
            f"settings, or delete {root} to start SFT over"
        )
    return load_checkpoint(path, model=model, optimizer=opt, restore_rng=True)


@contextmanager
def _signals_held() -> Iterator[None]:
    """Hold SIGINT/SIGTERM while the block runs, then hand the first one held to the handler
    that was installed (``grpo run``'s raises ``KeyboardInterrupt``): the block is never cut in
    two. Off the main thread (no signal can be handled there) it does nothing."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    held: list[int] = []
    previous = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
    for sig in previous:
        signal.signal(sig, lambda signum, _frame: held.append(signum))
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, signal.SIG_DFL if handler is None else handler)
    if held:
        first = signal.Signals(held[0])
        handler = previous[first]
        if callable(handler):
            handler(first, None)
        elif handler in (signal.SIG_DFL, None):
            signal.raise_signal(first)


def _check_arguments(
    steps: int | None,
    epochs: float | None,
    time_budget_s: float | None,
    examples: Sequence[tuple[str, str]],
    batch_size: int,
    check: Callable[[Path, int], tuple[float, bool]] | None,
    check_every: int,
) -> None:
    """``run_sft``'s argument checks (its Raises)."""
    if steps is None and epochs is None and time_budget_s is None:
        raise InvalidArgumentError("give at least one of steps, epochs or time_budget_s")
    if not examples:
        raise InvalidArgumentError("examples is empty")
    if batch_size < 1:
        raise InvalidArgumentError(f"batch_size must be >= 1, got {batch_size}")
    if check is not None and check_every < 1:
        raise InvalidArgumentError(f"check needs check_every >= 1, got {check_every}")


_UNBOUNDED = 1 << 62


def _max_steps(num_examples: int, batch_size: int, steps: int | None, epochs: float | None) -> int:
    """The step bound of ``steps`` and ``epochs`` (``_UNBOUNDED`` when neither is given)."""
    max_steps = steps if steps is not None else _UNBOUNDED
    if epochs is not None:
        max_steps = min(max_steps, math.ceil(epochs * math.ceil(num_examples / batch_size)))
    return max_steps


def _lr_at(
    lr: float, warmup_steps: int, max_steps: int, schedule: SftScheduleName
) -> Callable[[int], float]:
    """The learning rate of each step: ``lr`` is the peak; cosine decay to 10% starts after
    warmup when the number of steps is known (``grpo.learner.schedule``)."""
    # A run no longer than its warmup has nothing to decay over: it ends at the peak lr.
    known = max_steps < _UNBOUNDED and max_steps > warmup_steps
    decay_steps = max_steps if known and schedule == "cosine" else None

    def lr_at(step: int) -> float:
        return lr * lr_multiplier(
            step,
            warmup_steps=warmup_steps,
            schedule="cosine" if decay_steps is not None else "constant",
            total_steps=decay_steps,
            min_lr_ratio=0.1,
        )

    return lr_at


class _BatchOrder:
    """Endless batches of example indices: each pass over the examples in a fresh shuffle,
    a batch running on into the next pass when the examples do not divide evenly. Its state
    (the shuffling RNG, the indices left of the pass) is what a checkpoint records of the data
    position (``state``/``restore``, JSON-serialisable)."""

    def __init__(self, num_examples: int, batch_size: int, seed: int) -> None:
        self.num_examples, self.batch_size = num_examples, batch_size
        self.rng = random.Random(seed)
        self.order: list[int] = []

    def next(self) -> list[int]:
        """The next batch's example indices (``batch_size`` of them)."""
        if len(self.order) < self.batch_size:
            fresh = list(range(self.num_examples))
            self.rng.shuffle(fresh)
            self.order += fresh
        batch = self.order[: self.batch_size]
        del self.order[: self.batch_size]
        return batch

    def state(self) -> dict[str, Any]:
        version, internal, gauss = self.rng.getstate()
        return {"rng": [version, list(internal), gauss], "order": list(self.order)}

    def restore(self, state: dict[str, Any]) -> None:
        version, internal, gauss = state["rng"]
        self.rng.setstate((version, tuple(internal), gauss))
        self.order = [int(i) for i in state["order"]]
