#!/bin/sh
# Speech benchmark (issue 4): the real earshotd (release build) against the same session code
# called in-process, ratios side by side in one run:
#   (a) a >60 s recording (the five LibriVox utterances with 1 s of silence, 3 times) transcribed by
#       the daemon vs in-process SpeechService (WhisperModel + SileroDetector): goal ratio <= 1.05x;
#   (b) 8 concurrent sessions vs 1: throughput ratio, daemon memory, the shared model counted once;
#   (c) latency from the last audio chunk (sent at the live pace) to the final result.
# Extra arguments go to speech-bench: --runs N (best of N, default 3), --sessions N (default 8),
# --repeats N (passes over the utterances for (a), default 3). Needs Scripts/setup.sh's embedded
# catalog with the whisper-base asset (the default transcriber). Set EARSHOT_SCRATCH_PATH to build in another scratch path
# than .build.
set -eu
cd "$(dirname "$0")/.."
. Benchmarks/release-build.sh
run_bench speech-bench "$@"
