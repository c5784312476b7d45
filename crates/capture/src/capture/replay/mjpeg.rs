//! An MJPEG recording replayed: a file of JPEG images back to back, as `ffmpeg -f mjpeg`
//! and `v4l2-ctl --stream-to` write them (padding between images is skipped). The file is
//! indexed once at open by walking each image's markers, reading it in blocks (never whole);
//! each frame is then one positioned read into a buffer kept between frames and one
//! decode of its luma into the slot, as an MJPEG camera's frames are.
//!
//! An image the walk found cut short (the next one starts before its end-of-image marker,
//! or the file ends), or that does not decode to the recording's size, plays as a
//! `corrupt_frame` drop, as it would from a camera; the first one is logged with why.

use std::fs::File;
use std::io::Read;
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::time::Instant;

use super::{replay_warn, source_error};
use crate::capture::{CaptureError, DropReason, Fill};
use crate::input::MAX_IMAGE_FILE_BYTES;
use crate::jpeg::{LumaDecoder, Scale};
use edgesight_frame::frame::{FrameLayout, PixelFormat, Size};

/// Bytes read at a time while indexing.
const BLOCK: usize = 1 << 20;

/// Bytes of the previous block kept when the next is read, so that a look back over the
/// few bytes of one marker still finds them.
const KEEP: usize = 16;

/// The most images one recording may hold: over nine hours at 30 fps, and an index of
/// 16 MiB. A file of more (such as millions of tiny images) is refused rather than
/// indexed into memory the size of the file.
pub(super) const MAX_IMAGES: usize = 1 << 20;

/// One image's place in the file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Span {
    pub start: u64,
    /// At most [`MAX_IMAGE_FILE_BYTES`], which fits.
    pub len: u32,
    /// Whether the walk reached its end-of-image marker before another image began.
    pub whole: bool,
}

/// Why a recording could not be indexed.
#[derive(Debug, thiserror::Error)]
pub(super) enum IndexError {
    #[error("reading it: {0}")]
    Io(#[from] std::io::Error),
    #[error(
        "holds more than {MAX_IMAGES} JPEG images; replay a shorter recording (split it, \
         or take one image in N with ffmpeg)"
    )]
    TooMany,
}

/// Why a walk over the stream stopped before its end.
enum Stop {
    /// The file ends here.
    End,
    /// The image has grown past [`MAX_IMAGE_FILE_BYTES`].
    Limit,
    Io(std::io::Error),
}

impl From<std::io::Error> for Stop {
    fn from(e: std::io::Error) -> Stop {
        Stop::Io(e)
    }
}

/// A reader seen as bytes at absolute offsets, read forward a block at a time: each byte
/// is read once, and no more than a block is held however far an image runs.
struct Blocks<R> {
    reader: R,
    buf: Vec<u8>,
    /// The offset of `buf[0]` in the file.
    start: u64,
    /// Offsets at or past this one are [`Stop::Limit`].
    limit: u64,
}

impl<R: Read> Blocks<R> {
    /// The byte at `at`, which is at most [`KEEP`] bytes before the furthest asked for.
    fn byte(&mut self, at: u64) -> Result<u8, Stop> {
        self.load(at)?;
        Ok(self.buf[(at - self.start) as usize])
    }

    /// The offset of the first 0xFF at or after `at`.
    fn find_ff(&mut self, mut at: u64) -> Result<u64, Stop> {
        loop {
            self.load(at)?;
            let from = (at - self.start) as usize;
            // Not past the limit: the search ends there like a read does.
            let to = self.buf.len().min((self.limit - self.start) as usize);
            match memchr::memchr(0xFF, &self.buf[from..to]) {
                Some(i) => return Ok(at + i as u64),
                None => at = self.start + to as u64,
            }
        }
    }

    /// Makes `buf` hold `at`, reading on (and skipping) forward.
    fn load(&mut self, at: u64) -> Result<(), Stop> {
        if at >= self.limit {
            return Err(Stop::Limit);
        }
        debug_assert!(at >= self.start, "a look back past the bytes kept");
        while at >= self.start + self.buf.len() as u64 {
            let end = self.start + self.buf.len() as u64;
            // Keep the tail when reading on from it, else drop everything.
            let keep = if at - end < BLOCK as u64 {
                KEEP.min(self.buf.len())
            } else {
                0
            };
            self.buf.drain(..self.buf.len() - keep);
            self.start = end - keep as u64;
            let have = self.buf.len();
            self.buf.resize(have + BLOCK, 0);
            let n = loop {
                match self.reader.read(&mut self.buf[have..]) {
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                    other => break other,
                }
            };
            let n = match n {
                Ok(n) => n,
                Err(e) => {
                    self.buf.truncate(have);
                    return Err(e.into());
                }
            };
            self.buf.truncate(have + n);
            if n == 0 {
                return Err(Stop::End);
            }
        }
        Ok(())
    }
}

/// How the walk of one image ended.
enum Ending {
    /// Its end-of-image marker, ending just before this offset.
    Whole(u64),
    /// Another image's start-of-image marker at this offset, before its end-of-image one.
    Cut(u64),
    /// Damage at this offset: what follows up to the next image belongs to it.
    Damaged(u64),
}

/// What a walk saw of an image: only one with a frame header and a scan can be a frame.
#[derive(Default)]
struct Seen {
    frame_header: bool,
    scan: bool,
}

/// Walks the image whose start-of-image marker is at `start` (as [`crate::jpeg::walk`]
/// does, but over the stream, reading each byte once).
fn walk_stream<R: Read>(
    blocks: &mut Blocks<R>,
    start: u64,
    seen: &mut Seen,
) -> Result<Ending, Stop> {
    let mut at = start + 2;
    // The offset of the marker code a scan's end already found.
    let mut code_at: Option<u64> = None;
    loop {
        let code_offset = match code_at.take() {
            Some(offset) => offset,
            None => {
                if blocks.byte(at)? != 0xFF {
                    return Ok(Ending::Damaged(at));
                }
                // Fill bytes: any number of 0xFF before the code.
                at += 1;
                while blocks.byte(at)? == 0xFF {
                    at += 1;
                }
                at
            }
        };
        let code = blocks.byte(code_offset)?;
        at = code_offset + 1;
        match code {
            0xD9 => return Ok(Ending::Whole(at)),
            0xD8 => return Ok(Ending::Cut(code_offset - 1)),
            0x01 | 0xD0..=0xD7 => continue,
            _ => {}
        }
        let len = u64::from(blocks.byte(at)?) << 8 | u64::from(blocks.byte(at + 1)?);
        if len < 2 {
            return Ok(Ending::Damaged(at));
        }
        seen.frame_header |= (0xC0..=0xCF).contains(&code) && !matches!(code, 0xC4 | 0xC8 | 0xCC);
        at += len;
        if code == 0xDA {
            seen.scan = true;
            // The entropy-coded data runs to a marker other than a stuffed 0xFF, a restart
            // or a fill byte.
            loop {
                let ff = blocks.find_ff(at)?;
                let mut code = ff + 1;
                while blocks.byte(code)? == 0xFF {
                    code += 1;
                }
                match blocks.byte(code)? {
                    0x00 | 0xD0..=0xD7 => at = code + 1,
                    _ => {
                        code_at = Some(code);
                        break;
                    }
                }
            }
        }
    }
}

/// The offset of the next `FF D8 FF` (an image's start) at or after `from`, or `None`.
fn next_start<R: Read>(blocks: &mut Blocks<R>, mut from: u64) -> Result<Option<u64>, Stop> {
    loop {
        let ff = match blocks.find_ff(from) {
            Ok(ff) => ff,
            Err(Stop::End) => return Ok(None),
            Err(e) => return Err(e),
        };
        let rest = (|| Ok::<_, Stop>((blocks.byte(ff + 1)?, blocks.byte(ff + 2)?)))();
        match rest {
            Ok((0xD8, 0xFF)) => return Ok(Some(ff)),
            Ok(_) => from = ff + 1,
            Err(Stop::End) => return Ok(None),
            Err(e) => return Err(e),
        }
    }
}

/// Where the images of the MJPEG stream read from `reader` lie. Linear in time and held
/// to a block of memory besides the index: each byte is read once and the walk never
/// goes back. An image that cannot be a frame (no frame header, or whole without a scan)
/// is left out, and an image larger than any frame is cut where it reaches that size.
pub(super) fn index(reader: impl Read) -> Result<Vec<Span>, IndexError> {
    let mut blocks = Blocks {
        reader,
        buf: Vec::with_capacity(BLOCK + KEEP),
        start: 0,
        limit: u64::MAX,
    };
    let mut spans = Vec::new();
    let mut from = 0;
    let io = |stop: Stop| match stop {
        Stop::Io(e) => IndexError::Io(e),
        Stop::End | Stop::Limit => unreachable!("handled where met"),
    };
    while let Some(start) = next_start(&mut blocks, from).map_err(io)? {
        let limit = start + MAX_IMAGE_FILE_BYTES;
        blocks.limit = limit;
        let mut seen = Seen::default();
        let walked = walk_stream(&mut blocks, start, &mut seen);
        // A whole image without a scan holds no picture; any other needs a frame header.
        let frame = seen.frame_header && (seen.scan || !matches!(walked, Ok(Ending::Whole(_))));
        // Where the image's span ends, whether it is whole, and where the next search starts.
        let (end, whole) = match walked {
            Ok(Ending::Whole(end)) => (Some(end), true),
            Ok(Ending::Cut(next)) => (Some(next), false),
            Ok(Ending::Damaged(at)) => match next_start(&mut blocks, at) {
                Ok(next) => (next, false),
                Err(Stop::Limit) => (Some(limit), false),
                Err(e) => return Err(io(e)),
            },
            Err(Stop::End) => (None, false),
            Err(Stop::Limit) => (Some(limit), false),
            Err(e) => return Err(io(e)),
        };
        blocks.limit = u64::MAX;
        // The file's end when the image runs to it.
        let end = match end {
            Some(end) => end,
            None => blocks.start + blocks.buf.len() as u64,
        };
        if frame {
            if spans.len() == MAX_IMAGES {
                return Err(IndexError::TooMany);
            }
            spans.push(Span {
                start,
                len: u32::try_from(end - start).expect("an image is cut at MAX_IMAGE_FILE_BYTES"),
                whole,
            });
        }
        from = end.max(start + 2);
    }
    Ok(spans)
}

/// An MJPEG recording being played.
pub(super) struct MjpegFile {
    file: File,
    /// The open file's device and inode, to notice the path naming another file.
    identity: (u64, u64),
    /// The file's length when it was indexed, to notice it cut shorter.
    indexed_len: u64,
    spans: Vec<Span>,
    /// The recording's frame size (its first whole image's) and the luma's scale.
    size: Size,
    scale: Scale,
    pub layout: FrameLayout,
    decoder: LumaDecoder,
    /// The frame being decoded, kept so that a frame allocates nothing.
    bytes: Vec<u8>,
    /// Whether a corrupt frame was logged.
    logged: bool,
    /// The image of the loop played last, to notice a loop's end.
    last: usize,
    /// Whether a failed read was logged (until one reads again).
    read_failed: bool,
    /// Whether the path was found gone (the open file still plays).
    path_gone: bool,
}

impl MjpegFile {
    /// Indexes `path` and takes the size of its first image that decodes.
    pub fn open(path: &Path, scale: Scale) -> Result<MjpegFile, CaptureError> {
        let fail = |message: String| source_error(path, message);
        let (file, indexed_len) = edgesight_frame::files::open_regular(path).map_err(|e| {
            fail(match e {
                edgesight_frame::files::OpenError::Io(e) => e.to_string(),
                edgesight_frame::files::OpenError::NotRegular(kind) => {
                    format!("not a directory of images or a file, but {kind}")
                }
            })
        })?;
        let meta = file.metadata().map_err(|e| fail(e.to_string()))?;
        let spans = index(&file).map_err(|e| fail(e.to_string()))?;
        if spans.is_empty() {
            return Err(fail(
                "holds no JPEG image: give a directory of images, an MJPEG recording (JPEG \
                 images back to back), or a raw file with :WxH:FORMAT"
                    .into(),
            ));
        }
        let mut decoder = LumaDecoder::new().map_err(|e| fail(e.to_string()))?;
        let mut bytes = Vec::new();
        let mut first_problem = None;
        for span in spans.iter().filter(|s| s.whole) {
            bytes.resize(span.len as usize, 0);
            file.read_exact_at(&mut bytes, span.start)
                .map_err(|e| fail(format!("reading the image at byte {}: {e}", span.start)))?;
            match decoder.size(&bytes) {
                Ok(size) => {
                    let scaled = scale.apply(size);
                    let layout =
                        FrameLayout::packed(PixelFormat::Grey, scaled.width, scaled.height);
                    FrameLayout::packed(PixelFormat::Grey, size.width, size.height)
                        .validate()
                        .map_err(|e| fail(e.to_string()))?;
                    return Ok(MjpegFile {
                        file,
                        identity: super::identity(&meta),
                        indexed_len,
                        spans,
                        size,
                        scale,
                        layout,
                        decoder,
                        bytes,
                        logged: false,
                        last: usize::MAX,
                        read_failed: false,
                        path_gone: false,
                    });
                }
                Err(e) => {
                    first_problem.get_or_insert(format!("at byte {}: {e}", span.start));
                }
            }
        }
        Err(fail(format!(
            "none of its {} JPEG images is whole and readable{}",
            spans.len(),
            first_problem
                .map(|p| format!(" (the first: {p})"))
                .unwrap_or_default()
        )))
    }

    /// The image of the last frame filled, as the recording holds it.
    pub fn jpeg(&self) -> &[u8] {
        &self.bytes
    }

    /// Images in one loop, whole or not.
    pub fn count(&self) -> usize {
        self.spans.len()
    }

    /// How the recording changed since it was indexed, if it did in a way that loses
    /// images: cut shorter in place, or the path now names another file (a recording
    /// replaced by a rename). A file that grew plays on as indexed.
    fn changed(&mut self, path: &Path) -> Option<String> {
        if super::replaced(path, self.identity, &mut self.path_gone).is_some() {
            return Some("replaced by another file".into());
        }
        let len = self.file.metadata().map_or(self.indexed_len, |m| m.len());
        (len < self.indexed_len)
            .then(|| format!("the file shrank from {} to {len} bytes", self.indexed_len))
    }

    /// Indexes the recording at `path` again after `why`; an error, for the camera to fail
    /// on, when it holds no image now or its frames changed size.
    fn reopen(&mut self, path: &Path, why: &str) -> Result<(), CaptureError> {
        let again = MjpegFile::open(path, self.scale).and_then(|again| {
            if again.layout == self.layout {
                Ok(again)
            } else {
                Err(source_error(
                    path,
                    format!(
                        "{why}, whose frames are {}x{}, not {}x{}: opened again",
                        again.size.width, again.size.height, self.size.width, self.size.height
                    ),
                ))
            }
        });
        match again {
            Ok(again) => {
                replay_warn!(
                    "replay {}: {why}; indexed again: {} JPEG images",
                    path.display(),
                    again.count()
                );
                *self = again;
                Ok(())
            }
            Err(e) => {
                replay_warn!("replay {}: {why}; indexing it again failed", path.display());
                Err(e)
            }
        }
    }

    /// Decodes frame `sequence` of the loop into `out`. A corrupt frame costs no
    /// allocation (its reason is made into text only for the one log line). At a loop's
    /// end, and when a read runs past the file's end, the recording is looked at again:
    /// an error if it lost every image.
    pub fn fill(
        &mut self,
        path: &Path,
        sequence: u64,
        out: &mut [u8],
    ) -> Result<Fill, CaptureError> {
        let mut image = (sequence % self.spans.len() as u64) as usize;
        if image <= self.last {
            if let Some(why) = self.changed(path) {
                self.reopen(path, &why)?;
                image = (sequence % self.spans.len() as u64) as usize;
            }
        }
        self.last = image;
        let span = self.spans[image];
        let problem = if span.whole {
            self.bytes.resize(span.len as usize, 0);
            if let Err(e) = self.file.read_exact_at(&mut self.bytes, span.start) {
                if e.kind() == std::io::ErrorKind::UnexpectedEof {
                    if let Some(why) = self.changed(path) {
                        self.reopen(path, &why)?;
                        return Ok(Fill::Dropped(DropReason::ShortFrame));
                    }
                }
                if !self.read_failed {
                    self.read_failed = true;
                    replay_warn!(
                        "replay {}: reading the image at byte {}: {e}; dropped, and later \
                         failed reads counted without a log until one reads",
                        path.display(),
                        span.start
                    );
                }
                return Ok(Fill::Dropped(DropReason::ShortFrame));
            }
            self.read_failed = false;
            let started = Instant::now();
            let pitch = self.layout.stride as usize;
            match self
                .decoder
                .decode(&self.bytes, self.size, self.scale, out, pitch)
            {
                Ok(()) => return Ok(Fill::Decoded(started.elapsed())),
                Err(e) => Some(e),
            }
        } else {
            None
        };
        if !self.logged {
            self.logged = true;
            let why = match problem {
                Some(e) => e.to_string(),
                None => "cut short: the next image or the file's end comes before its \
                         end-of-image marker"
                    .into(),
            };
            replay_warn!(
                "replay {}: the image at byte {} is corrupt ({why}); dropped as \
                 corrupt_frame, and later ones counted without a log",
                path.display(),
                span.start
            );
        }
        Ok(Fill::Dropped(DropReason::CorruptFrame))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The smallest frame header: SOF0 of 8x8, one component.
    const SOF: [u8; 13] = [0xFF, 0xC0, 0, 11, 8, 0, 8, 0, 8, 1, 1, 0x11, 0];

    /// A minimal image: SOI, a frame header, a scan of `data`, EOI.
    fn image(data: &[u8]) -> Vec<u8> {
        let mut out = vec![0xFF, 0xD8];
        out.extend(SOF);
        out.extend([0xFF, 0xDA, 0x00, 0x02]);
        out.extend(data);
        out.extend([0xFF, 0xD9]);
        out
    }

    /// `head`, then `body` repeated up to `len` bytes in all: a recording too large to
    /// write out, made as it is read.
    struct Shaped {
        head: Vec<u8>,
        body: Vec<u8>,
        len: u64,
        at: u64,
    }

    impl Read for Shaped {
        fn read(&mut self, out: &mut [u8]) -> std::io::Result<usize> {
            let mut n = 0;
            while n < out.len() && self.at < self.len {
                let at = self.at as usize;
                out[n] = match self.head.get(at) {
                    Some(&b) => b,
                    None => self.body[(at - self.head.len()) % self.body.len()],
                };
                n += 1;
                self.at += 1;
            }
            Ok(n)
        }
    }

    /// Runs `check` in a child process (this test binary, test `name` alone) whose
    /// address space may grow by at most `margin` bytes once `check` starts: an index
    /// that holds memory in proportion to the file fails to allocate and aborts.
    fn with_memory_bound(name: &str, margin: u64, check: impl FnOnce()) {
        const CHILD: &str = "EDGESIGHT_BOUNDED_CHILD";
        if std::env::var_os(CHILD).is_some() {
            let status = std::fs::read_to_string("/proc/self/status").unwrap();
            let kib: u64 = status
                .lines()
                .find_map(|l| l.strip_prefix("VmSize:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
                .expect("VmSize in /proc/self/status");
            let bound = kib * 1024 + margin;
            let limit = libc::rlimit {
                rlim_cur: bound,
                rlim_max: bound,
            };
            // SAFETY: setrlimit reads the struct it is given, which lives across the call.
            assert_eq!(unsafe { libc::setrlimit(libc::RLIMIT_AS, &limit) }, 0);
            check();
            return;
        }
        let out = std::process::Command::new(std::env::current_exe().unwrap())
            .args([name, "--exact", "--test-threads=1", "--nocapture"])
            .env(CHILD, "1")
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{name} in {} MiB more: {}\n{}",
            margin >> 20,
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
    }

    /// Issue 46 item 3: a recording of 4-byte images (`FF D8 FF D9` repeated) took 24 bytes
    /// of index per 4 bytes of file, 700 MB for 100 MB, and the daemon was killed for its
    /// memory. Such images cannot be frames and are left out; an index of images that
    /// could be is held to MAX_IMAGES and past it refused.
    #[test]
    fn round3_3_tiny_images_take_no_index_and_the_index_is_bounded() {
        with_memory_bound(
            "capture::replay::mjpeg::tests::round3_3_tiny_images_take_no_index_and_the_index_is_bounded",
            32 << 20,
            || {
                let tiny = Shaped {
                    head: Vec::new(),
                    body: vec![0xFF, 0xD8, 0xFF, 0xD9],
                    len: 64 << 20,
                    at: 0,
                };
                let started = Instant::now();
                assert_eq!(index(tiny).unwrap(), vec![]);
                eprintln!("64 MiB of 4-byte images indexed in {:?}", started.elapsed());
            },
        );
        // The smallest images that could be frames, one more than the index takes.
        let frame = image(&[1]);
        let count = MAX_IMAGES as u64 + 1;
        let many = Shaped {
            head: Vec::new(),
            len: frame.len() as u64 * count,
            body: frame,
            at: 0,
        };
        assert_eq!(
            index(many).unwrap_err().to_string(),
            "holds more than 1048576 JPEG images; replay a shorter recording (split it, or \
             take one image in N with ffmpeg)"
        );
    }

    /// Issue 46 item 4: an image whose header is damaged near the start of a long tail
    /// with no image after it: the index held the whole tail and searched it again for
    /// each MiB read (memory in proportion to the file, time to its square; 600 MB was
    /// killed for its memory after 136 s). Now each byte is read once, no more than a
    /// block is held, and the damaged image is cut at the largest size an image may have.
    #[test]
    fn round3_4_a_damaged_header_before_a_long_tail_is_indexed_in_one_pass() {
        with_memory_bound(
            "capture::replay::mjpeg::tests::round3_4_a_damaged_header_before_a_long_tail_is_indexed_in_one_pass",
            32 << 20,
            || {
                let good = image(&[1, 2, 3]);
                let mut head = good.clone();
                // A frame header, then a zero byte where a marker should be.
                head.extend([0xFF, 0xD8]);
                head.extend(SOF);
                head.push(0);
                let damaged = good.len() as u64;
                let tail = Shaped {
                    head,
                    body: vec![0],
                    len: 256 << 20,
                    at: 0,
                };
                let started = Instant::now();
                let spans = index(tail).unwrap();
                eprintln!("256 MiB after a damaged header indexed in {:?}", started.elapsed());
                assert_eq!(
                    spans,
                    vec![
                        Span {
                            start: 0,
                            len: good.len() as _,
                            whole: true
                        },
                        Span {
                            start: damaged,
                            len: MAX_IMAGE_FILE_BYTES as _,
                            whole: false
                        },
                    ]
                );
            },
        );
    }

    #[test]
    fn a_stream_is_cut_into_its_images_across_blocks_padding_and_damage() {
        let a = image(&[1, 2, 3]);
        let big = image(&vec![7u8; BLOCK + 5]);
        let mut stream = Vec::new();
        stream.extend(&a);
        // Padding between images, as some cameras' buffers carry.
        stream.extend([0u8; 9]);
        let b_start = stream.len();
        stream.extend(&big);
        // An image cut short by the next one.
        let c_start = stream.len();
        stream.extend(&a[..a.len() - 2]);
        let d_start = stream.len();
        stream.extend(&a);
        // The file ends inside an image.
        let e_start = stream.len();
        stream.extend(&a[..a.len() - 3]);
        let spans = index(&stream[..]).unwrap();
        let span = |start: usize, len: usize, whole| Span {
            start: start as u64,
            len: len as u32,
            whole,
        };
        assert_eq!(
            spans,
            vec![
                span(0, a.len(), true),
                span(b_start, big.len(), true),
                span(c_start, a.len() - 2, false),
                span(d_start, a.len(), true),
                span(e_start, a.len() - 3, false),
            ]
        );
        assert_eq!(index(&b"no images here"[..]).unwrap(), vec![]);
    }
}
