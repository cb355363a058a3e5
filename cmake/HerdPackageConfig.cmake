# CPACK_PROJECT_CONFIG_FILE of herd's packages (cmake/HerdPackage.cmake),
# read by cpack at packaging time.  For DEB: the descriptions' synopses, and
# the Depends of the library package from dpkg-shlibdeps on the built
# libherd.so, as CPack's own run would find them.
if(CPACK_GENERATOR STREQUAL "DEB")
  # Each package's description has its own first line (its synopsis):
  # CPack would put the project's summary above it.
  unset(CPACK_PACKAGE_DESCRIPTION_SUMMARY)
  find_program(_shlibdeps dpkg-shlibdeps)
  if(NOT _shlibdeps)
    message(FATAL_ERROR "dpkg-shlibdeps is not installed (Debian: dpkg-dev); "
                        "the Debian packages need it for their dependencies")
  endif()
  # dpkg-shlibdeps wants to run in a source tree: an empty debian/control.
  set(_dir ${CPACK_PACKAGE_DIRECTORY}/_herd_shlibdeps)
  file(MAKE_DIRECTORY ${_dir}/debian)
  file(WRITE ${_dir}/debian/control "")
  execute_process(COMMAND ${_shlibdeps} -O ${CPACK_HERD_LIBRARY_FILE}
                  WORKING_DIRECTORY ${_dir}
                  OUTPUT_VARIABLE _out ERROR_VARIABLE _err RESULT_VARIABLE _rc)
  file(REMOVE_RECURSE ${_dir})
  if(NOT _rc EQUAL 0 OR NOT _out MATCHES "shlibs:Depends=([^\n]*)")
    message(FATAL_ERROR "dpkg-shlibdeps ${CPACK_HERD_LIBRARY_FILE} failed: ${_err}")
  endif()
  set(CPACK_DEBIAN_LIBRARY_PACKAGE_DEPENDS "${CMAKE_MATCH_1}")
endif()
