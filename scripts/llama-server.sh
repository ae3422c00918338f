#!/usr/bin/env bash
# A real continuous-batching LLM server on the CPU for the live tests: upstream llama.cpp
# `llama-server`, built from the llama.cpp source that the PyPI sdist of llama-cpp-python
# vendors, serving a small random-weight llama GGUF generated locally with gguf-py.
#
#   scripts/llama-server.sh install   # idempotent: venv + tools, build llama-server once, make the model
#   scripts/llama-server.sh paths     # print LLAMA_SERVER_BIN=... and LLAMA_SERVER_MODEL=... (no side effects)
#   scripts/llama-server.sh start     # idempotent: start on 127.0.0.1:$PORT, wait for /health == 200
#   scripts/llama-server.sh stop      # kill the server started by `start` (by its PID file)
#
# Everything lives under $KVQUEUE_ROOT (default ~/.cache/kvqueue); a second `install` is ~2 s.
# The live tests call `paths` to find the binary and the model.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=scripts/server-common.sh
. "$HERE/server-common.sh"
LLAMA_CPP_PY_VERSION="${LLAMA_CPP_PY_VERSION:-0.3.36}"   # vendors ggml-org/llama.cpp@0c1e570
GGUF_PY_VERSION="${GGUF_PY_VERSION:-0.19.0}"
ROOT="${KVQUEUE_ROOT:-$HOME/.cache/kvqueue}"
VENV="$ROOT/venv"
# GGML_NATIVE=ON => the binary is tied to this CPU's ISA: key the cache on the CPU flags.
CPUKEY="$(grep -m1 '^flags' /proc/cpuinfo | md5sum | cut -c1-8)"
BIN="$ROOT/bin/llama-server-$LLAMA_CPP_PY_VERSION-$CPUKEY"

# model shape (defaults: 29.4M params, f16, 59 MB); MODEL_ARGS are passed to make_tiny_gguf.py
MODEL_ARGS="${MODEL_ARGS:---n-embd 512 --n-layer 8 --n-head 8 --n-ff 1536 --n-vocab 2048 --dtype f16}"
# keyed on the generator too: a change to it makes a new model
MODEL="$ROOT/models/tiny-$( (cat "$HERE/make_tiny_gguf.py"; echo "$MODEL_ARGS") | md5sum | cut -c1-8).gguf"

PORT="${PORT:-8080}"
THREADS="${THREADS:-1}"        # 1 on a 2-core box: leaves a core for the client + HTTP thread
PARALLEL="${PARALLEL:-8}"      # slots = max concurrent sequences (like vLLM max_num_seqs)
CTX="${CTX:-16384}"            # TOTAL KV tokens; each slot gets CTX/PARALLEL
BATCH="${BATCH:-2048}"         # -b: tokens per server iteration (chunked-prefill budget)
UBATCH="${UBATCH:-512}"        # -ub: physical micro-batch
PIDFILE="$ROOT/llama-server.$PORT.pid"
LOG="$ROOT/llama-server.$PORT.log"

do_install() {
  mkdir -p "$ROOT/bin" "$ROOT/models"
  if [ -x "$BIN" ] && [ -f "$MODEL" ]; then
    echo "llama-server: $BIN"; echo "model: $MODEL"; return 0
  fi
  [ -x "$VENV/bin/python" ] || python3 -m venv "$VENV"
  "$VENV/bin/pip" install -q --disable-pip-version-check \
      "cmake>=3.21" ninja "gguf==$GGUF_PY_VERSION" numpy
  if [ ! -x "$BIN" ]; then
    local tmp; tmp="$(mktemp -d)"
    echo "building llama-server from llama-cpp-python==$LLAMA_CPP_PY_VERSION sdist (~6-8 min on 2 cores)" >&2
    "$VENV/bin/pip" download -q --disable-pip-version-check --no-deps --no-binary llama-cpp-python \
        -d "$tmp" "llama-cpp-python==$LLAMA_CPP_PY_VERSION"
    trap 'echo "build failed; logs in $tmp" >&2' ERR
    tar xzf "$tmp"/llama_cpp_python-*.tar.gz -C "$tmp"
    PATH="$VENV/bin:$PATH" cmake -S "$tmp/llama_cpp_python-$LLAMA_CPP_PY_VERSION/vendor/llama.cpp" \
        -B "$tmp/build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
        -DGGML_NATIVE=ON -DBUILD_SHARED_LIBS=OFF \
        -DLLAMA_OPENSSL=OFF -DLLAMA_BUILD_UI=OFF -DLLAMA_USE_PREBUILT_UI=OFF \
        -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_APP=OFF >"$tmp/cmake.log"
    PATH="$VENV/bin:$PATH" cmake --build "$tmp/build" --target llama-server -j"$(nproc)" >"$tmp/build.log"
    command install -m 755 "$tmp/build/bin/llama-server" "$BIN.tmp" && mv "$BIN.tmp" "$BIN"
    rm -rf "$tmp"
  fi
  if [ ! -f "$MODEL" ]; then
    # shellcheck disable=SC2086
    "$VENV/bin/python" "$HERE/make_tiny_gguf.py" "$MODEL.tmp" $MODEL_ARGS && mv "$MODEL.tmp" "$MODEL"
  fi
  echo "llama-server: $BIN"; echo "model: $MODEL"
}

do_start() {
  if already_running; then
    echo "already running (pid $(cat "$PIDFILE"))"; return 0
  fi
  [ -x "$BIN" ] && [ -f "$MODEL" ] || do_install
  "$BIN" -m "$MODEL" --host 127.0.0.1 --port "$PORT" \
      -c "$CTX" -np "$PARALLEL" -t "$THREADS" -b "$BATCH" -ub "$UBATCH" \
      --metrics --no-webui -cram 0 ${EXTRA_SERVER_ARGS:-} >"$LOG" 2>&1 &
  echo $! >"$PIDFILE"
  wait_healthy llama-server 60
}

do_stop() { stop_server; }

do_paths() {
  echo "LLAMA_SERVER_BIN=$BIN"
  echo "LLAMA_SERVER_MODEL=$MODEL"
}

case "${1:-}" in
  install) do_install ;;
  paths) do_paths ;;
  start) do_start ;;
  stop) do_stop ;;
  *) echo "usage: $0 install|paths|start|stop" >&2; exit 2 ;;
esac
