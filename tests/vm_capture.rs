//! V4L2 capture against real drivers: the kernel's `vivid` virtual camera, and
//! v4l2loopback sending MJPEG clips that ffmpeg writes to it ([`Feeder`]), inside the VM
//! that `tests/vm/run.sh` boots (`make vm-test`). Every test here is ignored in a plain
//! `cargo test`: it needs vivid loaded as the VM's init loads it (three instances:
//! vmalloc buffers, dma-contig buffers that refuse USERPTR, multi-planar), v4l2loopback
//! at /dev/video10 and the clips run.sh makes.
//!
//! Over 500 lines as one room: run.sh builds this one test executable and copies it into
//! the VM, where every test shares one boot, one OpenCL device, pipelines built once
//! ([`pipeline`]: minutes under emulation with a cold cache) and the loopback's one
//! writer ([`feeder`], which cannot be started twice). The vivid tests come first, the
//! loopback's MJPEG tests from [`is_cut`] on.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

use edgesight::bench::process_cpu_time;
use edgesight::capture::v4l2::{list, Device, Request, V4l2Source};
use edgesight::capture::{DropReason, FrameSource, IoMode, Next};
use edgesight::cl::Gpu;
use edgesight::frame::{CaptureFormat, Cfa, FrameLayout, PixelFormat, Samples, Size};
use edgesight::jpeg::{LumaDecoder, Scale};
use edgesight::pipeline::{Pipeline, PipelineOptions};
use edgesight::reference;

/// The capture node of vivid instance `n` (found by its bus, not its number).
fn vivid(n: u32) -> PathBuf {
    let bus = format!("platform:vivid-{n:03}");
    for _ in 0..100 {
        for node in list::nodes() {
            if let Ok(info) = list::describe(&node) {
                if info.bus == bus {
                    return node;
                }
            }
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    panic!("no vivid instance {n} ({bus}) among {:?}", list::nodes());
}

fn size(width: u32, height: u32) -> Size {
    Size { width, height }
}

/// Sets a vivid control by its v4l2-ctl name through a separate file descriptor.
fn set_control(node: &Path, key: &str, value: i32) {
    let dev = Device::open(node).unwrap();
    let control = dev
        .find_control(key)
        .unwrap_or_else(|| panic!("{}: no control {key}", node.display()));
    dev.set_control(control.id, value)
        .unwrap_or_else(|e| panic!("{}: setting {key}={value}: {e}", node.display()));
}

/// Mappings and open files of this process, and how many mappings are of a V4L2 device.
fn resources() -> (usize, usize, usize) {
    let maps = std::fs::read_to_string("/proc/self/maps").unwrap();
    let devices = maps.lines().filter(|l| l.contains("/dev/video")).count();
    let fds = std::fs::read_dir("/proc/self/fd").unwrap().count();
    (maps.lines().count(), fds, devices)
}

/// Runs `cycle` (which opens a source, streams and drops it) once to reach a steady state
/// (allocator arenas, OpenCL's first use of a size), then `CYCLES` times more. No file
/// descriptor may be left behind and no V4L2 buffer may stay mapped. The process's other
/// mappings move by one or two now and then as malloc and POCL split or merge anonymous
/// regions, so they are held to what a leak cannot stay under: a mapping left behind by
/// every cycle grows the count by at least `CYCLES`.
fn assert_no_leak(what: &str, mut cycle: impl FnMut()) {
    const CYCLES: usize = 4;
    cycle();
    let before = resources();
    for _ in 0..CYCLES {
        cycle();
    }
    let after = resources();
    assert_eq!(after.1, before.1, "{what}: file descriptors grew");
    assert_eq!(after.2, 0, "{what}: V4L2 buffers still mapped");
    assert!(
        after.0 < before.0 + CYCLES,
        "{what}: mappings grew from {} to {} over {CYCLES} cycles",
        before.0,
        after.0
    );
}

/// One OpenCL device for every test, so the pipelines below can be shared.
fn shared_gpu() -> &'static Gpu {
    static GPU: OnceLock<Gpu> = OnceLock::new();
    GPU.get_or_init(common::gpu)
}

/// Pipelines by layout on [`shared_gpu`], built once: building is slow under emulation.
fn pipeline(gpu: &Gpu, layout: FrameLayout) -> &'static Mutex<Pipeline> {
    static PIPELINES: Mutex<Vec<(FrameLayout, &'static Mutex<Pipeline>)>> = Mutex::new(Vec::new());
    let mut all = PIPELINES.lock().unwrap_or_else(|e| e.into_inner());
    if let Some((_, p)) = all.iter().find(|(l, _)| *l == layout) {
        return p;
    }
    let mut p = Pipeline::new(gpu, layout, PipelineOptions::default(), &[]).unwrap();
    // POCL compiles kernels at their first launch, minutes under emulation when its cache
    // is cold: do that here, not while a test is timing its frames.
    let slot = p.new_slot(gpu).unwrap();
    p.process(gpu, &slot).unwrap();
    let p: &'static Mutex<Pipeline> = Box::leak(Box::new(Mutex::new(p)));
    all.push((layout, p));
    p
}

/// Opens a source, takes `frames` frames without the pipeline, and drops it.
fn stream_briefly(gpu: &Gpu, node: &Path, request: Request, frames: u64) {
    let mut source = open(gpu, node, request);
    let give_up = Instant::now() + Duration::from_secs(60);
    while source.stats().frames < frames {
        assert!(Instant::now() < give_up, "{}: no frames", source.describe());
        source.next_frame(gpu, Duration::from_millis(200)).unwrap();
    }
}

fn open(gpu: &Gpu, node: &Path, request: Request) -> V4l2Source {
    V4l2Source::open(gpu, node, request)
        .unwrap_or_else(|e| panic!("opening {}: {e}", node.display()))
}

/// Takes frames until `count` good ones arrived (or `limit` passed), running the pipeline
/// on each and checking its histogram against the reference computed on the very bytes
/// the frame slot holds. Returns the last frame's sequence number.
fn check_frames(gpu: &Gpu, source: &mut V4l2Source, count: usize, limit: Duration) -> u64 {
    let layout = source.layout();
    let name = source.describe();
    // A test that failed while holding a pipeline does not fail the others.
    let mut pipeline = pipeline(gpu, layout)
        .lock()
        .unwrap_or_else(|e| e.into_inner());
    let give_up = Instant::now() + limit;
    let mut got = 0;
    let mut last = 0;
    while got < count {
        assert!(
            Instant::now() < give_up,
            "{}: {got} of {count} frames in {limit:?}, {:?}",
            source.describe(),
            source.stats()
        );
        let Next::Frame(frame) = source.next_frame(gpu, Duration::from_millis(200)).unwrap() else {
            continue;
        };
        assert_eq!(frame.layout, layout);
        let bytes = frame.slot.read(gpu).unwrap();
        assert!(bytes.len() >= layout.frame_bytes());
        let result = pipeline.process(gpu, frame.slot).unwrap();
        let luma = reference::luma(&layout, &bytes);
        let histogram = reference::histogram(&luma);
        assert_eq!(
            result.histogram, histogram,
            "{name} frame {}",
            frame.sequence
        );
        assert_eq!(result.otsu_threshold, reference::otsu_threshold(&histogram));
        // vivid's colour bars: a real picture, not an untouched buffer.
        let levels = histogram.iter().filter(|&&n| n > 0).count();
        assert!(levels >= 6, "{name}: only {levels} grey levels");
        last = frame.sequence;
        got += 1;
    }
    last
}

/// Over `count` frames of capture alone: the rate the frames were captured at (from the
/// driver's timestamps) and the process CPU time per frame.
fn measure(gpu: &Gpu, source: &mut V4l2Source, count: u64) -> (f64, f64) {
    let cpu = process_cpu_time();
    let mut first = None;
    let mut last = Instant::now();
    let mut got = 0;
    while got < count {
        if let Next::Frame(frame) = source.next_frame(gpu, Duration::from_millis(200)).unwrap() {
            first.get_or_insert(frame.captured);
            last = frame.captured;
            got += 1;
        }
    }
    let cpu = (process_cpu_time() - cpu).as_secs_f64();
    let span = first.map_or(0.0, |f| last.duration_since(f).as_secs_f64());
    ((count - 1) as f64 / span, cpu * 1000.0 / count as f64)
}

/// What [`capture_formats`] checks of each format.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Checks {
    /// Six frames against the reference, then the capture's rate and CPU time over 30
    /// more, then five more opens that must leave nothing behind.
    Full,
    /// Three frames against the reference: the driver's layout of the format read right.
    /// For formats whose buffers differ from [`FORMATS`]' only in their size and in how
    /// their bytes are read, so that the frames are what a format can get wrong.
    Frames,
}

fn capture_formats(
    gpu: &Gpu,
    node: &Path,
    io: IoMode,
    formats: &[PixelFormat],
    frame: Size,
    checks: Checks,
) {
    let checked_frames = match checks {
        Checks::Full => 6,
        Checks::Frames => 3,
    };
    for &format in formats {
        let request = Request {
            format: Some(format.into()),
            size: Some(frame),
            fps: Some(30.0),
            io: Some(io),
            ..Request::default()
        };
        let started = Instant::now();
        let mut source = open(gpu, node, request);
        assert!(source.is_up());
        assert_eq!(source.io_mode(), io);
        let layout = source.layout();
        assert_eq!(
            (layout.format, layout.width, layout.height),
            (format, frame.width, frame.height)
        );
        assert!(u64::from(layout.stride) >= format.row_bytes(frame.width));
        let last = check_frames(gpu, &mut source, checked_frames, Duration::from_secs(120));
        let stats = source.stats();
        // Every sequence number up to the last frame is a frame or a counted drop.
        assert_eq!(stats.frames + stats.dropped_total(), last + 1, "{stats:?}");
        assert_eq!(stats.frames, checked_frames as u64);
        let checked = started.elapsed();
        let n = source.negotiated().unwrap();
        let mut result = format!(
            "RESULT {} io={io} format={format} size={}x{} stride={} buffers={} fps_set={}",
            n.buf_type.name(),
            layout.width,
            layout.height,
            layout.stride,
            n.buffers,
            n.fps.map_or("none".into(), |f| format!("{f:.2}")),
        );
        if checks == Checks::Full {
            let (fps, cpu_ms) = measure(gpu, &mut source, 30);
            result += &format!(" fps_measured={fps:.2} capture_cpu_ms_per_frame={cpu_ms:.3}");
            drop(source);
            assert_no_leak(&format!("{format} {io}"), || {
                stream_briefly(gpu, node, request, 2)
            });
        }
        println!(
            "{result} ({checked_frames} checked frames in {checked:.1?}, all in {:.1?})",
            started.elapsed()
        );
    }
}

/// Formats checked in full ([`Checks::Full`]) in each I/O mode.
const FORMATS: [PixelFormat; 6] = [
    PixelFormat::Grey,
    PixelFormat::Yuyv,
    PixelFormat::Uyvy,
    PixelFormat::Nv12,
    PixelFormat::Rgb24,
    PixelFormat::Bgr24,
];

/// The other formats vivid offers that edgesight reads, checked frame by frame
/// ([`Checks::Frames`]). With [`FORMATS`], every format edgesight reads but the
/// MIPI-packed ones (Y10P, Y12P, the Bayer 10p and 12p), which vivid lacks (Debian 12's
/// kernel, 6.1).
const MORE_FORMATS: [PixelFormat; 26] = [
    PixelFormat::Nv21,
    PixelFormat::Nv16,
    PixelFormat::Nv61,
    PixelFormat::Yu12,
    PixelFormat::Yv12,
    PixelFormat::Rgbx,
    PixelFormat::Bgrx,
    PixelFormat::Mono(Samples::Le10),
    PixelFormat::Mono(Samples::Le12),
    PixelFormat::Mono(Samples::Le16),
    PixelFormat::Bayer(Cfa::Rggb, Samples::Eight),
    PixelFormat::Bayer(Cfa::Grbg, Samples::Eight),
    PixelFormat::Bayer(Cfa::Gbrg, Samples::Eight),
    PixelFormat::Bayer(Cfa::Bggr, Samples::Eight),
    PixelFormat::Bayer(Cfa::Rggb, Samples::Le10),
    PixelFormat::Bayer(Cfa::Grbg, Samples::Le10),
    PixelFormat::Bayer(Cfa::Gbrg, Samples::Le10),
    PixelFormat::Bayer(Cfa::Bggr, Samples::Le10),
    PixelFormat::Bayer(Cfa::Rggb, Samples::Le12),
    PixelFormat::Bayer(Cfa::Grbg, Samples::Le12),
    PixelFormat::Bayer(Cfa::Gbrg, Samples::Le12),
    PixelFormat::Bayer(Cfa::Bggr, Samples::Le12),
    PixelFormat::Bayer(Cfa::Rggb, Samples::Le16),
    PixelFormat::Bayer(Cfa::Grbg, Samples::Le16),
    PixelFormat::Bayer(Cfa::Gbrg, Samples::Le16),
    PixelFormat::Bayer(Cfa::Bggr, Samples::Le16),
];

#[test]
#[ignore = "needs the vivid camera: run through tests/vm/run.sh (make vm-test)"]
fn vivid_offers_the_formats_tested_here() {
    let mut expected: Vec<String> = FORMATS
        .iter()
        .chain(&MORE_FORMATS)
        .map(|f| f.to_string())
        .collect();
    expected.sort();
    for n in [0, 2] {
        let info = list::describe(&vivid(n)).unwrap();
        let mut offered: Vec<String> = info
            .formats
            .iter()
            .filter_map(|f| f.format.map(|f| f.to_string()))
            .collect();
        offered.sort();
        assert_eq!(offered, expected, "vivid instance {n}");
    }
}

#[test]
#[ignore = "needs the vivid camera: run through tests/vm/run.sh (make vm-test)"]
fn userptr_frames_match_the_reference_in_every_format() {
    let gpu = shared_gpu();
    capture_formats(
        gpu,
        &vivid(0),
        IoMode::Userptr,
        &FORMATS,
        size(320, 180),
        Checks::Full,
    );
    capture_formats(
        gpu,
        &vivid(0),
        IoMode::Userptr,
        &MORE_FORMATS,
        size(320, 180),
        Checks::Frames,
    );
    capture_formats(
        gpu,
        &vivid(0),
        IoMode::Userptr,
        &[PixelFormat::Yuyv],
        size(640, 480),
        Checks::Full,
    );
}

#[test]
#[ignore = "needs the vivid camera: run through tests/vm/run.sh (make vm-test)"]
fn mmap_frames_match_the_reference_in_every_format() {
    let gpu = shared_gpu();
    capture_formats(
        gpu,
        &vivid(0),
        IoMode::Mmap,
        &FORMATS,
        size(320, 180),
        Checks::Full,
    );
    capture_formats(
        gpu,
        &vivid(0),
        IoMode::Mmap,
        &MORE_FORMATS,
        size(320, 180),
        Checks::Frames,
    );
    capture_formats(
        gpu,
        &vivid(0),
        IoMode::Mmap,
        &[PixelFormat::Yuyv],
        size(640, 480),
        Checks::Full,
    );
}

#[test]
#[ignore = "needs the vivid camera: run through tests/vm/run.sh (make vm-test)"]
fn multiplanar_frames_match_the_reference() {
    let gpu = shared_gpu();
    let formats = [PixelFormat::Grey, PixelFormat::Nv12, PixelFormat::Rgb24];
    for io in [IoMode::Userptr, IoMode::Mmap] {
        capture_formats(gpu, &vivid(2), io, &formats, size(320, 180), Checks::Full);
    }
    // vivid offers the other formats through the multi-planar API too, in one plane.
    capture_formats(
        gpu,
        &vivid(2),
        IoMode::Mmap,
        &MORE_FORMATS,
        size(320, 180),
        Checks::Frames,
    );
}

#[test]
#[ignore = "needs the vivid camera: run through tests/vm/run.sh (make vm-test)"]
fn refused_userptr_falls_back_to_mmap() {
    let gpu = shared_gpu();
    // vivid instance 1 uses dma-contig buffers: REQBUFS(USERPTR) fails with EINVAL. POCL
    // has no dma-buf import either, so the first mode that works is mmap.
    let node = vivid(1);
    let request = Request {
        format: Some(PixelFormat::Yuyv.into()),
        size: Some(size(320, 180)),
        fps: Some(30.0),
        io: None,
        ..Request::default()
    };
    let mut source = open(gpu, &node, request);
    assert_eq!(source.io_mode(), IoMode::Mmap);
    check_frames(gpu, &mut source, 4, Duration::from_secs(120));
    drop(source);
    // Pinned to userptr, the refusal is an error naming the device and the call.
    let pinned = Request {
        io: Some(IoMode::Userptr),
        ..request
    };
    let err = V4l2Source::open(gpu, &node, pinned)
        .err()
        .expect("refused")
        .to_string();
    assert!(err.contains(&node.display().to_string()), "{err}");
    assert!(
        err.contains("userptr: VIDIOC_REQBUFS(USERPTR): Invalid argument"),
        "{err}"
    );
}

#[test]
#[ignore = "needs the vivid camera: run through tests/vm/run.sh (make vm-test)"]
fn dropped_and_damaged_buffers_are_counted() {
    let gpu = shared_gpu();
    let node = vivid(0);
    let request = Request {
        format: Some(PixelFormat::Grey.into()),
        size: Some(size(320, 180)),
        fps: Some(30.0),
        io: Some(IoMode::Userptr),
        ..Request::default()
    };
    let mut source = open(gpu, &node, request);
    check_frames(gpu, &mut source, 3, Duration::from_secs(120));
    assert_eq!(source.stats().dropped(DropReason::BufferError), 0);

    // vivid drops this share of its frames before they reach a buffer: sequence gaps.
    set_control(&node, "percentage_of_dropped_buffers", 50);
    let last = check_frames(gpu, &mut source, 20, Duration::from_secs(120));
    set_control(&node, "percentage_of_dropped_buffers", 0);
    let stats = source.stats();
    println!("after 50% dropped: {stats:?}");
    assert!(stats.dropped(DropReason::SequenceGap) >= 3, "{stats:?}");
    assert_eq!(stats.frames + stats.dropped_total(), last + 1, "{stats:?}");

    // One buffer flagged V4L2_BUF_FLAG_ERROR: counted, never processed.
    set_control(&node, "inject_v4l2_buf_flag_error", 1);
    let last = check_frames(gpu, &mut source, 5, Duration::from_secs(120));
    let stats = source.stats();
    assert_eq!(stats.dropped(DropReason::BufferError), 1, "{stats:?}");
    assert_eq!(stats.dropped(DropReason::ShortFrame), 0, "{stats:?}");
    assert_eq!(stats.frames, 28);
    assert_eq!(stats.frames + stats.dropped_total(), last + 1, "{stats:?}");
    assert_eq!(stats.reconnects, 0);
}

#[test]
#[ignore = "needs the vivid camera: run through tests/vm/run.sh (make vm-test)"]
fn a_disconnected_camera_is_reopened_when_it_comes_back() {
    let gpu = shared_gpu();
    let node = vivid(0);
    let request = Request {
        format: Some(PixelFormat::Yuyv.into()),
        size: Some(size(320, 180)),
        fps: Some(30.0),
        io: Some(IoMode::Userptr),
        ..Request::default()
    };
    // A call waits 200 ms for a frame. One that waited for the camera instead would wait
    // for as long as the file below holds it away: for ever, so the 5 s bound on each call
    // is a failure timeout, not a measure of how soon a call comes back.
    let wait = Duration::from_millis(200);
    let blocked = Duration::from_secs(5);
    let disconnect_and_return = |source: &mut V4l2Source| {
        // vivid's disconnect unregisters the device for every open file; it registers it
        // again once the last file using it is closed. Holding our own file open keeps
        // the camera gone for as long as we like.
        let control = Device::open(&node).unwrap();
        let id = control
            .find_control("disconnect")
            .expect("disconnect control")
            .id;
        control.set_control(id, 1).unwrap();
        let give_up = Instant::now() + Duration::from_secs(20);
        while source.is_up() {
            assert!(Instant::now() < give_up, "still up after the disconnect");
            let t = Instant::now();
            let _ = source.next_frame(gpu, wait).unwrap();
            assert!(
                t.elapsed() < blocked,
                "next_frame blocked {:?}",
                t.elapsed()
            );
        }
        // Down: every call comes back idle, and 15 retries (3 s of waits) keep failing.
        for _ in 0..15 {
            let t = Instant::now();
            assert!(matches!(source.next_frame(gpu, wait).unwrap(), Next::Idle));
            assert!(
                t.elapsed() < blocked,
                "next_frame blocked {:?}",
                t.elapsed()
            );
            assert!(!source.is_up());
        }
        drop(control);
    };

    let mut source = open(gpu, &node, request);
    check_frames(gpu, &mut source, 3, Duration::from_secs(120));
    disconnect_and_return(&mut source);
    let last = check_frames(gpu, &mut source, 5, Duration::from_secs(120));
    assert!(source.is_up());
    let stats = source.stats();
    assert_eq!(stats.reconnects, 1, "{stats:?}");
    assert_eq!(stats.frames, 8);
    // Sequence numbers go on across the reconnect.
    assert!(last >= 7, "{last}");
    assert_eq!(source.io_mode(), IoMode::Userptr);
    drop(source);

    assert_no_leak("disconnect", || {
        let mut source = open(gpu, &node, request);
        check_frames(gpu, &mut source, 1, Duration::from_secs(120));
        disconnect_and_return(&mut source);
        check_frames(gpu, &mut source, 1, Duration::from_secs(120));
        assert_eq!(source.stats().reconnects, 1);
    });
}

/// A camera whose VIDIOC_STREAMON answers ENOSPC (a USB controller out of bandwidth; here
/// vivid behind `tests/vm/no_bandwidth.c`, preloaded into the daemon) is shown as such in
/// `/api/v1/cameras` and the log, with what to do, and streams once the bus lets it: it
/// was retried all along, as an absent camera is.
#[test]
#[ignore = "needs the vivid camera: run through tests/vm/run.sh (make vm-test)"]
fn a_camera_without_usb_bandwidth_is_named_and_retried() {
    let shim = std::env::var_os("EDGESIGHT_NO_BANDWIDTH_SHIM")
        .expect("EDGESIGHT_NO_BANDWIDTH_SHIM: run through tests/vm/run.sh (make vm-test)");
    let node = vivid(0);
    let dir = Path::new("/tmp/run-no-bandwidth");
    let _ = std::fs::remove_dir_all(dir);
    std::fs::create_dir_all(dir).unwrap();
    let flag = dir.join("no-bandwidth");
    std::fs::write(&flag, "").unwrap();
    let port = 18948;
    let config = dir.join("edgesight.toml");
    std::fs::write(
        &config,
        format!(
            "[web]\nlisten_address = \"127.0.0.1:{port}\"\n[[camera]]\nname = \"shed\"\n\
             [camera.source]\nkind = \"v4l2\"\ndevice = \"{}\"\nformat = \"yuyv\"\n\
             size = \"320x180\"\nfps = 30\n",
            node.display()
        ),
    )
    .unwrap();
    let log = dir.join("log");
    let mut daemon = Running(
        Command::new(edgesight_bin())
            .args(["run", "--config"])
            .arg(&config)
            .env("LD_PRELOAD", &shim)
            .env("EDGESIGHT_TEST_NO_BANDWIDTH", &flag)
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .unwrap(),
    );
    let state_of = |body: &str| {
        body.lines()
            .find_map(|l| l.trim().strip_prefix("\"state\": \""))
            .and_then(|rest| rest.split('"').next())
            .map(str::to_string)
    };
    let wait_for = |daemon: &mut Running, state: &str, within: Duration| -> String {
        let deadline = Instant::now() + within;
        loop {
            if let Some((200, body)) = http_get(port, "/api/v1/cameras") {
                if state_of(&body).as_deref() == Some(state) {
                    return body;
                }
            }
            if Instant::now() > deadline || daemon.0.try_wait().unwrap().is_some() {
                let _ = daemon.0.kill();
                panic!(
                    "camera never {state}; log:\n{}",
                    std::fs::read_to_string(&log).unwrap_or_default()
                );
            }
            std::thread::sleep(Duration::from_millis(200));
        }
    };
    let starved = wait_for(&mut daemon, "no_usb_bandwidth", Duration::from_secs(120));
    let advice = edgesight::capture::v4l2::NO_BANDWIDTH;
    let error = format!("VIDIOC_STREAMON: No space left on device (os error 28): {advice}");
    assert!(
        starved.contains(&format!("\"error\": \"{error}\"")),
        "{starved}"
    );
    // Retried with the device's backoff, and logged once, not once a retry.
    std::thread::sleep(Duration::from_secs(12));
    let text = std::fs::read_to_string(&log).unwrap();
    let logged = text.lines().filter(|l| l.contains(advice)).count();
    assert_eq!(logged, 1, "{text}");
    assert_eq!(
        state_of(&http_get(port, "/api/v1/cameras").unwrap().1).as_deref(),
        Some("no_usb_bandwidth")
    );
    std::fs::remove_file(&flag).unwrap();
    wait_for(&mut daemon, "up", Duration::from_secs(600));
    let deadline = Instant::now() + Duration::from_secs(120);
    while metric(
        &http_get(port, "/metrics").map(|r| r.1).unwrap_or_default(),
        r#"edgesight_frames_total{camera="shed"}"#,
    ) < Some(3.0)
    {
        assert!(
            Instant::now() < deadline,
            "no frames after the bus let the camera stream"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

#[test]
#[ignore = "needs the vivid camera: run through tests/vm/run.sh (make vm-test)"]
fn injected_driver_errors_neither_panic_nor_leak() {
    let gpu = shared_gpu();
    let node = vivid(0);
    let request = Request {
        format: Some(PixelFormat::Nv12.into()),
        size: Some(size(320, 180)),
        fps: Some(30.0),
        io: None,
        ..Request::default()
    };

    // REQBUFS fails once: userptr looks refused, mmap is next and works.
    assert_no_leak("reqbufs error", || {
        set_control(&node, "inject_vidioc_reqbufs_error", 1);
        let mut source = open(gpu, &node, request);
        assert_eq!(source.io_mode(), IoMode::Mmap);
        check_frames(gpu, &mut source, 2, Duration::from_secs(120));
    });

    // QBUF and STREAMON fail once while starting: the source starts down, retries and
    // streams (userptr); it was never up before, so no reconnect is counted.
    for key in ["inject_vidioc_qbuf_error", "inject_vidioc_streamon_error"] {
        assert_no_leak(key, || {
            set_control(&node, key, 1);
            let mut source = open(gpu, &node, request);
            assert!(!source.is_up(), "{key}: up despite the error");
            check_frames(gpu, &mut source, 2, Duration::from_secs(120));
            assert_eq!(source.io_mode(), IoMode::Userptr, "{key}");
            assert_eq!(source.stats().reconnects, 0, "{key}");
        });
    }

    // A fatal streaming error while running: torn down, reopened, streaming again.
    for io in [IoMode::Userptr, IoMode::Mmap] {
        assert_no_leak(&format!("fatal error, {io}"), || {
            let mut source = open(
                gpu,
                &node,
                Request {
                    io: Some(io),
                    ..request
                },
            );
            check_frames(gpu, &mut source, 2, Duration::from_secs(120));
            set_control(&node, "inject_fatal_streaming_error", 1);
            check_frames(gpu, &mut source, 2, Duration::from_secs(120));
            let stats = source.stats();
            assert_eq!(stats.reconnects, 1, "{io}: {stats:?}");
            assert_eq!(stats.frames, 4);
        });
    }
}

#[test]
#[ignore = "needs the vivid camera: run through tests/vm/run.sh (make vm-test)"]
fn capture_command_writes_the_reports() {
    shared_gpu();
    let node = vivid(0);
    let out = Path::new("/tmp/capture-cli");
    let _ = std::fs::remove_dir_all(out);
    let o = Command::new(edgesight_bin())
        .args([
            "capture",
            node.to_str().unwrap(),
            "--frames",
            "5",
            "--timeout",
            "900",
            "--out",
        ])
        .arg(out)
        .args([
            "--format", "rgb24", "--size", "320x180", "--fps", "30", "--io", "mmap", "--raw",
        ])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{stderr}");
    let json: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out.join("capture.json")).unwrap()).unwrap();
    assert_eq!(json["frames"], 5);
    assert_eq!(json["io_mode"], "mmap");
    assert_eq!(json["format"], "rgb24");
    assert_eq!(json["width"], 320);
    assert_eq!(json["height"], 180);
    assert_eq!(json["bytesperline"], 960);
    assert!(json["fps_measured"].as_f64().unwrap() > 1.0, "{json}");
    let report: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out.join("report.json")).unwrap()).unwrap();
    let luma = std::fs::read(out.join("luma.u8")).unwrap();
    assert_eq!(luma.len(), 320 * 180);
    let hist: Vec<u32> = serde_json::from_value(report["histogram"].clone()).unwrap();
    assert_eq!(hist, reference::histogram(&luma).to_vec());
    for name in [
        "luma.png",
        "edges.png",
        "mask.png",
        "histogram.png",
        "mask.u8",
    ] {
        assert!(out.join(name).is_file(), "{name}");
    }

    let o = Command::new(edgesight_bin())
        .arg("devices")
        .output()
        .unwrap();
    let listing = String::from_utf8_lossy(&o.stdout);
    assert!(
        listing.contains(&format!("{}: vivid", node.display())),
        "{listing}"
    );
    assert!(listing.contains("YUYV"), "{listing}");
    assert!(listing.contains("320x180 at"), "{listing}");

    // A path that is no device: exit code 2 and a message naming it.
    let o = Command::new(edgesight_bin())
        .args([
            "capture",
            "/dev/video99",
            "--frames",
            "1",
            "--out",
            "/tmp/x",
        ])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("/dev/video99: no such device"));
}

/// The v4l2loopback node the VM's init makes (`video_nr=10`): a capture node only while a
/// writer feeds it (`exclusive_caps=1`).
const LOOPBACK: &str = "/dev/video10";
/// The bytes v4l2loopback gives a 640x480 MJPEG buffer (4 a pixel), and says it holds
/// when it knows no better.
const LOOPBACK_SIZEIMAGE: usize = 640 * 480 * 4;
/// Frames in each MJPEG clip: 3 s at 30 fps.
const CLIP_FRAMES: usize = 90;
/// Whether tests/vm/run.sh cut frame `n` of `clip-truncated.avi` (counting from 0) to its
/// first half: every sixth, `frames/006.jpg`, `012.jpg`, ... there.
fn is_cut(n: usize) -> bool {
    n % 6 == 5
}

/// An MJPEG clip tests/vm/run.sh made (`clip.avi`, `clip-truncated.avi`), in the share.
fn mjpeg_clip(name: &str) -> PathBuf {
    let dir = std::env::var_os("EDGESIGHT_MJPEG_CLIPS")
        .expect("EDGESIGHT_MJPEG_CLIPS: run through tests/vm/run.sh (make vm-test)");
    Path::new(&dir).join(name)
}

/// The JPEG images `clip.avi` holds, in order.
fn clip_frames() -> Vec<Vec<u8>> {
    (1..=CLIP_FRAMES)
        .map(|n| std::fs::read(mjpeg_clip(&format!("frames/{n:03}.jpg"))).unwrap())
        .collect()
}

/// The JPEG images `clip-truncated.avi` holds, in order.
fn truncated_clip_frames() -> Vec<Vec<u8>> {
    let mut frames = clip_frames();
    for (n, frame) in frames.iter_mut().enumerate() {
        if is_cut(n) {
            frame.truncate(frame.len() / 2);
        }
    }
    frames
}

/// ffmpeg writing an MJPEG clip to the loopback node in a loop at the clip's rate (30 fps),
/// each packet of the clip one frame. Dropping it kills and reaps ffmpeg.
struct Feeder {
    ffmpeg: std::process::Child,
}

impl Feeder {
    /// Starts ffmpeg on `clip` and returns once the node offers its frames for capture:
    /// ffmpeg's start alone takes seconds under emulation.
    fn start(clip: &Path) -> Feeder {
        assert!(clip.is_file(), "no clip {}", clip.display());
        let started = Instant::now();
        let ffmpeg = Command::new("ffmpeg")
            .args(["-nostdin", "-hide_banner", "-loglevel", "error"])
            .args(["-re", "-stream_loop", "-1", "-i"])
            .arg(clip)
            .args(["-c:v", "copy", "-f", "v4l2", LOOPBACK])
            .stdin(std::process::Stdio::null())
            .spawn()
            .expect("starting ffmpeg");
        let mut feeder = Feeder { ffmpeg };
        loop {
            if let Some(status) = feeder.ffmpeg.try_wait().unwrap() {
                panic!("ffmpeg feeding {LOOPBACK} ended: {status}");
            }
            let offered = list::describe(Path::new(LOOPBACK))
                .is_ok_and(|info| info.formats.iter().any(|f| f.fourcc == "MJPG"));
            if offered {
                break;
            }
            assert!(
                started.elapsed() < Duration::from_secs(180),
                "{LOOPBACK}: no capture format 180 s after ffmpeg started"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
        println!(
            "feeder: {} on {LOOPBACK} after {:.1?}",
            clip.display(),
            started.elapsed()
        );
        feeder
    }

    fn node(&self) -> &'static Path {
        Path::new(LOOPBACK)
    }
}

/// The one writer of the loopback for the whole run, feeding `clip-truncated.avi`: tests
/// share it, never stop it (the VM powers off with it running), and read as many
/// sessions as they like. A second writer after the first one closed is refused:
/// v4l2loopback 0.12.7 (with `exclusive_caps`) went on advertising a capture node, and
/// ffmpeg's VIDIOC_G_FMT on the output failed with EINVAL.
fn feeder() -> &'static Feeder {
    static FEEDER: OnceLock<Feeder> = OnceLock::new();
    FEEDER.get_or_init(|| Feeder::start(&mjpeg_clip("clip-truncated.avi")))
}

impl Drop for Feeder {
    fn drop(&mut self) {
        let _ = self.ffmpeg.kill();
        let _ = self.ffmpeg.wait();
    }
}

/// Streams `count` frames from `node` with `v4l2-ctl --stream-mmap` (v4l-utils): each
/// buffer's sequence number and bytes.
fn v4l2_ctl_frames(node: &Path, count: usize) -> Vec<(u64, Vec<u8>)> {
    let out = Path::new("/tmp/v4l2-ctl.stream");
    let o = Command::new("v4l2-ctl")
        .arg("-d")
        .arg(node)
        .arg("--stream-mmap")
        .arg(format!("--stream-count={count}"))
        .arg(format!("--stream-to={}", out.display()))
        .arg("--verbose")
        .output()
        .expect("starting v4l2-ctl");
    let log = String::from_utf8_lossy(&o.stdout) + String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "v4l2-ctl: {}\n{log}", o.status);
    // One line a buffer: "cap dqbuf: 0 seq:    268 bytesused: 33840 ts: 72.849473 ...";
    // the stream file holds the buffers' used bytes one after another.
    let field = |words: &[&str], key: &str| -> u64 {
        let at = words.iter().position(|w| *w == key).unwrap();
        words[at + 1].parse().unwrap()
    };
    let stream = std::fs::read(out).unwrap();
    let _ = std::fs::remove_file(out);
    let mut frames = Vec::new();
    let mut at = 0;
    for line in log.lines().filter(|l| l.starts_with("cap dqbuf:")) {
        let words: Vec<&str> = line.split_whitespace().collect();
        let used = field(&words, "bytesused:") as usize;
        frames.push((field(&words, "seq:"), stream[at..at + used].to_vec()));
        at += used;
    }
    assert_eq!(frames.len(), count, "{log}");
    assert_eq!(at, stream.len());
    frames
}

/// How a buffer that should be a frame of the clip differs from the clip's frames.
fn unlike(bytes: &[u8], frames: &[Vec<u8>]) -> String {
    let common = |f: &[u8]| bytes.iter().zip(f).take_while(|(a, b)| a == b).count();
    let (n, prefix) = frames
        .iter()
        .map(|f| common(f))
        .enumerate()
        .max_by_key(|&(_, c)| c)
        .unwrap();
    format!(
        "{} bytes; frame {n} ({} bytes) is the likest, the first {prefix} bytes the same",
        bytes.len(),
        frames[n].len()
    )
}

#[test]
#[ignore = "needs the v4l2loopback device: run through tests/vm/run.sh (make vm-test)"]
fn the_loopback_sends_the_mjpeg_clip_frame_by_frame() {
    let feeder = feeder();
    let info = list::describe(feeder.node()).unwrap();
    assert_eq!(
        (info.card.as_str(), info.driver.as_str(), info.bus.as_str()),
        (
            "edgesight-loopback",
            "v4l2 loopback",
            "platform:v4l2loopback-000"
        )
    );
    assert!(!info.multiplanar);
    assert_eq!(info.formats.len(), 1, "{info:?}");
    assert_eq!(
        (
            info.formats[0].fourcc.as_str(),
            info.formats[0].description.as_str()
        ),
        ("MJPG", "Motion-JPEG")
    );
    assert_eq!(info.formats[0].format, Some(CaptureFormat::Mjpeg));
    let listing = list::lines(&info);
    assert_eq!(
        listing.last().unwrap(),
        "      640x480 at 30 fps",
        "{listing:?}"
    );

    // Two turns of the clip: cut frames come, and every buffer is the
    // clip's frame at its place, found from the writer's sequence number (skipped frames
    // leave gaps in it).
    let frames = truncated_clip_frames();
    let mut got = v4l2_ctl_frames(feeder.node(), 2 * CLIP_FRAMES + 1);
    // A reader's VIDIOC_REQBUFS resets every buffer's sequence number and bytesused
    // (v4l2loopback 0.12.7's init_buffers), and in about every other stream the first
    // buffer is the last one written, read again: sequence 0, the whole buffer (its
    // sizeimage), a frame of the clip followed by whatever the buffer held before.
    if got[0].0 == 0 {
        let (_, stale) = got.remove(0);
        assert_eq!(stale.len(), LOOPBACK_SIZEIMAGE);
        assert!(
            frames.iter().any(|f| stale.starts_with(f)),
            "the stale first buffer: {}",
            unlike(&stale, &frames)
        );
        println!(
            "loopback: the first buffer was a stale one (sequence 0, {LOOPBACK_SIZEIMAGE} bytes)"
        );
    } else {
        got.pop();
    }
    let (first_seq, first) = &got[0];
    let start = frames
        .iter()
        .position(|f| f == first)
        .unwrap_or_else(|| panic!("sequence {first_seq}: {}", unlike(first, &frames)));
    let mut cut_seen = 0;
    for (seq, bytes) in &got {
        let n = (start + (seq - first_seq) as usize) % CLIP_FRAMES;
        assert!(
            bytes == &frames[n],
            "sequence {seq}: not frame {n} of the clip: {}",
            unlike(bytes, &frames)
        );
        if is_cut(n) {
            assert_eq!(bytes.len(), clip_frames()[n].len() / 2);
            cut_seen += 1;
        }
    }
    let skipped = got.last().unwrap().0 - first_seq + 1 - got.len() as u64;
    println!(
        "loopback: {} frames, {skipped} skipped, {cut_seen} cut ones",
        got.len()
    );
    assert!(cut_seen >= 1);
}

/// The `edgesight` binary: the VM's copy when the harness provides one (the VM cannot see
/// a checkout under the host's /tmp), else the one cargo built.
fn edgesight_bin() -> std::path::PathBuf {
    std::env::var_os("EDGESIGHT_BIN")
        .map(Into::into)
        .unwrap_or_else(|| env!("CARGO_BIN_EXE_edgesight").into())
}

/// The luma edgesight's decoder makes of each frame of a clip at `scale` (`None` for a cut
/// frame, which no decoder may pass).
fn clip_lumas(frames: &[Vec<u8>], scale: Scale) -> Vec<Option<Vec<u8>>> {
    let mut decoder = LumaDecoder::new().expect("libturbojpeg");
    frames
        .iter()
        .map(|jpeg| {
            let size = decoder.size(jpeg).ok()?;
            let out = scale.apply(size);
            let mut luma = vec![0u8; (out.width * out.height) as usize];
            decoder
                .decode(jpeg, size, scale, &mut luma, out.width as usize)
                .ok()?;
            Some(luma)
        })
        .collect()
}

/// Which frame of a clip `luma` is, by its decoded luma.
fn clip_frame_of(luma: &[u8], lumas: &[Option<Vec<u8>>]) -> Option<usize> {
    lumas.iter().position(|l| l.as_deref() == Some(luma))
}

/// The loopback's MJPEG frames through V4l2Source, with no format asked for (the rule picks
/// the one the node offers), whole and at half size: every frame handed out is the luma of
/// a whole frame of the clip, exactly, and the pipeline's histogram of it the reference's;
/// the cut frames are counted as corrupt_frame and never handed out, and the stream goes
/// on. The driver's rate (the writer's 30 fps) is the source's rate. A frame asked for
/// its JPEG carries the clip's image it was decoded from; one not asked carries none.
#[test]
#[ignore = "needs the v4l2loopback device: run through tests/vm/run.sh (make vm-test)"]
fn mjpeg_frames_from_the_loopback_are_decoded_and_cut_ones_counted() {
    let gpu = shared_gpu();
    let feeder = feeder();
    let frames = truncated_clip_frames();
    for scale in [Scale::Full, Scale::Half] {
        let lumas = clip_lumas(&frames, scale);
        assert_eq!(lumas.iter().filter(|l| l.is_none()).count(), 15);
        let mut source = open(
            gpu,
            feeder.node(),
            Request {
                scale,
                ..Request::default()
            },
        );
        let n = source.negotiated().expect("negotiated").clone();
        let (w, h) = (640 / scale.divisor(), 480 / scale.divisor());
        assert_eq!(n.delivered, CaptureFormat::Mjpeg);
        assert_eq!(n.io, IoMode::Mmap);
        assert_eq!(n.layout, FrameLayout::packed(PixelFormat::Grey, w, h));
        assert_eq!(source.capture_format(), CaptureFormat::Mjpeg);
        assert_eq!(source.frame_rate(), Some(30.0));
        let pipeline = pipeline(gpu, n.layout);
        let deadline = Instant::now() + Duration::from_secs(600);
        let (mut seen, mut after_corrupt) = (0, 0);
        while seen < 12 || after_corrupt < 2 {
            assert!(Instant::now() < deadline, "{:?}", source.stats());
            let corrupt_before = source.stats().dropped(DropReason::CorruptFrame);
            let keep = seen % 2 == 0;
            source.keep_jpeg(keep);
            let Next::Frame(frame) = source.next_frame(gpu, Duration::from_millis(500)).unwrap()
            else {
                continue;
            };
            assert!(frame.decoded.is_some());
            let luma = frame.slot.read(gpu).unwrap();
            let index = clip_frame_of(&luma[..(w * h) as usize], &lumas).unwrap_or_else(|| {
                panic!("frame {} is no whole frame of the clip", frame.sequence)
            });
            assert!(!is_cut(index));
            // The JPEG copied out while asked is the one the luma came from (a stale first
            // buffer holds the frame and, after it, what the buffer held before).
            match frame.jpeg {
                Some(jpeg) => assert!(
                    keep && jpeg.starts_with(&frames[index]),
                    "frame {}: the JPEG kept is not clip frame {index}: {}",
                    frame.sequence,
                    unlike(jpeg, &frames)
                ),
                None => assert!(!keep, "frame {}: no JPEG kept", frame.sequence),
            }
            let mut p = pipeline.lock().unwrap();
            let result = p.process(gpu, frame.slot).unwrap();
            assert_eq!(
                result.histogram,
                reference::histogram(&luma[..(w * h) as usize])
            );
            seen += 1;
            if corrupt_before > 0 {
                after_corrupt += 1;
            }
        }
        let stats = source.stats();
        println!("loopback mjpeg at {scale}: {seen} frames, {stats:?}");
        assert!(stats.dropped(DropReason::CorruptFrame) >= 1);
        assert_eq!(stats.dropped(DropReason::BufferError), 0);
        assert_eq!(stats.dropped(DropReason::ShortFrame), 0);
    }
}

/// A GET on the daemon at `port`: the status code and the body.
fn http_get(port: u16, path: &str) -> Option<(u16, String)> {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(30))).ok()?;
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
    )
    .ok()?;
    let mut text = String::new();
    s.read_to_string(&mut text).ok()?;
    let status = text.split_whitespace().nth(1)?.parse().ok()?;
    let body = text.split_once("\r\n\r\n")?.1.to_string();
    Some((status, body))
}

/// A child process killed (and reaped) when dropped.
struct Running(std::process::Child);

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A sample of a /metrics text.
fn metric(metrics: &str, series: &str) -> Option<f64> {
    metrics
        .lines()
        .find_map(|l| l.strip_prefix(series)?.trim().parse().ok())
}

/// `edgesight capture` and `edgesight run` on the loopback: capture's last frame, found in
/// the clip by its luma, gives byte for byte what `process` gives on that frame's JPEG
/// file (every raw output and report.json but its timings and device); the daemon, with
/// format mjpeg and no rate, publishes frames of the clip, counts the cut ones as
/// corrupt_frame, times the decoding as stage decode and exports the driver's rate as its
/// target.
#[test]
#[ignore = "needs the v4l2loopback device: run through tests/vm/run.sh (make vm-test)"]
fn capture_and_run_read_the_loopback_as_process_reads_its_frames() {
    shared_gpu();
    feeder();
    let frames = truncated_clip_frames();
    let lumas = clip_lumas(&frames, Scale::Full);
    let out = Path::new("/tmp/capture-mjpeg");
    let _ = std::fs::remove_dir_all(out);
    let o = Command::new(edgesight_bin())
        .args([
            "capture",
            LOOPBACK,
            "--frames",
            "4",
            "--timeout",
            "900",
            "--raw",
            "--out",
        ])
        .arg(out)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let json: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out.join("capture.json")).unwrap()).unwrap();
    assert_eq!(json["source_format"], "mjpeg");
    assert_eq!(json["format"], "grey");
    assert_eq!(json["io_mode"], "mmap");
    assert_eq!(
        (json["width"].as_u64(), json["height"].as_u64()),
        (Some(640), Some(480))
    );
    let luma = std::fs::read(out.join("luma.u8")).unwrap();
    let index = clip_frame_of(&luma, &lumas).expect("the last frame is a frame of the clip");
    let processed = Path::new("/tmp/process-mjpeg");
    let _ = std::fs::remove_dir_all(processed);
    let o = Command::new(edgesight_bin())
        .arg("process")
        .arg(mjpeg_clip(&format!("frames/{:03}.jpg", index + 1)))
        .args(["--raw", "--out"])
        .arg(processed)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    for name in [
        "luma.u8",
        "sobel_dx.s16",
        "sobel_dy.s16",
        "magnitude.u8",
        "edge_mask.u8",
        "mask.u8",
        "integral_sum.u32",
        "integral_sqsum.u64",
        "integral_edges.u32",
        "integral_foreground.u32",
    ] {
        assert!(
            std::fs::read(out.join(name)).unwrap() == std::fs::read(processed.join(name)).unwrap(),
            "{name} of frame {index}"
        );
    }
    let report = |dir: &Path| {
        let mut r: serde_json::Value =
            serde_json::from_slice(&std::fs::read(dir.join("report.json")).unwrap()).unwrap();
        let o = r.as_object_mut().unwrap();
        o.remove("timings_ms");
        o.remove("device");
        r
    };
    assert_eq!(
        report(out),
        report(processed),
        "report.json of frame {index}"
    );

    // The daemon.
    let dir = Path::new("/tmp/run-mjpeg");
    let _ = std::fs::remove_dir_all(dir);
    std::fs::create_dir_all(dir).unwrap();
    let port = 18947;
    let config = dir.join("edgesight.toml");
    std::fs::write(
        &config,
        format!(
            "[web]\nlisten_address = \"127.0.0.1:{port}\"\n[[camera]]\nname = \"webcam\"\n\
             [camera.source]\nkind = \"v4l2\"\ndevice = \"{LOOPBACK}\"\nformat = \"mjpeg\"\n"
        ),
    )
    .unwrap();
    // Killed if an assertion fails, so that it does not hold the loopback for the tests
    // that read it next.
    let mut daemon = Running(
        Command::new(edgesight_bin())
            .args(["run", "--config"])
            .arg(&config)
            .stderr(std::fs::File::create(dir.join("log")).unwrap())
            .spawn()
            .unwrap(),
    );
    let deadline = Instant::now() + Duration::from_secs(600);
    let metrics = loop {
        // The detail tier: a JPEG camera's decode stage times are only there.
        if let Some((200, m)) = http_get(port, "/metrics?collect[]=detail") {
            let corrupt = metric(
                &m,
                r#"edgesight_frames_dropped_total{camera="webcam",reason="corrupt_frame"}"#,
            );
            let frames = metric(&m, r#"edgesight_frames_total{camera="webcam"}"#);
            if corrupt >= Some(1.0) && frames >= Some(4.0) {
                break m;
            }
        }
        if Instant::now() > deadline || daemon.0.try_wait().unwrap().is_some() {
            let _ = daemon.0.kill();
            panic!(
                "{}",
                std::fs::read_to_string(dir.join("log")).unwrap_or_default()
            );
        }
        std::thread::sleep(Duration::from_millis(500));
    };
    assert_eq!(
        metric(&metrics, r#"edgesight_target_frame_rate{camera="webcam"}"#),
        Some(30.0)
    );
    assert!(
        metric(
            &metrics,
            r#"edgesight_stage_duration_seconds_count{camera="webcam",stage="decode"}"#
        ) >= Some(4.0),
        "{metrics}"
    );
    let (status, latest) = http_get(port, "/api/v1/latest?camera=webcam").unwrap();
    assert_eq!(status, 200);
    let latest: serde_json::Value = serde_json::from_str(&latest).unwrap();
    let histogram: Vec<u32> = serde_json::from_value(latest["histogram"].clone()).unwrap();
    assert!(
        lumas
            .iter()
            .flatten()
            .any(|l| reference::histogram(l).to_vec() == histogram),
        "the latest frame's histogram is no whole frame's of the clip"
    );
    // SAFETY: kill(2) on our own child.
    unsafe { libc::kill(daemon.0.id() as i32, libc::SIGTERM) };
    assert!(daemon.0.wait().unwrap().success());
}
