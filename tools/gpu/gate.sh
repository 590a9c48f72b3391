# Sourced by the GPU scripts (tools/gpu/*.sh): steps whose failure makes the script fail.
#   gate_test NAME TIMEOUT CMD...  a test: exit 1 now when it fails or is missing (what follows
#                                  a failing cuda test measures nothing worth keeping); prints
#                                  each failure with its values, and where the timeout cut the
#                                  run, the test it was in
#   gate_step NAME CMD...          a build/bench step: on failure, remember it and go on
#   gate_finish                    exit 1 when any gate_step failed, naming them
# Logs go to "$out" (the caller's output folder).
gate_failed=()

gate_test() {
    local name=$1 limit=$2
    shift 2
    if ! command -v "$1" > /dev/null 2>&1 && [ ! -x "$1" ]; then
        echo "== FAILED $name: $1 is missing (not built or not packed)"
        exit 1
    fi
    echo "== $name"
    # Line-buffered, so that a run the timeout cuts keeps every line it printed.
    timeout "$limit" stdbuf -oL -eL "$@" > "$out/$name.log" 2>&1
    local rc=$?
    grep -E "PASSED|FAILED|tests passed|\*\*\*" "$out/$name.log" | tail -20
    # Each failed expectation with its values (gtest prints them on the lines after "Failure").
    grep -A5 -E "Failure$" "$out/$name.log" | head -80
    if [ $rc -eq 124 ]; then
        echo "== $name: cut at ${limit} s after $(grep -c '^\[       OK \]' "$out/$name.log") passed" \
             "tests, in: $(grep '^\[ RUN      \]' "$out/$name.log" | tail -1)"
    fi
    if [ $rc -ne 0 ]; then
        echo "== FAILED $name (exit $rc; log $out/$name.log): stopping"
        exit 1
    fi
}

gate_step() {
    local name=$1
    shift
    "$@"
    local rc=$?
    if [ $rc -ne 0 ]; then
        echo "== FAILED $name (exit $rc)"
        gate_failed+=("$name")
    fi
    return 0
}

gate_finish() {
    if [ ${#gate_failed[@]} -gt 0 ]; then
        echo "== FAILED steps: ${gate_failed[*]}"
        exit 1
    fi
    echo "== all steps passed"
}
