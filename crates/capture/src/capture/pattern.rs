//! The built-in test pattern: a scene that moves, so the daemon can run anywhere without a
//! camera and every metric has something to measure.
//!
//! A tinted diagonal gradient stays still, as a camera's background does (the camera-health
//! detectors see a moved camera in a background that moves), a bright disk circles over it,
//! a dark bar slides along the bottom third, and mild noise keeps the histogram from being spiky. Each
//! frame is a pure function of its sequence number ([`render`]), so tests can rebuild any
//! frame the source handed out.

use std::time::Duration;

use super::{CaptureError, CaptureStats, Fill, FrameSource, IoMode, Next, PacedSlots};
use crate::jpeg::{self, JpegError};
use edgesight_core::cl::Gpu;
use edgesight_frame::frame::{rgb_to_luma, CaptureFormat, FrameLayout, PixelFormat, Samples, Size};

/// A deterministic grey frame that looks like a scene: the built-in test pattern's first
/// frame ([`render`]), a gradient with a disk, a bar and mild noise. Not zeros,
/// not noise.
pub fn grey_frame(width: u32, height: u32) -> Vec<u8> {
    let layout = FrameLayout::packed(PixelFormat::Grey, width, height);
    let mut out = vec![0u8; layout.frame_bytes()];
    render(&layout, 0, &mut out);
    out
}

/// The test pattern's first frame as a camera of one format delivers it, and how it
/// reaches the slot: the frame `bench` measures and a picture's cost is taken on.
pub struct PatternFrame {
    /// The frames in the slot (for JPEG, the grey luma it decodes to).
    pub layout: FrameLayout,
    /// The frame as the camera delivers it: packed pixels of the format, or a JPEG image.
    pub bytes: Vec<u8>,
    /// The bytes are a JPEG image of the layout's size, decoded into the slot.
    pub jpeg: bool,
}

impl PatternFrame {
    /// The test pattern's first frame in `format` (a 4:2:2 JPEG of quality 85 of its
    /// colours for MJPEG), or, `black`, a frame whose luma is 0 everywhere.
    pub fn new(format: CaptureFormat, size: Size, black: bool) -> Result<PatternFrame, JpegError> {
        let pixels = format.pixels().unwrap_or(PixelFormat::Rgb24);
        let raw = FrameLayout::packed(pixels, size.width, size.height);
        let mut bytes = vec![0u8; raw.frame_bytes()];
        if !black {
            render(&raw, 0, &mut bytes);
        }
        Ok(match format {
            CaptureFormat::Pixels(_) => PatternFrame {
                layout: raw,
                bytes,
                jpeg: false,
            },
            CaptureFormat::Mjpeg => PatternFrame {
                layout: FrameLayout::packed(PixelFormat::Grey, size.width, size.height),
                bytes: jpeg::encode_rgb(&bytes, size, 85)?,
                jpeg: true,
            },
        })
    }
}

/// The colour of one pattern pixel.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Rgb(u8, u8, u8);

impl Rgb {
    fn luma(self) -> u8 {
        rgb_to_luma(self.0, self.1, self.2)
    }
}

/// The scene at frame `sequence`, as a colour per pixel, one row at a time.
struct Scene {
    width: u32,
    height: u32,
    disk: (i64, i64, i64),
    bar: (u32, u32, u32, u32),
    seed: u32,
}

impl Scene {
    fn at(width: u32, height: u32, sequence: u64) -> Scene {
        let t = sequence as f64;
        let (w, h) = (f64::from(width), f64::from(height));
        let radius = (h.min(w) / 6.0).max(1.0);
        let cx = w / 2.0 + (w / 3.0) * (t / 45.0).cos();
        let cy = h / 2.0 + (h / 4.0) * (t / 31.0).sin();
        let bar_w = (width / 5).max(1);
        let travel = u64::from(width + bar_w);
        let bar_x = (sequence * 7 % travel) as u32;
        Scene {
            width,
            height,
            disk: (cx as i64, cy as i64, radius as i64),
            bar: (
                bar_x.saturating_sub(bar_w),
                bar_x.min(width),
                height * 2 / 3,
                (height * 2 / 3 + (height / 8).max(1)).min(height),
            ),
            seed: (sequence as u32).wrapping_mul(0x9E37_79B9) | 1,
        }
    }

    /// Writes row `y`'s colours into `row` (`width` entries).
    fn row(&self, y: u32, row: &mut [Rgb]) {
        let (cx, cy, r) = self.disk;
        let dy = i64::from(y) - cy;
        let in_bar_rows = y >= self.bar.2 && y < self.bar.3;
        let mut noise = self.seed ^ y.wrapping_mul(0x85EB_CA6B) ^ 0x2545_F491;
        for (x, px) in row.iter_mut().enumerate() {
            let x = x as u32;
            // xorshift32: cheap noise of ±4 levels.
            noise ^= noise << 13;
            noise ^= noise >> 17;
            noise ^= noise << 5;
            let jitter = (noise >> 29) as i32 - 4;
            let g = 24 + ((x * 160 / self.width + y * 48 / self.height) % 200) as i32;
            let dx = i64::from(x) - cx;
            let colour = if dx * dx + dy * dy <= r * r {
                (230, 190, 90)
            } else if in_bar_rows && x >= self.bar.0 && x < self.bar.1 {
                (30, 40, 70)
            } else {
                (g + 10, g, g - 12)
            };
            let c = |v: i32| (v + jitter).clamp(0, 255) as u8;
            *px = Rgb(c(colour.0), c(colour.1), c(colour.2));
        }
    }
}

/// Writes frame `sequence` of the pattern into `out`, laid out as `layout` says (rows
/// `layout.stride` apart; bytes between rows are left as they are).
pub fn render(layout: &FrameLayout, sequence: u64, out: &mut [u8]) {
    render_with(layout, sequence, out, &mut Vec::new());
}

/// As [`render`], with a row of colours kept by the caller: the source renders every
/// frame without allocating.
fn render_with(layout: &FrameLayout, sequence: u64, out: &mut [u8], row: &mut Vec<Rgb>) {
    let scene = Scene::at(layout.width, layout.height, sequence);
    let width = layout.width as usize;
    let stride = layout.stride as usize;
    let row_bytes = layout.format.row_bytes(layout.width) as usize;
    row.resize(width, Rgb(0, 0, 0));
    for y in 0..layout.height {
        scene.row(y, row);
        let start = y as usize * stride;
        let line = &mut out[start..start + row_bytes];
        match layout.format {
            f if f.luma_plane_first() => {
                for (o, p) in line.iter_mut().zip(row.iter()) {
                    *o = p.luma();
                }
            }
            PixelFormat::Yuyv | PixelFormat::Uyvy => {
                let luma_first = layout.format == PixelFormat::Yuyv;
                for (i, (o, p)) in line.chunks_exact_mut(2).zip(row.iter()).enumerate() {
                    // Chroma alternates U, V; a mild constant tint is enough for a pattern.
                    let chroma = if i % 2 == 0 { 120 } else { 136 };
                    if luma_first {
                        o.copy_from_slice(&[p.luma(), chroma]);
                    } else {
                        o.copy_from_slice(&[chroma, p.luma()]);
                    }
                }
            }
            PixelFormat::Rgb24 | PixelFormat::Bgr24 | PixelFormat::Rgbx | PixelFormat::Bgrx => {
                let bpp = row_bytes / width;
                let bgr = matches!(layout.format, PixelFormat::Bgr24 | PixelFormat::Bgrx);
                for (o, p) in line.chunks_exact_mut(bpp).zip(row.iter()) {
                    let (first, last) = if bgr { (p.2, p.0) } else { (p.0, p.2) };
                    o[..3].copy_from_slice(&[first, p.1, last]);
                    if bpp == 4 {
                        o[3] = 255;
                    }
                }
            }
            PixelFormat::Mono(samples) => {
                for (x, p) in row.iter().enumerate() {
                    put_sample(line, x, p.luma(), samples);
                }
            }
            PixelFormat::Bayer(cfa, samples) => {
                let (red_x, red_y) = cfa.red_at();
                let red_row = y % 2 == red_y;
                for (x, p) in row.iter().enumerate() {
                    let red_column = x as u32 % 2 == red_x;
                    let value = match (red_row, red_column) {
                        (true, true) => p.0,
                        (false, false) => p.2,
                        _ => p.1,
                    };
                    put_sample(line, x, value, samples);
                }
            }
            other => unreachable!("{other} has its luma plane first"),
        }
    }
    // Neutral chroma after the Y plane, as far as the frame's planes reach (the luma
    // stage reads only the Y plane).
    if layout.format.luma_plane_first() {
        let luma_end = stride * layout.height as usize;
        if let Some(chroma) = out.get_mut(luma_end..layout.frame_bytes()) {
            chroma.fill(128);
        }
    }
}

/// Stores the 8-bit `value` as sample `x` of a raw row: shifted to the samples' depth,
/// with low bits below half a step (a sensor's finer levels), so that reducing it to 8 bits
/// gives `value` back.
fn put_sample(row: &mut [u8], x: usize, value: u8, samples: Samples) {
    let shift = samples.shift();
    let low = if shift > 1 {
        (x as u32 * 7) % (1 << (shift - 1))
    } else {
        0
    };
    let v = u32::from(value) << shift | low;
    match samples {
        Samples::Eight => row[x] = value,
        Samples::Le10 | Samples::Le12 | Samples::Le16 => {
            row[2 * x..2 * x + 2].copy_from_slice(&(v as u16).to_le_bytes());
        }
        Samples::Mipi10 | Samples::Mipi12 => {
            let (per_group, low_bits) = if samples == Samples::Mipi10 {
                (4, 2)
            } else {
                (2, 4)
            };
            let group = (per_group + 1) * (x / per_group);
            let lane = x % per_group;
            row[group + lane] = (v >> low_bits) as u8;
            let mask = ((1u32 << low_bits) - 1) << (low_bits * lane as u32);
            let lows = &mut row[group + per_group];
            *lows = (u32::from(*lows) & !mask
                | (v & ((1 << low_bits) - 1)) << (low_bits * lane as u32))
                as u8;
        }
    }
}

/// The test-pattern source: renders each frame straight into a mapped slot, paced at its
/// frame rate.
pub(crate) struct PatternSource {
    layout: FrameLayout,
    fps: f64,
    frames: PacedSlots,
    /// One row of colours, rendered into before it is converted to the frame's format.
    row: Vec<Rgb>,
}

impl PatternSource {
    pub fn new(gpu: &Gpu, layout: FrameLayout, fps: f64) -> Result<PatternSource, CaptureError> {
        let describe = format!("test pattern {}x{}", layout.width, layout.height);
        layout.validate().map_err(|e| CaptureError::Source {
            source_name: describe.clone(),
            message: e.to_string(),
        })?;
        Ok(PatternSource {
            layout,
            fps,
            frames: PacedSlots::new(gpu, layout, fps, &describe)?,
            row: Vec::new(),
        })
    }
}

impl FrameSource for PatternSource {
    fn describe(&self) -> String {
        format!(
            "test pattern {}x{} {} at {} fps",
            self.layout.width, self.layout.height, self.layout.format, self.fps
        )
    }

    fn layout(&self) -> FrameLayout {
        self.layout
    }

    fn io_mode(&self) -> IoMode {
        IoMode::Generated
    }

    fn is_up(&self) -> bool {
        true
    }

    fn stats(&self) -> CaptureStats {
        self.frames.stats()
    }

    fn next_frame(&mut self, gpu: &Gpu, wait: Duration) -> Result<Next<'_>, CaptureError> {
        let layout = self.layout;
        let row = &mut self.row;
        self.frames.next_frame(
            gpu,
            wait,
            || "test pattern".into(),
            |sequence, bytes| {
                render_with(&layout, sequence, bytes, row);
                Ok(Fill::Written)
            },
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use edgesight_core::reference;
    use edgesight_frame::frame::Cfa;

    fn rendered(format: PixelFormat, width: u32, height: u32, sequence: u64) -> Vec<u8> {
        let layout = FrameLayout::packed(format, width, height);
        let mut out = vec![0u8; layout.frame_bytes()];
        render(&layout, sequence, &mut out);
        out
    }

    #[test]
    fn every_format_has_the_same_luma() {
        let (w, h) = (37, 21);
        let grey = rendered(PixelFormat::Grey, w, h, 5);
        for format in PixelFormat::ALL {
            if matches!(format, PixelFormat::Bayer(..)) {
                continue;
            }
            let layout = FrameLayout::packed(format, w, h);
            let frame = rendered(format, w, h, 5);
            assert_eq!(reference::luma(&layout, &frame), grey, "{format}");
        }
    }

    /// A Bayer pattern's luma is its scene's, demosaiced: close to the grey pattern's
    /// away from edges, and far from it with the mosaic's red and blue swapped (the
    /// disk's luma moves by about 26 levels), so each pattern puts colours where its name
    /// says.
    #[test]
    fn bayer_patterns_demosaic_to_the_scene() {
        let (w, h) = (160, 120);
        let grey = rendered(PixelFormat::Grey, w, h, 3);
        let mean_error = |format: PixelFormat, read_as: PixelFormat| {
            let frame = rendered(format, w, h, 3);
            let luma = reference::luma(&FrameLayout::packed(read_as, w, h), &frame);
            let total: u64 = grey
                .iter()
                .zip(&luma)
                .map(|(&a, &b)| u64::from(a.abs_diff(b)))
                .sum();
            total as f64 / grey.len() as f64
        };
        for format in PixelFormat::ALL {
            let PixelFormat::Bayer(cfa, samples) = format else {
                continue;
            };
            let swapped = match cfa {
                Cfa::Rggb => Cfa::Bggr,
                Cfa::Bggr => Cfa::Rggb,
                Cfa::Grbg => Cfa::Gbrg,
                Cfa::Gbrg => Cfa::Grbg,
            };
            let right = mean_error(format, format);
            let wrong = mean_error(format, PixelFormat::Bayer(swapped, samples));
            assert!(right < 3.0, "{format}: {right}");
            assert!(
                wrong > right + 1.0,
                "{format}: {right} right, {wrong} swapped"
            );
        }
    }

    #[test]
    fn frames_move_and_look_natural() {
        let (w, h) = (160, 120);
        let a = rendered(PixelFormat::Grey, w, h, 0);
        let b = rendered(PixelFormat::Grey, w, h, 10);
        let changed = a.iter().zip(&b).filter(|(x, y)| x != y).count();
        assert!(changed > a.len() / 2, "only {changed} pixels changed");
        // Many grey levels (not a few flat regions), and neither black nor saturated.
        let mut seen = [false; 256];
        a.iter().for_each(|&v| seen[v as usize] = true);
        let levels = seen.iter().filter(|&&s| s).count();
        assert!(levels > 150, "{levels} grey levels");
        let mean = a.iter().map(|&v| u64::from(v)).sum::<u64>() / a.len() as u64;
        assert!((60..200).contains(&mean), "mean {mean}");
        assert_eq!(a, rendered(PixelFormat::Grey, w, h, 0), "not deterministic");
    }

    #[test]
    fn padding_between_rows_is_left_alone() {
        let layout = FrameLayout {
            format: PixelFormat::Rgb24,
            width: 5,
            height: 3,
            stride: 20,
        };
        let mut out = vec![0xEEu8; layout.frame_bytes()];
        render(&layout, 1, &mut out);
        for row in out.chunks(20) {
            assert!(row[15..].iter().all(|&b| b == 0xEE));
        }
    }

    /// The smallest frames render whole: whatever the buffer held before, the frame's
    /// luma is the same (a buffer of 0xFF and one of zeros; a MIPI-packed group's bytes
    /// past the width are padding, left alone), and each format's luma is the grey
    /// pattern's (a Bayer mosaic's luma is demosaiced, see below).
    #[test]
    fn tiny_frames_render_whole() {
        for (w, h, sequence) in [(1, 1, 3), (3, 2, 1000), (2, 3, 7)] {
            let grey = rendered(PixelFormat::Grey, w, h, sequence);
            for format in PixelFormat::ALL {
                let layout = FrameLayout::packed(format, w, h);
                let zeros = rendered(format, w, h, sequence);
                let mut ones = vec![0xFF; layout.frame_bytes()];
                render(&layout, sequence, &mut ones);
                let luma = reference::luma(&layout, &zeros);
                let over_ones = reference::luma(&layout, &ones);
                assert_eq!(over_ones, luma, "{format} {w}x{h}: samples left unwritten");
                if !matches!(format, PixelFormat::Bayer(..)) {
                    assert_eq!(luma, grey, "{format} {w}x{h}");
                }
            }
        }
    }

    #[test]
    fn grey_frames_look_like_scenes() {
        let f = grey_frame(320, 180);
        assert_eq!(f.len(), 320 * 180);
        assert_eq!(f, grey_frame(320, 180), "deterministic");
        let mut hist = [0usize; 256];
        for &v in &f {
            hist[v as usize] += 1;
        }
        // Many levels in use, none holding most pixels: neither flat nor binary.
        assert!(hist.iter().filter(|&&c| c > 0).count() > 100);
        assert!(hist.iter().all(|&c| c < f.len() / 4));
        // Neighbours are close far more often than not: structure, not noise.
        let close = f.windows(2).filter(|p| p[0].abs_diff(p[1]) <= 8).count();
        assert!(close > f.len() * 9 / 10, "{close}");
    }
}
