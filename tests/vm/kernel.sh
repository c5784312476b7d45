# Sourced by tests/vm/run.sh and tests/systemd-vm/run.sh: Debian's amd64 kernel for the VM
# tests, and what building v4l2loopback against it takes, chosen by kernel_set.py from the
# package lists as they are today and downloaded, never installed. The caller sets `vm`
# (target/vm, where the kernel is unpacked) and defines log().
#   EDGESIGHT_VM_KERNEL=PACKAGE   that linux-image-<abi>-amd64 instead of linux-image-amd64's

vm_kernel_lib=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
vm_apt_updated=

# Package lists older than the archive name versions it no longer serves (a download 404s) or
# lack the kernel altogether (a machine that never ran apt-get update): they are updated once.
vm_apt_update() {
    [ -z "$vm_apt_updated" ] || return 1
    vm_apt_updated=1
    log "updating the package lists (apt-get update)"
    if [ "$(id -u)" -eq 0 ]; then apt-get update -qq; else sudo apt-get update -qq; fi
}

# Sets vm_kernel_abi, vm_kernel_image (PACKAGE=VERSION) and vm_kernel_build (PACKAGE=VERSION
# each: the ABI's headers, the parts they depend on, v4l2loopback-dkms).
vm_kernel_choose() {
    local out args=()
    [ -z "${EDGESIGHT_VM_KERNEL:-}" ] || args=(--image "$EDGESIGHT_VM_KERNEL")
    # The first answer's complaint is kept back when updated lists may answer better.
    if ! out=$(python3 "$vm_kernel_lib/kernel_set.py" "${args[@]}" 2>/dev/null); then
        vm_apt_update || true
        out=$(python3 "$vm_kernel_lib/kernel_set.py" "${args[@]}") || return 1
    fi
    vm_kernel_abi=$(awk '$1 == "abi" { print $2 }' <<<"$out")
    vm_kernel_image=$(awk '$1 == "image" { print $2 }' <<<"$out")
    mapfile -t vm_kernel_build < <(awk '$1 == "build" { print $2 }' <<<"$out")
}

# apt-get download as root warns that _apt cannot write the directory, then downloads.
vm_apt_download() { apt-get download "$@" >/dev/null 2>&1 || apt-get download "$@"; }

# vm_kernel_fetch DIR [build]: chooses the set and downloads the image (with `build`, the build
# parts too) into DIR, emptied first.
vm_kernel_fetch() {
    local dir=$1 what=${2:-} pkgs
    while :; do
        vm_kernel_choose || return 1
        pkgs=("$vm_kernel_image")
        [ "$what" != build ] || pkgs+=("${vm_kernel_build[@]}")
        log "downloading ${pkgs[*]}"
        rm -rf "$dir" && mkdir -p "$dir"
        (cd "$dir" && vm_apt_download "${pkgs[@]}") && return 0
        vm_apt_update || break
    done
    echo "vm: downloading ${pkgs[*]} failed" >&2
    return 1
}

# vm_kernel_unpack DIR: the image vm_kernel_fetch left in DIR, unpacked into $vm/kernel;
# .done names the package and version.
vm_kernel_unpack() {
    local deb
    deb=$(ls "$1/${vm_kernel_image%%=*}_"*.deb)
    rm -rf "$vm/kernel" && mkdir -p "$vm/kernel"
    dpkg -x "$deb" "$vm/kernel"
    echo "$vm_kernel_image" > "$vm/kernel/.done"
}

# The unpacked kernel's version (its modules' directory name), empty when there is none.
vm_kernel_version() {
    if [ -f "$vm/kernel/.done" ]; then ls "$vm/kernel/lib/modules" | head -1; fi
}
