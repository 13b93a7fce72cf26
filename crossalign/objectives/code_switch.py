"""Code-switched masked LM from self-induced dictionaries (Lu et al. 2023, "Improve
Multilingual Pre-Training Using Monolingual Corpora Only", §3).

Code-switching transforms the inputs of masked LM; the model is unchanged. Both objectives mask
a monolingual block as MLM does, switch some of its *unmasked context* tokens into another
language, and train on both inputs with the same labels:

    loss = MLM(original) + MLM(code-switched)

The original-input part is reported as ``lm_loss`` (the only part perplexity uses), the other
as ``cs_loss``. Switching considers the context tokens of the block's language-specific
vocabulary with respect to the partner language (``crossalign.lexicon.vocab``: frequency >
``threshold`` in the block's language and <= ``other_max`` in the partner's, the paper's 100
and 100 by default; counted over the language's whole training text, or its first
``max_sentences`` sentences) and switches each with probability min(1, switch_prob ×
context / eligible), so that ``switch_prob`` of the context tokens are switched when enough
are eligible (``switch_frac`` reports the fraction).

- ``tcs_mlm`` (token code-switching): a switched token becomes its translation in a dictionary
  induced from the starting model (CSLS between the two languages' language-specific
  vocabularies, from the embedding layer or a layer's context-averaged hidden states),
  re-induced from the current model before every ``refresh_every``-th optimizer step.
- ``scs_mlm`` (semantic code-switching): from the original pass, the output distribution at a
  switched position gives x̂ = Σ p_i e(t_i) over its top-k tokens (probabilities renormalised
  over the k); CSLS of x̂ against the partner's language-specific vocabulary gives the top-k
  candidates c_j with weights softmax(CSLS / temperature); ŷ = Σ w_j e(c_j) replaces the
  token's input embedding (``inputs_embeds``). The candidates' neighbourhood terms r_S(y) are
  taken against the switched tokens of the same batch (the paper's footnote 6;
  ``csls_neighbourhood: batch``), or against the block language's specific vocabulary,
  cached and refreshed (``vocabulary``); r_T(x̂) is computed on the fly.

With several languages, each block switches into one partner language drawn per batch.

The switching state is shared through mixins (``CodeSwitching``, ``TokenSwitching``,
``SemanticSwitching``), so ``crossalign.objectives.code_switch_mass`` applies the same
switching to MASS's encoder input.
"""

from __future__ import annotations

from collections.abc import Callable
from itertools import islice
from typing import TYPE_CHECKING, Any

import numpy as np
import torch
from transformers import EncoderDecoderModel, PreTrainedModel

from crossalign.data.masking import IGNORE_INDEX
from crossalign.errors import CrossalignError
from crossalign.lexicon.csls import neighbourhood_means, unit
from crossalign.lexicon.induce import induce, layer_vectors
from crossalign.lexicon.vocab import check_thresholds, language_specific_vocab
from crossalign.objectives.base import OBJECTIVES, RawBatch, TokenContext
from crossalign.objectives.mlm import MaskedLM, encode, masked_lm_logits, masked_lm_loss
from crossalign.objectives.options import (
    ObjectiveOptions,
    SCSMLMOptions,
    TCSMLMOptions,
)

if TYPE_CHECKING:
    from crossalign.data.store.prepare import TrainingData
    from crossalign.data.store.reading import MonoText


def _first_sentences(text: MonoText) -> Callable[[slice], list[np.ndarray]]:
    """``f(slice(n))``: the first n sentences of a store's language as id arrays."""
    return lambda part: list(islice(text.iter_sentences(), part.stop))


def switch_positions(
    eligible: torch.Tensor, context: torch.Tensor, switch_prob: float, generator: torch.Generator
) -> torch.Tensor:
    """Bool [B, L]: eligible positions switched with probability
    min(1, switch_prob × |context| / |eligible|), i.e. ``switch_prob`` of the context tokens in
    expectation when enough are eligible. eligible ⊆ context, both bool [B, L]."""
    n_eligible = int(eligible.sum())
    if n_eligible == 0:
        return eligible.clone()
    p = min(1.0, switch_prob * int(context.sum()) / n_eligible)
    return eligible & (torch.rand(eligible.shape, generator=generator) < p)


class CodeSwitching:
    """Mixin of the code-switched objectives (MLM- or MASS-based): the switching options, the
    language-specific vocabularies, the partner language and the switched positions. The
    host is an ``Objective`` whose ``__init__`` checks its own options first (``init_token``
    or ``init_semantic``, then the host's ``__init__``), then calls ``init_switching``."""

    def init_switching(self, ctx: TokenContext) -> None:
        """Keep the switching options (``SwitchOptions``, checked) and make the switching
        state."""
        o = self.options
        if ctx.tokenizer is None:
            raise CrossalignError("code-switching needs the run's tokenizer in its TokenContext")
        check_thresholds(o.threshold, o.other_max)
        self.switch_prob = o.switch_prob
        self.threshold = o.threshold
        self.other_max = o.other_max
        self.csls_k = o.csls_k
        self.refresh_every = o.refresh_every
        self.max_sentences = o.max_sentences
        self.counts: dict[str, np.ndarray] = {}
        """Per language, how often each token id occurs (vocabularies are counted on these)."""
        self.sentences: dict[str, Callable[[slice], list[np.ndarray]]] = {}
        """Per language, its first sentences (id arrays) for contextual vectors."""
        self.languages: list[str] = []
        # the number of the last optimizer step begun (saved with checkpoints; before
        # step_begins it counted training micro-batches, the same number with grad_accum 1)
        self.register_buffer("calls", torch.zeros((), dtype=torch.long))
        self.register_buffer("specific", torch.zeros(0, 0, ctx.vocab_size, dtype=torch.bool), False)
        self.register_state(ctx)

    def register_state(self, ctx: TokenContext) -> None:
        """Register the buffers of the model-dependent state (saved with checkpoints)."""
        raise NotImplementedError

    def build_vocabularies(self) -> None:
        """``specific[a, b]``: bool [V] of the tokens specific to language a against b."""
        if len(self.counts) < 2:
            raise CrossalignError(
                f"code-switching needs monolingual text of at least two languages (data.mono "
                f"or data.corpus); the run has: {', '.join(self.counts) or 'none'}"
            )
        self.languages = sorted(self.counts)
        counts = self.counts
        size = self.ctx.vocab_size
        n = len(self.languages)
        specific = torch.zeros(n, n, size, dtype=torch.bool)
        for a, la in enumerate(self.languages):
            for b, lb in enumerate(self.languages):
                if a < b:
                    ia, ib = language_specific_vocab(
                        counts[la], counts[lb], self.threshold, self.other_max, self.ctx.special_ids
                    )
                    if len(ia) == 0 or len(ib) == 0:
                        raise CrossalignError(
                            f"no language-specific tokens for {la}-{lb} ({len(ia)} and {len(ib)}"
                            f" with frequency > {self.threshold}); lower the threshold option"
                        )
                    specific[a, b, ia] = True
                    specific[b, a, ib] = True
        self.specific = specific.to(self.calls.device)

    def start(self, model: PreTrainedModel, data: TrainingData | None = None) -> None:
        """Vocabularies counted on each language's whole tokenized training ``data`` (only
        its first ``max_sentences`` sentences when set), then the model-dependent state
        (``refresh``). The first sentences also give TCS's contextual vectors. Text in
        memory: ``TrainingData.from_texts``."""
        if data is None:
            raise CrossalignError(
                "code-switching counts its vocabularies on the training data: call "
                "start(model, data), e.g. with TrainingData.from_texts(tokenizer, texts, ...)"
            )
        size = self.ctx.vocab_size
        mono = data.store.mono
        self.counts = {lang: t.token_counts(size, self.max_sentences) for lang, t in mono.items()}
        self.sentences = {lang: _first_sentences(t) for lang, t in mono.items()}
        self.build_vocabularies()
        self.refresh(model)

    def refresh(self, model: PreTrainedModel) -> None:
        """Recompute the state that depends on the model's embeddings."""
        raise NotImplementedError

    def step_begins(self, model: PreTrainedModel, step: int) -> None:
        """Refresh before every ``refresh_every``-th optimizer step, so that all micro-batches
        of a step see the same state; ``calls`` records ``step``."""
        self.calls.fill_(step)
        if self.refresh_every and step % self.refresh_every == 0:
            self.refresh(model)

    def _index(self, lang: str) -> int:
        if lang not in self.languages:
            raise CrossalignError(f"code-switching has no vocabulary for language '{lang}'")
        return self.languages.index(lang)

    def _partner(self, lang: str, generator: torch.Generator) -> tuple[int, int]:
        """(index of ``lang``, index of a partner language drawn with ``generator``)."""
        a = self._index(lang)
        others = [b for b in range(len(self.languages)) if b != a]
        return a, others[int(torch.randint(len(others), (1,), generator=generator))]

    def add_switch(
        self,
        batch: dict[str, torch.Tensor],
        ids: torch.Tensor,
        context: torch.Tensor,
        partner: int,
        translatable: torch.Tensor,
        generator: torch.Generator,
    ) -> dict[str, torch.Tensor]:
        """Add ``switch`` (bool [B, L]: context positions to switch into language index
        ``partner``), ``switch_frac`` and, with language embeddings, ``cs_token_type_ids``
        (the partner's id at switched positions). ``ids`` [B, L]: the original tokens;
        ``context`` bool [B, L]: the positions that may switch (special tokens never do);
        ``translatable`` [n_lang, V] bool: per partner, tokens that may switch."""
        context = context & ~torch.isin(ids, torch.tensor(self.ctx.special_ids))
        eligible = context & translatable[partner][ids]
        switch = switch_positions(eligible, context, self.switch_prob, generator)
        batch["switch"] = switch
        batch["switch_frac"] = switch.sum() / context.sum().clamp(min=1)
        if self.ctx.languages:
            lang_b = self.ctx.language_id(self.languages[partner])
            batch["cs_token_type_ids"] = torch.where(switch, lang_b, batch["token_type_ids"])
        return batch


class CodeSwitchMLM(MaskedLM):
    """The MLM side of tcs_mlm and scs_mlm: MLM batches with switched context, the loss."""

    data = "mono"

    def collate_switch(
        self, raw: RawBatch, generator: torch.Generator, translatable: torch.Tensor
    ) -> tuple[dict[str, torch.Tensor], int]:
        """MLM batch plus the switch fields (``CodeSwitching.add_switch``) over the unmasked
        context; returns it with the partner's language index."""
        a, b = self._partner(raw.source, generator)
        batch = MaskedLM.collate(self, raw, generator)
        ids = torch.from_numpy(raw.blocks.astype("int64"))
        context = (batch["labels"] == IGNORE_INDEX) & batch["attention_mask"].bool()
        return self.add_switch(batch, ids, context, b, translatable, generator), b

    def loss(self, batch, outputs):
        """MLM(original) + MLM(code-switched) on the same labels; ``outputs`` are the logits
        [2N, V] of the N predicted positions, original rows first."""
        labels = batch["labels"][batch["labels"] != IGNORE_INDEX]
        n = labels.shape[0]
        lm_loss, ntok = masked_lm_loss(outputs[:n], labels)
        cs_loss, _ = masked_lm_loss(outputs[n:], labels)
        metrics = {"lm_loss": lm_loss.detach(), "cs_loss": cs_loss.detach()}
        metrics["switch_frac"] = batch["switch_frac"].float()
        return lm_loss + cs_loss, ntok, metrics


def switching_encoder(model: PreTrainedModel) -> PreTrainedModel:
    """The model whose inputs are code-switched: an encoder-decoder's encoder, else the model."""
    return model.get_encoder() if isinstance(model, EncoderDecoderModel) else model


class TokenSwitching(CodeSwitching):
    """TCS's state: per ordered language pair, a dictionary induced by CSLS from the model."""

    def init_token(self) -> None:
        """Keep TCS's options (``TokenSwitchOptions``: ``layer``, ``context_sentences``)."""
        self.layer = self.options.layer
        self.context_sentences = self.options.context_sentences

    def register_state(self, ctx: TokenContext) -> None:
        """``translations[a, b, t]``: the id of token t of language a in language b, or -1."""
        self.register_buffer("translations", torch.zeros(0, 0, ctx.vocab_size, dtype=torch.long))

    @torch.no_grad()
    def refresh(self, model: PreTrainedModel) -> None:
        """Induce every ordered pair's dictionary from the (encoder's) current ``layer``, on
        the model's device."""
        n, size = len(self.languages), self.ctx.vocab_size
        encoder = switching_encoder(model)
        device = encoder.get_input_embeddings().weight.device
        specific = self.specific.to(device)
        was_training = model.training
        vectors = {
            lang: layer_vectors(
                encoder,
                self.ctx.tokenizer,
                self.layer,
                self.sentences[lang](slice(self.context_sentences)),
                specific[a].any(dim=0).nonzero().squeeze(1),
                lang,
            )
            for a, lang in enumerate(self.languages)
        }
        model.train(was_training)
        table = torch.full((n, n, size), -1, dtype=torch.long, device=device)
        for a, la in enumerate(self.languages):
            for b, lb in enumerate(self.languages):
                if a != b:
                    src = specific[a, b].nonzero().squeeze(1)
                    tgt = specific[b, a].nonzero().squeeze(1)
                    found = induce(vectors[la], vectors[lb], src, tgt, self.csls_k)
                    table[a, b] = found.table(size)
        self.translations = table.to(self.calls.device)

    def collate_in_workers(self) -> bool:
        """A refreshed dictionary changes what ``collate`` writes: collate in the training
        process when ``refresh_every`` is set."""
        return not self.refresh_every

    def translatable(self, lang: str) -> torch.Tensor:
        """[n_lang, V] bool: the tokens of ``lang`` with a translation into each language."""
        return self.translations[self._index(lang)].cpu() >= 0

    @staticmethod
    def stacked_inputs(batch: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        """Encoder inputs [2B, L] of the original rows, then the code-switched ones."""
        both = {
            "input_ids": torch.cat([batch["input_ids"], batch["cs_input_ids"]]),
            "attention_mask": batch["attention_mask"].repeat(2, 1),
            "position_ids": batch["position_ids"].repeat(2, 1),
        }
        if "token_type_ids" in batch:
            both["token_type_ids"] = torch.cat(
                [batch["token_type_ids"], batch["cs_token_type_ids"]]
            )
        return both

    def switched_ids(
        self, batch: dict[str, torch.Tensor], ids: torch.Tensor, lang: str, partner: int
    ) -> dict[str, torch.Tensor]:
        """Add ``cs_input_ids``: ``input_ids`` with the ``switch`` positions replaced by the
        translations of the original ``ids`` [B, L] of language ``lang`` into the language of
        index ``partner``."""
        translated = self.translations[self._index(lang), partner].cpu()[ids]
        batch["cs_input_ids"] = torch.where(batch["switch"], translated, batch["input_ids"])
        return batch


@torch.no_grad()
def soft_translations(
    logits: torch.Tensor,
    embeddings: torch.Tensor,
    candidates: torch.Tensor,
    r_candidates: torch.Tensor | None,
    top_k: int = 8,
    csls_k: int = 10,
    temperature: float = 1.0,
) -> tuple[torch.Tensor, torch.Tensor]:
    """The weights and token ids whose embedding mixture ŷ = Σ_j w_j e(c_j) replaces each of N
    switched positions in SCS-MLM.

    logits [N, V]: output logits at the positions (all switched positions of one batch);
    embeddings [V, H]: the input embedding table; candidates [M] long: the partner language's
    language-specific token ids; r_candidates [M]: their CSLS terms r_S(y), or None to take
    them against this batch.

    x̂ = Σ_{i ≤ k} p̃_i e(t_i) over the k most probable tokens (probabilities renormalised);
    CSLS(x̂, y) = 2 cos(x̂, y) - r_T(x̂) - r_S(y) (Conneau et al. 2018, eq. 6), with r_T(x̂)
    the mean cosine of x̂ with its ``csls_k`` nearest candidates and, when ``r_candidates``
    is None, r_S(y) the mean cosine of e(y) with its ``csls_k`` nearest x̂ among the N rows
    (the batch is CSLS's source side; K capped at N), so a row's scores depend on the other
    rows. w = softmax(CSLS_j / temperature) over the k best candidates c_j. Returns
    (w [N, k] float32, c [N, k] token ids).
    """
    # the top-k probabilities renormalised over the k equal a softmax of the top-k logits
    top_logits, top = logits.float().topk(top_k, dim=-1)
    probs = top_logits.softmax(dim=-1)
    x_hat = torch.einsum("nk,nkh->nh", probs, embeddings[top].float())
    cos = unit(x_hat) @ unit(embeddings[candidates]).T  # [N, M]
    r_x = cos.topk(min(csls_k, cos.shape[1]), dim=1).values.mean(dim=1)
    if r_candidates is None:
        r_candidates = cos.topk(min(csls_k, cos.shape[0]), dim=0).values.mean(dim=0)
    csls = 2 * cos - r_x[:, None] - r_candidates[None, :].float()
    scores, best = csls.topk(min(top_k, cos.shape[1]), dim=1)
    return (scores / temperature).softmax(dim=-1), candidates[best]


class SemanticSwitching(CodeSwitching):
    """SCS's state: with ``csls_neighbourhood: vocabulary``, the CSLS neighbourhood terms of
    every partner's candidate tokens (with ``batch`` there is none)."""

    def init_semantic(self) -> None:
        """Keep SCS's options (``SemanticSwitchOptions``: ``top_k``, ``temperature`` and
        ``csls_neighbourhood``, the set the CSLS term r_S(y) of a candidate y is taken
        against).

        - ``batch`` (the default): the switched tokens of the same batch, each as its x̂
          (the paper's footnote 6 takes CSLS's neighbourhood over the tokens of the same
          batch; read literally, the batch's tokens being translated, i.e. its N switched
          positions, are CSLS's source side). Computed on the fly from the batch's
          [N, M] cosine matrix, K capped at the batch's N switched tokens, so each position's
          candidates depend on the other positions of its batch; nothing is cached, and
          ``refresh_every`` has nothing to refresh (a value > 0 is refused).
        - ``vocabulary`` (crossalign's earlier behaviour): the input embeddings of the block
          language's whole specific vocabulary, as MUSE takes CSLS's neighbourhoods over the
          vocabularies; cached in the ``r_terms`` buffer and recomputed every
          ``refresh_every`` steps, so between refreshes it lags the embeddings.

        Both take r_T(x̂) against the partner's specific vocabulary (the candidates): a
        monolingual batch holds no tokens of the partner language."""
        self.top_k = self.options.top_k
        self.temperature = self.options.temperature
        self.csls_neighbourhood = self.options.csls_neighbourhood

    def register_state(self, ctx: TokenContext) -> None:
        """With ``vocabulary``: ``r_terms[a, b, y]``, the CSLS term r_S(y) of b's specific
        token y against a's specific tokens."""
        if self.csls_neighbourhood == "vocabulary":
            self.register_buffer("r_terms", torch.zeros(0, 0, ctx.vocab_size))

    @torch.no_grad()
    def refresh(self, model: PreTrainedModel) -> None:
        """With ``vocabulary``: recompute the neighbourhood terms r_S(y) of every partner's
        candidate tokens from the current input embeddings (an encoder-decoder's: its
        encoder's). With ``batch`` there is nothing to recompute."""
        if self.csls_neighbourhood == "batch":
            return
        table = model.get_input_embeddings().weight.detach()
        n = len(self.languages)
        terms = torch.zeros(n, n, self.ctx.vocab_size, device=table.device)
        specific = self.specific.to(table.device)
        for a in range(n):
            for b in range(n):
                if a != b:
                    src = specific[a, b].nonzero().squeeze(1)
                    tgt = specific[b, a].nonzero().squeeze(1)
                    terms[a, b, tgt] = neighbourhood_means(table[tgt], table[src], self.csls_k)
        self.r_terms = terms.to(self.calls.device)

    def translatable(self, lang: str) -> torch.Tensor:
        """[n_lang, V] bool: the tokens specific to ``lang`` against each language."""
        return self.specific[self._index(lang)].cpu()

    def switched_inputs(
        self,
        embedding: torch.nn.Embedding,
        batch: dict[str, torch.Tensor],
        logits: torch.Tensor,
    ) -> dict[str, torch.Tensor]:
        """Encoder inputs of the code-switched pass: ``inputs_embeds`` [B, L, H] of
        ``input_ids`` with ŷ (``soft_translations`` of the output ``logits`` [N, V] at the N
        ``switch`` positions) in place of those positions, the batch's masks and positions,
        and ``cs_token_type_ids`` when present. One lookup for the inputs and the chosen
        candidates, so one embedding gradient."""
        ids, switch = batch["input_ids"], batch["switch"]
        a, b = int(batch["pair"][0]), int(batch["pair"][1])
        candidates = self.specific[b, a].nonzero().squeeze(1)
        cached = self.csls_neighbourhood == "vocabulary"
        weights, chosen = soft_translations(
            logits,
            embedding.weight,
            candidates,
            self.r_terms[a, b, candidates] if cached else None,
            self.top_k,
            self.csls_k,
            self.temperature,
        )
        rows = embedding(torch.cat([ids.flatten(), chosen.flatten()]))
        embeds = rows[: ids.numel()].view(*ids.shape, rows.shape[-1])
        mixed = rows[ids.numel() :].view(*chosen.shape, rows.shape[-1])
        y_hat = torch.einsum("nk,nkh->nh", weights.to(mixed.dtype), mixed)
        kwargs = {
            # einsum runs in bf16/fp16 under autocast; the embeddings stay in their own dtype
            "inputs_embeds": embeds.index_put(
                switch.nonzero(as_tuple=True), y_hat.to(embeds.dtype)
            ),
            "attention_mask": batch["attention_mask"],
            "position_ids": batch["position_ids"],
        }
        if "cs_token_type_ids" in batch:
            kwargs["token_type_ids"] = batch["cs_token_type_ids"]
        return kwargs


@OBJECTIVES.register("tcs_mlm")
class TokenCodeSwitchMLM(TokenSwitching, CodeSwitchMLM):
    """Token code-switched MLM: context tokens replaced by self-induced dictionary translations."""

    Options = TCSMLMOptions

    def __init__(
        self, ctx: TokenContext, options: ObjectiveOptions | None = None, **values: Any
    ) -> None:
        """Options: ``TCSMLMOptions`` (MLM's, the switching's and TCS's)."""
        CodeSwitchMLM.__init__(self, ctx, options, **values)
        self.init_token()
        self.init_switching(ctx)

    def collate(self, raw: RawBatch, generator: torch.Generator) -> dict[str, torch.Tensor]:
        """MLM masking, then ``cs_input_ids``: the masked inputs with switched context tokens
        replaced by their translations (masked positions kept). All [B, L]."""
        batch, b = self.collate_switch(raw, generator, self.translatable(raw.source))
        ids = torch.from_numpy(raw.blocks.astype("int64"))
        return self.switched_ids(batch, ids, raw.source, b)

    def forward(self, model: PreTrainedModel, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        """One encoder pass over the original and code-switched inputs stacked as [2B, L];
        logits [2N, V] at the predicted positions (original rows first)."""
        hidden = encode(model, self.stacked_inputs(batch))
        selected = (batch["labels"] != IGNORE_INDEX).repeat(2, 1)
        return masked_lm_logits(model, hidden, selected)


@OBJECTIVES.register("scs_mlm")
class SemanticCodeSwitchMLM(SemanticSwitching, CodeSwitchMLM):
    """Semantic code-switched MLM: context embeddings replaced by soft CSLS translations."""

    Options = SCSMLMOptions

    def __init__(
        self, ctx: TokenContext, options: ObjectiveOptions | None = None, **values: Any
    ) -> None:
        """Options: ``SCSMLMOptions`` (MLM's, the switching's and SCS's)."""
        CodeSwitchMLM.__init__(self, ctx, options, **values)
        self.init_semantic()
        self.init_switching(ctx)

    def collate(self, raw: RawBatch, generator: torch.Generator) -> dict[str, torch.Tensor]:
        """MLM masking plus ``switch`` [B, L] (context tokens of the block's specific
        vocabulary to replace) and ``pair`` [2] (language indices: block, partner)."""
        batch, b = self.collate_switch(raw, generator, self.translatable(raw.source))
        batch["pair"] = torch.tensor([self._index(raw.source), b])
        return batch

    def forward(self, model: PreTrainedModel, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        """The original pass (with gradients) gives, detached, the output distribution at
        switched positions; a second pass runs on ``inputs_embeds`` with ŷ at those positions.
        Returns logits [2N, V] at the predicted positions of both passes."""
        selected = batch["labels"] != IGNORE_INDEX
        hidden = encode(model, batch)
        with torch.no_grad():
            logits = masked_lm_logits(model, hidden.detach(), batch["switch"])
        kwargs = self.switched_inputs(model.get_input_embeddings(), batch, logits)
        switched = model.base_model(**kwargs).last_hidden_state
        # one head call for both passes (original rows first)
        return masked_lm_logits(model, torch.cat([hidden, switched]), selected.repeat(2, 1))
