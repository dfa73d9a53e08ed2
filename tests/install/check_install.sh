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

# canopy_torch, when built: the installed package imports from the prefix's site directory, and a torch
# program forms a 4-rank group with it under the installed canopy-run (env://, torch's own MASTER_PORT).
cached() { sed -n "s/^$1:[A-Z]*=//p" "$build_dir/CMakeCache.txt"; }
if [ "$(cached CANOPY_WITH_PYTORCH)" = ON ]; then
  site="$work/prefix/$(cached CANOPY_PYTHON_INSTALL_DIR)"
  test -f "$site/canopy_torch/__init__.py" || { echo "canopy_torch was not installed in $site"; exit 1; }
  cat >"$work/torch_consumer.py" <<EOF_PY
import torch, torch.distributed as dist, canopy_torch
assert canopy_torch.__file__.startswith("$site"), canopy_torch.__file__
dist.init_process_group("canopy")
t = torch.ones(3); dist.all_reduce(t); assert t.tolist() == [4.0] * 3, t
dist.destroy_process_group()
EOF_PY
  PYTHONPATH="$site" "${launch[@]}" "$(cached CANOPY_PYTHON_EXECUTABLE)" "$work/torch_consumer.py"
  echo "install check: canopy_torch imports from $site and forms a group of 4 under canopy-run"
fi
echo "install check: find_package, pkg-config and canopy-run OK"
