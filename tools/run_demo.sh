#!/usr/bin/env bash
# The main job on a fresh machine: installs dependencies, builds, and generates from the
# embedded default model. Until the trained demo model lands this is a committed tiny fixture
# (random weights, so the ids are noise; they equal HF transformers' output token for token).
set -euo pipefail
cd "$(dirname "$0")/.."
bash tools/setup_debian.sh
bash tools/build.sh > /dev/null
model=tests/fixtures/moe_vlm_per_expert
prompt=$(python3 -c "import json;print(','.join(map(str,json.load(open('$model/reference.json'))['cases'][0]['prompt'])))")
./build/apps/ninfer/ninfer run --model "$model" --prompt-ids "$prompt" --max-new 24 --greedy "$@"
