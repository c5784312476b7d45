#!/usr/bin/env bash
# bench/compare.py (edgesight on POCL beside OpenCV, alternating) on an x86-64 with AVX-512,
# with every library that picks its code by CPU features held to AVX2: the figures an
# AVX2-only x86-64 of the same cores would give, without one at hand.
#
#   bench/avx2-only.sh [COMPARE-FLAGS...]     flags go to bench/compare.py, e.g.
#   bench/avx2-only.sh --sizes 1920x1080,3840x2160 --rounds 3 --runs 15 --threads 2
#
# Runs in the checkout's root (a relative --bin is taken from there). Prints what each
# library was held to, refuses to measure if one of them still offers AVX-512, and checks
# afterwards that no AVX-512 code ran (POCL's kernels, and every thread of the run). The
# output is also saved, with compare.py's JSON, under target/avx2-only/.
#
# Why not a VM whose CPU model lacks AVX-512: that needs hardware virtualization for a stock
# guest kernel; where KVM is itself nested and paravirtual, Debian's kernel does not boot.
# A guest would not change the cores either, only the CPUID bits the libraries read, and
# these are the switches each of them offers for the same choice.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
out=$root/target/avx2-only
stamp=$(date +%Y%m%d-%H%M%S)
log=$out/compare-$stamp.txt
cd "$root"
mkdir -p "$out"

fail() { echo "avx2-only: $*" >&2; exit 1; }

# OpenCV: its own dispatch (the AVX512-* names are those getCPUFeaturesLine prints; names
# this CPU lacks only draw a warning) and IPP's, which keeps its own (k0 is IPP's AVX-512
# code, l9 its AVX2 code).
export OPENCV_CPU_DISABLE=AVX512F,AVX512CD,AVX512BW,AVX512DQ,AVX512VL,AVX512IFMA,AVX512VBMI,AVX512VBMI2,AVX512VNNI,AVX512BITALG,AVX512VPOPCNTDQ,AVX512-COMMON,AVX512-SKX,AVX512-CLX,AVX512-CNL,AVX512-ICL
export OPENCV_IPP=avx2
# POCL (Debian's, built with one kernel library per CPU level): the AVX2 library, and with
# it the target CPU its kernels are compiled for (haswell), as an AVX2-only CPU would get.
export POCL_KERNELLIB_NAME=avx2
# Its own kernel cache, emptied: the AVX-512 kernels of other runs stay out, and the check
# below sees exactly this run's kernels. Compiling them costs seconds, before any timing.
export POCL_CACHE_DIR=$out/pocl-cache
rm -rf "$POCL_CACHE_DIR" && mkdir -p "$POCL_CACHE_DIR"
# glibc's memcpy, memset and string functions (OpenCV's and POCL's buffer copies), and
# numpy's loops (not timed, but they would show in the thread check).
export GLIBC_TUNABLES=glibc.cpu.hwcaps=-AVX512F,-AVX512CD,-AVX512BW,-AVX512DQ,-AVX512VL
export NPY_DISABLE_CPU_FEATURES="X86_V4 AVX512_ICL AVX512_SPR"

exec > >(tee "$log") 2>&1

echo "== CPU: $(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1), $(nproc) CPUs"
flags=$(sed -n 's/^flags[[:space:]]*: //p' /proc/cpuinfo | head -1)
echo "AVX2: $(grep -qw avx2 <<<"$flags" && echo yes || echo no);" \
    "AVX-512 on the CPU (held back for this run): $(grep -ow 'avx512[a-z0-9_]*' <<<"$flags" | tr '\n' ' ')"
# compare.py alternates edgesight and OpenCV, but a busy machine still widens the spread.
echo "load average at the start: $(cut -d' ' -f1-3 /proc/loadavg)"

echo "== OpenCV"
python3 - <<'EOF' || fail "OpenCV still offers AVX-512 code (see above)"
import sys
import cv2
print(cv2.__version__, cv2.__file__)
print("dispatch:", cv2.getCPUFeaturesLine(), "(* compiled for, ? disabled)")
print("IPP:", cv2.ipp.getIppVersion() if cv2.ipp.useIPP() else "off")
# OpenCV's ids: 11 AVX2; 13-27 the AVX-512 subsets; 256-262 its AVX-512 groups.
avx512 = [i for i in list(range(13, 28)) + list(range(256, 263)) if cv2.checkHardwareSupport(i)]
print("checkHardwareSupport: AVX2", cv2.checkHardwareSupport(11), "| AVX-512 ids still on:", avx512 or "none")
sys.exit(1 if avx512 or "k0" in cv2.ipp.getIppVersion() else 0)
EOF

echo "== POCL"
if command -v clinfo >/dev/null; then
    devices=$(clinfo | grep -E '^ *(Platform Version|Device Name|Device Version) ' | sort -u)
    echo "$devices"
    grep -q avx512 <<<"$devices" && fail "POCL still compiles for an AVX-512 CPU"
else
    echo "(no clinfo: compare.py's first line names the device)"
fi

# Every thread of the run, every 0.2 s: the kernel's AVX512_elapsed_ms says how long ago a
# thread last held AVX-512 state when it was switched out (-1: never). A thread inherits
# its parent's value, so only a use younger than the thread itself counts. It samples
# context switches, so it catches sustained use (a library left at AVX-512), not every
# instruction; the kernel check below is exact for POCL's code.
watch_threads() {
    python3 - "$1" <<'EOF'
import os, sys, time
root = int(sys.argv[1])
tick = os.sysconf("SC_CLK_TCK")
seen = {}
def stat(path):
    with open(path) as f:
        s = f.read()
    comm = s[s.index("(") + 1:s.rindex(")")]
    return comm, s[s.rindex(")") + 2:].split()
def alive():
    try:
        return stat(f"/proc/{root}/stat")[1][0] != "Z"
    except OSError:
        return False
while alive():
    parent = {}
    for p in filter(str.isdigit, os.listdir("/proc")):
        try:
            parent[int(p)] = int(stat(f"/proc/{p}/stat")[1][1])
        except (OSError, ValueError):
            pass
    def ours(p):
        while p > 1:
            if p == root:
                return True
            p = parent.get(p, 0)
        return False
    with open("/proc/uptime") as f:
        now_ms = float(f.read().split()[0]) * 1000
    for p in filter(ours, parent):
        try:
            for t in os.listdir(f"/proc/{p}/task"):
                with open(f"/proc/{p}/task/{t}/arch_status") as f:
                    ms = int(f.read().split()[1])
                comm, fields = stat(f"/proc/{p}/task/{t}/stat")
                age_ms = now_ms - int(fields[19]) * 1000 / tick
                if 0 <= ms < age_ms - 100:
                    seen[(p, int(t))] = comm
        except (OSError, ValueError, IndexError):
            pass
    time.sleep(0.2)
if seen:
    print("AVX-512 state seen in:", ", ".join(f"{c} (pid {p}, thread {t})" for (p, t), c in sorted(seen.items())))
    sys.exit(1)
print("no thread of the run was seen holding AVX-512 state")
EOF
}

echo "== bench/compare.py $*"
python3 bench/compare.py --json "$out/compare-$stamp.json" "$@" &
pid=$!
trap 'kill "$pid" 2>/dev/null' INT TERM
threads_ok=0
if [ -r /proc/self/arch_status ]; then
    watch_threads "$pid" || threads_ok=$?
else
    echo "(the kernel reports no AVX-512 use per thread here: thread check skipped)"
fi
wait "$pid" || fail "bench/compare.py failed (exit status $?)"

echo "== checks"
kernels=$(find "$POCL_CACHE_DIR" -name '*.so')
[ -n "$kernels" ] || fail "no kernels in $POCL_CACHE_DIR: did edgesight run on POCL?"
# zmm and mask registers, and the 16 upper xmm/ymm registers, exist only with AVX-512.
evex=$(for k in $kernels; do objdump -d --no-show-raw-insn "$k"; done |
    grep -c -E '%zmm|%k[0-7]|%[xy]mm(1[6-9]|2[0-9]|3[01])' || true)
echo "POCL kernels: $(wc -l <<<"$kernels") compiled, $evex AVX-512 instructions"
[ "$evex" -eq 0 ] || fail "POCL's kernels hold AVX-512 code"
[ "$threads_ok" -eq 0 ] || fail "a thread of the run used AVX-512"
echo "saved: ${log#"$root"/} and target/avx2-only/compare-$stamp.json"
