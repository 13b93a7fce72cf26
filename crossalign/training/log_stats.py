"""The per-objective sums behind each training line of ``metrics.jsonl`` (``LogStats``),
kept in checkpoints so that a resumed run logs what the uninterrupted run logs."""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
from accelerate import Accelerator

from crossalign.objectives import Objective


class LogStats:
    """Per-objective sums between two log lines: loss, extra metrics and predicted tokens.

    ``flush`` turns them into the means a ``metrics.jsonl`` line reports, averaged over steps
    and processes. ``train/ppl`` averages the masked-LM part of each objective that counts
    for perplexity (its ``lm_loss`` metric when it reports one, else its loss), weighted by
    its masked-LM tokens (its ``lm_tokens`` metric when it reports one, else its count), so
    auxiliary losses and their counts never enter it. An objective's means are over the
    steps that trained it (``skipped``: steps that did not, with ``train.step_per_objective``
    and a weight of 0); one that no step trained since the last line is left out of it.
    """

    def __init__(
        self, objectives: dict[str, Objective], weights: dict[str, float], mix: str = "weighted"
    ) -> None:
        self.objectives = objectives
        self.weights = weights
        """The weights of the latest step (the logged ``loss`` uses them)."""
        self.mix = mix
        self.sums: dict[str, torch.Tensor] = {}
        self.steps = 0
        self.skipped: dict[str, int] = {}
        """Per objective, the steps since the last line that did not train it."""

    def skip(self, names: Sequence[str]) -> None:
        """Count a step that did not train the objectives ``names``."""
        for name in names:
            self.skipped[name] = self.skipped.get(name, 0) + 1

    def add(self, results: dict, scale: float) -> None:
        """Add one micro-step's (loss, n_tokens, metrics) per objective, scaled by ``scale``."""
        for name, (loss, ntok, metrics) in results.items():
            for key, value in {"loss": loss, **metrics}.items():
                factor = 1.0 if key == "lm_tokens" else scale  # a count, summed like tokens
                key = f"{name}/{key}"
                self.sums[key] = self.sums.get(key, 0.0) + value.detach().float() * factor
            key = f"{name}/tokens"
            self.sums[key] = self.sums.get(key, 0.0) + ntok.detach().float()

    def flush(self, accelerator: Accelerator) -> dict[str, float]:
        """Means since the last flush (then reset): ``loss``, ``loss/<objective>``,
        ``<objective>/<metric>`` and ``train/ppl``."""
        keys = sorted(self.sums)
        values = (
            accelerator.reduce(torch.stack([self.sums[k] for k in keys]), "mean").tolist()
            if keys
            else []
        )
        trained = {n: self.steps - self.skipped.get(n, 0) for n in self.objectives}
        means = {k: v / trained[k.partition("/")[0]] for k, v in zip(keys, values)}
        record: dict[str, float] = {}
        ppl_loss = ppl_tokens = 0.0
        names = [n for n in self.objectives if trained[n]]
        for name in names:
            objective = self.objectives[name]
            record[f"loss/{name}"] = means[f"{name}/loss"]
            for key, value in means.items():
                if key.startswith(f"{name}/") and key not in (f"{name}/loss", f"{name}/tokens"):
                    record[key] = value
            if objective.counts_for_perplexity:
                ntok = means.get(f"{name}/lm_tokens", means[f"{name}/tokens"])
                ppl_loss += means.get(f"{name}/lm_loss", means[f"{name}/loss"]) * ntok
                ppl_tokens += ntok
        record["loss"] = self._loss(record, means, names)
        if ppl_tokens:
            record["train/ppl"] = math.exp(min(ppl_loss / ppl_tokens, 50.0))
        self.sums, self.steps, self.skipped = {}, 0, {}
        return record

    def _loss(self, record: dict[str, float], means: dict[str, float], names: list[str]) -> float:
        """The loss the steps optimised (``accumulate_gradients``) with the latest weights:
        Σ_o w_o L_o over the objectives ``names`` trained since the last line, or with
        ``pooled`` mixing Σ_o w_o N_o L_o / Σ_o N_o (N_o: the objective's predicted tokens)."""
        if self.mix != "pooled":
            return sum(self.weights[n] * record[f"loss/{n}"] for n in names)
        tokens = {n: means[f"{n}/tokens"] for n in names}
        total = sum(tokens.values()) or 1.0
        return sum(self.weights[n] * tokens[n] * record[f"loss/{n}"] for n in names) / total

    def state_dict(self, accelerator: Accelerator) -> dict:
        """The sums since the last log line, averaged over processes, for a checkpoint: a run
        resumed between two log lines then logs the means the uninterrupted run logs."""
        keys = sorted(self.sums)
        values = (
            accelerator.reduce(torch.stack([self.sums[k] for k in keys]), "mean").tolist()
            if keys
            else []
        )
        return {"steps": self.steps, "sums": dict(zip(keys, values)), "skipped": dict(self.skipped)}

    def load_state_dict(self, state: dict, device: torch.device) -> None:
        """Continue from ``state_dict``'s sums (every process holds the mean; ``flush``
        averages over processes, so the total is unchanged)."""
        self.steps = int(state.get("steps", 0))
        self.skipped = {k: int(v) for k, v in state.get("skipped", {}).items()}
        self.sums = {k: torch.tensor(v, device=device) for k, v in state.get("sums", {}).items()}
