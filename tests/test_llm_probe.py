"""The local runtime probe: a llama.cpp build that kills its process is caught in a child.

The crashing children here kill themselves with SIGILL on purpose, as a build using
instructions the CPU refuses does; the last test probes the real runtime with the real 0.5B.
"""

from __future__ import annotations

import functools
import json
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from llm_fixtures import fast_model_path, write_gguf  # noqa: F401 - fixture
from research_fixtures import models, plan

import models.probe as probe_mod
from core.cli import main
from core.service import Sourcebook
from models import cpu_backend
from models.errors import ModelBackendError
from models.llamacpp import LlamaCppLLM
from models.llm import ChatMessage
from models.probe import RuntimeCrashed, check_runtime, probe, run_probe
from models.scripted import ScriptedLLM

CRASH = [sys.executable, "-c", "import os, signal; os.kill(os.getpid(), signal.SIGILL)"]


def counting_child(marker: Path) -> list[str]:
    """A child that succeeds and leaves one line in ``marker`` per run."""
    code = f"open({str(marker)!r}, 'a').write('run\\n')"
    return [sys.executable, "-c", code]


@pytest.fixture(autouse=True)
def _forget_results() -> Iterator[None]:
    probe_mod._memory.clear()
    yield
    probe_mod._memory.clear()


def test_a_child_killed_by_an_instruction_is_reported_in_words(tmp_path: Path) -> None:
    model = write_gguf(tmp_path / "m.gguf")
    result = run_probe(model, command=CRASH)
    assert not result.ok and result.crashed
    assert "SIGILL (illegal instruction)" in result.detail
    with pytest.raises(RuntimeCrashed) as err:
        check_runtime(model, command=CRASH)
    text = str(err.value)
    assert "crashed" in text and "m.gguf" in text
    assert "CPU instructions" in text and "make rebuild-llama" in text
    assert "OpenAI-compatible server" in text  # what still works meanwhile


def test_a_child_killed_from_outside_is_not_a_crash_of_the_runtime(tmp_path: Path) -> None:
    """SIGKILL (the out-of-memory killer, a user) says nothing lasting about the build: it is
    not reported as the runtime's crash and not remembered."""
    model = write_gguf(tmp_path / "m.gguf")
    killed = [sys.executable, "-c", "import os, signal; os.kill(os.getpid(), signal.SIGKILL)"]
    result = probe(model, cache_dir=tmp_path / "cache", command=killed)
    assert not result.ok and not result.crashed and "SIGKILL" in result.detail
    assert not (tmp_path / "cache" / probe_mod.CACHE_FILE).exists()
    check_runtime(model, command=killed)  # no raise: the in-process load has its say


def test_a_python_error_in_the_child_is_not_called_a_crash(tmp_path: Path) -> None:
    model = write_gguf(tmp_path / "m.gguf")
    result = run_probe(model, command=[sys.executable, "-c", "raise SystemExit('bad file')"])
    assert not result.ok and not result.crashed and result.detail == "bad file"
    check_runtime(model, command=[sys.executable, "-c", "raise SystemExit(3)"])  # no raise


def test_a_result_is_kept_per_runtime_build(tmp_path: Path, monkeypatch: Any) -> None:
    model = write_gguf(tmp_path / "m.gguf")
    marker = tmp_path / "runs.txt"
    cache = tmp_path / "cache"
    first = probe(model, cache_dir=cache, command=counting_child(marker))
    again = probe(model, cache_dir=cache, command=counting_child(marker))
    assert first.ok and not first.cached and again.cached
    probe_mod._memory.clear()  # a new process: the result comes from the cache folder
    assert probe(model, cache_dir=cache, command=counting_child(marker)).cached
    assert marker.read_text().count("run") == 1
    monkeypatch.setattr(probe_mod, "runtime_fingerprint", lambda: "another-build")
    assert not probe(model, cache_dir=cache, command=counting_child(marker)).cached
    assert marker.read_text().count("run") == 2
    assert probe(model, cache_dir=cache, command=counting_child(marker), force=True).ok
    assert marker.read_text().count("run") == 3


def test_a_crashing_runtime_leaves_the_app_usable(
    tmp_path: Path,
    embedder: Any,
    fast_model_path: Path,  # noqa: F811
) -> None:
    crashing = LlamaCppLLM(
        fast_model_path, n_ctx=2048, probe=functools.partial(check_runtime, command=CRASH)
    )
    try:
        with pytest.raises(ModelBackendError, match="crashed"):
            crashing.chat([ChatMessage(role="user", content="Hello")], max_tokens=1)
        assert not crashing.loaded  # never loaded in this process
        app = Sourcebook(tmp_path / "home", embedder=embedder)
        try:
            pdf = tmp_path / "note.pdf"
            import pymupdf

            doc = pymupdf.open()
            doc.new_page().insert_text((72, 72), "The lighthouse keeper logged 41 storms.")
            doc.save(pdf)
            doc.close()
            assert not app.add([pdf]).failed
            q = "How many storms did the lighthouse keeper log?"
            report = app.research(
                q,
                models=models(ScriptedLLM([plan(("q1", q, []))]), crashing, crashing),
                task="crash",
            )
            assert any("crashed" in r and "rebuild" in r for r in report.status_reasons)
            hits = app.search("lighthouse storms", k=3)  # the library still answers
            assert hits and "41 storms" in hits[0].snippet
        finally:
            app.close()
    finally:
        crashing.close()


def test_cli_models_says_when_the_runtime_crashes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: Any
) -> None:
    folder = tmp_path / "ggufs"
    write_gguf(folder / "tiny-model.gguf")
    # the results of this pretend crash go to a cache of this test's own, not the shared one
    monkeypatch.setenv("SOURCEBOOK_MODELS_DIR", str(tmp_path / "models-cache"))
    monkeypatch.setattr(probe_mod, "probe_command", lambda _path, _variant=None: CRASH)
    code = main(["--home", str(tmp_path / "home"), "models", "--path", str(folder), "--probe"])
    out = capsys.readouterr().out
    assert code == 0  # the list is still printed
    assert "CRASHED" in out and "SIGILL" in out and "make rebuild-llama" in out
    assert (tmp_path / "models-cache" / probe_mod.CACHE_FILE).exists()  # its own cache only


def _fake_variants(tmp_path: Path, monkeypatch: Any, crashing: set[str]) -> list[tuple[str, Path]]:
    """Three CPU variant files, ranked fancy > plain > basic; the ``crashing`` ones' children
    kill themselves, as a variant using instructions the CPU refuses does. Returns the list
    that :func:`cpu_backend.load_variant` was asked to load."""
    libs = {n: tmp_path / f"libggml-cpu-{n}.so" for n in ("fancy", "plain", "basic")}
    monkeypatch.setattr(probe_mod.cpu_backend, "variant_libs", lambda: libs)
    scores = json.dumps({"fancy": 30, "plain": 20, "basic": 10, "future": 0})
    monkeypatch.setattr(
        probe_mod, "scores_command", lambda: [sys.executable, "-c", f"print({scores!r})"]
    )
    ok = [sys.executable, "-c", "pass"]

    def command(_model: Path, variant: Path | None = None) -> list[str]:
        name = variant.stem.removeprefix("libggml-cpu-") if variant else ""
        return CRASH if name in crashing else ok

    monkeypatch.setattr(probe_mod, "probe_command", command)
    loaded: list[tuple[str, Path]] = []
    monkeypatch.setattr(probe_mod.cpu_backend, "load_variant", lambda n, p: loaded.append((n, p)))
    return loaded


def test_the_best_cpu_variant_that_survives_is_loaded(tmp_path: Path, monkeypatch: Any) -> None:
    model = write_gguf(tmp_path / "m.gguf")
    loaded = _fake_variants(tmp_path, monkeypatch, crashing={"fancy"})
    result = check_runtime(model)
    assert result.ok and result.variant == "plain"
    assert result.skipped == ["fancy: the process was killed by SIGILL (illegal instruction)"]
    assert loaded == [("plain", tmp_path / "libggml-cpu-plain.so")]
    check_runtime(model)  # remembered: no second round of children, the same variant
    assert loaded[-1][0] == "plain"


def test_a_build_whose_every_variant_crashes_says_so(tmp_path: Path, monkeypatch: Any) -> None:
    model = write_gguf(tmp_path / "m.gguf")
    loaded = _fake_variants(tmp_path, monkeypatch, crashing={"fancy", "plain", "basic"})
    with pytest.raises(RuntimeCrashed, match="every CPU variant crashed") as err:
        check_runtime(model)
    assert "basic: the process was killed by SIGILL" in str(err.value)
    assert loaded == []


@pytest.mark.real_model
def test_the_real_runtime_passes_its_probe(fast_model_path: Path) -> None:  # noqa: F811
    result = probe(fast_model_path, force=True)
    assert result.ok, result.detail
    variants = cpu_backend.variant_libs()
    if variants:  # a build with CPU variants: the chosen one is the build's, and it runs here
        assert result.variant in variants
        check_runtime(fast_model_path)
        assert cpu_backend.loaded_variant() == result.variant
        llm = LlamaCppLLM(fast_model_path, n_ctx=512)
        try:
            assert llm.chat([ChatMessage(role="user", content="Hi")], max_tokens=2).text
        finally:
            llm.close()


@pytest.mark.real_model
def test_a_variant_build_without_a_loaded_variant_says_so(fast_model_path: Path) -> None:  # noqa: F811
    """In a fresh process (this one may have loaded a variant already), a model built without
    the probe on a build with CPU variants fails in words, not as 'failed to load'."""
    code = textwrap.dedent(
        f"""
        from pathlib import Path
        from models.errors import ModelBackendError
        from models.llamacpp import LlamaCppLLM
        from models.llm import ChatMessage
        llm = LlamaCppLLM(Path({str(fast_model_path)!r}), n_ctx=512, probe=None)
        try:
            llm.chat([ChatMessage(role="user", content="Hi")], max_tokens=1)
            print("loaded")
        except ModelBackendError as exc:
            print(exc)
        finally:
            llm.close()
        """
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=300, check=True
    ).stdout
    if cpu_backend.variant_libs():
        assert "ships CPU variants and none is loaded" in out
    else:
        assert "loaded" in out
