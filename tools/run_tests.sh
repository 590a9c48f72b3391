#!/usr/bin/env bash
# The test command: installs dependencies, builds, runs every test that needs no GPU.
set -euo pipefail
cd "$(dirname "$0")/.."
bash tools/setup_debian.sh
bash tools/build.sh
jobs=$(nproc 2>/dev/null || echo 2)
ctest --test-dir build -LE cuda --output-on-failure -j "$jobs"
