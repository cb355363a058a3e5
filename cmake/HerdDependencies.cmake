# Finds what libherd and the herd program are built with, and decides the
# AUTO options.  Sets:
#   HERD_PRIVATE_DEPS        targets libherd links privately
#   HERD_STATIC_LINK_FLAGS   the same as plain flags, for libherd.a consumers
#   HERD_HAVE_CUDA/NCCL/IBVERBS and HERD_WHY_NO_<X> for the summary
find_package(PkgConfig REQUIRED)
find_package(Threads REQUIRED)

set(HERD_PRIVATE_DEPS Threads::Threads ${CMAKE_DL_LIBS} m)
set(HERD_STATIC_LINK_FLAGS -lpthread -ldl -lm)

# Required libraries, from Debian packages.
pkg_check_modules(MSGPACK REQUIRED IMPORTED_TARGET msgpack)
pkg_check_modules(HWLOC REQUIRED IMPORTED_TARGET hwloc)
pkg_check_modules(JANSSON REQUIRED IMPORTED_TARGET jansson)
pkg_check_modules(XXHASH REQUIRED IMPORTED_TARGET libxxhash)
pkg_check_modules(LIBCRYPTO REQUIRED IMPORTED_TARGET libcrypto)
pkg_check_modules(LUA REQUIRED IMPORTED_TARGET lua5.4)
pkg_check_modules(LIBEDIT REQUIRED IMPORTED_TARGET libedit)
list(APPEND HERD_PRIVATE_DEPS PkgConfig::MSGPACK PkgConfig::HWLOC PkgConfig::JANSSON
     PkgConfig::XXHASH PkgConfig::LIBCRYPTO)
list(APPEND HERD_STATIC_LINK_FLAGS ${MSGPACK_LDFLAGS} ${HWLOC_LDFLAGS} ${JANSSON_LDFLAGS}
     ${XXHASH_LDFLAGS} ${LIBCRYPTO_LDFLAGS})

# An AUTO|ON|OFF option: OFF skips, ON fails when missing, AUTO follows what
# was found.  Leaves HERD_HAVE_<name> 0 or 1 and HERD_WHY_NO_<name>.
macro(herd_decide name option found why)
  if(${option} STREQUAL "OFF")
    set(HERD_HAVE_${name} 0)
    set(HERD_WHY_NO_${name} "disabled by ${option}=OFF")
  elseif(${found})
    set(HERD_HAVE_${name} 1)
  elseif(${option} STREQUAL "ON")
    message(FATAL_ERROR "${option}=ON but ${why}")
  else()
    set(HERD_HAVE_${name} 0)
    set(HERD_WHY_NO_${name} "${why}")
  endif()
endmacro()

# CUDA: the compiler and the toolkit.  libherd links the static CUDA runtime,
# so it loads and runs on machines without a driver or a CUDA install.
set(_cuda_found FALSE)
set(_cuda_why "")
if(NOT HERD_WITH_CUDA STREQUAL "OFF")
  check_language(CUDA)
  if(CMAKE_CUDA_COMPILER)
    find_package(CUDAToolkit QUIET)
    if(CUDAToolkit_FOUND AND TARGET CUDA::cudart_static)
      set(_cuda_found TRUE)
    else()
      set(_cuda_why "nvcc found but the CUDA toolkit libraries were not")
    endif()
  else()
    set(_cuda_why "no CUDA compiler (nvcc) found on PATH or in CUDACXX")
  endif()
endif()
herd_decide(CUDA HERD_WITH_CUDA _cuda_found "${_cuda_why}")
if(HERD_HAVE_CUDA)
  if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
    set(CMAKE_CUDA_ARCHITECTURES ${HERD_CUDA_ARCHITECTURES})
  endif()
  enable_language(CUDA)
  list(APPEND HERD_PRIVATE_DEPS CUDA::cudart_static)
  list(APPEND HERD_STATIC_LINK_FLAGS -L${CUDAToolkit_LIBRARY_DIR} -lcudart_static -lrt)
endif()

# NCCL: under the CUDA toolkit, NCCL_ROOT, or the system prefixes.
set(_nccl_found FALSE)
set(_nccl_why "HERD_WITH_CUDA is off, and NCCL needs CUDA")
if(HERD_HAVE_CUDA)
  find_path(NCCL_INCLUDE_DIR nccl.h
            HINTS ${NCCL_ROOT} $ENV{NCCL_ROOT} ${CUDAToolkit_INCLUDE_DIRS} ${CUDAToolkit_LIBRARY_ROOT}
            PATH_SUFFIXES include)
  find_library(NCCL_LIBRARY nccl
               HINTS ${NCCL_ROOT} $ENV{NCCL_ROOT} ${CUDAToolkit_LIBRARY_DIR} ${CUDAToolkit_LIBRARY_ROOT}
               PATH_SUFFIXES lib lib64)
  if(NCCL_INCLUDE_DIR AND NCCL_LIBRARY)
    set(_nccl_found TRUE)
    file(STRINGS ${NCCL_INCLUDE_DIR}/nccl.h _nccl_major REGEX "^#define NCCL_MAJOR")
    file(STRINGS ${NCCL_INCLUDE_DIR}/nccl.h _nccl_minor REGEX "^#define NCCL_MINOR")
    file(STRINGS ${NCCL_INCLUDE_DIR}/nccl.h _nccl_patch REGEX "^#define NCCL_PATCH")
    string(REGEX MATCH "[0-9]+" _nccl_major "${_nccl_major}")
    string(REGEX MATCH "[0-9]+" _nccl_minor "${_nccl_minor}")
    string(REGEX MATCH "[0-9]+" _nccl_patch "${_nccl_patch}")
    set(HERD_NCCL_VERSION "${_nccl_major}.${_nccl_minor}.${_nccl_patch}")
  else()
    set(_nccl_why "nccl.h or libnccl not found under the CUDA toolkit or NCCL_ROOT")
  endif()
endif()
herd_decide(NCCL HERD_WITH_NCCL _nccl_found "${_nccl_why}")

# libibverbs, for RDMA device discovery.
set(_ibv_found FALSE)
if(NOT HERD_WITH_IBVERBS STREQUAL "OFF")
  pkg_check_modules(IBVERBS QUIET IMPORTED_TARGET libibverbs)
  set(_ibv_found ${IBVERBS_FOUND})
endif()
herd_decide(IBVERBS HERD_WITH_IBVERBS _ibv_found
            "libibverbs not found by pkg-config (Debian: libibverbs-dev)")
if(HERD_HAVE_IBVERBS)
  list(APPEND HERD_PRIVATE_DEPS PkgConfig::IBVERBS)
  list(APPEND HERD_STATIC_LINK_FLAGS ${IBVERBS_LDFLAGS})
endif()
