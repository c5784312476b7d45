//! Every kernel against its plain-Rust reference on the OpenCL device (POCL in CI): awkward
//! sizes, every pixel format, every border mode, strides wider than the width, guard bands
//! after every output, every tuning of `Tuning::ALL` with and without the full images
//! kept, and Otsu on the histograms where rounding decides ties.
//!
//! Over 500 lines as one room: one test binary, so that the emulated boards and the second
//! OpenCL implementation run it as one executable (tests/arm, tests/rusticl); each test is
//! a kernel's property against `reference`, and the length is the number of kernels.

mod common;

use common::{assert_image_eq, gpu, Rng};
use edgesight::cl::{launch, Gpu, KernelParams, Record};
use edgesight::frame::{Cfa, FrameLayout, PixelFormat, Samples};
use edgesight::health;
use edgesight::pipeline::{
    Border, FullImages, Magnitude, OtsuLaunch, Pipeline, PipelineError, PipelineOptions, Setup,
    ThresholdParams, Tuning,
};
use edgesight::reference;
use edgesight::region::{self, Region};
use opencl3::memory::Buffer;
use proptest::prelude::*;

/// Whether frames run through fewer setups (`EDGESIGHT_KERNEL_SETUPS=lean`): every tuning
/// with the full images discarded, one with them kept, no second Otsu launch. For
/// emulated boards (tests/arm/run.sh), where each setup costs seconds; the Otsu launches
/// keep their own tests.
fn lean_setups() -> bool {
    std::env::var("EDGESIGHT_KERNEL_SETUPS").is_ok_and(|v| v == "lean")
}

/// Runs one frame through the pipeline with every tuning, with the full images discarded
/// (as the daemon runs it) and kept (as `process --raw` does), and compares every output
/// with the reference: the results and pictures are the same either way, and the full
/// images are exact where kept.
fn check_frame(
    gpu: &Gpu,
    layout: FrameLayout,
    options: PipelineOptions,
    frame: &[u8],
    regions: &[Region],
) {
    let lean = lean_setups();
    for (i, (_, tuning)) in Tuning::ALL.into_iter().enumerate() {
        for images in [FullImages::Discarded, FullImages::Kept] {
            // Lean: every tuning as the daemon runs it, the full images with one.
            if lean && images == FullImages::Kept && i > 0 {
                continue;
            }
            let setup = Setup { tuning, images };
            check_frame_with(gpu, layout, options, setup, frame, regions);
        }
    }
    if lean {
        return;
    }
    // Otsu's other launch with each tuning's Sobel kernels: beside the CPU's runs and
    // Midgard's single runs of 16 pixels, on its own beside the GPU's four-pixel kernels.
    for (tuning, otsu_launch) in [
        (Tuning::FOR_CPU, OtsuLaunch::BesideSobel),
        (Tuning::FOR_MIDGARD, OtsuLaunch::BesideSobel),
        (Tuning::FOR_GPU, OtsuLaunch::Own),
    ] {
        let tuning = Tuning {
            otsu_launch,
            ..tuning
        };
        let setup = Setup::with_tuning(tuning);
        check_frame_with(gpu, layout, options, setup, frame, regions);
    }
}

fn check_frame_with(
    gpu: &Gpu,
    layout: FrameLayout,
    options: PipelineOptions,
    setup: Setup,
    frame: &[u8],
    regions: &[Region],
) {
    let label = format!(
        "{} {}x{} stride {}, {:?}, {} tuning, {:?}",
        layout.format,
        layout.width,
        layout.height,
        layout.stride,
        options,
        setup.tuning.name(),
        setup
    );
    let mut pipeline =
        Pipeline::with_setup(gpu, layout, options, regions, setup).expect("pipeline");
    assert_eq!(pipeline.full_images(), setup.images, "{label}");
    // The camera-health grid and gradient histogram, as the daemon asks for them (the
    // first frame counts the histogram).
    pipeline
        .set_health_grid(gpu, Some(health::GRID))
        .expect("health grid");
    let mut slot = pipeline.new_slot(gpu).expect("slot");
    slot.write_bytes(gpu, frame).expect("write slot");
    let result = pipeline.process(gpu, &slot).expect("process");
    let pictures = result.read_pictures(gpu).expect("read pictures");
    let (w, h) = (layout.width as usize, layout.height as usize);

    let luma = reference::luma(&layout, frame);
    assert_image_eq("luma", &label, w, &pictures.luma, &luma);
    let (dx, dy) = reference::sobel(&luma, w, h, options.border);
    let magnitude = reference::magnitude(&dx, &dy, options.magnitude);
    assert_image_eq("magnitude", &label, w, &pictures.magnitude, &magnitude);
    assert!(result.gradient_sampled, "{label}");
    assert_eq!(
        result.gradient_histogram,
        reference::histogram(&magnitude),
        "gradient histogram, {label}"
    );
    let edges = reference::edge_mask(&magnitude, options.edge_threshold);
    let hist = reference::histogram(&luma);
    assert_eq!(result.histogram, hist, "histogram, {label}");
    let threshold = reference::otsu_threshold(&hist);
    assert_eq!(result.otsu_threshold, threshold, "otsu threshold, {label}");
    let mask = reference::binarize(&luma, threshold);
    assert_image_eq("mask", &label, w, &pictures.mask, &mask);
    match setup.images {
        FullImages::Kept => {
            let images = result.read_images(gpu).expect("read images");
            assert_image_eq("sobel dx", &label, w, &images.dx, &dx);
            assert_image_eq("sobel dy", &label, w, &images.dy, &dy);
            assert_image_eq("edge mask", &label, w, &images.edges, &edges);
            // The kept images' pictures are the kernels' own (binarize's mask).
            assert_image_eq("kept luma", &label, w, &images.pictures.luma, &luma);
            let kept_magnitude = &images.pictures.magnitude;
            assert_image_eq("kept magnitude", &label, w, kept_magnitude, &magnitude);
            assert_image_eq("binarize mask", &label, w, &images.pictures.mask, &mask);
            let (sum, sqsum) = reference::integral(&luma, w, h);
            assert_image_eq("integral sum", &label, w + 1, &images.integral_sum, &sum);
            assert_image_eq(
                "integral sqsum",
                &label,
                w + 1,
                &images.integral_sqsum,
                &sqsum,
            );
            let edge_count = reference::integral_count(&edges, w, h);
            assert_image_eq(
                "integral edges",
                &label,
                w + 1,
                &images.integral_edges,
                &edge_count,
            );
            let fg_count = reference::integral_count(&mask, w, h);
            assert_image_eq(
                "integral foreground",
                &label,
                w + 1,
                &images.integral_foreground,
                &fg_count,
            );
        }
        FullImages::Discarded => {
            assert!(
                matches!(result.read_images(gpu), Err(PipelineError::NotKept)),
                "full images read back, {label}"
            );
        }
    }

    // Region sums straight from the pixels.
    let whole = Region {
        name: String::new(),
        x: 0,
        y: 0,
        width: layout.width,
        height: layout.height,
    };
    let cells = region::grid(layout.width, layout.height, health::GRID.0, health::GRID.1);
    assert_eq!(result.cells.len(), cells.len(), "cells, {label}");
    let measured = std::iter::once(&result.frame)
        .chain(result.regions.iter().map(|(_, s)| s))
        .chain(&result.cells);
    let expected = std::iter::once(&whole).chain(regions).chain(&cells);
    let planes = reference::Planes {
        luma: &luma,
        edges: &edges,
        foreground: &mask,
        width: w,
    };
    for (region, stats) in expected.zip(measured) {
        assert_eq!(
            *stats,
            reference::region_sums(&planes, region),
            "region '{}' sums, {label}",
            region.name
        );
    }
    assert_eq!(
        pipeline.broken_guards(gpu).expect("guards"),
        Vec::<&str>::new(),
        "guard bands, {label}"
    );
}

const SMALL_SIZES: [(u32, u32); 8] = [
    (1, 1),
    (2, 2),
    (3, 3),
    (15, 7),
    (17, 3),
    (16, 16),
    (33, 2),
    (1, 9),
];

/// Every format luma.cl reads; the raw sensor formats (raw.cl) have their own tests
/// below, at these sizes and more.
#[test]
fn every_format_at_awkward_sizes() {
    let gpu = gpu();
    let mut rng = Rng::new(3);
    let raw = raw_sensor_formats();
    for format in PixelFormat::ALL.into_iter().filter(|f| !raw.contains(f)) {
        for (w, h) in SMALL_SIZES.into_iter().chain([(641, 479)]) {
            let layout = FrameLayout::packed(format, w, h);
            let frame = rng.bytes(layout.frame_bytes());
            check_frame(&gpu, layout, PipelineOptions::default(), &frame, &[]);
        }
    }
}

/// The integral passes cut the frame into tiles of 16 pixels in bands of 16 rows; the GPU
/// pass takes 8 tiles to a work-group on POCL (128 columns) and the CPU pass gives each of
/// a few work-items (eight on POCL's two compute units) a run of bands: sizes on either
/// side of those edges, for every tuning.
#[test]
fn integral_tiles_groups_and_bands_at_their_edges() {
    let gpu = gpu();
    let mut rng = Rng::new(1024);
    for (w, h) in [
        (1024, 3),
        (1025, 5),
        (1023, 2),
        (2049, 2),
        (4100, 33),
        (3, 97),
        (5, 200),
        (2, 129),
        (255, 16),
        (256, 17),
        (257, 15),
        (31, 127),
        (32, 128),
        (33, 129),
    ] {
        let layout = FrameLayout::packed(PixelFormat::Grey, w, h);
        let frame = rng.bytes(layout.frame_bytes());
        check_frame(&gpu, layout, PipelineOptions::default(), &frame, &[]);
    }
}

#[test]
fn full_hd_grey_and_rgb() {
    let gpu = gpu();
    let mut rng = Rng::new(1080);
    for format in [PixelFormat::Grey, PixelFormat::Rgb24] {
        let layout = FrameLayout::packed(format, 1920, 1080);
        let frame = rng.bytes(layout.frame_bytes());
        let regions = [
            "left:0,0,960,1080".parse().unwrap(),
            "dot:1919,1079,1,1".parse().unwrap(),
        ];
        check_frame(&gpu, layout, PipelineOptions::default(), &frame, &regions);
    }
}

#[test]
fn every_border_and_magnitude() {
    let gpu = gpu();
    let mut rng = Rng::new(101);
    for border in Border::ALL {
        for magnitude in [Magnitude::L1, Magnitude::L2] {
            // 96 and 97 wide: the CPU's Sobel takes 32 pixels at a time up to a row's end.
            for (w, h) in SMALL_SIZES.into_iter().chain([
                (9, 1),
                (20, 1),
                (64, 5),
                (96, 4),
                (97, 3),
                (641, 479),
            ]) {
                let layout = FrameLayout::packed(PixelFormat::Grey, w, h);
                // Few distinct values make large gradients (saturation) common.
                let frame: Vec<u8> = rng
                    .bytes(layout.frame_bytes())
                    .iter()
                    .map(|b| b & 0xC0)
                    .collect();
                let options = PipelineOptions {
                    border,
                    magnitude,
                    edge_threshold: 1 + (rng.below(255) as u8),
                };
                check_frame(&gpu, layout, options, &frame, &[]);
            }
        }
    }
}

#[test]
fn slots_are_reused_frame_after_frame() {
    let gpu = gpu();
    let mut rng = Rng::new(7);
    let layout = FrameLayout::packed(PixelFormat::Yuyv, 47, 13);
    // Also proves the histogram starts from zero on every frame: the Otsu kernel clears it
    // for the next one (and with sub-histograms, each frame zeroes its own).
    for (_, tuning) in Tuning::ALL {
        let mut pipeline =
            Pipeline::with_tuning(&gpu, layout, PipelineOptions::default(), &[], tuning).unwrap();
        let mut slot = pipeline.new_slot(&gpu).unwrap();
        for _ in 0..3 {
            let frame = rng.bytes(layout.frame_bytes());
            slot.write_bytes(&gpu, &frame).unwrap();
            let result = pipeline.process(&gpu, &slot).unwrap();
            let luma = reference::luma(&layout, &frame);
            assert_eq!(result.histogram, reference::histogram(&luma));
            assert_image_eq(
                "luma",
                "reused slot",
                47,
                &result.read_pictures(&gpu).unwrap().luma,
                &luma,
            );
        }
    }
}

/// The raw sensor formats: every wide mono storage, and every Bayer pattern at every
/// storage (8-bit mono is grey, which luma.cl reads).
fn raw_sensor_formats() -> Vec<PixelFormat> {
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

/// The bytes the blocked integrals of a `w` x `h` frame hold, as integral.cl lays them out:
/// per row and whole tile column (left), per whole band and padded column (top) and per
/// whole tile (corner), three u32 (sum, edges, foreground) and a u64 squared sum; and
/// local, with the full images only: per pixel of the rows padded to 16-pixel tiles a u16
/// sum, a u32 squared sum and u8 edge and foreground counts. Every buffer ends in a guard
/// band of 64 elements, local's four as well when empty.
fn blocked_integral_bytes(w: u64, h: u64, images: FullImages) -> u64 {
    let guard = 64;
    let padded = w.div_ceil(16) * 16;
    let local_pixels = match images {
        FullImages::Kept => padded * h,
        FullImages::Discarded => 0,
    };
    let local = (2 + 4 + 1 + 1) * (local_pixels + guard);
    let part = |entries: u64| 4 * (3 * entries + guard) + 8 * (entries + guard);
    let (whole_across, whole_bands) = (w / 16, h / 16);
    local + part(whole_across * h) + part(whole_bands * padded) + part(whole_across * whole_bands)
}

/// What a pipeline holds on the device, to the byte: the daemon's (and bench's) pipeline
/// holds the magnitude, luma unless it reads a grey frame in place, the small counts, the
/// blocked integrals, the regions and motion's tiles, the same for every tuning; one that
/// keeps its full images holds dx, dy, the edge mask and the mask besides, and nothing
/// else (OpenCV's integral layout is assembled on the host).
#[test]
fn device_bytes_are_the_blocked_integrals_and_the_full_images_only_where_kept() {
    let gpu = gpu();
    let guard = 64;
    // The luma histogram; then one buffer the host reads: the counts with the threshold,
    // the gradient histogram and four u64 sums for one region (the whole frame), each
    // part starting at the device's sub-buffer alignment.
    let align = u64::from(gpu.device.mem_base_addr_align().expect("alignment")) / 8;
    let readout = (4 * 257u64).next_multiple_of(align).next_multiple_of(8);
    let readout = (readout + 4 * 256).next_multiple_of(align.max(8)) + 4 * 8;
    // Then the motion counts (68 u32) and a u64 of moving pixels for the region.
    let readout = readout.next_multiple_of(align.max(8)) + 4 * 68 + 8;
    let counts = 4 * 256 + readout;
    // One region: four u32 corners in.
    let regions = 4 * 4;
    // The Mali tuning's histogram: 512 bytes a work-item, two groups per compute unit (none
    // of these frames needs more) of 64 work-items, or of as many as histogram_count allows
    // on this device (CL_KERNEL_WORK_GROUP_SIZE: 32 on Rusticl's llvmpipe), rounded down
    // to a multiple of 4 as the pipeline does.
    let histogram = edgesight::cl::KernelSource {
        file: "histogram.cl",
        text: include_str!("../kernels/histogram.cl"),
    };
    let program = gpu.build_with(histogram, "-DITEM_SUB_HISTOGRAMS").unwrap();
    let most = opencl3::kernel::Kernel::create(&program, "histogram_count")
        .and_then(|k| k.get_work_group_size(gpu.device.id()))
        .expect("histogram_count's work-group size");
    let group = match most {
        64.. => 64,
        4.. => most - most % 4,
        _ => most,
    };
    let sub_histograms = 2 * u64::from(gpu.info.compute_units).max(1) * group as u64 * 512;
    for (format, w, h) in [
        (PixelFormat::Grey, 40u64, 2u64),
        (PixelFormat::Yuyv, 40, 2),
        (PixelFormat::Grey, 17, 33),
        (PixelFormat::Nv12, 1920, 1080),
        (PixelFormat::Rgb24, 1920, 1080),
        (PixelFormat::Grey, 3840, 2160),
    ] {
        let layout = FrameLayout::packed(format, w as u32, h as u32);
        // A byte a pixel with a 64-element guard band.
        let image = w * h + guard;
        let luma = match format {
            PixelFormat::Grey | PixelFormat::Nv12 => 0,
            _ => image,
        };
        // Motion: a u32 background and a byte of mask a whole tile, two u32 lists of the
        // moving tiles (this frame's and the last's), its 6 words of light and 65 counts,
        // each with its guard band.
        let tiles = (w / 16) * (h / 16);
        let motion = 4 * (tiles + guard)
            + (tiles + guard)
            + 4 * (2 * tiles + guard)
            + 4 * (6 + guard)
            + 4 * (65 + guard);
        let daemon = image + luma + counts + regions + motion;
        // dx and dy, two bytes a pixel each, the edge mask and the mask, one.
        let full = 2 * 2 * image + 2 * image;
        for (tuning, scratch) in [
            (Tuning::FOR_CPU, 0),
            (Tuning::FOR_GPU, 0),
            (Tuning::FOR_MALI, 0),
            (Tuning::FOR_MIDGARD, sub_histograms),
        ] {
            for (images, extra) in [(FullImages::Discarded, 0), (FullImages::Kept, full)] {
                let extra = extra + blocked_integral_bytes(w, h, images);
                let setup = Setup { tuning, images };
                let pipeline =
                    Pipeline::with_setup(&gpu, layout, PipelineOptions::default(), &[], setup)
                        .expect("pipeline");
                assert_eq!(
                    pipeline.device_bytes().expect("device bytes"),
                    daemon + scratch + extra,
                    "{format} {w}x{h} {setup:?}"
                );
            }
        }
    }
    // At 1080p the daemon's pipeline holds 2.6 bytes a pixel of integrals, process --raw's
    // 10.6, where OpenCV's four images held 20.
    let per_pixel = |images| blocked_integral_bytes(1920, 1080, images) as f64 / 2073600.0;
    let daemon = per_pixel(FullImages::Discarded);
    assert!((2.5..2.7).contains(&daemon), "{daemon}");
    let kept = per_pixel(FullImages::Kept);
    assert!((10.5..10.7).contains(&kept), "{kept}");
    // The default pipeline is the daemon's: without the full images.
    let layout = FrameLayout::packed(PixelFormat::Grey, 40, 2);
    let pipeline = Pipeline::new(&gpu, layout, PipelineOptions::default(), &[]).unwrap();
    assert_eq!(pipeline.full_images(), FullImages::Discarded);
}

/// Sums of `region` read from the reference's OpenCV-layout integrals (`stride` = width + 1)
/// at its four corners: (sum, squared sum, edges, foreground).
fn reference_region_sums(
    integrals: &(Vec<u32>, Vec<u64>, Vec<u32>, Vec<u32>),
    stride: usize,
    r: &Region,
) -> (u64, u64, u64, u64) {
    let (x0, y0) = (r.x as usize, r.y as usize);
    let (x1, y1) = (x0 + r.width as usize, y0 + r.height as usize);
    let corners = |at: &dyn Fn(usize) -> u64| {
        at(y1 * stride + x1) + at(y0 * stride + x0) - at(y0 * stride + x1) - at(y1 * stride + x0)
    };
    let (sum, sqsum, edges, fg) = integrals;
    (
        corners(&|i| u64::from(sum[i])),
        corners(&|i| sqsum[i]),
        corners(&|i| u64::from(edges[i])),
        corners(&|i| u64::from(fg[i])),
    )
}

/// Coordinates along a side of `len` pixels where a rectangle's edge meets a tile's:
/// 0, and each multiple of 16 with the pixel before and after it, and `len`.
fn tile_edges(len: u32) -> Vec<u32> {
    let mut v: Vec<u32> = (0..=len.div_ceil(16))
        .flat_map(|k| [16 * k, (16 * k).saturating_sub(1), 16 * k + 1])
        .chain([0, len])
        .filter(|&c| c <= len)
        .collect();
    v.sort_unstable();
    v.dedup();
    v
}

/// The region sums (`region_sums`, O(1) from the blocked integrals' corners) of many
/// rectangles against the sums the reference's OpenCV-layout integrals give: rectangles
/// whose edges lie on, just before and just after every tile edge, 1-pixel ones, random
/// ones and the whole frame, for every tuning, at sizes on both sides of whole tiles and
/// with edge thresholds including 0 (every pixel an edge) and 255.
#[test]
fn region_sums_of_rectangles_on_tile_edges_equal_the_reference() {
    let gpu = gpu();
    let mut rng = Rng::new(16);
    for (w, h) in [
        (1, 1),
        (15, 15),
        (16, 16),
        (17, 17),
        (33, 2),
        (2, 33),
        (47, 35),
        (64, 48),
        (641, 479),
    ] {
        let layout = FrameLayout::packed(PixelFormat::Grey, w, h);
        let frame = rng.bytes(layout.frame_bytes());
        let luma = reference::luma(&layout, &frame);
        let (xs, ys) = (tile_edges(w), tile_edges(h));
        let mut regions = Vec::new();
        let mut add = |x0: u32, y0: u32, x1: u32, y1: u32| {
            if x1 > x0 && y1 > y0 && x1 <= w && y1 <= h {
                let name = format!("r{}", regions.len());
                regions.push(Region {
                    name,
                    x: x0,
                    y: y0,
                    width: x1 - x0,
                    height: y1 - y0,
                });
            }
        };
        // Every pair of tile edges on one side with the other side random, and the
        // reverse; a 1-pixel rectangle on each side of every tile corner; random ones.
        let pick = |rng: &mut Rng, len: u32| {
            let a = rng.below(u64::from(len) + 1) as u32;
            let b = rng.below(u64::from(len) + 1) as u32;
            (a.min(b), a.max(b))
        };
        for (i, &x0) in xs.iter().enumerate() {
            for &x1 in &xs[i + 1..] {
                let (y0, y1) = pick(&mut rng, h);
                add(x0, y0, x1, y1);
            }
        }
        for (i, &y0) in ys.iter().enumerate() {
            for &y1 in &ys[i + 1..] {
                let (x0, x1) = pick(&mut rng, w);
                add(x0, y0, x1, y1);
            }
        }
        for &x in &xs {
            for &y in &ys {
                add(x, y, x + 1, y + 1);
                add(x.saturating_sub(1), y.saturating_sub(1), x, y);
            }
        }
        for _ in 0..50 {
            let (x0, x1) = pick(&mut rng, w);
            let (y0, y1) = pick(&mut rng, h);
            add(x0, y0, x1, y1);
        }
        add(0, 0, w, h);
        assert!(regions.iter().all(|r| r.validate(&layout).is_ok()));
        for edge_threshold in [0, 1 + rng.below(254) as u8, 255] {
            let options = PipelineOptions {
                edge_threshold,
                ..PipelineOptions::default()
            };
            let (dx, dy) = reference::sobel(&luma, w as usize, h as usize, options.border);
            let magnitude = reference::magnitude(&dx, &dy, options.magnitude);
            let edges = reference::edge_mask(&magnitude, edge_threshold);
            let threshold = reference::otsu_threshold(&reference::histogram(&luma));
            let mask = reference::binarize(&luma, threshold);
            let (sum, sqsum) = reference::integral(&luma, w as usize, h as usize);
            let integrals = (
                sum,
                sqsum,
                reference::integral_count(&edges, w as usize, h as usize),
                reference::integral_count(&mask, w as usize, h as usize),
            );
            for (_, tuning) in Tuning::ALL {
                let label = format!("{w}x{h}, edge threshold {edge_threshold}, {tuning:?}");
                let mut pipeline =
                    Pipeline::with_tuning(&gpu, layout, options, &regions, tuning).unwrap();
                let mut slot = pipeline.new_slot(&gpu).unwrap();
                slot.write_bytes(&gpu, &frame).unwrap();
                let result = pipeline.process(&gpu, &slot).unwrap();
                assert_eq!(result.regions.len(), regions.len(), "{label}");
                for (r, stats) in &result.regions {
                    let want = reference_region_sums(&integrals, w as usize + 1, r);
                    assert_eq!(
                        (stats.sum, stats.sqsum, stats.edges, stats.foreground),
                        want,
                        "{r}, {label}"
                    );
                }
                assert_eq!(
                    pipeline.broken_guards(&gpu).unwrap(),
                    Vec::<&str>::new(),
                    "{label}"
                );
            }
        }
    }
}

/// The largest frames the pipeline accepts, all white, with every pixel an edge (edge
/// threshold 0) and foreground (a one-level histogram's threshold is 0): every sum is the
/// largest it can be. At exactly the pixel limit (257 x 65537 = 16843009 pixels) the whole
/// frame's sum is 255 x 16843009 = 2^32 - 1, the most the u32 sum image holds; the widest
/// row (65535), a frame one tile wide and one a pixel wide (the most bands, 1052688: a
/// work-item's longest loops, which Mesa's llvmpipe cuts short past 65535 iterations, see
/// integral.cl) take the other extremes. Region sums of the whole frame, of its last row
/// and column, of its last pixel and of tile-straddling rectangles are compared with their
/// areas times (255, 255^2, 1, 1), and the histogram's last bin with the frame's area, for
/// every tuning; the OpenCV-layout images assembled from the largest frame end in exactly
/// 2^32 - 1 and its area.
#[test]
fn the_largest_frames_do_not_overflow() {
    let gpu = gpu();
    assert!(FrameLayout::packed(PixelFormat::Grey, 257, 65537)
        .validate()
        .is_ok());
    assert!(FrameLayout::packed(PixelFormat::Grey, 257, 65538)
        .validate()
        .is_err());
    assert!(FrameLayout::packed(PixelFormat::Grey, 65536, 1)
        .validate()
        .is_err());
    let options = PipelineOptions {
        edge_threshold: 0,
        ..PipelineOptions::default()
    };
    for (w, h) in [
        (257u32, 65537u32),
        (65535, 257),
        (16, 1_052_688),
        (1, 16_843_009),
    ] {
        let layout = FrameLayout::packed(PixelFormat::Grey, w, h);
        let frame = vec![255u8; layout.frame_bytes()];
        let rect = |name: &str, x: u32, y: u32, width: u32, height: u32| Region {
            name: name.into(),
            x,
            y,
            width,
            height,
        };
        let regions = [
            rect("last-row", 0, h - 1, w, 1),
            rect("last-column", w - 1, 0, 1, h),
            rect("last-pixel", w - 1, h - 1, 1, 1),
            rect("straddling", 15.min(w - 1), 17, w - 15.min(w - 1), h - 34),
            rect("inner", 1.min(w - 1), 1, w.saturating_sub(2).max(1), h - 2),
        ];
        for (_, tuning) in Tuning::ALL {
            let label = format!("{w}x{h}, {tuning:?}");
            let mut pipeline =
                Pipeline::with_tuning(&gpu, layout, options, &regions, tuning).unwrap();
            let mut slot = pipeline.new_slot(&gpu).unwrap();
            slot.write_bytes(&gpu, &frame).unwrap();
            let result = pipeline.process(&gpu, &slot).unwrap();
            assert_eq!(result.otsu_threshold, 0, "{label}");
            assert_eq!(result.histogram[255], w * h, "{label}");
            let whole = (&result.frame, u64::from(w) * u64::from(h));
            let each = result
                .regions
                .iter()
                .map(|(r, s)| (s, u64::from(r.width) * u64::from(r.height)));
            for (stats, area) in std::iter::once(whole).chain(each) {
                assert_eq!(stats.area, area, "{label}");
                assert_eq!(
                    (stats.sum, stats.sqsum, stats.edges, stats.foreground),
                    (255 * area, 255 * 255 * area, area, area),
                    "{label}"
                );
            }
            if w * h == 257 * 65537 {
                assert_eq!(result.frame.sum, u64::from(u32::MAX), "{label}");
            }
            assert_eq!(pipeline.broken_guards(&gpu).unwrap(), Vec::<&str>::new());
        }
    }
    // OpenCV's layout, assembled on the host, at the pixel limit: its u32 sum ends at
    // exactly 2^32 - 1.
    let layout = FrameLayout::packed(PixelFormat::Grey, 257, 65537);
    let setup = Setup {
        tuning: Tuning::FOR_CPU,
        images: FullImages::Kept,
    };
    let mut pipeline = Pipeline::with_setup(&gpu, layout, options, &[], setup).unwrap();
    let mut slot = pipeline.new_slot(&gpu).unwrap();
    slot.write_bytes(&gpu, &vec![255u8; layout.frame_bytes()])
        .unwrap();
    let result = pipeline.process(&gpu, &slot).unwrap();
    let images = result.read_images(&gpu).unwrap();
    assert_eq!(images.integral_sum.last(), Some(&u32::MAX));
    assert_eq!(
        images.integral_sqsum.last(),
        Some(&(255 * 255 * 16_843_009))
    );
    assert_eq!(images.integral_edges.last(), Some(&16_843_009));
    assert_eq!(images.integral_foreground.last(), Some(&16_843_009));
    // The row above the last and the column left of the last, one pixel row and column
    // fewer.
    let stride = 258;
    assert_eq!(images.integral_sum[65537 * stride - 1], 255 * 257 * 65536);
    assert_eq!(images.integral_sum[65538 * stride - 2], 255 * 256 * 65537);
}

/// The Otsu threshold a pipeline with `tuning` finds for one grey `frame`.
fn otsu_threshold_with(gpu: &Gpu, layout: FrameLayout, frame: &[u8], tuning: Tuning) -> u8 {
    let mut pipeline =
        Pipeline::with_tuning(gpu, layout, PipelineOptions::default(), &[], tuning).unwrap();
    let mut slot = pipeline.new_slot(gpu).unwrap();
    slot.write_bytes(gpu, frame).unwrap();
    pipeline.process(gpu, &slot).unwrap().otsu_threshold
}

/// A grey frame holding `count` pixels of each level, in a scrambled order.
fn levels_frame(rng: &mut Rng, levels: &[(u8, usize)]) -> (FrameLayout, Vec<u8>) {
    let mut pixels: Vec<u8> = levels
        .iter()
        .flat_map(|&(v, n)| std::iter::repeat_n(v, n))
        .collect();
    for i in (1..pixels.len()).rev() {
        pixels.swap(i, rng.below(i as u64 + 1) as usize);
    }
    let n = pixels.len() as u32;
    let width = (1..=n)
        .rev()
        .find(|w| n.is_multiple_of(*w) && *w <= 4096)
        .unwrap_or(1);
    (
        FrameLayout::packed(PixelFormat::Grey, width, n / width),
        pixels,
    )
}

#[test]
fn otsu_where_rounding_decides_ties() {
    let gpu = gpu();
    let mut rng = Rng::new(10);
    let mut cases: Vec<Vec<(u8, usize)>> = Vec::new();
    // Three equal populations score an exact tie; OpenCV's doubles pick 10 or 128 by size.
    for n in [1, 5, 10, 30, 100, 300, 800, 1000, 3333] {
        cases.push(vec![(10, n), (128, n), (246, n)]);
    }
    cases.push(vec![(77, 64)]);
    cases.push(vec![(0, 3)]);
    cases.push(vec![(255, 5)]);
    cases.push(vec![(40, 7), (200, 9)]);
    cases.push(vec![(0, 1), (255, 1)]);
    cases.push(vec![(10, 50), (60, 50), (128, 50), (196, 50), (246, 50)]);
    for _ in 0..20 {
        let k = 2 + rng.below(5) as usize;
        cases.push(
            (0..k)
                .map(|_| (rng.below(256) as u8, 1 + rng.below(400) as usize))
                .collect(),
        );
    }
    for levels in cases {
        let (layout, frame) = levels_frame(&mut rng, &levels);
        let want = reference::otsu_threshold(&reference::histogram(&frame));
        // FOR_GPU uses the device's own doubles where it has them, the others the
        // emulation (the Mali ones with a smaller group scoring more thresholds a
        // work-item).
        for (name, tuning) in Tuning::ALL {
            assert_eq!(
                otsu_threshold_with(&gpu, layout, &frame, tuning),
                want,
                "levels {levels:?}, {name} tuning"
            );
        }
    }
}

#[test]
fn otsu_tie_pinned_values() {
    // Checked against cv2.threshold(THRESH_OTSU) with IPP off (OpenCV 5.0): equal
    // populations of 10/128/246 give 10 for 5 and 1000 pixels per level, 128 for 30 and 800.
    let gpu = gpu();
    let mut rng = Rng::new(11);
    for (n, want) in [(5, 10), (1000, 10), (30, 128), (800, 128)] {
        let (layout, frame) = levels_frame(&mut rng, &[(10, n), (128, n), (246, n)]);
        for (name, tuning) in Tuning::ALL {
            assert_eq!(
                otsu_threshold_with(&gpu, layout, &frame, tuning),
                want,
                "{n} per level, {name} tuning"
            );
        }
    }
}

/// A normal double of random sign and mantissa with a biased exponent in `lo..lo + span`.
fn random_f64(rng: &mut Rng, lo: u64, span: u64) -> f64 {
    let exp = lo + rng.below(span);
    f64::from_bits((rng.below(2) << 63) | (exp << 52) | (rng.next_u64() >> 12))
}

/// The binary64 emulation in otsu.cl against the host's doubles, bit for bit, on operands
/// of the kind the Otsu loop meets: normal numbers of both signs over a wide exponent range,
/// close exponents (cancellation, rounding ties) and zeros.
#[test]
fn binary64_emulation_is_exact() {
    let gpu = gpu();
    let program = gpu.build(edgesight::cl::OTSU_CL).unwrap();
    let kernel = opencl3::kernel::Kernel::create(&program, "otsu_f64_selftest").unwrap();
    let mut rng = Rng::new(64);
    let mut pairs: Vec<(f64, f64)> = Vec::new();
    for _ in 0..20000 {
        pairs.push((
            random_f64(&mut rng, 1023 - 60, 120),
            random_f64(&mut rng, 1023 - 60, 120),
        ));
    }
    for _ in 0..20000 {
        // b near a: the same or the next lower exponent and some low bits changed, where
        // subtraction cancels and rounding ties occur.
        let a = random_f64(&mut rng, 1023 - 3, 6);
        let flip = rng.next_u64() & ((1u64 << rng.below(53)) - 1);
        let b_bits = (a.to_bits() ^ flip ^ (rng.below(2) << 63)) - (rng.below(2) << 52);
        pairs.push((a, f64::from_bits(b_bits)));
    }
    for &(a, b) in &[
        (1.0, 1.0),
        (1.0, -1.0),
        (0.0, 3.5),
        (-0.0, 2.0),
        (0.0, -0.0),
        (7.0, 1e-300),
    ] {
        pairs.push((a, b));
    }
    pairs.push((1.0 + f64::EPSILON, f64::EPSILON / 2.0)); // exactly halfway: ties to even
    pairs.push((1.0 + 2.0 * f64::EPSILON, f64::EPSILON / 2.0));
    let out = run_on_pairs(&gpu, &kernel, &pairs, 5);
    for (i, &(x, y)) in pairs.iter().enumerate() {
        let want = [
            (x + y).to_bits(),
            (x - y).to_bits(),
            (x * y).to_bits(),
            (x / y).to_bits(),
            u64::from(x < y),
        ];
        // The emulation handles zero and normal results only: skip what the Otsu loop never
        // produces (a zero divisor, subnormal or infinite results).
        let names = ["add", "sub", "mul", "div", "lt"];
        for (k, &w) in want.iter().enumerate() {
            let exact = f64::from_bits(w);
            if k < 4 && (exact.is_subnormal() || !exact.is_finite() || (k == 3 && y == 0.0)) {
                continue;
            }
            assert_eq!(
                out[5 * i + k],
                w,
                "{} of {x:e} ({:#x}) and {y:e} ({:#x}): got {:e}, want {exact:e}",
                names[k],
                x.to_bits(),
                y.to_bits(),
                f64::from_bits(out[5 * i + k])
            );
        }
    }
}

edgesight::kernel_params! {
    /// The parameters of otsu.cl's self-test kernels: the bit patterns of the pairs' first
    /// and second doubles, how many pairs, and the words out.
    struct PairParams<'a> {
        a: &'a Buffer<u64>,
        b: &'a Buffer<u64>,
        count: u32,
        out: &'a Buffer<u64>,
    }
}

/// Launches the 1-D `kernel` with `params` over `global` work-items in groups of `local`
/// through the crate's own launch (which, in this debug build, checks `params` against
/// the kernel's parameters), and waits for it.
///
/// # Safety
/// As `edgesight::cl::launch`: `params` is the kernel's parameter list, and the sizes keep
/// its work-items inside the buffers.
unsafe fn run_1d(
    gpu: &Gpu,
    kernel: &opencl3::kernel::Kernel,
    params: &dyn KernelParams,
    global: usize,
    local: usize,
) {
    // SAFETY: this function's contract.
    unsafe {
        launch(
            gpu,
            kernel,
            params,
            &[global],
            &[local],
            "a test kernel",
            Record::NoEvent,
        )
    }
    .unwrap();
    gpu.finish().unwrap();
}

/// A device buffer holding `data`.
fn buffer_of<T: Copy + Default>(gpu: &Gpu, data: &[T]) -> Buffer<T> {
    use opencl3::memory::{Buffer, CL_MEM_READ_WRITE};
    use opencl3::types::CL_BLOCKING;
    unsafe {
        let mut buffer = Buffer::<T>::create(
            gpu.context(),
            CL_MEM_READ_WRITE,
            data.len(),
            std::ptr::null_mut(),
        )
        .unwrap();
        gpu.queue
            .enqueue_write_buffer(&mut buffer, CL_BLOCKING, 0, data, &[])
            .unwrap();
        buffer
    }
}

/// The contents of `buffer`, `len` elements.
fn read_back<T: Copy + Default>(gpu: &Gpu, buffer: &Buffer<T>, len: usize) -> Vec<T> {
    let mut out = vec![T::default(); len];
    unsafe {
        gpu.queue
            .enqueue_read_buffer(buffer, opencl3::types::CL_BLOCKING, 0, &mut out, &[])
            .unwrap();
    }
    out
}

/// Runs a self-test `kernel` taking (a, b, count, out): the bit patterns of the pairs' first
/// and second doubles, and `per_pair` words out for each pair, which it returns.
fn run_on_pairs(
    gpu: &Gpu,
    kernel: &opencl3::kernel::Kernel,
    pairs: &[(f64, f64)],
    per_pair: usize,
) -> Vec<u64> {
    let n = pairs.len();
    let bits = |side: fn(&(f64, f64)) -> f64| -> Vec<u64> {
        pairs.iter().map(|p| side(p).to_bits()).collect()
    };
    let a = buffer_of(gpu, &bits(|p| p.0));
    let b = buffer_of(gpu, &bits(|p| p.1));
    let out = buffer_of(gpu, &vec![0u64; per_pair * n]);
    let params = PairParams {
        a: &a,
        b: &b,
        count: n as u32,
        out: &out,
    };
    // SAFETY: `PairParams` is the self-test kernels' parameter list; a work-item returns
    // unless its pair i < count, reads pair i of `a` and `b` (n words each) and writes
    // words per_pair * i .. per_pair * (i + 1) of `out`, per_pair * n words (the
    // callers pass each kernel's own per_pair).
    unsafe { run_1d(gpu, kernel, &params, n.div_ceil(64) * 64, 64) };
    read_back(gpu, &out, per_pair * n)
}

/// The test device where it has doubles (cl_khr_fp64), which the fast Otsu chain needs to
/// be built at all; `None`, said on stderr, where not.
fn gpu_with_doubles() -> Option<Gpu> {
    let gpu = gpu();
    if !gpu.info.fp64 {
        eprintln!("skipped: the device has no doubles, so the fast chain is never built");
        return None;
    }
    Some(gpu)
}

/// The quotients of the fast Otsu chain (otsu.cl on the device's doubles) on operands of
/// the range it meets, dividends up to 2^9 and divisors (q1) in [2^-23, 1]: a quotient from
/// the reciprocal is the correctly rounded one, and the check accepts the correctly rounded
/// quotient and rejects both its neighbours.
#[test]
fn otsu_quotients_from_reciprocals_are_correctly_rounded_and_checked() {
    let Some(gpu) = gpu_with_doubles() else {
        return;
    };
    let program = gpu
        .build_with(edgesight::cl::OTSU_CL, "-DOTSU_FP64")
        .unwrap();
    let kernel = opencl3::kernel::Kernel::create(&program, "otsu_quotient_selftest").unwrap();
    let mut rng = Rng::new(65);
    let mut pairs: Vec<(f64, f64)> = Vec::new();
    for _ in 0..50000 {
        let a = random_f64(&mut rng, 1023 - 60, 69).abs();
        let b = random_f64(&mut rng, 1023 - 23, 23).abs();
        pairs.push((a, b));
    }
    for _ in 0..5000 {
        // Exact quotients: the neighbours are a whole ulp away.
        let b = random_f64(&mut rng, 1023 - 23, 23).abs();
        let k = rng.below(1 << 20) as f64;
        pairs.push((k * b, b));
    }
    pairs.extend([
        (0.0, 0.5),
        (0.0, 2f64.powi(-23)),
        (0.0, 1.0),
        (1.0, 1.0),
        (255.0, 1.0),
    ]);
    let out = run_on_pairs(&gpu, &kernel, &pairs, 4);
    for (i, &(x, y)) in pairs.iter().enumerate() {
        let q = x / y;
        assert_eq!(
            out[4 * i..4 * i + 4],
            [q.to_bits(), 1, 0, 0],
            "{x:e} ({:#x}) / {y:e} ({:#x}) = {q:e}: got {:e} from the reciprocal",
            x.to_bits(),
            y.to_bits(),
            f64::from_bits(out[4 * i])
        );
    }
}

/// otsu_threshold run directly on `hist` with `defines`, in one group of `local`: the
/// threshold, after asserting that the counts came back and the histogram was cleared.
fn otsu_kernel_threshold(gpu: &Gpu, defines: &str, hist: &[u32; 256], local: usize) -> u8 {
    let program = gpu.build_with(edgesight::cl::OTSU_CL, defines).unwrap();
    let kernel = opencl3::kernel::Kernel::create(&program, "otsu_threshold").unwrap();
    let total: u32 = hist.iter().sum();
    let counts = buffer_of(gpu, hist);
    let results = buffer_of(gpu, &[u32::MAX; 257]);
    let params = ThresholdParams {
        hist: &counts,
        total,
        results: &results,
    };
    // SAFETY: `ThresholdParams` is otsu_threshold's parameter list; its one group reads and
    // clears the 256 counts and writes 257 words of `results`, the buffers' lengths.
    unsafe { run_1d(gpu, &kernel, &params, local, local) };
    let results = read_back(gpu, &results, 257);
    assert_eq!(results[..256], hist[..], "{defines}: the counts");
    assert_eq!(
        read_back(gpu, &counts, 256),
        vec![0; 256],
        "{defines}: cleared"
    );
    results[256] as u8
}

/// The fast Otsu chain made wrong at every step (-DOTSU_TEST_SKEW): its checks catch it and
/// the exact chain gives OpenCV's threshold; unskewed, it gives the same.
#[test]
fn otsu_fast_chain_falls_back_to_the_exact_chain() {
    let Some(gpu) = gpu_with_doubles() else {
        return;
    };
    let mut rng = Rng::new(66);
    let mut hists: Vec<[u32; 256]> = Vec::new();
    let of = |levels: &[(usize, u32)]| {
        let mut h = [0u32; 256];
        for &(v, n) in levels {
            h[v] += n;
        }
        h
    };
    for n in [1, 5, 10, 30, 100, 300, 800, 1000, 3333] {
        hists.push(of(&[(10, n), (128, n), (246, n)]));
    }
    hists.extend([
        of(&[(77, 64)]),
        of(&[(0, 3)]),
        of(&[(0, 1), (255, 1)]),
        of(&[(0, 500), (1, 7), (200, 300)]),
    ]);
    for _ in 0..30 {
        // Dense counts of a 1080p frame's size, sparse ones, and two humps.
        let mut dense = [0u32; 256];
        dense.iter_mut().for_each(|c| *c = rng.below(16200) as u32);
        hists.push(dense);
        let k = 2 + rng.below(6) as usize;
        hists.push(of(&(0..k)
            .map(|_| (rng.below(256) as usize, 1 + rng.below(5000) as u32))
            .collect::<Vec<_>>()));
        let (m1, m2) = (rng.below(128) as f64, 128.0 + rng.below(128) as f64);
        let mut humps = [0u32; 256];
        for (v, c) in humps.iter_mut().enumerate() {
            let v = v as f64;
            *c = (3000.0 * (-(v - m1).powi(2) / 200.0).exp()
                + 5000.0 * (-(v - m2).powi(2) / 800.0).exp()) as u32;
        }
        hists.push(humps);
    }
    for hist in &hists {
        let want = reference::otsu_threshold(hist);
        for defines in ["-DOTSU_FP64", "-DOTSU_FP64 -DOTSU_TEST_SKEW"] {
            for local in [256, 64] {
                assert_eq!(
                    otsu_kernel_threshold(&gpu, defines, hist, local),
                    want,
                    "{defines}, groups of {local}, histogram {hist:?}"
                );
            }
        }
    }
}

fn format_strategy() -> impl Strategy<Value = PixelFormat> {
    prop::sample::select(PixelFormat::ALL.to_vec())
}

fn border_strategy() -> impl Strategy<Value = Border> {
    prop::sample::select(Border::ALL.to_vec())
}

/// Random cases a property runs: 48, or `EDGESIGHT_PROPTEST_CASES` (fewer under
/// emulation, where each costs seconds: tests/arm/run.sh).
fn proptest_cases() -> u32 {
    std::env::var("EDGESIGHT_PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(48)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: proptest_cases(), ..ProptestConfig::default() })]

    /// Strides wider than the width: the padding holds noise that must never leak in.
    #[test]
    fn strides_wider_than_the_width(
        format in format_strategy(),
        border in border_strategy(),
        width in 1u32..70,
        height in 1u32..24,
        padding in 1u32..40,
        seed in 1u64..u64::MAX,
        roi in (0.0f64..1.0, 0.0f64..1.0, 0.0f64..1.0, 0.0f64..1.0),
    ) {
        thread_local!(static GPU: Gpu = gpu());
        let layout = FrameLayout {
            stride: format.row_bytes(width) as u32 + padding,
            ..FrameLayout::packed(format, width, height)
        };
        let mut rng = Rng(seed);
        let frame = rng.bytes(layout.frame_bytes());
        let x = (roi.0 * f64::from(width)) as u32;
        let y = (roi.1 * f64::from(height)) as u32;
        let region = Region {
            name: "r".into(),
            x,
            y,
            width: 1 + (roi.2 * f64::from(width - x - 1)) as u32,
            height: 1 + (roi.3 * f64::from(height - y - 1)) as u32,
        };
        let options = PipelineOptions { border, ..PipelineOptions::default() };
        GPU.with(|gpu| check_frame(gpu, layout, options, &frame, &[region]));
    }
}

#[test]
fn a_kernel_that_fails_to_build_names_its_file_and_shows_the_log() {
    let gpu = gpu();
    let broken = edgesight::cl::KernelSource {
        file: "broken.cl",
        text: "__kernel void f(__global int *p) { p[0] = undeclared_name; }",
    };
    let err = gpu.build(broken).expect_err("the build must fail");
    let message = err.to_string();
    assert!(message.contains("kernels/broken.cl"), "{message}");
    assert!(
        message.contains("undeclared_name"),
        "no compiler log in: {message}"
    );
}

#[test]
fn regions_can_be_replaced_between_frames() {
    let gpu = gpu();
    let mut rng = Rng::new(21);
    let layout = FrameLayout::packed(PixelFormat::Grey, 40, 30);
    let frame = rng.bytes(layout.frame_bytes());
    let mut pipeline = Pipeline::new(&gpu, layout, PipelineOptions::default(), &[]).unwrap();
    let mut slot = pipeline.new_slot(&gpu).unwrap();
    slot.write_bytes(&gpu, &frame).unwrap();
    assert!(pipeline.process(&gpu, &slot).unwrap().regions.is_empty());

    let corner: Region = "corner:30,20,10,10".parse().unwrap();
    pipeline
        .set_regions(&gpu, std::slice::from_ref(&corner))
        .unwrap();
    let result = pipeline.process(&gpu, &slot).unwrap();
    let want: u64 = (20..30)
        .flat_map(|y| frame[y * 40 + 30..y * 40 + 40].iter())
        .map(|&v| u64::from(v))
        .sum();
    assert_eq!(result.regions.len(), 1);
    assert_eq!(result.regions[0].0, corner);
    assert_eq!(result.regions[0].1.sum, want);

    let outside: Region = "outside:31,20,10,10".parse().unwrap();
    let err = pipeline.set_regions(&gpu, &[outside]).unwrap_err();
    assert!(err.to_string().contains("'outside'"), "{err}");
    // A refused set leaves the previous regions in place.
    assert_eq!(pipeline.process(&gpu, &slot).unwrap().regions[0].0, corner);
}
