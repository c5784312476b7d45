//! What `process` writes: `report.json`, pictures a person can look at, and with `--raw`
//! the exact per-pixel outputs as little-endian, row-major, unpadded files.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

pub use edgesight_frame::files::WriteError;

use image::{GrayImage, Rgb, RgbImage};
use serde::Serialize;

use edgesight_core::cl::Timing;
use edgesight_core::pipeline::{FrameResult, Images, Pictures, PipelineOptions};
use edgesight_frame::files;
use edgesight_frame::region::RegionStats;

/// One region's features in the report.
#[derive(Debug, Serialize)]
pub struct RoiReport {
    /// The region's name, as configured.
    pub name: String,
    /// The region's left column, in pixels from the frame's left edge.
    pub x: u32,
    /// The region's top row, in pixels from the frame's top edge.
    pub y: u32,
    /// The region's width in pixels.
    pub w: u32,
    /// The region's height in pixels.
    pub h: u32,
    /// The region's mean luma, from 0 to 255.
    pub mean: f64,
    /// The population standard deviation of the region's luma.
    pub stddev: f64,
    /// The share of the region's pixels that are edges (gradient magnitude at least
    /// the edge threshold), from 0 to 1.
    pub edge_ratio: f64,
    /// The share of the region's pixels above the Otsu threshold, from 0 to 1.
    pub foreground_ratio: f64,
}

/// `report.json`.
#[derive(Debug, Serialize)]
pub struct Report {
    /// The frame's width in pixels.
    pub width: u32,
    /// The frame's height in pixels.
    pub height: u32,
    /// The source's pixel format, as the command line spells it (`yuyv`, `grey`).
    pub format: String,
    /// The OpenCL device the frame was processed on, as `NAME (PLATFORM)`.
    pub device: String,
    /// The pipeline options the frame was processed with.
    pub options: PipelineOptions,
    /// The luma threshold Otsu's method chose for the frame, from 0 to 255.
    pub otsu_threshold: u8,
    /// The frame's luma histogram: how many pixels have each value from 0 to 255.
    pub histogram: Vec<u32>,
    /// The frame's mean luma, from 0 to 255.
    pub mean_luma: f64,
    /// The population standard deviation of the frame's luma.
    pub luma_stddev: f64,
    /// The share of the frame's pixels above the Otsu threshold, from 0 to 1.
    pub foreground_ratio: f64,
    /// The share of the frame's pixels that are edges (gradient magnitude at least the
    /// edge threshold), from 0 to 1.
    pub edge_ratio: f64,
    /// Each configured region's features, in the config's order.
    pub rois: Vec<RoiReport>,
    /// Time of each stage and their sum (`total`), in milliseconds, on the clock `timing`
    /// names.
    pub timings_ms: BTreeMap<String, f64>,
    /// `device` (profiling events) or `host` (where the driver gives no profiling queue).
    pub timing: Timing,
}

impl Report {
    /// The report of `result`, a frame in pixel format `format` processed on the OpenCL
    /// device `device` with `options`; stage times are turned into milliseconds.
    pub fn new(
        result: &FrameResult,
        format: &str,
        device: &str,
        options: PipelineOptions,
    ) -> Report {
        let frame: &RegionStats = &result.frame;
        let mut timings_ms: BTreeMap<String, f64> = result
            .timings
            .iter()
            .map(|(stage, ns)| (stage.name().to_string(), ns as f64 / 1e6))
            .collect();
        timings_ms.insert("total".into(), result.timings.total() as f64 / 1e6);
        Report {
            width: result.width,
            height: result.height,
            format: format.to_string(),
            device: device.to_string(),
            options,
            otsu_threshold: result.otsu_threshold,
            histogram: result.histogram.to_vec(),
            mean_luma: frame.mean(),
            luma_stddev: frame.stddev(),
            foreground_ratio: frame.foreground_ratio(),
            edge_ratio: frame.edge_ratio(),
            rois: result
                .regions
                .iter()
                .map(|(r, s)| RoiReport {
                    name: r.name.clone(),
                    x: r.x,
                    y: r.y,
                    w: r.width,
                    h: r.height,
                    mean: s.mean(),
                    stddev: s.stddev(),
                    edge_ratio: s.edge_ratio(),
                    foreground_ratio: s.foreground_ratio(),
                })
                .collect(),
            timings_ms,
            timing: result.timing,
        }
    }
}

fn write_file(path: PathBuf, bytes: &[u8]) -> Result<PathBuf, WriteError> {
    files::write_file(&path, bytes)?;
    Ok(path)
}

/// Writes `image` as a PNG file: encoded here, so that the file is written as every
/// other output is (the encoder's own `save` opens the path, following what is there).
fn save_png<P: image::PixelWithColorType>(
    path: PathBuf,
    image: &image::ImageBuffer<P, Vec<P::Subpixel>>,
) -> Result<PathBuf, WriteError>
where
    [P::Subpixel]: image::EncodableLayout,
{
    let mut png = std::io::Cursor::new(Vec::new());
    image
        .write_to(&mut png, image::ImageFormat::Png)
        .map_err(|e| WriteError::Io {
            path: path.clone(),
            source: std::io::Error::other(e),
        })?;
    write_file(path, png.get_ref())
}

fn grey(width: u32, height: u32, pixels: &[u8]) -> GrayImage {
    GrayImage::from_raw(width, height, pixels.to_vec()).expect("image buffers are width * height")
}

/// A 256-bin bar chart with the Otsu threshold drawn as a red line.
pub(crate) fn histogram_chart(histogram: &[u32; 256], threshold: u8) -> RgbImage {
    const BAR: u32 = 2;
    const MARGIN: u32 = 8;
    const PLOT_HEIGHT: u32 = 200;
    let (w, h) = (256 * BAR + 2 * MARGIN, PLOT_HEIGHT + 2 * MARGIN);
    let mut img = RgbImage::from_pixel(w, h, Rgb([255, 255, 255]));
    let peak = u64::from(*histogram.iter().max().unwrap_or(&0)).max(1);
    for (bin, &count) in histogram.iter().enumerate() {
        let bar = (u64::from(count) * u64::from(PLOT_HEIGHT)).div_ceil(peak) as u32;
        let shade = bin as u8 / 2 + 40; // bars darker to lighter, as the luma they count
        for dx in 0..BAR {
            for dy in 0..bar {
                let x = MARGIN + bin as u32 * BAR + dx;
                img.put_pixel(x, MARGIN + PLOT_HEIGHT - 1 - dy, Rgb([shade, shade, shade]));
            }
        }
    }
    // Pixels above the threshold are foreground: the line sits on the threshold bin's right edge.
    let x = MARGIN + (u32::from(threshold) + 1) * BAR - 1;
    for y in 0..h {
        img.put_pixel(x, y, Rgb([220, 30, 30]));
    }
    for x in MARGIN..MARGIN + 256 * BAR {
        img.put_pixel(x, MARGIN + PLOT_HEIGHT, Rgb([0, 0, 0]));
    }
    img
}

/// Writes `report.json`, `luma.png`, `edges.png` (magnitude), `mask.png` and
/// `histogram.png` into `dir`; returns the paths written.
pub fn write_outputs(
    dir: &Path,
    report: &Report,
    pictures: &Pictures,
) -> Result<Vec<PathBuf>, WriteError> {
    let (w, h) = (report.width, report.height);
    let json = serde_json::to_vec_pretty(report).expect("the report serialises");
    let mut histogram = [0u32; 256];
    histogram.copy_from_slice(&report.histogram);
    Ok(vec![
        write_file(dir.join("report.json"), &json)?,
        save_png(dir.join("luma.png"), &grey(w, h, &pictures.luma))?,
        save_png(dir.join("edges.png"), &grey(w, h, &pictures.magnitude))?,
        save_png(dir.join("mask.png"), &grey(w, h, &pictures.mask))?,
        save_png(
            dir.join("histogram.png"),
            &histogram_chart(&histogram, report.otsu_threshold),
        )?,
    ])
}

fn le_bytes<T: Copy, const N: usize>(values: &[T], to_le: impl Fn(T) -> [u8; N]) -> Vec<u8> {
    values.iter().flat_map(|&v| to_le(v)).collect()
}

/// Writes the exact outputs: `luma.u8`, `sobel_dx.s16`, `sobel_dy.s16`, `magnitude.u8`,
/// `edge_mask.u8`, `mask.u8`, and the `(H+1)x(W+1)` `integral_sum.u32`,
/// `integral_sqsum.u64`, `integral_edges.u32`, `integral_foreground.u32`.
///
/// [`Images`] come only from a pipeline that keeps its full images
/// ([`FullImages::Kept`](edgesight_core::pipeline::FullImages::Kept)).
pub fn write_raw(dir: &Path, images: &Images) -> Result<Vec<PathBuf>, WriteError> {
    let pictures = &images.pictures;
    Ok(vec![
        write_file(dir.join("luma.u8"), &pictures.luma)?,
        write_file(
            dir.join("sobel_dx.s16"),
            &le_bytes(&images.dx, i16::to_le_bytes),
        )?,
        write_file(
            dir.join("sobel_dy.s16"),
            &le_bytes(&images.dy, i16::to_le_bytes),
        )?,
        write_file(dir.join("magnitude.u8"), &pictures.magnitude)?,
        write_file(dir.join("edge_mask.u8"), &images.edges)?,
        write_file(dir.join("mask.u8"), &pictures.mask)?,
        write_file(
            dir.join("integral_sum.u32"),
            &le_bytes(&images.integral_sum, u32::to_le_bytes),
        )?,
        write_file(
            dir.join("integral_sqsum.u64"),
            &le_bytes(&images.integral_sqsum, u64::to_le_bytes),
        )?,
        write_file(
            dir.join("integral_edges.u32"),
            &le_bytes(&images.integral_edges, u32::to_le_bytes),
        )?,
        write_file(
            dir.join("integral_foreground.u32"),
            &le_bytes(&images.integral_foreground, u32::to_le_bytes),
        )?,
    ])
}
