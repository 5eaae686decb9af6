"""``python -m models.llama_server --model FILE.gguf ...``: llama-cpp-python's OpenAI-compatible
server (same options as ``python -m llama_cpp.server``) on a runtime made ready first.

A llama.cpp build with CPU variants loads none by itself, so ``llama_cpp.server`` alone cannot
load any model with it; here :func:`models.probe.check_runtime` chooses and loads the variant
this CPU runs (and refuses, in words, a build that crashes here) before the server starts.
"""

from __future__ import annotations

import runpy
import sys
from collections.abc import Sequence
from pathlib import Path

from models.probe import check_runtime


def main(argv: Sequence[str]) -> None:
    args = list(argv)
    if "--model" in args and args.index("--model") + 1 < len(args):
        check_runtime(Path(args[args.index("--model") + 1]))
    sys.argv = ["llama_cpp.server", *args]
    runpy.run_module("llama_cpp.server", run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main(sys.argv[1:])
