//! Frame sources feeding the real pipeline on OpenCL.

mod common;

use std::time::{Duration, Instant};

use std::io::Write;

use edgesight::capture::{self, pattern, DropReason, FrameSource, IoMode, Next, SourceSpec};
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
}

/// The log lines the calling thread writes while `run` runs (the sources' warnings on the
/// capture target included). One global subscriber for the whole test binary: a scoped one
/// can miss events whose call site another thread reached first without it.
fn logged<T>(run: impl FnOnce() -> T) -> (T, String) {
    thread_local! {
        static LINES: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
    }
    struct ThisThread;
    impl Write for ThisThread {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            LINES.with(|l| l.borrow_mut().extend_from_slice(buf));
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    static SUBSCRIBER: std::sync::Once = std::sync::Once::new();
    SUBSCRIBER.call_once(|| {
        let subscriber = tracing_subscriber::fmt()
            .with_ansi(false)
            .with_writer(|| ThisThread)
            .finish();
        tracing::subscriber::set_global_default(subscriber).expect("one subscriber");
    });
    LINES.with(|l| l.borrow_mut().clear());
    let out = run();
    let text = LINES.with(|l| String::from_utf8_lossy(&l.borrow()).into_owned());
    (out, text)
}

/// Calls `next_frame` until `count` more fills (frames made or dropped) happened, returning
/// the frames made as (sequence, bytes).
fn fills(gpu: &Gpu, source: &mut dyn FrameSource, count: u64) -> Vec<(u64, Vec<u8>)> {
    let filled = |s: &capture::CaptureStats| {
        s.frames + s.dropped_total() - s.dropped(DropReason::SequenceGap)
    };
    let until = filled(&source.stats()) + count;
    let mut out = Vec::new();
    while filled(&source.stats()) < until {
        if let Next::Frame(frame) = source.next_frame(gpu, Duration::from_millis(100)).unwrap() {
            out.push((frame.sequence, frame.slot.read(gpu).unwrap()));
        }
    }
    out
}

/// Issue item 1: a raw recording truncated while it played was memory-mapped, and reading
/// past its new end killed the whole process with SIGBUS.
#[test]
fn r1_a_raw_file_truncated_while_playing_drops_frames_and_resumes() {
    let gpu = common::gpu();
    let layout = FrameLayout::packed(PixelFormat::Grey, 32, 8);
    let n = layout.frame_bytes();
    let frames: Vec<Vec<u8>> = (0..4).map(|i| vec![10 + i as u8 * 50; n]).collect();
    let dir = tmp_dir("replay-truncated");
    let file = dir.join("rec.grey");
    std::fs::write(&file, frames.concat()).unwrap();
    let spec: SourceSpec = format!("replay:{}:32x8:grey@200", file.display())
        .parse()
        .unwrap();
    let (_, log) = logged(|| {
        let mut source = capture::open(&spec, &gpu).unwrap();
        assert_eq!(fills(&gpu, source.as_mut(), 1).len(), 1);

        // Shrunk to one and a half frames: the loop is its one whole frame.
        let rec = std::fs::OpenOptions::new().write(true).open(&file).unwrap();
        rec.set_len(n as u64 * 3 / 2).unwrap();
        for (sequence, bytes) in fills(&gpu, source.as_mut(), 3) {
            assert_eq!(bytes, frames[0], "frame {sequence}");
        }
        assert!(
            source.describe().contains("(1 frames"),
            "{}",
            source.describe()
        );

        // Shrunk below a frame: every frame is dropped as short, and the source is down.
        rec.set_len(n as u64 / 2).unwrap();
        let before = source.stats();
        assert!(fills(&gpu, source.as_mut(), 3).is_empty());
        let after = source.stats();
        assert_eq!(
            after.dropped(DropReason::ShortFrame) - before.dropped(DropReason::ShortFrame),
            3
        );
        assert_eq!(after.frames, before.frames);
        assert!(!source.is_up());

        // Grown back: all four frames play again.
        std::fs::write(&file, frames.concat()).unwrap();
        let got = fills(&gpu, source.as_mut(), 8);
        assert_eq!(got.len(), 8);
        for (sequence, bytes) in &got {
            assert_eq!(bytes, &frames[(*sequence % 4) as usize], "frame {sequence}");
        }
        assert!(source.is_up());
        let stats = source.stats();
        assert_eq!(
            stats.frames + stats.dropped_total(),
            got.last().unwrap().0 + 1
        );

        // Replaced by a rename: the new file plays.
        let other = dir.join("new.grey");
        std::fs::write(&other, [frames[3].clone(), frames[2].clone()].concat()).unwrap();
        std::fs::rename(&other, &file).unwrap();
        for (sequence, bytes) in fills(&gpu, source.as_mut(), 4) {
            let want = if sequence % 2 == 0 {
                &frames[3]
            } else {
                &frames[2]
            };
            assert_eq!(&bytes, want, "frame {sequence}");
        }
    });
    let name = file.display().to_string();
    for change in [
        format!("replay {name}: the file changed from {} to {} bytes; playing its 1 whole frames (the partial frame at its end is skipped)", 4 * n, n * 3 / 2),
        format!("replay {name}: the file changed from {} to {} bytes; playing its 0 whole frames", n * 3 / 2, n / 2),
        format!("replay {name}: the file changed from {} to {} bytes; playing its 4 whole frames", n / 2, 4 * n),
        format!("replay {name}: replaced by another file; playing it"),
    ] {
        assert_eq!(log.matches(&change).count(), 1, "'{change}' in:\n{log}");
    }
}

fn grey_image(width: u32, height: u32, value: u8) -> image::GrayImage {
    image::GrayImage::from_pixel(width, height, image::Luma([value]))
}

/// Issue items 5 and 9: a bad image in a replay directory stopped the camera; now it is
/// skipped, counted as `bad_image` and logged once, and the others play on.
#[test]
fn r5_bad_images_in_a_replay_directory_are_skipped_and_counted() {
    let gpu = common::gpu();
    let dir = tmp_dir("replay-bad-images");
    grey_image(8, 8, 10).save(dir.join("a.png")).unwrap();
    // A PNG whose header was damaged: its checksum no longer matches.
    grey_image(8, 8, 20).save(dir.join("b.png")).unwrap();
    let mut png = std::fs::read(dir.join("b.png")).unwrap();
    png[18] ^= 0x40;
    std::fs::write(dir.join("b.png"), png).unwrap();
    // A JPEG cut short (the corpus's grey one, whatever its size).
    let jpeg = std::fs::read(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/jpeg/grey.jpg"
    ))
    .unwrap();
    std::fs::write(dir.join("c.jpg"), &jpeg[..jpeg.len() - 20]).unwrap();
    grey_image(9, 8, 40).save(dir.join("d.png")).unwrap();
    grey_image(8, 8, 50).save(dir.join("e.pgm")).unwrap();
    grey_image(8, 8, 60).save(dir.join("f.pgm")).unwrap();
    let spec: SourceSpec = format!("replay:{}@20", dir.display()).parse().unwrap();
    let bad = [1u64, 2, 3, 4];
    let ((stats, got), log) = logged(|| {
        let mut source = capture::open(&spec, &gpu).unwrap();
        std::fs::remove_file(dir.join("e.pgm")).unwrap();
        let got = fills(&gpu, source.as_mut(), 18);
        assert!(source.is_up());
        (source.stats(), got)
    });
    let want = |sequence: u64| match sequence % 6 {
        0 => 10u8,
        5 => 60,
        _ => panic!("frame {sequence} of a bad image was handed out"),
    };
    for (sequence, bytes) in &got {
        assert_eq!(bytes, &vec![want(*sequence); 64], "frame {sequence}");
    }
    let last = got.last().unwrap().0;
    assert_eq!(last % 6, 5);
    // Every sequence up to the last is a frame, a bad image or a gap the pacer skipped.
    let bad_due = (0..=last).filter(|s| bad.contains(&(s % 6))).count() as u64;
    let gaps = stats.dropped(DropReason::SequenceGap);
    let bad_images = stats.dropped(DropReason::BadImage);
    assert!(
        bad_images <= bad_due && bad_images + gaps >= bad_due,
        "{bad_images} bad images of {bad_due} due, {gaps} gaps"
    );
    assert_eq!(stats.frames + stats.dropped_total(), last + 1);
    assert_eq!(stats.dropped(DropReason::ShortFrame), 0);
    let path = |name: &str| dir.join(name).display().to_string();
    for problem in [
        format!(
            "{}: not a readable PNG, JPEG or PGM/PPM image",
            path("b.png")
        ),
        format!("{}: incomplete JPEG image", path("c.jpg")),
        format!(
            "{} (frame 3) is grey 9x8, the first image is grey 8x8",
            path("d.png")
        ),
        format!("{}: No such file or directory (os error 2)", path("e.pgm")),
    ] {
        assert_eq!(log.matches(&problem).count(), 1, "'{problem}' in:\n{log}");
    }
}

/// With every image of a directory bad, the source fails (its camera is then opened again
/// with a growing delay), and opening fails the same way until an image reads again.
#[test]
fn r5_a_replay_directory_with_no_readable_image_fails_until_one_reads() {
    let gpu = common::gpu();
    let dir = tmp_dir("replay-all-bad");
    for (name, value) in [("1.png", 70u8), ("2.png", 80)] {
        grey_image(8, 8, value).save(dir.join(name)).unwrap();
    }
    let spec: SourceSpec = format!("replay:{}@200", dir.display()).parse().unwrap();
    let mut source = capture::open(&spec, &gpu).unwrap();
    assert_eq!(fills(&gpu, source.as_mut(), 2).len(), 2);
    for name in ["1.png", "2.png"] {
        std::fs::write(dir.join(name), b"garbage").unwrap();
    }
    let err = loop {
        match source.next_frame(&gpu, Duration::from_millis(100)) {
            Ok(Next::Frame(frame)) => panic!("frame {} from a bad image", frame.sequence),
            Ok(Next::Idle) => continue,
            Err(e) => break e.to_string(),
        }
    };
    let want = format!(
        "replay {0}: none of its 2 images can be read (the first: {1}: not a readable PNG, JPEG or PGM/PPM image (",
        dir.display(),
        dir.join("1.png").display()
    );
    assert!(err.starts_with(&want), "{err}");
    assert!(source.stats().dropped(DropReason::BadImage) >= 1);
    drop(source);
    let reopen = capture::open(&spec, &gpu)
        .err()
        .expect("refused")
        .to_string();
    assert_eq!(reopen, err);

    grey_image(8, 8, 90).save(dir.join("2.png")).unwrap();
    let mut source = capture::open(&spec, &gpu).unwrap();
    let got = fills(&gpu, source.as_mut(), 4);
    // 1.png is still skipped; 2.png plays.
    assert!(!got.is_empty());
    for (sequence, bytes) in got {
        assert_eq!(bytes, vec![90u8; 64], "frame {sequence}");
    }
}
