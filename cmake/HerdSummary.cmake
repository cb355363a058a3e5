# Prints what this build has and, for what it lacks, why.
function(herd_summary_line label have version why)
  if(have)
    message(STATUS "  ${label}: yes ${version}")
  else()
    message(STATUS "  ${label}: no (${why})")
  endif()
endfunction()

message(STATUS "")
message(STATUS "herd ${PROJECT_VERSION} configuration")
message(STATUS "  build type: ${CMAKE_BUILD_TYPE}, C compiler: ${CMAKE_C_COMPILER_ID} ${CMAKE_C_COMPILER_VERSION}")
message(STATUS "  Lua: ${LUA_VERSION}, msgpack-c: ${MSGPACK_VERSION}, hwloc: ${HWLOC_VERSION}, "
               "jansson: ${JANSSON_VERSION}, xxhash: ${XXHASH_VERSION}, libedit: ${LIBEDIT_VERSION}, "
               "libcrypto: ${LIBCRYPTO_VERSION}")
herd_summary_line("CUDA" "${HERD_HAVE_CUDA}" "${CUDAToolkit_VERSION} (architectures ${CMAKE_CUDA_ARCHITECTURES})"
                  "${HERD_WHY_NO_CUDA}")
herd_summary_line("NCCL" "${HERD_HAVE_NCCL}" "${HERD_NCCL_VERSION} (${NCCL_LIBRARY})" "${HERD_WHY_NO_NCCL}")
herd_summary_line("libibverbs" "${HERD_HAVE_IBVERBS}" "${IBVERBS_VERSION}" "${HERD_WHY_NO_IBVERBS}")
message(STATUS "  sanitizers: ${HERD_SANITIZE}")
message(STATUS "  tests: ${HERD_BUILD_TESTS}, warnings as errors: ${HERD_WERROR}")
message(STATUS "")
