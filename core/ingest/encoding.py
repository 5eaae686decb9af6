"""Text bytes -> str: a byte-order mark decides when there is one, else UTF-8, else a detector.

A BOM is certain, so UTF-8/16/32 text that starts with one decodes exactly (the BOM removed).
Bytes that are valid UTF-8 are UTF-8: legacy encodings almost never produce valid UTF-8 by
accident. Anything else is a guess by charset-normalizer, and a guess is recorded as a note on
the document, so a reader who sees odd characters knows why.
"""

from __future__ import annotations

import codecs
import logging
from dataclasses import dataclass
from pathlib import Path

from charset_normalizer import from_bytes

from core.errors import UnsupportedFileError

logger = logging.getLogger(__name__)

# UTF-32-LE's mark starts with UTF-16-LE's, so the longer marks are tried first.
_BOMS: tuple[tuple[bytes, str, str], ...] = (
    (codecs.BOM_UTF32_LE, "utf-32", "UTF-32"),
    (codecs.BOM_UTF32_BE, "utf-32", "UTF-32"),
    (codecs.BOM_UTF8, "utf-8-sig", "UTF-8"),
    (codecs.BOM_UTF16_LE, "utf-16", "UTF-16"),
    (codecs.BOM_UTF16_BE, "utf-16", "UTF-16"),
)
# Single-byte Latin code pages decode the same bytes to different, equally letter-like text, and
# the detector's statistics often cannot tell them apart on a few paragraphs. When its pick and
# Windows-1252 (the most common legacy encoding of Western text) are this close in "chaos", the
# detector is near a tie, and the common encoding is the better bet.
_PREFERRED = "cp1252"
_TIE_CHAOS = 0.01
NOT_TEXT_HINT = (
    "If it is text, save it as UTF-8 and add it again; otherwise convert it to PDF or text."
)


@dataclass(frozen=True, slots=True)
class DecodedText:
    """Decoded text, newlines normalised; ``note`` says for the document what was not certain."""

    text: str
    note: str | None = None


def bom_encoding(head: bytes) -> str | None:
    """The codec a byte-order mark at the start of ``head`` names, or None."""
    for bom, codec, _ in _BOMS:
        if head.startswith(bom):
            return codec
    return None


ENCODING_ASSUMED = "text encoding assumed"  # a note: the text was read, by a guessed encoding


def decode_text(data: bytes, *, path: Path) -> DecodedText:
    """Decode text bytes (see the module docstring); refuse bytes that are not text."""
    text, note = _decode_bom(data, path=path)
    if text is None:
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            text, encoding = _detect(data, path=path)
            note = f"{ENCODING_ASSUMED}: {encoding} (detected)"
            logger.info("%s is not UTF-8; decoding it as %s", path, encoding)
    sample = text[:20000]
    control = sum(1 for c in sample if ord(c) < 32 and c not in "\n\r\t\f\v")
    if sample and control > 0.05 * len(sample):
        raise UnsupportedFileError(
            f"{path.name} looks like binary data, not text.", path=path, hint=NOT_TEXT_HINT
        )
    return DecodedText(text.replace("\r\n", "\n").replace("\r", "\n").replace("\x00", ""), note)


def _decode_bom(data: bytes, *, path: Path) -> tuple[str | None, str | None]:
    """``(text, note)`` when ``data`` starts with a byte-order mark, else ``(None, None)``."""
    for bom, codec, name in _BOMS:
        if data.startswith(bom):
            try:
                return data.decode(codec), None
            except UnicodeDecodeError:
                # A damaged or truncated file: keep what decodes rather than refuse it all.
                logger.warning("%s: invalid %s bytes were replaced", path, name)
                return data.decode(codec, errors="replace"), f"invalid {name} bytes were replaced"
    return None, None


def _detect(data: bytes, *, path: Path) -> tuple[str, str]:
    """``(text, encoding)`` as charset-normalizer judges the bytes; refuse what it cannot read."""
    matches = from_bytes(data)
    best = matches.best()
    if best is None:
        raise UnsupportedFileError(
            f"{path.name} is not text in any encoding Sourcebook recognises (it may be binary "
            "data).",
            path=path,
            hint=NOT_TEXT_HINT,
        )
    chosen = best
    for match in matches:
        if match.encoding == _PREFERRED and match.chaos - best.chaos < _TIE_CHAOS:
            chosen = match
            break
    return data.decode(chosen.encoding, errors="replace"), chosen.encoding
