//! The coherency run: many frames, each different from every one before, through one
//! pipeline and a few frame slots in turn, as a camera's frames arrive, each compared
//! with the reference ([`compare_frame`]). The checks over synthetic frames build a
//! pipeline per frame; this one reuses the slots, so a driver that hands the kernels a
//! slot's stale contents (a cache not cleaned after the host's write through the mapping,
//! a copy made at the first map and never again) computes the frame before's results and
//! shows here as a mismatch.

use std::collections::BTreeMap;
use std::fmt;

use serde::Serialize;

use super::{compare_frame, Expected, Findings, Rng, StageResult, STAGES};
use crate::cl::Gpu;
use crate::health;
use crate::pipeline::{FullImages, Pipeline, PipelineError, PipelineOptions, Setup, Tuning};
use edgesight_frame::frame::{FrameLayout, PixelFormat};
use edgesight_frame::region::Region;

/// Frames `selftest` runs: enough for every slot to be reused many times.
pub const FRAMES: usize = 200;
/// The frames' size: a camera's shape, small enough that the reference of every frame
/// costs little (the run takes a few seconds on POCL).
pub const SIZE: (u32, u32) = (480, 270);
/// Slots the frames go through in turn, as a V4L2 queue's buffers.
pub const SLOTS: usize = 3;

/// What the run found.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Coherency {
    /// Frames run through the pipeline.
    pub frames: usize,
    /// Frame width in pixels.
    pub width: u32,
    /// Frame height in pixels.
    pub height: u32,
    /// The frames' pixel format's name (`grey`).
    pub format: &'static str,
    /// Frame slots the frames went through in turn.
    pub slots: usize,
    /// The name of the tuning the pipeline ran with.
    pub tuning: &'static str,
    /// Frames whose results differed from the reference anywhere.
    pub frames_mismatched: usize,
    /// Outputs compared and how many differed, in all and by stage.
    pub checks: usize,
    /// Outputs that differed from the reference, over every frame.
    pub mismatches: usize,
    /// The first difference of the first frame that had one.
    pub first_mismatch: Option<String>,
    /// Checks and mismatches by stage, of the stages that were checked.
    pub stages: BTreeMap<&'static str, StageResult>,
}

impl Coherency {
    /// Whether no output differed from the reference.
    pub fn passed(&self) -> bool {
        self.mismatches == 0
    }
}

/// One frame of the run, for the findings.
struct Label {
    frame: usize,
    slot: usize,
    tuning: Tuning,
}

impl fmt::Display for Label {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "coherency frame {} (slot {}), grey {}x{}, {} tuning",
            self.frame,
            self.slot,
            SIZE.0,
            SIZE.1,
            self.tuning.name()
        )
    }
}

/// Frame `i`: a gradient that slides, a bright block that moves and changes size, and
/// noise, so that every frame's histogram, threshold, edges and sums are its own.
fn frame(i: usize, rng: &mut Rng) -> Vec<u8> {
    let (w, h) = (SIZE.0 as usize, SIZE.1 as usize);
    let (bx, by) = ((i * 7) % w, (i * 5) % h);
    let side = 8 + i % 40;
    (0..w * h)
        .map(|p| {
            let (x, y) = (p % w, p / w);
            if (bx..bx + side).contains(&x) && (by..by + side).contains(&y) {
                return 255 - (i % 16) as u8;
            }
            let ramp = (x + 2 * y + 3 * i) % 200;
            (ramp + rng.below(16 + (i % 32) as u64) as usize) as u8
        })
        .collect()
}

/// Runs `frames` frames with `tuning` through one pipeline on `gpu`, [`SLOTS`] slots in
/// turn, the regions and health cells measured as the daemon measures them, and compares
/// each with the reference. A frame whose results are impossible is a mismatch of the
/// stage that wrote them, not an error.
pub fn run(gpu: &Gpu, tuning: Tuning, frames: usize) -> Result<Coherency, PipelineError> {
    let layout = FrameLayout::packed(PixelFormat::Grey, SIZE.0, SIZE.1);
    let options = PipelineOptions::default();
    let regions = [
        ("left", 0, 0, SIZE.0 / 3, SIZE.1),
        ("centre", SIZE.0 / 4, SIZE.1 / 4, SIZE.0 / 2, SIZE.1 / 2),
        ("corner", SIZE.0 - 17, SIZE.1 - 9, 17, 9),
    ]
    .map(|(name, x, y, width, height)| Region {
        name: name.into(),
        x,
        y,
        width,
        height,
    });
    let setup = Setup {
        tuning,
        images: FullImages::Discarded,
    };
    let mut pipeline = Pipeline::with_setup(gpu, layout, options, &regions, setup)?;
    pipeline.set_health_grid(gpu, Some(health::GRID))?;
    let mut slots = (0..SLOTS)
        .map(|_| pipeline.new_slot(gpu))
        .collect::<Result<Vec<_>, _>>()?;
    let mut rng = Rng(0xc04e_5e1f_u64.wrapping_add(frames as u64));
    let mut findings = Findings::default();
    let (mut frames_mismatched, mut first_mismatch) = (0, None);
    for i in 0..frames {
        let bytes = frame(i, &mut rng);
        let expected = Expected::of(&layout, options, &bytes);
        let slot = &mut slots[i % SLOTS];
        slot.write_bytes(gpu, &bytes)?;
        let label = Label {
            frame: i,
            slot: i % SLOTS,
            tuning,
        };
        let before = findings.clone();
        match pipeline.process(gpu, slot) {
            Err(e) if findings.impossible(&e, &label) => {}
            processed => {
                let processed = processed?;
                let pictures = processed.read_pictures(gpu)?;
                compare_frame(
                    &mut findings,
                    &label,
                    &expected,
                    &processed,
                    &pictures,
                    &regions,
                );
            }
        }
        if mismatches(&findings) > mismatches(&before) {
            frames_mismatched += 1;
            first_mismatch = first_mismatch.or_else(|| first_new(&before, &findings));
        }
    }
    let stages: BTreeMap<&'static str, StageResult> = findings
        .every_stage()
        .into_iter()
        .filter(|(_, s)| s.checks > 0)
        .collect();
    Ok(Coherency {
        frames,
        width: SIZE.0,
        height: SIZE.1,
        format: layout.format.name(),
        slots: SLOTS,
        tuning: tuning.name(),
        frames_mismatched,
        checks: stages.values().map(|s| s.checks).sum(),
        mismatches: mismatches(&findings),
        first_mismatch,
        stages,
    })
}

fn mismatches(findings: &Findings) -> usize {
    findings.stages.values().map(|s| s.mismatches).sum()
}

/// The description of the first stage, in the table's order, whose mismatches grew
/// from `before` to `after` and that describes one (a stage describes only its first).
fn first_new(before: &Findings, after: &Findings) -> Option<String> {
    STAGES.iter().find_map(|stage| {
        let now = after.stages.get(stage)?;
        let was = before.stages.get(stage).map_or(0, |s| s.mismatches);
        (now.mismatches > was).then(|| now.first_mismatch.clone())?
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cl::scribble::{self, Reads};

    fn tuning(gpu: &Gpu) -> Tuning {
        crate::pipeline::TuningChoice::Auto.resolve(gpu)
    }

    /// Frames differ from one another: no two in a row are alike, nor those a slot holds
    /// in turn.
    #[test]
    fn every_frame_is_its_own() {
        let mut rng = Rng(7);
        let frames: Vec<Vec<u8>> = (0..2 * SLOTS + 1).map(|i| frame(i, &mut rng)).collect();
        for (i, f) in frames.iter().enumerate() {
            assert_eq!(f.len(), (SIZE.0 * SIZE.1) as usize);
            for g in &frames[i + 1..] {
                assert_ne!(f, g, "frame {i}");
            }
        }
    }

    /// On a right device every frame matches: every stage the frames reach is checked
    /// once a frame (the luma image, the magnitude, the luma histogram), none differs.
    #[test]
    fn a_right_device_matches_on_every_frame() {
        let gpu = crate::cl::test_gpu();
        let c = run(&gpu, tuning(&gpu), 24).expect("the run");
        assert_eq!(
            (
                c.frames,
                c.frames_mismatched,
                c.mismatches,
                &c.first_mismatch
            ),
            (24, 0, 0, &None)
        );
        for stage in ["luma", "sobel"] {
            assert_eq!(c.stages[stage].checks, 24, "{stage}");
        }
        assert!(c.stages["histogram"].checks >= 24, "{:?}", c.stages);
        assert_eq!(c.checks, c.stages.values().map(|s| s.checks).sum::<usize>());
        assert!(c.passed());
    }

    /// A device whose images read back as garbage mismatches on every frame, named from
    /// the first frame on, in the JSON as in the struct; no error, no panic.
    #[test]
    fn a_device_writing_garbage_images_mismatches_on_every_frame() {
        let gpu = crate::cl::test_gpu();
        let tuning = tuning(&gpu);
        scribble::on(0x00c0_4e2e, Reads::Images);
        let c = run(&gpu, tuning, 6);
        scribble::off();
        let c = c.expect("garbage is a finding, not an error");
        assert_eq!((c.frames, c.frames_mismatched), (6, 6));
        assert!(!c.passed());
        let json = serde_json::to_value(&c).expect("json");
        assert_eq!(json["frames_mismatched"], 6);
        assert_eq!(json["stages"]["luma"]["mismatches"], 6);
        assert_eq!(json["stages"]["histogram"]["mismatches"], 0);
        let first = json["first_mismatch"].as_str().unwrap_or_default();
        assert!(
            first.starts_with("luma, coherency frame 0 (slot 0), grey 480x270"),
            "{first}"
        );
    }

    /// A device whose every read is garbage: its results are impossible, each frame a
    /// mismatch of the stage checked first.
    #[test]
    fn a_device_writing_garbage_everywhere_mismatches_on_every_frame() {
        let gpu = crate::cl::test_gpu();
        let tuning = tuning(&gpu);
        scribble::on(0x0bad_cafe, Reads::All);
        let c = run(&gpu, tuning, 4);
        scribble::off();
        let c = c.expect("garbage is a finding, not an error");
        assert_eq!((c.frames, c.frames_mismatched, c.mismatches), (4, 4, 4));
        assert!(c.first_mismatch.is_some());
    }
}
