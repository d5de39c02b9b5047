#!/usr/bin/env bash
# Builds the embedded default catalog from models installed by Debian and PyPI packages (and the
# shared Whisper fixture when present), packs each as an asset archive, and signs the catalog with a
# minisign key generated on this machine. The daemon trusts that key by default
# ([Catalog] KeysDirectory) and reads the catalog from file:// ([Catalog] URL), so the assets install
# through the same download → verify → extract path as any other.
#   Scripts/make-embedded-catalog.sh [PREFIX]   (default /usr/local/share/earshot; run as root)
set -euo pipefail
cd "$(dirname "$0")/.."
PREFIX=${1:-/usr/local/share/earshot}
PY=${PYTHON:-python3}
WHISPER_DIR=${EARSHOT_WHISPER_FIXTURE:-$(cd .. && pwd)/shared/fixtures/models/whisper-tiny.en}
SILERO_VERSION=6.2.3

install -d -m 0755 "$PREFIX" "$PREFIX/catalog" "$PREFIX/assets" "$PREFIX/keys"
install -d -m 0700 "$PREFIX/signing"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# Deterministic archives: same input, same bytes, same SHA-256.
pack_tar() { # dir output compressor-flag
  tar --sort=name --mtime=@0 --owner=0 --group=0 --numeric-owner --format=gnu -C "$1" -cf - . | $3 > "$2"
}
asset_json() { # id version kind engine locales-json caps-json file format files-json license description installed_size
  local sha size
  sha=$(sha256sum "$7" | cut -d' ' -f1)
  size=$(stat -c %s "$7")
  cat <<JSON
    {
      "id": "$1", "version": $2, "kind": "$3", "engine": "$4", "locales": $5,
      "capabilities": $6,
      "size": $size, "installed_size": ${12}, "sha256": "$sha",
      "urls": ["file://$7"], "format": "$8", "files": $9,
      "license": "${10}", "description": "${11}"
    }
JSON
}

entries=()

# PocketSphinx US English (Debian pocketsphinx-en-us) as the dictation asset.
ps_model=/usr/share/pocketsphinx/model/en-us
if [ -d "$ps_model" ]; then
  mkdir -p "$work/ps"
  cp -r "$ps_model/en-us" "$work/ps/acoustic"
  cp "$ps_model/en-us.lm.bin" "$work/ps/language-model.lm.bin"
  cp "$ps_model/cmudict-en-us.dict" "$work/ps/dictionary.dict"
  out="$PREFIX/assets/pocketsphinx-en-us.tar.gz"
  pack_tar "$work/ps" "$work/ps.tar.gz" "gzip -n -9"
  cmp -s "$work/ps.tar.gz" "$out" 2>/dev/null || mv "$work/ps.tar.gz" "$out"
  bytes=$(du -sb "$work/ps" | cut -f1)
  entries+=("$(asset_json pocketsphinx-en-us 1 dictation pocketsphinx '["en-US"]' \
    '{"streaming": true, "volatile_results": true, "time_ranges": true, "alternatives": true, "confidence": true, "content_hints": ["shortForm", "customizedLanguage"]}' \
    "$out" tar.gz '{"acoustic_model": "acoustic/mdef", "language_model": "language-model.lm.bin", "dictionary": "dictionary.dict"}' \
    "BSD-2-Clause" "CMU Sphinx US English acoustic model, language model and dictionary" $((bytes + 65536)))")
fi

# Silero VAD (PyPI silero-vad) as the detector asset: the model file itself.
if [ ! -f "$PREFIX/assets/silero_vad.onnx" ]; then
  $PY -m pip download -q --no-deps --disable-pip-version-check -d "$work/wheel" "silero-vad==$SILERO_VERSION"
  $PY - "$work/wheel" "$PREFIX/assets/silero_vad.onnx" <<'PYTHON'
import glob, sys, zipfile
wheel = glob.glob(sys.argv[1] + "/silero_vad-*.whl")[0]
with zipfile.ZipFile(wheel) as z, open(sys.argv[2], "wb") as out:
    out.write(z.read("silero_vad/data/silero_vad.onnx"))
PYTHON
fi
out="$PREFIX/assets/silero_vad.onnx"
entries+=("$(asset_json silero-vad 1 detector sherpa-onnx-silero-vad '[]' \
  '{"streaming": true, "volatile_results": false, "time_ranges": true, "alternatives": false, "confidence": false, "content_hints": []}' \
  "$out" file '{"model": "silero_vad.onnx"}' "MIT" "Silero voice activity detector (v$SILERO_VERSION)" $(( $(stat -c %s "$out") + 4096 )))")

# Whisper tiny.en for sherpa-onnx (shared fixture), when present.
if [ -f "$WHISPER_DIR/tiny-encoder.int8.onnx" ]; then
  mkdir -p "$work/whisper"
  cp "$WHISPER_DIR"/tiny-encoder.int8.onnx "$WHISPER_DIR"/tiny-decoder.int8.onnx "$WHISPER_DIR"/tiny-tokens.txt "$work/whisper/"
  out="$PREFIX/assets/whisper-tiny-en.tar.zst"
  pack_tar "$work/whisper" "$work/whisper.tar.zst" "zstd -q -19 -T0"
  cmp -s "$work/whisper.tar.zst" "$out" 2>/dev/null || mv "$work/whisper.tar.zst" "$out"
  bytes=$(du -sb "$work/whisper" | cut -f1)
  entries+=("$(asset_json whisper-tiny-en 1 transcriber sherpa-onnx-whisper '["en-US", "en"]' \
    '{"streaming": false, "volatile_results": true, "time_ranges": true, "alternatives": false, "confidence": false, "content_hints": ["shortForm", "farField"]}' \
    "$out" tar.zst '{"encoder": "tiny-encoder.int8.onnx", "decoder": "tiny-decoder.int8.onnx", "tokens": "tiny-tokens.txt"}' \
    "MIT" "OpenAI Whisper tiny.en (int8, sherpa-onnx layout)" $((bytes + 65536)))")
else
  echo "make-embedded-catalog: no Whisper fixture at $WHISPER_DIR; the catalog has no transcriber asset" >&2
fi

# The catalog: a new version only when its assets changed.
assets=$(IFS=,; echo "${entries[*]}")
new_body="  \"assets\": [
$assets
  ]"
catalog="$PREFIX/catalog/catalog.json"
if [ -f "$catalog" ] && [ -f "$catalog.body" ] && [ "$(cat "$catalog.body")" = "$new_body" ]; then
  version=$($PY -c 'import json,sys; print(json.load(open(sys.argv[1]))["version"])' "$catalog")
else
  version=$(date +%s)
fi
printf '%s' "$new_body" > "$catalog.body"
cat > "$work/catalog.json" <<JSON
{
  "format": 1,
  "version": $version,
  "generated": "$(date -u +%Y-%m-%dT%H:%M:%SZ)",
$new_body
}
JSON
$PY -m json.tool "$work/catalog.json" > /dev/null

# Sign with this machine's key (created once, no password: it never leaves this machine).
key="$PREFIX/signing/embedded.key"
if [ ! -f "$key" ]; then
  minisign -G -W -p "$PREFIX/keys/embedded.pub" -s "$key" -f > /dev/null
  chmod 0600 "$key"
fi
if ! cmp -s "$work/catalog.json" "$catalog" 2>/dev/null || [ ! -f "$catalog.minisig" ]; then
  cp "$work/catalog.json" "$catalog"
  minisign -S -s "$key" -m "$catalog" -t "earshot embedded catalog version $version" > /dev/null
fi
chmod 0644 "$catalog" "$catalog.minisig" "$PREFIX/keys/embedded.pub" "$PREFIX"/assets/*
echo "make-embedded-catalog: $catalog (version $version, ${#entries[@]} assets), key $PREFIX/keys/embedded.pub"
