#!/bin/sh
# Install benchmark: a 200 MiB asset (tar.gz of random data) from nginx on loopback through the real
# earshotd (request -> result: download, SHA-256, extract, fsync, commit) against curl -o + tar -xzf
# of the same file from the same server, best of 3 each, both times and the ratio side by side.
# Goal (issue 3): ratio <= 1.2x. Extra arguments go to install-bench.py: --size MiB, --runs N,
# --dir DIR, --keep. Builds earshotd in release mode first; set EARSHOT_SCRATCH_PATH to build in
# another scratch path than .build. The data lives in $EARSHOT_BENCH_DIR (else
# $XDG_CACHE_HOME/earshot-bench, else ~/.cache/earshot-bench).
set -eu
cd "$(dirname "$0")/.."
. Benchmarks/release-build.sh
build --product earshotd
bin="$(build --show-bin-path)"
exec python3 Benchmarks/install-bench.py --earshotd "$bin/earshotd" "$@"
