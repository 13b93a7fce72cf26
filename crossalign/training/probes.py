"""Alignment probes during training: the model's AER on a gold test set and its BLI on a gold
dictionary, measured with the registered evaluations' own functions on the live model.

``train.probe_aer`` and ``train.probe_bli`` name them; the training loop adds their metrics
(``probe/aer``, ``probe/bli_<metric>``) to every held-out evaluation line of ``metrics.jsonl``.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass

import torch
from transformers import PreTrainedModel, PreTrainedTokenizerBase

from crossalign.config import AERProbe, BLIProbe, RunConfig
from crossalign.errors import CrossalignError
from crossalign.evals.gold import TestSet, out_of_range_warning, read_testset


@dataclass
class Probes:
    """The configured probes, with their gold data read once at the start of the run."""

    aer: AERProbe | None = None
    testset: TestSet | None = None
    bli: BLIProbe | None = None
    corpus: str | None = None
    """``data.corpus``: the text whose hidden states give word vectors for a BLI layer >= 1."""

    @classmethod
    def of_run(cls, cfg: RunConfig, model: PreTrainedModel) -> Probes:
        """The probes of ``cfg.train``; one-line errors for a missing test set and for a layer
        the model does not have, before the first step."""
        tc, last = cfg.train, model.config.num_hidden_layers
        for name, probe in (("probe_aer", tc.probe_aer), ("probe_bli", tc.probe_bli)):
            if probe is not None and probe.layer > last:
                raise CrossalignError(
                    f"train.{name}.layer={probe.layer}: the model has layers 0..{last}"
                )
        if tc.probe_bli is not None and tc.probe_bli.layer > 0 and not cfg.data.corpus:
            raise CrossalignError(
                "train.probe_bli.layer >= 1 averages hidden states over data.corpus text: set "
                "data.corpus, or use train.probe_bli.layer=0"
            )
        testset = read_testset(tc.probe_aer.gold) if tc.probe_aer else None
        if testset is not None and (warning := out_of_range_warning(testset.gold)):
            print(f"train.probe_aer: {warning}", file=sys.stderr)
        return cls(tc.probe_aer, testset, tc.probe_bli, cfg.data.corpus)

    def __bool__(self) -> bool:
        return self.aer is not None or self.bli is not None

    def measure(
        self, model: PreTrainedModel, tokenizer: PreTrainedTokenizerBase
    ) -> dict[str, float]:
        """``probe/aer``, ``probe/aer_<precision|recall|f1>`` and ``probe/bli_<metric>`` of
        ``model`` now (no gradients; its training mode is restored)."""
        was_training = model.training
        out: dict[str, float] = {}
        try:
            with torch.no_grad():
                if self.aer is not None:
                    out.update(self._aer(model, tokenizer))
                if self.bli is not None:
                    out.update(self._bli(model, tokenizer))
        finally:
            model.train(was_training)
        return out

    def _aer(self, model: PreTrainedModel, tokenizer: PreTrainedTokenizerBase) -> dict[str, float]:
        """``eval aer --testset`` (its default extraction) at ``aer.layer``."""
        from crossalign.align.aligner import WordAligner
        from crossalign.align.config import AlignConfig
        from crossalign.evals.aer import aer_scores

        ts, layer = self.testset, self.aer.layer
        aligner = WordAligner(model, tokenizer, AlignConfig(), (ts.src_lang, ts.tgt_lang))
        links = aligner.align(list(zip(ts.src, ts.tgt)), [layer], progress=False)[layer]
        scores = aer_scores([set(a) for a in links], ts.gold)
        return {("probe/aer" if k == "aer" else f"probe/aer_{k}"): v for k, v in scores.items()}

    def _bli(self, model: PreTrainedModel, tokenizer: PreTrainedTokenizerBase) -> dict[str, float]:
        """``eval bli`` at ``bli.layer``."""
        from crossalign.evals.bli import bli_scores, bli_set_for
        from crossalign.evals.options import BLIOptions

        device = str(next(model.parameters()).device)
        opts = BLIOptions(
            dict=self.bli.dict,
            layer=self.bli.layer,
            words=self.bli.words,
            corpus=self.corpus,
            device=device,
        )
        scores = bli_scores(bli_set_for(model, tokenizer, opts))
        return {f"probe/bli_{k}": float(v) for k, v in scores.items()}
