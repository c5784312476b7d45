#!/usr/bin/env bash
# edgesight on a Mali driver that gives no GPU timestamp and runs nothing: Mesa's Rusticl on
# Panfrost's no-op DRM shim (a Mali-G52 unless PAN_GPU_ID says another), as built by
# scripts/mali/mesa.sh. The shim refuses profiling queues, as board kernels before panfrost
# DRM 1.3 do, and executes no job, so the device's results are whatever its buffers held: a
# broken driver. Checks that
#   - `devices` says the driver refuses profiling;
#   - `selftest` starts on a plain queue and ends in a table of mismatches, exit status 1,
#     never a panic;
#   - `check-config` with `[opencl] profiling = "on"` is refused at that key;
#   - the daemon starts, times its stages on the host (timing="host"), refuses each frame's
#     impossible results and counts them by stage, and stops cleanly on SIGTERM.
#
#   scripts/mali/on-shim.sh EDGESIGHT MESA_PREFIX OUT_DIR
set -euo pipefail

bin=$(realpath "$1")
prefix=$2
out=$3
mkdir -p "$out"
fail() { echo "on-shim: FAIL: $*" >&2; exit 1; }
# shellcheck disable=SC1091
. "$prefix/env.sh"
# One cache for the runs below, so that the daemon finds the kernels selftest compiled.
export MESA_SHADER_CACHE_DISABLE=false MESA_SHADER_CACHE_DIR=$out/shader-cache
unset SHIM_GPU_TIMESTAMP_HZ

"$bin" devices > "$out/devices.txt" 2>&1 || fail "devices: $(cat "$out/devices.txt")"
grep -q "profiling: *no: the driver refuses profiling queues" "$out/devices.txt" ||
    fail "devices does not say profiling is refused: $(cat "$out/devices.txt")"
echo "on-shim: devices: $(grep -m1 ' — GPU' "$out/devices.txt" | sed 's/^ *//'), profiling refused"

started=$(date +%s)
set +e
"$bin" selftest --tuning mali > "$out/selftest.txt" 2>&1
status=$?
set -e
took=$(( $(date +%s) - started ))
grep -q "panicked" "$out/selftest.txt" && fail "selftest panicked: $(cat "$out/selftest.txt")"
[ "$status" = 1 ] || fail "selftest exit status $status (1 expected): $(cat "$out/selftest.txt")"
grep -q "stage times from the host's clock" "$out/selftest.txt" ||
    fail "selftest did not say it times on the host"
grep -q "differ from the reference" "$out/selftest.txt" || fail "no verdict: $(cat "$out/selftest.txt")"
echo "on-shim: selftest ended in its table in $took s (exit 1, no panic):"
sed -n '/^stage /,/^[0-9.]* s$/p' "$out/selftest.txt" | cut -c1-150 | sed 's/^/  /'

cat > "$out/on.toml" <<'EOF'
[opencl]
profiling = "on"
[[camera]]
name = "pattern"
[camera.source]
kind = "pattern"
size = "320x240"
fps = 10
EOF
if "$bin" check-config "$out/on.toml" > "$out/check-on.txt" 2>&1; then
    fail "check-config took profiling = \"on\" on a driver that refuses it"
fi
grep -q "opencl.profiling: camera 'pattern': the driver refuses a queue with profiling events" \
    "$out/check-on.txt" || fail "check-config: $(cat "$out/check-on.txt")"
echo "on-shim: check-config refuses profiling = \"on\": $(grep -m1 profiling "$out/check-on.txt" | cut -c1-120)..."

sed 's/profiling = "on"/profiling = "auto"/' "$out/on.toml" > "$out/auto.toml"
port=$((20000 + RANDOM % 20000))
"$bin" run --config "$out/auto.toml" --listen "127.0.0.1:$port" > "$out/daemon.log" 2>&1 &
daemon=$!
trap 'kill $daemon 2>/dev/null || true' EXIT
metrics=
for _ in $(seq 1 600); do
    metrics=$(curl -fsS "http://127.0.0.1:$port/metrics?collect%5B%5D=detail" 2>/dev/null || true)
    errors=$(echo "$metrics" | sed -n 's/^edgesight_pipeline_errors_total{camera="pattern"} //p')
    [ "${errors:-0}" -ge 10 ] 2>/dev/null && break
    kill -0 $daemon 2>/dev/null || fail "the daemon ended: $(tail -20 "$out/daemon.log")"
    sleep 1
done
echo "$metrics" > "$out/metrics.txt"
[ "${errors:-0}" -ge 10 ] || fail "fewer than 10 frames refused in 10 minutes: $(tail -20 "$out/daemon.log")"
echo "$metrics" | grep -q '^edgesight_opencl_device_info{.*timing="host".*} 1$' ||
    fail "no timing=\"host\" in edgesight_opencl_device_info"
grep -q "panicked" "$out/daemon.log" && fail "the daemon panicked: $(grep -m3 panicked "$out/daemon.log")"
kill -TERM $daemon
wait $daemon || fail "the daemon exited with status $? on SIGTERM"
trap - EXIT
echo "on-shim: the daemon refused $errors frames as impossible, by stage:"
echo "$metrics" | grep '^edgesight_stage_errors_total{camera="pattern"' | grep -v ' 0$' | sed 's/^/  /'
echo "on-shim: first refusal logged: $(grep -m1 'impossible' "$out/daemon.log" | cut -c1-200)"
echo "on-shim: all checks passed"
