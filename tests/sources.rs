//! Frame sources feeding the real pipeline on OpenCL.

mod common;

use std::time::{Duration, Instant};

use edgesight::capture::{self, pattern, FrameSource, IoMode, Next, SourceSpec};
use edgesight::cl::Gpu;
use edgesight::frame::{FrameLayout, PixelFormat};
use edgesight::pipeline::{Pipeline, PipelineOptions};
use edgesight::reference;

/// Pulls `count` frames, running the pipeline on each and checking its histogram against
/// the reference computed on the pattern frame of the same sequence number.
fn run_pattern(gpu: &Gpu, source: &mut dyn FrameSource, count: usize) -> Vec<u64> {
    let layout = source.layout();
    let mut pipeline = Pipeline::new(gpu, layout, PipelineOptions::default(), &[]).unwrap();
    let mut expected = vec![0u8; layout.frame_bytes()];
    let mut sequences = Vec::new();
    while sequences.len() < count {
        let frame = match source.next_frame(gpu, Duration::from_millis(100)).unwrap() {
            Next::Frame(frame) => frame,
            Next::Idle => continue,
        };
        assert_eq!(frame.layout, layout);
        assert!(frame.captured <= Instant::now());
        let result = pipeline.process(gpu, frame.slot).unwrap();
        pattern::render(&layout, frame.sequence, &mut expected);
        let luma = reference::luma(&layout, &expected);
        assert_eq!(
            result.histogram,
            reference::histogram(&luma),
            "frame {}",
            frame.sequence
        );
        assert_eq!(
            result.otsu_threshold,
            reference::otsu_threshold(&reference::histogram(&luma))
        );
        sequences.push(frame.sequence);
    }
    sequences
}

#[test]
fn pattern_frames_reach_the_pipeline_in_every_format() {
    let gpu = common::gpu();
    for format in PixelFormat::ALL {
        let spec = SourceSpec::Pattern {
            size: "97x41".parse().unwrap(),
            format,
            fps: 200.0,
        };
        let mut source = capture::open(&spec, &gpu).unwrap();
        assert_eq!(source.io_mode(), IoMode::Generated);
        assert_eq!(source.layout(), FrameLayout::packed(format, 97, 41));
        assert!(source.is_up());
        let sequences = run_pattern(&gpu, source.as_mut(), 4);
        assert!(sequences.windows(2).all(|w| w[0] < w[1]), "{sequences:?}");
        let stats = source.stats();
        assert_eq!(stats.frames, 4);
        // Every sequence number is either handed out or counted as dropped.
        assert_eq!(stats.frames + stats.dropped_total(), sequences[3] + 1);
    }
}

#[test]
fn pattern_is_paced_and_a_slow_consumer_drops_frames() {
    let gpu = common::gpu();
    let spec: SourceSpec = "pattern:64x48@50".parse().unwrap();
    let mut source = capture::open(&spec, &gpu).unwrap();
    let start = Instant::now();
    let sequences = run_pattern(&gpu, source.as_mut(), 6);
    // Frame n is due n periods after the first; a loaded machine may skip some, but the
    // clock never runs fast.
    let last = sequences[5];
    assert!(
        start.elapsed() >= Duration::from_millis(20 * last),
        "frame {last} after {:?}",
        start.elapsed()
    );
    assert_eq!(source.stats().dropped_total(), last + 1 - 6);
    std::thread::sleep(Duration::from_millis(200));
    let sequences = run_pattern(&gpu, source.as_mut(), 1);
    let stats = source.stats();
    assert!(stats.dropped_total() >= 8, "{stats:?}");
    assert_eq!(stats.frames + stats.dropped_total(), sequences[0] + 1);
}

#[test]
fn a_pattern_too_large_is_refused_naming_it() {
    let gpu = common::gpu();
    let spec: SourceSpec = "pattern:70000x1@5".parse().unwrap();
    let err = capture::open(&spec, &gpu)
        .err()
        .expect("refused")
        .to_string();
    assert!(err.contains("test pattern 70000x1"), "{err}");
    assert!(err.contains("too large"), "{err}");
}
