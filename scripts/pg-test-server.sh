#!/usr/bin/env bash
# A throwaway PostgreSQL server for tests: initdb into a temporary directory, a random free port, loopback only,
# fsync off (a test server). PG_TEST_SERVER_DURABLE=1 keeps PostgreSQL's durable defaults (fsync, synchronous_commit,
# full_page_writes on) for benchmarks. Nothing outside the directory is touched.
#   scripts/pg-test-server.sh start DIR   -> prints the connection URL on stdout
#   scripts/pg-test-server.sh stop DIR    -> stops the server and removes DIR
#   scripts/pg-test-server.sh restart DIR -> fast restart (the chaos test): same port, same data
# PostgreSQL refuses to run as root, so as root the server runs as the 'postgres' system user.
set -euo pipefail

cmd=${1:?usage: pg-test-server.sh start|stop DIR}
dir=${2:?usage: pg-test-server.sh start|stop DIR}

pg_bin=""
for c in /usr/lib/postgresql/*/bin; do [[ -x "$c/initdb" ]] && pg_bin=$c; done
if [[ -z "$pg_bin" ]]; then echo "pg-test-server: no PostgreSQL server found (scripts/install-deps.sh installs it)" >&2; exit 1; fi

run_as=()
if [[ $(id -u) -eq 0 ]]; then run_as=(runuser -u postgres --); fi

free_port() {
  python3 - <<'PY' 2>/dev/null || echo $((20000 + RANDOM % 20000))
import socket
s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()
PY
}

case "$cmd" in
  start)
    mkdir -p "$dir"
    [[ ${#run_as[@]} -gt 0 ]] && chown postgres "$dir"
    "${run_as[@]}" "$pg_bin/initdb" -D "$dir/data" -U octop --auth=trust -E UTF8 --locale=C.UTF-8 >"$dir/initdb.log" 2>&1 \
      || { cat "$dir/initdb.log" >&2; exit 1; }
    unsafe_opts="-c fsync=off -c synchronous_commit=off -c full_page_writes=off"
    [[ ${PG_TEST_SERVER_DURABLE:-0} == 1 ]] && unsafe_opts=""
    for attempt in 1 2 3 4 5; do
      port=$(free_port)
      if "${run_as[@]}" "$pg_bin/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 30 \
          -o "-p $port -k $dir -c listen_addresses=127.0.0.1 $unsafe_opts -c max_connections=200 -c shared_preload_libraries=pg_stat_statements" \
          start >/dev/null 2>&1; then
        echo "$port" >"$dir/port"
        "${run_as[@]}" "$pg_bin/psql" -h 127.0.0.1 -p "$port" -U octop -d postgres -qAt \
          -c "CREATE DATABASE octop_test" >/dev/null
        echo "postgresql://octop@127.0.0.1:$port/octop_test"
        exit 0
      fi
    done
    cat "$dir/server.log" >&2 || true
    exit 1
    ;;
  restart)
    # pg_ctl restart reuses the options of the last start (postmaster.opts), so the port stays the same.
    "${run_as[@]}" "$pg_bin/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 30 -m fast restart >/dev/null 2>&1 \
      || { tail -20 "$dir/server.log" >&2; exit 1; }
    ;;
  stop)
    if [[ -d "$dir/data" ]]; then
      "${run_as[@]}" "$pg_bin/pg_ctl" -D "$dir/data" -m immediate -w stop >/dev/null 2>&1 || true
    fi
    rm -rf "$dir"
    ;;
  *) echo "usage: pg-test-server.sh start|stop|restart DIR" >&2; exit 2 ;;
esac
