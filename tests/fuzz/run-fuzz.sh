#!/usr/bin/env bash
# run-fuzz.sh FUZZER SEED_DIR SECONDS - a bounded libFuzzer run over a copy of
# the seed corpus (the seeds themselves are never modified).
set -euo pipefail
fuzzer=$1 seeds=$2 secs=$3
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/corpus"
cp "$seeds"/*.onnx "$work/corpus/"
"$fuzzer" "$work/corpus" -max_total_time="$secs" -max_len=65536 -timeout=10 \
  -rss_limit_mb=2048 -print_final_stats=1 -artifact_prefix="$work/" 2>&1 | tail -n 20
