"""Child processes of a packaged app, which has no ``python -m MODULE`` to start them with.

A PyInstaller bundle's ``sys.executable`` is the app's own binary: it runs ``desktop.entry``,
not an interpreter. So a module that starts a Python child (the llama.cpp probe,
:mod:`models.probe`; the document reader, :class:`core.ingest.ExtractorProcess`) asks for
``[sys.executable, FLAG, ...]`` when frozen, and the entry point hands such a command line
here before anything else reads it. In a source install the same command lines work through
the ``sourcebook`` console script too (the tests use that).

This module imports nothing at the top: the reader's child starts with it, before the imports
it wants to keep out.
"""

from __future__ import annotations

import importlib.util
import sys
import types
from collections.abc import Sequence

EXTRACTOR_FLAG = "--extractor-child"
"""``FLAG FD``: serve :class:`core.ingest.ExtractorProcess` on the inherited socket ``FD``."""


def run_child(argv: Sequence[str]) -> int | None:
    """Run the child that ``argv`` names and return its exit code; None if it names none."""
    if argv[:1] == [EXTRACTOR_FLAG] and len(argv) == 2:
        serve_extractor(int(argv[1]))
        return 0
    from models.probe import CHILD_FLAG, child_main

    if argv[:1] == [CHILD_FLAG]:
        return child_main(list(argv[1:]))
    return None


def serve_extractor(fd: int) -> None:
    """The document reader's child: read files sent on socket ``fd`` until it closes.

    It imports only what extraction needs, so it starts in ~1 s. ``graph/__init__`` imports the
    whole store (lancedb, networkx: ~4 s of a 6 s start on 2 busy cores), so ``graph`` is
    registered as a bare package and only the modules extraction uses are imported
    (``graph.schemas``, ``graph.ids``, ``graph.wordpack``). PyMuPDF's layout model is kept
    out as in every process (``core/__init__``).
    """
    if "graph" not in sys.modules:
        spec = importlib.util.find_spec("graph")
        if spec is not None and spec.submodule_search_locations is not None:
            graph = types.ModuleType("graph")
            graph.__path__ = list(spec.submodule_search_locations)
            sys.modules["graph"] = graph
    from core.ingest import _serve_parent

    _serve_parent(fd)
