#!/usr/bin/env bash
# run-fuzz.sh FUZZER SEED_DIR SECONDS [SEED_DIR...] - a bounded libFuzzer run
# over a copy of the seed corpus (the seeds themselves are never modified).
# The fuzzer's own files (the model it writes, its data files) go to a
# temporary folder removed at the end.
set -euo pipefail
fuzzer=$1 seeds=$2 secs=$3
shift 3
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/corpus" "$work/tmp"
for dir in "$seeds" "$@"; do
  cp "$dir"/*.onnx "$work/corpus/"
done
TMPDIR="$work/tmp" "$fuzzer" "$work/corpus" -max_total_time="$secs" -max_len=65536 -timeout=10 \
  -rss_limit_mb=2048 -print_final_stats=1 -artifact_prefix="$work/" 2>&1 | tail -n 20
