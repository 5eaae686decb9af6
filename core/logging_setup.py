"""Logging, configured once at start-up: a rotating file in the home, warnings on stderr.

Two steps, because the native libraries read their settings earlier than the home is known:
:func:`native_log_defaults` before anything imports lancedb, :func:`configure_logging` once the
home is open.
"""

from __future__ import annotations

import logging
import logging.handlers
import os
from pathlib import Path

_configured = False


def native_log_defaults() -> None:
    """Errors only from lance's Rust logger, unless the user set ``LANCEDB_LOG`` themselves.

    Its log lines go straight to stderr, past the app's handlers and log file, so only errors
    are worth showing there by default. lancedb reads ``LANCEDB_LOG`` once, when its native
    module is first imported (``env_logger``, default ``warn``): call this at start-up, before
    anything imports ``graph`` or ``core.service``; later it changes nothing.
    """
    os.environ.setdefault("LANCEDB_LOG", "error")


def configure_logging(log_dir: Path, *, verbose: bool = False) -> None:
    global _configured
    if _configured:
        return
    _configured = True
    log_dir.mkdir(parents=True, exist_ok=True)
    root = logging.getLogger()
    root.setLevel(logging.DEBUG if verbose else logging.INFO)
    fh = logging.handlers.RotatingFileHandler(
        log_dir / "sourcebook.log", maxBytes=5_000_000, backupCount=3, encoding="utf-8"
    )
    fh.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root.addHandler(fh)
    err = logging.StreamHandler()
    err.setLevel(logging.DEBUG if verbose else logging.WARNING)
    err.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
    root.addHandler(err)
    for noisy in ("httpx", "sentence_transformers", "transformers", "urllib3", "filelock"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
