"""``crossalign cooc build|compare``: the global co-occurrence matrix and its analysis."""

from __future__ import annotations

import argparse
import shlex

from crossalign.errors import CrossalignError


def _text_sources(args: argparse.Namespace) -> list[tuple[str, list[str]]]:
    """(language, files) in language order from ``--corpus``/``--languages`` and ``--text``."""
    from crossalign.languages import check_language

    files: dict[str, list[str]] = {}
    if args.corpus:
        from crossalign.data.corpus import resolve_corpus

        langs = [x.strip() for x in args.languages.split(",") if x.strip()] or None
        files = {k: list(v) for k, v in resolve_corpus(args.corpus, langs)["mono"].items()}
    elif args.languages:
        raise CrossalignError("--languages selects languages of --corpus; give --corpus too")
    for item in args.text:
        lang, sep, path = item.partition("=")
        if not sep or not lang or not path:
            raise CrossalignError(f"--text '{item}' must look like LANG=FILE, e.g. en=train.en")
        check_language(lang, "--text")
        files.setdefault(lang, []).append(path)
    if not files:
        raise CrossalignError("no text: give --corpus DIR (from 'crossalign data ...') or --text")
    return sorted(files.items())


def _build_command(args: argparse.Namespace) -> str:
    """The equivalent shell command, recorded in meta.json."""
    words = ["crossalign", "cooc", "build", "--out", args.out]
    for flag in ("tokenizer", "model", "corpus", "languages", "reference"):
        if getattr(args, flag):
            words += [f"--{flag}", str(getattr(args, flag))]
    for item in args.text:
        words += ["--text", item]
    words += ["--window", str(args.window), "--num-proc", str(args.num_proc)]
    words += [f"--{f.replace('_', '-')}" for f in ("pretokenized", "log_fp16") if getattr(args, f)]
    return shlex.join(words)


def _build(args: argparse.Namespace) -> int:
    from crossalign.cooc.build import build_matrix

    tokenizer = args.tokenizer or args.model
    if not tokenizer:
        raise CrossalignError(
            "give the tokenizer the matrix is for: --tokenizer DIR or --model DIR"
        )
    if args.num_proc < 1:
        raise CrossalignError(f"--num-proc {args.num_proc} must be >= 1")
    sources = _text_sources(args)
    meta = build_matrix(
        args.out,
        sources,
        tokenizer,
        window=args.window,
        reference=args.reference,
        pretokenized=args.pretokenized,
        num_proc=args.num_proc,
        log_fp16=args.log_fp16,
        command=_build_command(args),
        progress=not args.quiet,
    )
    total = sum(x["tokens"] for x in meta["languages"].values())
    seconds = meta["count_seconds"]
    for lang, x in meta["languages"].items():
        print(f"{lang}: {x['tokens']:,} tokens, {x['lines']:,} lines, scale {x['scale']:.4g}")
    print(
        f"counted {total:,} tokens in {seconds:.1f} s ({total / max(seconds, 1e-9):,.0f} "
        f"tokens/s); {meta['nnz']:,} stored entries (upper triangle), window {meta['window']}, "
        f"reference {meta['reference']}"
    )
    print(f"wrote {args.out} (see {args.out}/meta.json)")
    return 0


def _compare(args: argparse.Namespace) -> int:
    from crossalign.cooc.build import vocabulary_fingerprint
    from crossalign.cooc.compare import compare_phrases, format_table, write_report
    from crossalign.cooc.matrix import CoocMatrix
    from crossalign.data.readers import read_dictionary, read_mono
    from crossalign.data.tokenizer import load_tokenizer

    lang_a, sep, lang_b = args.pair.partition("-")
    if not sep or not lang_a or not lang_b:
        raise CrossalignError(f"--pair '{args.pair}' must look like en-de")
    matrix_a = CoocMatrix(args.matrix)
    matrix_b = CoocMatrix(args.matrix_b) if args.matrix_b else matrix_a
    if args.corpus:
        from crossalign.data.corpus import resolve_corpus

        mono = resolve_corpus(args.corpus, [lang_a, lang_b])["mono"]
        files_a, files_b = mono[lang_a], mono[lang_b]
    else:
        files_a, files_b = args.text_a, args.text_b
    if not files_a or not files_b:
        raise CrossalignError("give --corpus DIR, or --text-a FILE and --text-b FILE")
    tokenizer = load_tokenizer(args.tokenizer or matrix_a.meta["tokenizer"]["path"])
    fingerprint = vocabulary_fingerprint(tokenizer.get_vocab())
    for m in {matrix_a.path: matrix_a, matrix_b.path: matrix_b}.values():
        if m.meta["tokenizer"]["fingerprint"] != fingerprint:
            raise CrossalignError(
                f"co-occurrence matrix {m.path} was built with another tokenizer than "
                f"{args.tokenizer or matrix_a.meta['tokenizer']['path']}; pass --tokenizer"
            )
    result = compare_phrases(
        matrix_a,
        matrix_b,
        lang_a,
        lang_b,
        read_mono(list(files_a)),
        read_mono(list(files_b)),
        read_dictionary(args.dict),
        tokenizer,
        min_count=args.min_count,
        seed=args.seed,
    )
    result["matrices"] = [str(matrix_a.path), str(matrix_b.path)]
    result["dictionary"] = str(args.dict)
    result["texts"] = {lang_a: [str(f) for f in files_a], lang_b: [str(f) for f in files_b]}
    print(format_table(result))
    json_path, png_path = write_report(result, args.out)
    print(f"wrote {json_path} and {png_path}")
    return 0


def add_cooc_parser(sub: argparse._SubParsersAction) -> None:
    """Register ``crossalign cooc`` with its ``build`` and ``compare`` actions."""
    p = sub.add_parser(
        "cooc",
        help="global token co-occurrence matrix (MLM-GC) and its analysis",
        description="Build the token co-occurrence matrix X that the mlm_gc objective "
        "regresses on, and compare co-occurrence counts of translated phrases. See "
        "docs/cooc.md.",
    )
    actions = p.add_subparsers(dest="cooc_command", required=True, metavar="ACTION")

    b = actions.add_parser(
        "build",
        help="count token co-occurrences of multilingual text into a sparse matrix",
        description="One streaming pass over the text: each line is tokenized with the given "
        "tokenizer, every pair of tokens at distance d <= --window in the same line adds "
        "1/(d+1) to X, and the counts of each language are scaled by c = C_ref / C_lang "
        "(tokens of the reference language over tokens of that language). X is symmetric "
        "and stored as its upper triangle in CSR arrays (memory-mapped on load).",
    )
    b.add_argument("--out", required=True, help="output directory, replaced atomically")
    b.add_argument("--tokenizer", metavar="DIR", help="Hugging Face tokenizer directory")
    b.add_argument("--model", metavar="DIR", help="a model directory: use its tokenizer")
    b.add_argument("--corpus", metavar="DIR", help="a corpus from 'crossalign data ...' (train)")
    b.add_argument(
        "--languages", default="", help="comma-separated languages of --corpus (default: all)"
    )
    b.add_argument(
        "--text",
        action="append",
        default=[],
        metavar="LANG=FILE",
        help="a UTF-8 file of one language, one sentence or paragraph per line (repeatable)",
    )
    b.add_argument(
        "--pretokenized",
        action="store_true",
        help="the files hold whitespace-separated token ids of the tokenizer, one line each",
    )
    b.add_argument("--window", type=int, default=2, help="neighbours on each side (2)")
    b.add_argument(
        "--reference", help="language whose token count the others are scaled to (en or largest)"
    )
    b.add_argument(
        "--num-proc", type=int, default=1, help="counting processes; shards merged at the end (1)"
    )
    b.add_argument(
        "--log-fp16", action="store_true", help="store log X in float16 instead of X in float32"
    )
    b.add_argument("--quiet", action="store_true", help="no progress bar")
    b.set_defaults(func=_build)

    c = actions.add_parser(
        "compare",
        help="|log X_a - log X_b| of translated two-word phrases vs random pairs (Figure 1)",
        description="Adjacent word pairs of language A's text are translated word by word "
        "through a bilingual dictionary (the translation most often adjacent in B's text); "
        "prints per-bin statistics of |log X_A - log X_B| with 95%% confidence intervals "
        "against random B pairs, and writes OUT/compare.json and OUT/compare.png.",
    )
    c.add_argument("--matrix", required=True, help="co-occurrence matrix (holds language A)")
    c.add_argument("--matrix-b", help="a second matrix holding language B (default: --matrix)")
    c.add_argument("--pair", required=True, help="languages A-B, e.g. en-de")
    c.add_argument("--dict", required=True, help="MUSE dictionary 'a b' per line, A to B")
    c.add_argument("--corpus", metavar="DIR", help="corpus whose A and B train text to read")
    c.add_argument("--text-a", nargs="+", default=[], metavar="FILE", help="text of language A")
    c.add_argument("--text-b", nargs="+", default=[], metavar="FILE", help="text of language B")
    c.add_argument("--tokenizer", help="tokenizer (default: the one recorded in the matrix)")
    c.add_argument("--min-count", type=int, default=1, help="minimum count of an A phrase (1)")
    c.add_argument("--seed", type=int, default=0, help="seed of the random pairs (0)")
    c.add_argument("--out", required=True, help="output directory for compare.json/.png")
    c.set_defaults(func=_compare)
