"""Generation: sampling backends (transformers, vLLM), the Generation service, rollout worker.

See ``docs/generation.md``. Backends return completions with behavior log-probs μ, character
offsets, finish reasons and the policy version; the rollout worker turns prompt jobs from Redis
into groups of rollouts.
"""
