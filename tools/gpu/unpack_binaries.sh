# Sourced on the device: unpacks .deps/gpu.tar.xz (tools/gpu/pack_binaries.sh) into /tmp/g, puts
# it and the image's cuBLAS on LD_LIBRARY_PATH, and links the checkout path the tests were built
# with to this checkout (fixture paths are compiled in).
# An argument names another pack (several packs can be unpacked into /tmp/g, one per call).
mkdir -p /tmp/g && tar xJf "${1:-.deps/gpu.tar.xz}" -C /tmp/g
built_in=$(cat /tmp/g/BUILT_IN)
if [ "$built_in" != "$PWD" ] && [ ! -e "$built_in" ]; then
    mkdir -p "$(dirname "$built_in")" && ln -s "$PWD" "$built_in"
fi
nv_libs=$(python3 -c "import nvidia, os; print(':'.join(os.path.join(p, 'cu13', 'lib') for p in nvidia.__path__))" 2>/dev/null)
# NCCL (builds with NINFER_NCCL): the image's torch ships libnccl.so.2 in nvidia/nccl/lib (200 MB:
# never packed).
nccl_libs=$(python3 -c "import nvidia.nccl, os; print(os.path.join(list(nvidia.nccl.__path__)[0], 'lib'))" 2>/dev/null)
# cuDNN (the prefill-attention route opens libcudnn.so.9 at run time): torch's nvidia-cudnn wheel.
cudnn_libs=$(python3 -c "import nvidia.cudnn, os; print(os.path.join(list(nvidia.cudnn.__path__)[0], 'lib'))" 2>/dev/null)
export LD_LIBRARY_PATH=/tmp/g:${nv_libs}${nccl_libs:+:$nccl_libs}${cudnn_libs:+:$cudnn_libs}:/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
