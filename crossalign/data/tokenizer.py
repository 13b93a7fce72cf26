"""Train a shared multilingual subword tokenizer (HF tokenizers), or load one from a path."""

from __future__ import annotations

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

from crossalign.config import TokenizerConfig
from crossalign.data.sampling import sample_by_language
from crossalign.errors import CrossalignError

SPECIAL_TOKENS = ["<s>", "<pad>", "</s>", "<unk>", "<mask>"]


def load_tokenizer(path: str | Path) -> PreTrainedTokenizerFast:
    """Any Hugging Face fast tokenizer saved in ``path``; it must have pad and mask tokens."""
    try:
        tok = AutoTokenizer.from_pretrained(str(path))
    except (OSError, ValueError) as e:
        raise CrossalignError(f"tokenizer {path}: cannot load: {str(e).splitlines()[0]}") from None
    for name in ("pad_token", "mask_token"):
        if getattr(tok, name) is None:
            raise CrossalignError(f"tokenizer {path} has no {name}; masked-LM training needs one")
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
    """Train the tokenizer ``train_tokenizer`` describes on already sampled lines."""
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
    tok.train_from_iterator(sample, trainer=trainer, length=len(sample))
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
