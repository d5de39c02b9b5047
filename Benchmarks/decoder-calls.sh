#!/usr/bin/env bash
# The decoder graph's calls as this converter writes them against another revision's (issue 29):
# Whisper tiny.en and base converted by both (Scripts/models/whisper-ct2-to-onnx.py as it is and
# as it was at --baseline REV, default HEAD), then each kind of call Earshot's decoder makes timed
# on both with ONNX Runtime (2 threads, best of 15): a beam-5 step, a first call without and with
# a prompt, and a word alignment. Prints the times, their ratios, and whether the logits the
# decoder reads are the same.
#
#   Benchmarks/decoder-calls.sh [--baseline REV]
#
# The conversions are written into $EARSHOT_BENCH_DIR/decoder-calls (else
# $XDG_CACHE_HOME/earshot-bench, else ~/.cache/earshot-bench) from the CTranslate2 directories
# vs-peers.sh assembles. Needs Scripts/setup.sh (python3 with numpy, onnx and onnxruntime).
set -euo pipefail
cd "$(dirname "$0")/.."
say() { printf 'decoder-calls: %s\n' "$*" >&2; }
die() { printf 'decoder-calls: error: %s\n' "$*" >&2; exit 1; }
PYTHON=${PYTHON:-python3}
BENCH_DIR=${EARSHOT_BENCH_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/earshot-bench}
MODEL_CACHE=${EARSHOT_MODEL_CACHE:-/var/cache/earshot/models}
CONVERTER=Scripts/models/whisper-ct2-to-onnx.py
baseline=HEAD
while [ $# -gt 0 ]; do
  case $1 in
    --baseline) baseline=${2:?--baseline needs a revision}; shift 2 ;;
    *) die "usage: Benchmarks/decoder-calls.sh [--baseline REV]" ;;
  esac
done
. Benchmarks/bench-python.sh
bench_ct2_models
out=$BENCH_DIR/decoder-calls
rm -rf "$out"
mkdir -p "$out/baseline" "$out/current"
git show "$baseline:$CONVERTER" > "$out/baseline/converter.py" || die "no $CONVERTER at $baseline"
cp "$CONVERTER" "$out/current/converter.py"
for side in baseline current; do
  for entry in "${MODELS[@]}"; do
    IFS='|' read -r model name wheels ct2dir parts <<<"$entry"
    say "converting $model ($side)"
    "$PYTHON" "$out/$side/converter.py" --model-dir "$BENCH_DIR/ct2/$model" --out-dir "$out/$side/$name" --name "$name" >/dev/null ||
      die "conversion of $model ($side) failed"
  done
done
exec "$PYTHON" Benchmarks/decoder-calls.py "$out/baseline" "$out/current" "$baseline"
