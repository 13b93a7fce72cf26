"""``crossalign symmetrize``: combine two directional Pharaoh alignments line by line."""

from __future__ import annotations

import argparse
from dataclasses import dataclass

from crossalign.align.symmetrize import SYMMETRIZE_METHODS
from crossalign.cli.generate import options_from
from crossalign.options import add_options, opt


@dataclass
class SymmetrizeOptions:
    """``crossalign symmetrize``."""

    forward: str = opt(metavar="FILE")
    """Source-target Pharaoh links i-j (aligning source to target)."""
    backward: str = opt(metavar="FILE")
    """Target-source Pharaoh links j-i (aligning target to source, the target file first);
    flipped to i-j before symmetrizing."""
    method: str = opt("grow-diag-final-and", choices=SYMMETRIZE_METHODS)
    """How to combine them."""
    out: str = opt("-", short="-o", metavar="FILE")
    """Source-target Pharaoh output: a file (written atomically) or - for stdout."""


def _symmetrize(args: argparse.Namespace) -> int:
    from crossalign.align.files import symmetrize_files

    o = options_from(args, SymmetrizeOptions)
    symmetrize_files(o.forward, o.backward, o.method, o.out)
    return 0


def add_parser(sub: argparse._SubParsersAction) -> None:
    """Register ``crossalign symmetrize``."""
    p = sub.add_parser(
        "symmetrize",
        help="combine forward and backward Pharaoh alignments (grow-diag-final-and, ...)",
        description="Symmetrize two directional word alignments line by line: --forward "
        "holds source-target links i-j, --backward target-source links j-i (as aligning the "
        "other way writes them). Writes source-target Pharaoh lines.",
    )
    add_options(p, SymmetrizeOptions)
    p.set_defaults(func=_symmetrize)
