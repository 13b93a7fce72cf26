"""One streaming pass from multilingual text to the token co-occurrence matrix X.

X[a, b] = Σ_lang c_lang · Σ over positions t, k of one line of language ``lang`` with
1 ≤ |t − k| ≤ n, token_t = a, token_k = b, of 1 / (|t − k| + 1)

— the window weights [c/(n+1), …, c/2, 0, c/2, …, c/(n+1)] of Ai & Fang (2023, §3), with
c_lang = C_ref / C_lang (C = a language's number of tokens). A window never crosses a line.
X is symmetric; a position is never paired with itself (two equal tokens at distance d ≥ 1
count, from both sides, like GloVe's symmetric ``cooccur``).

How it scales (GloVe's ``cooccur`` without its dense table, vectorised in numpy):

- text is read in chunks of lines; each chunk is tokenized with one batched fast-tokenizer
  call (or parsed, for pre-tokenized id files), and its position pairs are encoded as one
  int64 each (smaller token · V + larger token, distance in the low bits), sorted and
  run-length reduced (``count_pairs``): no Python loop over tokens or pairs;
- each process keeps its counts as sorted (key, value) runs in key-range buckets, merged
  like a binary counter (``CountRuns``), so memory follows the number of distinct pairs,
  never V²;
- ``--num-proc`` processes count disjoint chunks; their sorted shards are merged at the end,
  the language scales applied, and the upper triangle of X written as CSR arrays
  (``CountRuns.to_csr``).
"""

from __future__ import annotations

import json
import multiprocessing as mp
import os
import tempfile
import time
import warnings
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from crossalign.cooc.counting import (
    CountRuns,
    check_key_space,
    count_pairs,
    distance_weights,
    merge_counts,
    upper_csr,
)
from crossalign.data.lines import clean_line, decode_line, open_text
from crossalign.errors import CrossalignError

if TYPE_CHECKING:
    from crossalign.cooc.options import CoocBuildOptions

CHUNK_BYTES = 4 << 20
"""Text per chunk (about 1M tokens of text, 700k of ids), less for windows over 10: the unit
of tokenization, counting and dispatch."""


@dataclass
class Chunk:
    """Lines of one language, in file order."""

    lang: int
    """Index of the language in the build's language list."""
    path: str
    line_numbers: np.ndarray
    """[lines] 1-based line numbers in ``path``, for error messages."""
    lines: list[bytes] = field(default_factory=list)


def iter_chunks(
    sources: list[tuple[str, list[str]]], chunk_bytes: int = CHUNK_BYTES
) -> Iterator[tuple[Chunk, int]]:
    """Chunks of stripped, non-empty lines per language, with exact duplicate lines of a
    language dropped (as training reads a language's files); yields (chunk, bytes read).

    sources: (language, files) in language order. Duplicates are found by a 64-bit hash of
    the line, so the set costs about 70 bytes per distinct line of the largest language.
    """
    for lang_index, (_, paths) in enumerate(sources):
        seen: set[int] = set()
        for path in paths:
            lines: list[bytes] = []
            numbers: list[int] = []
            size = read = 0
            with open_text(path) as f:
                for number, raw in enumerate(f, 1):
                    read += len(raw)
                    line = clean_line(raw, path, number).strip()
                    if not line:
                        continue
                    h = hash(line)
                    if h in seen:
                        continue
                    seen.add(h)
                    lines.append(line)
                    numbers.append(number)
                    size += len(line)
                    if size >= chunk_bytes:
                        yield (
                            Chunk(lang_index, path, np.array(numbers, dtype=np.int64), lines),
                            read,
                        )
                        lines, numbers, size, read = [], [], 0, 0
            if lines or read:
                yield Chunk(lang_index, path, np.array(numbers, dtype=np.int64), lines), read
        del seen


class Encoder:
    """Turns a chunk into (ids [N] int64, lengths [lines]): a batched call of a Hugging Face
    ``tokenizers`` tokenizer (no special tokens), or, with ``tokenizer_json=None``, parsing
    pre-tokenized lines of whitespace-separated integer ids."""

    def __init__(self, tokenizer_json: str | None, vocab_size: int) -> None:
        self.vocab_size = vocab_size
        self.tokenizer = None
        if tokenizer_json is not None:
            from tokenizers import Tokenizer

            self.tokenizer = Tokenizer.from_str(tokenizer_json)

    def __call__(self, chunk: Chunk) -> tuple[np.ndarray, np.ndarray]:
        if self.tokenizer is not None:
            return self._tokenize(chunk)
        return self._parse(chunk)

    def _tokenize(self, chunk: Chunk) -> tuple[np.ndarray, np.ndarray]:
        try:
            texts = [line.decode("utf-8") for line in chunk.lines]
        except UnicodeDecodeError:
            for number, line in zip(chunk.line_numbers, chunk.lines):
                decode_line(line, chunk.path, int(number))
            raise
        encode = getattr(self.tokenizer, "encode_batch_fast", self.tokenizer.encode_batch)
        encodings = encode(texts, add_special_tokens=False)
        seqs = [e.ids for e in encodings]
        lengths = np.fromiter(map(len, seqs), np.int64, len(seqs))
        ids = np.fromiter((t for s in seqs for t in s), np.int64, int(lengths.sum()))
        return ids, lengths

    def _parse(self, chunk: Chunk) -> tuple[np.ndarray, np.ndarray]:
        text = b"\n".join(chunk.lines) + b"\n"
        raw = np.frombuffer(text, dtype=np.uint8)
        space = (raw == 32) | (raw == 10) | (raw == 9) | (raw == 13)
        starts = np.flatnonzero(~space & np.concatenate(([True], space[:-1])))
        lengths = np.diff(np.searchsorted(starts, np.flatnonzero(raw == 10)), prepend=0)
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            try:
                ids = np.fromstring(text, dtype=np.int64, sep=" ")
            except (ValueError, DeprecationWarning):
                ids = None
        if (
            ids is None
            or len(ids) != len(starts)
            or (len(ids) and (ids.min() < 0 or ids.max() >= self.vocab_size))
        ):
            self._report_bad_line(chunk)
        return ids, lengths

    def _report_bad_line(self, chunk: Chunk) -> None:
        """Raise naming the first line of ``chunk`` that is not valid token ids."""
        for number, line in zip(chunk.line_numbers, chunk.lines):
            for token in line.split():
                if not token.isdigit() or int(token) >= self.vocab_size:
                    raise CrossalignError(
                        f"{chunk.path}:{number}: expected whitespace-separated token ids in "
                        f"[0, {self.vocab_size}) (pre-tokenized input), got "
                        f"'{token[:30].decode('utf-8', 'replace')}'"
                    )
        raise CrossalignError(
            f"{chunk.path}: cannot parse the token ids near line {chunk.line_numbers[0]}"
        )


# --------------------------------------------------------------------------------------
# The pass: one process, or workers each counting a shard of the chunks.


@dataclass
class BuildResult:
    """Counts of one build before writing: CSR arrays and what the card records."""

    indptr: np.ndarray
    indices: np.ndarray
    data: np.ndarray
    tokens: dict[str, int]
    """Tokens counted per language (C_lang)."""
    lines: dict[str, int]
    scales: dict[str, float]
    """c_lang = C_ref / C_lang."""
    reference: str
    seconds: float


def _count_shard(
    chunks: Iterator[Chunk], encoder: Encoder, window: int, n_lang: int
) -> tuple[CountRuns, np.ndarray, np.ndarray]:
    """Count chunks; returns (counts, tokens per language, lines per language)."""
    runs = CountRuns(n_lang)
    tokens = np.zeros(n_lang, np.int64)
    lines = np.zeros(n_lang, np.int64)
    for chunk in chunks:
        if not chunk.lines:
            continue
        ids, lengths = encoder(chunk)
        tokens[chunk.lang] += len(ids)
        lines[chunk.lang] += len(lengths)
        runs.add(*count_pairs(ids, lengths, window, encoder.vocab_size, chunk.lang, n_lang))
    return runs, tokens, lines


def _queue_chunks(queue: mp.Queue) -> Iterator[Chunk]:
    while (chunk := queue.get()) is not None:
        yield chunk


def _worker(
    queue: mp.Queue,
    results: mp.Queue,
    shard_dir: str,
    index: int,
    tokenizer_json: str | None,
    vocab_size: int,
    window: int,
    n_lang: int,
) -> None:
    """A counting process: chunks from ``queue`` until None, shard saved as .npy files."""
    try:
        encoder = Encoder(tokenizer_json, vocab_size)
        runs, tokens, lines = _count_shard(_queue_chunks(queue), encoder, window, n_lang)
        keys, values = runs.result()
        np.save(Path(shard_dir) / f"keys-{index}.npy", keys)
        np.save(Path(shard_dir) / f"values-{index}.npy", values)
        results.put((index, tokens, lines, None))
    except BaseException as e:  # reported to the parent, which stops the build
        results.put((index, None, None, str(e) if isinstance(e, CrossalignError) else repr(e)))
        while queue.get() is not None:  # drain so the reader never blocks
            pass


def _count_parallel(
    chunks: Iterator[Chunk],
    tokenizer_json: str | None,
    vocab_size: int,
    window: int,
    n_lang: int,
    num_proc: int,
) -> tuple[CountRuns, np.ndarray, np.ndarray]:
    """Count with ``num_proc`` worker processes (spawned, each with its own tokenizer) and
    merge their sorted shards."""
    ctx = mp.get_context("spawn")
    queue: mp.Queue = ctx.Queue(maxsize=2 * num_proc)
    results: mp.Queue = ctx.Queue()
    with tempfile.TemporaryDirectory(prefix="cooc-shards-") as shard_dir:
        workers = [
            ctx.Process(
                target=_worker,
                args=(queue, results, shard_dir, i, tokenizer_json, vocab_size, window, n_lang),
                daemon=True,
            )
            for i in range(num_proc)
        ]
        for w in workers:
            w.start()
        try:
            for chunk in chunks:
                queue.put(chunk)
        finally:
            for _ in workers:
                queue.put(None)
        reports = []
        for _ in workers:
            while True:
                try:
                    reports.append(results.get(timeout=5))
                    break
                except Exception:  # queue.Empty: check that the workers are alive
                    dead = [w for w in workers if w.exitcode not in (None, 0)]
                    if dead:
                        raise CrossalignError(
                            f"a counting process died (exit code {dead[0].exitcode}); "
                            f"if it ran out of memory, use fewer --num-proc"
                        ) from None
        for w in workers:
            w.join()
        errors = [e for *_, e in reports if e]
        if errors:
            raise CrossalignError(errors[0])
        tokens = sum(r[1] for r in reports)
        lines = sum(r[2] for r in reports)
        counts = CountRuns(n_lang)
        for i in range(num_proc):  # memory-mapped: added bucket by bucket
            counts.add(
                np.load(Path(shard_dir) / f"keys-{i}.npy", mmap_mode="r"),
                np.load(Path(shard_dir) / f"values-{i}.npy", mmap_mode="r"),
            )
    return counts, tokens, lines


def count_cooccurrences(
    sources: list[tuple[str, list[str]]],
    vocab_size: int,
    window: int = 2,
    tokenizer_json: str | None = None,
    reference: str | None = None,
    num_proc: int = 1,
    chunk_bytes: int | None = None,
    progress: bool = False,
) -> BuildResult:
    """Co-occurrence matrix X of multilingual text, in one streaming pass.

    sources: (language, [files]) per language, one sentence or paragraph per line;
    tokenizer_json: a Hugging Face ``tokenizers`` JSON (``None``: files hold whitespace-
    separated token ids); reference: the language whose token count C_ref the others are
    scaled to (default ``en`` if present, else the language with most tokens).
    """
    if window < 1:
        raise CrossalignError(f"--window {window} must be >= 1")
    langs = [lang for lang, _ in sources]
    if len(set(langs)) != len(langs):
        raise CrossalignError(f"language listed twice in {langs}")
    if reference is not None and reference not in langs:
        raise CrossalignError(
            f"reference language '{reference}' has no text; languages: {', '.join(langs)}"
        )
    for _, paths in sources:
        for p in paths:
            open_text(p).close()
    check_key_space(vocab_size, window, len(langs))
    start = time.perf_counter()
    total = sum(os.path.getsize(p) for _, paths in sources for p in paths)
    chunk_bytes = chunk_bytes or max(CHUNK_BYTES // 4, CHUNK_BYTES * 10 // max(window, 10))
    chunks = _progress(iter_chunks(sources, chunk_bytes), total, progress)
    if num_proc <= 1:
        encoder = Encoder(tokenizer_json, vocab_size)
        counts, tokens, lines = _count_shard(chunks, encoder, window, len(langs))
    else:
        counts, tokens, lines = _count_parallel(
            chunks, tokenizer_json, vocab_size, window, len(langs), num_proc
        )
    empty = [lang for lang, n in zip(langs, tokens) if n == 0]
    if empty:
        files = [p for lang, paths in sources if lang in empty for p in paths]
        raise CrossalignError(
            f"no tokens for language(s) {', '.join(empty)}: their files are empty "
            f"({', '.join(map(str, files))})"
        )
    if reference is None:
        reference = "en" if "en" in langs else langs[int(np.argmax(tokens))]
    c_ref = tokens[langs.index(reference)]
    scales = c_ref / tokens.astype(np.float64)
    indptr, indices, data = counts.to_csr(scales, vocab_size)
    return BuildResult(
        indptr=indptr,
        indices=indices,
        data=data,
        tokens={lang: int(n) for lang, n in zip(langs, tokens)},
        lines={lang: int(n) for lang, n in zip(langs, lines)},
        scales={lang: float(s) for lang, s in zip(langs, scales)},
        reference=reference,
        seconds=time.perf_counter() - start,
    )


def _progress(chunks: Iterator[tuple[Chunk, int]], total: int, show: bool) -> Iterator[Chunk]:
    """Chunks, with a tqdm bar over bytes read when ``show``."""
    from tqdm.auto import tqdm

    with tqdm(
        total=total, unit="B", unit_scale=True, desc="cooc", disable=not show, mininterval=1.0
    ) as bar:
        for chunk, size in chunks:
            yield chunk
            bar.update(size)


def load_vocabulary(tokenizer_dir: str | os.PathLike) -> tuple[str, dict[str, int]]:
    """(tokenizers JSON, token → id map with added tokens) of a Hugging Face fast tokenizer
    directory. Reads ``tokenizer.json`` with the json module when present (no tokenizer
    object is built: pre-tokenized input never needs one), else loads the tokenizer with
    transformers."""
    file = Path(tokenizer_dir) / "tokenizer.json"
    if file.is_file():
        text = file.read_text(encoding="utf-8")
        try:
            spec = json.loads(text)
            model = spec["model"]
            if model["type"] == "Unigram":  # a list of [piece, score]; the id is the index
                vocab = {piece: i for i, (piece, _) in enumerate(model["vocab"])}
            else:  # BPE, WordPiece, WordLevel: piece -> id
                vocab = dict(model["vocab"])
            for token in spec.get("added_tokens") or []:
                vocab[token["content"]] = token["id"]
        except (json.JSONDecodeError, KeyError, TypeError, ValueError) as e:
            raise CrossalignError(f"{file}: not a tokenizers JSON file ({e})") from None
        return text, vocab
    from crossalign.data.tokenizer import load_tokenizer

    tok = load_tokenizer(tokenizer_dir)
    return tok.backend_tokenizer.to_str(), tok.get_vocab()


def build_matrix(
    out_dir: str | os.PathLike,
    sources: list[tuple[str, list[str]]],
    tokenizer_dir: str | os.PathLike,
    window: int = 2,
    reference: str | None = None,
    pretokenized: bool = False,
    num_proc: int = 1,
    log_fp16: bool = False,
    command: str = "",
    progress: bool = False,
) -> dict:
    """Count X over ``sources`` (see ``count_cooccurrences``) with the Hugging Face tokenizer
    in ``tokenizer_dir`` and write the matrix directory ``out_dir`` atomically (see
    ``crossalign.cooc.matrix``). With ``pretokenized`` the files hold that tokenizer's ids.
    Returns the written meta."""
    from crossalign.cooc.matrix import vocabulary_fingerprint, write_matrix

    tokenizer_json, vocab = load_vocabulary(tokenizer_dir)
    vocab_size = max(vocab.values()) + 1
    fingerprint = vocabulary_fingerprint(vocab)
    del vocab
    result = count_cooccurrences(
        sources,
        vocab_size,
        window=window,
        tokenizer_json=None if pretokenized else tokenizer_json,
        reference=reference,
        num_proc=num_proc,
        progress=progress,
    )
    files = dict(sources)
    meta = {
        "window": window,
        "weights": "1/(d+1) for a neighbour at distance d, both sides, within a line",
        "reference": result.reference,
        "languages": {
            lang: {
                "tokens": result.tokens[lang],
                "lines": result.lines[lang],
                "scale": result.scales[lang],
                "files": [str(f) for f in files[lang]],
            }
            for lang in result.tokens
        },
        "tokenizer": {
            "path": str(Path(tokenizer_dir).resolve()),
            "fingerprint": fingerprint,
        },
        "pretokenized": pretokenized,
        "num_proc": num_proc,
        "count_seconds": round(result.seconds, 3),
        "command": command,
    }
    return write_matrix(out_dir, result.indptr, result.indices, result.data, meta, log_fp16)


def text_sources(
    corpus: str | None, languages: str | None, texts: Sequence[str]
) -> list[tuple[str, list[str]]]:
    """(language, files) in language order from a built ``corpus`` (its train text; only the
    comma-separated ``languages`` when given) and ``LANG=FILE`` items of ``texts``."""
    from crossalign.languages import language_file

    files: dict[str, list[str]] = {}
    if corpus:
        from crossalign.data.corpora.files import resolve_corpus

        langs = [x.strip() for x in (languages or "").split(",") if x.strip()] or None
        files = {k: list(v) for k, v in resolve_corpus(corpus, langs)["mono"].items()}
    elif languages:
        raise CrossalignError("--languages selects languages of --corpus; give --corpus too")
    for item in texts:
        lang, path = language_file(item, "--text", "LANG=FILE, e.g. en=train.en")
        files.setdefault(lang, []).append(path)
    if not files:
        raise CrossalignError("no text: give --corpus DIR (from 'crossalign data ...') or --text")
    return sorted(files.items())


__all__ = [
    "BuildResult",
    "CountRuns",
    "build_from_options",
    "build_matrix",
    "count_cooccurrences",
    "count_pairs",
    "distance_weights",
    "merge_counts",
    "text_sources",
    "upper_csr",
]


def build_from_options(o: CoocBuildOptions) -> dict[str, Any]:
    """``crossalign cooc build``: ``build_matrix`` into ``o.out`` over the text of
    ``text_sources`` with the tokenizer in ``o.tokenizer`` (else the one of ``o.model``),
    recording the command line (without ``--quiet``, which changes no figure) in
    ``meta.json``. Options are checked before any text is read. Returns the written meta."""
    from crossalign.options import command_line

    tokenizer_dir = o.tokenizer or o.model
    if not tokenizer_dir:
        raise CrossalignError(
            "give the tokenizer the matrix is for: --tokenizer DIR or --model DIR"
        )
    if o.num_proc < 1:
        raise CrossalignError(f"--num-proc {o.num_proc} must be >= 1")
    sources = text_sources(o.corpus, o.languages, o.text)
    names = [f.name for f in fields(o) if f.name != "quiet"]
    command = command_line(["crossalign", "cooc", "build"], o, names)
    return build_matrix(
        o.out, sources, tokenizer_dir, o.window, o.reference, o.pretokenized, o.num_proc,
        o.log_fp16, command, not o.quiet,
    )  # fmt: skip
