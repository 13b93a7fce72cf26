"""Train a shared multilingual subword tokenizer (HF tokenizers), or load one from a path."""

from __future__ import annotations

import itertools
import json
import os
from pathlib import Path

from tokenizers import (
    Tokenizer,
    decoders,
    models,
    normalizers,
    pre_tokenizers,
    processors,
    trainers,
)
from transformers import AutoTokenizer, PreTrainedTokenizerFast

from crossalign.config import (
    SPECIAL_TOKENS,  # also imported from here
    TokenizerConfig,
)
from crossalign.data.sampling import sample_by_language
from crossalign.errors import CrossalignError
from crossalign.hub import hub_load_error, pretrained_source

# what save_pretrained writes for a fast or slow tokenizer (tokenizer.json, a WordPiece or BPE
# vocab, a SentencePiece model); a directory without any is not a tokenizer
TOKENIZER_FILES = ("tokenizer.json", "vocab.*", "*.model", "*.spm")
# tokenizers' UnigramTrainer gives the characters it adds back the scores min, min + step, ...
PENALTY_STEP = 0.0001
SCORE_DECIMALS = 5
"""Decimals a trained unigram tokenizer's scores are rounded to (see canonical_unigram)."""


def load_tokenizer(
    path: str | os.PathLike, key: str = "tokenizer", masked_lm: bool = True
) -> PreTrainedTokenizerFast:
    """Any Hugging Face fast tokenizer saved in the directory ``path`` (or a hub id available
    offline); it must have a pad token (and a mask token for ``masked_lm`` training) and a
    vocabulary beyond its special tokens. ``key`` names the setting ``path`` came from in error
    messages."""
    source = pretrained_source(path, key)
    local = Path(source).is_dir()
    if local and not any(any(Path(source).glob(name)) for name in TOKENIZER_FILES):
        raise CrossalignError(
            f"{key} {path} has no tokenizer files (tokenizer.json / vocab.* / *.model); save the "
            f"tokenizer beside the model or give tokenizer.path (--tokenizer)"
        )
    try:
        tok = AutoTokenizer.from_pretrained(source)
    except Exception as e:  # tokenizers raises a plain Exception for a malformed tokenizer.json
        first = (str(e).splitlines() or [type(e).__name__])[0]
        if not local:
            raise hub_load_error(key, str(path), first) from None
        raise CrossalignError(f"{key} {path}: cannot load the tokenizer: {first}") from None
    for name in ("pad_token", "mask_token") if masked_lm else ("pad_token",):
        if getattr(tok, name) is None:
            raise CrossalignError(f"{key} {path} has no {name}; masked-LM training needs one")
    if len(tok.get_vocab()) <= len(set(tok.all_special_tokens)):
        raise CrossalignError(
            f"{key} {path}: the tokenizer holds only its {len(tok.get_vocab())} special tokens; "
            f"save the trained tokenizer beside the model or give tokenizer.path (--tokenizer)"
        )
    return tok


def train_tokenizer(
    texts: dict[str, list[str]], cfg: TokenizerConfig, seed: int = 0
) -> PreTrainedTokenizerFast:
    """Train a unigram or BPE tokenizer on text sampled by language with p_i ∝ n_i^alpha.

    XLM-R conventions: NFKC normalisation, SentencePiece-style ``▁`` word boundaries,
    specials ``<s> <pad> </s> <unk> <mask>`` with ids 0-4, ``<s> A </s>`` templates.
    """
    sample = sample_by_language(
        texts, cfg.alpha, min(cfg.max_sentences, sum(map(len, texts.values()))), seed
    )
    return train_tokenizer_on(sample, cfg)


def train_tokenizer_on(sample: list[str], cfg: TokenizerConfig) -> PreTrainedTokenizerFast:
    """Train the tokenizer ``train_tokenizer`` describes on already sampled lines.

    The same lines and settings give the same tokenizer.json in every process: BPE training is
    deterministic, a unigram model is made so by ``canonical_unigram``.
    """
    if cfg.kind == "unigram":
        tok = Tokenizer(models.Unigram())
        trainer = trainers.UnigramTrainer(
            vocab_size=cfg.vocab_size,
            special_tokens=SPECIAL_TOKENS,
            unk_token="<unk>",
            show_progress=False,
        )
    else:
        tok = Tokenizer(models.BPE(unk_token="<unk>"))
        trainer = trainers.BpeTrainer(
            vocab_size=cfg.vocab_size, special_tokens=SPECIAL_TOKENS, show_progress=False
        )
    tok.normalizer = normalizers.NFKC()
    tok.pre_tokenizer = pre_tokenizers.Metaspace()
    tok.decoder = decoders.Metaspace()
    try:
        tok.train_from_iterator(sample, trainer=trainer, length=len(sample))
    except Exception as e:  # tokenizers raises a plain Exception, e.g. for a too small vocabulary
        raise CrossalignError(
            f"tokenizer training ({cfg.kind}, tokenizer.vocab_size={cfg.vocab_size}) failed: {e}"
        ) from None
    learned = tok.get_vocab_size() - len(SPECIAL_TOKENS)
    if learned == 0:
        raise CrossalignError(
            f"the tokenizer's training text ({len(sample)} sampled lines) has no characters; "
            f"check data.mono and data.parallel"
        )
    if learned + len(SPECIAL_TOKENS) > cfg.vocab_size:
        raise CrossalignError(
            f"tokenizer.vocab_size={cfg.vocab_size} cannot hold the {learned} characters of the "
            f"training text and {len(SPECIAL_TOKENS)} special tokens; raise it"
        )
    if cfg.kind == "unigram":
        tok = canonical_unigram(tok)
    bos, eos = tok.token_to_id("<s>"), tok.token_to_id("</s>")
    tok.post_processor = processors.TemplateProcessing(
        single="<s> $A </s>",
        pair="<s> $A </s> </s> $B </s>",
        special_tokens=[("<s>", bos), ("</s>", eos)],
    )
    return PreTrainedTokenizerFast(
        tokenizer_object=tok,
        bos_token="<s>",
        cls_token="<s>",
        eos_token="</s>",
        sep_token="</s>",
        pad_token="<pad>",
        unk_token="<unk>",
        mask_token="<mask>",
    )


def canonical_unigram(tok: Tokenizer) -> Tokenizer:
    """``tok``'s freshly trained unigram model in a form that does not depend on the training.

    The tokenizers UnigramTrainer iterates hash maps with random keys (new ones on every
    training, whatever PYTHONHASHSEED), so from the same text two trainings give (a) the
    characters it adds back at the bottom of the vocabulary (scores ``min``, ``min + 1e-4``,
    ...) in a different order, (b) scores that differ in their last bits (sums taken in another
    order) and so (c) differently ordered ids. Here those characters take the same scores in
    code point order, scores are rounded to ``SCORE_DECIMALS`` decimals (far below what EM
    resolves), and the pieces after the special tokens (ids 0-4) are ordered by score, then by
    piece. Residual risk: a score within ~1e-10
    of a rounding boundary, or a near tie in the trainer's pruning, can still make two trainings
    on a large corpus differ; a saved tokenizer (``tokenizer.path``) pins it.
    """
    spec = json.loads(tok.to_str())
    vocab = spec["model"]["vocab"]
    specials = vocab[: len(SPECIAL_TOKENS)]
    pieces = [
        [piece, round(score, SCORE_DECIMALS)] for piece, score in vocab[len(SPECIAL_TOKENS) :]
    ]
    # the characters the trainer added back, and any single character on the same scores
    singles: dict[float, list] = {}
    for x in pieces:
        if len(x[0]) == 1:
            singles.setdefault(x[1], []).append(x)
    bottom, ladder = min(score for _, score in pieces), []
    for rung in itertools.count():
        found = singles.get(round(bottom + rung * PENALTY_STEP, SCORE_DECIMALS))
        if not found:
            break
        ladder.extend(found)
    scores = sorted((x[1] for x in ladder), reverse=True)
    for entry, score in zip(sorted(ladder, key=lambda x: x[0]), scores):
        entry[1] = score
    spec["model"]["vocab"] = specials + sorted(pieces, key=lambda x: (-x[1], x[0]))
    return Tokenizer.from_str(json.dumps(spec, ensure_ascii=False))
