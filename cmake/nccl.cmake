# NCCL for tensor parallelism (NINFER_NCCL): from NINFER_NCCL_ROOT (a directory with include/nccl.h
# and lib/libnccl.so*), else from the Python environment's nvidia-nccl-cu13 wheel
# (pip install nvidia-nccl-cu13; its library is only libnccl.so.2), else the system's.
set(NINFER_NCCL_ROOT "" CACHE PATH "NCCL install (include/, lib/); empty: the pip wheel or the system")
if(NOT NINFER_NCCL_ROOT)
    find_package(Python3 COMPONENTS Interpreter)
    if(Python3_Interpreter_FOUND)
        execute_process(
            COMMAND ${Python3_EXECUTABLE} -c "import nvidia.nccl; print(list(nvidia.nccl.__path__)[0])"
            OUTPUT_VARIABLE ninfer_nccl_wheel OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
        if(ninfer_nccl_wheel)
            set(NINFER_NCCL_ROOT "${ninfer_nccl_wheel}")
        endif()
    endif()
endif()
find_path(NCCL_INCLUDE_DIR nccl.h HINTS "${NINFER_NCCL_ROOT}/include")
find_library(NCCL_LIBRARY NAMES nccl libnccl.so.2 HINTS "${NINFER_NCCL_ROOT}/lib")
if(NOT NCCL_INCLUDE_DIR OR NOT NCCL_LIBRARY)
    message(FATAL_ERROR "NINFER_NCCL: nccl.h or libnccl not found (pip install nvidia-nccl-cu13, "
                        "or -DNINFER_NCCL_ROOT=DIR)")
endif()
message(STATUS "NCCL: ${NCCL_LIBRARY}")
add_library(ninfer_nccl INTERFACE)
target_include_directories(ninfer_nccl INTERFACE "${NCCL_INCLUDE_DIR}")
target_link_libraries(ninfer_nccl INTERFACE "${NCCL_LIBRARY}")
