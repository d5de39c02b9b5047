#!/bin/sh
# Fleet benchmark (issue 32): one upstream registry and one pull-through cache (Debian's
# docker-registry, Distribution 2.8) on loopback; ten real earshotd processes, each with its own
# state, install the same 4 MiB asset through the cache with earshotctl, one after another; then
# ten straight from the upstream (the baseline); then ten more at the same moment. Prints the
# upstream's blob GETs through the cache and without it (their ratio) and the per-daemon install
# times (earshotctl install, wall clock). It runs the fleet test (FleetTests), which also checks
# that the upstream count does not grow after the first daemon.
set -eu
cd "$(dirname "$0")/.."
swift build --build-tests >/dev/null
swift test --skip-build --no-parallel --filter 'FleetTests/tenDaemonsThroughOnePullThroughCache' 2>&1 | grep -E '^fleet:|✘|passed|failed'
