#!/usr/bin/env bash
# What the dashboard's monitoring reads cost the database on a large history (docs/performance.md, "Monitoring
# reads on a million finished jobs"): starts a throwaway durable PostgreSQL (scripts/pg-test-server.sh) and an
# octopd on it, writes JOBS finished jobs into octop_jobs with one SQL statement, then VIEWERS simulated
# dashboard tabs each ask for GET /jobs/summary and the Jobs card's two lists (failed, frozen) every 2 s and the
# hour's GET /jobs/stats every 10 s, for SECONDS.
# Prints, from pg_stat_statements over those seconds, the calls and execution time of the summary's statements
# and the stats', and the summary requests' latency as curl saw it. Any octopd binary works, so a build of an
# earlier commit gives the "before" figures:
#   scripts/bench-monitoring.sh [--octopd build/debug/apps/octopd/octopd] [--jobs 1000000] [--viewers 10] [--seconds 30]
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
octopd=$root/build/debug/apps/octopd/octopd
jobs=1000000
viewers=10
seconds=30
while [[ $# -gt 0 ]]; do
  case $1 in
    --octopd) octopd=$2; shift 2 ;;
    --jobs) jobs=$2; shift 2 ;;
    --viewers) viewers=$2; shift 2 ;;
    --seconds) seconds=$2; shift 2 ;;
    *) echo "usage: $0 [--octopd PATH] [--jobs N] [--viewers N] [--seconds N]" >&2; exit 2 ;;
  esac
done
[[ -x $octopd ]] || { echo "bench-monitoring: $octopd is not an executable (cmake --build --preset debug)" >&2; exit 1; }
dir=$(mktemp -d /tmp/octop-bench-monitoring.XXXXXX)  # octopd's config, log and the latencies
pg=$(mktemp -d /tmp/octop-bench-monitoring-pg.XXXXXX)   # the server's, owned by its user
daemon=
cleanup() {
  [[ -n $daemon ]] && kill "$daemon" 2>/dev/null && wait "$daemon" 2>/dev/null
  "$root/scripts/pg-test-server.sh" stop "$pg" >/dev/null 2>&1 || true
  rm -rf "$dir"
}
trap cleanup EXIT
url=$(PG_TEST_SERVER_DURABLE=1 "$root/scripts/pg-test-server.sh" start "$pg" | tail -1)
psql "$url" -qAtc "CREATE EXTENSION IF NOT EXISTS pg_stat_statements" >/dev/null
printf 'database: %s\nhttp:\n  listen: 127.0.0.1:0\n' "$url" > "$dir/octop.yaml"
"$octopd" --config "$dir/octop.yaml" > "$dir/octopd.log" 2>&1 &
daemon=$!
port=
for _ in $(seq 1 300); do  # up to 30 s for the daemon to migrate and listen
  port=$(sed -n 's/^octopd: ready on port \([0-9]*\)$/\1/p' "$dir/octopd.log")
  [[ -n $port ]] && break
  kill -0 "$daemon" 2>/dev/null || { cat "$dir/octopd.log" >&2; exit 1; }
  sleep 0.1
done
[[ -n $port ]] || { echo "bench-monitoring: octopd did not start" >&2; cat "$dir/octopd.log" >&2; exit 1; }
# The history: finished jobs a millisecond apart over five queues, one in a thousand frozen with an error.
psql "$url" -q -v ON_ERROR_STOP=1 <<SQL
INSERT INTO octop.octop_jobs (id, queue, kind, payload, priority, scheduled_at, status, attempt, max_retries,
                              attempt_token, created_at, started_at, completed_at, worker_id, last_error)
SELECT gen_random_uuid(), 'q' || (i % 5), 'noop', jsonb_build_object('n', i), 0, t,
       CASE WHEN i % 1000 = 0 THEN 'frozen' ELSE 'success' END, 1, 3, gen_random_uuid()::text, t,
       t + interval '1 ms', t + interval '2 ms', 'w', CASE WHEN i % 1000 = 0 THEN 'boom' END
FROM (SELECT i, now() - ($jobs - i) * interval '1 ms' AS t FROM generate_series(1, $jobs) i) s;
VACUUM ANALYZE octop.octop_jobs;
SQL
api=http://127.0.0.1:$port/api/octop/v1/jobs
echo "bench-monitoring: $octopd, $jobs finished jobs, $viewers viewers, $seconds s, PostgreSQL $(psql "$url" -qAtc 'SHOW server_version')"
psql "$url" -qAtc "SELECT pg_stat_statements_reset()" >/dev/null
end=$(($(date +%s) + seconds))
pids=()
for _ in $(seq 1 "$viewers"); do
  (
    n=0
    while (($(date +%s) < end)); do
      curl -s -o /dev/null -w '%{time_total}\n' "$api/summary" >> "$dir/latency"
      # The Jobs card's default view: the latest failed and the latest frozen jobs (src/web/queue.js).
      curl -s -o /dev/null -w '%{time_total}\n' "$api?status=failed&limit=50" >> "$dir/list-latency"
      curl -s -o /dev/null "$api?status=frozen&limit=50"
      ((n % 5 == 0)) && curl -s -o /dev/null "$api/stats?window=1h&bucket=60s"
      n=$((n + 1))
      sleep 2  # the dashboard's poll interval, after the previous answer (docs/dashboard.md)
    done
  ) &
  pids+=($!)
done
wait "${pids[@]}"
printf '%-10s %8s %12s\n' statement calls "exec ms"
psql "$url" -qAt -F' ' -c "
  SELECT CASE WHEN query LIKE '%GROUP BY queue, status%' THEN 'summary'
              WHEN query LIKE '%octop_failed_jobs%' THEN 'failed'
              WHEN query LIKE 'SELECT name, paused FROM%' THEN 'queues'
              WHEN query LIKE '%AS bucket%' THEN 'stats'
              WHEN query LIKE '%WINDOW page%' THEN 'list'
              ELSE 'other' END AS s, sum(calls), round(sum(total_exec_time)::numeric)
  FROM pg_stat_statements WHERE query LIKE '%octop_%' GROUP BY 1 ORDER BY 1" |
  while read -r s calls ms; do printf '%-10s %8s %12s\n' "$s" "$calls" "$ms"; done
sort -n "$dir/latency" | awk '{a[NR] = $1} END {
  printf "summary requests %d in the window: latency p50 %.3f s, p90 %.3f s, max %.3f s\n",
         NR, a[int((NR + 1) * 0.5)], a[int((NR + 1) * 0.9)], a[NR]}'
sort -n "$dir/list-latency" | awk '{a[NR] = $1} END {
  printf "failed-list requests %d in the window: latency p50 %.3f s, p90 %.3f s, max %.3f s\n",
         NR, a[int((NR + 1) * 0.5)], a[int((NR + 1) * 0.9)], a[NR]}'
