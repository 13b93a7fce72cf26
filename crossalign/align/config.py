"""Aligner options, importable without torch: ``crossalign align`` and ``eval aer`` generate
their flags from ``AlignConfig`` (``crossalign.options.add_options``)."""

from __future__ import annotations

from dataclasses import dataclass

from crossalign.checks import renamed_hint
from crossalign.errors import CrossalignError
from crossalign.languages import check_language
from crossalign.options import opt

METHODS = ("ot", "itermax", "argmax", "softmax")
OT_FILTERS = ("argmax", "itermax", "eq9-literal", "union")
SINKHORN_ORDERS = ("columns-first", "rows-first")
ENCODINGS = ("separate", "tlm", "concat")
SUBWORD_MODES = ("per-word", "word-ids")


@dataclass
class AlignConfig:
    """How to align: extraction method, encoding of the pair, and the method's constants."""

    method: str = opt("ot", choices=METHODS)
    """ot: XLM-Align optimal transport + alignment filtering; itermax, argmax: SimAlign on
    cosine similarity; softmax: awesome-align's extraction (both directional softmaxes of the
    dot products above --softmax-threshold)."""
    encoding: str = opt("separate", choices=ENCODINGS)
    """How a pair enters the encoder: ``separate``, each sentence on its own, ``[cls] s [sep]``
    (SimAlign; measures how aligned the languages are without attention between them);
    ``tlm``, one sequence ``[cls] src [sep] [cls] tgt [sep]`` with positions restarting at the
    target (crossalign's TLM layout); ``concat``, one sequence ``[cls] src [sep] tgt [sep]``
    with continuous positions (``<s> src </s> tgt </s>`` for XLM-R: the released XLM-Align
    aligner's and pre-training task's layout)."""
    subwords: str = opt("per-word", choices=SUBWORD_MODES)
    """Word -> subwords: tokenize each word alone (per-word) or use the fast tokenizer's
    ``word_ids()`` on the whole sentence (word-ids)."""
    sinkhorn_iters: int = opt(2, metavar="N")
    """Sinkhorn iterations of ``ot`` (XLM-Align: 2)."""
    sinkhorn_order: str = opt("columns-first", choices=SINKHORN_ORDERS)
    """columns-first (the released XLM-Align aligner and pre-training task, and POT: columns of
    K normalised, then rows) or rows-first (XLM-Align Eq. 6 as written: u <- 1/(Kv), then
    v <- 1/(Kᵀu))."""
    ot_filter: str = opt("argmax", choices=OT_FILTERS)
    """How ``ot`` extracts links from the plan: argmax (the released XLM-Align aligner: one
    mutual argmax, rows of the plan and columns of the plan before its last update), itermax
    (SimAlign's IterMax on the plan, the authors' self-labelling), eq9-literal (Eq. 7-9 read
    literally: not what the authors ran; lower precision) or union (forward ∪ backward argmax,
    no filtering)."""
    mu: float = 1.0
    """Entropic regularisation μ of ``ot``: the kernel is ``exp(f_sim / μ)``."""
    eps: float = opt(1e-6, cli=False)
    """Floor ε of the dot products in ``f_sim = log max(ε, h_iᵀ h_j)``."""
    filter_iters: int = opt(2, metavar="N")
    """IterMax's ``max_count`` (``itermax``, ``ot --ot-filter itermax``) or the rounds of
    ``--ot-filter eq9-literal``."""
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
        for key, allowed in (
            ("sinkhorn_order", SINKHORN_ORDERS),
            ("ot_filter", OT_FILTERS),
            ("encoding", ENCODINGS),
        ):
            if getattr(self, key) not in allowed:
                raise CrossalignError(
                    f"unknown {key} '{getattr(self, key)}'; choose one of {', '.join(allowed)}"
                    + renamed_hint(getattr(self, key))
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
