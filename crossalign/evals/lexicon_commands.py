"""``crossalign eval bli|induced-dict|rsim|layers|retrieval``: how well a model aligns two
languages' words and sentences. Added to the ``eval`` group by ``add_lexicon_eval_parsers``."""

from __future__ import annotations

import argparse

from crossalign.errors import CrossalignError


def _pair(args: argparse.Namespace) -> tuple[str, str]:
    from crossalign.lexicon.commands import default_pair

    if args.src and args.tgt:
        return args.src, args.tgt
    pair = default_pair(args.dict)
    if pair is None:
        raise CrossalignError(
            f"cannot tell the languages from {args.dict}; give --src and --tgt (e.g. en de)"
        )
    if args.reverse:
        pair = pair[::-1]
    return args.src or pair[0], args.tgt or pair[1]


def gold_pairs(args: argparse.Namespace) -> list[tuple[str, str]]:
    """The pairs of ``--dict``, swapped with ``--reverse``."""
    from crossalign.data.readers import read_dictionary

    pairs = read_dictionary(args.dict)
    return [(t, s) for s, t in pairs] if args.reverse else pairs


def gold_candidates(args: argparse.Namespace) -> list[str]:
    """Candidate target words of ``--dict`` (``candidate_words``; its source column with
    ``--reverse``) and ``--candidates``."""
    from crossalign.evals.bli import candidate_words

    return candidate_words(args.dict, args.candidates or [], 0 if args.reverse else 1)


def _texts(args: argparse.Namespace, lang: str, files: list[str] | None) -> list[str]:
    from crossalign.lexicon.commands import read_language_text

    return read_language_text(args.corpus, files, lang, args.context_sentences)


def bli_set_at_layer(args: argparse.Namespace, model, tokenizer):
    """The BLI evaluation set of the command's dictionary at ``args.layer``."""
    from crossalign.evals.bli import build_bli_set, normalise_word
    from crossalign.evals.layers import piece_ids
    from crossalign.lexicon.embed import contextual_token_vectors, embedding_layer

    src, tgt = _pair(args)
    pairs = gold_pairs(args)
    candidates = gold_candidates(args)
    if args.layer == 0:
        src_vec = tgt_vec = embedding_layer(model)
    else:
        vectors = []
        for lang, files, words in (
            (src, args.src_text, [s for s, _ in pairs]),
            (tgt, args.tgt_text, candidates),
        ):
            ids = piece_ids(tokenizer, [normalise_word(w) for w in words])
            texts = _texts(args, lang, files)
            vectors.append(
                contextual_token_vectors(
                    model, tokenizer, texts, [args.layer], ids, lang, progress=True
                )[args.layer]
            )
        src_vec, tgt_vec = vectors
    return build_bli_set(
        tokenizer, src_vec, tgt_vec, pairs, candidates, args.words, args.max_words, args.seed
    )


def _write_json(path: str | None, record: dict) -> None:
    if path:
        from crossalign.fileio import write_json_atomic

        write_json_atomic(path, record)


def _bli(args: argparse.Namespace) -> int:
    from crossalign.evals.bli import bli_scores
    from crossalign.lexicon.embed import load_masked_lm

    model, tokenizer = load_masked_lm(args.model, args.device)
    bli = bli_set_at_layer(args, model, tokenizer)
    scores = bli_scores(bli, args.method, args.k)
    src, tgt = _pair(args)
    print(
        f"BLI {src}->{tgt}, layer {args.layer}, {args.method}, words '{args.words}': "
        f"Hit@1 {100 * scores['hit@1']:.2f}%  Hit@5 {100 * scores['hit@5']:.2f}%  "
        f"({scores['words']} source words, {scores['candidates']} candidates)"
    )
    _write_json(args.json, {"pair": f"{src}-{tgt}", "layer": args.layer, **scores})
    return 0


def _induced(args: argparse.Namespace) -> int:
    from crossalign.evals.bli import bli_scores, induced_precision
    from crossalign.lexicon.commands import induce_with_args
    from crossalign.lexicon.embed import load_masked_lm

    src, tgt = _pair(args)
    pairs = gold_pairs(args)
    model, tokenizer = load_masked_lm(args.model, args.device)
    induction = induce_with_args(args, model, tokenizer, src, tgt)
    induced = induced_precision(tokenizer, induction.forward, pairs)
    bli = bli_scores(bli_set_at_layer(args, model, tokenizer), "csls", args.k)
    print(
        f"induced dictionary {src}->{tgt}, layer {args.layer} (vocabularies: {src} "
        f"{len(induction.src_vocab)}, {tgt} {len(induction.tgt_vocab)} tokens): precision "
        f"{100 * induced['precision']:.2f}% ({induced['correct']}/{induced['scored']} pairs "
        f"whose source is a gold word; {induced['pairs']} pairs induced)"
    )
    print(
        f"standard BLI {src}->{tgt}, layer {args.layer}, csls, words '{args.words}': Hit@1 "
        f"{100 * bli['hit@1']:.2f}%  Hit@5 {100 * bli['hit@5']:.2f}%  ({bli['words']} source "
        f"words, {bli['candidates']} candidates)"
    )
    record = {"pair": f"{src}-{tgt}", "layer": args.layer, "induced": induced, "bli": bli}
    _write_json(args.json, record)
    return 0


def _rsim(args: argparse.Namespace) -> int:
    from crossalign.evals.rsim import mean_cosine, rsim
    from crossalign.lexicon.embed import load_masked_lm

    model, tokenizer = load_masked_lm(args.model, args.device)
    bli = bli_set_at_layer(args, model, tokenizer)
    x, y = bli.first_pairs()
    scores = {"rsim": rsim(x, y), "mean_cos": mean_cosine(x, y), "pairs": len(bli.src_words)}
    src, tgt = _pair(args)
    print(
        f"RSIM {src}-{tgt}, layer {args.layer}: {scores['rsim']:.4f}  mean cosine "
        f"{scores['mean_cos']:.4f}  ({scores['pairs']} translation pairs)"
    )
    _write_json(args.json, {"pair": f"{src}-{tgt}", "layer": args.layer, **scores})
    return 0


def _layers(args: argparse.Namespace) -> int:
    from crossalign.evals.layers import format_table, layer_scores, plot_layers
    from crossalign.lexicon.embed import load_masked_lm

    src, tgt = _pair(args)
    model, tokenizer = load_masked_lm(args.model, args.device)
    rows = layer_scores(
        model,
        tokenizer,
        gold_pairs(args),
        gold_candidates(args),
        _texts(args, src, args.src_text),
        _texts(args, tgt, args.tgt_text),
        src,
        tgt,
        args.words,
        args.max_words,
        args.seed,
        progress=True,
    )
    print(f"{src}-{tgt} per layer (CSLS, words '{args.words}'):")
    print(format_table(rows))
    if args.png:
        plot_layers(rows, args.png, f"{src}-{tgt}: {args.model}")
        print(f"plot: {args.png}")
    _write_json(args.json, {"pair": f"{src}-{tgt}", "layers": rows})
    return 0


def _retrieval(args: argparse.Namespace) -> int:
    from crossalign.data.readers import read_parallel
    from crossalign.evals.retrieval import retrieval_accuracy, sentence_embeddings
    from crossalign.lexicon.embed import load_masked_lm

    if args.src_file and args.tgt_file:
        pairs = read_parallel([args.src_file, args.tgt_file])
    elif args.corpus and args.pair:
        src, tgt = args.pair.split("-", 1)
        d = f"{args.corpus}/{args.pair}"
        pairs = read_parallel([f"{d}/{args.split}.{src}", f"{d}/{args.split}.{tgt}"])
    else:
        raise CrossalignError(
            "give --src-file and --tgt-file (line-aligned), or --corpus DIR with --pair SRC-TGT"
        )
    pairs = pairs[: args.max_sentences]
    src_lang, tgt_lang = args.pair.split("-", 1) if args.pair else (None, None)
    model, tokenizer = load_masked_lm(args.model, args.device)
    src_texts, tgt_texts = [s for s, _ in pairs], [t for _, t in pairs]
    x = sentence_embeddings(model, tokenizer, src_texts, args.layer, src_lang)
    y = sentence_embeddings(model, tokenizer, tgt_texts, args.layer, tgt_lang)
    scores = retrieval_accuracy(x, y, src_texts, tgt_texts)
    print(
        f"retrieval, layer {args.layer}, {scores['n']} pairs: src->tgt "
        f"{100 * scores['acc_src_tgt']:.2f}%  tgt->src {100 * scores['acc_tgt_src']:.2f}%"
    )
    _write_json(args.json, {"layer": args.layer, **scores})
    return 0


def _dictionary_arguments(p: argparse.ArgumentParser, layer: bool = True) -> None:
    p.add_argument("--model", required=True, metavar="DIR", help="save_pretrained masked-LM")
    p.add_argument(
        "--dict",
        required=True,
        metavar="FILE",
        help="gold MUSE dictionary, e.g. data/freedict/en-de/test.txt; candidates come from "
        "full.txt beside it",
    )
    p.add_argument("--src", metavar="LANG", help="source language (default: from the dict dir)")
    p.add_argument("--tgt", metavar="LANG", help="target language (default: from the dict dir)")
    p.add_argument(
        "--reverse",
        action="store_true",
        help="read --dict the other way round, 'tgt src' (e.g. data/freedict/en-de for de->en; "
        "candidates then come from the first column of full.txt)",
    )
    if layer:
        p.add_argument("--layer", type=int, default=0, help="0 = embedding layer (default), 1..L")
    p.add_argument("--corpus", metavar="DIR", help="text for layers >= 1: a built corpus")
    p.add_argument("--src-text", nargs="+", metavar="FILE", help="source text for layers >= 1")
    p.add_argument("--tgt-text", nargs="+", metavar="FILE", help="target text for layers >= 1")
    p.add_argument(
        "--context-sentences", type=int, default=2000, help="lines of text per language (2000)"
    )
    p.add_argument(
        "--words",
        default="whole",
        choices=["whole", "mean"],
        help="whole: single-token words only (default); mean: mean of subword vectors",
    )
    p.add_argument("--candidates", nargs="+", metavar="FILE", help="extra candidate target words")
    p.add_argument("--max-words", type=int, default=1500, help="source words evaluated (1500)")
    p.add_argument("--seed", type=int, default=0, help="seed of the source-word sample (0)")
    p.add_argument("--json", metavar="FILE", help="also write the scores as JSON")
    p.add_argument("--device", default="cpu", help="torch device (cpu, cuda)")


def add_lexicon_eval_parsers(actions: argparse._SubParsersAction) -> None:
    """Add ``bli``, ``induced-dict``, ``rsim``, ``layers`` and ``retrieval`` to the
    ``crossalign eval`` group."""
    from crossalign.lexicon.commands import add_vocabulary_arguments

    p = actions.add_parser(
        "bli",
        help="bilingual lexicon induction Hit@1/Hit@5 against a gold dictionary",
        description="Translate the gold dictionary's test source words by CSLS (or cosine) "
        "among the candidate target words and report Hit@1 and Hit@5 (any gold translation "
        "counts). See docs/lexicon.md for the word vectors and the protocol.",
    )
    _dictionary_arguments(p)
    p.add_argument("--method", default="csls", choices=["csls", "nn"], help="retrieval (csls)")
    p.add_argument("--k", type=int, default=10, help="CSLS neighbourhood size (10)")
    p.set_defaults(func=_bli)

    p = actions.add_parser(
        "induced-dict",
        help="precision of the self-induced dictionary against a gold one (Table 1), with BLI",
        description="Lu et al. 2023, Table 1: induce the model's own src->tgt token dictionary "
        "(every token of the source language-specific vocabulary to its CSLS-nearest token of "
        "the target language-specific vocabulary, as crossalign induce-dict does) and report "
        "its precision on the source tokens that are gold source words; beside it, standard "
        "BLI Hit@1/Hit@5 on the same dictionary and layer. The paper's direction is X->en: "
        "with an en-X dictionary give --reverse. Needs text: --corpus or --src-text/--tgt-text.",
    )
    _dictionary_arguments(p)
    add_vocabulary_arguments(p)
    p.add_argument("--k", type=int, default=10, help="CSLS neighbourhood size (10)")
    p.set_defaults(func=_induced)

    p = actions.add_parser(
        "rsim",
        help="relational similarity (RSIM) of translation pairs, and their mean cosine",
        description="Pearson correlation between the intra-language cosine similarities of the "
        "source words and of their translations over all word pairs (Vulić et al. 2020).",
    )
    _dictionary_arguments(p)
    p.set_defaults(func=_rsim)

    p = actions.add_parser(
        "layers",
        help="BLI accuracy, mean cosine and RSIM for every layer (table + PNG)",
        description="Score the embedding layer and every transformer layer on the same words "
        "(contextual vectors averaged over --corpus or --src-text/--tgt-text).",
    )
    _dictionary_arguments(p, layer=False)
    p.add_argument("--png", metavar="FILE", help="write the per-layer plot here")
    p.set_defaults(func=_layers)

    p = actions.add_parser(
        "retrieval",
        help="sentence retrieval accuracy on held-out translation pairs, both directions",
        description="Embed every sentence by mean-pooling one layer, retrieve each one's "
        "translation among all test sentences by cosine; report accuracy both ways.",
    )
    p.add_argument("--model", required=True, metavar="DIR", help="save_pretrained masked-LM")
    p.add_argument("--src-file", metavar="FILE", help="source sentences, one per line")
    p.add_argument("--tgt-file", metavar="FILE", help="their translations, line-aligned")
    p.add_argument("--corpus", metavar="DIR", help="a built parallel corpus (with --pair)")
    p.add_argument("--pair", metavar="SRC-TGT", help="pair of --corpus, e.g. en-de")
    p.add_argument("--split", default="test", help="split of --corpus (test)")
    p.add_argument("--layer", type=int, default=-1, help="layer to pool (-1: last)")
    p.add_argument("--max-sentences", type=int, default=10_000, help="pairs used (10000)")
    p.add_argument("--json", metavar="FILE", help="also write the scores as JSON")
    p.add_argument("--device", default="cpu", help="torch device (cpu, cuda)")
    p.set_defaults(func=_retrieval)
