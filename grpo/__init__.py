"""grpo-pipeline: a reward/verifier-centric GRPO training system.

Subpackages: ``grpo.learner`` (torch learner math and trainer, from ``learner/``),
``grpo.verifiers`` (verifier SDK and verifiers, from ``verifiers/``), ``grpo.services``
(gRPC servers and their runtime, from ``services/``), ``grpo.v1`` (generated protobuf stubs).
"""

__version__ = "0.1.0"
