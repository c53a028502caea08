"""The assembler: rollouts -> verifier scores -> closed groups (Redis state, dynamic sampling)."""
