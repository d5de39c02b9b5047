# Sourced by the benchmark scripts: `build ARGS…` runs a release build, in $EARSHOT_SCRATCH_PATH
# when set (another scratch path than .build).
build() {
    if [ -n "${EARSHOT_SCRATCH_PATH:-}" ]; then
        swift build -c release --scratch-path "$EARSHOT_SCRATCH_PATH" "$@"
    else
        swift build -c release "$@"
    fi
}

# `run_bench PRODUCT ARGS…`: builds earshotd, earshot and the benchmark PRODUCT in release mode,
# then runs PRODUCT with ARGS (it finds the daemon and CLI beside itself).
run_bench() {
    product=$1
    shift
    for built in earshotd earshot-engine earshot "$product"; do
        build --product "$built"
    done
    exec "$(build --show-bin-path)/$product" "$@"
}
