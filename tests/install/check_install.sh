#!/usr/bin/env bash
# Installs the build in $1 into a temporary prefix, then builds and runs an outside project against it
# with find_package(canopy) and with pkg-config, its 4 ranks started by the installed canopy-run (loopback).
set -euo pipefail
build_dir=$(cd "$1" && pwd)
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

cmake --install "$build_dir" --prefix "$work/prefix" >/dev/null
cmake -S "$here/consumer" -B "$work/consumer" -G Ninja -DCMAKE_PREFIX_PATH="$work/prefix" >/dev/null
cmake --build "$work/consumer" >/dev/null
launch=("$work/prefix/bin/canopy-run" --nproc 4)
export CANOPY_SOCKET_IFNAME=lo
"${launch[@]}" "$work/consumer/consumer"

PKG_CONFIG_PATH="$work/prefix/lib/pkgconfig" \
  c++ -std=c++20 "$here/consumer/main.cpp" -o "$work/consumer-pc" \
  $(PKG_CONFIG_PATH="$work/prefix/lib/pkgconfig" pkg-config --cflags --libs canopy)
"${launch[@]}" "$work/consumer-pc"
echo "install check: find_package, pkg-config and canopy-run OK"
