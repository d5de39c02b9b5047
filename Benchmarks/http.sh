#!/bin/sh
# HTTP front benchmark (issue 12): the same LibriVox file through the OpenAI-compatible HTTP
# front (curl on the Unix socket), through the socket protocol (the PyPI wyoming client) and
# through the CLI (earshot transcribe), interleaved and warm, against one release-built daemon;
# prints median wall time of each and the ratios in one run. Goal: HTTP <= 1.05x the socket path.
# Extra arguments go to http-bench.py: --runs N (default 9), --file WAV. Set EARSHOT_SCRATCH_PATH
# to build in another scratch path than .build.
set -eu
cd "$(dirname "$0")/.."
. Benchmarks/release-build.sh
for product in earshotd earshot-engine earshot; do build --product "$product"; done
exec python3 Benchmarks/http-bench.py --bin "$(build --show-bin-path)" "$@"
