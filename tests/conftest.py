"""Shared fixtures. Every test gets its own Sourcebook home under tmp_path."""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("LANCEDB_LOG", "error")
os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

REPO = Path(__file__).resolve().parent.parent
SHARED_EVAL = REPO.parent / "shared" / "eval"
SAMPLES = REPO / "resources" / "samples"


def bench_module(name: str) -> ModuleType:
    """``bench/NAME.py`` loaded as a module: the bench scripts are files, not a package."""
    spec = importlib.util.spec_from_file_location(name, REPO / "bench" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(autouse=True)
def _fresh_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Point the app's home at a temporary folder: no test reads or writes a user's library."""
    home = tmp_path / "sourcebook-home"
    monkeypatch.setenv("SOURCEBOOK_HOME", str(home))
    for key in list(os.environ):
        if key.startswith("SOURCEBOOK_") and key not in (
            "SOURCEBOOK_HOME",
            "SOURCEBOOK_MODELS_DIR",
        ):
            monkeypatch.delenv(key)
    return home


@pytest.fixture(scope="session")
def embedder() -> Iterator[object]:
    """The real MiniLM embedder (the app's default ONNX runtime), loaded once per session.

    Its exported ONNX file lives in the shared models cache, like the app's: a cache, not a
    user's library.
    """
    from core.settings import models_cache_dir
    from models.embedder import OnnxEmbedder

    yield OnnxEmbedder(models_cache_dir(), threads=2)


@pytest.fixture
def app(_fresh_home: Path, embedder: object) -> Iterator[object]:
    """A Sourcebook application object on a fresh home, sharing the session's embedder."""
    from core.service import Sourcebook

    sb = Sourcebook(_fresh_home, embedder=embedder)  # type: ignore[arg-type]
    yield sb
    sb.close()


@pytest.fixture
def ops(qtbot: Any) -> Iterator[Any]:
    """The desktop's operations helper; every operation is cancelled and awaited at teardown.

    Qt is imported here, not at the top, so the non-desktop tests never load it."""
    from desktop.app import shutdown_operations
    from desktop.operations import Operations

    operations = Operations()
    yield operations
    assert shutdown_operations(operations, 60_000)  # destroyed now, on the UI thread


@pytest.fixture
def errors(monkeypatch: pytest.MonkeyPatch) -> list[BaseException]:
    """Errors the desktop would show in a dialog, captured instead of opening it."""
    import desktop.errors

    shown: list[BaseException] = []
    monkeypatch.setattr(desktop.errors, "error_hook", lambda _parent, exc: shown.append(exc))
    return shown


def shared_eval(*parts: str) -> Path:
    """A path in ../shared/eval, or skip the test cleanly when it is absent."""
    path = SHARED_EVAL.joinpath(*parts)
    if not path.exists():
        pytest.skip(f"evaluation data not present: {path}")
    return path


# The real-model fixtures (the 0.5B starter assembled once, llama_cpp.server on 127.0.0.1),
# shared by every test module that asks for them.
from llm_fixtures import fast_model_path, llama_server  # noqa: E402, F401
