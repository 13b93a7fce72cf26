"""A tiny random BERT with a unigram tokenizer of the en/es fixture, for the aligner tests."""

from __future__ import annotations

from pathlib import Path

from transformers import BertConfig, BertForMaskedLM

from crossalign.config import TokenizerConfig
from crossalign.data.tokenizer import train_tokenizer

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "tiny"


def save_tiny_bert(out: Path, languages: list[str] | None = None) -> Path:
    """Save a 2-layer, 32-wide BERT (random weights; with ``languages``, one language-embedding
    row each) and a 100-piece unigram tokenizer of the en/es fixture to ``out``."""
    texts = {x: (FIXTURES / f"{x}.txt").read_text().splitlines() for x in ("en", "es")}
    tok = train_tokenizer(texts, TokenizerConfig(vocab_size=100))
    config = BertConfig(
        vocab_size=len(tok),
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=64,
        type_vocab_size=len(languages) if languages else 1,
        pad_token_id=tok.pad_token_id,
    )
    if languages:
        config.crossalign_languages = list(languages)
    BertForMaskedLM(config).save_pretrained(out)
    tok.save_pretrained(out)
    return out
