#!/usr/bin/env bash
# Builds the emulated ARM sysroot that tests/arm/run.sh runs ARM binaries in: Debian 12's
# POCL (pocl-opencl-icd, ocl-icd, clang/LLVM 15 and their libraries) for arm64 or armhf,
# downloaded and unpacked with `dpkg -x` (never installed: installing pocl:arm64 through
# multiarch would remove the amd64 toolchain), plus the host's qemu-user binary and the
# host's x86 cross `ld` (POCL exec()s `ld` to link each kernel), with the x86 libraries it
# needs.
#
#   tests/arm/sysroot.sh aarch64|armv7
#
# Result: target/arm/sysroot-ARCH/ (skipped when present and built from the same package
# list and this script; the unpacked package names are in its .edgesight-packages). apt runs
# with a private configuration (APT_CONFIG, own sources, lists and cache under
# target/arm/apt-ARCH/, removed afterwards): the host's dpkg architectures, sources and
# package lists are not touched. Needs apt, dpkg, qemu-user-static and binutils-{aarch64-linux-gnu,arm-linux-gnueabihf}.
set -euo pipefail

arch=${1:?usage: sysroot.sh aarch64|armv7}
root=$(cd "$(dirname "$0")/../.." && pwd)
case $arch in
aarch64) deb_arch=arm64 gnu=aarch64-linux-gnu qemu=qemu-aarch64-static ;;
armv7) deb_arch=armhf gnu=arm-linux-gnueabihf qemu=qemu-arm-static ;;
*) echo "sysroot.sh: unknown arch '$arch' (aarch64 or armv7)" >&2; exit 2 ;;
esac

packages=(clang-15 gcc-12-base libatomic1 libbsd0 libc6-dev libc6 libclang-common-15-dev
    libclang-cpp15 libclang1-15 libctf-nobfd0 libctf0 libedit2 libffi8 libgcc-12-dev
    libgcc-s1 libgomp1 libhwloc15 libicu72 libjansson4 libllvm15 liblzma5 libmd0 libpocl2
    libstdc++-12-dev libstdc++6 libtinfo6 libudev1 libxml2 libz3-4 libzstd1 linux-libc-dev
    llvm-15-linker-tools ocl-icd-libopencl1 pocl-opencl-icd zlib1g libpocl2-common
    libturbojpeg0)
# libgprofng0 and libitm1 do not exist for armhf.
[ "$deb_arch" = arm64 ] && packages+=(libgprofng0 libitm1)

out=$root/target/arm/sysroot-$arch
stamp_want=$( (printf '%s\n' "${packages[@]}"; cat "$0") | sha256sum | cut -c1-16)
if [ -f "$out/.edgesight-sysroot" ] && [ "$(cat "$out/.edgesight-sysroot")" = "$stamp_want" ]; then
    exit 0
fi

log() { echo "sysroot $arch: $*"; }
for tool in "$qemu" "$gnu-ld" dpkg apt-get; do
    command -v "$tool" >/dev/null || {
        echo "sysroot.sh: $tool missing (qemu-user-static, binutils-$gnu)" >&2; exit 1; }
done

# 1. A private apt: its own sources, lists, cache and (empty) dpkg status, one architecture.
apt_dir=$root/target/arm/apt-$arch
mkdir -p "$apt_dir"/{lists/partial,cache/archives/partial,etc/preferences.d,etc/apt.conf.d,debs}
: > "$apt_dir/status"
cat > "$apt_dir/etc/sources.list" <<EOF
deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian bookworm main
deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian bookworm-updates main
deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian-security bookworm-security main
EOF
cat > "$apt_dir/apt.conf" <<EOF
APT::Architecture "$deb_arch";
APT::Architectures { "$deb_arch"; };
Dir::State "$apt_dir";
Dir::State::Lists "$apt_dir/lists";
Dir::State::status "$apt_dir/status";
Dir::Cache "$apt_dir/cache";
Dir::Etc::SourceList "$apt_dir/etc/sources.list";
Dir::Etc::SourceParts "$apt_dir/etc/sources.list.d";
Dir::Etc::PreferencesParts "$apt_dir/etc/preferences.d";
Dir::Etc::Preferences "$apt_dir/etc/preferences";
APT::Sandbox::User "root";
Acquire::Languages "none";
EOF
export APT_CONFIG=$apt_dir/apt.conf
t0=$SECONDS
log "apt-get update ($deb_arch, private lists in ${apt_dir#"$root"/})"
# A mirror caught mid-sync ("File has unexpected size") fails one index: try again, and in
# the end go on with the indexes that did arrive (the download below fails if one is missing).
for try in 1 2; do
    apt-get -q update >"$apt_dir/update.log" 2>&1 && break
    [ "$try" = 2 ] || { log "apt-get update failed, retrying in 5 s"; sleep 5; continue; }
    grep '^[EW]:' "$apt_dir/update.log" | head -3 | sed "s/^/sysroot $arch: /" >&2
    log "going on with the package lists that did arrive"
done
log "downloading ${#packages[@]} packages"
rm -f "$apt_dir"/debs/*.deb
(cd "$apt_dir/debs" && apt-get -q download "${packages[@]/%/:$deb_arch}" >"$apt_dir/download.log" 2>&1) ||
    { cat "$apt_dir/download.log" >&2; exit 1; }
log "downloaded $(du -sh "$apt_dir/debs" | cut -f1) in $((SECONDS - t0)) s"

# 2. Unpack.
t1=$SECONDS
rm -rf "$out.tmp" && mkdir -p "$out.tmp"
for deb in "$apt_dir"/debs/*.deb; do dpkg -x "$deb" "$out.tmp"; done
rm -rf "$out.tmp"/usr/share/{doc,man,info,locale,lintian}
ls "$apt_dir"/debs/ > "$out.tmp/.edgesight-packages"
rm -rf "$apt_dir"   # ~50 MB of package lists; a rebuild fetches them again in seconds

# 3. qemu-user, the mount points and the writable places POCL and the tests use.
mkdir -p "$out.tmp"/{usr/bin,proc,sys,dev,tmp,etc/OpenCL/vendors,root}
cp "$(command -v "$qemu")" "$out.tmp/usr/bin/$qemu"
chmod 1777 "$out.tmp/tmp"
[ -f "$out.tmp/etc/OpenCL/vendors/pocl.icd" ] || { echo "sysroot.sh: no pocl.icd unpacked" >&2; exit 1; }

# 4. The host's x86 cross linker as `ld`, with its x86 libraries and dynamic loader (found
#    by the loader's default multiarch paths inside the sysroot).
cp "$(command -v "$gnu-ld")" "$out.tmp/usr/bin/$gnu-ld"
ln -sf "$gnu-ld" "$out.tmp/usr/bin/ld"
mkdir -p "$out.tmp/lib64" "$out.tmp/usr/lib/x86_64-linux-gnu"
ldd "$(command -v "$gnu-ld")" | awk '/=>/ { print $3 } /^\t\/lib64/ { print $1 }' | while read -r lib; do
    case $lib in
    /lib64/*) cp -L "$lib" "$out.tmp$lib" ;;
    *) cp -L "$lib" "$out.tmp/usr/lib/x86_64-linux-gnu/" ;;
    esac
done
[ -f "$out.tmp/lib64/ld-linux-x86-64.so.2" ] || { echo "sysroot.sh: no x86 loader copied" >&2; exit 1; }

echo "$stamp_want" > "$out.tmp/.edgesight-sysroot"
rm -rf "$out" && mv "$out.tmp" "$out"
log "unpacked in $((SECONDS - t1)) s: $(du -sh "$out" | cut -f1) in ${out#"$root"/}"
