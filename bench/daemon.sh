#!/usr/bin/env bash
# Runs `edgesight run` on the test pattern at one size for a while and prints the frame
# rate, latency, drops and resident memory it sustains (from its own /metrics).
#   bench/daemon.sh [WxH] [SECONDS] [FPS]
set -euo pipefail
size=${1:-1280x720}
secs=${2:-30}
fps=${3:-30}
bin=${EDGESIGHT:-target/release/edgesight}
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
export POCL_CACHE_DIR=${POCL_CACHE_DIR:-$PWD/target/pocl-cache}
mkdir -p "$POCL_CACHE_DIR"
"$bin" run --source "pattern:$size@$fps" --listen "127.0.0.1:$port" 2>/dev/null &
pid=$!
trap 'kill $pid 2>/dev/null || true' EXIT
until curl -sf "http://127.0.0.1:$port/healthz" >/dev/null; do sleep 0.2; done
sleep 5 # past the first frames' kernel builds
scrape() { curl -sf "http://127.0.0.1:$port/metrics"; }
a=$(scrape); sleep "$secs"; b=$(scrape)
python3 - "$size" "$secs" <<PY "$a" "$b"
import sys, re
size, secs, a, b = sys.argv[1], float(sys.argv[2]), sys.argv[3], sys.argv[4]
def series(text):
    out = {}
    for line in text.splitlines():
        if line and not line.startswith('#'):
            k, v = line.rsplit(' ', 1)
            out[k] = float(v)
    return out
A, B = series(a), series(b)
d = lambda k: B[k] - A.get(k, 0.0)
cam = 'camera="default"'
frames = d(f'edgesight_frames_total{{{cam}}}')
gaps = d(f'edgesight_frames_dropped_total{{{cam},reason="sequence_gap"}}')
backlog = d(f'edgesight_frames_dropped_total{{{cam},reason="publish_backlog"}}')
lat_n = d(f'edgesight_frame_latency_seconds_count{{{cam}}}')
lat_s = d(f'edgesight_frame_latency_seconds_sum{{{cam}}}')
buckets = sorted((float(m.group(1)) if m.group(1) != '+Inf' else float('inf'), d(k))
                 for k in B for m in [re.search(r'latency_seconds_bucket\{camera="default",le="([^"]+)"\}', k)] if m)
def q(p):
    for le, c in buckets:
        if c >= p * lat_n: return le
stages = {m.group(1): d(k) / max(d(k.replace('_sum', '_count')), 1)
          for k in B for m in [re.search(r'stage_duration_seconds_sum\{camera="default",stage="([^"]+)"\}', k)] if m}
print(f"{size}: {frames / secs:.1f} fps over {secs:.0f} s ({frames:.0f} frames, {gaps:.0f} skipped by the source, {backlog:.0f} publish_backlog)")
print(f"  latency capture->published: mean {1000 * lat_s / max(lat_n, 1):.1f} ms, p50 <= {1000 * q(0.5):.1f} ms, p99 <= {1000 * q(0.99):.1f} ms (bucket bounds)")
print("  device time per stage (mean ms): " + ", ".join(f"{s} {1000 * v:.2f}" for s, v in sorted(stages.items())))
print(f"  resident memory: {B['process_resident_memory_bytes'] / 2**20:.1f} MiB, threads {B.get('process_threads', 0):.0f}")
PY
