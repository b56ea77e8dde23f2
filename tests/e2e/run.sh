#!/usr/bin/env bash
# Runs the dashboard's end-to-end tests: installs the npm dependencies (npm ci from the lockfile) into
# tests/e2e/node_modules, then `node --test`. Exits non-zero when a test fails or something is missing.
#   OCTOPD_BINARY=path      the daemon under test (OCTOPD also works; default build/debug/apps/octopd/octopd,
#                           relative to the repo root)
#   CHROMIUM=path           the browser (default /usr/bin/chromium; `apt-get install -y chromium`)
#   E2E_OUT=dir             where screenshots go (default build/e2e)
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
cd "$here"

chromium="${CHROMIUM:-/usr/bin/chromium}"
if [[ ! -x "$chromium" ]]; then
  echo "e2e: $chromium is missing: apt-get install -y chromium (scripts/install-deps.sh installs it)" >&2
  exit 1
fi
octopd="${OCTOPD_BINARY:-${OCTOPD:-build/debug/apps/octopd/octopd}}"
[[ "$octopd" = /* ]] || octopd="$(cd "$here/../.." && pwd)/$octopd"
if [[ ! -x "$octopd" ]]; then
  echo "e2e: octopd not found at $octopd: build it first, or set OCTOPD_BINARY" >&2
  exit 1
fi
export OCTOPD_BINARY="$octopd"

# Playwright must never fetch a browser of its own: the tests drive Debian's chromium.
export PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1
if [[ ! -d node_modules/playwright-core ]] || [[ package-lock.json -nt node_modules/.package-lock.json ]]; then
  if [[ -f package-lock.json ]]; then
    npm ci --no-audit --no-fund --loglevel=error
  else
    npm install --no-audit --no-fund --loglevel=error
  fi
fi

# The default reporter (TAP when piped) ends with the '# tests N / # pass N / # fail N' summary lines.
exec node --test --test-concurrency=1 cadence.test.js dashboard.test.js queue.test.js attacks.test.js
