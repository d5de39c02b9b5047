# Sourced by the benchmark scripts: `build ARGS…` runs a release build, in $EARSHOT_SCRATCH_PATH
# when set (another scratch path than .build).
build() {
    if [ -n "${EARSHOT_SCRATCH_PATH:-}" ]; then
        swift build -c release --scratch-path "$EARSHOT_SCRATCH_PATH" "$@"
    else
        swift build -c release "$@"
    fi
}
