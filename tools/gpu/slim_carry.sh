#!/usr/bin/env bash
# The device copies every tracked file (about 62 MB) and at most 64 MiB in all, so a pack of
# binaries (ninfer + test_cuda_bundle: ~11.4 MB, tools/gpu/pack_binaries.sh) no longer fits beside
# the whole tree. For one device run, `slim_carry.sh on PATH...` takes PATHs (what the run does not
# need) out of the index and hides them with .git/info/exclude, locally and uncommitted;
# `slim_carry.sh off` restores both. Never commit in between. The CUDA bundle (less CudaVision:
# BUNDLE_EXCLUDE=":*CudaVision.*") and the GPU scripts need none of these four (54 MB left), but
# the tree has grown past room for a ~13 MB pack beside them; leaving out the demo drafter too
# (47 MB left) costs CudaDFlashAcceptance (exclude it: ":*CudaDFlashAcceptance.*"):
#   bash tools/gpu/slim_carry.sh on tests/fixtures_vision bench/results tests/fixtures_text \
#       tests/e2e models/ninfer-demo/dflash2 tests/fixtures_dflash
#   <device run>; bash tools/gpu/slim_carry.sh off
set -euo pipefail
cd "$(dirname "$0")/../.."
mkdir -p .git/info
state=.git/info/ninfer-slim-carry
case "${1:-}" in
on)
    shift
    [ $# -gt 0 ] || { echo "usage: slim_carry.sh on PATH..."; exit 2; }
    [ -e "$state" ] && { echo "slim_carry: already on (paths in $state)"; exit 2; }
    cp .git/info/exclude "$state.exclude" 2>/dev/null || : > "$state.exclude"
    printf '%s\n' "$@" > "$state"
    for p in "$@"; do
        echo "/${p%/}/" >> .git/info/exclude
        git rm -r -q --cached "$p"
    done
    echo "slim_carry: tracked files now $(git ls-files -z | xargs -0 du -cb | tail -1 | cut -f1) bytes"
    ;;
off)
    [ -e "$state" ] || exit 0
    while read -r p; do git reset -q -- "$p"; done < "$state"
    cp "$state.exclude" .git/info/exclude
    rm -f "$state" "$state.exclude"
    git status --short | head -5
    ;;
*) echo "usage: slim_carry.sh on PATH... | off"; exit 2 ;;
esac
