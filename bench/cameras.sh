#!/usr/bin/env bash
# Several cameras in one daemon: `edgesight run` with N test-pattern cameras of one size,
# each with two ROIs and camera health on (the defaults), as a site with N cameras on one
# board would run it. After a warm-up, reads the daemon's /metrics twice, SECONDS apart, and
# its CPU time and memory from /proc, and prints per camera: frames per second, frames the
# source skipped (sequence_gap: the pipeline was late) and publish_backlog drops; for the
# process: CPU (share of one core), RSS and anonymous RSS.
#   bench/cameras.sh N [WxH] [SECONDS] [FPS] [FORMAT]
# e.g. for n in 1 2 4; do bench/cameras.sh $n 1280x720 60; done
set -euo pipefail
n=$1 size=${2:-1280x720} secs=${3:-60} fps=${4:-30} format=${5:-yuyv}
bin=${EDGESIGHT:-target/release/edgesight}
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
export POCL_CACHE_DIR=${POCL_CACHE_DIR:-$PWD/target/pocl-cache}
mkdir -p "$POCL_CACHE_DIR"
dir=$(mktemp -d)
pid=
trap '[ -n "$pid" ] && kill "$pid" 2>/dev/null; rm -rf "$dir"' EXIT
{
    printf '[web]\nlisten_address = "127.0.0.1:%s"\n' "$port"
    for i in $(seq 0 $((n - 1))); do
        printf '\n[[camera]]\nname = "cam%s"\n[camera.source]\nkind = "pattern"\n' "$i"
        printf 'size = "%s"\nformat = "%s"\nfps = %s\n' "$size" "$format" "$fps"
        printf '[[camera.roi]]\nname = "left"\nx = 0\ny = 0\nw = 64\nh = 64\n'
        printf '[[camera.roi]]\nname = "centre"\nx = 100\ny = 100\nw = 320\nh = 240\n'
    done
} > "$dir/run.toml"
"$bin" check-config "$dir/run.toml" >/dev/null
"$bin" run --config "$dir/run.toml" 2> "$dir/log" &
pid=$!
until curl -sf "http://127.0.0.1:$port/healthz" >/dev/null; do
    kill -0 "$pid" 2>/dev/null || { cat "$dir/log"; exit 1; }
    sleep 0.2
done
sleep 10 # past every camera's kernel builds and first frames
ticks() { awk '{print $14 + $15}' "/proc/$pid/stat"; }
scrape() { curl -sf "http://127.0.0.1:$port/metrics"; }
a=$(scrape) t0=$(ticks)
sleep "$secs"
b=$(scrape) t1=$(ticks)
rss=$(awk '/^VmRSS/ {print $2}' "/proc/$pid/status")
anon=$(awk '/^RssAnon/ {print $2}' "/proc/$pid/status")
python3 - "$n" "$size" "$secs" "$((t1 - t0))" "$(getconf CLK_TCK)" "$rss" "$anon" "$a" "$b" <<'PY'
import sys
n, size, secs, ticks, hz, rss, anon, a, b = sys.argv[1:]
n, secs, cpu = int(n), float(secs), int(ticks) / int(hz)
def series(text):
    out = {}
    for line in text.splitlines():
        if line and not line.startswith('#'):
            k, v = line.rsplit(' ', 1)
            out[k] = float(v)
    return out
A, B = series(a), series(b)
d = lambda k: B.get(k, 0.0) - A.get(k, 0.0)
fps = []
for i in range(n):
    cam = f'camera="cam{i}"'
    frames = d(f'edgesight_frames_total{{{cam}}}')
    gaps = d(f'edgesight_frames_dropped_total{{{cam},reason="sequence_gap"}}')
    backlog = d(f'edgesight_frames_dropped_total{{{cam},reason="publish_backlog"}}')
    fps.append(frames / secs)
    print(f"  cam{i}: {frames / secs:.1f} fps, {gaps:.0f} skipped by the source, {backlog:.0f} publish_backlog")
print(f"{n} x {size}: {sum(fps):.1f} fps in all over {secs:.0f} s, CPU {100 * cpu / secs:.0f}% of a core "
      f"({1000 * cpu / max(sum(fps) * secs, 1):.2f} ms per frame), RSS {int(rss) / 1024:.1f} MiB, "
      f"anonymous {int(anon) / 1024:.1f} MiB")
PY
