"""``LearnerServiceSettings``: everything ``grpo serve learner`` reads (YAML < env < flags)."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from grpo.learner.config import LearnerAlgoConfig, LoraConfig, TrainerConfig
from grpo.learner.tracking import TrackingConfig
from grpo.services.runtime.redis_server import check_block_below_reply
from grpo.services.runtime.server import ServerSettings

__all__ = ["LearnerServiceSettings"]


class LearnerServiceSettings(BaseModel):
    """The learner service: model, data source, batch size, cadences, run dir, parallelism."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    server: ServerSettings = Field(
        default_factory=ServerSettings,
        description="gRPC server (GetStatus, SaveCheckpoint, SetPaused).",
    )
    model_path: Path = Field(
        ..., description="save_pretrained folder (model + tokenizer) of the initial policy."
    )
    run_dir: Path = Field(
        default=Path("runs/learner"),
        description="Run directory: checkpoints/, weights/v<N>/, metrics.jsonl, groups.jsonl.",
    )
    redis_url: str | None = Field(
        default=None, description="Redis URL; None = $REDIS_URL (required one way or the other)."
    )
    namespace: str = Field(default="grpo", description="Stream namespace (StreamNames).")
    consumer_group: str = Field(
        default="learner", description="Consumer group on the groups stream."
    )
    consumer: str = Field(default="learner-0", description="Consumer name inside the group.")
    batch_groups: int = Field(default=8, ge=1, description="Groups per learner step (B).")
    publish_every: int = Field(default=1, ge=1, description="Publish weights every K steps.")
    checkpoint_every: int = Field(
        default=5,
        ge=1,
        description="Checkpoint every M steps; groups are acknowledged only when a checkpoint "
        "recording them is durable.",
    )
    keep_checkpoints: int = Field(default=3, ge=1, description="Checkpoints kept (most recent).")
    keep_weights: int = Field(
        default=5,
        ge=1,
        description="Published weight folders kept (generation may still be loading an older one).",
    )
    max_steps: int = Field(
        default=0, ge=0, description="Stop consuming after this step; 0 = never."
    )
    block_ms: int = Field(
        default=500, ge=1, description="Longest wait for new groups per read (milliseconds)."
    )
    redis_outage_s: float = Field(
        default=120.0,
        gt=0,
        description="Longest Redis outage ridden out (reconnecting with backoff) before the "
        "learner reports dead and is restarted from its checkpoint (seconds).",
    )
    assembler_address: str = Field(
        default="",
        description="host:port of the Assembler whose GetStats counters join each metrics line "
        "(assembler/*); '' = none.",
    )
    torch_threads: int = Field(default=1, ge=1, description="torch intra-op threads per process.")
    dtype: Literal["float32", "bfloat16", "float64"] = Field(
        default="float32",
        description="Parameter dtype of π_θ (and π_ref), and of its gradients and AdamW state. "
        "bfloat16 trains bf16 weights; for mixed precision keep float32 master weights and set "
        "trainer.autocast: bfloat16.",
    )
    lora: LoraConfig | None = Field(
        default=None,
        description="LoRA adapters on π_θ (peft): only they train and are checkpointed; "
        "published weights are merged; π_ref is the base with adapters disabled. null = "
        "full fine-tuning.",
    )
    world_size: int = Field(
        default=1, ge=1, description="Data-parallel processes (rank 0 = this process; gloo on CPU)."
    )
    dist_init: str = Field(
        default="",
        description="torch.distributed rendezvous URL; '' = a file under run_dir.",
    )
    dist_timeout_s: float = Field(
        default=300.0,
        gt=0,
        description="world_size > 1: the longest wait of the rendezvous and of any collective "
        "(seconds). A rank that hears nothing from a peer for this long (a lost node, a hung "
        "process) fails and exits non-zero, and the world restarts from the last checkpoint; a "
        "rank whose process died is noticed at once. Must exceed rank 0's longest pause between "
        "collectives: a checkpoint write, a weight publish, a Redis outage ridden out "
        "(redis_outage_s).",
    )
    dist_heartbeat_s: float = Field(
        default=5.0,
        gt=0,
        description="world_size > 1: rank 0 sends the other ranks a heartbeat after this long "
        "without a batch for them (seconds), so an idle world notices a dead rank within it "
        "and a healthy idle rank 0 never leaves them waiting for dist_timeout_s.",
    )
    fsdp: bool = Field(
        default=False,
        description="Shard the model with FSDP2 (fully_shard; NCCL on GPUs, gloo on CPU); "
        "checkpoints and published weights are gathered in full on rank 0.",
    )
    logging: TrackingConfig = Field(
        default_factory=TrackingConfig,
        description="Tracking sinks fed each metrics.jsonl line (TensorBoard by default; W&B, "
        "MLflow) by rank 0.",
    )
    trainer: TrainerConfig = Field(
        default_factory=lambda: TrainerConfig(),
        description="Optimizer, schedule, micro-batches, device.",
    )
    algo: LearnerAlgoConfig = Field(
        default_factory=LearnerAlgoConfig,
        description="Advantages, clipping, reduction, KL, process credit, TIS.",
    )

    @model_validator(mode="after")
    def _check(self) -> LearnerServiceSettings:
        check_block_below_reply(self.block_ms, self.server.redis_reply_timeout_s, "block_ms")
        if self.fsdp and self.world_size < 2:
            raise ValueError("fsdp: true needs world_size >= 2")
        if self.lora is not None and self.fsdp:
            raise ValueError("lora with fsdp is not supported (adapters are not sharded)")
        if self.lora is not None and self.algo.estimator == "gae":
            raise ValueError(
                "lora with estimator gae is not supported (the critic copies the full policy)"
            )
        if self.trainer.autocast != "off" and self.dtype != "float32":
            raise ValueError(
                f"trainer.autocast: {self.trainer.autocast} keeps float32 master weights: set "
                f"dtype: float32 (got {self.dtype}), or autocast: off to train {self.dtype} "
                "weights"
            )
        if self.world_size > 1 and self.dist_heartbeat_s >= self.dist_timeout_s:
            raise ValueError(
                f"dist_heartbeat_s ({self.dist_heartbeat_s}) must be below dist_timeout_s "
                f"({self.dist_timeout_s}): followers wait at most dist_timeout_s for rank 0"
            )
        if self.world_size > 1 and self.dist_timeout_s <= self.redis_outage_s:
            raise ValueError(
                f"dist_timeout_s ({self.dist_timeout_s}) must exceed redis_outage_s "
                f"({self.redis_outage_s}): rank 0 sends no heartbeat while it rides out a "
                "Redis outage"
            )
        return self
