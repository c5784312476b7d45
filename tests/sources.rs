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
    // Specs refuse such sizes when parsed; a source opened from one made in code still
    // refuses it itself.
    let spec = SourceSpec::Pattern {
        size: edgesight::frame::Size {
            width: 70000,
            height: 1,
        },
        format: PixelFormat::Grey,
        fps: 5.0,
    };
    let err = capture::open(&spec, &gpu)
        .err()
        .expect("refused")
        .to_string();
    assert!(err.contains("test pattern 70000x1"), "{err}");
    assert!(err.contains("too large"), "{err}");
}

fn tmp_dir(name: &str) -> std::path::PathBuf {
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join(name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Pulls frames until `count` arrived, returning each one's sequence and slot bytes, after
/// checking the pipeline's histogram against the reference on those bytes.
fn pull(gpu: &Gpu, source: &mut dyn FrameSource, count: usize) -> Vec<(u64, Vec<u8>)> {
    let layout = source.layout();
    let mut pipeline = Pipeline::new(gpu, layout, PipelineOptions::default(), &[]).unwrap();
    let mut out = Vec::new();
    while out.len() < count {
        let Next::Frame(frame) = source.next_frame(gpu, Duration::from_millis(100)).unwrap() else {
            continue;
        };
        let bytes = frame.slot.read(gpu).unwrap();
        let result = pipeline.process(gpu, frame.slot).unwrap();
        let luma = reference::luma(&layout, &bytes);
        assert_eq!(result.histogram, reference::histogram(&luma));
        out.push((frame.sequence, bytes));
    }
    out
}

#[test]
fn replay_loops_a_raw_file_frame_by_frame() {
    let gpu = common::gpu();
    let layout = FrameLayout::packed(PixelFormat::Yuyv, 33, 17);
    let frames: Vec<Vec<u8>> = (0..3)
        .map(|i| {
            let mut f = vec![0u8; layout.frame_bytes()];
            pattern::render(&layout, i * 40, &mut f);
            f
        })
        .collect();
    let dir = tmp_dir("replay-raw");
    let file = dir.join("clip.yuyv");
    std::fs::write(&file, frames.concat()).unwrap();
    let spec: SourceSpec = format!("replay:{}:33x17:yuyv@200", file.display())
        .parse()
        .unwrap();
    let mut source = capture::open(&spec, &gpu).unwrap();
    assert_eq!(source.layout(), layout);
    assert_eq!(source.io_mode(), IoMode::Generated);
    assert!(
        source.describe().contains("3 frames"),
        "{}",
        source.describe()
    );
    let got = pull(&gpu, source.as_mut(), 7);
    for (sequence, bytes) in &got {
        assert_eq!(bytes, &frames[(*sequence % 3) as usize], "frame {sequence}");
    }
    let stats = source.stats();
    assert_eq!(stats.frames, 7);
    assert_eq!(stats.frames + stats.dropped_total(), got[6].0 + 1);
}

#[test]
fn replay_plays_a_directory_of_images_in_name_order() {
    let gpu = common::gpu();
    let dir = tmp_dir("replay-dir");
    let layout = FrameLayout::packed(PixelFormat::Grey, 40, 30);
    let mut frames = Vec::new();
    for (i, name) in ["b.png", "a.pgm"].iter().enumerate() {
        let mut f = vec![0u8; layout.frame_bytes()];
        pattern::render(&layout, i as u64 * 17, &mut f);
        image::GrayImage::from_raw(40, 30, f.clone())
            .unwrap()
            .save(dir.join(name))
            .unwrap();
        frames.push(f);
    }
    std::fs::write(dir.join("notes.txt"), "not an image").unwrap();
    let spec: SourceSpec = format!("replay:{}@100", dir.display()).parse().unwrap();
    let mut source = capture::open(&spec, &gpu).unwrap();
    assert_eq!(source.layout(), layout);
    for (sequence, bytes) in pull(&gpu, source.as_mut(), 4) {
        // a.pgm (frames[1]) sorts before b.png (frames[0]).
        let want = if sequence % 2 == 0 {
            &frames[1]
        } else {
            &frames[0]
        };
        assert_eq!(&bytes, want, "frame {sequence}");
    }
}

#[test]
fn replay_refuses_bad_recordings_naming_them() {
    let gpu = common::gpu();
    let dir = tmp_dir("replay-bad");
    let file = dir.join("short.raw");
    std::fs::write(&file, vec![0u8; 100]).unwrap();
    let spec: SourceSpec = format!("replay:{}:8x8:grey@5", file.display())
        .parse()
        .unwrap();
    let err = capture::open(&spec, &gpu)
        .err()
        .expect("refused")
        .to_string();
    assert!(err.contains("short.raw"), "{err}");
    assert!(
        err.contains("100 bytes is not a whole number of grey 8x8 frames (64 bytes each)"),
        "{err}"
    );

    let empty = tmp_dir("replay-empty");
    let spec: SourceSpec = format!("replay:{}@5", empty.display()).parse().unwrap();
    let err = capture::open(&spec, &gpu)
        .err()
        .expect("refused")
        .to_string();
    assert!(err.contains("no PNG, JPEG or PGM/PPM images"), "{err}");

    // An image whose size differs from the first is an error naming it, when it is due.
    let mixed = tmp_dir("replay-mixed");
    image::GrayImage::new(8, 8)
        .save(mixed.join("1.png"))
        .unwrap();
    image::GrayImage::new(9, 8)
        .save(mixed.join("2.png"))
        .unwrap();
    let spec: SourceSpec = format!("replay:{}@200", mixed.display()).parse().unwrap();
    let mut source = capture::open(&spec, &gpu).unwrap();
    let err = loop {
        match source.next_frame(&gpu, Duration::from_millis(50)) {
            Ok(_) => continue,
            Err(e) => break e.to_string(),
        }
    };
    assert!(
        err.contains("2.png (frame 1) is grey 9x8, the first image is grey 8x8"),
        "{err}"
    );
}
