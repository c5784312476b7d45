#!/bin/bash
# On a machine with an NVIDIA GPU and POCL: runs `edgesight process --repeat 100` on the
# benchmark frames with NVIDIA's OpenCL and with POCL, prints the median stage times, and
# checks that both devices produce byte-identical raw outputs.
#   bench/gpu-compare.sh BINARY FRAME_DIR      (frames from bench/make_frames.py)
# NVIDIA's driver ships libnvidia-opencl.so.1 but some images lack its ICD file: this
# writes it. LD_LIBRARY_PATH may point at an ocl-icd libOpenCL.so.1 if none is installed.
set -u
bin=$1 frames=$2
work=$(mktemp -d)
export POCL_CACHE_DIR=${POCL_CACHE_DIR:-$work/pocl}
mkdir -p /etc/OpenCL/vendors "$POCL_CACHE_DIR"
[ -e /etc/OpenCL/vendors/nvidia.icd ] || echo /usr/lib/libnvidia-opencl.so.1 > /etc/OpenCL/vendors/nvidia.icd
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
status=0
for s in 1080 2160; do
    for dev in nvidia portable; do
        "$bin" process "$frames/scene$s.png" --out "$work/$dev-$s" --device "$dev" --raw --repeat 5 >/dev/null
        for i in 1 2 3; do
            "$bin" process "$frames/scene$s.png" --out "$work/$dev-$s" --device "$dev" --raw --repeat 100 >"$work/run.txt" 2>&1 || { cat "$work/run.txt"; status=1; }
            echo "$dev $s #$i: $(grep 'device time' "$work/run.txt")"
        done
    done
    for f in luma.u8 sobel_dx.s16 sobel_dy.s16 magnitude.u8 edge_mask.u8 mask.u8 integral_sum.u32 \
             integral_sqsum.u64 integral_edges.u32 integral_foreground.u32; do
        cmp -s "$work/nvidia-$s/$f" "$work/portable-$s/$f" && echo "same $s $f" || { echo "DIFF $s $f"; status=1; }
    done
done
rm -rf "$work"
exit $status
