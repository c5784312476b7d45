//! What `[opencl] verify_every` costs per checked frame (a measurement, not a test): the
//! camera thread's copy of what a check needs (the frame's bytes read from its slot, luma
//! and magnitude read back, the small results), and the verifier's work on its own thread
//! (the plain-Rust reference of the frame and the comparison), each the median of RUNS.
//! Frames of camera sizes with the daemon's setup (health grid, two regions).
//!
//!   cargo run --release --example verify_cost [-- RUNS=7 [DEVICE]]

use std::time::{Duration, Instant};

use edgesight::cl::{DeviceSpec, Gpu};
use edgesight::frame::{FrameLayout, PixelFormat};
use edgesight::health;
use edgesight::pipeline::{FrameResult, Pictures, Pipeline, PipelineOptions, TuningChoice};
use edgesight::region::Region;
use edgesight::selftest::{compare_frame, Expected, Findings};

fn median(mut times: Vec<Duration>) -> f64 {
    times.sort();
    times[times.len() / 2].as_secs_f64() * 1e3
}

fn main() {
    let mut args = std::env::args().skip(1);
    let runs: usize = args.next().map_or(7, |r| r.parse().expect("RUNS"));
    let device: DeviceSpec = args
        .next()
        .unwrap_or_default()
        .parse()
        .expect("device spec");
    let gpu = Gpu::open(&device).expect("an OpenCL device");
    println!("device: {}", gpu.info);
    println!(
        "{:<22} {:>14} {:>14} {:>10}",
        "frame", "copy (camera)", "check (verif.)", "frame ms"
    );
    let cases = [
        (PixelFormat::Yuyv, 1280, 720),
        (PixelFormat::Yuyv, 1920, 1080),
        (PixelFormat::Grey, 1920, 1080),
        (PixelFormat::Nv12, 1920, 1080),
        (PixelFormat::Yuyv, 3840, 2160),
    ];
    for (format, width, height) in cases {
        let layout = FrameLayout::packed(format, width, height);
        let regions: Vec<Region> = vec![
            format!("a:0,0,{},{}", width / 2, height / 2)
                .parse()
                .unwrap(),
            format!(
                "b:{},{},{},{}",
                width / 4,
                height / 4,
                width / 2,
                height / 2
            )
            .parse()
            .unwrap(),
        ];
        let options = PipelineOptions::default();
        let tuning = TuningChoice::Auto.resolve(&gpu);
        let mut pipeline =
            Pipeline::with_tuning(&gpu, layout, options, &regions, tuning).expect("pipeline");
        pipeline
            .set_health_grid(&gpu, Some(health::GRID))
            .expect("grid");
        let mut slot = pipeline.new_slot(&gpu).expect("slot");
        let frame: Vec<u8> = (0..layout.frame_bytes())
            .map(|i| (i * 7 + i / width as usize * 3) as u8)
            .collect();
        slot.write_bytes(&gpu, &frame).expect("write");
        let mut result = FrameResult::empty();
        let (mut bytes, mut pictures, mut copy) =
            (Vec::new(), Pictures::default(), FrameResult::empty());
        let mut copies = Vec::new();
        let mut checks = Vec::new();
        let mut frame_times = Vec::new();
        for _ in 0..runs {
            let start = Instant::now();
            let images = pipeline
                .process_into(&gpu, &slot, &mut result)
                .expect("process");
            frame_times.push(start.elapsed());
            let start = Instant::now();
            images.read_frame_into(&gpu, &mut bytes).expect("frame");
            images
                .read_pictures_into(&gpu, &mut pictures)
                .expect("pictures");
            copy.copy_from(&result);
            copies.push(start.elapsed());
            let start = Instant::now();
            let expected = Expected::of(&layout, options, &bytes);
            let mut findings = Findings::default();
            compare_frame(
                &mut findings,
                &"frame",
                &expected,
                &copy,
                &pictures,
                &regions,
            );
            checks.push(start.elapsed());
            assert!(findings.passed(), "{findings:?}");
        }
        println!(
            "{:<22} {:>11.2} ms {:>11.1} ms {:>10.2}",
            format!("{format} {width}x{height}"),
            median(copies),
            median(checks),
            median(frame_times)
        );
    }
}
