#!/usr/bin/env bash
# The main job on a fresh machine: installs dependencies, builds, and answers a coding question
# with the embedded default model (models/ninfer-demo, README "The demo model"), on the CPU.
# Without that model it generates from a committed tiny fixture (random weights, so the ids are
# noise; they equal HF transformers' output token for token).
set -euo pipefail
cd "$(dirname "$0")/.."
# Progress goes to stderr, one line per stage plus ninja's [done/total] lines; the answer to stdout.
step() { printf '==> %s\n' "$*" >&2; }
step "1/3 dependencies (tools/setup_debian.sh: apt packages, Python venv)"
bash tools/setup_debian.sh >&2
# Only the binary: the tests (tools/run_tests.sh) build the rest.
step "2/3 building ninfer into build/ (Release; the first build takes a few minutes)"
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >&2
cmake --build build --target ninfer -j "$(nproc 2>/dev/null || echo 2)" >&2
step "3/3 generating on the CPU"
if [ -f models/ninfer-demo/config.json ]; then
    exec ./build/apps/ninfer/ninfer run --no-thinking --max-new 200 --temperature 0.6 \
        --top-p 0.95 --top-k 20 --seed 1 \
        --prompt "Write a Python function \`is_prime\` that checks whether a number is prime." "$@"
fi
model=tests/fixtures/moe_vlm_per_expert
prompt=$(python3 -c "import json;print(','.join(map(str,json.load(open('$model/reference.json'))['cases'][0]['prompt'])))")
./build/apps/ninfer/ninfer run --model "$model" --prompt-ids "$prompt" --max-new 24 --greedy "$@"
