#!/usr/bin/env bash
# Tests the packaged service under real systemd: boots Debian's kernel in QEMU (TCG, no
# KVM needed) with a Debian 12 root built from Debian packages (systemd as PID 1, udev,
# POCL, Debian's Prometheus), installs the amd64 .deb there with apt, and checks, against
# the kernel's vivid virtual camera, that the install itself enables and starts the
# service on /dev/video0 with the packaged config unedited, that the hardened unit serves
# metrics, reloads, is restarted by its watchdog, waits for an absent or unplugged camera,
# stops cleanly, serves TLS from a root-only key through the LoadCredential= drop-in of
# deploy/, restarts on upgrade, leaves nothing behind on purge, logs no unexpected errors
# and is scraped by Prometheus.
#
#   tests/systemd-vm/run.sh
#
# Cached under target/systemd-vm/: the root image (rebuilt when image.sh or init change)
# and its initramfs; the kernel is tests/vm/run.sh's download under target/vm/kernel. Each
# boot starts from the cached image (qemu -snapshot). The checks (checks.sh) come into the
# VM through a 9p share, with the .deb, deploy/'s Prometheus files and TLS drop-in, and a
# throwaway certificate made here (the image has no openssl); results, the journal and
# the timings come back the same way and are printed here.
# Needs qemu-system-x86, mmdebstrap, e2fsprogs, busybox-static, kmod, cpio, zstd, openssl,
# and the Debian mirror (only to build the image).
#   EDGESIGHT_DEB=FILE        test that package instead of `scripts/package-deb.sh amd64`'s
#   EDGESIGHT_VM_TIMEOUT=S    give up on the VM after S seconds (1200)
#   EDGESIGHT_VM_MIRROR=URL   the Debian mirror for the image (http://deb.debian.org/debian)
# After a run, target/systemd-vm/last/ holds checks, timings, failures.txt (the unit's
# state and journal at each failure), journal.txt (the VM's whole journal) and
# edgesight.journal.
set -euo pipefail

root=$(cd "$(dirname "$0")/../.." && pwd)
here=$root/tests/systemd-vm
vm=$root/target/vm
out=$root/target/systemd-vm
timeout_s=${EDGESIGHT_VM_TIMEOUT:-1200}
mkdir -p "$vm" "$out"

log() { echo "systemd-vm: $(date +%H:%M:%S) $*"; }
t0=$(date +%s)

# 1. The kernel: tests/vm/run.sh's, unpacked under target/vm/kernel (tests/vm/kernel.sh
#    chooses it and is shared by both), or downloaded here when that has not run.
# shellcheck source=tests/vm/kernel.sh
. "$root/tests/vm/kernel.sh"
version=$(vm_kernel_version)
if [ -z "$version" ]; then
    vm_kernel_fetch "$vm/dl"
    vm_kernel_unpack "$vm/dl"
    rm -rf "$vm/dl"
    version=$(vm_kernel_version)
fi
vmlinuz=$vm/kernel/boot/vmlinuz-$version

# 2. The root image and its initramfs (image.sh), rebuilt when their recipe or the kernel
#    changes.
stamp=$( (cat "$here/image.sh" "$here/init"; echo "$version") | sha256sum | cut -c1-16)
image=$out/root.img
initrd=$out/initramfs.cpio.gz
if [ "$(cat "$out/stamp" 2>/dev/null)" != "$stamp" ] || [ ! -f "$image" ] || [ ! -f "$initrd" ]; then
    log "building the Debian 12 root image and its initramfs (mmdebstrap; about 3 minutes)"
    t=$(date +%s)
    rm -f "$out/stamp"
    "$here/image.sh" "$out" "$vm/kernel" "$version"
    echo "$stamp" > "$out/stamp"
    log "root image built in $(( $(date +%s) - t )) s ($(du -h --apparent-size "$image" | cut -f1), $(du -h "$image" | cut -f1) used)"
fi

# 3. The package under test: scripts/package-deb.sh's amd64 .deb (or EDGESIGHT_DEB).
share=$out/share
rm -rf "$share" && mkdir -p "$share/deploy" "$share/results"
deb=${EDGESIGHT_DEB:-}
if [ -z "$deb" ]; then
    log "building the .deb (scripts/package-deb.sh amd64)"
    (cd "$root" && scripts/package-deb.sh amd64)
    deb=$(ls -t "$root"/target/deb/edgesight_*-1_amd64.deb | head -1)
fi
[ -f "$deb" ] || { echo "systemd-vm: no package to test ($deb)" >&2; exit 1; }
cp "$deb" "$share/"
log "package under test: $(basename "$deb")"
cp "$here/checks.sh" "$share/"
cp "$root/deploy/prometheus.yml" "$root/deploy/alerts.yml" "$share/deploy/"
cp -r "$root/deploy/edgesight.service.d" "$share/deploy/"
# The TLS check's certificate, self-signed for the names the VM reaches the daemon by.
mkdir "$share/tls"
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 2 \
    -subj /CN=localhost -addext "subjectAltName=DNS:localhost,IP:127.0.0.1,IP:::1" \
    -keyout "$share/tls/tls.key" -out "$share/tls/tls.crt" 2>/dev/null

# 4. Boot. systemd runs checks.sh after multi-user.target, then powers the VM off.
log "booting $version with systemd (TCG, 2 vCPUs); the checks follow"
t=$(date +%s)
set +e
timeout "$timeout_s" qemu-system-x86_64 \
    -accel tcg,thread=multi -cpu max -smp 2 -m 2048 \
    -nographic -no-reboot -nic none -snapshot \
    -kernel "$vmlinuz" -initrd "$initrd" \
    -append "console=ttyS0 quiet loglevel=3 panic=-1 rdinit=/init systemd.show_status=false" \
    -drive file="$image",format=raw,if=virtio \
    -virtfs local,path="$share",mount_tag=share,security_model=none \
    </dev/null &
qemu=$!
trap 'kill $qemu 2>/dev/null' EXIT
wait $qemu
qemu_status=$?
trap - EXIT
set -e
log "VM ran for $(( $(date +%s) - t )) s (qemu status $qemu_status); whole run $(( $(date +%s) - t0 )) s"

# 5. Results: one line per check, PASS or FAIL; the journal is kept for reading.
results=$share/results
rm -rf "$out/last" && cp -r "$results" "$out/last"
echo
echo "systemd-vm: results (journal and details in target/systemd-vm/last/)"
if [ ! -s "$results/checks" ]; then
    echo "FAIL  the VM ended without results (qemu status $qemu_status)"
    exit 1
fi
cat "$results/checks"
[ -f "$results/timings" ] && { echo; echo "timings:"; sed 's/^/  /' "$results/timings"; }
echo
if ! grep -q '^DONE' "$results/checks"; then
    echo "systemd-vm: FAIL: the checks did not finish (timeout or crash)"
    exit 1
fi
if grep -q '^FAIL' "$results/checks"; then
    echo "systemd-vm: FAIL: $(grep -c '^FAIL' "$results/checks") check(s) failed"
    exit 1
fi
echo "systemd-vm: all checks passed"
