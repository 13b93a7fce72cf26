"""Data path at scale: the tokenized corpus store against what a user would otherwise use.

Every measured thing is its own fresh process (``python -m crossalign ...`` or a small Python
child), run one after another with nothing else of this script running beside it, in the
environment the user has (OMP_NUM_THREADS and torch threads untouched; HF_HUB_OFFLINE=1).
Wall time is the whole process, start to exit; peak memory is the largest sum of the resident
set sizes (RSS) of the process and all its descendants, sampled every 0.05 s with psutil.
Summed RSS counts pages shared between processes (forked workers, a memory-mapped store) once
per process, so it overstates a multi-process tree's real footprint; it is what a per-process
memory limit sees. CPU time is user + system of the process and its reaped descendants.
Sizes are decimal (1M = 10^6 bytes, 1G = 10^9 bytes; memory targets in GB = 10^9 bytes).

1. Text (``--sizes``, default 100M 1G; kept under ``--work`` and reused): the non-empty lines
   of ``--text`` files (default: every ``train.*`` file under data/bible and data/libreoffice;
   ``crossalign data bible`` / ``crossalign data libreoffice --langs de,fr,es,ru,zh-CN,hi`` are
   run first when a directory is missing), exact duplicates read once, then repeated in order,
   whole lines only, up to the size. Every file is a prefix of the larger ones.
2. Tokenizer: ``--tokenizer DIR``, or an 8,000-piece unigram tokenizer trained once with
   ``crossalign.data.tokenizer.train_tokenizer`` on the (unrepeated) lines, saved in the work
   directory.
3. Tokenization (``tokenize``): Hugging Face ``datasets`` (``load_dataset("text", ...)`` into a
   fresh cache directory, then ``.map(lambda b: tok(b["text"], add_special_tokens=False),
   batched=True, num_proc=P)`` with the tokenizer loaded by ``AutoTokenizer``) against
   ``crossalign data tokenize --num-proc P`` into a fresh store, the text given as
   ``data.mono={en: FILE}``. The store also records word boundaries (which the HF map does
   not compute) and the HF map keeps the text column (as that one-liner does). crossalign
   runs at every size, HF at ``--tokenize-sizes`` (default: the first size). Ratio = HF wall /
   crossalign wall (target >= 1.0). Outputs are deleted after each run (their size is kept).
4. Start-up (``startup``): ``crossalign train`` with a tiny model (``model.preset=tiny``, MLM,
   ``data.max_length=128 train.batch_size=32 train.steps=2 train.log_every=1``) on raw text,
   at each size: first run (empty ``data.cache_dir``: the store is built with
   ``data.num_proc=P``) and cache hit (same cache, new run directory). Time to the first
   training line of RUN/metrics.jsonl (polled every 0.05 s), total time, peak RSS. Targets:
   cache-hit start <= 10 s; cache-hit peak RSS at the largest size <= 1.1x the smallest's;
   first-run peak RSS <= 2.5 GB.
5. Training throughput (``throughput``): the same tiny model for ``--train-steps`` (default 60)
   on the first ``--baseline-bytes`` (default 20M) of the text, at each ``data.num_workers``
   in ``--workers`` (default 0 1 2; the cache is filled by an unmeasured 1-step run first):
   mean ``tokens_per_s`` of the metrics lines after step ``--skip-steps`` (default 10). With
   ``--baseline-src DIR`` (a checkout from before the store, which holds all data in memory
   and has no data.num_workers / cache keys) the same run imports that code
   (``PYTHONPATH=DIR``, run outside this checkout so it is not shadowed); ratio = new tok/s /
   baseline tok/s (target >= 1.0). ``--repeats`` alternates the settings.

Prints one table per part and writes every raw figure to ``--out`` (default WORK/data_scale.json,
rewritten after each part).

    .venv/bin/python bench/data_scale.py                      # all parts, 100M and 1G
    .venv/bin/python bench/data_scale.py --parts throughput --baseline-src /tmp/crossalign-old
    .venv/bin/python bench/data_scale.py --parts tokenize --sizes 100M --tokenize-sizes 100M
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import re
import resource
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parents[1]
POLL_S = 0.05
GB = 1e9
LIBREOFFICE_LANGS = "de,fr,es,ru,zh-CN,hi"

HF_CHILD = """
import json, sys, time
t0 = time.perf_counter()
from datasets import load_dataset
from transformers import AutoTokenizer
text, tok_dir, cache, num_proc = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
tok = AutoTokenizer.from_pretrained(tok_dir)
t1 = time.perf_counter()
ds = load_dataset("text", data_files=text, cache_dir=cache)
t2 = time.perf_counter()
ds = ds.map(lambda b: tok(b["text"], add_special_tokens=False), batched=True, num_proc=num_proc)
t3 = time.perf_counter()
print(json.dumps({"import_s": t1 - t0, "load_s": t2 - t1, "map_s": t3 - t2,
                  "rows": ds["train"].num_rows, "columns": ds["train"].column_names}))
"""
"""Hugging Face ``datasets`` tokenization, as a user would write it."""

PROBE = """
import json, sys
import crossalign
out = {"crossalign": crossalign.__file__, "python": sys.version.split()[0]}
for name in ("torch", "transformers", "tokenizers", "datasets"):
    try:
        out[name] = __import__(name).__version__
    except Exception as e:
        out[name] = f"unavailable: {e}"
print(json.dumps(out))
"""
"""Which crossalign a subprocess imports, and the library versions beside it."""


# ---------------------------------------------------------------------------- measuring


def _tree(pid: int) -> list[psutil.Process]:
    try:
        root = psutil.Process(pid)
        return [root, *root.children(recursive=True)]
    except psutil.Error:
        return []


def _tree_rss(pid: int) -> int:
    total = 0
    for p in _tree(pid):
        with contextlib.suppress(psutil.Error):
            total += p.memory_info().rss
    return total


def _kill_tree(proc: subprocess.Popen) -> None:
    """Kill the process this script started and its descendants."""
    procs = _tree(proc.pid)
    for p in reversed(procs):
        with contextlib.suppress(psutil.Error):
            p.kill()
    proc.wait()


def _training_lines(path: Path) -> list[dict]:
    """Complete training lines (step, loss, tokens_per_s) of a metrics.jsonl."""
    if not path.is_file():
        return []
    out = []
    for line in path.read_text(encoding="utf-8").splitlines(keepends=True):
        if not line.endswith("\n"):
            break
        try:
            rec = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(rec, dict) and {"step", "loss", "tokens_per_s"} <= rec.keys():
            out.append(rec)
    return out


class _FirstLine:
    """Polls a metrics.jsonl for its first complete training line, reading only new bytes."""

    def __init__(self, path: Path) -> None:
        self.path, self.offset, self.buffer = path, 0, b""

    def seen(self) -> bool:
        try:
            with open(self.path, "rb") as f:
                f.seek(self.offset)
                chunk = f.read()
        except OSError:
            return False
        self.offset += len(chunk)
        self.buffer += chunk
        *lines, self.buffer = self.buffer.split(b"\n")
        for line in lines:
            try:
                rec = json.loads(line)
            except ValueError:
                continue
            if isinstance(rec, dict) and {"step", "loss", "tokens_per_s"} <= rec.keys():
                return True
        return False


def run_measured(
    cmd: list[str],
    env: dict,
    cwd: Path,
    log: Path,
    timeout: float,
    metrics: Path | None = None,
) -> dict:
    """Run ``cmd`` to its end: wall and CPU seconds, peak summed RSS of its process tree
    (bytes), and with ``metrics`` the seconds from launch to its first training line.
    Output goes to ``log``; a failure or a timeout stops the benchmark with its tail."""
    log.parent.mkdir(parents=True, exist_ok=True)
    watch = _FirstLine(metrics) if metrics is not None else None
    first = None
    peak = 0
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    with open(log, "wb") as out:
        start = time.perf_counter()
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env=env, cwd=cwd)
        try:
            while True:
                done = proc.poll() is not None
                if not done:
                    peak = max(peak, _tree_rss(proc.pid))
                now = time.perf_counter()
                if watch is not None and first is None and watch.seen():
                    first = now - start
                if done:
                    break
                if now - start > timeout:
                    _kill_tree(proc)
                    raise SystemExit(f"timed out after {timeout:.0f} s: {' '.join(cmd)}")
                time.sleep(POLL_S)
        except BaseException:
            if proc.poll() is None:
                _kill_tree(proc)
            raise
        wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        tail = log.read_text(encoding="utf-8", errors="replace")[-3000:]
        raise SystemExit(f"failed ({proc.returncode}): {' '.join(cmd)}\n{tail}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    result = {"wall_s": wall, "cpu_s": cpu, "peak_rss": peak, "cmd": cmd, "log": str(log)}
    if metrics is not None:
        result["first_line_s"] = first
    return result


def dir_bytes(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file()) if path.exists() else 0


def fresh(path: Path) -> Path:
    if path.exists():
        shutil.rmtree(path)
    return path


# --------------------------------------------------------------------------------- text


def parse_size(text: str) -> int:
    m = re.fullmatch(r"(\d+(?:\.\d+)?)\s*([kmg]?)b?", text.strip(), re.IGNORECASE)
    if not m:
        raise argparse.ArgumentTypeError(f"size {text!r}: expected e.g. 20M, 100M, 1G, 5000000")
    return int(float(m.group(1)) * {"": 1, "k": 10**3, "m": 10**6, "g": 10**9}[m.group(2).lower()])


def size_label(n: int) -> str:
    for unit, mult in (("G", 10**9), ("M", 10**6), ("K", 10**3)):
        if n >= mult and n % mult == 0:
            return f"{n // mult}{unit}"
    return str(n)


def default_text_files(python: str, env: dict) -> list[Path]:
    """train.* of data/bible and data/libreoffice, running their builders when missing."""
    builders = {
        "bible": ["bible"],
        "libreoffice": ["libreoffice", "--langs", LIBREOFFICE_LANGS],
    }
    files = []
    for name, args in builders.items():
        out = ROOT / "data" / name
        if not out.is_dir():
            cmd = [python, "-m", "crossalign", "data", *args, "--out", str(out)]
            print(f"building {out}: {' '.join(cmd)}", flush=True)
            r = subprocess.run(cmd, env=env, cwd=ROOT, capture_output=True, text=True)
            if r.returncode != 0:
                print(f"  skipped ({r.returncode}): {(r.stderr or r.stdout).strip()[-500:]}")
                continue
        files += sorted(out.glob("*/train.*"))
    if not files:
        raise SystemExit("no text: give --text FILE ... or build data/bible, data/libreoffice")
    return files


def source_lines(files: list[Path]) -> list[str]:
    seen: dict[str, None] = {}
    for f in files:
        with open(f, encoding="utf-8") as fh:
            for line in fh:
                line = line.strip()
                if line:
                    seen.setdefault(line)
    return list(seen)


def build_text(path: Path, lines: list[str], target: int, sources: list) -> dict:
    """Write whole ``lines``, repeated in order, up to ``target`` bytes; reused when the
    manifest beside it matches and the file has the recorded size."""
    manifest = path.with_name(path.name + ".json")
    if path.is_file() and manifest.is_file():
        info = json.loads(manifest.read_text())
        if (
            info.get("target") == target
            and info.get("sources") == sources
            and path.stat().st_size == info.get("bytes")
        ):
            return info
    encoded = [(line + "\n").encode("utf-8") for line in lines]
    block = b"".join(encoded)
    written = count = 0
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "wb") as f:
        while written + len(block) <= target:
            f.write(block)
            written += len(block)
            count += len(encoded)
        for e in encoded:
            if written + len(e) > target:
                break
            f.write(e)
            written += len(e)
            count += 1
    tmp.replace(path)
    info = {
        "path": str(path),
        "target": target,
        "bytes": written,
        "lines": count,
        "distinct_lines": min(count, len(encoded)),
        "repeats": written / len(block),
        "sources": sources,
    }
    manifest.write_text(json.dumps(info, indent=2))
    return info


def ensure_tokenizer(work: Path, lines: list[str], sources: list) -> Path:
    """An 8,000-piece unigram tokenizer trained once on ``lines`` (cached in ``work``)."""
    out = work / "tokenizer"
    stamp = out / "bench-sources.json"
    if (
        (out / "tokenizer.json").is_file()
        and stamp.is_file()
        and json.loads(stamp.read_text()) == sources
    ):
        return out
    sys.path.insert(0, str(ROOT))
    from crossalign.config import TokenizerConfig
    from crossalign.data.tokenizer import train_tokenizer

    print(f"training an 8,000-piece unigram tokenizer on {len(lines):,} lines", flush=True)
    cfg = TokenizerConfig(kind="unigram", vocab_size=8000)
    fresh(out)
    train_tokenizer({"en": lines}, cfg, 0).save_pretrained(str(out))
    stamp.write_text(json.dumps(sources))
    return out


# ------------------------------------------------------------------------------- running


def mono(text: Path) -> str:
    return f"data.mono={{en: {json.dumps(str(text))}}}"


def train_command(
    python: str, run_dir: Path, text: Path, tok: Path, steps: int, extra: list[str]
) -> list[str]:
    return [
        python,
        "-m",
        "crossalign",
        "train",
        f"run_dir={run_dir}",
        "model.preset=tiny",
        f"tokenizer.path={tok}",
        "objectives=[{name: mlm}]",
        "data.max_length=128",
        "train.batch_size=32",
        "train.save_every=0",
        "train.log_every=1",
        f"train.steps={steps}",
        mono(text),
        *extra,
    ]


def probe(python: str, env: dict, cwd: Path, expect: Path) -> dict:
    """Versions, and a check that ``python -m crossalign`` will import the code in ``expect``."""
    r = subprocess.run([python, "-c", PROBE], env=env, cwd=cwd, capture_output=True, text=True)
    if r.returncode != 0:
        raise SystemExit(f"{python} cannot import crossalign here:\n{r.stderr[-2000:]}")
    info = json.loads(r.stdout.strip().splitlines()[-1])
    if not Path(info["crossalign"]).resolve().is_relative_to(expect.resolve()):
        raise SystemExit(f"crossalign imports from {info['crossalign']}, expected {expect}")
    git = subprocess.run(
        ["git", "-C", str(expect), "describe", "--always", "--dirty"],
        capture_output=True,
        text=True,
    )
    info["commit"] = git.stdout.strip() or None
    return info


def env_with_path(base: dict, src: Path) -> dict:
    paths = [str(src), *filter(None, base.get("PYTHONPATH", "").split(os.pathsep))]
    return {**base, "PYTHONPATH": os.pathsep.join(paths)}


def gb(n: float) -> str:
    return f"{n / GB:.2f}"


def verdict(ok: bool | None) -> str:
    return "n/a" if ok is None else ("ok" if ok else "MISSED")


# --------------------------------------------------------------------------------- parts


def part_tokenize(args, ctx: dict, results: dict) -> None:
    work, python, tok = ctx["work"], ctx["python"], ctx["tokenizer"]
    rows = results.setdefault("tokenize", [])
    for size in args.sizes:
        label = size_label(size)
        text = ctx["texts"][size]
        nbytes = ctx["text_info"][label]["bytes"]
        tools = ["hf-datasets", "crossalign"] if size in args.tokenize_sizes else ["crossalign"]
        for tool in tools:
            out = fresh(work / "tokenize" / f"{tool}-{label}")
            if tool == "hf-datasets":
                cmd = [python, "-c", HF_CHILD, str(text), str(tok), str(out), str(args.num_proc)]
            else:
                cmd = [python, "-m", "crossalign", "data", "tokenize", "--tokenizer", str(tok)]
                cmd += ["--out", str(out), "--num-proc", str(args.num_proc), mono(text)]
            log = work / "logs" / f"tokenize-{tool}-{label}.log"
            r = run_measured(cmd, ctx["env"], work, log, args.timeout)
            r.update(tool=tool, size=label, bytes=nbytes, num_proc=args.num_proc)
            r["mb_per_s"] = nbytes / 1e6 / r["wall_s"]
            r["output_bytes"] = dir_bytes(out)
            if tool == "hf-datasets":
                lines = log.read_text(encoding="utf-8", errors="replace").strip().splitlines()
                r["hf_phases"] = json.loads(lines[-1])
            shutil.rmtree(out, ignore_errors=True)
            rows.append(r)
            print(
                f"tokenize {label:>5} {tool:<12} wall {r['wall_s']:7.1f} s "
                f"({r['mb_per_s']:5.2f} MB/s)  cpu {r['cpu_s']:7.1f} s  "
                f"peak {gb(r['peak_rss'])} GB  output {gb(r['output_bytes'])} GB",
                flush=True,
            )
    print(f"\nTokenization, {args.num_proc} processes (ratio = HF wall / crossalign wall)")
    print(
        f"{'size':>6} {'HF s':>8} {'xa s':>8} {'HF GB':>6} {'xa GB':>6} "
        f"{'ratio':>6} {'target':>7} {'':>6}"
    )
    for size in args.sizes:
        label = size_label(size)
        hf = next((r for r in rows if r["size"] == label and r["tool"] == "hf-datasets"), None)
        xa = next(r for r in rows if r["size"] == label and r["tool"] == "crossalign")
        ratio = hf["wall_s"] / xa["wall_s"] if hf else None
        print(
            f"{label:>6} {hf['wall_s'] if hf else float('nan'):>8.1f} {xa['wall_s']:>8.1f} "
            f"{gb(hf['peak_rss']) if hf else '-':>6} {gb(xa['peak_rss']):>6} "
            f"{ratio if ratio else float('nan'):>6.2f} {'>= 1.0':>7} "
            f"{verdict(None if ratio is None else ratio >= 1.0):>6}"
        )
        results.setdefault("tokenize_ratios", {})[label] = ratio


def part_startup(args, ctx: dict, results: dict) -> None:
    work, python, tok = ctx["work"], ctx["python"], ctx["tokenizer"]
    rows = results.setdefault("startup", [])
    workers = args.startup_workers
    extra_workers = [] if workers is None else [f"data.num_workers={workers}"]
    for size in args.sizes:
        label = size_label(size)
        cache = fresh(work / "startup" / f"cache-{label}")
        for kind in ("first", "hit"):
            run_dir = fresh(work / "startup" / f"run-{label}-{kind}")
            extra = [f"data.cache_dir={cache}", f"data.num_proc={args.num_proc}", *extra_workers]
            cmd = train_command(python, run_dir, ctx["texts"][size], tok, 2, extra)
            log = work / "logs" / f"startup-{label}-{kind}.log"
            r = run_measured(cmd, ctx["env"], work, log, args.timeout, run_dir / "metrics.jsonl")
            r.update(size=label, run=kind, cache_bytes=dir_bytes(cache))
            r["training_lines"] = len(_training_lines(run_dir / "metrics.jsonl"))
            rows.append(r)
            first = r["first_line_s"]
            print(
                f"startup {label:>5} {kind:<5} first line "
                f"{'none' if first is None else f'{first:.1f} s'}  total {r['wall_s']:.1f} s  "
                f"peak {gb(r['peak_rss'])} GB  cache {gb(r['cache_bytes'])} GB",
                flush=True,
            )
            shutil.rmtree(run_dir, ignore_errors=True)
        if not args.keep_cache:
            shutil.rmtree(cache, ignore_errors=True)

    def get(label: str, kind: str) -> dict:
        return next(r for r in rows if r["size"] == label and r["run"] == kind)

    labels = [size_label(s) for s in args.sizes]
    print("\nStart-up of crossalign train (tiny model, 2 steps)")
    print(f"{'size':>6} {'run':<6} {'to 1st line s':>13} {'total s':>8} {'peak GB':>8}  targets")
    checks = {}
    for label in labels:
        for kind in ("first", "hit"):
            r = get(label, kind)
            first = r["first_line_s"]
            notes = []
            if kind == "hit":
                ok = first is not None and first <= 10.0
                checks[f"hit_start_{label}"] = ok
                notes.append(f"start <= 10 s {verdict(ok)}")
            else:
                ok = r["peak_rss"] <= 2.5 * GB
                checks[f"first_peak_{label}"] = ok
                notes.append(f"peak <= 2.5 GB {verdict(ok)}")
            print(
                f"{label:>6} {kind:<6} {first if first is not None else float('nan'):>13.1f} "
                f"{r['wall_s']:>8.1f} {gb(r['peak_rss']):>8}  {', '.join(notes)}"
            )
    small, large = get(labels[0], "hit"), get(labels[-1], "hit")
    growth = large["peak_rss"] / small["peak_rss"]
    checks["hit_peak_growth"] = growth <= 1.1
    print(
        f"cache-hit peak RSS {labels[-1]} / {labels[0]}: {growth:.3f} "
        f"(target <= 1.1) {verdict(growth <= 1.1)}"
    )
    results["startup_checks"] = {**checks, "hit_peak_growth_ratio": growth}


def part_throughput(args, ctx: dict, results: dict) -> None:
    work, python, tok = ctx["work"], ctx["python"], ctx["tokenizer"]
    text = ctx["baseline_text"]
    cache = fresh(work / "throughput" / "cache")
    settings = [(f"workers={w}", w) for w in args.workers]
    if args.baseline_src:
        settings.append(("baseline", None))
    store_keys = [f"data.cache_dir={cache}", f"data.num_proc={args.num_proc}"]
    # fill the cache once, so no measured run builds the store
    prime = fresh(work / "throughput" / "prime")
    run_measured(
        train_command(python, prime, text, tok, 1, store_keys),
        ctx["env"],
        work,
        work / "logs" / "throughput-prime.log",
        args.timeout,
    )
    shutil.rmtree(prime, ignore_errors=True)
    rows = results.setdefault("throughput", [])
    for rep in range(args.repeats):
        for name, w in settings if rep % 2 == 0 else reversed(settings):
            run_dir = fresh(work / "throughput" / f"run-{name}-{rep}")
            if w is None:  # the old code: no store, cache or worker keys
                env, extra = ctx["baseline_env"], []
            else:
                env, extra = ctx["env"], [*store_keys, f"data.num_workers={w}"]
            cmd = train_command(python, run_dir, text, tok, args.train_steps, extra)
            log = work / "logs" / f"throughput-{name}-{rep}.log"
            r = run_measured(cmd, env, work, log, args.timeout, run_dir / "metrics.jsonl")
            lines = _training_lines(run_dir / "metrics.jsonl")
            steady = [x["tokens_per_s"] for x in lines if x["step"] > args.skip_steps]
            if not steady:
                raise SystemExit(f"{name}: no metrics lines after step {args.skip_steps} ({log})")
            r.update(
                setting=name,
                repeat=rep,
                tokens_per_s=[x["tokens_per_s"] for x in lines],
                steps=[x["step"] for x in lines],
                mean_tokens_per_s=statistics.fmean(steady),
                median_tokens_per_s=statistics.median(steady),
            )
            rows.append(r)
            shutil.rmtree(run_dir, ignore_errors=True)
            print(
                f"throughput {name:<10} run {rep}: mean {r['mean_tokens_per_s']:9.0f} tok/s "
                f"(median {r['median_tokens_per_s']:.0f}) over {len(steady)} steps  "
                f"total {r['wall_s']:.1f} s  peak {gb(r['peak_rss'])} GB",
                flush=True,
            )
    if not args.keep_cache:
        shutil.rmtree(cache, ignore_errors=True)

    def mean_of(name: str) -> float:
        return statistics.median(r["mean_tokens_per_s"] for r in rows if r["setting"] == name)

    base = mean_of("baseline") if args.baseline_src else None
    print(
        f"\nTraining throughput, tiny model, {args.train_steps} steps on "
        f"{ctx['baseline_label']} of text, mean tokens/s after step {args.skip_steps}"
        + (f" (median of {args.repeats} runs)" if args.repeats > 1 else "")
    )
    print(f"{'setting':<11} {'tok/s':>10} {'peak GB':>8} {'vs baseline':>11} {'target':>7}")
    ratios = {}
    for name, w in settings:
        tps = mean_of(name)
        peak = max(r["peak_rss"] for r in rows if r["setting"] == name)
        if w is None:
            print(f"{name:<11} {tps:>10.0f} {gb(peak):>8} {'1.000':>11} {'':>7}")
            continue
        ratio = tps / base if base else None
        ratios[name] = ratio
        shown = f"{ratio:.3f}" if ratio is not None else "-"
        print(
            f"{name:<11} {tps:>10.0f} {gb(peak):>8} {shown:>11} {'>= 1.0':>7} "
            f"{verdict(None if ratio is None else ratio >= 1.0)}"
        )
    results["throughput_ratios"] = ratios


# ---------------------------------------------------------------------------------- main


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--parts", default="tokenize,startup,throughput")
    p.add_argument("--text", nargs="+", type=Path, help="text files (default: see 1. above)")
    p.add_argument("--sizes", nargs="+", type=parse_size, default=[10**8, 10**9])
    p.add_argument(
        "--tokenize-sizes",
        nargs="+",
        type=parse_size,
        help="sizes at which HF datasets also tokenizes (default: the first of --sizes)",
    )
    p.add_argument("--tokenizer", type=Path, help="tokenizer directory (default: train one)")
    p.add_argument("--work", type=Path, default=Path("/tmp/crossalign-data-scale"))
    p.add_argument("--out", type=Path, help="raw figures (default: WORK/data_scale.json)")
    p.add_argument("--num-proc", type=int, default=2, help="tokenizing processes")
    p.add_argument("--startup-workers", type=int, help="data.num_workers for start-up runs")
    p.add_argument("--train-steps", type=int, default=60)
    p.add_argument("--skip-steps", type=int, default=10, help="warm-up steps not averaged")
    p.add_argument("--workers", nargs="+", type=int, default=[0, 1, 2])
    p.add_argument("--baseline-src", type=Path, help="checkout of crossalign before the store")
    p.add_argument("--baseline-bytes", type=parse_size, default=20 * 10**6)
    p.add_argument("--repeats", type=int, default=1, help="throughput runs per setting")
    p.add_argument("--timeout", type=float, default=3600, help="seconds per measured run")
    p.add_argument("--keep-cache", action="store_true", help="keep the stores built by train")
    p.add_argument(
        "--python",
        default=str(ROOT / ".venv" / "bin" / "python")
        if (ROOT / ".venv" / "bin" / "python").exists()
        else sys.executable,
        help="interpreter for every measured process (default: the checkout's .venv)",
    )
    args = p.parse_args()
    parts = [x.strip() for x in args.parts.split(",") if x.strip()]
    unknown = set(parts) - {"tokenize", "startup", "throughput"}
    if unknown:
        p.error(f"unknown parts {sorted(unknown)}; choose from tokenize, startup, throughput")
    args.sizes = sorted(set(args.sizes))
    args.tokenize_sizes = set(args.tokenize_sizes or args.sizes[:1])
    if args.baseline_src and not (args.baseline_src / "crossalign" / "__init__.py").is_file():
        p.error(f"--baseline-src {args.baseline_src} has no crossalign/__init__.py")

    work = args.work.resolve()
    work.mkdir(parents=True, exist_ok=True)
    out_json = args.out or work / "data_scale.json"
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    env.setdefault("HF_DATASETS_OFFLINE", "1")
    # measured processes run in the work directory, so the directory on sys.path[0] of
    # ``python -m`` is never a checkout; PYTHONPATH picks the code explicitly
    new_env = env_with_path(env, ROOT)
    ctx: dict = {"work": work, "python": args.python, "env": new_env}
    results: dict = {
        "argv": sys.argv,
        "machine": {
            "cpus": os.cpu_count(),
            "platform": platform.platform(),
            "memory_bytes": psutil.virtual_memory().total,
            "threads_env": {k: os.environ.get(k) for k in ("OMP_NUM_THREADS", "MKL_NUM_THREADS")},
        },
        "new": probe(args.python, new_env, work, ROOT),
    }
    if args.baseline_src:
        ctx["baseline_env"] = env_with_path(env, args.baseline_src.resolve())
        results["baseline"] = probe(args.python, ctx["baseline_env"], work, args.baseline_src)
    print(f"crossalign {results['new']['commit']} ({results['new']['crossalign']})")
    if args.baseline_src:
        print(f"baseline   {results['baseline']['commit']} ({results['baseline']['crossalign']})")

    files = [f.resolve() for f in args.text] if args.text else default_text_files(args.python, env)
    sources = [[str(f), f.stat().st_size] for f in files]
    lines = source_lines(files)
    print(f"text: {len(lines):,} distinct lines from {len(files)} files", flush=True)
    needed = set()
    if "tokenize" in parts or "startup" in parts:
        needed |= set(args.sizes)
    if "throughput" in parts:
        needed.add(args.baseline_bytes)
    ctx["texts"], ctx["text_info"] = {}, {}
    for size in sorted(needed):
        label = size_label(size)
        path = work / f"text-{label}.txt"
        info = build_text(path, lines, size, sources)
        ctx["texts"][size], ctx["text_info"][label] = path, info
        print(f"  {path}: {info['bytes']:,} bytes, {info['lines']:,} lines", flush=True)
    ctx["baseline_text"] = ctx["texts"].get(args.baseline_bytes)
    ctx["baseline_label"] = size_label(args.baseline_bytes)
    ctx["tokenizer"] = (
        args.tokenizer.resolve() if args.tokenizer else ensure_tokenizer(work, lines, sources)
    )
    results.update(text=ctx["text_info"], tokenizer=str(ctx["tokenizer"]))

    def save() -> None:
        out_json.write_text(json.dumps(results, indent=2))

    for name, fn in (
        ("tokenize", part_tokenize),
        ("startup", part_startup),
        ("throughput", part_throughput),
    ):
        if name in parts:
            print(f"\n== {name}", flush=True)
            fn(args, ctx, results)
            save()
            print(flush=True)
    save()
    print(f"raw figures: {out_json}")


if __name__ == "__main__":
    main()
