#!/usr/bin/env bash
# Builds the Debian packages of edgesight (`make package`):
#   target/deb/edgesight_<version>-1_<arch>.deb   for amd64, arm64 and armhf
# or only for the architectures named: `scripts/package-deb.sh amd64` (what the systemd VM
# test needs). `--lintian` runs lintian on the packages afterwards and fails on warnings.
#
# Each package holds /usr/bin/edgesight, the systemd unit, /etc/edgesight/edgesight.toml
# (deploy/edgesight.toml as a conffile: the V4L2 camera /dev/video0 on "127.0.0.1:8947"), the man
# pages and the docs with the fleet files of deploy/, the TLS drop-in
# (edgesight.service.d/tls.conf) and the board's Prometheus agent (agent/) as examples.
# The maintainer scripts enable and start the service on install, as Debian's exporters
# do (packaging/deb/postinst says why). The tree is built here and packed with plain
# dpkg-deb, so nothing beyond dpkg and binutils is needed (no debhelper, no cargo-deb);
# the static parts (control template, maintainer scripts, copyright, changelog) are in
# packaging/deb/.
#
# Binaries: amd64 is built here with `cargo build --release --locked`; arm64 and armhf are
# taken from `make cross` (scripts/cross-build.sh: binaries for glibc 2.31 under
# target/cross/). EDGESIGHT_BIN_AMD64, EDGESIGHT_BIN_ARM64 and EDGESIGHT_BIN_ARMHF point at
# other binaries instead, e.g. target/aarch64-unknown-linux-gnu/release/edgesight from a
# plain `cargo build --target`. The man pages do not depend on the architecture, so they
# are written by the amd64 binary (its hidden `edgesight manpage` command) for all three.
set -euo pipefail

cd "$(dirname "$0")/.."
pkgdir=packaging/deb
outdir=target/deb
# Everything the packages install is group- and world-readable; dpkg-deb keeps the modes.
umask 022

die() {
    echo "package-deb: $*" >&2
    exit 1
}

lintian=false
arches=()
for arg in "$@"; do
    case $arg in
        --lintian) lintian=true ;;
        amd64 | arm64 | armhf) arches+=("$arg") ;;
        *) die "unknown argument '$arg' (usage: $0 [--lintian] [amd64] [arm64] [armhf])" ;;
    esac
done
[ ${#arches[@]} -gt 0 ] || arches=(amd64 arm64 armhf)

# The version is Cargo's; the Debian revision stays 1 until the packaging changes on its
# own. The changelog must already have the entry: dpkg and lintian read the version there.
version=$(scripts/version.sh) || die "no version"
debversion=$version-1
changelog_version=$(sed -n '1s/^edgesight (\([^)]*\)).*/\1/p' $pkgdir/changelog)
[ "$changelog_version" = "$debversion" ] ||
    die "$pkgdir/changelog starts at $changelog_version, Cargo.toml says $version: add an entry for $debversion"
# Timestamps inside the packages come from the changelog, as dpkg-buildpackage does, so
# building the same tree twice gives the same files.
SOURCE_DATE_EPOCH=$(date -d "$(sed -n 's/^ -- .*>  //p' $pkgdir/changelog | head -n1)" +%s)
export SOURCE_DATE_EPOCH

# Per architecture: the Rust target, the binary's default place, its ELF machine as
# readelf names it, and the strip that understands it (from binutils-*-cross, which
# comes with the cross gcc).
declare -A triple=(
    [amd64]=x86_64-unknown-linux-gnu
    [arm64]=aarch64-unknown-linux-gnu
    [armhf]=armv7-unknown-linux-gnueabihf
)
declare -A binary=(
    [amd64]=${EDGESIGHT_BIN_AMD64:-target/release/edgesight}
    [arm64]=${EDGESIGHT_BIN_ARM64:-target/cross/aarch64-unknown-linux-gnu/release/edgesight}
    [armhf]=${EDGESIGHT_BIN_ARMHF:-target/cross/armv7-unknown-linux-gnueabihf/release/edgesight}
)
declare -A machine=([amd64]="X86-64" [arm64]="AArch64" [armhf]="ARM")
declare -A strip=([amd64]=strip [arm64]=aarch64-linux-gnu-strip [armhf]=arm-linux-gnueabihf-strip)

# The amd64 binary is needed in any case, for the man pages. Built without
# SOURCE_DATE_EPOCH: cc-rs rebuilds the C of ring and friends when that variable changes,
# so with it every package run and every plain `cargo build --release` after it would
# rebuild a minute and a half each, and the package would not hold the binary `make build`
# made and the tests ran.
if [ -z "${EDGESIGHT_BIN_AMD64:-}" ]; then
    env -u SOURCE_DATE_EPOCH cargo build --release --locked
fi

for arch in "${arches[@]}"; do
    bin=${binary[$arch]}
    if [ ! -f "$bin" ]; then
        case $arch in
            amd64) die "$bin is missing (EDGESIGHT_BIN_AMD64)" ;;
            *) die "$bin is missing: run 'make cross' first (or set EDGESIGHT_BIN_${arch^^})" ;;
        esac
    fi
    header=$(readelf -hW "$bin") || die "$bin is not an ELF binary"
    grep -q "Machine:.*${machine[$arch]}\$" <<<"$header" ||
        die "$bin is not a ${machine[$arch]} binary: $(grep Machine: <<<"$header")"
    if [ "$arch" = armhf ] && ! grep -q "hard-float ABI" <<<"$header"; then
        die "$bin does not use the hard-float ABI that armhf needs"
    fi
    command -v "${strip[$arch]}" >/dev/null ||
        die "${strip[$arch]} not found (it comes with the cross gcc: binutils-${strip[$arch]%-strip})"
    # A cross binary built before the last source change is packaged, but not silently.
    if newer=$(find src crates kernels Cargo.toml Cargo.lock -newer "$bin" -print -quit) && [ -n "$newer" ]; then
        echo "package-deb: warning: $bin is older than $newer" >&2
    fi
done

# A build directory of its own, so that runs at the same time (the VM test, a developer)
# do not mix their trees; each package is moved into place whole.
mkdir -p "$outdir"
build=$(mktemp -d "$outdir/build.XXXXXX")
trap 'rm -rf "$build"' EXIT

"${binary[amd64]}" manpage --dir "$build/man" --date "$(date -u -d "@$SOURCE_DATE_EPOCH" +%F)"
gzip -9n "$build/man"/*.1

# Debian's dpkg-shlibdeps cannot map a cross binary's libraries to packages unless that
# architecture's libc6 is installed (the cross toolchain's libc6-arm64-cross is a different
# package), so the Depends come from the ELF file itself, as dpkg-shlibdeps would write
# them: the highest symbol version the binary asks of glibc (GLIBC_2.34 -> libc6 (>= 2.34))
# and of libgcc_s. Any other library is an error here rather than a missing Depends.
max_symbol_version() {
    readelf -VW "$1" | sed -n "s/.*Name: $2_\([0-9][0-9.]*\) .*/\1/p" | sort -uV | tail -n1
}
shlibs_depends() {
    local bin=$1 lib glibc gcc
    for lib in $(readelf -dW "$bin" | sed -n 's/.*(NEEDED).*\[\(.*\)\]$/\1/p'); do
        case $lib in
            libc.so.6 | libm.so.6 | libdl.so.2 | libpthread.so.0 | librt.so.1 | ld-linux*.so.*) ;;
            libgcc_s.so.1) ;;
            *) die "$bin needs $lib, which no Depends provides: add its package to $0" ;;
        esac
    done
    glibc=$(max_symbol_version "$bin" GLIBC)
    [ -n "$glibc" ] || die "$bin asks for no GLIBC_ symbol version"
    # Binaries linked with DT_RELR (glibc 2.36's packed relocations) need that glibc.
    if readelf -VW "$bin" | grep -q "Name: GLIBC_ABI_DT_RELR"; then
        glibc=$(printf '%s\n' "$glibc" 2.36 | sort -V | tail -n1)
    fi
    printf 'libc6 (>= %s)' "$glibc"
    gcc=$(max_symbol_version "$bin" GCC)
    if [ -n "$gcc" ]; then
        printf ', libgcc-s1 (>= %s)' "$gcc"
    fi
}

# Installed-Size as dpkg-gencontrol counts it: KiB per file, rounded up, 1 per other inode.
installed_size() {
    find "$1" -path "$1/DEBIAN" -prune -o ! -path "$1" -printf '%y %s\n' |
        awk '{ n += ($1 == "f") ? int(($2 + 1023) / 1024) : 1 } END { print n }'
}

# The crates linked into the binary for this target (proc macros and build tools are
# not), with each one's licence and the copyright lines of its licence files.
crate_list() {
    local target=$1 name ver license notice
    local registry=${CARGO_HOME:-$HOME/.cargo}/registry/src
    echo " Rust standard library: MIT OR Apache-2.0; Copyright (c) The Rust Project Developers"
    cargo tree --locked -e normal,no-proc-macro --target "$target" --prefix none \
        -f '{p}|{l}' | sed 's/ (\*)$//' | sort -u |
        while IFS='|' read -r pkg license; do
            read -r name ver _ <<<"$pkg"
            case $name in edgesight | edgesight-*) continue ;; esac
            ver=${ver#v}
            # Licence templates' placeholders ("[yyyy] [name of copyright owner]") are no notice.
            notice=$(cat "$registry"/*/"$name-$ver"/{LICENSE,COPYING,COPYRIGHT}* 2>/dev/null |
                tr -d '\r' | grep -E '^\s*Copyright (\(c\)|©|[0-9])' |
                grep -vE 'yyyy|YEAR|YOUR NAME|<year>' | sed 's/^\s*//' | sort -u |
                paste -sd ';' - | sed 's/;/; /g') || true
            echo " $name $ver: $license${notice:+; $notice}"
        done
}

for arch in "${arches[@]}"; do
    root=$build/$arch
    deb=$outdir/edgesight_${debversion}_$arch.deb
    echo "package-deb: $deb from ${binary[$arch]}"

    install -d "$root/DEBIAN" "$root/usr/bin" "$root/lib/systemd/system" "$root/etc/edgesight" \
        "$root/usr/share/doc/edgesight/examples/targets" \
        "$root/usr/share/doc/edgesight/examples/edgesight.service.d" "$root/usr/share/man/man1" \
        "$root/usr/share/doc/edgesight/examples/agent"
    # What dh_strip does for programs: no symbols, no .comment/.note sections.
    "${strip[$arch]}" --remove-section=.comment --remove-section=.note \
        -o "$root/usr/bin/edgesight" "${binary[$arch]}"
    chmod 0755 "$root/usr/bin/edgesight"
    # /lib, not /usr/lib: where Debian 12's packages put units (its dpkg is not yet
    # aware of the /usr merge).
    install -m 0644 systemd/edgesight.service "$root/lib/systemd/system/"
    install -m 0644 deploy/edgesight.toml "$root/etc/edgesight/"
    install -m 0644 "$build"/man/*.1.gz "$root/usr/share/man/man1/"

    doc=$root/usr/share/doc/edgesight
    gzip -9n <README.md >"$doc/README.md.gz"
    # The guide's pages as Markdown, readable on a board without a browser.
    install -d "$doc/guide"
    for page in docs/src/*.md; do
        [ "$(basename "$page")" = SUMMARY.md ] ||
            gzip -9n <"$page" >"$doc/guide/$(basename "$page").gz"
    done
    gzip -9n <$pkgdir/changelog >"$doc/changelog.Debian.gz"
    crate_list "${triple[$arch]}" >"$build/crates-$arch"
    sed -e "/^@CRATES@\$/{r $build/crates-$arch" -e 'd}' $pkgdir/copyright.in >"$doc/copyright"
    # As dh_installexamples leaves them: uncompressed, so they can be copied as they are.
    install -m 0644 deploy/prometheus.yml deploy/alerts.yml deploy/alerts.test.yml \
        deploy/grafana-dashboard.json deploy/demo.toml "$doc/examples/"
    install -m 0644 deploy/targets/*.yml "$doc/examples/targets/"
    # An example, not a file in /etc/systemd/system: TLS needs the admin's certificate
    # first, and a drop-in naming missing files would stop the service from starting.
    install -m 0644 deploy/edgesight.service.d/tls.conf "$doc/examples/edgesight.service.d/"
    # The board's Prometheus agent: an example too, as it needs the centre's address and
    # the board's identity before it can run (docs/src/fleet.md, "Pushing through a Prometheus
    # agent").
    install -m 0644 deploy/agent/agent.yml deploy/agent/edgesight-agent.service \
        deploy/agent/edgesight-agent.default "$doc/examples/agent/"
    if [ -s $pkgdir/lintian-overrides ]; then
        install -D -m 0644 $pkgdir/lintian-overrides "$root/usr/share/lintian/overrides/edgesight"
    fi

    install -m 0755 $pkgdir/postinst $pkgdir/prerm $pkgdir/postrm "$root/DEBIAN/"
    echo /etc/edgesight/edgesight.toml >"$root/DEBIAN/conffiles"
    chmod 0644 "$root/DEBIAN/conffiles"
    # dpkg keeps the conffiles' hashes itself, so md5sums leaves them (all of /etc) out, as
    # dh_md5sums does.
    (cd "$root" && find . -path ./DEBIAN -prune -o -path ./etc -prune -o -type f -printf '%P\0' |
        LC_ALL=C sort -z | xargs -0 md5sum) >"$root/DEBIAN/md5sums"
    depends=$(shlibs_depends "$root/usr/bin/edgesight")
    size=$(installed_size "$root")
    sed -e "s/@VERSION@/$debversion/" -e "s/@ARCH@/$arch/" -e "s/@INSTALLED_SIZE@/$size/" \
        -e "s/@SHLIBS_DEPENDS@/$depends/" $pkgdir/control.in >"$root/DEBIAN/control"
    chmod 0644 "$root/DEBIAN/control" "$root/DEBIAN/md5sums"

    find "$root" -exec touch --no-dereference --date="@$SOURCE_DATE_EPOCH" {} +
    # --root-owner-group: root:root in the archive without building as root or fakeroot.
    dpkg-deb --root-owner-group -Zxz --build "$root" "$build/$arch.deb" >/dev/null
    mv "$build/$arch.deb" "$deb"
done

debs=()
for arch in "${arches[@]}"; do
    debs+=("$outdir/edgesight_${debversion}_$arch.deb")
done
ls -l "${debs[@]}"
if $lintian; then
    lintian --fail-on error,warning "${debs[@]}"
fi
