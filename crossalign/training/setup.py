"""Everything a run builds from its config before the first step: the tokenizer, token
store, model and objectives (``build_setup``), the optimizer and learning-rate schedule, the
batch sizes, the samplers and the accelerate options."""

from __future__ import annotations

import fnmatch
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import torch
from accelerate import Accelerator
from torch import nn
from transformers import (
    PreTrainedModel,
    PreTrainedTokenizerBase,
    get_inverse_sqrt_schedule,
    get_linear_schedule_with_warmup,
)

from crossalign.config import RunConfig
from crossalign.data.store.prepare import (
    TrainingData,
    cached_store,
    data_fingerprint,
    open_training_store,
    resolve_sources,
    train_config_tokenizer,
    training_data,
)
from crossalign.data.store.reading import open_store
from crossalign.data.store.streaming import StreamingText, is_streaming
from crossalign.data.tokenizer import load_tokenizer
from crossalign.errors import CrossalignError
from crossalign.fileio import atomic_dir
from crossalign.models.build import build_model, set_dropout
from crossalign.models.seq2seq import build_seq2seq, encoder_of
from crossalign.objectives import OBJECTIVES, Objective, TokenContext
from crossalign.schedules import WeightSchedule
from crossalign.training.sampler import SourceSampler


@dataclass
class Setup:
    """Everything built before the first step."""

    tokenizer: PreTrainedTokenizerBase
    model: PreTrainedModel
    objectives: dict[str, Objective]
    schedules: dict[str, WeightSchedule]
    """Each objective's weight over the steps (``objectives.N.weight``)."""
    data: TrainingData
    data_fingerprint: str = ""
    """``data_fingerprint`` of the store and streamed sources (what a checkpoint records)."""

    def weights_at(self, done: int) -> dict[str, float]:
        """Each objective's weight in the step after ``done`` steps (XLM's lambdas at
        ``n_total_iter`` = ``done``)."""
        return {name: schedule.value(done) for name, schedule in self.schedules.items()}

    @property
    def weights(self) -> dict[str, float]:
        """The weights of the first step (every step's, when none is scheduled)."""
        return self.weights_at(0)


def objective_classes(cfg: RunConfig) -> list[type[Objective]]:
    """The class of each of ``cfg.objectives``, in order, after checking that each option it
    is given is one of its options and that no objective is listed twice."""
    classes, seen = [], set()
    for i, oc in enumerate(cfg.objectives):
        cls = OBJECTIVES.get(oc.name)
        cls.check_option_keys(oc.options, f"objectives.{i} ({oc.name})")
        if oc.name in seen:
            raise CrossalignError(f"objectives.{i}: '{oc.name}' is listed twice")
        seen.add(oc.name)
        classes.append(cls)
    return classes


def _objectives(cfg: RunConfig, ctx: TokenContext) -> tuple[dict[str, Objective], dict]:
    objectives, schedules = {}, {}
    for oc, cls in zip(cfg.objectives, objective_classes(cfg)):
        objectives[oc.name] = cls(ctx, cls.build_options(oc.options))
        schedules[oc.name] = oc.schedule()
    return objectives, schedules


def run_is_seq2seq(cfg: RunConfig) -> bool:
    """Whether the run's objectives train an encoder-decoder (all of them) or a masked-LM (all
    of them); a mix is a CrossalignError naming one of each."""
    kinds = {oc.name: cls.seq2seq for oc, cls in zip(cfg.objectives, objective_classes(cfg))}
    seq2seq = [n for n, k in kinds.items() if k]
    masked = [n for n, k in kinds.items() if not k]
    if seq2seq and masked:
        raise CrossalignError(
            f"objectives: '{masked[0]}' trains a masked-LM and '{seq2seq[0]}' an encoder-decoder; "
            "a run trains one kind of model (pre-train with one, then start the other from it "
            "with model.path)"
        )
    if seq2seq and (cfg.train.probe_aer or cfg.train.probe_bli):
        raise CrossalignError(
            "train.probe_aer and train.probe_bli read a masked-LM; an encoder-decoder run "
            "(objectives " + ", ".join(seq2seq) + ") cannot use them: remove them"
        )
    return bool(seq2seq)


def build_setup(
    cfg: RunConfig, resume_from: Path | None, accelerator: Accelerator | None = None
) -> Setup:
    """Get the tokenizer (resumed, loaded, the store's or trained), the token store (given,
    cached or built now), then the model and objectives.

    A tokenizer is trained, and a store built, by the main process only; the other processes
    wait and then load the saved tokenizer and map the same store.
    """
    main = accelerator is None or accelerator.is_main_process
    given_store = open_training_store(cfg.data, cfg.data.store) if cfg.data.store else None
    sources = None if given_store else resolve_sources(cfg.data)
    if resume_from is not None:
        tokenizer = load_tokenizer(resume_from)
    elif cfg.model.path:
        tokenizer = (
            load_tokenizer(cfg.tokenizer.path, "tokenizer.path")
            if cfg.tokenizer.path
            else load_tokenizer(cfg.model.path, "model.path")
        )
    elif cfg.tokenizer.path:
        tokenizer = load_tokenizer(cfg.tokenizer.path, "tokenizer.path")
    elif given_store is not None:
        tokenizer = load_tokenizer(given_store.path / "tokenizer")
    else:
        saved = Path(cfg.run_dir) / "tokenizer"
        if main:
            tokenizer = train_config_tokenizer(cfg, sources)
            with atomic_dir(saved) as tmp:
                tokenizer.save_pretrained(tmp)
        if accelerator is not None:
            accelerator.wait_for_everyone()
            tokenizer = load_tokenizer(saved)
    store = given_store
    if store is None:
        # the main process builds (or finds) the store; the others then find it built
        if main:
            path = cached_store(sources, tokenizer, cfg.data.cache_dir, cfg.data.num_proc)
        if accelerator is not None:
            accelerator.wait_for_everyone()
        if not main:
            path = cached_store(sources, tokenizer, cfg.data.cache_dir, progress=False)
        store = open_store(path)
    streamed = {k: v for k, v in (sources.mono if sources else {}).items() if is_streaming(v)}
    data = training_data(
        store, tokenizer, cfg.data.max_length, cfg.data.max_valid_sequences, streamed
    )
    if run_is_seq2seq(cfg):
        ids = (tokenizer.cls_token_id, tokenizer.sep_token_id, tokenizer.pad_token_id)
        model = build_seq2seq(cfg.model, len(tokenizer), ids, data.languages(), cfg.data.max_length)
    else:
        model = build_model(
            cfg.model, len(tokenizer), tokenizer.pad_token_id, data.languages(),
            cfg.data.max_length,
        )  # fmt: skip
    if cfg.model.dropout is not None:
        set_dropout(model, cfg.model.dropout)
    ctx = TokenContext.for_model(
        tokenizer, encoder_of(model), cfg.data.max_length, cfg.model.language_embeddings
    )
    objectives, schedules = _objectives(cfg, ctx)
    for objective in objectives.values():
        objective.check_config(cfg)
    for name, obj in objectives.items():
        if obj.data == "parallel" and not data.parallel:
            raise CrossalignError(
                f"objective '{name}' needs parallel data: set data.parallel or a data.corpus "
                f"with sentence pairs"
            )
        if obj.data == "mono" and not data.mono:
            raise CrossalignError(f"objective '{name}' needs monolingual data: set data.mono")
        if obj.data == "sentences" and set(data.mono) - set(data.sentences):
            streamed = sorted(set(data.mono) - set(data.sentences))
            raise CrossalignError(
                f"objective '{name}' reads whole sentences, which a streamed source does not "
                f"give (data.mono: {', '.join(streamed)}); tokenize them into the store"
            )
        if obj.data == "sentences" and not data.sentences:
            raise CrossalignError(f"objective '{name}' needs monolingual data: set data.mono")
    for objective in objectives.values():
        # Also on resume: the starting model is rebuilt identically before its state is
        # loaded, so ``start`` derives exactly what the original run derived.
        objective.start(model, data)
    return Setup(tokenizer, model, objectives, schedules, data, data_fingerprint(store, streamed))


def cpu_has_bf16() -> bool:
    """Whether this CPU multiplies bf16 natively (AVX512-BF16 or AMX), so that bf16 autocast
    speeds training up; elsewhere bf16 is emulated and slower than fp32."""
    checks = ("_is_avx512_bf16_supported", "_is_amx_tile_supported")
    return any(getattr(torch.cpu, name, lambda: False)() for name in checks)


def mixed_precision(requested: str) -> str:
    """accelerate's mixed_precision for ``train.precision``: auto → bf16 on GPUs that
    support it and on CPUs that multiply bf16 natively (``cpu_has_bf16``), fp16 on other GPUs,
    none on other CPUs (an explicit bf16 on such a CPU gets a one-line warning: it runs,
    slower than fp32)."""
    if requested == "bf16" and not torch.cuda.is_available() and not cpu_has_bf16():
        print(
            "warning: train.precision=bf16 on a CPU without bf16 instructions (AVX512-BF16 or "
            "AMX) is emulated and slower than fp32; set train.precision=auto (fp32 here)",
            file=sys.stderr,
        )
    if requested != "auto":
        return requested
    if not torch.cuda.is_available():
        return "bf16" if cpu_has_bf16() else "no"
    return "bf16" if torch.cuda.is_bf16_supported() else "fp16"


def reset_precision_state(precision: str) -> None:
    """Let a run use another mixed precision than an earlier run of the same process
    (``crossalign compare``, the Python API): accelerate keeps one ``AcceleratorState`` per
    process and refuses a second ``Accelerator`` with another precision, so that state is
    reset (its process group, ``PartialState``, is kept). Under FSDP the reset would lose the
    plugin: that change is refused in one line; DeepSpeed's engine sets precision itself."""
    from accelerate.state import AcceleratorState
    from accelerate.utils import DistributedType

    state = AcceleratorState._shared_state
    earlier = state.get("_mixed_precision")
    if earlier is None or earlier == precision:
        return
    kind = state.get("distributed_type")
    if kind == DistributedType.DEEPSPEED:
        return
    if kind == DistributedType.FSDP:
        raise CrossalignError(
            f"train.precision: this process already trained under FSDP with {earlier}, and "
            f"accelerate cannot change it to {precision}; run this config in its own process"
        )
    AcceleratorState._reset_state()


FREEZE_ENCODER = "encoder"
"""``train.freeze`` entry naming every parameter of the model's base model."""


def freeze_parameters(model: nn.Module, patterns: Sequence[str]) -> list[str]:
    """Set ``requires_grad=False`` on the parameters ``patterns`` name (``train.freeze``:
    ``encoder`` for the base model's, or globs over ``model.named_parameters()`` names);
    returns the frozen names. A pattern that names nothing, or freezing every parameter, is
    an error naming the key."""
    names = dict(model.named_parameters())
    frozen: set[str] = set()
    for pattern in patterns:
        if pattern == FREEZE_ENCODER:
            base = model.base_model
            if base is model:
                raise CrossalignError(
                    "train.freeze: 'encoder' needs a model with a task head; this model is "
                    "its own base model"
                )
            base_ids = {id(p) for p in base.parameters()}
            found = {n for n, p in names.items() if id(p) in base_ids}
        else:
            found = set(fnmatch.filter(names, pattern))
        if not found:
            example = next(iter(names), "")
            raise CrossalignError(
                f"train.freeze: '{pattern}' names no parameter of the model; give 'encoder' or "
                f"a glob over parameter names such as '{example}'"
            )
        frozen |= found
    if frozen and frozen == set(names):
        raise CrossalignError("train.freeze leaves no parameter to train; freeze fewer")
    for name in frozen:
        names[name].requires_grad_(False)
    return sorted(frozen)


def compile_model(model: nn.Module, backend: str) -> list[str]:
    """``train.compile``: compile, in place (``nn.Module.compile``, so parameter names and
    checkpoints are unchanged), the base model and the masked-LM head (``cls`` or
    ``lm_head``) that the objectives call; returns the names compiled."""
    parts = {"base_model": model.base_model}
    for name in ("cls", "lm_head"):
        if isinstance(getattr(model, name, None), nn.Module):
            parts[name] = getattr(model, name)
    for part in parts.values():
        part.compile(backend=backend)
    return list(parts)


def compiled_graphs() -> int:
    """Graphs torch.compile has made in this process so far (recompilations included)."""
    from torch._dynamo.utils import counters

    return int(counters["stats"]["unique_graphs"])


def build_optimizer(module: nn.Module, cfg: RunConfig) -> torch.optim.Optimizer:
    """AdamW; no weight decay on biases and normalisation weights. PyTorch's fused kernel
    (one kernel for every parameter, on CPU and GPU), which can also skip a non-finite step
    on the device (``training.step.skips_on_device``)."""
    decay, no_decay = [], []
    for name, param in module.named_parameters():
        if not param.requires_grad:
            continue
        plain = param.ndim < 2 or "norm" in name.lower()
        (no_decay if plain else decay).append(param)
    groups = [
        {"params": decay, "weight_decay": cfg.train.weight_decay},
        {"params": no_decay, "weight_decay": 0.0},
    ]
    return torch.optim.AdamW(
        groups, lr=cfg.train.lr, betas=tuple(cfg.train.betas), eps=cfg.train.adam_eps, fused=True
    )


def build_schedule(
    optimizer: torch.optim.Optimizer, cfg: RunConfig
) -> torch.optim.lr_scheduler.LambdaLR:
    """``train.warmup_steps`` of linear warm-up, then ``train.schedule``: linear decay to zero
    at ``train.steps``, or inverse square root (lr · sqrt(warmup / step); Vaswani et al.
    2017, XLM's ``adam_inverse_sqrt``). The schedule steps with every optimizer update, as
    XLM's does: with ``train.step_per_objective`` one per objective in each step, so the
    linear decay ends after ``train.steps`` × objectives updates."""
    tc = cfg.train
    if tc.schedule == "inverse_sqrt":
        return get_inverse_sqrt_schedule(optimizer, tc.warmup_steps)
    updates = tc.steps * (len(cfg.objectives) if tc.step_per_objective else 1)
    return get_linear_schedule_with_warmup(optimizer, tc.warmup_steps, updates)


def step_batch_sizes(cfg: RunConfig, world: int) -> tuple[int, dict[str, int], dict[str, int]]:
    """(held-out micro-batch size, each objective's global batch, each objective's
    micro-batch); every global batch splits over ``world`` processes × ``grad_accum``."""
    tc = cfg.train
    slices = world * tc.grad_accum
    own = {f"objective {oc.name}: batch_size": oc.batch_size for oc in cfg.objectives}
    for key, size in {"train.batch_size": tc.batch_size, **own}.items():
        if size and size % slices:
            raise CrossalignError(
                f"{key}={size} must be divisible by processes ({world}) × "
                f"train.grad_accum ({tc.grad_accum})"
            )
    batch_sizes = {oc.name: oc.batch_size or tc.batch_size for oc in cfg.objectives}
    per_objective = {name: size // slices for name, size in batch_sizes.items()}
    return tc.batch_size // slices, batch_sizes, per_objective


def check_step_per_objective(
    cfg: RunConfig, objectives: dict[str, Objective], processes: int
) -> None:
    """Refuse ``train.step_per_objective`` on several processes when an objective has
    parameters of its own (DWA's pointer network): an update whose backward leaves them out
    makes DDP's gradient reduction fail on the next forward."""
    if not (cfg.train.step_per_objective and processes > 1):
        return
    for name, objective in objectives.items():
        if next(objective.parameters(), None) is not None:
            raise CrossalignError(
                f"train.step_per_objective on {processes} processes: objective '{name}' has "
                "parameters of its own, which the other objectives' updates leave without a "
                "gradient; train on one process or set train.step_per_objective: false"
            )


def tracking_options(cfg: RunConfig) -> dict:
    """The ``Accelerator`` options for ``train.log_with``: the trackers and their directory
    (``train.tracking_dir``, default ``RUN_DIR/tracking``); none without trackers."""
    if not cfg.train.log_with:
        return {}
    where = cfg.train.tracking_dir or str(Path(cfg.run_dir) / "tracking")
    return {"log_with": list(cfg.train.log_with), "project_dir": where}


def objective_samplers(
    setup: Setup, cfg: RunConfig
) -> tuple[dict[str, dict[str, StreamingText]], dict[str, SourceSampler]]:
    """Per objective: its streamed sources (read in order, not sampled) and the sampler of
    its examples (seeded by ``train.seed`` and the objective's position in the config)."""
    examples = setup.data.by_kind()
    streams = {
        name: {k: v for k, v in examples[obj.data].items() if isinstance(v, StreamingText)}
        for name, obj in setup.objectives.items()
    }
    samplers = {
        name: SourceSampler(
            {k: len(v) for k, v in examples[obj.data].items()},
            cfg.data.alpha,
            cfg.train.seed,
            i,
            sequential=frozenset(streams[name]),
        )
        for i, (name, obj) in enumerate(setup.objectives.items())
    }
    return streams, samplers
