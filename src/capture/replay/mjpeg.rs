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
use crate::frame::{FrameLayout, PixelFormat, Size};
use crate::input::MAX_IMAGE_FILE_BYTES;
use crate::jpeg::{self, LumaDecoder, Scale, Unwhole, Walk};

/// Bytes read at a time while indexing.
const BLOCK: usize = 1 << 20;

/// One image's place in the file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Span {
    pub start: u64,
    pub len: usize,
    /// Whether the walk reached its end-of-image marker before another image began.
    pub whole: bool,
}

/// Where the images of the MJPEG stream read from `reader` lie; `None` if no image starts
/// anywhere in it.
pub(super) fn index(mut reader: impl Read) -> std::io::Result<Vec<Span>> {
    let mut spans = Vec::new();
    // `buf` holds the file from offset `base`; `pos` is where the search goes on.
    let (mut buf, mut base, mut pos, mut eof) = (Vec::new(), 0u64, 0usize, false);
    let mut more = |buf: &mut Vec<u8>, eof: &mut bool| -> std::io::Result<()> {
        let have = buf.len();
        buf.resize(have + BLOCK, 0);
        let n = reader.read(&mut buf[have..])?;
        buf.truncate(have + n);
        *eof = n == 0;
        Ok(())
    };
    loop {
        let Some(start) = jpeg::next_image(&buf, pos) else {
            if eof {
                break;
            }
            // Keep the last two bytes: an image's first ones may straddle the blocks.
            let keep = buf.len().saturating_sub(2).max(pos);
            base += keep as u64;
            buf.drain(..keep);
            pos = 0;
            more(&mut buf, &mut eof)?;
            continue;
        };
        let found = match jpeg::walk(&buf[start..]) {
            Walk::Whole(end) => Some((end, true)),
            Walk::Unwhole(Unwhole::Cut(next)) => Some((next, false)),
            // An image larger than any frame is damage: cut it where it has grown to.
            Walk::Unwhole(Unwhole::Short { .. })
                if eof || (buf.len() - start) as u64 > MAX_IMAGE_FILE_BYTES =>
            {
                Some((buf.len() - start, false))
            }
            Walk::Unwhole(Unwhole::Short { .. }) => None,
            Walk::Unwhole(_) => match jpeg::next_image(&buf, start + 2) {
                Some(next) => Some((next - start, false)),
                None if eof => Some((buf.len() - start, false)),
                None => None,
            },
        };
        match found {
            Some((len, whole)) => {
                spans.push(Span {
                    start: base + start as u64,
                    len,
                    whole,
                });
                pos = start + len;
            }
            None => {
                pos = start;
                more(&mut buf, &mut eof)?;
            }
        }
        if pos > BLOCK {
            base += pos as u64;
            buf.drain(..pos);
            pos = 0;
        }
    }
    Ok(spans)
}

/// An MJPEG recording being played.
pub(super) struct MjpegFile {
    file: File,
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
}

impl MjpegFile {
    /// Indexes `path` and takes the size of its first image that decodes.
    pub fn open(path: &Path, scale: Scale) -> Result<MjpegFile, CaptureError> {
        let fail = |message: String| source_error(path, message);
        let (file, _) = crate::files::open_regular(path).map_err(|e| {
            fail(match e {
                crate::files::OpenError::Io(e) => e.to_string(),
                crate::files::OpenError::NotRegular(kind) => {
                    format!("not a directory of images or a file, but {kind}")
                }
            })
        })?;
        let spans = index(&file).map_err(|e| fail(format!("reading it: {e}")))?;
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
            bytes.resize(span.len, 0);
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
                        spans,
                        size,
                        scale,
                        layout,
                        decoder,
                        bytes,
                        logged: false,
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

    /// Images in one loop, whole or not.
    pub fn count(&self) -> usize {
        self.spans.len()
    }

    /// Decodes frame `sequence` of the loop into `out`. A corrupt frame costs no
    /// allocation (its reason is made into text only for the one log line).
    pub fn fill(&mut self, path: &Path, sequence: u64, out: &mut [u8]) -> Fill {
        let span = self.spans[(sequence % self.spans.len() as u64) as usize];
        let problem = if span.whole {
            self.bytes.resize(span.len, 0);
            if let Err(e) = self.file.read_exact_at(&mut self.bytes, span.start) {
                replay_warn!(
                    "replay {}: reading the image at byte {}: {e}; dropped",
                    path.display(),
                    span.start
                );
                return Fill::Dropped(DropReason::ShortFrame);
            }
            let started = Instant::now();
            let pitch = self.layout.stride as usize;
            match self
                .decoder
                .decode(&self.bytes, self.size, self.scale, out, pitch)
            {
                Ok(()) => return Fill::Decoded(started.elapsed()),
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
        Fill::Dropped(DropReason::CorruptFrame)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A minimal image: SOI, a scan of `data`, EOI.
    fn image(data: &[u8]) -> Vec<u8> {
        let mut out = vec![0xFF, 0xD8, 0xFF, 0xDA, 0x00, 0x02];
        out.extend(data);
        out.extend([0xFF, 0xD9]);
        out
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
        stream.extend(&a[..8]);
        let d_start = stream.len();
        stream.extend(&a);
        // The file ends inside an image.
        let e_start = stream.len();
        stream.extend(&a[..7]);
        let spans = index(&stream[..]).unwrap();
        let span = |start: usize, len: usize, whole| Span {
            start: start as u64,
            len,
            whole,
        };
        assert_eq!(
            spans,
            vec![
                span(0, a.len(), true),
                span(b_start, big.len(), true),
                span(c_start, 8, false),
                span(d_start, a.len(), true),
                span(e_start, 7, false),
            ]
        );
        assert_eq!(index(&b"no images here"[..]).unwrap(), vec![]);
    }
}
