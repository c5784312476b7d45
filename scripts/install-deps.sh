#!/usr/bin/env bash
# Installs what edgesight needs on Debian 12, skipping whatever is already there.
#   install-deps.sh run    what building and running need: the OpenCL ICD loader and POCL
#                          (a CPU OpenCL driver), libclang and the kernel's videodev2.h
#                          (linux-libc-dev) for the V4L2 bindings bindgen generates, and
#                          libjpeg-turbo's TurboJPEG library (libturbojpeg0), loaded at run
#                          time to decode JPEG files and MJPEG cameras
#   install-deps.sh docs   the above, plus mdBook (cargo install), which builds docs/
#   install-deps.sh test   the above, plus mdBook, what `make test` uses: cross linkers and libcs,
#                          qemu-user for a smoke run of the aarch64 binary, the Rust targets,
#                          clippy and rustfmt, OpenCV + numpy for the conformance test, Pillow
#                          for the camera-health sequences (bench/health; pip, from Debian's
#                          python3-pip, also fetches their photographs; apt-get download
#                          fetches the real footage, opencv-doc's vtest.avi, and ffmpeg
#                          decodes it), and
#                          Prometheus (with promtool), wrk, openssl and curl for the daemon's
#                          tests, the mosquitto broker and its clients for its MQTT tests
#                          and, for tests/ha, Home Assistant Core from PyPI in a venv of
#                          its own (python3-venv; target/ha/venv, made again whenever
#                          tests/ha/requirements.txt changes: its pins would clash with the
#                          other pip packages), Chromium and its WebDriver (chromium, chromium-driver)
#                          with selenium from PyPI for the status page's browser test,
#                          kubernetes-validate from PyPI (the Kubernetes API schemas,
#                          bundled: the manifests' check runs offline) and busybox-static
#                          (the BusyBox release of the container image, which runs the
#                          pod's probe and reloader scripts) for tests/k8s,
#                          and for the V4L2 tests a QEMU VM (qemu-system-x86,
#                          busybox-static, kmod, cpio) booting Debian's kernel with the vivid
#                          camera, and beside it v4l2loopback as a real MJPEG device:
#                          gcc-12 and make build the module against the VM kernel's headers
#                          (downloaded by tests/vm/run.sh, never installed), ffmpeg makes
#                          the MJPEG clips and feeds the device, v4l-utils (v4l2-ctl)
#                          streams from it. The cross packages carry the boards' copies of
#                          videodev2.h.
#                          For the deployment tests: podman, runc and debootstrap (the
#                          cross-rs image), lintian (the .debs), mmdebstrap and e2fsprogs
#                          (the systemd VM's Debian root; mmdebstrap also unpacks the
#                          container images' roots), python3-yaml and podman-compose (the
#                          compose example's checks in tests/image/run.sh).
#                          For the tests on Mesa's Rusticl (tests/rusticl/run.sh): the
#                          libraries of Debian's mesa-opencl-icd (libclc-15's SPIR-V
#                          library, LLVM 15 and its SPIR-V translator, libdrm, ...), which
#                          itself is only unpacked under target/rusticl, never installed,
#                          so POCL stays the system's OpenCL.
set -euo pipefail

mode=${1:-run}
as_root() { if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi; }

apt_packages=(ocl-icd-libopencl1 pocl-opencl-icd clinfo libclang-dev linux-libc-dev libturbojpeg0)
if [ "$mode" = test ]; then
    apt_packages+=(gcc-aarch64-linux-gnu libc6-dev-arm64-cross
                   gcc-arm-linux-gnueabihf libc6-dev-armhf-cross qemu-user-static
                   prometheus wrk openssl curl python3 python3-pip python3-venv
                   chromium chromium-driver
                   mosquitto mosquitto-clients
                   qemu-system-x86 busybox-static kmod cpio xz-utils zstd
                   gcc-12 make ffmpeg v4l-utils
                   podman runc debootstrap lintian mmdebstrap e2fsprogs file python3-yaml
                   podman-compose
                   binutils-aarch64-linux-gnu binutils-arm-linux-gnueabihf
                   libclc-15 libclang-cpp15 libllvm15 libllvmspirvlib15 libdrm2
                   libdrm-amdgpu1 libdrm-nouveau2 libdrm-radeon1 libelf1 libexpat1
                   libsensors5 libzstd1 zlib1g)
fi

missing=()
for p in "${apt_packages[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
    echo "install-deps: installing ${missing[*]}"
    as_root apt-get -o DPkg::Lock::Timeout=300 update -qq
    as_root env DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=300 install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# mdBook builds docs/ (make docs). Not packaged by Debian 12: built from crates.io, without
# its `serve` and `watch` commands (about 2 minutes on 2 cores).
if [ "$mode" = test ] || [ "$mode" = docs ]; then
    if ! cargo install --list | grep -q '^mdbook v0\.5\.4:'; then
        echo "install-deps: installing mdbook 0.5.4 with cargo"
        cargo install mdbook --locked --version 0.5.4 --no-default-features --quiet
    fi
fi

[ "$mode" = test ] || exit 0

targets=(aarch64-unknown-linux-gnu armv7-unknown-linux-gnueabihf)
installed=$(rustup target list --installed)
for t in "${targets[@]}"; do
    grep -qx "$t" <<<"$installed" || rustup target add "$t"
done
for c in clippy rustfmt; do
    rustup component list --installed | grep -q "^$c" || rustup component add "$c"
done

if ! python3 -c 'import cv2, numpy, PIL, selenium, kubernetes_validate' 2>/dev/null; then
    echo "install-deps: installing opencv-python-headless, numpy, Pillow, selenium and" \
        "kubernetes-validate with pip"
    python3 -m pip install --quiet opencv-python-headless numpy Pillow selenium \
        kubernetes-validate 2>/dev/null ||
        python3 -m pip install --quiet --break-system-packages opencv-python-headless numpy \
            Pillow selenium kubernetes-validate
fi

ha_venv=target/ha/venv
ha_requirements=tests/ha/requirements.txt
cd "$(dirname "$0")/.."
if ! cmp -s "$ha_requirements" "$ha_venv/requirements.txt"; then
    echo "install-deps: installing Home Assistant Core in $ha_venv ($ha_requirements)"
    rm -rf "$ha_venv"
    python3 -m venv "$ha_venv"
    "$ha_venv/bin/pip" install --quiet --disable-pip-version-check -r "$ha_requirements"
    # Written last: a venv cut short by a failed install is made again next time.
    cp "$ha_requirements" "$ha_venv/requirements.txt"
fi
