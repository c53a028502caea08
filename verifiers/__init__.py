"""Verifier SDK and the built-in verifiers (math outcome, math steps, sandboxed code)."""
