#!/usr/bin/env bash
# `make test-image`: the amd64 container image, run as deploy/compose.yaml runs it, on the
# test pattern, and scraped. Builds the image first (scripts/build-image.sh amd64: nothing
# to do when the recipe and target/deb/edgesight_<version>-1_amd64.deb are unchanged).
#
#   1. the image's metadata: user, entrypoint and command, volumes, the health check;
#   2. a container with tests/image/edgesight.toml as its config volume, a read-only root,
#      no capabilities and no-new-privileges, its port published: /healthz answers 200,
#      /metrics twice (the frame counter goes up, build info with this version, the
#      camera up, POCL as its device); the process runs as uid 10001 with the video group
#      and no capabilities (read from the host's /proc); the root is read-only and POCL's
#      cache volume was written; `podman healthcheck run` passes; `podman stop` ends it
#      with exit code 0;
#   3. a container whose camera (/dev/video0) is absent: /healthz 503, the health check fails;
#   4. deploy/compose.yaml parsed and compared with the image (the same health check and
#      image version), then run with podman-compose as it is but for what this machine
#      lacks (the camera and GPU devices; the amd64 image, the test's config, a free port):
#      /healthz answers and its health check, as podman-compose passes it, passes.
#
# Needs root (rootful podman, as scripts/build-image.sh), curl, python3-yaml and
# podman-compose.
set -euo pipefail

cd "$(dirname "$0")/../.."
repo=$PWD
export CONTAINERS_CONF=${CONTAINERS_CONF:-$repo/scripts/containers.conf}
version=$(scripts/version.sh)
image=localhost/edgesight:$version-amd64
name=edgesight-image-test-$$
absent=$name-absent
project=$name-compose
start=$SECONDS

fail() {
    echo "test-image: FAILED: $*" >&2
    exit 1
}
pass() { echo "test-image: ok: $*"; }
# podman without systemd (CI sandboxes) logs an error for every health-check timer it cannot
# make or remove; `podman healthcheck run`, which the test uses, needs none.
podman_() { podman "$@" 2> >(grep -v "unable to get systemd connection" >&2); }

[ "$(id -u)" -eq 0 ] || fail "needs root (rootful podman)"
for tool in curl python3 podman-compose; do
    command -v $tool >/dev/null || fail "$tool is missing (scripts/install-deps.sh test)"
done

scripts/build-image.sh amd64

conf=$(mktemp -d)
cleanup() {
    local rc=$?
    if [ $rc -ne 0 ] && podman container exists "$name"; then
        echo "--- the container's log (last 40 lines):" >&2
        podman logs --tail 40 "$name" >&2 || true
    fi
    if [ $rc -ne 0 ] && [ -s "$conf/compose.log" ]; then
        echo "--- podman-compose's output (last 20 lines):" >&2
        tail -n 20 "$conf/compose.log" >&2
    fi
    if [ -f "$conf/compose/compose.yaml" ]; then
        (cd "$conf/compose" && podman-compose -p "$project" down -v >/dev/null 2>&1) || true
    fi
    # One at a time: a name that is gone makes podman rm leave the others.
    local c
    for c in "$name" "$absent" "$project"; do
        podman_ rm -f -v --ignore "$c" >/dev/null 2>&1 || true
    done
    podman volume rm "${project}_edgesight-cache" >/dev/null 2>&1 || true
    podman network rm "${project}_default" >/dev/null 2>&1 || true
    rm -rf "$conf"
}
trap cleanup EXIT
# mktemp's 0700 would keep the container's user out of its own config.
chmod 0755 "$conf"
install -m 0644 tests/image/edgesight.toml "$conf/edgesight.toml"

# 1. What the image says about itself.
inspect() { podman image inspect --format "$1" "$image"; }
[ "$(inspect '{{.Config.User}}')" = edgesight ] || fail "image user is '$(inspect '{{.Config.User}}')', not edgesight"
[ "$(inspect '{{json .Config.Entrypoint}}')" = '["/usr/bin/edgesight"]' ] ||
    fail "entrypoint is $(inspect '{{json .Config.Entrypoint}}')"
cmd='["run","--config","/etc/edgesight/edgesight.toml","--web.listen-address",":8947"]'
[ "$(inspect '{{json .Config.Cmd}}')" = "$cmd" ] || fail "command is $(inspect '{{json .Config.Cmd}}'), not $cmd"
for v in /etc/edgesight /var/cache/edgesight; do
    inspect '{{json .Config.Volumes}}' | grep -q "\"$v\"" || fail "$v is not a volume of the image"
done
healthcheck=$(inspect '{{json .Config.Healthcheck.Test}}')
[ "$healthcheck" != null ] || fail "the image has no health check (built in the OCI format?)"
[ "$(inspect '{{.Architecture}}')" = amd64 ] || fail "architecture $(inspect '{{.Architecture}}')"
pass "image $image ($(inspect '{{.Size}}' | numfmt --to=si)): user, command, volumes, health check"

# 2. The daemon on the test pattern, hardened as compose.yaml runs it. Health-check timers
# need systemd; where it is not PID 1 they are turned off and the checks run by hand.
health_opts=()
[ -d /run/systemd/system ] || health_opts=(--health-interval=disable)
podman_ run -d --name "$name" --read-only --cap-drop all --security-opt no-new-privileges \
    -v "$conf:/etc/edgesight:ro" -p 127.0.0.1::8947 "${health_opts[@]}" "$image" >/dev/null
port=$(podman port "$name" 8947/tcp | sed -n 's/^127\.0\.0\.1://p' | head -n1)
[ "$(podman inspect --format '{{.State.Running}}' "$name")" = true ] ||
    fail "the container stopped at once (exit code $(podman inspect --format '{{.State.ExitCode}}' "$name"))"
[ -n "$port" ] || fail "port 8947 is not published: $(podman port "$name")"
url=http://127.0.0.1:$port

# A cold POCL cache compiles the pipeline's kernels first: tens of seconds on a loaded
# 2-core machine.
deadline=$((SECONDS + 180))
until body=$(curl -fsS --max-time 5 "$url/healthz" 2>/dev/null); do
    [ "$(podman inspect --format '{{.State.Running}}' "$name")" = true ] ||
        fail "the container stopped before /healthz answered 200"
    [ $SECONDS -lt $deadline ] || fail "/healthz did not answer 200 within 180 s: $(curl -sS "$url/healthz" 2>&1)"
    sleep 1
done
[ "$body" = ok ] || fail "/healthz answered '$body'"
pass "/healthz is 200 through the published port (the config's loopback address replaced by :8947)"

metric() { # metric FILE SERIES: the value of the one sample whose name and labels start so
    awk -v s="$2" 'index($0, s) == 1 { print $NF; n++ } END { exit n != 1 }' "$1"
}
curl -fsS --max-time 5 "$url/metrics" >"$conf/m1"
sleep 2
curl -fsS --max-time 5 "$url/metrics" >"$conf/m2"
f1=$(metric "$conf/m1" 'edgesight_frames_total{camera="pattern"}') || fail "no edgesight_frames_total{camera=\"pattern\"} in the first scrape"
f2=$(metric "$conf/m2" 'edgesight_frames_total{camera="pattern"}') || fail "no edgesight_frames_total{camera=\"pattern\"} in the second scrape"
awk -v a="$f1" -v b="$f2" 'BEGIN { exit !(b > a) }' || fail "edgesight_frames_total did not go up in 2 s ($f1 -> $f2)"
grep -q "^edgesight_build_info{.*version=\"$version\".*} 1\$" "$conf/m2" ||
    fail "no edgesight_build_info with version=\"$version\": $(grep edgesight_build_info "$conf/m2")"
[ "$(metric "$conf/m2" 'edgesight_camera_up{camera="pattern"}')" = 1 ] || fail "edgesight_camera_up{camera=\"pattern\"} is not 1"
grep -q '^edgesight_opencl_device_info{.*platform="Portable Computing Language".*} 1$' "$conf/m2" ||
    fail "the camera's OpenCL device is not POCL: $(grep edgesight_opencl_device_info "$conf/m2")"
metric "$conf/m2" 'edgesight_roi_mean_luma{camera="pattern",roi="corner"}' >/dev/null ||
    fail "no edgesight_roi_mean_luma for the config's region"
pass "/metrics: frames $f1 -> $f2 in 2 s, build info $version, camera up, POCL, the config's region"

# The host's view of the process: rootful podman maps no users, so these are the real IDs.
pid=$(podman inspect --format '{{.State.Pid}}' "$name")
status=$(cat "/proc/$pid/status")
grep -Eq '^Uid:\s+10001\s+10001\s+10001\s+10001$' <<<"$status" || fail "not uid 10001: $(grep ^Uid: <<<"$status")"
grep -Eq '^Gid:\s+10001\s+10001\s+10001\s+10001$' <<<"$status" || fail "not gid 10001: $(grep ^Gid: <<<"$status")"
grep -Eq '^Groups:.*\b44\b' <<<"$status" || fail "not in the video group (44): $(grep ^Groups: <<<"$status")"
grep -Eq '^CapEff:\s+0+$' <<<"$status" || fail "has capabilities: $(grep ^CapEff: <<<"$status")"
grep -Eq '^NoNewPrivs:\s+1$' <<<"$status" || fail "NoNewPrivs is off"
pass "edgesight runs as uid 10001, groups $(sed -n '/^Groups:/ { s/^Groups:\s*//; s/\s*$//; p }' <<<"$status"), no capabilities"

if podman exec "$name" /bin/busybox touch /usr/bin/written 2>/dev/null; then
    fail "the root file system is writable"
fi
cached=$(podman exec "$name" /bin/busybox find /var/cache/edgesight -type f | wc -l)
[ "$cached" -gt 0 ] || fail "POCL wrote nothing into /var/cache/edgesight"
pass "root file system read-only; POCL's cache volume holds $cached files"

podman_ healthcheck run "$name" >/dev/null || fail "podman healthcheck run: $(podman_ healthcheck run "$name" 2>&1)"
[ "$(podman inspect --format '{{.State.Health.Status}}' "$name")" = healthy ] ||
    fail "podman reports health '$(podman inspect --format '{{.State.Health.Status}}' "$name")'"
pass "podman healthcheck run: healthy"

t0=$(date +%s%N)
podman_ stop -t 10 "$name" >/dev/null
took=$((($(date +%s%N) - t0) / 1000000))
code=$(podman inspect --format '{{.State.ExitCode}}' "$name")
[ "$code" = 0 ] || fail "exit code $code after podman stop"
[ "$took" -lt 5000 ] || fail "podman stop took $took ms (SIGTERM should end it within 0.1 s)"
if podman logs "$name" 2>&1 | grep -E '^\S+\s+ERROR\b'; then
    fail "the log holds errors (above)"
fi
pass "podman stop: exit code 0 in $took ms, no errors logged"

# 3. The health check must be able to fail: a camera that never delivers.
podman_ run -d --name "$absent" --read-only "${health_opts[@]}" -v "$conf:/etc/edgesight:ro" "$image" \
    run --config /etc/edgesight/edgesight.toml --web.listen-address :8947 --source /dev/video0 >/dev/null
deadline=$((SECONDS + 60))
until podman logs "$absent" 2>&1 | grep -q 'serving listen='; do
    [ "$(podman inspect --format '{{.State.Running}}' "$absent")" = true ] ||
        fail "the container without a camera stopped: $(podman logs "$absent" 2>&1 | tail -n 5)"
    [ $SECONDS -lt $deadline ] || fail "the container without a camera did not serve within 60 s"
    sleep 1
done
if podman_ healthcheck run "$absent" >/dev/null; then
    fail "the health check passes with the camera absent"
fi
pass "with /dev/video0 absent the health check fails"

# 4. The compose example against the image it names.
python3 - "$version" "$healthcheck" <<'EOF' || fail "deploy/compose.yaml (above)"
import json, sys
import yaml

version, image_check = sys.argv[1], json.loads(sys.argv[2])
with open("deploy/compose.yaml") as f:
    svc = yaml.safe_load(f)["services"]["edgesight"]
errors = []
tag = svc["image"].rsplit(":", 1)[-1]
if not tag.startswith(version + "-"):
    errors.append(f"image {svc['image']} is not version {version}")
check = svc.get("healthcheck", {}).get("test")
if check != ["CMD"] + image_check[1:]:
    errors.append(f"healthcheck {check} differs from the image's {image_check}")
if svc.get("read_only") is not True:
    errors.append("read_only is not true")
targets = [v.split(":")[1] for v in svc.get("volumes", [])]
for path in ("/etc/edgesight", "/var/cache/edgesight"):
    if path not in targets:
        errors.append(f"no volume at {path}")
devices = [d.split(":")[0] for d in svc.get("devices", [])]
if "/dev/video0" not in devices:
    errors.append("/dev/video0 is not passed")
if "command" in svc or "entrypoint" in svc:
    errors.append("command/entrypoint set: the image's are the ones tested")
for e in errors:
    print("compose.yaml:", e, file=sys.stderr)
sys.exit(1 if errors else 0)
EOF
pass "deploy/compose.yaml parses and matches the image"

# podman-compose maps the file's keys to podman's options itself (1.0.3 drops group_add and
# wraps the health check in /bin/sh -c): run it as a board would, less the devices.
mkdir "$conf/compose"
cport=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
python3 - "$image" "$conf" "$cport" "$project" <<'EOF' || fail "could not derive the compose file to run"
import sys
import yaml

image, conf, port, name = sys.argv[1:]
with open("deploy/compose.yaml") as f:
    doc = yaml.safe_load(f)
svc = doc["services"]["edgesight"]
svc["image"] = image
svc["container_name"] = name
svc.pop("devices")
svc["ports"] = [f"127.0.0.1:{port}:8947"]
svc["volumes"] = [f"{conf}:/etc/edgesight:ro" if v.startswith("./edgesight:") else v
                  for v in svc["volumes"]]
with open(f"{conf}/compose/compose.yaml", "w") as f:
    yaml.safe_dump(doc, f)
EOF
(cd "$conf/compose" && podman-compose -p "$project" up -d) >"$conf/compose.log" 2>&1 ||
    fail "podman-compose up failed"
deadline=$((SECONDS + 180))
until curl -fsS --max-time 5 "http://127.0.0.1:$cport/healthz" >/dev/null 2>&1; do
    [ "$(podman inspect --format '{{.State.Running}}' "$project" 2>/dev/null)" = true ] ||
        fail "the compose file's container is not running: $(podman logs "$project" 2>&1 | tail -n 5)"
    [ $SECONDS -lt $deadline ] || fail "the compose file's container: /healthz not 200 within 180 s"
    sleep 1
done
podman_ healthcheck run "$project" >/dev/null ||
    fail "the compose file's health check, as podman-compose passes it, fails: $(podman inspect --format '{{json .Config.Healthcheck.Test}}' "$project")"
[ "$(podman inspect --format '{{.HostConfig.ReadonlyRootfs}}' "$project")" = true ] ||
    fail "the compose file's container has a writable root"
pass "deploy/compose.yaml runs under podman-compose: /healthz 200, its health check passes, root read-only (devices left out: none here)"

echo "test-image: all passed ($((SECONDS - start)) s)"
