"""Shared helpers and fixtures for the model-layer tests (import what a module needs).

- ``write_gguf``: a small but structurally complete GGUF file, for discovery tests;
- ``fast_model_path`` (session): the 0.5B starter assembled under the session's temp dir
  (skips if its packages are not installed);
- ``llama_server`` (session): llama-cpp-python's server (``python -m models.llama_server``, which
  readies the runtime first) on 127.0.0.1, torn down at the end.
"""

from __future__ import annotations

import os
import socket
import struct
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

import httpx
import pytest

from models.starter import STARTER_FAST, ensure_starter, starter_status

# ----------------------------------------------------------------------------- GGUF writer


def _s(text: str) -> bytes:
    raw = text.encode()
    return struct.pack("<Q", len(raw)) + raw


def write_gguf(
    path: Path,
    *,
    arch: str = "llama",
    name: str = "Test Model",
    context_length: int = 4096,
    file_type: int = 15,
    chat_template: bool = True,
    tensor_elements: Sequence[int] = (64, 32),
    truncate_by: int = 0,
    extra_kv: Sequence[tuple[str, int]] = (),
) -> Path:
    """Write a GGUF v3 file with a few metadata keys, a token array and F32 tensors."""
    kv: list[bytes] = [
        _s("general.architecture") + struct.pack("<I", 8) + _s(arch),
        _s("general.name") + struct.pack("<I", 8) + _s(name),
        _s(f"{arch}.context_length") + struct.pack("<I", 4) + struct.pack("<I", context_length),
        _s("general.file_type") + struct.pack("<I", 4) + struct.pack("<I", file_type),
        _s("tokenizer.ggml.tokens")
        + struct.pack("<I", 9)
        + struct.pack("<IQ", 8, 3)
        + b"".join(_s(t) for t in ("<s>", "</s>", "hello")),
        _s("tokenizer.ggml.scores")
        + struct.pack("<I", 9)
        + struct.pack("<IQ", 6, 3)
        + struct.pack("<3f", 0.0, 0.0, -1.0),
    ]
    if chat_template:
        kv.append(_s("tokenizer.chat_template") + struct.pack("<I", 8) + _s("{{ messages }}"))
    for key, value in extra_kv:
        kv.append(_s(key) + struct.pack("<I", 4) + struct.pack("<I", value))
    infos = b""
    offset = 0
    for i, n in enumerate(tensor_elements):
        infos += _s(f"t{i}.weight") + struct.pack("<I", 1) + struct.pack("<Q", n)
        infos += struct.pack("<I", 0) + struct.pack("<Q", offset)  # F32 at offset
        offset += -(-n * 4 // 32) * 32
    header = b"GGUF" + struct.pack("<IQQ", 3, len(tensor_elements), len(kv)) + b"".join(kv)
    header += infos
    header += b"\0" * (-len(header) % 32)
    data = b"\x01" * offset
    blob = header + data
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(blob[: len(blob) - truncate_by] if truncate_by else blob)
    return path


# ----------------------------------------------------------------------------- real models


@pytest.fixture(scope="session")
def fast_model_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The 0.5B starter GGUF, assembled and verified once per session under the temp dir."""
    cache = tmp_path_factory.getbasetemp() / "models-cache"
    status = starter_status(STARTER_FAST, cache)
    if not status.installed:
        pytest.skip(
            f"0.5B starter model not installed ({status.problem}); "
            f"install with: {STARTER_FAST.install_command}"
        )
    return ensure_starter(STARTER_FAST, cache)


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@pytest.fixture(scope="session")
def llama_server(fast_model_path: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """Base URL (``http://127.0.0.1:PORT/v1``) of llama-cpp-python's server on the 0.5B model."""
    pytest.importorskip("llama_cpp.server", reason="llama-cpp-python[server] is not installed")
    port = free_port()
    log_path = tmp_path_factory.getbasetemp() / "llama_server.log"
    cmd = [
        sys.executable, "-m", "models.llama_server",
        "--model", str(fast_model_path),
        "--model_alias", "fast",
        "--host", "127.0.0.1",
        "--port", str(port),
        "--n_ctx", "2048",
        "--n_threads", "2",
        "--n_threads_batch", "2",
        "--verbose", "False",
    ]  # fmt: skip
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    with log_path.open("wb") as log:
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env)
    base_url = f"http://127.0.0.1:{port}/v1"
    try:
        deadline = time.monotonic() + 120
        while True:
            if proc.poll() is not None:
                pytest.fail(f"llama_cpp.server exited early:\n{log_path.read_text()[-3000:]}")
            try:
                if httpx.get(f"{base_url}/models", timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline:
                pytest.fail(f"llama_cpp.server did not start:\n{log_path.read_text()[-3000:]}")
            time.sleep(0.3)
        yield base_url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)
