"""``crossalign data ...`` subcommands: build corpora and dictionaries from installed packages."""

from __future__ import annotations

import argparse
import shlex
from typing import Any

DEFAULT_LANGS = "de,fr,es,ru,zh-CN,hi"


def _command_line(*words: Any) -> str:
    """The equivalent shell command, recorded in the data card."""
    return shlex.join(["crossalign", "data", *map(str, words)])


def _report(card: dict[str, Any], out: str) -> None:
    """Print pair counts per split and where the output is."""
    for name, pair in card["pairs"].items():
        counts = ", ".join(f"{split} {pair[split]}" for split in ("train", "valid", "test"))
        print(f"{name}: {counts}")
    print(f"wrote {out} (see {out}/card.json)")


def _bible(args: argparse.Namespace) -> int:
    from crossalign.data.bible import build_bible

    command = _command_line(
        "bible", "--out", args.out, "--seed", args.seed, "--valid", args.valid, "--test", args.test
    )
    card = build_bible(
        args.out, seed=args.seed, n_valid=args.valid, n_test=args.test, command=command
    )
    _report(card, args.out)
    return 0


def _libreoffice(args: argparse.Namespace) -> int:
    from crossalign.data.libreoffice import build_libreoffice

    langs = [lang.strip() for lang in args.langs.split(",") if lang.strip()]
    command = _command_line(
        "libreoffice",
        "--langs",
        ",".join(langs),
        "--out",
        args.out,
        "--seed",
        args.seed,
        "--valid",
        args.valid,
        "--test",
        args.test,
    )
    card = build_libreoffice(
        args.out, langs, seed=args.seed, n_valid=args.valid, n_test=args.test, command=command
    )
    _report(card, args.out)
    return 0


def _freedict(args: argparse.Namespace) -> int:
    from crossalign.data.freedict import build_freedict

    command = _command_line(
        "freedict",
        *args.dicts,
        "--out",
        args.out,
        "--seed",
        args.seed,
        "--valid",
        args.valid,
        "--test",
        args.test,
    )
    card = build_freedict(
        args.out, args.dicts, seed=args.seed, n_valid=args.valid, n_test=args.test, command=command
    )
    _report(card, args.out)
    return 0


def _tokenize(args: argparse.Namespace) -> int:
    from crossalign.config import load_config
    from crossalign.data.prepare import tokenize_sources

    cfg = load_config(args.config, args.overrides)
    shard = _shard(args.shard)
    summary = tokenize_sources(cfg, args.out, args.tokenizer, args.num_proc, shard)
    print(summary)
    return 0


def _shard(text: str) -> tuple[int, int]:
    """``K/N`` → (K, N)."""
    k, _, n = text.partition("/")
    if not (k.isdigit() and n.isdigit()) or not 0 <= int(k) < int(n):
        from crossalign.errors import CrossalignError

        raise CrossalignError(f"--shard {text}: expected K/N with 0 <= K < N, e.g. 0/4")
    return int(k), int(n)


def _count(text: str) -> int:
    """argparse type: a non-negative integer."""
    if not text.isdigit():
        raise argparse.ArgumentTypeError(f"expected a non-negative integer, got '{text}'")
    return int(text)


def _common(p: argparse.ArgumentParser, out: str, valid: int, test: int, unit: str) -> None:
    """Options every builder has: output directory, seed and split sizes."""
    p.add_argument("--out", default=out, help=f"output directory, replaced atomically ({out})")
    p.add_argument("--seed", type=int, default=0, help="seed of the train/valid/test split (0)")
    p.add_argument(
        "--valid", type=_count, default=valid, metavar="N", help=f"{unit} in valid ({valid}; ≤10%%)"
    )
    p.add_argument(
        "--test", type=_count, default=test, metavar="N", help=f"{unit} in test ({test}; ≤10%%)"
    )


def add_data_parser(sub: argparse._SubParsersAction) -> None:
    """Register ``crossalign data`` and its builders."""
    p = sub.add_parser(
        "data",
        help="build corpora and dictionaries from installed packages",
        description="Build training corpora and bilingual dictionaries from installed Debian "
        "packages. Each builder writes OUT/<src>-<tgt>/ plus OUT/card.json (sources, "
        "licences, counts, filters).",
    )
    builders = p.add_subparsers(dest="data_command", required=True, metavar="BUILDER")

    b = builders.add_parser(
        "bible",
        help="English–Spanish Bible verse pairs (sword-text-kjv, sword-text-sparv)",
        description="English–Spanish verse pairs from the King James Version and the Reina-Valera "
        "1909, joined by verse key. Writes OUT/en-es/{train,valid,test}.{en,es}. Needs: sudo "
        "apt-get install sword-text-kjv sword-text-sparv.",
    )
    _common(b, "data/bible", 1000, 1000, "distinct English verses")
    b.set_defaults(func=_bible)

    b = builders.add_parser(
        "libreoffice",
        help="English–X paragraph pairs from the LibreOffice help (libreoffice-help-*)",
        description="Paragraph pairs from the LibreOffice help pages, matched by page and "
        "paragraph id against en-US. Writes OUT/en-<lang>/{train,valid,test}.{en,<lang>}. Needs "
        "libreoffice-help-en-us and libreoffice-help-<lang> (lowercase, e.g. zh-cn).",
    )
    b.add_argument(
        "--langs",
        default=DEFAULT_LANGS,
        help=f"comma-separated target languages as the help names them ({DEFAULT_LANGS})",
    )
    _common(b, "data/libreoffice", 500, 500, "distinct English paragraphs")
    b.set_defaults(func=_libreoffice)

    b = builders.add_parser(
        "freedict",
        help="single-word MUSE dictionaries from FreeDict (dict-freedict-*)",
        description="Clean single-word translation pairs from FreeDict dictd databases, in MUSE "
        "format ('src tgt' per line). Writes OUT/<src>-<tgt>/{train,valid,test,full}.txt with "
        "ISO 639-1 codes (eng-deu -> en-de); the split is by source word.",
    )
    b.add_argument(
        "dicts",
        nargs="+",
        metavar="DICT",
        help="FreeDict names such as eng-deu eng-fra (package dict-freedict-DICT)",
    )
    _common(b, "data/freedict", 500, 1500, "source words")
    b.set_defaults(func=_freedict)

    b = builders.add_parser(
        "tokenize",
        help="tokenize a config's data sources once into a memory-mapped token store",
        description="Tokenize the data sources of a run config (data.corpus, data.mono, "
        "data.parallel, valid sets) into a token store that 'crossalign train data.store=OUT' "
        "memory-maps. The tokenizer comes from --tokenizer, tokenizer.path or model.path. "
        "--shard K/N tokenizes every N-th chunk starting at K, so N machines (or jobs) build "
        "one store together; an interrupted build resumes where it stopped.",
    )
    b.add_argument("--config", "-c", help="YAML run config whose data.* sources to tokenize")
    b.add_argument("overrides", nargs="*", metavar="KEY=VALUE", help="config overrides")
    b.add_argument("--out", required=True, help="store directory")
    b.add_argument("--tokenizer", help="tokenizer directory (default: tokenizer.path/model.path)")
    b.add_argument("--num-proc", type=int, default=1, help="tokenizing processes (1)")
    b.add_argument("--shard", default="0/1", metavar="K/N", help="this job's shard (0/1)")
    b.set_defaults(func=_tokenize)

    from crossalign.data.derive_commands import add_derive_parser

    add_derive_parser(builders)
