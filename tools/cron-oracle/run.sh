#!/usr/bin/env bash
# Differential test: octop::CronExpression against the npm `cron` package (the version Backstage uses).
#
#   bash tools/cron-oracle/run.sh            # 10,000 cases from the fixed seed
# Environment:
#   CRON_ORACLE_DRIVER=path   the C++ driver (default build/debug/tools/octop_cron_oracle_driver, built if missing)
#   CRON_ORACLE_COUNT=n       cases per run (default 10000)
#   CRON_ORACLE_SEED=n        the fixed seed (default 20240531)
#   CRON_ORACLE_RANDOM=1      also run a second round from a random seed, printed so a failure can be reproduced
# Exits non-zero on any disagreement and prints the first mismatches.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "${here}/../.." && pwd)"
cd "${root}"

driver="${CRON_ORACLE_DRIVER:-${root}/build/debug/tools/octop_cron_oracle_driver}"
if [[ ! -x "${driver}" ]]; then
  if [[ -n "${CRON_ORACLE_DRIVER:-}" ]]; then
    echo "cron-oracle: CRON_ORACLE_DRIVER=${driver} is not an executable" >&2
    exit 2
  fi
  echo "cron-oracle: building octop_cron_oracle_driver (debug preset)" >&2
  if [[ ! -f "${root}/build/debug/build.ninja" ]]; then
    cmake --preset debug >/dev/null
  fi
  cmake --build --preset debug --target octop_cron_oracle_driver >&2
fi

# The package versions are pinned by package-lock.json; node_modules is gitignored.
if [[ ! -f "${here}/node_modules/cron/package.json" || "${here}/package-lock.json" -nt "${here}/node_modules/.package-lock.json" ]]; then
  (cd "${here}" && npm ci --no-audit --no-fund --loglevel=error >&2)
fi

count="${CRON_ORACLE_COUNT:-10000}"
seed="${CRON_ORACLE_SEED:-20240531}"
# The C++ side reads the zone name it is given; the local zone never matters, but keep both sides identical.
export TZ=UTC

node "${here}/oracle.js" --driver "${driver}" --seed "${seed}" --count "${count}"
if [[ "${CRON_ORACLE_RANDOM:-0}" == "1" ]]; then
  random_seed=$(( (RANDOM << 15) | RANDOM ))
  echo "cron-oracle: random round, seed ${random_seed} (reproduce: CRON_ORACLE_SEED=${random_seed} bash tools/cron-oracle/run.sh)"
  node "${here}/oracle.js" --driver "${driver}" --seed "${random_seed}" --count "${count}"
fi
