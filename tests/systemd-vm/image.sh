#!/usr/bin/env bash
# Builds the systemd VM's boot files from Debian packages:
#   tests/systemd-vm/image.sh OUT-DIR KERNEL-DIR KERNEL-VERSION
# OUT-DIR/root.img: an ext4 image of Debian 12 minbase with systemd as PID 1, udev, kmod,
# POCL, curl, jq, v4l-utils and Debian's Prometheus, plus the kernel's modules (vivid among
# them) under /lib/modules, so udev and modprobe work as on a board.
# OUT-DIR/initramfs.cpio.gz: busybox and the modules that reach the root (virtio, ext4, 9p).
# The test itself comes through the 9p share at boot, so changing the checks needs no new
# image; run.sh rebuilds these only when this file, init or the kernel changes.
# EDGESIGHT_VM_MIRROR overrides the Debian mirror (http://deb.debian.org/debian).
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
outdir=$1 kdir=$2 version=$3
out=$outdir/root.img
initrd=$outdir/initramfs.cpio.gz
rootfs=$out.d

# The initramfs: busybox, init, and the modules in load order.
depmod -b "$kdir" "$version"
staging=$outdir/initramfs
rm -rf "$staging" && mkdir -p "$staging"/{bin,modules,proc,sys,dev,newroot}
cp "$(command -v busybox)" "$staging/bin/busybox"
if file "$staging/bin/busybox" 2>/dev/null | grep -q "dynamically linked"; then
    echo "image.sh: busybox must be static (busybox-static)" >&2
    exit 1
fi
cp "$here/init" "$staging/init" && chmod +x "$staging/init"
: > "$staging/modules/order"
for m in virtio_pci virtio_blk ext4 9pnet_virtio 9p; do
    modprobe -d "$kdir" -S "$version" --show-depends "$m" | while read -r kind path _; do
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
rm -rf "$staging"

# The root.
rm -rf "$rootfs" "$out.tmp"

packages=systemd,systemd-sysv,udev,kmod,dbus,pocl-opencl-icd,ocl-icd-libopencl1,curl
packages+=,prometheus,v4l-utils,procps,jq,libturbojpeg0
mmdebstrap --quiet --variant=minbase --include="$packages" \
    --aptopt='APT::Install-Recommends "false"' \
    --dpkgopt='path-exclude=/usr/share/{doc,man,locale,info}/*' \
    --dpkgopt='path-include=/usr/share/doc/*/copyright' \
    bookworm "$rootfs" "${EDGESIGHT_VM_MIRROR:-http://deb.debian.org/debian}"

# The kernel's modules, so udev and modprobe find vivid (and the rest) as on a real board.
mkdir -p "$rootfs/lib/modules"
cp -a "$kdir/lib/modules/$version" "$rootfs/lib/modules/"
depmod -b "$rootfs" "$version"

echo edgesight-vm > "$rootfs/etc/hostname"
# No network in the VM: localhost from /etc/hosts (Prometheus resolves its target's name
# there), no name servers from the build host.
printf '127.0.0.1\tlocalhost edgesight-vm\n::1\tlocalhost ip6-localhost ip6-loopback\n' > "$rootfs/etc/hosts"
: > "$rootfs/etc/resolv.conf"
# A fixed machine id: every boot starts from the same image (qemu -snapshot), and an
# empty id would make each one a "first boot".
echo 3a5e0c2d9b8f4e6aa1c2d3e4f5a6b7c8 > "$rootfs/etc/machine-id"
cat > "$rootfs/etc/fstab" <<'EOF'
/dev/vda  /       ext4  rw,noatime  0 0
share     /share  9p    trans=virtio,version=9p2000.L,msize=262144,nofail  0 0
EOF
mkdir -p "$rootfs/share"

# The test: after multi-user.target, /share/checks.sh runs as root and the VM powers off.
cat > "$rootfs/etc/systemd/system/edgesight-vmtest.service" <<'EOF'
[Unit]
Description=edgesight systemd VM test (/share/checks.sh)
After=multi-user.target share.mount
RequiresMountsFor=/share
SuccessAction=poweroff-force
FailureAction=poweroff-force

[Service]
Type=oneshot
ExecStart=/bin/bash /share/checks.sh
StandardOutput=journal+console
StandardError=journal+console
TimeoutStartSec=infinity

[Install]
WantedBy=multi-user.target
EOF

# Nothing at boot but what the test needs: no logins on the console, no timers, and
# Prometheus started by the test once its config is in place.
chroot "$rootfs" systemctl -q enable edgesight-vmtest.service
chroot "$rootfs" systemctl -q disable prometheus.service 2>/dev/null
chroot "$rootfs" systemctl -q mask serial-getty@ttyS0.service getty@tty1.service \
    apt-daily.timer apt-daily-upgrade.timer dpkg-db-backup.timer e2scrub_all.timer \
    fstrim.timer man-db.timer systemd-tmpfiles-clean.timer 2>/dev/null

size_mb=$(( $(du -sm "$rootfs" | cut -f1) * 5 / 4 + 512 ))
mkfs.ext4 -q -F -L edgesight-root -d "$rootfs" "$out.tmp" "${size_mb}M"
mv "$out.tmp" "$out"
mv "$initrd.tmp" "$initrd"
rm -rf "$rootfs"
