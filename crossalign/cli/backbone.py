"""``crossalign backbone export|ls``: import pretrained backbones from local packages."""

from __future__ import annotations

import argparse
from dataclasses import dataclass

from crossalign.cli.generate import options_from
from crossalign.options import add_options, opt


@dataclass
class ExportOptions:
    """``crossalign backbone export``."""

    name: str = opt(metavar="NAME", help="backbone name (see 'crossalign backbone ls')")
    out_dir: str = opt(metavar="OUT_DIR", help="output directory")
    force: bool = opt(False, help="replace OUT_DIR if it holds a previous export")
    file: str | None = opt(None, metavar="PATH", help="read this model file, not the package's")


def _export(args: argparse.Namespace) -> int:
    from crossalign.models.backbones import BACKBONES

    o = options_from(args, ExportOptions)
    result = BACKBONES.get(o.name).export(o.out_dir, force=o.force, file=o.file)
    source = result.provenance["source"]
    print(
        f"exported {o.name} to {result.out_dir} in {result.seconds:.1f} s "
        f"(from {source['file']}, sha256 {source['sha256'][:12]})"
    )
    return 0


def print_backbones() -> None:
    """One line per importable backbone: name, source package (and its version), summary."""
    from crossalign.models.backbones import BACKBONES

    for name in BACKBONES.names():
        backbone = BACKBONES.get(name)
        version = backbone.package_version()
        status = f"{backbone.package} {version}" if version else f"{backbone.package} not installed"
        print(f"{name:<10} [{status}] {backbone.summary}")


def add_parser(sub: argparse._SubParsersAction) -> None:
    """Register ``crossalign backbone`` with its ``export`` and ``ls`` actions."""
    p = sub.add_parser("backbone", help="import pretrained backbones from local packages")
    actions = p.add_subparsers(dest="backbone_command", required=True, metavar="ACTION")

    e = actions.add_parser(
        "export",
        help="write a backbone as a Hugging Face masked-LM + tokenizer directory",
        description="Read a backbone from its installed source package and write it as a "
        "Hugging Face directory that AutoModelForMaskedLM, AutoModel and AutoTokenizer load "
        "offline. See docs/backbone.md.",
    )
    add_options(e, ExportOptions, positional=["name", "out_dir"])
    e.set_defaults(func=_export)

    ls = actions.add_parser("ls", help="list importable backbones and their source packages")
    ls.set_defaults(func=lambda args: print_backbones())
