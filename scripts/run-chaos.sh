#!/usr/bin/env bash
# The chaos test (tests/chaos/chaos_main.cc, docs/reliability.md "Chaos test"): octopd nodes on one
# throwaway PostgreSQL under SIGKILL, SIGSTOP/SIGCONT, PostgreSQL restarts and clock skew (faketime); the
# invariants are checked from the database's append-only run log and the figures printed ("chaos: ..." lines).
#   scripts/run-chaos.sh --short    75 s of chaos, about 2.5 minutes in all (make test's "chaos" stage)
#   scripts/run-chaos.sh --long     CHAOS_MINUTES (default 15) minutes of chaos (make chaos)
# Environment: OCTOP_CHAOS_SEED=N reruns the schedule of seed N; OCTOP_CHAOS_BUILD (default build/debug) is the
# build directory with octopd and octop_chaos; CHAOS_NODES (default 4) octopd processes; CHAOS_PREFETCH (default
# 0) every node's jobs.prefetch.
# Everything it starts — the driver, the nodes, commands orphaned by SIGKILLed nodes, PostgreSQL — is stopped
# on exit, even on failure or interrupt. The work directory (node logs) is kept only when the test failed.
set -euo pipefail
cd "$(dirname "$0")/.."

mode=${1:---short}
build=${OCTOP_CHAOS_BUILD:-build/debug}
driver=$build/tests/chaos/octop_chaos
octopd=$build/apps/octopd/octopd
case "$mode" in
  --short) args=(--short --seconds 75) ;;
  --long) args=(--seconds $((${CHAOS_MINUTES:-15} * 60))) ;;
  *) echo "usage: scripts/run-chaos.sh [--short|--long]" >&2; exit 2 ;;
esac
if [[ ! -x $driver || ! -x $octopd ]]; then
  echo "run-chaos: $driver or $octopd is missing: build first (cmake --build --preset debug)" >&2
  exit 1
fi
command -v faketime >/dev/null || { echo "run-chaos: faketime is missing (scripts/install-deps.sh)" >&2; exit 1; }

pg_dir=$(mktemp -d /tmp/octop-chaos-pg.XXXXXX)
work=$(mktemp -d /tmp/octop-chaos-work.XXXXXX)
driver_pid=""

# Ends a process only if it is still one of ours (a pid may have been reused by now).
kill_if_ours() {  # pid, pattern its command line must contain, signal target (pid or -pgid)
  local args
  args=$(ps -o args= -p "$1" 2>/dev/null) || return 0
  [[ $args == *"$2"* ]] && kill -KILL -- "$3" 2>/dev/null || true
}

cleanup() {
  local rc=$?
  trap - EXIT INT TERM
  if [[ -n $driver_pid ]] && kill -0 "$driver_pid" 2>/dev/null; then
    kill -TERM "$driver_pid" 2>/dev/null || true
    for _ in $(seq 1 100); do kill -0 "$driver_pid" 2>/dev/null || break; sleep 0.1; done
    kill_if_ours "$driver_pid" octop_chaos "$driver_pid"
  fi
  if [[ -f $work/pids ]]; then
    while read -r pid; do kill_if_ours "$pid" "$work/octop.yaml" "$pid"; done <"$work/pids"
  fi
  for f in "$work"/procs/*; do
    [[ -e $f ]] && kill_if_ours "$(basename "$f")" octop_chaos_action "-$(basename "$f")"
  done
  scripts/pg-test-server.sh stop "$pg_dir" >/dev/null 2>&1 || true
  if [[ $rc -eq 0 ]]; then
    rm -rf "$work"
  else
    echo "run-chaos: FAILED (status $rc); node logs kept in $work"
  fi
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# Durable (fsync, synchronous_commit on): the driver crashes the server too, and a crash may lose nothing that
# was acknowledged.
PG_TEST_SERVER_DURABLE=1 scripts/pg-test-server.sh start "$pg_dir" >/dev/null
echo "run-chaos: $mode, PostgreSQL in $pg_dir, octopd $octopd"
# In the background so that a signal to this script reaches the trap at once.
"$driver" --pg-dir "$pg_dir" --octopd "$octopd" --work "$work" --nodes "${CHAOS_NODES:-4}" \
  --prefetch "${CHAOS_PREFETCH:-0}" "${args[@]}" &
driver_pid=$!
wait "$driver_pid"
