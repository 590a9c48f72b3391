# CUTLASS's headers for the sm_90 wgmma grouped GEMM (src/ops/cuda/moe_grouped_sm90.cu): from
# NINFER_CUTLASS_DIR (a folder holding cutlass/ and cute/), else from the Python environment's
# nvidia-cutlass wheel (pip install nvidia-cutlass==4.2.0.0: the version the kernel was written
# and measured with; its headers sit in cutlass_library/source/include). Header-only: nothing is
# linked, and nothing of it travels to the GPU machine. Sets ninfer_cutlass_include (empty when
# not found: the kernel is left out and the mma.sync grouped GEMM serves every GPU).
set(NINFER_CUTLASS_DIR "" CACHE PATH "CUTLASS include folder (cutlass/, cute/); empty: the pip wheel")
set(ninfer_cutlass_include "")
set(ninfer_cutlass_dir "${NINFER_CUTLASS_DIR}")
if(NOT ninfer_cutlass_dir)
    find_package(Python3 COMPONENTS Interpreter)
    if(Python3_Interpreter_FOUND)
        execute_process(
            COMMAND ${Python3_EXECUTABLE} -c
                "import cutlass_library, os; print(os.path.join(os.path.dirname(cutlass_library.__file__), 'source', 'include'))"
            OUTPUT_VARIABLE ninfer_cutlass_dir OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
    endif()
endif()
if(ninfer_cutlass_dir AND EXISTS "${ninfer_cutlass_dir}/cutlass/version.h")
    file(STRINGS "${ninfer_cutlass_dir}/cutlass/version.h" ninfer_cutlass_version_lines
         REGEX "#define CUTLASS_(MAJOR|MINOR) ")
    string(REGEX REPLACE ".*CUTLASS_MAJOR ([0-9]+).*" "\\1" ninfer_cutlass_major "${ninfer_cutlass_version_lines}")
    string(REGEX REPLACE ".*CUTLASS_MINOR ([0-9]+).*" "\\1" ninfer_cutlass_minor "${ninfer_cutlass_version_lines}")
    if(ninfer_cutlass_major LESS 4)
        message(WARNING "CUTLASS ${ninfer_cutlass_major}.${ninfer_cutlass_minor} at ${ninfer_cutlass_dir} "
                        "is older than 4.x: the wgmma grouped GEMM is left out")
    else()
        set(ninfer_cutlass_include "${ninfer_cutlass_dir}")
        message(STATUS "CUTLASS ${ninfer_cutlass_major}.${ninfer_cutlass_minor}: ${ninfer_cutlass_dir}")
    endif()
else()
    message(STATUS "CUTLASS headers not found (pip install nvidia-cutlass==4.2.0.0, or "
                   "-DNINFER_CUTLASS_DIR=DIR): the sm_90 wgmma grouped GEMM is left out")
endif()
