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

# llama-cpp-python ships only a source distribution, and pip's default build
# compiles llama.cpp for the build machine's CPU (-march=native); that wheel lands
# in pip's cache and is reused on machines whose CPU lacks its instructions. We
# build a portable wheel once, keep it in a cache of our own keyed by version and
# flags, and install that one. The version, flags and cache directory live in the
# package (pytest_evomemory/models/localbuild.py, also behind `evomemory local-model
# build`): run as a file with -P (standard library only), it works before the
# package's dependencies are installed.
LOCALBUILD=("$VENV/bin/python" -P "$ROOT/pytest_evomemory/models/localbuild.py")
eval "$("${LOCALBUILD[@]}" shell)"   # LLAMA_CPP_VERSION, _FLAVOUR, _CMAKE_ARGS, _WHEELS

portable_llama_cpp_wheel() {
  # Prints the path of the portable wheel, building it the first time (progress
  # lines on stderr; about 6 minutes on 2 cores).
  "${LOCALBUILD[@]}" build
}

install_project() {
  # $1: extras, e.g. "test,local".
  local extras="$1"
  local pip_args=()
  if [[ ",$extras," == *",embeddings,"* ]]; then
    # The CPU build of torch; a plain `pip install torch` would pull a CUDA build.
    "$VENV/bin/python" -m pip install -q "torch==2.13.0"
  fi
  if [[ ",$extras," == *",local,"* ]]; then
    local wheel marker="$VENV/.evomemory-llama-cpp"
    wheel="$(portable_llama_cpp_wheel)"
    if [ "$(cat "$marker" 2>/dev/null || true)" != "$wheel" ]; then
      # Replaces a build pip may have made for another CPU in an existing venv.
      "$VENV/bin/python" -m pip install -q --force-reinstall --no-deps "$wheel"
      echo "$wheel" > "$marker"
    fi
    pip_args+=(--find-links "$LLAMA_CPP_WHEELS" --only-binary llama-cpp-python)
  fi
  "$VENV/bin/python" -m pip install -q "${pip_args[@]}" -e "$ROOT[$extras]"
}
