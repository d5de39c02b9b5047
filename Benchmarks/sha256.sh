#!/bin/sh
# SHA-256 verification throughput: Earshot's FileDigest (OpenSSL EVP) against coreutils sha256sum on
# the same random file (default 1 GiB, created once and reused), best of 3 runs each, warm page cache.
# Goal (issue 3): ratio >= 1.0x. Extra arguments go to earshot-bench: --size MiB, --runs N, --file PATH.
# The data file lives in $EARSHOT_BENCH_DIR (else $XDG_CACHE_HOME/earshot-bench, else ~/.cache/earshot-bench).
set -eu
cd "$(dirname "$0")/.."
swift build -c release --product earshot-bench
exec "$(swift build -c release --show-bin-path)/earshot-bench" "$@"
