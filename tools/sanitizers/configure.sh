#!/usr/bin/env bash
# Configures build-asan/: clang, AddressSanitizer + UndefinedBehaviorSanitizer on everything,
# the CPU backend only, and the libFuzzer targets of fuzz/ (built only when asked for, so
# tools/ci_sanitize.sh and tools/ci_fuzz.sh share one build). -O1 keeps the suite within CI's
# budget while catching what -O0 catches; Debug (no NDEBUG) keeps the asserts.
# Installs clang and its sanitizer/fuzzer runtimes (Debian 12: libclang-rt-14-dev) if missing.
set -euo pipefail
cd "$(dirname "$0")/../.."

need=()
command -v clang >/dev/null && command -v clang++ >/dev/null || need+=(clang)
# clang prints the bare name back when it does not find the runtime.
[ -e "$(clang -print-file-name=libclang_rt.fuzzer-x86_64.a 2>/dev/null || echo none)" ] ||
    need+=(libclang-rt-14-dev)
if [ ${#need[@]} -gt 0 ]; then
    sudo=""
    [ "$(id -u)" -ne 0 ] && sudo="sudo"
    $sudo apt-get update -q
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q --no-install-recommends "${need[@]}"
fi

san="-fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer"
CC=clang CXX=clang++ cmake -S . -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=Debug \
    -DNINFER_CUDA=OFF -DNINFER_WERROR=OFF -DNINFER_FUZZ=ON \
    -DCMAKE_C_FLAGS="$san" -DCMAKE_CXX_FLAGS="$san" \
    -DCMAKE_C_FLAGS_DEBUG="-O1 -g" -DCMAKE_CXX_FLAGS_DEBUG="-O1 -g" \
    -DCMAKE_EXE_LINKER_FLAGS="-fsanitize=address,undefined"
