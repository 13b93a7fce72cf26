"""Sizes of models built from scratch (``model.preset``): Hugging Face config fields."""

from __future__ import annotations

PRESETS: dict[str, dict[str, int]] = {
    "tiny": dict(num_hidden_layers=2, hidden_size=32, num_attention_heads=2, intermediate_size=64),
    "small": dict(
        num_hidden_layers=4, hidden_size=256, num_attention_heads=4, intermediate_size=1024
    ),
    "base": dict(
        num_hidden_layers=12, hidden_size=768, num_attention_heads=12, intermediate_size=3072
    ),
}
