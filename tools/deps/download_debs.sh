#!/usr/bin/env bash
# On a connected Debian 12 machine: downloads the .deb files of tools/deps/packages.txt into
# .deps/debs (ignored by git) for hosts without network or Debian -dev packages.
set -euo pipefail
cd "$(dirname "$0")/../.."
mkdir -p .deps/debs
cd .deps/debs
grep -v '^#' ../../tools/deps/packages.txt | xargs apt-get download
ls -1 *.deb
