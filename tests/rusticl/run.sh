#!/usr/bin/env bash
# `make test-rusticl`: the OpenCL tests on a second OpenCL implementation, Mesa's Rusticl
# (Debian 12's mesa-opencl-icd, Mesa 22.3: the open-source OpenCL of the Mali GPUs' Mesa
# drivers) on its CPU device, llvmpipe, beside POCL, which the rest of `make test` uses:
#
#   1. the kernel tests (tests/kernels/, EDGESIGHT_TEST_DEVICE=rusticl): every tuning,
#      each frame through every tuning as the daemon runs it and with the full images kept
#      through one (EDGESIGHT_KERNEL_SETUPS=lean, as on the emulated boards), 16 random
#      cases a property (EDGESIGHT_PROPTEST_CASES, 48 on POCL);
#   2. the OpenCV conformance test's --board subset (tests/conformance.py --device rusticl:
#      every case of the first formats, one a kernel variant of the later ones), the
#      release binary with the device's own tuning;
#   3. `edgesight selftest --device rusticl`: every stage with every tuning on synthetic
#      frames of every format, and motion over a scene, against the reference;
#   4. the motion tests of the library's own (`cargo test -p edgesight-core --lib motion_tests`): motion's
#      tiles, run in the integral's last launch, and every region's moving pixels frame
#      after frame against the reference, every tuning, 1x1 to 641x479.
#
# Mesa is downloaded (`apt-get download mesa-opencl-icd`) and unpacked with `dpkg -x` into
# target/rusticl/ (again only when the candidate version changes), and named by a private
# vendors directory (OCL_ICD_VENDORS=target/rusticl/vendors, one .icd holding the library's
# absolute path) with RUSTICL_ENABLE=llvmpipe: never installed, so POCL stays the system's
# OpenCL. Its libraries come from `scripts/install-deps.sh test` (libclc-15,
# libllvmspirvlib15, libdrm*, ...). Mesa's shader cache is kept in
# target/rusticl/shader-cache (MESA_SHADER_CACHE_DIR): the conformance test's hundred
# processes and a second run skip llvmpipe's compiles.
#
#   tests/rusticl/run.sh [kernels] [conformance] [selftest] [motion]     default: all four
#
# Environment: EDGESIGHT_PROPTEST_CASES, EDGESIGHT_KERNEL_SETUPS (as above; "all" runs
# every setup, as on POCL), EDGESIGHT_RUSTICL_TEST_ARGS (arguments for the kernel test
# binary, e.g. a test name; by default it skips the largest frames, below; empty runs all), EDGESIGHT_RUSTICL_CONFORMANCE_ARGS (e.g. without --board:
# pass --full). Logs: target/rusticl/logs/.
set -uo pipefail

root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root" || exit 1
out=$root/target/rusticl
logs=$out/logs
mkdir -p "$logs"
cargo=${CARGO:-cargo}
as_root() { if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi; }
hms() { printf '%dm%02ds' $(($1 / 60)) $(($1 % 60)); }

# Mesa's Rusticl, unpacked into target/rusticl/root (the candidate version of the host's
# apt lists, and this script, in its stamp).
unpack() {
    local lib=$out/root/usr/lib/x86_64-linux-gnu/libRusticlOpenCL.so.1 version stamp
    version=$(apt-cache policy mesa-opencl-icd 2>/dev/null | sed -n 's/^ *Candidate: //p')
    if [ -z "$version" ] || [ "$version" = "(none)" ]; then
        echo "test-rusticl: no package lists know mesa-opencl-icd; apt-get update"
        as_root apt-get -o DPkg::Lock::Timeout=300 update -qq || return 1
        version=$(apt-cache policy mesa-opencl-icd | sed -n 's/^ *Candidate: //p')
    fi
    stamp="$version $(sha256sum "$0" | cut -c1-16)"
    if [ -f "$lib" ] && [ -f "$out/.edgesight-rusticl" ] &&
        [ "$(cat "$out/.edgesight-rusticl")" = "$stamp" ]; then
        echo "Rusticl: mesa-opencl-icd $version in ${out#"$root"/}/root"
    else
        echo "Rusticl: downloading and unpacking mesa-opencl-icd $version"
        rm -rf "$out/root" "$out/debs" && mkdir -p "$out/debs" || return 1
        # As root apt downloads unsandboxed (its _apt user may not write here): say nothing.
        (cd "$out/debs" && apt-get -q download "mesa-opencl-icd=$version" 2>&1 |
            grep -v 'unsandboxed as root') || true
        local deb
        deb=$(ls "$out"/debs/mesa-opencl-icd_*.deb 2>/dev/null | head -1)
        [ -n "$deb" ] || { echo "test-rusticl: apt-get download mesa-opencl-icd failed" >&2; return 1; }
        dpkg -x "$deb" "$out/root" || return 1
        echo "$stamp" > "$out/.edgesight-rusticl"
    fi
    local missing
    missing=$(ldd "$lib" | grep 'not found')
    if [ -n "$missing" ]; then
        echo "test-rusticl: Rusticl's libraries are missing (scripts/install-deps.sh test):" >&2
        echo "$missing" >&2
        return 1
    fi
    ls /usr/lib/clc/spirv64-mesa3d-.spv >/dev/null || {
        echo "test-rusticl: libclc-15 is missing (scripts/install-deps.sh test)" >&2; return 1; }
    mkdir -p "$out/vendors" "$out/shader-cache"
    echo "$lib" > "$out/vendors/rusticl.icd"
}

phases=("$@")
[ ${#phases[@]} -gt 0 ] || phases=(kernels conformance selftest motion)
unpack || exit 1
export OCL_ICD_VENDORS=$out/vendors RUSTICL_ENABLE=llvmpipe
export POCL_CACHE_DIR=${POCL_CACHE_DIR:-$root/target/pocl-cache}
# llvmpipe's 256-bit vectors on an x86-64 without AVX-512 (an AMD EPYC of Zen 3, AVX2
# only) abort LLVM 15's code generator on our kernels' first launch ("LLVM ERROR: Cannot
# emit physreg copy instruction", every tuning); with AVX-512 they build and run. On such
# a CPU llvmpipe runs 128-bit vectors, which build; a width the caller sets stands. Mesa's
# shader cache does not key on the width, so each width keeps a cache of its own.
if [ -z "${LP_NATIVE_VECTOR_WIDTH:-}" ] && [ "$(uname -m)" = x86_64 ] &&
    ! grep -qw avx512f /proc/cpuinfo; then
    export LP_NATIVE_VECTOR_WIDTH=128
    echo "Rusticl: no AVX-512 on this CPU: llvmpipe at 128 bits (LP_NATIVE_VECTOR_WIDTH)"
fi
export MESA_SHADER_CACHE_DIR=$out/shader-cache/${LP_NATIVE_VECTOR_WIDTH:-native}
# The device every run asks for: a name, so that a Rusticl that failed to load fails the
# run (OpenCL would have no platform at all) rather than leaving another device to test.
device=rusticl

failed=()
summary=()
phase() {
    local name=$1 t0=$SECONDS rc
    shift
    echo
    echo "=== rusticl: $name"
    "$@"
    rc=$?
    local took=$((SECONDS - t0)) result=ok
    [ $rc -eq 0 ] || { result=FAILED; failed+=("$name"); }
    summary+=("$(printf '%-12s %-6s %s' "$name" "$result" "$(hms $took)")")
    echo "=== rusticl: $name: $result in $(hms $took)"
}

# The largest frames (16.8 million pixels, four shapes, every tuning) take llvmpipe over
# ten minutes, more than the rest together: `make test` leaves them to POCL (`make unit`)
# and a full run here (EDGESIGHT_RUSTICL_TEST_ARGS= tests/rusticl/run.sh kernels) checks
# them, as before each change to the integral's loops.
LARGEST="--skip integrals::the_largest_frames_do_not_overflow"

kernels() {
    # shellcheck disable=SC2086
    EDGESIGHT_TEST_DEVICE=$device EDGESIGHT_PROPTEST_CASES=${EDGESIGHT_PROPTEST_CASES:-16} \
        EDGESIGHT_KERNEL_SETUPS=${EDGESIGHT_KERNEL_SETUPS:-lean} \
        "$cargo" test --locked --test kernels -- ${EDGESIGHT_RUSTICL_TEST_ARGS-$LARGEST} \
        2>&1 | tee "$logs/kernels.log"
}

conformance() {
    local args=${EDGESIGHT_RUSTICL_CONFORMANCE_ARGS:---board}
    [ "$args" = --full ] && args=
    # shellcheck disable=SC2086
    python3 tests/conformance.py --bin target/release/edgesight --device "$device" $args \
        2>&1 | tee "$logs/conformance.log"
}

selftest() {
    target/release/edgesight selftest --device "$device" 2>&1 | tee "$logs/selftest.log"
}

motion() {
    EDGESIGHT_TEST_DEVICE=$device "$cargo" test --locked -p edgesight-core --lib motion_tests 2>&1 |
        tee "$logs/motion.log"
}

target/release/edgesight devices 2>&1 | sed -n '1,3p'
for p in "${phases[@]}"; do
    case $p in
    kernels | conformance | selftest | motion) phase "$p" "$p" ;;
    *) echo "test-rusticl: unknown phase '$p' (kernels, conformance, selftest, motion)" >&2; exit 2 ;;
    esac
done

echo
echo "test-rusticl summary (Mesa's Rusticl on llvmpipe):"
printf '  %s\n' "${summary[@]}"
if [ ${#failed[@]} -gt 0 ]; then
    echo "test-rusticl: FAILED: ${failed[*]}"
    exit 1
fi
echo "test-rusticl: all passed"
