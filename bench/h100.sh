#!/bin/bash
# On a machine with an NVIDIA GPU, the CUDA toolkit, python3 with numpy and OpenCV:
#   bench/h100.sh KIT OUT
# KIT holds an edgesight release binary, lib/libOpenCL.so.1 (an ICD loader, if the machine
# has none), npp_bench.cpp and conformance.py; OUT receives summary.txt and the JSON files.
# Writes NVIDIA's ICD file if the image lacks it, runs `edgesight bench` on NVIDIA's OpenCL,
# the NPP harness on the same frames, and the OpenCV conformance test on the GPU.
set -u
kit=$(cd "$1" && pwd) out=$2
sizes=${SIZES:-1280x720,1920x1080,3840x2160}
runs=${RUNS:-200}
mkdir -p /etc/OpenCL/vendors "$out"
[ -e /etc/OpenCL/vendors/nvidia.icd ] || echo /usr/lib/libnvidia-opencl.so.1 > /etc/OpenCL/vendors/nvidia.icd
export LD_LIBRARY_PATH=$kit/lib:${LD_LIBRARY_PATH:-}
export POCL_CACHE_DIR=/tmp/pocl-cache
mkdir -p "$POCL_CACHE_DIR"
exec > >(tee "$out/summary.txt") 2>&1
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.max.mem --format=csv,noheader
"$kit/edgesight" devices | grep -E "platform|0:|1:|version"
echo "== edgesight bench, NVIDIA OpenCL"
"$kit/edgesight" bench --device nvidia --sizes "$sizes" --runs "$runs" --warmup 20 \
    --json "$out/opencl-nvidia.json" --save-frames /tmp/frames 2>/dev/null
echo "== NPP"
nvcc -O2 -o /tmp/npp_bench "$kit/npp_bench.cpp" -lnppial -lnppicc -lnppidei -lnppif -lnppig -lnppim -lnppist -lnppisu -lnppitc -lnppc \
    && /tmp/npp_bench /tmp/frames "$sizes" "$runs" | tee "$out/npp.json"
echo "== edgesight bench again (drift check), NVIDIA OpenCL"
"$kit/edgesight" bench --device nvidia --sizes "$sizes" --runs "$runs" --warmup 20 \
    --json "$out/opencl-nvidia-2.json" 2>/dev/null | grep -E "^[0-9]|pipeline"
if [ -n "${CONFORMANCE:-}" ]; then
    echo "== OpenCV conformance on the GPU (default device: the first GPU)"
    python3 "$kit/conformance.py" --bin "$kit/edgesight" --jobs 8 | tail -5
fi
