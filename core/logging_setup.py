"""Logging, configured once at start-up: a rotating file in the home, warnings on stderr."""

from __future__ import annotations

import logging
import logging.handlers
from pathlib import Path

_configured = False


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
