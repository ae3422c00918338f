#!/usr/bin/env bash
# Builds bench-native with profile-guided optimisation (PGO) into target/pgo/bench-native.
#
#   scripts/pgo.sh                       # ≈ 6–9 min on 2 cores: instrumented build, training, optimised build
#   target/pgo/bench-native sweep --threads 1 --out /tmp/sweep
#
# Three steps, the way rustc's own release builds use PGO:
#   1. build bench-native instrumented (-Cprofile-generate) in target/pgo-gen;
#   2. run it on a training set: the reference study's default grid (800 runs), a vLLM-like
#      paged/chunked/ShareGPT run, a llama.cpp-slot run, a serial run and a 16-replica fleet
#      under each router, so every event-loop path and router is profiled, not only the
#      reference one;
#   3. merge the profiles (llvm-profdata) and rebuild with -Cprofile-use in target/pgo-use.
# The result computes exactly what the normal release build computes (the same code, laid
# out and inlined by measured branch frequencies); `scripts/pgo.sh --check` also compares
# the two builds' sweep summaries byte for byte.
#
# Needs the toolchain's llvm-profdata (rustup component llvm-tools; installed here if
# missing). Not part of scripts/test.sh: it is a speed build, and the normal build is what
# the tests exercise.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
check=0
[[ "${1:-}" == "--check" ]] && check=1

host=$(rustc -vV | sed -n 's/^host: //p')
profdata="$(rustc --print sysroot)/lib/rustlib/$host/bin/llvm-profdata"
if [[ ! -x "$profdata" ]]; then
    echo "pgo: installing the llvm-tools rustup component (llvm-profdata)"
    rustup component add llvm-tools-preview
fi

data="$root/target/pgo-data"
rm -rf "$data"
mkdir -p "$data" "$root/target/pgo"

echo "pgo: 1/3 instrumented build (target/pgo-gen)"
RUSTFLAGS="-Cprofile-generate=$data" \
    cargo build --release -p bench-native --target-dir "$root/target/pgo-gen"
gen="$root/target/pgo-gen/release/bench-native"

echo "pgo: 2/3 training runs"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$gen" sweep --threads 1 --out "$work/ref" >/dev/null
"$gen" simulate --preset vllm --rate 6 --batch 64 --horizon 600 >/dev/null
"$gen" simulate --preset llama-cpp --rate 0.5 --batch 4 --budget 512 --horizon 2000 >/dev/null
"$gen" simulate --policy serial --rate 0.05 --batch 1 --horizon 20000 >/dev/null
"$gen" simulate --rate 8 --batch 16 --kv 16384 --horizon 200000 >/dev/null
"$gen" simulate --rate 250 --batch 128 --kv 1048576 --cost a10g --horizon 1200 --replicas 16 --router rr >/dev/null
"$gen" simulate --rate 250 --batch 128 --kv 1048576 --cost a10g --horizon 1200 --replicas 16 --router random >/dev/null
"$gen" simulate --rate 250 --batch 128 --kv 1048576 --cost a10g --horizon 1200 --replicas 16 --router lor >/dev/null
"$gen" simulate --rate 250 --batch 128 --kv 1048576 --cost a10g --horizon 1200 --replicas 16 --router jsq >/dev/null
"$gen" simulate --rate 250 --batch 128 --kv 1048576 --cost a10g --horizon 1200 --replicas 16 --router p2c >/dev/null

echo "pgo: 3/3 optimised build (target/pgo-use)"
"$profdata" merge -o "$data/merged.profdata" "$data"
RUSTFLAGS="-Cprofile-use=$data/merged.profdata" \
    cargo build --release -p bench-native --target-dir "$root/target/pgo-use"
cp "$root/target/pgo-use/release/bench-native" "$root/target/pgo/bench-native"
echo "pgo: built target/pgo/bench-native"

if ((check)); then
    cargo build --release -p bench-native
    "$root/target/release/bench-native" sweep --threads 1 --out "$work/plain" >/dev/null
    "$root/target/pgo/bench-native" sweep --threads 1 --out "$work/pgo" >/dev/null
    cmp "$work/plain/sweep_summary.csv" "$work/pgo/sweep_summary.csv"
    echo "pgo: sweep summaries of the release and PGO builds are identical"
    fleet=(simulate --rate 1000 --batch 128 --kv 1048576 --cost a10g --horizon 60 --replicas 64 --router jsq)
    cmp <("$root/target/release/bench-native" "${fleet[@]}" | grep -v ' in ') \
        <("$root/target/pgo/bench-native" "${fleet[@]}" | grep -v ' in ')
    echo "pgo: a 64-replica fleet's reports from the two builds are identical"
fi
