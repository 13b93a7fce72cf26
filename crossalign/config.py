"""The run configuration: typed dataclasses, loaded from YAML with dotted ``a.b=1`` overrides.

Every field has a docstring-style comment; unknown keys are rejected with the nearest known key.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from crossalign.errors import CrossalignError
from crossalign.registry import did_you_mean


@dataclass
class ModelConfig:
    """Which masked-LM to train."""

    path: str | None = None
    """A ``save_pretrained`` directory to continue pre-training from (its tokenizer is used)."""
    arch: str = "bert"
    """Hugging Face ``model_type`` for a model built from scratch: bert, roberta, xlm-roberta..."""
    preset: str = "small"
    """Size of a model built from scratch: tiny, small or base (see models/build.py)."""
    language_embeddings: bool = True
    """Add a learned language embedding to every token (XLM style, via token type ids)."""
    hf_overrides: dict[str, Any] = field(default_factory=dict)
    """Extra Hugging Face config fields for a from-scratch model, e.g. ``num_hidden_layers``."""

    def __post_init__(self) -> None:
        from crossalign.models.build import PRESETS

        if self.path is None and self.preset not in PRESETS:
            raise CrossalignError(
                f"model.preset '{self.preset}' is unknown"
                f"{did_you_mean(self.preset, list(PRESETS))}; choose one of {', '.join(PRESETS)}"
            )


@dataclass
class TokenizerConfig:
    """The shared subword tokenizer (with ``model.path`` the model's own is used)."""

    path: str | None = None
    """Load any Hugging Face tokenizer from this directory instead of training one."""
    kind: str = "unigram"
    """Subword model to train: unigram or bpe."""
    vocab_size: int = 8000
    """Vocabulary size of a trained tokenizer."""
    alpha: float = 0.7
    """Language sampling exponent for the training text: p_i ∝ n_i^alpha (XLM)."""
    max_sentences: int = 300_000
    """Cap on sentences sampled for tokenizer training."""

    def __post_init__(self) -> None:
        if self.kind not in ("unigram", "bpe"):
            raise CrossalignError(f"tokenizer.kind '{self.kind}' must be unigram or bpe")
        if not 0.0 <= self.alpha <= 1.0:
            raise CrossalignError(f"tokenizer.alpha={self.alpha} must be in [0, 1]")


@dataclass
class DataConfig:
    """Training and held-out text. Paths are files; see README "Data" for the accepted forms."""

    corpus: str | None = None
    """A directory written by ``crossalign data ...``: fills mono/parallel/valid from it."""
    languages: list[str] = field(default_factory=list)
    """Languages to use from ``corpus`` (default: all it has)."""
    mono: dict[str, Any] = field(default_factory=dict)
    """Monolingual training text per language: a UTF-8 file, or {dataset, split, column}."""
    parallel: dict[str, Any] = field(default_factory=dict)
    """Parallel training text per pair ``src-tgt``: a TSV file, or [src_file, tgt_file]."""
    valid_mono: dict[str, Any] = field(default_factory=dict)
    """Held-out monolingual text per language (same forms as ``mono``)."""
    valid_parallel: dict[str, Any] = field(default_factory=dict)
    """Held-out parallel text per pair (same forms as ``parallel``)."""
    alpha: float = 0.7
    """Language sampling exponent for batches: p_i ∝ n_i^alpha (XLM)."""
    max_length: int = 128
    """Tokens per packed MLM sequence, and per TLM pair (both sides, specials included)."""
    max_valid_sequences: int = 512
    """Cap on held-out sequences per language (MLM) and pairs per language pair (TLM) used
    for validation loss."""
    store: str | None = None
    """A token store written by ``crossalign data tokenize``; it holds the run's sources (set
    no other source) and, unless a tokenizer is given, the tokenizer."""
    cache_dir: str | None = None
    """Where stores built automatically from raw sources are kept and reused (default
    ``$CROSSALIGN_CACHE/stores`` or ``~/.cache/crossalign/stores``)."""
    num_proc: int = 1
    """Processes that tokenize raw sources into the store when it is not yet cached."""
    num_workers: int = 1
    """DataLoader worker processes that read and collate batches (0: the training process)."""

    def __post_init__(self) -> None:
        if not 0.0 <= self.alpha <= 1.0:
            raise CrossalignError(f"data.alpha={self.alpha} must be in [0, 1]")
        if self.num_proc < 1:
            raise CrossalignError(f"data.num_proc={self.num_proc} must be >= 1")
        if self.num_workers < 0:
            raise CrossalignError(f"data.num_workers={self.num_workers} must be >= 0")
        if self.max_length < 8:
            raise CrossalignError(f"data.max_length={self.max_length} is too small (>= 8)")


@dataclass
class ObjectiveConfig:
    """One training objective and its weight; other keys are the objective's own options."""

    name: str
    """Registered objective name (``crossalign ls objectives``)."""
    weight: float = 1.0
    """Multiplier of this objective's loss in the total."""
    batch_size: int | None = None
    """Sequences (pairs for parallel objectives) of this objective per optimizer step, over
    all processes (default: ``train.batch_size``). With ``train.objective_mix: pooled`` the
    objectives' batch sizes set their shares of the step, as one mixed dataset (XLM: TLM
    instances 25% of MLM's)."""
    options: dict[str, Any] = field(default_factory=dict)
    """Keyword options of the objective, e.g. ``mask_prob``."""

    def __post_init__(self) -> None:
        if self.batch_size is not None and self.batch_size < 1:
            raise CrossalignError(
                f"objective {self.name}: batch_size={self.batch_size} must be >= 1"
            )


@dataclass
class TrainConfig:
    """The optimisation loop."""

    steps: int = 1000
    """Optimizer steps."""
    batch_size: int = 32
    """Global batch: sequences per objective per optimizer step, over all processes (an
    objective's own ``batch_size`` overrides it)."""
    grad_accum: int = 1
    """Micro-batches accumulated per optimizer step (per-process micro-batch = batch_size /
    (processes * grad_accum))."""
    lr: float = 5e-4
    """Peak learning rate of AdamW."""
    weight_decay: float = 0.01
    """AdamW weight decay (not applied to biases and LayerNorm weights)."""
    betas: tuple[float, float] = (0.9, 0.98)
    """AdamW betas."""
    adam_eps: float = 1e-8
    """AdamW epsilon (XLM-Align's Table 11: 1e-6)."""
    objective_mix: str = "weighted"
    """How objectives combine: weighted (Σ weight · the objective's mean loss over its own
    predicted tokens; every objective gets its own batch each step) or pooled (Σ weight ·
    summed loss / the predicted tokens of all objectives: one mean over a mixed batch, so an
    objective's share of the gradient follows its share of the predicted tokens, set by the
    objectives' ``batch_size``; XLM's mixed MLM+TLM data)."""
    warmup_steps: int = 100
    """Linear warm-up steps, then linear decay to zero at ``steps``."""
    max_grad_norm: float = 1.0
    """Gradient clipping norm (0 disables)."""
    precision: str = "auto"
    """auto (bf16 on a GPU that supports it, fp16 on other GPUs, fp32 on CPU), no, bf16, fp16."""
    seed: int = 0
    """Seeds model init, masking and data order."""
    log_every: int = 10
    """Write a metrics.jsonl line every N steps."""
    eval_every: int = 0
    """Held-out evaluation every N steps (0: only at the end)."""
    save_every: int = 0
    """Checkpoint every N steps (0: only at the end)."""
    keep_checkpoints: int = 2
    """Keep this many most recent checkpoints."""

    def __post_init__(self) -> None:
        if self.objective_mix not in ("weighted", "pooled"):
            raise CrossalignError(
                f"train.objective_mix '{self.objective_mix}' must be weighted or pooled"
            )
        if self.adam_eps <= 0:
            raise CrossalignError(f"train.adam_eps={self.adam_eps} must be > 0")
        if self.precision not in ("auto", "no", "bf16", "fp16"):
            raise CrossalignError(
                f"train.precision '{self.precision}' must be one of auto, no, bf16, fp16"
            )
        for key in ("steps", "batch_size", "grad_accum"):
            if getattr(self, key) < 1:
                raise CrossalignError(f"train.{key}={getattr(self, key)} must be >= 1")
        if self.warmup_steps < 0:
            raise CrossalignError(f"train.warmup_steps={self.warmup_steps} must be >= 0")


@dataclass
class RunConfig:
    """A whole pre-training run."""

    run_dir: str = "runs/default"
    """Where checkpoints, metrics.jsonl, config.yaml and the final model go."""
    model: ModelConfig = field(default_factory=ModelConfig)
    tokenizer: TokenizerConfig = field(default_factory=TokenizerConfig)
    data: DataConfig = field(default_factory=DataConfig)
    objectives: list[ObjectiveConfig] = field(default_factory=lambda: [ObjectiveConfig(name="mlm")])
    """Objectives combined by weight: [{name: mlm, weight: 1}, {name: tlm, weight: 1}]."""
    train: TrainConfig = field(default_factory=TrainConfig)

    def __post_init__(self) -> None:
        if not self.objectives:
            raise CrossalignError("objectives is empty: name at least one, e.g. [{name: mlm}]")


def _build(cls: Any, raw: Any, where: str) -> Any:
    """Build dataclass ``cls`` (or a typed container) from plain YAML data, checking keys."""
    origin = typing.get_origin(cls)
    if dataclasses.is_dataclass(cls):
        if isinstance(raw, cls):
            return raw
        if not isinstance(raw, dict):
            raise CrossalignError(f"{where or 'config'} must be a mapping, got {raw!r}")
        hints = typing.get_type_hints(cls)
        names = [f.name for f in dataclasses.fields(cls)]
        kwargs = {}
        extra = {}
        for key, value in raw.items():
            if key not in names:
                if cls is ObjectiveConfig:
                    extra[key] = value
                    continue
                path = f"{where}.{key}" if where else key
                raise CrossalignError(
                    f"unknown config key '{path}'{did_you_mean(str(key), names)}; "
                    f"valid keys{' under ' + where if where else ''}: {', '.join(names)}"
                )
            kwargs[key] = _build(hints[key], value, f"{where}.{key}" if where else key)
        if extra:
            kwargs["options"] = {**kwargs.get("options", {}), **extra}
        return cls(**kwargs)
    if origin is list:
        (item,) = typing.get_args(cls)
        if not isinstance(raw, list):
            raise CrossalignError(f"{where} must be a list, got {raw!r}")
        return [_build(item, v, f"{where}.{i}") for i, v in enumerate(raw)]
    if origin is tuple:
        return tuple(raw)
    if origin in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(cls) if a is not type(None)]
        return None if raw is None else _build(args[0], raw, where)
    if cls is float and isinstance(raw, int) and not isinstance(raw, bool):
        return float(raw)
    if cls is float and isinstance(raw, str):
        # YAML 1.1 reads exponents without a dot ("5e-5") as strings.
        try:
            return float(raw)
        except ValueError:
            pass
    if cls in (int, float, str, bool) and not isinstance(raw, cls):
        raise CrossalignError(f"{where}={raw!r} must be of type {cls.__name__}")
    return raw


def _apply_override(data: dict, dotted: str) -> None:
    """Set ``a.b.c=value`` (value parsed as YAML) in nested ``data``; list items by index."""
    if "=" not in dotted:
        raise CrossalignError(f"override '{dotted}' must look like key=value, e.g. train.steps=100")
    key, value = dotted.split("=", 1)
    parts = key.strip().split(".")
    node: Any = data
    for part in parts[:-1]:
        node = node[int(part)] if isinstance(node, list) else node.setdefault(part, {})
    last = parts[-1]
    parsed = yaml.safe_load(value) if value else ""
    if isinstance(node, list):
        node[int(last)] = parsed
    else:
        node[last] = parsed


def load_config(path: str | Path | None, overrides: list[str] = ()) -> RunConfig:
    """Read a YAML run config, apply ``key=value`` overrides, and validate it.

    Raises CrossalignError naming the file or key on any problem.
    """
    data: dict = {}
    if path is not None:
        path = Path(path)
        if not path.is_file():
            raise CrossalignError(f"config file {path} does not exist")
        try:
            data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
        except yaml.YAMLError as e:
            raise CrossalignError(f"{path}: not valid YAML: {str(e).splitlines()[0]}") from None
        if not isinstance(data, dict):
            raise CrossalignError(f"{path}: the top level must be a mapping of keys")
    for item in overrides:
        _apply_override(data, item)
    return _build(RunConfig, data, "")


def config_to_dict(cfg: RunConfig) -> dict:
    """The resolved config as plain data (what ``config.yaml`` in the run directory holds)."""

    def plain(v: Any) -> Any:
        if isinstance(v, tuple):
            return list(v)
        if isinstance(v, dict):
            return {k: plain(x) for k, x in v.items()}
        if isinstance(v, list):
            return [plain(x) for x in v]
        return v

    return plain(dataclasses.asdict(cfg))
