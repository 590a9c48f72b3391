#!/usr/bin/env bash
# Builds CUDA targets here (no GPU needed: tools/ci_cuda_compile.sh's toolchain from NVIDIA's PyPI
# wheels, sm_90a) and packs them, stripped, with the shared libraries they need that the GPU
# image lacks (OpenBLAS, libgomp, libgfortran, libquadmath, the CUDA runtime) into
# .deps/gpu.tar.xz (ignored by git). Why: the working tree that travels to the device is capped
# at 64 MiB and the tracked tree is ~54 MiB, so the Debian .debs a device build needs (23 MB, 90
# more with the media packages) no longer fit beside it; a packed build of a few targets is ~8 MB
# and costs no device time to compile.
#   bash tools/gpu/pack_binaries.sh test_cuda_vision bench_vision ...
# On the device (run with carry [".deps/gpu.tar.xz"]):  source tools/gpu/unpack_binaries.sh
# then run /tmp/g/<target>. To pack `ninfer` itself, build without FFmpeg (its libraries are far
# over the budget): NINFER_VIDEO=OFF bash tools/gpu/pack_binaries.sh ninfer (videos are then a
# 400; images work: their small decoders are packed). Tests that read fixtures find them at the path they were built with
# (this checkout's); unpack_binaries.sh links that path to the device's checkout.
set -euo pipefail
cd "$(dirname "$0")/../.."
[ $# -gt 0 ] || { echo "usage: $0 TARGET..." >&2; exit 2; }
venv=.cuda-ci-venv
[ -x $venv/bin/cmake ] || bash tools/ci_cuda_compile.sh
cu=$($venv/bin/python -c "import nvidia, os; print(os.path.join(list(nvidia.__path__)[0], 'cu13'))")
nccl_root=""
if [ "${NINFER_NCCL:-OFF}" = ON ]; then # NCCL's headers from PyPI (libnccl comes from the device's torch)
    $venv/bin/python -c "import nvidia.nccl" 2>/dev/null || $venv/bin/pip install -q nvidia-nccl-cu13
    nccl_root=$($venv/bin/python -c "import nvidia.nccl; print(list(nvidia.nccl.__path__)[0])")
fi
$venv/bin/python -c "import cutlass_library" 2>/dev/null || $venv/bin/pip install -q --no-deps nvidia-cutlass==4.2.0.0
cutlass=$($venv/bin/python -c "import cutlass_library, os; print(os.path.join(os.path.dirname(cutlass_library.__file__), 'source', 'include'))")
PYTHON=$venv/bin/python bash tools/cudnn_headers.sh > /dev/null # the cuDNN prefill route (libcudnn comes from the device's torch)
$venv/bin/cmake -S . -B build-cuda-ci -G Ninja -DCMAKE_BUILD_TYPE=Release -DNINFER_CUDA=ON \
    -DNINFER_CUTLASS_DIR="$cutlass" \
    -DCMAKE_CUDA_COMPILER="$cu/bin/nvcc" -DCUDAToolkit_ROOT="$cu" -DCMAKE_CUDA_ARCHITECTURES=90a \
    -DNINFER_VIDEO="${NINFER_VIDEO:-ON}" -DNINFER_NCCL="${NINFER_NCCL:-OFF}" \
    -DNINFER_NCCL_ROOT="$nccl_root" > /dev/null
$venv/bin/cmake --build build-cuda-ci -j "$(nproc)" --target "$@"
pack=.deps/gpu
rm -rf $pack && mkdir -p $pack
for t in "$@"; do
    bin=$(find build-cuda-ci -type f -name "$t" -perm -u+x | head -1)
    [ -n "$bin" ] || { echo "no binary for $t" >&2; exit 1; }
    cp "$bin" $pack/ && strip $pack/"$t"
done
# The libraries the binaries load that the device image does not have (cuBLAS it has).
for lib in $(ldd $pack/* 2>/dev/null | awk '/=>/ {print $3}' | sort -u); do
    case "$(basename "$lib")" in
    libopenblas*|libgomp*|libgfortran*|libquadmath*|libcudart*|libjpeg*|libpng16*|libwebp*|\
        libsharpyuv*|libxxhash*|libcpp-httplib*|libedit*|libbsd*|libmd*|libpcre2*|libutf8proc*|libbrotli*)
        cp -L "$lib" $pack/ ;;
    esac
done
echo "$PWD" > $pack/BUILT_IN
# xz -9e: about 15% smaller than tar cJ's default level, which the 64 MiB carry needs (ninfer +
# test_cuda_bundle: 10.3 MB against 12.2).
tar cf - -C $pack . | xz -9e -T0 > .deps/gpu.tar.xz
ls -la .deps/gpu.tar.xz
