#!/usr/bin/env bash
# Builds the libFuzzer targets (clang, ASan) and runs each for FUZZ_SECONDS on its seed corpus (fuzz/corpus/<name>).
# New inputs found go to build/fuzz/corpus/<name>, not into the repository. A crash fails the run and leaves the
# input in build/fuzz/artifacts/.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${FUZZ_SECONDS:-10}
cmake --preset fuzz >/dev/null
cmake --build --preset fuzz -j "$(nproc)" --target fuzz_all
mkdir -p build/fuzz/artifacts
shopt -s nullglob
ran=0
for bin in build/fuzz/fuzz/fuzz_*; do
  [[ -x "$bin" && -f "$bin" ]] || continue
  name=$(basename "$bin")
  work="build/fuzz/corpus/$name"
  mkdir -p "$work"
  seeds=()
  [[ -d "fuzz/corpus/$name" ]] && seeds=("fuzz/corpus/$name")
  echo "fuzz: $name for ${seconds}s"
  log="build/fuzz/$name.log"
  rc=0
  "$bin" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
    -artifact_prefix=build/fuzz/artifacts/ "$work" "${seeds[@]}" >"$log" 2>&1 || rc=$?
  grep -E 'stat::number_of_executed_units|ERROR|SUMMARY' "$log" || true
  if [[ $rc -ne 0 ]]; then tail -50 "$log"; echo "fuzz: $name FAILED (exit $rc)"; exit 1; fi
  ran=$((ran + 1))
done
echo "fuzz: $ran targets ran"
