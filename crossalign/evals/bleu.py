"""BLEU (Papineni et al. 2002) of an encoder-decoder's translations of a line-aligned test set,
in two flavours: sacreBLEU on detokenized text (Post 2018), reproducible from its signature, and
BLEU on Moses-tokenized text as multi-bleu.perl computes it, the figure the unsupervised MT
papers report (Lample et al. 2018; Conneau & Lample 2019). The two differ: tokenization decides
what an n-gram is."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from crossalign.data.lines import iter_lines
from crossalign.errors import CrossalignError
from crossalign.evals.registry import EvalOutput

if TYPE_CHECKING:
    from sacrebleu.metrics.bleu import BLEUScore

    from crossalign.evals.options import BLEUOptions


def primary_language(lang: str) -> str:
    """The language's primary subtag, lower-cased (``en-US`` → ``en``, ``zh_TW`` → ``zh``):
    the code Moses' tokenizer and sacreBLEU's tokenizer choice go by."""
    return lang.replace("_", "-").split("-")[0].lower()


def sacrebleu_corpus(
    hypotheses: Sequence[str], references: Sequence[str], lang: str
) -> tuple[BLEUScore, str]:
    """sacreBLEU's corpus BLEU of detokenized ``hypotheses`` against one reference each, with
    its ``BLEU`` metric object at its defaults (mixed case, exp smoothing) and tokenizer
    ``zh`` for a target language zh*, ``13a`` (mteval-v13a) for any other: the score object
    (``.score`` in [0, 100], ``.bp``, ``.ratio``) and the signature string."""
    from sacrebleu.metrics import BLEU

    tokenize = "zh" if primary_language(lang) == "zh" else "13a"
    metric = BLEU(tokenize=tokenize)
    score = metric.corpus_score(list(hypotheses), [list(references)])
    return score, str(metric.get_signature())


def moses_tokenize(sentences: Sequence[str], lang: str) -> list[str]:
    """``sentences`` tokenized by sacremoses' ``MosesTokenizer`` for ``lang`` (its primary
    subtag) with ``escape=False`` (``&`` and quotes stay as they are), tokens joined by
    spaces."""
    from sacremoses import MosesTokenizer

    tokenizer = MosesTokenizer(lang=primary_language(lang))
    return [tokenizer.tokenize(s, escape=False, return_str=True) for s in sentences]


def tokenized_bleu(hypotheses: Sequence[str], references: Sequence[str], lang: str) -> float:
    """BLEU comparable to Moses' multi-bleu.perl, in [0, 100]: hypotheses and references are
    tokenized with sacremoses' ``MosesTokenizer(lang)`` (``escape=False``), then scored by
    sacreBLEU's corpus BLEU with ``tokenize="none"``, ``force=True`` (multi-bleu is
    case-sensitive and does no further tokenization) and ``smooth_method="none"`` (multi-bleu
    scores 0 when any n-gram precision is 0). Corpus-level clipped n-gram precisions p_n,
    n = 1..4, over whitespace tokens; BLEU = BP · exp(Σ_n log p_n / 4), BP = exp(1 - r/c)
    when the hypothesis length c is below the reference length r, else 1."""
    from sacrebleu.metrics import BLEU

    metric = BLEU(tokenize="none", force=True, smooth_method="none")
    hyps, refs = moses_tokenize(hypotheses, lang), moses_tokenize(references, lang)
    return metric.corpus_score(hyps, [refs]).score


def aligned_files(opts: BLEUOptions) -> tuple[Path, Path]:
    """(source file, reference file) of ``opts``: ``<split>.<src>`` and ``<split>.<tgt>`` in
    ``opts.testset``, else ``opts.src`` and ``opts.ref``; none given, or a missing one, is a
    CrossalignError naming it and the fix."""
    if not (opts.testset or opts.src):
        raise CrossalignError(
            "give the test set: --testset DIR (test.<src>, test.<tgt>) or --src FILE --ref FILE"
        )
    src_lang, tgt_lang = opts.languages()
    if not opts.testset:
        for flag, path in (("--src", opts.src), ("--ref", opts.ref)):
            if not Path(path).exists():
                raise CrossalignError(
                    f"{flag} {path}: no such file; give a file, one sentence a line"
                )
        return Path(opts.src), Path(opts.ref)
    folder = Path(opts.testset)
    if not folder.is_dir():
        raise CrossalignError(
            f"--testset {folder} is not a folder; give one holding {opts.split}.{src_lang} and "
            f"{opts.split}.{tgt_lang}, or --src FILE --ref FILE"
        )
    files = folder / f"{opts.split}.{src_lang}", folder / f"{opts.split}.{tgt_lang}"
    for path in files:
        if not path.exists():
            raise CrossalignError(
                f"--testset {folder} has no {path.name}; it needs {files[0].name} and "
                f"{files[1].name}, line-aligned (or give --src-lang/--tgt-lang, --split)"
            )
    return files


def read_aligned(src: Path, ref: Path, max_sentences: int = 0) -> tuple[list[str], list[str]]:
    """The stripped lines of the line-aligned files ``src`` and ``ref`` (blank lines kept, so
    line i of one stays the translation of line i of the other), the first ``max_sentences``
    (0: all). Different line counts, or no text at all, are a CrossalignError naming both
    files."""
    sources = [text.strip() for _, text in iter_lines(src)]
    references = [text.strip() for _, text in iter_lines(ref)]
    if len(sources) != len(references):
        raise CrossalignError(
            f"{src} ({len(sources)} lines) and {ref} ({len(references)} lines) differ in line "
            f"count; a test set needs one reference line per source line"
        )
    if not any(sources) or not any(references):
        raise CrossalignError(
            f"test set {src}, {ref} is empty; give line-aligned files, one sentence a line"
        )
    if max_sentences:
        sources, references = sources[:max_sentences], references[:max_sentences]
    return sources, references


def hypotheses_path(output: str, direction: str, both: bool) -> Path:
    """Where the translations of ``direction`` go: ``output``; with both directions the
    direction before its suffix (``hyp.txt`` → ``hyp.en-de.txt``)."""
    path = Path(output)
    return path.with_name(f"{path.stem}.{direction}{path.suffix}") if both else path


def decoding_note(opts: BLEUOptions) -> str:
    """How the translations were decoded, for the notes."""
    if opts.num_beams == 1:
        return "decoding: greedy"
    return f"decoding: beam search, {opts.num_beams} beams, length penalty {opts.length_penalty}"


def evaluate_bleu(model_dir: str, opts: BLEUOptions) -> EvalOutput:
    """``eval bleu``: the model's translations of the test set of ``opts`` (and of its
    references back, with ``both_directions``) scored by ``sacrebleu_corpus`` (``bleu``, ``bp``,
    ``ratio``) and ``tokenized_bleu`` (``bleu_tok``); metric keys ``<src>-<tgt>/bleu`` ...
    Writes the translations to ``opts.output`` when given."""
    from crossalign.data.tokenizer import load_tokenizer
    from crossalign.fileio import write_lines_atomic
    from crossalign.models.load import language_index, model_languages
    from crossalign.models.seq2seq import load_seq2seq, translate

    src_path, ref_path = aligned_files(opts)
    src_lang, tgt_lang = opts.languages()
    sources, references = read_aligned(src_path, ref_path, opts.max_sentences)
    directions = [(src_lang, tgt_lang, sources, references)]
    if opts.both_directions:
        directions.append((tgt_lang, src_lang, references, sources))
    model = load_seq2seq(model_dir, device=opts.device)
    tokenizer = load_tokenizer(model_dir, "--model", masked_lm=False)
    for lang in (src_lang, tgt_lang):
        language_index(model_languages(model), lang, f"--model {model_dir}")
    out = EvalOutput(
        metrics={},
        notes=[f"test set {src_path}, {ref_path}: {len(sources)} sentences", decoding_note(opts)],
        legacy={},
    )
    for source, target, inputs, refs in directions:
        direction = f"{source}-{target}"
        hypotheses = translate(
            model, tokenizer, inputs, source, target, num_beams=opts.num_beams,
            length_penalty=opts.length_penalty, batch_size=opts.batch_size, progress=True,
        )  # fmt: skip
        if opts.output:
            path = hypotheses_path(opts.output, direction, opts.both_directions)
            write_lines_atomic(path, hypotheses)
            out.files[f"translations {direction}"] = str(path)
        score, signature = sacrebleu_corpus(hypotheses, refs, target)
        scores = {
            "bleu": score.score,
            "bleu_tok": tokenized_bleu(hypotheses, refs, target),
            "bp": score.bp,
            "ratio": score.ratio,
            "sentences": len(refs),
        }
        out.metrics.update({f"{direction}/{k}": v for k, v in scores.items()})
        out.legacy[direction] = {**scores, "signature": signature}
        out.notes.append(
            f"{direction}: sacreBLEU {signature}; bleu_tok: Moses-tokenized "
            f"({primary_language(target)}), case-sensitive, as multi-bleu.perl"
        )
    return out
