# Shared by llama-server.sh and vllm-server.sh (sourced, not run): health checks and
# stopping a server by its PID file. Expects PORT, PIDFILE and LOG to be set.

healthy() { [ "$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$PORT/health")" = 200 ]; }

# already_running: the server of $PIDFILE is alive and healthy.
already_running() {
  [ -f "$PIDFILE" ] && kill -0 "$(cat "$PIDFILE")" 2>/dev/null && healthy
}

# wait_healthy NAME SECONDS: poll /health every 0.1 s until 200; fail (with the log's
# tail, after stopping it) if the process dies or SECONDS pass.
wait_healthy() {
  local name="$1" secs="$2"
  for _ in $(seq 1 $((secs * 10))); do
    if healthy; then echo "$name ready on 127.0.0.1:$PORT (pid $(cat "$PIDFILE"))"; return 0; fi
    if ! kill -0 "$(cat "$PIDFILE")" 2>/dev/null; then tail -50 "$LOG" >&2; rm -f "$PIDFILE"; return 1; fi
    sleep 0.1
  done
  echo "$name did not become healthy in $secs s" >&2; tail -50 "$LOG" >&2; stop_server; return 1
}

# stop_server: TERM the PID file's process (and its process group, if it leads one), wait
# up to 10 s, then KILL.
stop_server() {
  [ -f "$PIDFILE" ] || return 0
  local pid; pid="$(cat "$PIDFILE")"
  if kill -- -"$pid" 2>/dev/null || kill "$pid" 2>/dev/null; then
    for _ in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -9 -- -"$pid" 2>/dev/null || kill -9 "$pid" 2>/dev/null || true
  fi
  rm -f "$PIDFILE"
}
