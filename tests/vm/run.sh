#!/usr/bin/env bash
# Runs the V4L2 capture tests (tests/vm_capture.rs) against the kernel's vivid virtual
# camera, inside a small x86-64 VM: Debian's own kernel (downloaded and unpacked, never
# installed), a busybox initramfs that loads vivid, and the host's root shared read-only
# over 9p so the dynamically linked test binary and POCL run inside it (chroot).
#
#   tests/vm/run.sh [TEST-FILTER...]     extra arguments go to the test binary
#
# The kernel package and the initramfs are cached under target/vm/; a rerun only rebuilds
# the test binary. Needs qemu-system-x86, busybox-static, kmod and cpio
# (scripts/install-deps.sh test). QEMU runs with TCG (no KVM needed).
set -euo pipefail

root=$(cd "$(dirname "$0")/../.." && pwd)
vm=$root/target/vm
kernel_pkg=${EDGESIGHT_VM_KERNEL:-}
timeout_s=${EDGESIGHT_VM_TIMEOUT:-1200}
mkdir -p "$vm"

log() { echo "vm-test: $*"; }

# 1. The kernel: the package linux-image-amd64 points to, unpacked once.
if [ ! -f "$vm/kernel/.done" ]; then
    find_kernel() {
        apt-cache depends linux-image-amd64 2>/dev/null |
            sed -n 's/^ *Depends: \(linux-image-[0-9].*-amd64\)$/\1/p' | head -1
    }
    [ -n "$kernel_pkg" ] || kernel_pkg=$(find_kernel)
    if [ -z "$kernel_pkg" ]; then
        # A machine whose package lists were never fetched (or were cleaned).
        if [ "$(id -u)" -eq 0 ]; then apt-get update -qq; else sudo apt-get update -qq; fi
        kernel_pkg=$(find_kernel)
    fi
    [ -n "$kernel_pkg" ] || { echo "vm-test: cannot find Debian's amd64 kernel package (apt-get update?)" >&2; exit 1; }
    log "downloading $kernel_pkg"
    rm -rf "$vm/kernel" "$vm/dl" && mkdir -p "$vm/dl" "$vm/kernel"
    (cd "$vm/dl" && apt-get download "$kernel_pkg" >/dev/null 2>&1 || apt-get download "$kernel_pkg")
    dpkg -x "$vm"/dl/*.deb "$vm/kernel"
    rm -rf "$vm/dl"
    touch "$vm/kernel/.done"
fi
version=$(ls "$vm/kernel/lib/modules" | head -1)
vmlinuz=$vm/kernel/boot/vmlinuz-$version

# 2. The initramfs: busybox, our init, and the modules vivid and 9p need, in load order.
initrd=$vm/initramfs.cpio.gz
if [ ! -f "$initrd" ] || [ "$root/tests/vm/init" -nt "$initrd" ] || [ "$0" -nt "$initrd" ]; then
    log "building the initramfs for $version"
    depmod -b "$vm/kernel" "$version"
    staging=$vm/initramfs
    rm -rf "$staging" && mkdir -p "$staging"/{bin,modules,proc,sys,dev,host,share,tmp}
    cp "$(command -v busybox)" "$staging/bin/busybox"
    file "$staging/bin/busybox" 2>/dev/null | grep -q "dynamically linked" &&
        { echo "vm-test: busybox must be static (busybox-static)" >&2; exit 1; }
    cp "$root/tests/vm/init" "$staging/init" && chmod +x "$staging/init"
    : > "$staging/modules/order"
    for m in virtio_pci 9pnet_virtio 9p vivid; do
        modprobe -d "$vm/kernel" -S "$version" --show-depends "$m" | while read -r kind path _; do
            [ "$kind" = insmod ] || continue
            name=$(basename "$path")
            grep -qx "${name%%.ko*}.ko" "$staging/modules/order" && continue
            case "$path" in
                *.ko.xz) xz -dc "$path" > "$staging/modules/${name%.xz}" ;;
                *.ko.zst) zstd -qdc "$path" > "$staging/modules/${name%.zst}" ;;
                *) cp "$path" "$staging/modules/$name" ;;
            esac
            echo "${name%%.ko*}.ko" >> "$staging/modules/order"
        done
    done
    (cd "$staging" && find . | cpio -o -H newc --quiet | gzip -1) > "$initrd.tmp"
    mv "$initrd.tmp" "$initrd"
fi

# 3. The test binary, copied into the share (the VM sees only the share and /, read-only).
log "building the test binary"
bin=$(cd "$root" && cargo test --locked --no-run --test vm_capture --message-format=json 2>/dev/null |
    python3 -c 'import json, sys
for line in sys.stdin:
    m = json.loads(line)
    if m.get("reason") == "compiler-artifact" and m["target"]["name"] == "vm_capture" and m.get("executable"):
        print(m["executable"])')
[ -x "$bin" ] || { echo "vm-test: building tests/vm_capture.rs failed; run: cargo test --no-run --test vm_capture" >&2; exit 1; }
share=$vm/share
rm -rf "$share" && mkdir -p "$share/pocl-cache"
cp "$bin" "$share/vm_capture"
# The CLI the tests start: the VM's /tmp is its own, so a checkout under the host's /tmp
# would not be reachable at the path cargo compiled into the tests.
cp "$(dirname "$bin")/../edgesight" "$share/edgesight"
printf '%q ' "$@" > "$share/args"
# A warm POCL kernel cache from the last run saves minutes of compiling under emulation.
[ -d "$vm/pocl-cache" ] && cp -r "$vm/pocl-cache/." "$share/pocl-cache/"

# 4. Boot. The init script runs the tests and powers off; results come back in the share.
log "booting $version with vivid (TCG, 2 vCPUs); test log follows"
start=$(date +%s)
set +e
timeout "$timeout_s" qemu-system-x86_64 \
    -accel tcg,thread=multi -cpu max -smp 2 -m 2048 \
    -nographic -no-reboot -nic none \
    -kernel "$vmlinuz" -initrd "$initrd" \
    -append "console=ttyS0 quiet loglevel=4 panic=-1 rdinit=/init" \
    -virtfs local,path=/,mount_tag=hostroot,security_model=none,readonly=on,multidevs=remap \
    -virtfs local,path="$share",mount_tag=share,security_model=none \
    </dev/null
qemu_status=$?
set -e
log "VM ran for $(( $(date +%s) - start )) s"
rm -rf "$vm/pocl-cache" && cp -r "$share/pocl-cache" "$vm/pocl-cache" 2>/dev/null || true
if [ ! -f "$share/status" ]; then
    echo "vm-test: the VM ended (qemu status $qemu_status) without a test result" >&2
    exit 1
fi
status=$(cat "$share/status")
if [ "$status" != 0 ]; then
    echo "vm-test: the capture tests failed in the VM (exit status $status)" >&2
    exit 1
fi
log "the capture tests passed in the VM"
