# The Debian packages of this build, made by `cpack -G DEB` (or the
# `package` target) from its install components (docs/install.md):
#   herd          component program: /usr/bin/herd, manual pages, bash
#                 completion, the Lua modules' sources, examples
#   libherdX.Y    component library: libherd.so.X.Y, named for the soname
#                 as Debian policy 8.1 asks
#   libherd-dev   component development: headers, libherd.so, libherd.a,
#                 herd.pc and the CMake package herd::herd
# The program links libherd statically, so herd does not need libherdX.Y.
# CUDA, the driver, NVML, NCCL and cuBLAS are loaded at run time (the CUDA
# runtime is linked statically), so none of them is a dependency, of a CUDA
# build's packages either.
set(HERD_PACKAGE_MAINTAINER "herd maintainers <maintainers@users.noreply.a-seed-00d2c086.example>"
    CACHE STRING "Maintainer field of the Debian packages")

set(_soversion ${PROJECT_VERSION_MAJOR}.${PROJECT_VERSION_MINOR})
set(_libpkg libherd${_soversion})
set(_pkgdir ${PROJECT_BINARY_DIR}/packaging)

set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME herd)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_CONTACT "${HERD_PACKAGE_MAINTAINER}")
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_STRIP_FILES ON)
set(CPACK_DEB_COMPONENT_INSTALL ON)
set(CPACK_COMPONENTS_ALL program library development)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_COMPRESSION_TYPE xz)
set(CPACK_DEBIAN_PACKAGE_SOURCE herd)
set(CPACK_DEBIAN_PACKAGE_MAINTAINER "${HERD_PACKAGE_MAINTAINER}")
set(CPACK_DEBIAN_PACKAGE_PRIORITY optional)
set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION ON)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)

set(_about "herd discovers a cluster's nodes, GPUs and links, launches jobs on
local processes, over ssh or in a Slurm allocation, allocates GPUs, and
runs collectives and checkpoints with deadlines on every call, all through
one C library, libherd, with a Lua 5.4 shell on top.")

set(CPACK_DEBIAN_PROGRAM_PACKAGE_NAME herd)
set(CPACK_DEBIAN_PROGRAM_PACKAGE_SECTION utils)
set(CPACK_DEBIAN_PROGRAM_PACKAGE_SUGGESTS "openssh-client, slurm-client")
set(CPACK_DEBIAN_PROGRAM_DESCRIPTION "GPU cluster SDK shell: discovery, launch, collectives, checkpoints
${_about}

This package holds the herd program: an interactive cluster shell, a
script runner for experiments, the runtime of Lua ranks and the node-side
helper of the launcher; its manual pages, bash completion, the Lua
modules it embeds and examples in C and Lua.")

# The library's Depends come from dpkg-shlibdeps at packaging time
# (cmake/HerdPackageConfig.cmake), not from CPack's own run: that one would
# also put ldconfig calls in postinst and postrm, where Debian uses the
# ldconfig trigger (policy 8.1.1) that the triggers file below declares.
set(CPACK_DEBIAN_LIBRARY_PACKAGE_NAME ${_libpkg})
set(CPACK_DEBIAN_LIBRARY_PACKAGE_SECTION libs)
set(CPACK_DEBIAN_LIBRARY_PACKAGE_SHLIBDEPS OFF)
set(CPACK_DEBIAN_LIBRARY_DESCRIPTION "embeddable GPU cluster SDK (shared library)
${_about}

This package holds the shared library.  The NVIDIA driver, NVML, NCCL and
cuBLAS are loaded at run time when present; without them libherd runs and
says why GPUs are absent.")
file(WRITE ${_pkgdir}/control/shlibs
     "libherd ${_soversion} ${_libpkg} (>= ${PROJECT_VERSION})\n")
file(WRITE ${_pkgdir}/control/triggers "activate-noawait ldconfig\n")
set(CPACK_DEBIAN_LIBRARY_PACKAGE_CONTROL_EXTRA
    "${_pkgdir}/control/shlibs;${_pkgdir}/control/triggers")
set(CPACK_HERD_LIBRARY_FILE ${PROJECT_BINARY_DIR}/lib/libherd.so.${PROJECT_VERSION})
set(CPACK_PROJECT_CONFIG_FILE ${PROJECT_SOURCE_DIR}/cmake/HerdPackageConfig.cmake)

# libherd.a links with the libraries herd.pc's Libs.private names; their
# Debian development packages are recommended, not required: the headers
# need none of them, nor does linking libherd.so.
set(_static_deps libmsgpack-dev libhwloc-dev libjansson-dev libxxhash-dev libssl-dev)
if(HERD_HAVE_IBVERBS)
  list(APPEND _static_deps libibverbs-dev)
endif()
list(JOIN _static_deps ", " _static_deps)
set(CPACK_DEBIAN_DEVELOPMENT_PACKAGE_NAME libherd-dev)
set(CPACK_DEBIAN_DEVELOPMENT_PACKAGE_SECTION libdevel)
set(CPACK_DEBIAN_DEVELOPMENT_PACKAGE_DEPENDS "${_libpkg} (= ${PROJECT_VERSION})")
set(CPACK_DEBIAN_DEVELOPMENT_PACKAGE_RECOMMENDS "${_static_deps}")
set(CPACK_DEBIAN_DEVELOPMENT_PACKAGE_SUGGESTS "pkg-config, cmake")
set(CPACK_DEBIAN_DEVELOPMENT_DESCRIPTION "embeddable GPU cluster SDK (development files)
${_about}

This package holds the headers, the static library, herd.pc for
pkg-config and the CMake package (find_package(herd), herd::herd and
herd::herd_static).")

# Each package's /usr/share/doc/PACKAGE: copyright and changelog.gz (a
# native package's name for it), for the packages only.
string(TIMESTAMP HERD_PACKAGE_DATE "%a, %d %b %Y %H:%M:%S +0000" UTC)
string(TIMESTAMP HERD_PACKAGE_YEAR "%Y" UTC)
configure_file(${PROJECT_SOURCE_DIR}/cmake/debian/changelog.in ${_pkgdir}/changelog @ONLY)
configure_file(${PROJECT_SOURCE_DIR}/cmake/debian/copyright.in ${_pkgdir}/copyright @ONLY)
find_program(HERD_GZIP gzip REQUIRED)
execute_process(COMMAND ${HERD_GZIP} -9nc ${_pkgdir}/changelog
                OUTPUT_FILE ${_pkgdir}/changelog.gz COMMAND_ERROR_IS_FATAL ANY)
foreach(_comp ${CPACK_COMPONENTS_ALL})
  string(TOUPPER ${_comp} _up)
  set(_name ${CPACK_DEBIAN_${_up}_PACKAGE_NAME})
  install(FILES ${_pkgdir}/copyright ${_pkgdir}/changelog.gz
          DESTINATION ${CMAKE_INSTALL_DATADIR}/doc/${_name} COMPONENT ${_comp} EXCLUDE_FROM_ALL)
endforeach()

# lintian overrides, each with its reason.  The library package has a
# shlibs file, not a symbols file: Debian policy 8.6 takes either, and a
# symbols file is worth having once it records the release that brought
# each symbol, from the first release that keeps its ABI.
set(_overrides_library "# shlibs, not symbols (policy 8.6)\n${_libpkg}: no-symbols-control-file\n")
set(_overrides_program "")
set(_overrides_development "")
if(HERD_HAVE_CUDA)
  # Text of NVIDIA's static CUDA runtime, linked into both binaries.
  set(_why "# NVIDIA's static CUDA runtime, linked in, has this text\n")
  string(APPEND _overrides_program "${_why}herd: spelling-error-in-binary occured occurred *\n")
  string(APPEND _overrides_library "${_why}${_libpkg}: spelling-error-in-binary occured occurred *\n")
  if(CUDAToolkit_LIBRARY_DIR MATCHES "^/usr/local/")
    string(APPEND _overrides_development
      "# libherd.a links NVIDIA's cudart_static, which the CUDA toolkit installs there\n"
      "# and no Debian package holds: herd.pc says where the build found it\n"
      "libherd-dev: pkg-config-bad-directive -L${CUDAToolkit_LIBRARY_DIR} *\n")
  endif()
endif()
foreach(_comp ${CPACK_COMPONENTS_ALL})
  if(_overrides_${_comp})
    string(TOUPPER ${_comp} _up)
    set(_name ${CPACK_DEBIAN_${_up}_PACKAGE_NAME})
    file(WRITE ${_pkgdir}/lintian/${_name} "${_overrides_${_comp}}")
    install(FILES ${_pkgdir}/lintian/${_name} DESTINATION ${CMAKE_INSTALL_DATADIR}/lintian/overrides
            COMPONENT ${_comp} EXCLUDE_FROM_ALL)
  endif()
endforeach()

# `cmake --install --strip` and cpack (CPACK_STRIP_FILES) strip as Debian's
# dh_strip does: CMake's own strip leaves the compiler's .comment section in
# the program and the library, and leaves the static library's debug
# information.
function(herd_install_strip component file)
  list(JOIN ARGN " " _options)
  install(CODE "if(CMAKE_INSTALL_DO_STRIP)
  execute_process(COMMAND \"${CMAKE_STRIP}\" ${_options}
                  \"\$ENV{DESTDIR}\${CMAKE_INSTALL_PREFIX}/${file}\" COMMAND_ERROR_IS_FATAL ANY)
endif()" COMPONENT ${component})
endfunction()
if(CMAKE_STRIP)
  herd_install_strip(program ${CMAKE_INSTALL_BINDIR}/herd
                     --remove-section=.comment --remove-section=.note)
  herd_install_strip(library ${CMAKE_INSTALL_LIBDIR}/libherd.so.${PROJECT_VERSION}
                     --remove-section=.comment --remove-section=.note --strip-unneeded)
  herd_install_strip(development ${CMAKE_INSTALL_LIBDIR}/libherd.a --strip-debug
                     --remove-section=.comment --remove-section=.note
                     --enable-deterministic-archives)
endif()

include(CPack)
