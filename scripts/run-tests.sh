#!/usr/bin/env bash
# `make test`: builds and runs every test, the way CI does.
#   1. a throwaway PostgreSQL server (scripts/pg-test-server.sh) and PgBouncer in transaction mode in front of
#      it, stopped on exit even on failure
#   2. the debug build (ASan + UBSan): every test, on SQLite and PostgreSQL
#   3. the TSan build: every test again
#   4. the libFuzzer targets (clang), FUZZ_SECONDS each (default 10)
#   5. the cron differential check against the npm `cron` package (when node is present)
#   6. the dashboard's end-to-end tests in headless chromium against a real octopd
#   7. a real Backstage backend (npm @backstage/backend-defaults, pinned) and two octopd nodes on one task table,
#      in Backstage's three layouts (tests/backstage)
#   8. the short chaos test, twice (without and with job prefetch): octopd nodes on their own PostgreSQL under
#      kills, freezes, restarts, clock skew
#   9. clang-format check
# OCTOP_TEST_STAGES (default "debug tsan fuzz oracle e2e backstage chaos format") picks stages for a quicker local run.
set -euo pipefail
cd "$(dirname "$0")/.."
stages=${OCTOP_TEST_STAGES:-"debug tsan fuzz oracle e2e backstage chaos format"}
# ccache keyed on paths relative to the checkout, so a fresh clone in another folder still hits the cache.
export CCACHE_BASEDIR="$PWD" CCACHE_NOHASHDIR=1
jobs=$(nproc)
export CTEST_OUTPUT_ON_FAILURE=1

pg_dir=$(mktemp -d /tmp/octop-test-pg.XXXXXX)
cleanup() { scripts/pg-test-server.sh stop "$pg_dir" || true; }
trap cleanup EXIT
OCTOP_TEST_PG_URL=$(scripts/pg-test-server.sh start "$pg_dir")
export OCTOP_TEST_PG_URL
# The store, runtime and fault suites run a third time through it (tests/store_conformance/store_test_env.h).
OCTOP_TEST_PGBOUNCER_URL=$(scripts/pg-test-server.sh pgbouncer "$pg_dir")
export OCTOP_TEST_PGBOUNCER_URL
export OCTOP_REQUIRE_PG=1  # a missing server fails the PostgreSQL tests instead of skipping them
echo "run-tests: PostgreSQL at $OCTOP_TEST_PG_URL, PgBouncer (transaction mode) at $OCTOP_TEST_PGBOUNCER_URL"

has() { [[ " $stages " == *" $1 "* ]]; }

if has debug; then
  echo "run-tests: debug (ASan+UBSan) build"
  cmake --preset debug >/dev/null
  cmake --build --preset debug -j "$jobs"
  # The 2-process job stress test drains 20,000 jobs on both backends here; the TSan stage keeps the
  # test's own, smaller SQLite default.
  OCTOP_JOB_STRESS_JOBS=20000 \
  ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
    ctest --preset debug
fi

if has tsan; then
  echo "run-tests: TSan build"
  cmake --preset tsan >/dev/null
  cmake --build --preset tsan -j "$jobs"
  TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1 suppressions=$PWD/tests/tsan.supp" ctest --preset tsan
fi

if has fuzz; then
  echo "run-tests: fuzz targets, ${FUZZ_SECONDS:-10}s each"
  FUZZ_SECONDS=${FUZZ_SECONDS:-10} scripts/run-fuzz.sh
fi

if has oracle; then
  if command -v node >/dev/null && command -v npm >/dev/null; then
    echo "run-tests: cron differential check against npm cron"
    tools/cron-oracle/run.sh
  else
    echo "run-tests: node not found, cron differential check skipped"
  fi
fi

if has e2e; then
  if [[ -x tests/e2e/run.sh ]]; then
    echo "run-tests: dashboard end-to-end tests (headless chromium)"
    OCTOPD_BINARY="$PWD/build/debug/apps/octopd/octopd" tests/e2e/run.sh
  else
    echo "run-tests: no end-to-end tests yet"
  fi
fi

if has backstage; then
  echo "run-tests: a real Backstage node beside octopd (tests/backstage)"
  OCTOPD_BINARY="$PWD/build/debug/apps/octopd/octopd" OCTOP_BINARY="$PWD/build/debug/apps/octop/octop" \
    tests/backstage/run.sh
fi

if has chaos; then
  # Twice: as configured by default, and with every node prefetching (held jobs handed back under kills and
  # freezes; a 30 s freeze outlasts a held job's expiry of timeout + grace + prefetch TTL, 23 s).
  for prefetch in 0 4; do
    echo "run-tests: short chaos test (scripts/run-chaos.sh --short, CHAOS_PREFETCH=$prefetch)"
    CHAOS_PREFETCH=$prefetch OCTOP_CHAOS_BUILD=build/debug ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 \
      UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 scripts/run-chaos.sh --short
  done
fi

if has format; then
  echo "run-tests: clang-format check"
  git ls-files '*.h' '*.cc' | xargs -r clang-format --dry-run --Werror
fi
echo "run-tests: all stages passed ($stages)"
