"""Evaluation with verifiers: scoring files of responses (``grpo score``) and generating then
scoring samples of a policy (``grpo eval``, and ``grpo run``'s held-out evaluation).

Plain classes and pure functions, one module per concept; the CLI commands are thin on top:

- ``inputs``: JSONL lines -> tasks (field map, required fields, bad lines);
- ``results``: the append-only, resumable JSONL results file;
- ``batching``: requests split by item count and size;
- ``scorers``: a verifier in process or over gRPC, retries, the ``Describe`` check;
- ``scoring``: the scoring loop, output rows and their summary;
- ``metrics``: pass@k (Chen et al. 2021), maj@k, per-field breakdowns;
- ``sampling``: generating samples with the in-process backend or a generation service;
- ``evaluate``: the eval loop (generate, score, write, summarise);
- ``score_file``: one ``grpo score`` run (a frozen ``ScoreJob``);
- ``eval_job``: one ``grpo eval`` run (a frozen ``EvalJob``; the token budget fitted to the
  model).
"""
