"""From a model name to a working ``LLM``: name resolution and the backend registry.

Backends register a factory under a key (``llamacpp``, ``openai``, ``scripted``); the built-in
ones go through the same :meth:`BackendRegistry.register` call a plugin or a test would use.
Names are the discovery entries' names; an exact name wins, otherwise any unique prefix selects
one (``qwen2.5-coder-0.5b`` picks ``qwen2.5-coder-0.5b-instruct-q4_k_m``).
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from pydantic import BaseModel, Field

from models.discovery import ModelEntry, find_starter_spec
from models.errors import ModelFileError, ModelNotFound
from models.llm import LLM
from models.scripted import ScriptedLLM

logger = logging.getLogger(__name__)

ROLES = ("router", "planner", "researcher", "writer")


class BackendOptions(BaseModel):
    """Settings a backend factory may need (``core`` fills them from its settings)."""

    threads: int = Field(default=2, ge=1)
    context_size: int = Field(default=8192, ge=512)
    models_cache_dir: Path | None = Field(default=None, description="Where starters are assembled.")
    prompt_cache_mb: int = Field(
        default=0, ge=0, description="llama.cpp: memory for kept model states (0: none)."
    )
    prompt_lookup_tokens: int = Field(
        default=0, ge=0, le=16, description="llama.cpp: prompt-lookup draft length (0: off)."
    )
    flash_attention: bool = Field(default=False, description="llama.cpp: flash attention.")
    verbose: bool = False


BackendFactory = Callable[[ModelEntry, BackendOptions], LLM]


class BackendRegistry:
    """Backend key -> factory. Build one with :func:`builtin_backends` and add to it.

    Threading: register everything at start-up; ``create`` may then be called from any thread.
    """

    def __init__(self) -> None:
        self._factories: dict[str, BackendFactory] = {}

    def register(self, backend: str, factory: BackendFactory) -> None:
        if backend in self._factories:
            raise ValueError(f"Backend {backend!r} is already registered.")
        self._factories[backend] = factory

    @property
    def backends(self) -> list[str]:
        return sorted(self._factories)

    def create(self, entry: ModelEntry, options: BackendOptions | None = None) -> LLM:
        if entry.error is not None or not entry.available:
            how = f" Install it with: {entry.install_command}" if entry.install_command else ""
            raise ModelFileError(
                f"Model {entry.name} cannot be used: {entry.error or 'not installed'}.{how}"
            )
        factory = self._factories.get(entry.backend)
        if factory is None:
            raise ModelNotFound(
                f"Model {entry.name} needs backend {entry.backend!r}, which is not registered "
                f"(registered: {', '.join(self.backends)})."
            )
        return factory(entry, options or BackendOptions())


def _llamacpp_factory(entry: ModelEntry, options: BackendOptions) -> LLM:
    from models.llamacpp import LlamaCppLLM
    from models.probe import check_runtime
    from models.starter import ensure_starter

    if entry.path is None:
        raise ModelFileError(f"Model {entry.name} has no file.")
    n_ctx = options.context_size
    if entry.context_length:
        n_ctx = min(n_ctx, entry.context_length)
    prepare: Callable[[], Path] | None = None
    spec = find_starter_spec(entry.starter) if entry.starter else None
    if spec is not None:
        cache_dir = options.models_cache_dir or entry.path.parent

        def assemble() -> Path:
            return ensure_starter(spec, cache_dir)

        prepare = assemble

    return LlamaCppLLM(
        entry.path,
        name=entry.name,
        n_threads=options.threads,
        n_ctx=n_ctx,
        prepare=prepare,
        verbose=options.verbose,
        prompt_cache_bytes=options.prompt_cache_mb << 20,
        prompt_lookup_tokens=options.prompt_lookup_tokens,
        flash_attention=options.flash_attention,
        probe=functools.partial(check_runtime, cache_dir=options.models_cache_dir),
    )


def _openai_factory(entry: ModelEntry, options: BackendOptions) -> LLM:
    from models.openai_compat import OpenAICompatibleLLM

    if entry.endpoint is None:
        raise ModelNotFound(f"Model {entry.name} has no endpoint configuration.")
    return OpenAICompatibleLLM.from_config(entry.endpoint)


def _scripted_factory(entry: ModelEntry, options: BackendOptions) -> LLM:
    return ScriptedLLM(name=entry.name, context_size=entry.context_length or 4096)


def builtin_backends() -> BackendRegistry:
    """A registry with the built-in backends: llamacpp, openai and the scripted fake."""
    registry = BackendRegistry()
    registry.register("llamacpp", _llamacpp_factory)
    registry.register("openai", _openai_factory)
    registry.register("scripted", _scripted_factory)
    return registry


def resolve_model(name: str, entries: Sequence[ModelEntry]) -> ModelEntry:
    """The entry called ``name``, or the one whose name starts with it. Case-insensitive.

    An exact match wins (the first, in discovery's precedence order). Otherwise the prefix must
    select exactly one distinct name; ambiguity or no match raises ``ModelNotFound`` listing
    the candidates.
    """
    wanted = name.strip().lower()
    if not wanted:
        raise ModelNotFound("No model name given.")
    exact = [e for e in entries if e.name.lower() == wanted]
    if exact:
        return exact[0]
    matches = [e for e in entries if e.name.lower().startswith(wanted)]
    names = list(dict.fromkeys(e.name for e in matches))
    if len(names) == 1:
        return matches[0]
    if names:
        raise ModelNotFound(
            f"{name!r} matches several models: {', '.join(names)}.",
            hint="Type more of the name to select one.",
        )
    known = ", ".join(dict.fromkeys(e.name for e in entries)) or "none"
    raise ModelNotFound(f"No model called {name!r}. Known models: {known}.")


def resolve_roles(
    roles: Mapping[str, str | None], default: str, entries: Sequence[ModelEntry]
) -> dict[str, ModelEntry]:
    """Each role's entry: its own name if set, else ``default``."""
    return {role: resolve_model(roles.get(role) or default, entries) for role in ROLES}


def build_role_models(
    roles: Mapping[str, str | None],
    default: str,
    entries: Sequence[ModelEntry],
    registry: BackendRegistry,
    options: BackendOptions | None = None,
) -> dict[str, LLM]:
    """One ``LLM`` per role; roles naming the same model share one instance (one load).

    The caller owns the returned models and closes each distinct one.
    """
    built: dict[str, LLM] = {}
    out: dict[str, LLM] = {}
    for role, entry in resolve_roles(roles, default, entries).items():
        key = f"{entry.backend}:{entry.location}"
        if key not in built:
            built[key] = registry.create(entry, options)
        out[role] = built[key]
    return out
