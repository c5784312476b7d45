# make demo: run the daemon on the test pattern on loopback (status page on) until Ctrl-C.
# make demo-process: run the pipeline once on the bundled sample and say where the results are.
# make test: every test: format, lints, unit and OpenCL tests, OpenCV conformance, the
#            status page in a real browser (test-browser), the same
#            OpenCL tests on a second implementation (test-rusticl), the board builds
#            (cross), the Debian packages, the amd64 container image run and scraped
#            (test-image), the V4L2 capture tests against the vivid virtual camera in a
#            QEMU VM, the package under real systemd in a QEMU VM, and the OpenCL tests
#            on emulated aarch64 and armv7 boards (test-arm, which needs root).
# make test-rusticl: the kernel tests (every tuning), the OpenCV conformance test (--board
#            subset), `edgesight selftest` and the motion tests on Mesa's Rusticl (Debian 12's
#            mesa-opencl-icd on its CPU device, llvmpipe: the open-source OpenCL of Mali
#            boards), unpacked under target/rusticl, never installed: POCL stays the default.
# make test-k8s: the Kubernetes manifests of deploy/k8s checked offline (tests/k8s).
# make test-fleet: bench/fleet.py on three boards, its tables checked (bench/test_fleet.py).
# make test-ha: Home Assistant Core's own MQTT integration against the daemon and mosquitto
#            (tests/ha/check.py): its devices, entities, states and event pictures, and a
#            log without a warning.
# make test-browser: the status page in Debian's Chromium, on a desktop window and a
#            390x844 phone, with screenshots of both in target/browser/.
# make test-arm: the kernel tests and the OpenCV conformance test on emulated aarch64 and
#            armv7 (qemu-user, Debian's POCL for those boards); part of make test (as root).
# make cross: release binaries for aarch64 and armv7 boards with cross-rs, offline.
# make package: .debs for amd64, arm64 and armhf in target/deb/.
# make image: container images for amd64, arm64 and armhf (podman, offline, from Debian
#            packages and the .debs): localhost/edgesight:VERSION-ARCH and the manifest
#            list localhost/edgesight:VERSION; deploy/compose.yaml runs one on a board.
# make test-image: the amd64 image (built unless cached) run on the test pattern: scraped,
#            its health check, user and read-only root checked (tests/image/run.sh).
# make mali-report: Mali's own compiler (Mesa's Panfrost, through its no-op DRM shim) on
#            every kernel of the mali tuning for a G52, a G610 and a G31: a table of
#            instructions, cycles, occupancy and spills; then selftest and the daemon on a
#            Mali driver that refuses profiling and runs nothing (never a panic).
# make bench: the pipeline's cost at 720p, 1080p and 4K beside a device copy of the same bytes
#             (BENCH_ARGS adds flags, e.g. BENCH_ARGS="--runs 50 --device portable").
# Both install what they need first (Debian packages, Rust targets, pip packages).
# make health-eval: the camera-health detectors scored on every labelled sequence (bench/health)
#             with the release binary: tables per sequence and per detector, and
#             target/health/eval/results.json.
# make health-subset: eval.py's own tests, then the eight small sequences with the debug binary,
#             failing on a missed or late tamper, a false alarm or real footage's static region
#             moving (HEALTH_CHECK= only scores).

SHELL := /bin/bash
CARGO ?= cargo
# POCL needs a writable kernel cache; keeping it under target/ keeps it warm between runs.
export POCL_CACHE_DIR ?= $(CURDIR)/target/pocl-cache
CROSS_TARGETS := aarch64-unknown-linux-gnu armv7-unknown-linux-gnueabihf
DEMO_OUT := target/demo
DEMO_LISTEN ?= 127.0.0.1:8947
HEALTH_CHECK ?= --check

.PHONY: demo demo-process docs test test-ha test-fleet test-arm test-rusticl mali-report test-browser bench health-eval health-subset deps-run deps-test build lint unit test-k8s conformance cross package image test-image vm-test vm-systemd clean

demo: deps-run build
	@mkdir -p $(POCL_CACHE_DIR)
	@echo
	@echo "edgesight on the test pattern (1280x720 at 30 fps), Ctrl-C to stop:"
	@echo "  status page  http://$(DEMO_LISTEN)/"
	@echo "  metrics      http://$(DEMO_LISTEN)/metrics"
	@echo "  latest frame http://$(DEMO_LISTEN)/api/v1/latest"
	@echo
	./target/release/edgesight run --config deploy/demo.toml --listen $(DEMO_LISTEN)

demo-process: deps-run build
	@mkdir -p $(POCL_CACHE_DIR)
	./target/release/edgesight process samples/scene.png --out $(DEMO_OUT) \
		--roi sky:0,0,640,140 --roi street:0,360,640,120
	@echo
	@echo "Results of the demo are in $(DEMO_OUT)/: report.json (histogram, Otsu threshold,"
	@echo "region features, per-stage device times), luma.png, edges.png, mask.png, histogram.png."

bench: deps-run build
	@mkdir -p $(POCL_CACHE_DIR) target/bench
	./target/release/edgesight bench --json target/bench/bench.json $(BENCH_ARGS)

# make test runs in two lanes, so that both cores stay busy. After the release build the
# main lane goes on with the unit tests, the servers, the browser, the image and the VM
# suites (which use about one core of two: their guests wait on frames and timers); the
# second lane, at the lowest priority, builds for the boards (with their kernel tests),
# packs the .debs and runs the OpenCL tests on Rusticl and on the emulated boards, which
# spend their time in compilers. The main lane gets the CPU it asks for first, the second
# the rest (docs/src/development.md#where-the-time-goes has the figures). The second
# lane's output follows the main lane's (and is kept in target/logs/test-beside.log).
TEST_MAIN := unit test-k8s test-fleet test-ha health-subset conformance test-browser \
	test-image vm-test vm-systemd
TEST_BESIDE := package test-rusticl test-arm

test: deps-test lint docs build
	@mkdir -p target/logs
	@echo "make test: $(TEST_BESIDE) run beside the rest at nice 19, their output follows it"
	@nice -n 19 $(MAKE) --no-print-directory --keep-going CROSS_ARGS=--kernel-tests \
		$(TEST_BESIDE) > target/logs/test-beside.log 2>&1 & \
	beside=$$!; \
	$(MAKE) --no-print-directory --keep-going $(TEST_MAIN); main=$$?; \
	wait $$beside; rc=$$?; \
	echo; echo "=== make $(TEST_BESIDE) (beside the rest):"; \
	cat target/logs/test-beside.log; \
	[ $$main -eq 0 ] || echo "make test: FAILED: in $(TEST_MAIN)"; \
	[ $$rc -eq 0 ] || echo "make test: FAILED: in $(TEST_BESIDE)"; \
	[ $$main -eq 0 ] && [ $$rc -eq 0 ]
	@echo "make test: all passed"

# All 28 sequences, four cameras to a daemon (about 6 minutes, 1.4 GB of frames).
health-eval: build
	bench/health/fetch_images.sh
	bench/health/fetch_footage.sh
	python3 bench/health/make_sequences.py
	python3 bench/health/eval.py --binary target/release/edgesight \
		--json target/health/eval/results.json

# The eight small sequences in one daemon (about 12 s of replay: the plaza's footage).
health-subset:
	python3 bench/health/test_eval.py
	bench/health/fetch_images.sh
	bench/health/fetch_footage.sh
	python3 bench/health/make_sequences.py --subset
	$(CARGO) build --locked
	python3 bench/health/eval.py --subset --parallel 8 --binary target/debug/edgesight \
		$(HEALTH_CHECK)

deps-run:
	@scripts/install-deps.sh run

deps-test:
	@scripts/install-deps.sh test

build:
	$(CARGO) build --release --locked

# The guide as a book (target/book/index.html), every link in it and in the repository's
# Markdown, and every citation of the benchmarks, by anchor, in code and pages; then the
# crates' API documentation (target/doc/), refused on a broken intra-doc link.
docs:
	@command -v mdbook >/dev/null || scripts/install-deps.sh docs
	python3 scripts/test_check_links.py
	mdbook build docs
	python3 scripts/check-links.py target/book *.md bench/notes/*.md docs/src/*.md \
	    --citations .
	RUSTDOCFLAGS="-D warnings -A rustdoc::private_intra_doc_links" \
	    $(CARGO) doc --locked --no-deps --workspace

lint:
	$(CARGO) fmt --all -- --check
	$(CARGO) clippy --locked --workspace --all-targets -- -D warnings

unit:
	@mkdir -p $(POCL_CACHE_DIR)
	python3 tests/vm/test_kernel_set.py
	python3 scripts/mali/test_report.py
	$(CARGO) test --locked --workspace

conformance: build
	python3 tests/conformance.py --bin target/release/edgesight

# deploy/k8s checked offline (a few seconds): every manifest against the Kubernetes schemas
# (kubernetes-validate), the PodMonitor and PrometheusRule by their required fields, the
# PrometheusRule against a fresh generation from deploy/alerts.yml, the DaemonSet's
# security settings, its reloader's SIGHUP, and its config, web config and health probe
# against the daemon.
test-k8s: deps-test build
	@mkdir -p $(POCL_CACHE_DIR)
	python3 tests/k8s/test_manifests.py --bin target/release/edgesight

# bench/fleet.py's own check (under a minute): three boards scraped by Prometheus and
# pushed through agents at a 2 s interval, its tables and figures checked against what the
# boards export, no process left behind.
test-fleet: deps-test build
	@mkdir -p $(POCL_CACHE_DIR)
	python3 bench/test_fleet.py --edgesight target/release/edgesight

# The status page in Debian's Chromium (selenium): no console errors, values kept current
# in place, a tamper's badge within seconds, a phone's width; screenshots of both layouts
# in target/browser/.
test-browser: deps-test build
	@mkdir -p $(POCL_CACHE_DIR)
	python3 tests/browser/status_page.py --bin target/release/edgesight --out target/browser

# Home Assistant Core (the release of tests/ha/requirements.txt, in target/ha/venv) run
# headless, its MQTT integration added through its config flow, against mosquitto and the
# debug binary (tests/ha/check.py says what is checked).
test-ha: deps-test
	$(CARGO) build --locked
	tests/ha/run.sh --bin target/debug/edgesight

# The OpenCL tests on Mesa's Rusticl (tests/rusticl/run.sh says what, and how it is kept
# apart from the system's OpenCL).
test-rusticl: deps-test build
	tests/rusticl/run.sh

# Release binaries for the boards, built by cross-rs in a Debian 11 image made from Debian
# packages (glibc 2.31), into target/cross/<triple>/release/. CROSS_ARGS=--tests adds the
# test executables.
cross:
	scripts/cross-build.sh $(CROSS_ARGS)
	@# The aarch64 binary starts under emulation and, with no OpenCL there, says so plainly.
	! OPENCL_DYLIB_PATH=/nonexistent/libOpenCL.so qemu-aarch64-static -L /usr/aarch64-linux-gnu \
		target/cross/aarch64-unknown-linux-gnu/release/edgesight devices 2> target/cross-devices.err
	grep -q "OpenCL library not found" target/cross-devices.err

# .debs for amd64, arm64 and armhf (the board binaries from `make cross`), checked by lintian.
package: build cross
	scripts/package-deb.sh --lintian

# The .debs unpacked with their Debian 12 dependencies and POCL into FROM-scratch images
# (scripts/build-image.sh says why so); an image whose recipe and .deb are unchanged is
# kept.
image: package
	scripts/build-image.sh

# Only the amd64 .deb, packed again from the release binary (the same bytes when nothing
# changed, so the cached image is kept).
test-image: deps-test build
	scripts/package-deb.sh amd64
	tests/image/run.sh

# Mali's own compiler on the kernels, with no board: Mesa's Panfrost compiler through its
# no-op DRM shim (scripts/mali/mesa.sh builds Mesa once into ~/.cache/edgesight/mesa: about
# 5 minutes on 2 cores), a table per GPU (MALI_GPUS) of instructions, cycles, occupancy and
# spills, and the model of a 1080p and a 4K frame's device time from them and the daemon's
# launches (scripts/mali/report.py; MALI_ARGS="--reuse" models again from the last run's
# output), then selftest and the daemon on the shim's G52, which refuses profiling and runs
# nothing (scripts/mali/on-shim.sh). Not in `make test`: some 25 minutes from nothing, most
# of it the compiler.
MALI_GPUS ?= g52,g610,g31
mali-report: build
	mesa=$$(scripts/mali/mesa.sh) && \
	scripts/mali/report.py --edgesight target/release/edgesight --mesa "$$mesa" \
		--gpu $(MALI_GPUS) --out target/mali-report $(MALI_ARGS) && \
	scripts/mali/on-shim.sh target/release/edgesight "$$mesa" target/mali-report/on-shim

# The kernel tests and the OpenCV conformance test under qemu-user on aarch64 and armv7.
test-arm: deps-test
	tests/arm/run.sh

# Boots Debian's kernel in QEMU (TCG) with vivid and v4l2loopback (built from Debian's
# source, fed MJPEG clips by ffmpeg) and runs tests/vm_capture/ there; the kernel, the
# module, the clips and the initramfs are cached under target/vm/.
vm-test:
	tests/vm/run.sh

# The amd64 .deb under real systemd (PID 1) in a QEMU VM with vivid and Prometheus.
vm-systemd: build
	tests/systemd-vm/run.sh

clean:
	$(CARGO) clean
