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
# compiles llama.cpp for the build machine's CPU (-march=native). That wheel then
# lands in pip's cache and is reused on the next machine, whose CPU may lack the
# instructions it was built for; a native build with AMX also crashed in
# llama_decode on a VM that reports AMX. We build a portable AVX2 wheel once, keep
# it in a cache of our own keyed by version and flags, and install that one.
LLAMA_CPP_VERSION="${EVOMEMORY_LLAMA_CPP_VERSION:-0.3.36}"
if [ "$(uname -m)" = "x86_64" ]; then
  LLAMA_CPP_CMAKE_ARGS="-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_BMI2=ON"
  LLAMA_CPP_FLAVOUR="avx2"
else
  LLAMA_CPP_CMAKE_ARGS="-DGGML_NATIVE=OFF"
  LLAMA_CPP_FLAVOUR="generic"
fi
LLAMA_CPP_WHEELS="${XDG_CACHE_HOME:-$HOME/.cache}/pytest-evomemory/wheels/llama-cpp-python-$LLAMA_CPP_VERSION-$(uname -m)-$LLAMA_CPP_FLAVOUR"

portable_llama_cpp_wheel() {
  # Prints the path of the portable wheel, building it the first time
  # (about 5 minutes on 2 cores).
  local wheel
  wheel="$(ls "$LLAMA_CPP_WHEELS"/llama_cpp_python-*.whl 2>/dev/null | head -n 1 || true)"
  if [ -z "$wheel" ]; then
    echo "building llama-cpp-python $LLAMA_CPP_VERSION ($LLAMA_CPP_FLAVOUR, about 5 minutes on 2 cores) into $LLAMA_CPP_WHEELS" >&2
    mkdir -p "$LLAMA_CPP_WHEELS"
    CMAKE_ARGS="$LLAMA_CPP_CMAKE_ARGS" FORCE_CMAKE=1 "$VENV/bin/python" -m pip wheel -q \
      --no-deps --no-cache-dir "llama-cpp-python==$LLAMA_CPP_VERSION" -w "$LLAMA_CPP_WHEELS" >&2
    wheel="$(ls "$LLAMA_CPP_WHEELS"/llama_cpp_python-*.whl | head -n 1)"
  fi
  echo "$wheel"
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
