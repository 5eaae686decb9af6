"""Sourcebook's one exception tree.

Every error the user can meet derives from :class:`SourcebookError` and carries a ``hint``: one
sentence saying what to do about it. The GUI and the CLI show ``message`` and ``hint``; neither
ever shows a bare traceback.

    SourcebookError
    ├── ConfigError            bad settings, missing home, bad option
    ├── IngestError            a file or URL could not be added (``path`` names it)
    │   ├── UnsupportedFileError   wrong extension / unknown format
    │   ├── EmptyFileError         zero bytes
    │   ├── CorruptFileError       unreadable or truncated
    │   ├── EncryptedFileError     password-protected
    │   ├── FileTooLargeError      over the configured size limit
    │   └── WebAccessError         web disabled, refused host, fetch failure
    ├── StoreError             the library (catalog or index) failed; wraps ``graph`` errors
    │   ├── NotFoundError          no document / passage / evidence id of that name
    │   └── EmbedderMismatchError  the library's vectors are another embedder's; adding refused
    ├── ModelError             an LLM or embedder failed; wraps ``models`` errors
    ├── CitationError          a report's citations could not be verified
    ├── TaskBusyError          the task is being run by another process (``pid``, ``host``...)
    └── CancelledError         the user cancelled; not a failure

``graph`` and ``models`` sit below ``core`` and may not import it: they raise their own
``GraphError`` / ``ModelBackendError`` roots, and :func:`translate_errors` converts them where
they enter ``core`` (``raise mapped(message) from exc``), the way httpx maps transport errors.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from graph.errors import GraphError, NotFoundInGraph
from models.errors import ModelBackendError


class SourcebookError(Exception):
    """Root of every error Sourcebook raises on purpose."""

    default_hint = ""

    def __init__(self, message: str, *, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint if hint is not None else self.default_hint

    def __str__(self) -> str:
        return f"{self.message} {self.hint}".strip() if self.hint else self.message


class ConfigError(SourcebookError):
    default_hint = "Check the option or setting named above."


class IngestError(SourcebookError):
    """A document could not be added. ``path`` is the file or URL at fault."""

    default_hint = "The library was left unchanged for this file."

    def __init__(self, message: str, *, path: str | Path, hint: str | None = None) -> None:
        super().__init__(message, hint=hint)
        self.path = str(path)


class UnsupportedFileError(IngestError):
    default_hint = "Sourcebook reads PDF, plain text, Markdown, HTML and JSONL files."


class EmptyFileError(IngestError):
    default_hint = "The file has no bytes; export or download it again."


class CorruptFileError(IngestError):
    default_hint = "The file is damaged or truncated; re-download or re-export it."


class EncryptedFileError(IngestError):
    default_hint = "Remove the password (e.g. print to PDF or `qpdf --decrypt`) and add it again."


class FileTooLargeError(IngestError):
    default_hint = "Split the file, or raise `ingest.max_file_mb` in the settings."


class WebAccessError(IngestError):
    default_hint = "Web access is off by default; set `web.enabled` to allow it."


class StoreError(SourcebookError):
    default_hint = "The library may be in use by another Sourcebook; close it and retry."


class NotFoundError(StoreError):
    default_hint = "Run `sourcebook docs` to list documents, or search to find evidence ids."


class EmbedderMismatchError(StoreError):
    """The library's vectors were made by another embedder than the current one; mixing the
    two would make vector search compare unlike vectors, so adding is refused."""

    default_hint = "Run `sourcebook reembed` to re-embed the library with the current embedder."


class ModelError(SourcebookError):
    default_hint = "Run `sourcebook models` to see which models are available."


class CitationError(SourcebookError):
    pass


class TaskBusyError(SourcebookError):
    """Another live process holds the task's lease (it is running the task right now).

    Two runners of one task would append to one task log and each reuse the other's steps, so
    the second is refused; ``pid``, ``host``, ``started`` and ``heartbeat`` (epoch seconds) name
    the holder, for a message that says which process to wait for or stop.
    """

    default_hint = (
        "Wait for it to finish or stop it; a run whose process is gone is taken over automatically."
    )

    def __init__(
        self,
        message: str,
        *,
        task: str,
        pid: int,
        host: str,
        started: float,
        heartbeat: float,
        hint: str | None = None,
    ) -> None:
        super().__init__(message, hint=hint)
        self.task = task
        self.pid = pid
        self.host = host
        self.started = started
        self.heartbeat = heartbeat


class CancelledError(SourcebookError):
    default_hint = "Nothing was lost; run it again to continue."


@contextmanager
def translate_errors() -> Iterator[None]:
    """Convert errors of the layers below (``graph``, ``models``) into this tree."""
    try:
        yield
    except NotFoundInGraph as exc:
        raise NotFoundError(str(exc)) from exc
    except GraphError as exc:
        raise StoreError(str(exc)) from exc
    except ModelBackendError as exc:
        raise ModelError(exc.message, hint=exc.hint or None) from exc
