"""Readers, Debian-package corpus builders, tokenizer training, batching and masking."""
