#!/usr/bin/env bash
# `make demo`: builds octopd and starts it on embedded SQLite with the example tasks and the dashboard.
set -euo pipefail
cd "$(dirname "$0")/.."
cmake --preset release >/dev/null
cmake --build --preset release -j "$(nproc)"
if [[ ! -x build/release/apps/octopd/octopd ]]; then
  echo "make demo: the octopd daemon is not built yet; it arrives with the daemon milestone (issue 5)."
  echo "make demo: what exists today is the core library and its tests: run 'make test'."
  exit 0
fi
exec build/release/apps/octopd/octopd --config examples/octop.yaml
