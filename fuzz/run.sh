#!/usr/bin/env bash
# Runs every cargo-fuzz target for SECONDS each (default 600) and prints, per target, the
# executions and whether it crashed. Exit status 1 when any target crashed.
#   fuzz/run.sh [SECONDS] [TARGET...]        JOBS=2 fuzz/run.sh 600   (two targets at a time)
#   fuzz/run.sh --build-only                 builds the targets, runs none
# FUZZ_SANITIZER (default address) is cargo fuzz's -s: `none` builds and runs faster, and still
# finds every panic, which is what the safe Rust readers can do wrong.
set -uo pipefail
# A closed stdout (`| head -1`) drops the report lines; the status still says whether a target crashed.
trap '' PIPE
cd "$(dirname "$0")"
build_only=false
if [ "${1:-}" = --build-only ]; then build_only=true && shift; fi
seconds="${1:-600}"
shift $(( $# > 0 ? 1 : 0 ))
mkdir -p logs
sanitizer="${FUZZ_SANITIZER:-address}"
cargo +nightly fuzz build -O -s "$sanitizer" >/dev/null 2>logs/build.log || {
  echo "fuzz: build failed (see fuzz/logs/build.log)" >&2
  exit 2
}
if $build_only; then exit 0; fi
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
  mapfile -t targets < <(cargo +nightly fuzz list)
fi
jobs="${JOBS:-1}"

run_one() {
  local t="$1"
  mkdir -p "corpus/$t"
  cargo +nightly fuzz run -O -s "$sanitizer" "$t" "corpus/$t" -- -max_total_time="$seconds" \
    -print_final_stats=1 -rss_limit_mb=4096 >"logs/$t.log" 2>&1
  local status=$?
  local execs
  execs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "logs/$t.log" | grep -o '[0-9]*$' | tail -1)
  if [ "$status" -eq 0 ]; then
    printf '%-12s %6ss  %12s executions  0 crashes\n' "$t" "$seconds" "${execs:-?}" 2>/dev/null
  else
    printf '%-12s %6ss  %12s executions  CRASH (fuzz/logs/%s.log, fuzz/artifacts/%s/)\n' \
      "$t" "$seconds" "${execs:-?}" "$t" "$t" 2>/dev/null
  fi
  return "$status"
}

failed=0
running=0
for t in "${targets[@]}"; do
  run_one "$t" &
  running=$((running + 1))
  if [ "$running" -ge "$jobs" ]; then
    wait -n || failed=1
    running=$((running - 1))
  fi
done
while [ "$running" -gt 0 ]; do
  wait -n || failed=1
  running=$((running - 1))
done
exit "$failed"
