#!/usr/bin/env bash
# A real single-node Slurm cluster (munge, slurmctld, slurmd on localhost) owned by one
# folder, for running sweeps as job arrays on one machine and for the live tests.
#
#   scripts/slurm.sh start DIR [CTLD_PORT SLURMD_PORT]   start it; prints `export SLURM_CONF=…`
#   scripts/slurm.sh stop DIR                            stop every daemon by its PID
#
# Needs Debian's slurm-wlm and munge (`scripts/setup.sh slurm`) and root (the daemons run
# as root, munged as munge). Everything (state, spool, logs, PIDs, the munge key and
# socket) lives under DIR; a fresh DIR starts a fresh cluster.
set -euo pipefail
cmd="${1:?start|stop}"; D="$(mkdir -p "${2:?DIR}" && cd "$2" && pwd)"

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

stop() {
  for f in "$D"/pids/*.pid "$D"/munge/munged.pid; do
    [ -f "$f" ] || continue
    pid="$(cat "$f")"; kill "$pid" 2>/dev/null || true
  done
  # Wait (at most 10 s) for them to go.
  for _ in $(seq 50); do
    alive=0
    for f in "$D"/pids/*.pid "$D"/munge/munged.pid; do
      [ -f "$f" ] && kill -0 "$(cat "$f")" 2>/dev/null && alive=1
    done
    [ "$alive" = 0 ] && return 0
    sleep 0.2
  done
  for f in "$D"/pids/*.pid "$D"/munge/munged.pid; do [ -f "$f" ] && kill -9 "$(cat "$f")" 2>/dev/null || true; done
}

start() {
  local ctld="${3:-$(free_port)}" slurmd="${4:-$(free_port)}"
  command -v slurmctld >/dev/null && command -v munged >/dev/null \
    || { echo "slurm.sh: slurm-wlm and munge are not installed (scripts/setup.sh slurm)" >&2; exit 1; }
  rm -rf "$D/state" "$D/spool" "$D/log" "$D/pids"
  mkdir -p "$D/state" "$D/spool" "$D/log" "$D/pids" "$D/munge"
  chown munge:munge "$D/munge"; chmod 755 "$D/munge"
  [ -f "$D/munge/munge.key" ] || mungekey --create --keyfile="$D/munge/munge.key" >/dev/null
  chown munge:munge "$D/munge/munge.key"; chmod 400 "$D/munge/munge.key"
  runuser -u munge -- munged -F --key-file="$D/munge/munge.key" --socket="$D/munge/munge.sock" \
    --pid-file="$D/munge/munged.pid" --log-file="$D/munge/munged.log" --seed-file="$D/munge/munge.seed" </dev/null >/dev/null 2>&1 &
  for _ in $(seq 50); do
    munge -S "$D/munge/munge.sock" -n 2>/dev/null | unmunge -S "$D/munge/munge.sock" >/dev/null 2>&1 && break
    sleep 0.1
  done
  local cpus; cpus="$(nproc)"
  cat > "$D/slurm.conf" <<CONF
ClusterName=kvqueue
SlurmctldHost=localhost
SlurmUser=root
AuthType=auth/munge
AuthInfo=socket=$D/munge/munge.sock
CredType=cred/munge
MailProg=/bin/true
SlurmctldPort=$ctld
SlurmdPort=$slurmd
StateSaveLocation=$D/state
SlurmdSpoolDir=$D/spool
SlurmctldPidFile=$D/pids/slurmctld.pid
SlurmdPidFile=$D/pids/slurmd.pid
SlurmctldLogFile=$D/log/slurmctld.log
SlurmdLogFile=$D/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
MpiDefault=none
ReturnToService=2
NodeName=localhost NodeAddr=127.0.0.1 CPUs=$cpus RealMemory=1000 State=UNKNOWN
PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP
CONF
  export SLURM_CONF="$D/slurm.conf"
  slurmctld -D -i -f "$SLURM_CONF" </dev/null >"$D/log/slurmctld.out" 2>&1 &
  slurmd -D -N localhost -f "$SLURM_CONF" </dev/null >"$D/log/slurmd.out" 2>&1 &
  for _ in $(seq 150); do
    [ "$(sinfo -h -o %T 2>/dev/null)" = idle ] && { echo "export SLURM_CONF=$SLURM_CONF"; return 0; }
    sleep 0.2
  done
  echo "slurm.sh: the node did not become idle in 30 s; logs in $D/log" >&2
  stop; exit 1
}

case "$cmd" in
  start) start "$@" ;;
  stop) stop ;;
  *) echo "usage: scripts/slurm.sh start|stop DIR" >&2; exit 2 ;;
esac
