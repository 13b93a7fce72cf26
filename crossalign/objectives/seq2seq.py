"""Sequence-to-sequence objectives of an encoder-decoder (``crossalign.models.seq2seq``):
MASS pre-training and the two losses of unsupervised MT, plus supervised translation.

- ``mass`` (Song et al. 2019, "MASS: Masked Sequence to Sequence Pre-training for Language
  Generation", §2.2; its unsupervised-MT code's ``restricted_mask_sent``): in ``<s> x </s>``
  a contiguous span of k = round(``span_ratio`` · (n + 2)) tokens among x and the final
  ``</s>`` is masked in the encoder input (80% ``<mask>``, 10% random, 10% kept); the
  decoder, given the span shifted right (the tokens before each span token, at their
  sentence positions), predicts the span. The span starts at the first token with
  probability 0.2, ends at the last with 0.2, and lies uniformly otherwise. The decoder's
  cross-attention skips the encoder's ``<mask>`` positions, as MASS's ``enc_mask`` does.
- ``mass_gc``: MASS plus MLM-GC's co-occurrence regression on the encoder's states at the
  span positions, masked neighbours included (Ai & Fang 2023, §3.2; see the class).
- ``dae`` (denoising auto-encoding, Lample et al. 2018, §2.3): the encoder reads C(x)
  (``crossalign.data.noise``: local shuffle, drop, blank), the decoder reconstructs x.
- ``bt`` (online back-translation, Lample et al. 2018, §2.4; XLM's ``bt_step``): a sentence x
  of language A is translated into a partner language B by the current model (eval mode,
  greedy, no gradient, at most 1.3·|x| + 5 tokens), then the model learns to translate the
  translation back into x.
- ``mt`` (supervised translation on sentence pairs; ``direction`` forward, backward or both,
  one drawn per batch).

Every loss is the cross-entropy of the decoder's predictions with ``label_smoothing`` (0.1,
the papers' setting; the unsmoothed ``nll`` is logged beside it). The encoder's tokens carry
the source language's embedding, the decoder's the target's (``token_type_ids``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import torch
import torch.nn.functional as F
from transformers import EncoderDecoderModel

from crossalign.data.masking import IGNORE_INDEX, mask_tokens
from crossalign.data.noise import add_noise
from crossalign.data.packing import CROSS_BLOCK_MASK, DECODER_BLOCK_MASK, pack_seq2seq
from crossalign.errors import CrossalignError
from crossalign.models.seq2seq import generate_ids, is_sharded
from crossalign.objectives.base import (
    OBJECTIVES,
    Objective,
    RawBatch,
    TokenContext,
    pad_rows,
    positions_of,
    row_batch,
)
from crossalign.objectives.cooc_gc import GlobalCooccurrence
from crossalign.objectives.mlm import (
    add_masked_index,
    encoder_kwargs,
    masked_lm_logits,
    require_sdpa,
)
from crossalign.objectives.options import (
    BTOptions,
    DAEOptions,
    MASSGCOptions,
    MASSOptions,
    MTOptions,
    ObjectiveOptions,
    Seq2SeqOptions,
)

if TYPE_CHECKING:
    from crossalign.config import RunConfig


class Seq2SeqObjective(Objective):
    """Base of the sequence-to-sequence objectives: collated batches hold the encoder's
    ``input_ids``, ``attention_mask``, ``position_ids`` (and ``token_type_ids``), the decoder's
    ``decoder_input_ids``, ``decoder_attention_mask``, ``decoder_position_ids`` (and
    ``decoder_token_type_ids``), ``labels`` [B, T] and ``masked_index``/``masked_labels``.
    Packed batches (``finish`` with ``packing``) hold [R, S'] and [R, T'] rows instead, plus
    their masks (``crossalign.data.packing.pack_seq2seq``)."""

    Options = Seq2SeqOptions

    data = "sentences"
    seq2seq = True
    counts_for_perplexity = False

    def __init__(
        self, ctx: TokenContext, options: ObjectiveOptions | None = None, **values: Any
    ) -> None:
        """Options: ``Seq2SeqOptions`` (``label_smoothing``) or a subclass's."""
        super().__init__(ctx, options, **values)
        self.label_smoothing = self.options.label_smoothing

    def body(self, ids: list[int] | torch.Tensor) -> list[int]:
        """A sentence's ids cut so that ``<s> ids </s>`` fits ``max_length``."""
        return [int(t) for t in ids[: self.ctx.max_length - 2]]

    def require_language_embeddings(self, cfg: RunConfig) -> None:
        """Refuse a run without language embeddings: they tell the decoder which language to
        produce, so an objective translating between languages cannot train without them."""
        if not cfg.model.language_embeddings:
            raise CrossalignError(
                f"objective {OBJECTIVES.name_of(type(self))} needs model.language_embeddings: "
                "true (they tell the decoder which language to produce)"
            )

    def language_rows(self, like: torch.Tensor, lang: str) -> torch.Tensor:
        """``like``-shaped token-type ids of language ``lang``."""
        return torch.full_like(like, self.ctx.language_id(lang))

    def encoder_part(self, rows: list[list[int]], lang: str) -> dict[str, torch.Tensor]:
        """Encoder fields for full rows (specials included) of language ``lang``
        (``row_batch``)."""
        return row_batch(rows, self.ctx, lang)

    def decoder_part(self, targets: list[list[int]], lang: str) -> dict[str, torch.Tensor]:
        """Decoder fields to generate ``targets`` (no specials) in ``lang``: inputs
        ``<s> y``, labels ``y </s>``."""
        ctx = self.ctx
        inputs = pad_rows([[ctx.cls_id, *t] for t in targets], ctx.pad_id)
        labels = pad_rows([[*t, ctx.sep_id] for t in targets], IGNORE_INDEX)
        mask = (labels != IGNORE_INDEX).long()
        batch = {
            "decoder_input_ids": inputs,
            "decoder_attention_mask": mask,
            "decoder_position_ids": positions_of(mask, ctx.position_offset),
            "labels": labels,
        }
        if ctx.languages:
            batch["decoder_token_type_ids"] = self.language_rows(inputs, lang)
        return batch

    def finish(self, batch: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        """A collated batch packed pair by pair with the options' ``packing``
        (``pack_seq2seq``; objectives whose options have it: mass, mass_gc, dae, mt), with its
        labelled positions (``add_masked_index``)."""
        if self.options.packing:
            pads = {
                "input_ids": self.ctx.pad_id,
                "decoder_input_ids": self.ctx.pad_id,
                "labels": IGNORE_INDEX,
                "encoder_labels": IGNORE_INDEX,
            }
            batch = pack_seq2seq(batch, self.ctx.max_length, pads)
        return add_masked_index(batch)

    def forward(self, model: EncoderDecoderModel, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        """Decoder logits [N, V] at the N labelled positions (``masked_index``)."""
        return decoder_logits(model, batch)

    def loss(self, batch, outputs):
        """Label-smoothed cross-entropy of the labelled positions (``nll``: unsmoothed)."""
        labels = batch["masked_labels"]
        n = torch.tensor(labels.numel(), device=labels.device)
        if labels.numel() == 0:
            zero = outputs.sum() * 0.0
            return zero, n, {"nll": zero.detach()}
        logits = outputs.float()
        loss = F.cross_entropy(logits, labels, label_smoothing=self.label_smoothing)
        nll = F.cross_entropy(logits.detach(), labels) if self.label_smoothing else loss.detach()
        return loss, n, {"nll": nll}


def encoder_states(model: EncoderDecoderModel, batch: dict[str, torch.Tensor]) -> torch.Tensor:
    """Final encoder states [B, S, H] of the batch's ``input_ids`` (packed rows attend within
    their blocks)."""
    encoder = model.get_encoder()
    return encoder(input_ids=batch["input_ids"], **encoder_kwargs(encoder, batch)).last_hidden_state


def decoder_logits(
    model: EncoderDecoderModel,
    batch: dict[str, torch.Tensor],
    states: torch.Tensor | None = None,
) -> torch.Tensor:
    """Decode ``decoder_input_ids`` with cross-attention to the encoder ``states`` [B, S, H]
    (computed here when None) over ``cross_attention_mask`` when the batch has one, else
    ``attention_mask`` (packed rows: ``DECODER_BLOCK_MASK`` and ``CROSS_BLOCK_MASK``, as
    [B, 1, T, T] and [B, 1, T, S]); returns the output layer's logits [N, V] at
    ``masked_index`` only."""
    if states is None:
        states = encoder_states(model, batch)
    decoder = model.get_decoder()
    if DECODER_BLOCK_MASK in batch:
        require_sdpa(decoder)
        self_mask = batch[DECODER_BLOCK_MASK][:, None]
        cross_mask = batch[CROSS_BLOCK_MASK][:, None]
    else:
        self_mask = batch["decoder_attention_mask"]
        cross_mask = batch.get("cross_attention_mask", batch["attention_mask"])
    dec_kwargs = {
        "input_ids": batch["decoder_input_ids"],
        "attention_mask": self_mask,
        "position_ids": batch["decoder_position_ids"],
        "encoder_hidden_states": states,
        "encoder_attention_mask": cross_mask,
        "use_cache": False,
    }
    if "decoder_token_type_ids" in batch:
        dec_kwargs["token_type_ids"] = batch["decoder_token_type_ids"]
    hidden = decoder.base_model(**dec_kwargs).last_hidden_state
    return masked_lm_logits(decoder, hidden, batch["masked_index"])


def mass_span(n: int, ratio: float, generator: torch.Generator) -> tuple[int, int]:
    """(start, k) of the MASS span in ``<s> x </s>`` with n = |x|: k = round(ratio · (n + 2))
    clamped to [1, n + 1] tokens among positions 1 ... n + 1; with probability 0.2 it starts at
    1, with 0.2 it ends at n + 1, else its start is uniform over the n + 2 - k choices."""
    k = min(max(1, round(ratio * (n + 2))), n + 1)
    free = n + 1 - k
    p = float(torch.rand(1, generator=generator))
    if p >= 0.8:
        return 1, k
    if p >= 0.6:
        return 1 + free, k
    return 1 + int(torch.randint(free + 1, (1,), generator=generator)), k


@OBJECTIVES.register("mass")
class MaskedSeq2Seq(Seq2SeqObjective):
    """MASS: mask a contiguous span of each sentence in the encoder, predict it in the decoder
    (see the module docstring)."""

    Options = MASSOptions

    def __init__(
        self, ctx: TokenContext, options: ObjectiveOptions | None = None, **values: Any
    ) -> None:
        """Options: ``MASSOptions`` (``span_ratio``, ``replace_probs``, ``label_smoothing``)."""
        super().__init__(ctx, options, **values)
        self.span_ratio = self.options.span_ratio
        self.replace_probs = tuple(self.options.replace_probs)
        self.register_buffer("random_ids", ctx.random_ids(), persistent=False)

    def collate(self, raw: RawBatch, generator: torch.Generator) -> dict[str, torch.Tensor]:
        """``span_batch``'s rows, packed with ``packing``, and their labelled positions."""
        return self.finish(self.span_batch(raw, generator))

    def span_batch(self, raw: RawBatch, generator: torch.Generator) -> dict[str, torch.Tensor]:
        """Sentences → the masked encoder input, the shifted span as decoder input at its
        sentence positions, the span as labels, the cross-attention mask, and
        ``encoder_labels`` (the span's tokens at their encoder positions, IGNORE_INDEX
        elsewhere; [B, S]); padded rows."""
        ctx = self.ctx
        rows, spans = [], []
        for ids in raw.sentences:
            body = self.body(ids)
            rows.append([ctx.cls_id, *body, ctx.sep_id])
            spans.append(mass_span(len(body), self.span_ratio, generator))
        enc = self.encoder_part(rows, raw.source)
        in_span = torch.zeros_like(enc["input_ids"], dtype=torch.bool)
        for i, (start, k) in enumerate(spans):
            in_span[i, start : start + k] = True
        inputs, _ = mask_tokens(
            enc["input_ids"], in_span, ctx.mask_id, self.random_ids.cpu(), generator, 1.0,
            self.replace_probs,
        )  # fmt: skip
        enc["encoder_labels"] = torch.where(in_span, enc["input_ids"], IGNORE_INDEX)
        enc["input_ids"] = inputs
        enc["cross_attention_mask"] = enc["attention_mask"] * (inputs != ctx.mask_id).long()
        dec_in = [row[start - 1 : start + k - 1] for row, (start, k) in zip(rows, spans)]
        labels = [row[start : start + k] for row, (start, k) in zip(rows, spans)]
        label_rows = pad_rows(labels, IGNORE_INDEX)
        mask = (label_rows != IGNORE_INDEX).long()
        positions = pad_rows([list(range(s - 1, s + k - 1)) for s, k in spans], 0)
        batch = {
            **enc,
            "decoder_input_ids": pad_rows(dec_in, ctx.pad_id),
            "decoder_attention_mask": mask,
            "decoder_position_ids": ctx.position_offset + positions,
            "labels": label_rows,
        }
        if ctx.languages:
            batch["decoder_token_type_ids"] = self.language_rows(label_rows, raw.source)
        return batch


@OBJECTIVES.register("mass_gc")
class MaskedSeq2SeqGlobalCooccurrence(GlobalCooccurrence, MaskedSeq2Seq):
    """MASS + λ·GC: MLM-GC's co-occurrence regression (``crossalign.objectives.cooc_gc``) on
    the encoder's final states at the masked span positions, beside MASS's decoder loss
    (MLM-GC adds GC to the encoder's masked-LM states; here the encoder's states are the ones
    the decoder reads).

    With MASS's contiguous span most neighbours of a span token are masked too. Ai & Fang
    (2023, §3.2) let the neighbour be masked for MASS, so ``masked_neighbours`` defaults to
    true here: a span position pairs with every neighbour in its window and segment, inside
    the span or not, X being looked up with the neighbours' original ids (the span's tokens,
    ``encoder_labels``) and g_k being the neighbour's encoder state. ``masked_neighbours:
    false`` is crossalign's earlier default: neighbours whose encoder input is ``<mask>`` are
    skipped, while span tokens replaced at random or kept (10% each) still count; most pairs
    inside the span are lost."""

    Options = MASSGCOptions

    def __init__(
        self, ctx: TokenContext, options: ObjectiveOptions | None = None, **values: Any
    ) -> None:
        """Options: ``MASSGCOptions`` (MASS's and ``mlm_gc``'s; ``neighbour: output_embedding``
        uses the decoder's output layer), ``masked_neighbours`` defaulting to true (see the
        class)."""
        MaskedSeq2Seq.__init__(self, ctx, options, **values)
        self.init_gc(ctx)

    def forward(self, model: EncoderDecoderModel, batch: dict[str, torch.Tensor]):
        """(decoder logits [N, V] at the span's labels, GCTerms of the encoder states)."""
        states = encoder_states(model, batch)
        terms = self.gc_terms_of(
            model, states, batch["input_ids"], batch["encoder_labels"], batch["attention_mask"]
        )
        return decoder_logits(model, batch, states), terms

    def loss(self, batch, outputs):
        """MASS + λ·GC; metrics ``mass_loss`` (label-smoothed), ``nll``, ``gc_loss`` and
        ``gc_pairs``."""
        logits, terms = outputs
        mass, n, metrics = MaskedSeq2Seq.loss(self, batch, logits)
        gc, gc_metrics = self.gc_part(terms)
        metrics = {**metrics, "mass_loss": mass.detach(), **gc_metrics}
        return mass + self.gc_weight * gc, n, metrics


@OBJECTIVES.register("dae")
class DenoisingAutoEncoder(Seq2SeqObjective):
    """Denoising auto-encoding: reconstruct a sentence from C(sentence), in its own language."""

    Options = DAEOptions

    def __init__(
        self, ctx: TokenContext, options: ObjectiveOptions | None = None, **values: Any
    ) -> None:
        """Options: ``DAEOptions`` (XLM's defaults: ``shuffle``, ``drop``, ``blank``)."""
        super().__init__(ctx, options, **values)
        o = self.options
        self.shuffle, self.drop, self.blank = o.shuffle, o.drop, o.blank

    def collate(self, raw: RawBatch, generator: torch.Generator) -> dict[str, torch.Tensor]:
        """Sentences → encoder ``<s> C(x) </s>``, decoder ``<s> x`` → ``x </s>``."""
        ctx = self.ctx
        targets = [self.body(ids) for ids in raw.sentences]
        noisy = [
            add_noise(
                torch.tensor(t, dtype=torch.long), generator, shuffle=self.shuffle,
                drop=self.drop, blank=self.blank, blank_id=ctx.mask_id,
            ).tolist()
            for t in targets
        ]  # fmt: skip
        enc = self.encoder_part([[ctx.cls_id, *x, ctx.sep_id] for x in noisy], raw.source)
        return self.finish({**enc, **self.decoder_part(targets, raw.source)})


def partner_language(languages: list[str], lang: str, generator: torch.Generator) -> str:
    """A language of ``languages`` other than ``lang``, drawn uniformly with ``generator``."""
    others = [x for x in languages if x != lang]
    return others[int(torch.randint(len(others), (1,), generator=generator))]


@OBJECTIVES.register("bt")
class BackTranslation(Seq2SeqObjective):
    """Online back-translation: translate with the current model, learn to translate back."""

    Options = BTOptions

    def __init__(
        self, ctx: TokenContext, options: ObjectiveOptions | None = None, **values: Any
    ) -> None:
        """Options: ``BTOptions`` (``languages``, default every language of the run;
        ``max_len_a`` and ``max_len_b``)."""
        super().__init__(ctx, options, **values)
        o = self.options
        self.languages = list(o.languages) if o.languages else list(ctx.languages)
        self.max_len_a, self.max_len_b = o.max_len_a, o.max_len_b

    def check_config(self, cfg: RunConfig) -> None:
        """Back-translation needs language embeddings and two languages to translate between."""
        where = self.option_where("languages")
        self.require_language_embeddings(cfg)
        if len(self.languages) < 2:
            raise CrossalignError(f"{where}: back-translation needs two languages or more")
        for lang in self.languages:
            self.ctx.language_id(lang)  # a language the model has no row for fails here

    def collate(self, raw: RawBatch, generator: torch.Generator) -> dict[str, torch.Tensor]:
        """Sentences of language A → the encoder input ``<s> x </s>`` to translate from, the
        decoder fields to generate x in A, and ``bt_language`` (the partner's id)."""
        ctx = self.ctx
        if raw.source not in self.languages:
            raise CrossalignError(
                f"{self.option_where('languages')}: the run's language '{raw.source}' is not "
                f"among {self.languages}; add it or restrict data.mono"
            )
        partner = partner_language(self.languages, raw.source, generator)
        targets = [self.body(ids) for ids in raw.sentences]
        enc = self.encoder_part([[ctx.cls_id, *t, ctx.sep_id] for t in targets], raw.source)
        batch = {**enc, **self.decoder_part(targets, raw.source)}
        batch["bt_language"] = torch.tensor(ctx.language_id(partner))
        return add_masked_index(batch)

    def translated_inputs(
        self, model: EncoderDecoderModel, batch: dict[str, torch.Tensor]
    ) -> dict[str, torch.Tensor]:
        """The batch with its encoder fields replaced by the model's translation of them into
        the partner language (eval mode, greedy, no gradient): rows ``<s> y </s>``; a
        translation cut at the length limit gets its ``</s>`` appended. With sharded
        parameters (FSDP, ZeRO-3) every process decodes until all are done, since each
        decoding step gathers the shards from all of them."""
        ctx = self.ctx
        longest = int(batch["attention_mask"].sum(1).max())
        new = min(int(self.max_len_a * longest + self.max_len_b), ctx.max_length - 2)
        was_training = model.training
        model.eval()
        try:
            source = int(batch["token_type_ids"][0, 0])
            out = generate_ids(
                model, batch["input_ids"], batch["attention_mask"], source,
                int(batch["bt_language"]), max_new_tokens=max(1, new), synced=is_sharded(model),
            )  # fmt: skip
        finally:
            model.train(was_training)
        out = torch.cat([out, torch.full_like(out[:, :1], ctx.pad_id)], 1)
        ended = (out == ctx.sep_id).cumsum(1) > 0
        first_end = torch.where(ended.any(1), ended.int().argmax(1), out.shape[1] - 1)
        keep = torch.arange(out.shape[1], device=out.device)[None] <= first_end[:, None]
        out = torch.where(keep, out, torch.full_like(out, ctx.pad_id))
        out[torch.arange(len(out)), first_end] = ctx.sep_id
        width = int(first_end.max()) + 1
        ids, mask = out[:, :width], keep[:, :width].long()
        translated = {
            **batch,
            "input_ids": ids,
            "attention_mask": mask,
            "position_ids": positions_of(mask, ctx.position_offset).to(ids.device),
            "token_type_ids": torch.full_like(ids, int(batch["bt_language"])),
        }
        return translated

    def forward(self, model: EncoderDecoderModel, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        """Translate the sentences into the partner language, then logits [N, V] of decoding
        the originals from the translations."""
        return decoder_logits(model, self.translated_inputs(model, batch))


@OBJECTIVES.register("mt")
class Translation(Seq2SeqObjective):
    """Supervised translation on sentence pairs."""

    Options = MTOptions

    data = "parallel"

    def __init__(
        self, ctx: TokenContext, options: ObjectiveOptions | None = None, **values: Any
    ) -> None:
        """Options: ``MTOptions`` (``direction``: forward, backward or both)."""
        super().__init__(ctx, options, **values)
        self.direction = self.options.direction

    def check_config(self, cfg: RunConfig) -> None:
        """Translation needs language embeddings (the decoder's target language)."""
        self.require_language_embeddings(cfg)

    def collate(self, raw: RawBatch, generator: torch.Generator) -> dict[str, torch.Tensor]:
        """Pairs → encoder ``<s> source </s>``, decoder ``<s> target`` → ``target </s>``."""
        ctx = self.ctx
        src_lang, tgt_lang = raw.source.split("-", 1)
        backward = self.direction == "backward" or (
            self.direction == "both" and bool(torch.rand(1, generator=generator) < 0.5)
        )
        pairs = [(self.body(s), self.body(t)) for s, t in raw.pairs]
        if backward:
            src_lang, tgt_lang = tgt_lang, src_lang
            pairs = [(t, s) for s, t in pairs]
        enc = self.encoder_part([[ctx.cls_id, *s, ctx.sep_id] for s, _ in pairs], src_lang)
        return self.finish({**enc, **self.decoder_part([t for _, t in pairs], tgt_lang)})
