"""Which files of a folder an add reads, and which it leaves out (and says so).

A folder is walked recursively. Files with a supported extension are read; a file without an
extension (README, LICENSE, NOTES) is read when its first bytes are a PDF or may be text, since
a user who adds a folder expects such a file to be read or to be told about it. Every other file
is returned as skipped, so the caller can name it.

Hidden files and folders (a leading dot: ``.git``, ``.venv``, ``.DS_Store``) are left out
silently and not walked: they hold tools' state, not documents, and listing a repository's
thousands of ``.git`` objects would bury the skips a user needs to see.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from core.errors import UnsupportedFileError
from core.ingest.detect import SNIFF_BYTES, SUPPORTED_SUFFIXES, sniff_kind


@dataclass(slots=True)
class CollectedFiles:
    """The files to read, in order, and the files of folders skipped as unsupported."""

    files: list[Path] = field(default_factory=list)
    skipped: list[Path] = field(default_factory=list)


def is_readable_type(path: Path) -> bool:
    """Whether an add should try to read ``path`` (by its extension, or its first bytes when it
    has none). A file that cannot be opened counts as readable: the add then says why not."""
    suffix = path.suffix.lower()
    if suffix:
        return suffix in SUPPORTED_SUFFIXES
    try:
        with path.open("rb") as fh:
            head = fh.read(SNIFF_BYTES)
    except OSError:
        return True
    try:
        sniff_kind(path, head)
    except UnsupportedFileError:
        return False
    return True


def collect_files(paths: Iterable[Path]) -> CollectedFiles:
    """Expand folders (recursively, sorted; see the module docstring); keep files as given."""
    out = CollectedFiles()
    for p in paths:
        if not p.is_dir():
            out.files.append(p)
            continue
        found: list[Path] = []
        for root, dirs, names in os.walk(p):
            dirs[:] = [d for d in dirs if not d.startswith(".")]
            found.extend(Path(root, n) for n in names if not n.startswith("."))
        for f in sorted(found):
            if not f.is_file():
                continue
            (out.files if is_readable_type(f) else out.skipped).append(f)
    return out
