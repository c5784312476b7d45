//! The raw sensor formats (raw.cl): every mono storage and Bayer pattern, packed from the
//! formats' definitions, at the edges of the vector runs, with padded rows and bits above
//! the depth, and rounding to 8 bits half up with saturation.

use crate::common::{assert_image_eq, gpu, Rng};
use crate::{check_frame, check_frame_with};
use edgesight::frame::{Cfa, FrameLayout, PixelFormat, Samples};
use edgesight::pipeline::{PipelineOptions, Setup, Tuning};
use edgesight::reference;

/// The raw sensor formats: every wide mono storage, and every Bayer pattern at every
/// storage (8-bit mono is grey, which luma.cl reads).
pub(crate) fn raw_sensor_formats() -> Vec<PixelFormat> {
    let mono = Samples::ALL
        .into_iter()
        .filter(|&s| s != Samples::Eight)
        .map(PixelFormat::Mono);
    let bayer = Cfa::ALL
        .into_iter()
        .flat_map(|cfa| Samples::ALL.map(|s| PixelFormat::Bayer(cfa, s)));
    mono.chain(bayer).collect()
}

/// One row of samples stored as `samples` says, written from the formats' definitions
/// rather than from the reference's reading of them, so the test checks that reading too.
/// A partial MIPI group's missing samples are noise, which must not leak in.
fn pack_row(samples: Samples, row: &[u16], rng: &mut Rng) -> Vec<u8> {
    let (per_group, low_bits) = match samples {
        Samples::Eight => return row.iter().map(|&v| v as u8).collect(),
        Samples::Le10 | Samples::Le12 | Samples::Le16 => {
            return row.iter().flat_map(|v| v.to_le_bytes()).collect()
        }
        Samples::Mipi10 => (4, 2),
        Samples::Mipi12 => (2, 4),
    };
    let mut bytes = Vec::new();
    for group in row.chunks(per_group) {
        let mut low = 0u8;
        for k in 0..per_group {
            let v = match group.get(k) {
                Some(&v) => v,
                None => rng.below(1 << (8 + low_bits)) as u16,
            };
            bytes.push((v >> low_bits) as u8);
            low |= ((v & ((1 << low_bits) - 1)) as u8) << (low_bits * k);
        }
        bytes.push(low);
    }
    bytes
}

/// A stored word reduced to 8 bits: round half up, saturate.
fn eight_bits(v: u16, samples: Samples) -> u8 {
    let shift = samples.bits() - 8;
    if shift == 0 {
        return v as u8;
    }
    ((u32::from(v) + (1 << (shift - 1))) >> shift).min(255) as u8
}

/// A random sample of `samples`' depth: an eighth of them just below a rounding boundary
/// (the bits shifted out are 2^(s-1) - 1), an eighth on one (2^(s-1)), a sixteenth among
/// the top 2^(s+1) values, where rounding saturates. With `above_depth`, a quarter of the
/// words have bits set above the depth.
fn raw_sample(rng: &mut Rng, samples: Samples, above_depth: bool) -> u16 {
    let bits = samples.bits();
    let full = 1u64 << bits;
    if bits == 8 {
        return rng.below(full) as u16;
    }
    assert!(
        !above_depth || bits < 16,
        "16-bit words have no bits above their depth"
    );
    let shift = bits - 8;
    let half = 1u64 << (shift - 1);
    let v = match rng.below(16) {
        0 | 1 => rng.below(256) << shift | (half - 1),
        2 | 3 => rng.below(256) << shift | half,
        4 => full - 1 - rng.below(4 * half),
        12.. if above_depth => full + rng.below((1 << 16) - full),
        _ => rng.below(full),
    };
    v as u16
}

/// A raw sensor frame of random samples, its rows `padding` bytes longer than they need
/// (noise in between), and the luma it must give, worked out here from the samples: each
/// reduced to 8 bits and, for a Bayer mosaic, demosaicked by `reference::bayer_to_luma`
/// (which the OpenCV conformance test holds to `cv2.cvtColor`).
fn raw_frame(
    rng: &mut Rng,
    format: PixelFormat,
    (w, h): (u32, u32),
    padding: u32,
    above_depth: bool,
) -> (FrameLayout, Vec<u8>, Vec<u8>) {
    let samples = format.samples().expect("a raw sensor format");
    let layout = FrameLayout {
        stride: format.row_bytes(w) as u32 + padding,
        ..FrameLayout::packed(format, w, h)
    };
    let rows: Vec<Vec<u16>> = (0..h)
        .map(|_| {
            (0..w)
                .map(|_| raw_sample(rng, samples, above_depth))
                .collect()
        })
        .collect();
    let (frame, luma) = frame_of_rows(rng, layout, &rows);
    (layout, frame, luma)
}

/// `rows` of samples stored in a frame of `layout` (noise between the rows), and the luma
/// they must give.
fn frame_of_rows(rng: &mut Rng, layout: FrameLayout, rows: &[Vec<u16>]) -> (Vec<u8>, Vec<u8>) {
    let samples = layout.format.samples().expect("a raw sensor format");
    let mut frame = rng.bytes(layout.frame_bytes());
    for (y, row) in rows.iter().enumerate() {
        let bytes = pack_row(samples, row, rng);
        assert_eq!(bytes.len() as u64, layout.format.row_bytes(layout.width));
        let start = y * layout.stride as usize;
        frame[start..start + bytes.len()].copy_from_slice(&bytes);
    }
    let mosaic: Vec<u8> = rows
        .iter()
        .flatten()
        .map(|&v| eight_bits(v, samples))
        .collect();
    let (w, h) = (layout.width as usize, layout.height as usize);
    let luma = match layout.format {
        PixelFormat::Bayer(cfa, _) => reference::bayer_to_luma(&mosaic, w, h, cfa),
        _ => mosaic,
    };
    (frame, luma)
}

/// Every raw sensor format through the pipeline: sizes below Bayer's 3x3 (all 0) and at
/// it, widths on either side of raw.cl's 16-pixel vector runs (a mono row takes them from
/// pixel 0, a Bayer row from pixel 16 while 16 more fit before its last pixel: widths 33
/// and 49 on), each frame packed and with rows padded by an odd number of bytes, the 10
/// and 12-bit words with bits above their depth in the padded frames. Each runs with a
/// tuning of streaming stores and one of cached stores (the only tuning choice the luma
/// stage sees), and one frame of each format with every tuning.
#[test]
fn raw_sensor_formats_at_the_vector_runs_edges() {
    let gpu = gpu();
    let mut rng = Rng::new(10);
    let options = PipelineOptions::default();
    let sizes = [
        (1, 1),
        (2, 2),
        (3, 3),
        (2, 5),
        (5, 2),
        (16, 3),
        (17, 3),
        (18, 4),
        (19, 3),
        (32, 3),
        (33, 5),
        (34, 3),
        (35, 4),
        (48, 3),
        (49, 3),
        (50, 4),
    ];
    for format in raw_sensor_formats() {
        let wide_words = matches!(format.samples(), Some(Samples::Le10 | Samples::Le12));
        for size in sizes {
            for padding in [0, 1 + 2 * rng.below(8) as u32] {
                let above_depth = wide_words && padding > 0;
                let (layout, frame, luma) = raw_frame(&mut rng, format, size, padding, above_depth);
                let label = format!("{format} {}x{} stride {}", size.0, size.1, layout.stride);
                let reference = reference::luma(&layout, &frame);
                assert_image_eq("reference luma", &label, size.0 as usize, &reference, &luma);
                for tuning in [Tuning::FOR_CPU, Tuning::FOR_GPU] {
                    let setup = Setup::with_tuning(tuning);
                    check_frame_with(&gpu, layout, options, setup, &frame, &[]);
                }
            }
        }
        let (layout, frame, _) = raw_frame(&mut rng, format, (35, 5), 3, wide_words);
        check_frame(&gpu, layout, options, &frame, &[]);
    }
}

/// Every raw sensor format at 641x479 (many work-groups, a row's last run partial), packed,
/// and one of each storage with padded rows and every tuning.
#[test]
fn raw_sensor_formats_at_641x479() {
    let gpu = gpu();
    let mut rng = Rng::new(641);
    let options = PipelineOptions::default();
    for format in raw_sensor_formats() {
        let (layout, frame, luma) = raw_frame(&mut rng, format, (641, 479), 0, false);
        let label = format!("{format} 641x479");
        assert_image_eq(
            "reference luma",
            &label,
            641,
            &reference::luma(&layout, &frame),
            &luma,
        );
        for tuning in [Tuning::FOR_CPU, Tuning::FOR_GPU] {
            let setup = Setup::with_tuning(tuning);
            check_frame_with(&gpu, layout, options, setup, &frame, &[]);
        }
    }
    for (n, samples) in Samples::ALL.into_iter().enumerate() {
        let format = PixelFormat::Bayer(Cfa::ALL[n % Cfa::ALL.len()], samples);
        let above_depth = matches!(samples, Samples::Le10 | Samples::Le12);
        let (layout, frame, _) = raw_frame(&mut rng, format, (641, 479), 5, above_depth);
        check_frame(&gpu, layout, options, &frame, &[]);
    }
}

/// Words on either side of each rounding boundary and of saturation, with the 8-bit values
/// they must give. 10 bits: 513 = 128 * 4 + 1 rounds down, 514 up; 1018 = 254 * 4 + 2
/// rounds up to 255, 1022 would round to 256 and saturates; a word of 1024 or more has a
/// bit above the depth.
const TEN_BITS: [(u16, u8); 14] = [
    (0, 0),
    (1, 0),
    (2, 1),
    (513, 128),
    (514, 129),
    (1017, 254),
    (1018, 255),
    (1021, 255),
    (1022, 255),
    (1023, 255),
    (1024, 255),
    (1025, 255),
    (0x8000, 255),
    (0xFFFF, 255),
];
const TWELVE_BITS: [(u16, u8); 14] = [
    (7, 0),
    (8, 1),
    (0x807, 128),
    (0x808, 129),
    (4071, 254),
    (4072, 255),
    (4087, 255),
    (4088, 255),
    (4095, 255),
    (4096, 255),
    (4103, 255),
    (0x0FFF | 0x2000, 255),
    (0x8000, 255),
    (0xFFFF, 255),
];
const SIXTEEN_BITS: [(u16, u8); 10] = [
    (127, 0),
    (128, 1),
    (0x807F, 128),
    (0x8080, 129),
    (0xFE7F, 254),
    (0xFE80, 255),
    (0xFF7F, 255),
    (0xFF80, 255),
    (0xFFFE, 255),
    (0xFFFF, 255),
];

/// The words of `samples` and their 8-bit values (those a MIPI group can hold).
fn boundary_words(samples: Samples) -> Vec<(u16, u8)> {
    let words: &[(u16, u8)] = match samples {
        Samples::Le10 | Samples::Mipi10 => &TEN_BITS,
        Samples::Le12 | Samples::Mipi12 => &TWELVE_BITS,
        Samples::Le16 => &SIXTEEN_BITS,
        Samples::Eight => &[(0, 0), (1, 1), (254, 254), (255, 255)],
    };
    let depth = 1u32 << samples.bits();
    let mipi = matches!(samples, Samples::Mipi10 | Samples::Mipi12);
    words
        .iter()
        .copied()
        .filter(|&(v, _)| !mipi || u32::from(v) < depth)
        .collect()
}

/// Each boundary word in a mono frame, in every column of a 40-pixel row (two vector
/// runs, then the scalar end), and in a Bayer mosaic of stripes three columns wide, each
/// of one word: a stripe's middle column sees only its own word, and OpenCV's weights add
/// up to 1, so its luma is the word's 8-bit value. Every tuning, rows padded.
#[test]
fn raw_samples_round_half_up_and_saturate() {
    let gpu = gpu();
    let mut rng = Rng::new(1018);
    let options = PipelineOptions::default();
    for samples in Samples::ALL {
        let words = boundary_words(samples);
        let n = words.len();
        let mut formats: Vec<PixelFormat> = Cfa::ALL
            .into_iter()
            .map(|cfa| PixelFormat::Bayer(cfa, samples))
            .collect();
        if samples != Samples::Eight {
            formats.push(PixelFormat::Mono(samples));
        }
        for format in formats {
            let bayer = matches!(format, PixelFormat::Bayer(..));
            let (w, h) = if bayer {
                (3 * n as u32, 4)
            } else {
                (40, n as u32)
            };
            let layout = FrameLayout {
                stride: format.row_bytes(w) as u32 + 7,
                ..FrameLayout::packed(format, w, h)
            };
            let word_at = |x: usize, y: usize| if bayer { x / 3 } else { (x + y) % n };
            let rows: Vec<Vec<u16>> = (0..h as usize)
                .map(|y| (0..w as usize).map(|x| words[word_at(x, y)].0).collect())
                .collect();
            let (frame, luma) = frame_of_rows(&mut rng, layout, &rows);
            let label = format!("{format} boundary words");
            for y in 0..h as usize {
                for x in (0..w as usize).filter(|x| !bayer || x % 3 == 1) {
                    let (word, want) = words[word_at(x, y)];
                    assert_eq!(
                        luma[y * w as usize + x],
                        want,
                        "{label}: {word:#x} at ({x}, {y})"
                    );
                }
            }
            let reference = reference::luma(&layout, &frame);
            assert_image_eq("reference luma", &label, w as usize, &reference, &luma);
            check_frame(&gpu, layout, options, &frame, &[]);
        }
    }
}

/// Bayer flat fields, each colour one value, so every pixel's sum is the same:
/// 4 * (4899 r + 9617 g + 1868 b). (128, 12, 63) and (255, 199, 153) fall exactly halfway
/// between two luma values, 52.5 and 210.5, and round up, as OpenCV does; (126, 173, 134)
/// is 154.49994, just below a half. The words reduce to each value from either side of it:
/// rounding down on even rows, up on odd ones.
#[test]
fn bayer_flat_fields_round_ties_up() {
    let gpu = gpu();
    let mut rng = Rng::new(525);
    let options = PipelineOptions::default();
    let fields: [([u16; 3], u8); 3] = [
        ([128, 12, 63], 53),
        ([255, 199, 153], 211),
        ([126, 173, 134], 154),
    ];
    for cfa in Cfa::ALL {
        for samples in Samples::ALL {
            for ([r, g, b], want) in fields {
                let format = PixelFormat::Bayer(cfa, samples);
                let (w, h) = (37, 5);
                let layout = FrameLayout {
                    stride: format.row_bytes(w) as u32 + 3,
                    ..FrameLayout::packed(format, w, h)
                };
                let (red_x, red_y) = cfa.red_at();
                let shift = samples.bits() - 8;
                let word = |value: u16, y: u32| match shift {
                    0 => value,
                    _ if y.is_multiple_of(2) => value << shift | ((1 << (shift - 1)) - 1),
                    _ => (value - 1) << shift | 1 << (shift - 1),
                };
                let rows: Vec<Vec<u16>> = (0..h)
                    .map(|y| {
                        (0..w)
                            .map(|x| match (x % 2 == red_x, y % 2 == red_y) {
                                (true, true) => word(r, y),
                                (false, false) => word(b, y),
                                _ => word(g, y),
                            })
                            .collect()
                    })
                    .collect();
                let (frame, luma) = frame_of_rows(&mut rng, layout, &rows);
                let label = format!("{format} flat field {r} {g} {b}");
                let flat = vec![want; (w * h) as usize];
                assert_image_eq("luma", &label, w as usize, &luma, &flat);
                let reference = reference::luma(&layout, &frame);
                assert_image_eq("reference luma", &label, w as usize, &reference, &flat);
                for tuning in [Tuning::FOR_CPU, Tuning::FOR_GPU] {
                    let setup = Setup::with_tuning(tuning);
                    check_frame_with(&gpu, layout, options, setup, &frame, &[]);
                }
            }
        }
    }
}
