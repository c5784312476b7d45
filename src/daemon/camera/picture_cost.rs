//! What answering one event's picture request costs a camera thread at 1080p: the
//! read-backs and copies [`answer_snapshots`] does between two frames, for a camera of
//! YUYV frames (its luma) and one of MJPEG frames (its JPEG, copied out of the driver's
//! buffer first). Beside it, for scale, the answer to a status page's snapshot (every
//! picture), the frame's pipeline on the same device, and the luma's JPEG encode that a
//! YUYV camera's picture then takes on the blocking pool, off the camera thread. Printed,
//! not asserted: `BENCHMARKS.md#event-picture` keeps the figures. Run with
//! `cargo test --lib picture_cost -- --ignored --nocapture`
//! (`EDGESIGHT_TEST_DEVICE` picks the OpenCL device).

use std::time::Instant;

use super::*;
use crate::measure::Spread;
use edgesight_capture::capture::pattern::PatternFrame;
use edgesight_capture::jpeg::{LumaDecoder, Scale};
use edgesight_core::cl::DeviceSpec;
use edgesight_core::pipeline::TuningChoice;
use edgesight_frame::frame::{PixelFormat, Size};

const RUNS: usize = 30;
const WARM_UP: usize = 5;

#[test]
#[ignore = "a measurement: run it by name with --ignored --nocapture"]
fn picture_cost() {
    let device: DeviceSpec = std::env::var("EDGESIGHT_TEST_DEVICE")
        .unwrap_or_default()
        .parse()
        .expect("device spec");
    let gpu = Gpu::open(&device).expect("an OpenCL device");
    let size = Size {
        width: 1920,
        height: 1080,
    };
    println!("device: {}", gpu.info);
    println!(
        "| source | its JPEG | an event's picture, camera thread (ms) | of it, the JPEG's \
         copies (ms) | a snapshot, every picture (ms) | the frame's pipeline (ms) | luma \
         encode, blocking pool (ms) |"
    );
    println!("|---|---|---|---|---|---|---|");
    for format in [
        CaptureFormat::Pixels(PixelFormat::Yuyv),
        CaptureFormat::Mjpeg,
    ] {
        let frame = PatternFrame::new(format, size, false).expect("the frame");
        let settings = CameraSettings {
            name: "cost".into(),
            device: device.clone(),
            tuning: TuningChoice::Auto,
            verify_every: 0,
            profiling: edgesight_core::cl::Profiling::Auto,
            source: "pattern:1920x1080@30".parse().expect("spec"),
            options: PipelineOptions::default(),
            regions: Vec::new(),
            health: HealthSettings::default(),
            motion: CameraMotionSettings::default(),
        };
        let mut pipeline = build_pipeline(&gpu, frame.layout, &settings).expect("pipeline");
        let mut slot = pipeline.new_slot(&gpu).expect("slot");
        let pitch = frame.layout.stride as usize;
        slot.write(&gpu, |out| {
            if frame.jpeg {
                LumaDecoder::new()
                    .expect("libturbojpeg")
                    .decode(&frame.bytes, size, Scale::Full, out, pitch)
                    .expect("decode");
            } else {
                out[..frame.bytes.len()].copy_from_slice(&frame.bytes);
            }
        })
        .expect("write the slot");
        let jpeg = frame.jpeg.then_some(frame.bytes.as_slice());
        // A camera's kept JPEG, reused from frame to frame as the V4L2 source's is.
        let mut kept: Vec<u8> = Vec::with_capacity(frame.bytes.len());
        let mut result = FrameResult::empty();
        let (mut events, mut snapshots, mut copies, mut frames, mut encodes) =
            (Vec::new(), Vec::new(), Vec::new(), Vec::new(), Vec::new());
        for run in 0..WARM_UP + RUNS {
            let started = Instant::now();
            let images = pipeline
                .process_into(&gpu, &slot, &mut result)
                .expect("a frame");
            let processed = started.elapsed();
            let (tx, rx) = oneshot::channel();
            let started = Instant::now();
            if let Some(jpeg) = jpeg {
                kept.clear();
                kept.extend_from_slice(jpeg);
            }
            let copied = started.elapsed();
            let request = SnapshotReply::event_picture(tx);
            answer_snapshots(&images, &result, &gpu, vec![request], jpeg, "cost");
            let answered = started.elapsed();
            let snapshot = rx.blocking_recv().expect("an answer");
            // The copy inside the answer, timed alone.
            let started = Instant::now();
            let again = jpeg.map(<[u8]>::to_vec);
            let copied = copied + started.elapsed();
            drop(again);
            let (tx, rx) = oneshot::channel();
            let started = Instant::now();
            let request = SnapshotReply::pictures(tx);
            answer_snapshots(&images, &result, &gpu, vec![request], jpeg, "cost");
            let pictures = started.elapsed();
            let every = rx.blocking_recv().expect("an answer");
            let started = Instant::now();
            edgesight_capture::jpeg::encode_luma(&every.luma, size, crate::events::PICTURE_QUALITY)
                .expect("encode");
            assert_eq!(snapshot.jpeg.is_some(), snapshot.luma.is_empty());
            let encoded = started.elapsed();
            if run >= WARM_UP {
                events.push(answered.as_nanos() as u64);
                snapshots.push(pictures.as_nanos() as u64);
                copies.push(copied.as_nanos() as u64);
                frames.push(processed.as_nanos() as u64);
                encodes.push(encoded.as_nanos() as u64);
            }
        }
        let show = |s: Spread| format!("{:.2} ({:.2}–{:.2})", s.median, s.p10, s.p90);
        println!(
            "| {} 1080p | {} | {} | {} | {} | {} | {} |",
            match format {
                CaptureFormat::Mjpeg => "MJPEG",
                CaptureFormat::Pixels(_) => "YUYV",
            },
            jpeg.map_or("—".into(), |j| format!("{} kB", j.len() / 1000)),
            show(Spread::of_nanos(&events)),
            match jpeg {
                Some(_) => show(Spread::of_nanos(&copies)),
                None => "—".into(),
            },
            show(Spread::of_nanos(&snapshots)),
            show(Spread::of_nanos(&frames)),
            match jpeg {
                Some(_) => "— (its own JPEG)".into(),
                None => show(Spread::of_nanos(&encodes)),
            },
        );
    }
}
