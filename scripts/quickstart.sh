#!/usr/bin/env bash
# Install everything, build the English-Spanish Bible corpus, pre-train a small model on it
# with MLM + TLM (configs/quickstart.yaml; about 10 minutes on 2 CPU cores).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install.sh
export HF_HUB_OFFLINE=1
[ -f data/bible/card.json ] || .venv/bin/crossalign data bible --out data/bible
.venv/bin/crossalign train --config configs/quickstart.yaml "$@"
