#!/usr/bin/env bash
# Server time per job of the job queue's statements (pg_stat_statements), the "Statements per job" figures of
# docs/performance.md: runs `octop_bench --suite queue --concurrency C` (20,000 jobs per figure) against a
# throwaway durable PostgreSQL server (scripts/pg-test-server.sh), RUNS times, and prints for the pre-inserted and
# the enqueue+drain figure the execution time and WAL records per job of the claims, completions and enqueues.
# Any octop_bench binary works (the statements are told apart by text both layouts share), so a build of an
# earlier commit gives the "before" figures on the same server:
#   scripts/bench-statements.sh [--bin build/release/bench/octop_bench] [--concurrency 10] [--runs 3]
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
bin=$root/build/release/bench/octop_bench
concurrency=10
runs=3
while [[ $# -gt 0 ]]; do
  case $1 in
    --bin) bin=$2; shift 2 ;;
    --concurrency) concurrency=$2; shift 2 ;;
    --runs) runs=$2; shift 2 ;;
    *) echo "usage: $0 [--bin PATH] [--concurrency N] [--runs N]" >&2; exit 2 ;;
  esac
done
[[ -x $bin ]] || { echo "bench-statements: $bin is not an executable (make bench builds it)" >&2; exit 1; }
dir=$(mktemp -d /tmp/octop-bench-statements.XXXXXX)
trap '"$root/scripts/pg-test-server.sh" stop "$dir" >/dev/null 2>&1 || true' EXIT
url=$(PG_TEST_SERVER_DURABLE=1 "$root/scripts/pg-test-server.sh" start "$dir" | tail -1)
psql "$url" -qAtc "CREATE EXTENSION IF NOT EXISTS pg_stat_statements" >/dev/null
echo "bench-statements: $bin, concurrency $concurrency, $runs runs, PostgreSQL $(psql "$url" -qAtc 'SHOW server_version')"
printf '%-4s %-14s %-10s %8s %10s %12s %12s\n' run figure statement calls rows "us/job" "WAL rec/job"
for run in $(seq 1 "$runs"); do
  psql "$url" -qAtc "SELECT pg_stat_statements_reset()" >/dev/null
  out=$("$bin" --pg-url "$url" --suite queue --concurrency "$concurrency" 2>&1 | grep -E '^  postgres +throughput')
  echo "$out" | sed "s/^ */     /"
  for figure in pre drain; do
    psql "$url" -qAt -F' ' -c "
      WITH s AS (
        SELECT CASE WHEN query LIKE '%worker_id = \$6%' THEN 'claim'
                    WHEN query LIKE '%AS c(id, token, outcome, error, delay, ord)%' THEN 'complete'
                    WHEN query LIKE '%AS c(id, token, ord)%' THEN 'complete'
                    WHEN query LIKE '%AS t(id, queue, kind, payload, priority, at, max_retries, unique_key, ord)%'
                      THEN 'enqueue'
                    ELSE 'other' END AS statement,
               calls, rows, total_exec_time, wal_records
        FROM pg_stat_statements WHERE query LIKE '%bench_${figure}${concurrency}_%')
      SELECT statement, sum(calls), sum(rows), round((sum(total_exec_time) * 1000 / 20000)::numeric, 2),
             round((sum(wal_records) / 20000.0)::numeric, 2)
      FROM s GROUP BY statement ORDER BY statement" |
      while read -r statement calls rows us wal; do
        printf '%-4s %-14s %-10s %8s %10s %12s %12s\n' "$run" "$figure$concurrency" "$statement" "$calls" "$rows" "$us" "$wal"
      done
  done
done
