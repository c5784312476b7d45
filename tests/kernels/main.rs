//! Every kernel against its plain-Rust reference on the OpenCL device (POCL in CI): awkward
//! sizes, every pixel format, every border mode, strides wider than the width, guard bands
//! after every output, every tuning of `Tuning::ALL` with and without the full images
//! kept, and Otsu on the histograms where rounding decides ties.
//!
//! One test binary, a module per topic, so that the emulated boards and the second OpenCL
//! implementation run it as one executable (tests/arm, tests/rusticl):
//!
//! | module | what the kernels are held to |
//! |---|---|
//! | `frames` | every format luma.cl reads at awkward sizes and at 1080p, every border and magnitude |
//! | `raw` | the raw sensor formats (raw.cl): vector runs, padded rows, rounding and saturation |
//! | `integrals` | the blocked integrals' tiles and bands, their bytes, region sums, the largest frames |
//! | `otsu` | Otsu's ties, otsu.cl's binary64 emulation, the fast chain's quotients and fallback |
//! | `properties` | random formats, borders, strides and regions |
//! | `pipeline` | slots and regions reused between frames, a kernel that fails to build |
//!
//! `check_frame`, below, which most modules share, runs a frame through every setup and
//! compares every output with the reference.

#[path = "../common/mod.rs"]
mod common;

mod frames;
mod integrals;
mod otsu;
mod pipeline;
mod properties;
mod raw;

use common::assert_image_eq;
use edgesight::cl::Gpu;
use edgesight::frame::FrameLayout;
use edgesight::health;
use edgesight::pipeline::{
    FullImages, OtsuLaunch, Pipeline, PipelineError, PipelineOptions, Setup, Tuning,
};
use edgesight::reference;
use edgesight::region::{self, Region};

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
