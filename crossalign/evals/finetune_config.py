"""Fine-tuning hyper-parameters of the transfer protocol, importable without torch."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class FinetuneConfig:
    """Fine-tuning hyper-parameters (the same for SUP and ZS). ``epochs``, ``lr`` and
    ``batch_size`` default to the ALIGN-MLM paper's token tasks (Table 11: 10 epochs, 2e-5,
    32)."""

    epochs: int = 10
    """Passes over the training sentences."""
    lr: float = 2e-5
    """AdamW learning rate."""
    batch_size: int = 32
    """Sentences per step."""
    max_length: int = 128
    """Subword tokens per sentence with specials; longer sentences are left out of every split."""
    warmup: float = 0.1
    """Fraction of the steps with a linear warm-up, then linear decay."""
    weight_decay: float = 0.01
    """AdamW weight decay."""
    seed: int = 0
    """Seed of the sentence samples, the head's initialisation and the batch order."""
    freeze_embeddings: bool = False
    """Keep the input word embedding matrix fixed while fine-tuning, for SUP and ZS alike
    (MonoTrans's fine-tuning step, Artetxe et al. 2020, §2). The rows of words the task data
    shows (English's, in ZS) then cannot drift away from those of the words it never shows
    (the other language's), which get no gradient either way; position and token-type
    embeddings still train. Default: every parameter trains, as in the ALIGN-MLM paper."""
    precision: str = "fp32"
    """fp32, or bf16: fine-tuning's and scoring's forward passes under bfloat16 autocast
    (weights, gradients and the optimizer stay fp32), faster where the hardware has bfloat16
    instructions; the scores differ a little from fp32's (docs/evaluations.md: how fast, and
    by how much)."""
    group_by_length: bool = False
    """Batch sentences of similar length together (transformers' ``LengthGroupedSampler``, as
    the Trainer's ``group_by_length``: shuffled megabatches of 50 batches, each sorted by
    length, the longest batch first), so batches carry less padding. The batches differ from
    the default's seeded shuffle, so the scores do too (docs/evaluations.md: by how much)."""
    max_train: int | None = None
    """Use a seeded sample of this many training sentences (default: all)."""
    max_test: int | None = None
    """Use a seeded sample of this many test sentences (default: all)."""
    device: str | None = None
    """Torch device of fine-tuning and scoring (default: cuda if available, else cpu)."""
