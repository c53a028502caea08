"""The name registry: duplicates raise, unknown names list the valid ones."""

from __future__ import annotations

import pytest

from grpo.learner.losses import REDUCTIONS
from grpo.learner.registry import Registry


def test_registry_rejects_duplicates_and_lists_valid_names():
    reg: Registry = Registry("widget")
    reg.register("b")(len)
    reg.register("a")(abs)
    assert reg.names() == ("a", "b") and "a" in reg and list(reg) == ["a", "b"]
    assert reg.get("a") is abs
    with pytest.raises(ValueError, match="widget 'a' is already registered"):
        reg.register("a")(len)
    with pytest.raises(ValueError, match="unknown widget 'c'; valid: a, b"):
        reg.get("c")
    with pytest.raises(ValueError, match="already registered"):
        REDUCTIONS.register("token_mean")(len)
