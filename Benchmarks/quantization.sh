#!/usr/bin/env bash
# Which quantization each Whisper model ships with (issue 29): the converter's variants of tiny.en
# and base (Scripts/models/whisper-ct2-to-onnx.py) — float32 (the float reference), int8 as
# shipped, and int8 with 8 or 16 fc2 input units of each encoder layer kept in float (the split
# the decoder already has) — decoded by Earshot's own decoder in-process (beam 5, as final results)
# over the five LibriVox utterances, Sonnet I in parts of its lines, Beckett, and espeak-ng reading
# the licence sentences one by one. Prints each variant's WER per set and overall, with the word
# counts, its decode time and its files' size, beside the float32 reference.
#
#   Benchmarks/quantization.sh [--models tiny.en,base] [--sentences N] [--tails F,F,…] [--variants-only V,V,…]
#
# --tails also decodes with the shipped int8 variant and other tails of silence after the audio
# (feature frames, 10 ms each; the decoder appends 1000). --variants-only decodes only the variants
# named (fp32, int8, int8-enc8, int8-enc16) with the default tail.
#
# The variants are converted into $EARSHOT_BENCH_DIR/quantization (else
# $XDG_CACHE_HOME/earshot-bench, else ~/.cache/earshot-bench) from the CTranslate2 directories
# vs-peers.sh assembles; Needs Scripts/setup.sh (python3 with numpy, onnx and onnxruntime;
# espeak-ng, sox). Set EARSHOT_SCRATCH_PATH to build in another scratch path than .build.
set -euo pipefail
cd "$(dirname "$0")/.."
say() { printf 'quantization: %s\n' "$*" >&2; }
die() { printf 'quantization: error: %s\n' "$*" >&2; exit 1; }
PYTHON=${PYTHON:-python3}
BENCH_DIR=${EARSHOT_BENCH_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/earshot-bench}
MODEL_CACHE=${EARSHOT_MODEL_CACHE:-/var/cache/earshot/models}
CONVERTER=Scripts/models/whisper-ct2-to-onnx.py
. Benchmarks/bench-python.sh
bench_ct2_models
bench_sonnet "$BENCH_DIR/sonnet"

for entry in "${MODELS[@]}"; do
  IFS='|' read -r model name wheels ct2dir parts <<<"$entry"
  for variant in int8 int8-enc8 int8-enc16; do
    out=$BENCH_DIR/quantization/$model/$variant
    [ -f "$out/.done" ] && [ "$out/.done" -nt "$CONVERTER" ] && continue
    say "converting $model ($variant)"
    rm -rf "$out"
    outliers=${variant#int8-enc}
    [ "$variant" = int8 ] && outliers=0
    fp32=()
    [ "$variant" = int8 ] && fp32=(--fp32-dir "$BENCH_DIR/quantization/$model/fp32")
    "$PYTHON" "$CONVERTER" --model-dir "$BENCH_DIR/ct2/$model" --out-dir "$out" --name "$name" \
      --encoder-fc2-outliers "$outliers" "${fp32[@]}" >/dev/null || die "conversion of $model ($variant) failed"
    touch "$out/.done"
  done
done

. Benchmarks/release-build.sh
build --product quantization
exec "$(build --show-bin-path)/quantization" --variants "$BENCH_DIR/quantization" --sonnet "$BENCH_DIR/sonnet" \
  --scratch "$BENCH_DIR" "$@"
