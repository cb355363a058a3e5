#!/usr/bin/env bash
# Builds the Debian packages of this build with cpack -G DEB into WORK/deb
# (the fixture of deb_install.sh and deb_lintian.sh), prints each one's
# control fields and files, and checks that every installed thing is in
# the package it belongs to: herd (the program, a manual page per command,
# bash completion, the Lua modules, examples), libherdX.Y (the library and
# its soname link, the ldconfig trigger, shlibs, no maintainer scripts) and
# libherd-dev (headers, libherd.so, libherd.a, herd.pc, CMake package).
set -euo pipefail
build=$1
work=$2
src=$3
fail() { echo "FAIL: $*" >&2; exit 1; }
command -v dpkg-deb >/dev/null && command -v dpkg-shlibdeps >/dev/null \
	|| { echo "SKIP: dpkg-deb and dpkg-shlibdeps (Debian: dpkg-dev) are not installed"; exit 77; }

rm -rf "$work/deb"
mkdir -p "$work/deb"
cpack -G DEB --config "$build/CPackConfig.cmake" -B "$work/deb" >"$work/deb/cpack.log" 2>&1 \
	|| fail "cpack -G DEB failed: $(tail -20 "$work/deb/cpack.log")"
rm -rf "$work/deb/_CPack_Packages"

version=$(sed -n 's/^#define HERD_VERSION_STRING "\(.*\)"/\1/p' "$src/include/herd/common.h")
soversion=${version%.*}
lib=libherd$soversion
herd=$build/bin/herd
for p in herd "$lib" libherd-dev; do
	[[ -f $work/deb/${p}_${version}_$(dpkg --print-architecture).deb ]] \
		|| fail "no package $p: $(ls "$work/deb")"
done

# files PACKAGE: its paths, one a line ("path -> target" for a link).
files() {
	dpkg-deb -c "$work/deb/$1"_*.deb | awk '{ $1 = $2 = $3 = $4 = $5 = ""; sub(/^ +/, ""); sub(/^\./, ""); print }'
}
# holds PACKAGE REGEX...: every regex matches a path of PACKAGE.
holds() {
	local p=$1 list re
	list=$(files "$p")
	shift
	for re in "$@"; do
		grep -qE "^$re\$" <<<"$list" || fail "$p lacks $re; it holds:
$list"
	done
}

for p in herd "$lib" libherd-dev; do
	echo "=== $p"
	dpkg-deb -f "$work/deb/$p"_*.deb
	files "$p"
done

libdir='/usr/lib/[a-z0-9_]+-linux-gnu[a-z0-9_]*'
pages=(/usr/share/man/man1/herd.1.gz)
for c in $("$herd" --help | awk '/^Commands:/ {on = 1; next} on && /^[^ ]/ {on = 0} on && /^  [a-z]/ {print $1}'); do
	[[ $c == help ]] || pages+=("/usr/share/man/man1/herd-$c.1.gz")
done
modules=()
for m in "$src"/lua/*.lua; do modules+=("/usr/share/herd/lua/$(basename "$m")"); done
holds herd /usr/bin/herd "${pages[@]}" /usr/share/bash-completion/completions/herd "${modules[@]}" \
	/usr/share/doc/herd/examples/CMakeLists.txt /usr/share/doc/herd/examples/discover.c \
	/usr/share/doc/herd/examples/train_ddp.c /usr/share/doc/herd/examples/topology.lua \
	/usr/share/doc/herd/examples/lua/spmd_hello.lua \
	/usr/share/doc/herd/copyright /usr/share/doc/herd/changelog.gz
holds "$lib" "$libdir/libherd\\.so\\.$version" "$libdir/libherd\\.so\\.$soversion -> libherd\\.so\\.$version" \
	"/usr/share/doc/$lib/copyright"
holds libherd-dev "$libdir/libherd\\.so -> libherd\\.so\\.$soversion" "$libdir/libherd\\.a" \
	/usr/include/herd.h /usr/include/herd/cluster.h /usr/include/herd/sys/agent.h \
	"$libdir/pkgconfig/herd\\.pc" "$libdir/cmake/herd/herdConfig\\.cmake" \
	"$libdir/cmake/herd/herdConfigVersion\\.cmake" "$libdir/cmake/herd/herdTargets\\.cmake" \
	/usr/share/doc/libherd-dev/copyright
for p in herd "$lib"; do
	files "$p" | grep -qE '(/include/|\.a$|\.pc$|/cmake/|libherd\.so$)' \
		&& fail "$p holds development files: $(files "$p" | grep -E '(/include/|\.a$|\.pc$|/cmake/|libherd\.so$)')"
done

# The library: the ldconfig trigger and a shlibs file, no maintainer
# script; its Depends from dpkg-shlibdeps.
control=$(dpkg-deb --ctrl-tarfile "$work/deb/$lib"_*.deb | tar -t | sed 's|^\./||' | sort | tr '\n' ' ')
[[ $control == "control md5sums shlibs triggers " ]] \
	|| fail "$lib's control files: $control; expected control, md5sums, shlibs, triggers"
[[ $(dpkg-deb -I "$work/deb/$lib"_*.deb triggers) == "activate-noawait ldconfig" ]] \
	|| fail "$lib's triggers: $(dpkg-deb -I "$work/deb/$lib"_*.deb triggers)"
[[ $(dpkg-deb -I "$work/deb/$lib"_*.deb shlibs) == "libherd $soversion $lib (>= $version)" ]] \
	|| fail "$lib's shlibs: $(dpkg-deb -I "$work/deb/$lib"_*.deb shlibs)"
dpkg-deb -f "$work/deb/$lib"_*.deb Depends | grep -q 'libc6 (>= ' || fail "$lib does not depend on libc6"
dpkg-deb -f "$work/deb/herd"_*.deb Depends | grep -q 'liblua5.4-0' || fail "herd does not depend on liblua5.4-0"
[[ $(dpkg-deb -f "$work/deb/libherd-dev"_*.deb Depends) == "$lib (= $version)" ]] \
	|| fail "libherd-dev does not depend on $lib (= $version)"
echo "packages: herd, $lib, libherd-dev $version in $work/deb"
