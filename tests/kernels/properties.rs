//! Random frames of every format and border, strides wider than the width and a random
//! region.

use crate::check_frame;
use crate::common::{gpu, Rng};
use edgesight::cl::Gpu;
use edgesight::frame::{FrameLayout, PixelFormat};
use edgesight::pipeline::{Border, PipelineOptions};
use edgesight::region::Region;
use proptest::prelude::*;

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
