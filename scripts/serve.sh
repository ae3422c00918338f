#!/usr/bin/env bash
# Builds the kvqueue page (installing wasm-bindgen and wasm-opt if missing) and
# serves it on 127.0.0.1 at a free port. Ctrl-C stops it. PORT=8123 picks the port.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
export PATH="$HOME/.cargo/bin:$ROOT/e2e/node_modules/.bin:$PATH"
scripts/setup.sh web
cargo fetch --locked >/dev/null 2>&1 || cargo fetch
node app/build.mjs
PORT="${PORT:-$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')}"
echo
echo "kvqueue is at http://127.0.0.1:$PORT/   (Ctrl-C to stop)"
exec python3 -m http.server "$PORT" --bind 127.0.0.1 --directory dist
