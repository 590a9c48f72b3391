#!/usr/bin/env bash
# Fetches the headers the cuDNN prefill route compiles against (src/ops/cuda/attention_cudnn.cpp)
# into .deps/cudnn/include, where cmake/cudnn.cmake finds them: cudnn-frontend's header-only C++
# API (PyPI nvidia-cudnn-frontend) and cuDNN's own C headers (PyPI nvidia-cudnn-cu13; only its
# include/ folder is kept, not its 1.2 GB of libraries). Both versions are pinned: the route was
# written against them. The library itself is opened at run time (libcudnn.so.9 of the system or
# of PyTorch's wheels), so nothing of cuDNN is linked or shipped.
# PYTHON names the interpreter whose pip downloads (default python3; the CI scripts pass their venv's).
set -euo pipefail
cd "$(dirname "$0")/.."
py=${PYTHON:-python3}
frontend="nvidia-cudnn-frontend==1.32.0"
backend="nvidia-cudnn-cu13==9.28.1.4"
dest=.deps/cudnn
stamp=$dest/.versions
if [ -f "$dest/include/cudnn_frontend.h" ] && [ -f "$dest/include/cudnn.h" ] &&
    [ "$(cat "$stamp" 2>/dev/null)" = "$frontend $backend" ]; then
    echo "cuDNN headers: $dest/include ($(cat "$stamp"))"
    exit 0
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$py" -m pip download -q --disable-pip-version-check --no-deps --only-binary=:all: \
    --python-version 3.11 --platform manylinux_2_27_x86_64 --platform manylinux_2_28_x86_64 -d "$tmp" "$frontend" "$backend"
rm -rf "$dest" && mkdir -p "$dest/include"
"$py" - "$tmp" "$dest/include" <<'PY'
import pathlib, sys, zipfile
src, dest = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2])
for wheel in src.glob("*.whl"):
    with zipfile.ZipFile(wheel) as z:
        for name in z.namelist():
            for prefix in ("include/", "nvidia/cudnn/include/"):
                if name.startswith(prefix) and not name.endswith("/"):
                    out = dest / name[len(prefix):]
                    out.parent.mkdir(parents=True, exist_ok=True)
                    out.write_bytes(z.read(name))
PY
echo "$frontend $backend" > "$stamp"
echo "cuDNN headers: $dest/include ($frontend $backend)"
