#!/usr/bin/env bash
# The main job on a fresh machine: installs dependencies, builds, and answers a coding question
# with the embedded default model (models/ninfer-demo, README "The demo model"), on the CPU.
# Without that model it generates from a committed tiny fixture (random weights, so the ids are
# noise; they equal HF transformers' output token for token).
set -euo pipefail
cd "$(dirname "$0")/.."
bash tools/setup_debian.sh
bash tools/build.sh > /dev/null
if [ -f models/ninfer-demo/config.json ]; then
    exec ./build/apps/ninfer/ninfer run --no-thinking --max-new 200 --temperature 0.6 \
        --top-p 0.95 --top-k 20 --seed 1 \
        --prompt "Write a Python function \`is_prime\` that checks whether a number is prime." "$@"
fi
model=tests/fixtures/moe_vlm_per_expert
prompt=$(python3 -c "import json;print(','.join(map(str,json.load(open('$model/reference.json'))['cases'][0]['prompt'])))")
./build/apps/ninfer/ninfer run --model "$model" --prompt-ids "$prompt" --max-new 24 --greedy "$@"
