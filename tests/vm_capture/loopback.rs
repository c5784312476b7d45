//! v4l2loopback fed an MJPEG clip by ffmpeg: the clip's frames arrive byte for byte, and
//! through V4l2Source are decoded to the clip's luma with the cut frames counted.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use crate::{open, pipeline, shared_gpu};
use edgesight::capture::v4l2::{list, Request};
use edgesight::capture::{DropReason, FrameSource, IoMode, Next};
use edgesight::frame::{CaptureFormat, FrameLayout, PixelFormat};
use edgesight::jpeg::{LumaDecoder, Scale};
use edgesight::reference;

/// The v4l2loopback node the VM's init makes (`video_nr=10`): a capture node only while a
/// writer feeds it (`exclusive_caps=1`).
pub(crate) const LOOPBACK: &str = "/dev/video10";
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
pub(crate) fn mjpeg_clip(name: &str) -> PathBuf {
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
pub(crate) fn truncated_clip_frames() -> Vec<Vec<u8>> {
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
pub(crate) struct Feeder {
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
pub(crate) fn feeder() -> &'static Feeder {
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

/// The luma edgesight's decoder makes of each frame of a clip at `scale` (`None` for a cut
/// frame, which no decoder may pass).
pub(crate) fn clip_lumas(frames: &[Vec<u8>], scale: Scale) -> Vec<Option<Vec<u8>>> {
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
pub(crate) fn clip_frame_of(luma: &[u8], lumas: &[Option<Vec<u8>>]) -> Option<usize> {
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
