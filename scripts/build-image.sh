#!/usr/bin/env bash
# Builds edgesight's container images (`make image`) from Debian 12 packages and the .debs
# of `make package`, offline (no container registry; Debian's mirror only):
#
#   mmdebstrap --variant=extract  the edgesight .deb, its Depends, POCL and busybox
#   -> a user, the cache directory  -> rootfs.tar
#   -> podman build (packaging/container/Containerfile: FROM scratch, ADD rootfs.tar)
#   -> localhost/edgesight:<version>-<arch>, and once all three exist the manifest list
#      localhost/edgesight:<version>
#
#   scripts/build-image.sh [--rebuild] [amd64] [arm64] [armhf]     default: all three
#
# Why unpacked, not installed: installing runs maintainer scripts, which for arm64 and armhf
# needs the host to run ARM code (binfmt_misc with qemu-user), which CI machines do not
# have. The extract variant unpacks the packages and their dependencies as apt resolves
# them, runs nothing from them, and is the same for every architecture. The image is thus
# without dpkg, apt or coreutils: what runs is edgesight, the OpenCL ICD loader, POCL with
# the clang and ld it calls to build kernels, and busybox for the health check and as
# /bin/sh (`podman exec -it NAME sh`; other commands as `busybox ls` and so on).
#
# Why POCL: a CPU OpenCL, so the image runs anywhere; on a board with a GPU driver the
# host's driver is passed in (deploy/compose.yaml shows how). It is most of the size.
#
# An image whose recipe (this script, the Containerfile) and .deb are unchanged is not
# built again: the hash of those is kept in the image's label edgesight.recipe. --rebuild
# (or EDGESIGHT_IMAGE_REBUILD=1) builds anyway, e.g. for Debian's newest security updates.
# Each root is checked before it becomes an image: `edgesight devices` there (under
# qemu-user for arm64 and armhf) must list POCL. tests/image/run.sh runs the amd64 image.
#
# Needs root (mmdebstrap's root mode, rootful podman, as CI runs) and a Debian mirror
# (DEBIAN_MIRROR; DEBIAN_SECURITY_MIRROR for bookworm-security, "none" to build without
# it where a mirror lacks it). Installs podman, runc, mmdebstrap and qemu-user-static with
# apt-get when missing.
set -euo pipefail

cd "$(dirname "$0")/.."
repo=$PWD
MIRROR=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
SECURITY_MIRROR=${DEBIAN_SECURITY_MIRROR:-http://deb.debian.org/debian-security}
containerfile=packaging/container/Containerfile
# runc instead of crun, and ulimits that need no CAP_SYS_RESOURCE: see the file.
export CONTAINERS_CONF=${CONTAINERS_CONF:-$repo/scripts/containers.conf}

die() {
    echo "build-image: $*" >&2
    exit 1
}

rebuild=${EDGESIGHT_IMAGE_REBUILD:-0}
arches=()
for arg in "$@"; do
    case $arg in
        --rebuild) rebuild=1 ;;
        amd64 | arm64 | armhf) arches+=("$arg") ;;
        *) die "unknown argument '$arg' (usage: $0 [--rebuild] [amd64] [arm64] [armhf])" ;;
    esac
done
[ ${#arches[@]} -gt 0 ] || arches=(amd64 arm64 armhf)
[ "$(id -u)" -eq 0 ] || die "needs root (mmdebstrap's root mode and rootful podman)"

version=$(scripts/version.sh) || die "no version"

# podman's names for the architectures, and the qemu-user that checks the foreign roots.
declare -A podman_arch=([amd64]=amd64 [arm64]=arm64 [armhf]=arm)
declare -A podman_variant=([amd64]="" [arm64]=v8 [armhf]=v7)
declare -A qemu=([amd64]="" [arm64]=qemu-aarch64-static [armhf]=qemu-arm-static)

apt_get() { env DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=300 "$@"; }
missing=()
for p in podman runc mmdebstrap qemu-user-static; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
    echo "build-image: installing ${missing[*]}"
    apt_get update -qq
    apt_get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# Files no one in the container uses, left out as they are unpacked (dpkg's path filters,
# which mmdebstrap applies to the extract variant too): documentation but the licences
# (the image redistributes the packages), the i386/x32 multilib that clang brings on amd64,
# and the sanitizer, profiling and Polly runtimes of gcc and clang (POCL's kernels are
# built with none of them). About 100 MB of 560 on amd64.
dpkg_filters=(
    'path-exclude=/usr/share/doc/*' 'path-include=/usr/share/doc/*/copyright'
    'path-exclude=/usr/share/man/*' 'path-exclude=/usr/share/info/*'
    'path-exclude=/usr/share/locale/*' 'path-exclude=/usr/share/lintian/*'
    'path-exclude=/usr/share/bug/*'
    'path-exclude=/lib32/*' 'path-exclude=/usr/lib32/*'
    'path-exclude=/libx32/*' 'path-exclude=/usr/libx32/*'
    'path-exclude=/usr/lib/llvm-*/lib/clang/*/lib/*'
    'path-exclude=/usr/lib/*/lib*san.so*' 'path-exclude=/usr/lib/gcc/*san*'
    'path-exclude=/usr/lib/llvm-*/lib/*Polly*'
)

# Whether bookworm-security was used is part of the recipe; the mirrors' addresses are not.
recipe_hash() {
    { cat "$0" "$containerfile" "$1"; if [ "$SECURITY_MIRROR" = none ]; then echo no-security; fi; } |
        sha256sum | cut -c1-16
}

build_one() {
    local arch=$1 deb=target/deb/edgesight_${version}-1_$1.deb
    local image=localhost/edgesight:$version-$arch start=$SECONDS hash work root
    [ -f "$deb" ] || die "$deb is missing: run 'make package' (or 'scripts/package-deb.sh $arch')"
    hash=$(recipe_hash "$deb")
    if [ "$rebuild" != 1 ] && podman image exists "$image" &&
        [ "$(podman image inspect --format '{{index .Labels "edgesight.recipe"}}' "$image")" = "$hash" ]; then
        echo "build-image: $image is up to date (recipe $hash)"
        return 0
    fi
    echo "build-image: building $image from $deb"

    work=$workdir/$arch
    root=$work/root
    mkdir "$work"
    # apt hands dpkg the .deb's path as it is, so the file must be at that path inside the
    # root as well: copied there before apt runs, and removed afterwards. (mmdebstrap's
    # file-mirror-automount hook would bind-mount it instead, but does not unmount it
    # again in the extract variant.)
    cp "$deb" "$work/edgesight.deb"
    local opts=()
    for f in "${dpkg_filters[@]}"; do opts+=(--dpkgopt="$f"); done
    # The .deb's Depends (libc6, libgcc-s1, the ICD loader, libturbojpeg0) come in through
    # apt's resolution, so the image follows the package; POCL is only Suggested there.
    local sources=("deb $MIRROR bookworm main" "deb $MIRROR bookworm-updates main")
    [ "$SECURITY_MIRROR" = none ] || sources+=("deb $SECURITY_MIRROR bookworm-security main")
    # A mirror caught mid-sync serves an index that does not match its Release file, and
    # apt fails; that passes within minutes.
    local try
    for try in 1 2 3; do
        rm -rf "$root"
        TMPDIR=$work mmdebstrap --quiet --variant=extract --architectures="$arch" \
            --setup-hook="mkdir -p \"\$1$work\" && cp $work/edgesight.deb \"\$1$work/\"" \
            --include="$work/edgesight.deb" --include=pocl-opencl-icd,busybox \
            "${opts[@]}" bookworm "$root" "${sources[@]}" && break
        [ $try -lt 3 ] || die "$arch: mmdebstrap failed 3 times"
        echo "build-image: $arch: mmdebstrap failed (try $try of 3), again in 30 s" >&2
        sleep 30
    done
    echo "build-image: $arch packages unpacked ($((SECONDS - start)) s)"

    # What only installing needed (apt's and dpkg's state), what podman provides at run time
    # (/dev, resolv.conf, hostname), and what mmdebstrap copied from this machine (its
    # resolv.conf and hostname), which the image has no business carrying.
    rm -rf --one-file-system "${root:?}$workdir" "$root"/dev/* "$root"/etc/apt "$root"/etc/dpkg \
        "$root"/etc/resolv.conf "$root"/etc/hostname "$root"/etc/fstab "$root"/var/lib/apt \
        "$root"/var/cache/apt "$root"/var/lib/dpkg "$root"/var/log/*
    # No base-passwd here (nothing Essential is unpacked): the whole account database. The
    # user's home is the cache, the one place it may write, for drivers that cache under
    # $HOME (Mesa). video is 44 on Debian, Ubuntu and Raspberry Pi OS alike; render's GID
    # differs between hosts, so compose.yaml adds it by number.
    cat >"$root/etc/passwd" <<'EOF'
root:x:0:0:root:/root:/usr/sbin/nologin
nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin
edgesight:x:10001:10001:edgesight:/var/cache/edgesight:/usr/sbin/nologin
EOF
    cat >"$root/etc/group" <<'EOF'
root:x:0:
video:x:44:edgesight
nogroup:x:65534:
edgesight:x:10001:
EOF
    chmod 0644 "$root/etc/passwd" "$root/etc/group"
    install -d -m 0750 -o 10001 -g 10001 "$root/var/cache/edgesight"
    install -d -m 0755 "$root/root" "$root/etc/edgesight"
    install -d -m 0555 "$root/proc" "$root/sys"
    # Health checks written as a shell command need /bin/sh, and podman-compose 1.0.3
    # (Debian 12's) turns every check, its list form too, into `/bin/sh -c ...`.
    ln -s busybox "$root/bin/sh"
    # edgesight must find its libraries, the ICD loader and POCL in the root alone, with no
    # ld.so.cache (only installing makes one; Debian's glibc searches the multiarch
    # directories by itself). ARM roots run under qemu-user, which looks for every path
    # under -L first. armhf names POCL's ICD file directly: a 32-bit readdir() emulated on a
    # 64-bit host fails on ext4 (EOVERFLOW), which a real board's kernel does not.
    local devices
    if [ -n "${qemu[$arch]}" ]; then
        local vendors=()
        [ "$arch" != armhf ] || vendors=(OCL_ICD_VENDORS=/etc/OpenCL/vendors/pocl.icd)
        devices=$(env -i PATH=/usr/bin:/bin POCL_CACHE_DIR="$work" "${vendors[@]}" \
            "${qemu[$arch]}" -L "$root" "$root/usr/bin/edgesight" devices 2>&1) || true
    else
        # POCL reads the CPUs and memory from /proc and /sys, mounted for this run only.
        devices=$(env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin POCL_CACHE_DIR=/tmp \
            unshare --mount --propagation private sh -c 'mount -t proc proc "$1/proc" &&
                mount --rbind /sys "$1/sys" && exec chroot "$1" /usr/bin/edgesight devices' \
            sh "$root" 2>&1) || true
    fi
    grep -q "Portable Computing Language" <<<"$devices" ||
        die "$arch: 'edgesight devices' in the image's root lists no POCL: $devices"

    tar --numeric-owner --xattrs -C "$root" -cf "$work/rootfs.tar" .
    rm -rf --one-file-system "$root"
    # The image this one replaces, removed once untagged: each rebuild would leave 450 MB.
    local old
    old=$(podman image inspect --format '{{.Id}}' "$image" 2>/dev/null) || old=
    local variant=()
    [ -z "${podman_variant[$arch]}" ] || variant=(--variant "${podman_variant[$arch]}")
    podman build --quiet --format docker --arch "${podman_arch[$arch]}" "${variant[@]}" \
        --label "edgesight.recipe=$hash" \
        --label "org.opencontainers.image.title=edgesight" \
        --label "org.opencontainers.image.version=$version" \
        --label "org.opencontainers.image.description=camera frames through OpenCL kernels into Prometheus metrics" \
        -f "$containerfile" -t "$image" "$work" >/dev/null
    rm -rf "$work"
    if [ -n "$old" ] && [ "$(podman image inspect --format '{{len .RepoTags}}' "$old")" = 0 ]; then
        podman image rm "$old" >/dev/null 2>&1 || true # still used by a container: kept
    fi
    echo "build-image: $image built ($((SECONDS - start)) s, $(podman image inspect --format '{{.Size}}' "$image" | numfmt --to=si))"
}

# Not under the repository: the roots hold files of other owners, and /var/tmp, unlike /tmp,
# is disk on every Debian machine.
workdir=$(mktemp -d /var/tmp/edgesight-image.XXXXXX)
trap 'rm -rf --one-file-system "$workdir"' EXIT
for arch in "${arches[@]}"; do
    build_one "$arch"
done

# The manifest list lets `podman run localhost/edgesight:<version>` (and a pull, once pushed
# to a registry with `podman manifest push --all`) pick the machine's own image. Made anew
# from the three images after every run, as a list names images by digest: one image
# rebuilt alone (tests/image/run.sh builds amd64) would leave it naming a removed one.
list=localhost/edgesight:$version
if podman manifest exists "$list"; then
    podman manifest rm "$list" >/dev/null
fi
present=()
for arch in amd64 arm64 armhf; do
    if podman image exists "localhost/edgesight:$version-$arch"; then present+=("$arch"); fi
done
if [ ${#present[@]} -eq 3 ]; then
    podman manifest create "$list" >/dev/null
    for arch in "${present[@]}"; do
        podman manifest add "$list" "containers-storage:localhost/edgesight:$version-$arch" >/dev/null
    done
    echo "build-image: manifest list $list: ${present[*]}"
fi
