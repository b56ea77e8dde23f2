#!/usr/bin/env bash
# The test stages under CPU load (docs/reliability.md, "Tests under load"): stress-ng runs LOAD_CPUS workers
# (default 4, twice this machine's 2 cores) beside scripts/run-tests.sh, LOAD_ROUNDS times in a row (default 3);
# the first failing round stops it. OCTOP_TEST_STAGES picks the stages as for `make test` (default: all).
#   scripts/run-under-load.sh            what `make test-under-load` runs
set -euo pipefail
cd "$(dirname "$0")/.."
command -v stress-ng >/dev/null || { echo "run-under-load: stress-ng is missing (scripts/install-deps.sh)" >&2; exit 1; }
rounds=${LOAD_ROUNDS:-3}
cpus=${LOAD_CPUS:-4}
stress-ng --cpu "$cpus" --timeout 0 --quiet &
stress=$!
trap 'kill "$stress" 2>/dev/null || true; wait "$stress" 2>/dev/null || true' EXIT
for ((round = 1; round <= rounds; round++)); do
  echo "run-under-load: round $round of $rounds, stress-ng --cpu $cpus beside it"
  start=$(date +%s)
  scripts/run-tests.sh
  echo "run-under-load: round $round passed in $(($(date +%s) - start)) s"
done
echo "run-under-load: $rounds rounds passed under stress-ng --cpu $cpus"
