#!/usr/bin/env bash
# The CPU test suite under AddressSanitizer + UndefinedBehaviorSanitizer (clang, build-asan/,
# see tools/sanitizers/configure.sh): builds the gtest executables of the chosen labels and
# runs them with ctest. Every test labelled unit and ops by default; NINFER_SANITIZE_LABELS
# picks others (e.g. 'unit|ops|model': the model tests take too long for CI's budget). Any
# sanitizer report aborts its test (-fno-sanitize-recover=all, halt_on_error), failing the run.
set -euo pipefail
cd "$(dirname "$0")/.."
bash tools/sanitizers/configure.sh

# The executables behind the labels, named by the globs of tests/CMakeLists.txt:
# unit = tests/{unit,text,server}, ops = tests/ops, model = tests/model.
labels=${NINFER_SANITIZE_LABELS:-unit|ops}
dirs=()
[[ "|$labels|" == *"|unit|"* ]] && dirs+=(unit text server)
[[ "|$labels|" == *"|ops|"* ]] && dirs+=(ops)
[[ "|$labels|" == *"|model|"* ]] && dirs+=(model)
targets=()
for d in "${dirs[@]}"; do
    for src in tests/"$d"/test_*.cpp; do targets+=("$(basename "$src" .cpp)"); done
done
jobs=$(nproc 2>/dev/null || echo 2)
cmake --build build-asan -j "$jobs" --target "${targets[@]}"

# Leaks are errors too; a UBSan report prints its stack and stops the test.
export ASAN_OPTIONS="detect_leaks=1"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
ctest --test-dir build-asan -L "$labels" --output-on-failure -j "$jobs" --no-tests=error
echo "sanitized tests passed ($labels)"
