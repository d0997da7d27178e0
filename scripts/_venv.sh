# Shared by scripts/demo and scripts/test: create .venv once and install the
# project with the given extras. Everything a fresh machine needs comes from here.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${EVOMEMORY_VENV:-$ROOT/.venv}"
PYTHON="${PYTHON:-python3}"
if [ ! -x "$VENV/bin/python" ]; then
  "$PYTHON" -m venv "$VENV"
  "$VENV/bin/python" -m pip install -q --upgrade pip
fi
install_project() {
  # $1: extras, e.g. "test,local". llama-cpp-python builds from source the first
  # time (about 5 minutes on 2 cores); pip's wheel cache makes later installs fast.
  local extras="$1"
  if [[ ",$extras," == *",embeddings,"* ]]; then
    # The CPU build of torch; a plain `pip install torch` would pull a CUDA build.
    "$VENV/bin/python" -m pip install -q "torch==2.13.0"
  fi
  "$VENV/bin/python" -m pip install -q -e "$ROOT[$extras]"
}
