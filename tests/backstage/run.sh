#!/usr/bin/env bash
# Runs a real Backstage backend beside octopd nodes (interop.test.mjs): installs the pinned npm packages
# (npm ci from package-lock.json; better-sqlite3 builds from source with the machine's g++), then `node --test`.
#   OCTOP_TEST_PG_URL   a PostgreSQL server the test may create databases on (make test starts one)
#   OCTOPD_BINARY       the daemon (default build/debug/apps/octopd/octopd, relative to the repo root)
#   OCTOP_BINARY        the CLI (default build/debug/apps/octop/octop)
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
cd "$here"
[[ -n "${OCTOP_TEST_PG_URL:-}" ]] || { echo "backstage: OCTOP_TEST_PG_URL is not set" >&2; exit 1; }
export OCTOPD_BINARY="${OCTOPD_BINARY:-$root/build/debug/apps/octopd/octopd}"
export OCTOP_BINARY="${OCTOP_BINARY:-$root/build/debug/apps/octop/octop}"
for b in "$OCTOPD_BINARY" "$OCTOP_BINARY"; do
  [[ -x "$b" ]] || { echo "backstage: $b not found: build it first" >&2; exit 1; }
done
if [[ ! -d node_modules/@backstage/backend-defaults ]] || [[ package-lock.json -nt node_modules/.package-lock.json ]]; then
  npm ci --no-audit --no-fund --loglevel=error
fi
exec node --test --test-concurrency=1 interop.test.mjs
