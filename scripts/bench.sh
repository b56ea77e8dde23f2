#!/usr/bin/env bash
# make bench (after the release build): every figure of docs/performance.md measured in one run on one durable
# PostgreSQL server (fsync, synchronous_commit, full_page_writes on), so the ratios hold on a noisy machine.
#   1. installs the peer job queues (bench/peers, npm ci) if they are missing
#   2. starts a throwaway durable server (scripts/pg-test-server.sh), stopped again on exit
#   3. pgbench single-row UPDATE TPS (the physical reference), 1 and 8 clients
#   4. octop's own benchmark (build/release/bench/octop_bench, or $OCTOP_BENCH) on PostgreSQL and SQLite
#   5. graphile-worker and pg-boss on the same server
#   6. pgbench again (1 client), to show whether the machine drifted during the run
#   7. prints the tables; build/bench/results.jsonl (the JSON lines), build/bench/report.md (the tables)
# Env: BENCH_QUICK=1 passes --quick everywhere (smaller sizes, a smoke run of a few minutes);
#      OCTOP_BENCH=path overrides the octop benchmark binary; BENCH_PG_DIR=dir the server's directory;
#      BENCH_SKIP=octop,peers,pgbench leaves parts out. docs/performance.md describes every figure.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
out_dir=$root/build/bench
results=$out_dir/results.jsonl
meta=$out_dir/meta.json
octop_bench=${OCTOP_BENCH:-$root/build/release/bench/octop_bench}
peers_dir=$root/bench/peers
skip=",${BENCH_SKIP:-},"
quick=()
pgbench_seconds=15
if [[ ${BENCH_QUICK:-0} == 1 ]]; then
  quick=(--quick)
  pgbench_seconds=3
fi

log() { echo "bench: $*" >&2; }
failures=()

pg_bin=""
for c in /usr/lib/postgresql/*/bin; do [[ -x "$c/pgbench" ]] && pg_bin=$c; done
command -v node >/dev/null || { log "node is missing (scripts/install-deps.sh installs nodejs and npm)"; exit 1; }

# 1. Peers.
if [[ $skip != *,peers,* ]]; then
  if [[ ! -d $peers_dir/node_modules/graphile-worker || ! -d $peers_dir/node_modules/pg-boss ||
        $peers_dir/package-lock.json -nt $peers_dir/node_modules/.package-lock.json ]]; then
    log "installing graphile-worker and pg-boss into bench/peers (npm ci)"
    (cd "$peers_dir" && npm ci --no-audit --no-fund --loglevel=error >&2)
  fi
fi

# 2. A durable PostgreSQL server and a SQLite directory, both removed on exit.
pg_dir=${BENCH_PG_DIR:-$(mktemp -d /tmp/octop-bench-pg.XXXXXX)}
sqlite_dir=$(mktemp -d /tmp/octop-bench-sqlite.XXXXXX)
cleanup() {
  "$root/scripts/pg-test-server.sh" stop "$pg_dir" || true
  rm -rf "$sqlite_dir"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
url=$(PG_TEST_SERVER_DURABLE=1 "$root/scripts/pg-test-server.sh" start "$pg_dir")
log "PostgreSQL at $url (durable defaults)"

mkdir -p "$out_dir"
: >"$results"
pg_version=$(psql "$url" -qAtc "SHOW server_version")
pg_settings=$(psql "$url" -qAtc "SELECT string_agg(name || '=' || setting, ', ' ORDER BY name) FROM pg_settings
  WHERE name IN ('fsync', 'synchronous_commit', 'full_page_writes', 'shared_buffers', 'max_connections', 'wal_sync_method')")
cpu=$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1)
mem_gb=$(awk '/MemTotal/ {printf "%.0f", $2 / 1048576}' /proc/meminfo)
started=$(date -u +%Y-%m-%dT%H:%M:%SZ)
load_at_start=$(cut -d' ' -f1-3 /proc/loadavg)

# 3. and 6. pgbench: one row updated per transaction, so each transaction is one WAL flush; with one client
# that is the commit latency floor every queue operation pays.
pgbench_url=${url%/*}/pgbench
pgbench_tps() {  # clients phase
  local clients=$1 phase=$2 script tps
  script=$(mktemp /tmp/octop-bench-pgbench.XXXXXX.sql)
  printf '%s\n' '\set aid random(1, 100000 * :scale)' '\set delta random(-5000, 5000)' \
    'UPDATE pgbench_accounts SET abalance = abalance + :delta WHERE aid = :aid;' >"$script"
  tps=$("$pg_bin/pgbench" -n -c "$clients" -j "$(( clients < 2 ? 1 : 2 ))" -T "$pgbench_seconds" -f "$script" "$pgbench_url" 2>&1 |
        sed -n 's/^tps = \([0-9.]*\).*/\1/p')
  rm -f "$script"
  if [[ -z $tps ]]; then log "pgbench ($clients clients) failed"; failures+=("pgbench"); return; fi
  echo "{\"system\":\"pgbench\",\"backend\":\"postgres\",\"metric\":\"tps\",\"params\":{\"clients\":$clients,\"script\":\"single-row update\",\"phase\":\"$phase\"},\"value\":$tps,\"unit\":\"tps\"}" >>"$results"
  log "pgbench $clients client(s), $phase: $tps tps"
}
if [[ $skip != *,pgbench,* ]]; then
  if [[ -z $pg_bin ]]; then
    log "pgbench not found (postgresql-contrib); skipping the reference"; failures+=("pgbench")
  else
    log "pgbench: initialising (scale 1) and ${pgbench_seconds} s runs"
    psql "$url" -qc "CREATE DATABASE pgbench" >/dev/null
    "$pg_bin/pgbench" -i -q -s 1 "$pgbench_url" >/dev/null 2>&1
    pgbench_tps 1 start
    pgbench_tps 8 start
  fi
fi

# 4. octop.
if [[ $skip != *,octop,* ]]; then
  if [[ -x $octop_bench ]]; then
    log "octop: $octop_bench --suite all ${quick[*]}"
    if ! "$octop_bench" --pg-url "$url" --sqlite-dir "$sqlite_dir" --out "$results" --suite all "${quick[@]}" >&2; then
      log "octop_bench failed; its figures may be missing"; failures+=("octop")
    fi
  else
    log "octop_bench is missing ($octop_bench): build the release preset first (make bench does); continuing with the peers"
    failures+=("octop (missing)")
  fi
fi

# 5. Peers.
if [[ $skip != *,peers,* ]]; then
  for peer in graphile pgboss; do
    log "$peer"
    if ! (cd "$peers_dir" && node "$peer.mjs" --pg-url "$url" --out "$results" "${quick[@]}"); then
      log "$peer failed; its figures are missing"; failures+=("$peer")
    fi
  done
fi

if [[ $skip != *,pgbench,* && -n $pg_bin ]]; then
  pgbench_tps 1 end
fi

# 7. Tables.
version_of() { node -p "require('$peers_dir/node_modules/$1/package.json').version" 2>/dev/null || echo "?"; }
cat >"$meta" <<EOF
{"date": "$started", "machine": "$(nproc) CPUs ($cpu), ${mem_gb} GB RAM, $(uname -sr)", "cpus": $(nproc),
 "load_at_start": "$load_at_start", "load_at_end": "$(cut -d' ' -f1-3 /proc/loadavg)",
 "postgres": "$pg_version", "pg_settings": "$pg_settings",
 "node": "$(node --version)", "graphile_worker": "$(version_of graphile-worker)", "pg_boss": "$(version_of pg-boss)",
 "quick": $([[ ${#quick[@]} -gt 0 ]] && echo true || echo false)}
EOF
node "$peers_dir/report.mjs" --results "$results" --meta "$meta" --md "$out_dir/report.md"
log "results: $results; tables: $out_dir/report.md"
if [[ ${#failures[@]} -gt 0 ]]; then
  log "incomplete: ${failures[*]}"
  exit 1
fi
