"""llama.cpp's CPU variants: which ones a build ships, how ggml ranks them, and loading one.

A build with ``GGML_BACKEND_DL`` and ``GGML_CPU_ALL_VARIANTS`` ships one CPU library per
instruction set (``libggml-cpu-haswell``: AVX2; ``-icelake``, ``-zen4``: AVX-512;
``-sapphirerapids``: AMX; down to ``-x64``) and links none of them in: a process must load one
before it loads a model. ggml's own choice ranks the variants by what ``cpuid`` reports, and a
CPU may report instructions its OS or VM then traps (AMX in some VMs: the AMX variant dies with
SIGILL on its first prompt). So :mod:`models.probe` tries the variants best first in child
processes and this process loads the first that survives. A build with one CPU backend linked
in has no variant files, and none of this applies.

Loading registers the variant in the ggml library that ``libllama`` itself linked (the same file
by its soname; a wheel holds copies, not symlinks, of ``libggml.so``, ``.so.0`` and so on), once
per process: a process cannot switch variants after that.
"""

from __future__ import annotations

import ctypes
import importlib.util
import logging
import re
import sys
import threading
from pathlib import Path

from models.errors import ModelBackendError

_VARIANT = re.compile(r"^(?:lib)?ggml-cpu-(?P<name>[a-z0-9_.]+)\.(?:so|dylib|dll)$")
# the file libllama links, by platform: its soname first
_GGML_NAMES = ("libggml.so.0", "libggml.so", "libggml.0.dylib", "libggml.dylib", "ggml.dll")

_lock = threading.Lock()
_loaded: str | None = None


def _package_dir() -> Path | None:
    spec = importlib.util.find_spec("llama_cpp")
    locations = list(spec.submodule_search_locations or []) if spec is not None else []
    return Path(locations[0]) if locations else None


def library_dir() -> Path | None:
    """``llama_cpp/lib``: where the build's shared libraries are."""
    pkg = _package_dir()
    return pkg / "lib" if pkg is not None else None


def variant_libs() -> dict[str, Path]:
    """The CPU variants the build ships, by name (empty for a build with one CPU backend).

    They are in ``llama_cpp/lib`` when the build installed them there (the Makefile's does), or
    in ``bin/`` beside the package, where llama.cpp's install rules put them by default."""
    pkg = _package_dir()
    if pkg is None:
        return {}
    out: dict[str, Path] = {}
    for folder in (pkg / "lib", pkg.parent / "bin"):
        if folder.is_dir():
            for path in sorted(folder.iterdir()):
                m = _VARIANT.match(path.name)
                if m and m.group("name") not in out:
                    out[m.group("name")] = path
    return out


def variant_scores(libs: dict[str, Path]) -> dict[str, int]:
    """ggml's score of each variant on this CPU (0: it needs an instruction cpuid does not
    report). Opening a variant runs no vector code, but the probe still asks a child."""
    if libs:
        _ggml()  # the variants link ggml's base library by soname: it must be loaded first
    scores: dict[str, int] = {}
    for name, path in libs.items():
        try:
            lib = ctypes.CDLL(str(path))
            lib.ggml_backend_score.restype = ctypes.c_int
            scores[name] = int(lib.ggml_backend_score())
        except (OSError, AttributeError):
            scores[name] = 0
    return scores


def _ggml() -> ctypes.CDLL:
    import llama_cpp  # noqa: F401 - loads libllama and, through it, the ggml library it links

    folder = library_dir()
    for name in _GGML_NAMES:
        if folder is not None and (folder / name).is_file():
            return ctypes.CDLL(str(folder / name))
    raise ModelBackendError(f"llama.cpp's ggml library is not in {folder}.")


def load_variant(name: str, path: Path) -> None:
    """Register CPU variant ``name`` (file ``path``) in this process, once."""
    global _loaded
    with _lock:
        if _loaded == name:
            return
        if _loaded is not None:
            raise ModelBackendError(
                f"This process already runs llama.cpp's {_loaded} CPU variant; it cannot switch "
                f"to {name}."
            )
        ggml = _ggml()
        # ggml reports the load at INFO through llama-cpp-python's log callback, which prints
        # unless its logger is set (as Llama(verbose=False) later sets it anyway)
        native = logging.getLogger("llama-cpp-python")
        if native.level == logging.NOTSET:
            native.setLevel(logging.ERROR)
        ggml.ggml_backend_load.restype = ctypes.c_void_p
        ggml.ggml_backend_load.argtypes = [ctypes.c_char_p]
        if not ggml.ggml_backend_load(str(path).encode(sys.getfilesystemencoding())):
            raise ModelBackendError(f"llama.cpp could not load its CPU variant {path}.")
        _loaded = name


def loaded_variant() -> str | None:
    return _loaded
