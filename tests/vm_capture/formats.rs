//! Every format vivid offers that edgesight reads, through userptr, mmap and the
//! multi-planar API, frame by frame against the reference, with the capture's rate, its CPU
//! time and nothing left behind; and a device that refuses USERPTR falling back to mmap.

use std::path::Path;
use std::time::{Duration, Instant};

use crate::{assert_no_leak, check_frames, open, shared_gpu, size, vivid};
use edgesight::capture::v4l2::{list, Request, V4l2Source};
use edgesight::capture::{FrameSource, IoMode, Next};
use edgesight::cl::Gpu;
use edgesight::frame::{Cfa, PixelFormat, Samples, Size};
use edgesight::measure::process_cpu_time;

/// Opens a source, takes `frames` frames without the pipeline, and drops it.
fn stream_briefly(gpu: &Gpu, node: &Path, request: Request, frames: u64) {
    let mut source = open(gpu, node, request);
    let give_up = Instant::now() + Duration::from_secs(60);
    while source.stats().frames < frames {
        assert!(Instant::now() < give_up, "{}: no frames", source.describe());
        source.next_frame(gpu, Duration::from_millis(200)).unwrap();
    }
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
