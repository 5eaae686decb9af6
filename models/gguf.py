"""Read and validate a GGUF file's header without loading the model.

A file that is not a complete GGUF gets a clear ``ModelFileError`` here, before llama.cpp is
asked to load it (llama.cpp's own failure is a bare ``ValueError``). Reads the metadata the model
list shows: architecture, context length, quantization, and checks that the file is long enough
for the tensors its header declares (a truncated download is the usual broken model).
"""

from __future__ import annotations

import functools
import logging
import struct
from pathlib import Path
from typing import Any, BinaryIO

from pydantic import BaseModel, ConfigDict, Field

from models.errors import ModelFileError

logger = logging.getLogger(__name__)

GGUF_MAGIC = b"GGUF"
MAX_STRING = 64 * 1024 * 1024
_CHUNK = 1024 * 1024

# GGUF metadata value types -> struct format (scalars).
_SCALARS: dict[int, str] = {
    0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?",
    10: "<Q", 11: "<q", 12: "<d",
}  # fmt: skip
_STRING, _ARRAY = 8, 9

# llama_ftype (general.file_type) -> quantization name.
FILE_TYPES: dict[int, str] = {
    0: "F32", 1: "F16", 2: "Q4_0", 3: "Q4_1", 7: "Q8_0", 8: "Q5_0", 9: "Q5_1", 10: "Q2_K",
    11: "Q3_K_S", 12: "Q3_K_M", 13: "Q3_K_L", 14: "Q4_K_S", 15: "Q4_K_M", 16: "Q5_K_S",
    17: "Q5_K_M", 18: "Q6_K", 19: "IQ2_XXS", 20: "IQ2_XS", 21: "Q2_K_S", 22: "IQ3_XS",
    23: "IQ3_XXS", 24: "IQ1_S", 25: "IQ4_NL", 26: "IQ3_S", 27: "IQ3_M", 28: "IQ2_S",
    29: "IQ2_M", 30: "IQ4_XS", 31: "IQ1_M", 32: "BF16", 36: "TQ1_0", 37: "TQ2_0",
    38: "MXFP4_MOE",
}  # fmt: skip

# ggml_type -> (elements per block, bytes per block), for the truncation check.
_TYPE_SIZES: dict[int, tuple[int, int]] = {
    0: (1, 4), 1: (1, 2), 2: (32, 18), 3: (32, 20), 6: (32, 22), 7: (32, 24), 8: (32, 34),
    9: (32, 36), 10: (256, 84), 11: (256, 110), 12: (256, 144), 13: (256, 176),
    14: (256, 210), 15: (256, 292), 16: (256, 66), 17: (256, 74), 18: (256, 98),
    19: (256, 50), 20: (32, 18), 21: (256, 110), 22: (256, 82), 23: (256, 136), 24: (1, 1),
    25: (1, 2), 26: (1, 4), 27: (1, 8), 28: (1, 8), 29: (256, 56), 30: (1, 2),
    34: (256, 54), 35: (256, 66), 39: (32, 17),
}  # fmt: skip


class GGUFInfo(BaseModel):
    """What the header says about a GGUF model file."""

    model_config = ConfigDict(frozen=True)

    path: Path
    size_bytes: int
    version: int
    tensor_count: int
    architecture: str | None = None
    model_name: str | None = Field(default=None, description="general.name")
    context_length: int | None = None
    file_type: int | None = None
    quantization: str | None = None
    has_chat_template: bool = False
    split_count: int = Field(default=1, description="Number of files of a split model.")
    metadata: dict[str, str | int | float | bool] = Field(
        default_factory=dict, description="Scalar metadata (arrays left out)."
    )


class _Reader:
    """Buffered little-endian reader over the file (the header can hold 300k strings)."""

    def __init__(self, fh: BinaryIO, path: Path, size: int) -> None:
        self.fh, self.path, self.size = fh, path, size
        self.buf = b""
        self.base = 0  # file offset of buf[0]
        self.pos = 0  # read position relative to base

    def tell(self) -> int:
        return self.base + self.pos

    def fail(self, why: str) -> ModelFileError:
        return ModelFileError(f"{self.path} is not a valid GGUF model file: {why}.")

    def _fill(self, n: int) -> None:
        if self.pos + n <= len(self.buf):
            return
        start = self.base + self.pos
        self.fh.seek(start)
        self.buf = self.fh.read(max(n, _CHUNK))
        self.base, self.pos = start, 0
        if len(self.buf) < n:
            raise ModelFileError(
                f"{self.path} is truncated: its header ends early ({self.size:,} bytes)."
            )

    def read(self, n: int) -> bytes:
        self._fill(n)
        data = self.buf[self.pos : self.pos + n]
        self.pos += n
        return data

    def unpack(self, fmt: str) -> Any:
        n = struct.calcsize(fmt)
        self._fill(n)
        value = struct.unpack_from(fmt, self.buf, self.pos)[0]
        self.pos += n
        return value

    def _length(self) -> int:
        n: int = self.unpack("<Q")
        if n > MAX_STRING or n > self.size:
            raise self.fail(f"a string of {n} bytes at offset {self.tell() - 8}")
        return n

    def string(self) -> str:
        return self.read(self._length()).decode("utf-8", errors="replace")

    def skip_strings(self, count: int) -> None:
        unpack_from = struct.unpack_from
        buf, pos = self.buf, self.pos
        for _ in range(count):
            if pos + 8 > len(buf):
                self.pos = pos
                self._fill(8)
                buf, pos = self.buf, self.pos
            n = unpack_from("<Q", buf, pos)[0]
            if n > MAX_STRING:
                self.pos = pos
                raise self.fail(f"a string of {n} bytes at offset {self.tell()}")
            pos += 8 + n
        self.pos = pos

    def value(self, vtype: int) -> Any:
        """Read a value; arrays are skipped and returned as None."""
        if vtype in _SCALARS:
            return self.unpack(_SCALARS[vtype])
        if vtype == _STRING:
            return self.string()
        if vtype == _ARRAY:
            etype, count = self.unpack("<I"), self.unpack("<Q")
            if count > self.size:
                raise self.fail(f"an array of {count} items")
            if etype in _SCALARS:
                self.pos += count * struct.calcsize(_SCALARS[etype])
            elif etype == _STRING:
                self.skip_strings(count)
            elif etype == _ARRAY:
                for _ in range(count):
                    self.value(_ARRAY)
            else:
                raise self.fail(f"unknown array item type {etype}")
            return None
        raise self.fail(f"unknown metadata value type {vtype}")


def _read(path: Path, size: int, check_size: bool) -> GGUFInfo:
    if size == 0:
        raise ModelFileError(f"{path} is empty (0 bytes); it is not a model file.")
    try:
        fh = path.open("rb")
    except OSError as exc:
        raise ModelFileError(f"Cannot open model file {path}: {exc.strerror or exc}.") from exc
    with fh:
        reader = _Reader(fh, path, size)
        magic = fh.read(4)
        reader.base = 4
        if magic != GGUF_MAGIC:
            raise ModelFileError(
                f"{path} is not a GGUF model file (it starts with {magic!r}, not b'GGUF')."
            )
        version = reader.unpack("<I")
        if version not in (2, 3):
            raise reader.fail(f"unsupported GGUF version {version}")
        tensor_count, kv_count = reader.unpack("<Q"), reader.unpack("<Q")
        if tensor_count > 1_000_000 or kv_count > 1_000_000:
            raise reader.fail(f"implausible counts ({tensor_count} tensors, {kv_count} keys)")
        meta: dict[str, Any] = {}
        has_template = False
        for _ in range(kv_count):
            key = reader.string()
            vtype = reader.unpack("<I")
            value = reader.value(vtype)
            if key == "tokenizer.chat_template":
                has_template = bool(value)
            elif value is not None:
                meta[key] = value
        # Tensor infos: name, dims, type, offset. Used to check the file is long enough.
        end_needed = 0
        for _ in range(tensor_count):
            reader.skip_strings(1)
            n_dims = reader.unpack("<I")
            if n_dims > 8:
                raise reader.fail(f"a tensor with {n_dims} dimensions")
            elements = 1
            for _ in range(n_dims):
                elements *= reader.unpack("<Q")
            ttype, offset = reader.unpack("<I"), reader.unpack("<Q")
            block, nbytes = _TYPE_SIZES.get(ttype, (1, 0))
            end_needed = max(end_needed, offset + (elements // block) * nbytes)
        alignment = int(meta.get("general.alignment", 32)) or 32
        data_start = -(-reader.tell() // alignment) * alignment
    split_count = int(meta.get("split.count", 1) or 1)
    if check_size and split_count <= 1 and data_start + end_needed > size:
        raise ModelFileError(
            f"{path} is truncated: it has {size:,} bytes but its tensors need "
            f"{data_start + end_needed:,}. The download or copy did not finish."
        )
    arch = meta.get("general.architecture")
    ctx = meta.get(f"{arch}.context_length") if isinstance(arch, str) else None
    file_type = meta.get("general.file_type")
    return GGUFInfo(
        path=path,
        size_bytes=size,
        version=version,
        tensor_count=tensor_count,
        architecture=arch if isinstance(arch, str) else None,
        model_name=str(meta["general.name"]) if "general.name" in meta else None,
        context_length=int(ctx) if isinstance(ctx, int) else None,
        file_type=int(file_type) if isinstance(file_type, int) else None,
        quantization=FILE_TYPES.get(file_type) if isinstance(file_type, int) else None,
        has_chat_template=has_template,
        split_count=split_count,
        metadata={k: v for k, v in meta.items() if isinstance(v, str | int | float | bool)},
    )


@functools.lru_cache(maxsize=256)
def _read_cached(path: Path, size: int, mtime_ns: int, check_size: bool) -> GGUFInfo:
    return _read(path, size, check_size)


def read_gguf_info(path: Path, *, check_size: bool = True) -> GGUFInfo:
    """Parse ``path``'s GGUF header. Raises ``ModelFileError`` if it is not a complete GGUF.

    ``check_size=False`` skips the truncation check (for the first part of a split download).
    Results are memoised on (path, size, mtime).
    """
    try:
        st = path.stat()
    except OSError as exc:
        raise ModelFileError(f"Model file {path} does not exist or cannot be read.") from exc
    if not path.is_file():
        raise ModelFileError(f"{path} is not a file.")
    return _read_cached(path, st.st_size, st.st_mtime_ns, check_size)
