#!/usr/bin/env bash
# Install everything, then run the linter and the test suite (slow tests excluded).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install.sh
export HF_HUB_OFFLINE=1
.venv/bin/ruff check crossalign tests bench
.venv/bin/ruff format --check crossalign tests bench
.venv/bin/pytest -q "$@"
