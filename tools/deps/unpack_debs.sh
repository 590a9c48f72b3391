#!/usr/bin/env bash
# On an offline host: unpacks .deps/debs/*.deb into .deps/root, where cmake/dependencies.cmake
# finds them (NINFER_DEPS_ROOT). Then configure and build as usual.
set -euo pipefail
cd "$(dirname "$0")/../.."
mkdir -p .deps/root
for deb in .deps/debs/*.deb; do dpkg-deb -x "$deb" .deps/root; done
# Debian points libopenblas.so at /etc/alternatives; make the links local.
blas=.deps/root/usr/lib/x86_64-linux-gnu/openblas-openmp
[ -e "$blas/libopenblas.so.0" ] && ln -sf libopenblas.so.0 "$blas/libopenblas.so" || true
echo "unpacked into .deps/root"
