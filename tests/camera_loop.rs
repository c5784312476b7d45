//! The camera loop with a publisher that never takes anything: frames are dropped and
//! counted, and the loop keeps capturing and processing at the source's pace. And what the
//! loop's replay source does with recordings that change or are hostile while they play.

mod common;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use edgesight::capture::{self, DropReason, FrameSource, Next, SourceSpec};
use edgesight::cl::Gpu;
use edgesight::config::CameraSettings;
use edgesight::daemon::camera::{self, Links};
use edgesight::daemon::camera_metrics::CameraFamilies;
use edgesight::metrics::Metrics;
use edgesight::pipeline::{PipelineOptions, TuningChoice};

fn sample(metrics: &str, series: &str) -> f64 {
    metrics
        .lines()
        .find_map(|l| l.strip_prefix(series)?.trim().parse().ok())
        .unwrap_or_else(|| panic!("{series} missing:\n{metrics}"))
}

#[test]
fn a_publisher_that_never_reads_costs_frames_not_the_camera() {
    // Opens the device once here so the POCL cache directory is set up for the thread.
    let gpu = common::gpu();
    let device = std::env::var("EDGESIGHT_TEST_DEVICE")
        .unwrap_or_default()
        .parse()
        .expect("device spec");
    drop(gpu);
    let settings = CameraSettings {
        name: "t".into(),
        device,
        tuning: TuningChoice::Auto,
        verify_every: 0,
        profiling: edgesight::cl::Profiling::Auto,
        // 50 fps: a 32x24 frame takes well under its 20 ms even on a loaded machine, so
        // frames the source skips mean a loop that waited on the queue, not a slow CPU.
        source: "pattern:32x24@50".parse().expect("spec"),
        options: PipelineOptions::default(),
        regions: Vec::new(),
        health: edgesight::health::HealthSettings::default(),
        motion: edgesight::motion_events::CameraMotionSettings::default(),
    };
    let metrics = Arc::new(Metrics::new());
    let stop = Arc::new(AtomicBool::new(false));
    let (links, ends) = Links::new(Arc::clone(&stop), 2);
    let m = Arc::new(CameraFamilies::new(&metrics, 16).camera("t", None));
    let thread = std::thread::spawn(move || camera::run(settings, m, links));
    const BACKLOG: &str = r#"edgesight_frames_dropped_total{camera="t",reason="publish_backlog"}"#;
    const GAPS: &str = r#"edgesight_frames_dropped_total{camera="t",reason="sequence_gap"}"#;
    let counts = || {
        let text = String::from_utf8(metrics.encode()).expect("UTF-8");
        (sample(&text, BACKLOG), sample(&text, GAPS))
    };
    // The first launches may compile kernels (a cold POCL cache takes seconds): measure
    // once the loop is past them, that is once the queue is full and frames drop.
    let deadline = Instant::now() + Duration::from_secs(60);
    while counts().0 < 1.0 {
        assert!(
            Instant::now() < deadline,
            "no frame dropped for the backlog in 60 s"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    // Then at least 20 more frames processed and dropped, however long a loaded machine
    // takes to get there: the loop kept turning, not blocked on the full queue.
    let (backlog_before, gaps_before) = counts();
    let deadline = Instant::now() + Duration::from_secs(30);
    let (backlog_after, gaps_after) = loop {
        let (backlog, gaps) = counts();
        if backlog - backlog_before >= 20.0 {
            break (backlog, gaps);
        }
        assert!(
            Instant::now() < deadline,
            "only {} frames processed and dropped in 30 s",
            backlog - backlog_before
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    let layout = ends.state.layout().expect("frames were processed");
    assert_eq!((layout.width, layout.height), (32, 24));
    stop.store(true, Ordering::Relaxed);
    thread.join().expect("no panic");

    // The queue holds the first two frames; every later one was processed and dropped.
    let mut queued = Vec::new();
    while let Ok(p) = ends.published.try_recv() {
        queued.push(p.sequence);
    }
    assert_eq!(queued.len(), 2, "{queued:?}");
    assert!(queued[0] < queued[1]);
    // Most frames were processed, then dropped, rather than skipped by the source.
    let processed = backlog_after - backlog_before;
    let skipped = gaps_after - gaps_before;
    assert!(
        skipped < processed,
        "{skipped} skipped by the source vs {processed} processed"
    );
    let text = String::from_utf8(metrics.encode()).expect("UTF-8");
    // Nothing was published, so nothing counts as published.
    assert_eq!(sample(&text, r#"edgesight_frames_total{camera="t"}"#), 0.0);
}

fn tmp_dir(name: &str) -> std::path::PathBuf {
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join(name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// The log lines the calling thread writes while `run` runs (the sources' warnings on the
/// capture target included), through one global subscriber for the test binary.
fn logged<T>(run: impl FnOnce() -> T) -> (T, String) {
    thread_local! {
        static LINES: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
    }
    struct ThisThread;
    impl std::io::Write for ThisThread {
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

/// A uniform JPEG of `width`x`height` at `value`, and its luma as the replay decodes it.
fn jpeg(dir: &std::path::Path, width: u32, height: u32, value: u8) -> (Vec<u8>, Vec<u8>) {
    let size = edgesight::frame::Size { width, height };
    let rgb = vec![value; (3 * width * height) as usize];
    let bytes = edgesight::jpeg::encode_rgb(&rgb, size, 90).unwrap();
    let file = dir.join(format!("luma-{width}x{height}-{value}.jpg"));
    std::fs::write(&file, &bytes).unwrap();
    let luma = edgesight::input::load(&file, None).unwrap().bytes;
    std::fs::remove_file(&file).unwrap();
    (bytes, luma)
}

/// Frames from `source` until `count` were made or dropped (not counting the pacer's
/// gaps), or until `until` holds of the frames so far, within a minute.
fn play(
    gpu: &Gpu,
    source: &mut dyn FrameSource,
    count: u64,
    until: impl Fn(&[(u64, Vec<u8>)], &capture::CaptureStats) -> bool,
) -> Result<Vec<(u64, Vec<u8>)>, String> {
    let filled = |s: &capture::CaptureStats| {
        s.frames + s.dropped_total() - s.dropped(DropReason::SequenceGap)
    };
    let end = filled(&source.stats()).saturating_add(count);
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut out = Vec::new();
    while filled(&source.stats()) < end && !until(&out, &source.stats()) {
        assert!(Instant::now() < deadline, "{:?}", source.stats());
        match source.next_frame(gpu, Duration::from_millis(100)) {
            Ok(Next::Frame(frame)) => out.push((frame.sequence, frame.slot.read(gpu).unwrap())),
            Ok(Next::Idle) => {}
            Err(e) => return Err(e.to_string()),
        }
    }
    Ok(out)
}

/// Issue 46 item 5: an image of a replay directory that was bad (of the wrong size, say)
/// was read and decoded in full again on every loop. Now a file found bad is not read
/// again while its inode, size and modification time stay the same, and a JPEG of the
/// wrong size is refused from its frame header, before its data is decoded.
#[test]
fn round3_5_a_bad_image_of_a_replay_directory_is_not_decoded_again_each_loop() {
    let gpu = common::gpu();
    let dir = tmp_dir("replay-remembered");
    let (a, a_luma) = jpeg(&dir, 16, 8, 10);
    std::fs::write(dir.join("a.jpg"), &a).unwrap();
    // Wrong in size, whose data would not decode either: its header claims 40x24.
    let mut claims = jpeg(&dir, 16, 8, 90).0;
    let sof = claims.windows(2).position(|w| w == [0xFF, 0xC0]).unwrap();
    claims[sof + 5..sof + 9].copy_from_slice(&[0, 24, 0, 40]);
    std::fs::write(dir.join("b.jpg"), &claims).unwrap();
    // Bad for its size: 32x8.
    let (c, _) = jpeg(&dir, 32, 8, 200);
    let c_path = dir.join("c.jpg");
    std::fs::write(&c_path, &c).unwrap();
    let spec: SourceSpec = format!("replay:{}@200", dir.display()).parse().unwrap();
    let (_, log) = logged(|| {
        let mut source = capture::open(&spec, &gpu).unwrap();
        let bad = |s: &dyn FrameSource| s.stats().dropped(DropReason::BadImage);
        play(&gpu, source.as_mut(), u64::MAX, |_, stats| {
            stats.dropped(DropReason::BadImage) >= 2
        })
        .unwrap();
        // Rewritten in place with a good image of the same length and modification time:
        // the same file to the source, still bad, so not read.
        let (good, good_luma) = jpeg(&dir, 16, 8, 150);
        assert!(good.len() <= c.len());
        let modified = std::fs::metadata(&c_path).unwrap().modified().unwrap();
        let mut padded = good.clone();
        padded.resize(c.len(), 0);
        let file = std::fs::OpenOptions::new()
            .write(true)
            .open(&c_path)
            .unwrap();
        std::os::unix::fs::FileExt::write_all_at(&file, &padded, 0).unwrap();
        file.set_modified(modified).unwrap();
        let before = bad(source.as_ref());
        let got = play(&gpu, source.as_mut(), 9, |_, _| false).unwrap();
        for (sequence, bytes) in &got {
            assert_eq!(bytes, &a_luma, "frame {sequence}");
        }
        assert!(bad(source.as_ref()) > before);
        // A new modification time is another file: read, and good now.
        file.set_modified(modified + Duration::from_secs(1))
            .unwrap();
        let got = play(&gpu, source.as_mut(), u64::MAX, |got, _| {
            got.iter().any(|(_, bytes)| bytes == &good_luma)
        })
        .unwrap();
        assert_eq!(got.last().unwrap().0 % 3, 2);
    });
    let name = |file: &str| dir.join(file).display().to_string();
    for problem in [
        format!(
            "skipping {} (frame 1) is grey 40x24, the first image is grey 16x8",
            name("b.jpg")
        ),
        format!(
            "skipping {} (frame 2) is grey 32x8, the first image is grey 16x8",
            name("c.jpg")
        ),
    ] {
        assert_eq!(log.matches(&problem).count(), 1, "'{problem}' in:\n{log}");
    }
}

/// Issue 46 item 10: an MJPEG recording truncated in place logged a warning for each
/// frame of its lost images, forever (20 a second at 20 fps), while its camera stayed up;
/// one replaced by a rename played the deleted file on, silently. Now a read past the
/// file's end, or a loop's end, notices either: the recording is indexed again, which is
/// logged once; with no image left the source fails, so that its camera shows down and
/// is opened again with a growing delay.
#[test]
fn round3_10_an_mjpeg_recording_truncated_or_replaced_is_indexed_again() {
    let gpu = common::gpu();
    let dir = tmp_dir("replay-mjpeg-changes");
    let images: Vec<_> = [10u8, 100, 200]
        .iter()
        .map(|&v| jpeg(&dir, 16, 8, v))
        .collect();
    let path = dir.join("clip.mjpeg");
    let recording: Vec<u8> = images.iter().flat_map(|(bytes, _)| bytes.clone()).collect();
    std::fs::write(&path, &recording).unwrap();
    let spec: SourceSpec = format!("replay:{}@200", path.display()).parse().unwrap();
    let p = path.display().to_string();
    let (first, second) = (images[0].0.len() as u64, images[1].0.len() as u64);
    let truncated = first + second / 2;
    let ((failure, replaced_len), log) = logged(|| {
        let mut source = capture::open(&spec, &gpu).unwrap();
        for (sequence, bytes) in play(&gpu, source.as_mut(), 3, |_, _| false).unwrap() {
            assert_eq!(bytes, images[sequence as usize % 3].1, "frame {sequence}");
        }
        // Cut in place inside the second image: the first is all that plays.
        let file = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
        file.set_len(truncated).unwrap();
        let got = play(&gpu, source.as_mut(), 20, |_, _| false).unwrap();
        assert!(got.len() >= 5, "{} frames", got.len());
        assert!(got.iter().all(|(_, bytes)| bytes == &images[0].1));
        assert!(
            source.describe().contains("(MJPEG, 2 JPEG images"),
            "{}",
            source.describe()
        );
        assert!(source.is_up());

        // Replaced by a rename: the new recording plays.
        let (other, other_luma) = jpeg(&dir, 16, 8, 50);
        let new = dir.join("clip.new");
        std::fs::write(&new, [other.clone(), other].concat()).unwrap();
        std::fs::rename(&new, &path).unwrap();
        play(&gpu, source.as_mut(), u64::MAX, |got, _| {
            got.iter().any(|(_, bytes)| bytes == &other_luma)
        })
        .unwrap();
        assert!(
            source.describe().contains("(MJPEG, 2 JPEG images"),
            "{}",
            source.describe()
        );

        // Emptied: nothing left to play, the source fails.
        let replaced_len = std::fs::metadata(&path).unwrap().len();
        std::fs::write(&path, b"").unwrap();
        let failure = play(&gpu, source.as_mut(), u64::MAX, |_, _| false).unwrap_err();
        (failure, replaced_len)
    });
    assert_eq!(
        failure,
        format!(
            "replay {p}: holds no JPEG image: give a directory of images, an MJPEG recording \
             (JPEG images back to back), or a raw file with :WxH:FORMAT"
        )
    );
    let shrank = format!(
        "replay {p}: the file shrank from {} to {truncated} bytes; indexed again: 2 JPEG images",
        recording.len()
    );
    let replaced = format!("replay {p}: replaced by another file; indexed again: 2 JPEG images");
    assert_eq!(log.matches(&shrank).count(), 1, "{log}");
    assert_eq!(log.matches(&replaced).count(), 1, "{log}");
    let emptied = format!(
        "replay {p}: the file shrank from {replaced_len} to 0 bytes; indexing it again failed"
    );
    assert_eq!(log.matches(&emptied).count(), 1, "{log}");
    let cut = format!(
        "replay {p}: the image at byte {first} is corrupt (cut short: the next image or the \
         file's end comes before its end-of-image marker); dropped as corrupt_frame"
    );
    assert_eq!(log.matches(&cut).count(), 1, "{log}");
    // Nothing else: no line per frame.
    assert_eq!(log.lines().count(), 4, "{log}");
}
