"""Settings -> models: role resolution with fallbacks, prefixes and shared instances."""

from __future__ import annotations

import pytest

from core.errors import ModelError
from core.llms import build_roles
from core.settings import ModelSettings, RoleModels


@pytest.mark.usefixtures("fast_model_path")
def test_roles_fall_back_to_the_default_and_share_one_instance() -> None:
    settings = ModelSettings(default="qwen2.5-coder-0.5b")
    roles = build_roles(settings)
    assert set(roles) == {"router", "planner", "researcher", "writer"}
    assert len({id(m) for m in roles.values()}) == 1  # one load for all roles
    assert roles["writer"].name == "qwen2.5-coder-0.5b-instruct-q4_k_m"
    # kept model states: 1 GB by default, as the settings say (not loaded here)
    assert roles["writer"]._prompt_cache_bytes == 1024 << 20  # type: ignore[attr-defined]
    off = build_roles(ModelSettings(default="qwen2.5-coder-0.5b", prompt_cache_mb=0))
    assert off["writer"]._prompt_cache_bytes == 0  # type: ignore[attr-defined]
    # flash attention: off by default, on when the settings say so
    assert roles["writer"]._flash_attention is False  # type: ignore[attr-defined]
    flash = build_roles(ModelSettings(default="qwen2.5-coder-0.5b", flash_attention=True))
    assert flash["writer"]._flash_attention is True  # type: ignore[attr-defined]


@pytest.mark.usefixtures("fast_model_path")
def test_model_option_and_role_override() -> None:
    settings = ModelSettings(roles=RoleModels(writer="no-such-model"))
    with pytest.raises(ModelError, match="no-such-model"):
        build_roles(settings)
    roles = build_roles(settings, default="qwen2.5-coder-0.5b")
    assert roles["writer"].name.startswith("qwen2.5-coder-0.5b")
    with pytest.raises(ModelError):
        build_roles(settings, default="qwen", overrides={})  # ambiguous prefix
