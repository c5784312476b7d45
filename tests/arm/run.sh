#!/usr/bin/env bash
# `make test-arm`: the OpenCL tests on emulated ARM boards. For aarch64 and armv7, each
# under qemu-user in a Debian 12 sysroot with POCL (tests/arm/sysroot.sh, cached under
# target/arm/):
#
#   1. the kernel tests (tests/kernels/: every kernel against the plain-Rust reference,
#      awkward sizes, every format and border, wider strides, both tunings), built for the
#      board as the packages are (scripts/cross-build.sh --kernel-tests: cross-rs in a
#      Debian 11 image; after `make cross` only the tests are left to build);
#   2. the OpenCV conformance test (tests/conformance.py --board: every case of the first
#      formats, one case per kernel variant of the later ones) with the board's edgesight
#      as the binary (tests/arm/edgesight-ARCH), OpenCV itself running on the host;
#   3. `edgesight process --raw` on a few inputs, x86 and board binary, every output file
#      compared byte for byte (report.json without its device name and timings);
#   4. `edgesight selftest` with the board's binary: every stage with every tuning, and
#      motion over its scenes (the only check here of the state motion keeps on the
#      device, frame after frame), against the reference.
#
#   tests/arm/run.sh [aarch64|armv7 ...]      default: both
#
# Environment: EDGESIGHT_ARM_TEST_ARGS (extra arguments for the kernel test binary, e.g. a
# test name filter), EDGESIGHT_ARM_PROFILE=dev (kernel tests in the dev profile, with
# overflow checks, built here with cargo and Debian's cross gcc; default release, as
# emulated code is slow), EDGESIGHT_ARM_HOST_BUILD=1 (the release build made that way too,
# without cross-rs), EDGESIGHT_ARM_CONFORMANCE_ARGS
# (e.g. --quick), EDGESIGHT_ARM_JOBS (conformance runs at a time, default 2),
# EDGESIGHT_PROPTEST_CASES (random cases of the kernel tests' properties, default 16 here,
# 48 on x86: each costs seconds under emulation), EDGESIGHT_KERNEL_SETUPS (default lean
# here: each frame through every tuning, the full images kept with one; "all" as on x86),
# EDGESIGHT_KERNEL_CACHE (default off here, below), POCL_WORK_GROUP_SPECIALIZATION
# (default 0 here, below),
# EDGESIGHT_TEST_DEVICE (as for `make unit`; the sysroot has only POCL, and the tests run
# both tunings on it), EDGESIGHT_ARM_SIDE_BY_SIDE=0 (the boards one after the other; by
# default they run side by side, each board's output shown when it is done). POCL's kernel caches are kept in target/arm/pocl-cache-ARCH: a
# second run skips the kernel compiles, which are slow under emulation. Logs:
# target/arm/logs/. Needs root (mount namespaces, chroot).
set -uo pipefail

root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root" || exit 1
here=$root/tests/arm
arm=$root/target/arm
logs=$arm/logs
mkdir -p "$logs"
[ "$(id -u)" -eq 0 ] || { echo "test-arm: needs root (unshare --mount, chroot)" >&2; exit 1; }
export POCL_CACHE_DIR=${POCL_CACHE_DIR:-$root/target/pocl-cache}   # the x86 runs
# No program cache: keeping a program's binary asks POCL for all of it, which compiles
# every kernel in the program, launched or not, and compiling is what emulation makes
# slow; POCL's own cache already spares a process what an earlier one compiled
# (docs/src/development.md#where-the-time-goes has the figures).
export EDGESIGHT_KERNEL_CACHE=${EDGESIGHT_KERNEL_CACHE:-off}
# For the same reason, one build of each kernel rather than one for each work-group size,
# global offset and grid size it is launched with (POCL's specializations, which make
# generated code faster, not different).
export POCL_WORK_GROUP_SPECIALIZATION=${POCL_WORK_GROUP_SPECIALIZATION:-0}
mkdir -p "$POCL_CACHE_DIR"

arches=("$@")
[ ${#arches[@]} -gt 0 ] || arches=(aarch64 armv7)
jobs=${EDGESIGHT_ARM_JOBS:-2}
profile=${EDGESIGHT_ARM_PROFILE:-release}
cargo=${CARGO:-cargo}
failed=()
summary=()

hms() { printf '%dm%02ds' $(($1 / 60)) $(($1 % 60)); }
# phase ARCH NAME COMMAND...: runs COMMAND, times it, records the result for the summary.
phase() {
    local arch=$1 name=$2 t0=$SECONDS rc
    shift 2
    echo
    echo "=== $arch: $name"
    "$@"
    rc=$?
    local took=$((SECONDS - t0))
    if [ $rc -eq 0 ]; then
        summary+=("$(printf '%-8s %-22s %-6s %s' "$arch" "$name" ok "$(hms $took)")")
    else
        summary+=("$(printf '%-8s %-22s %-6s %s' "$arch" "$name" FAILED "$(hms $took)")")
        failed+=("$arch $name")
    fi
    echo "=== $arch: $name: $([ $rc -eq 0 ] && echo ok || echo "FAILED (exit $rc)") in $(hms $took)"
    return $rc
}

triple_of() {
    case $1 in
    aarch64) echo aarch64-unknown-linux-gnu ;;
    armv7) echo armv7-unknown-linux-gnueabihf ;;
    *) echo "test-arm: unknown arch '$1' (aarch64 or armv7)" >&2; return 1 ;;
    esac
}

# The kernel test binary cargo built for TRIPLE (from its JSON messages).
kernels_test_binary() {
    python3 -c '
import json, sys
exe = None
for line in open(sys.argv[1]):
    try:
        m = json.loads(line)
    except ValueError:
        continue
    if m.get("reason") == "compiler-artifact" and m["target"]["name"] == "kernels" and m.get("executable"):
        exe = m["executable"]
print(exe or "")' "$1"
}

# The kernel tests and edgesight for ARCH: by default the boards' own release build, as the
# .debs ship it (cross-rs in the Debian 11 image, built once for both boards by the "cross
# build" phase); with EDGESIGHT_ARM_PROFILE=dev, or EDGESIGHT_ARM_HOST_BUILD=1, built here
# with cargo and Debian's cross gcc.
build() {
    local arch=$1 triple=$2 exe bin
    if $cross_built; then
        exe=$(grep -m1 '/deps/kernels-' "target/cross/$triple/test-binaries.txt")
        bin=$root/target/cross/$triple/release/edgesight
    else
        local release=--release
        [ "$profile" = dev ] && release=
        "$cargo" test $release --locked --no-run --target "$triple" --test kernels \
            --message-format=json-render-diagnostics > "$logs/$arch-build-kernels.json" || return 1
        exe=$(kernels_test_binary "$logs/$arch-build-kernels.json")
        "$cargo" build --release --locked --target "$triple" || return 1
        bin=$root/target/$triple/release/edgesight
    fi
    if [ -z "$exe" ] || [ ! -x "$exe" ]; then
        echo "no kernels test binary for $triple" >&2
        return 1
    fi
    ln -sf "$exe" "$arm/kernels-$arch"
    ln -sf "$bin" "$arm/edgesight-$arch"
    echo "kernel tests: ${exe#"$root"/} ($profile profile)"
    echo "edgesight:    ${bin#"$root"/}"
    # The OpenCL device the tests get (the first GPU, else the first device: POCL here).
    "$here/edgesight-$arch" devices 2>&1 | sed -n '1,2p;/version:/p;/fp64:/p'
}

kernel_tests() {
    local arch=$1
    # shellcheck disable=SC2086
    EDGESIGHT_PROPTEST_CASES=${EDGESIGHT_PROPTEST_CASES:-16} \
        EDGESIGHT_KERNEL_SETUPS=${EDGESIGHT_KERNEL_SETUPS:-lean} \
        "$here/in-sysroot.sh" "$arch" "$(readlink -f "$arm/kernels-$arch")" ${EDGESIGHT_ARM_TEST_ARGS:-} \
        2>&1 | tee "$logs/$arch-kernels.log"
}

conformance() {
    local arch=$1
    # shellcheck disable=SC2086
    python3 tests/conformance.py --bin "$here/edgesight-$arch" --board --jobs "$jobs" \
        --timeout 900 ${EDGESIGHT_ARM_CONFORMANCE_ARGS:-} 2>&1 | tee "$logs/$arch-conformance.log"
}

selftest() {
    local arch=$1
    "$here/edgesight-$arch" selftest 2>&1 | tee "$logs/$arch-selftest.log"
}

# The raw-output comparison: the inputs (made once, deterministic) and the x86 outputs.
raw_cases=(scene scene-l2-constant grey-641x479 rgb24-333x251 nv12-66x34 yuyv-17x3)
raw_args() {
    local inputs=$arm/raw-inputs
    case $1 in
    scene) echo "samples/scene.png --roi sky:0,0,640,140 --roi street:0,360,640,120" ;;
    scene-l2-constant) echo "samples/scene.png --border constant --magnitude l2 --edge-threshold 40" ;;
    grey-641x479) echo "$inputs/grey-641x479.raw --format grey --size 641x479 --border replicate --roi r:1,2,639,476" ;;
    rgb24-333x251) echo "$inputs/rgb24-333x251.raw --format rgb24 --size 333x251" ;;
    nv12-66x34) echo "$inputs/nv12-66x34.raw --format nv12 --size 66x34 --magnitude l2" ;;
    yuyv-17x3) echo "$inputs/yuyv-17x3.raw --format yuyv --size 17x3" ;;
    esac
}

raw_reference() {
    mkdir -p "$arm/raw-inputs"
    python3 - "$arm/raw-inputs" <<'EOF' || return 1
import random, sys
# Random bytes, except for a smooth band, so Otsu, the edges and the ROIs see structure.
for name, n in [("grey-641x479", 641 * 479), ("rgb24-333x251", 333 * 251 * 3),
                ("nv12-66x34", 66 * 34 * 3 // 2), ("yuyv-17x3", 17 * 3 * 2)]:
    r = random.Random(name)
    data = bytearray(r.getrandbits(8) for _ in range(n))
    for i in range(0, n // 3):
        data[i] = (i // 7) % 256
    open(f"{sys.argv[1]}/{name}.raw", "wb").write(bytes(data))
EOF
    "$cargo" build --release --locked || return 1
    local c
    for c in "${raw_cases[@]}"; do
        rm -rf "$arm/raw/x86/$c" && mkdir -p "$arm/raw/x86/$c"
        # shellcheck disable=SC2046
        target/release/edgesight process $(raw_args "$c") --out "$arm/raw/x86/$c" --raw >/dev/null || return 1
    done
    echo "x86 outputs for ${#raw_cases[@]} inputs in target/arm/raw/x86/"
}

raw_compare() {
    local arch=$1 c f bad=0
    for c in "${raw_cases[@]}"; do
        local out=$arm/raw/$arch/$c ref=$arm/raw/x86/$c
        rm -rf "$out" && mkdir -p "$out"
        # shellcheck disable=SC2046
        "$here/edgesight-$arch" process $(raw_args "$c") --out "$out" --raw >/dev/null ||
            { echo "FAIL $c: edgesight exited with an error"; bad=1; continue; }
        local files=0 diffs=()
        [ "$(cd "$ref" && ls)" = "$(cd "$out" && ls)" ] ||
            diffs+=("file sets differ: x86 [$(cd "$ref" && ls | tr '\n' ' ')] vs $arch [$(cd "$out" && ls | tr '\n' ' ')]")
        for f in "$ref"/*; do
            f=$(basename "$f")
            files=$((files + 1))
            if [ "$f" = report.json ]; then
                python3 - "$ref/$f" "$out/$f" <<'EOF' || diffs+=("report.json")
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:3])
for r in (a, b):
    r.pop("device", None)
    r.pop("timings_ms", None)
if a != b:
    for k in sorted(set(a) | set(b)):
        if a.get(k) != b.get(k):
            print(f"  report.json {k}: x86 {a.get(k)!r:.200} vs board {b.get(k)!r:.200}")
    sys.exit(1)
EOF
            elif ! cmp "$ref/$f" "$out/$f"; then
                diffs+=("$f")
            fi
        done
        if [ ${#diffs[@]} -eq 0 ]; then
            echo "ok   $c: $files files identical (report.json without device and timings)"
        else
            echo "FAIL $c: ${diffs[*]}"
            bad=1
        fi
    done
    return $bad
}

t_all=$SECONDS
phase x86 "raw outputs (x86)" raw_reference
cross_built=false
if [ "$profile" = release ] && [ -z "${EDGESIGHT_ARM_HOST_BUILD:-}" ]; then
    if ! phase boards "cross build" scripts/cross-build.sh --kernel-tests; then
        echo "test-arm: FAILED: scripts/cross-build.sh --kernel-tests"
        exit 1
    fi
    cross_built=true
fi
# One board's phases; its summary and failures go to files, for the runs side by side.
# Run in a subshell: the arrays it adds to stay its own.
board() {
    local arch=$1 triple
    summary=() failed=()
    triple=$(triple_of "$arch") || exit 2
    phase "$arch" sysroot "$here/sysroot.sh" "$arch" &&
        phase "$arch" build build "$arch" "$triple" &&
        {
            phase "$arch" "kernel tests" kernel_tests "$arch"
            phase "$arch" conformance conformance "$arch"
            phase "$arch" "raw outputs = x86" raw_compare "$arch"
            phase "$arch" selftest selftest "$arch"
        }
    printf '%s\n' "${summary[@]}" > "$logs/$arch-summary.txt"
    printf '%s\n' "${failed[@]}" > "$logs/$arch-failed.txt"
}

for arch in "${arches[@]}"; do rm -f "$logs/$arch-summary.txt" "$logs/$arch-failed.txt"; done
# The boards side by side: each spends long stretches in one emulated compiler thread
# (POCL's, building a kernel), which leaves the other core to the other board.
if [ "${EDGESIGHT_ARM_SIDE_BY_SIDE:-1}" = 1 ] && [ ${#arches[@]} -gt 1 ]; then
    pids=()
    for arch in "${arches[@]}"; do
        echo "=== $arch: started beside the others, log in target/arm/logs/$arch-run.log"
        (board "$arch") > "$logs/$arch-run.log" 2>&1 &
        pids+=($!)
    done
    for i in "${!arches[@]}"; do
        wait "${pids[$i]}" || failed+=("${arches[$i]} (exit status)")
        cat "$logs/${arches[$i]}-run.log"
    done
else
    for arch in "${arches[@]}"; do
        (board "$arch") || failed+=("$arch (exit status)")
    done
fi
for arch in "${arches[@]}"; do
    [ -f "$logs/$arch-summary.txt" ] || continue
    mapfile -t lines < "$logs/$arch-summary.txt"
    for l in "${lines[@]}"; do [ -n "$l" ] && summary+=("$l"); done
    mapfile -t lines < "$logs/$arch-failed.txt"
    for l in "${lines[@]}"; do [ -n "$l" ] && failed+=("$l"); done
done

echo
echo "=== test-arm summary ($(hms $((SECONDS - t_all))) in all)"
printf '%s\n' "${summary[@]}"
for arch in "${arches[@]}"; do
    log=$logs/$arch-kernels.log
    [ -f "$log" ] && grep -h '^test result:' "$log" | sed "s/^/$arch kernel tests: /"
    log=$logs/$arch-conformance.log
    [ -f "$log" ] && grep -h '^conformance:' "$log" | sed "s/^/$arch /"
    log=$logs/$arch-selftest.log
    [ -f "$log" ] && grep -h '^selftest:' "$log" | sed "s/^/$arch /"
done
if [ ${#failed[@]} -gt 0 ]; then
    echo "test-arm: FAILED: $(printf '%s; ' "${failed[@]}")"
    exit 1
fi
echo "test-arm: all passed"
