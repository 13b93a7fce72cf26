"""Token and word vectors of a masked-LM: its embedding layer, or any layer's hidden states
averaged over a token's occurrences in context.

Layer 0 is the input embedding table (the model's "embedding layer", static, no position or
language embedding). Layer l >= 1 is the output of transformer layer l (``hidden_states[l]``):
a token's vector is the mean of its states over every occurrence in the given text.

A *word* (lowercase, as dictionaries list them) may be written lowercase or capitalised
(German nouns are capitalised in text and in XLM-R's vocabulary). Its surface forms are the
lowercase word and its capitalised form. Two ways to turn forms into a vector:

- ``whole`` (default, as BLI on subword vocabularies usually does): a form counts only when it
  is one vocabulary token (``▁house``); the word's vector is the mean of the vectors of its
  single-token forms, and a word with none is out of vocabulary;
- ``mean``: a form's vector is the mean of its subword vectors (a lone leading ``▁`` piece is
  dropped); the word takes the form with the fewest pieces (lowercase on a tie), so every word
  has a vector.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch
from tqdm.auto import tqdm
from transformers import PreTrainedModel, PreTrainedTokenizerBase

from crossalign.config import WORD_MODES
from crossalign.errors import CrossalignError
from crossalign.lexicon.vocab import token_counts
from crossalign.models.load import input_limit, language_type_id, load_model_and_tokenizer


@dataclass
class TokenVectors:
    """Vectors of some token ids: ``table[row_of[id]]`` for ids with ``row_of[id] >= 0``."""

    table: torch.Tensor
    """[n, H] float32."""
    row_of: torch.Tensor
    """[V] long: the row of each token id in ``table``, -1 for ids without a vector."""

    def has(self, ids: torch.Tensor) -> torch.Tensor:
        """Bool mask of ``ids`` (any shape) that have a vector."""
        return self.row_of[ids] >= 0

    def get(self, ids: torch.Tensor) -> torch.Tensor:
        """Vectors of ``ids`` [...] -> [..., H] (ids must have vectors)."""
        return self.table[self.row_of[ids]]


def embedding_layer(model: PreTrainedModel) -> TokenVectors:
    """The input embedding table as vectors of every token id (layer 0)."""
    weight = model.get_input_embeddings().weight.detach().float()
    return TokenVectors(weight, torch.arange(weight.shape[0], device=weight.device))


def encode_batches(
    tokenizer: PreTrainedTokenizerBase,
    texts: Sequence[str],
    max_length: int,
    batch_size: int,
):
    """Yield padded encodings (``input_ids``, ``attention_mask`` [B, T]) of ``texts`` in
    batches, sorted by length so padding stays small; each with the texts' original indices.
    ``texts`` are strings, or token id arrays (already tokenized, no special tokens: they get
    ``cls``/``sep`` and the same truncation)."""
    lengths = [len(t) for t in texts]
    order = sorted(range(len(texts)), key=lengths.__getitem__)
    for start in range(0, len(order), batch_size):
        idx = order[start : start + batch_size]
        if len(idx) and not isinstance(texts[idx[0]], str):
            yield idx, _id_batch([texts[i] for i in idx], tokenizer, max_length)
            continue
        enc = tokenizer(
            [texts[i] for i in idx],
            truncation=True,
            max_length=max_length,
            padding=True,
            return_tensors="pt",
        )
        yield idx, enc


def _id_batch(
    sequences: list[np.ndarray], tokenizer: PreTrainedTokenizerBase, max_length: int
) -> dict[str, torch.Tensor]:
    """``[cls] ids [sep]`` rows truncated to ``max_length`` and padded: input_ids and
    attention_mask [B, T], as the tokenizer encodes the text the ids came from."""
    rows = [
        [tokenizer.cls_token_id, *np.asarray(s[: max_length - 2]).tolist(), tokenizer.sep_token_id]
        for s in sequences
    ]
    width = max(map(len, rows))
    ids = torch.full((len(rows), width), tokenizer.pad_token_id, dtype=torch.long)
    mask = torch.zeros((len(rows), width), dtype=torch.long)
    for i, row in enumerate(rows):
        ids[i, : len(row)] = torch.tensor(row)
        mask[i, : len(row)] = 1
    return {"input_ids": ids, "attention_mask": mask}


@torch.no_grad()
def hidden_states(model: PreTrainedModel, enc, type_id: int = 0) -> tuple[torch.Tensor, ...]:
    """All hidden states (embedding output, then each layer) [B, T, H] of an encoding."""
    device = model.device
    ids = enc["input_ids"].to(device)
    out = model.base_model(
        input_ids=ids,
        attention_mask=enc["attention_mask"].to(device),
        token_type_ids=torch.full_like(ids, type_id),
        output_hidden_states=True,
    )
    return out.hidden_states


@torch.no_grad()
def contextual_token_vectors(
    model: PreTrainedModel,
    tokenizer: PreTrainedTokenizerBase,
    texts: Sequence[str],
    layers: Sequence[int],
    token_ids: torch.Tensor | None = None,
    lang: str | None = None,
    max_length: int = 128,
    batch_size: int = 32,
    progress: bool = False,
) -> dict[int, TokenVectors]:
    """Mean hidden state of each token over its occurrences in ``texts``, per layer.

    ``layers``: indices into ``hidden_states`` (1..num_layers; 0 is the contextual embedding
    output, which ``embedding_layer`` does not include). ``token_ids`` [n] restricts the tokens
    kept (default: every token of ``texts``); special tokens are never kept, and tokens never
    seen get no vector. Sums use ``index_add_`` over all positions of a batch at once; memory
    is O(len(layers) × kept tokens × H). Every tensor, the returned vectors included, is on the
    model's device.
    """
    model.eval()
    weight = model.get_input_embeddings().weight
    vocab, device = weight.shape[0], weight.device
    if token_ids is None:
        token_ids = torch.from_numpy(token_counts(tokenizer, texts, vocab).nonzero()[0])
    special = torch.tensor(sorted(set(tokenizer.all_special_ids)), dtype=torch.long, device=device)
    wanted = torch.zeros(vocab, dtype=torch.bool, device=device)
    wanted[token_ids.to(device)] = True
    wanted[special] = False
    n_wanted = int(wanted.sum())
    compact = torch.full((vocab,), -1, dtype=torch.long, device=device)
    compact[wanted] = torch.arange(n_wanted, device=device)
    n_layers = model.config.num_hidden_layers
    for layer in layers:
        if not 0 <= layer <= n_layers:
            raise CrossalignError(f"layer {layer} does not exist: the model has 0..{n_layers}")
    sums = torch.zeros(len(layers), n_wanted, model.config.hidden_size, device=device)
    counts = torch.zeros(n_wanted, device=device)
    type_id = language_type_id(model, lang)
    max_length = input_limit(model, max_length)
    batches = encode_batches(tokenizer, texts, max_length, batch_size)
    total = (len(texts) + batch_size - 1) // batch_size
    for _, enc in tqdm(batches, total=total, desc="hidden states", disable=not progress):
        states = hidden_states(model, enc, type_id)
        ids = enc["input_ids"].to(device)
        keep = wanted[ids] & enc["attention_mask"].to(device).bool()
        rows = compact[ids[keep]]
        stacked = torch.stack([states[layer].float()[keep] for layer in layers])
        sums.index_add_(1, rows, stacked)
        counts.index_add_(0, rows, torch.ones(rows.shape[0], device=device))
    seen = counts > 0
    row_of = torch.full((vocab,), -1, dtype=torch.long, device=device)
    ids_seen = wanted.nonzero().squeeze(1)[seen]
    row_of[ids_seen] = torch.arange(ids_seen.shape[0], device=device)
    means = sums[:, seen] / counts[seen][None, :, None]
    return {layer: TokenVectors(means[i], row_of) for i, layer in enumerate(layers)}


def is_word(text: str) -> bool:
    """True for a non-empty string of letters and combining marks only."""
    return bool(text) and all(unicodedata.category(c)[0] in "LM" for c in text)


def word_forms(word: str) -> list[str]:
    """Surface forms of a lowercase word: itself and its capitalised form (deduplicated)."""
    return list(dict.fromkeys([word, word[:1].upper() + word[1:]]))


def word_pieces(tokenizer: PreTrainedTokenizerBase, words: Sequence[str]) -> list[list[list[int]]]:
    """Subword ids of every surface form of every word: ``[word][form][piece]``. A lone leading
    ``▁`` piece (XLM-R writes some words as ``▁`` + pieces) is dropped."""
    forms = [word_forms(w) for w in words]
    flat = [f for fs in forms for f in fs]
    ids = tokenizer(flat, add_special_tokens=False)["input_ids"] if flat else []
    bare = tokenizer.convert_tokens_to_ids("▁")
    out, k = [], 0
    for fs in forms:
        group = []
        for _ in fs:
            pieces = ids[k]
            k += 1
            if len(pieces) > 1 and pieces[0] == bare:
                pieces = pieces[1:]
            group.append(pieces)
        out.append(group)
    return out


def piece_ids(tokenizer: PreTrainedTokenizerBase, words: Sequence[str]) -> torch.Tensor:
    """Every subword id of every surface form of ``words``."""
    ids = {t for forms in word_pieces(tokenizer, words) for p in forms for t in p}
    return torch.tensor(sorted(ids), dtype=torch.long)


def word_vectors(
    tokenizer: PreTrainedTokenizerBase,
    words: Sequence[str],
    vectors: TokenVectors,
    mode: str = "whole",
) -> tuple[list[int], torch.Tensor]:
    """Vectors of the words that have one under ``mode`` (see the module docstring).

    Returns (indices into ``words`` that have a vector, vectors [n, H] in that order).
    """
    if mode not in WORD_MODES:
        raise CrossalignError(f"unknown word mode '{mode}'; choose one of {', '.join(WORD_MODES)}")
    forms = word_pieces(tokenizer, words)
    flat = [p for fs in forms for p in fs]
    device = vectors.table.device
    owner = torch.tensor([i for i, fs in enumerate(forms) for _ in fs], dtype=torch.long)
    rank = torch.tensor([r for fs in forms for r in range(len(fs))], dtype=torch.long)
    lengths = torch.tensor([len(p) for p in flat], dtype=torch.long)
    width = int(lengths.max()) if flat else 1
    real = torch.arange(max(1, width))[None, :] < lengths[:, None]  # [F, P]
    pieces = torch.zeros(real.shape, dtype=torch.long)
    pieces[real] = torch.tensor([t for p in flat for t in p], dtype=torch.long)  # row-major
    owner, rank, lengths, real, pieces = (
        x.to(device) for x in (owner, rank, lengths, real, pieces)
    )
    covered = ((vectors.row_of[pieces] >= 0) | ~real).all(dim=1) & (lengths > 0)
    if mode == "whole":
        chosen = covered & (lengths == 1) & (pieces[:, 0] != tokenizer.unk_token_id)
    else:  # the usable form with the fewest pieces, the first listed on a tie
        key = torch.where(covered, lengths * 16 + rank, torch.full_like(lengths, 1 << 30))
        best = torch.full((len(words),), 1 << 30, dtype=torch.long, device=device)
        best = best.scatter_reduce(0, owner, key, "amin")
        chosen = covered & (key == best[owner])
    total = torch.zeros(len(words), vectors.table.shape[1], device=device)
    count = torch.zeros(len(words), device=device)
    chosen_forms = chosen.nonzero().squeeze(1)
    for start in range(0, len(chosen_forms), 4096):  # mean of each chosen form's pieces
        sel = chosen_forms[start : start + 4096]
        rows = vectors.row_of[pieces[sel]].clamp(min=0)
        form_vec = (vectors.table[rows] * real[sel][..., None]).sum(dim=1)
        total.index_add_(0, owner[sel], form_vec / lengths[sel][:, None])
        count.index_add_(0, owner[sel], torch.ones(len(sel), device=device))
    kept = (count > 0).nonzero().squeeze(1)
    return kept.tolist(), total[kept] / count[kept, None]


def load_masked_lm(
    path: str, device: str = "cpu"
) -> tuple[PreTrainedModel, PreTrainedTokenizerBase]:
    """A ``save_pretrained`` masked-LM directory and its tokenizer, in eval mode on
    ``device``; a directory that is not one is a one-line CrossalignError."""
    return load_model_and_tokenizer(path, head="masked_lm", device=device, key="--model")
