#!/usr/bin/env bash
# Runs an ARM program under qemu-user inside the emulated sysroot (tests/arm/sysroot.sh),
# with POCL as its OpenCL:
#
#   tests/arm/in-sysroot.sh aarch64|armv7 PROGRAM [ARGS...]
#
# In a private mount namespace (nothing stays mounted afterwards) it mounts proc, sys and
# dev into the sysroot, binds the repository and the temporary directory at their own
# paths (so PROGRAM, its arguments and the working directory mean the same inside), and
# for armv7 puts a tmpfs over /etc/OpenCL/vendors (32-bit readdir() of an ext4/overlay
# directory fails with EOVERFLOW on a 64-bit host, and ocl-icd would list no platform).
# POCL_CACHE_DIR defaults to target/arm/pocl-cache-ARCH, kept between runs.
set -euo pipefail

arch=${1:?usage: in-sysroot.sh aarch64|armv7 PROGRAM [ARGS...]}
shift
root=$(cd "$(dirname "$0")/../.." && pwd)
case $arch in
aarch64) qemu="qemu-aarch64-static" ;;
armv7) qemu="qemu-arm-static" ;;
*) echo "in-sysroot.sh: unknown arch '$arch' (aarch64 or armv7)" >&2; exit 2 ;;
esac
sysroot=$root/target/arm/sysroot-$arch
[ -f "$sysroot/.edgesight-sysroot" ] ||
    { echo "in-sysroot.sh: no sysroot at $sysroot (run tests/arm/sysroot.sh $arch)" >&2; exit 1; }
cache=${POCL_CACHE_DIR_ARM:-$root/target/arm/pocl-cache-$arch}
tmp=$(cd "${TMPDIR:-/tmp}" && pwd -P)
mkdir -p "$cache" "$sysroot$root" "$sysroot$tmp"
wd=$(pwd -P)
case $wd/ in "$root"/* | "$tmp"/*) ;; *) wd=/ ;; esac

# shellcheck disable=SC2016
exec env -u LD_LIBRARY_PATH -u LD_PRELOAD -u OPENCL_DYLIB_PATH -u OCL_ICD_VENDORS \
    PATH=/usr/bin:/bin HOME=/root TMPDIR="$tmp" POCL_CACHE_DIR="$cache" \
    unshare --mount --propagation private /bin/bash -c '
    set -e
    sysroot=$1 root=$2 tmp=$3 arch=$4 wd=$5 qemu=$6
    shift 6
    mount -t proc proc "$sysroot/proc"
    mount --rbind /sys "$sysroot/sys"
    mount --rbind /dev "$sysroot/dev"
    mount --bind "$root" "$sysroot$root"
    mount --bind "$tmp" "$sysroot$tmp"
    if [ "$arch" = armv7 ]; then
        icd=$(cat "$sysroot/etc/OpenCL/vendors/pocl.icd")
        mount -t tmpfs -o size=64k,mode=755 vendors "$sysroot/etc/OpenCL/vendors"
        printf "%s\n" "$icd" > "$sysroot/etc/OpenCL/vendors/pocl.icd"
    fi
    exec unshare --root="$sysroot" --wd="$wd" "/usr/bin/$qemu" "$@"
' in-sysroot "$sysroot" "$root" "$tmp" "$arch" "$wd" "$qemu" "$@"
