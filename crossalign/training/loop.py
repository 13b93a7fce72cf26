"""The one training loop: objectives combined by weight, on accelerate.

Read top to bottom: ``train`` opens the run directory, ``TrainingRun.open`` sets up (data,
tokenizer, model, objectives: ``setup``), then per optimizer step the loop draws one global
batch per objective (``loader``), splits it over processes and micro-batches and takes the
step (``step.train_step``: the weighted losses summed, micro-batches weighted by their
predicted tokens, so the step does not depend on how the batch is split; AdamW with warm-up
and linear decay); it logs (``log_stats``), evaluates (``crossalign.evals.heldout`` and the
``probes``) and checkpoints (``checkpointing``) on schedule. Weights may follow a schedule
over the steps, and ``train.step_per_objective`` gives each objective its own update within a
step (XLM's loop).
"""

from __future__ import annotations

import contextlib
import json
import signal
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TextIO

import torch
import yaml
from accelerate import Accelerator
from accelerate.utils import set_seed
from torch.utils.data import DataLoader
from tqdm.auto import tqdm

from crossalign.checkpoint import (
    CONFIG,
    checkpoint_name,
    good_checkpoints,
    read_state,
)
from crossalign.config import RunConfig
from crossalign.data.store.streaming import StreamingText
from crossalign.errors import CrossalignError
from crossalign.evals.heldout import heldout_loss
from crossalign.fileio import write_text_atomic
from crossalign.models.card import training_card
from crossalign.models.load import model_languages
from crossalign.models.seq2seq import encoder_of, is_seq2seq
from crossalign.objective_options import run_config_dict
from crossalign.objectives.objective_set import ObjectiveSet
from crossalign.run_dir import METRICS, RunStart
from crossalign.tracking import check_trackers_installed, flat_config
from crossalign.training.checkpointing import (
    all_finite,
    apply_changed_settings,
    divergence_error,
    export_model,
    save_checkpoint,
    start_run,
)
from crossalign.training.loader import StepCollator, StepPlan, finish_collation, step_loader
from crossalign.training.log_stats import LogStats
from crossalign.training.probes import Probes
from crossalign.training.sampler import SourceSampler
from crossalign.training.setup import (
    Setup,
    build_optimizer,
    build_schedule,
    build_setup,
    check_step_per_objective,
    compile_model,
    compiled_graphs,
    freeze_parameters,
    mixed_precision,
    objective_samplers,
    reset_precision_state,
    run_is_seq2seq,
    step_batch_sizes,
    tracking_options,
)
from crossalign.training.step import DivergenceWatch, TrainState, train_step


def precision_switch(checkpoint: Path, saved: str | None, accelerator: Accelerator) -> str | None:
    """A note when ``train.precision: auto`` resolves here to another mixed precision than
    where ``checkpoint`` was saved (``saved``; None for checkpoints that predate the record),
    e.g. a bf16 GPU run resumed on a CPU without bf16; a switch to or from fp16 (whose
    loss-scaler state the other lacks) is refused in one line."""
    now = accelerator.mixed_precision
    if saved is None or saved == now:
        return None
    if "fp16" in (saved, now):
        raise CrossalignError(
            f"{checkpoint} trained in {saved} and train.precision resolves to {now} here; an "
            "fp16 run keeps a loss-scaler state the other precision lacks: resume on a machine "
            f"where it resolves to {saved}"
        )
    return f"note: {checkpoint} trained in {saved}; it continues in {now} on this machine"


class StopRequest:
    """First Ctrl-C asks the loop to checkpoint and stop at the end of the current step; a
    second one interrupts at once."""

    def __init__(self) -> None:
        self.requested = False

    def __call__(self, signum, frame) -> None:
        if self.requested:
            raise KeyboardInterrupt
        self.requested = True
        tqdm.write("interrupt: finishing this step, saving a checkpoint (Ctrl-C again to abort)")


def _out_of_memory(
    error: Exception, cfg: RunConfig, per_objective: dict[str, int], step: int
) -> Exception:
    """A one-line error for a step that did not fit in memory (other errors unchanged)."""
    text = str(error)
    if not isinstance(error, torch.OutOfMemoryError) and "can't allocate memory" not in text:
        return error
    sizes = ", ".join(f"{n} {b}" for n, b in per_objective.items())
    return CrossalignError(
        f"out of memory at step {step} with micro-batches of {sizes} sequences of up to "
        f"data.max_length={cfg.data.max_length} tokens: lower data.max_length or "
        "train.batch_size, or raise train.grad_accum (same global batch, smaller "
        "micro-batches)"
    )


def train(
    cfg: RunConfig,
    resume: str | None = None,
    overwrite: bool = False,
    allow_data_change: bool = False,
) -> dict[str, float]:
    """Run pre-training as configured; ``resume`` is ``last`` or a checkpoint directory (a
    resume on training data other than the checkpoint's is refused unless
    ``allow_data_change``).

    A new run needs an empty (or absent) ``run_dir``, unless ``overwrite`` (which empties
    it); one run at a time holds ``run_dir``. Returns the final held-out metrics. Writes
    ``config.yaml``, ``metrics.jsonl``, ``checkpoints/`` and the final ``model/`` (with its
    model card) under ``cfg.run_dir``; ``train.log_with`` trackers get every log record too.
    """
    check_trackers_installed(cfg.train.log_with)
    precision = mixed_precision(cfg.train.precision)
    reset_precision_state(precision)
    # With no GPU, train on the CPU (gloo) also when launched as several processes.
    accelerator = Accelerator(
        mixed_precision=precision,
        cpu=not torch.cuda.is_available(),
        **tracking_options(cfg),
    )
    if cfg.train.precision == "auto" and accelerator.is_main_process:
        print(f"train.precision auto: {'fp32' if precision == 'no' else precision} on this machine")
    sizes = step_batch_sizes(cfg, accelerator.num_processes)
    start = start_run(accelerator, cfg, resume, overwrite)
    try:
        held = TrainingRun.open(accelerator, cfg, start, *sizes, allow_data_change).run()
    except OSError as e:  # metrics.jsonl, config.yaml or the final model/ (a full disk)
        good = good_checkpoints(cfg.run_dir)
        last = f"the last good checkpoint is {good[0]}" if good else "no checkpoint was written"
        raise CrossalignError(
            f"{e.filename or cfg.run_dir}: {e.strerror or e}; {last}; fix it and continue "
            "with --resume"
        ) from None
    finally:
        if start.lock is not None:
            start.lock.release()
    if cfg.train.log_with:
        accelerator.end_training()  # closes the trackers (and the process group)
    return held


@dataclass
class TrainingRun:
    """A training run in its ``run_dir`` (taken by ``start_run``). ``open`` builds it (and
    loads the checkpoint it resumes from); ``run`` draws each step's batches and calls
    ``run_step``, ``maybe_log``, ``maybe_eval`` and ``maybe_save`` in turn, then ``finish``.
    The fields after ``stats`` change as the run goes."""

    accelerator: Accelerator
    cfg: RunConfig
    config: dict
    """``cfg`` as plain data (``config.yaml`` and every checkpoint's copy)."""
    setup: Setup
    trainer: TrainState
    streams: dict[str, dict[str, StreamingText]]
    samplers: dict[str, SourceSampler]
    valid_batch_size: int
    """Held-out micro-batch size (``heldout_loss``)."""
    batch_sizes: dict[str, int]
    """Per objective, its global batch."""
    micro_sizes: dict[str, int]
    """Per objective, its micro-batch on one process."""
    stats: LogStats
    step: int = 0
    """Optimizer steps done."""
    position: dict[str, dict[str, int]] = field(default_factory=dict)
    """The data position after ``step`` (per objective, examples drawn per source)."""
    last_saved: Path | None = None
    stop: StopRequest = field(default_factory=StopRequest)
    tokens_seen: int = 0
    """This process's tokens since the last training line of the log."""
    last_time: float = 0.0
    """When ``tokens_seen`` started counting (evaluation and saving time excluded)."""
    started: float = 0.0
    """When this session's ``run`` started (``time.perf_counter``)."""
    seconds_before: float = 0.0
    """Wall-clock seconds trained by the sessions before this one (from the checkpoint)."""
    bar: tqdm | None = None
    log_file: TextIO | None = None
    """``metrics.jsonl`` opened for appending (main process only)."""
    probes: Probes = field(default_factory=Probes)
    """``train.probe_aer`` / ``train.probe_bli``, measured with every held-out evaluation."""
    watch: DivergenceWatch | None = None
    """The first non-finite step the optimizer skipped on the device, read at boundaries."""

    @classmethod
    def open(
        cls,
        accelerator: Accelerator,
        cfg: RunConfig,
        start: RunStart,
        valid_batch_size: int,
        batch_sizes: dict[str, int],
        micro_sizes: dict[str, int],
        allow_data_change: bool = False,
    ) -> TrainingRun:
        """Seed, build data, tokenizer, model and objectives (``build_setup``), AdamW with
        warm-up and linear decay, prepared by ``accelerator``, and the samplers; load the
        checkpoint ``start`` resumes from; write ``config.yaml``."""
        tc = cfg.train
        set_seed(tc.seed)
        setup = build_setup(cfg, start.resume_from, accelerator)
        check_step_per_objective(cfg, setup.objectives, accelerator.num_processes)
        if tc.freeze:
            frozen = freeze_parameters(setup.model, tc.freeze)
            if accelerator.is_main_process:
                left = sum(p.numel() for p in setup.model.parameters() if p.requires_grad)
                print(f"train.freeze: {len(frozen)} parameter tensors frozen; {left:,} "
                      f"parameters of the model train")  # fmt: skip
        if tc.compile:
            compile_model(setup.model, tc.compile_backend)
        module = ObjectiveSet(setup.model, setup.objectives)
        optimizer = build_optimizer(module, cfg)
        scheduler = build_schedule(optimizer, cfg)
        module, optimizer = accelerator.prepare(module, optimizer)
        accelerator.register_for_checkpointing(scheduler)
        trainer = TrainState.of_run(accelerator, module, optimizer, scheduler, setup, cfg)
        streams, samplers = objective_samplers(setup, cfg)
        stats = LogStats(setup.objectives, setup.weights, tc.objective_mix)
        position = {n: s.state_dict() for n, s in samplers.items()}
        sizes = (valid_batch_size, batch_sizes, micro_sizes)
        config = run_config_dict(cfg)
        run = cls(
            accelerator, cfg, config, setup, trainer, streams, samplers, *sizes, stats, 0, position
        )
        run.probes = Probes.of_run(cfg, encoder_of(setup.model))
        run.watch = DivergenceWatch(accelerator.device)
        if start.resume_from is not None:
            run.resume(start.resume_from, start.changed, allow_data_change)
        if accelerator.is_main_process:
            text = yaml.safe_dump(run.config, sort_keys=False)
            write_text_atomic(run.run_dir / CONFIG, text)
        run.start_tracking()
        return run

    @property
    def run_dir(self) -> Path:
        """``cfg.run_dir``."""
        return Path(self.cfg.run_dir)

    def start_tracking(self) -> None:
        """Start the ``train.log_with`` trackers (main process), named after ``run_dir``, with
        the config flattened to ``section.key`` hyper-parameters."""
        if self.cfg.train.log_with:
            name = self.run_dir.resolve().name
            self.accelerator.init_trackers(name, config=flat_config(self.config))

    def resume(self, checkpoint: Path, changed: list[str], allow_data_change: bool = False) -> None:
        """Continue from ``checkpoint``: weights, optimizer, schedule and RNG states, then
        the ``changed`` settings (``apply_changed_settings``), the step, the data position
        and the log sums since the last training line. Training data other than the
        checkpoint's (its recorded fingerprint) is refused unless ``allow_data_change``."""
        state = read_state(checkpoint)
        saved = state.get("data_fingerprint")
        if saved and saved != self.setup.data_fingerprint and not allow_data_change:
            raise CrossalignError(
                f"{checkpoint}: the training data changed since this checkpoint was saved (a "
                "source file was edited, replaced or moved); the data position it records "
                "would point into other text: resume with the same data, or pass "
                "--allow-data-change to continue on the new data"
            )
        note = precision_switch(checkpoint, state.get("precision"), self.accelerator)
        try:
            self.accelerator.load_state(str(checkpoint / "trainer"))
        except Exception as e:  # a checkpoint without a manifest (older) that does not load
            raise CrossalignError(
                f"cannot load the trainer state of {checkpoint}: {str(e).splitlines()[0]}; "
                "resume from an earlier checkpoint (--resume CHECKPOINT)"
            ) from None
        apply_changed_settings(self.trainer.optimizer, self.trainer.scheduler, self.cfg, changed)
        self.step = int(state["step"])
        self.seconds_before = float(state.get("train_seconds", 0.0))
        self.position = state["data"]
        self.stats.load_state_dict(state.get("log", {}), self.accelerator.device)
        for name, sampler in self.samplers.items():
            sampler.load_state_dict(self.position.get(name, {}))
        self.last_saved = checkpoint
        if self.accelerator.is_main_process:
            tqdm.write(f"resumed from {checkpoint} at step {self.step}")
            if changed:
                tqdm.write("changed settings applied from here: " + "; ".join(changed))
            if note:
                tqdm.write(note)

    def run(self) -> dict[str, float]:
        """Train from ``step`` to ``train.steps`` (first Ctrl-C: checkpoint and stop), then
        ``finish``; prints the summary and returns the final held-out metrics."""
        main, tc = self.accelerator.is_main_process, self.cfg.train
        previous_handler = signal.signal(signal.SIGINT, self.stop)
        self.tokens_seen, self.last_time = 0, time.perf_counter()
        self.started = self.last_time
        self.bar = tqdm(
            total=tc.steps, initial=self.step, disable=not main, desc="train", unit="step"
        )
        self.trainer.module.train()
        try:
            loader, objectives = self._loader(), self.setup.objectives
            metrics = self.run_dir / METRICS
            with open(metrics, "a", encoding="utf-8") if main else contextlib.nullcontext() as log:
                self.log_file = log
                for item in loader:
                    self.run_step([finish_collation(objectives, c) for c in item.micro])
                    self.position = item.position
                    self.maybe_log()
                    self.maybe_eval()
                    self.maybe_save()
                held = self.finish()
        finally:
            self.bar.close()  # an error message then starts on its own line
            signal.signal(signal.SIGINT, previous_handler)
        if main:
            _print_summary(self.run_dir, held, self.cfg)
        self.accelerator.wait_for_everyone()
        return held

    def _loader(self) -> DataLoader:
        """The draws of steps ``step + 1`` ... ``train.steps`` from the data ``position``,
        this process's slices collated (``step_loader``)."""
        tc = self.cfg.train
        rank = self.accelerator.process_index
        examples = self.setup.data.by_kind()
        collator = StepCollator(
            self.setup.objectives, examples, tc.seed, rank, tc.grad_accum, self.micro_sizes
        )
        plan = StepPlan(
            self.samplers, self.step, tc.steps, self.batch_sizes, self.streams, self.position
        )
        return step_loader(collator, plan, self.cfg.data.num_workers)

    def run_step(self, micro: list[dict[str, dict[str, torch.Tensor]]]) -> None:
        """Step ``step + 1`` on this process's collated micro-batches (``train_step``) with the
        objectives' weights after ``step`` steps, and its log sums; one-line errors for a step
        that does not fit in memory and for a non-finite one (which moves the checkpoints its
        weights gave aside)."""
        weights = self.setup.weights_at(self.step)
        self.trainer.weights = self.stats.weights = weights
        try:
            outcome = train_step(self.trainer, micro, self.step + 1)
        except (torch.OutOfMemoryError, RuntimeError) as e:
            raise _out_of_memory(e, self.cfg, self.micro_sizes, self.step + 1) from None
        if outcome.deferred:
            self.watch.record(outcome)
        elif not outcome.finite:
            main = self.accelerator.is_main_process
            raise divergence_error(self.run_dir, self.step, outcome.problem, main)
        self.tokens_seen += outcome.tokens
        for micro_results in outcome.results:
            self.stats.add(micro_results, 1.0 / self.cfg.train.grad_accum)
        self.stats.skip(outcome.skipped)
        self.step += 1
        self.stats.steps += 1
        self.bar.update(1)

    def train_seconds(self) -> float:
        """Wall-clock seconds this run has trained (logging, held-out evaluation and saving
        included), over every session that resumed it."""
        return self.seconds_before + time.perf_counter() - self.started

    def _emit(self, record: dict) -> None:
        """Append ``record`` to ``metrics.jsonl`` and send it to the trackers (main process)."""
        if self.log_file is not None:
            self.log_file.write(json.dumps(record) + "\n")
            self.log_file.flush()
            self._track(record)

    def _track(self, record: dict) -> None:
        """Log a ``metrics.jsonl`` record to the ``train.log_with`` trackers: the same keys,
        at its ``step``."""
        if self.cfg.train.log_with:
            values = {k: v for k, v in record.items() if k != "step"}
            self.accelerator.log(values, step=record["step"])

    def maybe_log(self) -> None:
        """Every ``train.log_every`` steps and after the last: a training line (step, lr,
        processes, each scheduled objective's ``weight/<objective>`` in the last step, the
        ``LogStats`` means since the last line, tokens/s over all processes)."""
        tc, step = self.cfg.train, self.step
        if step % tc.log_every and step != tc.steps:
            return
        self.check_divergence()
        accelerator = self.accelerator
        now = time.perf_counter()
        lr = self.trainer.scheduler.get_last_lr()[0]
        record = {"step": step, "lr": lr, "processes": accelerator.num_processes}
        for name, schedule in self.setup.schedules.items():
            if not schedule.is_constant:
                record[f"weight/{name}"] = self.trainer.weights[name]
        record.update(self.stats.flush(accelerator))
        seen = torch.tensor(float(self.tokens_seen), device=accelerator.device)
        tokens = accelerator.reduce(seen, "sum").item()
        record["tokens_per_s"] = tokens / max(now - self.last_time, 1e-9)
        record["train_seconds"] = self.train_seconds()
        if tc.compile:
            record["compile/graphs"] = compiled_graphs()
        self.tokens_seen, self.last_time = 0, now
        self.bar.set_postfix(loss=f"{record['loss']:.3f}", tok_s=f"{record['tokens_per_s']:.0f}")
        self._emit(record)

    def _evaluate(self) -> dict[str, float]:
        """Held-out metrics now (``heldout_loss``) and the main process's probes
        (``_probe``), appended to the log when there are any."""
        held = heldout_loss(
            self.accelerator,
            self.trainer.module,
            self.setup.data,
            self.valid_batch_size,
            self.cfg.train.seed,
        )
        held.update(self._probe())
        if held:
            self._emit({"step": self.step, **held})
        return held

    def _probe(self) -> dict[str, float]:
        """The ``train.probe_*`` metrics of the model now (main process; else none)."""
        if not (self.probes and self.accelerator.is_main_process):
            return {}
        model = self.accelerator.unwrap_model(self.trainer.module).model
        return self.probes.measure(model, self.setup.tokenizer)

    def maybe_eval(self) -> None:
        """Every ``train.eval_every`` steps before the last: held-out metrics, logged and
        shown."""
        tc, step = self.cfg.train, self.step
        if not (tc.eval_every and step % tc.eval_every == 0 and step < tc.steps):
            return
        self.check_divergence()
        held = self._evaluate()
        if held:
            self.bar.write(f"step {step}: " + _describe(held))
        self.last_time = time.perf_counter()

    def maybe_save(self) -> None:
        """Every ``train.save_every`` steps a checkpoint; after a Ctrl-C one too, then stop
        with the command that continues."""
        tc, step = self.cfg.train, self.step
        if (tc.save_every and step % tc.save_every == 0) or self.stop.requested:
            self.save()
            self.last_time = time.perf_counter()
        if self.stop.requested:
            self.bar.close()
            raise CrossalignError(
                f"interrupted at step {step}; checkpoint saved to {self.last_saved}; "
                f"continue with: crossalign train ... --resume"
            )

    def save(self) -> None:
        """Checkpoint ``step`` (``save_checkpoint``) once every process holds finite weights
        and optimizer states; non-finite ones stop the run as a divergence."""
        self.check_divergence()
        accelerator, module = self.accelerator, self.trainer.module
        main, step = accelerator.is_main_process, self.step
        finite = float(all_finite(module, self.trainer.optimizer))
        finite = torch.tensor(finite, device=accelerator.device)
        # sharded states differ by process
        if accelerator.reduce(finite, "sum").item() < accelerator.num_processes:
            what = f"weights became non-finite at step {step}"
            raise divergence_error(self.run_dir, step + 1, what, main)
        self.last_saved = save_checkpoint(
            accelerator,
            module,
            self.setup.tokenizer,
            self.run_dir,
            step,
            position=self.position,
            log_state=self.stats.state_dict(accelerator),
            config=self.config,
            keep=self.cfg.train.keep_checkpoints,
            train_seconds=self.train_seconds(),
            data_fingerprint=self.setup.data_fingerprint,
        )

    def check_divergence(self) -> None:
        """Stop as a divergence if a step since the last boundary was non-finite (its update
        was skipped on the device, so no non-finite value reached the weights); one device
        sync."""
        found = self.watch.first() if self.watch is not None else None
        if found is None:
            return
        bad, what = found
        stopped = "stopped before the update"
        if bad < self.step:
            stopped = f"that update was skipped, and the run stopped at step {self.step}"
        main = self.accelerator.is_main_process
        raise divergence_error(self.run_dir, bad - 1, what, main, stopped)

    def finish(self) -> dict[str, float]:
        """After the last step: its checkpoint (unless just saved), the final held-out metrics
        (logged and returned) and the exported ``model/``."""
        self.bar.close()
        if self.last_saved is None or self.last_saved.name != checkpoint_name(self.step):
            self.save()
        held = self._evaluate()
        if self.accelerator.is_main_process:
            module, tokenizer = self.trainer.module, self.setup.tokenizer
            card = self.model_card(held)
            export_model(self.accelerator, module, tokenizer, card, self.run_dir / "model")
        return held

    def model_card(self, held: dict[str, float]) -> str:
        """The ``README.md`` of the exported model: this run's config, languages, steps and
        final held-out metrics ``held`` (``training_card``)."""
        model = self.accelerator.unwrap_model(self.trainer.module).model
        languages = self.setup.data.languages()
        return training_card(
            self.cfg, languages, self.step, held, model_languages(model), is_seq2seq(model)
        )


def _describe(metrics: dict[str, float]) -> str:
    return ", ".join(f"{k} {v:.4g}" for k, v in metrics.items())


def _print_summary(run_dir: Path, held: dict[str, float], cfg: RunConfig) -> None:
    if "valid/mlm_ppl" in held:
        print(
            f"held-out MLM perplexity: {held['valid/mlm_ppl']:.2f} "
            f"(loss {held['valid/mlm_loss']:.4f})"
        )
    if "valid/tlm_ppl" in held:
        print(
            f"held-out TLM perplexity: {held['valid/tlm_ppl']:.2f} "
            f"(loss {held['valid/tlm_loss']:.4f})"
        )
    for name in ("mass", "mt"):
        if f"valid/{name}_ppl" in held:
            print(
                f"held-out {name.upper()} perplexity: {held[f'valid/{name}_ppl']:.2f} "
                f"(loss {held[f'valid/{name}_loss']:.4f})"
            )
    loader = "EncoderDecoderModel" if run_is_seq2seq(cfg) else "AutoModelForMaskedLM"
    print(f"model: {run_dir / 'model'} ({loader}.from_pretrained loads it)")
    print(f"metrics: {run_dir / METRICS}; config: {run_dir / CONFIG}")
    print(
        "next: continue training with 'crossalign train --config ... "
        f"run_dir={run_dir}-more model.path={run_dir / 'model'}', or resume this run with "
        f"more steps: 'crossalign train --config ... run_dir={run_dir} "
        f"train.steps={cfg.train.steps * 2} --resume'"
    )
