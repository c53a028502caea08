"""Sandboxed code verifier: HumanEval / MBPP / stdin-stdout tests run in bubblewrap.

- :class:`CodeVerifier` / :class:`CodeConfig` — the verifier (``verifier``).
- :class:`Sandbox` / :class:`SandboxSettings` — the bwrap harness and its threat model
  (``sandbox``).
- :func:`extract_program` — the program in a response (``extract``).
- :func:`suite_from_tests` — test formats and record/replay (``tests_format``).
- ``interpreter`` / ``processes`` — the interpreter mirror; subreaper and per-uid sweep.
- ``codec`` — the strict typed codec for values crossing the sandbox boundary.
- ``driver`` — runs inside the sandbox (never imported by the service).
"""

from grpo.verifiers.code.extract import extract_program
from grpo.verifiers.code.sandbox import Sandbox, SandboxSettings
from grpo.verifiers.code.tests_format import suite_from_tests
from grpo.verifiers.code.verifier import CodeConfig, CodeVerifier

__all__ = [
    "CodeConfig",
    "CodeVerifier",
    "Sandbox",
    "SandboxSettings",
    "extract_program",
    "suite_from_tests",
]
