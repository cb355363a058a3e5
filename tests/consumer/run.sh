#!/usr/bin/env bash
# Installs the build into a fresh prefix, then builds tests/consumer/consumer.c
# outside the tree three ways: CMake find_package(herd) against the shared and
# the static library, and pkg-config herd.  Each must run and print the DGX
# H100 fixture's GPU0-GPU1 link.
set -euo pipefail
build=$1
work=$2
here=$(cd "$(dirname "$0")" && pwd)
fixture=$here/../fixtures/inventory/dgx-h100.json
expect="has 8 GPUs, GPU0-GPU1 NV18"

rm -rf "$work"
mkdir -p "$work"
cmake --install "$build" --prefix "$work/prefix" >"$work/install.log"

cmake -S "$here" -B "$work/cmake" -DCMAKE_PREFIX_PATH="$work/prefix" >"$work/configure.log"
cmake --build "$work/cmake" >"$work/build.log"
for exe in consumer_shared consumer_static; do
	out=$("$work/cmake/$exe" "$fixture")
	echo "$exe: $out"
	[[ $out == *"$expect"* ]] || { echo "$exe: expected '$expect'"; exit 1; }
done

# lib/, lib64/ or (Debian) lib/<multiarch>/
pc=$(find "$work/prefix" -name herd.pc | head -n 1)
[ -n "$pc" ] || { echo "no herd.pc under $work/prefix"; exit 1; }
export PKG_CONFIG_PATH=$(dirname "$pc")
cc -std=c11 -Wall -Wextra -Werror -o "$work/consumer_pc" "$here/consumer.c" \
	$(pkg-config --cflags --libs herd) -Wl,-rpath,"$(pkg-config --variable=libdir herd)"
out=$("$work/consumer_pc" "$fixture")
echo "pkg-config: $out"
[[ $out == *"$expect"* ]] || { echo "pkg-config build: expected '$expect'"; exit 1; }
# The installed headers must be the ones used, not the source tree's.
[ -f "$work/prefix/include/herd.h" ] && [ -f "$work/prefix/include/herd/cluster.h" ]
echo "external consumer: ok"
