//! Walking a JPEG's markers without decoding it: where an image ends (its EOI), whether it
//! is whole, and where the images of a concatenated MJPEG stream begin and end.
//!
//! The walk skips each segment by its length (so an EXIF thumbnail, itself a JPEG inside
//! an APP1 segment, is never mistaken for an image) and each scan's entropy-coded data to
//! the next marker. A start-of-image marker where a marker is expected means another image
//! began before this one ended: a frame cut short, as a starved USB bus or a lost packet
//! leaves it in a camera's stream.

/// What a walk from a start-of-image marker found. Plain values, so that a damaged frame
/// costs no allocation until someone asks what was wrong ([`Unwhole`]'s `Display`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Walk {
    /// A whole image, ending just before this offset (just past its EOI).
    Whole(usize),
    /// Why the walk did not reach an EOI.
    Unwhole(Unwhole),
}

/// Why an image is not whole.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Unwhole {
    /// Another image starts at this offset before this one's EOI.
    Cut(usize),
    /// The bytes (this many) end inside this part, before the EOI; more data may complete
    /// the image.
    Short {
        /// The data's length in bytes.
        len: usize,
        /// The part of the image the data ends in.
        inside: Part,
    },
    /// No start-of-image marker at the start.
    NoStart,
    /// A byte other than 0xFF where a marker should be.
    NotAMarker {
        /// Byte offset where a marker was expected.
        at: usize,
        /// The byte found there.
        byte: u8,
    },
    /// A segment length below 2.
    SegmentLength {
        /// Byte offset of the segment's two-byte length field.
        at: usize,
        /// The length it gives, in bytes (which counts the field itself).
        len: usize,
    },
}

/// Where the data of an image ran out.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Part {
    /// The first two bytes: the start-of-image marker.
    StartMarker,
    /// Where the next marker should begin, between segments or after a scan.
    Headers,
    /// A marker: after its 0xFF byte(s), before its code.
    Marker,
    /// A segment's two-byte length.
    SegmentLength,
    /// A segment of this many bytes.
    Segment(usize),
    /// A scan's entropy-coded data, before the marker that ends it.
    Scan,
}

impl std::error::Error for Unwhole {}

impl std::fmt::Display for Unwhole {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match *self {
            Unwhole::Cut(next) => write!(
                f,
                "another image starts at byte {next}, before this one's end-of-image marker"
            ),
            Unwhole::Short { len, inside } => {
                write!(f, "the data ends at byte {len} in ")?;
                match inside {
                    Part::StartMarker => f.write_str("the start-of-image marker")?,
                    Part::Headers => f.write_str("the headers")?,
                    Part::Marker => f.write_str("a marker")?,
                    Part::SegmentLength => f.write_str("a segment length")?,
                    Part::Segment(n) => write!(f, "a {n}-byte segment")?,
                    Part::Scan => f.write_str("a scan")?,
                }
                f.write_str(", before the end-of-image marker")
            }
            Unwhole::NoStart => f.write_str("no start-of-image marker"),
            Unwhole::NotAMarker { at, byte } => {
                write!(f, "byte {at} is {byte:#04x} where a marker should be")
            }
            Unwhole::SegmentLength { at, len } => {
                write!(f, "the segment at byte {at} has a length of {len}")
            }
        }
    }
}

/// Walks the image that starts at `bytes[0]`; see [`Walk`]. Bytes after its EOI are not
/// looked at.
pub fn walk(bytes: &[u8]) -> Walk {
    walk_noting(bytes, &mut Notes::default())
}

/// What a walk noted of an image's headers on its way.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(super) struct Notes {
    /// The image defines Huffman tables (a DHT segment): MJPEG frames in the AVI1 style
    /// leave them out and mean the standard ones.
    pub huffman_tables: bool,
    /// Width and height from the (first) frame header, SOF0 to SOF15.
    pub size: Option<(u16, u16)>,
    /// Scans (SOS segments) walked: a progressive image's data is decoded once per scan.
    pub scans: u32,
}

/// [`walk`], noting what [`Notes`] holds.
pub(super) fn walk_noting(bytes: &[u8], notes: &mut Notes) -> Walk {
    let short = |inside| {
        Walk::Unwhole(Unwhole::Short {
            len: bytes.len(),
            inside,
        })
    };
    match bytes.get(..2) {
        Some([0xFF, 0xD8]) => {}
        Some(_) => return Walk::Unwhole(Unwhole::NoStart),
        None => return short(Part::StartMarker),
    }
    let mut at = 2;
    loop {
        // A marker is 0xFF, any number of 0xFF fill bytes, then its code.
        let start = at;
        match bytes.get(at) {
            Some(0xFF) => {}
            None => return short(Part::Headers),
            Some(&byte) => return Walk::Unwhole(Unwhole::NotAMarker { at, byte }),
        }
        while bytes.get(at) == Some(&0xFF) {
            at += 1;
        }
        let Some(&code) = bytes.get(at) else {
            return short(Part::Marker);
        };
        at += 1;
        match code {
            0xD9 => return Walk::Whole(at),
            0xD8 => return Walk::Unwhole(Unwhole::Cut(start)),
            // Markers without a segment: TEM, RST0-7.
            0x01 | 0xD0..=0xD7 => continue,
            _ => {}
        }
        let Some(len) = bytes
            .get(at..at + 2)
            .map(|b| usize::from(b[0]) << 8 | usize::from(b[1]))
        else {
            return short(Part::SegmentLength);
        };
        if len < 2 {
            return Walk::Unwhole(Unwhole::SegmentLength { at, len });
        }
        notes.huffman_tables |= code == 0xC4;
        notes.scans += u32::from(code == 0xDA);
        // SOF0-SOF15 (not DHT, JPG or DAC): precision, then height and width.
        if (0xC0..=0xCF).contains(&code) && !matches!(code, 0xC4 | 0xC8 | 0xCC) {
            if let (None, Some(h)) = (notes.size, bytes.get(at + 3..at + 7)) {
                let word = |i: usize| u16::from(h[i]) << 8 | u16::from(h[i + 1]);
                notes.size = Some((word(2), word(0)));
            }
        }
        at += len;
        if at > bytes.len() {
            return short(Part::Segment(len));
        }
        if code == 0xDA {
            match scan_end(bytes, at) {
                Some(end) => at = end,
                None => return short(Part::Scan),
            }
        }
    }
}

/// The offset just past the EOI of the image `bytes` holds, or why the walk could not
/// reach it (the data ends early, another image starts first, or it is no JPEG).
pub fn jpeg_end(bytes: &[u8]) -> Result<usize, Unwhole> {
    walk(bytes).end()
}

impl Walk {
    /// The offset just past the image's EOI, or why the walk did not reach it.
    pub fn end(self) -> Result<usize, Unwhole> {
        match self {
            Walk::Whole(end) => Ok(end),
            Walk::Unwhole(why) => Err(why),
        }
    }
}

/// The offset of the marker that ends the entropy-coded data starting at `at`: 0xFF then
/// a code other than 0x00 (a stuffed 0xFF), RST0-7 (inside the scan) or a fill byte.
fn scan_end(bytes: &[u8], mut at: usize) -> Option<usize> {
    loop {
        // memchr's SIMD search: the scan is most of a frame's bytes, and a byte-at-a-time
        // search was a noticeable share of the decode
        // (bench/notes/cameras-formats.md#jpeg-decoders).
        at += memchr::memchr(0xFF, bytes.get(at..)?)?;
        let mut code = at + 1;
        while bytes.get(code) == Some(&0xFF) {
            code += 1;
        }
        match bytes.get(code)? {
            0x00 | 0xD0..=0xD7 => at = code + 1,
            _ => return Some(at),
        }
    }
}

/// Where the next image starts at or after `from`: the first start-of-image marker
/// followed by another marker (`FF D8 FF`), skipping padding or damage between images.
pub fn next_image(bytes: &[u8], from: usize) -> Option<usize> {
    bytes
        .get(from..)?
        .windows(3)
        .position(|w| w == [0xFF, 0xD8, 0xFF])
        .map(|p| from + p)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_walk_skips_stuffing_restarts_and_fill_bytes() {
        // An APP0 segment whose payload holds an EOI and an SOI is skipped by its length.
        let mut jpeg = vec![
            0xFF, 0xD8, 0xFF, 0xE0, 0x00, 0x06, 0xFF, 0xD9, 0xFF, 0xD8, 0xFF, 0xD9,
        ];
        assert_eq!(jpeg_end(&jpeg), Ok(12));
        assert!(jpeg_end(&jpeg[..10]).is_err());
        jpeg.truncate(10);
        // SOS header (length 3: one byte), then data with a stuffed 0xFF, a restart
        // marker, fill bytes and the EOI.
        jpeg.extend([
            0xFF, 0xDA, 0x00, 0x03, 0x01, 0x12, 0xFF, 0x00, 0x34, 0xFF, 0xD3,
        ]);
        jpeg.extend([0x56, 0xFF, 0xFF, 0xD9, 0xAA]);
        assert_eq!(jpeg_end(&jpeg), Ok(jpeg.len() - 1));
        for cut in 0..jpeg.len() - 1 {
            assert!(
                matches!(
                    walk(&jpeg[..cut]),
                    Walk::Unwhole(Unwhole::Short { .. } | Unwhole::NoStart)
                ),
                "cut at {cut} accepted"
            );
        }
    }

    #[test]
    fn the_walk_notes_the_frame_size_and_huffman_tables() {
        // SOI, DHT (2 bytes of payload), SOF2 of 640x480 (precision, height, width, one
        // component), SOS, a byte of data, EOI.
        let mut jpeg = vec![0xFF, 0xD8, 0xFF, 0xC4, 0x00, 0x04, 0x00, 0x00];
        jpeg.extend([
            0xFF, 0xC2, 0x00, 0x0B, 8, 0x01, 0xE0, 0x02, 0x80, 1, 1, 0x11, 0,
        ]);
        jpeg.extend([0xFF, 0xDA, 0x00, 0x02, 0x12, 0xFF, 0xD9]);
        let mut notes = Notes::default();
        assert_eq!(walk_noting(&jpeg, &mut notes), Walk::Whole(jpeg.len()));
        assert_eq!(
            notes,
            Notes {
                huffman_tables: true,
                size: Some((640, 480)),
                scans: 1,
            }
        );
        // Without the DHT segment.
        let bare: Vec<u8> = jpeg[..2].iter().chain(&jpeg[8..]).copied().collect();
        let mut notes = Notes::default();
        assert_eq!(walk_noting(&bare, &mut notes), Walk::Whole(bare.len()));
        assert!(!notes.huffman_tables);
        assert_eq!(notes.size, Some((640, 480)));
    }

    #[test]
    fn an_image_cut_by_the_next_one_is_cut_where_that_one_starts() {
        let whole = [
            0xFF, 0xD8, 0xFF, 0xDA, 0x00, 0x03, 0x01, 0x12, 0x34, 0xFF, 0xD9,
        ];
        // The first image loses its tail; the second starts right after the scan data.
        let mut stream = whole[..8].to_vec();
        stream.extend(whole);
        assert_eq!(walk(&stream), Walk::Unwhole(Unwhole::Cut(8)));
        assert_eq!(walk(&stream[8..]), Walk::Whole(whole.len()));
        assert_eq!(
            jpeg_end(&stream).unwrap_err().to_string(),
            "another image starts at byte 8, before this one's end-of-image marker"
        );
        // Between images: padding, then garbage with a lone FF D8; the next image is the
        // one followed by a marker.
        let mut padded = whole.to_vec();
        padded.extend([0, 0, 0xFF, 0xD8, 0x00, 7]);
        padded.extend(whole);
        assert_eq!(next_image(&padded, whole.len()), Some(whole.len() + 6));
        assert_eq!(next_image(&padded, whole.len() + 7), None);
        let why = |bytes: &[u8]| {
            let e = jpeg_end(bytes).unwrap_err();
            (e, e.to_string())
        };
        assert_eq!(
            why(b"\xFF\xD8\x00"),
            (
                Unwhole::NotAMarker { at: 2, byte: 0 },
                "byte 2 is 0x00 where a marker should be".into()
            )
        );
        assert_eq!(
            why(b"GIF89a"),
            (Unwhole::NoStart, "no start-of-image marker".into())
        );
        assert_eq!(
            why(b"\xFF\xD8\xFF\xE0\x00\x10ab"),
            (
                Unwhole::Short {
                    len: 8,
                    inside: Part::Segment(16)
                },
                "the data ends at byte 8 in a 16-byte segment, before the end-of-image marker"
                    .into()
            )
        );
        assert!(matches!(
            walk(b""),
            Walk::Unwhole(Unwhole::Short {
                len: 0,
                inside: Part::StartMarker
            })
        ));
    }
}
