"""Aligner options, importable without torch: ``crossalign align`` and ``eval aer`` generate
their flags from ``AlignConfig`` (``crossalign.cli.generate.add_options``)."""

from __future__ import annotations

from dataclasses import dataclass

from crossalign.cli.generate import opt
from crossalign.errors import CrossalignError
from crossalign.languages import check_language

METHODS = ("ot", "itermax", "argmax", "softmax")
OT_FILTERS = ("iterative", "itermax", "union")
SINKHORN_ORDERS = ("rows-first", "columns-first")
SUBWORD_MODES = ("per-word", "word-ids")


@dataclass
class AlignConfig:
    """How to align: extraction method, encoding of the pair, and the method's constants."""

    method: str = opt("ot", choices=METHODS)
    """ot: XLM-Align optimal transport + alignment filtering; itermax, argmax: SimAlign on
    cosine similarity; softmax: awesome-align's extraction (both directional softmaxes of the
    dot products above --softmax-threshold)."""
    joint: bool = opt(False, flag="--joint/--separate")
    """Encode a pair as one sequence ``[cls] src [sep] [cls] tgt [sep]`` (positions restart at
    the target, as in TLM; XLM-Align) or each sentence on its own (SimAlign; the default,
    which measures how aligned the languages are without cross-attention between them)."""
    subwords: str = opt("per-word", choices=SUBWORD_MODES)
    """Word -> subwords: tokenize each word alone (per-word) or use the fast tokenizer's
    ``word_ids()`` on the whole sentence (word-ids)."""
    sinkhorn_iters: int = opt(2, metavar="N")
    """Sinkhorn iterations of ``ot`` (XLM-Align: 2)."""
    sinkhorn_order: str = opt("rows-first", choices=SINKHORN_ORDERS)
    """rows-first (XLM-Align Eq. 6: u <- 1/(Kv), then v <- 1/(Kᵀu)) or columns-first (POT and
    the released XLM-Align aligner)."""
    ot_filter: str = opt("iterative", choices=OT_FILTERS)
    """How ``ot`` extracts links from the plan: iterative (XLM-Align Eq. 7-9), itermax
    (SimAlign's IterMax on the plan) or union (forward ∪ backward argmax, no filtering)."""
    mu: float = 1.0
    """Entropic regularisation μ of ``ot``: the kernel is ``exp(f_sim / μ)``."""
    eps: float = opt(1e-6, cli=False)
    """Floor ε of the dot products in ``f_sim = log max(ε, h_iᵀ h_j)``."""
    filter_iters: int = opt(2, metavar="N")
    """Rounds of iterative alignment filtering (``ot``) or IterMax's ``max_count``."""
    alpha: float = 0.9
    """Discount of scores whose row or column is already aligned (filtering, IterMax)."""
    softmax_threshold: float = opt(1e-3, metavar="P")
    """Threshold of ``softmax``: a subword link needs both directional probabilities above it
    (awesome-align: 1e-3)."""
    batch_size: int = opt(32, metavar="N")
    """Sentence pairs per forward pass."""
    bf16: bool = False
    """Run the encoder under bfloat16 autocast: much faster on GPUs and on CPUs with AMX;
    scores are still computed in float32, but links can differ slightly from float32's."""

    def __post_init__(self) -> None:
        if self.method not in METHODS:
            raise CrossalignError(
                f"unknown alignment method '{self.method}'; choose one of {', '.join(METHODS)}"
            )
        for key, allowed in (("sinkhorn_order", SINKHORN_ORDERS), ("ot_filter", OT_FILTERS)):
            if getattr(self, key) not in allowed:
                raise CrossalignError(
                    f"unknown {key} '{getattr(self, key)}'; choose one of {', '.join(allowed)}"
                )
        if self.subwords not in SUBWORD_MODES:
            raise CrossalignError(
                f"unknown subword mode '{self.subwords}'; choose one of {', '.join(SUBWORD_MODES)}"
            )
        for key in ("batch_size", "filter_iters"):
            if getattr(self, key) < 1:
                raise CrossalignError(f"{key}={getattr(self, key)} must be >= 1")
        if self.sinkhorn_iters < 0:
            raise CrossalignError(f"sinkhorn_iters={self.sinkhorn_iters} must be >= 0")
        if self.mu <= 0 or self.eps <= 0:
            raise CrossalignError(f"mu={self.mu} and eps={self.eps} must be > 0")
        if not 0.0 <= self.softmax_threshold < 1.0:
            raise CrossalignError(
                f"softmax_threshold={self.softmax_threshold} must be in [0, 1), e.g. 1e-3"
            )
        if not 0.0 <= self.alpha <= 1.0:
            raise CrossalignError(f"alpha={self.alpha} must be in [0, 1]")


def parse_language_pair(spec: str) -> tuple[str, str]:
    """``de-en`` → ("de", "en"), each a known language code (the ``--languages`` option)."""
    parts = spec.split("-")
    if len(parts) != 2:
        raise CrossalignError(f"--languages '{spec}' must be SRC-TGT, e.g. de-en")
    return check_language(parts[0], "--languages"), check_language(parts[1], "--languages")
