"""JSONL corpora: one document per record, with its title, text and id fields named by options.

The record's title becomes the document's heading (so it is part of the first passage's text,
which helps both keyword and dense search on encyclopedia-style corpora) and a ``title`` entity.

:class:`JsonlRecords` is an iterator, not a generator, so that a bad record can raise an
``IngestError`` naming its line and the caller can go on with ``next()``::

    records = iter_jsonl(path, settings=..., count_tokens=...)
    while True:
        try:
            doc = next(records)
        except StopIteration:
            break
        except IngestError as exc:
            report(exc)   # line N is skipped; the next call continues after it
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO, Any

from core.errors import CorruptFileError, IngestError
from graph.schemas import IngestedDocument

logger = logging.getLogger(__name__)

# (title, text, external id, line number, line bytes) -> document
RecordBuilder = Callable[[str, str, str | None, int, bytes], IngestedDocument]


class JsonlRecords(Iterator[IngestedDocument]):
    """Reads a JSONL file lazily, one document per non-blank line.

    A bad line raises :class:`CorruptFileError` (with the line number) from ``__next__``; the
    iterator stays usable and the next call reads the following line. Not thread-safe: one
    consumer at a time. The file is closed at the end or by :meth:`close`.
    """

    def __init__(
        self,
        path: Path,
        *,
        title_field: str,
        text_field: str,
        id_field: str | None,
        build: RecordBuilder,
    ) -> None:
        self._path = path
        self._title_field = title_field
        self._text_field = text_field
        self._id_field = id_field
        self._build = build
        self._fh: IO[bytes] | None = path.open("rb")
        self._line = 0

    def __iter__(self) -> JsonlRecords:
        return self

    def close(self) -> None:
        if self._fh is not None:
            self._fh.close()
            self._fh = None

    def __enter__(self) -> JsonlRecords:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _bad(self, what: str) -> CorruptFileError:
        return CorruptFileError(
            f"{self._path.name}, line {self._line}: {what}.",
            path=self._path,
            hint="Fix or remove that line; the other records are not affected.",
        )

    def __next__(self) -> IngestedDocument:
        while True:
            if self._fh is None:
                raise StopIteration
            raw = self._fh.readline()
            if not raw:
                self.close()
                raise StopIteration
            self._line += 1
            if raw.strip():
                return self._record(raw)

    def _record(self, raw: bytes) -> IngestedDocument:
        try:
            rec: Any = json.loads(raw)
        except UnicodeDecodeError as exc:
            raise self._bad("not UTF-8 text") from exc
        except json.JSONDecodeError as exc:
            raise self._bad(f"not valid JSON ({exc.msg} at column {exc.colno})") from exc
        if not isinstance(rec, dict):
            raise self._bad(f"a JSON {type(rec).__name__}, not an object")
        text = rec.get(self._text_field)
        if not isinstance(text, str):
            raise self._bad(f"no text field {self._text_field!r} holding a string")
        if not text.strip():
            raise self._bad(f"the text field {self._text_field!r} is empty")
        title = rec.get(self._title_field)
        if title is not None and not isinstance(title, str):
            title = str(title)
        ext: str | None = None
        if self._id_field is not None:
            value = rec.get(self._id_field)
            if value is None or isinstance(value, dict | list):
                raise self._bad(f"no id field {self._id_field!r}")
            ext = str(value)
        title = " ".join((title or "").split())
        try:
            return self._build(title, text, ext, self._line, raw)
        except IngestError:
            raise
        except Exception as exc:  # a bug or odd record must not stop a whole corpus
            logger.exception("record at %s line %s failed", self._path, self._line)
            raise self._bad(f"the record could not be read ({exc})") from exc


def canonical_record_bytes(title: str, text: str) -> bytes:
    """The bytes a record's content hash is taken over (stable across key order/whitespace)."""
    return json.dumps({"text": text, "title": title}, ensure_ascii=False, sort_keys=True).encode()
