"""From configured sources to tokenized arrays: read, check languages, tokenize, pack."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
from transformers import PreTrainedTokenizerBase

from crossalign.config import DataConfig
from crossalign.data.batching import PairArray, pack_blocks
from crossalign.data.readers import read_mono, read_parallel
from crossalign.errors import CrossalignError
from crossalign.languages import check_language


@dataclass
class Sources:
    """Where each kind of text comes from (config forms: paths, path lists, dataset maps)."""

    mono: dict[str, Any] = field(default_factory=dict)
    parallel: dict[str, Any] = field(default_factory=dict)
    valid_mono: dict[str, Any] = field(default_factory=dict)
    valid_parallel: dict[str, Any] = field(default_factory=dict)

    def languages(self) -> list[str]:
        """Every language of the training sources, sorted."""
        langs = set(self.mono)
        for pair in self.parallel:
            langs.update(pair.split("-", 1))
        return sorted(langs)


def resolve_sources(cfg: DataConfig) -> Sources:
    """Combine ``data.corpus`` (a built corpus directory) with explicit sources, which win.

    Checks every language code and pair name.
    """
    sources = Sources()
    if cfg.corpus:
        from crossalign.data.corpus import resolve_corpus

        found = resolve_corpus(cfg.corpus, cfg.languages or None)
        sources = Sources(**found)
    sources.mono.update(cfg.mono)
    sources.parallel.update(cfg.parallel)
    sources.valid_mono.update(cfg.valid_mono)
    sources.valid_parallel.update(cfg.valid_parallel)
    for key in ("mono", "valid_mono"):
        for lang in getattr(sources, key):
            check_language(lang, f"data.{key}")
    for key in ("parallel", "valid_parallel"):
        for pair in getattr(sources, key):
            if pair.count("-") < 1:
                raise CrossalignError(
                    f"data.{key}: pair '{pair}' must be named src-tgt, e.g. en-es"
                )
            src, tgt = _split_pair(pair)
            check_language(src, f"data.{key}.{pair}")
            check_language(tgt, f"data.{key}.{pair}")
    if not sources.mono and not sources.parallel:
        raise CrossalignError(
            "no training data: set data.corpus (from 'crossalign data ...') or data.mono / "
            "data.parallel"
        )
    return sources


def _split_pair(pair: str) -> tuple[str, str]:
    """``en-zh-CN`` → (en, zh-CN): the source is the part before the first hyphen."""
    src, tgt = pair.split("-", 1)
    return src, tgt


@dataclass
class Texts:
    """The text of every source, read once."""

    mono: dict[str, list[str]]
    parallel: dict[str, list[tuple[str, str]]]
    valid_mono: dict[str, list[str]]
    valid_parallel: dict[str, list[tuple[str, str]]]

    def by_language(self) -> dict[str, list[str]]:
        """Training text per language (mono plus both sides of parallel), for tokenizers."""
        out: dict[str, list[str]] = {k: list(v) for k, v in self.mono.items()}
        for pair, data in self.parallel.items():
            src, tgt = _split_pair(pair)
            out.setdefault(src, []).extend(s for s, _ in data)
            out.setdefault(tgt, []).extend(t for _, t in data)
        return out


def read_sources(sources: Sources) -> Texts:
    """Read every configured source (errors name the file and line)."""
    return Texts(
        mono={k: read_mono(v, f"data.mono.{k}") for k, v in sources.mono.items()},
        parallel={k: read_parallel(v) for k, v in sources.parallel.items()},
        valid_mono={k: read_mono(v, f"data.valid_mono.{k}") for k, v in sources.valid_mono.items()},
        valid_parallel={k: read_parallel(v) for k, v in sources.valid_parallel.items()},
    )


@dataclass
class TokenizedData:
    """Training and held-out data as arrays."""

    mono: dict[str, np.ndarray]
    """Language → [n_blocks, max_length] packed blocks."""
    parallel: dict[str, PairArray]
    """Pair ``src-tgt`` → tokenized sentence pairs."""
    valid_mono: dict[str, np.ndarray]
    valid_parallel: dict[str, PairArray]


def tokenize_texts(
    texts: Texts, tokenizer: PreTrainedTokenizerBase, max_length: int, max_valid: int
) -> TokenizedData:
    """Tokenize every source; mono text is packed into blocks of ``max_length``; held-out
    data is capped at ``max_valid`` blocks per language and ``max_valid`` pairs per pair."""

    def ids(lines: list[str]) -> list[list[int]]:
        return tokenizer(lines, add_special_tokens=False)["input_ids"]

    def blocks(lines: list[str]) -> np.ndarray:
        return pack_blocks(
            ids(lines),
            max_length,
            tokenizer.cls_token_id,
            tokenizer.sep_token_id,
            tokenizer.pad_token_id,
        )

    def pairs(data: list[tuple[str, str]]) -> PairArray:
        return PairArray.from_lists(ids([s for s, _ in data]), ids([t for _, t in data]))

    return TokenizedData(
        mono={k: blocks(v) for k, v in texts.mono.items()},
        parallel={k: pairs(v) for k, v in texts.parallel.items()},
        valid_mono={k: blocks(v)[:max_valid] for k, v in texts.valid_mono.items()},
        valid_parallel={k: pairs(v[:max_valid]) for k, v in texts.valid_parallel.items()},
    )
