#!/usr/bin/env bash
# `make demo`: builds octopd (release) and starts it on embedded SQLite with the example tasks in
# examples/octop.yaml. Stop it with Ctrl-C (SIGINT drains running tasks gracefully).
set -euo pipefail
cd "$(dirname "$0")/.."
cmake --preset release >/dev/null
cmake --build --preset release -j "$(nproc)" --target octopd octop
port=7007
cat <<MSG

  octopd is starting on embedded SQLite (data in build/demo-data) with the tasks of examples/octop.yaml.

    Dashboard:    http://127.0.0.1:${port}/
    Tasks (API):  curl -s http://127.0.0.1:${port}/api/demo/.backstage/scheduler/v1/tasks
    Trigger:      curl -X POST http://127.0.0.1:${port}/api/demo/.backstage/scheduler/v1/tasks/rebuild-index/trigger
    CLI:          build/release/apps/octop/octop tasks
    Metrics:      curl -s http://127.0.0.1:${port}/metrics

  Ctrl-C stops it.

MSG
exec build/release/apps/octopd/octopd --config examples/octop.yaml
