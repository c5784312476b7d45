#!/bin/bash
# Each camera format's cost per frame, from `edgesight bench --format F`, one table:
#   bench/formats.sh BINARY [DEVICE] [SIZES] [RUNS] [FORMATS]
# e.g. bench/formats.sh target/release/edgesight default 1280x720,1920x1080 50
# Per format and size: the luma stage's device time (0 where the frame's first plane is
# luma, read in place), the pipeline's device time, the host CPU time writing the frame
# into its slot (for mjpeg: decoding the JPEG's luma into it, as an MJPEG camera's frames
# are), the host CPU time of the pipeline (on a CPU device such as POCL, its kernels
# too), and their sum: what a frame costs the host. The CPU's model heads the table.
set -eu
bin=$1 device=${2:-default} sizes=${3:-1280x720,1920x1080} runs=${4:-50}
formats=${5:-grey yuyv nv12 yu12 rgb24 y10 y10p y16 rggb rggb10 rggb10p rggb12p rggb16 mjpeg}
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
echo "$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //'), $(nproc) CPUs"
for f in $formats; do
    "$bin" bench --device "$device" --format "$f" --sizes "$sizes" --runs "$runs" --warmup 5 \
        --json "$dir/$f.json" > "$dir/$f.txt" 2>/dev/null ||
        { echo "$f: bench failed" >&2; cat "$dir/$f.txt" >&2; exit 1; }
done
python3 - "$dir" $formats <<'PY'
import json, sys
d, formats = sys.argv[1], sys.argv[2:]
first = json.load(open(f"{d}/{formats[0]}.json"))
print(f"device: {first['device']}, {first['tuning']} tuning; medians of {first['runs']} runs, ms per frame")
print(f"{'format':<9}{'size':>11}{'luma':>8}{'pipeline':>10}{'host write':>12}{'host pipeline':>15}{'host total':>12}")
for f in formats:
    r = json.load(open(f"{d}/{f}.json"))
    for s in r["results"]:
        write, pipe = s["host_cpu_write_ms"], s["host_cpu_pipeline_ms"]
        print(f"{f:<9}{s['width']:>5}x{s['height']:<5}{s['stages']['luma']:>8.3f}"
              f"{s['pipeline_device_ms']:>10.3f}{write:>12.3f}{pipe:>15.3f}{write + pipe:>12.3f}")
PY
