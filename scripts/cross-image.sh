#!/usr/bin/env bash
# Builds the container image that `cross` (cross-rs) uses for edgesight's ARM builds, from
# Debian packages only, so it works where ghcr.io / Docker Hub cannot be reached:
#
#   debootstrap --variant=minbase bullseye  ->  chroot apt-get install the cross toolchains
#   ->  tar | podman import  ->  localhost/edgesight-cross:bullseye-1
#
# Why Debian 11 (bullseye): its cross libc is glibc 2.31, so the binaries run on Debian 11 /
# Raspberry Pi OS bullseye / Ubuntu 20.04 and newer (built against Debian 12's cross libc
# they would need glibc >= 2.34). Why not cross-rs's own 0.2.5 images: they cannot be pulled
# offline and their libclang (3.8) is too old for the bindgen that the v4l crate runs.
#
# One image holds both toolchains (aarch64 and armv7): the base system, libclang and the host
# gcc are most of the work and the size, so one image costs little more than one target's.
# The image has no Rust: cross mounts the host's toolchain into it.
#
# Does nothing when the image already exists. Bump the tag when the recipe below changes, and
# update Cross.toml to match.
# Needs root (debootstrap, chroot) and network access to a Debian mirror
# (DEBIAN_MIRROR, default http://deb.debian.org/debian). Installs podman, runc and debootstrap
# with apt-get when missing.
set -euo pipefail

IMAGE=${EDGESIGHT_CROSS_IMAGE:-localhost/edgesight-cross:bullseye-1}
MIRROR=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
SECURITY_MIRROR=${DEBIAN_SECURITY_MIRROR:-http://deb.debian.org/debian-security}
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# runc instead of crun, and ulimits that need no CAP_SYS_RESOURCE: see the file.
export CONTAINERS_CONF=${CONTAINERS_CONF:-$here/containers.conf}

as_root() { if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi; }
# Other users of the machine may hold the dpkg lock; wait for it rather than fail.
apt_get() { as_root env DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=300 "$@"; }

missing=()
for p in podman runc debootstrap; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing+=("$p")
done
# Rootless podman maps users through newuidmap/newgidmap.
[ "$(id -u)" -eq 0 ] || dpkg-query -W -f='${Status}' uidmap 2>/dev/null | grep -q "ok installed" ||
    missing+=(uidmap)
if [ ${#missing[@]} -gt 0 ]; then
    echo "cross-image: installing ${missing[*]}"
    apt_get update -qq
    apt_get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

if podman image exists "$IMAGE"; then
    exit 0
fi
echo "cross-image: building $IMAGE (Debian 11 root + aarch64 and armv7 cross toolchains)"
start=$SECONDS

# Not under the repository: the tree must stay clean, and the root holds device nodes.
root=$(as_root mktemp -d /var/tmp/edgesight-cross.XXXXXX)
# mktemp makes it 0700; apt's _apt user must be able to enter it to download.
as_root chmod 755 "$root"
cleanup() {
    as_root umount "$root/proc" 2>/dev/null || true
    as_root rm -rf --one-file-system "$root"
}
trap cleanup EXIT

as_root debootstrap --variant=minbase bullseye "$root" "$MIRROR" >/dev/null
echo "cross-image: debootstrap done ($((SECONDS - start)) s)"

as_root tee "$root/etc/apt/sources.list" >/dev/null <<EOF
deb $MIRROR bullseye main
deb $MIRROR bullseye-updates main
deb $SECURITY_MIRROR bullseye-security main
EOF
as_root cp /etc/resolv.conf "$root/etc/resolv.conf"
# Some maintainer scripts read /proc.
as_root mount -t proc proc "$root/proc"

packages=(
    # bindgen (v4l) loads libclang (LLVM 11 here); its clang headers come with it.
    libclang-dev
    # Build scripts and proc macros are linked for the container's own x86-64.
    gcc libc6-dev pkg-config make
    # The boards: linkers, glibc 2.31, and the kernel headers (linux/videodev2.h) that
    # bindgen reads through --sysroot.
    gcc-aarch64-linux-gnu libc6-dev-arm64-cross linux-libc-dev-arm64-cross
    gcc-arm-linux-gnueabihf libc6-dev-armhf-cross linux-libc-dev-armhf-cross
)
in_root() { as_root env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin DEBIAN_FRONTEND=noninteractive chroot "$root" "$@"; }
in_root apt-get update -qq
# No pty in a bare chroot: without Use-Pty=0 dpkg logs "E: Can not write log" (harmless).
in_root apt-get -o Dpkg::Use-Pty=0 install -y -qq --no-install-recommends "${packages[@]}" >/dev/null
# Smaller image: package lists and caches are only needed to install, docs never. Debian's
# cross cc1/lto1 carry their debug info (~200 MB each, ~700 MB of the image); gcc runs the same
# without it.
in_root apt-get clean
in_root sh -c 'strip --strip-debug /usr/lib/gcc-cross/*/*/cc1 /usr/lib/gcc-cross/*/*/lto1'
as_root rm -rf "$root"/var/lib/apt/lists/* "$root"/usr/share/doc/* "$root"/usr/share/man/* \
    "$root"/var/cache/debconf/*-old "$root"/var/log/*.log "$root/etc/resolv.conf"
as_root umount "$root/proc"
echo "cross-image: packages installed ($((SECONDS - start)) s)"

# cargo runs inside the container, so the image's environment is cargo's: the linker, and the
# per-target variables the cc crate and bindgen read. The sysroot makes bindgen's clang take the
# board's headers (linux/videodev2.h, asm/), not x86's.
env_changes=(
    "ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
    "ENV CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_LINKER=aarch64-linux-gnu-gcc"
    "ENV CC_aarch64_unknown_linux_gnu=aarch64-linux-gnu-gcc"
    "ENV AR_aarch64_unknown_linux_gnu=aarch64-linux-gnu-ar"
    "ENV BINDGEN_EXTRA_CLANG_ARGS_aarch64_unknown_linux_gnu=--sysroot=/usr/aarch64-linux-gnu"
    "ENV CARGO_TARGET_ARMV7_UNKNOWN_LINUX_GNUEABIHF_LINKER=arm-linux-gnueabihf-gcc"
    "ENV CC_armv7_unknown_linux_gnueabihf=arm-linux-gnueabihf-gcc"
    "ENV AR_armv7_unknown_linux_gnueabihf=arm-linux-gnueabihf-ar"
    "ENV BINDGEN_EXTRA_CLANG_ARGS_armv7_unknown_linux_gnueabihf=--sysroot=/usr/arm-linux-gnueabihf"
)
changes=()
for c in "${env_changes[@]}"; do changes+=(--change "$c"); done
as_root tar --numeric-owner -C "$root" -c . |
    podman import --quiet "${changes[@]}" --message "edgesight cross image (scripts/cross-image.sh)" - "$IMAGE" >/dev/null
echo "cross-image: $IMAGE imported ($((SECONDS - start)) s, $(podman image inspect --format '{{.Size}}' "$IMAGE" | numfmt --to=iec))"
