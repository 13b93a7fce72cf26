#!/usr/bin/env bash
# Install everything, then run the linter, the test suite (slow tests excluded) and the
# documentation build (strict: a broken link or reference fails).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install.sh
export HF_HUB_OFFLINE=1
.venv/bin/ruff check crossalign tests bench
.venv/bin/ruff format --check crossalign tests bench
.venv/bin/pytest -q "$@"
NO_MKDOCS_2_WARNING=1 .venv/bin/mkdocs build --strict --quiet
