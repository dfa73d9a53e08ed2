#!/bin/bash
# Runs the verbs transport for real: boots Debian's stock kernel under QEMU (software emulation, no
# KVM needed), creates a soft-RoCE device (rdma_rxe) inside, and runs there the verbs tests and 2- and
# 3-rank all-reduce and broadcast over verbs with every algorithm (canopy-run + canopy-bench, checked
# exactly). Exits 0 only when the guest reports success; prints "SKIPPED: <reason>" and exits 0 only
# when QEMU cannot be installed. Bounded in time (RXE_TIMEOUT seconds for the guest, default 900).
#
#   tests/rxe/run_rxe_tests.sh BUILD_DIR
#
# BUILD_DIR must hold bin/{canopy-run,canopy-bench,verbs_parts_test,verbs_transport_test}. The kernel
# package is downloaded from the Debian archive into BUILD_DIR/rxe (reused by later runs on the same
# build directory, never committed). See docs/VERBS.md.
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
BUILD_DIR=$(cd "${1:?usage: run_rxe_tests.sh BUILD_DIR}" && pwd)
WORK=$BUILD_DIR/rxe
TIMEOUT=${RXE_TIMEOUT:-900}
PROGRAMS=(canopy-run canopy-bench verbs_parts_test verbs_transport_test)
mkdir -p "$WORK"
say() { echo "[rxe] $*"; }

# ---- 1. host packages: QEMU, and the userspace copied into the guest ----------------------------
if ! command -v qemu-system-x86_64 >/dev/null; then
  say "installing qemu-system-x86"
  if ! { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
      qemu-system-x86; } > "$WORK/apt-qemu.log" 2>&1; then
    tail -5 "$WORK/apt-qemu.log"
    echo "SKIPPED: QEMU (qemu-system-x86) cannot be installed here, so the soft-RoCE guest cannot boot"
    exit 0
  fi
fi
need=(busybox-static ibverbs-utils rdma-core ibverbs-providers cpio iproute2 kmod)
missing=()
for p in "${need[@]}"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
if ((${#missing[@]})); then
  say "installing ${missing[*]}"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
for program in "${PROGRAMS[@]}"; do
  [ -x "$BUILD_DIR/bin/$program" ] || { say "FAIL: $BUILD_DIR/bin/$program is missing (build it first; the verbs \
tests need CANOPY_WITH_VERBS=ON, i.e. libibverbs-dev)"; exit 1; }
done

# ---- 2. Debian's kernel, extracted, not installed ------------------------------------------------
# The package name follows point releases (old ones leave the mirror): resolve it every time.
KPKG=$(apt-cache depends linux-image-amd64 2>/dev/null | awk '/Depends: linux-image-[0-9]/{print $2; exit}')
if [ -z "$KPKG" ]; then
  apt-get update -qq
  KPKG=$(apt-cache depends linux-image-amd64 | awk '/Depends: linux-image-[0-9]/{print $2; exit}')
fi
KVER=${KPKG#linux-image-}
KROOT=$WORK/kroot
if [ ! -f "$KROOT/boot/vmlinuz-$KVER" ]; then
  say "downloading $KPKG"
  rm -rf "$KROOT" "$WORK"/linux-image-*.deb
  mkdir -p "$KROOT"
  (cd "$WORK" && apt-get download "$KPKG" 2>&1 | grep -v -i unsandboxed || true)
  dpkg -x "$WORK/${KPKG}"_*.deb "$KROOT"
fi
MODDIR=$KROOT/lib/modules/$KVER
[ -f "$MODDIR/modules.dep" ] || depmod -b "$KROOT" "$KVER"

# ---- 3. the initramfs: busybox, the rxe modules, rdma tools, our programs and their libraries ----
R=$WORK/initrd
rm -rf "$R"
mkdir -p "$R"/{bin,sbin,etc,proc,sys,dev,tmp,root,modules,usr/bin,usr/sbin,usr/lib/x86_64-linux-gnu,lib64}
mkdir -p "$R/etc/libibverbs.d"
ln -s usr/lib "$R/lib"  # merged /usr: ldd names /lib/x86_64-linux-gnu/...
cp /bin/busybox "$R/bin/busybox"
for applet in $("$R/bin/busybox" --list); do [ -e "$R/bin/$applet" ] || ln -s busybox "$R/bin/$applet"; done

# Modules in load order, as modprobe resolves them; crc32_generic first (see init).
: > "$R/modules/order"
for m in crc32_generic dummy rdma_rxe ib_uverbs; do
  modprobe -d "$KROOT" -S "$KVER" --show-depends "$m" | awk '$1=="insmod"{print $2}' | while read -r ko; do
    b=$(basename "$ko"); b=${b%.xz}; b=${b%.zst}
    [ -f "$R/modules/$b" ] && continue
    case "$ko" in
      *.xz) xz -dc "$ko" > "$R/modules/$b" ;;
      *.zst) zstd -dc "$ko" > "$R/modules/$b" ;;
      *) cp "$ko" "$R/modules/$b" ;;
    esac
    echo "$b" >> "$R/modules/order"
  done
done

# An executable and every library ldd lists (mawk: no \s, hence [ \t]).
copy_with_libs() {
  cp -L "$1" "$R$2"
  { ldd "$1" 2>/dev/null || true; } | awk '/=> \//{print $3} /^[ \t]*\/lib/{print $1}' | while read -r lib; do
    mkdir -p "$R$(dirname "$lib")"
    [ -e "$R$lib" ] || cp -L "$lib" "$R$lib"
  done
}
for tool in rdma ibv_devinfo; do copy_with_libs "$(command -v $tool)" /usr/bin/; done
for program in "${PROGRAMS[@]}"; do copy_with_libs "$BUILD_DIR/bin/$program" /usr/bin/; done
# Our programs load libibverbs at their first verbs call (transport/verbs/verbs_library.cpp), and
# libibverbs its rxe provider, found through its .driver file: ldd sees neither.
VERBS_LIB=/usr/lib/x86_64-linux-gnu/libibverbs.so.1
copy_with_libs "$VERBS_LIB" "$(dirname "$VERBS_LIB")/"
PROVIDERS=/usr/lib/x86_64-linux-gnu/libibverbs
mkdir -p "$R$PROVIDERS"
for so in "$PROVIDERS"/librxe-rdmav*.so; do copy_with_libs "$so" "$PROVIDERS/"; done
cp /etc/libibverbs.d/rxe.driver "$R/etc/libibverbs.d/"
echo "root:x:0:0:root:/root:/bin/sh" > "$R/etc/passwd"
echo "root:x:0:" > "$R/etc/group"
install -m 755 "$HERE/init" "$R/init"
install -m 755 "$HERE/guest_test.sh" "$R/guest_test.sh"
(cd "$R" && find . -print0 | cpio --null -o -H newc --quiet) | gzip -1 > "$WORK/initrd.cpio.gz"
say "guest: kernel $KVER, initramfs $(du -h "$WORK/initrd.cpio.gz" | cut -f1)"

# ---- 4. boot it: no NIC at all (rxe sits on a dummy netdev and loops back to itself) -------------
start=$SECONDS
set +e
timeout --kill-after=10 "$TIMEOUT" qemu-system-x86_64 -cpu max -m 1024 -smp 2 -nographic -no-reboot \
  -kernel "$KROOT/boot/vmlinuz-$KVER" -initrd "$WORK/initrd.cpio.gz" \
  -append "console=ttyS0 quiet panic=-1" -nic none < /dev/null 2>&1 | tee "$WORK/console.log"
qemu_rc=${PIPESTATUS[0]}
set -e
say "qemu exited with $qemu_rc after $((SECONDS - start)) s (console: $WORK/console.log)"
# The guest's own last lines can look like a verdict to a log reader: this line is the verdict.
if grep -q 'RXE_RESULT=PASS' "$WORK/console.log"; then
  say "RXE TESTS PASSED"
  exit 0
fi
[ "$qemu_rc" -eq 124 ] && say "the guest did not finish within RXE_TIMEOUT=$TIMEOUT s"
say "RXE TESTS FAILED: $(grep -o 'RXE_RESULT=[A-Z]* rc=[0-9]*' "$WORK/console.log" || echo 'no result from the guest')"
exit 1
