//! The blocked integrals (integral.cl): tiles, groups and bands at their edges, the bytes
//! they hold on the device, region sums from their corners, and the largest frames.

use crate::check_frame;
use crate::common::{gpu, Rng};
use edgesight::frame::{FrameLayout, PixelFormat};
use edgesight::pipeline::{FullImages, Pipeline, PipelineOptions, Setup, Tuning};
use edgesight::reference;
use edgesight::region::Region;

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
        text: include_str!("../../kernels/histogram.cl"),
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
