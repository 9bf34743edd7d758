#!/usr/bin/env bash
# The README's two commands on a fresh clone, as a new user runs them, timed: the main command
# until JupyterLab serves, then the test command. Empty target folder, cargo home, pip cache and
# attention-lab cache, so every crate is downloaded and compiled (a fresh machine but for the
# Rust toolchain and Python). Prints the two times and which evcxr crates the tests compiled.
#   scripts/fresh_clone.sh NAME REV [PORT]    (writes /tmp/fresh-NAME*; BENCHMARKS.md, "A fresh machine")
set -u
name=$1 rev=$2 port=${3:-8897}
repo=$(cd "$(dirname "$0")/.." && pwd)
d=/tmp/fresh-$name
rm -rf "$d" "$d"-*
git clone -q "$repo" "$d" && cd "$d" && git checkout -q "$rev" || exit 2
export CARGO_TARGET_DIR=$d/target ATTENTION_LAB_CACHE=$d-cache CARGO_HOME=$d-cargo PIP_CACHE_DIR=$d-pip
export PATH=$d-cargo/bin:$PATH
mkdir -p "$d-cargo"
start=$(date +%s.%N)
# Its own session, so that stopping it below stops everything it started, whatever its version.
setsid cargo run -p attention-lab-cli -- lab --no-browser --port "$port" >"$d/lab.out" 2>"$d/lab.err" &
pid=$!
until grep -q "127.0.0.1:$port" "$d/lab.out" 2>/dev/null; do
  kill -0 "$pid" 2>/dev/null || { echo "lab stopped:"; tail -5 "$d/lab.err"; exit 1; }
  sleep 1
done
echo "main command (lab) served after $(echo "$(date +%s.%N) - $start" | bc) s"
kill -TERM -- -"$pid"
sleep 5
kill -KILL -- -"$pid" 2>/dev/null
start=$(date +%s.%N)
cargo test --workspace >"$d/test.out" 2>&1
echo "test command: status $? after $(echo "$(date +%s.%N) - $start" | bc) s"
grep -E '^\s+Compiling (evcxr|evcxr_jupyter) ' "$d/test.out" || echo "evcxr not compiled again"
grep -E '^test result' "$d/test.out" | awk '{p += $4; f += $6} END {print p " passed, " f " failed"}'
