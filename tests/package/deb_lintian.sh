#!/usr/bin/env bash
# lintian on the packages that deb_build.sh made (WORK/deb): no error and no
# warning.  Info tags are shown too; the packages' overrides, each with its
# reason, are in cmake/HerdPackage.cmake, and the hardening tags come from
# the build's compiler flags (docs/install.md).
set -euo pipefail
build=$1
work=$2
fail() { echo "FAIL: $*" >&2; exit 1; }
command -v lintian >/dev/null || { echo "SKIP: lintian is not installed"; exit 77; }
ls "$work"/deb/*.deb >/dev/null 2>&1 || fail "no packages in $work/deb (deb_build.sh makes them)"

# A library directory without the multiarch triplet (a build directory
# configured before CMakeLists.txt chose lib/<multiarch> on Debian) puts
# herd.pc where a cross build's pkg-config does not look.
libdir=$(sed -n 's/^CMAKE_INSTALL_LIBDIR:[A-Z]*=//p' "$build/CMakeCache.txt")
[[ $libdir == lib/*-* ]] || fail "this build installs libraries to $libdir, not lib/<multiarch>:
reconfigure it with -UCMAKE_INSTALL_LIBDIR (or -DCMAKE_INSTALL_LIBDIR=lib/$(gcc -print-multiarch))"

rc=0
lintian --display-info --display-experimental --pedantic \
	--fail-on error,warning "$work"/deb/*.deb 2>&1 | grep -v '^running with root privileges' || rc=${PIPESTATUS[0]}
[[ $rc == 0 ]] || fail "lintian found errors or warnings (exit $rc)"
echo "lintian: no error, no warning"
