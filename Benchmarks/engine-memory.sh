#!/usr/bin/env bash
# Anonymous resident memory (RssAnon) of earshotd fresh and after Whisper base was loaded, used and
# unloaded, beside the engine alone: engine-memory/engine-alone.c creates, uses and destroys the
# silero VAD (sherpa-onnx's C API) and Whisper base (ONNX Runtime's), trimming the heap as the daemon
# does. What the engine keeps after its objects are gone (ONNX Runtime's and sherpa-onnx's
# registries and globals) stayed in the daemon while the engines ran in-process; they now run in
# earshot-engine, which ends with the last model, so it leaves with that process. Issue 10's goals:
# <= 8 MiB fresh, <= 12 MiB after an unload.
#
#   Benchmarks/engine-memory.sh
#
# Needs Scripts/setup.sh (the embedded catalog and models, the sherpa-onnx header and library, the
# ONNX Runtime header in .deps, espeak-ng, sox) and a C compiler. Builds in $EARSHOT_BENCH_DIR (else $XDG_CACHE_HOME/earshot-bench, else
# ~/.cache/earshot-bench); set EARSHOT_SCRATCH_PATH to build Earshot in another scratch path.
set -euo pipefail
cd "$(dirname "$0")/.."
say() { printf 'engine-memory: %s\n' "$*" >&2; }
die() { say "error: $*"; exit 1; }
BENCH_DIR=${EARSHOT_BENCH_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/earshot-bench}
SHARE=/usr/local/share/earshot
CLIP=/usr/share/pocketsphinx/test/data/librivox/sense_and_sensibility_01_austen_64kb-0870.wav
[ -f "$SHARE/models/whisper-base/base-decoder.int8.onnx" ] || die "no Whisper base in $SHARE/models: run Scripts/setup.sh"
mkdir -p "$BENCH_DIR"
[ -f .deps/onnxruntime-dev/usr/include/onnxruntime/onnxruntime_c_api.h ] || die "no ONNX Runtime header in .deps: run Scripts/setup.sh"
cc -O2 -o "$BENCH_DIR/engine-alone" Benchmarks/engine-memory/engine-alone.c -I/usr/local/include \
  -I.deps/onnxruntime-dev/usr/include/onnxruntime -L/usr/local/lib -lsherpa-onnx-c-api -lonnxruntime -Wl,-rpath,/usr/local/lib

. Benchmarks/release-build.sh
for product in earshotd earshot-engine earshot earshotctl; do build --product "$product" > /dev/null; done
bin=$(build --show-bin-path)

rss_anon() { awk '/^RssAnon:/ {print $2}' "/proc/$1/status"; }
work=$(mktemp -d)
daemon=
trap '[ -n "$daemon" ] && kill "$daemon" 2>/dev/null; rm -rf "$work"' EXIT
mkdir -p "$work/run"
: > "$work/earshotd.conf"
"$bin/earshotd" --user --socket "$work/run/earshot.sock" --state-dir "$work/state" --cache-dir "$work/cache" \
  --config "$work/earshotd.conf" 2> "$work/log" &
daemon=$!
for _ in $(seq 100); do [ -S "$work/run/earshot.sock" ] && break; sleep 0.1; done
[ -S "$work/run/earshot.sock" ] || die "earshotd did not start: $(cat "$work/log")"
fresh=$(rss_anon "$daemon")
cli() { "$bin/earshot" --socket "$work/run/earshot.sock" "$@"; }
cli install --locale en-US --module transcriber > /dev/null 2>&1 || [ $? -eq 2 ] || die "install failed"
for _ in 1 2 3; do cli transcribe "$CLIP" > /dev/null; done
loaded=$(rss_anon "$daemon")
engine_pid=$("$bin/earshotctl" --socket "$work/run/earshot.sock" stats --json |
  python3 -c 'import json, sys; e = json.load(sys.stdin).get("engine_process"); print(e["pid"] if e else "")')
[ -n "$engine_pid" ] || die "no engine process while Whisper is loaded"
engine_loaded=$(rss_anon "$engine_pid")
engine_loaded_peak=$(awk '/^VmHWM:/ {print $2}' "/proc/$engine_pid/status")
# Issue 29: one model, whatever its sessions' language and task: English, identified and
# translated files and a live stream, all at once.
espeak-ng -v es -s 140 -w "$work/es.wav" "Buenos días. Mi hermano trabaja en un hospital muy grande de la ciudad." ||
  die "espeak-ng failed"
# How the four overlap varies from run to run, and the peak with it: five rounds, the peak over
# all of them.
for _ in 1 2 3 4 5; do
  mixed=()
  cli transcribe "$CLIP" > /dev/null & mixed+=($!)
  cli transcribe --locale auto "$work/es.wav" > /dev/null & mixed+=($!)
  cli transcribe --locale auto --translate "$work/es.wav" > /dev/null & mixed+=($!)
  sox -D "$CLIP" -t raw -r 16000 -c 1 -b 16 -e signed - | cli transcribe --live --rate 16000 > /dev/null & mixed+=($!)
  wait "${mixed[@]}" || die "a call of the mixed load failed"
done
engine_mixed=$(awk '/^VmHWM:/ {print $2}' "/proc/$engine_pid/status")
models_mixed=$("$bin/earshotctl" --socket "$work/run/earshot.sock" stats --json |
  python3 -c 'import json, sys; print(" ".join(m["key"] for m in json.load(sys.stdin)["models"]))')
cli transcribe --keep-alive 0 "$CLIP" > /dev/null
for _ in $(seq 100); do
  "$bin/earshotctl" --socket "$work/run/earshot.sock" stats --json |
    python3 -c 'import json, sys; sys.exit(0 if not json.load(sys.stdin)["models"] else 1)' && break
  sleep 0.1
done
sleep 1 # the trim after the last engine object goes is queued
unloaded=$(rss_anon "$daemon")
engine_gone=yes
[ -d "/proc/$engine_pid" ] && engine_gone="no (still running)"

alone=$("$BENCH_DIR/engine-alone" "$SHARE/assets/silero_vad.onnx" "$SHARE/models/whisper-base" base) || die "engine-alone failed"
read -r engine_start engine_vad engine_used engine_unloaded < <(awk '{printf "%s ", $2} END {print ""}' <<<"$alone")
mib() { awk -v kb="$1" 'BEGIN {printf "%.1f MiB", kb / 1024}'; }
echo "engine-memory: RssAnon, Whisper base, 2 threads"
echo "  earshotd fresh                          $(mib "$fresh")   (goal <= 8 MiB)"
echo "  earshotd with Whisper base loaded       $(mib "$loaded")"
echo "  its engine process then (earshot-engine) $(mib "$engine_loaded")   (holds the model)"
echo "  engine peak RSS, English files alone     $(mib "$engine_loaded_peak")"
echo "  engine peak RSS, English + auto + translated files + a live stream at once (5 rounds)  $(mib "$engine_mixed")   (models loaded: $models_mixed)"
awk -v m="$engine_mixed" -v l="$engine_loaded_peak" 'BEGIN { printf "  ratio mixed / English alone: %.2fx (issue 29 goal <= 1.3x)\n", m / l }'
echo "  earshotd after load, 8 calls, unload    $(mib "$unloaded")   (goal <= 12 MiB); engine process gone: $engine_gone"
echo "  engine alone at start                   $(mib "$engine_start")"
echo "  engine alone after the VAD went         $(mib "$engine_vad")"
echo "  engine alone while Whisper is loaded    $(mib "$engine_used")"
echo "  engine alone after Whisper went         $(mib "$engine_unloaded")"
awk -v d="$unloaded" -v f="$fresh" -v e="$engine_unloaded" -v s="$engine_start" 'BEGIN {
  printf "  kept after an unload: earshotd %.1f MiB over fresh, the engine alone %.1f MiB over its start (ratio %.2fx)\n",
         (d - f) / 1024, (e - s) / 1024, (d - f) / (e - s) }'
