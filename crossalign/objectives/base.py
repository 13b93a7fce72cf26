"""The objective contract (fairseq criterions / torchtune losses as small modules).

An objective is an ``nn.Module`` (so its own heads train and checkpoint with the model):

- ``collate(raw, generator) -> batch``: tensors for exactly the fields it needs; masking
  happens here;
- ``label(model, batch) -> batch`` (optional): labels only the current model can give (a
  no-grad pass, e.g. self-labelling), added before the batch's tokens are counted;
- ``forward(model, batch) -> outputs``: usually one model call;
- ``loss(batch, outputs) -> (loss, n_tokens, metrics)``: a pure function of tensors.

Every metric is logged as ``<objective>/<key>``; an objective whose loss adds an auxiliary
term to a masked-LM loss reports the masked-LM part as ``lm_loss``, and only that part enters
perplexity. Two optional hooks run once before training: ``check_config(cfg)`` refuses run
settings the method cannot train with (and changes nothing), ``start(model, data)`` prepares
state from the starting model and the tokenized training data (e.g. a dictionary induced from
its embeddings, language-specific vocabularies counted on the data). A third,
``step_begins(model, step)``, runs before every optimizer step and is the only place state
changes during training; ``collate`` and ``forward`` change none.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np
import torch
from torch import nn
from transformers import PreTrainedModel, PreTrainedTokenizerBase

from crossalign.data.masking import IGNORE_INDEX
from crossalign.errors import CrossalignError
from crossalign.objectives.options import ObjectiveOptions
from crossalign.registry import Registry, did_you_mean

if TYPE_CHECKING:
    from crossalign.config import RunConfig
    from crossalign.data.store.prepare import TrainingData


@dataclass
class TokenContext:
    """What objectives need to know about the tokenizer and model to build batches."""

    pad_id: int
    mask_id: int
    cls_id: int
    sep_id: int
    special_ids: list[int]
    """Ids never masked, never used as random replacements."""
    vocab_size: int
    languages: list[str]
    """Language ids are indices in this list; empty when the model has no language embeddings."""
    position_offset: int
    """Position id of a sequence's first token (0 for BERT, pad_id + 1 for RoBERTa)."""
    max_length: int
    tokenizer: PreTrainedTokenizerBase | None = None
    """The run's tokenizer, for objectives that map words (e.g. dictionaries) to ids."""

    def language_id(self, lang: str) -> int:
        """Token-type id of ``lang`` (0 without language embeddings; an unknown language is a
        CrossalignError naming the model's languages)."""
        from crossalign.models.load import language_index

        return language_index(self.languages, lang)

    @classmethod
    def for_model(
        cls,
        tokenizer: PreTrainedTokenizerBase,
        model: PreTrainedModel,
        max_length: int,
        language_embeddings: bool = True,
    ) -> TokenContext:
        """The context of a tokenizer and model (language ids from the model's config)."""
        from crossalign.models.load import model_languages, position_offset

        return cls(
            pad_id=tokenizer.pad_token_id,
            mask_id=tokenizer.mask_token_id,
            cls_id=tokenizer.cls_token_id,
            sep_id=tokenizer.sep_token_id,
            special_ids=sorted(set(tokenizer.all_special_ids)),
            vocab_size=model.config.vocab_size,
            languages=model_languages(model) if language_embeddings else [],
            position_offset=position_offset(model),
            max_length=max_length,
            tokenizer=tokenizer,
        )

    def random_ids(self) -> torch.Tensor:
        """[R] long: every non-special vocabulary id (random replacements of 80/10/10)."""
        keep = torch.ones(self.vocab_size, dtype=torch.bool)
        keep[self.special_ids] = False
        return keep.nonzero().squeeze(1)


@dataclass
class RawBatch:
    """A slice of a global batch before collation: packed blocks of one language (``mono``),
    sentences of one language (``sentences``) or sentence pairs of one language pair
    (``pairs``)."""

    source: str
    """A language (``en``) or a pair (``en-es``)."""
    blocks: np.ndarray | None = None
    """[B, L] int32 packed monolingual blocks."""
    pairs: list[tuple[np.ndarray, np.ndarray]] | None = None
    """B (source ids, target ids) pairs without special tokens."""
    sentences: list[np.ndarray] | None = None
    """B sentences' ids without special tokens."""


def pad_rows(rows: list[list[int]], pad_id: int) -> torch.Tensor:
    """Rows of ids padded to the longest: [B, T] long."""
    out = torch.full((len(rows), max(map(len, rows))), pad_id, dtype=torch.long)
    for i, row in enumerate(rows):
        out[i, : len(row)] = torch.tensor(row, dtype=torch.long)
    return out


def positions_of(mask: torch.Tensor, offset: int) -> torch.Tensor:
    """Position ids [B, T] of left-aligned rows: ``offset`` + 0, 1, ... (padding included)."""
    b, t = mask.shape
    return offset + torch.arange(t).expand(b, -1).clone()


def row_batch(rows: list[list[int]], ctx: TokenContext, lang: str) -> dict[str, torch.Tensor]:
    """Encoder fields of full rows (specials included) of language ``lang``, padded to the
    longest: ``input_ids``, ``attention_mask``, ``position_ids`` from 0 and, when the model
    has language embeddings, ``token_type_ids``; all [B, T]."""
    ids = pad_rows(rows, ctx.pad_id)
    mask = torch.zeros_like(ids)
    for i, row in enumerate(rows):
        mask[i, : len(row)] = 1
    batch = {
        "input_ids": ids,
        "attention_mask": mask,
        "position_ids": positions_of(mask, ctx.position_offset),
    }
    if ctx.languages:
        batch["token_type_ids"] = torch.full_like(ids, ctx.language_id(lang))
    return batch


class Objective(nn.Module):
    """Base class of training objectives; subclasses set ``data`` and implement the contract."""

    data: ClassVar[str] = "mono"
    """Which training data the objective reads: ``mono`` (packed blocks), ``sentences``
    (monolingual sentences) or ``parallel``."""
    seq2seq: ClassVar[bool] = False
    """Whether it trains an encoder-decoder (``crossalign.models.seq2seq``); a run's
    objectives are all masked-LM objectives or all sequence-to-sequence ones."""
    counts_for_perplexity: ClassVar[bool] = True
    """Whether the loss is a token-level masked-LM loss that perplexity may average."""
    Options: ClassVar[type[ObjectiveOptions]] = ObjectiveOptions
    """The objective's options (``crossalign.objectives.options``): the keys of its entry in a
    run's ``objectives`` besides ``name``, ``weight`` and ``data``."""

    def __init__(
        self, ctx: TokenContext, options: ObjectiveOptions | None = None, **values: Any
    ) -> None:
        """An objective for ``ctx`` with ``options``, or with the options built from
        ``values`` (option name → value, checked by ``build_options``)."""
        super().__init__()
        self.ctx = ctx
        self.options = options if options is not None else self.build_options(values)

    @classmethod
    def option_names(cls) -> list[str]:
        """The names of the objective's options, in their recorded order."""
        return [f.name for f in fields(cls.Options)]

    @classmethod
    def check_option_keys(cls, values: Mapping[str, Any], where: str | None = None) -> None:
        """Refuse a key of ``values`` that is no option of the objective: a CrossalignError
        naming ``where`` (default ``objective NAME``), the nearest option and all of them."""
        known = cls.option_names()
        for key in values:
            if key not in known:
                name = OBJECTIVES.name_of(cls) or cls.__name__
                raise CrossalignError(
                    f"{where or f'objective {name}'}: unknown option '{key}'"
                    f"{did_you_mean(key, known)}; options: {', '.join(known) or 'none'}"
                )

    @classmethod
    def build_options(cls, values: Mapping[str, Any]) -> Any:
        """``cls.Options`` from ``values`` (option name → value): an unknown key or a bad value
        is a CrossalignError naming the objective (``objective mlm: mask_prob=2 must be in
        [0, 1]``)."""
        cls.check_option_keys(values)
        try:
            return cls.Options(**values)
        except CrossalignError as e:
            name = OBJECTIVES.name_of(cls) or cls.__name__
            raise CrossalignError(f"objective {name}: {e}") from None

    @classmethod
    def option_where(cls, key: str) -> str:
        """How errors name this objective's option ``key``: ``objective mlm: mask_prob``."""
        return f"objective {OBJECTIVES.name_of(cls) or cls.__name__}: {key}"

    def check_config(self, cfg: RunConfig) -> None:
        """Raise CrossalignError when the run config does not suit this objective."""

    def start(self, model: PreTrainedModel, data: TrainingData | None = None) -> None:
        """Prepare state from the starting model and the run's tokenized training ``data``,
        once, before the first step. The one input path: outside a run, build ``data`` with
        ``TrainingData.from_texts`` (None where the objective reads no data)."""

    def step_begins(self, model: PreTrainedModel, step: int) -> None:
        """Update state that follows the model during training, before optimizer step
        ``step`` (counted from 1): after that step's batches are collated and before its first
        forward pass. The one place where training changes an objective's state; every
        process calls it, in the same order."""

    def collate_in_workers(self) -> bool:
        """Whether ``collate`` may run in DataLoader worker processes: true unless it reads
        state that training changes (workers hold a copy made when they start)."""
        return True

    def collate(self, raw: RawBatch, generator: torch.Generator) -> dict[str, torch.Tensor]:
        """Tensors for one micro-batch (CPU); masking uses ``generator``."""
        raise NotImplementedError

    def label(
        self, model: PreTrainedModel, batch: dict[str, torch.Tensor]
    ) -> dict[str, torch.Tensor]:
        """Complete a collated batch (on the model's device) with labels only the current
        model can give, without gradient: e.g. DWA's self-labelled alignments. The training
        loop calls it for every micro-batch of a step before ``token_count``, so a loss whose
        count depends on such labels is weighted exactly. Default: the batch unchanged."""
        return batch

    def forward(self, model: PreTrainedModel, batch: dict[str, torch.Tensor]) -> Any:
        """Run the model on ``batch``; returns what ``loss`` needs."""
        raise NotImplementedError

    def loss(
        self, batch: dict[str, torch.Tensor], outputs: Any
    ) -> tuple[torch.Tensor, torch.Tensor, dict[str, torch.Tensor]]:
        """(mean loss, number of predicted tokens, extra metrics) of one micro-batch."""
        raise NotImplementedError

    def token_count(self, batch: dict[str, torch.Tensor]) -> int:
        """The number of predicted tokens ``loss`` will return for ``batch``, known before the
        forward pass (the training loop weights micro-batches by it): its labelled positions."""
        return int((batch["labels"] != IGNORE_INDEX).sum())


OBJECTIVES: Registry[type[Objective]] = Registry("objective", plugins="crossalign.objectives")
