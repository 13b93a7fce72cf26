"""Co-occurrence build throughput and peak memory, side by side with GloVe's ``cooccur``.

1. Prepares N tokens (default 20M) of real multilingual text, deduplicated per language:
   the train text of a LibreOffice corpus (all languages), the Bible (en-es), then English
   man-page prose from /usr/share/man (groff markup stripped) and the text files of
   /usr/share/doc (changelogs, READMEs) until N tokens are reached.
   Writes per language ``<lang>.txt`` and ``<lang>.ids`` (the tokenizer's ids, whitespace-
   separated, one line per line: GloVe's input format) under --work (cached).
2. Runs, each as its own process, timing the whole process (start to exit) and sampling the
   resident memory of its process tree every 20 ms:
   - ``crossalign cooc build --pretokenized`` (counting only: GloVe's setting) and
     ``crossalign cooc build`` on the text (tokenization included), at each window;
   - GloVe's reference ``cooccur`` (Stanford C code, symmetric, same window, -memory 4.0)
     on the same id files, compiled from --glove-src (a directory with ``cooccur.c`` and
     ``cooccur.h``; PyPI's ``crucyble`` 0.1.0.dev4 sdist vendors them, with the argument
     parsing replaced by a function, so a small ``main`` is added here).
   Prints tokens/s by wall clock and by CPU time (user + sys of all processes; the machine
   is shared, CPU time is the steadier figure), peak RSS, and ratios to GloVe.

    # GloVe's C source from PyPI (the sdist's build backend needs poetry to be downloaded):
    python3 -m venv /tmp/gv && /tmp/gv/bin/pip install poetry
    /tmp/gv/bin/pip download --no-deps --no-build-isolation --no-binary :all: \
        crucyble==0.1.0.dev4 -d /tmp/glovesrc
    tar xzf /tmp/glovesrc/crucyble-0.1.0.dev4.tar.gz -C /tmp/glovesrc
    .venv/bin/python bench/cooc_build.py --cooc-only \
        --glove-src /tmp/glovesrc/crucyble-0.1.0.dev4/src/lib/glove
"""

from __future__ import annotations

import argparse
import gzip
import itertools
import json
import os
import re
import resource
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import psutil

ROOT = Path(__file__).resolve().parents[1]
GROFF_ESCAPE = re.compile(
    r"\\f[BIRPC]|\\f\(..|\\f\[[^\]]*\]|\\\(..|\\\[[^\]]*\]|\\[-&|^e]|\\s[-+]?\d"
)


def man_lines(limit_files: int = 100000):
    """Prose lines of the English man pages: macro lines dropped, font escapes removed."""
    pages = sorted(Path("/usr/share/man").glob("man[1-8]/*.gz"))[:limit_files]
    for page in pages:
        try:
            text = gzip.decompress(page.read_bytes()).decode("utf-8")
        except (OSError, UnicodeDecodeError):
            continue
        for line in text.splitlines():
            if not line or line[0] in ".'":
                continue
            line = GROFF_ESCAPE.sub("", line).replace("\\", "").strip()
            if len(line.split()) >= 3:
                yield line


def doc_lines():
    """Lines of three or more words of the text files under /usr/share/doc (changelogs,
    READMEs, licences; gzip or plain)."""
    for path in sorted(Path("/usr/share/doc").rglob("*")):
        if not path.is_file() or path.suffix not in (".gz", "", ".txt", ".md", ".rst"):
            continue
        try:
            raw = path.read_bytes()
            text = (gzip.decompress(raw) if path.suffix == ".gz" else raw).decode("utf-8")
        except (OSError, UnicodeDecodeError, EOFError):
            continue
        for line in text.splitlines():
            if len(line.split()) >= 3:
                yield line.strip()


def prepare(work: Path, tokenizer_dir: Path, corpus: Path, bible: Path, target: int) -> dict:
    """Write <lang>.txt / <lang>.ids with ``target`` tokens in all; cached in manifest.json."""
    manifest = work / "manifest.json"
    if manifest.is_file():
        cached = json.loads(manifest.read_text())
        if cached["target"] == target and cached["tokenizer"] == str(tokenizer_dir):
            return cached
    from transformers import AutoTokenizer

    from crossalign.data.corpora.files import resolve_corpus

    tok = AutoTokenizer.from_pretrained(tokenizer_dir)
    sources: dict[str, list[str]] = resolve_corpus(corpus)["mono"]
    for lang in ("en", "es"):
        sources.setdefault(lang, []).append(str(bible / "en-es" / f"train.{lang}"))
    texts: dict[str, dict[str, None]] = {}
    for lang, files in sorted(sources.items()):
        seen = texts.setdefault(lang, {})
        for f in files:
            for line in Path(f).read_text(encoding="utf-8").splitlines():
                if line.strip():
                    seen.setdefault(line.strip())
    ids: dict[str, list[list[int]]] = {}
    total = 0
    for lang, lines in texts.items():
        ids[lang] = tok(list(lines), add_special_tokens=False)["input_ids"]
        total += sum(map(len, ids[lang]))
    base = total
    en_text, en_ids = list(texts["en"]), ids["en"]
    gen = itertools.chain(man_lines(), doc_lines())
    while total < target:
        batch = [x for x, _ in zip(gen, range(5000))]
        if not batch:
            raise SystemExit(f"only {total} tokens of text available")
        batch = [x for x in batch if x not in texts["en"]]
        if not batch:
            continue
        for line, seq in zip(batch, tok(batch, add_special_tokens=False)["input_ids"]):
            if line in texts["en"] or total >= target:
                continue
            texts["en"][line] = None
            en_text.append(line)
            en_ids.append(seq)
            total += len(seq)
    work.mkdir(parents=True, exist_ok=True)
    counts = {}
    for lang in texts:
        lines = en_text if lang == "en" else list(texts[lang])
        seqs = ids[lang]
        (work / f"{lang}.txt").write_text("".join(x + "\n" for x in lines), encoding="utf-8")
        (work / f"{lang}.ids").write_text("".join(" ".join(map(str, s)) + "\n" for s in seqs))
        counts[lang] = sum(map(len, seqs))
    info = {
        "target": target,
        "tokenizer": str(tokenizer_dir),
        "tokens": counts,
        "total": sum(counts.values()),
        "from_corpora": base,
        "from_man_pages_and_docs": sum(counts.values()) - base,
        "vocab_size": len(tok),
    }
    manifest.write_text(json.dumps(info, indent=2))
    return info


def run_measured(cmd: list[str], env: dict | None = None) -> dict:
    """Run ``cmd``; wall seconds, CPU seconds of it and its children, peak tree RSS (GiB)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env)
    peak = 0
    done = threading.Event()

    def sample() -> None:
        nonlocal peak
        root = psutil.Process(proc.pid)
        while not done.is_set():
            try:
                procs = [root, *root.children(recursive=True)]
                peak = max(peak, sum(p.memory_info().rss for p in procs))
            except psutil.Error:
                pass
            time.sleep(0.02)

    thread = threading.Thread(target=sample, daemon=True)
    thread.start()
    out, _ = proc.communicate()
    wall = time.perf_counter() - start
    done.set()
    thread.join()
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed:\n{out.decode()[-2000:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return {"wall": wall, "cpu": cpu, "peak_gib": peak / 2**30, "output": out.decode()}


def build_glove(src: Path, out: Path) -> Path:
    """Compile GloVe's cooccur.c with a main that calls its entry function."""
    out.mkdir(parents=True, exist_ok=True)
    main_c = out / "main.c"
    main_c.write_text(
        "#include <stdlib.h>\n"
        "int cooccur(char*, char*, char*, int, int, int, char*, float, char*);\n"
        "int main(int argc, char **argv) {\n"
        "  /* corpus vocab output window overflow_head memory_gb log */\n"
        "  return cooccur(argv[1], argv[2], argv[3], 0, 1, atoi(argv[4]), argv[5],"
        " (float) atof(argv[6]), argv[7]);\n}\n"
    )
    # the vendored copy closes its log file before merge_files() writes to it (undefined
    # behaviour that can put log text into the output): keep that one handle open
    fix = out / "keep_log_open.h"
    fix.write_text("#include <stdio.h>\n#define fclose(f) ((f) == logfile ? 0 : fclose(f))\n")
    binary = out / "cooccur"
    cmd = ["gcc", "-O3", "-march=native", "-funroll-loops", "-I", str(src), "-include", str(fix)]
    subprocess.run(
        [*cmd, str(src / "cooccur.c"), str(main_c), "-o", str(binary), "-lm"], check=True
    )
    return binary


def glove_inputs(work: Path, langs: list[str]) -> tuple[Path, Path]:
    """One corpus file of all id lines and a vocabulary ``word count`` file, most frequent
    first (what GloVe's vocab_count writes, with min-count 1)."""
    corpus = work / "glove-corpus.txt"
    vocab = work / "glove-vocab.txt"
    if not corpus.is_file():
        with open(corpus, "wb") as f:
            for lang in langs:
                f.write((work / f"{lang}.ids").read_bytes())
        ids = np.fromstring(corpus.read_bytes(), dtype=np.int64, sep=" ")
        counts = np.bincount(ids)
        order = np.argsort(-counts, kind="stable")
        order = order[counts[order] > 0]
        vocab.write_text("".join(f"{i} {counts[i]}\n" for i in order))
    return corpus, vocab


COOC_ONLY = [
    sys.executable,
    "-c",
    "import sys; from crossalign.cli.cooc import add_parser; from crossalign.cli.generate "
    "import Parser; p = Parser(); add_parser(p.add_subparsers()); "
    "a = p.parse_args(sys.argv[1:]); sys.exit(a.func(a))",
]
"""The ``cooc`` command group alone: the start-up cost of the CLI's other command modules left
out."""


def build_command(
    tokenizer: str, work: Path, langs: list[str], window: int, num_proc: int, kind: str
) -> list[str]:
    """``crossalign cooc build`` over the prepared ids (``--pretokenized``) or text."""
    exe = str(Path(sys.executable).with_name("crossalign"))
    cmd = [exe, "cooc", "build", "--tokenizer", tokenizer, "--quiet", "--window", str(window)]
    cmd += ["--num-proc", str(num_proc), "--out", str(work / f"m-{window}")]
    suffix = ".ids" if kind == "ids" else ".txt"
    cmd += [f"--text={lang}={work / (lang + suffix)}" for lang in langs]
    return [*cmd, "--pretokenized"] if kind == "ids" else cmd


def glove_command(binary: Path, work: Path, corpus: Path, vocab: Path, window: int) -> list[str]:
    """GloVe's cooccur: symmetric, ``window``, -memory 4.0 (its demo's setting)."""
    out, overflow, log = work / "glove-out.bin", work / "glove-overflow", work / "glove.log"
    return [
        str(binary),
        str(corpus),
        str(vocab),
        str(out),
        str(window),
        str(overflow),
        "4.0",
        str(log),
    ]


def check_against_glove(binary: Path, work: Path, lang: str, vocab_size: int) -> str:
    """At window 1 GloVe's weight 1/d is 1 and ours 1/(d + 1) is 1/2, so X must be exactly
    half of GloVe's symmetric counts, entry by entry: an independent check of the counts on
    real data (``lang``'s ids; lines are already deduplicated)."""
    from crossalign.cooc.build import count_cooccurrences

    corpus = work / f"{lang}.ids"
    ids = np.fromstring(corpus.read_bytes(), dtype=np.int64, sep=" ")
    counts = np.bincount(ids)
    ranked = np.argsort(-counts, kind="stable")
    ranked = ranked[counts[ranked] > 0]
    vocab = work / f"glove-vocab-{lang}.txt"
    vocab.write_text("".join(f"{i} {counts[i]}\n" for i in ranked))
    out = work / f"glove-check-{lang}.bin"
    cmd = glove_command(binary, work, corpus, vocab, 1)
    cmd[3] = str(out)
    subprocess.run(cmd, check=True)
    rec = np.fromfile(out, dtype=[("w1", "<i4"), ("w2", "<i4"), ("val", "<f8")])
    out.unlink()
    a, b = ranked[rec["w1"] - 1], ranked[rec["w2"] - 1]  # GloVe ids are 1-based ranks
    upper = a <= b
    glove_keys = a[upper] * vocab_size + b[upper]
    order = np.argsort(glove_keys)
    glove_keys, glove_vals = glove_keys[order], rec["val"][upper][order]
    r = count_cooccurrences([(lang, [str(corpus)])], vocab_size, window=1)
    rows = np.repeat(np.arange(vocab_size), np.diff(r.indptr))
    ours_keys = rows * vocab_size + r.indices
    same_keys = np.array_equal(ours_keys, glove_keys)
    worst = np.max(np.abs(2 * r.data - glove_vals) / glove_vals) if same_keys else float("nan")
    return (
        f"check vs GloVe on {lang} ({len(ids):,} tokens, window 1): {len(ours_keys):,} entries, "
        f"same pairs: {same_keys}, max relative difference of 2·X vs GloVe: {worst:.2e}"
    )


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--tokenizer", default=str(ROOT / "runs" / "backbone-e5-small"))
    p.add_argument("--corpus", default=str(ROOT / "data" / "libreoffice"))
    p.add_argument("--bible", default=str(ROOT / "data" / "bible"))
    p.add_argument("--tokens", type=int, default=20_000_000)
    p.add_argument("--work", default="/tmp/cooc-bench")
    p.add_argument("--windows", default="2,10")
    p.add_argument("--num-proc", default="1,2", help="process counts for crossalign")
    p.add_argument("--glove-src", help="directory with GloVe's cooccur.c and cooccur.h")
    p.add_argument(
        "--text-num-proc", default="2", help="process counts of the runs that tokenize text"
    )
    p.add_argument(
        "--cooc-only", action="store_true", help="also time the cooc command group alone"
    )
    p.add_argument("--json", help="write the figures here")
    args = p.parse_args()

    work = Path(args.work)
    info = prepare(work, Path(args.tokenizer), Path(args.corpus), Path(args.bible), args.tokens)
    langs = sorted(info["tokens"])
    total = info["total"]
    print(
        f"text: {total:,} tokens ({info['from_corpora']:,} from the corpora, "
        f"{info['from_man_pages_and_docs']:,} from man pages and /usr/share/doc); "
        f"per language {info['tokens']}"
    )
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    glove = None
    if args.glove_src:
        glove = build_glove(Path(args.glove_src), work / "glove")
        corpus, vocab = glove_inputs(work, langs)
        print(check_against_glove(glove, work, "de", info["vocab_size"]), flush=True)
    rows = []
    for window in map(int, args.windows.split(",")):
        runs = []
        if glove is not None:
            runs.append(("GloVe cooccur, ids", glove_command(glove, work, corpus, vocab, window)))
        for n in map(int, args.num_proc.split(",")):
            for kind in ("ids", "text"):
                if kind == "text" and str(n) not in args.text_num_proc.split(","):
                    continue
                cmd = build_command(args.tokenizer, work, langs, window, n, kind)
                runs.append((f"crossalign {kind}, {n} proc", cmd))
                if args.cooc_only and kind == "ids":
                    runs.append((f"cooc-only {kind}, {n} proc", [*COOC_ONLY, *cmd[1:]]))
        for name, cmd in runs:
            r = run_measured(cmd, env)
            out = work / f"m-{window}"
            count_s = None
            if "--out" in cmd:
                count_s = json.loads((out / "meta.json").read_text())["count_seconds"]
            row = {"window": window, "run": name, **{k: v for k, v in r.items() if k != "output"}}
            row.update(tokens_per_s_wall=total / r["wall"], tokens_per_s_cpu=total / r["cpu"])
            row["count_seconds"] = count_s
            rows.append(row)
            extra = f", counting phase {count_s:.1f} s" if count_s else ""
            print(
                f"window {window:>2} {name:<22} wall {r['wall']:6.1f} s "
                f"({total / r['wall'] / 1e6:5.2f} M tok/s)  cpu {r['cpu']:6.1f} s "
                f"({total / r['cpu'] / 1e6:5.2f} M tok/s)  peak {r['peak_gib']:.2f} GiB{extra}",
                flush=True,
            )
        (work / "glove-out.bin").unlink(missing_ok=True)
        ref = next(
            (r for r in rows if r["window"] == window and r["run"].startswith("GloVe")), None
        )
        for r in rows:
            if ref is not None and r["window"] == window and r is not ref:
                print(
                    f"  {r['run']:<22} / GloVe: speed x{ref['wall'] / r['wall']:.2f} (wall), "
                    f"x{ref['cpu'] / r['cpu']:.2f} (cpu); "
                    f"memory x{r['peak_gib'] / ref['peak_gib']:.2f}"
                )
    if args.json:
        Path(args.json).write_text(json.dumps({"text": info, "runs": rows}, indent=2))


if __name__ == "__main__":
    main()
