#!/bin/bash
# The daemon's host CPU time per frame: `edgesight run` on a raw replay file, CPU time
# (utime + stime from /proc) and frames published over a window, after a warm-up.
#   bench/host-cost.sh BINARY DEVICE [SIZE] [SECONDS]
# e.g. bench/host-cost.sh target/release/edgesight nvidia 1920x1080 20
# The replay reads each frame into its slot (a copy every source must make); with perf
# installed, PERF=1 also records where the time goes (PERF_CALLGRAPH=dwarf unwinds
# through libraries built without frame pointers, such as GPU drivers, so that each of
# edgesight's functions is charged what the driver did for it; PERF_DATA=FILE keeps the
# recording).
set -eu
bin=$1 device=$2 size=${3:-1920x1080} secs=${4:-20}
w=${size%x*} h=${size#*x}
dir=$(mktemp -d)
trap 'kill "$pid" 2>/dev/null; rm -rf "$dir"' EXIT
# 30 frames of noise: every frame differs, as a camera's do.
head -c $((w * h * 30)) /dev/urandom > "$dir/frames.gray"
port=$((20000 + RANDOM % 20000))
cat > "$dir/run.toml" <<TOML
[web]
listen_address = "127.0.0.1:$port"
[[camera]]
name = "c"
opencl_device = "$device"
[camera.source]
kind = "replay"
path = "$dir/frames.gray"
size = "$size"
format = "grey"
fps = 30
TOML
"$bin" run --config "$dir/run.toml" 2> "$dir/log" &
pid=$!
frames() { curl -s "127.0.0.1:$port/metrics" | awk '/^edgesight_frames_total/ {print $2}'; }
ticks() { awk '{print $14 + $15}' "/proc/$pid/stat"; }
# CPU ticks of each thread, by name (threads of one name summed).
threads() {
    for t in /proc/"$pid"/task/*; do
        awk '{ sub(/^[0-9]+ \(/, ""); i = index($0, ") "); name = substr($0, 1, i - 1);
               split(substr($0, i + 2), f, " "); print name, f[12] + f[13] }' "$t/stat"
    done | awk '{ t[$1] += $2 } END { for (n in t) print n, t[n] }' | sort
}
sleep 6
threads > "$dir/threads0"
f0=$(frames) t0=$(ticks)
data=${PERF_DATA:-$dir/perf.data}
if [ -n "${PERF:-}" ] && command -v perf >/dev/null; then
    perf record -q -F 999 --call-graph "${PERF_CALLGRAPH:-fp}" -p "$pid" -o "$data" \
        -- sleep "$secs" 2>/dev/null
else
    sleep "$secs"
fi
f1=$(frames) t1=$(ticks)
threads > "$dir/threads1"
hz=$(getconf CLK_TCK)
awk -v f=$((f1 - f0)) -v t=$((t1 - t0)) -v hz="$hz" -v s="$secs" -v size="$size" 'BEGIN {
    printf "%s: %d frames in %d s, CPU %.2f s: %.3f ms per frame, %.1f%% of a core\n",
        size, f, s, t / hz, 1000 * t / hz / f, 100 * t / hz / s }'
# Per thread: the camera's capture and GPU thread (es-cam-*), its publisher (es-pub-*),
# the HTTP server (es-tokio*) and any driver threads.
join -a 2 -e 0 -o 0,1.2,2.2 "$dir/threads0" "$dir/threads1" |
    awk -v f=$((f1 - f0)) -v hz="$hz" '$3 > $2 {
        printf "  %-16s %.3f ms per frame\n", $1, 1000 * ($3 - $2) / hz / f }'
if [ -f "$data" ]; then
    perf report -q -i "$data" --no-children --sort comm,dso --stdio -g none 2>/dev/null | head -20
    perf report -q -i "$data" --no-children --sort dso,sym --stdio -g none 2>/dev/null | head -45
    echo "-- edgesight's functions, with what they called"
    perf report -q -i "$data" --children --sort sym --stdio -g none 2>/dev/null |
        grep -E 'edgesight|pipeline|daemon|capture' | head -40
fi
