"""Align the words of sentence pairs with a Hugging Face encoder, many pairs per forward pass."""

from __future__ import annotations

import itertools
import sys
import time
from collections.abc import Iterable, Iterator, Sequence, Sized
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import torch
from torch import nn
from tqdm import tqdm
from transformers import PreTrainedModel, PreTrainedTokenizerBase

from crossalign.align.config import AlignConfig
from crossalign.align.extract import subword_alignment
from crossalign.align.words import (
    Alignment,
    Pieces,
    pair_scores,
    scored_link_lists,
    to_pieces,
    word_links,
    word_max,
)
from crossalign.data.pair_layout import pair_row, special_count, truncate_pair
from crossalign.errors import CrossalignError
from crossalign.models.load import (
    input_limit,
    language_type_id,
    load_model_and_tokenizer,
    model_languages,
    position_offset,
)

Links = list[tuple[int, int]]
Pair = tuple[list[str], list[str]]
"""A sentence pair as whitespace-split words: (source, target)."""


@dataclass
class PairBatch:
    """Model inputs of a batch of B pairs and where each side's subword states come out."""

    inputs: dict[str, torch.Tensor]
    """input_ids, attention_mask [R, L] (R = B in one sequence, 2B separate), optionally
    position_ids and token_type_ids."""
    src_row: torch.Tensor
    """[B] row of the model output holding the source subwords."""
    src_col: torch.Tensor
    """[B, m] their positions in that row (0 at padding)."""
    tgt_row: torch.Tensor
    """[B] row holding the target subwords."""
    tgt_col: torch.Tensor
    """[B, n] their positions (0 at padding)."""
    src_words: torch.Tensor
    """[B, m] word of each source subword, -1 at padding."""
    tgt_words: torch.Tensor
    """[B, n] word of each target subword, -1 at padding."""
    n_src_words: int
    n_tgt_words: int
    src_lengths: torch.Tensor
    """[B] words of each source sentence (those kept by truncation)."""
    tgt_lengths: torch.Tensor
    """[B] words of each target sentence."""


@dataclass
class WordAlignments:
    """Word links of a batch of B pairs with their scores (see ``WordAligner.word_alignment``)."""

    links: torch.Tensor
    """bool [B, Ws, Wt]."""
    scores: torch.Tensor
    """float [B, Ws, Wt]: each link's score, the largest of its linked subword pairs (0 where
    not linked)."""
    pair_scores: torch.Tensor
    """float [B]: ``crossalign.align.words.pair_scores``."""

    def alignments(self) -> list[Alignment]:
        """One ``Alignment`` per pair, in batch order."""
        return [
            Alignment(links, score)
            for links, score in zip(
                scored_link_lists(self.links, self.scores), self.pair_scores.tolist()
            )
        ]


@contextmanager
def _one_thread(device: torch.device) -> Iterator[None]:
    """Run CPU tensor ops on one thread: extraction is many small ops on [B, m, n] tensors,
    where splitting each op over threads costs more than it saves (much more on a busy machine)."""
    if device.type != "cpu":
        yield
        return
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)


def check_layers(layers: Sequence[int], n_layers: int, model: str = "the model") -> None:
    """Raise CrossalignError unless every layer is in 0..n_layers (0 = embeddings)."""
    if not layers:
        raise CrossalignError("no layer given; e.g. --layers 8 or --layers all")
    bad = [x for x in layers if not 0 <= x <= n_layers]
    if bad:
        raise CrossalignError(f"layer {bad[0]} does not exist: {model} has layers 0-{n_layers}")


def _padded(rows: list[list[int]], value: int) -> torch.Tensor:
    """[len(rows), longest] long tensor of ``rows``, right-padded with ``value``."""
    tensors = [torch.tensor(r, dtype=torch.long) for r in rows]
    if not any(len(t) for t in tensors):
        return torch.full((len(rows), 0), value, dtype=torch.long)
    return nn.utils.rnn.pad_sequence(tensors, batch_first=True, padding_value=value)


class WordAligner:
    """Word links of whitespace-tokenized sentence pairs from a layer of an encoder.

    Long sentences are truncated, never windowed: each side keeps its first ``max_pieces``
    subwords (the model's ``max_position_embeddings`` less the position offset and the two
    special tokens; with ``concat`` encoding both sides together keep ``pair_budget``, the
    longer side cut first), and only the words those subwords belong to can be linked; the words
    after them get no links. Time and memory stay bounded by ``max_pieces`` however long a
    line is. ``truncated`` counts the pairs cut so far (``truncation_warning`` says so).
    """

    def __init__(
        self,
        model: PreTrainedModel,
        tokenizer: PreTrainedTokenizerBase,
        cfg: AlignConfig,
        languages: tuple[str, str] | None = None,
    ) -> None:
        self.model = model.eval()
        self.tokenizer = tokenizer
        self.cfg = cfg
        self.device = next(model.parameters()).device
        cls_id, sep_id = tokenizer.cls_token_id, tokenizer.sep_token_id
        self.cls_id = cls_id if cls_id is not None else tokenizer.bos_token_id
        self.sep_id = sep_id if sep_id is not None else tokenizer.eos_token_id
        if self.cls_id is None or self.sep_id is None or tokenizer.pad_token_id is None:
            raise CrossalignError("the tokenizer needs cls (or bos), sep (or eos) and pad tokens")
        self.pad_id = tokenizer.pad_token_id
        self.offset = position_offset(model)
        self.max_pieces = input_limit(model, specials=2)
        self.pair_budget = input_limit(model, specials=special_count("concat"))
        """Subwords of both sentences that one ``concat`` row holds."""
        self.type_ids = (
            tuple(language_type_id(model, x) for x in languages)
            if languages and model_languages(model)
            else None
        )
        self.truncated = 0
        """Pairs with a side cut to ``max_pieces`` subwords so far (their last words stay
        unaligned)."""
        self.pairs = 0
        """Pairs tokenized so far."""
        self.seconds = {"tokenize": 0.0, "encode": 0.0, "extract": 0.0}
        """Time spent so far in each stage of ``align``."""

    def collate(self, pairs: Sequence[tuple[Pieces, Pieces]]) -> PairBatch:
        """Model inputs for B pairs by ``cfg.encoding``: one row ``[cls] src [sep] [cls] tgt
        [sep]`` per pair with positions restarting at the target (``tlm``), one row ``[cls]
        src [sep] tgt [sep]`` with continuous positions (``concat``), or rows ``[cls] src
        [sep]`` then rows ``[cls] tgt [sep]`` (``separate``)."""
        src = [s for s, _ in pairs]
        tgt = [t for _, t in pairs]
        b = len(pairs)
        encoding = self.cfg.encoding
        if encoding == "separate":
            rows = [[self.cls_id, *p.ids, self.sep_id] for p in src + tgt]
            sides = [[0] * len(r) for r in rows[:b]] + [[1] * len(r) for r in rows[b:]]
            inputs = {}
            tgt_first = [1] * b
            src_row, tgt_row = torch.arange(b), torch.arange(b, 2 * b)
        else:
            built = [pair_row(s.ids, t.ids, self.cls_id, self.sep_id, encoding) for s, t in pairs]
            rows = [r.ids for r in built]
            sides = [r.segments for r in built]
            inputs = {"position_ids": self.offset + _padded([r.positions for r in built], 0)}
            tgt_first = [r.tgt_first for r in built]
            src_row = tgt_row = torch.arange(b)
        side = _padded(sides, -1)
        inputs["input_ids"] = _padded(rows, self.pad_id)
        inputs["attention_mask"] = (side >= 0).long()
        if self.type_ids is not None:
            inputs["token_type_ids"] = torch.where(side == 1, self.type_ids[1], self.type_ids[0])
        src_words = _padded([s.words for s in src], -1)
        tgt_words = _padded([t.words for t in tgt], -1)
        src_col = 1 + torch.arange(src_words.shape[1]).expand(b, -1)
        tgt_col = torch.tensor(tgt_first)[:, None] + torch.arange(tgt_words.shape[1])
        return PairBatch(
            inputs=inputs,
            src_row=src_row,
            src_col=src_col.masked_fill(src_words < 0, 0),
            tgt_row=tgt_row,
            tgt_col=tgt_col.masked_fill(tgt_words < 0, 0),
            src_words=src_words,
            tgt_words=tgt_words,
            n_src_words=max(s.n_words for s in src),
            n_tgt_words=max(t.n_words for t in tgt),
            src_lengths=torch.tensor([s.n_words for s in src]),
            tgt_lengths=torch.tensor([t.n_words for t in tgt]),
        )

    @torch.inference_mode()
    def hidden_states(self, batch: PairBatch) -> tuple[torch.Tensor, ...]:
        """The encoder's hidden states of the batch: (embeddings, layer 1, ...), each [R, L, d]."""
        inputs = {k: v.to(self.device) for k, v in batch.inputs.items()}
        with torch.autocast(self.device.type, dtype=torch.bfloat16, enabled=self.cfg.bf16):
            return self.model(**inputs, output_hidden_states=True).hidden_states

    @torch.inference_mode()
    def word_alignment(self, states: torch.Tensor, batch: PairBatch) -> WordAlignments:
        """Word links of the batch from the states of one layer, with the score of each link
        (the largest score of its linked subword pairs) and of each pair (``pair_scores`` of
        the mean directional softmax probabilities of the links).

        states [R, L, d] -> ``WordAlignments`` of [B, n_src_words, n_tgt_words] tensors (on
        the CPU).
        """
        dev = states.device
        src = states[batch.src_row.to(dev)[:, None], batch.src_col.to(dev)]  # [B, m, d]
        tgt = states[batch.tgt_row.to(dev)[:, None], batch.tgt_col.to(dev)]  # [B, n, d]
        src_words, tgt_words = batch.src_words.to(dev), batch.tgt_words.to(dev)
        cfg = self.cfg
        n_words = (src_words, tgt_words, batch.n_src_words, batch.n_tgt_words)
        with _one_thread(dev):
            sub = subword_alignment(
                src.float(),
                tgt.float(),
                src_words >= 0,
                tgt_words >= 0,
                cfg.method,
                cfg.sinkhorn_iters,
                cfg.mu,
                cfg.eps,
                cfg.filter_iters,
                cfg.alpha,
                cfg.sinkhorn_order,
                cfg.ot_filter,
                cfg.softmax_threshold,
            )
            links = word_links(sub.links, *n_words)
            scores = word_max(sub.scores.masked_fill(~sub.links, 0.0), *n_words)
            probs = scores
            if sub.probs is not sub.scores:
                probs = word_max(sub.probs.masked_fill(~sub.links, 0.0), *n_words)
            pairs = pair_scores(probs, batch.src_lengths.to(dev), batch.tgt_lengths.to(dev))
        return WordAlignments(links.cpu(), scores.cpu(), pairs.cpu())

    def word_links(self, states: torch.Tensor, batch: PairBatch) -> torch.Tensor:
        """The word links of ``word_alignment``: states [R, L, d] -> bool [B, Ws, Wt] (CPU)."""
        return self.word_alignment(states, batch).links

    def _row_length(self, src: Pieces, tgt: Pieces) -> int:
        """Subwords of the longest model input row of a pair: both sides (one sequence) or
        the longer side (separate)."""
        n_src, n_tgt = len(src.ids), len(tgt.ids)
        return max(n_src, n_tgt) if self.cfg.encoding == "separate" else n_src + n_tgt

    def pieces(
        self, pairs: Sequence[tuple[list[str], list[str]]]
    ) -> tuple[list[Pieces], list[Pieces]]:
        """Subwords of the pairs' source and target sentences, cut to what the model's
        positions hold: ``max_pieces`` per side, and with ``concat`` encoding both sides
        together to ``pair_budget`` (the longer side first); counts the pairs cut in
        ``truncated``."""
        src, tgt = (
            to_pieces(self.tokenizer, [p[side] for p in pairs], self.cfg.subwords)
            for side in (0, 1)
        )
        limit = self.max_pieces
        kept = [(min(len(s.ids), limit), min(len(t.ids), limit)) for s, t in zip(src, tgt)]
        if self.cfg.encoding == "concat":
            kept = [truncate_pair(ns, nt, self.pair_budget) for ns, nt in kept]
        self.truncated += sum(
            ns < len(s.ids) or nt < len(t.ids) for (ns, nt), s, t in zip(kept, src, tgt)
        )
        self.pairs += len(pairs)
        return (
            [p.truncated(ns) for p, (ns, _) in zip(src, kept)],
            [p.truncated(nt) for p, (_, nt) in zip(tgt, kept)],
        )

    def truncation_warning(self) -> str | None:
        """A one-line warning counting the pairs truncated so far, or None if none was."""
        if not self.truncated:
            return None
        if self.cfg.encoding == "concat":
            return (
                f"warning: {self.truncated} of {self.pairs} pairs were longer than the model's "
                f"positions hold ({self.max_pieces} subwords per sentence, {self.pair_budget} "
                "per pair in one sequence); the words after the subwords kept are unaligned"
            )
        return (
            f"warning: {self.truncated} of {self.pairs} pairs had a sentence longer than the "
            f"model's {self.max_pieces} subwords; it was truncated and the words after its first "
            f"{self.max_pieces} subwords are unaligned"
        )

    def align_chunks(
        self,
        pairs: Iterable[Pair],
        layers: Sequence[int],
        progress: bool = False,
        chunk_pairs: int | None = None,
    ) -> Iterator[tuple[list[Pair], dict[int, list[Alignment]]]]:
        """Alignments of the pairs a chunk of ``chunk_pairs`` (default ``64 * batch_size``)
        pairs at a time: for each chunk, its pairs and, in input order, one ``Alignment`` per
        pair at each layer (0 = embeddings). One forward pass per batch serves all layers;
        ``pairs`` is read lazily, so memory stays bounded by the chunk however many pairs it
        yields.

        Pairs are tokenized a chunk at a time and sorted within the chunk by the length their
        rows are padded to, so a batch holds pairs of similar length and little padding. A
        sentence longer than ``max_pieces`` subwords is truncated (see the class docstring).
        """
        check_layers(layers, self.model.config.num_hidden_layers)
        chunk = chunk_pairs or 64 * self.cfg.batch_size
        total = len(pairs) if isinstance(pairs, Sized) else None
        it = iter(pairs)
        with tqdm(total=total, unit="pair", disable=not progress, file=sys.stderr) as bar:
            while part := list(itertools.islice(it, chunk)):
                t0 = time.perf_counter()
                src, tgt = self.pieces(part)
                order = sorted(range(len(part)), key=lambda k: -self._row_length(src[k], tgt[k]))
                self.seconds["tokenize"] += time.perf_counter() - t0
                placed: dict[int, dict[int, Alignment]] = {x: {} for x in layers}
                for b0 in range(0, len(order), self.cfg.batch_size):
                    t0 = time.perf_counter()
                    idx = order[b0 : b0 + self.cfg.batch_size]
                    batch = self.collate([(src[k], tgt[k]) for k in idx])
                    states = self.hidden_states(batch)
                    if self.device.type == "cuda":
                        torch.cuda.synchronize(self.device)
                    t1 = time.perf_counter()
                    for layer in layers:
                        found = self.word_alignment(states[layer], batch).alignments()
                        placed[layer].update(zip(idx, found))
                    t2 = time.perf_counter()
                    self.seconds["encode"] += t1 - t0
                    self.seconds["extract"] += t2 - t1
                    bar.update(len(idx))
                yield part, {x: [placed[x][k] for k in range(len(part))] for x in layers}

    def align(
        self,
        pairs: Sequence[Pair],
        layers: Sequence[int],
        progress: bool = False,
    ) -> dict[int, list[Links]]:
        """Word links of every pair at each layer (0 = embeddings), as sorted ``(i, j)`` lists
        in input order (``align_chunks`` without the scores)."""
        results: dict[int, list[Links]] = {x: [] for x in layers}
        for _, chunk in self.align_chunks(pairs, layers, progress):
            for layer, found in chunk.items():
                results[layer].extend([(x.src, x.tgt) for x in a.links] for a in found)
        return results

    def align_stream(
        self, pairs: Iterable[Pair], layer: int, progress: bool = False
    ) -> Iterator[tuple[Pair, Alignment]]:
        """Each pair with its ``Alignment`` at ``layer``, in input order, as the pairs are
        read (``align_chunks``)."""
        for part, chunk in self.align_chunks(pairs, [layer], progress):
            yield from zip(part, chunk[layer])


def load_aligner(
    path: str | Path,
    cfg: AlignConfig,
    layers: Sequence[int] | None = None,
    languages: tuple[str, str] | None = None,
    device: str | None = None,
) -> WordAligner:
    """A ``WordAligner`` for the ``save_pretrained`` model and tokenizer in ``path``.

    With ``layers``, only the first ``max(layers)`` (>= 1) transformer layers are kept (a BERT-style
    ``encoder.layer`` list is cut), since hidden state L depends on no later layer; without,
    all are. ``languages`` (source, target) picks the language embeddings of a model trained
    with them. ``device`` defaults to CUDA when available.
    """
    # HF reports hidden states (the embeddings' too) through its layers: keep at least one
    keep = max([1, *layers]) if layers is not None else None
    model, tokenizer = load_model_and_tokenizer(
        path, head="encoder", device=device, keep_layers=keep, key="model"
    )
    if layers is not None:  # load_model rejected a layer beyond the model's last
        check_layers(layers, model.config.num_hidden_layers, str(path))
    return WordAligner(model, tokenizer, cfg, languages)
