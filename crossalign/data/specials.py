"""The special tokens of a tokenizer crossalign trains (torch- and tokenizers-free, so settings
can check sizes against them without importing the tokenizer machinery)."""

from __future__ import annotations

SPECIAL_TOKENS = ["<s>", "<pad>", "</s>", "<unk>", "<mask>"]
