#!/usr/bin/env bash
# Installs the build in $1 into a temporary prefix, then builds and runs an outside project against it
# with find_package(canopy) and with pkg-config.
set -euo pipefail
build_dir=$(cd "$1" && pwd)
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

cmake --install "$build_dir" --prefix "$work/prefix" >/dev/null
cmake -S "$here/consumer" -B "$work/consumer" -G Ninja -DCMAKE_PREFIX_PATH="$work/prefix" >/dev/null
cmake --build "$work/consumer" >/dev/null
"$work/consumer/consumer"

PKG_CONFIG_PATH="$work/prefix/lib/pkgconfig" \
  c++ -std=c++20 "$here/consumer/main.cpp" -o "$work/consumer-pc" \
  $(PKG_CONFIG_PATH="$work/prefix/lib/pkgconfig" pkg-config --cflags --libs canopy)
"$work/consumer-pc"
test -x "$work/prefix/bin/canopy-run" || { echo "canopy-run was not installed"; exit 1; }

# canopy_torch, when built: the installed package imports from the prefix's site directory and forms a group.
cached() { sed -n "s/^$1:[A-Z]*=//p" "$build_dir/CMakeCache.txt"; }
if [ "$(cached CANOPY_WITH_PYTORCH)" = ON ]; then
  site="$work/prefix/$(cached CANOPY_PYTHON_INSTALL_DIR)"
  test -f "$site/canopy_torch/__init__.py" || { echo "canopy_torch was not installed in $site"; exit 1; }
  PYTHONPATH="$site" "$(cached CANOPY_PYTHON_EXECUTABLE)" -c '
import torch, torch.distributed as dist, canopy_torch
assert canopy_torch.__file__.startswith("'"$site"'"), canopy_torch.__file__
dist.init_process_group("canopy", store=dist.HashStore(), rank=0, world_size=1)
t = torch.ones(3); dist.all_reduce(t); assert t.tolist() == [1.0, 1.0, 1.0]
dist.destroy_process_group()'
  echo "install check: canopy_torch imports from $site"
fi
echo "install check: find_package, pkg-config and tools OK"
