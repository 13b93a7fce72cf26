"""``crossalign backbone ...`` subcommands."""

from __future__ import annotations

import argparse


def _export(args: argparse.Namespace) -> int:
    from crossalign.models.backbones import BACKBONES

    backbone = BACKBONES.get(args.name)
    result = backbone.export(args.out_dir, force=args.force, file=args.file)
    source = result.provenance["source"]
    print(
        f"exported {args.name} to {result.out_dir} in {result.seconds:.1f} s "
        f"(from {source['file']}, sha256 {source['sha256'][:12]})"
    )
    return 0


def _ls(args: argparse.Namespace) -> int:
    from crossalign.models.backbones import BACKBONES

    for name in BACKBONES.names():
        backbone = BACKBONES.get(name)
        version = backbone.package_version()
        status = f"{backbone.package} {version}" if version else f"{backbone.package} not installed"
        print(f"{name:<10} [{status}] {backbone.summary}")
    return 0


def add_backbone_parser(sub: argparse._SubParsersAction) -> None:
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
    e.add_argument("name", metavar="NAME", help="backbone name (see 'crossalign backbone ls')")
    e.add_argument("out_dir", metavar="OUT_DIR", help="output directory")
    e.add_argument(
        "--force", action="store_true", help="replace OUT_DIR if it holds a previous export"
    )
    e.add_argument(
        "--file", metavar="PATH", help="read this model file instead of the installed package's"
    )
    e.set_defaults(func=_export)

    ls = actions.add_parser("ls", help="list importable backbones and their source packages")
    ls.set_defaults(func=_ls)
