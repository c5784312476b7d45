//! What `[opencl] verify_every` costs per checked frame (a measurement, not a test): the
//! camera thread's copy of what a check needs (the frame's bytes read from its slot, luma
//! and magnitude read back, the small results, and motion's state: the background the
//! frame began from, read after the frame before, and what the frame left), and the
//! verifier's work on its own thread (the plain-Rust reference of the frame, motion
//! included, and the comparison), each the median of RUNS. The copy is timed twice: into
//! buffers whose pages the verifier gave back after the last check (the daemon's case,
//! `pages::release`: the copy faults them in again) and into resident ones.
//! Frames of camera sizes with the daemon's setup (health grid, two regions).
//!
//!   cargo run --release --example verify_cost [-- RUNS=7 [DEVICE]]

use std::time::{Duration, Instant};

use edgesight::cl::{DeviceSpec, Gpu};
use edgesight::frame::{FrameLayout, PixelFormat};
use edgesight::health;
use edgesight::pages;
use edgesight::pipeline::{
    DeviceMotion, FrameMotion, FrameResult, Pictures, Pipeline, PipelineOptions, TuningChoice,
};
use edgesight::region::Region;
use edgesight::selftest::{compare_frame, compare_frame_motion, Expected, Findings};

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
        "{:<22} {:>14} {:>14} {:>12} {:>14} {:>12} {:>10}",
        "frame",
        "copy (camera)",
        "copy, resident",
        "of it motion",
        "check (verif.)",
        "of it motion",
        "frame ms"
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
        // Motion on, as by default, told as a watched frame is.
        let told = FrameMotion {
            rate: 3000,
            still_rate: 3000,
            threshold: 512,
        };
        pipeline.tell_motion(Some(told));
        let mut slot = pipeline.new_slot(&gpu).expect("slot");
        let frame: Vec<u8> = (0..layout.frame_bytes())
            .map(|i| (i * 7 + i / width as usize * 3) as u8)
            .collect();
        slot.write_bytes(&gpu, &frame).expect("write");
        let mut result = FrameResult::empty();
        let (mut bytes, mut pictures, mut copy) =
            (Vec::new(), Pictures::default(), FrameResult::empty());
        let (mut before, mut after) = (DeviceMotion::default(), DeviceMotion::default());
        let (mut copies, mut motion_copies) = (Vec::new(), Vec::new());
        let mut resident_copies = Vec::new();
        let (mut checks, mut motion_checks) = (Vec::new(), Vec::new());
        let mut frame_times = Vec::new();
        for _ in 0..runs {
            // The camera reads the background the due frame begins from after the frame
            // before it.
            let start = Instant::now();
            pipeline
                .read_motion_into(&gpu, &mut before)
                .expect("motion");
            let read_before = start.elapsed();
            let start = Instant::now();
            let images = pipeline
                .process_into(&gpu, &slot, &mut result)
                .expect("process");
            frame_times.push(start.elapsed());
            let start = Instant::now();
            images
                .pipeline()
                .read_motion_into(&gpu, &mut after)
                .expect("motion");
            let motion = start.elapsed() + read_before;
            motion_copies.push(motion);
            let mut copy_all = || {
                let start = Instant::now();
                images.read_frame_into(&gpu, &mut bytes).expect("frame");
                images
                    .read_pictures_into(&gpu, &mut pictures)
                    .expect("pictures");
                copy.copy_from(&result);
                start.elapsed()
            };
            copies.push(copy_all() + motion);
            resident_copies.push(copy_all() + motion);
            let start = Instant::now();
            let expected = Expected::of_live(&layout, options, &bytes);
            let mut findings = Findings::default();
            compare_frame(
                &mut findings,
                &"frame",
                &expected,
                &copy,
                &pictures,
                &regions,
            );
            let motion_start = Instant::now();
            let size = (width as usize, height as usize);
            compare_frame_motion(
                &mut findings,
                &"frame",
                &expected.luma,
                size,
                told,
                &before,
                &after,
                Some(&copy),
            );
            motion_checks.push(motion_start.elapsed());
            checks.push(start.elapsed());
            assert!(findings.passed(), "{findings:?}");
            // As the verifier leaves them between checks.
            let p = &mut pictures;
            for buf in [&mut bytes, &mut p.luma, &mut p.magnitude, &mut p.mask] {
                pages::release(buf);
            }
        }
        println!(
            "{:<22} {:>11.2} ms {:>11.2} ms {:>9.2} ms {:>11.1} ms {:>9.2} ms {:>10.2}",
            format!("{format} {width}x{height}"),
            median(copies),
            median(resident_copies),
            median(motion_copies),
            median(checks),
            median(motion_checks),
            median(frame_times)
        );
    }
}
