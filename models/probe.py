"""Does the local llama.cpp runtime work on this CPU? One generated token, in a child process.

A llama.cpp library compiled for instructions this CPU does not have, or has but may not use
(some VMs report Intel AMX and trap on it), kills the whole process (SIGILL, or SIGSEGV for a
general protection fault) the moment a matrix product runs: no Python ``except`` sees it, and
an app that loads the model in-process just disappears. So before the first in-process load, a
child process loads the same GGUF, reads a short prompt and generates one token. If the child
dies, the user is told in words what happened and how to rebuild, and the app goes on without
the local model (library, search, viewer, remote endpoints all still work).

A result holds for one runtime build on one CPU: it is kept in memory for the process and, when
a cache folder is given, on disk, keyed by the llama.cpp library files and the CPU's flags, so a
rebuild or another machine probes again. Run as ``python -m models.probe MODEL.gguf`` it is the
child.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import logging
import os
import platform
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path

from pydantic import BaseModel, Field

from models import cpu_backend
from models.errors import ModelBackendError

logger = logging.getLogger(__name__)

PROBE_TIMEOUT_S = 180.0
CACHE_FILE = "llamacpp-probe.json"
REBUILD_COMMAND = "make rebuild-llama"


class RuntimeCrashed(ModelBackendError):
    """The llama.cpp runtime killed a child process that only generated one token."""

    default_hint = (
        "The likely cause is a llama-cpp-python build that uses CPU instructions this machine "
        f"does not allow. Rebuild it for a portable instruction set with `{REBUILD_COMMAND}` "
        "in the Sourcebook folder (`sourcebook models --probe` tests again). Until then the "
        "library, search and the viewer work, and an OpenAI-compatible server can serve the "
        "models (Settings, Models)."
    )


class ProbeResult(BaseModel):
    """What the one-token child run did. ``crashed``: killed by a signal (not a Python error).

    For a build with CPU variants, ``variant`` is the one that passed (the one to load) and
    ``skipped`` says which better-ranked ones crashed and how."""

    ok: bool
    crashed: bool = False
    model: str
    seconds: float
    detail: str = ""
    cached: bool = False
    variant: str = ""
    skipped: list[str] = Field(default_factory=list)


_memory: dict[str, ProbeResult] = {}
_lock = threading.Lock()


# Signals a build's own code raises (an instruction the CPU refuses, a bad access); a child
# killed from outside (SIGKILL from the out-of-memory killer, SIGTERM) says nothing about it.
_FAULTS = frozenset(
    s.value for s in (signal.SIGILL, signal.SIGSEGV, signal.SIGBUS, signal.SIGFPE, signal.SIGABRT)
)


def _signal_name(returncode: int) -> str:
    try:
        sig = signal.Signals(-returncode)
    except ValueError:
        return f"signal {-returncode}"
    described = {
        signal.SIGILL: "illegal instruction",
        signal.SIGSEGV: "segmentation fault",
        signal.SIGBUS: "bus error",
        signal.SIGABRT: "aborted",
    }.get(sig)
    return f"{sig.name} ({described})" if described else sig.name


def runtime_fingerprint() -> str:
    """The llama.cpp build (its library files) and this CPU, as one short hash."""
    h = hashlib.sha256()
    spec = importlib.util.find_spec("llama_cpp")
    roots = list(spec.submodule_search_locations or []) if spec is not None else []
    for root in roots:
        for lib in sorted(Path(root).glob("lib/*")):
            st = lib.stat()
            h.update(f"{lib.name}:{st.st_size}:{st.st_mtime_ns}\n".encode())
    h.update(platform.machine().encode())
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            flags = next((line for line in f if line.startswith("flags")), "")
        h.update(flags.encode())
    except OSError:
        h.update(platform.processor().encode())
    h.update(sys.executable.encode())
    return h.hexdigest()[:16]


CHILD_FLAG = "--llama-probe-child"
"""A packaged app's binary runs the child when its first argument is this (core.frozen)."""


def is_frozen() -> bool:
    """True in a packaged app (PyInstaller), whose ``sys.executable`` is the app itself."""
    return bool(getattr(sys, "frozen", False))


def _child_prefix() -> list[str]:
    if is_frozen():
        exe = Path(sys.executable)
        # a Windows bundle's windowed twin has no standard streams: its console binary does
        console = exe.with_name("sourcebook.exe")
        if sys.platform == "win32" and console.is_file():
            exe = console
        return [str(exe), CHILD_FLAG]
    return [sys.executable, "-m", "models.probe"]


def probe_command(model_path: Path, variant: Path | None = None) -> list[str]:
    """The child's command line: this interpreter running this module on ``model_path`` (with
    CPU variant ``variant`` loaded first, for a build with variants); in a packaged app, the
    app's binary with :data:`CHILD_FLAG`."""
    cmd = [*_child_prefix(), str(model_path)]
    return [*cmd, "--variant", str(variant)] if variant is not None else cmd


def scores_command() -> list[str]:
    """A child printing ggml's score of each CPU variant on this CPU, as JSON."""
    return [*_child_prefix(), "--scores"]


def _child_env() -> dict[str, str]:
    if is_frozen():  # the bundle finds its own modules; a PYTHONPATH could only mislead it
        return {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    # the child imports what this process imports (a llama_cpp from another folder, say)
    return {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}


def _key(model_path: Path) -> str:
    try:
        size = model_path.stat().st_size
    except OSError:
        size = -1
    return f"{runtime_fingerprint()}:{model_path.resolve()}:{size}"


def _load_cache(cache_dir: Path | None) -> dict[str, ProbeResult]:
    if cache_dir is None:
        return {}
    try:
        raw = json.loads((cache_dir / CACHE_FILE).read_text(encoding="utf-8"))
        return {k: ProbeResult.model_validate(v) for k, v in raw.items()}
    except (OSError, ValueError):
        return {}


def _save_cache(cache_dir: Path | None, results: dict[str, ProbeResult]) -> None:
    if cache_dir is None:
        return
    try:
        cache_dir.mkdir(parents=True, exist_ok=True)
        tmp = cache_dir / f"{CACHE_FILE}.{os.getpid()}.tmp"
        tmp.write_text(
            json.dumps({k: r.model_dump() for k, r in results.items()}, indent=1), "utf-8"
        )
        tmp.replace(cache_dir / CACHE_FILE)
    except OSError as exc:  # a cache: the next start probes again
        logger.warning("could not save the llama.cpp probe result: %s", exc)


def run_probe(
    model_path: Path,
    *,
    command: Sequence[str] | None = None,
    timeout_s: float = PROBE_TIMEOUT_S,
) -> ProbeResult:
    """Run the child once (no cache) and say what it did."""
    cmd = list(command) if command is not None else probe_command(model_path)
    started = time.monotonic()
    try:
        proc = subprocess.run(
            cmd, capture_output=True, text=True, timeout=timeout_s, env=_child_env(), check=False
        )
    except subprocess.TimeoutExpired:
        return ProbeResult(
            ok=False,
            model=str(model_path),
            seconds=time.monotonic() - started,
            detail=f"the test run did not finish within {timeout_s:.0f} s",
        )
    seconds = time.monotonic() - started
    if proc.returncode == 0:
        return ProbeResult(ok=True, model=str(model_path), seconds=seconds)
    if proc.returncode < 0:
        return ProbeResult(
            ok=False,
            crashed=-proc.returncode in _FAULTS,  # not a kill from outside (SIGKILL: memory)
            model=str(model_path),
            seconds=seconds,
            detail=f"the process was killed by {_signal_name(proc.returncode)}",
        )
    last = (proc.stderr.strip().splitlines() or [f"exit code {proc.returncode}"])[-1]
    return ProbeResult(ok=False, model=str(model_path), seconds=seconds, detail=last[:300])


def probe(
    model_path: Path,
    *,
    cache_dir: Path | None = None,
    command: Sequence[str] | None = None,
    force: bool = False,
) -> ProbeResult:
    """The probe's result for this model on this runtime build, run once and then remembered."""
    key = _key(model_path)
    with _lock:
        if not force:
            if key in _memory:
                return _memory[key].model_copy(update={"cached": True})
            saved = _load_cache(cache_dir).get(key)
            if saved is not None and (saved.ok or saved.crashed):
                _memory[key] = saved
                return saved.model_copy(update={"cached": True})
        result = _probe_variants(model_path, command)
        logger.info(
            "llama.cpp probe of %s: %s%s",
            model_path.name,
            result.detail or "ok",
            f" (CPU variant {result.variant})" if result.variant else "",
        )
        if result.ok or result.crashed:  # a timeout or a Python error says nothing lasting
            _memory[key] = result
            results = _load_cache(cache_dir)
            results[key] = result
            _save_cache(cache_dir, results)
        return result


def ranked_variants(libs: dict[str, Path]) -> list[str]:
    """The build's CPU variants this CPU reports the instructions for, best (ggml's score)
    first; scored in a child, and by name when the child fails."""
    try:
        proc = subprocess.run(
            scores_command(),
            capture_output=True,
            text=True,
            timeout=PROBE_TIMEOUT_S,
            env=_child_env(),
            check=False,
        )
        scores: dict[str, int] = json.loads(proc.stdout) if proc.returncode == 0 else {}
    except (subprocess.TimeoutExpired, ValueError):
        scores = {}
    if not scores:
        logger.warning("could not score llama.cpp's CPU variants; trying them by name")
        return sorted(libs, reverse=True)
    return [n for n in sorted(scores, key=lambda n: -scores[n]) if scores[n] > 0 and n in libs]


def _probe_variants(model_path: Path, command: Sequence[str] | None) -> ProbeResult:
    """One child run; for a build with CPU variants, one per variant, best first, until one
    passes (a variant that crashes is skipped: its instructions are reported, not granted)."""
    libs = cpu_backend.variant_libs()
    if command is not None or not libs:
        return run_probe(model_path, command=command)
    skipped: list[str] = []
    started = time.monotonic()
    result: ProbeResult | None = None
    for name in ranked_variants(libs):
        result = run_probe(model_path, command=probe_command(model_path, libs[name]))
        if not result.crashed:  # it works, or fails as every variant would (the file)
            return result.model_copy(
                update={
                    "variant": name if result.ok else "",
                    "skipped": skipped,
                    "seconds": time.monotonic() - started,
                }
            )
        skipped.append(f"{name}: {result.detail}")
    detail = "every CPU variant crashed (" + "; ".join(skipped) + ")" if skipped else ""
    return ProbeResult(
        ok=False,
        crashed=bool(skipped),
        model=str(model_path),
        seconds=time.monotonic() - started,
        detail=detail or "no CPU variant of this build supports this CPU",
        skipped=skipped,
    )


def check_runtime(
    model_path: Path, *, cache_dir: Path | None = None, command: Sequence[str] | None = None
) -> ProbeResult:
    """Make the runtime ready for ``model_path`` in this process, or raise
    :class:`RuntimeCrashed` if it kills a process reading one prompt.

    For a build with CPU variants, the variant the probe chose is loaded here. Any other
    failure of the child (a timeout, a file llama.cpp refuses) is left to the in-process load,
    which reports it with its own error."""
    result = probe(model_path, cache_dir=cache_dir, command=command)
    if result.crashed:
        raise RuntimeCrashed(
            f"The local model runtime (llama.cpp) crashed while loading {model_path.name} in a "
            f"test run: {result.detail}."
        )
    if result.variant:
        libs = cpu_backend.variant_libs()
        if result.variant in libs:
            cpu_backend.load_variant(result.variant, libs[result.variant])
    return result


# Read as one batch of several dozen tokens, as every real prompt is: a one-token prompt takes
# the matrix-vector kernels only, and a native build on a CPU that traps on AMX survives it
# and then dies on the first real prompt (seen: a "Hello" passed, "word word" crashed).
PROBE_PROMPT = "The probe reads this sentence as one batch, then writes one token. " * 4


def child_main(argv: Sequence[str]) -> int:
    """The child: ``MODEL.gguf [--variant LIB]`` loads the model and writes one token;
    ``--scores`` prints ggml's score of each CPU variant as JSON."""
    if argv[:1] == ["--scores"]:
        print(json.dumps(cpu_backend.variant_scores(cpu_backend.variant_libs())))
        return 0
    model_path = argv[0]
    if argv[1:2] == ["--variant"]:
        variant = Path(argv[2])
        cpu_backend.load_variant(variant.stem, variant)
    from llama_cpp import Llama

    llama = Llama(model_path=model_path, n_ctx=256, n_batch=256, n_threads=2, verbose=False)
    llama.create_completion(PROBE_PROMPT, max_tokens=1, temperature=0.0)
    return 0


if __name__ == "__main__":
    sys.exit(child_main(sys.argv[1:]))
