//! `edgesight selftest`: every stage on the chosen device, with each tuning, on synthetic
//! frames of every input format at awkward sizes and wider strides, every border mode and
//! both magnitudes, and motion over a scene of frames ([`motion`]), against the plain-Rust
//! reference ([`crate::reference`]).
//!
//! A board's OpenCL driver is the part edgesight cannot test before it ships: each vendor
//! image has its own libmali. This is the check a board user runs once after installing,
//! and what `[opencl] verify_every` runs on live frames ([`compare_frame`]). The
//! coherency run ([`coherency`]) takes many changing frames through one pipeline's slots.

use std::collections::BTreeMap;
use std::fmt;

use serde::Serialize;

use crate::cl::Gpu;
use crate::health;
use crate::pipeline::{
    Border, FrameResult, FullImages, Magnitude, Pictures, Pipeline, PipelineError, PipelineOptions,
    Setup, Tuning,
};
use crate::reference;
use edgesight_frame::frame::{FrameLayout, PixelFormat};
use edgesight_frame::region::{self, Region, RegionStats};

pub mod coherency;
mod motion;

pub use motion::{compare_frame_motion, SCENES as MOTION_SCENES};

/// The stages, in the order the table shows them.
pub const STAGES: [&str; 7] = [
    "luma",
    "sobel",
    "histogram",
    "otsu",
    "integral",
    "regions",
    "motion",
];

/// What one stage's checks found: how many outputs were compared, and the first that
/// differed (where, and both values).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct StageResult {
    /// Outputs of the stage compared with the reference.
    pub checks: usize,
    /// The first output that differed: what, in which case, where, and both values.
    pub first_mismatch: Option<String>,
    /// Outputs that differed from the reference.
    pub mismatches: usize,
}

/// Every stage's result, by stage name.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Findings {
    /// Each stage's result, by its name in [`STAGES`]; a stage never checked is absent.
    pub stages: BTreeMap<&'static str, StageResult>,
}

impl Findings {
    /// Whether no stage had a mismatch.
    pub fn passed(&self) -> bool {
        self.stages.values().all(|s| s.mismatches == 0)
    }

    /// Every stage of [`STAGES`], those not checked with no checks: a report lists them
    /// all, so that a stage missing is seen as not run.
    pub fn every_stage(&self) -> BTreeMap<&'static str, StageResult> {
        STAGES
            .iter()
            .map(|&stage| (stage, self.stages.get(stage).cloned().unwrap_or_default()))
            .collect()
    }

    /// Counts one check of `stage`; a failed one (`mismatch`) is counted as such, and
    /// the first of the stage is described (`describe` runs only then).
    fn record(&mut self, stage: &'static str, mismatch: bool, describe: impl FnOnce() -> String) {
        let s = self.stages.entry(stage).or_default();
        s.checks += 1;
        if mismatch {
            s.mismatches += 1;
            if s.first_mismatch.is_none() {
                s.first_mismatch = Some(describe());
            }
        }
    }

    /// Records a frame whose results were impossible ([`PipelineError::Implausible`]) as a
    /// mismatch of the stage that wrote them, and says whether `error` was one: a broken
    /// driver ends in the table, not in an error.
    pub fn impossible(&mut self, error: &PipelineError, case: &dyn fmt::Display) -> bool {
        let PipelineError::Implausible { stage, what } = error else {
            return false;
        };
        // The gradient histogram is checked with the luma histogram's stage here.
        let stage = STAGES
            .into_iter()
            .find(|s| *s == stage.name())
            .unwrap_or("histogram");
        self.record(stage, true, || format!("{what}, {case}"));
        true
    }

    /// Compares an image of `width` columns; notes the first differing pixel.
    fn image<T: PartialEq + fmt::Display>(
        &mut self,
        stage: &'static str,
        what: &str,
        case: &dyn fmt::Display,
        width: usize,
        got: &[T],
        want: &[T],
    ) {
        let first = got.iter().zip(want).position(|(g, w)| g != w);
        let mismatch = first.is_some() || got.len() != want.len();
        self.record(stage, mismatch, || match first {
            Some(i) => format!(
                "{what}, {case}: first difference at (x {}, y {}): device {}, reference {} \
                 ({} of {} values differ)",
                i % width.max(1),
                i / width.max(1),
                got[i],
                want[i],
                got.iter().zip(want).filter(|(g, w)| g != w).count(),
                want.len()
            ),
            None => format!(
                "{what}, {case}: {} values from the device, {} from the reference",
                got.len(),
                want.len()
            ),
        });
    }

    /// Compares two histograms; notes the first differing bin.
    fn bins(
        &mut self,
        stage: &'static str,
        what: &str,
        case: &dyn fmt::Display,
        got: &[u32],
        want: &[u32],
    ) {
        let first = got.iter().zip(want).position(|(g, w)| g != w);
        self.record(stage, first.is_some(), || {
            let bin = first.unwrap_or_default();
            format!(
                "{what}, {case}: first difference in bin {bin}: device {}, reference {}",
                got[bin], want[bin]
            )
        });
    }

    /// Compares one value (a threshold, a region's sums).
    fn value<T: PartialEq + fmt::Debug>(
        &mut self,
        stage: &'static str,
        what: &str,
        case: &dyn fmt::Display,
        got: T,
        want: T,
    ) {
        self.record(stage, got != want, || {
            format!("{what}, {case}: device {got:?}, reference {want:?}")
        });
    }
}

/// What the reference makes of one frame: every image and value a stage is compared with,
/// worked out once and held to by every tuning and setup.
pub struct Expected {
    /// Frame width in pixels.
    pub width: u32,
    /// Frame height in pixels.
    pub height: u32,
    /// 8-bit luma, dense, `width` bytes a row.
    pub luma: Vec<u8>,
    /// Sobel's horizontal derivative of each pixel (empty for a live frame's check).
    pub dx: Vec<i16>,
    /// Sobel's vertical derivative of each pixel (empty for a live frame's check).
    pub dy: Vec<i16>,
    /// Gradient magnitude of each pixel, L1 or L2 as the options say, saturated to 255.
    pub magnitude: Vec<u8>,
    /// Edge mask: 255 where the magnitude is at or above the edge threshold, else 0.
    pub edges: Vec<u8>,
    /// The luma histogram: pixels at each grey level.
    pub histogram: [u32; 256],
    /// Otsu's threshold of that histogram.
    pub threshold: u8,
    /// Otsu's mask: 255 where luma is above the threshold, else 0.
    pub mask: Vec<u8>,
}

impl Expected {
    /// What a live frame's check needs: [`Expected::of`] without `dx` and `dy` (left
    /// empty), which it never holds, so the reference takes 4 bytes a pixel, not 8.
    pub fn of_live(layout: &FrameLayout, options: PipelineOptions, frame: &[u8]) -> Expected {
        let (w, h) = (layout.width as usize, layout.height as usize);
        let luma = reference::luma(layout, frame);
        let magnitude = reference::sobel_magnitude(&luma, w, h, options.border, options.magnitude);
        Expected::from_magnitude(layout, options, luma, (Vec::new(), Vec::new()), magnitude)
    }

    /// What the reference makes of `frame`, a buffer of `layout`, run with `options`: every
    /// image, the derivatives included.
    pub fn of(layout: &FrameLayout, options: PipelineOptions, frame: &[u8]) -> Expected {
        let (w, h) = (layout.width as usize, layout.height as usize);
        let luma = reference::luma(layout, frame);
        let (dx, dy) = reference::sobel(&luma, w, h, options.border);
        let magnitude = reference::magnitude(&dx, &dy, options.magnitude);
        Expected::from_magnitude(layout, options, luma, (dx, dy), magnitude)
    }

    fn from_magnitude(
        layout: &FrameLayout,
        options: PipelineOptions,
        luma: Vec<u8>,
        (dx, dy): (Vec<i16>, Vec<i16>),
        magnitude: Vec<u8>,
    ) -> Expected {
        let edges = reference::edge_mask(&magnitude, options.edge_threshold);
        let histogram = reference::histogram(&luma);
        let threshold = reference::otsu_threshold(&histogram);
        let mask = reference::binarize(&luma, threshold);
        Expected {
            width: layout.width,
            height: layout.height,
            luma,
            dx,
            dy,
            magnitude,
            edges,
            histogram,
            threshold,
            mask,
        }
    }
}

/// One synthetic frame: its layout, options and regions.
pub struct Case {
    /// The frame's format, size and row stride.
    pub layout: FrameLayout,
    /// The border mode, magnitude and edge threshold the pipeline runs with.
    pub options: PipelineOptions,
    /// The regions measured on the frame.
    pub regions: Vec<Region>,
    /// The frame's bytes, as a camera would deliver them.
    pub frame: Vec<u8>,
}

impl fmt::Display for Case {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let l = &self.layout;
        write!(
            f,
            "{} {}x{} stride {}, border {}, {:?}, edge threshold {}",
            l.format,
            l.width,
            l.height,
            l.stride,
            self.options.border.name(),
            self.options.magnitude,
            self.options.edge_threshold
        )
    }
}

/// xorshift64*: the frames are the same on every machine and every run.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

/// Sizes no work-group size divides, the smallest there are, and one of a camera's order.
const SIZES: [(u32, u32); 5] = [(37, 19), (17, 3), (1, 1), (33, 2), (15, 7)];
/// Bytes of padding after each row: strides wider than the width.
const PADDING: [u32; 4] = [0, 16, 3, 1];

/// The frames: every format at one awkward size of [`SIZES`] with one [`PADDING`], border
/// modes and magnitudes in turn, random bytes (high bits above a raw format's depth
/// included) with structure in their top rows so that Otsu and the edges have something
/// to find, three random regions each; then grey and YUYV at 641x479 with wide strides.
pub fn cases() -> Vec<Case> {
    let mut rng = Rng(0x5e1f_7e57);
    let mut layouts: Vec<FrameLayout> = PixelFormat::ALL
        .iter()
        .enumerate()
        .map(|(i, &format)| {
            let (w, h) = SIZES[i % SIZES.len()];
            FrameLayout {
                stride: format.row_bytes(w) as u32 + PADDING[i % PADDING.len()],
                ..FrameLayout::packed(format, w, h)
            }
        })
        .collect();
    for format in [PixelFormat::Grey, PixelFormat::Yuyv] {
        layouts.push(FrameLayout {
            stride: format.row_bytes(641) as u32 + 64,
            ..FrameLayout::packed(format, 641, 479)
        });
    }
    layouts
        .into_iter()
        .enumerate()
        .map(|(i, layout)| {
            let mut frame: Vec<u8> = (0..layout.frame_bytes())
                .map(|_| rng.next() as u8)
                .collect();
            let smooth = frame.len() / 3;
            for (j, b) in frame[..smooth].iter_mut().enumerate() {
                *b = (j / 7 % 256) as u8;
            }
            let options = PipelineOptions {
                border: Border::ALL[i % Border::ALL.len()],
                magnitude: [Magnitude::L1, Magnitude::L2][i / 3 % 2],
                edge_threshold: 1 + rng.below(255) as u8,
            };
            let regions = (0..3)
                .map(|r| {
                    let x = rng.below(u64::from(layout.width)) as u32;
                    let y = rng.below(u64::from(layout.height)) as u32;
                    Region {
                        name: format!("r{r}"),
                        x,
                        y,
                        width: 1 + rng.below(u64::from(layout.width - x)) as u32,
                        height: 1 + rng.below(u64::from(layout.height - y)) as u32,
                    }
                })
                .collect();
            Case {
                layout,
                options,
                regions,
                frame,
            }
        })
        .collect()
}

/// Runs every case through the pipeline on `gpu` with each of `tunings`, the full images
/// discarded (as the daemon runs) and, for every third case, kept (as `process --raw`
/// does: other kernels), and motion's scenes ([`motion`]); compares every output with the
/// reference.
pub fn run(
    gpu: &Gpu,
    cases: &[Case],
    tunings: &[Tuning],
    mut progress: impl FnMut(&Tuning, usize, usize),
) -> Result<Findings, PipelineError> {
    let expected: Vec<Expected> = cases
        .iter()
        .map(|c| Expected::of(&c.layout, c.options, &c.frame))
        .collect();
    let mut findings = Findings::default();
    for tuning in tunings {
        for (i, (case, expected)) in cases.iter().zip(&expected).enumerate() {
            progress(tuning, i, cases.len());
            for images in [FullImages::Discarded, FullImages::Kept] {
                if images == FullImages::Kept && i % 3 != 0 {
                    continue;
                }
                let setup = Setup {
                    tuning: *tuning,
                    images,
                };
                check_case(gpu, case, expected, setup, &mut findings)?;
            }
        }
        motion::check(gpu, *tuning, &mut findings)?;
    }
    Ok(findings)
}

/// A case's label with its setup.
struct Labelled<'a>(&'a Case, Setup);

impl fmt::Display for Labelled<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let images = match self.1.images {
            FullImages::Kept => "full images kept",
            FullImages::Discarded => "full images discarded",
        };
        write!(f, "{}, {} tuning, {images}", self.0, self.1.tuning.name())
    }
}

fn check_case(
    gpu: &Gpu,
    case: &Case,
    expected: &Expected,
    setup: Setup,
    findings: &mut Findings,
) -> Result<(), PipelineError> {
    let mut pipeline = Pipeline::with_setup(gpu, case.layout, case.options, &case.regions, setup)?;
    pipeline.set_health_grid(gpu, Some(health::GRID))?;
    let mut slot = pipeline.new_slot(gpu)?;
    slot.write_bytes(gpu, &case.frame)?;
    let label = Labelled(case, setup);
    let result = match pipeline.process(gpu, &slot) {
        Err(e) if findings.impossible(&e, &label) => return Ok(()),
        processed => processed?,
    };
    let pictures = result.read_pictures(gpu)?;
    compare_frame(
        findings,
        &label,
        expected,
        &result,
        &pictures,
        &case.regions,
    );
    if setup.images == FullImages::Kept {
        let images = result.read_images(gpu)?;
        let e = expected;
        let (w, h) = (e.width as usize, e.height as usize);
        findings.image("sobel", "dx", &label, w, &images.dx, &e.dx);
        findings.image("sobel", "dy", &label, w, &images.dy, &e.dy);
        findings.image("sobel", "edge mask", &label, w, &images.edges, &e.edges);
        findings.image(
            "otsu",
            "kept mask",
            &label,
            w,
            &images.pictures.mask,
            &e.mask,
        );
        let (sum, sqsum) = reference::integral(&e.luma, w, h);
        findings.image("integral", "sum", &label, w + 1, &images.integral_sum, &sum);
        findings.image(
            "integral",
            "squares",
            &label,
            w + 1,
            &images.integral_sqsum,
            &sqsum,
        );
        let counts = [
            ("edge counts", &images.integral_edges, &e.edges),
            ("foreground counts", &images.integral_foreground, &e.mask),
        ];
        for (what, got, of) in counts {
            let want = reference::integral_count(of, w, h);
            findings.image("integral", what, &label, w + 1, got, &want);
        }
    }
    let broken = pipeline.broken_guards(gpu)?;
    findings.value(
        "integral",
        "guard bands after the outputs",
        &label,
        broken,
        vec![],
    );
    Ok(())
}

/// Compares one processed frame with what the reference made of it: luma, magnitude, the
/// histograms, Otsu's threshold and mask, the frame's, the regions' and the health cells'
/// sums. What the daemon reads back of every frame, so also what `verify_every` checks.
pub fn compare_frame(
    findings: &mut Findings,
    case: &dyn fmt::Display,
    e: &Expected,
    result: &FrameResult,
    pictures: &Pictures,
    regions: &[Region],
) {
    let w = e.width as usize;
    findings.image("luma", "luma", case, w, &pictures.luma, &e.luma);
    findings.image(
        "sobel",
        "magnitude",
        case,
        w,
        &pictures.magnitude,
        &e.magnitude,
    );
    let hist = &result.histogram;
    findings.bins("histogram", "luma histogram", case, hist, &e.histogram);
    if result.gradient_sampled {
        let gradient = reference::histogram(&e.magnitude);
        let got = &result.gradient_histogram;
        findings.bins("histogram", "gradient histogram", case, got, &gradient);
    }
    findings.value(
        "otsu",
        "threshold",
        case,
        result.otsu_threshold,
        e.threshold,
    );
    findings.image("otsu", "mask", case, w, &pictures.mask, &e.mask);

    let planes = reference::Planes {
        luma: &e.luma,
        edges: &e.edges,
        foreground: &e.mask,
        width: w,
    };
    let whole = Region {
        name: "(whole frame)".into(),
        x: 0,
        y: 0,
        width: e.width,
        height: e.height,
    };
    let mut measured = vec![(&whole, &result.frame)];
    measured.extend(regions.iter().zip(result.regions.iter().map(|(_, s)| s)));
    let cells = if result.cells.is_empty() {
        Vec::new()
    } else {
        region::grid(e.width, e.height, health::GRID.0, health::GRID.1)
    };
    measured.extend(cells.iter().zip(&result.cells));
    findings.value(
        "regions",
        "regions measured",
        case,
        result.regions.len() + result.cells.len(),
        regions.len() + cells.len(),
    );
    for (region, stats) in measured {
        let want: RegionStats = reference::region_sums(&planes, region);
        let what = format!("region '{}' sums", region.name);
        // The moving pixels depend on the frames before this one (the learned
        // background): `motion` checks them over a scene of frames.
        let stats = RegionStats {
            motion: 0,
            ..*stats
        };
        findings.value("regions", &what, case, stats, want);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cl::scribble;

    use crate::cl::scribble::Reads;

    fn garbage(what: Reads) -> Findings {
        let gpu = crate::cl::test_gpu();
        let cases = cases();
        let tunings: Vec<Tuning> = Tuning::ALL.iter().map(|(_, t)| *t).collect();
        scribble::on(0x6a5b_a6e5, what);
        let findings = run(&gpu, &cases[..4], &tunings, |_, _, _| {});
        scribble::off();
        findings.expect("garbage is a finding, not an error")
    }

    /// A driver that hands back garbage for everything read from it ends selftest in a
    /// table of mismatches, never a panic or an error: its results are impossible, so
    /// each frame is a mismatch of the stage whose results are checked first.
    #[test]
    fn a_device_writing_garbage_everywhere_is_a_table_of_mismatches() {
        let findings = garbage(Reads::All);
        assert!(!findings.passed());
        let s = &findings.stages["histogram"];
        assert!(s.mismatches > 0, "{s:?}");
        let first = s.first_mismatch.as_deref().unwrap_or_default();
        assert!(first.starts_with("the luma histogram counts "), "{first}");
    }

    /// A driver whose small results are right but whose images are garbage: the stages
    /// whose images are compared mismatch (luma, magnitude, Otsu's mask, the integral
    /// images kept, motion's background), the histograms, threshold and sums match.
    #[test]
    fn a_device_writing_garbage_images_is_a_mismatch_of_each_stage_that_wrote_one() {
        let findings = garbage(Reads::Images);
        for stage in ["luma", "sobel", "otsu", "integral", "motion"] {
            let s = &findings.stages[stage];
            assert!(s.mismatches > 0, "{stage}: {s:?}");
        }
        for stage in ["histogram", "regions"] {
            let s = &findings.stages[stage];
            assert_eq!(s.mismatches, 0, "{stage}: {s:?}");
        }
    }

    /// What `selftest --json` writes of the checks: every stage, each with its counts and
    /// its first difference, the mismatches of garbage images among them.
    #[test]
    fn a_device_writing_garbage_images_is_a_mismatch_in_the_json() {
        let findings = garbage(Reads::Images);
        let json = serde_json::to_value(findings.every_stage()).expect("json");
        assert_eq!(
            json.as_object().map(|o| o.len()),
            Some(STAGES.len()),
            "{json}"
        );
        for stage in STAGES {
            let s = &findings.stages[stage];
            assert_eq!(json[stage]["checks"], s.checks, "{stage}");
            assert_eq!(json[stage]["mismatches"], s.mismatches, "{stage}");
        }
        assert!(json["luma"]["mismatches"].as_u64() > Some(0), "{json}");
        assert_eq!(json["histogram"]["mismatches"], 0);
        assert_eq!(json["histogram"]["first_mismatch"], serde_json::Value::Null);
        let first = json["luma"]["first_mismatch"].as_str().unwrap_or_default();
        assert!(first.starts_with("luma, "), "{first}");
        // A stage no check reached is listed with none.
        assert_eq!(
            Findings::default().every_stage()["motion"],
            StageResult::default()
        );
    }
}
