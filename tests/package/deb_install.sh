#!/usr/bin/env bash
# Installs the packages that deb_build.sh made (WORK/deb) with apt-get, as a
# user would, into a throwaway copy of this machine: a private mount
# namespace with an overlay whose lower layer is / and whose upper layer
# is a tmpfs, chrooted into, so that nothing reaches the real /usr and
# tests running beside this one still see the machine as it was.  apt-get
# resolves the dependencies from the packages installed here (no
# archive, no download).  Then, from the installed files only: herd --version, herd
# discover, the manual pages and the completion; the C examples built with
# CMake (find_package(herd)) and with pkg-config, run against an
# inventory fixture and this node; a Lua example; and removal leaves no
# herd file behind.  Everything vanishes with the namespace.
set -euo pipefail
fail() { echo "FAIL: $*" >&2; exit 1; }

if [[ ${1:-} != --in-namespace ]]; then
	work=$1
	src=$2
	[[ $(id -u) == 0 ]] || { echo "SKIP: needs root (a mount namespace, an overlay and chroot)"; exit 77; }
	command -v unshare >/dev/null || { echo "SKIP: no unshare (util-linux)"; exit 77; }
	grep -qw overlay /proc/filesystems || modprobe overlay 2>/dev/null \
		|| { echo "SKIP: the kernel has no overlay file system"; exit 77; }
	ls "$work"/deb/*.deb >/dev/null 2>&1 || fail "no packages in $work/deb (deb_build.sh makes them)"
	rc=0
	unshare -m --propagation private bash "$0" --in-namespace "$work" "$src" || rc=$?
	# empty once the namespace is gone (rmdir, never a recursive removal)
	rmdir "$work/root" 2>/dev/null || true
	exit $rc
fi
work=$2
src=$3

# The copy of the machine, in this namespace only.
root=$work/root
mkdir -p "$root"
mount -t tmpfs -o mode=755 tmpfs "$root"
mkdir "$root/upper" "$root/work" "$root/m"
m=$root/m
# The upper layer on a tmpfs: overlayfs refuses one inside its lower layer.
mount -t overlay overlay -o "lowerdir=/,upperdir=$root/upper,workdir=$root/work" "$m"
mount -t proc proc "$m/proc"
mount --rbind /sys "$m/sys"
mount --rbind /dev "$m/dev"
mount -t tmpfs -o mode=1777 tmpfs "$m/tmp"
mkdir -m 755 "$m/tmp/deb"
cp "$work"/deb/*.deb "$m/tmp/deb/"
chmod 644 "$m"/tmp/deb/*.deb
cp "$src/tests/fixtures/inventory/dgx-h100.json" "$src/tests/fixtures/inventory/pcie-4gpu.json" "$m/tmp/"

timeout 600 chroot "$m" env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LC_ALL=C.UTF-8 \
	DEBIAN_FRONTEND=noninteractive bash -s <<'CHROOT'
set -euo pipefail
fail() { echo "FAIL: $*" >&2; exit 1; }
step() { printf '\n--- %s\n' "$*"; }
arch=$(dpkg-architecture -qDEB_HOST_MULTIARCH 2>/dev/null || gcc -print-multiarch)
libdir=/usr/lib/$arch
pkgs=$(for d in /tmp/deb/*.deb; do dpkg-deb -f "$d" Package; done | tr '\n' ' ')

step "apt-get install /tmp/deb/*.deb ($pkgs)"
# No archive: the dependencies resolve from what this machine has installed.
apt-get install -q -y -o Dir::Etc::SourceList=/dev/null -o Dir::Etc::SourceParts=/dev/null \
	/tmp/deb/*.deb
for p in $pkgs; do
	[[ $(dpkg-query -W -f '${Status}' "$p") == "install ok installed" ]] || fail "$p is not installed"
done

step "herd --version; herd discover"
[[ $(command -v herd) == /usr/bin/herd ]] || fail "herd on PATH is $(command -v herd)"
herd --version
herd discover
[[ $(readlink -f "$libdir/libherd.so") == "$libdir"/libherd.so.* ]] || fail "libherd.so does not lead to the library"
# (a here-string, not a pipe: grep -q leaving early would fail the writer)
grep -qE "libherd\.so\.[0-9.]+ .*=> (/usr)?/lib/$arch/libherd\.so" <<<"$(ldconfig -p)" \
	|| fail "ldconfig's cache lacks libherd: the ldconfig trigger did not run"

step "man herd, man herd-launch; bash completion"
[[ $(man -w herd) == /usr/share/man/man1/herd.1.gz ]] || fail "man -w herd: $(man -w herd)"
[[ $(man -w herd-launch) == /usr/share/man/man1/herd-launch.1.gz ]] || fail "man -w herd-launch"
MANWIDTH=80 man herd 2>&1 | col -b | sed -n '/^COMMANDS/,/^ENVIRONMENT/p' | grep -E '^ +herd [a-z]+$' \
	|| fail "man herd lists no command"
bash -c 'source /usr/share/bash-completion/completions/herd && complete -p herd'

step "examples/ with CMake, find_package(herd)"
cmake -S /usr/share/doc/herd/examples -B /tmp/ex >/tmp/ex.log || { cat /tmp/ex.log; fail "cmake"; }
herd_dir=$(sed -n 's/^herd_DIR:PATH=//p' /tmp/ex/CMakeCache.txt)
[[ $herd_dir == "$libdir/cmake/herd" ]] || fail "find_package(herd) found $herd_dir"
cmake --build /tmp/ex
ldd /tmp/ex/example_discover | grep -E "libherd\.so\.[0-9.]+ => (/usr)?/lib/$arch/libherd\.so" \
	|| fail "example_discover does not use $libdir/libherd.so: $(ldd /tmp/ex/example_discover)"
out=$(/tmp/ex/example_discover /tmp/dgx-h100.json)
grep -qE 'GPU0 .*: X NV18 NV18' <<<"$out" || fail "example_discover: $out"
/tmp/ex/example_discover

step "examples/discover.c with pkg-config herd"
cc -std=c11 -Wall -Wextra -Werror -o /tmp/ex/discover_pc /usr/share/doc/herd/examples/discover.c \
	$(pkg-config --cflags --libs herd)
[[ $(readlink -f "$(pkg-config --variable=libdir herd)") == "$libdir" ]] \
	|| fail "pkg-config herd's libdir: $(pkg-config --variable=libdir herd)"
/tmp/ex/discover_pc /tmp/dgx-h100.json | grep -E 'GPU0 .*: X NV18 NV18'

step "a Lua example"
herd /usr/share/doc/herd/examples/topology.lua /tmp/pcie-4gpu.json | grep -E 'GPU0 +[0-9a-f:.]+ +X PIX'

step "apt-get purge $pkgs"
apt-get purge -q -y $pkgs
left=$(ls /usr/bin/herd "$libdir"/libherd* /usr/include/herd.h /usr/share/man/man1/herd*.1.gz \
	/usr/share/doc/herd /usr/share/herd 2>/dev/null || true)
[[ -z $left ]] || fail "left after purge: $left"
grep -q libherd <<<"$(ldconfig -p)" && fail "ldconfig's cache still lists libherd after purge"
echo
echo "installed, used and removed: $pkgs"
CHROOT
