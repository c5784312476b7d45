#!/usr/bin/env bash
# Builds Mesa's OpenCL (Rusticl) with the Panfrost driver and Panfrost's no-op DRM shim, so
# that a machine with no Mali GPU compiles OpenCL kernels with the open driver's real Mali
# compiler (Bifrost G31/G52, Valhall G610) and prints its statistics: nothing runs on the
# shim (submits are no-ops, results garbage), the compiler's output is real.
#
#   scripts/mali/mesa.sh          builds (once) and prints the directory of its env.sh
#
# From Debian's mesa source package 25.0.x (trixie's, or bookworm-backports' where its files
# are still served: the newest version of either that downloads), fetched through an apt
# configuration of its own (the system's sources are not touched; apt checks the files
# against the signed indexes), with bookworm's LLVM 15, Clang 15, libclc 15 and SPIR-V
# translator, meson and mako from PyPI in a virtualenv and bindgen-cli from crates.io.
# Installed into a directory of its own, never into the system: MESA_DIR, by default
# ~/.cache/edgesight/mesa (outside the checkout, so `cargo clean` keeps it), one
# subdirectory per Mesa version; a second run finds it built and returns at once.
#
# The shim gets one patch (drm-shim.patch beside this file): fences it hands out are
# signalled (upstream's hands out none, on which Rusticl crashes at the first clFinish),
# and SHIM_GPU_TIMESTAMP_HZ=N, only when set, gives it the GPU timestamp a profiling queue
# needs; unset, it has none, like upstream's shim and board kernels before panfrost 1.3.
#
# Needs root for apt-get (as every install step of `make test`), and rustup's cargo.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
base=${MESA_DIR:-$HOME/.cache/edgesight/mesa}
series=25.0
llvm=15
meson_version=1.7.2
bindgen_version=0.73.2
jobs=${MESA_JOBS:-$(nproc)}
say() { echo "mesa: $*" >&2; }
die() { echo "mesa: $*" >&2; exit 1; }
as_root() { if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi; }
mkdir -p "$base"

# A finished build: the newest version built here whose stamp matches this recipe.
recipe=$(cat "$0" "$here/drm-shim.patch" | sha256sum | cut -c1-16)
for done in $(ls -d "$base"/*/install 2>/dev/null | sort -rV); do
    if [ "$(cat "$done/.recipe" 2>/dev/null)" = "$recipe" ]; then
        echo "$done"
        exit 0
    fi
done

# 1. Build dependencies, from bookworm.
packages=(gcc g++ pkg-config ninja-build python3-venv bison flex glslang-tools spirv-tools
          patch xz-utils dpkg-dev libdrm-dev libexpat1-dev zlib1g-dev libzstd-dev libelf-dev
          "llvm-$llvm-dev" "libclang-$llvm-dev" "libclang-cpp$llvm-dev" "libclc-$llvm"
          "libclc-$llvm-dev" "libllvmspirvlib-$llvm-dev" ocl-icd-libopencl1)
missing=()
for p in "${packages[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
    say "installing ${missing[*]}"
    as_root apt-get -o DPkg::Lock::Timeout=300 update -qq
    as_root env DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=300 install -y -qq \
        --no-install-recommends "${missing[@]}" >/dev/null
fi

# 2. The source: the newest mesa $series.x source package of trixie or bookworm-backports
#    that the mirror still serves.
apt_dir=$base/apt
mkdir -p "$apt_dir/lists/partial" "$apt_dir/cache/archives/partial"
mirror=${MESA_MIRROR:-$(sed -n 's/^URIs: *\(http[^ ]*\).*/\1/p' /etc/apt/sources.list.d/*.sources \
    2>/dev/null | grep -v security | head -1)}
[ -n "$mirror" ] || mirror=$(awk '$1 == "deb" && $2 !~ /security/ { print $2; exit }' \
    /etc/apt/sources.list 2>/dev/null)
[ -n "$mirror" ] || die "no Debian mirror in apt's sources: set MESA_MIRROR"
key=/usr/share/keyrings/debian-archive-keyring.gpg
for suite in trixie bookworm-backports; do
    echo "deb-src [signed-by=$key] $mirror $suite main"
done > "$apt_dir/sources.list"
apt_opts=(-o "Dir::Etc::SourceList=$apt_dir/sources.list" -o Dir::Etc::SourceParts=/dev/null
          -o "Dir::State::Lists=$apt_dir/lists" -o "Dir::Cache=$apt_dir/cache"
          -o Debug::NoLocking=1)
say "reading the source lists of trixie and bookworm-backports"
apt-get "${apt_opts[@]}" update -qq
versions=$(apt-cache "${apt_opts[@]}" showsrc mesa | sed -n 's/^Version: //p' |
    grep "^$series\." | sort -urV)
[ -n "$versions" ] || die "no mesa $series.x source package in trixie or bookworm-backports"
fetch=$base/fetch
got=
for v in $versions; do
    rm -rf "$fetch" && mkdir -p "$fetch"
    if (cd "$fetch" && apt-get "${apt_opts[@]}" source --download-only "mesa=$v" \
            > "$fetch/apt.log" 2>&1); then
        got=$v
        break
    fi
    say "mesa $v: $(grep -m1 '^E:' "$fetch/apt.log" || echo 'download failed')"
done
[ -n "$got" ] || die "no mesa source package of $(echo $versions) could be downloaded"
upstream=${got%%-*}
work=$base/$got
src=$work/mesa-$upstream
say "mesa $got: unpacking and patching the shim"
rm -rf "$work" && mkdir -p "$work"
(cd "$work" && dpkg-source -x "$fetch/mesa_$got.dsc" > /dev/null)
patch -s -d "$src" -p1 < "$here/drm-shim.patch"
rm -rf "$fetch"

# 3. Tools: meson and mako in a virtualenv, bindgen-cli (Rusticl's Rust bindings), rustc
#    from rustup (Debian 12's 1.63 is older than Mesa needs).
tools=$base/tools
export PATH=$tools/venv/bin:$tools/cargo/bin:$HOME/.cargo/bin:$PATH
if [ "$(meson --version 2>/dev/null)" != "$meson_version" ]; then
    say "meson $meson_version and mako from PyPI"
    /usr/bin/python3 -m venv "$tools/venv"
    "$tools/venv/bin/pip" install -q "meson==$meson_version" mako pyyaml pycparser
fi
if [ "$(bindgen --version 2>/dev/null)" != "bindgen $bindgen_version" ]; then
    say "bindgen-cli $bindgen_version from crates.io"
    cargo install -q --locked --root "$tools/cargo" --version "$bindgen_version" bindgen-cli
fi

# 4. Rusticl, Panfrost and the shim, nothing else.
install=$work/install
cat > "$work/native.ini" <<EOF
[binaries]
llvm-config = '/usr/lib/llvm-$llvm/bin/llvm-config'
bindgen = '$tools/cargo/bin/bindgen'
rust = ['$(command -v rustc)']
EOF
say "configuring (meson)"
meson setup "$work/build" "$src" --native-file "$work/native.ini" --prefix "$install" \
    -Dbuildtype=release -Dgallium-drivers=panfrost -Dgallium-rusticl=true -Dtools=drm-shim \
    -Dvulkan-drivers= -Dplatforms= -Dglx=disabled -Degl=disabled -Dgbm=disabled \
    -Dopengl=false -Dgles1=disabled -Dgles2=disabled -Dllvm=enabled -Dshared-llvm=enabled \
    -Dvalgrind=disabled -Dlibunwind=disabled -Dlmsensors=disabled -Dgallium-va=disabled \
    -Dgallium-vdpau=disabled -Dgallium-xa=disabled -Dvideo-codecs= -Dbuild-tests=false \
    > "$work/meson-setup.log" 2>&1 ||
    { tail -30 "$work/meson-setup.log" >&2; die "meson setup failed ($work/meson-setup.log)"; }
say "building with $jobs jobs (ninja; some minutes)"
started=$(date +%s)
ninja -C "$work/build" -j "$jobs" > "$work/ninja.log" 2>&1 ||
    { tail -40 "$work/ninja.log" >&2; die "the build failed ($work/ninja.log)"; }
meson install -C "$work/build" --no-rebuild --quiet > "$work/install.log" 2>&1 ||
    { tail -20 "$work/install.log" >&2; die "meson install failed ($work/install.log)"; }
say "built in $(( $(date +%s) - started )) s"

# 5. An OpenCL vendor directory naming Rusticl by its full path, and the environment that
#    puts the shim's Mali in front of any OpenCL program.
lib=$(dirname "$(find "$install" -name libRusticlOpenCL.so.1 | head -1)")
[ -f "$lib/libpanfrost_noop_drm_shim.so" ] || die "no shim under $install"
mkdir -p "$install/vendors"
echo "$lib/libRusticlOpenCL.so.1" > "$install/vendors/rusticl.icd"
cat > "$install/env.sh" <<EOF
# Sourced: the OpenCL programs started after it see one device, the shim's Mali (a G52
# unless PAN_GPU_ID says another: a867 a G610, 7093 a G31), whose compiler runs for real
# and whose jobs are never run. Mesa $got.
export LD_PRELOAD=$lib/libpanfrost_noop_drm_shim.so
export OCL_ICD_VENDORS=$install/vendors
export RUSTICL_ENABLE=panfrost
export MESA_SHADER_CACHE_DISABLE=true
EOF
echo "$got" > "$install/.version"
echo "$recipe" > "$install/.recipe"
echo "$install"
