#!/bin/bash
# One GPU window (<= 8 minutes on one H100 or H200): the training-throughput table (BERT-base,
# sequence 128 and 512: the HF-style loop, it with torch.compile, crossalign eager and compiled,
# MLM + packed TLM) and the many-small-runs scaling under CUDA MPS, then docs/performance.md.
#
#   bash bench/gpu_window.sh --prepare      # here, on CPU: the text and tokenizer it carries
#   bash bench/gpu_window.sh                # on the GPU machine (device tool: carry runs/gpu-window)
#
# Settings (environment): STEPS (30 timed), WARMUP (10), LOOPS128 and LOOPS512 (the loops of
# each length), PROCESSES ("1 4 8 16"), SCALING_STEPS (300), PART_LIMIT (seconds per part).
set -u
cd "$(dirname "$0")/.."
DIR=runs/gpu-window
if [ "${1:-}" = "--prepare" ]; then
  mkdir -p $DIR
  [ -d data/bible ] || crossalign data bible --out data/bible
  cp data/bible/en-es/train.en $DIR/en.txt
  crossalign data tokenizer --out $DIR/tokenizer "data.mono={en: $DIR/en.txt}" \
      tokenizer.vocab_size=30000 tokenizer.kind=bpe
  echo "prepared $DIR (carry it, with .whl/ where the GPU image lacks packages)"
  exit 0
fi
[ -f $DIR/en.txt ] && [ -d $DIR/tokenizer ] || { echo "run bash bench/gpu_window.sh --prepare first" >&2; exit 2; }
if ls .whl/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site:${PYTHONPATH:-}
fi
export PYTHONPATH=$PWD:${PYTHONPATH:-} HF_HUB_OFFLINE=1 PYTHONUNBUFFERED=1
OUT=${OUT:-$DIR/out}; mkdir -p $OUT
LIMIT=${PART_LIMIT:-240}
nvidia-smi --query-gpu=name,memory.total --format=csv | tee $OUT/device.txt
timeout $LIMIT python3 bench/gpu_mlm_throughput.py --text $DIR/en.txt --tokenizer $DIR/tokenizer \
    --preset base --seq 128 --batch 256 --steps ${STEPS:-30} --warmup ${WARMUP:-10} \
    --loops ${LOOPS128:-hf hf-compile xa xa-compile xa-tlm} --out $OUT/throughput128.json | tee $OUT/throughput128.txt
timeout $LIMIT python3 bench/gpu_mlm_throughput.py --text $DIR/en.txt --tokenizer $DIR/tokenizer \
    --preset base --seq 512 --batch 64 --steps ${STEPS:-30} --warmup ${WARMUP:-10} \
    --loops ${LOOPS512:-hf xa xa-compile} --out $OUT/throughput512.json | tee $OUT/throughput512.txt
python3 - $OUT <<'PY'
import json, sys, pathlib
out = pathlib.Path(sys.argv[1])
parts = [json.loads(p.read_text()) for p in sorted(out.glob("throughput*.json"))]
if parts:
    merged = {**parts[0], "rows": [row for p in parts for row in p["rows"]]}
    (out / "throughput.json").write_text(json.dumps(merged, indent=2))
PY
nvidia-cuda-mps-control -d && echo "MPS on" || echo "MPS not started: processes time-slice the GPU"
timeout $LIMIT python3 bench/run_scaling.py --text $DIR/en.txt --tokenizer $DIR/tokenizer \
    --processes ${PROCESSES:-1 4 8 16} --steps ${SCALING_STEPS:-300} --out $OUT/scaling.json | tee $OUT/scaling.txt
echo quit | nvidia-cuda-mps-control 2>/dev/null
SCALING=""; [ -f $OUT/scaling.json ] && SCALING="--scaling $OUT/scaling.json"
[ -f $OUT/throughput.json ] && python3 bench/performance_page.py --throughput $OUT/throughput.json $SCALING --out docs/performance.md \
    && cp docs/performance.md $OUT/   # the device tool returns only $OUT: copy it into docs/ here
