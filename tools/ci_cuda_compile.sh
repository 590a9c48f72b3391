#!/usr/bin/env bash
# Compiles (does not run) the CUDA backend for every architecture of the default fat binary
# (cmake/cuda_architectures.cmake: sm_80, 86, 89, 90a, 100, 120 and compute_120 PTX) on a machine
# without a GPU or a CUDA install, so a CUDA compile error on any of them cannot land: NVIDIA's
# PyPI wheels provide nvcc, the runtime, cuBLAS and CCCL in one toolkit-shaped folder
# (nvidia/cu13), and PyPI's cmake is new enough (>= 3.26) for nvcc's C++20 dialect. Everything
# goes into ignored folders. NINFER_CUDA_ARCHS=90a (any CMAKE_CUDA_ARCHITECTURES value) compiles
# those only, for a quicker local check.
set -euo pipefail
cd "$(dirname "$0")/.."
venv=.cuda-ci-venv
packages=("nvidia-cuda-nvcc==13.0.88" "nvidia-cuda-crt==13.0.88" "nvidia-cuda-runtime==13.0.88"
          "nvidia-cublas==13.0.2.14"
          "nvidia-cuda-cccl==13.0.85" "nvidia-nvvm==13.0.88" "cmake==4.4.5")
# CUTLASS's headers only: its Python dependencies (scipy, cuda-python, ...) are not needed.
cutlass_package="nvidia-cutlass==4.2.0.0"
stamp=$venv/.ninfer-packages
if [ ! -x $venv/bin/python ] || [ "$(cat "$stamp" 2>/dev/null)" != "${packages[*]} $cutlass_package" ]; then
    python3 -m venv $venv
    $venv/bin/python -m pip install -q --disable-pip-version-check "${packages[@]}"
    $venv/bin/python -m pip install -q --disable-pip-version-check --no-deps "$cutlass_package"
    echo "${packages[*]} $cutlass_package" > "$stamp"
fi
cu=$($venv/bin/python -c "import nvidia, os; print(os.path.join(list(nvidia.__path__)[0], 'cu13'))")
# The wheels ship versioned sonames only; the linker wants the plain names.
for lib in cudart cublas cublasLt; do
    [ -e "$cu/lib/lib$lib.so" ] || ln -s "lib$lib.so.13" "$cu/lib/lib$lib.so"
done
# CUTLASS's headers (the sm_90 wgmma grouped GEMM; cmake/cutlass.cmake).
cutlass=$($venv/bin/python -c "import cutlass_library, os; print(os.path.join(os.path.dirname(cutlass_library.__file__), 'source', 'include'))")
# cuDNN's and cudnn-frontend's headers (the cuDNN prefill-attention route; cmake/cudnn.cmake).
PYTHON=$venv/bin/python bash tools/cudnn_headers.sh
jobs=$(nproc 2>/dev/null || echo 2)
archs=${NINFER_CUDA_ARCHS:-}
# -U first: a build folder configured before (for 90a only, say) keeps its cached value otherwise.
$venv/bin/cmake -S . -B build-cuda-ci -G Ninja -DCMAKE_BUILD_TYPE=Release -DNINFER_CUDA=ON \
    -DCMAKE_CUDA_COMPILER="$cu/bin/nvcc" -DCUDAToolkit_ROOT="$cu" -UCMAKE_CUDA_ARCHITECTURES \
    -DNINFER_CUTLASS_DIR="$cutlass" \
    ${archs:+"-DCMAKE_CUDA_ARCHITECTURES=$archs"}
# ninfer, every CUDA test (tests/cuda/test_*.cpp) and the op benchmarks.
cuda_tests=$(ls tests/cuda/test_*.cpp | xargs -n1 basename | sed 's/\.cpp$//' | tr '\n' ' ')
$venv/bin/cmake --build build-cuda-ci -j "$jobs" --target ninfer $cuda_tests bench_prefill_ops bench_decode_ops bench_fp8_ops
echo "CUDA backend compiled for ${NINFER_CUDA_ARCHS:-sm_80, 86, 89, 90a, 100, 120 and compute_120}"
