//! Fuzz target `inputs`: the readers of files a user hands the daemon. Each input is
//! written to a file and read as an image and as a raw frame (`input::load`); every 32nd,
//! and every one that holds more than one image start (a recording's shape: the corpus
//! has tiny images repeated, a damaged header before a long tail, and progressive images
//! of many scans), is also played as the second image of a replay directory whose first
//! image is good, and as what follows a good JPEG image in an MJPEG recording (the path an
//! MJPEG camera's frames take: the marker walk, then libjpeg-turbo's luma decode).
//!
//! Invariants: an accepted frame has a layout the pipeline takes and exactly its
//! `frame_bytes`, a raw one the format and size it was asked for; every error names the
//! file. A replay directory with one good image never fails and only ever hands out the
//! good image or the input decoded. An MJPEG recording that starts with a good image
//! never fails and hands out only frames of that image's size, the good image's luma
//! exactly whenever its turn comes; whatever else the input holds is a frame or a counted
//! drop.

use std::cell::Cell;
use std::path::{Path, PathBuf};
use std::time::Duration;

use edgesight::capture::{self, DropReason, Next, SourceSpec};
use edgesight::cl::Gpu;
use edgesight::frame::{FrameLayout, PixelFormat, Size};
use edgesight::input::{self, InputError, LoadedFrame};

use super::common;
use super::fuzz;

fn work_dir(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("create the fuzz work directory");
    dir
}

/// A short label for an error, from its variant.
fn kind(e: &InputError) -> &'static str {
    match e {
        InputError::Read { .. } => "read",
        InputError::NotAFile { .. } => "not-a-file",
        InputError::TooLarge { .. } => "too-large",
        InputError::Decode { .. } => "decode",
        InputError::Incomplete { .. } => "incomplete",
        InputError::RawSize { .. } => "raw-size",
        InputError::Layout { .. } => "layout",
        InputError::Library { .. } => "library",
        InputError::OtherLayout { .. } => "other-layout",
    }
}

/// Checks one `input::load` of `path`; returns an outcome label, or why the invariant broke.
fn check_load(path: &Path, raw: Option<(PixelFormat, Size)>) -> Result<String, String> {
    match input::load(path, raw) {
        Ok(frame) => {
            check_frame(&frame)?;
            if let Some((format, size)) = raw {
                let asked = FrameLayout::packed(format, size.width, size.height);
                if frame.layout != asked {
                    return Err(format!("raw {asked:?} read as {:?}", frame.layout));
                }
            }
            Ok(format!("ok-{}", frame.layout.format))
        }
        Err(e) => {
            let text = e.to_string();
            if !text.contains(&path.display().to_string()) {
                return Err(format!("the error does not name the file: {text}"));
            }
            Ok(kind(&e).to_string())
        }
    }
}

fn check_frame(frame: &LoadedFrame) -> Result<(), String> {
    frame
        .layout
        .validate()
        .map_err(|e| format!("accepted {:?}: {e}", frame.layout))?;
    if frame.bytes.len() != frame.layout.frame_bytes() {
        return Err(format!(
            "accepted {:?} with {} bytes, its frame_bytes is {}",
            frame.layout,
            frame.bytes.len(),
            frame.layout.frame_bytes()
        ));
    }
    Ok(())
}

/// A raw format and size taken from the input's first bytes, the height chosen so that the
/// file's length can match.
fn raw_args(bytes: &[u8]) -> (PixelFormat, Size) {
    let formats = PixelFormat::ALL;
    let format = formats[usize::from(bytes.first().copied().unwrap_or(0)) % formats.len()];
    let width = 1 + u32::from(bytes.get(1).copied().unwrap_or(0) % 40);
    let row = format.row_bytes(width) as usize;
    let height = (bytes.len() / row).max(1) as u32;
    (format, Size { width, height })
}

/// Plays a directory holding a good 8x6 grey image and `bytes` as its second image for a
/// few frames; returns an outcome label, or why the invariant broke.
fn check_replay(gpu: &Gpu, dir: &Path, bytes: &[u8]) -> Result<String, String> {
    let second = dir.join("b.img.png");
    std::fs::write(&second, bytes).map_err(|e| e.to_string())?;
    let decoded = input::load(&second, None).ok();
    let good = vec![128u8; 48];
    let spec: SourceSpec = format!("replay:{}@1000", dir.display())
        .parse()
        .map_err(|e| format!("{e}"))?;
    let mut source = capture::open(&spec, gpu).map_err(|e| format!("open: {e}"))?;
    let mut made = 0;
    while made < 4 {
        match source.next_frame(gpu, Duration::from_millis(20)) {
            Ok(Next::Frame(frame)) => {
                let got = frame.slot.read(gpu).map_err(|e| e.to_string())?;
                let second_ok = decoded
                    .as_ref()
                    .is_some_and(|d| d.layout == frame.layout && d.bytes == got);
                if got != good && !second_ok {
                    return Err(format!("frame {} is neither image", frame.sequence));
                }
                made += 1;
            }
            Ok(Next::Idle) => {}
            Err(e) => return Err(format!("a directory with a good image failed: {e}")),
        }
    }
    Ok(if source.stats().dropped(DropReason::BadImage) > 0 {
        "replay-skipped".into()
    } else {
        "replay-played".into()
    })
}

/// A grey 24x16 JPEG (baseline, one component) from the fuzz corpus: the good image an
/// MJPEG recording starts with, and its luma.
fn good_jpeg() -> (Vec<u8>, Vec<u8>) {
    let corpus = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fuzz/corpus/inputs");
    let path = Path::new(corpus).join("baseline-grey-33x17.jpg");
    let jpeg = std::fs::read(&path).expect("the corpus's grey JPEG");
    let luma = input::load(&path, None).expect("a good JPEG").bytes;
    (jpeg, luma)
}

/// Plays a recording of the good JPEG followed by `bytes` for a few frames; returns an
/// outcome label, or why the invariant broke.
fn check_mjpeg(
    gpu: &Gpu,
    file: &Path,
    good: &(Vec<u8>, Vec<u8>),
    bytes: &[u8],
) -> Result<String, String> {
    let mut recording = good.0.clone();
    recording.extend_from_slice(bytes);
    std::fs::write(file, &recording).map_err(|e| e.to_string())?;
    let spec: SourceSpec = format!("replay:{}@1000", file.display())
        .parse()
        .map_err(|e| format!("{e}"))?;
    let mut source = capture::open(&spec, gpu).map_err(|e| format!("open: {e}"))?;
    let layout = source.layout();
    let images = source.describe();
    let mut made = 0;
    let mut deadline = 0;
    while made < 4 && deadline < 400 {
        deadline += 1;
        match source.next_frame(gpu, Duration::from_millis(20)) {
            Ok(Next::Frame(frame)) => {
                if frame.layout != layout {
                    return Err(format!(
                        "frame {} is {:?}, not {layout:?}",
                        frame.sequence, frame.layout
                    ));
                }
                let got = frame.slot.read(gpu).map_err(|e| e.to_string())?;
                if frame.sequence == 0 && got[..good.1.len()] != good.1[..] {
                    return Err("the good image's frame is not its luma".into());
                }
                made += 1;
            }
            Ok(Next::Idle) => {}
            Err(e) => {
                return Err(format!(
                    "a recording with a good image failed ({images}): {e}"
                ))
            }
        }
    }
    let stats = source.stats();
    Ok(if stats.dropped(DropReason::CorruptFrame) > 0 {
        "mjpeg-corrupt".into()
    } else {
        "mjpeg-played".into()
    })
}

/// How many JPEG image starts (`FF D8 FF`) `bytes` holds.
fn image_starts(bytes: &[u8]) -> usize {
    bytes
        .windows(3)
        .filter(|w| w == &[0xFF, 0xD8, 0xFF])
        .count()
}

#[test]
fn inputs() {
    let dir = work_dir("fuzz-inputs");
    let file = dir.join("input");
    let replay_dir = work_dir("fuzz-inputs-replay");
    image::GrayImage::from_pixel(8, 6, image::Luma([128u8]))
        .save(replay_dir.join("a.png"))
        .expect("write the good image");
    let gpu = common::gpu();
    let good = good_jpeg();
    let recording = dir.join("recording.mjpeg");
    let runs = Cell::new(0u64);
    fuzz("inputs", |bytes| {
        std::fs::write(&file, bytes).map_err(|e| e.to_string())?;
        let image = check_load(&file, None)?;
        let raw = check_load(&file, Some(raw_args(bytes)))?;
        runs.set(runs.get() + 1);
        if runs.get().is_multiple_of(32) || image_starts(bytes) > 1 {
            let replay = check_replay(&gpu, &replay_dir, bytes)?;
            let mjpeg = check_mjpeg(&gpu, &recording, &good, bytes)?;
            return Ok(format!("{image} {raw} {replay} {mjpeg}"));
        }
        Ok(format!("{image} {raw}"))
    });
}
