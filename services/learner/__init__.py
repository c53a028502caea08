"""The learner service: consumes groups from Redis, trains, checkpoints and publishes weights.

Modules: ``settings`` (``LearnerServiceSettings``), ``loop`` (the consume/train/ack protocol),
``publish`` (weights folders + the policy version key), ``runlog`` (metrics and group JSONL),
``service`` (the gRPC servicer and ``SERVICE`` for ``grpo serve learner``).
"""
