"""Options of the co-occurrence commands (light: read by the CLI without importing numpy)."""

from __future__ import annotations

from dataclasses import dataclass

from crossalign.options import opt


@dataclass
class CoocBuildOptions:
    """``crossalign cooc build``."""

    out: str
    """Output directory, replaced atomically."""
    tokenizer: str | None = opt(None, metavar="DIR", help="Hugging Face tokenizer directory")
    model: str | None = opt(None, metavar="DIR", help="a model directory: use its tokenizer")
    corpus: str | None = opt(None, metavar="DIR")
    """A corpus from 'crossalign data ...' (its train text)."""
    languages: str | None = None
    """Comma-separated languages of --corpus (default: all)."""
    reference: str | None = None
    """Language whose token count the others are scaled to (default: en, else the largest)."""
    text: list[str] = opt([], append=True, metavar="LANG=FILE")
    """A UTF-8 file of one language, one sentence or paragraph per line (repeatable)."""
    window: int = 2
    """Neighbours on each side."""
    num_proc: int = 1
    """Counting processes; shards merged at the end."""
    pretokenized: bool = False
    """The files hold whitespace-separated token ids of the tokenizer, one line each."""
    log_fp16: bool = False
    """Store log X in float16 instead of X in float32."""
    quiet: bool = opt(False, help="no progress bar")
