#!/bin/sh
# Protocol fuzz benchmark (issue 8): at least 10^6 seeded hostile frames against the real earshotd
# (release build) with the PocketSphinx dictation model installed (Scripts/setup.sh's embedded
# catalog); prints throughput, the daemon's resident memory (idle, peak, after) and whether it
# survived and still answers. Extra arguments go to fuzz-bench: --frames N (default 1000000),
# --seed S. Set EARSHOT_SCRATCH_PATH to build in another scratch path than .build.
set -eu
cd "$(dirname "$0")/.."
. Benchmarks/release-build.sh
run_bench fuzz-bench "$@"
