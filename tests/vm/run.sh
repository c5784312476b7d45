#!/usr/bin/env bash
# Runs the V4L2 capture tests (tests/vm_capture/) against the kernel's vivid virtual
# camera and a v4l2loopback device fed MJPEG by ffmpeg, inside a small x86-64 VM: Debian's
# own kernel (downloaded and unpacked, never installed), a busybox initramfs that loads
# vivid and v4l2loopback, and the host's root shared read-only over 9p so the dynamically
# linked test binary, POCL and ffmpeg run inside it (chroot).
#
#   tests/vm/run.sh [TEST-FILTER...]     extra arguments go to the test binary
#
# The kernel package, v4l2loopback.ko, the MJPEG clips and the initramfs are cached under
# target/vm/; a rerun only rebuilds the test binary. Needs qemu-system-x86, busybox-static,
# kmod, cpio, gcc-12, make, ffmpeg and v4l-utils (scripts/install-deps.sh test). QEMU runs
# with TCG (no KVM needed).
set -euo pipefail

root=$(cd "$(dirname "$0")/../.." && pwd)
vm=$root/target/vm
timeout_s=${EDGESIGHT_VM_TIMEOUT:-1200}
mkdir -p "$vm"

log() { echo "vm-test: $*"; }
# shellcheck source=tests/vm/kernel.sh
. "$root/tests/vm/kernel.sh"

# 1. The kernel and 2. v4l2loopback, a capture device that sends what a writer gives it (MJPEG
# here), from Debian's DKMS source built against the kernel's headers (tests/vm/kernel.sh and
# kernel_set.py choose the packages). A cached kernel with its module is kept as it is, with
# no package lists asked; a missing module has the whole set chosen again, the kernel too.
# The build packages are unpacked, not installed: their files name /usr/src/linux-headers-*
# and /usr/lib/linux-kbuild-*, so the build runs in a mount namespace of its own where they
# lie over /usr, and the host's /usr stays as it was.
version=$(vm_kernel_version)
if [ -z "$version" ] || [ ! -f "$vm/v4l2loopback-$version/v4l2loopback.ko" ]; then
    build=$vm/loopback-build
    rm -rf "$build" && mkdir -p "$build/root"
    vm_kernel_fetch "$build/dl" build
    [ "$(cat "$vm/kernel/.done" 2>/dev/null)" = "$vm_kernel_image" ] || vm_kernel_unpack "$build/dl"
    version=$(vm_kernel_version)
    [ "$version" = "$vm_kernel_abi" ] ||
        { echo "vm-test: $vm_kernel_image holds modules for $version, not $vm_kernel_abi" >&2; exit 1; }
    log "building v4l2loopback for $version"
    started=$(date +%s)
    for deb in "$build"/dl/*.deb; do
        case "$(basename "$deb")" in linux-image-*) ;; *) dpkg -x "$deb" "$build/root" ;; esac
    done
    cp -r "$build"/root/usr/src/v4l2loopback-* "$build/module"
    # A user namespace too, so that this needs no root; overlayfs takes no ':' or ',' in
    # its directories' names.
    unshare --map-root-user --mount sh -euc \
        'mount -t overlay overlay -o "lowerdir=$1/usr:/usr" /usr
         make -s -C "/usr/src/linux-headers-$2" M="$3" modules' \
        sh "$build/root" "$version" "$build/module"
    loopback=$vm/v4l2loopback-$version/v4l2loopback.ko
    mkdir -p "$(dirname "$loopback")"
    cp "$build/module/v4l2loopback.ko" "$loopback.tmp" && mv "$loopback.tmp" "$loopback"
    rm -rf "$build"
    log "built v4l2loopback in $(( $(date +%s) - started )) s"
fi
vmlinuz=$vm/kernel/boot/vmlinuz-$version
loopback=$vm/v4l2loopback-$version/v4l2loopback.ko

# 3. The MJPEG clips: samples/scene.png panned and zoomed, 90 frames of 640x480 at 30 fps,
# each frame one JPEG file (frames/001.jpg ...). clip.avi holds them as they are;
# clip-truncated.avi the same but every sixth frame (006.jpg, 012.jpg, ...) cut to its
# first half (no end-of-image marker), as a starved USB bus cuts frames: a reader slowed
# by emulation, which sees only some frames, still meets cut ones.
# An AVI keeps each JPEG as one packet, which ffmpeg's stream copy writes to the device as
# one frame; ffprobe checks that each packet is one file, the cut one too.
clips=$vm/mjpeg
if [ ! -f "$clips/.done" ] || [ "$0" -nt "$clips/.done" ] || [ "$root/samples/scene.png" -nt "$clips/.done" ]; then
    log "making the MJPEG clips"
    rm -rf "$clips" && mkdir -p "$clips/frames" "$clips/cut"
    ffmpeg() { command ffmpeg -nostdin -hide_banner -loglevel error "$@"; }
    ffmpeg -loop 1 -framerate 30 -i "$root/samples/scene.png" -vf "zoompan=d=1:s=640x480:fps=30:\
z='1.25+0.15*sin(2*PI*on/90)':x='iw/2-iw/zoom/2+25*sin(2*PI*on/45)':\
y='ih/2-ih/zoom/2+20*cos(2*PI*on/90)',format=yuvj420p" \
        -frames:v 90 -c:v mjpeg -q:v 4 "$clips/frames/%03d.jpg"
    [ "$(md5sum "$clips"/frames/*.jpg | cut -d' ' -f1 | sort -u | wc -l)" = 90 ] ||
        { echo "vm-test: the clip's 90 frames are not all different" >&2; exit 1; }
    cp "$clips"/frames/*.jpg "$clips/cut/"
    for n in $(seq 6 6 90); do
        frame=$(printf '%03d.jpg' "$n")
        whole=$(stat -c %s "$clips/frames/$frame")
        head -c $(( whole / 2 )) "$clips/frames/$frame" > "$clips/cut/$frame"
    done
    ffmpeg -framerate 30 -i "$clips/frames/%03d.jpg" -c:v copy "$clips/clip.avi"
    ffmpeg -framerate 30 -i "$clips/cut/%03d.jpg" -c:v copy "$clips/clip-truncated.avi"
    for clip in clip:frames clip-truncated:cut; do
        packets=$(ffprobe -v error -select_streams v -show_entries packet=size -of csv=p=0 \
            "$clips/${clip%:*}.avi")
        [ "$packets" = "$(stat -c %s "$clips/${clip#*:}"/*.jpg)" ] ||
            { echo "vm-test: ${clip%:*}.avi's packets are not its 90 JPEG files" >&2; exit 1; }
    done
    rm -rf "$clips/cut"
    touch "$clips/.done"
fi

# 4. The initramfs: busybox, our init, the modules vivid and 9p need, in load order, and
# v4l2loopback (whose one dependency, videodev, vivid loads before it).
initrd=$vm/initramfs.cpio.gz
if [ ! -f "$initrd" ] || [ "$root/tests/vm/init" -nt "$initrd" ] || [ "$0" -nt "$initrd" ] ||
    [ "$loopback" -nt "$initrd" ]; then
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
    cp "$loopback" "$staging/modules/v4l2loopback.ko"
    echo v4l2loopback.ko >> "$staging/modules/order"
    (cd "$staging" && find . | cpio -o -H newc --quiet | gzip -1) > "$initrd.tmp"
    mv "$initrd.tmp" "$initrd"
fi

# 5. The test binary, copied into the share (the VM sees only the share and /, read-only).
log "building the test binary"
bin=$(cd "$root" && cargo test --locked --no-run --test vm_capture --message-format=json 2>/dev/null |
    python3 -c 'import json, sys
for line in sys.stdin:
    m = json.loads(line)
    if m.get("reason") == "compiler-artifact" and m["target"]["name"] == "vm_capture" and m.get("executable"):
        print(m["executable"])')
[ -x "$bin" ] || { echo "vm-test: building tests/vm_capture/ failed; run: cargo test --no-run --test vm_capture" >&2; exit 1; }
share=$vm/share
rm -rf "$share" && mkdir -p "$share/pocl-cache"
cp "$bin" "$share/vm_capture"
# The CLI the tests start: the VM's /tmp is its own, so a checkout under the host's /tmp
# would not be reachable at the path cargo compiled into the tests.
cp "$(dirname "$bin")/../edgesight" "$share/edgesight"
cp -r "$clips" "$share/mjpeg"
# The ENOSPC shim a test preloads into the daemon (the guest runs the host's libraries).
gcc -shared -fPIC -O2 -Wall -Wextra -o "$share/no_bandwidth.so" "$root/tests/vm/no_bandwidth.c" -ldl
printf '%q ' "$@" > "$share/args"
# A warm POCL kernel cache from the last run saves minutes of compiling under emulation.
[ -d "$vm/pocl-cache" ] && cp -r "$vm/pocl-cache/." "$share/pocl-cache/"

# 6. Boot. The init script runs the tests and powers off; results come back in the share.
log "booting $version with vivid and v4l2loopback (TCG, 2 vCPUs); test log follows"
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
