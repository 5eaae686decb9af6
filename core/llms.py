"""From settings to language models: discovery and one `LLM` per research role.

`models/` knows nothing of settings; this module maps `ModelSettings` onto its discovery and
registry. The app object owns what :func:`build_roles` returns and closes each distinct model.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from pydantic import SecretStr

from core.errors import translate_errors
from core.settings import ModelSettings, models_cache_dir
from models.discovery import ModelEntry, discover_models
from models.llm import LLM
from models.openai_compat import EndpointConfig
from models.probe import ProbeResult, probe
from models.registry import ROLES, BackendOptions, build_role_models, builtin_backends


def endpoint_configs(settings: ModelSettings) -> list[EndpointConfig]:
    return [
        EndpointConfig(
            name=e.name,
            base_url=e.base_url,
            model=e.model,
            api_key=SecretStr(e.api_key) if e.api_key else None,
            api_key_env=e.api_key_env,
            context_size=e.context_size,
            timeout_s=e.timeout_s,
        )
        for e in settings.endpoints
    ]


def list_models(settings: ModelSettings, extra_paths: Sequence[Path] = ()) -> list[ModelEntry]:
    """Every model Sourcebook can use: starters, user folders, local stores, endpoints."""
    with translate_errors():
        return discover_models(
            models_cache_dir=models_cache_dir(),
            search_paths=[*settings.search_paths, *extra_paths],
            endpoints=endpoint_configs(settings),
        )


def build_roles(
    settings: ModelSettings,
    *,
    default: str | None = None,
    overrides: Mapping[str, str] | None = None,
) -> dict[str, LLM]:
    """One `LLM` per role (router, planner, researcher, writer); shared where names agree.

    ``default`` replaces the settings' default for every role without its own model (the CLI's
    ``--model``); ``overrides`` names a model for single roles (``--model-writer``).
    """
    roles: dict[str, str | None] = {r: getattr(settings.roles, r) for r in ROLES}
    if default:
        roles = dict.fromkeys(ROLES, default)
    roles.update({k: v for k, v in (overrides or {}).items() if v})
    with translate_errors():
        entries = list_models(settings)
        return build_role_models(
            roles,
            default or settings.default,
            entries,
            builtin_backends(),
            BackendOptions(
                threads=settings.threads,
                context_size=settings.context_size,
                models_cache_dir=models_cache_dir(),
                prompt_cache_mb=settings.prompt_cache_mb,
                prompt_lookup_tokens=settings.prompt_lookup_tokens,
                flash_attention=settings.flash_attention,
            ),
        )


def probe_local_runtime(
    entries: Sequence[ModelEntry], default: str = "", *, force: bool = False
) -> tuple[ModelEntry, ProbeResult] | None:
    """Whether llama.cpp runs here: the one-token child probe of a local GGUF that is on disk
    (the default model if it is, else the smallest: any working model file tests the runtime).
    None when no local GGUF file is on disk yet (a starter is assembled on its first use, and
    probed then)."""
    local = [
        e
        for e in entries
        if e.backend == "llamacpp" and e.available and e.path is not None and e.path.is_file()
    ]
    if not local:
        return None
    entry = min(local, key=lambda e: (e.name != default, e.starter is None, e.size_bytes or 0))
    assert entry.path is not None
    return entry, probe(entry.path, cache_dir=models_cache_dir(), force=force)
