"""``RunSummary``: the one record of how a run ended, written as ``summary.json``.

Built in two places, each adding what only it knows: the run driver (``RunDriver.summary``:
stop reason, accuracies, steps, the policy, evaluations, the assembler's counters as it last
saw them) and ``grpo run`` (``grpo.local.run``: the accounting read from Redis after the
services stopped, restarts, deaths, stalls, outages from the services' logs, the failure and
its cause). Everything downstream (the console, ``grpo compare``, the benchmarks) reads it by
attribute (``RunSummary.read``), never by string key.

One source per figure: the counters of the flat keys (``generated_tokens``,
``groups_accepted``, ``rewards_missing``, ...) and of the ``accounting`` block are the same
``RunAccounting``; the outage seconds are one ``Outages`` (from the services' logs under
``grpo run``, from GetStatus/GetStats for a driver on its own). ``as_dict`` keeps the keys
summary.json always had, so files of earlier runs and tools reading the JSON still work;
``failure`` stays the error's text, with ``failed_service``, ``failure_cause`` and
``last_error`` beside it.
"""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from grpo.errors import FailedPreconditionError
from grpo.services.runtime.accounting import REJECTIONS, RunAccounting

__all__ = ["Death", "Failure", "Outages", "RunSummary", "Stall"]


@dataclass(frozen=True)
class Death:
    """One exit of a supervised service: its name and why ("killed by SIGKILL", "exit 1:
    OSError: [Errno 28] No space left on device", "stalled: ...")."""

    service: str
    reason: str


@dataclass(frozen=True)
class Stall:
    """A service that stopped answering its health check (no progress).

    Attributes:
        service: its name.
        seconds: how long it had not answered when the supervisor acted (or the run ended).
        restarted: True when the supervisor killed and restarted it; False when the run
            ended first (``supervision.stall_s`` not reached).
    """

    service: str
    seconds: float
    restarted: bool


@dataclass(frozen=True)
class Failure:
    """Why a run failed.

    Attributes:
        error: the error's text (summary.json's ``failure``).
        service: the service that failed (None when no one service did).
        cause: a named cause when one is recognised ("disk full (ENOSPC)", "Redis out of
            memory (maxmemory reached)"), else None.
        last_error: the failing service's last error line from its log (None when unknown).
    """

    error: str
    service: str | None = None
    cause: str | None = None
    last_error: str | None = None


@dataclass(frozen=True)
class Outages:
    """Seconds each service could not reach each dependency: ``{dependency: {service: s}}``
    (every service listed, 0.0 when it had none), and where the figures come from."""

    seconds: Mapping[str, Mapping[str, float]]
    source: str


def _float(value: Any) -> float:
    return float("nan") if value is None else float(value)


@dataclass(frozen=True)
class RunSummary:
    """How one run ended (module docstring). Times in seconds; accuracies in [0, 1] or nan.

    Attributes:
        config: the run's config name; stop_reason: "steps", "generated_tokens",
            "wall_clock", "exhausted", "interrupted" or "error".
        sft_accuracy, final_accuracy: held-out greedy accuracy before and after GRPO.
        steps: learner steps done; final_policy_version, final_policy_step: the policy the
            final evaluation scored.
        accounting: groups, rewards and rollouts (``RunAccounting``).
        grpo_wall_clock_s: training seconds; wall_clock_s: the whole run (SFT included).
        evals: every held-out evaluation (eval.jsonl rows, step order).
        leftover_processes: pids that had to be killed after the stop (should be empty).
        outages: seconds per dependency per service, None when not gathered.
        restarts: restarts per service; deaths: every exit of a supervised service;
            stalls: every service that stopped answering (``grpo run`` only).
        failure: why the run failed (None when it did not).
        run_id: the run's id (``grpo.local.rundir``), None outside ``grpo run``.
        resumed: True when ``grpo run --resume`` continued the run (None: not known).
        last_published_policy_version, last_published_step: the newest policy the learner
            published (it may go on during a final evaluation), None when not read.
        curriculum: the prompt curriculum's decisions, None when it was off.
        warnings: what the run warned about on its console that the figures do not show
            (Redis out of memory, a service without progress).
    """

    config: str
    stop_reason: str
    sft_accuracy: float
    final_accuracy: float
    steps: int
    final_policy_version: int
    final_policy_step: int
    accounting: RunAccounting
    grpo_wall_clock_s: float
    wall_clock_s: float
    evals: tuple[Mapping[str, Any], ...] = ()
    leftover_processes: tuple[int, ...] = ()
    outages: Outages | None = None
    restarts: Mapping[str, int] = field(default_factory=dict)
    deaths: tuple[Death, ...] = ()
    stalls: tuple[Stall, ...] = ()
    failure: Failure | None = None
    run_id: str | None = None
    resumed: bool | None = None
    last_published_policy_version: int | None = None
    last_published_step: int | None = None
    curriculum: Mapping[str, Any] | None = None
    warnings: tuple[str, ...] = ()

    @property
    def accuracy_gain_points(self) -> float:
        """``100 * (final - sft)`` rounded to 0.01 (nan when either is nan)."""
        return round(100 * (self.final_accuracy - self.sft_accuracy), 2)

    @property
    def failed(self) -> bool:
        """True when the run ended with an error."""
        return self.stop_reason == "error"

    def replace(self, **changes: Any) -> RunSummary:
        """A copy with ``changes`` (``dataclasses.replace``)."""
        return dataclasses.replace(self, **changes)

    # ---------------------------------------------------------------- summary.json
    def as_dict(self) -> dict[str, Any]:
        """summary.json's layout (the keys it always had, new ones beside them)."""
        acc = self.accounting
        g = acc.groups
        out: dict[str, Any] = {
            "config": self.config,
            "stop_reason": self.stop_reason,
            "sft_accuracy": self.sft_accuracy,
            "final_accuracy": self.final_accuracy,
            "accuracy_gain_points": self.accuracy_gain_points,
            "steps": self.steps,
            "final_policy_version": self.final_policy_version,
            "final_policy_step": self.final_policy_step,
            "generated_tokens": acc.generated_tokens,
            "kept_tokens": acc.kept_tokens,
            "rollouts": acc.rollouts.scored,
            "groups_opened": g.opened,
            "groups_pending": g.pending,
            "groups_accepted": g.accepted,
            **{name: g.rejected_by_reason.get(name.removeprefix("groups_rejected_"), 0)
               for name in REJECTIONS},
            "groups_timed_out": g.timed_out,
            "groups_closed_short": g.closed_short,
            "groups_zero_variance": g.zero_variance,
            "zero_variance_tokens": acc.zero_variance_tokens,
            "rewards_missing": acc.rewards.missing,
            "rewards_undecided": acc.rewards.undecided,
            "accounting": acc.as_dict(),
            "grpo_wall_clock_s": self.grpo_wall_clock_s,
            "wall_clock_s": self.wall_clock_s,
            "leftover_processes": list(self.leftover_processes),
            "evals": [dict(e) for e in self.evals],
            "restarts": dict(self.restarts),
            "deaths": [{"service": d.service, "reason": d.reason} for d in self.deaths],
            "stalls": [dataclasses.asdict(s) for s in self.stalls],
            "warnings": list(self.warnings),
        }  # fmt: skip
        if self.outages is not None:
            out["outage_s"] = {k: dict(v) for k, v in self.outages.seconds.items()}
            out["outage_source"] = self.outages.source
        if self.failure is not None:
            out["failure"] = self.failure.error
            out["failed_service"] = self.failure.service
            out["failure_cause"] = self.failure.cause
            out["last_error"] = self.failure.last_error
        optional = {
            "run_id": self.run_id,
            "resumed": self.resumed,
            "last_published_policy_version": self.last_published_policy_version,
            "last_published_step": self.last_published_step,
            "curriculum": dict(self.curriculum) if self.curriculum is not None else None,
            "verifier_endpoints": {k: dict(v) for k, v in acc.verifier_endpoints.items()} or None,
        }
        out.update({k: v for k, v in optional.items() if v is not None})
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> RunSummary:
        """Read ``as_dict``'s layout back (keys added later are optional).

        Raises:
            FailedPreconditionError: a key every summary has is missing or malformed.
        """
        try:
            return cls._from_dict(data)
        except (KeyError, TypeError, ValueError) as exc:
            raise FailedPreconditionError(f"not a run summary: {exc!r}") from exc

    @classmethod
    def _from_dict(cls, d: Mapping[str, Any]) -> RunSummary:
        outages = None
        if "outage_s" in d:
            outages = Outages(d["outage_s"], str(d.get("outage_source", "")))
        failure = None
        if d.get("failure") is not None:
            failure = Failure(
                str(d["failure"]), d.get("failed_service"), d.get("failure_cause"),
                d.get("last_error"),
            )  # fmt: skip
        return cls(
            config=str(d["config"]),
            stop_reason=str(d["stop_reason"]),
            sft_accuracy=_float(d["sft_accuracy"]),
            final_accuracy=_float(d["final_accuracy"]),
            steps=int(d["steps"]),
            final_policy_version=int(d["final_policy_version"]),
            final_policy_step=int(d["final_policy_step"]),
            accounting=RunAccounting.from_dict(d["accounting"], d),
            grpo_wall_clock_s=float(d["grpo_wall_clock_s"]),
            wall_clock_s=float(d["wall_clock_s"]),
            evals=tuple(d.get("evals", ())),
            leftover_processes=tuple(int(p) for p in d.get("leftover_processes", ())),
            outages=outages,
            restarts={str(k): int(v) for k, v in (d.get("restarts") or {}).items()},
            deaths=tuple(Death(x["service"], x["reason"]) for x in d.get("deaths", ())),
            stalls=tuple(
                Stall(x["service"], float(x["seconds"]), bool(x["restarted"]))
                for x in d.get("stalls", ())
            ),
            failure=failure,
            run_id=d.get("run_id"),
            resumed=d.get("resumed"),
            last_published_policy_version=d.get("last_published_policy_version"),
            last_published_step=d.get("last_published_step"),
            curriculum=d.get("curriculum"),
            warnings=tuple(d.get("warnings", ())),
        )

    def write(self, path: Path) -> Path:
        """Write ``as_dict`` as JSON to ``path`` atomically (a temporary file renamed over
        it), so a reader never sees half a summary. Returns ``path``."""
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        tmp.write_text(json.dumps(self.as_dict(), indent=2) + "\n")
        os.replace(tmp, path)
        return path

    @classmethod
    def read(cls, path: Path) -> RunSummary:
        """The summary written at ``path``.

        Raises:
            FailedPreconditionError: no file, or not a summary.
        """
        if not path.is_file():
            raise FailedPreconditionError(f"no run summary at {path}")
        return cls.from_dict(json.loads(path.read_text()))
