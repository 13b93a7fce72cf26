"""From configured sources to training data: resolve, check languages, tokenize once into a
cached store (``crossalign.data.store.token_store``), and view it as packed blocks and sentence
pairs."""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
from filelock import FileLock
from transformers import PreTrainedTokenizerBase

from crossalign.config import DataConfig, RunConfig
from crossalign.data.inputs import PairInput, TextInput
from crossalign.data.readers import dataset_spec
from crossalign.data.sampling import language_probs
from crossalign.data.store.streaming import StreamingText, is_streaming
from crossalign.data.store.token_store import (
    CHUNK_LINES,
    VERSION,
    MonoSentences,
    MonoText,
    PackedBlocks,
    PairText,
    Source,
    TokenStore,
    build_store,
    dtype_for,
    missing_shards,
    open_store,
    tokenizer_fingerprint,
)
from crossalign.errors import CrossalignError
from crossalign.languages import check_language

if TYPE_CHECKING:
    from crossalign.data.options import TokenizerOptions


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
        from crossalign.data.corpora.files import resolve_corpus

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


def _text_input(spec: Any, where: str) -> list[TextInput]:
    """Inputs of a monolingual config value: a file, a list of files, or a dataset mapping."""
    if isinstance(spec, dict):
        dataset, split, column = dataset_spec(spec, where)
        return [TextInput(dataset=dataset, split=split, column=column, where=where)]
    paths = spec if isinstance(spec, (list, tuple)) else [spec]
    return [TextInput(path=str(p), where=where) for p in paths]


def _pair_input(spec: Any, where: str) -> list[PairInput]:
    """Inputs of a parallel config value: a TSV file or [source file, target file]."""
    if isinstance(spec, (list, tuple)):
        if len(spec) != 2:
            raise CrossalignError(f"{where}: parallel source {spec!r} must be [src_file, tgt_file]")
        return [PairInput(str(spec[0]), str(spec[1]))]
    return [PairInput(str(spec))]


def store_sources(sources: Sources) -> list[Source]:
    """The store's view of the configured sources. A list of monolingual files is read as
    one text with exact duplicate lines dropped (the English side of several pairs)."""
    out = []
    for part in ("mono", "valid_mono", "parallel", "valid_parallel"):
        for name, spec in sorted(getattr(sources, part).items()):
            where = f"data.{part}.{name}"
            if is_streaming(spec):
                if part != "mono":
                    raise CrossalignError(f"{where}: only training text can be streamed")
                continue
            if part.endswith("mono"):
                inputs = _text_input(spec, where)
                out.append(Source(part, name, inputs, dedup=isinstance(spec, (list, tuple))))
            else:
                out.append(Source(part, name, _pair_input(spec, where)))
    return out


def named_files(sources: Sources) -> list[tuple[str, Path]]:
    """Every local file the configured sources name, with where it is named (streamed text
    and datasets given as mappings are left out: they are opened when read)."""
    out = []
    for source in store_sources(sources):
        for item in source.inputs:
            paths = [item.path] if isinstance(item, TextInput) else [item.src, item.tgt]
            out += [(f"data.{source.part}.{source.name}", Path(p)) for p in paths if p]
    return out


# How raw text is read into a store; raised when that changes (2: a UTF-8 byte-order mark is
# dropped, NUL bytes are refused), so stores cached by an earlier reader are rebuilt.
READING = 2


def store_key(sources: list[Source], tokenizer: PreTrainedTokenizerBase) -> str:
    """The cache key of a store: the sources' identity (paths, sizes, modification times,
    dataset fingerprints), the tokenizer's fingerprint, the store format and chunking."""
    ident = {
        "version": VERSION,
        "reading": READING,
        "chunk_lines": CHUNK_LINES,
        "tokenizer": tokenizer_fingerprint(tokenizer),
        "sources": [[s.part, s.name, s.dedup, [i.identity() for i in s.inputs]] for s in sources],
    }
    return hashlib.sha256(json.dumps(ident, sort_keys=True).encode()).hexdigest()[:24]


def default_cache_dir() -> Path:
    """``$CROSSALIGN_CACHE/stores``, else ``$XDG_CACHE_HOME/crossalign/stores``, else
    ``~/.cache/crossalign/stores``."""
    if os.environ.get("CROSSALIGN_CACHE"):
        return Path(os.environ["CROSSALIGN_CACHE"]) / "stores"
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "crossalign" / "stores"


def cached_store(
    sources: Sources,
    tokenizer: PreTrainedTokenizerBase,
    cache_dir: str | Path | None = None,
    num_proc: int = 1,
    progress: bool = True,
) -> Path:
    """The store of ``sources`` tokenized by ``tokenizer``: built into ``cache_dir/<key>``
    the first time, found there afterwards. A changed source file or tokenizer gives a new
    key (a new store); concurrent builders of one key wait for each other."""
    listed = store_sources(sources)
    key = store_key(listed, tokenizer)
    root = Path(cache_dir) if cache_dir else default_cache_dir()
    out = root / key
    root.mkdir(parents=True, exist_ok=True)
    # An exclusive OS lock (fcntl.flock on POSIX, released if the process dies): one builder
    # per key at a time; the others wait, then find the store built.
    with FileLock(root / f"{key}.lock"):
        if not (out / "store.json").is_file() or missing_shards(out):
            build_store(listed, tokenizer, out, key, num_proc=num_proc, progress=progress)
    return out


@dataclass
class TrainingData:
    """Training and held-out data viewed from a store: packed blocks and sentences per
    language (``PackedBlocks``, ``MonoSentences``) and sentence pairs per pair
    (``PairText``). A streamed language has blocks only."""

    store: TokenStore
    mono: dict[str, PackedBlocks | StreamingText]
    parallel: dict[str, PairText]
    valid_mono: dict[str, PackedBlocks]
    valid_parallel: dict[str, PairText]
    sentences: dict[str, MonoSentences] = field(default_factory=dict)
    valid_sentences: dict[str, MonoSentences] = field(default_factory=dict)

    def languages(self) -> list[str]:
        """Every language of the training sources, sorted."""
        return sorted({*self.store.languages(), *self.mono})

    def by_kind(self) -> dict[str, dict[str, Any]]:
        """The training examples by the kind of data an objective reads (``Objective.data``):
        ``mono`` blocks and ``sentences`` per language, ``parallel`` pairs per pair."""
        return {"mono": self.mono, "sentences": self.sentences, "parallel": self.parallel}

    @classmethod
    def from_texts(
        cls, tokenizer: PreTrainedTokenizerBase, texts: dict[str, Sequence[str]], max_length: int
    ) -> TrainingData:
        """Training data held in memory: monolingual ``texts`` (language → lines) tokenized
        as a store tokenizes them (lines stripped, blank lines dropped, no special tokens)
        and packed into blocks of ``max_length``; no pairs, no held-out data. For objectives
        started outside a run (tests, benchmarks): ``start(model, data)`` sees what it sees
        on a store of the same text."""
        sep = tokenizer.sep_token_id
        mono = {lang: MonoText(_TextPieces(tokenizer, lines), sep) for lang, lines in texts.items()}
        manifest = {"tokenizer": tokenizer_fingerprint(tokenizer), "sep_id": sep}
        store = TokenStore(Path("<memory>"), manifest, mono, {}, {}, {})
        return training_data(store, tokenizer, max_length, 0)


class _TextPieces:
    """One language's text in memory as the single piece a ``MonoText`` reads: ``ids`` in the
    stream form (every sentence followed by ``sep``) and the sentence ``offsets``."""

    def __init__(self, tokenizer: PreTrainedTokenizerBase, lines: Sequence[str]) -> None:
        stripped = [t.strip() for t in lines]
        encoded = tokenizer([t for t in stripped if t], add_special_tokens=False)["input_ids"]
        lengths = np.array([len(ids) + 1 for ids in encoded], dtype=np.int64)
        offsets = np.zeros(len(encoded) + 1, dtype=np.int64)
        np.cumsum(lengths, out=offsets[1:])
        stream = [t for ids in encoded for t in (*ids, tokenizer.sep_token_id)]
        ids = np.array(stream, dtype=dtype_for(len(tokenizer)))
        self.arrays = {"ids": ids, "offsets": offsets}
        self.names = ["memory"]
        self.sentences = np.array([len(encoded)], dtype=np.int64)
        self.tokens = np.array([len(ids)], dtype=np.int64)

    def array(self, i: int, name: str) -> np.ndarray:
        """Array ``name`` (``ids`` or ``offsets``) of the one piece (``i`` = 0)."""
        return self.arrays[name]


def training_data(
    store: TokenStore,
    tokenizer: PreTrainedTokenizerBase,
    max_length: int,
    max_valid: int,
    streamed: dict[str, Any] | None = None,
) -> TrainingData:
    """View a store for training: monolingual text packed into blocks of ``max_length``;
    held-out data capped at ``max_valid`` blocks per language and pairs per pair; languages in
    ``streamed`` (language → ``{dataset, streaming: true, size, ...}``) read as
    ``StreamingText``. Raises if the store was tokenized by another tokenizer."""
    if store.manifest["tokenizer"] != tokenizer_fingerprint(tokenizer):
        raise CrossalignError(
            f"store {store.path} was tokenized with another tokenizer; use its tokenizer "
            f"(tokenizer.path={store.path / 'tokenizer'}) or tokenize again with this one"
        )
    ids = (tokenizer.cls_token_id, tokenizer.sep_token_id, tokenizer.pad_token_id)

    def blocks(texts: dict, limit: int | None = None) -> dict[str, PackedBlocks]:
        return {k: PackedBlocks(v, max_length, *ids, limit=limit) for k, v in texts.items()}

    mono: dict[str, Any] = blocks(store.mono)
    for lang, spec in (streamed or {}).items():
        mono[lang] = StreamingText(spec, f"data.mono.{lang}", tokenizer, max_length)
    return TrainingData(
        store=store,
        mono=mono,
        parallel=store.parallel,
        valid_mono=blocks(store.valid_mono, max_valid),
        valid_parallel={k: PairText(v.pieces, max_valid) for k, v in store.valid_parallel.items()},
        sentences={k: MonoSentences(v) for k, v in store.mono.items()},
        valid_sentences={k: MonoSentences(v, max_valid) for k, v in store.valid_mono.items()},
    )


def tokenizer_sample(sources: Sources, alpha: float, total: int, seed: int) -> list[str]:
    """About ``total`` training lines for tokenizer training, drawn by language with
    p_i ∝ n_i^alpha (n_i: the language's lines, monolingual and either side of its pairs),
    read from the files without holding the corpus in memory. A language with fewer lines
    than its share is repeated; the result is shuffled by ``seed``. Blank lines drawn are
    skipped."""
    every = CHUNK_LINES
    by_lang: dict[str, list[tuple[Any, int | None]]] = {}
    for source in store_sources(sources):
        if source.part == "mono":
            by_lang.setdefault(source.name, []).extend((i, None) for i in source.inputs)
        elif source.part == "parallel":
            src, tgt = _split_pair(source.name)
            for inp in source.inputs:
                by_lang.setdefault(src, []).append((inp, 0))
                by_lang.setdefault(tgt, []).append((inp, 1))
    sizes = {lang: [inp.index(every) for inp, _ in items] for lang, items in by_lang.items()}
    counts = {lang: sum(s) for lang, s in sizes.items()}
    total = min(total, sum(counts.values()))
    probs = language_probs(counts, alpha)
    rng = np.random.default_rng(seed)
    out: list[str] = []
    for lang in sorted(by_lang):
        n = counts[lang]
        want = max(1, round(probs[lang] * total))
        if want < n:
            idx = rng.choice(n, want, replace=False)  # memory O(want), not O(n)
        else:
            idx = np.concatenate([rng.permutation(n) for _ in range(-(-want // n))])[:want]
        lines_drawn, times = np.unique(idx, return_counts=True)
        start = 0
        for (inp, side), size in zip(by_lang[lang], sizes[lang]):
            lo, hi = np.searchsorted(lines_drawn, [start, start + size])
            local, mult = lines_drawn[lo:hi] - start, times[lo:hi]
            for chunk in np.unique(local // every):
                lines = inp.read(int(chunk), every)
                sel = local // every == chunk
                for j, m in zip(local[sel] - chunk * every, mult[sel]):
                    text = lines[j] if side is None else lines[j][side]
                    out.extend([text.strip()] * int(m))
            start += size
    out = [t for t in out if t]
    return [out[i] for i in rng.permutation(len(out))]


def open_training_store(cfg: DataConfig, path: str | Path) -> TokenStore:
    """Open ``data.store``; it replaces every other data source."""
    given = [k for k in ("corpus", "mono", "parallel", "valid_mono", "valid_parallel")
             if getattr(cfg, k)]  # fmt: skip
    if given:
        raise CrossalignError(
            f"data.store is set together with data.{', data.'.join(given)}: a store holds its "
            f"sources already; drop one of them"
        )
    return open_store(path)


def train_config_tokenizer(cfg: RunConfig, sources: Sources | None = None) -> Any:
    """The tokenizer ``crossalign train`` trains for ``cfg`` when it names none: ``tokenizer.*``
    settings on a sample of ``cfg.data``'s sources (``sources``, else resolved from it) drawn
    with ``train.seed``. Streamed datasets cannot train one."""
    from crossalign.data.tokenizer import train_tokenizer_on

    sources = sources if sources is not None else resolve_sources(cfg.data)
    if any(is_streaming(spec) for spec in sources.mono.values()):
        raise CrossalignError(
            "a streamed dataset cannot train the tokenizer: set tokenizer.path (or "
            "model.path) to a trained one, e.g. from a run on a sample of the data"
        )
    tc = cfg.tokenizer
    return train_tokenizer_on(
        tokenizer_sample(sources, tc.alpha, tc.max_sentences, cfg.train.seed), tc
    )


def write_config_tokenizer(cfg: RunConfig, out: str | Path) -> str:
    """``crossalign data tokenizer``: train the tokenizer ``crossalign train`` would train for
    ``cfg`` and save it to ``out`` (replaced atomically); returns a summary line. Runs given
    ``tokenizer.path=OUT`` then share it (and a co-occurrence matrix counted with it)."""
    from crossalign.fileio import atomic_dir

    tokenizer = train_config_tokenizer(cfg)
    with atomic_dir(Path(out)) as tmp:
        tokenizer.save_pretrained(tmp)
    return f"wrote {out}: {cfg.tokenizer.kind} tokenizer, {len(tokenizer):,} tokens"


def write_tokenizer(o: TokenizerOptions) -> str:
    """``crossalign data tokenizer``: ``write_config_tokenizer`` for the run config ``o`` names
    (``o.config`` with ``o.overrides``); returns its summary line."""
    from crossalign.config import load_config

    return write_config_tokenizer(load_config(o.config, o.overrides), o.out)


def tokenize_sources(
    cfg: RunConfig,
    out: str | Path,
    tokenizer_path: str | None = None,
    num_proc: int = 1,
    shard: tuple[int, int] = (0, 1),
) -> str:
    """``crossalign data tokenize``: tokenize ``cfg.data``'s sources into the store ``out``
    with the tokenizer at ``tokenizer_path`` (else ``tokenizer.path``, else ``model.path``).
    Returns a summary line per part when the store is complete, else what is left."""
    from crossalign.data.tokenizer import load_tokenizer

    path = tokenizer_path or cfg.tokenizer.path or cfg.model.path
    if not path:
        raise CrossalignError(
            "crossalign data tokenize needs a tokenizer: --tokenizer DIR (a saved tokenizer, "
            "e.g. runs/NAME/tokenizer) or tokenizer.path=DIR"
        )
    if num_proc < 1:
        raise CrossalignError(f"--num-proc {num_proc} must be >= 1")
    tokenizer = load_tokenizer(path)
    listed = store_sources(resolve_sources(cfg.data))
    build_store(listed, tokenizer, out, store_key(listed, tokenizer), num_proc, shard)
    missing = missing_shards(out)
    if missing:
        n = shard[1]
        return f"wrote shard {shard[0]}/{n} of {out}; still to run: " + ", ".join(
            f"--shard {k}/{n}" for k in missing
        )
    return describe_store(open_store(out))


def describe_store(store: TokenStore) -> str:
    """A few lines: per part and name, sentences (or pairs) and tokens; the store's size."""
    lines = []
    for part in ("mono", "parallel", "valid_mono", "valid_parallel"):
        for name, text in getattr(store, part).items():
            tokens = int(text.pieces.tokens.sum())
            unit = "pairs" if "parallel" in part else "sentences"
            lines.append(
                f"{part} {name}: {text.pieces.sentences.sum():,} {unit}, {tokens:,} tokens"
            )
    size = sum(f.stat().st_size for f in store.path.rglob("*.npy"))
    lines.append(f"store {store.path}: {size / 2**20:,.1f} MiB; train with data.store=PATH")
    return "\n".join(lines)
