# Third-party dependencies, all from Debian packages (see tools/deps/). On offline GPU hosts the
# packages are unpacked into .deps/root by tools/deps/unpack_debs.sh; point CMake there.
set(NINFER_DEPS_ROOT "${PROJECT_SOURCE_DIR}/.deps/root" CACHE PATH "Unpacked Debian dependencies")
if(EXISTS "${NINFER_DEPS_ROOT}/usr")
    list(APPEND CMAKE_PREFIX_PATH "${NINFER_DEPS_ROOT}/usr" "${NINFER_DEPS_ROOT}/usr/lib/x86_64-linux-gnu/cmake")
    list(APPEND CMAKE_LIBRARY_PATH "${NINFER_DEPS_ROOT}/usr/lib/x86_64-linux-gnu"
                                   "${NINFER_DEPS_ROOT}/usr/lib/x86_64-linux-gnu/openblas-openmp")
    list(APPEND CMAKE_INCLUDE_PATH "${NINFER_DEPS_ROOT}/usr/include"
                                   "${NINFER_DEPS_ROOT}/usr/include/x86_64-linux-gnu/openblas-openmp")
endif()

find_package(Threads REQUIRED)
find_package(OpenMP REQUIRED COMPONENTS CXX)
find_package(nlohmann_json 3.10 REQUIRED)
find_package(CLI11 REQUIRED)

# OpenBLAS, the OpenMP build: BLAS then shares the OpenMP thread pool of the CPU op loops. The
# pthread build keeps its own busy-waiting threads, which starve the OpenMP team of cores.
find_path(OPENBLAS_INCLUDE_DIR cblas.h
    PATHS /usr/include/x86_64-linux-gnu/openblas-openmp NO_DEFAULT_PATH)
find_path(OPENBLAS_INCLUDE_DIR cblas.h
    PATHS /usr/include/x86_64-linux-gnu/openblas-openmp PATH_SUFFIXES openblas-openmp)
find_library(OPENBLAS_LIBRARY NAMES openblas
    PATHS /usr/lib/x86_64-linux-gnu/openblas-openmp NO_DEFAULT_PATH)
find_library(OPENBLAS_LIBRARY NAMES openblas PATH_SUFFIXES openblas-openmp)
if(NOT OPENBLAS_INCLUDE_DIR OR NOT OPENBLAS_LIBRARY)
    message(FATAL_ERROR "OpenBLAS (OpenMP build) not found: install libopenblas-openmp-dev "
                        "(tools/setup_debian.sh)")
endif()
add_library(ninfer_openblas INTERFACE)
target_include_directories(ninfer_openblas SYSTEM INTERFACE ${OPENBLAS_INCLUDE_DIR})
target_link_libraries(ninfer_openblas INTERFACE ${OPENBLAS_LIBRARY})

# Text layer: PCRE2 (UTF + JIT) for the pre-tokenizer regex, utf8proc for NFC and Unicode
# properties, libedit (BSD) for the interactive chat line editor.
find_package(PkgConfig REQUIRED)
if(EXISTS "${NINFER_DEPS_ROOT}/usr/lib/x86_64-linux-gnu/pkgconfig")
    set(ENV{PKG_CONFIG_SYSROOT_DIR} "${NINFER_DEPS_ROOT}")
    set(ENV{PKG_CONFIG_LIBDIR} "${NINFER_DEPS_ROOT}/usr/lib/x86_64-linux-gnu/pkgconfig:${NINFER_DEPS_ROOT}/usr/share/pkgconfig")
endif()
pkg_check_modules(PCRE2 REQUIRED IMPORTED_TARGET libpcre2-8)
pkg_check_modules(UTF8PROC REQUIRED IMPORTED_TARGET libutf8proc)
pkg_check_modules(LIBEDIT REQUIRED IMPORTED_TARGET libedit)
# HTTP server: Debian's cpp-httplib (declarations in httplib.h, the body in libcpp-httplib.so;
# its .pc adds the OpenSSL/zlib/brotli defines the library was built with, so the header's
# class layouts match the library's).
pkg_check_modules(HTTPLIB REQUIRED IMPORTED_TARGET cpp-httplib>=0.11)

if(NINFER_TESTS)
    find_package(GTest REQUIRED)
endif()
