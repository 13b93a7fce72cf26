"""Fine-tuning hyper-parameters of the transfer protocol, importable without torch."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class FinetuneConfig:
    """Fine-tuning hyper-parameters (the same for SUP and ZS). ``epochs``, ``lr`` and
    ``batch_size`` default to the ALIGN-MLM paper's token tasks (Table 11: 10 epochs, 2e-5,
    32)."""

    epochs: int = 10
    lr: float = 2e-5
    batch_size: int = 32
    max_length: int = 128
    """Subword tokens per sentence with specials; longer sentences are left out of every split."""
    warmup: float = 0.1
    """Fraction of the steps with a linear warm-up, then linear decay."""
    weight_decay: float = 0.01
    seed: int = 0
    max_train: int | None = None
    """Use a seeded sample of this many training sentences (default: all)."""
    max_test: int | None = None
