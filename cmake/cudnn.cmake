# cuDNN's headers for the cuDNN prefill-attention route (src/ops/cuda/attention_cudnn.cpp): from
# NINFER_CUDNN_INCLUDE_DIR (a folder holding cudnn.h and cudnn_frontend.h), else .deps/cudnn/include
# (bash tools/cudnn_headers.sh puts the pinned versions there). Headers only: the route opens
# libcudnn.so.9 at run time (cudnn-frontend's dynamic loading), so nothing is linked and a binary
# runs with or without cuDNN installed. Sets ninfer_cudnn_include (empty when not found: the route
# is left out and the flash kernel serves every prefill).
set(NINFER_CUDNN_INCLUDE_DIR "" CACHE PATH "cuDNN + cudnn-frontend headers; empty: .deps/cudnn/include")
set(ninfer_cudnn_include "")
set(ninfer_cudnn_dir "${NINFER_CUDNN_INCLUDE_DIR}")
if(NOT ninfer_cudnn_dir)
    set(ninfer_cudnn_dir "${PROJECT_SOURCE_DIR}/.deps/cudnn/include")
endif()
if(EXISTS "${ninfer_cudnn_dir}/cudnn.h" AND EXISTS "${ninfer_cudnn_dir}/cudnn_frontend.h")
    set(ninfer_cudnn_include "${ninfer_cudnn_dir}")
    message(STATUS "cuDNN headers: ${ninfer_cudnn_dir}")
else()
    message(STATUS "cuDNN headers not found (bash tools/cudnn_headers.sh, or "
                   "-DNINFER_CUDNN_INCLUDE_DIR=DIR): the cuDNN prefill-attention route is left out")
endif()
