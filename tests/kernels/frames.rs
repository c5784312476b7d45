//! Every pixel format luma.cl reads through the whole pipeline, at awkward sizes, at 1080p
//! and with every border mode and magnitude.

use crate::check_frame;
use crate::common::{gpu, Rng};
use crate::raw::raw_sensor_formats;
use edgesight::frame::{FrameLayout, PixelFormat};
use edgesight::pipeline::{Border, Magnitude, PipelineOptions};

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

/// Every format luma.cl reads; the raw sensor formats (raw.cl) have their own tests in
/// `raw`, at these sizes and more.
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
