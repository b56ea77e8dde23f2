#!/usr/bin/env bash
# Makes the databases the upgrade test starts from (docs/store.md, "Upgrades"): a release's octopd runs a few
# tasks and jobs on SQLite and on PostgreSQL (a database per plugin, Backstage's default layout), and the
# resulting tables are dumped as SQL text under tests/upgrade/fixtures/<name>/. Run it with the binaries of the
# release to preserve, before the storage changes:
#   scripts/make-upgrade-fixture.sh NAME [BUILD_DIR]     e.g. NAME=0.8-dcbb9f8, BUILD_DIR=build/debug
# What the databases hold: plugin `upgrade` with a cron task, a manual task that ran once and a task whose
# command failed; in the job queue a job that succeeded, one frozen after its only attempt, one pending far in
# the future with a unique key, a paused queue, and a config row.
set -euo pipefail
cd "$(dirname "$0")/.."
name=${1:?usage: make-upgrade-fixture.sh NAME [BUILD_DIR]}
build=${2:-build/debug}
out=tests/upgrade/fixtures/$name
work=$(mktemp -d)
chmod 755 "$work"  # the PostgreSQL server runs as the postgres user when this runs as root
pgdir=$work/pg
octopd_pid=""
cleanup() {
  [[ -n "$octopd_pid" ]] && kill "$octopd_pid" 2>/dev/null && wait "$octopd_pid" 2>/dev/null
  scripts/pg-test-server.sh stop "$pgdir" >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT

port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

# Waits (deadline 30 s) until `octop jobs list` shows a job of kind $2 in status $3.
wait_for_job() {
  local url=$1 kind=$2 status=$3
  for _ in $(seq 300); do
    if "$build/apps/octop/octop" --url "$url" --json jobs list --status "$status" | jq -e \
      --arg k "$kind" '.jobs | map(select(.kind == $k)) | length > 0' >/dev/null 2>&1; then return 0; fi
    sleep 0.1
  done
  echo "make-upgrade-fixture: no $kind job reached $status" >&2
  exit 1
}

# Runs one octopd on database $1 until the tasks and jobs above exist, then stops it.
populate() {
  local database=$1 http_port url
  http_port=$(port)
  url=http://127.0.0.1:$http_port
  cat >"$work/octop.yaml" <<EOF
database: $database
http:
  listen: 127.0.0.1:$http_port
plugins:
  upgrade:
    tasks:
      - id: nightly
        schedule: { frequency: { cron: '0 3 * * *' }, timeout: 10m }
        command: [sh, -c, 'true']
      - id: on-demand
        schedule: { frequency: { trigger: manual }, timeout: 1m }
        command: [sh, -c, 'echo ran']
      - id: failing
        schedule: { frequency: { trigger: manual }, timeout: 1m }
        command: [sh, -c, 'exit 3']
jobs:
  handlers:
    - kind: ok
      command: [sh, -c, 'cat >/dev/null']
    - kind: broken
      command: [sh, -c, 'exit 1']
EOF
  "$build/apps/octopd/octopd" --config "$work/octop.yaml" >"$work/octopd.log" 2>&1 &
  octopd_pid=$!
  for _ in $(seq 300); do curl -fs "$url/healthz" >/dev/null 2>&1 && break; sleep 0.1; done
  local cli=("$build/apps/octop/octop" --url "$url")
  "${cli[@]}" trigger upgrade on-demand >/dev/null
  "${cli[@]}" trigger upgrade failing >/dev/null
  "${cli[@]}" jobs enqueue ok --payload '{"n":1}' >/dev/null
  "${cli[@]}" jobs enqueue broken --payload '{"n":2}' --max-retries 0 >/dev/null
  "${cli[@]}" jobs enqueue ok --payload '{"n":3}' --unique-key later --at 2099-01-01T00:00:00Z >/dev/null
  "${cli[@]}" jobs enqueue ok --queue held --payload '{"n":4}' --at 2099-01-01T00:00:00Z >/dev/null
  wait_for_job "$url" ok success
  wait_for_job "$url" broken frozen
  for _ in $(seq 300); do
    "${cli[@]}" --json tasks | jq -e '[.tasks[] | select(.id == "failing" or .id == "on-demand")
      | select(.taskState.status == "idle" and .taskState.lastRunEndedAt != null)] | length == 2' \
      >/dev/null 2>&1 && break
    sleep 0.1
  done
  curl -fs -X POST "$url/api/octop/v1/queues/held/pause" >/dev/null
  kill "$octopd_pid"
  wait "$octopd_pid" || true
  octopd_pid=""
}

rm -rf "$out"
mkdir -p "$out/sqlite" "$out/postgres"

populate "sqlite:$work/sqlite"
sqlite3 "$work/sqlite/octop.sqlite" \
  "INSERT INTO octop_config (key, value, updated_at) VALUES ('jobs.poll_interval_ms', '750', '2026-12-04 00:00:00.000')"
for f in "$work"/sqlite/*.sqlite; do sqlite3 "$f" .dump >"$out/sqlite/$(basename "$f" .sqlite).sql"; done

pg_url=$(scripts/pg-test-server.sh start "$pgdir" | tail -1)
populate "$pg_url"
psql -qAt "$pg_url" -c "INSERT INTO octop.octop_config (key, value, updated_at) VALUES ('jobs.poll_interval_ms', '750', now())"
pg_dump --inserts --no-owner --no-privileges --schema=octop "$pg_url" >"$out/postgres/octop.sql"
pg_dump --inserts --no-owner --no-privileges --schema=public "${pg_url%/*}/backstage_plugin_upgrade" \
  >"$out/postgres/backstage_plugin_upgrade.sql"

cat >"$out/README" <<EOF
Made by scripts/make-upgrade-fixture.sh with the octopd and octop of commit $(git rev-parse --short HEAD) on
$(date -u +%F). SQLite: one dump per file of the data directory. PostgreSQL: schema octop of the URL's
database, and schema public of database backstage_plugin_upgrade (pluginDivisionMode: database).
EOF
ls -l "$out"/*
