"""Pipeline benchmark: end-to-end rollouts/s, learner idle share, Redis + assembly overhead per
rollout as a share of rollout wall time, straggler wait per group.

Two measurements in the same run:

1. In process, on an embedded Redis: the cost of moving one rollout through Redis and the
   assembler (XADD with dedup to the rollouts stream, XREADGROUP, group-store Lua write,
   group close with the Group XADD, XACK), with a constant-time scorer so verifier time is
   excluded.
2. A short real run of configs/e2e-tiny.yaml (every service a process, the tiny model, SFT
   off, dynamic sampling off): rollouts/s end to end, the learner's idle share (time waiting
   for groups / step wall time, from metrics.jsonl), the generation wall time per rollout
   (``timings.generation_s`` / G) and the straggler wait of each group.

The overhead share printed is (1) divided by the generation time per rollout of (2).
"""

from __future__ import annotations

import json
import statistics
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def _overhead_per_rollout_s(n_groups: int = 60, group_size: int = 8) -> float:
    from grpo.services.assembler.assembler import Assembler
    from grpo.services.assembler.service import StreamGroupSink
    from grpo.services.assembler.store import GroupStore
    from grpo.services.runtime.redis_server import EmbeddedRedis, connect
    from grpo.services.runtime.streams import StreamNames, Streams
    from grpo.services.runtime.verifier_client import RolloutScores
    from grpo.services.settings.assembler import (
        AssemblerConfig,
        DynamicSamplingConfig,
        DynamicSamplingMode,
    )
    from grpo.v1 import common_pb2

    class ConstantScorer:
        def score(self, rollouts: Sequence[common_pb2.Rollout]) -> list[RolloutScores]:
            return [
                RolloutScores(common_pb2.Score(status=common_pb2.SCORE_STATUS_OK, reward=1.0), None)
                for _ in rollouts
            ]

    with EmbeddedRedis() as server:
        client = connect(server.url)
        names = StreamNames("bench")
        streams = Streams(client)
        cfg = AssemblerConfig(dynamic_sampling=DynamicSamplingConfig(mode=DynamicSamplingMode.OFF))
        store = GroupStore(client, "bench", group_deadline_s=60)
        asm = Assembler(store, ConstantScorer(), StreamGroupSink(streams, names), cfg)
        streams.ensure_group(names.rollouts, "assembler")
        rollouts = []
        for g in range(n_groups):
            for i in range(group_size):
                rollouts.append(
                    common_pb2.Rollout(
                        group_id=f"b{g}",
                        index=i,
                        group_size=group_size,
                        prompt_id=f"p{g}",
                        task=common_pb2.Task(id=f"p{g}", type="arith", prompt="12+34="),
                        prompt_token_ids=list(range(6)),
                        completion=common_pb2.Completion(
                            text="2+4=6,1+3=4:46",
                            token_ids=list(range(16)),
                            behavior_logprobs=[-0.1] * 16,
                            token_char_offsets=list(range(16)),
                        ),
                    )
                )
        start = time.perf_counter()
        for r in rollouts:
            streams.produce(names.rollouts, r, dedup_key=f"{r.group_id}:{r.index}")
        while True:
            entries = streams.consume(
                names.rollouts, "assembler", "c0", common_pb2.Rollout, 64, None
            )
            if not entries:
                break
            asm.submit([e.message for e in entries])
            streams.ack(names.rollouts, "assembler", [e.id for e in entries])
        elapsed = time.perf_counter() - start
        assert store.counters()["groups_accepted"] == n_groups
        client.close()
    return elapsed / len(rollouts)


def _pipeline_run(steps: int = 8) -> dict[str, float]:
    from grpo.local.run import run_local
    from grpo.local.rundir import IDENTITY_FILE, RunIdentity
    from grpo.services.runtime.redis_server import EmbeddedRedis, connect
    from grpo.services.runtime.streams import StreamNames
    from grpo.services.settings.run import load_run_config
    from grpo.v1 import common_pb2

    # The bench's own Redis (the run uses it instead of an embedded one and leaves it up), so
    # the streams can be read after ``grpo run``'s composition has stopped every service.
    with EmbeddedRedis() as server, tempfile.TemporaryDirectory() as tmp:
        cfg = load_run_config(
            REPO / "configs" / "e2e-tiny.yaml",
            {
                "model.sft.enabled": False,
                "assembler.dynamic_sampling.mode": "off",
                "data.heldout_size": 0,
                "budget.steps": steps,
                "learner.checkpoint_every": 100,
                "redis_url": server.url,
            },
        )
        run_dir = (Path(tmp) / "run").resolve()
        summary = run_local(cfg, run_dir, steps=steps, log_fn=lambda _m: None)
        client = connect(server.url)
        names = StreamNames(RunIdentity.read(run_dir / IDENTITY_FILE).namespace)
        raw = client.xrange(names.rollouts)
        rollouts = [common_pb2.Rollout.FromString(f[b"pb"]) for _i, f in raw]
        groups = [common_pb2.Group.FromString(f[b"pb"]) for _i, f in client.xrange(names.groups)]
        client.close()
        metrics = [
            json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()
        ]
    gen_per_rollout = [r.timings.generation_s / max(1, r.group_size) for r in rollouts]
    # Rollouts/s over the GRPO phase: first to last rollout written (start-up excluded).
    created = sorted(r.timings.produced_unix_s for r in rollouts if r.timings.produced_unix_s > 0)
    wall = (created[-1] - created[0]) if len(created) > 1 else summary.wall_clock_s
    idle = [m["learner/idle_frac"] for m in metrics if m.get("learner/idle_frac") is not None]
    group_wall = [max(1e-9, g.closed_unix_s - g.opened_unix_s) for g in groups]
    return {
        "rollouts_per_s": len(rollouts) / max(wall, 1e-9),
        "learner_idle_share": statistics.fmean(idle) if idle else float("nan"),
        "generation_s_per_rollout": statistics.fmean(gen_per_rollout),
        "straggler_wait_s_mean": statistics.fmean(g.straggler_wait_s for g in groups),
        "straggler_wait_s_max": max(g.straggler_wait_s for g in groups),
        "straggler_share_of_group_wall": statistics.fmean(
            g.straggler_wait_s / w for g, w in zip(groups, group_wall, strict=True)
        ),
        "groups": float(len(groups)),
    }


def main() -> None:
    """Print the measurements (seconds, rates and shares measured in this run)."""
    overhead = _overhead_per_rollout_s()
    print(f"redis+assembly overhead per rollout: {overhead * 1e3:.3f} ms (constant scorer)")
    run = _pipeline_run()
    gen = run["generation_s_per_rollout"]
    print(f"end to end: {run['rollouts_per_s']:.1f} rollouts/s over {run['groups']:.0f} groups")
    print(f"learner idle share (waiting for groups): {run['learner_idle_share']:.3f}")
    print(
        f"generation wall per rollout: {gen * 1e3:.1f} ms; redis+assembly overhead share: "
        f"{overhead / gen:.4f}"
    )
    print(
        f"straggler wait per group: mean {run['straggler_wait_s_mean'] * 1e3:.1f} ms, max "
        f"{run['straggler_wait_s_max'] * 1e3:.1f} ms, share of group wall "
        f"{run['straggler_share_of_group_wall']:.3f}"
    )


if __name__ == "__main__":
    main()
