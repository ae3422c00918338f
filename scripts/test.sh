#!/usr/bin/env bash
# kvqueue's test command: installs what it needs (idempotent, `scripts/setup.sh all`, in
# the background beside steps 1-2, which need only the Rust toolchain), then runs, in order,
#   1. format check
#   2. every native test built, clippy linting the workspace's crates as they build
#   3. the hermetic tier: `cargo test --workspace` with nothing on PATH but the Rust
#      toolchain and its linker, and KVQUEUE_ROOT empty, so no test can lean on a server
#   4. the live tier: the tests marked `#[ignore = "live: …"]` against a real llama-server,
#      a real vLLM, nginx/HAProxy and Slurm (a missing one fails them); those that time a
#      server first, alone, then the others in the background beside steps 5-7
#   5. the property tests at more cases
#   6. wasm tests (engine in Node, app in headless Chromium), clippy linting engine and
#      app for wasm32 as they build
#   7. release build of the page (in the background beside steps 5-6)
#   8. end-to-end test of the built page in headless Chromium (playwright-core)
# and ends with every runner's summary and the total time. Exit status: non-zero if any
# step failed.
set -uo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
export PATH="$HOME/.cargo/bin:$ROOT/e2e/node_modules/.bin:$PATH"
export CARGO_TERM_COLOR=never CHROMEDRIVER=/usr/bin/chromedriver
LOGDIR="$ROOT/target/test-logs"
mkdir -p "$LOGDIR"
SUMMARY=()
FAILED=0
START=$(date +%s)

summarise() { # summarise <name> <exit status> <seconds>: the step's line and its runners' result lines
  local name="$1" rc="$2" secs="$3" log="$LOGDIR/$1.log" lines
  # Each test binary's name followed by its runner's result line; e2e and other runners' own lines.
  lines=$(grep -E '^\s+Running |^\s+Doc-tests |^test result:|^e2e:|^no tests to run' "$log" \
    | sed -E 's/^\s+Running (unittests )?([^ ]+) \(.*deps\/([A-Za-z0-9_]+)-[0-9a-f]+.*\)/\3 \2/; s/^\s+Doc-tests (.*)/\1 doc-tests/' \
    | awk '/^test result:|^e2e:|^no tests/ { print (prev ? prev ": " : "") $0; prev=""; next } { prev=$0 }' || true)
  if [ "$rc" -eq 0 ]; then SUMMARY+=("PASS $name ($secs s)"); else SUMMARY+=("FAIL $name (exit $rc)"); FAILED=1; fi
  [ -n "$lines" ] && SUMMARY+=("$(echo "$lines" | sed 's/^/       /')")
  return 0
}

step() { # step <name> <command...>: runs, logs, records the runner's summary lines
  local name="$1"; shift
  local t0 rc
  t0=$(date +%s)
  printf '\n\033[1m==> %s\033[0m  (%s)\n' "$name" "$*"
  "$@" 2>&1 | tee "$LOGDIR/$name.log"
  rc=${PIPESTATUS[0]}
  summarise "$name" "$rc" "$(( $(date +%s) - t0 ))"
}

# A step that needs no quiet machine runs in the background beside the compiles:
# background <name> <command...> starts it (output to its log only); finish <name> waits,
# prints the log and records it as `step` does, and returns the step's exit status.
declare -A BACKGROUND
background() {
  local name="$1"; shift
  printf '\n\033[1m==> %s\033[0m, in the background  (%s)\n' "$name" "$*"
  ( t0=$(date +%s); "$@" >"$LOGDIR/$name.log" 2>&1; echo "$? $(( $(date +%s) - t0 ))" >"$LOGDIR/$name.status" ) &
  BACKGROUND[$name]=$!
}
finish() {
  local name="$1" rc secs
  wait "${BACKGROUND[$name]}"
  printf '\n\033[1m==> %s\033[0m, from the background\n' "$name"
  cat "$LOGDIR/$name.log"
  read -r rc secs <"$LOGDIR/$name.status" || { rc=1; secs=0; }
  summarise "$name" "$rc" "$secs"
  return "$rc"
}

cargo fetch --locked >/dev/null 2>&1 || cargo fetch
# The installs compile wasm-bindgen-cli and llama-server and download the rest; nothing
# before the live tier needs them, so they share the two cores with the first build.
background setup scripts/setup.sh all

step fmt cargo fmt --all -- --check
# Clippy lints while the tests build, as `cargo clippy` does it: clippy-driver wraps rustc
# for the workspace's own crates (never a dependency), so the lints need no second build of
# every crate. Every cargo command that builds for the tests runs under `lint`, so that no
# later one finds the wrapper changed and builds again; the page's release build does not
# (clippy-driver turns MIR optimisations off).
lint() {
  RUSTC_WORKSPACE_WRAPPER="$(command -v clippy-driver)" \
    CLIPPY_ARGS="-D__CLIPPY_HACKERY__warnings__CLIPPY_HACKERY__" "$@"
}
# Every target: the libraries, binaries, tests, examples and criterion benches.
step build-and-clippy lint cargo test --workspace --all-targets --profile ci --locked --no-run
# The hermetic tier: run with nothing on PATH but the Rust toolchain and its linker
# (doctests link), and no server installs (KVQUEUE_ROOT empty).
HERMETIC="$ROOT/target/hermetic"
rm -rf "$HERMETIC" && mkdir -p "$HERMETIC/bin" "$HERMETIC/root"
ln -s "$(command -v cc)" "$HERMETIC/bin/cc"
step hermetic-tests lint env PATH="$HERMETIC/bin:$HOME/.cargo/bin" KVQUEUE_ROOT="$HERMETIC/root" \
  cargo test --workspace --profile ci --locked
finish setup || {
  echo "setup failed: the live tier and the page need it (log: $LOGDIR/setup.log)" >&2
  printf '%s\n' "${SUMMARY[@]}"; exit 1; }
# The live tier: every `live:` test, one at a time (see bench-native/tests/bench_native/).
# Those that time a server run first, on a quiet machine, a step per module so that each
# one's time is in the summary. `--workspace` resolves features as the hermetic build did,
# so nothing is built again.
live() { lint cargo test --workspace --profile ci --locked --test bench_native -- --ignored --test-threads 1 "$@"; }
for group in real_server vllm_server like validate balancer prefix_live slot_live; do
  step "live-$group" live "$group::"
done
# The soak (memory and rows), the Slurm job array (byte-identity) and server-sweep's
# launches time nothing: they run in the background beside the builds and the tests
# below, not beside the end-to-end test, which times the page. (cargo holds its build
# lock only while building, not while the tests run.)
background live-untimed live soak:: slurm:: server_sweep::
# The page's two wasm builds have target folders of their own (profiles wasm-release and
# wasm-speed), so they build beside the tests below instead of after them.
background page-build node app/build.mjs
# The property tests of every parser (SSE events, measured files, cost and trace files,
# sweep summaries, URL state), at 4000 cases each instead of the default few hundred.
step property-tests lint env PROPTEST_CASES=4000 cargo test --workspace --profile ci --locked --lib
# One build for both crates' wasm tests, linted for wasm32 as it builds, without debug
# info; the runner takes each test binary to Node or to headless Chromium as the binary
# asks (app/tests/web.rs runs in the browser).
step wasm-tests-and-clippy lint env CARGO_PROFILE_DEV_DEBUG=0 \
  cargo test -p engine -p app --target wasm32-unknown-unknown --locked
finish page-build
finish live-untimed
step e2e-chromium node e2e/app.test.mjs dist

printf '\n\033[1m==> summary (total %s s)\033[0m\n' "$(( $(date +%s) - START ))"
printf '%s\n' "${SUMMARY[@]}"
exit $FAILED
