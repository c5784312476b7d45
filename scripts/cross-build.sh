#!/usr/bin/env bash
# Builds edgesight for the boards with cross-rs, offline, in the Debian 11 image that
# scripts/cross-image.sh makes (glibc 2.31, so the binaries run on Debian 11 and newer):
#
#   scripts/cross-build.sh           release binaries for aarch64 and armv7 in
#                                    target/cross/<triple>/release/edgesight
#   scripts/cross-build.sh --tests   also the test executables (cargo test --no-run), their
#                                    paths listed in target/cross/<triple>/test-binaries.txt
#   scripts/cross-build.sh --kernel-tests   only tests/kernels/'s (make test-arm runs it
#                                    under qemu-user: the boards' tests of the shipped build)
#
# Steps: install cross 0.2.5 and make the image if missing (both at once), build each target, then
# check each binary: it starts under qemu-user (`--version`) and needs no glibc newer than
# 2.31. Exits non-zero, loudly, when any of that fails. Prints each phase's time.
#
# target/cross, not target/<triple>: plain `cargo build --target <triple>` (make cross) uses
# target/<triple> with Debian 12's libc; sharing it would rebuild both ways every time.
# CARGO_BUILD_JOBS is passed into the container, to limit parallelism.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
targets=(aarch64-unknown-linux-gnu armv7-unknown-linux-gnueabihf)
max_glibc=2.31
target_dir=target/cross

build_tests=false
test_filter=()
case "${1:-}" in
    "") ;;
    --tests) build_tests=true ;;
    --kernel-tests) build_tests=true test_filter=(--test kernels) ;;
    *) echo "usage: $0 [--tests|--kernel-tests]" >&2; exit 2 ;;
esac

as_root() { if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi; }
timings=()
phase_start=$SECONDS
phase_done() {
    timings+=("$(printf '%-46s %4d s' "$1" $((SECONDS - phase_start)))")
    phase_start=$SECONDS
}

# runc instead of crun, and ulimits that need no CAP_SYS_RESOURCE: see the file.
export CONTAINERS_CONF=${CONTAINERS_CONF:-$PWD/scripts/containers.conf}
export CROSS_CONTAINER_ENGINE=podman
# Run niced (make test's second lane), the build should stay behind the other lane's work,
# but podman puts a container in a cgroup of its own, where the caller's nice value counts
# for nothing against the processes outside. So it gets the smallest CPU weight instead, in
# a cgroup right under the root (under podman's own parent it would weigh as much as any
# one process at nice 0). Only where podman manages cgroups itself (cgroupfs); with systemd
# as the manager the container stays as podman makes it.
if [ "$(nice)" -gt 0 ] && [ "$(podman info --format '{{.Host.CgroupManager}}' 2>/dev/null)" = cgroupfs ]; then
    export CROSS_CONTAINER_OPTS="${CROSS_CONTAINER_OPTS:+$CROSS_CONTAINER_OPTS }--cgroup-parent=/ --cpu-shares=2"
    echo "cross-build: niced, so the containers get the least CPU weight ($CROSS_CONTAINER_OPTS)"
fi
# Without it cross 0.2.5 checks the toolchain's targets and components with rustup, which
# goes to the network; the host toolchain already has the targets (added below).
export CROSS_CUSTOM_TOOLCHAIN=1
# The commit, for edgesight_build_info: the image has no git (Cross.toml passes it through).
EDGESIGHT_REVISION=${EDGESIGHT_REVISION:-$(git rev-parse --short=12 HEAD 2>/dev/null || echo unknown)}
export EDGESIGHT_REVISION

# --- host prerequisites: the Rust targets (cross mounts the host toolchain into the
# container, so its std for the target must be there), qemu-user and the boards' libcs to
# run the result.
installed=$(rustup target list --installed)
for t in "${targets[@]}"; do
    grep -qx "$t" <<<"$installed" || rustup target add "$t"
done
missing=()
for p in qemu-user-static libc6-arm64-cross libc6-armhf-cross binutils python3; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
    echo "cross-build: installing ${missing[*]}"
    as_root apt-get -o DPkg::Lock::Timeout=300 update -qq
    as_root env DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=300 \
        install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# --- the toolchain cross mounts. `cross +<channel>` names it: cross appends the host triple
# and looks the result up in `rustup toolchain list`.
host=$(rustc -vV | sed -n 's/^host: //p')
toolchain=$(rustup show active-toolchain | cut -d' ' -f1)
channel=${toolchain%-"$host"}
# cross 0.2.5 strips only " (default)" from that list, while rustup >= 1.28 prints
# "stable-x86_64-unknown-linux-gnu (active, default)": cross then misses the toolchain and
# runs `rustup toolchain add` (network, and it may update the toolchain). This rustup, first
# on cross's PATH only, prints the list without the annotations and passes the rest on.
shim=$(mktemp -d)
image_pid=
# Also stop an image build still running in the background when this script fails.
trap 'rm -rf "$shim"; [ -z "$image_pid" ] || kill "$image_pid" 2>/dev/null || true' EXIT
cat >"$shim/rustup" <<EOF
#!/usr/bin/env bash
set -euo pipefail
if [ "\${1:-}" = toolchain ] && [ "\${2:-}" = list ]; then
    "$(command -v rustup)" "\$@" | sed -E 's/ \([^)]*\)\$//'
else
    exec "$(command -v rustup)" "\$@"
fi
EOF
chmod +x "$shim/rustup"
run_cross() { PATH="$shim:$PATH" cross "+$channel" "$@"; }

# --- which image each target uses: the local one, unless pointed elsewhere with
# CROSS_TARGET_<TRIPLE>_IMAGE (cross prefers it to Cross.toml) or in an edited Cross.toml.
need_local_image=false
for t in "${targets[@]}"; do
    var=CROSS_TARGET_$(tr 'a-z-' 'A-Z_' <<<"$t")_IMAGE
    image=${!var:-$(sed -n "/^\[target\.$t\]/,/^\[/s/^image *= *\"\(.*\)\"/\1/p" Cross.toml)}
    echo "cross-build: $t uses image ${image:-<cross default>}"
    [[ $image == localhost/edgesight-cross:* ]] && need_local_image=true
    # Host settings for these targets (say a LINKER or RUNNER exported for plain cargo) would be
    # passed into the container and override the image's: cross forwards CARGO_* variables.
    for v in $(compgen -e | grep "^CARGO_TARGET_$(tr 'a-z-' 'A-Z_' <<<"$t")_" || true); do
        unset "$v"
    done
done

# --- the image and cross itself, side by side: the image is mostly downloading and unpacking,
# installing cross is compiling, so together they take little longer than the longer one.
phase_start=$SECONDS
image_log=$target_dir/cross-image.log
if $need_local_image; then
    mkdir -p "$target_dir"
    scripts/cross-image.sh >"$image_log" 2>&1 &
    image_pid=$!
fi
# Not `cross --version` to check: even that runs rustup over the network.
if ! cargo install --list | grep -q '^cross v0\.2\.5:'; then
    echo "cross-build: installing cross 0.2.5 (a few minutes)"
    cargo install cross --locked --version 0.2.5
    phase_done "install cross 0.2.5"
fi
# The container gets the host's CARGO_HOME; fetching here means the builds need no network
# from inside the container.
cargo fetch --locked --quiet
if [ -n "$image_pid" ]; then
    if ! wait "$image_pid"; then
        cat "$image_log" >&2
        echo "cross-build: ERROR: scripts/cross-image.sh failed (log above, in $image_log)" >&2
        exit 1
    fi
    image_pid=
    grep '^cross-image:' "$image_log" || true
    phase_done "image (cross-image.sh, beside cross install)"
fi

for t in "${targets[@]}"; do
    echo "cross-build: building $t"
    run_cross build --release --locked --target "$t" --target-dir "$target_dir"
    phase_done "build $t"
done

# --- check the binaries: they start, and they ask for no glibc newer than the boards have.
declare -A qemu=([aarch64-unknown-linux-gnu]="qemu-aarch64-static -L /usr/aarch64-linux-gnu"
                 [armv7-unknown-linux-gnueabihf]="qemu-arm-static -L /usr/arm-linux-gnueabihf")
failed=false
report=()
for t in "${targets[@]}"; do
    bin=$target_dir/$t/release/edgesight
    version=""
    # shellcheck disable=SC2086  # the qemu command and its -L option
    if ! version=$(${qemu[$t]} "$bin" --version); then
        echo "cross-build: ERROR: $bin does not start under ${qemu[$t]%% *}" >&2
        failed=true
    fi
    needed=$(readelf -W --version-info "$bin" | grep -o 'GLIBC_[0-9.]*' | sort -uV | tail -1)
    if [ "$(printf '%s\n' "${needed#GLIBC_}" "$max_glibc" | sort -V | tail -1)" != "$max_glibc" ]; then
        echo "cross-build: ERROR: $bin needs $needed, newer than the boards' glibc $max_glibc" >&2
        failed=true
    fi
    report+=("$(printf '%-58s %6s KiB  needs %-11s  %s' "$bin" $(($(stat -c %s "$bin") / 1024)) \
        "$needed" "${version:-?}")")
done
phase_done "checks (qemu --version, glibc)"

# --- test executables for running under qemu elsewhere. cargo's JSON names them by their
# path inside the container, where the target directory is mounted at /target.
# The executables keep the container's paths too: env!("CARGO_BIN_EXE_edgesight"),
# CARGO_MANIFEST_DIR and CARGO_TARGET_TMPDIR point under /project (the repository) and /target
# (target/cross), so a run elsewhere must bind those two there (e.g. in its chroot).
if $build_tests; then
    for t in "${targets[@]}"; do
        echo "cross-build: building the tests for $t"
        list=$target_dir/$t/test-binaries.txt
        run_cross test --release --no-run --locked --target "$t" --target-dir "$target_dir" \
            "${test_filter[@]}" --message-format=json-render-diagnostics |
            python3 -c '
import json, sys
host_dir = sys.argv[1]
for line in sys.stdin:
    msg = json.loads(line)
    if msg.get("reason") == "compiler-artifact" and msg["profile"]["test"] and msg.get("executable"):
        exe = msg["executable"]
        exe = host_dir + exe[len("/target"):] if exe.startswith("/target/") else exe
        print(exe)
        print("  %5s %-14s %s" % (msg["target"]["kind"][0], msg["target"]["name"], exe), file=sys.stderr)
' "$PWD/$target_dir" >"$list"
        while read -r exe; do
            [ -x "$exe" ] || { echo "cross-build: ERROR: $exe listed but missing" >&2; failed=true; }
        done <"$list"
        echo "cross-build: $(wc -l <"$list") test executables listed in $list" \
            "(built in: /project = $PWD, /target = $PWD/$target_dir)"
        phase_done "tests $t"
    done
fi

echo
echo "cross-build: binaries"
printf '  %s\n' "${report[@]}"
echo "cross-build: times"
printf '  %s\n' "${timings[@]}"
if $failed; then
    echo "cross-build: FAILED (see the errors above)" >&2
    exit 1
fi
