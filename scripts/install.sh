#!/usr/bin/env bash
# Install crossalign and its offline data on Debian/Ubuntu: the Debian data packages, a
# virtual environment in .venv, PyTorch 2.13.0 when no torch is installed, the package with
# its test and docs extras and every optional feature (all: backbone, bible, derive, plots). Safe to
# run again: it only installs what is missing.
set -euo pipefail
cd "$(dirname "$0")/.."

DEBIAN_PACKAGES=(
  sword-text-kjv sword-text-sparv sword-comm-tdavid sword-comm-mhcc
  libreoffice-help-en-us libreoffice-help-de libreoffice-help-fr libreoffice-help-es
  libreoffice-help-ru libreoffice-help-zh-cn libreoffice-help-hi
  dict-freedict-eng-deu dict-freedict-eng-fra dict-freedict-eng-spa
  dict-freedict-eng-hin dict-freedict-eng-ara
)

missing=()
for pkg in "${DEBIAN_PACKAGES[@]}"; do
  dpkg -s "$pkg" >/dev/null 2>&1 || missing+=("$pkg")
done
if ((${#missing[@]})); then
  sudo=""
  [ "$(id -u)" = 0 ] || sudo="sudo"
  echo "installing Debian data packages: ${missing[*]}"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

PYTHON="${PYTHON:-python3}"
[ -x .venv/bin/python ] || "$PYTHON" -m venv .venv
# A CPU build of torch 2.13.0 unless a torch is already there (e.g. a CUDA build).
.venv/bin/python -c "import torch" 2>/dev/null || .venv/bin/pip install -q torch==2.13.0
.venv/bin/pip install -q -e ".[test,docs,all]"
echo "crossalign installed in .venv ($(.venv/bin/python -c 'import torch; print("torch", torch.__version__)'))"
