//! The motion kernels against `reference::motion`. What they keep on the device (the
//! background, the last frame's still tiles) is what the frames before made of it, so each
//! size runs a scene of five frames through one pipeline, every frame told how fast the
//! background follows and the threshold, and compares all they leave: the tiles'
//! differences (histogram), the moving tiles, the light's sums and gain, the mask, the
//! background, and the whole frame's, every region's and every health cell's moving
//! pixels.

use std::fmt;

use super::{Findings, Rng};
use crate::cl::Gpu;
use crate::health;
use crate::pipeline::motion_tiles::Tiles;
use crate::pipeline::{
    DeviceMotion, FrameMotion, FrameResult, FullImages, Pipeline, PipelineError, PipelineOptions,
    Setup, Tuning,
};
use crate::reference::motion as reference;
use edgesight_frame::frame::{FrameLayout, PixelFormat};
use edgesight_frame::region::{self, Region};

/// Tiles not whole on either side, one tile, 68 tiles across (two work-groups of the CPU
/// tuning's), one of a camera's order, and a frame smaller than a tile (no motion).
const SIZES: [(u32, u32); 5] = [(37, 19), (16, 16), (1090, 47), (641, 479), (15, 7)];
/// Scenes a tuning runs: one a size.
pub const SCENES: usize = SIZES.len();

/// What the frames are told, in turn (rates in 1/65536, threshold in 1/256 of a luma
/// level): learn afresh, a slow follow (the still tiles fast), a fast one
/// (the still ones slower), every difference a move, an odd one.
const TOLD: [FrameMotion; 5] = [
    FrameMotion {
        rate: 65536,
        still_rate: 65536,
        threshold: 512,
    },
    FrameMotion {
        rate: 37,
        still_rate: 4349,
        threshold: 512,
    },
    FrameMotion {
        rate: 20000,
        still_rate: 3001,
        threshold: 100,
    },
    FrameMotion {
        rate: 4099,
        still_rate: 77,
        threshold: 0,
    },
    FrameMotion {
        rate: 700,
        still_rate: 9000,
        threshold: 300,
    },
];

/// A frame of the scene, for the findings.
struct Label {
    width: u32,
    height: u32,
    tuning: Tuning,
    frame: usize,
    told: FrameMotion,
}

impl fmt::Display for Label {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "grey {}x{}, {} tuning, frame {} of the scene (rates {}/65536, {}/65536 where \
             still, threshold {}/256)",
            self.width,
            self.height,
            self.tuning.name(),
            self.frame,
            self.told.rate,
            self.told.still_rate,
            self.told.threshold
        )
    }
}

/// The scene: a random picture; the same with a white block in it and a little noise;
/// that at 1.5 times the light (clipped); another picture; that one a little darker
/// (its light taken over the few tiles the frame before left still).
fn scene(width: u32, height: u32, rng: &mut Rng) -> Vec<Vec<u8>> {
    let (w, h) = (width as usize, height as usize);
    let mut random = || -> Vec<u8> { (0..w * h).map(|_| rng.next() as u8).collect() };
    let base = random();
    let noise = random();
    let block = |i: usize| {
        let (x, y) = (i % w, i / w);
        (w / 3..w / 3 + 24).contains(&x) && (h / 4..h / 4 + 20).contains(&y)
    };
    let moved: Vec<u8> = (0..w * h)
        .map(|i| match block(i) {
            true => 250,
            false => base[i].saturating_add(noise[i] % 3),
        })
        .collect();
    let brighter = moved
        .iter()
        .map(|&v| (u32::from(v) * 3 / 2).min(255) as u8)
        .collect();
    let other = random();
    let darker = other.iter().map(|&v| v - v / 16).collect();
    vec![base, moved, brighter, other, darker]
}

/// Checks one live frame's motion (`verify_every`): what it left on the device (`after`)
/// against the reference run on its `luma` (`width` x `height`), told `told`, from the
/// state the frame before left (`before`); with `moving`, that frame's result, also its
/// moving pixels (only a watched frame reports them).
#[allow(clippy::too_many_arguments)]
pub fn compare_frame_motion(
    findings: &mut Findings,
    label: &dyn fmt::Display,
    luma: &[u8],
    (width, height): (usize, usize),
    told: FrameMotion,
    before: &DeviceMotion,
    after: &DeviceMotion,
    moving: Option<&FrameResult>,
) {
    let mut background = reference::Background::new(width, height);
    background.means.clone_from(&before.background);
    background.mask.clone_from(&before.tiles.mask);
    let want = reference::tiles(
        luma,
        width,
        height,
        &mut background,
        told.rate,
        told.still_rate,
        told.threshold,
    );
    compare_tiles(findings, label, after, &want, &background);
    if let Some(result) = moving {
        compare_moving_pixels(findings, label, result, &want.mask, &background);
    }
}

/// Compares what a frame's motion left on the device with what the reference made of the
/// same frame from the same background: `want`, and `background` after it.
fn compare_tiles(
    findings: &mut Findings,
    label: &dyn fmt::Display,
    got: &DeviceMotion,
    want: &Tiles,
    background: &reference::Background,
) {
    let (g, tx) = (&got.tiles, background.tiles_x);
    let what = "tile differences (quarter levels)";
    findings.bins(
        "motion",
        what,
        label,
        &g.diff_histogram,
        &want.diff_histogram,
    );
    findings.value("motion", "moving tiles", label, g.moving, want.moving);
    let sums = (g.frame_sum, g.background_sum, g.gain);
    let want_sums = (want.frame_sum, want.background_sum, want.gain);
    let what = "light over the still tiles (frame, background, gain)";
    findings.value("motion", what, label, sums, want_sums);
    findings.image("motion", "mask of tiles", label, tx, &g.mask, &want.mask);
    let what = "background (1/65536 luma)";
    findings.image(
        "motion",
        what,
        label,
        tx,
        &got.background,
        &background.means,
    );
}

/// Compares the frame's, every region's and every health cell's moving pixels in `result`
/// with those of the reference's `mask` (of `background`'s tiles).
fn compare_moving_pixels(
    findings: &mut Findings,
    label: &dyn fmt::Display,
    result: &FrameResult,
    mask: &[u8],
    background: &reference::Background,
) {
    let (tx, ty) = (background.tiles_x, background.tiles_y);
    let (width, height) = (result.width, result.height);
    let whole = Region {
        name: "(whole frame)".into(),
        x: 0,
        y: 0,
        width,
        height,
    };
    let cells = match result.cells.is_empty() {
        true => Vec::new(),
        false => region::grid(width, height, result.grid.0, result.grid.1),
    };
    let measured = std::iter::once((&whole, &result.frame))
        .chain(result.regions.iter().map(|(r, s)| (r, s)))
        .chain(cells.iter().zip(&result.cells));
    for (region, stats) in measured {
        let want = reference::moving_pixels(mask, tx, ty, region);
        let what = format!("region '{}' moving pixels", region.name);
        findings.value("motion", &what, label, stats.motion, want);
    }
}

/// Three random regions of a frame.
fn regions(width: u32, height: u32, rng: &mut Rng) -> Vec<Region> {
    (0..3)
        .map(|r| {
            let x = rng.below(u64::from(width)) as u32;
            let y = rng.below(u64::from(height)) as u32;
            Region {
                name: format!("r{r}"),
                x,
                y,
                width: 1 + rng.below(u64::from(width - x)) as u32,
                height: 1 + rng.below(u64::from(height - y)) as u32,
            }
        })
        .collect()
}

/// Runs the scene at every size with `tuning` and records what differs under `motion`.
pub(super) fn check(
    gpu: &Gpu,
    tuning: Tuning,
    findings: &mut Findings,
) -> Result<(), PipelineError> {
    check_told(gpu, tuning, findings, |_, told| told)
}

/// As [`check`], the device told `device(frame, told)` where the reference is told `told`
/// (a test's way to make the device go wrong).
fn check_told(
    gpu: &Gpu,
    tuning: Tuning,
    findings: &mut Findings,
    device: impl Fn(usize, FrameMotion) -> FrameMotion,
) -> Result<(), PipelineError> {
    // The same frames for every tuning.
    let mut rng = Rng(0x0e1f_5ce7e);
    for (width, height) in SIZES {
        let layout = FrameLayout::packed(PixelFormat::Grey, width, height);
        let regions = regions(width, height, &mut rng);
        let setup = Setup {
            tuning,
            images: FullImages::Discarded,
        };
        let options = PipelineOptions::default();
        let mut pipeline = Pipeline::with_setup(gpu, layout, options, &regions, setup)?;
        pipeline.set_health_grid(gpu, Some(health::GRID))?;
        let mut slot = pipeline.new_slot(gpu)?;
        let mut background = reference::Background::new(width as usize, height as usize);
        let (w, h) = (width as usize, height as usize);
        for (frame, (pixels, told)) in scene(width, height, &mut rng).iter().zip(TOLD).enumerate() {
            let label = Label {
                width,
                height,
                tuning,
                frame,
                told,
            };
            pipeline.tell_motion(Some(device(frame, told)));
            slot.write_bytes(gpu, pixels)?;
            // After impossible results what the device keeps is unknown: the scene ends.
            let result = match pipeline.process(gpu, &slot) {
                Err(e) if findings.impossible(&e, &label) => break,
                processed => processed?.into_result(),
            };
            let want = reference::tiles(
                pixels,
                w,
                h,
                &mut background,
                told.rate,
                told.still_rate,
                told.threshold,
            );
            if background.tiles_x * background.tiles_y > 0 {
                let got = pipeline.read_motion(gpu)?;
                compare_tiles(findings, &label, &got, &want, &background);
            }
            compare_moving_pixels(findings, &label, &result, &want.mask, &background);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_scenes_pass_and_a_device_that_follows_another_rate_fails_at_its_background() {
        let gpu = crate::cl::test_gpu();
        let tuning = Tuning::ALL[0].1;
        let mut findings = Findings::default();
        check(&gpu, tuning, &mut findings).expect("motion");
        let motion = &findings.stages["motion"];
        assert_eq!(motion.mismatches, 0, "{:?}", motion.first_mismatch);
        // Per size and frame: the frame's moving pixels, 3 regions' and the health cells'
        // (a cell per pixel across where the frame is narrower than the grid), and where
        // there are tiles 5 more.
        let cells = |w: u32, h: u32| (w.min(health::GRID.0) * h.min(health::GRID.1)) as usize;
        let per_size = |(w, h): (u32, u32)| {
            let tiles = if w >= 16 && h >= 16 { 5 } else { 0 };
            TOLD.len() * (1 + 3 + cells(w, h) + tiles)
        };
        assert_eq!(
            motion.checks,
            SIZES.into_iter().map(per_size).sum::<usize>()
        );

        // The device's background follows at 38/65536 on frame 1 where the reference's
        // does at 37: nothing moves either way, but the background is off by a little.
        let mut findings = Findings::default();
        let slower = |frame, told: FrameMotion| match frame {
            1 => FrameMotion { rate: 38, ..told },
            _ => told,
        };
        check_told(&gpu, tuning, &mut findings, slower).expect("motion");
        let motion = &findings.stages["motion"];
        let first = motion.first_mismatch.as_deref().unwrap_or_default();
        let want = format!(
            "background (1/65536 luma), grey 37x19, {} tuning, frame 1 of the scene",
            tuning.name()
        );
        assert!(first.starts_with(&want), "{first}");
        assert!(
            motion.mismatches >= SIZES.len() - 1,
            "{}",
            motion.mismatches
        );
    }
}
