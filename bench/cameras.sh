#!/usr/bin/env bash
# Several cameras in one daemon: `edgesight run` with N test-pattern cameras of one size,
# each with two ROIs, camera health, motion and the live frames' check on (the defaults),
# as a site with N cameras on one board would run it. After a warm-up, reads the daemon's
# /metrics twice, SECONDS apart, and its CPU time and memory from /proc, and prints per
# camera: frames per second, frames the source skipped (sequence_gap: the pipeline was
# late) and publish_backlog drops; for the process: CPU (share of one core), RSS and
# anonymous RSS.
#   bench/cameras.sh N [WxH] [SECONDS] [FPS] [FORMAT]
# EDGESIGHT=PATH runs another binary than target/release/edgesight. SNAPSHOTS=1 turns
# [web] snapshots on and asks every camera for its five pictures just before the memory is
# read, as a status page being watched does.
# e.g. for n in 1 2 4; do bench/cameras.sh $n 1280x720 60; done
set -euo pipefail
n=$1 size=${2:-1280x720} secs=${3:-60} fps=${4:-30} format=${5:-yuyv}
bin=${EDGESIGHT:-target/release/edgesight}
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
export POCL_CACHE_DIR=${POCL_CACHE_DIR:-$PWD/target/pocl-cache}
mkdir -p "$POCL_CACHE_DIR"
# The two ROIs are the ones the results in BENCHMARKS.md#board-memory were taken with at
# 1280x720 and 1920x1080 (a 64x64 corner, a 320x240 block at 100,100); a smaller frame gets
# them scaled down by one factor, min(W/1280, H/720), so they keep their shape and place and
# stay inside the frame (each side at least 1) rather than the daemon refusing the config.
[[ $size =~ ^([0-9]+)[xX]([0-9]+)$ ]] || { echo "cameras.sh: size '$size' is not WxH" >&2; exit 2; }
width=${BASH_REMATCH[1]} height=${BASH_REMATCH[2]}
if ((width >= 1280 && height >= 720)); then num=1 den=1
elif ((width * 720 <= height * 1280)); then num=$width den=1280
else num=$height den=720; fi
at() { echo $(($1 * num / den)); } # an offset, rounded down: still inside
side() { local v=$(($1 * num / den)); echo $((v > 0 ? v : 1)); } # a side, at least 1
roi() { # NAME X Y W H at 1280x720
    printf '[[camera.roi]]\nname = "%s"\nx = %s\ny = %s\nw = %s\nh = %s\n' \
        "$1" "$(at "$2")" "$(at "$3")" "$(side "$4")" "$(side "$5")"
}
dir=$(mktemp -d)
pid=
trap '[ -n "$pid" ] && kill "$pid" 2>/dev/null; rm -rf "$dir"' EXIT
{
    printf '[web]\nlisten_address = "127.0.0.1:%s"\n' "$port"
    [ -n "${SNAPSHOTS:-}" ] && printf 'snapshots = true\n'
    for i in $(seq 0 $((n - 1))); do
        printf '\n[[camera]]\nname = "cam%s"\n[camera.source]\nkind = "pattern"\n' "$i"
        printf 'size = "%s"\nformat = "%s"\nfps = %s\n' "$size" "$format" "$fps"
        roi left 0 0 64 64
        roi centre 100 100 320 240
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
# The scrapes go to files, not into python's argv: Linux takes at most 128 KiB in one
# argument (MAX_ARG_STRLEN), and /metrics, about 17 KB a camera, passes that from 8 cameras on
# ("Argument list too long").
scrape() { curl -sf "http://127.0.0.1:$port/metrics" > "$dir/$1.prom"; }
scrape a; t0=$(ticks)
sleep "$secs"
scrape b; t1=$(ticks)
if [ -n "${SNAPSHOTS:-}" ]; then
    for i in $(seq 0 $((n - 1))); do
        for p in luma edges mask histogram motion; do
            curl -sf -o /dev/null "http://127.0.0.1:$port/snapshot/$p.png?camera=cam$i"
        done
    done
fi
rss=$(awk '/^VmRSS/ {print $2}' "/proc/$pid/status")
anon=$(awk '/^RssAnon/ {print $2}' "/proc/$pid/status")
python3 - "$n" "$size" "$secs" "$((t1 - t0))" "$(getconf CLK_TCK)" "$rss" "$anon" "$dir/a.prom" "$dir/b.prom" <<'PY'
import sys
n, size, secs, ticks, hz, rss, anon, a, b = sys.argv[1:]
a, b = (open(path).read() for path in (a, b))
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
