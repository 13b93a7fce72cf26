"""The run configuration: typed dataclasses, loaded from YAML with dotted ``a.b=1`` overrides.

Every field has a docstring-style comment; unknown keys are rejected with the nearest known key.
"""

from __future__ import annotations

import dataclasses
import typing
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from crossalign.checks import check_choice, check_range
from crossalign.errors import CrossalignError
from crossalign.schedules import WeightSchedule, parse_weight
from crossalign.schema import apply_override, build_dataclass, parse_yaml
from crossalign.tracking import check_tracker_names

SPECIAL_TOKENS = ["<s>", "<pad>", "</s>", "<unk>", "<mask>"]
"""The special tokens of a tokenizer crossalign trains (``tokenizer.*`` sizes count them)."""

WORD_MODES = ("whole", "mean")
"""How a word is embedded from its subwords (``train.probe_bli.words`` and the lexicon):
``whole`` (a word that is one token) or ``mean`` (the mean of its subwords)."""

PRESETS: dict[str, dict[str, int]] = {
    "tiny": dict(num_hidden_layers=2, hidden_size=32, num_attention_heads=2, intermediate_size=64),
    "small": dict(
        num_hidden_layers=4, hidden_size=256, num_attention_heads=4, intermediate_size=1024
    ),
    "base": dict(
        num_hidden_layers=12, hidden_size=768, num_attention_heads=12, intermediate_size=3072
    ),
}
"""Sizes of models built from scratch (``model.preset``): Hugging Face config fields."""


@dataclass
class ModelConfig:
    """Which masked-LM to train."""

    path: str | None = None
    """A ``save_pretrained`` directory or a Hugging Face hub id (e.g. ``xlm-roberta-base``, read
    from the local cache when ``HF_HUB_OFFLINE=1``) to continue pre-training from (its
    tokenizer is used)."""
    arch: str = "bert"
    """Hugging Face ``model_type`` for a model built from scratch: bert, roberta, xlm-roberta..."""
    preset: str = "small"
    """Size of a model built from scratch: tiny, small or base (see models/build.py)."""
    language_embeddings: bool = True
    """Add a learned language embedding to every token (XLM style, via token type ids)."""
    hf_overrides: dict[str, Any] = field(default_factory=dict)
    """Extra Hugging Face config fields for a from-scratch model, e.g. ``num_hidden_layers``."""
    dropout: float | None = None
    """Every dropout rate of the model while training (hidden states, attention probabilities,
    activations, heads), for a loaded or a new model (None: the model config's own).
    XLM-Align's pre-training runs with 0 (``--dropout 0.0 --attention-dropout 0.0``)."""

    def __post_init__(self) -> None:
        if self.path is None:
            check_choice("model.preset", self.preset, list(PRESETS))
        if self.dropout is not None:
            check_range("model.dropout", self.dropout, 0, 1, high_open=True)


@dataclass
class TokenizerConfig:
    """The shared subword tokenizer (with ``model.path`` the model's own is used)."""

    path: str | None = None
    """Load any Hugging Face tokenizer from this directory (or hub id) instead of training one."""
    kind: str = "unigram"
    """Subword model to train: unigram or bpe."""
    vocab_size: int = 8000
    """Vocabulary size of a trained tokenizer: at least 7 (its 5 special tokens, the ``▁`` word
    boundary and one character; a smaller size is never honoured), and more than the distinct
    characters of the training text (the unigram trainer needs every character)."""
    alpha: float = 0.7
    """Language sampling exponent for the training text, in [0, 1]: p_i ∝ n_i^alpha (XLM)."""
    max_sentences: int = 300_000
    """Cap on sentences sampled for tokenizer training (>= 1)."""

    def __post_init__(self) -> None:
        check_choice("tokenizer.kind", self.kind, ("unigram", "bpe"))
        check_range("tokenizer.vocab_size", self.vocab_size, len(SPECIAL_TOKENS) + 2, integer=True)
        check_range("tokenizer.alpha", self.alpha, 0, 1)
        check_range("tokenizer.max_sentences", self.max_sentences, 1, integer=True)


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
    """Language sampling exponent for batches, in [0, 1]: p_i ∝ n_i^alpha (XLM)."""
    max_length: int = 128
    """Tokens per packed MLM sequence, and per TLM pair (both sides, specials included): at
    least 8 (a TLM pair's 4 special tokens and text). No upper bound here: a ``model.path``
    model's position table bounds it, and attention memory grows with its square."""
    max_valid_sequences: int = 512
    """Cap on held-out sequences per language (MLM) and pairs per language pair (TLM) used
    for validation loss (>= 1)."""
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
        check_range("data.alpha", self.alpha, 0, 1)
        for key, low in (
            ("max_length", 8),
            ("max_valid_sequences", 1),
            ("num_proc", 1),
            ("num_workers", 0),
        ):
            check_range(f"data.{key}", getattr(self, key), low, integer=True)


@dataclass
class ObjectiveConfig:
    """One training objective and its weight; other keys are the objective's own options."""

    EXTRA_KEYS: typing.ClassVar[str] = "options"

    name: str
    """Registered objective name (``crossalign ls objectives``)."""
    weight: float | str = 1.0
    """Multiplier of this objective's loss (>= 0; not all objectives 0), or a schedule of it,
    XLM's ``"STEP:VALUE,..."`` (``--lambda_ae '0:1,100000:0.1,300000:0'``): steps strictly
    increasing from 0, the weight linearly interpolated between them and held after the last;
    the step is the training steps done so far (``crossalign.schedules``)."""
    batch_size: int | None = None
    """Sequences (pairs for parallel objectives) of this objective per optimizer step, over
    all processes (default: ``train.batch_size``). With ``train.objective_mix: pooled`` the
    objectives' batch sizes set their shares of the step, as one mixed dataset (XLM: TLM
    instances 25% of MLM's)."""
    options: dict[str, Any] = field(default_factory=dict)
    """Keyword options of the objective, e.g. ``mask_prob``."""

    def __post_init__(self) -> None:
        self.schedule()
        if self.batch_size is not None:
            check_range(f"objective {self.name}: batch_size", self.batch_size, 1, integer=True)

    def schedule(self) -> WeightSchedule:
        """The weight as a schedule (a constant one for a number); a bad one is an error
        naming the objective."""
        return parse_weight(f"objective {self.name}: weight", self.weight)


@dataclass
class AERProbe:
    """Alignment error rate of the model's word alignments, measured during training."""

    gold: str
    """A test-set folder ``<src>-<tgt>/`` (test.<src>, test.<tgt>, alignv2.txt), as for
    ``crossalign eval aer --testset``."""
    layer: int = 8
    """Layer whose hidden states are aligned (0: the embeddings); at most the model's last."""

    def __post_init__(self) -> None:
        check_range("train.probe_aer.layer", self.layer, 0, integer=True)


@dataclass
class BLIProbe:
    """Bilingual lexicon induction (MUSE's precision at 1, 5, 10), measured during training."""

    dict: str
    """A gold dictionary, as for ``crossalign eval bli --dict``."""
    layer: int = 0
    """0: the embedding table; 1..L: hidden states averaged over ``data.corpus`` text."""
    words: str = "whole"
    """whole: single-token words only; mean: mean of subword vectors."""

    def __post_init__(self) -> None:
        check_range("train.probe_bli.layer", self.layer, 0, integer=True)
        check_choice("train.probe_bli.words", self.words, WORD_MODES)


@dataclass
class TrainConfig:
    """The optimisation loop."""

    steps: int = 1000
    """Optimizer steps (>= 1)."""
    batch_size: int = 32
    """Global batch: sequences per objective per optimizer step, over all processes (an
    objective's own ``batch_size`` overrides it); >= 1."""
    grad_accum: int = 1
    """Micro-batches accumulated per optimizer step (per-process micro-batch = batch_size /
    (processes * grad_accum)); >= 1."""
    lr: float = 5e-4
    """Peak learning rate of AdamW (> 0)."""
    weight_decay: float = 0.01
    """AdamW weight decay (>= 0; not applied to biases and LayerNorm weights)."""
    betas: tuple[float, float] = (0.9, 0.98)
    """AdamW betas: two numbers in [0, 1)."""
    adam_eps: float = 1e-8
    """AdamW epsilon (> 0; XLM-Align's Table 11: 1e-6)."""
    objective_mix: str = "weighted"
    """How objectives combine: weighted (Σ weight · the objective's mean loss over its own
    predicted tokens; every objective gets its own batch each step) or pooled (Σ weight ·
    summed loss / the predicted tokens of all objectives: one mean over a mixed batch, so an
    objective's share of the gradient follows its share of the predicted tokens, set by the
    objectives' ``batch_size``; XLM's mixed MLM+TLM data)."""
    step_per_objective: bool = False
    """true: XLM's loop (``train.py``: one ``mt_step``/``bt_step`` after another), where each
    objective of a step takes its own forward, backward, clipping and optimizer update in
    the listed order, so a step makes one update per objective (none for an objective whose
    weight is 0 at that step, as XLM skips it) and a later objective sees the weights the
    earlier one just updated. false: one update per step on the weighted sum of the
    objectives' losses. Either way ``steps``, ``log_every``, ``eval_every``, ``save_every``
    and the checkpoints count steps (XLM's iterations); ``warmup_steps`` and the learning
    rate schedule count optimizer updates (XLM's scheduler steps with each update), and the
    linear decay ends after ``steps`` × objectives updates. Needs ``objective_mix:
    weighted``."""
    warmup_steps: int = 100
    """Linear warm-up steps (>= 0), then the ``schedule``'s decay; with ``step_per_objective``
    these are optimizer updates, several per step."""
    schedule: str = "linear"
    """Learning rate after warm-up: linear (decay to zero at ``steps``) or inverse_sqrt
    (lr · sqrt(warmup_steps / step), the Transformer schedule XLM and MASS train with)."""
    max_grad_norm: float = 1.0
    """Gradient clipping norm (>= 0; 0 disables)."""
    compile: bool = False
    """torch.compile the model's encoder and its masked-LM head in place: the first steps
    compile (minutes for a base model on a GPU), a second sequence length recompiles once with
    dynamic shapes, then nothing recompiles (``compile/graphs`` in ``metrics.jsonl`` counts the
    graphs). Losses equal the eager ones to float tolerance."""
    compile_backend: str = "inductor"
    """torch.compile backend with ``compile``: inductor (generated kernels) or aot_eager
    (graph capture without code generation: fast to compile, for checking a model compiles)."""
    freeze: list[str] = field(default_factory=list)
    """Model parameters left untrained: ``encoder`` (every parameter of the base model:
    embeddings and layers, so only the task head trains, e.g. to warm up an untrained masked-LM
    head) and/or glob patterns over parameter names (``bert.encoder.layer.0.*``). With tied
    input and output embeddings, freezing the embeddings freezes the output projection too."""
    precision: str = "auto"
    """auto (bf16 on a GPU that supports it and on a CPU with bf16 instructions, AVX512-BF16 or
    AMX; fp16 on other GPUs; fp32 on other CPUs), no (fp32), bf16, fp16."""
    seed: int = 0
    """Seeds model init, masking and data order: in [0, 2**32 - 1] (NumPy's seed range)."""
    log_every: int = 10
    """Write a metrics.jsonl line every N steps (>= 1)."""
    eval_every: int = 0
    """Held-out evaluation every N steps (>= 0; 0: only at the end)."""
    save_every: int = 0
    """Checkpoint every N steps (>= 0; 0: only at the end)."""
    keep_checkpoints: int = 2
    """Keep this many most recent checkpoints (>= 0; the newest is always kept)."""
    log_with: list[str] = field(default_factory=list)
    """Experiment trackers that also receive every metrics.jsonl record and the config, via
    accelerate: tensorboard, wandb, mlflow, comet_ml, aim, clearml, dvclive, swanlab, trackio
    (each needs its package installed, e.g. ``pip install tensorboard``)."""
    tracking_dir: str | None = None
    """Where local trackers (tensorboard, mlflow's file store...) write (default
    ``RUN_DIR/tracking``)."""
    probe_aer: AERProbe | None = None
    """``{gold: DIR, layer: N}``: log ``probe/aer`` (and its precision, recall, f1) with every
    held-out evaluation (``eval_every`` and the end), computed by the main process."""
    probe_bli: BLIProbe | None = None
    """``{dict: FILE_OR_DIR, layer: N}``: log ``probe/bli_<metric>`` (``eval bli``'s metrics)
    with every held-out evaluation, computed by the main process."""

    def __post_init__(self) -> None:
        if self.objective_mix not in ("weighted", "pooled"):
            raise CrossalignError(
                f"train.objective_mix '{self.objective_mix}' must be weighted or pooled"
            )
        if self.step_per_objective and self.objective_mix != "weighted":
            raise CrossalignError(
                "train.step_per_objective gives each objective its own update, so its loss "
                f"cannot be pooled with the others': drop train.objective_mix: "
                f"{self.objective_mix} or train.step_per_objective"
            )
        check_choice("train.precision", self.precision, ("auto", "no", "bf16", "fp16"))
        check_choice("train.schedule", self.schedule, ("linear", "inverse_sqrt"))
        check_choice("train.compile_backend", self.compile_backend, ("inductor", "aot_eager"))
        for key, low in (
            ("steps", 1),
            ("batch_size", 1),
            ("grad_accum", 1),
            ("warmup_steps", 0),
            ("log_every", 1),
            ("eval_every", 0),
            ("save_every", 0),
            ("keep_checkpoints", 0),
        ):
            check_range(f"train.{key}", getattr(self, key), low, integer=True)
        check_range("train.seed", self.seed, 0, 2**32 - 1, integer=True)
        check_range("train.lr", self.lr, 0, low_open=True)
        check_range("train.adam_eps", self.adam_eps, 0, low_open=True)
        check_range("train.weight_decay", self.weight_decay, 0)
        check_range("train.max_grad_norm", self.max_grad_norm, 0)
        for i, beta in enumerate(self.betas):
            check_range(f"train.betas.{i}", beta, 0, 1, high_open=True)
        check_tracker_names(self.log_with)


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
        if all(o.schedule().is_zero for o in self.objectives):
            raise CrossalignError(
                "every objective has weight 0, so the loss is 0 and nothing trains: give at "
                "least one a weight > 0"
            )


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
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError as e:
            raise CrossalignError(f"{path}: not UTF-8 text (byte {e.start})") from None
        data = parse_yaml(text, str(path)) or {}
        if not isinstance(data, dict):
            raise CrossalignError(f"{path}: the top level must be a mapping of keys")
    return config_from_data(data, overrides)


def config_from_data(data: dict, overrides: Sequence[str] = ()) -> RunConfig:
    """A run config from YAML-shaped ``data`` (a copy is changed by the ``key=value``
    overrides), validated; errors name the key."""
    import copy

    data = copy.deepcopy(data)
    for item in overrides:
        apply_override(data, item, RunConfig)
    return build_dataclass(RunConfig, data, "")


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
