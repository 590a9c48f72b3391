# The default CUDA architectures: one fat binary for every recent NVIDIA GPU.
#
# Machine code (-real, SASS) for each architecture family the engine is tuned for, so no GPU
# of those families compiles PTX at start-up (the driver's JIT takes minutes for this many
# kernels and its cache is per user) and each gets its own instruction scheduling:
#   80   A100, A30                      86   RTX 30xx, A10, A40 (and sm_87 Orin runs it)
#   89   RTX 40xx, L4, L40S             90a  H100, H200 (the 'a' features are sm_90 only)
#   100  B200, GB200 (and sm_103 B300)  120  RTX 50xx, RTX PRO (and sm_121 GB10)
# A cubin runs on its own major version at an equal or higher minor, never on another major;
# 90a's cubin runs on sm_90 only. 100 and 120 need CUDA 12.8.
# Plus PTX (-virtual) of the highest of them, so a GPU newer than all of these (a major version
# past 12) can still JIT the kernels: that PTX uses no 'a' features, so it is forward compatible,
# and a higher PTX version keeps more of the newer instruction set than a lower one would. (A
# GPU between two majors of the list, sm_110 Thor, is not covered: it gets no image, and the
# engine reports that at start-up.)
# The engine picks each route at run time from the device's compute capability and the image it
# runs (src/ops/cuda/device_caps.h), so every image has a working route; the sm_90-only kernels
# trap in the images of older architectures. -DCMAKE_CUDA_ARCHITECTURES=80-virtual on an H200
# runs sm_80's code (JIT-compiled) and so its routes: a way to test them there.
function(ninfer_default_cuda_architectures out)
    set(archs 80-real 86-real 89-real 90a-real)
    set(ptx 90)
    if(CMAKE_CUDA_COMPILER_VERSION VERSION_GREATER_EQUAL 12.8)
        list(APPEND archs 100-real 120-real)
        set(ptx 120)
    endif()
    list(APPEND archs ${ptx}-virtual)
    set(${out} "${archs}" PARENT_SCOPE)
endfunction()
