"""Shaping rewards to combine with a correctness verifier (several rewards per task):
a format check (``FormatVerifier``) and a length measure for a length penalty
(``LengthVerifier``). Served as ``grpo serve verifier-format`` / ``verifier-length``."""

from grpo.verifiers.shaping.verifier import (
    FormatConfig,
    FormatVerifier,
    LengthConfig,
    LengthVerifier,
)

__all__ = ["FormatConfig", "FormatVerifier", "LengthConfig", "LengthVerifier"]
