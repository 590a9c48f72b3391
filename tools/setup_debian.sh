#!/usr/bin/env bash
# Installs what ninfer needs to build and test on Debian 12 (bookworm). Idempotent.
set -euo pipefail
packages=(build-essential cmake ninja-build ccache pkg-config python3
          libopenblas-openmp-dev nlohmann-json3-dev libcli11-dev libgtest-dev libgmock-dev
          libpcre2-dev libutf8proc-dev libedit-dev libcpp-httplib-dev python3-venv
          chromium)
# src/media: image decoders, FFmpeg (libswresample-dev for libavformat.pc), xxHash.
packages+=(libjpeg62-turbo-dev libpng-dev libwebp-dev libavformat-dev libavcodec-dev libavutil-dev
           libswscale-dev libswresample-dev libxxhash-dev)
missing=()
for p in "${packages[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
    sudo=""
    [ "$(id -u)" -ne 0 ] && sudo="sudo"
    $sudo apt-get update -q
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q --no-install-recommends "${missing[@]}"
fi
bash "$(dirname "$0")/setup_python.sh"
