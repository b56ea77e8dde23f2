#!/usr/bin/env bash
# A throwaway PostgreSQL server for tests: initdb into a temporary directory, a random free port, loopback only,
# fsync off (a test server). PG_TEST_SERVER_DURABLE=1 keeps PostgreSQL's durable defaults (fsync, synchronous_commit,
# full_page_writes on) for benchmarks. Nothing outside the directory is touched.
#   scripts/pg-test-server.sh start DIR   -> prints the connection URL on stdout
#   scripts/pg-test-server.sh pgbouncer DIR -> starts PgBouncer in transaction mode in front of the server in DIR
#                                            (every database of it, loopback, trust) and prints its URL
#   scripts/pg-test-server.sh standby DIR PRIMARY_DIR -> a streaming standby of the server in PRIMARY_DIR (base
#                                            backup, then synchronous replication: the primary's commits wait
#                                            for it) and prints its URL
#   scripts/pg-test-server.sh crash DIR   -> stops the server at once (as a kill -9 would leave it), DIR kept
#   scripts/pg-test-server.sh promote DIR -> promotes the standby in DIR to a primary
#   scripts/pg-test-server.sh stop DIR    -> stops the server (and its PgBouncer) and removes DIR
#   scripts/pg-test-server.sh restart DIR -> fast restart (the chaos test): same port, same data
#   scripts/pg-test-server.sh crash-restart DIR -> immediate stop (a crash: no checkpoint), then a start that
#                                            recovers from the WAL (the chaos test): same port, same data
# PostgreSQL and PgBouncer refuse to run as root, so as root they run as the 'postgres' system user.
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

# Starts the server in $dir/data on a free port (the options of every server this script starts).
start_server() {
  local unsafe_opts="-c fsync=off -c synchronous_commit=off -c full_page_writes=off"
  [[ ${PG_TEST_SERVER_DURABLE:-0} == 1 ]] && unsafe_opts=""
  for attempt in 1 2 3 4 5; do
    port=$(free_port)
    if "${run_as[@]}" "$pg_bin/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 30 \
        -o "-p $port -k $dir -c listen_addresses=127.0.0.1 $unsafe_opts -c max_connections=200 -c shared_preload_libraries=pg_stat_statements" \
        start >/dev/null 2>&1; then
      echo "$port" >"$dir/port"
      return 0
    fi
  done
  cat "$dir/server.log" >&2 || true
  return 1
}
psql_at() { "${run_as[@]}" "$pg_bin/psql" -h 127.0.0.1 -p "$1" -U octop -d postgres -qAt -c "$2"; }

case "$cmd" in
  start)
    mkdir -p "$dir"
    [[ ${#run_as[@]} -gt 0 ]] && chown postgres "$dir"
    "${run_as[@]}" "$pg_bin/initdb" -D "$dir/data" -U octop --auth=trust -E UTF8 --locale=C.UTF-8 >"$dir/initdb.log" 2>&1 \
      || { cat "$dir/initdb.log" >&2; exit 1; }
    start_server
    psql_at "$port" "CREATE DATABASE octop_test" >/dev/null
    echo "postgresql://octop@127.0.0.1:$port/octop_test"
    ;;
  standby)
    primary=${3:?usage: pg-test-server.sh standby DIR PRIMARY_DIR}
    primary_port=$(cat "$primary/port")
    mkdir -p "$dir"
    [[ ${#run_as[@]} -gt 0 ]] && chown postgres "$dir"
    # -R: standby.signal and primary_conninfo (initdb's trust rules let loopback replication in).
    "${run_as[@]}" "$pg_bin/pg_basebackup" -h 127.0.0.1 -p "$primary_port" -U octop -D "$dir/data" -R -X stream \
      -c fast >"$dir/basebackup.log" 2>&1 || { cat "$dir/basebackup.log" >&2; exit 1; }
    start_server
    # Synchronous: a commit the primary acknowledged is on the standby, so a failover loses none.
    psql_at "$primary_port" "ALTER SYSTEM SET synchronous_standby_names = '*'" >/dev/null
    psql_at "$primary_port" "SELECT pg_reload_conf()" >/dev/null
    for _ in $(seq 300); do
      [[ $(psql_at "$primary_port" "SELECT count(*) FROM pg_stat_replication WHERE sync_state = 'sync'") == 1 ]] \
        && { echo "postgresql://octop@127.0.0.1:$port/octop_test"; exit 0; }
      sleep 0.1
    done
    echo "pg-test-server: the standby did not become synchronous" >&2
    exit 1
    ;;
  crash)
    "${run_as[@]}" "$pg_bin/pg_ctl" -D "$dir/data" -m immediate -w stop >/dev/null 2>&1
    ;;
  promote)
    "${run_as[@]}" "$pg_bin/pg_ctl" -D "$dir/data" -w -t 30 promote >/dev/null 2>&1 \
      || { tail -20 "$dir/server.log" >&2; exit 1; }
    ;;
  pgbouncer)
    command -v pgbouncer >/dev/null || { echo "pg-test-server: pgbouncer is missing (scripts/install-deps.sh installs it)" >&2; exit 1; }
    pg_port=$(cat "$dir/port")
    for attempt in 1 2 3 4 5; do
      port=$(free_port)
      # Transaction mode, the pooling that changes what a client may rely on (docs/configuration.md, "Behind
      # PgBouncer"); "*" forwards every database name, so plugins' own databases pass too.
      cat >"$dir/pgbouncer.ini" <<INI
[databases]
* = host=127.0.0.1 port=$pg_port
[pgbouncer]
listen_addr = 127.0.0.1
listen_port = $port
unix_socket_dir =
auth_type = trust
auth_file = $dir/pgbouncer.users
pool_mode = transaction
max_client_conn = 400
default_pool_size = 40
logfile = $dir/pgbouncer.log
pidfile = $dir/pgbouncer.pid
INI
      echo '"octop" ""' >"$dir/pgbouncer.users"
      [[ ${#run_as[@]} -gt 0 ]] && chown postgres "$dir/pgbouncer.ini" "$dir/pgbouncer.users"
      if "${run_as[@]}" pgbouncer -d "$dir/pgbouncer.ini" >/dev/null 2>&1; then
        for _ in $(seq 100); do
          if "${run_as[@]}" "$pg_bin/psql" -h 127.0.0.1 -p "$port" -U octop -d octop_test -qAt -c "SELECT 1" \
              >/dev/null 2>&1; then
            echo "postgresql://octop@127.0.0.1:$port/octop_test"
            exit 0
          fi
          sleep 0.1
        done
      fi
      [[ -f "$dir/pgbouncer.pid" ]] && kill "$(cat "$dir/pgbouncer.pid")" 2>/dev/null || true
    done
    cat "$dir/pgbouncer.log" >&2 || true
    exit 1
    ;;
  restart | crash-restart)
    # pg_ctl restart reuses the options of the last start (postmaster.opts), so the port stays the same.
    mode=fast
    [[ $cmd == crash-restart ]] && mode=immediate
    "${run_as[@]}" "$pg_bin/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 60 -m "$mode" restart >/dev/null 2>&1 \
      || { tail -20 "$dir/server.log" >&2; exit 1; }
    ;;
  stop)
    if [[ -f "$dir/pgbouncer.pid" ]]; then
      kill "$(cat "$dir/pgbouncer.pid")" 2>/dev/null || true
    fi
    if [[ -d "$dir/data" ]]; then
      "${run_as[@]}" "$pg_bin/pg_ctl" -D "$dir/data" -m immediate -w stop >/dev/null 2>&1 || true
    fi
    rm -rf "$dir"
    ;;
  *) echo "usage: pg-test-server.sh start|pgbouncer|standby|crash|promote|stop|restart|crash-restart DIR" >&2; exit 2 ;;
esac
