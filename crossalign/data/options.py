"""Options of the data commands a study's ``prepare`` steps may run (light: read by the CLI
and by study files without importing the builders)."""

from __future__ import annotations

from dataclasses import dataclass

from crossalign.options import opt


@dataclass
class TokenizerOptions:
    """``crossalign data tokenizer``."""

    out: str
    """Tokenizer directory, replaced atomically."""
    config: str | None = opt(
        None, short="-c", help="YAML run config whose data.* sources and tokenizer.* settings "
        "to train on"
    )  # fmt: skip
    overrides: list[str] = opt([], metavar="KEY=VALUE", help="config overrides")


@dataclass
class UnmtSplitOptions:
    """``crossalign data unmt-split``."""

    pairs: str
    """A parallel folder <src>-<tgt>/ (train.*, valid.*, test.*)."""
    out: str
    """Output folder, replaced atomically."""
