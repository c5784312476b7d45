//! V4L2 capture against real drivers: the kernel's `vivid` virtual camera, and
//! v4l2loopback sending MJPEG clips that ffmpeg writes to it ([`loopback::Feeder`]), inside
//! the VM that `tests/vm/run.sh` boots (`make vm-test`). Every test here is ignored in a
//! plain `cargo test`: it needs vivid loaded as the VM's init loads it (three instances:
//! vmalloc buffers, dma-contig buffers that refuse USERPTR, multi-planar), v4l2loopback
//! at /dev/video10 and the clips run.sh makes.
//!
//! One test binary, a module per topic: run.sh builds this one executable and copies it
//! into the VM, where every test shares one boot, one OpenCL device, pipelines built once
//! ([`pipeline`]: minutes under emulation with a cold cache) and the loopback's one writer
//! ([`loopback::feeder`], which cannot be started twice).
//!
//! | module | what capture is held to |
//! |---|---|
//! | `formats` | every format vivid offers, by userptr, mmap and multi-planar; USERPTR refused |
//! | `faults` | dropped and damaged buffers, a disconnect, no USB bandwidth, injected errors |
//! | `loopback` | the MJPEG clip through v4l2loopback, byte for byte and decoded, cut frames counted |
//! | `commands` | `edgesight capture` on vivid and the loopback, `edgesight run` on the loopback |
//!
//! What several modules share is below.

#[path = "../common/mod.rs"]
mod common;

mod commands;
mod faults;
mod formats;
mod loopback;

use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

use edgesight::capture::v4l2::{list, Request, V4l2Source};
use edgesight::capture::{FrameSource, Next};
use edgesight::cl::Gpu;
use edgesight::frame::{FrameLayout, Size};
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

/// The `edgesight` binary: the VM's copy when the harness provides one (the VM cannot see
/// a checkout under the host's /tmp), else the one cargo built.
fn edgesight_bin() -> std::path::PathBuf {
    std::env::var_os("EDGESIGHT_BIN")
        .map(Into::into)
        .unwrap_or_else(|| env!("CARGO_BIN_EXE_edgesight").into())
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
