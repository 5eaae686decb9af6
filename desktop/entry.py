"""The ``sourcebook`` console script: the app without arguments, the CLI with them.

This module must stay importable without PySide6 (and without a display): the CLI runs on
servers and in CI. It imports nothing from Qt; only :func:`desktop.app.main` does, and only
when the app is really opened.

``sourcebook`` and ``sourcebook --home PATH [-v]`` (options only, no command) open the app;
anything else is handed to :func:`core.cli.main` unchanged.
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Sequence

from core.logging_setup import native_log_defaults

logger = logging.getLogger(__name__)

_APP_FLAGS = frozenset({"-v", "--verbose"})
# options of the app that take a value (desktop.app._parse)
_APP_OPTIONS = frozenset(
    {"--home", "--self-test", "--query", "--screenshot", "--self-test-timeout", "--ready-file"}
)


def wants_app(argv: Sequence[str]) -> bool:
    """True when ``argv`` has no command, only the options the app understands."""
    i = 0
    while i < len(argv):
        arg = argv[i]
        if arg in _APP_FLAGS or ("=" in arg and arg.partition("=")[0] in _APP_OPTIONS):
            i += 1
        elif arg in _APP_OPTIONS and i + 1 < len(argv):
            i += 2
        else:
            return False
    return True


def _has_display() -> bool:
    if sys.platform != "linux" or os.environ.get("QT_QPA_PLATFORM"):
        return True
    return bool(os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY"))


def main(argv: Sequence[str] | None = None) -> int:
    # First, before the app or the CLI imports lancedb, which reads its log level on import.
    native_log_defaults()
    args = list(sys.argv[1:] if argv is None else argv)
    if wants_app(args):
        if not _has_display():
            sys.stderr.write(
                "sourcebook: no display to open the app on (DISPLAY/WAYLAND_DISPLAY unset).\n"
                "  -> Use the command line instead: `sourcebook --help`.\n"
            )
            return 2
        from desktop.app import main as app_main

        return app_main(args)
    from core.frozen import run_child

    code = run_child(args)  # a packaged app has no `python -m`: its children run through here
    if code is not None:
        return code
    from core.cli import main as cli_main

    return cli_main(args)


if __name__ == "__main__":
    sys.exit(main())
