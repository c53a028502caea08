"""The one deep-merge of settings layers (grpo.services.runtime.config.deep_merge)."""

from __future__ import annotations

from grpo.services.runtime.config import deep_merge
from grpo.services.settings import services as service_configs


def test_nested_mappings_merge_and_other_values_replace() -> None:
    base = {"server": {"host": "127.0.0.1", "port": 1}, "routes": [1, 2], "x": 1}
    update = {"server": {"port": 2}, "routes": [3], "verifier": {"pool": {"workers": 1}}}
    merged = deep_merge(base, update)
    assert merged == {
        "server": {"host": "127.0.0.1", "port": 2},
        "routes": [3],
        "x": 1,
        "verifier": {"pool": {"workers": 1}},
    }
    assert base == {"server": {"host": "127.0.0.1", "port": 1}, "routes": [1, 2], "x": 1}
    merged["verifier"]["pool"]["workers"] = 9
    assert update["verifier"] == {"pool": {"workers": 1}}  # no aliasing into the inputs


def test_grpo_run_service_configs_use_the_same_merge() -> None:
    assert service_configs.deep_merge is deep_merge
    assert not hasattr(service_configs, "_merge")
